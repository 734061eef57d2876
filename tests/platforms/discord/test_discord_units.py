"""Discord's pieces on their own: settings, the step ids, the rendering budget, the entry point."""

from __future__ import annotations

import re
import time

import pytest

from bridge.models import MAX_DESCRIPTION, MAX_LABEL, MAX_QUESTION_TEXT, Answer, QuestionSet
from bridge.platform import PlatformUnavailable, configured_platforms, resolve_platform
from bridge.record import AskRecord, AskStatus, Destination, Responder, Submission
from platforms.discord import DiscordPlatform
from platforms.discord.markup import EMBEDS_BUDGET, embeds_cost, render_message
from platforms.discord.settings import DEFAULT_API_URL, DiscordSettings, load_settings
from platforms.discord.text import fit, mention


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    for name in ("TOKEN", "API_URL", "GATEWAY_URL", "SHARDS", "SHARD_IDS"):
        monkeypatch.delenv(f"DISCORD_{name}", raising=False)
    monkeypatch.chdir(str(tmp_path))  # no .env


def test_settings_defaults_and_missing_token() -> None:
    settings = load_settings()
    assert settings.api_url == DEFAULT_API_URL and settings.gateway_url is None
    assert not settings.sharded
    with pytest.raises(PlatformUnavailable, match="set DISCORD_TOKEN"):
        settings.bot_token()
    assert not DiscordPlatform(settings).configured()
    with pytest.raises(PlatformUnavailable, match="set DISCORD_TOKEN"):
        DiscordPlatform(settings).poster()


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"DISCORD_API_URL": "discord.com/api"}, "DISCORD_API_URL must be an http(s) URL"),
        ({"DISCORD_GATEWAY_URL": "https://gw"}, "DISCORD_GATEWAY_URL must be a ws:// or wss://"),
        ({"DISCORD_SHARDS": "0"}, "DISCORD_SHARDS must be 'auto' or a number"),
        ({"DISCORD_SHARD_IDS": "0"}, "DISCORD_SHARD_IDS needs DISCORD_SHARDS"),
        ({"DISCORD_SHARDS": "2", "DISCORD_SHARD_IDS": "1,2"}, "from 0 to 1"),
    ],
)
def test_bad_settings_are_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], problem: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(PlatformUnavailable, match="Discord settings are invalid") as caught:
        load_settings()
    assert problem in str(caught.value)


def test_settings_urls_and_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "t")
    monkeypatch.setenv("DISCORD_API_URL", "http://proxy:8080/api/v10/")
    monkeypatch.setenv("DISCORD_SHARDS", "4")
    monkeypatch.setenv("DISCORD_SHARD_IDS", "2, 0")
    settings = load_settings()
    assert settings.api_url == "http://proxy:8080/api/v10"  # discord.py appends "/path"
    assert (settings.sharded, settings.shard_count, settings.shard_id_list) == (True, 4, [0, 2])
    monkeypatch.setenv("DISCORD_SHARDS", "auto")
    monkeypatch.delenv("DISCORD_SHARD_IDS")
    assert (load_settings().sharded, load_settings().shard_count) == (True, None)


def test_registered_and_served_when_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(resolve_platform("discord"), DiscordPlatform)
    monkeypatch.setattr("platforms.discord.platform", DiscordPlatform(DiscordSettings(token="t")))
    assert [p.name for p in configured_platforms(["discord"])] == ["discord"]


def test_fit_cuts_visibly_in_utf16_units_and_escapes() -> None:
    assert fit("abc", 3) == "abc"
    assert fit("abcdef", 4) == "abc…"
    assert fit("😀😀😀", 4) == "😀…"  # an astral character counts 2
    assert fit("**x**", 20, markdown=True) == "\\*\\*x\\*\\*"
    assert fit("\u200b", 10) == "(blank)"
    assert fit("a**b", 3, markdown=True) == "a…"  # never a dangling escape before the cut


def test_mentions_of_answerers() -> None:
    assert mention("123") == "<@123>"
    assert mention("role:456") == "<@&456>"
    assert mention("<@everyone>") == "\\<\\@everyone\\>"


def _worst_record(status: AskStatus) -> AskRecord:
    questions = QuestionSet.model_validate(
        {
            "questions": [
                {
                    "question": f"Q{i}" + "😀" * (MAX_QUESTION_TEXT // 2 - 2),
                    "header": "h" * 12,
                    "multiSelect": True,
                    "options": [
                        {
                            "label": f"L{o}" + "*" * (MAX_LABEL - 2),
                            "description": "<" * MAX_DESCRIPTION,
                        }
                        for o in range(4)
                    ],
                }
                for i in range(4)
            ]
        }
    )
    answers = tuple(
        Answer(question=q.question, selected=tuple(q.option_labels()), other_text="_" * 2000)
        for q in questions.questions
    )
    answered = status is AskStatus.ANSWERED
    return AskRecord(
        questions=questions,
        destination=Destination(platform="discord", channel="1"),
        context={"asker": "😀" * 300},
        answerers=tuple(str(10**17 + i) for i in range(30)),
        expires_at=time.time() + 60,
        status=status,
        answers=answers if answered else None,
        answered_by=Responder(user_id="1") if answered else None,
    )


@pytest.mark.parametrize("status", list(AskStatus))
def test_the_worst_case_fits_discords_limits(status: AskStatus) -> None:
    message = render_message(_worst_record(status))
    assert embeds_cost(message.embeds) <= EMBEDS_BUDGET
    assert all(len(e.description or "") <= 4096 for e in message.embeds)
    assert len(message.content or "") <= 2000


def test_the_most_submissions_fit_and_are_escaped() -> None:
    """A pending ask needing 50 people with 30 worst-case submissions: the 10 latest are listed
    in an embed of their own, escaped, within Discord's limits."""
    worst = _worst_record(AskStatus.PENDING)
    answers = tuple(
        Answer(question=q.question, selected=tuple(q.option_labels()), other_text="_*@" * 600)
        for q in worst.questions.questions
    )
    subs = tuple(
        Submission(user_id=str(10**17 + n), name="@everyone", at=float(n), answers=answers)
        for n in range(30)
    )
    record = worst.model_copy(update={"required": 50, "submissions": subs})
    message = render_message(record)
    assert embeds_cost(message.embeds) <= EMBEDS_BUDGET and len(message.embeds) <= 10
    assert all(len(e.description or "") <= 4096 for e in message.embeds)
    listing = (message.embeds[-1].description or "").split("\n")
    assert listing[0].startswith("Needs 50 approvals") and len(listing) == 12
    assert listing[1] == "… and 20 earlier submissions"
    assert listing[2].startswith(f"<@{10**17 + 20}> answered L0\\*\\*")
    typed = [line.split("> ", 1)[1] for line in listing[2:]]  # after the bridge's own mention
    assert all(re.search(r"(?<!\\)[*_@]", text) is None for text in typed)  # escaped


@pytest.mark.parametrize("status", list(AskStatus))
def test_an_ended_ask_is_shown_without_descriptions_whatever_the_store_kept(
    status: AskStatus,
) -> None:
    """Descriptions help a person decide: shown while pending only. So the final state looks the
    same before and after the store dropped them (a late click re-renders from what it kept)."""
    record = _worst_record(status)
    shown = "".join(e.description or "" for e in render_message(record).embeds)
    if status is AskStatus.PENDING:
        assert "\\<" in shown  # the descriptions, escaped
        return
    assert "<" not in shown
    kept = record.model_copy(update={"questions": record.questions.undescribed()})
    assert [e.to_dict() for e in render_message(kept).embeds] == [
        e.to_dict() for e in render_message(record).embeds
    ]
