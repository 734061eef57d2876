"""Engine settings: a bad value is refused at start with one line naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.settings import EngineSettings, SettingsError

ASK_BRIDGE = str(Path(sys.executable).with_name("ask-bridge"))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ``.env`` file and no engine variables from the caller's environment."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(("ASK_BRIDGE_", "REDIS_")):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("prefix", ["askbridge", "team-a:prod.v2_x", "x", "p" * 64])
def test_plain_key_prefixes_are_accepted(monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    monkeypatch.setenv("ASK_BRIDGE_KEY_PREFIX", prefix)
    assert EngineSettings().key_prefix == prefix


@pytest.mark.parametrize(
    "prefix",
    ["{askbridge}", "ask{x", "ask}x", "", "p" * 65, "a b", "ask\nbridge", "préfixe", "a/b"],
)
def test_other_key_prefixes_are_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    monkeypatch.setenv("ASK_BRIDGE_KEY_PREFIX", prefix)
    with pytest.raises(SettingsError) as info:
        EngineSettings()
    message = str(info.value)
    assert message.startswith("invalid setting ASK_BRIDGE_KEY_PREFIX: ")
    assert "1 to 64 of the characters A-Z a-z 0-9 _ . : -" in message
    assert "\n" not in message


def test_other_bad_settings_are_one_line_too_and_never_show_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASK_BRIDGE_RETENTION", "-1")
    monkeypatch.setenv("REDIS_MAX_CONNECTIONS", "s3cret")
    with pytest.raises(SettingsError) as info:
        EngineSettings()
    message = str(info.value)
    assert "ASK_BRIDGE_RETENTION: Input should be greater than 0" in message
    assert "REDIS_MAX_CONNECTIONS: " in message
    assert "s3cret" not in message and "\n" not in message


def test_a_command_stops_at_start_with_the_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASK_BRIDGE_", "REDIS_"))}
    done = subprocess.run(
        [ASK_BRIDGE, "list"],
        env={**env, "ASK_BRIDGE_KEY_PREFIX": "{all}"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1  # a configuration failure, as in every command
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("ask-bridge list: invalid setting ASK_BRIDGE_KEY_PREFIX: '{all}'")
