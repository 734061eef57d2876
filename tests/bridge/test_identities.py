"""One person across platforms: the operator's identity map (``ASK_BRIDGE_IDENTITIES``).

A human who approves an ask on Slack and again on the Discord message of its escalation must
count once toward ``required``: with the two ids linked, every store keeps one submission for the
person, whichever platform it came from, and either id authorises them. Without links covering
the answerers, an ask that needs several people and escalates to another platform is refused
before anything is posted.
"""

from __future__ import annotations

import json

import pytest

from bridge.answering import Answering, Caller, Outcome
from bridge.asking import AskPolicy, ChatHandler, check_required
from bridge.identities import Identities, IdentityError
from bridge.memory_poster import MemoryPoster
from bridge.record import AskStatus, Destination, Responder
from bridge.replies import Replies
from bridge.store.memory import MemoryStore
from tests.support.engine_fixtures import StoreFactory, new_record

REPLIES = Replies(mention=lambda who: f"<m:{who}>", text=lambda text: text)
LINKS = json.dumps(
    {
        "alice": {"slack": "U0ALICE", "discord": "111111111111111111"},
        "bob": {"slack": "U0BOB", "discord": "222222222222222222"},
    }
)
IDENTITIES = Identities.parse(LINKS)
ESCALATED = AskPolicy(
    required=2,
    answerers=("U0ALICE", "U0BOB"),
    escalate_after=60,
    escalate_to="discord:333333333333333333",
)


def test_the_map_links_ids_to_people() -> None:
    assert IDENTITIES.person("slack", "U0ALICE") == "person:alice"
    assert IDENTITIES.person("discord", "111111111111111111") == "person:alice"
    assert IDENTITIES.person("slack", "U0CAROL") is None
    assert IDENTITIES.aliases("discord", "111111111111111111") == ("U0ALICE",)
    assert IDENTITIES.unlinked(["U0ALICE", "U0CAROL", "S0GROUP"], ["slack", "discord"]) == [
        "U0CAROL",
        "S0GROUP",
    ]
    assert not Identities.parse(None) and not Identities.parse("  ")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{", "is not JSON"),
        ("[]", "must be a JSON object"),
        ('{"a b": {"slack": "U1"}}', "person 'a b' must be 1-64"),
        ('{"alice": "U1"}', "'alice' must map platforms to user ids"),
        ('{"alice": {"slack": ""}}', "'alice' has no user id for 'slack'"),
        ('{"a": {"slack": "U1"}, "b": {"slack": "U1"}}', "slack id 'U1' is both 'a' and 'b'"),
    ],
)
def test_a_malformed_map_is_refused_in_one_line_naming_it(text: str, named: str) -> None:
    with pytest.raises(IdentityError) as refused:
        Identities.parse(text)
    assert named in str(refused.value) and "ASK_BRIDGE_IDENTITIES" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_ids_are_checked_by_each_platforms_rule() -> None:
    rule = {"slack": lambda i: i.upper() if i[:1].upper() in "UW" else None}
    linked = Identities.parse('{"alice": {"slack": "u0alice", "discord": "1"}}')
    assert linked.normalised(rule).person("slack", "U0ALICE") == "person:alice"
    with pytest.raises(IdentityError, match="'alice''s slack id 'C0CHAN' is not a slack"):
        Identities.parse('{"alice": {"slack": "C0CHAN"}}').normalised(rule)


def test_several_people_across_platforms_need_every_answerer_linked() -> None:
    slack = MemoryPoster("slack")
    check_required(ESCALATED, slack, identities=IDENTITIES)  # both linked: fine
    with pytest.raises(ValueError) as unlinked:
        check_required(ESCALATED, slack, identities=Identities())
    line = str(unlinked.value)
    assert "escalates from slack to discord" in line and "U0ALICE, U0BOB are not linked" in line
    assert "ASK_BRIDGE_IDENTITIES" in line and "\n" not in line
    anyone = ESCALATED.model_copy(update={"answerers": ()})
    with pytest.raises(ValueError, match="with anyone allowed to answer"):
        check_required(anyone, slack, identities=IDENTITIES)
    group = ESCALATED.model_copy(update={"answerers": ("U0ALICE", "S0ONCALL")})
    with pytest.raises(ValueError, match="S0ONCALL is not linked"):
        where = Destination(platform="slack", channel="C1")
        ChatHandler(slack, MemoryStore(), where, group, identities=IDENTITIES)
    # one platform, or one person required: no such question
    check_required(ESCALATED.model_copy(update={"required": 1}), slack)
    same = ESCALATED.model_copy(update={"escalate_to": "C0MANAGERS"})
    check_required(same, slack, identities=Identities())


class PeoplePoster(MemoryPoster):
    """A platform whose every answerer id is one person (no groups)."""

    def individual(self, answerer: str) -> bool:
        return True


def test_linked_ids_of_one_person_count_once_toward_who_may_agree() -> None:
    two_ids_of_alice = AskPolicy(required=2, answerers=("U0ALICE", "111111111111111111"))
    poster = PeoplePoster("slack")
    with pytest.raises(ValueError, match="2 people must agree but only 1 may answer"):
        check_required(two_ids_of_alice, poster, identities=IDENTITIES)
    check_required(two_ids_of_alice, poster, identities=Identities())  # unlinked: two people


async def test_one_person_on_two_platforms_is_one_approver(make_store: StoreFactory) -> None:
    """Alice approves on Slack, then on Discord: still one approval; Bob's makes two."""
    store = await make_store()
    record = new_record(required=2, answerers=("U0ALICE", "U0BOB"))
    await store.create(record)
    slack = Answering(store, MemoryPoster("slack"), REPLIES, identities=IDENTITIES)
    discord = Answering(store, MemoryPoster("discord"), REPLIES, identities=IDENTITIES)
    first = await slack.pick(record.id, 0, 0, Caller("U0ALICE", "alice"))
    assert first.outcome is Outcome.RECORDED
    again = await discord.pick(record.id, 0, 0, Caller("111111111111111111", "alice on discord"))
    assert again.outcome in (Outcome.RECORDED, Outcome.REPEATED)  # her answer stands, once
    pending = await store.get(record.id)
    assert pending is not None and pending.status is AskStatus.PENDING
    assert [s.key for s in pending.submissions] == ["person:alice"]
    third = await discord.pick(record.id, 0, 0, Caller("222222222222222222", "bob"))
    assert third.outcome is Outcome.ACCEPTED  # Bob, authorised by his linked Slack id
    answered = third.record
    assert answered is not None and answered.status is AskStatus.ANSWERED
    assert sorted(s.key for s in answered.who_answered()) == ["person:alice", "person:bob"]


async def test_without_links_two_platform_ids_are_two_people(make_store: StoreFactory) -> None:
    """The same clicks with no map: the ids are strangers, as the platforms say."""
    store = await make_store()
    record = new_record(required=2)  # anyone may answer
    await store.create(record)
    slack = Answering(store, MemoryPoster("slack"), REPLIES, identities=Identities())
    discord = Answering(store, MemoryPoster("discord"), REPLIES, identities=Identities())
    await slack.pick(record.id, 0, 0, Caller("U0ALICE", "alice"))
    second = await discord.pick(record.id, 0, 0, Caller("111111111111111111", "alice"))
    assert second.outcome is Outcome.ACCEPTED


async def test_a_person_changing_their_answer_on_the_other_platform_replaces_it(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    record = new_record(required=2, answerers=("U0ALICE", "U0BOB"))
    await store.create(record)
    slack = Answering(store, MemoryPoster("slack"), REPLIES, identities=IDENTITIES)
    discord = Answering(store, MemoryPoster("discord"), REPLIES, identities=IDENTITIES)
    await slack.pick(record.id, 0, 0, Caller("U0ALICE", "alice"))
    changed = await discord.pick(record.id, 0, 1, Caller("111111111111111111", "alice"))
    assert changed.outcome is Outcome.RECORDED and changed.record is not None
    (only,) = changed.record.submissions
    assert only.key == "person:alice" and only.user_id == "111111111111111111"
    assert only.answers[0].selected == ("No",)
    bob = await slack.pick(record.id, 0, 0, Caller("U0BOB", "bob"))
    assert bob.outcome is Outcome.RECORDED  # Bob's Yes does not agree with Alice's No


async def test_a_linked_id_authorises_by_its_person(make_store: StoreFactory) -> None:
    """Only Alice's Slack id is named; her Discord id answers as her."""
    store = await make_store()
    record = new_record(answerers=("U0ALICE",))
    await store.create(record)
    discord = Answering(store, MemoryPoster("discord"), REPLIES, identities=IDENTITIES)
    stranger = await discord.pick(record.id, 0, 0, Caller("999999999999999999", "stranger"))
    assert stranger.outcome is Outcome.NOT_ALLOWED
    alice = await discord.pick(record.id, 0, 0, Caller("111111111111111111", "alice"))
    assert alice.outcome is Outcome.ACCEPTED
    assert alice.record is not None and alice.record.answered_by is not None
    assert alice.record.answered_by.user_id == "111111111111111111"


def test_responders_key_and_authorising_ids() -> None:
    linked = Responder(
        user_id="111", person="person:alice", aliases=("U0ALICE",), groups=("role:9",)
    )
    assert linked.key == "person:alice" and linked.authorising == ("111", "U0ALICE", "role:9")
    plain = Responder(user_id="U0BOB", groups=("S0X",))
    assert plain.key == "U0BOB" and plain.authorising == ("S0X",)
