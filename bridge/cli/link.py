"""People's own links to answer in the browser, from the command line.

* ``ask-bridge link ASK_ID --as PERSON`` prints a fresh link for one person: ``NAME`` for
  someone on no chat platform (as ``ask --platform web --answerer NAME`` named them), or
  ``slack:U123`` / ``discord:123`` for a chat identity (the link answers as that user would by a
  click, so approvals and "who may answer" count them exactly).
* ``ask --platform web`` prints each named answerer's link as soon as the ask exists
  (:class:`AnswererLinks`): one line per person on stderr, or one JSON line with ``--json``; the
  result on stdout is unchanged.

Links are made from ``ASK_BRIDGE_WEB_SECRET`` under ``ASK_BRIDGE_WEB_URL``
(:func:`bridge.web_links.browser_links`), living ``ASK_BRIDGE_WEB_LINK_TTL`` seconds -- those
``ask`` prints, as long as the ask (:meth:`~bridge.web_links.Links.lasting`). Whoever
holds a link answers as its person: they go to the terminal, never to a log (logs get
:func:`~bridge.web_links.shown`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from bridge.aio import stop
from bridge.cli.failures import FAILED
from bridge.text import one_line

if TYPE_CHECKING:
    from bridge.web_links import Links, Person

log = logging.getLogger(__name__)
WEB = "web"
"""The web platform's name in the registry (``--platform web``, a link's ``Person.platform``)."""
CHAT_PLATFORMS = ("slack", "discord")
"""Platforms whose users ``--as PLATFORM:ID`` names."""
NO_LINKS = (
    "links need ASK_BRIDGE_WEB_SECRET (the web platform's secret) and ASK_BRIDGE_WEB_URL (the "
    "public address its pages are served at)"
)
MAX_NAME = 200
"""Longest person name taken (a name is shown on pages and in lines on a terminal)."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "link",
        help="print a fresh link for a person to answer a pending ask in the browser",
        description="Print a fresh link (valid ASK_BRIDGE_WEB_LINK_TTL seconds, default 900) for "
        "PERSON to answer the pending ask ASK_ID in the browser. Whoever holds it answers as "
        "that person: hand it to them alone. Needs ASK_BRIDGE_WEB_SECRET, ASK_BRIDGE_WEB_URL "
        "and REDIS_URL (the store the ask is in).",
    )
    p.add_argument("ask_id")
    p.add_argument(
        "--as",
        dest="person",
        required=True,
        metavar="PERSON",
        help="NAME for a person on no chat platform (as ask --platform web --answerer NAME "
        "named them), or slack:U123 / discord:123 for a chat user",
    )
    p.set_defaults(func=_link)


def person_of(text: str) -> Person:
    """The person ``--as`` names; ``ValueError`` (its words fit for the one line) if none."""
    from bridge.web_links import Person

    name = one_line(text).strip()
    if not name or len(name) > MAX_NAME:
        raise ValueError(f"--as: a person is a name of 1 to {MAX_NAME} characters, or PLATFORM:ID")
    platform, colon, user_id = name.partition(":")
    if colon and platform in CHAT_PLATFORMS:
        if not user_id.strip():
            raise ValueError(f"--as {name}: give the {platform} user id after the colon")
        return Person(platform, user_id.strip(), user_id.strip())
    return Person(WEB, name, name)


def _link(args: argparse.Namespace) -> int:
    from bridge.cli.asks import run_on_store
    from bridge.web_links import browser_links

    try:
        person = person_of(args.person)
    except ValueError as exc:
        print(f"ask-bridge link: {exc}", file=sys.stderr)
        return FAILED
    links = browser_links()  # a bad setting: its one line, by the command's failure handling
    if links is None:
        print(f"ask-bridge link: {NO_LINKS}", file=sys.stderr)
        return FAILED

    async def go(store: Any, args: argparse.Namespace) -> int:
        from bridge.record import AskStatus

        record = await store.get(args.ask_id)
        if record is None:
            print(
                f"ask-bridge link: no ask {args.ask_id!r} (unknown, or past its retention)",
                file=sys.stderr,
            )
            return FAILED
        if record.status is not AskStatus.PENDING:
            print(
                f"ask-bridge link: ask {record.id!r} has ended ({record.status.value}); no link "
                "can answer it",
                file=sys.stderr,
            )
            return FAILED
        print(links.ask_url(record.id, person), flush=True)
        return 0

    return run_on_store(go, args)


Announce = Callable[[str, dict[str, str]], Awaitable[None]]
"""Sends the ``created`` webhook event of an ask (by id) with its answerers' links."""


class AnswererLinks(logging.Handler):
    """Prints each answerer's link once the ask exists (and hands them to ``announce``, the
    opt-in ``created`` webhook event): it listens to the ``created`` lifecycle step
    (:mod:`bridge.metrics`), as ``ask``'s progress line listens to ``posted``, rather than
    reaching into the chat handler."""

    def __init__(
        self,
        links: Links,
        names: Sequence[str],
        out: TextIO,
        *,
        as_json: bool = False,
        announce: Announce | None = None,
    ) -> None:
        super().__init__(logging.INFO)
        self.links = links
        self.names = tuple(names)
        self.out = out
        self.as_json = as_json
        self.announce = announce
        self.printed: str | None = None
        """The ask whose links were printed (once: an escalation is no second ask)."""
        self._announcing: asyncio.Task[None] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "fields", None)
        if not isinstance(fields, dict) or fields.get("step") != "created" or self.printed:
            return
        ask_id = str(fields["ask_id"])
        self.printed = ask_id
        urls = self.urls(ask_id)
        if self.as_json:
            text = json.dumps({"ask_id": ask_id, "links": urls}, ensure_ascii=False) + "\n"
        else:
            text = "".join(f"ask-bridge ask: link for {n}: {u}\n" for n, u in urls.items())
        self.out.write(text)
        self.out.flush()
        if self.announce is not None:  # logged on the loop that runs the ask
            self._announcing = asyncio.get_running_loop().create_task(self._send(ask_id, urls))

    def urls(self, ask_id: str) -> dict[str, str]:
        """Each answerer's own link to ``ask_id``, by name."""
        from bridge.web_links import Person

        return {name: self.links.ask_url(ask_id, Person(WEB, name, name)) for name in self.names}

    async def _send(self, ask_id: str, urls: dict[str, str]) -> None:
        assert self.announce is not None
        try:
            await self.announce(ask_id, urls)
        except Exception:  # the event is a courtesy to a pipeline; the ask goes on without it
            log.warning("could not send the created event of ask %s", ask_id, exc_info=True)

    async def settled(self) -> None:
        """Let the ``created`` event in progress finish (its attempts are bounded)."""
        if self._announcing is not None:
            await self._announcing

    async def aclose(self) -> None:
        """Stop a ``created`` event still being sent (the ask was interrupted)."""
        if self._announcing is not None:
            await stop(self._announcing)


@contextmanager
def listening(printer: AnswererLinks | None) -> Iterator[None]:
    """Let ``printer`` (if any) print the answerers' links when the ask is created within."""
    if printer is None:
        yield
        return
    lifecycle = logging.getLogger("bridge.lifecycle")
    level = lifecycle.level
    if not lifecycle.isEnabledFor(logging.INFO):  # the step is logged only if someone listens
        lifecycle.setLevel(logging.INFO)
    lifecycle.addHandler(printer)
    try:
        yield
    finally:
        lifecycle.removeHandler(printer)
        lifecycle.setLevel(level)
