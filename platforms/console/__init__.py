"""The terminal as a platform: ask the person at the keyboard, the handler of last resort.

``bridge`` finds this through the ``ask_bridge.platforms`` entry point ``console`` when no handler
is configured and stdin and stdout are a TTY, and calls :meth:`ConsolePlatform.callback`, an
async handler: the tool awaits it on the caller's loop, or on the loop synchronous calls share.

It is a platform like the chat ones, over the same flow ask -> post -> click -> resolve -> show,
and holds no rule of its own: the ask is made by :class:`bridge.asking.ChatHandler` (its wait,
expiry and cancellation), the clicks are judged by the entry point of
:func:`bridge.clicks.answer_clicks`, and the words are :mod:`bridge.replies`'. What is its own:

* **markup** (:mod:`~platforms.console.markup`): the printed prompt -- header and question,
  numbered options with descriptions, and a hint -- and the outcome line;
* **a poster** (:mod:`~platforms.console.poster`): the terminal is the ask's one message;
* **a payload parser and a responder** (:mod:`~platforms.console.prompt`): typed lines as a
  form's picks, submitted as one click, and the verdict printed (a question whose answer the
  bridge refused is asked again, with its problem);
* **the keyboard** (:mod:`~platforms.console.keyboard`): lines read in a thread of their own, so
  no event loop waits on ``input()``.

No receiver: the clicks come from the process that waits for their answer, judged against a
store of that one ask, so ``ask`` and ``serve`` refuse the console by name. One ask at a time
has the keyboard: concurrent calls in one process wait their turn. End of input before an answer
ends the call with one line (the ask cancelled); Ctrl-C cancels the ask.
"""

from __future__ import annotations

import sys
from typing import Any

from bridge.asking import AskPolicy
from bridge.deferred import AskUserDeferred
from bridge.models import Question
from bridge.record import MAX_EXPIRES
from bridge.result import AskUserAnswered
from platforms.console import prompt
from platforms.console.keyboard import KEYBOARD

WAITING = AskPolicy(wait=MAX_EXPIRES, expires=MAX_EXPIRES, on_timeout="error")
"""A person at a terminal is waited for as long as an ask may live, and the call then ends as
unanswered: nobody would read a deferred answer's feed."""


class ConsolePlatform:
    """The terminal as a platform: :attr:`callback` asks at the keyboard, following ``policy``.
    It has no chat channel, so it is not a :class:`bridge.platform.Platform` (no receiver, no
    serve loop): ``ask`` and ``serve`` refuse it by name."""

    name = "console"

    def __init__(self, policy: AskPolicy = WAITING) -> None:
        self.policy = policy

    async def callback(
        self, questions: list[Question], context: dict[str, Any]
    ) -> AskUserAnswered | AskUserDeferred:
        """The handler: ask every question on the terminal and return the answers."""
        async with KEYBOARD.held():
            return await prompt.ask(KEYBOARD, sys.stdout, self.policy, questions, context)


platform = ConsolePlatform()
"""The entry point ``ask_bridge.platforms: console``."""
