"""Discord configuration from the environment, with errors that name what is missing.

``DISCORD_TOKEN`` (the bot token) is required. ``DISCORD_API_URL`` is the REST base including the
API version (default Discord's own; large bots route REST through a proxy), ``DISCORD_GATEWAY_URL``
overrides the gateway websocket (resumes then go to the ``resume_gateway_url`` Discord sends).
``DISCORD_SHARDS``: unset runs one gateway connection (``discord.Client``); ``auto`` runs an
``AutoShardedClient`` with the shard count Discord recommends; a number runs that many shards, of
which ``DISCORD_SHARD_IDS`` (``0,1``) may pick the ones this process holds. The application id is
never configured: discord.py reads it from Discord at login. Like the engine settings, values may
also come from a ``.env`` file; the environment wins.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bridge.platform import PlatformUnavailable
from bridge.settings_error import one_word, problems, unset_if_blank

DEFAULT_API_URL = "https://discord.com/api/v10"


class DiscordSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DISCORD_", env_file=".env", extra="ignore")

    token: SecretStr | None = None
    api_url: str = DEFAULT_API_URL
    gateway_url: str | None = None
    shards: str | None = None
    shard_ids: str | None = None

    @field_validator("token")
    @classmethod
    def _token(cls, value: SecretStr | None) -> SecretStr | None:
        """A token with a space inside is certainly wrong -- most often "Bot " copied with it
        (discord.py adds that itself) -- and local: said now, not after Discord refused it."""
        return one_word(
            value,
            "DISCORD_TOKEN has a space in it: set the bot token alone (without 'Bot ')",
            trimmed=True,  # read stripped (bot_token)
        )

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        """discord.py appends paths starting with ``/`` to the base: no trailing slash."""
        value = value.strip().rstrip("/")
        if urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc:
            raise ValueError("DISCORD_API_URL must be an http(s) URL such as " + DEFAULT_API_URL)
        return value

    @field_validator("gateway_url")
    @classmethod
    def _gateway_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if urlsplit(value).scheme not in ("ws", "wss") or not urlsplit(value).netloc:
            raise ValueError("DISCORD_GATEWAY_URL must be a ws:// or wss:// URL")
        return value.strip()

    @field_validator("shards")
    @classmethod
    def _shards(cls, value: str | None) -> str | None:
        shards = (unset_if_blank(value) or "").lower()
        if shards and shards != "auto" and not (shards.isdigit() and int(shards) >= 1):
            raise ValueError("DISCORD_SHARDS must be 'auto' or a number of shards (1 or more)")
        return shards or None

    @model_validator(mode="after")
    def _shard_ids_fit(self) -> DiscordSettings:
        if self.shard_ids is not None and self.shard_ids.strip():
            count = self.shard_count
            if count is None:
                raise ValueError("DISCORD_SHARD_IDS needs DISCORD_SHARDS set to a number")
            ids = self.shard_id_list
            if not ids or any(i >= count for i in ids):
                raise ValueError(f"DISCORD_SHARD_IDS must list shard numbers from 0 to {count - 1}")
        return self

    @property
    def sharded(self) -> bool:
        """Whether to run an ``AutoShardedClient``."""
        return self.shards is not None

    @property
    def shard_count(self) -> int | None:
        """The configured number of shards; ``None`` for one connection or Discord's choice."""
        return int(self.shards) if self.shards is not None and self.shards.isdigit() else None

    @property
    def shard_id_list(self) -> list[int] | None:
        if self.shard_ids is None or not self.shard_ids.strip():
            return None
        parts = [p.strip() for p in self.shard_ids.split(",")]
        if not all(p.isdigit() for p in parts):
            return []
        return sorted({int(p) for p in parts})

    def bot_token(self) -> str:
        token = self.token.get_secret_value().strip() if self.token is not None else ""
        if not token:
            raise PlatformUnavailable("Discord is not configured: set DISCORD_TOKEN, the bot token")
        return token


def load_settings() -> DiscordSettings:
    """Read the environment; a malformed value is reported as ``PlatformUnavailable``."""
    try:
        return DiscordSettings()
    except ValidationError as exc:
        # from None: pydantic's report, chained to it, would show the token
        raise PlatformUnavailable(f"Discord settings are invalid: {problems(exc)}") from None
