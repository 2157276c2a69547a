"""The `expectations` evaluator: each rule's verdict, the rule files, and tracecheck as oracle.

`tracecheck` 0.7.0 (installed with the dev extra) is the oracle for `tool_accuracy` (exact
ordered match of the tool calls against `expected_tools`) and for `step_efficiency`'s excess
(tool calls beyond the expected count): on tracecheck's own example shapes (a pass, a fail, an
edge case), on the loop corpora's tracecheck exports with expected tools derived per trace, and on
generated traces, tracehound's `expected_tools.tool_sequence` / `expected_tools.excess` results
must give tracecheck's verdicts and counts. Traces with `retry` steps or `error` steps naming a
tool are left out: tracecheck does not count those as tool calls, the importer turns them into
`execute_tool` spans (a retried call is a call; an error naming a tool is a failed call), so
they are tool calls for tracehound as for any OTel trace (`test_retries_are_calls_here`).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tracecheck.evaluators.step_efficiency import StepEfficiencyEvaluator
from tracecheck.evaluators.tool_accuracy import ToolAccuracyEvaluator
from tracecheck.schema import Trace

from tracehound import names
from tracehound.cli import OFFLINE_CONFIG, main, run_engine
from tracehound.config import ConfigError, ProcessorSettings, open_evaluators
from tracehound.engine import Engine, FinalizedTrace, _has_span_hook
from tracehound.evaluators.base import EvaluationResult
from tracehound.evaluators.expectations import (
    CHECK_KEYS,
    MATCH_KEYS,
    ORDERS,
    SCHEMA_HINT,
    ExpectationError,
    Expectations,
    ExpectationsEvaluator,
    expectations_evaluator,
    load_expectations,
    load_golden_lines,
    parse_block,
)
from tracehound.files import Telemetry
from tracehound.importers import import_document

CORPORA = [
    Path(__file__).resolve().parents[1] / "corpus" / folder / "tracecheck.jsonl"
    for folder in ("loops", "loops_polling")
]

# The three shapes of tracecheck's example set (a pass, a fail, an edge case), in our words.
EXAMPLES: list[dict[str, Any]] = [
    {
        "trace_id": "parcel_pass",
        "agent_name": "parcel_agent",
        "user_input": "my parcel came damaged, refund it",
        "expected_tools": ["find_order", "inspect_claim", "refund"],
        "steps": [
            {"type": "llm_call", "name": "model-a", "output": "looking up the order"},
            {"type": "tool_call", "name": "find_order", "input": {"u": 7}, "output": {"o": 1}},
            {"type": "tool_call", "name": "inspect_claim", "input": {"o": 1}, "output": "ok"},
            {"type": "tool_call", "name": "refund", "input": {"o": 1}, "output": {"ok": True}},
            {"type": "llm_call", "output": "Refunded 19.90 EUR to your card."},
        ],
    },
    {
        "trace_id": "parcel_fail",
        "agent_name": "parcel_agent",
        "user_input": "my parcel came damaged, refund it",
        "expected_tools": ["find_order", "inspect_claim", "refund"],
        "steps": [
            {"type": "tool_call", "name": "find_order", "input": {"u": 7}, "output": {"o": 1}},
            {"type": "tool_call", "name": "find_order", "input": {"u": 7}, "output": {"o": 1}},
            {"type": "tool_call", "name": "find_order", "input": {"u": 7}, "output": {"o": 1}},
            {"type": "tool_call", "name": "search_catalog", "input": {"q": "x"}, "output": []},
            {"type": "error", "error": "context window exceeded"},
            {"type": "llm_call", "output": "I have handled your refund."},
        ],
    },
    {
        "trace_id": "parcel_edge",
        "agent_name": "parcel_agent",
        "user_input": "refund please",
        "expected_tools": ["find_order", "inspect_claim", "refund"],
        "steps": [
            {"type": "tool_call", "name": "find_order", "input": {"u": 8}, "output": {"o": 2}},
            {"type": "tool_call", "name": "inspect_claim", "input": {"o": 2}, "output": "none"},
            {"type": "llm_call", "output": "Your parcel matches what was shipped: no refund."},
        ],
    },
]


def evaluate(docs: list[dict[str, Any]], expectations: Expectations) -> list[FinalizedTrace]:
    evaluator = expectations_evaluator(expectations)
    assert evaluator is not None
    telemetry = Telemetry()
    for i, doc in enumerate(docs):
        telemetry.spans.extend(import_document(doc, f"doc{i}"))
    traces, _ = run_engine(telemetry, Engine([evaluator], config=OFFLINE_CONFIG))
    return traces


def expectation_results(trace: FinalizedTrace) -> dict[str, EvaluationResult]:
    out = {}
    for r in trace.results:
        if r.name.startswith(names.EVAL_EXPECTATION_PREFIX):
            rule = r.name[len(names.EVAL_EXPECTATION_PREFIX) :]
            assert rule not in out, rule
            out[rule] = r
    return out


def tracecheck_verdicts(doc: dict[str, Any]) -> tuple[bool, list[str], int, int]:
    """tracecheck's tool_accuracy (passed, actual tools) and step_efficiency (excess, count)."""
    trace = Trace.model_validate(doc)
    accuracy = ToolAccuracyEvaluator().evaluate(trace)
    efficiency = StepEfficiencyEvaluator().evaluate(trace)
    return (
        accuracy.passed,
        accuracy.metadata["actual"],
        efficiency.metadata["excess"],
        efficiency.metadata["tool_call_count"],
    )


def ours(trace: FinalizedTrace) -> tuple[bool, list[str], int, int]:
    results = expectation_results(trace)
    sequence, excess = results["expected_tools.tool_sequence"], results["expected_tools.excess"]
    called = re.search(r"called \[(.*)\]$", sequence.explanation or "")
    counts = re.search(r"; (\d+) call\(s\), (\d+) over$", excess.explanation or "")
    assert called and counts, (sequence.explanation, excess.explanation)
    assert (excess.score_label == "pass") == (counts.group(2) == "0")
    tools = [t for t in called.group(1).split(", ") if t]
    return sequence.score_label == "pass", tools, int(counts.group(2)), int(counts.group(1))


def assert_same_as_tracecheck(docs: list[dict[str, Any]]) -> None:
    traces = evaluate(docs, Expectations(declared=True))
    from tracehound.importers import _trace_id

    by_id = {t.trace_id: t for t in traces}
    for doc in docs:
        trace = by_id[_trace_id(f"tracecheck:{doc['trace_id']}")]
        assert ours(trace) == tracecheck_verdicts(doc), doc["trace_id"]


def test_tracecheck_examples_give_tracecheck_verdicts() -> None:
    assert_same_as_tracecheck(EXAMPLES)
    verdicts = [tracecheck_verdicts(d)[0] for d in EXAMPLES]
    assert verdicts == [True, False, False]  # the pass, the fail, the edge case


def _tool_like(step: dict[str, Any]) -> bool:
    return step["type"] == "retry" or (step["type"] == "error" and bool(step.get("name")))


def _corpus_docs() -> list[dict[str, Any]]:
    docs = [
        json.loads(line)
        for corpus in CORPORA
        for line in corpus.read_text().splitlines()
        if line.strip()
    ]
    docs = [d for d in docs if not any(_tool_like(s) for s in d["steps"])]
    out = []
    for i, doc in enumerate(docs):
        tools = [s["name"] for s in doc["steps"] if s["type"] == "tool_call"]
        variant = i % 5  # the same, one short, reversed, one extra, none expected
        expected = [
            tools,
            tools[:-1],
            tools[::-1],
            [*tools, "never_called"],
            [],
        ][variant]
        out.append({**doc, "expected_tools": expected})
    return out


def test_loop_corpora_give_tracecheck_verdicts() -> None:
    docs = _corpus_docs()
    assert len(docs) >= 200  # of 292
    assert_same_as_tracecheck(docs)
    passed = sum(tracecheck_verdicts(d)[0] for d in docs)
    assert 0 < passed < len(docs)  # both verdicts occur


def test_retries_are_calls_here() -> None:
    """The one difference: a tracecheck `retry` (or an `error` naming a tool) is a call here."""
    doc = {
        **REFUND,
        "steps": [
            *REFUND["steps"][:2],
            {"type": "retry", "name": "find_order", "input": {"u": 7}},
            *REFUND["steps"][2:],
        ],
    }
    assert tracecheck_verdicts(doc)[:3] == (True, ["find_order", "inspect_claim", "refund"], 0)
    [trace] = evaluate([doc], Expectations(declared=True))
    assert ours(trace)[:3] == (False, ["find_order", "find_order", "inspect_claim", "refund"], 1)


_TOOLS = st.sampled_from(["search", "read", "write", "refund"])


@st.composite
def tracecheck_traces(draw: st.DrawFn) -> dict[str, Any]:
    steps = []
    for tool in draw(st.lists(_TOOLS, max_size=8)):
        if draw(st.booleans()):
            steps.append({"type": "llm_call", "name": "m", "output": "next"})
        steps.append({"type": "tool_call", "name": tool, "input": {"q": draw(st.integers(0, 2))}})
    steps.append({"type": "llm_call", "output": "done"})
    return {
        "trace_id": f"gen-{draw(st.integers(0, 10**9))}",
        "agent_name": "gen_agent",
        "expected_tools": draw(st.lists(_TOOLS, max_size=6)),
        "steps": steps,
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tracecheck_traces())
def test_generated_traces_give_tracecheck_verdicts(doc: dict[str, Any]) -> None:
    assert_same_as_tracecheck([doc])


def test_eval_checks_imported_expected_tools(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in EXAMPLES))
    code = main(["eval", str(path), "--evaluators", "expectations", "--format", "json"])
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0  # no --fail-on
    from tracehound.importers import _trace_id

    failed = {r["trace_id"]: r["attributes"].get(names.ATTR_EXPECTATIONS_FAILED) for r in out}
    assert failed == {
        _trace_id("tracecheck:parcel_pass"): [],
        _trace_id("tracecheck:parcel_fail"): [
            "expected_tools.excess",
            "expected_tools.tool_sequence",
        ],
        _trace_id("tracecheck:parcel_edge"): ["expected_tools.tool_sequence"],
    }
    assert main(["eval", str(path), "--fail-on", "expectations"]) == 1
    assert main(["eval", str(path), "--fail-on", "expectations:expected_tools.excess"]) == 1
    capsys.readouterr()
    single = tmp_path / "one.jsonl"
    single.write_text(json.dumps(EXAMPLES[0]) + "\n")
    assert main(["eval", str(single), "--fail-on", "expectations"]) == 0


# --- the rules ---------------------------------------------------------------------------------

REFUND = EXAMPLES[0]


def check(rule: dict[str, Any], doc: dict[str, Any] = REFUND) -> dict[str, EvaluationResult]:
    block = parse_block({"name": "r", **rule}, default_name="r")
    [trace] = evaluate([doc], Expectations(blocks=(block,)))
    return expectation_results(trace)


@pytest.mark.parametrize(
    ("rule", "verdicts", "explanation"),
    [
        (
            {"expected_tools": ["find_order", "inspect_claim", "refund"]},
            {"r.tool_sequence": "pass"},
            "expected tools [find_order, inspect_claim, refund] exactly; called "
            "[find_order, inspect_claim, refund]",
        ),
        (
            {"expected_tools": ["find_order", "refund"]},
            {"r.tool_sequence": "fail"},
            "called [find_order, inspect_claim, refund]",
        ),
        (
            {"expected_tools": ["find_order", "refund"], "order": "in_order"},
            {"r.tool_sequence": "pass"},
            "in order (other calls allowed)",
        ),
        (
            {"expected_tools": ["refund", "find_order"], "order": "in_order"},
            {"r.tool_sequence": "fail"},
            "",
        ),
        (
            {"expected_tools": ["refund", "find_order"], "order": "any_order"},
            {"r.tool_sequence": "pass"},
            "in any order",
        ),
        (
            {"expected_tools": ["refund", "refund"], "order": "any_order"},
            {"r.tool_sequence": "fail"},
            "",
        ),
        (
            {"expected_tools": ["find_order"], "order": "any_order", "max_excess": 1},
            {"r.tool_sequence": "pass", "r.excess": "fail"},
            "3 call(s), 2 over",
        ),
        ({"tools_called": ["refund"]}, {"r.tool_called": "pass"}, "all called"),
        (
            {"tools_called": ["refund", "escalate"]},
            {"r.tool_called": "fail"},
            "never called [escalate]",
        ),
        (
            {"tools_not_called": ["escalate", "refund"]},
            {"r.tool_not_called": "fail"},
            "expected no call of [escalate, refund]; called [refund]",
        ),
        ({"max_tool_calls": 3}, {"r.max_tool_calls": "pass"}, "at most 3 tool calls; 3"),
        ({"max_tool_calls": 2}, {"r.max_tool_calls": "fail"}, "at most 2 tool calls; 3"),
        ({"max_steps": 4}, {"r.max_steps": "fail"}, "; 5"),  # 2 LLM calls + 3 tool calls
        ({"max_tokens": 0}, {"r.max_tokens": "pass"}, "; 0"),  # the example has no usage
        ({"max_duration": 0.001}, {"r.max_duration": "fail"}, "run duration"),
        ({"max_duration": 60}, {"r.max_duration": "pass"}, ""),
        ({"answer_regex": r"\d+\.\d\d EUR"}, {"r.answer_regex": "pass"}, "it does"),
        ({"answer_regex": r"^No"}, {"r.answer_regex": "fail"}, "it does not: 'Refunded"),
        ({"answer_not_contains": "sorry"}, {"r.answer_not_contains": "pass"}, "contains none"),
        (
            {"answer_not_contains": ["card", "cash"]},
            {"r.answer_not_contains": "fail"},
            'it contains ["card"]',
        ),
        ({"answer_min_length": 10, "answer_max_length": 40}, {"r.answer_length": "pass"}, ""),
        ({"answer_max_length": 10}, {"r.answer_length": "fail"}, "[0, 10] characters; 32"),
        ({"answer_json": True}, {"r.answer_json": "fail"}, "it is not (Expecting value"),
        (
            {"answer_schema": {"type": "object"}},
            {"r.answer_schema": "fail"},
            "not JSON",
        ),
        (
            {"tool_arguments_schema": {"find_order": {"required": ["u"]}}},
            {"r.tool_arguments": "pass"},
            "1 ok",
        ),
        (
            {"tool_arguments_schema": {"refund": {"required": ["amount"]}}},
            {"r.tool_arguments": "fail"},
            "'amount' is a required property",
        ),
    ],
)
def test_rule_verdicts(rule: dict[str, Any], verdicts: dict[str, str], explanation: str) -> None:
    results = check(rule)
    assert {k: r.score_label for k, r in results.items()} == verdicts
    for result in results.values():
        assert result.score_value == (1.0 if result.score_label == "pass" else 0.0)
        assert (result.explanation or "").startswith("parcel_agent/parcel_agent: expected")
        assert result.evaluator == "expectations"
    assert explanation in " ".join(r.explanation or "" for r in results.values())


def test_final_answer_schema_validates_json_answers() -> None:
    doc = {
        **REFUND,
        "steps": [*REFUND["steps"][:-1], {"type": "llm_call", "output": '{"refund": 19.9}'}],
    }
    schema = {
        "type": "object",
        "required": ["refund"],
        "properties": {"refund": {"type": "number"}},
    }
    assert (
        check({"answer_schema": schema, "answer_json": True}, doc)["r.answer_schema"].score_label
        == "pass"
    )
    bad = {**schema, "properties": {"refund": {"type": "string"}}}
    result = check({"answer_schema": bad}, doc)["r.answer_schema"]
    assert result.score_label == "fail"
    assert "refund: 19.9 is not of type 'string'" in (result.explanation or "")


def test_a_run_without_final_answer_fails_answer_rules() -> None:
    doc = {**REFUND, "steps": REFUND["steps"][1:-1]}
    results = check({"answer_regex": "x", "answer_min_length": 0}, doc)
    assert {r.score_label for r in results.values()} == {"fail"}
    assert all("no final answer" in (r.explanation or "") for r in results.values())


def test_rules_match_agent_input_and_attributes() -> None:
    blocks = tuple(
        parse_block(raw, default_name="x")
        for raw in (
            {"name": "any", "max_tool_calls": 10},
            {"name": "other_agent", "agent": "billing_*", "max_tool_calls": 10},
            {"name": "by_key", "agent": "parcel_agent/parcel_*", "max_tool_calls": 10},
            {"name": "damaged", "input_regex": "damaged", "max_tool_calls": 10},
            {"name": "exact_input", "input": "refund please", "max_tool_calls": 10},
            {"name": "resource", "attributes": {"service.name": "parcel_agent"}, "max_steps": 99},
            {"name": "wrong_res", "attributes": {"service.name": "nope"}, "max_steps": 99},
        )
    )
    traces = evaluate(EXAMPLES, Expectations(blocks=blocks))
    from tracehound.importers import _trace_id

    rules = {
        t.trace_id: sorted(r.partition(".")[0] for r in expectation_results(t)) for t in traces
    }
    pass_id, fail_id, edge_id = (_trace_id(f"tracecheck:{d['trace_id']}") for d in EXAMPLES)
    assert rules[pass_id] == ["any", "by_key", "damaged", "resource"]
    assert rules[fail_id] == ["any", "by_key", "damaged", "resource"]
    assert rules[edge_id] == ["any", "by_key", "exact_input", "resource"]


def test_results_sit_on_the_agent_span_with_the_run_summary() -> None:
    rule = {"name": "r", "tools_called": ["refund"], "tools_not_called": ["refund"]}
    [trace] = evaluate([REFUND], Expectations(blocks=(parse_block(rule, default_name="r"),)))
    results = expectation_results(trace)
    agent_span = next(r.span_id for r in trace.trajectory.runs if not r.implicit)
    assert {r.span_id for r in expectation_results(trace).values()} == {agent_span}
    assert len(results) == 2
    # the root is the agent span here: its attributes are the trace's summary
    assert trace.root_span_id == agent_span
    assert trace.attributes[names.ATTR_EXPECTATIONS_CHECKED] == 2
    assert trace.attributes[names.ATTR_EXPECTATIONS_FAILED_COUNT] == 1
    assert trace.attributes[names.ATTR_EXPECTATIONS_FAILED] == ("r.tool_not_called",)
    assert trace.attributes[names.ATTR_EXPECTATIONS_AGENT] == "parcel_agent/parcel_agent"


def test_metrics_by_rule_and_outcome_without_trace_ids() -> None:
    from tracehound.emit import result_measurements

    results = check({"tools_called": ["refund"], "max_tool_calls": 1})
    points = [m for r in results.values() for m in result_measurements(r, "parcel_agent")]
    counted = sorted(
        (
            (dict(m.attributes), m.value)
            for m in points
            if m.instrument == names.METRIC_EXPECTATIONS
        ),
        key=repr,
    )
    assert counted == sorted(
        [
            (
                {
                    "gen_ai.agent.name": "parcel_agent",
                    names.ATTR_EXPECTATIONS_AGENT: "parcel_agent/parcel_agent",
                    names.ATTR_EXPECTATION_RULE: rule,
                    names.ATTR_EXPECTATION_OUTCOME: outcome,
                },
                1,
            )
            for rule, outcome in (("r.tool_called", "pass"), ("r.max_tool_calls", "fail"))
        ],
        key=repr,
    )
    for m in points:
        assert not any(k.endswith(("trace_id", "span_id")) for k in m.attributes), m
        assert set(m.attributes.values()).isdisjoint(
            {t.trace_id for t in evaluate([REFUND], Expectations(declared=True))}
        ), m


def test_off_unless_configured_and_no_per_span_hook() -> None:
    assert expectations_evaluator(Expectations()) is None
    evaluators, _ = open_evaluators(None, "memory")
    assert not any(isinstance(e, ExpectationsEvaluator) for e in evaluators)
    plain = expectations_evaluator(
        Expectations(blocks=(parse_block({"max_steps": 3}, default_name="p"),))
    )
    assert plain is not None and not _has_span_hook(plain)
    reading = expectations_evaluator(
        Expectations(
            blocks=(parse_block({"max_steps": 3, "attributes": {"a": 1}}, default_name="p"),)
        )
    )
    assert reading is not None and _has_span_hook(reading)


# --- rule files ---------------------------------------------------------------------------------

GOOD = """\
[serve]
otlp_grpc = "none"

[expectations]
key = "input"

[[expectations.rule]]
name = "refund"
agent = "parcel_agent"
expected_tools = ["find_order", "inspect_claim", "refund"]
max_excess = 0

[[expectations.rule]]
agent = "parcel_agent"
answer_not_contains = ["sorry"]
"""


def test_toml_rules_load(tmp_path: Path) -> None:
    path = tmp_path / "tracehound.toml"
    path.write_text(GOOD)
    rules = load_expectations(path)
    assert [b.name for b in rules.blocks] == ["refund", "parcel_agent"]
    assert [c.name for c in rules.blocks[0].checks] == ["tool_sequence", "excess"]
    assert rules.describe() == "2 rule block(s), 3 rule(s)"
    (tmp_path / "plain.toml").write_text('[serve]\notlp_grpc = "none"\n')
    assert not load_expectations(tmp_path / "plain.toml")  # no table: the evaluator is off


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ('name = "a"\nmax_tool_call = 3', "unknown key(s) max_tool_call"),
        ('name = "a"\nanswer_regex = "(unclosed"', "answer_regex: invalid regular expression"),
        ('name = "a"\nexpected_tools = ["x"]\norder = "sorted"', "order 'sorted': expected one of"),
        ('name = "a"\nmax_excess = 1', "max_excess needs expected_tools"),
        ('name = "a"\nmax_steps = -1', "max_steps must be an integer >= 0"),
        ('name = "a"\nmax_duration = "long"', "max_duration must be a number of seconds"),
        ('name = "a"\nagent = "x"', "no check given"),
        ('name = "a b"\nmax_steps = 1', "name 'a b': use letters"),
        ('name = "a"\nanswer_schema = {type = "objekt"}', "not a valid JSON Schema"),
        ('name = "a"\nanswer_schema = "missing.json"', "answer_schema: cannot read 'missing.json'"),
        ('name = "a"\nkey = "k"\nmax_steps = 1', "'key' is for golden lines"),
    ],
)
def test_a_bad_rule_names_file_line_rule_and_reason(tmp_path: Path, rule: str, reason: str) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(
        f'[[expectations.rule]]\nname = "ok"\nmax_steps = 9\n\n[[expectations.rule]]\n{rule}\n'
    )
    with pytest.raises(ExpectationError) as info:
        load_expectations(path)
    message = str(info.value)
    assert message.startswith(f"{path}:5: rule ")
    assert reason in message
    assert "\n" not in message


def test_duplicate_rule_names_and_bad_tables(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text("[[expectations.rule]]\nname = 'a'\nmax_steps = 1\n" * 2)
    with pytest.raises(
        ExpectationError, match=r"rules.toml:4: rule 'a': duplicate rule name \(also at line 1\)"
    ):
        load_expectations(path)
    path.write_text("[expectations]\nrules = []\n")
    with pytest.raises(ExpectationError, match="unknown \\[expectations\\] key\\(s\\) rules"):
        load_expectations(path)
    path.write_text("[expectations]\nkey = 'span'\n")
    with pytest.raises(ExpectationError, match=r"expectations\.key 'span': use input, trace_id"):
        load_expectations(path)


def test_golden_lines(tmp_path: Path) -> None:
    path = tmp_path / "golden.jsonl"
    path.write_text(
        "# support flows\n"
        + json.dumps(
            {
                "key": "my parcel came damaged, refund it",
                "expected_tools": EXAMPLES[0]["expected_tools"],
            }
        )
        + "\n\n"
        + json.dumps({"key": "refund please", "tools_called": ["refund"], "agent": "parcel_agent"})
        + "\n"
    )
    rules = load_golden_lines(path)
    traces = evaluate(EXAMPLES, rules)
    from tracehound.importers import _trace_id

    got = {
        t.trace_id: {k: r.score_label for k, r in expectation_results(t).items()} for t in traces
    }
    pass_id, fail_id, edge_id = (_trace_id(f"tracecheck:{d['trace_id']}") for d in EXAMPLES)
    assert got[pass_id] == {"golden.tool_sequence": "pass"}
    assert got[fail_id] == {"golden.tool_sequence": "fail"}
    assert got[edge_id] == {"golden.tool_called": "fail"}
    by_trace = evaluate(EXAMPLES, load_golden_lines(_golden_by_trace_id(tmp_path), key="trace_id"))
    assert {len(expectation_results(t)) for t in by_trace} == {1, 0}


def _golden_by_trace_id(tmp_path: Path) -> Path:
    from tracehound.importers import _trace_id

    path = tmp_path / "by_id.jsonl"
    path.write_text(
        json.dumps({"key": _trace_id("tracecheck:parcel_pass"), "max_tool_calls": 3}) + "\n"
    )
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"key": "a", "max_steps": 1}\n{"key": "b", max_steps: 1}\n', ":2: not JSON"),
        (
            '{"key": "a", "max_steps": 1}\n{"key": "a", "max_steps": 2}\n',
            ":2: key 'a': duplicate (also at line 1)",
        ),
        ('{"expected_tools": ["x"]}\n', ":1: a golden line needs a string 'key'"),
        ('{"key": "a", "expected_tool": ["x"]}\n', ":1: key 'a': unknown key(s) expected_tool"),
        ("\n# nothing\n", ": the golden set has no line"),
    ],
)
def test_bad_golden_lines(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "golden.jsonl"
    path.write_text(text)
    with pytest.raises(ExpectationError) as info:
        load_golden_lines(path)
    assert str(info.value).startswith(str(path))
    assert message in str(info.value)


def test_schema_rules_without_jsonschema_give_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # import fails as if not installed
    path = tmp_path / "rules.toml"
    path.write_text("[[expectations.rule]]\nname = 's'\nanswer_schema = {type = 'object'}\n")
    with pytest.raises(ExpectationError) as info:
        load_expectations(path)
    assert str(info.value) == f"{path}:1: rule 's': answer_schema: {SCHEMA_HINT}"
    path.write_text("[[expectations.rule]]\nname = 's'\nanswer_json = true\n")
    assert load_expectations(path).blocks  # other rules need no extra


def test_start_up_errors_in_all_three_shapes(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "tracehound.toml"
    path.write_text(
        '[serve]\notlp_grpc = "none"\n\n[[expectations.rule]]\nname = "a"\nmax_steps = "x"\n'
    )
    expected = f"{path}:4: rule 'a': max_steps must be an integer >= 0 (got 'x')"
    # the processor
    with pytest.raises(ConfigError) as info:
        open_evaluators(None, "memory", str(path))
    assert expected in str(info.value)
    settings = ProcessorSettings.from_env({"TRACEHOUND_CONFIG": str(path)})
    assert settings.config_file == str(path)
    # eval
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({**REFUND, "expected_tools": None}) + "\n")
    assert main(["eval", str(trace), "--config", str(path)]) == 2
    assert expected in capsys.readouterr().err
    # serve --check-config
    assert main(["serve", "--config", str(path), "--check-config"]) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err and expected in err
    # naming the evaluator without rules is an error too
    path.write_text('[serve]\notlp_grpc = "none"\n')
    with pytest.raises(ConfigError, match="expectations evaluator is named but no"):
        open_evaluators(("expectations",), "memory", str(path))
    assert main(["eval", str(trace), "--evaluators", "expectations"]) == 2
    assert "no rule is configured" in capsys.readouterr().err


def test_serve_check_config_shows_the_rules(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "tracehound.toml"
    path.write_text(GOOD)
    assert main(["serve", "--config", str(path), "--check-config"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^expectations\s+2 rule block\(s\), 3 rule\(s\)$", out, re.M), out


DOCS = Path(__file__).resolve().parents[2] / "docs" / "expectations.md"
README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def test_documented_rules_load(tmp_path: Path) -> None:
    doc = DOCS.read_text()
    [toml] = _blocks(doc, "toml")
    [golden] = _blocks(doc, "json")
    (tmp_path / "golden.jsonl").write_text(golden)
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "invoice.json").write_text('{"type": "object"}')
    (tmp_path / "tracehound.toml").write_text(toml)
    rules = load_expectations(tmp_path / "tracehound.toml")
    assert [b.name for b in rules.blocks] == ["refund", "extractor"]
    assert len(rules.golden) == 2
    for key in re.findall(r"^\| `(\w+)`", doc, re.M):  # every documented matcher and check key
        assert key in (*MATCH_KEYS, *CHECK_KEYS), key
    for readme_toml in [b for b in _blocks(README.read_text(), "toml") if "expectations" in b]:
        (tmp_path / "readme.toml").write_text(readme_toml)
        assert load_expectations(tmp_path / "readme.toml").blocks


class _Calls:
    """What the tool-sequence checks read of a run: its tool names."""

    def __init__(self, tools: list[str]) -> None:
        self.tools = tools


def _verdict(expected: list[str], actual: list[str], order: str) -> bool:
    [check] = parse_block({"expected_tools": expected, "order": order}, default_name="p").checks
    return check.run(_Calls(actual))[0]  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.lists(_TOOLS, max_size=6), st.lists(_TOOLS, max_size=8))
def test_orders_are_nested(expected: list[str], actual: list[str]) -> None:
    exact, in_order, any_order = (_verdict(expected, actual, o) for o in ORDERS)
    assert exact <= in_order <= any_order
    assert exact == (expected == actual)
    assert any_order == all(actual.count(t) >= expected.count(t) for t in expected)


@settings(max_examples=200, deadline=None)
@given(st.lists(_TOOLS, max_size=6), st.data())
def test_extra_calls_keep_in_order_and_count_as_excess(expected: list[str], data: Any) -> None:
    actual = list(expected)
    extras = data.draw(st.lists(st.tuples(st.integers(0, 10), _TOOLS), max_size=4))
    for position, tool in extras:
        actual.insert(min(position, len(actual)), tool)
    assert _verdict(expected, actual, "in_order")
    block = parse_block({"expected_tools": expected, "max_excess": len(extras)}, default_name="p")
    excess = block.checks[1].run(_Calls(actual))  # type: ignore[arg-type]
    assert excess[0] and excess[1].endswith(f"{len(actual)} call(s), {len(extras)} over")
    if extras:
        tight = parse_block(
            {"expected_tools": expected, "max_excess": len(extras) - 1}, default_name="p"
        )
        assert not tight.checks[1].run(_Calls(actual))[0]  # type: ignore[arg-type]


def test_eval_expect_golden_set(tmp_path: Path, capsys: Any) -> None:
    traces = tmp_path / "traces.jsonl"
    traces.write_text("".join(json.dumps({**d, "expected_tools": None}) + "\n" for d in EXAMPLES))
    golden = tmp_path / "golden.jsonl"
    golden.write_text(
        json.dumps({"key": "refund please", "tools_called": ["refund"], "max_tool_calls": 5}) + "\n"
    )
    argv = ["eval", str(traces), "--expect", str(golden), "--format", "json"]
    assert main(argv) == 0
    reports = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    checked = {r["trace_id"]: r["attributes"].get(names.ATTR_EXPECTATIONS_FAILED) for r in reports}
    assert sorted(checked.values(), key=repr) == [None, None, ["golden.tool_called"]]
    assert main([*argv, "--fail-on", "expectations:golden.max_tool_calls"]) == 0
    assert main([*argv, "--fail-on", "expectations:golden"]) == 1
    assert main([*argv, "--fail-on", "expectations:*.tool_*"]) == 1
    capsys.readouterr()
    assert main([*argv, "--expect-key", "span"]) == 2
    assert "expectations.key 'span': use input, trace_id or attribute:NAME" in (
        capsys.readouterr().err
    )


def test_a_truncated_trace_says_so() -> None:
    evaluator = expectations_evaluator(
        Expectations(blocks=(parse_block({"max_tool_calls": 9}, default_name="t"),))
    )
    assert evaluator is not None
    telemetry = Telemetry()
    telemetry.spans.extend(import_document(REFUND, "doc"))
    config = OFFLINE_CONFIG.__class__(max_traces=10, max_spans_per_trace=3)
    [trace] = run_engine(telemetry, Engine([evaluator], config=config))[0]
    assert trace.truncated
    [result] = expectation_results(trace).values()
    assert (result.explanation or "").endswith(
        "(the trace was truncated: the run may be incomplete)"
    )


def test_golden_sets_keep_their_own_key(tmp_path: Path) -> None:
    by_input = tmp_path / "by_input.jsonl"
    by_input.write_text(json.dumps({"key": " refund please ", "max_tool_calls": 1}) + "\n")
    by_service = tmp_path / "by_service.jsonl"
    by_service.write_text(json.dumps({"key": "parcel_agent", "max_steps": 99}) + "\n")
    rules = load_golden_lines(by_input).merged(
        load_golden_lines(by_service, key="attribute:service.name")
    )
    assert (
        rules.describe()
        == "0 rule block(s), 0 rule(s); 2 golden line(s) keyed by attribute:service.name, input"
    )
    from tracehound.importers import _trace_id

    got = {t.trace_id: sorted(expectation_results(t)) for t in evaluate(EXAMPLES, rules)}
    edge = _trace_id("tracecheck:parcel_edge")
    assert got.pop(edge) == ["golden.max_steps", "golden.max_tool_calls"]  # one of each set
    assert set(map(tuple, got.values())) == {("golden.max_steps",)}


def test_a_large_golden_set_picks_the_line_of_the_key(tmp_path: Path) -> None:
    path = tmp_path / "golden.jsonl"
    lines = [{"key": f"question {i}", "max_tool_calls": i} for i in range(3000)]
    lines[1234]["key"] = REFUND["user_input"]
    lines.append({"key": REFUND["user_input"], "agent": "parcel_agent", "max_steps": 1})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    [trace] = evaluate([REFUND], load_golden_lines(path))
    [result] = expectation_results(trace).values()
    assert result.name.endswith("golden.max_tool_calls")  # line 1235, not the later one
    assert "expected at most 1234 tool calls; 3" in (result.explanation or "")
