"""`RedisStore`: baselines in Redis, shared by the replicas of a scaled-out sidecar.

Location: a `redis://`, `rediss://` (TLS) or `unix://` URL, as the `redis` client reads it
(`redis://[[user]:[password]@]host[:port][/db][?socket_timeout=…]`); a `prefix` query parameter
(not passed to the client) sets the key prefix, `tracehound:baseline` by default. Needs the
`redis` package (`pip install 'tracehound[redis]'`), imported only when a store is opened.

**Design: every write is one Lua script** (registered with `register_script`), not optimistic
WATCH/MULTI/EXEC. A script runs atomically on the server, so an update is one round trip that
never retries under contention, however many replicas update the same agent at once; WATCH would
make N replicas updating a hot agent retry up to N times each. The merge is
`apply_update` transcribed: the pinned check, the embedder/dimension check, decay
(`2 ** (-runs / half_life)` on every weight-like sum), Chan's merge of (weight, mean, M2), the
tool-mix and centroid sums, first/last run times and the ring of recent runs (deduplicated by
ids, the latest `recent_limit` by (end time, trace id, run id)). Lua computes in IEEE doubles with
the same operations in the same order as numpy, so a baseline updated here equals, bit for bit,
the one `MemoryStore` or `SQLiteStore` computes from the same runs; without decay, updates from
any number of replicas in any order give the baseline of all their runs (up to float rounding).

Each baseline is one hash, `{prefix}:{<agent key>}` (the braces are a Cluster hash tag: the
scripts touch one slot). Floats the script computes travel exactly: vectors as little-endian
float64 bytes, scalars as `%.17g` / `repr` text; nanosecond times stay decimal strings (Lua
numbers are doubles) and strings are compared byte-wise (Lua's `<` follows the server's locale).
Recent runs keep their text fields as opaque JSON the script never parses.

Retried flushes are idempotent: each `update` (and `import_baselines`/`put`) carries a random
flush id; the script records it (`{prefix}:flush:{<agent key>}:<id>`, expiring after
`flush_ttl` seconds) and a retry of an already-applied flush — the client re-sends a command
whose reply was lost to a timeout — returns the recorded outcome instead of merging twice.

Run history (`add_runs`, `query_runs`, …): three keys under one hash tag,
`{prefix}:runs:{history}:data` (a hash, record key → the record as JSON), `…:by_end` (a sorted
set by run end, in microseconds) and `…:by_recorded` (by write time, what retention trims). Each
`add_runs` is one script that writes the records and trims to the retention bounds, so the
bounds hold after every write whatever the number of writers. Deleting runs from a baseline's
recent-runs ring (`forget_recent`) edits the hash's `recent` field under WATCH (a rare, manual
operation: optimistic concurrency suffices).

Reads: `get` is one `HGETALL`; `list` and `export_baselines` `SCAN` the prefix (each baseline is
read atomically, the set of baselines is not a snapshot). Server unreachable, timeouts, refused
authentication and unreadable values raise `BaselineStoreError` naming the (password-redacted)
URL; a hash written by a newer tracehound is refused, never overwritten. Once the server could
not be reached, calls fail at once for `outage_backoff` seconds (5 by default) before the next
attempt, so that an outage costs each finished run an error result, not a connect timeout. A
dropped connection is retried twice (a restarted server is reached again at once); a timeout is
never retried, so a hung server costs the attempt one timeout, not three.
"""

from __future__ import annotations

import base64
import builtins
import json
import math
import struct
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import parse_qsl, urlencode

from tracehound.baselines._base import (
    DRIFT_EPISODE_SUFFIX,
    BaselineInfo,
    BaselineStoreError,
    ImportMode,
    UpdateResult,
    check_key,
    export_document,
    parse_import,
)
from tracehound.drift import (
    BASELINE_FORMAT,
    BASELINE_VERSION,
    Baseline,
    BaselineFormatError,
    BaselineMismatchError,
)
from tracehound.history._record import RunQuery, RunRecord, record_key
from tracehound.history._store import Retention

if TYPE_CHECKING:
    import redis
    from redis.commands.core import Script

__all__ = [
    "DEFAULT_PREFIX",
    "ENV_REDIS_URL",
    "REDIS_URL_SCHEMES",
    "RedisStore",
    "is_redis_url",
    "redact_url",
]

ENV_REDIS_URL = "TRACEHOUND_REDIS_URL"
"""Environment variable naming the Redis baseline store of `tracehound serve` (when neither
`--baselines` nor `TRACEHOUND_BASELINES` is given)."""
REDIS_URL_SCHEMES = ("redis://", "rediss://", "unix://")
DEFAULT_PREFIX = "tracehound:baseline"
DEFAULT_TIMEOUT = 5.0
"""Seconds to connect and to wait for a reply (the URL's `socket_timeout` and
`socket_connect_timeout` query parameters override it)."""
DEFAULT_FLUSH_TTL = 600
"""Seconds a flush id is remembered: far longer than any client retry of the same command."""
DEFAULT_OUTAGE_BACKOFF = 5.0
"""Seconds during which, after the server could not be reached, calls fail at once instead of
trying again: an unreachable host costs a connect timeout per call, and the sidecar's evaluation
thread must not wait that long for every finished run while Redis is down."""

_FORMAT = "tracehound.baselines.redis"
_VERSION = 1
"""Layout of one baseline hash; a hash of a later version is refused (upgrade tracehound)."""
_INSTALL_HINT = "pip install 'tracehound[redis]'"
_SCAN_COUNT = 500

_LENGTH = struct.Struct("<I")
_DOUBLE = struct.Struct("<d")
_FIELDS = (
    "format",
    "version",
    "embedder",
    "dim",
    "blocks",
    "dimensions",
    "runs",
    "pinned",
    "first_ns",
    "last_ns",
    "cx_weight",
    "cx_mean",
    "cx_m2",
    "tools",
    "centroid_sum",
    "text_weight",
    "recent_limit",
    "recent",
    "updated_at",
)
_INFO_FIELDS = (
    "format",
    "version",
    "runs",
    "pinned",
    "embedder",
    "dim",
    "first_ns",
    "last_ns",
    "updated_at",
)


def is_redis_url(location: object) -> bool:
    """Whether `location` names a Redis store (`redis://`, `rediss://`, `unix://`)."""
    return isinstance(location, str) and location.lower().startswith(REDIS_URL_SCHEMES)


def redact_url(url: str) -> str:
    """`url` without its password (in the user info or a `password` query parameter)."""
    # by hand: urlunsplit would turn `unix:///path` into `unix:/path`
    scheme, sep, rest = url.partition("://")
    rest, mark, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if at and ":" in userinfo:
        authority = f"{userinfo.partition(':')[0]}:***@{host}"
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(name == "password" for name, _ in pairs):
            query = urlencode([(n, "***" if n == "password" else v) for n, v in pairs], safe="*:/")
    return f"{scheme}{sep}{authority}{slash}{path}{mark}{query}"


# --- the Lua scripts ----------------------------------------------------------------------------

_LUA_LIBRARY = """
local FORMAT, VERSION = '@FORMAT@', @VERSION@
local REQUIRED = {@FIELDS@}

-- Failures the caller maps to its own errors; anything else is re-raised as a script error.
local function fail(kind, detail) error({tracehound = kind, detail = detail or ''}) end

local function run(main)
  local ok, result = pcall(main)
  if ok then return result end
  if type(result) == 'table' and result.tracehound then
    return {'error', result.tracehound, result.detail}
  end
  error(result)
end

-- Byte-wise order (Lua's `<` on strings follows the server's locale; Python's str order is
-- code-point order, which byte order of UTF-8 preserves).
local function bytes_less(a, b)
  if a == b then return false end
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- Decimal integers kept as strings: nanosecond times do not fit a double exactly.
local function int_less(a, b)
  local neg_a, neg_b = string.byte(a, 1) == 45, string.byte(b, 1) == 45
  if neg_a ~= neg_b then return neg_a end
  if neg_a then a, b = string.sub(b, 2), string.sub(a, 2) end
  if #a ~= #b then return #a < #b end
  return bytes_less(a, b)
end

local function num(x) return string.format('%.17g', x) end

local function doubles(s)
  local out = {}
  for i = 1, #s / 8 do out[i] = struct.unpack('<d', s, i * 8 - 7) end
  return out
end

local function pack_doubles(values)
  local parts = {}
  for i = 1, #values do parts[i] = struct.pack('<d', values[i]) end
  return table.concat(parts)
end

local function read_string(s, pos)
  local n
  n, pos = struct.unpack('<I4', s, pos)
  return string.sub(s, pos, pos + n - 1), pos + n
end

local function pack_string(s) return struct.pack('<I4', #s) .. s end

local function hash_of(flat, first)
  local h = {}
  for i = first or 1, #flat, 2 do h[flat[i]] = flat[i + 1] end
  return h
end

local function flatten(h)
  local flat = {}
  for field, value in pairs(h) do
    flat[#flat + 1] = field
    flat[#flat + 1] = value
  end
  return flat
end

-- The stored hash (nil when there is none) and its HGETALL reply; refuses foreign or newer ones.
local function load(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return nil, flat end
  local h = hash_of(flat)
  if h.format ~= FORMAT then fail('unreadable', 'not a tracehound baseline hash') end
  local version = tonumber(h.version)
  if version == nil then fail('unreadable', 'bad layout version') end
  if version > VERSION then fail('newer', h.version) end
  for _, field in ipairs(REQUIRED) do
    if h[field] == nil then fail('unreadable', 'missing field ' .. field) end
  end
  return h, flat
end

local function store(key, flat)
  redis.call('DEL', key)
  redis.call('HSET', key, unpack(flat))
end

local function compatible(a, b)
  return a.embedder == b.embedder and a.dim == b.dim and a.blocks == b.blocks
    and a.dimensions == b.dimensions
end

local function decode(h)
  local b = {
    embedder = h.embedder, dim = h.dim, blocks = h.blocks, dimensions = h.dimensions,
    runs = tonumber(h.runs), pinned = h.pinned, first_ns = h.first_ns, last_ns = h.last_ns,
    cx_weight = tonumber(h.cx_weight), cx_mean = doubles(h.cx_mean), cx_m2 = doubles(h.cx_m2),
    centroid = doubles(h.centroid_sum), text_weight = tonumber(h.text_weight),
    recent_limit = h.recent_limit, tool_names = {}, tools = {}, recent = {},
  }
  if b.runs == nil or b.cx_weight == nil or b.text_weight == nil
    or tonumber(b.recent_limit) == nil or #b.cx_m2 ~= #b.cx_mean
    or #h.centroid_sum ~= 8 * (tonumber(b.dim) or -1) then
    fail('unreadable', 'inconsistent fields')
  end
  local s, pos = h.tools, 1
  while pos <= #s do
    local name
    name, pos = read_string(s, pos)
    b.tool_names[#b.tool_names + 1] = name
    b.tools[name], pos = struct.unpack('<d', s, pos)
  end
  s, pos = h.recent, 1
  while pos <= #s do
    local r = {}
    r.trace_id, pos = read_string(s, pos)
    r.run_id, pos = read_string(s, pos)
    r.end_ns, pos = read_string(s, pos)
    r.weight, pos = struct.unpack('<d', s, pos)
    r.body, pos = read_string(s, pos)
    b.recent[#b.recent + 1] = r
  end
  return b
end

local function encode(b, updated_at)
  local tools, recent = {}, {}
  for i, name in ipairs(b.tool_names) do
    tools[i] = pack_string(name) .. struct.pack('<d', b.tools[name])
  end
  for i, r in ipairs(b.recent) do
    recent[i] = pack_string(r.trace_id) .. pack_string(r.run_id) .. pack_string(r.end_ns)
      .. struct.pack('<d', r.weight) .. pack_string(r.body)
  end
  return {
    'format', FORMAT, 'version', tostring(VERSION), 'embedder', b.embedder, 'dim', b.dim,
    'blocks', b.blocks, 'dimensions', b.dimensions, 'runs', string.format('%.0f', b.runs),
    'pinned', b.pinned, 'first_ns', b.first_ns, 'last_ns', b.last_ns,
    'cx_weight', num(b.cx_weight), 'cx_mean', pack_doubles(b.cx_mean),
    'cx_m2', pack_doubles(b.cx_m2), 'tools', table.concat(tools),
    'centroid_sum', pack_doubles(b.centroid), 'text_weight', num(b.text_weight),
    'recent_limit', b.recent_limit, 'recent', table.concat(recent), 'updated_at', updated_at,
  }
end

-- Baseline.decayed: every weight-like sum times `factor` (the run count never decays).
local function decay(b, factor)
  b.cx_weight = b.cx_weight * factor
  for i = 1, #b.cx_m2 do b.cx_m2[i] = b.cx_m2[i] * factor end
  for _, name in ipairs(b.tool_names) do b.tools[name] = b.tools[name] * factor end
  for i = 1, #b.centroid do b.centroid[i] = b.centroid[i] * factor end
  b.text_weight = b.text_weight * factor
  for _, r in ipairs(b.recent) do r.weight = r.weight * factor end
end

local function run_less(x, y)
  if x.end_ns ~= y.end_ns then return int_less(x.end_ns, y.end_ns) end
  if x.trace_id ~= y.trace_id then return bytes_less(x.trace_id, y.trace_id) end
  return bytes_less(x.run_id, y.run_id)
end

-- _merge_recent: the `limit` latest runs of both rings, a run (trace id, run id) kept once.
local function merge_recent(a, b, limit)
  local by_id, ids = {}, {}
  for _, ring in ipairs({a, b}) do
    for _, r in ipairs(ring) do
      local id = pack_string(r.trace_id) .. r.run_id
      local kept = by_id[id]
      if kept == nil then
        ids[#ids + 1] = id
        by_id[id] = r
      elseif run_less(kept, r) then
        by_id[id] = r
      end
    end
  end
  local ordered, out = {}, {}
  for i, id in ipairs(ids) do ordered[i] = by_id[id] end
  table.sort(ordered, run_less)
  if limit <= 0 then return out end
  for i = math.max(1, #ordered - limit + 1), #ordered do out[#out + 1] = ordered[i] end
  return out
end

-- Baseline.merged: exact for every statistic; keeps a's pinned flag and ring size.
local function merge(a, b)
  if #a.cx_mean ~= #b.cx_mean or #a.centroid ~= #b.centroid then
    fail('unreadable', 'vector lengths differ')
  end
  local out = {
    embedder = a.embedder, dim = a.dim, blocks = a.blocks, dimensions = a.dimensions,
    runs = a.runs + b.runs, pinned = a.pinned, recent_limit = a.recent_limit,
    tool_names = {}, tools = {}, centroid = {},
  }
  if b.cx_weight <= 0 then
    out.cx_weight, out.cx_mean, out.cx_m2 = a.cx_weight, a.cx_mean, a.cx_m2
  elseif a.cx_weight <= 0 then
    out.cx_weight, out.cx_mean, out.cx_m2 = b.cx_weight, b.cx_mean, b.cx_m2
  else  -- Chan et al., in numpy's order of operations
    local total = a.cx_weight + b.cx_weight
    local share = b.cx_weight / total
    local cross = a.cx_weight * b.cx_weight / total
    out.cx_weight, out.cx_mean, out.cx_m2 = total, {}, {}
    for i = 1, #a.cx_mean do
      local delta = b.cx_mean[i] - a.cx_mean[i]
      out.cx_mean[i] = a.cx_mean[i] + delta * share
      out.cx_m2[i] = a.cx_m2[i] + b.cx_m2[i] + delta * delta * cross
    end
  end
  for i, name in ipairs(a.tool_names) do
    out.tool_names[i] = name
    out.tools[name] = a.tools[name]
  end
  for _, name in ipairs(b.tool_names) do
    local mine = out.tools[name]
    if mine == nil then
      out.tool_names[#out.tool_names + 1] = name
      mine = 0.0
    end
    out.tools[name] = mine + b.tools[name]
  end
  for i = 1, #a.centroid do out.centroid[i] = a.centroid[i] + b.centroid[i] end
  out.text_weight = a.text_weight + b.text_weight
  if a.first_ns == '0' then
    out.first_ns = b.first_ns
  elseif b.first_ns == '0' or not int_less(b.first_ns, a.first_ns) then
    out.first_ns = a.first_ns
  else
    out.first_ns = b.first_ns
  end
  out.last_ns = int_less(a.last_ns, b.last_ns) and b.last_ns or a.last_ns
  out.recent = merge_recent(a.recent, b.recent, tonumber(a.recent_limit))
  return out
end

local function reply(head, flat)
  local out = {head}
  for i = 1, #flat do out[i + 1] = flat[i] end
  return out
end
"""

_LUA_UPDATE = """
-- KEYS: baseline, flush id. ARGV: half-life ('' = none), now, flush ttl, delta fields...
-- Reply: {outcome, baseline fields...} | {'mismatch', embedder, dim, blocks, dimensions}
--        | {'error', kind, detail}
local function main()
  local replayed = redis.call('GET', KEYS[2])
  if replayed then return reply(replayed, redis.call('HGETALL', KEYS[1])) end
  local delta = hash_of(ARGV, 4)
  local stored, flat = load(KEYS[1])
  local outcome, new
  if stored == nil then
    delta.pinned, delta.updated_at = '0', ARGV[2]
    outcome, new = 'created', flatten(delta)
  elseif stored.pinned == '1' then
    outcome = 'pinned'
  elseif not compatible(stored, delta) then
    return {'mismatch', stored.embedder, stored.dim, stored.blocks, stored.dimensions}
  else
    local base, incoming = decode(stored), decode(delta)
    if ARGV[1] ~= '' and base.runs ~= 0 and incoming.runs > 0 then
      decay(base, 2.0 ^ (-incoming.runs / tonumber(ARGV[1])))
    end
    outcome, new = 'updated', encode(merge(base, incoming), ARGV[2])
  end
  if new then store(KEYS[1], new) end
  redis.call('SET', KEYS[2], outcome, 'EX', ARGV[3])
  return reply(outcome, new or flat)
end
return run(main)
"""

_LUA_WRITE = """
-- KEYS: baselines..., flush id. ARGV: mode ('replace' | 'merge'), now, flush ttl, then per
-- baseline: its number of fields and its fields. Nothing is written unless every baseline can be.
-- Reply: {'written'} | {'replayed'} | {'mismatch', index, embedder, dim, blocks, dimensions}
--        | {'error', kind, detail}
local function main()
  local n = #KEYS - 1
  if redis.call('EXISTS', KEYS[n + 1]) == 1 then return {'replayed'} end
  local mode, now, pos, staged = ARGV[1], ARGV[2], 4, {}
  for i = 1, n do
    local count = tonumber(ARGV[pos])
    local incoming = {}
    for j = pos + 1, pos + 2 * count, 2 do incoming[ARGV[j]] = ARGV[j + 1] end
    pos = pos + 2 * count + 1
    incoming.updated_at = now
    local new = flatten(incoming)
    local stored = load(KEYS[i])  -- a foreign or newer value is refused, even by a replace
    if mode == 'merge' and stored ~= nil then
      if not compatible(stored, incoming) then
        return {'mismatch', tostring(i), stored.embedder, stored.dim, stored.blocks,
                stored.dimensions}
      end
      new = encode(merge(decode(stored), decode(incoming)), now)
    end
    staged[i] = new
  end
  for i = 1, n do store(KEYS[i], staged[i]) end
  redis.call('SET', KEYS[n + 1], 'written', 'EX', ARGV[3])
  return {'written'}
end
return run(main)
"""

_LUA_PIN = """
-- KEYS: baseline. ARGV: '1' (pin) | '0' (unpin), now.
-- Reply: {'missing'} | {'unchanged'} | {'changed'} | {'error', kind, detail}
local function main()
  if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing'} end
  local stored = load(KEYS[1])
  if stored.pinned == ARGV[1] then return {'unchanged'} end
  redis.call('HSET', KEYS[1], 'pinned', ARGV[1], 'updated_at', ARGV[2])
  return {'changed'}
end
return run(main)
"""


_LUA_RUNS_ADD = """
-- KEYS: data, by_end, by_recorded
-- ARGV: max_runs, cutoff (write time below which records go), n, then n x (key, end_us,
--       recorded_at, json). Reply: how many records the trim removed.
local n = tonumber(ARGV[3])
for i = 0, n - 1 do
  local base = 4 + i * 4
  local key = ARGV[base]
  redis.call('HSET', KEYS[1], key, ARGV[base + 3])
  redis.call('ZADD', KEYS[2], ARGV[base + 1], key)
  redis.call('ZADD', KEYS[3], ARGV[base + 2], key)
end
local removed = 0
local function drop(list)
  for first = 1, #list, 500 do
    local chunk = {}
    for j = first, math.min(first + 499, #list) do chunk[#chunk + 1] = list[j] end
    redis.call('HDEL', KEYS[1], unpack(chunk))
    redis.call('ZREM', KEYS[2], unpack(chunk))
    redis.call('ZREM', KEYS[3], unpack(chunk))
    removed = removed + #chunk
  end
end
drop(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[2]))
local excess = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[1])
if excess > 0 then drop(redis.call('ZRANGE', KEYS[3], 0, excess - 1)) end
return removed
"""

_RUNS_PAGE = 500


def _ring_without(data: bytes, keys: set[tuple[str, str]]) -> tuple[bytes, int]:
    """The `recent` field without the entries of these (trace id, run id); how many went."""
    kept: list[bytes] = []
    removed = 0
    offset = 0
    while offset < len(data):
        start = offset
        trace_id, offset = _unpack_strings(data, offset)
        run_id, offset = _unpack_strings(data, offset)
        _, offset = _unpack_strings(data, offset)
        _, offset = _unpack_strings(data, offset + _DOUBLE.size)
        if (_text(trace_id), _text(run_id)) in keys:
            removed += 1
        else:
            kept.append(data[start:offset])
    return b"".join(kept), removed


def _library() -> str:
    return (
        _LUA_LIBRARY.replace("@FORMAT@", _FORMAT)
        .replace("@VERSION@", str(_VERSION))
        .replace("@FIELDS@", ", ".join(f"'{name}'" for name in _FIELDS if name != "updated_at"))
    )


# --- Python side of the layout ------------------------------------------------------------------


def _utf8(text: str) -> bytes:
    # surrogatepass: any Python str round-trips, and byte order stays code-point order
    return text.encode("utf-8", "surrogatepass")


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def _packed(data: bytes) -> bytes:
    return _LENGTH.pack(len(data)) + data


def _float_text(value: float) -> bytes:
    return repr(float(value)).encode("ascii")


def _encode(baseline: Baseline) -> list[bytes]:
    """The baseline as hash fields (name, value, name, value…), as the scripts read them."""
    tools = b"".join(
        _packed(_utf8(name)) + _DOUBLE.pack(float(value))
        for name, value in sorted(baseline.tools.items())
    )
    recent = []
    for run in baseline.recent:
        data = run.to_dict()
        body = {k: data[k] for k in ("tools", "complexity", "embedding", "sample")}
        recent.append(
            _packed(_utf8(run.trace_id))
            + _packed(_utf8(run.run_id))
            + _packed(str(run.end_ns).encode("ascii"))
            + _DOUBLE.pack(float(run.weight))
            + _packed(json.dumps(body, separators=(",", ":"), allow_nan=False).encode("ascii"))
        )
    fields: dict[str, bytes] = {
        "format": _FORMAT.encode("ascii"),
        "version": str(_VERSION).encode("ascii"),
        "embedder": _utf8(baseline.embedder),
        "dim": str(baseline.dim).encode("ascii"),
        "blocks": json.dumps(
            [[int(start), int(stop), float(weight)] for start, stop, weight in baseline.blocks],
            separators=(",", ":"),
        ).encode("ascii"),
        "dimensions": json.dumps(list(baseline.dimensions), separators=(",", ":")).encode("ascii"),
        "runs": str(baseline.runs).encode("ascii"),
        "pinned": b"1" if baseline.pinned else b"0",
        "first_ns": str(baseline.first_ns).encode("ascii"),
        "last_ns": str(baseline.last_ns).encode("ascii"),
        "cx_weight": _float_text(baseline.complexity.weight),
        "cx_mean": baseline.complexity.mean.astype("<f8").tobytes(),
        "cx_m2": baseline.complexity.m2.astype("<f8").tobytes(),
        "tools": tools,
        "centroid_sum": baseline.centroid_sum.astype("<f8").tobytes(),
        "text_weight": _float_text(baseline.text_weight),
        "recent_limit": str(baseline.recent_limit).encode("ascii"),
        "recent": b"".join(recent),
    }
    flat: list[bytes] = []
    for name, value in fields.items():
        flat += (name.encode("ascii"), value)
    return flat


def _hash(reply: Mapping[Any, Any]) -> dict[str, bytes]:
    """An `HGETALL` reply (bytes to bytes) keyed by field name."""
    return {_text(name): value for name, value in reply.items()}


def _pairs(flat: Sequence[bytes]) -> dict[str, bytes]:
    return {_text(flat[i]): flat[i + 1] for i in range(0, len(flat) - 1, 2)}


def _unpack_strings(data: bytes, offset: int) -> tuple[bytes, int]:
    (length,) = _LENGTH.unpack_from(data, offset)
    start = offset + _LENGTH.size
    if start + length > len(data):
        raise BaselineFormatError("truncated string")
    return data[start : start + length], start + length


def _decode(fields: Mapping[str, bytes]) -> Baseline:
    """A baseline from its hash fields; `BaselineFormatError` (or struct/JSON errors) if bad."""
    missing = [name for name in _FIELDS if name not in fields]
    if missing:
        raise BaselineFormatError(f"missing field(s) {', '.join(missing)}")
    tools: dict[str, float] = {}
    data, offset = fields["tools"], 0
    while offset < len(data):
        name, offset = _unpack_strings(data, offset)
        (tools[_text(name)],) = _DOUBLE.unpack_from(data, offset)
        offset += _DOUBLE.size
    recent: list[dict[str, Any]] = []
    data, offset = fields["recent"], 0
    while offset < len(data):
        trace_id, offset = _unpack_strings(data, offset)
        run_id, offset = _unpack_strings(data, offset)
        end_ns, offset = _unpack_strings(data, offset)
        (weight,) = _DOUBLE.unpack_from(data, offset)
        body, offset = _unpack_strings(data, offset + _DOUBLE.size)
        run = json.loads(body)
        if not isinstance(run, dict):
            raise BaselineFormatError("a recent run must be an object")
        run.update(trace_id=_text(trace_id), run_id=_text(run_id), end_ns=int(end_ns))
        run["weight"] = weight
        recent.append(run)
    document = {
        "format": BASELINE_FORMAT,
        "version": BASELINE_VERSION,
        "embedder": {
            "name": _text(fields["embedder"]),
            "dim": int(fields["dim"]),
            "blocks": json.loads(fields["blocks"]),
        },
        "runs": int(fields["runs"]),
        "pinned": fields["pinned"] == b"1",
        "first_ns": int(fields["first_ns"]),
        "last_ns": int(fields["last_ns"]),
        "complexity": {
            "dimensions": json.loads(fields["dimensions"]),
            "weight": float(fields["cx_weight"]),
            "mean": _doubles(fields["cx_mean"]),
            "m2": _doubles(fields["cx_m2"]),
        },
        "tools": tools,
        "text_weight": float(fields["text_weight"]),
        "centroid_sum": base64.b64encode(fields["centroid_sum"]).decode("ascii"),
        "recent_limit": int(fields["recent_limit"]),
        "recent": recent,
    }
    return Baseline.from_dict(document)


def _doubles(data: bytes) -> list[float]:
    if len(data) % _DOUBLE.size:
        raise BaselineFormatError("a vector of float64 has a length not a multiple of 8")
    return [value for (value,) in _DOUBLE.iter_unpack(data)]


def _mismatch(stored_as: Sequence[bytes], other: Baseline) -> BaselineMismatchError:
    """The error `Baseline.check_compatible` raises for the stored baseline, described by
    `stored_as` (embedder, dim, blocks, dimensions): the same message as the other stores."""
    embedder, dim, blocks, dimensions = stored_as
    stored = Baseline(
        embedder=_text(embedder),
        dim=int(dim),
        blocks=tuple((int(a), int(b), float(w)) for a, b, w in json.loads(blocks)),
        dimensions=tuple(json.loads(dimensions)),
    )
    try:
        stored.check_compatible(other.embedder, other.dim, other.blocks, other.dimensions)
    except BaselineMismatchError as exc:
        return exc
    return BaselineMismatchError(
        f"baseline was built with embedder {stored.embedder!r} ({stored.dim}-d); refusing to "
        f"mix it with {other.embedder!r} ({other.dim}-d)"
    )


# --- the store ----------------------------------------------------------------------------------


class RedisStore:
    """A `BaselineStore` in Redis, shared by processes and machines (see the module docstring).

    Thread-safe (one connection pool per store); other processes open their own `RedisStore`
    on the same URL. Opening connects and loads the scripts, so an unreachable server fails here.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        flush_ttl: int = DEFAULT_FLUSH_TTL,
        outage_backoff: float = DEFAULT_OUTAGE_BACKOFF,
    ) -> None:
        if not is_redis_url(url):
            raise BaselineStoreError(
                f"{redact_url(url)!r} is not a Redis URL (redis://, rediss:// or unix://)"
            )
        if not timeout > 0:
            raise ValueError("timeout must be > 0 seconds")
        if not (isinstance(flush_ttl, int) and flush_ttl >= 1):
            raise ValueError("flush_ttl must be a whole number of seconds >= 1")
        if not outage_backoff >= 0:
            raise ValueError("outage_backoff must be >= 0 seconds")
        self.outage_backoff = outage_backoff
        self._unreachable_until = 0.0  # monotonic time before which calls fail at once
        self._unreachable_reason = ""
        client_url, url_prefix = _split_prefix(url)
        self.prefix = prefix if prefix is not None else (url_prefix or DEFAULT_PREFIX)
        self._prefix_shown = self.prefix != (url_prefix or DEFAULT_PREFIX)  # not in the URL
        if not self.prefix:
            raise ValueError("the key prefix must not be empty")
        self.url = redact_url(url)
        self.flush_ttl = flush_ttl
        self._prefix = _utf8(self.prefix)
        self._closed = False
        try:
            import redis
            from redis.backoff import ExponentialBackoff
            from redis.retry import Retry
        except ImportError:
            raise BaselineStoreError(
                f"baseline store {self.url} needs the redis package: {_INSTALL_HINT}"
            ) from None
        self._errors = redis.exceptions
        try:
            self._client: redis.Redis = redis.Redis.from_url(
                client_url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                # a dropped connection is retried (retried flushes are idempotent); a timeout
                # is not: a hung server must cost the caller one timeout, not three
                retry=Retry(
                    ExponentialBackoff(cap=1.0, base=0.05),
                    2,
                    supported_errors=(redis.exceptions.ConnectionError,),
                ),
                health_check_interval=30,
            )
        except (ValueError, TypeError) as exc:
            raise BaselineStoreError(f"bad Redis URL {self.url}: {exc}") from None
        library = _library()
        self._update: Script = self._client.register_script(library + _LUA_UPDATE)
        self._write: Script = self._client.register_script(library + _LUA_WRITE)
        self._pin: Script = self._client.register_script(library + _LUA_PIN)
        self._runs_add: Script = self._client.register_script(_LUA_RUNS_ADD)
        runs = self._prefix + b":runs:{history}:"
        self._runs_keys = [runs + b"data", runs + b"by_end", runs + b"by_recorded"]
        try:
            with self._redis_errors():
                self._client.ping()
                for script in (self._update, self._write, self._pin, self._runs_add):
                    self._client.script_load(script.script)
        except BaselineStoreError:
            self._client.close()
            raise

    @property
    def location(self) -> str:
        return f"{self.url} (prefix {self.prefix})" if self._prefix_shown else self.url

    def __repr__(self) -> str:
        return f"RedisStore({self.url!r}, prefix={self.prefix!r})"

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ------------------------------------------------------------------------------

    def _key(self, agent: str) -> bytes:
        return self._prefix + b":{" + _utf8(agent) + b"}"

    def _flush_key(self, agent: str) -> bytes:
        # the same hash tag as the baseline: one Cluster slot per script
        return self._prefix + b":flush:{" + _utf8(agent) + b"}:" + uuid.uuid4().hex.encode()

    def _agent_of(self, key: bytes) -> str | None:
        head = self._prefix + b":{"
        if not (key.startswith(head) and key.endswith(b"}")):
            return None
        return _text(key[len(head) : -1])

    @contextmanager
    def _redis_errors(self) -> Iterator[None]:
        """Redis failures as `BaselineStoreError` naming the store (never a raw redis error)."""
        if self._closed:
            raise BaselineStoreError(f"baseline store {self.location} is closed")
        wait = self._unreachable_until - time.monotonic()
        if wait > 0:
            raise BaselineStoreError(
                f"Redis baseline store {self.location}: cannot reach the server "
                f"({self._unreachable_reason}); next attempt in {wait:.1f} s"
            )
        errors = self._errors
        try:
            yield
        except errors.AuthenticationError as exc:
            raise BaselineStoreError(
                f"Redis baseline store {self.location}: authentication failed ({exc})"
            ) from None
        except (errors.ConnectionError, errors.TimeoutError) as exc:
            self._unreachable_reason = str(exc)
            self._unreachable_until = time.monotonic() + self.outage_backoff
            raise BaselineStoreError(
                f"Redis baseline store {self.location}: cannot reach the server ({exc})"
            ) from None
        except errors.RedisError as exc:
            raise BaselineStoreError(f"Redis baseline store {self.location}: {exc}") from None

    def _unreadable(self, agent: str, why: object) -> BaselineStoreError:
        return BaselineStoreError(f"{self.location}: baseline {agent!r} is unreadable ({why})")

    def _newer(self, agent: str, version: str) -> BaselineStoreError:
        return BaselineStoreError(
            f"{self.location}: baseline {agent!r} uses layout version {version}; this "
            f"tracehound reads up to version {_VERSION} — upgrade tracehound"
        )

    def _script_error(self, agent: str, reply: Sequence[bytes]) -> BaselineStoreError:
        kind, detail = _text(reply[1]), _text(reply[2])
        return self._newer(agent, detail) if kind == "newer" else self._unreadable(agent, detail)

    def _baseline(self, agent: str, fields: Mapping[str, bytes]) -> Baseline:
        self._check_layout(agent, fields)
        try:
            return _decode(fields)
        except (ValueError, KeyError, TypeError, struct.error, RecursionError) as exc:
            raise self._unreadable(agent, exc) from None

    def _check_layout(self, agent: str, fields: Mapping[str, bytes | None]) -> None:
        if fields.get("format") != _FORMAT.encode("ascii"):
            raise self._unreadable(agent, "not a tracehound baseline hash")
        try:
            version = int(fields.get("version") or b"")
        except ValueError:
            raise self._unreadable(agent, "bad layout version") from None
        if version > _VERSION:
            raise self._newer(agent, str(version))

    def _agents(self) -> builtins.list[tuple[str, bytes]]:
        """(agent key, Redis key) of every baseline under the prefix, sorted by agent key."""
        pattern = _glob_escape(self._prefix) + b":{*"
        found: dict[str, bytes] = {}
        with self._redis_errors():
            for key in self._client.scan_iter(match=pattern, count=_SCAN_COUNT):
                agent = self._agent_of(key)
                if agent is not None:
                    found[agent] = key
        return sorted(found.items())

    # --- the protocol --------------------------------------------------------------------------

    def get(self, key: str) -> Baseline | None:
        check_key(key)
        with self._redis_errors():
            flat = self._client.hgetall(self._key(key))
        if not flat:
            return None
        return self._baseline(key, _hash(flat))

    def update(
        self, key: str, delta: Baseline, *, half_life_runs: float | None = None
    ) -> UpdateResult:
        check_key(key)
        if half_life_runs is not None and not (
            math.isfinite(half_life_runs) and half_life_runs > 0
        ):
            raise ValueError("half_life_runs must be a number > 0 (or None for no decay)")
        args: builtins.list[bytes] = [
            b"" if half_life_runs is None else _float_text(half_life_runs),
            _float_text(time.time()),
            str(self.flush_ttl).encode("ascii"),
            *_encode(delta),
        ]
        with self._redis_errors():
            reply = self._update(keys=[self._key(key), self._flush_key(key)], args=args)
        head = _text(reply[0])
        if head == "error":
            raise self._script_error(key, reply)
        if head == "mismatch":
            raise _mismatch(reply[1:5], delta)
        outcome: Literal["created", "updated", "pinned"]
        if head == "created":
            outcome = "created"
        elif head == "updated":
            outcome = "updated"
        elif head == "pinned":
            outcome = "pinned"
        else:
            raise self._unreadable(key, f"unexpected script reply {head!r}")
        if len(reply) == 1:  # a replayed flush whose baseline was reset since
            return UpdateResult(key, outcome, delta.copy())
        return UpdateResult(key, outcome, self._baseline(key, _pairs(reply[1:])))

    def put(self, key: str, baseline: Baseline) -> None:
        check_key(key)
        self._write_all({key: baseline}, "replace")

    def list(self) -> builtins.list[BaselineInfo]:
        agents = self._agents()
        with self._redis_errors():
            pipe = self._client.pipeline(transaction=False)
            for _, redis_key in agents:
                pipe.hmget(redis_key, _INFO_FIELDS)
            rows = pipe.execute()
        infos: builtins.list[BaselineInfo] = []
        for (agent, _), row in zip(agents, rows, strict=True):
            fields = dict(zip(_INFO_FIELDS, row, strict=True))
            if all(value is None for value in row):
                continue  # reset between the scan and the read
            self._check_layout(agent, fields)
            try:
                infos.append(
                    BaselineInfo(
                        key=agent,
                        runs=int(fields["runs"]),
                        pinned=fields["pinned"] == b"1",
                        embedder=_text(fields["embedder"]),
                        dim=int(fields["dim"]),
                        first_ns=int(fields["first_ns"]),
                        last_ns=int(fields["last_ns"]),
                        updated_at=float(fields["updated_at"]),
                    )
                )
            except (TypeError, ValueError) as exc:
                raise self._unreadable(agent, exc) from None
        return infos

    def pin(self, key: str) -> bool:
        return self._set_pinned(key, True)

    def unpin(self, key: str) -> bool:
        return self._set_pinned(key, False)

    def _set_pinned(self, key: str, pinned: bool) -> bool:
        check_key(key)
        with self._redis_errors():
            reply = self._pin(
                keys=[self._key(key)],
                args=[b"1" if pinned else b"0", _float_text(time.time())],
            )
        head = _text(reply[0])
        if head == "error":
            raise self._script_error(key, reply)
        if head == "missing":
            raise KeyError(f"no baseline for agent {key!r} in {self.location}")
        return head == "changed"

    def reset(self, key: str) -> bool:
        check_key(key)
        with self._redis_errors():
            return bool(self._client.delete(self._key(key)))

    def export_baselines(self) -> dict[str, Any]:
        agents = self._agents()
        with self._redis_errors():
            pipe = self._client.pipeline(transaction=False)
            for _, redis_key in agents:
                pipe.hgetall(redis_key)
            rows = pipe.execute()
        return export_document(
            (agent, self._baseline(agent, _hash(row)))
            for (agent, _), row in zip(agents, rows, strict=True)
            if row
        )

    def import_baselines(
        self, document: Mapping[str, Any], *, mode: ImportMode = "replace"
    ) -> builtins.list[str]:
        incoming = parse_import(document, mode)
        if incoming:
            self._write_all(incoming, mode)
        return sorted(incoming)

    def _write_all(self, baselines: Mapping[str, Baseline], mode: ImportMode) -> None:
        """Replace or merge several baselines in one script: all of them, or none."""
        agents = builtins.list(baselines)
        args: builtins.list[bytes] = [
            mode.encode("ascii"),
            _float_text(time.time()),
            str(self.flush_ttl).encode("ascii"),
        ]
        for agent in agents:
            fields = _encode(baselines[agent])
            args += [str(len(fields) // 2).encode("ascii"), *fields]
        keys = [self._key(agent) for agent in agents]
        keys.append(self._flush_key(agents[0]))
        with self._redis_errors():
            reply = self._write(keys=keys, args=args)
        head = _text(reply[0])
        if head == "mismatch":
            agent = agents[int(reply[1]) - 1]
            raise _mismatch(reply[2:6], baselines[agent])
        if head == "error":
            raise self._script_error(agents[0] if len(agents) == 1 else "(import)", reply)

    # --- run history ---------------------------------------------------------------------------

    def add_runs(self, records: Sequence[RunRecord], retention: Retention) -> int:
        return self._trim(records, retention, time.time())

    def _trim(self, records: Sequence[RunRecord], retention: Retention, now: float) -> int:
        args: builtins.list[bytes | str | int | float] = [
            retention.max_runs,
            _float_text(now - retention.max_age),
            len(records),
        ]
        for record in records:
            args += [
                _utf8(record.key),
                str(record.end_ns // 1000),
                _float_text(record.recorded_at),
                _utf8(record.to_json()),
            ]
        with self._redis_errors():
            return int(self._runs_add(keys=self._runs_keys, args=args))

    def prune_runs(self, retention: Retention, *, now: float | None = None) -> int:
        return self._trim((), retention, time.time() if now is None else now)

    def count_runs(self) -> int:
        with self._redis_errors():
            return int(self._client.zcard(self._runs_keys[2]))

    def _records(self, pairs: Sequence[tuple[bytes, bytes | None]]) -> builtins.list[RunRecord]:
        out: builtins.list[RunRecord] = []
        for key, data in pairs:
            if data is None:
                continue  # deleted between the index read and the data read
            try:
                out.append(RunRecord.from_json(data))
            except ValueError as exc:
                raise BaselineStoreError(
                    f"{self.location}: run {_text(key)!r} is unreadable ({exc})"
                ) from None
        return out

    def query_runs(self, query: RunQuery) -> builtins.list[RunRecord]:
        data_key, by_end, _ = self._runs_keys
        limit = query.limit
        if limit == 0:
            return []
        if query.trace_id is not None:  # the trace's records: a match on the hash's keys
            pattern = _glob_escape(_utf8(query.trace_id)) + b"/*"
            with self._redis_errors():
                found = builtins.list(self._client.hscan_iter(data_key, match=pattern, count=500))
            return query.select(self._records(found))
        # scores are whole microseconds: the bounds round outwards, `matches` decides
        high = "+inf" if query.until_ns is None else f"({-(-query.until_ns // 1000)}"
        low = "-inf" if query.since_ns is None else str(query.since_ns // 1000)
        selected: builtins.list[RunRecord] = []
        offset = 0
        while True:
            with self._redis_errors():
                keys: builtins.list[bytes] = cast(
                    "list[bytes]",
                    self._client.zrevrangebyscore(by_end, high, low, start=offset, num=_RUNS_PAGE),
                )
                values: builtins.list[bytes | None] = (
                    cast("list[bytes | None]", self._client.hmget(data_key, keys)) if keys else []
                )
            offset += len(keys)
            done = False
            for record in self._records(builtins.list(zip(keys, values, strict=True))):
                # past the limit, only the records ending with the last one (ties sort by id)
                if (
                    limit is not None
                    and len(selected) >= limit
                    and record.end_ns // 1000 != selected[-1].end_ns // 1000
                ):
                    done = True
                    break
                if query.matches(record):
                    selected.append(record)
            if done or len(keys) < _RUNS_PAGE:
                break
        return query.select(selected)

    def delete_runs(self, keys: Sequence[tuple[str, str]]) -> int:
        if not keys:
            return 0
        members = [_utf8(record_key(t, r)) for t, r in keys]
        data_key, by_end, by_recorded = self._runs_keys
        with self._redis_errors():
            pipe = self._client.pipeline(transaction=True)
            pipe.hdel(data_key, *members)
            pipe.zrem(by_end, *members)
            pipe.zrem(by_recorded, *members)
            deleted, _, _ = pipe.execute()
        return int(deleted)

    def forget_recent(self, agent: str, keys: Sequence[tuple[str, str]]) -> int:
        check_key(agent)
        gone = set(keys)
        removed = 0
        for name in (agent, agent + DRIFT_EPISODE_SUFFIX):
            removed += self._forget_in(name, gone)
        return removed

    def _forget_in(self, agent: str, gone: set[tuple[str, str]]) -> int:
        redis_key = self._key(agent)
        errors = self._errors
        with self._redis_errors():
            for _ in range(10):  # optimistic: retried while a replica writes the baseline
                with self._client.pipeline(transaction=True) as pipe:
                    try:
                        cast(Any, pipe).watch(redis_key)  # the client's stubs leave it untyped
                        read = cast(
                            "list[bytes | None]",
                            pipe.hmget(redis_key, ["format", "version", "recent"]),
                        )
                        fields = dict(zip(("format", "version", "recent"), read, strict=True))
                        if fields["format"] is None:
                            return 0
                        self._check_layout(agent, fields)
                        try:
                            ring, removed = _ring_without(fields["recent"] or b"", gone)
                        except (struct.error, BaselineFormatError) as exc:
                            raise self._unreadable(agent, exc) from None
                        if not removed:
                            return 0
                        pipe.multi()
                        pipe.hset(
                            redis_key,
                            mapping={"recent": ring, "updated_at": _float_text(time.time())},
                        )
                        pipe.execute()
                        return removed
                    except errors.WatchError:
                        continue
        raise BaselineStoreError(
            f"{self.location}: baseline {agent!r} kept changing; its recent runs were not edited"
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()
            self._client.connection_pool.disconnect()


def _split_prefix(url: str) -> tuple[str, str | None]:
    """The URL for the redis client (without our `prefix` parameter) and that prefix."""
    head, _, query = url.partition("?")
    pairs = parse_qsl(query, keep_blank_values=True)
    prefix = next((value for name, value in pairs if name == "prefix"), None)
    if prefix is None:
        return url, None
    rest = urlencode([(name, value) for name, value in pairs if name != "prefix"])
    return (f"{head}?{rest}" if rest else head), prefix


def _glob_escape(text: bytes) -> bytes:
    """`text` as a literal in a Redis MATCH pattern."""
    out = bytearray()
    for byte in text:
        if byte in b"*?[]\\":
            out += b"\\"
        out.append(byte)
    return bytes(out)
