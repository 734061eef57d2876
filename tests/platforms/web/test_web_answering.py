"""Answering in the browser: every question shape by form POST, a form's problems shown with the
person's input kept, approvals by two people, and who may answer -- through the real routes."""

from __future__ import annotations

from bridge.record import AskStatus
from tests.platforms.web.conftest import Web, question


async def test_a_single_select_question_is_answered_by_its_form(web: Web) -> None:
    record = await web.ask(question())
    url = web.url(record.id)
    status, page = await web.page(url)
    assert status == 200
    assert 'type="radio" name="q0"' in page and "<legend>" in page and "Other…" in page
    assert 'type="radio" name="q0" id="q0o-other" value="other"' in page  # a choice of its own
    sent = await web.submit(url, [("q0", "1")])
    assert sent.status == 303 and sent.headers["Location"].endswith("?sent=1")
    stored = await web.store.get(record.id)
    assert stored is not None and stored.status is AskStatus.ANSWERED
    assert stored.answers is not None and stored.answers[0].selected == ("No",)
    assert stored.answered_by is not None and stored.answered_by.user_id == "alice"
    status, page = await web.page(url + "?sent=1")
    assert status == 200 and "<form" not in page.replace('<form method="get"', "")
    assert "Answered by alice" in page and "✅ <strong>No</strong>" in page


async def test_every_shape_multi_select_typed_and_four_questions(web: Web) -> None:
    record = await web.ask(
        question("Which regions?", "Regions", "EU", "US", "Asia", multi=True),
        question("When?", "When", "Now", "Tonight"),
        question("Who reviews?", "Review", "Ann", "Bo", multi=True),
        question("Notes?", "Notes", "None", "Some"),
    )
    url = web.url(record.id)
    status, page = await web.page(url)
    assert status == 200 and page.count("<fieldset") == 4 and 'type="checkbox" name="q0"' in page
    fields = [("q0", "0"), ("q0", "2"), ("q1", "other"), ("q1-other", "  after the standup  ")]
    fields += [("q2", "1")]
    fields += [("q3", "0"), ("q3-other", "")]
    sent = await web.submit(url, fields)
    assert sent.status == 303
    stored = await web.store.get(record.id)
    assert stored is not None and stored.answers is not None
    assert stored.answers[0].selected == ("EU", "Asia")
    assert stored.answers[1].selected == () and stored.answers[1].other_text == "after the standup"
    assert stored.answers[2].selected == ("Bo",) and stored.answers[3].selected == ("None",)


async def test_a_form_with_problems_shows_each_beside_its_question_and_keeps_the_input(
    web: Web,
) -> None:
    record = await web.ask(question(), question("When?", "When", "Now", "Tonight"))
    url = web.url(record.id)
    typed = "x" * 2001
    sent_fields = [("q0", "0"), ("q0-other", "also <b>this</b>"), ("q1-other", typed)]
    token = await web.csrf(url)
    async with web.http.post(url, data=[*sent_fields, ("csrf", token)]) as response:
        assert response.status == 422
        page = await response.text()
    assert 'id="p0" role="alert">Choose an option or type your own answer, not both' in page
    assert 'id="p1" role="alert">Your answer is too long' in page
    assert 'id="q0o0" value="0" checked' in page  # the choice kept
    assert "also &lt;b&gt;this&lt;/b&gt;</textarea>" in page and typed in page  # the text kept
    stored = await web.store.get(record.id)
    assert stored is not None and stored.status is AskStatus.PENDING and not stored.submissions


async def test_two_people_approve_through_their_own_links(web: Web) -> None:
    record = await web.ask(question(), answerers=("alice", "bob", "cy"), required=2)
    alice, bob = web.url(record.id, "alice"), web.url(record.id, "bob")
    assert (await web.submit(alice, [("q0", "0")])).status == 303
    status, page = await web.page(alice + "?sent=1")
    assert "Needs 2 approvals" in page and "1 of 2: alice chose Yes" in page
    assert '<form method="post"' in page  # still pending: alice may change her answer
    stored = await web.store.get(record.id)
    assert stored is not None and stored.status is AskStatus.PENDING
    assert (await web.submit(bob, [("q0", "0")])).status == 303
    stored = await web.store.get(record.id)
    assert stored is not None and stored.status is AskStatus.ANSWERED
    assert {s.user_id for s in stored.who_answered()} == {"alice", "bob"}
    status, page = await web.page(bob)
    assert status == 200 and "Answered by alice and bob" in page
    assert '<form method="post"' not in page


async def test_a_person_not_among_the_answerers_is_refused_and_nothing_changes(web: Web) -> None:
    record = await web.ask(question(), answerers=("alice",))
    mallory = web.url(record.id, "mallory")
    status, page = await web.page(mallory)
    assert status == 403 and "it is for alice" in page and '<form method="post"' not in page
    token = await web.csrf(web.url(record.id, "alice"))  # even with a valid-looking field
    sent = await web.submit(mallory, [("q0", "0")], csrf=token)
    assert sent.status == 403
    stored = await web.store.get(record.id)
    assert stored is not None and stored.status is AskStatus.PENDING and not stored.submissions


async def test_a_person_from_a_chat_answers_as_their_chat_identity(web: Web) -> None:
    record = await web.ask(question(), answerers=("U1",), platform="slack", channel="C1")
    own = web.url(record.id, "U1", platform="slack")
    other = web.url(record.id, "U2", platform="slack")
    assert (await web.page(other))[0] == 403
    assert (await web.submit(own, [("q0", "2")])).status == 303
    stored = await web.store.get(record.id)
    assert stored is not None and stored.answered_by is not None
    assert stored.answered_by.user_id == "U1" and stored.answers is not None
    assert stored.answers[0].selected == ("Later",)


async def test_an_ended_ask_shows_its_final_state_without_a_form(web: Web) -> None:
    record = await web.ask(question())
    await web.store.close(record.id, AskStatus.CANCELLED, by="ops")
    status, page = await web.page(web.url(record.id))
    assert status == 200 and "Cancelled" in page and '<form method="post"' not in page
    sent = await web.submit(web.url(record.id), [("q0", "0")], csrf=None)
    assert sent.status == 403  # no form, so no CSRF field: refused before anything
