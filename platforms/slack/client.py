"""The Web API client: configurable base URL, rate-limit retries, and no duplicate posts.

A 429 means Slack did nothing, so every call may be retried after ``Retry-After``. A dropped
connection is different: the request may have been applied. Re-sending ``chat.update`` or
``views.update`` is harmless, but re-sending ``chat.postMessage`` would post the question set twice
and ``chat.postEphemeral`` would repeat an explanation -- so connection errors are retried for
every method except those two (:data:`NOT_IDEMPOTENT`).
"""

from __future__ import annotations

from typing import Any

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

from bridge import metrics

NOT_IDEMPOTENT = ("chat.postMessage", "chat.postEphemeral")


class IdempotentConnectionRetry(AsyncConnectionErrorRetryHandler):
    """Retry connection errors only for calls that are safe to apply twice."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if request.url.rstrip("/").endswith(NOT_IDEMPOTENT):
            return False
        return await super()._can_retry_async(
            state=state, request=request, response=response, error=error
        )


class CountedRateLimitRetry(AsyncRateLimitErrorRetryHandler):
    """Slack's 429 retry, counted (``ask_bridge_platform_errors_total{kind="ratelimited"}``)."""

    async def prepare_for_next_attempt_async(self, **kwargs: Any) -> None:
        metrics.platform_error("slack", "ratelimited")
        await super().prepare_for_next_attempt_async(**kwargs)


def make_client(token: str, base_url: str, *, rate_limit_retries: int = 3) -> AsyncWebClient:
    handlers: list[AsyncRetryHandler] = [
        IdempotentConnectionRetry(max_retry_count=1),
        CountedRateLimitRetry(max_retry_count=rate_limit_retries),
    ]
    return AsyncWebClient(token=token, base_url=base_url, retry_handlers=handlers)
