"""The deploy kit stays honest (no Docker engine here): the Kubernetes manifests validate against
the schemas, and the kit matches the code -- every variable it sets is one the settings read,
.env.example lists every one, ports and probe paths are the server's, the entrypoint exists."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic_settings import BaseSettings

from bridge.cli import build_parser
from bridge.http_server import HEALTH_PATH, METRICS_PATH, READY_PATH
from bridge.identities import IdentitySettings
from bridge.logs import LogSettings
from bridge.settings import ChatRouteSettings, EngineSettings
from bridge.webhooks import WebhookSettings
from platforms.discord.settings import DiscordSettings
from platforms.slack.settings import SlackSettings

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
PORT = 3000


def variables(cls: type[BaseSettings]) -> set[str]:
    prefix = str(cls.model_config.get("env_prefix") or "")
    names = set()
    for name, field in cls.model_fields.items():
        alias = field.validation_alias
        names.add(str(alias) if isinstance(alias, str) else (prefix + name).upper())
    return names


SETTINGS = set().union(
    *map(
        variables,
        [
            *(EngineSettings, ChatRouteSettings, WebhookSettings, LogSettings, IdentitySettings),
            *(SlackSettings, DiscordSettings),
        ],
    )
)


def documents() -> list[dict[str, Any]]:
    return [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]


def deployment() -> dict[str, Any]:
    return next(d for d in documents() if d["kind"] == "Deployment")


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifests_validate_against_the_kubernetes_schemas(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        kubernetes_validate.validate(doc, "1.30.0", strict=True)


def test_env_example_lists_every_setting_and_nothing_else() -> None:
    text = (DEPLOY / ".env.example").read_text()
    listed = re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", text, flags=re.M)
    assert len(listed) == len(set(listed))
    assert set(listed) == SETTINGS
    for name in listed:  # each has a comment line just above it
        before = text.split(f"{name}=")[0].rstrip("# ").splitlines()[-1]
        assert before.startswith("#"), name


def test_the_kit_sets_only_variables_the_settings_read() -> None:
    container = deployment()["spec"]["template"]["spec"]["containers"][0]
    k8s = {e["name"] for e in container["env"]}
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    composed = set(compose["services"]["bridge"]["environment"])
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    docker = set(
        re.findall(r"\b([A-Z][A-Z0-9_]+)=", " ".join(re.findall(r"^ENV (.*)$", dockerfile, re.M)))
    )
    python = {n for n in docker if n.startswith("PYTHON")}
    assert k8s <= SETTINGS and composed <= SETTINGS and docker - python <= SETTINGS
    for env in container["env"]:  # secrets by reference, never inline
        if "TOKEN" in env["name"] or "SECRET" in env["name"] or env["name"] == "REDIS_URL":
            assert "secretKeyRef" in env["valueFrom"], env["name"]


def test_ports_probes_and_entrypoint_match_the_code() -> None:
    spec = deployment()["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["ports"] == [{"name": "http", "containerPort": PORT}]
    assert container["livenessProbe"]["httpGet"]["path"] == HEALTH_PATH
    assert container["readinessProbe"]["httpGet"]["path"] == READY_PATH
    annotations = deployment()["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] == METRICS_PATH
    assert annotations["prometheus.io/port"] == str(PORT)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["resources"]["requests"]
    assert deployment()["spec"]["replicas"] == 2

    parser = build_parser()
    command = container["command"] + container["args"]
    assert command[0] == "ask-bridge"
    args = parser.parse_args(command[1:])
    assert args.command == "serve" and args.port == PORT and args.host == "0.0.0.0"

    dockerfile = (DEPLOY / "Dockerfile").read_text()
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", dockerfile, re.M).group(1))  # type: ignore[union-attr]
    assert cmd == command
    assert f"EXPOSE {PORT}" in dockerfile
    healthcheck = re.search(r"^HEALTHCHECK .*?CMD (\[.*\])$", dockerfile, re.M | re.S)
    assert healthcheck is not None and f"127.0.0.1:{PORT}{HEALTH_PATH}" in healthcheck.group(1)
    assert re.search(r"^USER 10001$", dockerfile, re.M)  # the runAsUser of the Deployment

    service = next(d for d in documents() if d["kind"] == "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert service["spec"]["selector"] == deployment()["spec"]["selector"]["matchLabels"]
    pdb = next(d for d in documents() if d["kind"] == "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]


def test_compose_keeps_pending_asks_two_replicas_and_the_image_port() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    redis = " ".join(compose["services"]["redis"]["command"])
    assert "--appendonly yes" in redis and "--maxmemory-policy noeviction" in redis
    bridge = compose["services"]["bridge"]
    assert bridge["deploy"]["replicas"] == 2
    assert all(p.endswith(f":{PORT}") for p in bridge["ports"])
    assert bridge["build"]["dockerfile"] == "deploy/Dockerfile"
    assert (DEPLOY / bridge["build"]["context"] / bridge["build"]["dockerfile"]).exists()
