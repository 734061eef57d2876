"""A permission refusal is told as one, in one line, whichever Redis words it: valkey and Redis
7.2+ name what was refused; Redis 7.0 and 7.1 (Debian 12's, a common deployment) refuse a command
inside a script without naming it. The texts are the servers' own, taken from real refusals."""

from __future__ import annotations

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from bridge.redis_acl import refusal

_SHA = "44a1d1fa082a2d78f42bc63155425f40b815a824"


@pytest.mark.parametrize(
    ("said", "named"),
    [
        (
            "ACL failure in script: User u has no permissions to run the 'xadd' command script: "
            f"{_SHA}, on @user_script:1.",
            "Redis refused the command XADD to this user",
        ),
        (
            f"The user executing the script can't run this command or subcommand script: {_SHA}, "
            "on @user_script:1.",
            "Redis refused a command inside a script to this user",
        ),
        (
            "The user executing the script can't access at least one of the keys mentioned in "
            f"the command script: {_SHA}, on @user_script:1.",
            "Redis refused a key inside a script to this user",
        ),
        (
            "The user executing the script can't publish to the channel mentioned in the "
            f"command script: {_SHA}, on @user_script:1.",
            "Redis refused a channel inside a script to this user",
        ),
    ],
)
def test_a_refusal_is_told_as_a_permission_problem_whoever_words_it(said: str, named: str) -> None:
    told = refusal(ResponseError(said))
    assert told is not None
    assert told.startswith(f"{named}: a permission (ACL) problem, not an outage (")
    assert "\n" not in told
    assert "@user_script" not in told


def test_other_failures_are_no_refusal() -> None:
    wrong = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    assert refusal(wrong) is None
    assert refusal(RedisConnectionError("Connection refused")) is None
