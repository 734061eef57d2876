"""Slack settings come from the environment or a ``.env`` file, like the engine's settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from platforms.slack.settings import load_settings


def test_settings_load_from_a_dotenv_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "SLACK_API_URL"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".env").write_text(
        "SLACK_BOT_TOKEN=xoxb-from-dotenv\n"
        "SLACK_SIGNING_SECRET=secret-from-dotenv\n"
        "REDIS_URL=redis://127.0.0.1:1/0\n"  # the engine's key: ignored here, not an error
    )
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.bot() == "xoxb-from-dotenv"
    assert settings.signing() == "secret-from-dotenv"
    assert not settings.socket_mode


def test_environment_wins_over_the_dotenv_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("SLACK_BOT_TOKEN=xoxb-from-dotenv\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-env")
    assert load_settings().bot() == "xoxb-from-env"
