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


def test_one_client_per_token_and_url_read_fresh_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Posters and the receiver share one Web API client while the token and URL stay; a new
    token (rotated) or URL gets a new one, and a change elsewhere keeps it."""
    from platforms.slack import SlackPlatform

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-first")
    platform = SlackPlatform()
    first = platform.client
    assert platform.client is first
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "another-secret")
    assert platform.client is first
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-rotated")
    rotated = platform.client
    assert rotated is not first and platform.client is rotated
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:9/api/")
    assert platform.client is not rotated
