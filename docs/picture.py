"""Draw ``docs/images/messages.svg``: one ask as Slack and Discord show it, while it waits and once
it is answered.

Run from the repository root: ``.venv/bin/python docs/picture.py`` (writes the file) or
``.venv/bin/python docs/picture.py --check`` (exit status 1 when the file is not what the
renderers build today; ``tests/test_readme.py`` runs the same check).

Every text, button and colour inside a message comes from the platforms' own renderers,
``platforms/slack/markup.py`` and ``platforms/discord/markup.py``, for the sample asks below:
this script only lays out what they return (Slack's blocks as sent, Discord's embeds and view).
What a chat client adds is drawn here: the app's name and avatar, and mentions, which a client
shows by name (``<!subteam^S0ONCALL>`` as @oncall); :data:`NAMES` says which name each id shows.
Widths are estimated on the wide side, not measured with a real font, so lines wrap about where
a client would.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from bridge.models import Answer, QuestionSet
from bridge.record import AskRecord, AskStatus, Destination, Responder

OUT = Path(__file__).resolve().parent / "images" / "messages.svg"

QUESTIONS = QuestionSet.model_validate(
    {
        "questions": [
            {
                "question": "Ship release 2.4 to production now?",
                "header": "Deploy",
                "options": [
                    {"label": "Ship it", "description": "The canary has been clean for an hour"},
                    {"label": "Hold", "description": "Wait for the QA sign-off"},
                    {"label": "Roll back", "description": "Undo 2.3 as well"},
                ],
            }
        ]
    }
)
ASKED_AT = 1_796_893_200.0  # fixed, so the picture is the same on every run
NAMES = {
    "S0ONCALL": "oncall",
    "U0ALICE": "alice",
    "987654321098765432": "oncall",  # a Discord role
    "123456789012345678": "alice",
}
"""What a client shows for each mentioned id (it looks the name up; the message holds the id)."""


def record(platform: str, answerers: tuple[str, ...], who: str, *, answered: bool) -> AskRecord:
    """The sample ask on ``platform``, pending or answered by ``who`` with the first option."""
    ask = AskRecord(
        id="AAAAAAAAAAAAAAAAAAAAAA",
        questions=QUESTIONS,
        destination=Destination(platform=platform, channel="C0DEPLOY"),
        context={"agent": "deploy-bot"},
        answerers=answerers,
        created_at=ASKED_AT,
        expires_at=ASKED_AT + 86_400,
    )
    if not answered:
        return ask
    first = QUESTIONS.questions[0]
    return ask.model_copy(
        update={
            "status": AskStatus.ANSWERED,
            "answers": (Answer(question=first.question, selected=(first.options[0].label,)),),
            "answered_by": Responder(user_id=who, name="alice"),
            "answered_at": ASKED_AT + 240,
            "closed_at": ASKED_AT + 240,
        }
    )


# -- text: runs of one style, measured and wrapped ---------------------------------------------


@dataclass(frozen=True)
class Run:
    text: str
    bold: bool = False
    italic: bool = False
    mention: bool = False


Line = list[Run]

NARROW = set("ijlt.,:;'|!()[] ")
WIDE = set("mwMW@%")


def width(text: str, size: float, *, bold: bool = False) -> float:
    """An estimate of ``text``'s width in a proportional sans-serif font of ``size`` px."""
    units = 0.0
    for ch in text:
        if ch in NARROW:
            units += 0.3
        elif ch in WIDE:
            units += 0.85
        elif ch.isupper() or ch.isdigit():
            units += 0.68
        elif ord(ch) > 0x2000:  # symbols and emoji
            units += 1.0
        else:
            units += 0.57
    return units * size * (1.1 if bold else 1.0)


def wrap(line: Line, size: float, most: float) -> list[Line]:
    """``line`` broken at spaces so that each piece is at most ``most`` px wide."""
    out: list[Line] = [[]]
    used = 0.0
    for run in line:
        for word in re.findall(r"\S+\s*|\s+", run.text):
            w = width(word.rstrip(), size, bold=run.bold)
            if used and used + w > most:
                out.append([])
                used = 0.0
                word = word.lstrip()
            out[-1].append(Run(word, run.bold, run.italic, run.mention))
            used += width(word, size, bold=run.bold)
    return out


SLACK_TOKEN = re.compile(r"\*(?P<b>[^*\n]+)\*|_(?P<i>[^_\n]+)_|<(?P<m>[@!][^>]*)>")
DISCORD_TOKEN = re.compile(r"\*\*(?P<b>(?:\\.|[^*])+)\*\*|\*(?P<i>(?:\\.|[^*])+)\*|<(?P<m>@&?\d+)>")


def mention_name(target: str) -> str:
    """``@U0ALICE``, ``!subteam^S0ONCALL``, ``@&123``, ``!here``: the name a client shows."""
    key = re.sub(r"^(?:@&?|!subteam\^)", "", target)
    return "@" + NAMES.get(key, key.lstrip("!"))


def slack_unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def discord_unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse(text: str, token: re.Pattern[str], unescape: Any) -> list[Line]:
    """Slack mrkdwn or Discord markdown, as far as the renderers use it, into styled lines."""
    lines: list[Line] = []
    for raw in text.split("\n"):
        line: Line = []
        pos = 0
        for m in token.finditer(raw):
            if m.start() > pos:
                line.append(Run(unescape(raw[pos : m.start()])))
            if m["b"] is not None:  # a bold span holds no further markup in their output
                line.append(Run(unescape(m["b"]), bold=True))
            elif m["i"] is not None:
                line.append(Run(unescape(m["i"]), italic=True))
            else:
                line.append(Run(mention_name(m["m"]), mention=True))
            pos = m.end()
        if pos < len(raw):
            line.append(Run(unescape(raw[pos:])))
        lines.append(line)
    return lines


# -- drawing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Theme:
    font: str
    text: str
    muted: str
    mention_fill: str
    mention_text: str


SLACK = Theme(
    font="Lato, 'Helvetica Neue', Helvetica, Arial, sans-serif",
    text="#1d1c1d",
    muted="#616061",
    mention_fill="#e8f5fa",
    mention_text="#1264a3",
)
DISCORD = Theme(
    font="'gg sans', 'Noto Sans', 'Helvetica Neue', Helvetica, Arial, sans-serif",
    text="#dbdee1",
    muted="#b5bac1",
    mention_fill="#3c4270",
    mention_text="#c9cdfb",
)


class Canvas:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, fill: str, **extra: Any) -> None:
        attrs = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in extra.items())
        self.parts.append(
            f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" fill="{fill}"{attrs}/>'
        )

    def text(
        self,
        x: float,
        y: float,
        runs: Line,
        size: float,
        theme: Theme,
        colour: str,
        *,
        anchor: str = "start",
        bold: bool = False,
    ) -> None:
        """One line at baseline ``y``; mentions get the client's highlight behind them."""
        cx = x
        for run in runs:
            w = width(run.text, size, bold=run.bold or bold)
            if run.mention:
                self.rect(cx - 1, y - size + 1, w + 2, size + 4, theme.mention_fill, rx=3)
            cx += w
        spans = []
        for run in runs:
            style = ""
            if run.bold or bold:
                style += ' font-weight="bold"'
            if run.italic:
                style += ' font-style="italic"'
            if run.mention:
                style += f' fill="{theme.mention_text}"'
            spans.append(f"<tspan{style}>{escape(run.text)}</tspan>")
        self.parts.append(
            f'<text x="{x:g}" y="{y:g}" font-size="{size:g}" fill="{colour}" '
            f'text-anchor="{anchor}" xml:space="preserve">{"".join(spans)}</text>'
        )

    def paragraph(
        self, x: float, y: float, text: list[Line], size: float, most: float, theme: Theme
    ) -> float:
        """Lines wrapped to ``most`` px from top ``y``; the y below them."""
        step = size * 1.45
        for line in text:
            for piece in wrap(line, size, most) if line else [[]]:
                y += step
                self.text(x, y - step * 0.3, piece, size, theme, theme.text)
        return y


PANEL = 470
GAP = 20
PAD = 16


def slack_panel(c: Canvas, x: float, y: float, ask: AskRecord, title: str) -> float:
    """Slack's message for ``ask``: the blocks as sent, in Slack's light theme."""
    from platforms.slack.markup import render_message

    theme = SLACK
    blocks: list[dict[str, Any]] = render_message(ask).wire
    body = Canvas()
    left, top = x + PAD + 48, y + 36
    body.rect(x + PAD, top, 36, 36, "#4a154b", rx=6)
    body.text(x + PAD + 18, top + 24, [Run("ab", bold=True)], 14, theme, "#ffffff", anchor="middle")
    body.text(left, top + 13, [Run("ask-bridge", bold=True)], 15, theme, theme.text)
    badge = left + width("ask-bridge", 15, bold=True) + 8
    body.rect(badge, top + 1, 30, 15, "#e8e8e8", rx=3)
    body.text(
        badge + 15, top + 12, [Run("APP", bold=True)], 10, theme, theme.muted, anchor="middle"
    )
    cy = top + 20
    most = PANEL - (left - x) - PAD
    for block in blocks:
        if block["type"] == "context":
            text = "\n".join(e["text"] for e in block["elements"])
            lines = parse(text, SLACK_TOKEN, slack_unescape)
            for line in lines:
                for piece in wrap(line, 13, most):
                    cy += 19
                    body.text(left, cy - 5, piece, 13, theme, theme.muted)
        elif block["type"] == "section":
            lines = parse(block["text"]["text"], SLACK_TOKEN, slack_unescape)
            cy = body.paragraph(left, cy + 4, lines, 15, most, theme)
        elif block["type"] == "actions":
            cy += 10
            bx = left
            for element in block["elements"]:
                label = element["text"]["text"]
                w = width(label, 14, bold=True) + 24
                if bx + w > x + PANEL - PAD:
                    bx, cy = left, cy + 36
                primary = element.get("style") == "primary"
                fill = "#007a5a" if primary else "#ffffff"
                stroke = "#007a5a" if primary else "#c6c6c6"
                body.rect(bx, cy, w, 28, fill, rx=4, stroke=stroke)
                colour = "#ffffff" if primary else theme.text
                run = [Run(label, bold=True)]
                body.text(bx + w / 2, cy + 19, run, 14, theme, colour, anchor="middle")
                bx += w + 8
            cy += 28
        else:  # the renderer builds nothing else today: draw it rather than drop it silently
            raise ValueError(f"no drawing for a Slack {block['type']!r} block")
    height = cy - y + PAD
    c.rect(x, y, PANEL, height, "#ffffff", rx=8, stroke="#dddddd")
    c.text(x + PAD, y + 22, [Run(title)], 12, theme, theme.muted)
    c.parts.append(f'<g font-family="{escape(theme.font)}">')
    c.parts.extend(body.parts)
    c.parts.append("</g>")
    return height


def discord_panel(c: Canvas, x: float, y: float, ask: AskRecord, title: str) -> float:
    """Discord's message for ``ask``: its content, embeds and buttons, in Discord's dark theme."""
    from platforms.discord.markup import render_message

    theme = DISCORD
    message = render_message(ask)
    body = Canvas()
    left, top = x + PAD + 52, y + 36
    body.parts.append(f'<circle cx="{x + PAD + 20:g}" cy="{top + 20:g}" r="20" fill="#5865f2"/>')
    body.text(x + PAD + 20, top + 25, [Run("ab", bold=True)], 14, theme, "#ffffff", anchor="middle")
    body.text(left, top + 14, [Run("ask-bridge", bold=True)], 16, theme, "#f2f3f5")
    badge = left + width("ask-bridge", 16, bold=True) + 8
    body.rect(badge, top + 2, 30, 15, "#5865f2", rx=3)
    body.text(badge + 15, top + 13, [Run("APP", bold=True)], 10, theme, "#ffffff", anchor="middle")
    cy = top + 20
    most = PANEL - (left - x) - PAD
    if message.content:
        cy = body.paragraph(
            left, cy, parse(message.content, DISCORD_TOKEN, discord_unescape), 15, most, theme
        )
    for embed in message.embeds:
        cy += 8
        inner = Canvas()
        ey = cy + 10
        if embed.author.name:
            run = [Run(discord_unescape(embed.author.name), bold=True)]
            ey += 18
            inner.text(left + 16, ey - 4, run, 13, theme, "#f2f3f5")
        if embed.title:
            run = [Run(discord_unescape(embed.title), bold=True)]
            ey += 22
            inner.text(left + 16, ey - 4, run, 16, theme, "#f2f3f5")
        if embed.description:
            lines = parse(embed.description, DISCORD_TOKEN, discord_unescape)
            ey = inner.paragraph(left + 16, ey + 2, lines, 14, most - 32, theme)
        ey += 12
        colour = f"#{embed.colour.value:06x}" if embed.colour is not None else "#1e1f22"
        body.rect(left, cy, most, ey - cy, "#2b2d31", rx=4)
        body.rect(left, cy, 4, ey - cy, colour, rx=2)
        body.parts.extend(inner.parts)
        cy = ey
    if message.view is not None:
        cy += 8
        bx = left
        for item in message.view.children:
            label = str(getattr(item, "label", ""))
            w = width(label, 14, bold=True) + 32
            if bx + w > x + PANEL - PAD:
                bx, cy = left, cy + 40
            style = getattr(getattr(item, "style", None), "name", "secondary")
            fill = {"primary": "#5865f2", "success": "#248046", "danger": "#da373c"}
            body.rect(bx, cy, w, 32, fill.get(style, "#4e5058"), rx=4)
            run = [Run(label, bold=True)]
            body.text(bx + w / 2, cy + 21, run, 14, theme, "#ffffff", anchor="middle")
            bx += w + 8
        cy += 32
    height = cy - y + PAD
    c.rect(x, y, PANEL, height, "#313338", rx=8)
    c.text(x + PAD, y + 22, [Run(title)], 12, theme, theme.muted)
    c.parts.append(f'<g font-family="{escape(theme.font)}">')
    c.parts.extend(body.parts)
    c.parts.append("</g>")
    return height


def draw() -> str:
    """The SVG text."""
    c = Canvas()
    y = 0.0
    for answered, state in ((False, "waiting for an answer"), (True, "answered")):
        slack = record("slack", ("S0ONCALL",), "U0ALICE", answered=answered)
        discord = record(
            "discord", ("role:987654321098765432",), "123456789012345678", answered=answered
        )
        row = Canvas()
        h1 = slack_panel(row, 0, y, slack, f"Slack: {state}")
        h2 = discord_panel(row, PANEL + GAP, y, discord, f"Discord: {state}")
        c.parts.extend(row.parts)
        y += max(h1, h2) + GAP
    w, h = 2 * PANEL + GAP, y - GAP
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:g}" height="{h:g}" '
        f'viewBox="0 0 {w:g} {h:g}" font-family="{escape(SLACK.font)}">\n'
        "<title>One ask in Slack and in Discord, waiting and answered</title>\n"
        "<!-- Generated by docs/picture.py from platforms/slack/markup.py and "
        "platforms/discord/markup.py: do not edit by hand. -->\n"
    )
    return head + "\n".join(c.parts) + "\n</svg>\n"


def main(argv: list[str]) -> int:
    svg = draw()
    if argv == ["--check"]:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != svg:
            print(f"{OUT} is out of date: run .venv/bin/python docs/picture.py", file=sys.stderr)
            return 1
        return 0
    if argv:
        print("usage: docs/picture.py [--check]", file=sys.stderr)
        return 2
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(svg, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
