"""May the Redis user of ``REDIS_URL`` run every command the bridge sends? And when Redis refuses
one, say so as the permission problem it is.

A Redis user (an ACL) that lacks a command the bridge needs passes a connection check -- the
server answers -- and then every ask and every click fails: in ``serve`` a click was told the
store was unreachable, and nothing said why. So ``ask-bridge doctor`` and ``/readyz`` check each
command the bridge uses (:func:`needs`: the store's script and the commands that script calls,
for ACLs apply inside scripts too; the hash, sorted-set, stream and pub/sub commands the store
sends itself; on a Cluster the sharded pub/sub ones), with the key and channel names the bridge
uses, so key (``~``) and channel (``&``) rules are checked as well:

* with ``ACL DRYRUN <user> <command> ...`` (Redis 7 and later, valkey) when the user may run it,
  the user being the one ``ACL WHOAMI`` names;
* else by sending each command inside ``MULTI`` and then ``DISCARD``: a queued command is checked
  against the user's ACL when it is queued (a refusal comes back then), and nothing queued runs.
  A reply other than a refusal (a key of another Cluster node, a command the server does not
  know) counts as permitted: it is no ACL refusal.

:func:`refusal` turns Redis's refusal, wherever it surfaces (a command, a script's own call), into
one line naming the command, for the log of a click and the one-line failure of a command.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoPermissionError, ResponseError

NO_SCRIPT = "0" * 40
"""A script SHA nobody loaded: ``EVALSHA`` of it checks the permission and runs nothing."""
GROUP = "bridge"
"""A consumer group name for the stream commands (an ACL never restricts group names)."""
PROBE = "probe"
"""The ask id and consumer name in the checked commands' keys: ``<prefix>:{probe}:rec``, never
an ask's (ask ids are 22 characters)."""
KINDS = ("rec", "log", "lease", "noise", "wake")
"""The per-ask keys, in the order the scripts take them (``bridge/store/redis/lua/lib/header.lua``,
:meth:`Keys.ask_keys`)."""


@dataclass(frozen=True)
class Need:
    """One command the bridge sends: its words, a call of it (with the bridge's own key and
    channel names), and what the bridge uses it for."""

    command: str
    argv: tuple[str, ...]
    use: str

    @property
    def acl(self) -> str:
        """The command as an ACL names it: ``xgroup|create``."""
        return self.command.lower().replace(" ", "|")


def needs(prefix: str, *, cluster: bool) -> list[Need]:
    """Every command the bridge sends to Redis under key ``prefix`` (see :mod:`bridge.store.keys`
    for the key scheme, ``bridge/store/redis/lua/<op>.lua`` for the scripts' own calls), each
    once."""
    rec, log, lease, noise, wake = (f"{prefix}:{{{PROBE}}}:{k}" for k in KINDS)
    pending, ended, created = f"{prefix}:pending", f"{prefix}:ended", f"{prefix}:created"
    feed, due, epoch = f"{prefix}:feed", f"{prefix}:due", f"{prefix}:epoch"
    waker, events, terms = f"{prefix}:wake:{PROBE}", f"{prefix}:events", f"{prefix}:terms"
    keys = (rec, log, lease, noise, wake, pending, ended, created)
    script = "a step of an ask: ask.lua calls it"
    found = [
        Need("EVALSHA", ("EVALSHA", NO_SCRIPT, str(len(keys)), *keys), "every step of an ask"),
        Need("SCRIPT LOAD", ("SCRIPT", "LOAD", "return 0"), "loading that step's script"),
        Need("DEL", ("DEL", lease), script),
        Need("EXISTS", ("EXISTS", rec), script),
        Need("EXPIRE", ("EXPIRE", rec, "60"), "keeping an ask for its retention"),
        Need("HDEL", ("HDEL", rec, "f"), script),
        Need("HEXISTS", ("HEXISTS", rec, "f"), script),
        Need("HGET", ("HGET", rec, "f"), "reading an ask"),
        Need("HGETALL", ("HGETALL", rec), "reading an ask"),
        Need("HINCRBY", ("HINCRBY", rec, "f", "0"), script),
        Need("HKEYS", ("HKEYS", rec), script),
        Need("HMGET", ("HMGET", rec, "f"), script),
        Need("HSET", ("HSET", rec, "f", "v"), script),
        Need("LRANGE", ("LRANGE", log, "0", "-1"), "reading an ask's audit trail"),
        Need("LTRIM", ("LTRIM", noise, "0", "-1"), script),
        Need("RPUSH", ("RPUSH", log, "x"), script),
        Need("PEXPIRE", ("PEXPIRE", lease, "60000"), script),
        Need("PTTL", ("PTTL", lease), script),
        Need("GET", ("GET", epoch), "noticing that Redis lost its data"),
        Need("SET", ("SET", lease, "1", "PX", "1"), "a waiting call's lease"),
        Need("SADD", ("SADD", wake, "x"), script),
        Need("SMEMBERS", ("SMEMBERS", wake), script),
        Need("SUNION", ("SUNION", wake), "a sweep expiring asks"),
        Need("TIME", ("TIME",), script),
        Need("ZADD", ("ZADD", due, "0", "x"), "the sweeper's index"),
        Need("ZREM", ("ZREM", due, "x"), "the sweeper's index"),
        Need("ZCARD", ("ZCARD", pending), "counting pending asks"),
        Need("ZLEXCOUNT", ("ZLEXCOUNT", pending, "-", "+"), "counting pending asks"),
        Need("ZMSCORE", ("ZMSCORE", due, "x"), "the sweeper's index"),
        Need("ZRANGE", ("ZRANGE", due, "0", "-1"), "listing pending asks"),
        Need("ZRANGEBYSCORE", ("ZRANGEBYSCORE", due, "0", "1"), "the sweeper"),
        Need("ZREVRANGEBYSCORE", ("ZREVRANGEBYSCORE", created, "1", "0"), "ask-bridge list"),
        Need("XADD", ("XADD", feed, "*", "ask", "x"), "the answers feed and outcome webhooks"),
        Need("XGROUP CREATE", ("XGROUP", "CREATE", feed, GROUP, "0", "MKSTREAM"), "reading a feed"),
        Need(
            "XREADGROUP",
            ("XREADGROUP", "GROUP", GROUP, PROBE, "COUNT", "1", "STREAMS", feed, ">"),
            "reading the answers feed and outcome webhooks",
        ),
        Need("XACK", ("XACK", feed, GROUP, "0-1"), "acknowledging a feed delivery"),
        Need(
            "XAUTOCLAIM",
            ("XAUTOCLAIM", feed, GROUP, PROBE, "60000", "0-0", "COUNT", "1"),
            "taking over a dead reader's deliveries",
        ),
        Need(
            "XCLAIM",
            ("XCLAIM", ended, "notify", PROBE, "0", "0-1", "JUSTID"),
            "outcome webhooks being retried",
        ),
        Need("PUBLISH", ("PUBLISH", waker, ""), "waking the call that waits for an answer"),
        Need("PUBSUB NUMSUB", ("PUBSUB", "NUMSUB", waker), script),
        Need(
            "SUBSCRIBE",
            ("SUBSCRIBE", events, waker, terms),
            "hearing that an answer came, and (serve) of each new ask",
        ),
    ]
    if cluster:  # sharded pub/sub: the store's wake-ups on a Cluster (Redis 7 and later)
        sharded = f"{waker}:{{x}}"
        found += [
            Need("SPUBLISH", ("SPUBLISH", sharded, ""), "waking a waiting call on a Cluster"),
            Need("SSUBSCRIBE", ("SSUBSCRIBE", sharded), "hearing an answer on a Cluster"),
            Need(
                "PSUBSCRIBE",
                ("PSUBSCRIBE", f"{waker}:*"),
                "hearing an answer sent by an older version (a rolling upgrade)",
            ),
        ]
    return found


@dataclass(frozen=True)
class Refused:
    """What the user may not do: run a command (``kind`` ``command``: one need), or use the
    bridge's keys or channels (``key``, ``channel``: every need refused for it, in one); what
    Redis said, and the ACL rule that would allow it."""

    kind: str
    needs: tuple[Need, ...]
    reason: str
    grant: str

    @property
    def what(self) -> str:
        """The command refused, or ``keys``/``channels``: a ``doctor`` row's name."""
        return self.needs[0].command if self.kind == "command" else f"{self.kind}s"

    def line(self, user: str) -> str:
        """One line for ``/readyz`` and ``doctor``."""
        first = self.needs[0]
        if self.kind == "command":
            refused = f"may not run {first.command} ({first.use})"
        else:
            named = ", ".join(n.command for n in self.needs)
            refused = f"may not use the bridge's {self.kind}s ({named})"
        grant = f"grant it: ACL SETUSER {user} {self.grant}"
        return f"Redis user {user!r} {refused}: {self.reason}; {grant}"


@dataclass(frozen=True)
class Access:
    """What the check found: the user, how it checked (``None``: it could not, ``unchecked``
    says why), and each command refused."""

    user: str
    method: str | None
    refused: tuple[Refused, ...] = ()
    unchecked: str | None = None


async def check(client: Any, prefix: str, *, user: str | None) -> Access:
    """Check :func:`needs` for the connected user (``user``: the URL's, if it names one) over
    ``client``; a connection failure is raised as redis-py raises it."""
    cluster = isinstance(client, RedisCluster)
    wanted = needs(prefix, cluster=cluster)
    (whoami,) = await exchange(client, [("ACL", "WHOAMI")])
    name = whoami if isinstance(whoami, str) else user or "default"
    dry = await exchange(client, [("ACL", "DRYRUN", name, *n.argv) for n in wanted])
    if not any(isinstance(r, ResponseError) and _no_dryrun(r) for r in dry):
        said = [(n, r) for n, r in zip(wanted, dry, strict=True) if isinstance(r, str)]
        return Access(name, "ACL DRYRUN", _refused(prefix, [(n, r) for n, r in said if r != "OK"]))
    replies = await exchange(client, [("MULTI",), *(n.argv for n in wanted), ("DISCARD",)])
    if isinstance(replies[0], ResponseError):
        why = f"neither ACL DRYRUN nor MULTI is permitted ({_text(replies[0])})"
        return Access(name, None, unchecked=why)
    queued = zip(wanted, replies[1:-1], strict=True)
    return Access(
        name,
        "MULTI/DISCARD",
        _refused(prefix, [(n, _text(r)) for n, r in queued if _is_refusal(r)]),
    )


def _no_dryrun(reply: ResponseError) -> bool:
    """``ACL DRYRUN`` itself was refused, or is unknown here (before Redis 7)."""
    text = str(reply).lower()
    return "acl|dryrun" in text or "unknown subcommand" in text or "unknown command" in text


def _is_refusal(reply: Any) -> bool:
    return isinstance(reply, NoPermissionError) or (
        isinstance(reply, ResponseError) and "no permissions" in str(reply).lower()
    )


def _text(reply: Any) -> str:
    return " ".join(str(reply).split())


def _refused(prefix: str, found: Sequence[tuple[Need, str]]) -> tuple[Refused, ...]:
    """Each command refused, and the needs refused a key or a channel grouped by what to grant
    (a user without the bridge's keys is refused nearly every command: one line says it)."""
    out: list[Refused] = []
    grouped: dict[str, Refused] = {}
    for need, said in found:
        reason = _text(said)
        kind = next((k for k in ("channel", "key") if k in reason.lower()), "command")
        if kind == "command":
            out.append(Refused(kind, (need,), reason, f"+{need.acl}"))
            continue
        grant = f"~{prefix}:*" if kind == "key" else f"&{prefix}:*"
        if need.command == "PSUBSCRIBE":  # an ACL allows a pattern only by that very pattern,
            grant = "allchannels"  # and the bridge's holds a random token
        if grant in grouped:
            had = grouped[grant]
            grouped[grant] = Refused(kind, (*had.needs, need), had.reason, grant)
        else:
            grouped[grant] = Refused(kind, (need,), reason, grant)
    return (*out, *grouped.values())


async def exchange(client: Any, commands: Sequence[Sequence[str]]) -> list[Any]:
    """``commands`` written at once on one connection, each reply read as the server sent it,
    an error reply as its :class:`ResponseError` (one connection: ``MULTI`` and what follows it
    must share one)."""
    if isinstance(client, RedisCluster):
        await client.initialize()
        node = client.get_default_node()
        conn = node.acquire_connection()
    else:
        pool = client.connection_pool
        conn = await pool.get_connection()
    try:
        await conn.send_packed_command(conn.pack_commands(commands))
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(await conn.read_response())
            except ResponseError as exc:
                replies.append(exc)
        return replies
    except BaseException:
        await conn.disconnect()  # a reply may be left half-read: nobody may reuse it
        raise
    finally:
        if isinstance(client, RedisCluster):
            node.release(conn)
        else:
            await pool.release(conn)


_RUN = re.compile(r"no permissions to run the '([^']+)' command", re.I)
_ACCESS = re.compile(r"no permissions to access (?:the '([^']*)'|an?) (key|channel)", re.I)
_SCRIPT_REFUSED = {
    "can't run this command or subcommand": "a command inside a script",
    "can't access at least one of the keys": "a key inside a script",
    "can't publish to the channel": "a channel inside a script",
}
"""Redis before 7.2 refuses a command inside a script without naming it (``The user executing
the script can't run this command or subcommand script: <sha>, on @user_script:1.``): the
refusal is still told as one, in general words."""


def refusal(exc: BaseException) -> str | None:
    """One line for Redis refusing this user a command, a key or a channel (``NOPERM``, also
    from inside a script), naming what was refused; ``None`` for any other failure."""
    seen: BaseException | None = exc
    looked: set[int] = set()  # a chain may loop back on itself
    while seen is not None and id(seen) not in looked:
        looked.add(id(seen))
        what = _refused_what(seen) if isinstance(seen, ResponseError) else None
        if what is not None:
            return (
                f"Redis refused {what[0]} to this user: a permission (ACL) problem, not an outage "
                f"({what[1]}); grant it (ask-bridge doctor lists every one missing)"
            )
        seen = seen.__cause__ or seen.__context__
    return None


def _refused_what(exc: ResponseError) -> tuple[str, str] | None:
    """What a refusal names (``the command XADD``), and Redis's words without a script's
    location; ``None`` when ``exc`` is no refusal."""
    text = _text(exc).removeprefix("ACL failure in script: ").split(" script:")[0]
    if run := _RUN.search(text):
        return f"the command {run[1].upper().replace('|', ' ')}", text
    if access := _ACCESS.search(text):
        return (f"the {access[2]} {access[1]!r}" if access[1] else f"a {access[2]}"), text
    for words, what in _SCRIPT_REFUSED.items():
        if words in text:
            return what, text
    return None
