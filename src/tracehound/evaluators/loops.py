"""The `loops` evaluator: an agent that repeats itself, and the failure modes that end runs.

Signals, decided per run (an agent invocation, `Step.run_id`) over its tool calls, tool results
and assistant outputs; every threshold lives in `LoopConfig`:

- `repeat`: the same call — tool name and canonical arguments — made `repeat_threshold` (3)
  times anywhere in the run, adjacent or not (tracecheck's `infinite_loop` rule), unless it is
  progress (below).
- `consecutive`: `consecutive_threshold` (2) identical calls in a row (tracecheck's
  `step_efficiency` adjacency rule). A call repeated right after it *failed* is a retry, not a
  consecutive duplicate.
- `cycle`: the last calls are one pattern of period 2–4 repeated `cycle_repeats` (3) times
  (A,B,A,B,A,B). A pattern that is itself periodic (A,A or A,B,A,B for period 4) is reported with
  its smallest period; period 1 is `consecutive`.
- `near_duplicate`: calls of one tool whose arguments differ only slightly (see
  `near_arguments`), chained into a group of `near_duplicate_threshold` (3) distinct argument
  values. Calls issued together (same LLM turn, or overlapping executions) are never compared:
  a parallel fan-out is not a loop.
- `no_progress`: one tool returning the same successful result `no_progress_threshold` (3) times
  in separate turns, whatever the arguments (polling whose result changes is not stuck).
- `retry_storm`: the same call made again after it failed, `retry_storm_threshold` (2) times in
  a row, the last retry failing too (error, retry, error, retry, error). Retries that end in
  success before that are backoff, not a storm.

Progress (polling, backoff). A repeated call whose previous call of the same key has a known
outcome — a successful result text or an error — is decided when its own result arrives, not
when it is made: its `repeat`, `consecutive`, `cycle` and `retry_storm` signals are dropped when
the result is successful and new — it differs from the previous call's result, after masking
date-times, clock times, epoch timestamps and UUIDs (`_same_result`) — or when it succeeds after
the previous call failed (backoff); else they are emitted on its tool span. Once two successive
calls of a key return the same result, the key is stuck: its later repeats are decided at once.
Past `poll_budget` (10) calls of one key in a run, nothing is progress: a job polled that often
is a loop whatever its results. A call whose previous call's outcome is not known (calls of one
turn, results not recorded) is decided at once, as tracecheck does. A deferred call whose result
never arrives is decided at the end of the trace (in the trace result only).
- `output_repeat`: the same assistant text (NFKC, case-folded, whitespace-collapsed)
  `output_repeat_threshold` (3) times.

Calls whose arguments were not recorded (content capture off) match nothing: repeats cannot be
told from distinct calls without them.

Failure modes (tracecheck's names): `context_window_overflow` — an error whose text or
`error.type` names a context/token limit, or an LLM call that stopped for `length`;
`tool_call_error` — any other error (tool, LLM or agent span).

Streaming: each signal is decided when the span that completes it arrives, at O(1) amortized cost
per tool call (hash maps keyed by call, result and text; one counter per cycle period; a window of
`near_duplicate_window` argument values per tool and argument shape), and annotates that span:
the chat span whose output proposed the call (or the tool span when no chat output shows the
call; the call's tool span when it is decided at its result), the tool span whose result
repeats, the chat span whose text repeats. Later occurrences
of a loop annotate their spans too, with the count so far. While a trace streams
in, a span's run is taken from its parent (chat and tool spans are children of their agent span,
which usually ends — and arrives — last); tool results follow their call's run. The trace result
is that of the canonical trajectory with the real runs, so it does not depend on arrival order:
loops per kind, wasted steps, tokens and seconds, failure modes. It is taken from the streaming
state when streaming fed the trajectory's steps, in its order and runs (the usual case: spans
arrive as they end; see `_streamed_modes`), else the trajectory is fed again at finalization.
Until a step could complete a loop — some call, tool, result or output head comes again often
enough (see `_State`) — steps are only counted and held back; the first one that could makes
the tracker, fed the held steps as they were when they arrived. Most traces never make one.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, get_args

from tracehound import names
from tracehound.conventions import NormalizedSpan
from tracehound.conventions.base import fields_maker
from tracehound.evaluators.base import DetailedResult, EvaluationResult, Evaluator, TraceInfo
from tracehound.spans import AttributeValue
from tracehound.steps import Step, Trajectory

__all__ = [
    "FailureMode",
    "LoopConfig",
    "LoopEvaluator",
    "LoopInstance",
    "LoopKind",
    "LoopReport",
    "LoopSignal",
    "analyze",
    "classify_error",
    "near_arguments",
]

LoopKind = Literal[
    "repeat",
    "consecutive",
    "cycle",
    "no_progress",
    "near_duplicate",
    "retry_storm",
    "output_repeat",
]
FailureMode = Literal["context_window_overflow", "tool_call_error"]
_KINDS: tuple[LoopKind, ...] = get_args(LoopKind)

# Which kind a span's attributes name when several loops complete there: the most specific first.
_PRIORITY: tuple[LoopKind, ...] = (
    "retry_storm",
    "cycle",
    "near_duplicate",
    "no_progress",
    "consecutive",
    "repeat",
    "output_repeat",
)

# Context/token-limit phrasings, compared with letters and digits only ("context_length_exceeded",
# "Context length exceeded", "ContextWindowExceededError" all contain "contextlength..." /
# "contextwindow..."). Providers' wordings: OpenAI, Anthropic, Google, Mistral, litellm.
_OVERFLOW_PHRASES = (
    "context window",
    "context length",
    "context limit",
    "maximum context",
    "token limit",
    "max tokens",
    "too many tokens",
    "prompt is too long",
    "input is too long",
    "maximum number of tokens",
    "exceeds the model's context",
)
_OVERFLOW_FINISH = ("length", "max_tokens", "model_length")


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopConfig:
    """Thresholds of each signal. Counts are occurrences (calls, results, outputs)."""

    repeat_threshold: int = 3
    """Same call (tool + canonical arguments) this many times in a run: `repeat`."""
    consecutive_threshold: int = 2
    """This many identical calls in a row (not counting retries after an error): `consecutive`."""
    cycle_repeats: int = 3
    """A pattern of period `cycle_min_period`..`cycle_max_period` repeated this often: `cycle`."""
    cycle_min_period: int = 2
    cycle_max_period: int = 4
    near_duplicate_threshold: int = 3
    """Distinct, slightly different argument values of one tool chained this long."""
    near_duplicate_window: int = 8
    """Earlier distinct argument values per tool a new call is compared with (bounds the cost)."""
    near_number_tolerance: float = 0.02
    """Non-integer numbers within this relative difference are near; integers must be equal."""
    near_range_overlap: float = 0.5
    """Date ranges (all date leaves of the arguments) near when their overlap / union ≥ this."""
    near_datetime_seconds: float = 3600.0
    """A single timestamp argument is near another within this many seconds."""
    near_max_edits: int = 3
    """Largest edit distance for a mistyped word (1 per 4 characters, at most this)."""
    near_max_chars: int = 4096
    """Arguments longer than this (canonical JSON) are only compared exactly."""
    no_progress_threshold: int = 3
    """Same tool returning the same successful result this many times (separate turns)."""
    retry_storm_threshold: int = 2
    """Retries of the same call, each after the previous attempt failed, the last one failing
    too: `retry_storm`. Retries that end in success before that are backoff."""
    poll_budget: int = 10
    """Calls of one key in a run that may be progress: up to this many, a repeated call that
    returns a new result (or succeeds after a failure) completes no loop; past it, any does.
    1: no call is progress (tracecheck's rule)."""
    output_repeat_threshold: int = 3
    """Same assistant text this many times in a run: `output_repeat`."""
    disabled: frozenset[str] = frozenset()
    """Loop kinds not to report."""

    def __post_init__(self) -> None:
        problems = []
        for name in (
            "repeat_threshold",
            "consecutive_threshold",
            "cycle_repeats",
            "near_duplicate_threshold",
            "no_progress_threshold",
            "output_repeat_threshold",
        ):
            if getattr(self, name) < 2:
                problems.append(f"{name} must be >= 2")
        if self.retry_storm_threshold < 1:
            problems.append("retry_storm_threshold must be >= 1")
        if self.poll_budget < 1:
            problems.append("poll_budget must be >= 1")
        if not 2 <= self.cycle_min_period <= self.cycle_max_period:
            problems.append("cycle periods must satisfy 2 <= cycle_min_period <= cycle_max_period")
        if self.near_duplicate_window < 1:
            problems.append("near_duplicate_window must be >= 1")
        if not 0.0 <= self.near_number_tolerance < 1.0:
            problems.append("near_number_tolerance must be within [0, 1)")
        if not 0.0 < self.near_range_overlap <= 1.0:
            problems.append("near_range_overlap must be within (0, 1]")
        if self.near_datetime_seconds < 0 or self.near_max_edits < 0 or self.near_max_chars < 0:
            problems.append("near_datetime_seconds, near_max_edits, near_max_chars must be >= 0")
        unknown = set(self.disabled) - set(names.LOOP_KINDS)
        if unknown:
            problems.append(f"unknown loop kind(s) in disabled: {', '.join(sorted(unknown))}")
        if problems:
            raise ValueError("invalid loop configuration: " + "; ".join(problems))


# --- similarity of arguments ---------------------------------------------------------------------

_TIME_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}"
    r"(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
)
_DAY = 86400.0


def _as_time(text: str) -> tuple[float, bool] | None:
    """(epoch seconds, date only) of an ISO 8601 date or date-time string, else None."""
    if not 10 <= len(text) <= 35 or not text[:4].isdigit() or not _TIME_RE.fullmatch(text):
        return None
    value = text[:-1] + "+00:00" if text.endswith("Z") else text
    if len(value) > 10 and value[-5] in "+-" and value[-3] != ":":  # +0100 → +01:00
        value = value[:-2] + ":" + value[-2:]
    if "." in value:  # fromisoformat (3.10) takes 3 or 6 fraction digits only
        head, _, tail = value.partition(".")
        cut = len(tail) - len(tail.lstrip("0123456789"))
        digits, rest = tail[:cut], tail[cut:]
        value = f"{head}.{(digits + '000000')[:6]}{rest}"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp(), len(text) == 10


def _fold(text: str) -> str:
    """NFKC, case folding, whitespace collapsed: how texts are compared."""
    return " ".join(_casefolded(text).split())


def _casefolded(text: str) -> str:
    if text.isascii():  # NFKC changes no ASCII text, and casefold() is lower() there
        return text.lower()
    return unicodedata.normalize("NFKC", text).casefold()


# Typographic punctuation, frequent in LLM text: NFKC and case folding leave these characters
# alone, and they compose with nothing, so in a text of ASCII and them folding changes the ASCII
# only. Where only words count (heads of outputs, words, digits), each is a separator like a space.
_SEPARATORS = ("\u201c", "\u201d", "\u2019", "\u2018", "\u2013", "\u2014")
# What NFKC makes of two more of them (an ellipsis, a no-break space): ASCII.
_PLAIN = (*((c, " ") for c in _SEPARATORS), ("\u2026", "..."), ("\u00a0", " "))


def _spaced(text: str) -> str:
    """The text with each `_SEPARATORS` character replaced by a space."""
    for char in _SEPARATORS:
        if char in text:
            text = text.replace(char, " ")
    return text


def _plain(text: str) -> str | None:
    """For a text that is not ASCII: `_spaced(_casefolded(text))` when it is the lowered ASCII
    text that `_PLAIN` leaves, else None (other non-ASCII characters need NFKC and folding)."""
    for char, replacement in _PLAIN:  # the most frequent first: done once the text is ASCII
        if char in text:
            text = text.replace(char, replacement)
            if text.isascii():
                return text.lower()
    return None


_ASCII_NON_DIGITS = bytes(c for c in range(128) if not 48 <= c <= 57)


def _digits(folded: str) -> str:
    """The digits of a text, in order (`str.isdigit`: not only ASCII ones)."""
    plain = folded if folded.isascii() else _spaced(folded)
    if plain.isascii():  # no digit but ASCII ones: the separators are none
        return plain.encode("ascii").translate(None, _ASCII_NON_DIGITS).decode("ascii")
    return "".join(filter(str.isdigit, folded))


def _folded_digits(text: str) -> tuple[str, str]:
    """`_fold(text)` and its `_digits`, for a text of ASCII and separators without NFKC."""
    plain = text if text.isascii() else _spaced(text)
    if plain.isascii():  # folding lowers the ASCII and keeps the separators, none a digit
        digits = plain.encode("ascii").translate(None, _ASCII_NON_DIGITS).decode("ascii")
        return " ".join(text.lower().split()), digits
    folded = _fold(text)
    return folded, _digits(folded)


# ASCII bytes: letters and digits kept, any other byte a space (ASCII words, see `_words`).
_ASCII_WORD_BYTES = bytes(c if c < 128 and chr(c).isalnum() else 0x20 for c in range(256))


def _words(folded: str) -> list[str]:
    """`_WORD_RE.findall(folded)`: the runs of letters and digits. The separators are no letter
    or digit, so a text of ASCII and them takes the bytes path (the regex costs 10x more)."""
    plain = folded if folded.isascii() else _spaced(folded)
    if plain.isascii():
        return plain.encode("ascii").translate(_ASCII_WORD_BYTES).decode("ascii").split()
    return _WORD_RE.findall(folded)


def _within_edits(a: str, b: str, limit: int) -> bool:
    """Levenshtein distance ≤ limit, computed in a band of width 2·limit+1."""
    la, lb = len(a), len(b)
    if abs(la - lb) > limit:
        return False
    if la > lb:
        a, b, la, lb = b, a, lb, la
    over = limit + 1
    prev = [j if j <= limit else over for j in range(lb + 1)]
    for i in range(1, la + 1):
        cur = [over] * (lb + 1)
        if i <= limit:
            cur[0] = i
        lo, hi = max(1, i - limit), min(lb, i + limit)
        ca = a[i - 1]
        best = cur[lo - 1]
        for j in range(lo, hi + 1):
            value = min(prev[j - 1] + (ca != b[j - 1]), prev[j] + 1, cur[j - 1] + 1)
            cur[j] = value if value < over else over
            best = min(best, cur[j])
        if best > limit:
            return False
        prev = cur
    return prev[lb] <= limit


def _flatten(  # noqa: PLR0917 - the accumulators of `_Flat`
    value: Any,
    path: tuple[Any, ...],
    shape: list[Any],
    leaves: list[tuple[Any, ...]],
    times: list[tuple[float, bool]],
    rigid: list[Any],
) -> None:
    """`_Flat`'s walk (a module function: a nested recursive one would be a reference cycle)."""
    if isinstance(value, str):
        moment = _as_time(value)
        if moment is not None:
            shape.append((path, "t"))
            leaves.append(("t", moment))
            times.append(moment)
        else:
            folded, digits = _folded_digits(value)
            shape.append((path, "s"))
            leaves.append(("s", value, folded, digits))
            rigid.append(digits)
    elif isinstance(value, dict):
        shape.append((path, "{", len(value)))
        for key in sorted(value):
            _flatten(value[key], (*path, key), shape, leaves, times, rigid)
    elif isinstance(value, list):
        shape.append((path, "[", len(value)))
        for index, item in enumerate(value):
            _flatten(item, (*path, index), shape, leaves, times, rigid)
    elif isinstance(value, bool) or value is None:
        shape.append((path, "o"))
        leaves.append(("o", value))
        rigid.append(value)
    elif isinstance(value, (int, float)):
        shape.append((path, "n"))
        leaves.append(("n", value))
        rigid.append(value if isinstance(value, int) else None)
    else:
        text = str(value)
        shape.append((path, "o"))
        leaves.append(("o", text))
        rigid.append(text)


class _Flat:
    """Arguments flattened once: their shape (leaf paths and types) and their leaves.

    Leaves are `("n", number)`, `("s", text, folded, digits)`, `("t", (seconds, date_only))` or
    `("o", bool_or_null)`. Only arguments of the same shape whose rigid parts are equal — integers,
    booleans and nulls, the digits inside strings — can be near each other, so the comparison
    window is bucketed by (shape, rigid parts): candidates differ in floats, text or dates only.
    """

    __slots__ = ("interval", "leaves", "rigid", "shape")

    def __init__(self, value: Any) -> None:
        if type(value) is dict and self._strings(value):
            return
        shape: list[Any] = []
        leaves: list[tuple[Any, ...]] = []
        times: list[tuple[float, bool]] = []
        rigid: list[Any] = []  # integers, booleans, nulls and others as they are, a float as
        # None (compared with a tolerance), a string's digits; dates have none

        _flatten(value, (), shape, leaves, times, rigid)
        self.shape = tuple(shape)
        self.leaves = leaves
        self.interval = _interval(times) if times else None
        self.rigid = tuple(rigid)

    def _strings(self, value: dict[Any, Any]) -> bool:
        """Flattens an object of strings that are no dates (the usual arguments), as `add`
        does; False for any other (then nothing is set)."""
        shape: list[Any] = [((), "{", len(value))]
        leaves: list[tuple[Any, ...]] = []
        rigid: list[Any] = []
        for key in sorted(value):
            item = value[key]
            if type(item) is not str or (10 <= len(item) <= 35 and _as_time(item) is not None):
                return False
            folded, digits = _folded_digits(item)
            shape.append(((key,), "s"))
            leaves.append(("s", item, folded, digits))
            rigid.append(digits)
        self.shape = tuple(shape)
        self.leaves = leaves
        self.interval = None
        self.rigid = tuple(rigid)
        return True


def _near_text(a: tuple[Any, ...], b: tuple[Any, ...], config: LoopConfig) -> bool:
    _, _, fa, da = a
    _, _, fb, db = b
    if fa == fb:
        return True
    if da != db:  # strings that differ in their numbers name different things (ids, pages, years)
        return False
    wa, wb = _words(fa), _words(fb)
    if len(wa) != len(wb):  # neither the same words nor typos
        return False
    if sorted(wa) == sorted(wb):
        return True  # the same words (punctuation, order)
    if len(fa) > 256 or len(fb) > 256:
        return False
    pairs = [(x, y) for x, y in zip(wa, wb, strict=True) if x != y]
    if len(pairs) > max(1, len(wa) // 2):
        return False
    for x, y in pairs:  # typos: a word of 4+ characters, a small edit
        longest = max(len(x), len(y))
        if longest < 4 or not _within_edits(x, y, min(config.near_max_edits, longest // 4)):
            return False
    return True


_WORD_RE = re.compile(r"[^\W_]+")
_DECODER = json.JSONDecoder()


def _loads(text: str) -> Any:
    """`json.loads(text)` for a text that starts with its value (canonical arguments do), without
    its per-call checks unless something follows the value."""
    value, end = _DECODER.raw_decode(text)
    if end != len(text):
        return json.loads(text)
    return value


def _near_flat(a: _Flat, b: _Flat, config: LoopConfig) -> bool:
    if a.shape != b.shape:
        return False
    differs = times_differ = False
    for la, lb in zip(a.leaves, b.leaves, strict=True):
        va, vb = la[1], lb[1]
        if va == vb:
            continue
        kind = la[0]
        if kind == "t":
            times_differ = True
            continue
        differs = True
        if kind == "n":
            if isinstance(va, int) or isinstance(vb, int):
                return False
            if not (math.isfinite(va) and math.isfinite(vb)):
                return False
            if abs(va - vb) > config.near_number_tolerance * max(abs(va), abs(vb)):
                return False
        elif kind != "s" or not _near_text(la, lb, config):
            return False
    if times_differ and a.interval is not None and b.interval is not None:
        (sa, ea), (sb, eb) = a.interval, b.interval
        if ea > sa and eb > sb:
            overlap = min(ea, eb) - max(sa, sb)
            return (
                overlap > 0 and overlap / (max(ea, eb) - min(sa, sb)) >= config.near_range_overlap
            )
        limit = config.near_datetime_seconds
        return abs(sa - sb) <= limit and abs(ea - eb) <= limit
    return differs


def _interval(times: list[tuple[float, bool]]) -> tuple[float, float]:
    return min(t for t, _ in times), max(t + (_DAY if day else 0.0) for t, day in times)


def near_arguments(a: Any, b: Any, config: LoopConfig | None = None) -> bool:
    """True when two (parsed JSON) argument values differ, but only slightly.

    Deterministic rule, applied leaf by leaf on the same structure (same object keys, same list
    lengths, same leaf types):

    - integers must be equal (they name pages, offsets, ids, counts); other numbers may differ by
      `near_number_tolerance` relative (2 %), an integer and a non-integer differ; booleans and
      nulls must be equal;
    - strings must be equal after NFKC + case folding + whitespace collapsing, or hold the same
      words (in another order, with other punctuation), or differ by typos: the same number of
      words, at most half of them (at least one) changed, each changed word of 4+ characters
      and within 1 edit per 4 characters (at most `near_max_edits`) — and only if their digits
      are the same: `ORD-1001` and `ORD-1002` are two orders, `/a.txt` and `/b.txt` two files;
    - ISO dates and date-times are compared together, as the interval they span (a date covers
      its whole day): two date ranges are near when their overlap covers `near_range_overlap` of
      their union (a 7-day window shifted by a day: yes; consecutive single days: no); single
      timestamps when within `near_datetime_seconds`.

    Equal values (after that normalization of numbers: `1` and `1.0`) are not near: they repeat.
    """
    return _near_flat(_Flat(a), _Flat(b), config or _DEFAULT)


def _overflow_text(text: str | None) -> bool:
    if not text:
        return False
    squashed = "".join(c for c in text.casefold() if c.isalnum())
    return any(phrase in squashed for phrase in _SQUASHED_PHRASES)


_SQUASHED_PHRASES = tuple("".join(c for c in p if c.isalnum()) for p in _OVERFLOW_PHRASES)


def classify_error(text: str | None, error_type: Any = None) -> FailureMode:
    """`context_window_overflow` when the error text or `error.type` names a context limit."""
    if _overflow_text(text) or (isinstance(error_type, str) and _overflow_text(error_type)):
        return "context_window_overflow"
    return "tool_call_error"


# --- the per-run detector ------------------------------------------------------------------------

_CallKey = tuple[str, str]
_Ref = tuple[str, int]  # ("c", call index) | ("o", output index) | ("r", result index)


@dataclass(frozen=True, slots=True)
class LoopSignal:
    """A loop completed (or extended) by one step."""

    kind: LoopKind
    count: int
    first_span_id: str
    span_id: str
    tool: str | None = None
    period: int | None = None


# A signal held back for a call decided at its result: the signal, its instance, its waste.
_Pending = tuple[LoopSignal, Any, list[_Ref]]


class _Call:
    __slots__ = (
        "end_ns",
        "error",
        "exec_ns",
        "index",
        "key",
        "pending",
        "previous",
        "producer",
        "result",
        "run",
        "settled",
        "span_id",
        "start_ns",
        "tool",
        "turn",
    )

    def __init__(self, step: Step, producer: int | None, run: str) -> None:
        # Its run, by name: a reference to the run's detector (which holds the call) would make
        # a cycle, and a trace's loop state would wait for the cyclic GC instead of going at once.
        self.run = run
        self.index = -1
        self.tool = step.tool or ""
        self.key: _CallKey | None = None if step.arguments is None else (self.tool, step.arguments)
        self.span_id = step.span_id
        # Calls proposed together by one LLM output share its span: that is their turn.
        self.turn = step.span_id
        self.start_ns = step.start_ns
        self.end_ns: int | None = None
        self.exec_ns = 0
        self.error: str | None = None
        self.producer = producer
        self.settled = False  # a result of the call was fed
        self.result: str | None = None  # its successful result text, stripped
        # Signals decided at its result (see "Progress"): (signal, ident, wasted) each, and the
        # previous call of its key, whose outcome the result is compared with.
        self.pending: list[_Pending] | None = None
        self.previous: _Call | None = None


class _NearEntry:
    __slots__ = ("call", "flat", "group", "key")

    def __init__(self, call: _Call, flat: _Flat, group: int) -> None:
        self.call = call
        self.key = call.key
        self.flat = flat
        self.group = group


def _flat_of(text: str, cache: _Cache, config: LoopConfig) -> _Flat | None:
    """Arguments flattened, by their canonical text (once per trace: see `_Cache`)."""
    flats = cache.flat
    if text in flats:
        return flats[text]
    flat: _Flat | None = None
    if len(text) <= config.near_max_chars:
        value: Any = text
        if text[:1] in ("{", "["):
            try:
                value = _loads(text)
            except (ValueError, RecursionError):
                value = text
        try:
            flat = _Flat(value)
        except RecursionError:
            flat = None
    flats[text] = flat
    return flat


class _HeldNear:
    """The near-duplicate groups the held calls of each tool could make (see `_State.hold`).

    A group of the tracker is made of calls of one tool (in one run), each near an earlier one
    of the group; so its calls are connected by the near relation among all calls of the tool
    in the trace, which this keeps the components of (ignoring what the tracker also asks:
    calls of different turns that do not overlap, within its window). A call that would make
    a component of `near_duplicate_threshold` calls may complete a loop; so may any call past
    `_NEAR_HELD_CALLS` of a tool (which bounds the comparisons).

    No component can reach the threshold before the tool has that many calls: until then
    their arguments are only recorded (most tools are called fewer times in a trace, and are
    never flattened); the call that reaches it gets the components of the calls before it,
    compared in order as they came, then its own.
    """

    __slots__ = ("cache", "components", "config", "tools")

    def __init__(self, config: LoopConfig) -> None:
        self.config = config
        # (made by the first comparison, as few traces compare calls; the tracker's once made)
        self.cache: _Cache | None = None
        # tool → the arguments of its calls while they are fewer than the threshold (then no
        # longer added to)
        self.tools: dict[str, list[str]] = {}
        # tool → [flattened arguments, component] of each call, from the threshold on
        self.components: dict[str, list[list[Any]]] | None = None

    def may_complete(self, tool: str, arguments: str) -> bool:
        """True, with nothing recorded, when a call of `tool` with `arguments` (none of its
        earlier calls had them) may complete a near-duplicate group; else records it."""
        components = self.components
        entries = components.get(tool) if components is not None else None
        if entries is None:
            texts = self.tools.get(tool)
            if texts is None:
                self.tools[tool] = [arguments]
                return False
            if len(texts) >= _NEAR_HELD_CALLS:
                return True
            if len(texts) + 1 < self.config.near_duplicate_threshold:
                texts.append(arguments)  # no component that large yet
                return False
            if components is None:
                components = self.components = {}
            entries = components[tool] = []
            for text in texts:  # components below the threshold (fewer calls than that)
                self._join(entries, text)
        elif len(entries) >= _NEAR_HELD_CALLS:
            return True
        return self._join(entries, arguments)

    def _join(self, entries: list[Any], arguments: str) -> bool:
        """Records a call in the components of the earlier ones, `entries`; True instead when
        its component would have `near_duplicate_threshold` calls."""
        config = self.config
        cache = self.cache
        if cache is None:
            cache = self.cache = _Cache()
        flat = _flat_of(arguments, cache, config)
        joined: set[int] = set()  # the components it is near a call of
        if flat is not None:
            for other, component in entries:
                if (
                    component not in joined
                    and other is not None
                    and _near_flat(other, flat, config)
                ):
                    joined.add(component)
        size = 1
        for _, component in entries:
            if component in joined:
                size += 1
        if size >= config.near_duplicate_threshold:
            return True
        new = len(entries)  # no component has that number yet
        for entry in entries:
            if entry[1] in joined:
                entry[1] = new
        entries.append([flat, new])
        return False


_NEAR_HELD_CALLS = 32


class _Cache:
    """Per-trace memo shared by the streaming pass and the final analysis, which meet the same
    arguments and outputs again: arguments flattened (by their canonical text), outputs folded."""

    __slots__ = ("flat", "folded")

    def __init__(self) -> None:
        self.flat: dict[str, _Flat | None] = {}
        self.folded: dict[str, str] = {}

    def fold(self, text: str) -> str:
        folded = self.folded.get(text)
        if folded is None:
            folded = self.folded[text] = _fold(text)
        return folded


def _head(text: str) -> str:
    """The first `_HEAD_WORDS` words of `_spaced(_fold(text))` (all of them when fewer), joined
    by spaces: a function of the folded text, so outputs whose heads differ differ folded.

    A long text is not folded whole for it. Before an ASCII character, NFKC normalizes the
    text before and the text after apart (ASCII characters are starters that compose with
    nothing before them), and case folding maps character by character: so when `text[cut]` is
    ASCII, `_fold(text)` starts with the words of `_fold(text[:cut])` but its last one, which
    may go on past the cut. Those words are taken when there are enough of them. A part of
    ASCII and typographic punctuation is folded as ASCII (see `_plain`).
    """
    count = _HEAD_WORDS
    cut, stop = _HEAD_CHARS, min(len(text), 2 * _HEAD_CHARS)
    while cut < stop and not text[cut].isascii():
        cut += 1
    if cut < stop:
        part = text[:cut]
        plain = part.lower() if part.isascii() else _plain(part)
        if plain is None:
            plain = _spaced(_casefolded(part))
        words = plain.split(None, count)
        if len(words) > count:  # the first `count` words are followed by a space
            return " ".join(words[:count])
    return " ".join(_spaced(_casefolded(text)).split(None, count)[:count])


_RESULT_KEY_CHARS = 32

# What changes in a result without the call making progress: ISO date-times, clock times, epoch
# timestamps in seconds or milliseconds, UUIDs (request ids, trace ids).
_VOLATILE_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|(?<![\d:])\d{1,2}:\d{2}:\d{2}(?:\.\d+)?(?![\d:])"
    r"|(?<!\d)1[5-9]\d{8}(?:\d{3})?(?:\.\d+)?(?!\d)"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
_VOLATILE_MAX_CHARS = 65536


def _same_result(a: str, b: str) -> bool:
    """Two results of a call are the same: equal, or equal once their date-times, clock times,
    epoch timestamps and UUIDs are masked (texts up to `_VOLATILE_MAX_CHARS` characters)."""
    if a == b:
        return True
    if len(a) > _VOLATILE_MAX_CHARS or len(b) > _VOLATILE_MAX_CHARS:
        return False
    sub = _VOLATILE_RE.sub
    return sub("\x00", a) == sub("\x00", b)


# Outputs are told apart by the first words of their folded text; whole texts are folded only
# when an earlier output of the run begins with the same words.
_HEAD_WORDS = 8
_HEAD_CHARS = 96


class _Result:
    __slots__ = ("call", "end_ns", "start_ns", "turn")

    def __init__(self, call: _Call | None, step: Step) -> None:
        self.call = call
        self.turn = call.turn if call is not None else step.span_id
        self.start_ns = call.start_ns if call is not None else step.start_ns
        self.end_ns = step.end_ns


@dataclass(slots=True)
class _Instance:
    kind: LoopKind
    count: int
    first_span_id: str
    last_span_id: str
    tool: str | None
    period: int | None
    wasted: list[_Ref] = field(default_factory=list)


class _RunDetector:
    """Incremental loop signals over one run's calls, results and outputs."""

    __slots__ = (
        "by_key",
        "cache",
        "calls",
        "config",
        "consec_start",
        "cycle_len",
        "deferring",
        "first_calls",
        "groups",
        "heads",
        "instances",
        "llm_products",
        "near",
        "outputs",
        "result_groups",
        "results",
        "retry_chains",
        "stuck",
        "unsettled",
        "waiting",
    )

    def __init__(self, config: LoopConfig, cache: _Cache) -> None:
        self.config = config
        self.cache = cache
        self.calls: list[_Call] = []
        self.by_key: dict[_CallKey, list[int]] = {}
        self.consec_start = 0
        self.cycle_len = [0] * (config.cycle_max_period + 1)
        self.retry_chains: dict[_CallKey, list[int]] = {}
        self.near: dict[tuple[str, tuple[Any, ...], tuple[Any, ...]], deque[_NearEntry]] = {}
        self.groups: list[list[int]] = []
        # tool → its first call with arguments while it is the only one, then None (see _near)
        self.first_calls: dict[str, _Call | None] = {}
        self.results: list[_Result] = []
        # (tool, length, first characters) → (text, its members) of results of that tool
        self.result_groups: dict[tuple[str, int, str], list[tuple[str, list[int]]]] = {}
        self.outputs: dict[str, list[tuple[int, str]]] = {}
        # head → the first output with it while it is the only one (not folded yet), else None
        self.heads: dict[str, tuple[str, int, str] | None] = {}
        self.instances: dict[tuple[Any, ...], _Instance] = {}
        self.llm_products: dict[int, list[_Ref]] = {}
        # A call of another turn was compared before its result was fed, so its end as known
        # then decided whether the two were parallel (see `_streamed_modes`).
        self.unsettled = False
        # While a call that is decided at its result is added: the signals it completes.
        self.deferring: list[_Pending] | None = None
        # Keys two successive calls of which returned the same result: decided at once.
        self.stuck: set[_CallKey] = set()
        self.waiting = 0  # calls with pending signals

    def _emit(
        self, out: list[LoopSignal], signal: LoopSignal, ident: Any, wasted: Iterable[_Ref]
    ) -> None:
        """Record a loop instance (or extend it) and report the signal (or, while a call
        decided at its result is added, hold it back for then)."""
        if signal.kind in self.config.disabled:
            return
        deferring = self.deferring
        if deferring is not None:
            deferring.append((signal, ident, list(wasted)))
            return
        key = (signal.kind, ident)
        inst = self.instances.get(key)
        if inst is None:
            inst = self.instances[key] = _Instance(
                signal.kind,
                signal.count,
                signal.first_span_id,
                signal.span_id,
                signal.tool,
                signal.period,
            )
        inst.count = signal.count
        inst.last_span_id = signal.span_id
        inst.wasted.extend(wasted)
        out.append(signal)

    def _calls(self, indices: Iterable[int]) -> list[_Ref]:
        return [("c", i) for i in indices]

    # -- calls ---------------------------------------------------------------------------------

    def add_call(self, call: _Call) -> list[LoopSignal]:
        calls = self.calls
        i = call.index = len(calls)
        calls.append(call)
        producer = call.producer
        if producer is not None:
            products = self.llm_products.get(producer)
            if products is None:
                self.llm_products[producer] = [("c", i)]
            else:
                products.append(("c", i))
        out: list[LoopSignal] = []
        key = call.key
        if key is None:
            self.consec_start = i
            self._no_cycle()
            return out
        seen = self.by_key.get(key)
        if seen is not None and key not in self.stuck and len(seen) < self.config.poll_budget:
            previous = calls[seen[-1]]
            if previous.settled and (previous.error is not None or previous.result is not None):
                call.previous = previous  # a poll or a retry: decided at its result
                self.deferring = []
        if self._repeat_and_retry(call, out) == 1:
            # The first call with its key: no earlier call to repeat, neither in a row nor in a
            # cycle (`_consecutive`, `_cycle` for a call without an equal one before it).
            self.consec_start = i
            self._no_cycle()
        else:
            self._consecutive(call, out)
            self._cycle(call, out)
        deferred = self.deferring
        if deferred is not None:
            self.deferring = None
            if deferred:
                call.pending = deferred
                self.waiting += 1
        self._near(call, out)
        return out

    def _no_cycle(self) -> None:
        lengths = self.cycle_len
        if any(lengths):
            self.cycle_len = [0] * len(lengths)

    def _repeat_and_retry(self, call: _Call, out: list[LoopSignal]) -> int:
        """`repeat` (anywhere in the run) and `retry_storm` share the per-call index lists.
        Returns how many calls of the run have the call's key, this one included."""
        config, calls, i = self.config, self.calls, call.index
        assert call.key is not None
        seen = self.by_key.get(call.key)
        if seen is None:
            self.by_key[call.key] = [i]
            if self.retry_chains:
                self.retry_chains.pop(call.key, None)
            return 1
        seen.append(i)
        n = len(seen)
        if n >= config.repeat_threshold:
            wasted = seen[1:] if n == config.repeat_threshold else [i]
            first = calls[seen[0]].span_id
            signal = LoopSignal("repeat", n, first, call.span_id, call.tool)
            self._emit(out, signal, call.key, self._calls(wasted))
        if calls[seen[-2]].error is None:
            if self.retry_chains:
                self.retry_chains.pop(call.key, None)
            return n
        chain = self.retry_chains.get(call.key)
        if chain is None or chain[-1] != seen[-2]:
            chain = self.retry_chains[call.key] = [seen[-2]]
        chain.append(i)
        retries = len(chain) - 1
        if retries >= config.retry_storm_threshold:
            wasted = chain[1:] if retries == config.retry_storm_threshold else [i]
            first = calls[chain[0]].span_id
            signal = LoopSignal("retry_storm", len(chain), first, call.span_id, call.tool)
            self._emit(out, signal, (call.key, chain[0]), self._calls(wasted))
        return n

    def _consecutive(self, call: _Call, out: list[LoopSignal]) -> None:
        """Identical calls in a row; a retry right after a failure starts a new row."""
        calls, i = self.calls, call.index
        prev = calls[i - 1] if i else None
        if call.key is None or prev is None or prev.key != call.key or prev.error is not None:
            self.consec_start = i
            return
        start = self.consec_start
        n = i - start + 1
        threshold = self.config.consecutive_threshold
        if n >= threshold:
            wasted = range(start + 1, i + 1) if n == threshold else range(i, i + 1)
            signal = LoopSignal("consecutive", n, calls[start].span_id, call.span_id, call.tool)
            self._emit(out, signal, start, self._calls(wasted))

    def _cycle(self, call: _Call, out: list[LoopSignal]) -> None:
        """`cycle_len[p]`: how many calls in a row equal the call `p` places before them."""
        config, calls, i, key = self.config, self.calls, call.index, call.key
        lengths = self.cycle_len
        longest = 0
        for p in range(1, config.cycle_max_period + 1):
            if key is not None and i >= p and calls[i - p].key == key:
                lengths[p] += 1
                longest = max(longest, lengths[p])
            else:
                lengths[p] = 0
        if longest < config.cycle_min_period * (config.cycle_repeats - 1):
            return  # below every period's `need`
        for p in range(config.cycle_min_period, config.cycle_max_period + 1):
            run = lengths[p]
            need = p * (config.cycle_repeats - 1)
            if run < need or (run - need) % p:
                continue
            if any(lengths[q] >= run for q in range(1, p) if p % q == 0):
                continue  # really a shorter period (or one call repeated)
            start = i - run - p + 1
            wasted = range(start + p, i + 1) if run == need else range(i - p + 1, i + 1)
            signal = LoopSignal(
                "cycle", (run + p) // p, calls[start].span_id, call.span_id, None, p
            )
            self._emit(out, signal, (p, start), self._calls(wasted))

    def _near(self, call: _Call, out: list[LoopSignal]) -> None:
        """Chain the call to the latest earlier, non-parallel call of its tool it is near to.

        The window holds the last `near_duplicate_window` distinct argument values per tool,
        argument shape and rigid parts (see `_Flat`), so a call costs O(window).

        The first call of a tool has no earlier call to be near to: it starts a group of its
        own. That is done when a second call of the tool comes (it finds the windows of its
        tool as empty then as before), so that a tool called once is never flattened.
        """
        first_calls, tool = self.first_calls, call.tool
        if tool not in first_calls:
            first_calls[tool] = call
            return
        first = first_calls[tool]
        if first is not None:
            first_calls[tool] = None
            self._near_add(first, out)
        self._near_add(call, out)

    def _near_add(self, call: _Call, out: list[LoopSignal]) -> None:
        config = self.config
        flat = self._flat(call)
        if flat is None:
            return
        bucket = (call.tool, flat.shape, flat.rigid)
        window = self.near.get(bucket)
        if window is None:
            window = self.near[bucket] = deque(maxlen=config.near_duplicate_window)
        for entry in window:
            if entry.key == call.key:
                return  # an exact repeat: `repeat` / `consecutive` territory
        match: _NearEntry | None = None
        turn, start = call.turn, call.start_ns
        for entry in reversed(window):
            # Calls issued together are not compared: the same LLM turn, or this call started
            # before the earlier one finished.
            earlier = entry.call
            if earlier.turn == turn:
                continue
            if not earlier.settled:
                self.unsettled = True
            if earlier.end_ns is not None and start < earlier.end_ns:
                continue
            if _near_flat(entry.flat, flat, config):
                match = entry
                break
        if match is None:
            self.groups.append([call.index])
            window.append(_NearEntry(call, flat, len(self.groups) - 1))
            return
        group = self.groups[match.group]
        group.append(call.index)
        window.append(_NearEntry(call, flat, match.group))
        n = len(group)
        threshold = config.near_duplicate_threshold
        if n >= threshold:
            wasted = group[1:] if n == threshold else [call.index]
            first = self.calls[group[0]].span_id
            signal = LoopSignal("near_duplicate", n, first, call.span_id, call.tool)
            self._emit(out, signal, match.group, self._calls(wasted))

    def _flat(self, call: _Call) -> _Flat | None:
        """The call's flattened arguments (parsed once per trace, both passes share them)."""
        return _flat_of(call.key[1] if call.key is not None else "", self.cache, self.config)

    # -- results and outputs -------------------------------------------------------------------

    def add_result(self, call: _Call | None, step: Step) -> list[LoopSignal]:
        """`no_progress`: the same successful result of one tool, in separate turns."""
        out: list[LoopSignal] = []
        text = None if step.error is not None or step.text is None else step.text.strip()
        if call is not None:
            call.error = step.error
            call.end_ns = step.end_ns
            call.exec_ns = max(0, step.end_ns - step.start_ns)
            call.settled = True
            call.result = text
            if call.previous is not None:
                self._decide(call, out)
        if text is None:
            return out
        result = _Result(call, step)
        r = len(self.results)
        self.results.append(result)
        tool = step.tool or (call.tool if call is not None else "")
        # Results are grouped by (tool, text); a long text is hashed by its length and first
        # characters only, texts that share those are told apart by comparing them.
        bucket_key = (tool, len(text), text[:_RESULT_KEY_CHARS])
        bucket = self.result_groups.get(bucket_key)
        members: list[int] | None = None
        if bucket is None:
            members = []
            self.result_groups[bucket_key] = [(text, members)]
        else:
            for seen, seen_members in bucket:
                if seen == text:
                    members = seen_members
                    break
            if members is None:
                members = []
                bucket.append((text, members))
        if members:
            last = self.results[members[-1]]
            if last.turn == result.turn or result.start_ns < last.end_ns:
                return out  # calls of one turn: one observation
        members.append(r)
        n = len(members)
        threshold = self.config.no_progress_threshold
        if n >= threshold:
            wasted = members[1:] if n == threshold else [r]
            head = self.results[members[0]]
            first = head.call.span_id if head.call is not None else head.turn
            signal = LoopSignal("no_progress", n, first, step.span_id, tool)
            self._emit(out, signal, (tool, text), [self._result_ref(w) for w in wasted])
        return out

    def _decide(self, call: _Call, out: list[LoopSignal]) -> None:
        """A call decided at its result, now known: its signals held back are dropped when it
        made progress (a new successful result, or success after a failure), else emitted; a
        result the same as the previous one makes its key stuck."""
        pending, previous = call.pending, call.previous
        assert previous is not None
        call.previous = None
        progress = False
        if call.error is None:
            if previous.error is not None:
                progress = True  # backoff: a retry that succeeded
            elif call.result is not None and previous.result is not None:
                if _same_result(call.result, previous.result):
                    assert call.key is not None
                    self.stuck.add(call.key)
                else:
                    progress = True  # a poll whose result moved on
        if pending is None:
            return
        call.pending = None
        self.waiting -= 1
        if not progress:
            for signal, ident, wasted in pending:
                self._emit(out, signal, ident, wasted)

    def settle(self) -> None:
        """Emits the signals of calls whose result never arrived (the trace is complete)."""
        if not self.waiting:
            return
        out: list[LoopSignal] = []
        for call in self.calls:
            pending = call.pending
            if pending is not None:
                call.pending = None
                for signal, ident, wasted in pending:
                    self._emit(out, signal, ident, wasted)
        self.waiting = 0

    def _result_ref(self, r: int) -> _Ref:
        call = self.results[r].call
        return ("c", call.index) if call is not None else ("r", r)

    def add_output(self, step: Step, index: int, producer: int | None) -> list[LoopSignal]:
        """`output_repeat`: the same assistant text, folded."""
        if producer is not None:
            self.llm_products.setdefault(producer, []).append(("o", index))
        out: list[LoopSignal] = []
        raw = step.text or ""
        cache = self.cache
        head = _head(raw)
        if not head and not cache.fold(raw):  # nothing but spaces: no text
            return out
        heads = self.heads
        if head not in heads:  # no output of the run folds to this one's text: no fold yet
            heads[head] = (raw, index, step.span_id)
            return out
        first = heads[head]
        if first is not None:  # the first output with this head, folded now
            heads[head] = None
            self.outputs.setdefault(cache.fold(first[0]), []).insert(0, (first[1], first[2]))
        text = cache.fold(raw)
        members = self.outputs.setdefault(text, [])
        members.append((index, step.span_id))
        n = len(members)
        threshold = self.config.output_repeat_threshold
        if n >= threshold:
            wasted = members[1:] if n == threshold else members[-1:]
            signal = LoopSignal("output_repeat", n, members[0][1], step.span_id)
            self._emit(out, signal, text, [("o", w) for w, _ in wasted])
        return out


# --- feeding steps: shared by streaming (`on_span`) and the trace analysis -----------------------


class _Tracker:
    """Routes steps to their run's detector; remembers calls (for results) and LLM calls."""

    __slots__ = (
        "cache",
        "calls_by_id",
        "calls_by_span",
        "config",
        "detectors",
        "exec_end",
        "last_llm",
        "llm_by_span",
        "llms",
        "mode_steps",
        "outputs",
        "unresolved",
    )

    def __init__(self, config: LoopConfig, cache: _Cache | None = None) -> None:
        self.config = config
        self.cache = _Cache() if cache is None else cache
        self.detectors: dict[str, _RunDetector] = {}
        self.calls_by_id: dict[str, _Call] = {}
        self.calls_by_span: dict[str, _Call] = {}
        # tool span → its end: a call's execution interval is known before its result is fed
        self.exec_end: dict[str, int] = {}
        self.llm_by_span: dict[str, int] = {}
        self.last_llm: dict[str, int] = {}
        self.llms: list[tuple[int, int]] = []  # (tokens, duration in ns) of each LLM call
        self.outputs = 0
        # A tool result was not matched to its call by call id (see `_streamed_modes`).
        self.unresolved = False
        # The steps that added a failure mode (their mode may change as overflows become known)
        self.mode_steps: list[Step] = []

    def _detector(self, run: str) -> _RunDetector:
        detector = self.detectors[run] = _RunDetector(self.config, self.cache)
        return detector

    def feed(
        self, step: Step, run: str, overflow: set[str], modes: set[FailureMode]
    ) -> list[LoopSignal]:
        """Signals completed by `step` (in run `run`); failure modes it shows go to `modes`.

        Steps of other kinds than `_FED` change nothing. A run's detector is made by its first
        step that needs one (a run without calls, results or outputs adds nothing to a report).
        """
        kind = step.kind
        if kind == "llm":
            index = len(self.llms)
            self.llm_by_span[step.span_id] = self.last_llm[run] = index
            tokens = (step.input_tokens or 0) + (step.output_tokens or 0)
            self.llms.append((tokens, max(0, step.end_ns - step.start_ns)))
            if step.finish_reason in _OVERFLOW_FINISH:
                modes.add("context_window_overflow")
                self.mode_steps.append(step)
            return _NO_SIGNALS
        if kind == "assistant":
            producer = self.llm_by_span.get(step.span_id, self.last_llm.get(run))
            index = self.outputs
            self.outputs += 1
            if step.finish_reason in _OVERFLOW_FINISH:
                modes.add("context_window_overflow")
                self.mode_steps.append(step)
            detector = self.detectors.get(run) or self._detector(run)
            return detector.add_output(step, index, producer)
        if kind == "tool_call":
            exec_span_id = step.exec_span_id
            end_ns = self.exec_end.get(exec_span_id) if exec_span_id else None
            return self.add_call(step, run, end_ns)
        if kind == "tool_result":
            call_id = step.call_id
            found = self.calls_by_id.get(call_id) if call_id else None
            if found is None:
                self.unresolved = True
                found = self.calls_by_span.get(step.span_id)
            if step.error is not None:
                modes.add(_mode(step, overflow))
                self.mode_steps.append(step)
            if found is None:
                detector = self.detectors.get(run) or self._detector(run)
                return detector.add_result(None, step)
            return self.detectors[found.run].add_result(found, step)
        if kind == "error":
            modes.add(_mode(step, overflow))
            self.mode_steps.append(step)
        return _NO_SIGNALS

    def add_call(self, step: Step, run: str, end_ns: int | None) -> list[LoopSignal]:
        """`feed` of a tool call whose tool span ended at `end_ns` (None: not known yet)."""
        detector = self.detectors.get(run) or self._detector(run)
        producer = self.llm_by_span.get(step.span_id, self.last_llm.get(run))
        call = _Call(step, producer, run)
        call.end_ns = end_ns
        signals = detector.add_call(call)
        if step.call_id:
            self.calls_by_id[step.call_id] = call
        if step.exec_span_id:  # an id-less result on that tool span is this call's
            self.calls_by_span[step.exec_span_id] = call
        return signals

    def replay(self, held: list[_Held], overflow: set[str]) -> None:
        """Feeds steps held back, in order, as they were when they arrived: each in the run it
        had then, a tool call with the end its tool span had then. The failure modes they show
        were taken when they arrived; they complete no loop (see `_State.hold`)."""
        modes: set[FailureMode] = set()
        for step, run, end_ns in held:
            if step.kind == "tool_call":
                self.add_call(step, run, end_ns)
            else:
                self.feed(step, run, overflow, modes)


# A step held back (`_State.held`): the step, its run, its tool span's end (a call's; else None).
_Held = tuple[Step, str, int | None]


# Returned when a step completes no loop (never appended to).
_NO_SIGNALS: list[LoopSignal] = []

# The step kinds `_Tracker.feed` reads (it does nothing with the others).
_FED = frozenset(("tool_call", "tool_result", "assistant", "llm", "error"))


def _mode(step: Step, overflow: set[str]) -> FailureMode:
    if step.span_id in overflow:
        return "context_window_overflow"
    return classify_error(step.error)


# --- trace-level analysis ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoopInstance:
    """One loop found in a run."""

    kind: LoopKind
    run_id: str
    count: int
    first_span_id: str
    last_span_id: str
    tool: str | None
    period: int | None
    wasted_steps: int


@dataclass(frozen=True, slots=True)
class LoopReport:
    """The loops and failure modes of one trace."""

    loops: tuple[LoopInstance, ...]
    failure_modes: tuple[FailureMode, ...]
    steps: int
    """Tool calls and assistant outputs of the trace."""
    wasted_steps: int
    wasted_tokens: int
    wasted_seconds: float
    score: float

    @property
    def kinds(self) -> tuple[LoopKind, ...]:
        found = {loop.kind for loop in self.loops}
        return tuple(k for k in _KINDS if k in found)

    def by_kind(self) -> dict[LoopKind, int]:
        counts: dict[LoopKind, int] = {}
        for loop in self.loops:
            counts[loop.kind] = counts.get(loop.kind, 0) + 1
        return counts


def analyze(
    trajectory: Trajectory,
    config: LoopConfig | None = None,
    overflow_spans: Iterable[str] = (),
    *,
    _cache: _Cache | None = None,
) -> LoopReport:
    """Loops and failure modes of a whole trajectory (canonical step order, real runs).

    `overflow_spans`: spans known to report a context overflow beyond what their steps say
    (`error.type`, a finish reason after the first); the evaluator collects them as spans arrive.

    Waste: for each loop, its occurrences after the first (a cycle: the calls after its first
    period) — counted once when loops overlap. An LLM call is wasted when everything it produced
    (tool calls, text) was; wasted tokens are those LLM calls' input + output tokens, wasted
    seconds their duration plus that of the wasted tool executions.
    """
    config = config or _DEFAULT
    overflow = set(overflow_spans)
    tracker = _Tracker(config, _cache)
    for step in trajectory.steps:
        if step.kind == "tool_result" and step.end_ns > step.start_ns:
            tracker.exec_end[step.span_id] = step.end_ns
    modes: set[FailureMode] = set()
    for step in trajectory.steps:
        if step.kind in _FED:
            tracker.feed(step, step.run_id, overflow, modes)
    return _report(tracker, modes, overflow)


def _report(tracker: _Tracker, modes: set[FailureMode], overflow: set[str]) -> LoopReport:
    """The report of a tracker fed the whole trajectory; `modes` are those its steps showed."""
    if overflow:
        modes.add("context_window_overflow")
    loops: list[LoopInstance] = []
    calls = wasted_steps = wasted_tokens = wasted_ns = 0
    for run_id, detector in tracker.detectors.items():
        detector.settle()
        calls += len(detector.calls)
        if not detector.instances:
            continue  # nothing wasted, so no LLM call either
        run_wasted: set[_Ref] = set()
        for inst in detector.instances.values():
            refs = set(inst.wasted)
            run_wasted |= refs
            loops.append(
                LoopInstance(
                    kind=inst.kind,
                    run_id=run_id,
                    count=inst.count,
                    first_span_id=inst.first_span_id,
                    last_span_id=inst.last_span_id,
                    tool=inst.tool,
                    period=inst.period,
                    wasted_steps=sum(1 for r in refs if r[0] != "r"),
                )
            )
        for kind, index in run_wasted:
            if kind == "c":
                wasted_steps += 1
                wasted_ns += detector.calls[index].exec_ns
            elif kind == "o":
                wasted_steps += 1
        for producer, products in detector.llm_products.items():
            if all(ref in run_wasted for ref in products):
                tokens, duration_ns = tracker.llms[producer]
                wasted_tokens += tokens
                wasted_ns += duration_ns
    steps = calls + tracker.outputs
    score = 1.0 if not loops else max(0.0, 1.0 - wasted_steps / max(1, steps))
    loops.sort(key=lambda x: (x.run_id, _PRIORITY.index(x.kind), x.first_span_id, x.count))
    return LoopReport(
        loops=tuple(loops),
        failure_modes=tuple(sorted(modes)),
        steps=steps,
        wasted_steps=wasted_steps,
        wasted_tokens=wasted_tokens,
        wasted_seconds=round(wasted_ns / 1e9, 6),
        score=round(score, 6),
    )


# --- the evaluator -------------------------------------------------------------------------------


class _State:
    """A trace's streaming state.

    Steps are held back from the tracker while none of them can complete a loop: every loop
    needs some value to come again — a call's key (`repeat`, `consecutive`, `cycle`,
    `retry_storm`), near arguments of a tool `near_duplicate_threshold` times (`_HeldNear`),
    a result's text
    `no_progress_threshold` times (its length and first characters are counted here), an
    output's head `output_repeat_threshold` times — in one run, so in the trace. Counting those
    is cheaper than feeding the tracker; the first step that reaches a count makes the tracker,
    which is fed the held steps as they were when they arrived (`_Tracker.replay`) and every
    later step as it comes. A trace none of whose steps reached a count has no loop.
    """

    __slots__ = (
        "agents",
        "config",
        "exec_end",
        "fed",
        "fed_calls",
        "heads",
        "held",
        "keys",
        "mode_steps",
        "modes",
        "near",
        "overflow",
        "parents",
        "results",
        "tracker",
    )

    def __init__(self, config: LoopConfig) -> None:
        self.config = config
        self.tracker: _Tracker | None = None  # made by the first step that may complete a loop
        self.parents: dict[str, str] = {}
        self.agents: set[str] = set()
        self.overflow: set[str] = set()
        self.modes: set[FailureMode] = set()  # those of the span being fed (then cleared)
        # The fields of the steps fed to `tracker` while streaming, `run_id` set to the run they
        # were fed in (None once a feed failed half way: the tracker then stands for nothing);
        # those of the steps held back are recorded when the tracker is made.
        self.fed: list[dict[str, Any]] | None = []
        self.fed_calls: list[int] = []  # where the tool calls are in `fed`
        # tool span → its end: a call's execution interval is known before its result is fed
        self.exec_end: dict[str, int] = {}
        # The steps that added a failure mode (the tracker's `mode_steps` once it is made).
        self.mode_steps: list[Step] = []
        # While steps are held back: those steps (every step of a `_FED` kind: step, run, its
        # tool span's end for a call) and the counts that bound the loops they can make (`heads`
        # counts the outputs).
        self.held: list[_Held] = []
        self.keys: set[_CallKey] = set()
        self.near = _HeldNear(config)
        self.results: dict[tuple[int, str], int] = {}
        self.heads: dict[str, int] = {}

    def run_of(self, span_id: str) -> str:
        """Streaming stand-in for the run: the nearest agent span above, else the first span
        above that is not a GenAI span seen so far (usually the agent span, not arrived yet)."""
        if span_id in self.agents:
            return span_id
        current = self.parents.get(span_id, "")
        for _ in range(64):
            if not current or current in self.agents or current not in self.parents:
                break
            current = self.parents[current]
        return current

    def hold(self, step: Step, kind: str, run: str, modes: set[FailureMode]) -> bool:
        """Holds back a step of a `_FED` kind that cannot complete a loop, taking its failure
        modes as `_Tracker.feed` does; False, with nothing done, for a step that may."""
        config = self.config
        end_ns = None
        if kind == "assistant":
            head = _head(step.text or "")
            n = self.heads.get(head, 0) + 1
            if n >= config.output_repeat_threshold:
                return False
            self.heads[head] = n
            if step.finish_reason in _OVERFLOW_FINISH:
                modes.add("context_window_overflow")
                self.mode_steps.append(step)
        elif kind == "tool_call":
            arguments = step.arguments
            if arguments is not None:  # a call without arguments matches nothing
                tool = step.tool or ""
                key = (tool, arguments)
                if key in self.keys or self.near.may_complete(tool, arguments):
                    return False
                self.keys.add(key)
            exec_span_id = step.exec_span_id
            if exec_span_id:
                end_ns = self.exec_end.get(exec_span_id)
        elif kind == "tool_result":
            text = step.text
            if step.error is not None:
                modes.add(_mode(step, self.overflow))
                self.mode_steps.append(step)
            elif text is not None:
                text = text.strip()
                result = (len(text), text[:_RESULT_KEY_CHARS])
                n = self.results.get(result, 0) + 1
                if n >= config.no_progress_threshold:
                    return False
                self.results[result] = n
        elif kind == "llm":
            if step.finish_reason in _OVERFLOW_FINISH:
                modes.add("context_window_overflow")
                self.mode_steps.append(step)
        else:  # an error: a failure mode (nothing for the tracker, but a step fed)
            modes.add(_mode(step, self.overflow))
            self.mode_steps.append(step)
        self.held.append((step, run, end_ns))
        return True

    def catch_up(self, fed: list[dict[str, Any]] | None) -> _Tracker:
        """The tracker, made now and fed the steps held back, whose fields go to `fed` (the
        list `fed` stands for while a span is fed)."""
        tracker = self.tracker = _Tracker(self.config, self.near.cache)
        tracker.exec_end = self.exec_end
        tracker.replay(self.held, self.overflow)
        tracker.mode_steps = self.mode_steps  # the replay's are those taken when held
        if fed is not None:
            for step, run, _ in self.held:
                fields = step.__dict__.copy()
                fields["run_id"] = run
                if step.kind == "tool_call":
                    self.fed_calls.append(len(fed))
                fed.append(fields)
        self.held = []
        return tracker


class LoopEvaluator(Evaluator):
    """Loops (per span as they complete, per trace at the end) and failure modes."""

    name = "loops"
    version = "1.1.0"  # 1.1: polling and backoff are progress (see "Progress" above)

    def __init__(self, config: LoopConfig | None = None) -> None:
        self.config = config or LoopConfig()

    def start_trace(self, trace: TraceInfo) -> _State:
        return _State(self.config)

    def on_span(
        self, state: _State, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        view = span.view
        span_id = view.span_id
        parent = view.parent_span_id
        parents = state.parents
        parents[span_id] = parent
        agents = state.agents
        operation = span.operation
        if operation == "agent":
            agents.add(span_id)
        elif operation == "tool":
            state.exec_end[span_id] = view.end_ns
        modes = state.modes  # empty between spans
        # Context overflow stated by the span beyond its steps: `error.type`, any finish reason.
        error_type = view.attributes.get("error.type")
        overflows = isinstance(error_type, str) and _overflow_text(error_type)
        if not overflows:
            for reason in span.finish_reasons:
                if reason in _OVERFLOW_FINISH:
                    overflows = True
                    break
        if overflows:
            state.overflow.add(span_id)
            modes.add("context_window_overflow")
        elif not steps:
            return ()
        # The run (`_State.run_of`), its usual cases first: the agent span, its direct child.
        if span_id in agents:
            run = span_id
        elif not parent or parent in agents or parent not in parents:
            run = parent
        else:
            run = state.run_of(span_id)
        signals: list[LoopSignal] | None = None
        fed, state.fed = state.fed, None
        tracker = state.tracker
        for step in steps:
            kind = step.kind
            if kind in _FED:
                if tracker is None:
                    if state.hold(step, kind, run, modes):
                        continue  # its fields are recorded if the tracker is made
                    tracker = state.catch_up(fed)
                found = tracker.feed(step, run, state.overflow, modes)
                if found:
                    signals = found if signals is None else signals + found
                if fed is not None:
                    fields = step.__dict__.copy()  # a Step keeps its fields in its __dict__
                    fields["run_id"] = run
                    if kind == "tool_call":
                        state.fed_calls.append(len(fed))
                    fed.append(fields)
        state.fed = fed
        if signals is None and not modes:
            return ()
        results = self._span_results(span_id, signals or [], modes)
        modes.clear()
        return results

    # Tests set this to always compute the trace result again from the trajectory.
    _refeed = False

    def finish_trace(
        self, state: _State, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        if isinstance(state, _State):
            tracker = state.tracker
            if tracker is None:  # every step held back
                steps = None
                if not self._refeed and state.fed is not None:
                    steps = _held_steps(state.held, trajectory.steps)
                if steps is not None:
                    held_modes = _final_modes(state)
                    if state.overflow:
                        held_modes.add("context_window_overflow")
                    return self._clean_results(steps, sorted(held_modes))
                return self.trace_results(analyze(trajectory, self.config, state.overflow))
            modes = None if self._refeed else _streamed_modes(state, trajectory)
            if modes is not None:
                for detector in tracker.detectors.values():
                    detector.settle()
            if modes is None:
                report = analyze(trajectory, self.config, state.overflow, _cache=tracker.cache)
            elif not any(detector.instances for detector in tracker.detectors.values()):
                # No loop (the usual case): the results of `_report`'s report, directly.
                if state.overflow:
                    modes.add("context_window_overflow")
                steps = tracker.outputs
                for detector in tracker.detectors.values():
                    steps += len(detector.calls)
                return self._clean_results(steps, sorted(modes))
            else:
                report = _report(tracker, modes, state.overflow)
        else:
            report = analyze(trajectory, self.config)
        return self.trace_results(report)

    # -- results -----------------------------------------------------------------------------

    def _result(
        self,
        name: str,
        span_id: str | None,
        *,
        score_value: float,
        score_label: str,
        explanation: str,
        attributes: dict[str, AttributeValue],
    ) -> EvaluationResult:
        return _new_result(
            name,
            self.name,
            self.version,
            span_id,
            score_value,
            score_label,
            explanation,
            attributes,
            None,  # error_type
        )

    def _span_results(
        self, span_id: str, signals: list[LoopSignal], modes: set[FailureMode]
    ) -> list[EvaluationResult]:
        results: list[EvaluationResult] = []
        strongest: dict[LoopKind, LoopSignal] = {}
        for signal in signals:
            held = strongest.get(signal.kind)
            if held is None or signal.count > held.count:
                strongest[signal.kind] = signal
        ordered = [strongest[k] for k in _PRIORITY if k in strongest]
        for n, signal in enumerate(ordered):
            attributes: dict[str, AttributeValue] = {}
            if n == 0:
                attributes = {
                    names.ATTR_LOOP_DETECTED: True,
                    names.ATTR_LOOP_KIND: signal.kind,
                    names.ATTR_LOOP_KINDS: [s.kind for s in ordered],
                    names.ATTR_LOOP_COUNT: signal.count,
                    names.ATTR_LOOP_FIRST_SPAN_ID: signal.first_span_id,
                }
                if signal.period is not None:
                    attributes[names.ATTR_LOOP_PERIOD] = signal.period
            results.append(
                self._result(
                    names.EVAL_LOOP,
                    span_id,
                    score_value=0.0,
                    score_label=signal.kind,
                    explanation=_explain(signal),
                    attributes=attributes,
                )
            )
        for n, mode in enumerate(sorted(modes)):
            results.append(
                self._result(
                    names.EVAL_FAILURE_MODE,
                    span_id,
                    score_value=0.0,
                    score_label=mode,
                    explanation=_MODE_TEXT[mode],
                    attributes={names.ATTR_FAILURE_MODE: mode} if n == 0 else {},
                )
            )
        return results

    def _clean_results(self, steps: int, modes: list[FailureMode]) -> list[EvaluationResult]:
        """`trace_results` of a report without loops: `steps` steps, failure modes `modes`."""
        attributes: dict[str, AttributeValue] = {
            names.ATTR_LOOPS_DETECTED: False,
            names.ATTR_LOOPS_COUNT: 0,
            names.ATTR_LOOPS_KINDS: [],
            names.ATTR_LOOPS_WASTED_STEPS: 0,
            names.ATTR_LOOPS_WASTED_TOKENS: 0,
            names.ATTR_LOOPS_WASTED_SECONDS: 0.0,
            names.ATTR_LOOPS_SCORE: 1.0,
        }
        evaluator, version = self.name, self.version
        return [  # (`_result`'s values, without its calls: made for every trace)
            _new_result(
                names.EVAL_LOOPS,
                evaluator,
                version,
                None,
                1.0,
                "pass",
                f"no loop in {steps} tool call(s) and output(s)",
                attributes,
                None,
            ),
            _new_result(
                names.EVAL_FAILURE_MODES,
                evaluator,
                version,
                None,
                0.0 if modes else 1.0,
                "fail" if modes else "pass",
                "failure modes: " + ", ".join(modes) if modes else "no failure mode",
                {names.ATTR_FAILURE_MODES: modes},
                None,
            ),
        ]

    def _failure_modes_result(self, modes: list[FailureMode]) -> EvaluationResult:
        return self._result(
            names.EVAL_FAILURE_MODES,
            None,
            score_value=0.0 if modes else 1.0,
            score_label="fail" if modes else "pass",
            explanation="failure modes: " + ", ".join(modes) if modes else "no failure mode",
            attributes={names.ATTR_FAILURE_MODES: modes},
        )

    def trace_results(self, report: LoopReport) -> list[EvaluationResult]:
        """The two trace-level results (`tracehound.loops`, `tracehound.failure_modes`)."""
        by_kind = report.by_kind()
        kinds = report.kinds
        attributes: dict[str, AttributeValue] = {
            names.ATTR_LOOPS_DETECTED: bool(report.loops),
            names.ATTR_LOOPS_COUNT: len(report.loops),
            names.ATTR_LOOPS_KINDS: list(kinds),
            names.ATTR_LOOPS_WASTED_STEPS: report.wasted_steps,
            names.ATTR_LOOPS_WASTED_TOKENS: report.wasted_tokens,
            names.ATTR_LOOPS_WASTED_SECONDS: report.wasted_seconds,
            names.ATTR_LOOPS_SCORE: report.score,
        }
        for kind in kinds:
            attributes[names.ATTR_LOOPS_BY_KIND[kind]] = by_kind[kind]
        if report.loops:
            parts = [f"{kind} x{by_kind[kind]}" for kind in kinds]
            shown = "; ".join(_describe(loop) for loop in report.loops[:5])
            more = f"; and {len(report.loops) - 5} more" if len(report.loops) > 5 else ""
            explanation = (
                f"{len(report.loops)} loop(s) ({', '.join(parts)}): {shown}{more}. "
                f"Wasted {report.wasted_steps} of {report.steps} steps, "
                f"{report.wasted_tokens} tokens, {report.wasted_seconds:.3g} s"
            )
        else:
            explanation = f"no loop in {report.steps} tool call(s) and output(s)"
        if not report.loops:  # the same result as `_clean_results`'
            return [
                self._result(
                    names.EVAL_LOOPS,
                    None,
                    score_value=report.score,
                    score_label="pass",
                    explanation=explanation,
                    attributes=attributes,
                ),
                self._failure_modes_result(list(report.failure_modes)),
            ]
        return [
            DetailedResult(
                name=names.EVAL_LOOPS,
                evaluator=self.name,
                evaluator_version=self.version,
                score_value=report.score,
                score_label="fail",
                explanation=explanation,
                attributes=attributes,
                # which run looped on which tool, for the run history (not emitted)
                detail={
                    "loops": [
                        {
                            "kind": loop.kind,
                            "run_id": loop.run_id,
                            "tool": loop.tool,
                            "count": loop.count,
                        }
                        for loop in report.loops
                    ]
                },
            ),
            self._failure_modes_result(list(report.failure_modes)),
        ]


# Results are made from the values of all their fields, in order (see `fields_maker`)
_new_result = fields_maker(EvaluationResult)


def _streamed_modes(state: _State, trajectory: Trajectory) -> set[FailureMode] | None:
    """The trace's failure modes when the streaming tracker is the one `analyze` would build
    (its report is then the trace's); else None (then `analyze` feeds the trajectory again).

    `analyze` feeds the trajectory's steps of the `_FED` kinds in order, each in its run. The
    streaming tracker was fed steps too: those are the same feeds when the two sequences agree
    step by step on the run and on every field `feed` reads — except `exec_span_id`, which a
    tool call learns from its tool span, often after the call was fed. That field does two
    things in `feed`, and both are checked apart:

    - it registers the call for a result without a (known) call id: unless every call was fed
      with its final `exec_span_id`, the tracker's `unresolved` (set by any result not matched
      by call id) sends the trace to the re-feed;
    - it gives the call its end before its result is fed. The end is read before then only when
      a call of another turn is compared with it (near duplicates): the detectors' `unsettled`.

    Nothing else `feed` does depends on when a span arrived: the runs are compared, and the
    failure modes, which depend on the overflow spans known at the time, are taken again from
    the steps that show them (`_State.mode_steps`: equal fields, so those of the trajectory)
    with all of them known.

    A trace whose steps were all held back has no tracker: see `_held_steps` for it.
    """
    tracker, fed = state.tracker, state.fed
    if tracker is None or fed is None:
        return None
    state.fed = None  # edited below: once only
    for detector in tracker.detectors.values():
        if detector.unsettled:
            return None
    finals = [step.__dict__ for step in trajectory.steps if step.kind in _FED]
    if len(finals) != len(fed):
        return None
    moved = False  # a call's exec_span_id is not the one it was fed with
    for i in state.fed_calls:  # whatever their exec_span_id: see above
        fields, final = fed[i], finals[i]
        if fields.pop("exec_span_id", None) != final.get("exec_span_id"):
            moved = True
        if "exec_span_id" in final:
            fields["exec_span_id"] = final["exec_span_id"]
    # Equal dicts: equal fields, run included (a field missing from one dict only, even if set
    # to its default in the other, is a difference: the re-feed decides then).
    if fed != finals or (moved and tracker.unresolved):
        return None
    return _final_modes(state)


def _final_modes(state: _State) -> set[FailureMode]:
    """The failure modes of the steps that showed one, with every overflow span known."""
    overflow = state.overflow
    modes: set[FailureMode] = set()
    for step in state.mode_steps:  # as `_Tracker.feed` adds them
        kind = step.kind
        if kind == "error" or (kind == "tool_result" and step.error is not None):
            modes.add(_mode(step, overflow))
        elif kind in {"assistant", "llm"} and step.finish_reason in _OVERFLOW_FINISH:
            modes.add("context_window_overflow")
    return modes


# What the steps held back are compared on with the trajectory's, by kind (see `_held_steps`):
# the fields `_State.hold` counts by and those failure modes read.
_HELD_FIELDS: dict[str, tuple[str, ...]] = {
    "llm": ("finish_reason",),
    "assistant": ("text", "finish_reason"),
    "tool_call": ("tool", "arguments"),
    "tool_result": ("span_id", "text", "error"),
    "error": ("span_id", "error"),
}


def _held_steps(held: list[_Held], steps: Sequence[Step]) -> int | None:
    """The number of tool calls and outputs of `steps` (a trajectory's) when their steps of the
    `_FED` kinds are those held back, in order, of the same kinds and equal in the fields that
    counts or failure modes read (`_HELD_FIELDS`); else None.

    Then the trajectory has no loop either — the counts of `_State.hold` are the same, whatever
    the runs, the ends of calls and which call each result matches — and its failure modes are
    those of the held steps with every overflow span known (`_final_modes`).
    """
    finals: list[Step] = []
    for step in steps:
        kind = step.kind
        if type(kind) is not str:
            return None  # the re-feed decides
        if kind in _FED:
            finals.append(step)
    if len(finals) != len(held):
        return None
    count = 0
    for (step, _, _), final in zip(held, finals, strict=True):
        kind = final.kind
        if step.kind != kind:
            return None
        for name in _HELD_FIELDS[kind]:
            a, b = getattr(step, name), getattr(final, name)
            if a is not b and a != b:
                return None
        if kind in {"tool_call", "assistant"}:
            count += 1
    return count


_MODE_TEXT: dict[FailureMode, str] = {
    "context_window_overflow": "the call hit the model's context or output token limit",
    "tool_call_error": "the span reports an error",
}


def _explain(signal: LoopSignal) -> str:
    tool = signal.tool or "a tool"
    n = signal.count
    kind = signal.kind
    if kind == "repeat":
        text = f"{tool} called with the same arguments {n} times in this run"
    elif kind == "consecutive":
        text = f"{tool} called {n} times in a row with the same arguments"
    elif kind == "cycle":
        text = f"a pattern of {signal.period} tool calls repeated {n} times"
    elif kind == "near_duplicate":
        text = f"{tool} called {n} times with nearly the same arguments"
    elif kind == "no_progress":
        text = f"{tool} returned the same result {n} times"
    elif kind == "retry_storm":
        text = f"{tool} retried {n - 1} times with the same arguments after failing"
    else:
        text = f"the same assistant output {n} times"
    return f"{text} (first at span {signal.first_span_id})"


def _describe(loop: LoopInstance) -> str:
    where = f"{loop.tool} " if loop.tool else ""
    period = f" period {loop.period}" if loop.period else ""
    return f"{loop.kind} {where}x{loop.count}{period}"


_DEFAULT = LoopConfig()
