"""From normalized spans to the trace's trajectory: ordered, deduplicated Steps grouped in Runs.

Rules (DESIGN §2):

- Chat spans resend the whole history. An input message part becomes a Step only the first time
  the trace shows it. Parts with a tool-call id are keyed by the id; others by role, type and
  content *with an occurrence count*, so a message the user or model legitimately repeats still
  counts (loop detection needs those repeats). The outputs of an LLM call are always new.
- A tool call seen both as a `tool_call` part of an LLM output and as an `execute_tool` span is one
  `tool_call` step (the span adds `exec_span_id` and any arguments the part lacked); a tool result
  seen on an `execute_tool` span and again as a `tool` message in the next LLM input is one
  `tool_result` step, so one evidence source.
- Raw-client instrumentations have no tool span: the call comes from the `tool_call` part of one
  LLM output and the result from the `tool` message of the next LLM input, matched by call id (or,
  without ids, by order and tool name).
- Steps are ordered by logical time (span start for inputs and calls, span end for outputs and
  results), never by arrival; ties are broken by span id, so the trajectory is a function of the
  set of spans.
- A run is an agent-span subtree (`invoke_agent` or the equivalent of each convention); nested
  agents give nested runs; steps outside every agent belong to an implicit run named after the
  trace's root span.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from operator import attrgetter, is_, itemgetter
from typing import Any, Literal

from tracehound.conventions import (
    Document,
    Message,
    NormalizedSpan,
    Part,
    canonical_arguments,
    to_text,
)
from tracehound.conventions.base import slots_maker

__all__ = [
    "Run",
    "Step",
    "StepKind",
    "Trajectory",
    "TrajectoryBuilder",
    "build_trajectory",
]

StepKind = Literal[
    "user",
    "system",
    "llm",
    "assistant",
    "reasoning",
    "tool_call",
    "tool_result",
    "retrieval",
    "agent",
    "error",
]


@dataclass(frozen=True, kw_only=True)
class Step:
    """One normalized unit of an agent's trajectory.

    No `__slots__`: steps are built from drafts by filling the instance dict in one call, with
    the unset fields read from the class defaults (see `_make_step`).
    """

    kind: StepKind
    span_id: str
    start_ns: int
    end_ns: int
    run_id: str = ""
    text: str | None = None
    tool: str | None = None
    call_id: str | None = None
    arguments: str | None = None
    exec_span_id: str | None = None
    source: str | None = None
    documents: tuple[Document, ...] = ()
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    agent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape (`tracehound inspect --format json`): set fields only."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "span_id": self.span_id,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
        }
        for name in (
            "run_id",
            "agent",
            "tool",
            "call_id",
            "arguments",
            "exec_span_id",
            "text",
            "source",
            "model",
            "input_tokens",
            "output_tokens",
            "finish_reason",
            "error",
        ):
            value = getattr(self, name)
            if value is not None and value != "":
                out[name] = value
        if self.documents:
            out["documents"] = [
                {
                    k: v
                    for k, v in (("id", d.id), ("content", d.content), ("score", d.score))
                    if v is not None
                }
                for d in self.documents
            ]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """An agent invocation (or the whole trace when it has no agent span)."""

    run_id: str
    agent_name: str
    span_id: str
    parent_run_id: str | None
    start_ns: int
    end_ns: int
    depth: int
    service_name: str = ""
    declared_output: str | None = None
    implicit: bool = False


@dataclass(frozen=True, slots=True)
class Trajectory:
    trace_id: str
    steps: tuple[Step, ...]
    runs: tuple[Run, ...]
    conventions: tuple[str, ...]
    problems: tuple[str, ...] = ()

    def run_steps(self, run_id: str, *, nested: bool = False) -> list[Step]:
        """Steps of one run; with `nested`, also those of the runs inside it."""
        if not nested:
            return [s for s in self.steps if s.run_id == run_id]
        ids = {run_id}
        for run in self.runs:  # runs are sorted parents first
            if run.parent_run_id in ids:
                ids.add(run.run_id)
        return [s for s in self.steps if s.run_id in ids]

    def final_answer(self, run_id: str | None = None) -> str | None:
        """The run's declared output, else its last assistant text (top-level run by default).

        The implicit run stands for the whole trace, so its answer is the last assistant text of
        the trace, agents inside it included (e.g. a router call, then the agent that answered).
        An agent run answers with its own last text, else with that of the runs inside it.
        """
        if not self.runs:
            return None
        run = self.runs[0] if run_id is None else next(r for r in self.runs if r.run_id == run_id)
        if run.declared_output:
            return run.declared_output
        scopes = [self.run_steps(run.run_id, nested=True)]
        if not run.implicit:
            scopes.insert(0, self.run_steps(run.run_id))
        for steps in scopes:
            for step in reversed(steps):
                if step.kind == "assistant" and step.text:
                    return step.text
        return None


# --- building -------------------------------------------------------------------------------------


# A step under construction: (sort key, fields). The key is (logical time, span start, span id,
# sequence within the span); the fields, the Step's own, stay mutable until the trajectory is
# frozen (a later span may complete a tool call). A pair rather than an object: made for every
# step of every span, a tuple costs no constructor call, and drafts sort by their key in C.
_DraftKey = tuple[int, int, str, int]
_Draft = tuple[_DraftKey, dict[str, Any]]
_draft_key = itemgetter(0)


@dataclass(slots=True)
class _State:
    """Dedupe state, shared by all spans of one trace."""

    seen_ids: set[tuple[str, str]] = field(default_factory=set)
    # Plain dicts, not Counters: a missing key costs a Python-level __missing__ call there.
    content_counts: dict[tuple[str, ...], int] = field(default_factory=dict)
    call_steps: dict[str, _Draft] = field(default_factory=dict)  # call id -> tool_call draft
    call_names: dict[str, str] = field(default_factory=dict)  # call id -> tool name
    pending_calls: list[str] = field(default_factory=list)  # call ids without a result yet
    # call id -> the tool_result draft of a tool span that recorded no result (only the call
    # id, e.g. Google ADK with content in log records; or only an error): the result a later
    # LLM input carries for that id fills its text, rather than being shadowed by it
    open_results: dict[str, _Draft] = field(default_factory=dict)
    # call id -> its tool_result draft, so that a later input saying the call failed marks it
    result_steps: dict[str, _Draft] = field(default_factory=dict)
    anonymous: int = 0


class TrajectoryBuilder:
    """Turns the normalized spans of one trace into Steps.

    `add(span)` returns the steps a span contributes given what the trace has shown so far (used
    for per-span results as spans arrive); `build()` returns the canonical trajectory from the
    whole set of spans, independent of the order in which they were added.
    """

    __slots__ = ("_drafts", "_spans", "_state", "_stateful", "_trace_id")

    def __init__(self, trace_id: str) -> None:
        self._trace_id = trace_id
        self._spans: dict[str, NormalizedSpan] = {}
        self._state = _State()
        self._drafts: list[_Draft] = []  # every draft `add` made, kept up to date by later spans
        self._stateful: list[NormalizedSpan] = []  # spans that use the dedupe state, in add order

    @property
    def spans(self) -> Mapping[str, NormalizedSpan]:
        return self._spans

    def add(self, span: NormalizedSpan) -> list[Step]:
        span_id = span.view.span_id
        spans = self._spans
        if span_id in spans:
            return []
        spans[span_id] = span
        if _is_stateful(span):
            self._stateful.append(span)
        drafts = _span_drafts(span, self._state)
        self._drafts.extend(drafts)
        drafts.sort(key=_draft_key)
        return _steps_of(drafts, None, "")

    def build(
        self,
        parents: Mapping[str, str] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> Trajectory:
        # `add` keeps one span per id already: no deduplication to do here
        ordered = sorted(self._spans.values(), key=_span_order)
        ordered, promoted = _promote_agents(ordered)
        # Drafts depend on the order of spans only through the dedupe state, which LLM and tool
        # spans alone use: when those were added in canonical order (the usual case: they arrive
        # as they end, one after the other), `add` already made the canonical drafts.
        stateful = [span for span in ordered if _is_stateful(span)]
        if _same_spans(stateful, self._stateful) and not _has_agent_history(ordered):
            drafts = list(self._drafts)
            drafts.extend(_agent_draft(span) for span in promoted)
        else:
            drafts = _canonical_drafts(ordered)
        return _assemble(self._trace_id, ordered, drafts, parents, names)


# Operations whose drafts read or change `_State`; the others' drafts depend on the span alone.
_STATEFUL_OPERATIONS = frozenset(("llm", "tool"))


def _is_stateful(span: NormalizedSpan) -> bool:
    """Whether the span's drafts use the dedupe state: LLM and tool spans, and an agent span that
    may execute a tool call (an agent used as a tool, with no tool span of its own)."""
    op = span.operation
    return op in _STATEFUL_OPERATIONS or (op == "agent" and span.tool_name is not None)


def _promote_agents(
    ordered: list[NormalizedSpan],
) -> tuple[list[NormalizedSpan], list[NormalizedSpan]]:
    """Spans whose children say their parent is an agent (`NormalizedSpan.parent_agent`) become
    agent spans, named as the first child naming them says (else their own name); a span that
    is an agent already keeps its own reading. Returns the spans, promoted ones replaced, and
    the promoted ones. Copies: the spans as added are left as they were."""
    declared: dict[str, str] = {}
    for span in ordered:
        name = span.parent_agent
        if name is not None:
            parent = span.view.parent_span_id
            if parent and not declared.get(parent):
                declared[parent] = name
    if not declared:
        return ordered, []
    out: list[NormalizedSpan] = []
    promoted: list[NormalizedSpan] = []
    for span in ordered:
        name = declared.get(span.view.span_id)
        if name is not None and span.operation != "agent":
            span = replace(
                span,
                operation="agent",
                agent_name=name or span.agent_name or span.view.name,
                declared_output=None,
            )
            promoted.append(span)
        out.append(span)
    return out, promoted


def _same_spans(a: list[NormalizedSpan], b: list[NormalizedSpan]) -> bool:
    return len(a) == len(b) and all(map(is_, a, b))


def _has_agent_history(spans: Iterable[NormalizedSpan]) -> bool:
    return any(span.operation == "agent" and span.history for span in spans)


# A span's place in the canonical order, (view.start_ns, view.span_id), read in C.
_span_order: Callable[[NormalizedSpan], tuple[int, str]] = attrgetter(
    "view.start_ns", "view.span_id"
)


def _canonical_order(spans: Iterable[NormalizedSpan]) -> list[NormalizedSpan]:
    unique: dict[str, NormalizedSpan] = {}
    for span in spans:  # a span delivered twice (exporter retry) counts once, as in `add`
        unique.setdefault(span.view.span_id, span)
    return sorted(unique.values(), key=_span_order)


def _canonical_drafts(ordered: list[NormalizedSpan]) -> list[_Draft]:
    state = _State()
    drafts: list[_Draft] = []
    for span in ordered:
        drafts.extend(_span_drafts(span, state))
    # Agent-level history only fills in what no child span showed (e.g. unsampled chat spans).
    for span in ordered:
        if span.operation == "agent" and span.history:
            drafts.extend(
                _message_drafts(span, span.history, state, at_ns=span.view.end_ns, base_seq=0)
            )
    return drafts


def build_trajectory(
    trace_id: str,
    spans: Iterable[NormalizedSpan],
    parents: Mapping[str, str] | None = None,
    names: Mapping[str, str] | None = None,
) -> Trajectory:
    """The canonical trajectory of a trace.

    `parents` maps span id → parent span id for *every* span of the trace seen, GenAI or not, so
    that an agent span's subtree is found through pass-through spans; `names` gives span names for
    the implicit run of a trace without agent spans. Both default to what the GenAI spans say.
    """
    ordered, _ = _promote_agents(_canonical_order(spans))
    return _assemble(trace_id, ordered, _canonical_drafts(ordered), parents, names)


def _assemble(
    trace_id: str,
    ordered: list[NormalizedSpan],
    drafts: list[_Draft],
    parents: Mapping[str, str] | None,
    names: Mapping[str, str] | None,
) -> Trajectory:
    parent_of: dict[str, str] = {s.view.span_id: s.view.parent_span_id for s in ordered}
    if parents:
        parent_of.update(parents)
    cycle_problems = _break_parent_cycles(parent_of, ordered)
    _reattach_detached_agent_work(ordered, parent_of)
    drafts.sort(key=_draft_key)

    runs, run_of_span = _runs(ordered, parent_of, names or {})
    default_run = runs[0].run_id if runs else ""
    steps = tuple(_steps_of(drafts, run_of_span, default_run))
    conventions = tuple(sorted({s.convention for s in ordered}))
    problems = tuple(
        [
            f"{s.view.name} ({s.view.span_id}): {p}"
            for s in ordered
            if s.problems
            for p in s.problems
        ]
    )
    return _new_trajectory(trace_id, steps, tuple(runs), conventions, (*cycle_problems, *problems))


def _reattach_detached_agent_work(ordered: list[NormalizedSpan], parent_of: dict[str, str]) -> None:
    """An agent span with no child span at all is the parent of the sibling spans it encloses
    in time (not agents themselves).

    An instrumentation that starts an agent's span without making it current leaves the
    agent's work beside it, under the same parent: Traceloop's LangGraph graph span
    `invoke_agent X` of a graph run inside a tool (a nested agent) has no child, its chain
    (`execute_task X`, with the graph's model and tool calls) is its sibling.
    """
    agents = [s for s in ordered if s.operation == "agent" and s.view.parent_span_id]
    if not agents:
        return
    parents = set(parent_of.values())
    childless = [a for a in agents if a.view.span_id not in parents]
    if not childless:
        return
    for agent in childless:
        view = agent.view
        parent, start, end = parent_of.get(view.span_id, ""), view.start_ns, view.end_ns
        if not parent:
            continue
        for span in ordered:
            other = span.view
            if (
                span.operation != "agent"
                and other.span_id != view.span_id
                and parent_of.get(other.span_id) == parent
                and start <= other.start_ns
                and other.end_ns <= end
            ):
                parent_of[other.span_id] = view.span_id


def _break_parent_cycles(parent_of: dict[str, str], ordered: list[NormalizedSpan]) -> list[str]:
    """Cut each cycle of parent links (bad data) so that runs form a tree; say so.

    The cycle is cut above its earliest GenAI span (by start time, then span id; else its
    smallest span id), which then counts as a root: the result does not depend on span order.
    """
    get = parent_of.get
    for parent in parent_of.values():
        if parent:
            grandparent = get(parent)
            if grandparent and grandparent in parent_of:
                break  # a chain of three links or more: walk them all
    else:
        return []  # every chain of parent links ends within two links: no cycle
    problems: list[str] = []
    done: set[str] = set()
    for start in list(parent_of):
        if start in done:  # reached from a span walked before
            continue
        path: list[str] = []
        on_path: set[str] = set()
        current = start
        while current and current not in done and current not in on_path:
            path.append(current)
            on_path.add(current)
            current = parent_of.get(current, "")
        if current in on_path:
            cycle = path[path.index(current) :]
            rank = {s.view.span_id: (0, s.view.start_ns, s.view.span_id) for s in ordered}
            cut = min(cycle, key=lambda sid: rank.get(sid, (1, 0, sid)))
            parent_of[cut] = ""
            at = cycle.index(cut)
            cycle = cycle[at:] + cycle[:at]
            problems.append(
                f"parent ids form a cycle ({' -> '.join(cycle)}); span {cut} taken as a root"
            )
        done.update(path)
    return sorted(problems)


# A frozen dataclass's generated __init__ sets each field through object.__setattr__: ~3.5 µs
# for Step's 18 fields, and steps are made for every span twice (as it arrives, and in the
# trajectory). Filling the instance dict in one call makes the same Step in ~0.4 µs; fields a
# draft does not set are read from the class, where the dataclass keeps their defaults.
_new_object = object.__new__


def _steps_of(
    drafts: list[_Draft], run_of_span: dict[str, str] | None, default_run: str
) -> list[Step]:
    """The steps of drafts: each in the run of its span (`default_run` when not in
    `run_of_span`, or when that is None). Each is `Step(span_id=..., run_id=..., **fields)`,
    made in the loop (a call per step would cost ~15 % more)."""
    new = _new_object
    get_run = None if run_of_span is None else run_of_span.get
    steps: list[Step] = []
    append = steps.append
    for (_, _, span_id, _), fields in drafts:
        step = new(Step)
        values = step.__dict__
        values.update(fields)  # copied: later spans may still complete the draft
        values["span_id"] = span_id
        values["run_id"] = default_run if get_run is None else get_run(span_id, default_run)
        append(step)
    return steps


# Each draft's fields are written out in one dict display (no keyword-argument call): the fields
# the step sets, then `start_ns` and `end_ns`, which are the draft's logical time unless given.


def _span_drafts(span: NormalizedSpan, state: _State) -> list[_Draft]:
    view = span.view
    start, end, span_id = view.start_ns, view.end_ns, view.span_id
    out: list[_Draft] = []
    op = span.operation
    if op == "agent":
        out.append(_agent_draft(span))
        if span.tool_name is not None:
            out.extend(_agent_tool_drafts(span, state))
    elif op == "llm":
        seq = 0
        for text in span.system_instructions:
            key = ("system", "text", text)
            if _new_content(state, key, occurrence=0):
                fields = {"kind": "system", "text": text, "start_ns": start, "end_ns": start}
                out.append(((start, start, span_id, seq), fields))
                seq += 1
        if span.input_messages:
            out.extend(_message_drafts(span, span.input_messages, state, at_ns=start, base_seq=seq))
        finish_reasons = span.finish_reasons
        out.append(
            (
                (start, start, span_id, _LLM_SEQ),
                {
                    "kind": "llm",
                    "start_ns": start,
                    "end_ns": end,
                    "model": span.model,
                    "input_tokens": span.input_tokens,
                    "output_tokens": span.output_tokens,
                    "finish_reason": finish_reasons[0] if finish_reasons else None,
                },
            )
        )
        if span.output_messages:
            out.extend(_output_drafts(span, state, 0))
    elif op == "tool":
        out.extend(_tool_span_drafts(span, state))
    elif op == "retrieval":
        out.append(
            (
                (end, start, span_id, 0),
                {
                    "kind": "retrieval",
                    "start_ns": start,
                    "end_ns": end,
                    "source": span.source or view.name,
                    "text": span.query,
                    "documents": tuple(span.documents),
                },
            )
        )
    if span.error and op != "tool":
        fields = {"kind": "error", "error": span.error, "start_ns": end, "end_ns": end}
        out.append(((end, start, span_id, _ERROR_SEQ), fields))
    return out


def _agent_draft(span: NormalizedSpan) -> _Draft:
    view = span.view
    start = view.start_ns
    fields = {"kind": "agent", "start_ns": start, "end_ns": view.end_ns, "agent": span.agent_name}
    return ((start, start, view.span_id, 0), fields)


def _agent_tool_drafts(span: NormalizedSpan, state: _State) -> list[_Draft]:
    """An agent span that says it may be used as a tool (`tool_name`: smolagents' managed agents,
    which have no tool span) executes the oldest pending, not yet executed call of that tool: its
    output is the call's result, a step of the span the agent ran under (the caller's run).
    Nothing when no such call is pending (a top-level agent)."""
    name = span.tool_name or ""
    call_id = _pending_call_for(state, name, None)
    if call_id is None:
        return []
    view = span.view
    call = state.call_steps[call_id][1]
    call["exec_span_id"] = view.span_id
    state.seen_ids.add(("tool_result", call_id))
    state.pending_calls.remove(call_id)
    fields = {
        "kind": "tool_result",
        "start_ns": view.start_ns,
        "end_ns": view.end_ns,
        "tool": name,
        "call_id": call_id,
        "text": span.declared_output,
        "error": span.error,
    }
    # The result is the caller's: it goes on the span the agent ran under, in the caller's run.
    at_span = view.parent_span_id or view.span_id
    draft = ((view.end_ns, view.start_ns, at_span, 1), fields)
    state.result_steps[call_id] = draft
    return [draft]


# Part types whose content is a step of its own.
_CONTENT_TYPES = frozenset(("text", "reasoning"))

# Within one span: inputs (at its start) come before the llm step; the error step comes last.
_LLM_SEQ = 1 << 40
_ERROR_SEQ = 1 << 41


def _new_content(state: _State, key: tuple[str, ...], occurrence: int) -> bool:
    """True (and recorded) if this is a new occurrence of a keyed message part."""
    counts = state.content_counts
    seen = counts.get(key, 0)
    if occurrence >= seen:
        counts[key] = seen + 1
        return True
    return False


def _message_drafts(
    span: NormalizedSpan, messages: list[Message], state: _State, *, at_ns: int, base_seq: int
) -> list[_Draft]:
    """Input history: only parts the trace has not shown before become steps."""
    out: list[_Draft] = []
    occurrences: dict[tuple[str, ...], int] = {}
    counts = state.content_counts
    view = span.view
    span_start, span_id = view.start_ns, view.span_id
    seq = base_seq
    for message in messages:
        role = message.role
        for part in message.parts:
            seq += 1
            ptype = part.type
            if ptype == "tool_call":
                draft = _tool_call_from_part(span, part, state, at_ns, seq, occurrences=occurrences)
                if draft is not None:
                    out.append(draft)
            elif ptype == "tool_call_response":
                draft = _tool_result_from_part(
                    span, part, state, at_ns, seq, occurrences=occurrences
                )
                if draft is not None:
                    out.append(draft)
            elif ptype in _CONTENT_TYPES and part.content:
                content = part.content
                key = (role, ptype, content)
                occurrence = occurrences.get(key, 0)
                occurrences[key] = occurrence + 1
                seen = counts.get(key, 0)  # `_new_content`, inline: once per input part
                if occurrence >= seen:
                    counts[key] = seen + 1
                    fields = {
                        "kind": _content_kind(role, ptype),
                        "text": content,
                        "start_ns": at_ns,
                        "end_ns": at_ns,
                    }
                    out.append(((at_ns, span_start, span_id, seq), fields))
    return out


def _content_kind(role: str, ptype: str) -> StepKind:
    if ptype == "reasoning":
        return "reasoning"
    if role in ("system", "developer"):
        return "system"
    if role == "user":
        return "user"
    return "assistant"


def _output_drafts(span: NormalizedSpan, state: _State, base_seq: int) -> list[_Draft]:
    """LLM outputs are always new steps; they are recorded so the next call's history skips them."""
    view = span.view
    end, span_start, span_id = view.end_ns, view.start_ns, view.span_id
    counts = state.content_counts
    out: list[_Draft] = []
    seq = base_seq
    for message in span.output_messages:
        for part in message.parts:
            seq += 1
            ptype = part.type
            if ptype == "tool_call":
                draft = _tool_call_from_part(span, part, state, end, seq, occurrences=None)
                if draft is not None:
                    out.append(draft)
            elif ptype in _CONTENT_TYPES and part.content:
                content = part.content
                key = (message.role, ptype, content)
                counts[key] = counts.get(key, 0) + 1
                fields = {
                    "kind": "reasoning" if ptype == "reasoning" else "assistant",
                    "text": content,
                    "finish_reason": message.finish_reason,
                    "start_ns": end,
                    "end_ns": end,
                }
                out.append(((end, span_start, span_id, seq), fields))
    return out


def _tool_call_from_part(
    span: NormalizedSpan,
    part: Part,
    state: _State,
    at_ns: int,
    seq: int,
    *,
    occurrences: dict[tuple[str, ...], int] | None,
) -> _Draft | None:
    call_id, name, arguments = part.id, part.name, part.arguments
    if call_id:
        if name:
            state.call_names.setdefault(call_id, name)
        key = ("tool_call", call_id)
        if key in state.seen_ids:
            # A resent call (the next LLM input repeats it): canonicalize only if it adds arguments.
            existing = state.call_steps.get(call_id)
            if existing is not None and existing[1].get("arguments") is None:
                args = canonical_arguments(arguments)
                if args is not None:
                    existing[1]["arguments"] = args
            return None
        state.seen_ids.add(key)
    args = canonical_arguments(arguments)
    if not call_id:
        ckey = ("tool_call", name or "", args or "")
        occurrence = 0
        if occurrences is not None:
            occurrence = occurrences.get(ckey, 0)
            occurrences[ckey] = occurrence + 1
        if occurrences is not None and not _new_content(state, ckey, occurrence):
            return None
        if occurrences is None:
            state.content_counts[ckey] = state.content_counts.get(ckey, 0) + 1
        state.anonymous += 1
        call_id = None
    view = span.view
    fields = {
        "kind": "tool_call",
        "tool": name,
        "call_id": call_id,
        "arguments": args,
        "start_ns": at_ns,
        "end_ns": at_ns,
    }
    draft = ((at_ns, view.start_ns, view.span_id, seq), fields)
    if call_id:
        state.call_steps[call_id] = draft
        state.pending_calls.append(call_id)
    return draft


def _tool_result_from_part(
    span: NormalizedSpan,
    part: Part,
    state: _State,
    at_ns: int,
    seq: int,
    *,
    occurrences: dict[tuple[str, ...], int],
) -> _Draft | None:
    call_id, name, content = part.id, part.name, part.content
    if not call_id:
        # Without an id, a resent result is recognized by its content; a new one takes the
        # oldest pending call (of the same tool when the name is known).
        ckey = ("tool_result", name or "", content or "")
        occurrence = occurrences.get(ckey, 0)
        occurrences[ckey] = occurrence + 1
        if not _new_content(state, ckey, occurrence):
            return None
        call_id = _adopt_pending(state, name)
    # the input says the call failed: its result step is an error (what the model was told)
    error = (content or "error") if part.is_error else None
    if call_id:
        key = ("tool_result", call_id)
        if key in state.seen_ids:
            if error is not None:
                _mark_failed(state.result_steps.get(call_id), error)
            return None
        state.seen_ids.add(key)
        if call_id in state.pending_calls:
            state.pending_calls.remove(call_id)
        opened = state.open_results.pop(call_id, None) if state.open_results else None
        if opened is not None:  # the tool span's result step, without its text until now
            opened[1]["text"] = content
            if error is not None:
                _mark_failed(opened, error)
            return None
        name = name or state.call_names.get(call_id)
    view = span.view
    fields = {
        "kind": "tool_result",
        "tool": name,
        "call_id": call_id,
        "text": content,
        "error": error,
        "start_ns": at_ns,
        "end_ns": at_ns,
    }
    draft = ((at_ns, view.start_ns, view.span_id, seq), fields)
    if call_id:
        state.result_steps[call_id] = draft
    return draft


def _mark_failed(draft: _Draft | None, error: str) -> None:
    """A result step recorded without an error, which a later input says failed."""
    if draft is not None and not draft[1].get("error"):
        draft[1]["error"] = error


def _adopt_pending(state: _State, name: str | None) -> str | None:
    for call_id in state.pending_calls:
        if name is None or state.call_names.get(call_id) == name:
            return call_id
    return None


def _tool_span_drafts(span: NormalizedSpan, state: _State) -> list[_Draft]:
    view = span.view
    start, end, span_id = view.start_ns, view.end_ns, view.span_id
    name = span.tool_name or view.name
    args = canonical_arguments(span.tool_arguments)
    call_id = span.tool_call_id
    if not call_id:
        # A tool span without an id (e.g. LangChain via OpenInference) executes the oldest
        # pending call of that tool with matching arguments.
        call_id = _pending_call_for(state, name, args)
    out: list[_Draft] = []
    if call_id and ("tool_call", call_id) in state.seen_ids:
        existing = state.call_steps.get(call_id)
        if existing is not None:
            fields = existing[1]
            fields["exec_span_id"] = span_id
            if fields.get("arguments") is None:
                fields["arguments"] = args
    else:
        if call_id:
            state.seen_ids.add(("tool_call", call_id))
            state.call_names.setdefault(call_id, name)
        fields = {
            "kind": "tool_call",
            "tool": name,
            "call_id": call_id,
            "arguments": args,
            "exec_span_id": span_id,
            "start_ns": start,
            "end_ns": start,
        }
        draft = ((start, start, span_id, 0), fields)
        if call_id:
            state.call_steps[call_id] = draft
        out.append(draft)
    result_key = ("tool_result", call_id) if call_id else None
    if result_key is None or result_key not in state.seen_ids:
        # No result recorded (only the call id, or only an error): what the tool returned may
        # still come by its call id, in the next LLM input; until then the step has no text.
        still_open = call_id is not None and span.tool_result is None
        if result_key is not None and not still_open:
            state.seen_ids.add(result_key)
            if call_id in state.pending_calls:
                state.pending_calls.remove(call_id)
        fields = {
            "kind": "tool_result",
            "start_ns": start,
            "end_ns": end,
            "tool": name,
            "call_id": call_id,
            "text": to_text(span.tool_result),
            "error": span.error,
        }
        draft = ((end, start, span_id, 1), fields)
        if still_open and call_id is not None:
            state.open_results[call_id] = draft
        if call_id is not None:
            state.result_steps[call_id] = draft
        out.append(draft)
    return out


def _pending_call_for(state: _State, name: str, args: str | None) -> str | None:
    """The oldest pending, not yet executed call of tool `name` that `args` can belong to.

    Same canonical arguments (or unknown on either side) first; else a call whose arguments
    object has `args` as its only value: LangChain's TOOL spans record a single-argument tool's
    input as the bare value (`OTel`), the model's call has `{"query": "OTel"}`.
    """
    candidates: list[tuple[str, Any]] = []
    for pending in state.pending_calls:
        draft = state.call_steps.get(pending)
        if (
            state.call_names.get(pending) == name
            and draft is not None
            and draft[1].get("exec_span_id") is None
        ):
            candidates.append((pending, draft[1].get("arguments")))
    for pending, called in candidates:
        if args is None or called in (None, args):
            return pending
    if args is not None:
        for pending, called in candidates:
            if _sole_value(called) == args:
                return pending
    return None


def _sole_value(arguments: Any) -> str | None:
    """`{"query":"OTel"}` → `OTel`: the canonical text of a one-key arguments object's value."""
    if not isinstance(arguments, str) or not arguments.startswith("{"):
        return None
    try:
        data = json.loads(arguments)
    except (ValueError, RecursionError):
        return None
    if isinstance(data, dict) and len(data) == 1:
        value = next(iter(data.values()))
        return value if isinstance(value, str) else canonical_arguments(value)
    return None


# --- runs ---------------------------------------------------------------------------------------


def _runs(
    ordered: list[NormalizedSpan], parent_of: Mapping[str, str], names: Mapping[str, str]
) -> tuple[list[Run], dict[str, str]]:
    agent_spans = [s for s in ordered if s.operation == "agent"]
    if len(agent_spans) == 1:
        single = _single_agent_run(agent_spans[0], ordered, parent_of)
        if single is not None:
            return single
    agent_ids = {s.view.span_id for s in agent_spans}
    runs: list[Run] = []
    run_of_span: dict[str, str] = {}

    def nearest_agent(span_id: str, include_self: bool) -> str | None:
        if not agent_ids:
            return None
        seen: set[str] | None = None  # made past the first link only (the usual depth)
        current = span_id if include_self else parent_of.get(span_id, "")
        while current:
            if current in agent_ids:
                return current
            if seen is None:
                seen = {current}
            elif current in seen:  # parent cycles are possible in bad data
                return None
            else:
                seen.add(current)
            current = parent_of.get(current, "")
        return None

    depth_of: dict[str, int] = {}
    for span in agent_spans:  # parents start before children, so they come first
        span_id = span.view.span_id
        parent = nearest_agent(span_id, include_self=False)
        depth_of[span_id] = depth_of.get(parent, -1) + 1 if parent else 0
    root_span = _local_root(ordered, parent_of)
    # each span's own run (None: outside every agent), found once
    own_agents = [
        (s.view.span_id, nearest_agent(s.view.span_id, include_self=True)) for s in ordered
    ]
    needs_implicit = not agent_spans or any(agent is None for _, agent in own_agents)
    if needs_implicit:
        root_id = _top_ancestor(root_span.view.span_id, parent_of) if root_span is not None else ""
        root_name = names.get(root_id, "")
        if root_span is not None and not root_name:
            root_name = root_span.view.name
        runs.append(
            _new_run(
                root_id,  # run_id
                root_name or "trace",  # agent_name
                root_id,  # span_id
                None,  # parent_run_id
                min((s.view.start_ns for s in ordered), default=0),  # start_ns
                max((s.view.end_ns for s in ordered), default=0),  # end_ns
                0,  # depth
                root_span.view.service_name if root_span is not None else "",  # service_name
                None,  # declared_output
                True,  # implicit
            )
        )
    for span in sorted(
        agent_spans, key=lambda s: (depth_of[s.view.span_id], s.view.start_ns, s.view.span_id)
    ):
        span_id = span.view.span_id
        parent = nearest_agent(span_id, include_self=False)
        runs.append(
            _new_run(
                span_id,  # run_id
                span.agent_name or span.view.name,  # agent_name
                span_id,  # span_id
                parent if parent else (runs[0].run_id if needs_implicit else None),
                span.view.start_ns,  # start_ns
                span.view.end_ns,  # end_ns
                depth_of[span_id] + (1 if needs_implicit else 0),  # depth
                span.view.service_name,  # service_name
                span.declared_output,  # declared_output
            )
        )
    default_run = runs[0].run_id if runs else ""
    for span_id, agent in own_agents:
        run_of_span[span_id] = agent if agent is not None else default_run
    return runs, run_of_span


# Runs and trajectories are made once per trace, without their frozen dataclasses' __init__
# (see `slots_maker`); the values go positionally, in the order of the fields.
_new_run = slots_maker(Run)
_new_trajectory = slots_maker(Trajectory)


def _single_agent_run(
    agent: NormalizedSpan, ordered: list[NormalizedSpan], parent_of: Mapping[str, str]
) -> tuple[list[Run], dict[str, str]] | None:
    """The runs of the usual trace, one agent span the parent of every other GenAI span: its
    run alone, as `_runs` finds it (no implicit run: every span is in the agent's; the agent's
    run is a top one, depth 0, with no other agent to nest in). None for any other trace."""
    view = agent.view
    agent_id = view.span_id
    for span in ordered:
        if span is not agent and parent_of.get(span.view.span_id, "") != agent_id:
            return None
    run = _new_run(
        agent_id,  # run_id
        agent.agent_name or view.name,  # agent_name
        agent_id,  # span_id
        None,  # parent_run_id
        view.start_ns,  # start_ns
        view.end_ns,  # end_ns
        0,  # depth
        view.service_name,  # service_name
        agent.declared_output,  # declared_output
    )
    return [run], dict.fromkeys([span.view.span_id for span in ordered], agent_id)


def _local_root(
    ordered: list[NormalizedSpan], parent_of: Mapping[str, str]
) -> NormalizedSpan | None:
    """The GenAI span closest to the top: no parent, or a parent outside the GenAI spans."""
    ids = {s.view.span_id for s in ordered}
    for span in ordered:
        if not span.view.parent_span_id or span.view.parent_span_id not in ids:
            return span
    return ordered[0] if ordered else None


def _top_ancestor(span_id: str, parent_of: Mapping[str, str]) -> str:
    seen: set[str] = set()
    current = span_id
    while parent_of.get(current) and current not in seen:
        seen.add(current)
        current = parent_of[current]
    return current


def with_run(step: Step, run_id: str) -> Step:
    return replace(step, run_id=run_id)
