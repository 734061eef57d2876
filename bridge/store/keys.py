"""THE Redis key scheme of ask-bridge, and the field names of the record hash, in one place.

Per ask ``<id>`` (every key carries the hash tag ``{<id>}``, so one ask lives in one Cluster hash
slot and one Lua script can change all of it atomically):

``<prefix>:{<id>}:rec``     hash: the record, fields in :class:`Fields`. TTL: until ``expires_at``
                            + retention while pending, then retention.
``<prefix>:{<id>}:log``     list: the lifecycle part of the audit trail (everything but noise),
                            JSON events oldest first, never trimmed. Same TTL.
``<prefix>:{<id>}:noise``   list: the noise part (refused, late, opened, resubmitted:
                            ``NOISE_KINDS`` in ``base.py``), the newest ``noise_cap`` only; the
                            record's ``noise_dropped`` counts the rest. Same TTL. Each event
                            carries a ``seq`` (the record's ``seq`` counter) so ``history``
                            merges the two.
``<prefix>:{<id>}:lease``   string with a short TTL: "a live process will take this answer". Set
                            when the ask is created (unless deferred) and refreshed while a call
                            waits on it, and after it took the answer until it confirms.
``<prefix>:{<id>}:wake``    set: the wake-up channel (``waker``; on Cluster the one of this
                            ask's slot) of each process that waits for the pending ask (joined
                            when it creates the ask to wait for it, or starts waiting, or
                            observes it: ``Store.observe``, which sets no lease); the script
                            that ends the ask publishes on these, then deletes the set. Same
                            TTL as the record. Kept apart from the lease, so a waiter whose
                            lease lapsed (its process stalled) is still woken.

Global keys (each one key, so each in its own slot: on Cluster a script over an ask's keys never
touches them, and the process writes them right after the script; outside Cluster the same script
writes them in its one atomic step, as each entry below says):

``<prefix>:due``     sorted set: every ask that still needs a sweeper's attention, scored by when.
                     Pending asks are scored by ``expires_at``; an ended ask stays until its
                     hand-off is settled (``none``, ``sent``, ``confirmed``) AND its final state
                     is shown (``rendered``, or no message, or ``RENDER_TRIES`` claims spent),
                     scored by when to check it again. TTL refreshed on every write.
``<prefix>:timers``  sorted set: every pending ask with reminders or an escalation still to come
                     (``AskRecord.follow_ups``), scored by when its next one is due, or when a
                     claim of it that nobody marked done may be claimed again. Added (before the
                     create script) when such an ask is created; each sweep claims what is due
                     through the ``timer`` script (at most one step per ask at a time) and
                     rescores or drops it; an ask that ends is dropped (by whoever ended it,
                     else by its next visit). A sweeper that finds a step claimed by another
                     only lowers the score (ZADD LT), so it never pushes back the next step's
                     time that the claimant's ``timer_done`` may have written meanwhile. TTL
                     refreshed on every write.
``<prefix>:pending``  sorted set: one member per pending ask, ``<platform>\0<id>``
                     (:func:`pending_member`; the platform of the body's destination), all scored
                     0 so a platform's asks are one lexicographic range:
                     :meth:`~bridge.store.base.Store.count_pending` is one ZCARD or ZLEXCOUNT,
                     never a read of the asks. The script adds the member on create and removes
                     it when the ask leaves ``pending`` (and again when it is settled, a repair).
                     On Cluster the caller does both, after the script, and a sweep's visits of
                     ended asks remove them again: the count can be off there by the asks whose
                     ending process died in the instant between the script and that step, until
                     the sweeper next visits them. Asks created before this index existed are not
                     counted. TTL refreshed on every create.
``<prefix>:created``  sorted set: the id of each pending ask, scored by its ``created_at``: the
                     pending asks newest first, a page at a time
                     (:meth:`~bridge.store.base.Store.pending_page`; age filters are score
                     bounds, so no ask outside them is read). Written with ``pending``, in the
                     same steps (on Cluster by the caller, with it); pending asks a version
                     before this index made join it when a listing finds the two indexes differ
                     in size (op ``index_created``). TTL refreshed on every create.
``<prefix>:feed``    stream: answers (and ends) of deferred asks, one entry ``{"ask": <id>}`` each,
                     read through a consumer group; trimmed by age (retention). TTL refreshed.
``<prefix>:ended``   stream: every ask that left ``pending`` (answered, expired, cancelled), one
                     entry ``{"ask": <id>}`` each, read through the consumer group ``notify`` by the
                     outcome notifications (webhooks); trimmed by age (retention). TTL refreshed.
                     Written by the script that ends the ask (one atomic step), except on
                     Cluster (another slot): there right after it, and the record's ``told``
                     keeps the ask in ``due`` until it is, so a sweep writes it should that
                     process die in between.
``<prefix>:epoch``   string: a random value set once (SET NX) by the first process to use the
                     deployment. Each process remembers it and compares on every sweep (and when
                     a wait finds its ask missing): gone or changed means Redis lost its data
                     (restarted without persistence). TTL refreshed by every sweep.
``<prefix>:wake:<token>``  pub/sub channel of one process (one store): the id of each ask that
                     left ``pending`` while that process waited for it, a newline and the record
                     (``HGETALL`` as a JSON array: the waiting call returns it without reading it
                     again, see the hand-off below), so a wake-up reaches only
                     the process that waits for the ask. Plain PUBLISH, from inside the script
                     that ends the ask -- outside Cluster, and on a Cluster without sharded
                     pub/sub (before Redis 7), where the cluster bus carries it to every node.
``<prefix>:wake:<token>:{<tag>}``  on a Cluster with sharded pub/sub: that process's channel in
                     one hash slot, ``<tag>`` a short string whose CRC16 falls in that slot
                     (:func:`bridge.store.redis.shards.slot_tag`). A waiter registers the one of
                     its ask's slot, so the script that ends the ask SPUBLISHes it in its own slot
                     (a script may SPUBLISH only there: valkey refuses another node's channel,
                     "Attempted to access a non local key in a cluster node script"), still within
                     its one atomic step -- an ending process that dies cannot leave a waiter
                     unwoken -- and the message stays on the node that serves the slot, to the
                     one connection of the waiting process there. The script tells the two kinds
                     apart by the closing ``}``. A process SSUBSCRIBEs a slot's channel the first
                     time it waits in that slot (:mod:`bridge.store.redis.shards`), and also
                     PSUBSCRIBEs ``<prefix>:wake:<token>:*`` on its plain subscription, which
                     hears these channels should a process from before them (a rolling upgrade)
                     end the ask with a plain PUBLISH.
``<prefix>:probe``   sharded pub/sub channel nobody hears: a Cluster store SPUBLISHes to it once
                     when it starts, to learn whether the server serves sharded pub/sub.
``<prefix>:events``  pub/sub channel shared by every process: wake-ups of asks held by a process
                     from before per-process channels (a lease, no wakers: a rolling upgrade).
``<prefix>:terms``   pub/sub channel: each new ask's id, a newline and its body, published by
                     its creation (not on Cluster) for the processes that judge clicks
                     (``serve``: :meth:`~bridge.store.base.Store.learn_terms`), which keep its
                     terms before its first click comes rather than read them then.

Hand-off of a finished ask (``handoff`` field), decided atomically when it leaves ``pending``:
``waiter`` (answered while a lease was live: the waiting call, woken with the record, returns
it -- or, when it learned of the answer by reading the ask, takes it -> ``taken`` -- keeping the
lease alive, and once it returned the answer confirms it -> ``confirmed``), ``feed``
(deferred, or nobody holds a lease: it must be put on the feed -> ``sent`` once XADDed), ``none``
(closed, never deferred: nobody to tell). A ``waiter`` hand-off whose lease lapses without being
taken, and a ``taken`` one whose lease lapses without a confirm (the process died holding it), is
moved to ``feed`` by the sweeper, so an answer is never lost when the waiting process dies.
A cancelled waiting call releases its ask: ``waiter``, ``taken`` or ``confirmed`` (its take ran but
the call was cancelled before it returned, so it returned nothing) -> ``feed``. Only that call
releases, so an answer a call returned is never also fed.

Reminders and escalation (the ``timer`` and ``timer_done`` scripts): a step is claimed only
while the ask is pending and the step is not done (``reminded``, ``escalated``); the claim
(``timer_step``/``timer_at``/``timer_by``/``timer_tries``) keeps other sweepers off it for the
timer-retry interval, after which a claim never marked done (its process died, or the post
failed) is claimed again -- up to ``TIMER_TRIES`` claims, then the step is given up. So each step
is posted once, or twice only if a process dies between posting and ``timer_done``.

Telling the ended-asks stream: the script that ends an ask XADDs it to ``ended`` and sets ``told``
to ``"1"`` -- except on Cluster, where it sets ``"0"``, and the process then XADDs and runs
``told`` (-> ``"1"``). An ask is not settled while ``told`` is ``"0"``, so the sweeper's
``settle`` answers ``tell`` for one whose ender died in between.

Showing the final state: ``claim_render`` records ``render_at`` (and counts ``render_tries``) when
nobody claimed within the render interval (a sweep's claim, ``unshown``, also not once
``rendered``); ``mark_rendered`` sets ``rendered``.

Retention: once an ask's outcome reached whoever gets it, its body drops its options'
descriptions (they help a person decide; every final state shows an ended ask without them, but
the tool result echoes the questions whole, see :class:`bridge.models.Option`). When that is
depends on the hand-off: ``none`` (nobody to tell) when the ask is settled -- by its ending if it
has no message, else once its final state is shown (``tidy``); ``waiter`` when the waiting
call confirms (``confirm``, or a settling step that finds it ``confirmed``); ``feed`` when the
feed's delivery of it is acknowledged (``acked``, run by ``Store.ack`` after the XACK, for the
entry named by ``fed``). A feed entry never acknowledged keeps them for the retention; an answer a
waiting call confirmed and was then cancelled before it read the reply (``release`` of a
``confirmed`` hand-off) is fed without them. Once it is settled (nothing left for a sweeper; an
ask that ends with no message to show it on is settled by its ending, as no sweep visits it), the
fields only a pending or just-ended ask needs (``exp``, ``attempt``, ``render_by``, and the
reminders' ``reminded_at`` and ``timer_*`` claim, and of an ask that needed several people the
``suba:`` fields and the ``subk:`` fields a late click no longer compares: all but those equal to
the accepted answers) are dropped, and its answers keep no question texts (``slim``). What stays
for the retention: the question set (a late click shows the final state again from it and is
judged on its labels), the outcome and the audit trail.
The audit trail's answers never repeat the question texts (answer ``i`` answers question ``i``).
An ask ended by a version that kept every description keeps them in its body: every reader takes
either form, and settling it again (``tidy``) drops them, unless it waits on the
feed (``sent``). (Versions before descriptions were ever dropped cannot read an option without
one: a process still on one during a rolling upgrade fails on asks whose outcome was handed over
under this one.)
Packing the settled record's fields into one field was measured (``MEMORY USAGE``, valkey 9.1):
about 130 bytes saved of a realistic ended ask's 3.2 KB -- the hash costs little per field -- so
they stay separate fields that the scripts read and write one by one. Dropping the descriptions
rebuilds the body: about 15 us of the server's time for realistic texts in a tight loop, about 40
us within an expiry storm (its cache cold), which is why a posted ask that expired keeps them
until it is shown, and a storm's store part does not pay it.

The scripts (``bridge/store/redis/lua/``) spell the field names literally (Lua cannot import
them), and name the keys in the order :class:`bridge.store.redis.scripts.AskKeys` gives them: a
change here is a change there.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "askbridge"


class Fields:
    """Field names of the record hash (``<prefix>:{<id>}:rec``)."""

    BODY = "body"
    """JSON of the fields fixed at creation (``CREATION_FIELDS`` in ``base.py``); a repeated
    create compares it; see :func:`bridge.store.redis.codec.body`."""
    STATUS = "status"
    """``pending``, ``answered``, ``expired`` or ``cancelled``."""
    EXPIRES = "exp"
    """``expires_at`` as a number, read by Lua to expire an ask (sweep, or a late submit)."""
    PLATFORM = "platform"
    """The destination's platform (as in the ``pending`` index's member), written at creation
    so a sweep's visit answers with it without reading the body (on Redis 7 the body entering
    Lua was a fifth of an expiry's server time); dropped once the ask is settled. Absent on an
    ask an earlier version created: the scripts then read it from the body."""
    ANSWERERS = "answerers"
    """JSON list of user and group ids allowed to answer; absent: anyone. Today's store judges
    who may answer from the ``body`` (:mod:`bridge.store.ask_terms`); this field is still
    written for the scripts of earlier versions, which a replica not yet upgraded runs."""
    DEFERRED = "deferred"
    """``"1"`` when the outcome goes to the feed, not a waiting call; else absent (or ``"0"``)."""
    MESSAGE = "message"
    """JSON of where the question set was posted (absent until posted)."""
    ANSWERS = "answers"
    """Canonical JSON of the accepted answers (equal answers, equal text; absent until answered).
    Once the ask is settled (``SLIM``), without the question texts, like the ``subk:`` fields."""
    SLIM = "slim"
    """``"1"`` once a settled answered ask's ``answers`` and ``subk:`` fields dropped their
    question texts (the body holds them; answer ``i`` answers question ``i``): a late submission
    is compared in that form, and the codec puts the texts back when it reads the record."""
    BY = "by"
    """JSON of the responder whose answer was accepted."""
    BY_USER = "by_user"
    """That responder's user id, for Lua to recognise a repeated submission."""
    AT = "at"
    """When the answer was accepted."""
    CLOSED_AT = "closed_at"
    """When the ask expired or was cancelled."""
    HANDOFF = "handoff"
    """Who gets the outcome: absent while pending, then ``waiter``/``taken``/``confirmed``/
    ``feed``/``sent``/``none`` (see the module docstring)."""
    FED = "fed"
    """Id of the feed entry that delivers this ask; later duplicate entries are dropped."""
    TOLD = "told"
    """``"0"`` from the end of the ask until it is on the ended-asks stream, then ``"1"``
    (absent while pending): the ask stays in ``due`` until then."""
    TOLD_BY = "told_by"
    """Id of the ended-asks entry that delivers this ask; later duplicate entries are dropped."""
    ATTEMPT = "attempt"
    """Token of the submission that was accepted: its retry is recognised as the same attempt."""
    SEQ = "seq"
    """Counter numbering the audit-trail events of both lists, for merging them in order."""
    NOISE_DROPPED = "noise_dropped"
    """How many noise events were trimmed from the ``noise`` list."""
    RENDER_AT = "render_at"
    """When the last claim to show the final state was made (absent: never)."""
    RENDER_BY = "render_by"
    """Token of that claim, so a retried claim is recognised as the same."""
    RENDER_TRIES = "render_tries"
    """How many claims to show the final state were made."""
    RENDERED = "rendered"
    """``"1"`` once the final state was shown on every message of the ask (reset when an
    escalation's message is recorded after the ask ended: that one is still to be shown)."""
    REQUIRED = "req"
    """How many people must agree (``required``), set at creation only when more than one: a
    one-person ask has no such field and its submissions read nothing more."""
    SUBMISSION = "sub:"
    """``sub:<key>``: that person's current submission to an ask needing several people,
    JSON ``{"at", "user_id", "name", "answers"}`` (answers without their question texts, as in
    the audit trail); a newer submission by the same person overwrites it. The key is the user
    id, or for a person linked across platforms ``person:<name>`` (:mod:`bridge.identities`),
    so their submission is one whichever platform it came from; the same key names the fields
    below."""
    SUBMISSION_KEY = "subk:"
    """``subk:<key>``: that submission's answers as canonical JSON (equal answers, equal
    text; ``ANSWERS`` is written the same way), prefixed with ``T`` when it holds typed text, so
    Lua counts agreement by comparing texts and a typed one never agrees, and with ``W`` once it
    was withdrawn (``SUBMISSION_WITHDRAWN``), which never agrees either. Its absence while
    pending tells a person's first submission (``submitted``) from a change (``resubmitted``).
    Once the ask is settled only those equal to the accepted answers are kept (a repeat by an
    agreeing person is ``REPEATED``; nobody else's is ever compared again)."""
    SUBMISSION_ATTEMPT = "suba:"
    """``suba:<key>``: the token of the attempt that recorded it, so its retry is that
    attempt (``RECORDED`` again, not ``REPEATED``). Dropped once the ask is settled."""
    SUBMISSION_WITHDRAWN = "subw:"
    """``subw:<key>``: ``"1"`` when that submission was withdrawn: its person no longer had the
    authority that admitted it when it would have counted (``Store.submit``'s ``verified``).
    Shown, never counted; a new submission by the person clears it."""
    REMINDED = "reminded"
    """How many reminders were posted (or given up); absent: none."""
    REMINDED_AT = "reminded_at"
    """When the last reminder was posted: the next is due ``remind_after`` seconds later."""
    ESCALATED = "escalated"
    """``"1"`` once the escalation was posted (or given up)."""
    ESCALATIONS = "escalations"
    """JSON list of the messages the ask was posted as when it escalated (absent: none)."""
    TIMER_STEP = "timer_step"
    """The reminder or escalation a sweeper claimed and has not marked done: ``escalate`` or
    ``remind:<n>``; with ``timer_at`` (when), ``timer_by`` (the claim's token, so its re-sent
    claim is recognised) and ``timer_tries`` (claims of that step so far)."""
    TIMER_AT = "timer_at"
    TIMER_BY = "timer_by"
    TIMER_TRIES = "timer_tries"


@dataclass(frozen=True)
class Keys:
    """Key names under one ``prefix`` (several deployments can share one Redis)."""

    prefix: str = DEFAULT_PREFIX

    def rec(self, ask_id: str) -> str:
        return f"{self.prefix}:{{{ask_id}}}:rec"

    def log(self, ask_id: str) -> str:
        return f"{self.prefix}:{{{ask_id}}}:log"

    def lease(self, ask_id: str) -> str:
        return f"{self.prefix}:{{{ask_id}}}:lease"

    def noise(self, ask_id: str) -> str:
        return f"{self.prefix}:{{{ask_id}}}:noise"

    def wake(self, ask_id: str) -> str:
        return f"{self.prefix}:{{{ask_id}}}:wake"

    def ask_keys(self, ask_id: str) -> list[str]:
        """The KEYS of every per-ask script call, in the order the scripts take them
        (:class:`bridge.store.redis.scripts.AskKeys`)."""
        return [
            self.rec(ask_id),
            self.log(ask_id),
            self.lease(ask_id),
            self.noise(ask_id),
            self.wake(ask_id),
        ]

    @property
    def due(self) -> str:
        return f"{self.prefix}:due"

    @property
    def timers(self) -> str:
        return f"{self.prefix}:timers"

    @property
    def pending(self) -> str:
        return f"{self.prefix}:pending"

    @property
    def created(self) -> str:
        return f"{self.prefix}:created"

    @property
    def feed(self) -> str:
        return f"{self.prefix}:feed"

    @property
    def ended(self) -> str:
        return f"{self.prefix}:ended"

    @property
    def epoch(self) -> str:
        return f"{self.prefix}:epoch"

    @property
    def events(self) -> str:
        return f"{self.prefix}:events"

    @property
    def terms(self) -> str:
        return f"{self.prefix}:terms"

    def waker(self, token: str) -> str:
        """The wake-up channel of one process (one store), named by a random ``token`` (on
        Cluster, the stem of its per-slot channels)."""
        return f"{self.prefix}:wake:{token}"


def pending_member(platform: str, ask_id: str) -> str:
    """An ask's member in the ``pending`` index: its platform, a NUL, its id."""
    return f"{platform}\0{ask_id}"


def platform_range(platform: str) -> tuple[str, str]:
    """The ZLEXCOUNT bounds of one platform's members in the ``pending`` index."""
    return f"[{platform}\0", f"({platform}\x01"
