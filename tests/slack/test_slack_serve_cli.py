"""``ask-bridge serve`` as an OS process: what it tells the operator at start."""

from __future__ import annotations

from fake_slack import BOT_TOKEN, FakeSlack
from payloads import SIGNING_SECRET
from procs import Serve, cli_env
from redis_server import RedisServer


async def test_serve_without_redis_url_warns_that_its_store_is_empty(fake: FakeSlack) -> None:
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url
    )
    serve = await Serve(env).start()
    await serve.stop()
    (warning,) = [line for line in serve.log if "REDIS_URL is not set" in line]
    assert "WARNING" in warning and "in-memory store" in warning and "no longer open" in warning
    ready = next(i for i, line in enumerate(serve.log) if "ready" in line)
    assert serve.log.index(warning) < ready  # said at start, before serving
    (where,) = [line for line in serve.log if serve.url in line]  # the bound address, logged
    assert "INFO" in where and serve.log.index(where) < ready


async def test_serve_with_redis_url_does_not_warn(fake: FakeSlack, redis_srv: RedisServer) -> None:
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=fake.url,
        REDIS_URL=redis_srv.url,
    )
    serve = await Serve(env).start()
    await serve.stop()
    assert not [line for line in serve.log if "REDIS_URL" in line]
