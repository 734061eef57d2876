"""A bench run against ``REDIS_URL`` (``bench.engine_common.server_url``) talks only to this
machine: another host is refused in one line before any connection is made (this suite's
socket guard would fail the test first otherwise), and a Redis that does not answer is named in
one line too, not a traceback."""

from __future__ import annotations

import pytest

from bench import engine_common
from bench.engine_common import checked_redis_url, server_url
from tests.support.redis_server import RedisServer, free_port

ELSEWHERE = (
    "the benches talk only to this machine (a Redis on 127.0.0.1, ::1, localhost or a Unix socket)"
)


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("redis://10.1.2.3:6379", "10.1.2.3"),
        ("rediss://u:secret@redis.example.com:6380/0", "redis.example.com"),
        ("redis+sentinel://127.0.0.1:26379,10.0.0.9:26379/mymaster", "10.0.0.9"),
        ("redis://[2001:db8::1]:6379", "2001:db8::1"),
    ],
)
def test_another_host_is_refused_before_any_connection(
    url: str, named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tried: list[str] = []

    async def probe(url: str, **_: object) -> None:
        tried.append(url)

    monkeypatch.setattr(engine_common, "probe", probe)
    with pytest.raises(SystemExit) as refused:
        checked_redis_url(url)
    assert tried == []  # the only connection it makes: never for another host
    line = str(refused.value.code)
    assert line.endswith(f"names {named}: {ELSEWHERE}")
    assert "secret" not in line and "\n" not in line


def test_a_redis_that_does_not_answer_is_named_in_one_line() -> None:
    url = f"redis://127.0.0.1:{free_port()}"
    with pytest.raises(SystemExit) as refused:
        checked_redis_url(url)
    line = str(refused.value.code)
    assert line.startswith(f"cannot reach Redis at REDIS_URL={url}: ") and "\n" not in line


def test_a_local_redis_that_answers_is_used(
    standalone: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert checked_redis_url(standalone.url) == standalone.url
    assert checked_redis_url(standalone.url.replace("127.0.0.1", "localhost")).startswith(
        "redis://localhost:"
    )
    monkeypatch.setenv("REDIS_URL", standalone.url)
    with server_url() as url:
        assert url == standalone.url
