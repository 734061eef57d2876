"""The deploy kit stays honest (no Docker engine here): the Kubernetes manifests validate against
the schemas, and the kit matches the code -- every variable it sets is one the settings read,
.env.example lists every one (and compose's own), ports and probe paths are the server's, the
entrypoint exists -- and its Redis, in compose and in Kubernetes, keeps pending asks: AOF,
noeviction, a password the bridge's REDIS_URL carries, one pinned image."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from pydantic_settings import BaseSettings

from bridge.cli import build_parser
from bridge.http_server import HEALTH_PATH, METRICS_PATH, READY_PATH
from bridge.identities import IdentitySettings
from bridge.logs import LogSettings
from bridge.settings import ChatRouteSettings, EngineSettings
from bridge.web_links import WebSettings
from bridge.webhook_settings import WebhookSettings
from platforms.discord.client import REACH_SECONDS as DISCORD_REACH_SECONDS
from platforms.discord.settings import DiscordSettings
from platforms.slack.credentials import REACH_SECONDS as SLACK_REACH_SECONDS
from platforms.slack.settings import SlackSettings

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
PORT = 3000
COMPOSE = (DEPLOY / "compose.yaml").read_text()
COMPOSE_VARIABLES = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", COMPOSE))
"""What compose itself interpolates from deploy/.env (its Redis password), not a bridge setting."""
PINNED_REDIS = re.compile(r"^redis:\d+\.\d+\.\d+-alpine$")


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
            *(SlackSettings, DiscordSettings, WebSettings),
        ],
    )
)


def documents() -> list[dict[str, Any]]:
    return [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]


def document(kind: str, name: str) -> dict[str, Any]:
    return next(d for d in documents() if d["kind"] == kind and d["metadata"]["name"] == name)


def deployment() -> dict[str, Any]:
    return document("Deployment", "ask-bridge")


def options(command: list[str]) -> dict[str, str]:
    """A ``redis-server --name value ...`` command line's options, by name."""
    return dict(zip(command[1::2], command[2::2], strict=True))


def megabytes(size: str) -> float:
    """Redis's ``400mb`` (MiB, as Redis counts) or Kubernetes' ``512Mi``, in MiB."""
    number, unit = re.fullmatch(r"(\d+)(mb|Mi|gb|Gi)", size).groups()  # type: ignore[union-attr]
    return int(number) * (1024 if unit in ("gb", "Gi") else 1)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifests_validate_against_the_kubernetes_schemas(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        kubernetes_validate.validate(doc, "1.30.0", strict=True)


def test_env_example_lists_every_setting_and_nothing_else() -> None:
    text = (DEPLOY / ".env.example").read_text()
    listed = re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", text, flags=re.M)
    assert len(listed) == len(set(listed))
    assert COMPOSE_VARIABLES == {"REDIS_PASSWORD"} and not COMPOSE_VARIABLES & SETTINGS
    assert set(listed) == SETTINGS | COMPOSE_VARIABLES
    for name in listed:  # each has a comment line just above it
        before = text.split(f"{name}=")[0].rstrip("# ").splitlines()[-1]
        assert before.startswith("#"), name


def test_the_kit_sets_only_variables_the_settings_read() -> None:
    container = deployment()["spec"]["template"]["spec"]["containers"][0]
    k8s = {e["name"] for e in container["env"]}
    compose = yaml.safe_load(COMPOSE)
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
    # The server listens once the tokens are checked, each check retrying an API that does not
    # answer (Slack's bot and app tokens, Discord's login): the start-up probe waits that long.
    startup = container["startupProbe"]
    assert startup["httpGet"]["path"] == HEALTH_PATH
    budget = startup["periodSeconds"] * startup["failureThreshold"]
    assert budget > 2 * SLACK_REACH_SECONDS + DISCORD_REACH_SECONDS
    assert "initialDelaySeconds" not in container["livenessProbe"]  # the start-up probe gates it
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

    service = document("Service", "ask-bridge")
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert service["spec"]["selector"] == deployment()["spec"]["selector"]["matchLabels"]
    pdb = next(d for d in documents() if d["kind"] == "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]


def test_replicas_prefer_different_nodes() -> None:
    spec = deployment()["spec"]
    (term,) = spec["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    placement = term["podAffinityTerm"]
    assert placement["topologyKey"] == "kubernetes.io/hostname"
    assert placement["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()


def test_compose_keeps_pending_asks_two_replicas_and_the_image_port() -> None:
    compose = yaml.safe_load(COMPOSE)
    redis = compose["services"]["redis"]
    flags = options(redis["command"])
    assert flags["--appendonly"] == "yes" and flags["--maxmemory-policy"] == "noeviction"
    assert PINNED_REDIS.match(redis["image"])
    # One password: what Redis requires is what the bridge's URL and the health check carry.
    password = flags["--requirepass"]
    assert password.startswith("${REDIS_PASSWORD:?")  # compose refuses to start without it
    assert redis["environment"]["REDISCLI_AUTH"] == password
    assert "redis-cli" in " ".join(redis["healthcheck"]["test"]) and password not in str(
        redis["healthcheck"]
    )
    bridge = compose["services"]["bridge"]
    assert bridge["environment"]["REDIS_URL"] == f"redis://:{password}@redis:6379/0"
    assert bridge["deploy"]["replicas"] == 2
    assert all(p.endswith(f":{PORT}") for p in bridge["ports"])
    assert bridge["build"]["dockerfile"] == "deploy/Dockerfile"
    assert (DEPLOY / bridge["build"]["context"] / bridge["build"]["dockerfile"]).exists()


def test_the_kubernetes_redis_keeps_pending_asks_behind_the_bridges_password() -> None:
    service = document("Service", "ask-bridge-redis")
    redis = document("StatefulSet", "ask-bridge-redis")
    pod = redis["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    flags = options(container["command"] + container["args"])
    assert flags["--appendonly"] == "yes" and flags["--appendfsync"] == "everysec"
    assert flags["--maxmemory-policy"] == "noeviction"
    # maxmemory leaves room under the container's limit for an AOF rewrite's copy
    limit = megabytes(container["resources"]["limits"]["memory"])
    assert megabytes(flags["--maxmemory"]) <= 0.8 * limit

    # The password comes from a Secret into the command line ($(VAR) is expanded by Kubernetes)
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert flags["--requirepass"] == "$(REDIS_PASSWORD)"
    assert env["REDIS_PASSWORD"] == env["REDISCLI_AUTH"]  # the probes' redis-cli uses the same
    secret = document("Secret", env["REDIS_PASSWORD"]["name"])
    password = secret["stringData"][env["REDIS_PASSWORD"]["key"]]

    # The data directory is the claimed volume's mount
    (claim,) = redis["spec"]["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == flags["--dir"]
    assert claim["spec"]["resources"]["requests"]["storage"]

    # Reached as the bridge's Secret says: the Service's name, port and the same password
    assert redis["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["selector"] == redis["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert container["ports"] == [{"name": port["targetPort"], "containerPort": 6379}]
    url = urlsplit(document("Secret", "ask-bridge")["stringData"]["REDIS_URL"])
    assert (url.hostname, url.port, url.password) == (service["metadata"]["name"], 6379, password)

    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert "redis-cli ping" in " ".join(container[probe]["exec"]["command"])
    compose = yaml.safe_load(COMPOSE)
    assert container["image"] == compose["services"]["redis"]["image"]  # one Redis in the kit
    assert PINNED_REDIS.match(container["image"])
