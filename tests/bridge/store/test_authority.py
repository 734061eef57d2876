"""Authority at the moment it counts: a submission whose person lost the role or group that
admitted them no longer approves, over every backend and through the answering layer.

The store asks a caller that can re-check (``verified``) for the current authority of the others
a submission would count toward ``required`` (``VERIFY``, nothing recorded), withdraws those no
longer authorised (shown, never counted, a ``withdrawn`` event), and counts the rest. The
answering layer re-checks through the platform's membership lookup (cached a minute).
"""

from __future__ import annotations

from collections.abc import Sequence

from bridge.answering import Answering, Caller, Outcome
from bridge.identities import Identities
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, Responder
from bridge.replies import WITHDRAWN, Replies
from bridge.store.terms import SubmitOutcome
from tests.support.engine_fixtures import StoreFactory, new_record

GROUP = "S0ONCALL"
YES = (Answer(question="Question number 0?", selected=("Yes",)),)
ALICE = Responder(user_id="U_ALICE", name="Alice", groups=(GROUP,))
BOB = Responder(user_id="U_BOB", name="Bob", groups=(GROUP,))
CAROL = Responder(user_id="U_CAROL", name="Carol", groups=(GROUP,))


def restricted() -> AskRecord:
    return new_record(required=2, answerers=(GROUP, "U_DIRECT"))


async def test_a_submission_that_would_make_k_agree_asks_for_the_others_authority(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    rec = restricted()
    await store.create(rec)
    first = await store.submit(rec.id, ALICE, YES, verified={})
    assert first.outcome is SubmitOutcome.RECORDED  # nobody else counted yet: nothing to check
    check = await store.submit(rec.id, BOB, YES, verified={})
    assert check.outcome is SubmitOutcome.VERIFY and check.verify == ("U_ALICE",)
    before = await store.get(rec.id)  # nothing recorded by a VERIFY
    assert before is not None and [s.user_id for s in before.submissions] == ["U_ALICE"]
    assert [e.kind for e in await store.history(rec.id)] == ["created", "submitted"]
    still = await store.submit(rec.id, BOB, YES, verified={"U_ALICE": ("U_ALICE", GROUP)})
    assert still.outcome is SubmitOutcome.ACCEPTED  # Alice is still in the group: two agree
    assert still.record is not None
    assert [s.user_id for s in still.record.who_answered()] == ["U_ALICE", "U_BOB"]


async def test_a_person_removed_from_the_group_no_longer_approves(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    rec = restricted()
    await store.create(rec)
    await store.submit(rec.id, ALICE, YES, verified={})
    lost = await store.submit(rec.id, BOB, YES, verified={"U_ALICE": ("U_ALICE",)})  # no group
    assert lost.outcome is SubmitOutcome.RECORDED  # Alice withdrawn: Bob alone agrees
    shown = lost.record
    assert shown is not None and shown.status is AskStatus.PENDING
    by = {s.user_id: s for s in shown.submissions}
    assert by["U_ALICE"].withdrawn and not by["U_BOB"].withdrawn
    assert shown.agreeing(YES) == [by["U_BOB"]]
    assert await store.get(rec.id) == shown  # as stored
    (gone,) = [e for e in await store.history(rec.id) if e.kind == "withdrawn"]
    assert gone.user_id == "U_ALICE" and gone.detail == {"reason": "no longer allowed to answer"}
    # Carol's agreement makes two again, Bob still authorised
    done = await store.submit(rec.id, CAROL, YES, verified={"U_BOB": ("U_BOB", GROUP)})
    assert done.outcome is SubmitOutcome.ACCEPTED and done.record is not None
    assert [s.user_id for s in done.record.who_answered()] == ["U_BOB", "U_CAROL"]
    answered = (await store.history(rec.id))[-1]
    assert answered.kind == "answered" and answered.detail["agreed"] == ["U_BOB", "U_CAROL"]


async def test_a_withdrawn_person_who_submits_again_is_judged_anew(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    rec = restricted()
    await store.create(rec)
    await store.submit(rec.id, ALICE, YES, verified={})
    await store.submit(rec.id, BOB, YES, verified={"U_ALICE": ()})
    back = await store.submit(rec.id, ALICE, YES, verified={"U_BOB": ("U_BOB", GROUP)})
    assert back.outcome is SubmitOutcome.ACCEPTED  # back in the group, she submits again
    assert back.record is not None and not any(s.withdrawn for s in back.record.submissions)


async def test_a_caller_that_cannot_check_counts_submissions_as_made(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    rec = restricted()
    await store.create(rec)
    await store.submit(rec.id, ALICE, YES)
    assert (await store.submit(rec.id, BOB, YES)).outcome is SubmitOutcome.ACCEPTED


async def test_a_direct_answerer_and_anyone_asks_are_checked_too(
    make_store: StoreFactory,
) -> None:
    """The store asks about every other counted person; the caller knows a named one keeps
    their authority (the answering layer looks nobody up for them)."""
    store = await make_store()
    rec = restricted()
    await store.create(rec)
    direct = Responder(user_id="U_DIRECT", name="Dee")
    await store.pick(rec.id, direct, 0, 0, verified={})
    check = await store.pick(rec.id, BOB, 0, 0, verified={})
    assert check.outcome is SubmitOutcome.VERIFY and check.verify == ("U_DIRECT",)
    done = await store.pick(rec.id, BOB, 0, 0, verified={"U_DIRECT": ("U_DIRECT",)})
    assert done.outcome is SubmitOutcome.ACCEPTED


class Directory:
    """A platform's group lookup whose members the test changes; counts its lookups."""

    def __init__(self, members: set[str]) -> None:
        self.members = members
        self.lookups: list[str] = []

    async def groups_of(
        self, user_id: str, candidates: Sequence[str], record: AskRecord | None = None
    ) -> tuple[str, ...]:
        self.lookups.append(user_id)
        return (GROUP,) if user_id in self.members and GROUP in candidates else ()


REPLIES = Replies(mention=lambda who: f"<@{who}>", text=lambda text: text)


async def test_the_answering_layer_rechecks_through_the_platform(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    rec = restricted()
    await store.create(rec)
    poster = MemoryPoster("slack")
    directory = Directory({"U_ALICE", "U_BOB", "U_CAROL"})
    answering = Answering(store, poster, REPLIES, membership=directory, identities=Identities())
    alice = await answering.pick(rec.id, 0, 0, Caller("U_ALICE", "Alice"))
    assert alice.outcome is Outcome.RECORDED
    directory.members.discard("U_ALICE")  # removed from the on-call group meanwhile
    bob = await answering.pick(rec.id, 0, 0, Caller("U_BOB", "Bob"))
    assert bob.outcome is Outcome.RECORDED  # not ACCEPTED: Alice's approval was withdrawn
    assert bob.record is not None and bob.record.status is AskStatus.PENDING
    lines = REPLIES.approvals(bob.record)
    assert any("<@U_ALICE>" in line and WITHDRAWN in line for line in lines)
    assert "U_ALICE" in directory.lookups  # her authority was read afresh
    carol = await answering.pick(rec.id, 0, 0, Caller("U_CAROL", "Carol"))
    assert carol.outcome is Outcome.ACCEPTED
    assert carol.record is not None
    assert [s.user_id for s in carol.record.who_answered()] == ["U_BOB", "U_CAROL"]
