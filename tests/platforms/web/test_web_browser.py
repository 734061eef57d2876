"""The web platform in a real browser: Debian's Chromium driven by Playwright, fenced to loopback
(:mod:`tests.support.browser`), against the real routes over a real store.

Every shape is answered by mouse and by keyboard alone, at a phone's width and a desktop's; a page
follows another person's answer and a cancel live (Server-Sent Events, no reload); two people
approve from their own browsers; an expired link gets its page; axe-core finds no serious or
critical accessibility problem on any kind of page. Every test asserts (in the ``site`` fixture)
that no request left the page's origin.

``ASK_BRIDGE_SCREENSHOTS=1`` also writes the form's screenshots into ``docs/images/`` (kept out
of ordinary runs, which must not rewrite tracked files).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import pytest

from tests.support.browser import axe_source, missing

if (_why := missing()) is not None:
    pytest.skip(_why, allow_module_level=True)

from playwright.async_api import Locator, Page, expect

from bridge.models import Option, Question
from bridge.record import AskStatus
from bridge.web_links import Person
from tests.platforms.web.browsing import DESKTOP, PHONE, Site, browser, site, site_store

__all__ = ["browser", "site", "site_store"]  # the fixtures, imported to be found here

pytestmark = pytest.mark.asyncio(loop_scope="module")
WIDTHS = pytest.mark.parametrize("width", [PHONE, DESKTOP], ids=["phone", "desktop"])
SCREENSHOTS_ENV = "ASK_BRIDGE_SCREENSHOTS"
IMAGES = Path(__file__).resolve().parents[3] / "docs" / "images"


def question(text: str, header: str, *options: tuple[str, str], multi: bool = False) -> Question:
    return Question(
        question=text,
        header=header,
        options=tuple(Option(label=label, description=about) for label, about in options),
        multiSelect=multi,
    )


SHIP = question(
    "Ship release 4.2 to production tonight?",
    "Ship",
    ("Yes", "Deploy at 20:00 after the smoke tests pass"),
    ("No", "Hold the release until Monday's review"),
    ("Later", "Deploy this week, at a time ops picks"),
)
REGIONS = question(
    "Which regions get it first?",
    "Regions",
    ("EU", "Frankfurt and Dublin"),
    ("US", "Virginia and Oregon"),
    ("Asia", "Singapore"),
    multi=True,
)
WHEN = question(
    "When should the rollout start?", "When", ("Now", "Right away"), ("Tonight", "At 20:00")
)
NOTES = question(
    "Anything for the release notes?",
    "Notes",
    ("Nothing", "Ship the notes as drafted"),
    ("Yes", "I will add a line"),
)
FOUR = (SHIP, REGIONS, WHEN, NOTES)


def group(page: Page, text: str) -> Locator:
    """A question's fieldset, found as a person finds it: by its question."""
    return page.get_by_role("group", name=re.compile(re.escape(text)))


async def focused(page: Page) -> str:
    return str(await page.evaluate("document.activeElement.id || document.activeElement.tagName"))


async def press(page: Page, key: str, lands_on: str) -> None:
    """Press ``key`` and check where the focus went (so a wrong turn fails where it happens)."""
    await page.keyboard.press(key)
    assert await focused(page) == lands_on, f"{key} went to {await focused(page)}"


async def fits(page: Page) -> None:
    """Nothing is wider than the window (no sideways scrolling on a phone)."""
    wide = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 0, f"the page is {wide}px wider than the window"


async def live(site: Site, pages: int) -> None:
    """Wait until ``pages`` pages are watching (their event streams registered at the server),
    so what happens next is a change they are told of."""
    async with asyncio.timeout(15):
        # the server's count of open streams is the truth, and it has no event to wait on
        while site.receiver.live.open < pages:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def check_four_answered(site: Site, ask_id: str, page: Page) -> None:
    await expect(page.get_by_text("Answered by alice", exact=True)).to_be_visible()
    await expect(page.get_by_role("status")).to_have_text("Your answer was sent.")
    await expect(page.locator('form[method="post"]')).to_have_count(0)
    for shown in ("✅ No", "✅ EU, Asia", "after the standup", "✅ Nothing"):
        await expect(page.get_by_text(shown, exact=True)).to_be_visible()
    await fits(page)
    stored = await site.store.get(ask_id)
    assert stored is not None and stored.status is AskStatus.ANSWERED and stored.answers
    assert [a.selected for a in stored.answers] == [("No",), ("EU", "Asia"), (), ("Nothing",)]
    assert stored.answers[2].other_text == "after the standup"
    assert stored.answered_by is not None and stored.answered_by.user_id == "alice"


@WIDTHS
async def test_every_shape_is_answered_by_mouse(site: Site, width: int) -> None:
    record = await site.ask(*FOUR)
    page = await site.open(site.url(record.id), width=width)
    assert site.status == 200
    await fits(page)
    await group(page, SHIP.question).get_by_text("No", exact=True).click()
    regions = group(page, REGIONS.question)
    await regions.get_by_text("EU", exact=True).click()
    await regions.get_by_text("Asia", exact=True).click()
    when = group(page, WHEN.question)
    await when.get_by_text("Now", exact=True).click()
    # changing one's mind after ticking an option: typing picks Other…, and that is the answer
    await when.get_by_role("textbox").click()
    await page.keyboard.type("after the standup")
    await expect(when.get_by_role("radio", name="Other…")).to_be_checked()
    await expect(when.get_by_role("radio", name=re.compile("^Now"))).not_to_be_checked()
    await group(page, NOTES.question).get_by_text("Nothing", exact=True).click()
    await page.get_by_role("button", name="Submit").click()
    await check_four_answered(site, record.id, page)


@WIDTHS
async def test_every_shape_is_answered_by_keyboard_alone(site: Site, width: int) -> None:
    record = await site.ask(*FOUR)
    page = await site.open(site.url(record.id), width=width)
    await press(page, "Tab", "q0o0")  # into Ship's radio group
    await press(page, "ArrowDown", "q0o1")  # No, chosen as the focus moves
    await press(page, "Tab", "q0-other")  # past the group, to its Other… text
    await press(page, "Tab", "q1o0")  # Regions' first box
    await press(page, "Space", "q1o0")  # EU
    await press(page, "Tab", "q1o1")
    await press(page, "Tab", "q1o2")
    await press(page, "Space", "q1o2")  # Asia
    await press(page, "Tab", "q1-other")
    await press(page, "Tab", "q2o0")  # When
    await press(page, "ArrowDown", "q2o1")
    await press(page, "ArrowDown", "q2o-other")  # Other…
    await press(page, "Tab", "q2-other")
    await page.keyboard.type("after the standup")
    await press(page, "Tab", "q3o0")  # Notes
    await press(page, "Space", "q3o0")  # Nothing
    await press(page, "Tab", "q3-other")
    await press(page, "Tab", "BUTTON")
    await page.keyboard.press("Enter")
    await check_four_answered(site, record.id, page)


async def test_other_is_a_choice_without_any_script(site: Site) -> None:
    record = await site.ask(SHIP)
    page = await site.open(site.url(record.id), width=PHONE, script=False)
    ship = group(page, SHIP.question)
    await ship.get_by_text("Yes", exact=True).click()
    await ship.get_by_text("Other…", exact=True).click()  # a radio button can be changed...
    await ship.get_by_role("textbox").fill("Only after the database migration")
    await expect(ship.get_by_role("radio", name=re.compile("^Yes"))).not_to_be_checked()
    await page.get_by_role("button", name="Submit").click()  # ...so this is no "not both"
    await expect(page.get_by_text("Answered by alice", exact=True)).to_be_visible()
    stored = await site.store.get(record.id)
    assert stored is not None and stored.answers is not None
    assert stored.answers[0].selected == ()
    assert stored.answers[0].other_text == "Only after the database migration"


async def test_a_form_with_a_problem_says_so_beside_the_question(site: Site) -> None:
    record = await site.ask(SHIP, WHEN)
    page = await site.open(site.url(record.id), width=PHONE)
    await group(page, WHEN.question).get_by_text("Other…", exact=True).click()  # nothing typed
    await group(page, SHIP.question).get_by_text("Later", exact=True).click()
    await page.get_by_role("button", name="Submit").click()
    when = group(page, WHEN.question)
    await expect(when.get_by_role("alert")).to_have_text(
        "Choose an option or type your own answer."
    )
    await expect(
        group(page, SHIP.question).get_by_role("radio", name=re.compile("^Later"))
    ).to_be_checked()
    await fits(page)
    stored = await site.store.get(record.id)
    assert stored is not None and stored.status is AskStatus.PENDING and not stored.submissions


@pytest.mark.parametrize("site_store", ["memory", "redis"], indirect=True)
async def test_two_people_approve_and_each_page_follows_the_other_live(site: Site) -> None:
    record = await site.ask(SHIP, answerers=("alice", "bob"), required=2)
    alice = await site.open(site.url(record.id, "alice"), width=PHONE)
    bob = await site.open(site.url(record.id, "bob"))
    await alice.evaluate("window.stayed = true")
    await live(site, 2)
    await group(bob, SHIP.question).get_by_text("No", exact=True).click()
    await bob.get_by_role("button", name="Submit").click()
    await expect(bob.get_by_text("1 of 2: bob chose No")).to_be_visible()
    # alice's page shows bob's approval as it happens, without a reload
    await expect(alice.get_by_text("1 of 2: bob chose No")).to_be_visible()
    assert await alice.evaluate("window.stayed") is True
    await live(site, 2)  # bob's page, loaded again after his submit, watches too
    await group(alice, SHIP.question).get_by_text("No", exact=True).click()
    await alice.get_by_role("button", name="Submit").click()
    await expect(
        alice.get_by_text(re.compile("Answered by (alice and bob|bob and alice)"))
    ).to_be_visible()
    # bob's page learns the ask ended and shows its final state, without its form
    await expect(
        bob.get_by_text(re.compile("Answered by (alice and bob|bob and alice)"))
    ).to_be_visible()
    await expect(bob.locator('form[method="post"]')).to_have_count(0)
    stored = await site.store.get(record.id)
    assert stored is not None and stored.status is AskStatus.ANSWERED
    assert {s.user_id for s in stored.who_answered()} == {"alice", "bob"}


async def test_a_cancelled_ask_updates_its_open_page(site: Site) -> None:
    record = await site.ask(SHIP)
    page = await site.open(site.url(record.id))
    await expect(page.get_by_role("button", name="Submit")).to_be_visible()
    await live(site, 1)
    await site.store.close(record.id, AskStatus.CANCELLED, by="ops")
    await expect(page.get_by_text("Cancelled", exact=True)).to_be_visible()
    await expect(page.locator('form[method="post"]')).to_have_count(0)


async def test_an_expired_link_gets_its_page_and_no_form(site: Site) -> None:
    record = await site.ask(SHIP)
    page = await site.open(site.url(record.id, ttl=-5), width=PHONE)
    assert site.status == 410
    await expect(page.get_by_role("heading")).to_have_text("This link does not open")
    await expect(page.get_by_role("alert")).to_contain_text("This link has expired")
    await expect(page.locator("form")).to_have_count(0)
    await fits(page)


async def audit(page: Page, what: str) -> None:
    """axe-core's audit of ``page``: no serious or critical violation (all of them printed)."""
    source = axe_source()
    assert source is not None
    await page.add_script_tag(content=source)
    found = await page.evaluate(
        "axe.run().then(r => r.violations.map(v => ({id: v.id, impact: v.impact, "
        "help: v.help, nodes: v.nodes.map(n => n.target.join(' '))})))"
    )
    print(f"axe on {what}: {json.dumps(found, indent=1)}")
    bad = [v for v in found if v["impact"] in ("serious", "critical")]
    assert bad == [], f"axe on {what}: {json.dumps(bad, indent=1)}"


async def test_no_page_has_a_serious_accessibility_problem(site: Site) -> None:
    if axe_source() is None:
        pytest.skip("no axe-core: python -m tests.support.browser install (needs npm)")
    record = await site.ask(*FOUR)
    await site.ask(SHIP, answerers=("alice",))
    form = await site.open(site.url(record.id), width=PHONE, audit=True)
    await audit(form, "the form")
    await group(form, SHIP.question).get_by_text("Yes", exact=True).click()
    await form.get_by_role("button", name="Submit").click()  # problems shown: Regions, ...
    await expect(form.get_by_role("alert").first).to_be_visible()
    await audit(form, "the form with its problems")
    answered = await site.ask(SHIP)
    page = await site.open(site.url(answered.id), audit=True)
    await group(page, SHIP.question).get_by_text("Later", exact=True).click()
    await page.get_by_role("button", name="Submit").click()
    await expect(page.get_by_text("Answered by alice", exact=True)).to_be_visible()
    await audit(page, "the answered page")
    inbox = await site.open(site.links.inbox_url(Person("web", "alice", "Alice")), audit=True)
    await expect(inbox.get_by_role("listitem")).to_have_count(2)
    await audit(inbox, "the inbox")
    error = await site.open(site.url(record.id, ttl=-5), audit=True)
    assert site.status == 410
    await audit(error, "an error page")


@WIDTHS
async def test_the_form_fits_the_width_and_its_screenshot_is_for_the_docs(
    site: Site, width: int
) -> None:
    record = await site.ask(SHIP, REGIONS, answerers=("alice", "bob"), required=2)
    page = await site.open(site.url(record.id), width=width)
    await fits(page)
    button = await page.get_by_role("button", name="Submit").bounding_box()
    assert button is not None and button["x"] >= 0 and button["x"] + button["width"] <= width
    for textarea in await page.get_by_role("textbox").all():
        box = await textarea.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width
    await group(page, SHIP.question).get_by_text("Yes", exact=True).click()
    shot = await page.screenshot(full_page=True)
    assert shot.startswith(b"\x89PNG")
    if os.environ.get(SCREENSHOTS_ENV) == "1":
        name = "web-form-phone.png" if width == PHONE else "web-form-desktop.png"
        (IMAGES / name).write_bytes(shot)
