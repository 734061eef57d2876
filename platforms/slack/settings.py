"""Slack configuration from the environment, with errors that name what is missing.

``SLACK_BOT_TOKEN`` posts and updates messages. Interactions arrive either over Socket Mode
(``SLACK_APP_TOKEN``, an ``xapp-`` token) or over HTTP (``SLACK_SIGNING_SECRET`` verifies each
request). ``SLACK_API_URL`` points the Web API client elsewhere (GovSlack, a proxy, a test fake).
Like the engine settings (:mod:`bridge.settings`), values may also come from a ``.env`` file in the
working directory; the environment wins over it.
"""

from __future__ import annotations

from pydantic import SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bridge.platform import PlatformUnavailable

DEFAULT_API_URL = "https://slack.com/api/"


class SlackSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SLACK_", env_file=".env", extra="ignore")

    bot_token: SecretStr | None = None
    signing_secret: SecretStr | None = None
    app_token: SecretStr | None = None
    api_url: str = DEFAULT_API_URL

    @field_validator("api_url")
    @classmethod
    def _trailing_slash(cls, value: str) -> str:
        """slack_sdk joins ``base_url + method``: without the slash the method name is mangled."""
        return value if value.endswith("/") else value + "/"

    @property
    def socket_mode(self) -> bool:
        """``SLACK_APP_TOKEN`` is set to something (an empty line in ``.env`` is not)."""
        return self.app_token is not None and bool(self.app_token.get_secret_value().strip())

    def bot(self) -> str:
        return _need(self.bot_token, "SLACK_BOT_TOKEN", "to post questions")

    def app(self) -> str:
        return _need(self.app_token, "SLACK_APP_TOKEN", "for Socket Mode (an xapp- token)")

    def signing(self) -> str:
        return _need(
            self.signing_secret,
            "SLACK_SIGNING_SECRET",
            "to verify HTTP interactions (or set SLACK_APP_TOKEN for Socket Mode)",
        )


def _need(value: SecretStr | None, name: str, why: str) -> str:
    if value is None or not value.get_secret_value().strip():
        raise PlatformUnavailable(f"Slack is not configured: set {name} {why}")
    return value.get_secret_value()


def load_settings() -> SlackSettings:
    """Read the environment; a malformed value is reported as ``PlatformUnavailable``."""
    try:
        return SlackSettings()
    except ValidationError as exc:
        raise PlatformUnavailable(f"Slack settings are invalid: {exc}") from exc
