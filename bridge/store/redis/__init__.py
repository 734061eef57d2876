"""``RedisStore``: pending asks in Redis (standalone, TLS, Sentinel or Cluster), shared by replicas.

Correctness rests on three rules (key scheme, record fields and hand-off states:
:mod:`bridge.store.keys`):

* Every change to one ask is one script call over that ask's keys, which share a hash tag, so
  replicas race freely and Cluster never sees a cross-slot script (a script per operation:
  :mod:`.scripts`).
* Waking is pushed: each script that ends an ask publishes its id on the wake-up channel of each
  process waiting for it (only those: an answer costs the same however many replicas run; on
  Cluster a channel per slot, SPUBLISHed, so it stays on one node: :mod:`.shards`), and
  a store's :class:`~bridge.store.redis.wakeups.Wakeups` holds the subscriptions for all its
  waiters, never missing a wake-up published while one was away.
* Answers never get lost between processes: an answer lands either with a live waiter (a short
  lease key proves one is alive) or on the feed stream. The global keys (the ``due``, ``pending``
  and ``timers`` indexes, the feed and ended-asks streams) are written by the same script outside
  Cluster, and right after it on Cluster, where they live in other slots (:mod:`bridge.store.keys`
  says which); ``due`` always holds an ask until its hand-off is settled, so a sweeper repairs
  whatever a crashed process left half-done.

Sentinel: a manual ``SENTINEL FAILOVER`` names the new master at once but demotes the old one only
~10 s later, and until then the old master still accepts writes -- which it throws away when it
resyncs as a replica. Pooled connections would keep writing there (redis-py re-asks Sentinel only
when it opens a connection), losing answers. So a store also listens to Sentinel's
``+switch-master`` (:mod:`bridge.store.redis.connect`): when its service moves, pooled connections
are dropped (each reconnects to the master Sentinel names now) and the wake-up subscription is
made anew on the new master, which re-reads every waiting ask as any resubscription does. Writes
sent in the instant between the switch and its announcement can still land on the old master:
Sentinel promises no more.

Every operation raises :class:`~bridge.store.base.StoreUnavailable` when Redis cannot be reached
(after the client's own retries, which ride out a restart or failover of a few seconds). Those
retries re-send a command whose reply was lost after Redis ran it, so every script op is written to
be run twice (see each one's file in ``lua/``): ``submit`` carries a token per call, so its re-sent
attempt is still ``ACCEPTED``.

Lost data: a Redis restarted without persistence comes back empty, silently. The ``epoch`` key
(:mod:`bridge.store.keys`) lets a process notice: :attr:`RedisStore.lost_data` turns true and one
error line names the likely cause.
"""

from bridge.store.redis.store import RedisStore

__all__ = ["RedisStore"]
