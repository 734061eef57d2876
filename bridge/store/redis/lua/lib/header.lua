-- Every state change of one ask, atomically: one script per operation (lua/<op>.lua), each built
-- as this header, the shared helpers it needs (lua/lib/) and its own file, by
-- bridge.store.redis.scripts, whose typed argument builders put KEYS and ARGV in the order the
-- named locals below and at the top of each op's file take them (tests/bridge/store/test_scripts.py
-- checks that they agree). Key scheme and record fields: bridge/store/keys.py.
--
-- KEYS: the ask's own keys, in one hash slot; then, except on Cluster (another slot: the caller
-- writes them itself), the pending index, the ended-asks stream and the created index; an op
-- that indexes the ask for the sweeper takes the due index after them (never on Cluster).
-- ARGV: these six, then an indexed op's three (lib/indexed.lua), then the op's own (named at the
-- top of its file; a submission's first ones at the top of lib/submission.lua).
-- Replies: {verdict, HGETALL of the record} (the record part is absent where noted; confirm, sent
-- and rendered answer {'ok', '1' if the ask is settled (see tidy) else '0'}).
-- Events are JSON built here from pre-encoded pieces (and strings written by jstr), so no JSON is
-- ever re-encoded by cjson.
-- Every op is safe to run twice with the same arguments (redis-py re-sends a command whose reply
-- was lost): the second run changes nothing and answers as the first did, or as a later caller
-- needs (see each op).

local rec = KEYS[1] -- the record (hash)
local log = KEYS[2] -- the audit trail's lifecycle events (list)
local lease = KEYS[3] -- a waiting call's lease (string)
local noise = KEYS[4] -- the audit trail's noise (capped list)
local wakers = KEYS[5] -- the wake-up channels of the processes waiting for it (set)
local pending_index = KEYS[6] -- nil on Cluster
local ended_stream = KEYS[7] -- nil on Cluster
local created_index = KEYS[8] -- nil on Cluster
local op = ARGV[1] -- the op's name: not read here, it names the call on the wire (MONITOR)
local now = ARGV[2] -- seconds, JSON number text
local channel = ARGV[3] -- the shared events channel (for a waiter from before per-process ones)
local ask_id = ARGV[4]
local retention_ms = ARGV[5] -- integer text, as PEXPIRE takes it (arithmetic coerces it; a Lua
-- number would be formatted anew, with '%.17g', for every command it is given to)
local noise_cap = tonumber(ARGV[6])

local RENDER_TRIES = 5 -- bridge.store.base.RENDER_TRIES
local NOISE = {refused = true, late = true, opened = true, resubmitted = true} -- base.NOISE_KINDS
