"""The `expectations` evaluator: what an agent must and must not do, checked on every run.

Off unless configured. Rules come from the `[expectations]` table of the TOML settings file (the
same file for `tracehound serve`, the processor (`TRACEHOUND_CONFIG`) and `tracehound eval
--config`), from golden sets in JSON lines (`eval --expect FILE`), and from the `expected_tools`
of imported `tracecheck` traces. Everything is computed once per run at the trace's
finalization; nothing runs per span, except reading the attributes a rule matches on (named
ones only, when a rule names one) and, when enabled, an agent span's declared expected tools.

A **rule block** (`[[expectations.rule]]`, or one golden line) applies to the runs the drift and
golden evaluators observe (every agent run; the whole trace without agent spans) whose agent
matches `agent` (a glob on the agent name or on `service.name/agent`; default `*`) and whose
trace matches every trace-level matcher given (`input`, `input_regex`, `attributes`, or a golden
line's `key`). Each check of a block is one **rule**, named `BLOCK.CHECK` (`refund.tool_sequence`),
and gives one `tracehound.expectation.BLOCK.CHECK` result on the run's agent span: score 1 / 0,
label `pass` / `fail`, and an explanation naming what was expected and what happened.

The checks, their keys and their semantics are in `docs/expectations.md`; the key names are
`CHECK_KEYS` below. `tracecheck`'s `tool_accuracy` is `expected_tools` with `order = "exact"`
(the default); its `step_efficiency` excess is `max_excess = 0`.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tracehound import names
from tracehound.conventions import NormalizedSpan
from tracehound.evaluators.base import EvaluationResult, Evaluator, TraceInfo
from tracehound.evaluators.drift import default_agent_key
from tracehound.golden import observed_runs
from tracehound.spans import AttributeValue
from tracehound.steps import Run, Step, Trajectory

__all__ = [
    "CHECK_KEYS",
    "DECLARED_TOOLS_ATTRIBUTE",
    "ORDERS",
    "Block",
    "ExpectationError",
    "Expectations",
    "ExpectationsEvaluator",
    "expectations_evaluator",
    "load_expectations",
    "load_golden_lines",
    "parse_block",
]

PREFIX = names.EVAL_EXPECTATION_PREFIX
ORDERS = ("exact", "in_order", "any_order")
"""`order` of `expected_tools`: the same sequence; the expected tools as a subsequence (other
calls allowed between them); every expected tool called at least as often, in any order."""
DECLARED_TOOLS_ATTRIBUTE = names.ATTR_EXPECTATION_EXPECTED_TOOLS
"""An agent span attribute (string[]) declaring that run's expected tools (set by the
`tracecheck` importer from a trace's `expected_tools`; an application may set it too)."""
SCHEMA_HINT = "JSON Schema checks need the jsonschema package: pip install 'tracehound[schema]'"

MATCH_KEYS = ("name", "agent", "input", "input_regex", "attributes", "key")
CHECK_KEYS = (
    "expected_tools",
    "order",
    "max_excess",
    "tools_called",
    "tools_not_called",
    "max_tool_calls",
    "max_steps",
    "max_tokens",
    "max_duration",
    "answer_regex",
    "answer_not_contains",
    "answer_min_length",
    "answer_max_length",
    "answer_json",
    "answer_schema",
    "tool_arguments_schema",
)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")


class ExpectationError(ValueError):
    """A rule file that cannot be used: one line naming the file, line, rule and reason."""


# --- what a check sees of a run ---------------------------------------------------------------


class RunFacts:
    """What the checks read of one run, each computed once per run (on first use)."""

    __slots__ = ("_answer", "_calls", "_tools", "run", "steps", "trajectory")

    def __init__(self, trajectory: Trajectory, run: Run, steps: list[Step]) -> None:
        self.trajectory = trajectory
        self.run = run
        self.steps = steps
        self._calls: list[Step] | None = None
        self._tools: list[str] | None = None
        self._answer: str | bool | None = False  # False: not read yet

    @property
    def calls(self) -> list[Step]:
        if self._calls is None:
            self._calls = [s for s in self.steps if s.kind == "tool_call"]
        return self._calls

    @property
    def tools(self) -> list[str]:
        if self._tools is None:
            self._tools = [s.tool or "?" for s in self.calls]
        return self._tools

    @property
    def answer(self) -> str | None:
        if self._answer is False:
            self._answer = self.trajectory.final_answer(self.run.run_id)
        return self._answer if isinstance(self._answer, str) else None


Outcome = tuple[bool, str]
CheckFn = Callable[[RunFacts], Outcome]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    """The check's name within its block (`tool_sequence`, `max_tokens`, …)."""
    run: CheckFn


@dataclass(frozen=True, slots=True)
class Block:
    """One rule block: which runs it applies to, and its checks."""

    name: str
    agent: str = "*"
    input: str | None = None
    input_regex: re.Pattern[str] | None = None
    attributes: Mapping[str, str] = field(default_factory=dict)
    key: str | None = None
    """A golden line's key, compared with the trace's key of kind `key_by`."""
    key_by: str = "input"
    """A golden line's kind of trace key: `input`, `trace_id` or `attribute:NAME`."""
    checks: tuple[Check, ...] = ()
    where: str = ""
    """`FILE:LINE` of the rule (a golden set is the lines of one file)."""
    index: int = 0
    """A golden line's position in its set (the first matching line of a set applies)."""

    def matches_agent(self, run: Run, key: str) -> bool:
        pattern = self.agent
        return (
            pattern == "*"
            or fnmatch.fnmatchcase(run.agent_name, pattern)
            or (fnmatch.fnmatchcase(key, pattern))
        )


@dataclass(frozen=True, slots=True)
class Expectations:
    """Every configured rule block, and how traces are keyed for golden lines."""

    blocks: tuple[Block, ...] = ()
    golden: tuple[Block, ...] = ()
    key: str = "input"
    """The `[expectations] key`: what the golden lines of its `golden` file (and, by default,
    of `eval --expect`) are keyed by — `input` (the trace's first user input, whitespace
    around it ignored), `trace_id`, or `attribute:NAME` (a GenAI span's or its resource's
    attribute). Each golden line keeps its own (`Block.key_by`)."""
    declared: bool = False
    """Also check the expected tools an agent span declares (`DECLARED_TOOLS_ATTRIBUTE`)."""

    def __bool__(self) -> bool:
        return bool(self.blocks or self.golden or self.declared)

    def attribute_names(self) -> tuple[str, ...]:
        wanted = {k for b in (*self.blocks, *self.golden) for k in b.attributes}
        wanted.update(
            b.key_by[len("attribute:") :] for b in self.golden if b.key_by.startswith("attribute:")
        )
        return tuple(sorted(wanted))

    def describe(self) -> str:
        """One line for `--check-config`: what is configured."""
        parts = [
            f"{len(self.blocks)} rule block(s), {sum(len(b.checks) for b in self.blocks)} rule(s)"
        ]
        if self.golden:
            kinds = ", ".join(sorted({b.key_by for b in self.golden}))
            parts.append(f"{len(self.golden)} golden line(s) keyed by {kinds}")
        if self.declared:
            parts.append("declared expected tools")
        return "; ".join(parts)

    def merged(self, other: Expectations) -> Expectations:
        return Expectations(
            blocks=(*self.blocks, *other.blocks),
            golden=(*self.golden, *other.golden),
            key=other.key if other.golden else self.key,
            declared=self.declared or other.declared,
        )


# --- the checks -------------------------------------------------------------------------------


def _list(items: Sequence[str]) -> str:
    return "[" + ", ".join(items) + "]"


def _is_subsequence(expected: Sequence[str], actual: Sequence[str]) -> bool:
    it = iter(actual)
    return all(any(a == e for a in it) for e in expected)


def _tool_sequence(expected: tuple[str, ...], order: str) -> CheckFn:
    def check(facts: RunFacts) -> Outcome:
        actual = facts.tools
        if order == "exact":
            ok = actual == list(expected)
            how = "exactly"
        elif order == "in_order":
            ok = _is_subsequence(expected, actual)
            how = "in order (other calls allowed)"
        else:
            missing = [t for t in set(expected) if actual.count(t) < expected.count(t)]
            ok = not missing
            how = "in any order"
        return ok, f"expected tools {_list(expected)} {how}; called {_list(actual)}"

    return check


def _excess(expected: tuple[str, ...], most: int) -> CheckFn:
    def check(facts: RunFacts) -> Outcome:
        calls = len(facts.tools)
        excess = max(0, calls - len(expected))
        return excess <= most, (
            f"expected at most {most} tool call(s) over the {len(expected)} expected; "
            f"{calls} call(s), {excess} over"
        )

    return check


def _called(tools: tuple[str, ...], must: bool) -> CheckFn:
    def check(facts: RunFacts) -> Outcome:
        actual = set(facts.tools)
        if must:
            missing = [t for t in tools if t not in actual]
            return not missing, (
                f"expected calls of {_list(tools)}; "
                + (f"never called {_list(missing)}" if missing else "all called")
            )
        present = [t for t in tools if t in actual]
        return not present, (
            f"expected no call of {_list(tools)}; "
            + (f"called {_list(present)}" if present else "none called")
        )

    return check


def _at_most(what: str, most: float, measure: Callable[[RunFacts], float], unit: str) -> CheckFn:
    def check(facts: RunFacts) -> Outcome:
        value = measure(facts)
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        return value <= most, f"expected at most {most:g}{unit} {what}; {shown}{unit}"

    return check


def _action_count(facts: RunFacts) -> float:
    return sum(1 for s in facts.steps if s.kind in ("llm", "tool_call", "retrieval"))


def _tokens(facts: RunFacts) -> float:
    return sum(
        (s.input_tokens or 0) + (s.output_tokens or 0) for s in facts.steps if s.kind == "llm"
    )


def _duration(facts: RunFacts) -> float:
    return round(max(facts.run.end_ns - facts.run.start_ns, 0) / 1e9, 6)


def _clip(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _no_answer() -> Outcome:
    return False, "the run gave no final answer"


def _answer_regex(pattern: re.Pattern[str]) -> CheckFn:
    def check(facts: RunFacts) -> Outcome:
        answer = facts.answer
        if answer is None:
            return _no_answer()
        found = pattern.search(answer)
        return found is not None, (
            f"expected the final answer to match /{pattern.pattern}/; "
            + ("it does" if found else f"it does not: {_clip(answer)!r}")
        )

    return check


def _not_contains(forbidden: tuple[str, ...]) -> CheckFn:
    def check(facts: RunFacts) -> Outcome:
        answer = facts.answer
        if answer is None:
            return _no_answer()
        present = [s for s in forbidden if s in answer]
        return not present, (
            f"expected the final answer to contain none of {json.dumps(list(forbidden))}; "
            + (f"it contains {json.dumps(present)}" if present else "it contains none")
        )

    return check


def _length(least: int, most: int | None) -> CheckFn:
    bounds = f"[{least}, {most if most is not None else '∞'}]"

    def check(facts: RunFacts) -> Outcome:
        answer = facts.answer
        if answer is None:
            return _no_answer()
        n = len(answer)
        ok = n >= least and (most is None or n <= most)
        return ok, f"expected a final answer of {bounds} characters; {n}"

    return check


def _parse_json(answer: str) -> tuple[Any, str | None]:
    try:
        return json.loads(answer), None
    except ValueError as exc:
        return None, str(exc)


def _answer_json(facts: RunFacts) -> Outcome:
    answer = facts.answer
    if answer is None:
        return _no_answer()
    _, error = _parse_json(answer)
    return error is None, "expected a final answer in JSON; " + (
        "it is" if error is None else f"it is not ({error})"
    )


def _answer_schema(validator: Any, shown: str) -> CheckFn:
    def check(facts: RunFacts) -> Outcome:
        answer = facts.answer
        if answer is None:
            return _no_answer()
        data, error = _parse_json(answer)
        if error is not None:
            return False, f"expected a final answer valid against {shown}; not JSON ({error})"
        problem = _first_error(validator, data)
        return problem is None, f"expected a final answer valid against {shown}; " + (
            "it is" if problem is None else f"it is not: {problem}"
        )

    return check


def _tool_arguments(validators: Mapping[str, Any]) -> CheckFn:
    def check(facts: RunFacts) -> Outcome:
        checked = 0
        for step in facts.calls:
            validator = validators.get(step.tool or "")
            if validator is None:
                continue
            checked += 1
            data, error = _parse_json(step.arguments or "{}")
            problem = f"not JSON ({error})" if error is not None else _first_error(validator, data)
            if problem is not None:
                return False, (
                    f"expected the arguments of {step.tool} to match its schema; "
                    f"call {step.call_id or step.span_id}: {problem}"
                )
        tools = _list(sorted(validators))
        return True, f"expected the arguments of {tools} to match their schemas; {checked} ok"

    return check


def _first_error(validator: Any, data: Any) -> str | None:
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    error = errors[0]
    where = "/".join(str(p) for p in error.absolute_path)
    return _clip(f"{where + ': ' if where else ''}{error.message}", 200)


# --- parsing a block ------------------------------------------------------------------------------


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{key} must be a list of non-empty strings")
    return tuple(value)


def _count(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} must be an integer >= 0 (got {value!r})")
    return value


def _seconds(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{key} must be a number of seconds (got {value!r})")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{key} must be a finite number >= 0 (got {value!r})")
    return float(value)


def _regex(value: Any, key: str) -> re.Pattern[str]:
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    try:
        return re.compile(value)
    except re.error as exc:
        raise ValueError(f"{key}: invalid regular expression {value!r}: {exc}") from None


def _schema_validator(value: Any, key: str, base: Path | None) -> tuple[Any, str]:
    """A jsonschema validator for an inline schema (a table) or a JSON file (a path)."""
    shown = "the inline schema"
    if isinstance(value, str):
        path = Path(value).expanduser()
        if base is not None and not path.is_absolute():
            path = base / path
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"{key}: cannot read {value!r} ({exc.strerror or exc})") from None
        except ValueError as exc:
            raise ValueError(f"{key}: {value!r} is not JSON ({exc})") from None
        shown = f"schema {path.name}"
    if not isinstance(value, (dict, bool)):
        raise ValueError(f"{key} must be a JSON Schema (a table) or the path of a JSON file")
    try:
        import jsonschema
    except ImportError:
        raise ValueError(f"{key}: {SCHEMA_HINT}") from None
    cls = jsonschema.validators.validator_for(value)
    try:
        cls.check_schema(value)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"{key}: not a valid JSON Schema: {exc.message}") from None
    return cls(value), shown


def parse_block(
    raw: Any, *, default_name: str, where: str = "", base: Path | None = None, golden: bool = False
) -> Block:
    """One rule block from a TOML table or a golden line; raises ValueError with the reason."""
    if not isinstance(raw, dict):
        raise ValueError("a rule must be a table (an object)")
    unknown = sorted(set(raw) - set(MATCH_KEYS) - set(CHECK_KEYS))
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(unknown)} (match: {', '.join(MATCH_KEYS)}; "
            f"checks: {', '.join(CHECK_KEYS)})"
        )
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"name {name!r}: use letters, digits, '_' and '-'")
    agent = raw.get("agent", "*")
    if not isinstance(agent, str) or not agent:
        raise ValueError("agent must be a non-empty string (a glob)")
    attributes = raw.get("attributes", {})
    if not isinstance(attributes, dict) or not all(
        isinstance(v, (str, int, float, bool)) for v in attributes.values()
    ):
        raise ValueError("attributes must be a table of attribute name = value")
    key = raw.get("key")
    if golden and not isinstance(key, str):
        raise ValueError("a golden line needs a string 'key'")
    if not golden and key is not None:
        raise ValueError("'key' is for golden lines (eval --expect); use input or attributes")
    if "input" in raw and not isinstance(raw["input"], str):
        raise ValueError("input must be a string")
    checks: list[Check] = []
    expected: tuple[str, ...] | None = None
    if "expected_tools" in raw:
        if raw["expected_tools"] == []:
            expected = ()
        else:
            expected = _strings(raw["expected_tools"], "expected_tools")
        order = raw.get("order", "exact")
        if order not in ORDERS:
            raise ValueError(f"order {order!r}: expected one of {', '.join(ORDERS)}")
        checks.append(Check("tool_sequence", _tool_sequence(expected, order)))
    elif "order" in raw:
        raise ValueError("order needs expected_tools")
    if "max_excess" in raw:
        if expected is None:
            raise ValueError("max_excess needs expected_tools")
        checks.append(Check("excess", _excess(expected, _count(raw["max_excess"], "max_excess"))))
    if "tools_called" in raw:
        checks.append(
            Check("tool_called", _called(_strings(raw["tools_called"], "tools_called"), True))
        )
    if "tools_not_called" in raw:
        tools = _strings(raw["tools_not_called"], "tools_not_called")
        checks.append(Check("tool_not_called", _called(tools, False)))
    for key_, what, measure, unit in (
        ("max_tool_calls", "tool calls", lambda f: float(len(f.tools)), ""),
        ("max_steps", "steps (LLM calls, tool calls, retrievals)", _action_count, ""),
        ("max_tokens", "tokens (input + output)", _tokens, ""),
    ):
        if key_ in raw:
            most = _count(raw[key_], key_)
            checks.append(Check(key_, _at_most(what, most, measure, unit)))
    if "max_duration" in raw:
        most_s = _seconds(raw["max_duration"], "max_duration")
        checks.append(Check("max_duration", _at_most("run duration", most_s, _duration, " s")))
    if "answer_regex" in raw:
        checks.append(
            Check("answer_regex", _answer_regex(_regex(raw["answer_regex"], "answer_regex")))
        )
    if "answer_not_contains" in raw:
        value = raw["answer_not_contains"]
        forbidden = (value,) if isinstance(value, str) else _strings(value, "answer_not_contains")
        checks.append(Check("answer_not_contains", _not_contains(forbidden)))
    if "answer_min_length" in raw or "answer_max_length" in raw:
        least = _count(raw.get("answer_min_length", 0), "answer_min_length")
        most_n = raw.get("answer_max_length")
        if most_n is not None:
            most_n = _count(most_n, "answer_max_length")
            if most_n < least:
                raise ValueError("answer_max_length is below answer_min_length")
        checks.append(Check("answer_length", _length(least, most_n)))
    if "answer_json" in raw:
        if not isinstance(raw["answer_json"], bool):
            raise ValueError("answer_json must be true or false")
        if raw["answer_json"]:
            checks.append(Check("answer_json", _answer_json))
    if "answer_schema" in raw:
        validator, shown = _schema_validator(raw["answer_schema"], "answer_schema", base)
        checks.append(Check("answer_schema", _answer_schema(validator, shown)))
    if "tool_arguments_schema" in raw:
        table = raw["tool_arguments_schema"]
        if not isinstance(table, dict) or not table:
            raise ValueError("tool_arguments_schema must be a table of tool name = JSON Schema")
        validators = {
            tool: _schema_validator(schema, f"tool_arguments_schema.{tool}", base)[0]
            for tool, schema in table.items()
        }
        checks.append(Check("tool_arguments", _tool_arguments(validators)))
    if not checks:
        raise ValueError(f"no check given (one of {', '.join(CHECK_KEYS)})")
    return Block(
        name=name,
        agent=agent,
        input=raw.get("input"),
        input_regex=_regex(raw["input_regex"], "input_regex") if "input_regex" in raw else None,
        attributes={str(k): _attribute_text(v) for k, v in attributes.items()},
        key=key,
        checks=tuple(checks),
        where=where,
    )


def _attribute_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- files ------------------------------------------------------------------------------------

_RULE_HEADER = re.compile(r"^\s*\[\[\s*expectations\s*\.\s*rule\s*\]\]")


def _fail(
    path: Path | str, line: int | None, rule: str | None, reason: str, what: str = "rule"
) -> ExpectationError:
    where = f"{path}:{line}" if line else str(path)
    named = f" {what} {rule!r}:" if rule else ""
    return ExpectationError(f"{where}:{named} {reason}")


def load_expectations(path: str | Path, table: Any = None) -> Expectations:
    """The `[expectations]` table of a TOML settings file (empty `Expectations` without one).

    `table`: the already parsed table (the file is then read only for line numbers). Raises
    `ExpectationError` with the file, the line of the rule, its name and the reason."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _fail(path, None, None, f"cannot read ({exc.strerror or exc})") from None
    if table is None:
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - exercised on 3.10 only
            import tomli as tomllib
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise _fail(path, None, None, f"invalid TOML: {exc}") from None
        table = document.get("expectations")
    if table is None:
        return Expectations()
    if not isinstance(table, dict):
        raise _fail(path, None, None, "[expectations] must be a table")
    lines = [i for i, line in enumerate(text.splitlines(), 1) if _RULE_HEADER.match(line)]
    unknown = sorted(set(table) - {"rule", "golden", "key", "declared_tools"})
    if unknown:
        raise _fail(
            path,
            None,
            None,
            f"unknown [expectations] key(s) {', '.join(unknown)} "
            "(use rule, golden, key, declared_tools)",
        )
    rules = table.get("rule", [])
    if not isinstance(rules, list):
        raise _fail(path, None, None, "expectations.rule must be an array of tables ([[…]])")
    blocks: list[Block] = []
    seen: dict[str, int | None] = {}
    for index, raw in enumerate(rules):
        line = lines[index] if index < len(lines) else None
        name = raw.get("name") if isinstance(raw, dict) else None
        shown = name if isinstance(name, str) else f"#{index + 1}"
        try:
            block = parse_block(
                raw,
                default_name=_default_name(raw, index),
                where=f"{path}:{line}" if line else str(path),
                base=path.parent,
            )
        except ValueError as exc:
            raise _fail(path, line, shown, str(exc)) from None
        if block.name in seen:
            raise _fail(
                path, line, block.name, f"duplicate rule name (also at line {seen[block.name]})"
            )
        seen[block.name] = line
        blocks.append(block)
    declared = table.get("declared_tools", False)
    if not isinstance(declared, bool):
        raise _fail(path, None, None, "expectations.declared_tools must be true or false")
    key = _trace_key(table.get("key", "input"), path)
    out = Expectations(blocks=tuple(blocks), key=key, declared=declared)
    golden = table.get("golden")
    if golden is not None:
        if not isinstance(golden, str):
            raise _fail(path, None, None, "expectations.golden must be the path of a JSONL file")
        golden_path = Path(golden).expanduser()
        if not golden_path.is_absolute():
            golden_path = path.parent / golden_path
        out = out.merged(load_golden_lines(golden_path, key=key))
    return out


def _trace_key(value: Any, path: Path | str) -> str:
    if not isinstance(value, str) or not (
        value in ("input", "trace_id") or (value.startswith("attribute:") and len(value) > 10)
    ):
        raise _fail(
            path, None, None, f"expectations.key {value!r}: use input, trace_id or attribute:NAME"
        )
    return value


def _default_name(raw: Any, index: int) -> str:
    agent = raw.get("agent") if isinstance(raw, dict) else None
    if isinstance(agent, str) and _NAME.match(agent):
        return agent
    return f"rule{index + 1}"


def load_golden_lines(path: str | Path, *, key: str = "input") -> Expectations:
    """A golden set: one JSON object per line, `{key, expected_tools, …}` (any check key; `agent`
    narrows it). Blank lines and lines starting with `#` or `//` are skipped. Raises
    `ExpectationError` with the file, line and reason."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _fail(
            path, None, None, f"cannot read the golden set ({exc.strerror or exc})"
        ) from None
    _trace_key(key, path)
    blocks: list[Block] = []
    seen: dict[tuple[str, str], int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "//")):
            continue
        try:
            raw = json.loads(stripped)
        except ValueError as exc:
            raise _fail(path, number, None, f"not JSON ({exc})") from None
        shown = raw.get("key") if isinstance(raw, dict) else None
        shown = shown if isinstance(shown, str) else None
        if isinstance(raw, dict):
            raw = {"name": "golden", **raw}
        try:
            block = parse_block(
                raw, default_name="golden", where=f"{path}:{number}", base=path.parent, golden=True
            )
        except ValueError as exc:
            raise _fail(path, number, shown, str(exc), "key") from None
        block = replace(block, key_by=key, index=len(blocks))
        ident = (block.key or "", block.agent)
        if ident in seen:
            raise _fail(path, number, shown, f"duplicate (also at line {seen[ident]})", "key")
        seen[ident] = number
        blocks.append(block)
    if not blocks:
        raise _fail(path, None, None, "the golden set has no line")
    return Expectations(golden=tuple(blocks), key=key)


def expectations_from_config(path: str | Path | None) -> Expectations:
    """The `[expectations]` of a settings file (None: none). Raises `ExpectationError`."""
    if not path:
        return Expectations()
    return load_expectations(path)


# --- the evaluator ----------------------------------------------------------------------------


_DECLARED_BLOCK = "expected_tools"


class ExpectationsEvaluator(Evaluator):
    """Checks every configured rule block on each run it applies to, at finalization."""

    name = "expectations"
    version = "1.0.0"

    def __init__(self, expectations: Expectations) -> None:
        self.expectations = expectations
        self._attribute_names = expectations.attribute_names()
        # the golden sets, in order: (key kind, {key: its lines}); a set is a file of lines
        sets: dict[str, tuple[str, dict[str, list[Block]]]] = {}
        for block in expectations.golden:
            _, lines = sets.setdefault(block.where.rpartition(":")[0], (block.key_by, {}))
            key = (block.key or "").strip() if block.key_by == "input" else block.key or ""
            lines.setdefault(key, []).append(block)
        self._golden = list(sets.values())

    def start_trace(self, trace: TraceInfo) -> Any:
        if not (self._attribute_names or self.expectations.declared):
            return None
        return _TraceAttributes()

    def finish_trace(
        self, state: Any, trajectory: Trajectory, trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        seen: _TraceAttributes = state if isinstance(state, _TraceAttributes) else _NO_ATTRIBUTES
        first_input: str | bool | None = False
        results: list[EvaluationResult] = []
        exp = self.expectations
        for run in observed_runs(trajectory):
            agent_key = default_agent_key(run, trace)
            facts = RunFacts(trajectory, run, trajectory.run_steps(run.run_id))
            applied: list[tuple[Block, Sequence[Check]]] = []
            for block in exp.blocks:
                if not block.matches_agent(run, agent_key):
                    continue
                if block.input is not None or block.input_regex is not None:
                    if first_input is False:
                        first_input = _first_input(trajectory)
                    if not _input_matches(block, first_input):
                        continue
                if block.attributes and not all(
                    value in seen.values.get(name, ()) for name, value in block.attributes.items()
                ):
                    continue
                applied.append((block, block.checks))
            for key_by, lines in self._golden:  # each golden set: its first line for the run
                if key_by == "input":
                    if first_input is False:
                        first_input = _first_input(trajectory)
                    keys: Iterable[str] = (
                        (first_input.strip(),) if isinstance(first_input, str) else ()
                    )
                elif key_by == "trace_id":
                    keys = (trajectory.trace_id,)
                else:
                    keys = seen.values.get(key_by[len("attribute:") :], ())
                candidates = [b for k in keys for b in lines.get(k, ())]
                candidates.sort(key=lambda b: b.index)
                for block in candidates:
                    if block.matches_agent(run, agent_key):
                        applied.append((block, block.checks))
                        break
            declared = seen.declared.get(run.span_id) if not run.implicit else None
            if declared is not None:
                applied.append(
                    (
                        Block(name=_DECLARED_BLOCK),
                        (
                            Check("tool_sequence", _tool_sequence(declared, "exact")),
                            Check("excess", _excess(declared, 0)),
                        ),
                    )
                )
            results.extend(self._results(run, agent_key, facts, applied, trace.truncated))
        return results

    def _results(
        self,
        run: Run,
        agent_key: str,
        facts: RunFacts,
        applied: Iterable[tuple[Block, Sequence[Check]]],
        truncated: bool = False,
    ) -> list[EvaluationResult]:
        outcomes: list[tuple[str, bool, str]] = []
        for block, checks in applied:
            for check in checks:
                ok, why = check.run(facts)
                if truncated:
                    why += " (the trace was truncated: the run may be incomplete)"
                outcomes.append((f"{block.name}.{check.name}", ok, why))
        if not outcomes:
            return []
        span_id = None if run.implicit else run.span_id
        failed = [rule for rule, ok, _ in outcomes if not ok]
        summary = run_attributes(agent_key, len(outcomes), failed)
        return [
            EvaluationResult(
                name=PREFIX + rule,
                evaluator=self.name,
                evaluator_version=self.version,
                span_id=span_id,
                score_value=1.0 if ok else 0.0,
                score_label="pass" if ok else "fail",
                explanation=f"{agent_key}: {why}"[:1000],
                attributes=summary,  # the run's summary on its span (the same for each)
            )
            for rule, ok, why in outcomes
        ]


def run_attributes(agent: str, checked: int, failed: Sequence[str]) -> dict[str, AttributeValue]:
    """The `tracehound.expectations.*` summary of one run."""
    return {
        names.ATTR_EXPECTATIONS_AGENT: agent,
        names.ATTR_EXPECTATIONS_CHECKED: checked,
        names.ATTR_EXPECTATIONS_FAILED_COUNT: len(failed),
        names.ATTR_EXPECTATIONS_FAILED: tuple(sorted(set(failed))),
    }


class _TraceAttributes:
    """The values of the named attributes seen on a trace's GenAI spans and their resources,
    and the agent spans' declared expected tools."""

    __slots__ = ("declared", "values")

    def __init__(self) -> None:
        self.values: dict[str, set[str]] = {}
        self.declared: dict[str, tuple[str, ...]] = {}


_NO_ATTRIBUTES = _TraceAttributes()


class _ReadingExpectationsEvaluator(ExpectationsEvaluator):
    """The evaluator with an `on_span` hook: used only when a rule matches on an attribute or
    declared expected tools are honoured (the engine calls no hook of the plain one per span)."""

    def on_span(
        self, state: Any, span: NormalizedSpan, steps: Sequence[Step], trace: TraceInfo
    ) -> Sequence[EvaluationResult]:
        if not isinstance(state, _TraceAttributes):
            return ()
        view = span.view
        for name in self._attribute_names:
            for value in (view.get(name), view.resource.attributes.get(name)):
                if value is not None and not isinstance(value, (list, tuple, bytes)):
                    state.values.setdefault(name, set()).add(_attribute_text(value))
        if self.expectations.declared:
            declared = view.get(DECLARED_TOOLS_ATTRIBUTE)
            if isinstance(declared, (list, tuple)) and all(isinstance(t, str) for t in declared):
                state.declared[view.span_id] = tuple(declared)
        return ()


def expectations_evaluator(expectations: Expectations) -> ExpectationsEvaluator | None:
    """The evaluator for these rules (None when nothing is configured: the evaluator is off)."""
    if not expectations:
        return None
    if expectations.attribute_names() or expectations.declared:
        return _ReadingExpectationsEvaluator(expectations)
    return ExpectationsEvaluator(expectations)


def _first_input(trajectory: Trajectory) -> str | None:
    for step in trajectory.steps:
        if step.kind == "user" and step.text:
            return step.text
    return None


def _input_matches(block: Block, first_input: str | bool | None) -> bool:
    if not isinstance(first_input, str):
        return False
    if block.input is not None and first_input.strip() != block.input.strip():
        return False
    return block.input_regex is None or block.input_regex.search(first_input) is not None
