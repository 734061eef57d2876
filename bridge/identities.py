"""Who is one person across platforms: the operator's identity map.

A Slack user id and a Discord user id are different people to the bridge -- nothing on either
platform says otherwise -- so one human who approves an ask on Slack and again on the Discord
message of its escalation would count twice toward ``required``. The operator links the ids
that belong to one person in ``ASK_BRIDGE_IDENTITIES``, a JSON object naming each person and
their id on each platform::

    {"alice": {"slack": "U0ALICE", "discord": "111111111111111111"},
     "bob":   {"slack": "U0BOB",   "discord": "222222222222222222"}}

A person's name is 1-64 of ``A-Z a-z 0-9 _ . -``; each id belongs to at most one person.

With the map, a click counts as its person's (:meth:`Identities.person`): submissions are kept
one per person, whichever platform each came from, and the person's ids on the other platforms
authorise them as their own would (:meth:`Identities.aliases`). An ask that needs several people
and escalates to another platform is refused up front unless every answerer is linked to that
platform (:meth:`Identities.unlinked`): without that, nobody could tell two clicks of one person
from two people.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

IDENTITIES_ENV = "ASK_BRIDGE_IDENTITIES"
PERSON = re.compile(r"[A-Za-z0-9_.-]{1,64}")
PERSON_KEY = "person:"
"""How a linked person is named to the store, where submissions are kept per person: a prefix
no platform's user id has, so a person and an unlinked id never share a submission."""


class IdentitySettings(BaseSettings):
    """Where the map comes from: the environment, or ``.env``, as every setting does."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    identities: str | None = Field(default=None, validation_alias=IDENTITIES_ENV)


class IdentityError(ValueError):
    """``ASK_BRIDGE_IDENTITIES`` is malformed; the message is one line naming what to fix."""


@dataclass(frozen=True)
class Identities:
    """The identity map: person -> platform -> user id, and its reverse."""

    people: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    _by_id: Mapping[tuple[str, str], str] = field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, text: str | None) -> Identities:
        """The map from ``ASK_BRIDGE_IDENTITIES``'s text (empty or unset: no links).
        Raises :class:`IdentityError` in one line."""
        if text is None or not text.strip():
            return cls()
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise IdentityError(f"{IDENTITIES_ENV} is not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise IdentityError(
                f'{IDENTITIES_ENV} must be a JSON object: {{"alice": {{"slack": "U0ALICE", '
                '"discord": "111111111111111111"}, ...}'
            )
        people: dict[str, dict[str, str]] = {}
        by_id: dict[tuple[str, str], str] = {}
        for person, ids in data.items():
            if not PERSON.fullmatch(person):
                raise IdentityError(
                    f"{IDENTITIES_ENV}: person {person!r} must be 1-64 of A-Z a-z 0-9 _ . -"
                )
            if not isinstance(ids, dict) or not ids:
                raise IdentityError(
                    f"{IDENTITIES_ENV}: {person!r} must map platforms to user ids, e.g. "
                    '{"slack": "U0ALICE", "discord": "111111111111111111"}'
                )
            linked: dict[str, str] = {}
            for platform, user_id in ids.items():
                if not isinstance(user_id, str) or not user_id.strip():
                    raise IdentityError(
                        f"{IDENTITIES_ENV}: {person!r} has no user id for {platform!r}"
                    )
                user_id = user_id.strip()
                other = by_id.get((platform, user_id))
                if other is not None:
                    raise IdentityError(
                        f"{IDENTITIES_ENV}: {platform} id {user_id!r} is both {other!r} and "
                        f"{person!r}: an id belongs to one person"
                    )
                by_id[(platform, user_id)] = person
                linked[platform] = user_id
            people[person] = linked
        return cls(people, by_id)

    @classmethod
    def from_env(cls) -> Identities:
        """The map in the environment or ``.env`` (``ASK_BRIDGE_IDENTITIES``), read now."""
        return cls.parse(IdentitySettings().identities)

    def __bool__(self) -> bool:
        return bool(self.people)

    def normalised(self, rule: Mapping[str, object]) -> Identities:
        """The map with each platform's ids in that platform's own form: ``rule`` maps a
        platform to a callable turning an id into its canonical form, or ``None`` for one that
        cannot be a user id there (:meth:`bridge.poster.Poster.answerer`). Platforms without a
        rule keep their ids as given. Raises :class:`IdentityError` naming a bad id."""
        lines = []
        for person, ids in self.people.items():
            linked = {}
            for platform, user_id in ids.items():
                check = rule.get(platform)
                canonical = check(user_id) if callable(check) else user_id
                if not isinstance(canonical, str):
                    raise IdentityError(
                        f"{IDENTITIES_ENV}: {person!r}'s {platform} id {user_id!r} is not a "
                        f"{platform} user id"
                    )
                linked[platform] = canonical
            lines.append((person, linked))
        return Identities.parse(json.dumps(dict(lines)))

    def person(self, platform: str, user_id: str) -> str | None:
        """The key the store keeps this user's submissions under when they are linked
        (``person:<name>``), else ``None`` (their own id)."""
        name = self._by_id.get((platform, user_id))
        return None if name is None else PERSON_KEY + name

    def person_named(self, answerer: str) -> str | None:
        """The person an answerer id (on any platform) is linked to, as :meth:`person` keys it;
        ``None`` when it is nobody's."""
        names = {n for (_, i), n in self._by_id.items() if i == answerer}
        return PERSON_KEY + names.pop() if len(names) == 1 else None

    def linked_ids(self, key: str) -> tuple[str, ...]:
        """Every id of the person a submission key (:meth:`person`) names; empty for a key that
        is a plain user id."""
        if not key.startswith(PERSON_KEY):
            return ()
        ids = self.people.get(key[len(PERSON_KEY) :], {})
        return tuple(i for _, i in sorted(ids.items()))

    def aliases(self, platform: str, user_id: str) -> tuple[str, ...]:
        """The same person's ids on the other platforms (empty when unlinked)."""
        name = self._by_id.get((platform, user_id))
        if name is None:
            return ()
        return tuple(i for p, i in sorted(self.people[name].items()) if p != platform)

    def unlinked(self, answerers: Iterable[str], platforms: Iterable[str]) -> list[str]:
        """The answerers not linked to one person on every one of ``platforms`` (an answerer is
        an id on one of them; a group id is never linked)."""
        wanted = set(platforms)
        missing = []
        for answerer in answerers:
            names = {n for (p, i), n in self._by_id.items() if i == answerer and p in wanted}
            if len(names) != 1 or not wanted <= set(self.people[next(iter(names))]):
                missing.append(answerer)
        return missing
