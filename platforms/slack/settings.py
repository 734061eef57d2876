"""Slack configuration from the environment, with errors that name what is missing.

``SLACK_BOT_TOKEN`` posts and updates messages. Interactions arrive either over Socket Mode
(``SLACK_APP_TOKEN``, an ``xapp-`` token) or over HTTP (``SLACK_SIGNING_SECRET`` verifies each
request). ``SLACK_API_URL`` points the Web API client elsewhere (GovSlack, a proxy, a test fake).
Like the engine settings (:mod:`bridge.settings`), values may also come from a ``.env`` file in the
working directory; the environment wins over it.

A token of the wrong kind (a user token, the app-level token in the bot's place, a stray space) is
refused as the settings are read, naming the variable and the token to set: Slack would refuse it
too, but only after a network round trip -- or, unreachable, after retrying for seconds.
"""

from __future__ import annotations

from pydantic import SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bridge.platform import PlatformUnavailable
from bridge.settings_error import one_word, problems, spaced

DEFAULT_API_URL = "https://slack.com/api/"
BOT_TOKEN_PREFIXES = ("xoxb-", "xoxe.xoxb-")
"""A bot token, as issued or as rotated (Slack's token rotation prefixes ``xoxe.``)."""
BOT_TOKEN_WHERE = "the app's Bot User OAuth Token (xoxb-), under OAuth & Permissions"
APP_TOKEN_WHERE = (
    "Socket Mode needs an app-level token (xapp-) with the connections:write scope, under Basic "
    "Information > App-Level Tokens"
)


def token_problem(variable: str, value: SecretStr | None) -> str | None:
    """What is certainly wrong with ``value`` as ``variable`` (``SLACK_BOT_TOKEN`` or
    ``SLACK_APP_TOKEN``), without showing it; ``None`` when it may be right, or is unset (blank:
    a copied ``.env.example`` line)."""
    token = value.get_secret_value() if value is not None else ""
    if not token.strip():
        return None
    if spaced(token):
        return f"{variable} has a space or line break in it: set it to the token alone"
    if variable == "SLACK_APP_TOKEN":
        if token.startswith("xapp-"):
            return None
        kind = (
            "the bot token (xoxb-), which belongs in SLACK_BOT_TOKEN"
            if token.startswith(BOT_TOKEN_PREFIXES)
            else "not an app-level token"
        )
        return f"SLACK_APP_TOKEN is {kind}: {APP_TOKEN_WHERE}"
    if token.startswith(BOT_TOKEN_PREFIXES):
        return None
    if token.startswith("xoxp-"):
        kind = "a user token (xoxp-), which posts as the person who installed the app"
    elif token.startswith("xapp-"):
        kind = "the app-level token (xapp-), which belongs in SLACK_APP_TOKEN"
    else:
        kind = "not a Slack bot token"
    return f"SLACK_BOT_TOKEN is {kind}: set {BOT_TOKEN_WHERE}"


class SlackSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SLACK_", env_file=".env", extra="ignore")

    bot_token: SecretStr | None = None
    signing_secret: SecretStr | None = None
    app_token: SecretStr | None = None
    api_url: str = DEFAULT_API_URL

    @field_validator("bot_token", "app_token")
    @classmethod
    def _token_shape(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        problem = token_problem(f"SLACK_{(info.field_name or '').upper()}", value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("signing_secret")
    @classmethod
    def _signing_secret(cls, value: SecretStr | None) -> SecretStr | None:
        return one_word(
            value,
            "SLACK_SIGNING_SECRET has a space or line break in it: set it to the secret alone",
        )

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
    """Read the environment; a malformed value is reported as ``PlatformUnavailable``, in one
    line that never holds a token (pydantic's own report would show the value)."""
    try:
        return SlackSettings()
    except ValidationError as exc:
        raise PlatformUnavailable(f"Slack settings are invalid: {problems(exc)}") from None
