"""Command line: `tracehound inspect` and `tracehound eval`.

Exit codes: 0 success, 1 a `--fail-on` rule tripped (eval), 2 usage error or unreadable input
(with the file and the reason).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import TextIO

from tracehound import __version__
from tracehound.cli_baseline import EvalExtras, add_baseline_parser, add_eval_arguments, result_line
from tracehound.cli_runs import add_runs_parser
from tracehound.config import EXPECTATIONS
from tracehound.engine import Engine, EngineConfig, FinalizedTrace
from tracehound.evaluators.base import EvaluationResult, Evaluator, PluginError, load_plugins
from tracehound.files import InputError, Telemetry, read_paths, read_stdin
from tracehound.importers import UnknownFormatError, import_document
from tracehound.report import (
    FailRule,
    TraceReport,
    parse_fail_rule,
    result_prefix,
    result_status,
)
from tracehound.steps import Step, Trajectory

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
# Offline runs read whole files: hold every trace until the end of the input.
OFFLINE_CONFIG = EngineConfig(max_traces=10_000_000)


def example_paths() -> list[Path]:
    """The example traces bundled with the package (real captures of pydantic-ai and openai-v2)."""
    folder = resources.files("tracehound") / "data"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".json"))


def load_input(files: Sequence[str], examples: bool) -> Telemetry:
    paths: list[str | Path] = [*files]
    if examples:
        paths.extend(example_paths())
    if not paths or paths == ["-"]:
        if sys.stdin.isatty():
            raise InputError("no input: give OTLP files or folders, '-' for stdin, or --examples")
        return read_stdin()
    telemetry = Telemetry()
    for path in paths:
        if str(path) == "-":
            telemetry.extend(read_stdin())
        else:
            telemetry.extend(read_paths([path]))
    return telemetry


def imported_spans(telemetry: Telemetry) -> None:
    """Turn non-OTLP documents (tracecheck traces, evidenceflow step lists) into spans."""
    for where, doc in telemetry.other_documents:
        try:
            telemetry.spans.extend(import_document(doc, where))
        except UnknownFormatError as exc:
            raise InputError(str(exc)) from None
    telemetry.other_documents.clear()


class _Progress:
    """A one-line progress counter on stderr, only when it is a terminal and the input is large."""

    def __init__(self, total: int, err: TextIO, what: str = "spans") -> None:
        self.enabled = total >= 20_000 and err.isatty()
        self.total, self.err, self.what = total, err, what

    def update(self, done: int) -> None:
        if self.enabled and (done % 5_000 == 0 or done == self.total):
            self.err.write(
                f"\revaluating {self.what}: {done:,}/{self.total:,} ({done / self.total:.0%})"
            )
            if done == self.total:
                self.err.write("\n")
            self.err.flush()


def run_engine(
    telemetry: Telemetry, engine: Engine, err: TextIO | None = None
) -> tuple[list[FinalizedTrace], dict[str, list[EvaluationResult]]]:
    """Feed a whole input to the engine: logs first (so they join on arrival), then spans.

    Returns the finalized traces (ordered by start) and the per-span results of each trace.
    """
    for log in telemetry.logs:
        engine.add_log(log)
    span_results: dict[str, list[EvaluationResult]] = {}
    progress = _Progress(len(telemetry.spans), err or sys.stderr)
    for done, span in enumerate(telemetry.spans, 1):
        outcome = engine.add_span(span)
        if outcome.results:
            span_results.setdefault(outcome.trace_id, []).extend(outcome.results)
        for released in engine.take_released():  # spans evaluated once their ancestors came
            if released.results:
                span_results.setdefault(released.trace_id, []).extend(released.results)
        progress.update(done)
    finalized = engine.flush()
    for released in engine.take_released():
        if released.results:
            span_results.setdefault(released.trace_id, []).extend(released.results)
    traces = sorted(finalized, key=lambda t: (_first_start(t.trajectory), t.trace_id))
    return traces, span_results


def _first_start(trajectory: Trajectory) -> int:
    return min((s.start_ns for s in trajectory.steps), default=0)


# --- inspect ------------------------------------------------------------------------------------


def cmd_inspect(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    telemetry = load_input(args.files, args.examples)
    for problem in telemetry.problems:
        print(f"warning: {problem}", file=err)
    imported_spans(telemetry)
    engine = Engine(config=OFFLINE_CONFIG)
    traces, _ = run_engine(telemetry, engine, err)
    if args.genai_only:
        traces = [t for t in traces if t.trajectory.steps]
    for trace in traces:
        if args.format == "json":
            out.write(json.dumps(inspect_record(trace), ensure_ascii=False) + "\n")
        else:
            write_tree(trace, out, width=args.width)
    if args.format == "text":
        genai = sum(1 for t in traces if t.trajectory.steps)
        print(
            f"{len(traces)} trace(s), {genai} with GenAI steps, "
            f"{engine.stats.spans_received} span(s), "
            f"{engine.stats.logs_received} GenAI log event(s)",
            file=err,
        )
    return EXIT_OK


def inspect_record(trace: FinalizedTrace) -> dict[str, object]:
    """The stable per-trace JSON shape of `inspect --format json`."""
    t = trace.trajectory
    return {
        "trace_id": trace.trace_id,
        "conventions": list(t.conventions),
        "runs": [
            {
                "run_id": r.run_id,
                "agent": r.agent_name,
                "parent_run_id": r.parent_run_id,
                "depth": r.depth,
                "final_answer": t.final_answer(r.run_id),
            }
            for r in t.runs
        ],
        "steps": [s.to_dict() for s in t.steps],
        "problems": list(t.problems),
    }


def _clip(text: str | None, width: int) -> str:
    if not text:
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 1)] + "…"


def describe_step(step: Step, width: int) -> str:
    kind = step.kind
    if kind == "agent":
        return f"{step.agent or ''}"
    if kind == "llm":
        tokens = []
        if step.input_tokens is not None:
            tokens.append(f"in={step.input_tokens}")
        if step.output_tokens is not None:
            tokens.append(f"out={step.output_tokens}")
        if step.finish_reason:
            tokens.append(f"finish={step.finish_reason}")
        return " ".join([step.model or "?", *tokens])
    if kind == "tool_call":
        call = f" [{step.call_id}]" if step.call_id else ""
        return f"{step.tool or '?'}({_clip(step.arguments, width)}){call}"
    if kind == "tool_result":
        if step.error:
            return f"{step.tool or '?'} ✗ {_clip(step.error, width)}"
        size = f"{len(step.text)} chars" if step.text is not None else "no content"
        return f"{step.tool or '?'} → {size} {_clip(step.text, width)}".rstrip()
    if kind == "retrieval":
        query = _clip(step.text, width)
        return f"{step.source or '?'}: {len(step.documents)} document(s) for {query!r}"
    if kind == "error":
        return _clip(step.error, width)
    return _clip(step.text, width)


def write_tree(trace: FinalizedTrace, out: TextIO, width: int = 80) -> None:
    t = trace.trajectory
    conventions = ", ".join(t.conventions) or "none (no GenAI spans)"
    out.write(f"trace {trace.trace_id}  {trace.span_count} span(s)  conventions: {conventions}\n")
    start = _first_start(t)
    for run in t.runs:
        indent = "  " * run.depth
        kind = "trace" if run.implicit else "agent"
        out.write(f"{indent}└─ run {run.agent_name!r} ({kind}, span {run.span_id or '-'})\n")
        for step in t.steps:
            if step.run_id != run.run_id:
                continue
            offset = (step.start_ns - start) / 1e9 if start else 0.0
            line = describe_step(step, width)
            out.write(f"{indent}   {offset:+8.3f}s  {step.kind:<11} {line}\n")
        answer = t.final_answer(run.run_id)
        if answer:
            out.write(f"{indent}   final answer: {_clip(answer, width)}\n")
    if trace.truncated:
        out.write("   ! truncated: the trace exceeded a per-trace limit\n")
    for problem in t.problems:
        out.write(f"   ! {problem}\n")
    out.write("\n")


# --- eval ---------------------------------------------------------------------------------------


def _evidence() -> Evaluator:
    from tracehound.evaluators.evidence import EvidenceEvaluator

    return EvidenceEvaluator()


def _loops() -> Evaluator:
    from tracehound.evaluators.loops import LoopEvaluator

    return LoopEvaluator()


BUILTIN_EVALUATORS: dict[str, Callable[[], Evaluator]] = {"evidence": _evidence, "loops": _loops}


# Built in but needing a baseline store: `eval` adds it with `--baselines`, `serve` by default.
STORE_EVALUATORS = ("drift",)


def select_evaluators(names: Sequence[str] | None) -> list[Evaluator]:
    builtins = BUILTIN_EVALUATORS
    if not names:
        return [factory() for factory in builtins.values()]
    plugin_names = [n for n in names if n not in builtins]
    try:
        plugins = {e.name: e for e in load_plugins(plugin_names)} if plugin_names else {}
    except PluginError as exc:
        if not str(exc).startswith("unknown evaluator plugin"):
            raise
        known = ", ".join([*builtins, *STORE_EVALUATORS])
        raise PluginError(f"{exc} — built-in evaluators are {known}") from None
    out: list[Evaluator] = []
    for name in names:
        out.append(builtins[name]() if name in builtins else plugins[name])
    return out


def _declares_tools(doc: object) -> bool:
    """Does an imported document (a tracecheck trace, or a list of them) give expected_tools?"""
    if isinstance(doc, list):
        return any(_declares_tools(item) for item in doc)
    return isinstance(doc, dict) and doc.get("expected_tools") is not None


def eval_expectations(
    args: argparse.Namespace, *, required: bool = False, imported: bool = False
) -> Evaluator | None:
    """The `expectations` evaluator of `eval`: the `[expectations]` of `--config` (else
    `TRACEHOUND_CONFIG`), the golden lines of each `--expect FILE`, and the expected tools
    that imported traces declare (None: nothing to check). Bad files raise `InputError`."""
    from dataclasses import replace

    from tracehound.config import TRACEHOUND_CONFIG
    from tracehound.evaluators.expectations import (
        ExpectationError,
        Expectations,
        expectations_evaluator,
        load_expectations,
        load_golden_lines,
    )

    config = args.config or os.environ.get(TRACEHOUND_CONFIG, "").strip() or None
    try:
        rules = load_expectations(config) if config else Expectations()
        for path in args.expect:
            rules = rules.merged(load_golden_lines(path, key=args.expect_key or rules.key))
    except ExpectationError as exc:
        raise InputError(str(exc)) from None
    if imported and not rules.declared:
        rules = replace(rules, declared=True)
    evaluator = expectations_evaluator(rules)
    if evaluator is None and required:
        raise InputError(
            f"--evaluators names {EXPECTATIONS} but no rule is configured "
            "(give --config FILE with [expectations] rules, or --expect GOLDEN.jsonl)"
        )
    return evaluator


def cmd_eval(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        rules = [parse_fail_rule(text) for text in args.fail_on]
    except ValueError as exc:
        raise InputError(str(exc)) from None
    names = (
        [n.strip() for chunk in args.evaluators for n in chunk.split(",") if n.strip()]
        if args.evaluators
        else None
    )
    expect_named = bool(names and EXPECTATIONS in names)
    if names and expect_named:
        names = [n for n in names if n != EXPECTATIONS]
    drift_named = bool(names and "drift" in names)  # built in; runs with its baseline store
    if names and drift_named:
        if args.baselines is None:
            raise InputError(
                "--evaluators drift needs --baselines PATH (a SQLite file) or --baselines memory"
            )
        names = [n for n in names if n != "drift"]
    try:
        evaluators = select_evaluators(names) if names or not (expect_named or drift_named) else []
    except PluginError as exc:
        raise InputError(str(exc)) from None
    extras = EvalExtras(args, err)  # --baselines (drift), --against (golden traces)
    telemetry = load_input(args.files, args.examples)
    for problem in telemetry.problems:
        print(f"warning: {problem}", file=err)
    imported = any(_declares_tools(doc) for _, doc in telemetry.other_documents)
    imported_spans(telemetry)
    if not telemetry.spans and (rules or extras.golden is not None):
        # A wrong path in CI must not pass as "nothing tripped".
        where = ", ".join(args.files) or ("stdin" if not args.examples else "--examples")
        raise InputError(f"no spans in the input ({where}): nothing to gate on (check the path)")
    expectations = eval_expectations(args, required=expect_named, imported=imported)
    if expectations is not None:
        evaluators.append(expectations)
    with extras.evaluators() as more:
        engine = Engine([*evaluators, *more], config=OFFLINE_CONFIG)
        traces, span_results = run_engine(telemetry, engine, err)
        extras.record_history(traces)
    reports = [
        TraceReport(t, tuple(span_results.get(t.trace_id, ())))
        for t in traces
        if t.trajectory.steps or not args.genai_only
    ]
    if args.format == "json":
        for report in reports:
            out.write(json.dumps(report.to_json(), ensure_ascii=False, default=str) + "\n")
    else:
        for report in reports:
            write_summary(report, out, args.width)
    extras.write_report(reports, out, args.width)
    if args.html:
        from tracehound.report.html import render_html

        try:
            Path(args.html).write_text(render_html(reports), encoding="utf-8")
        except OSError as exc:
            raise InputError(
                f"{args.html}: cannot write the HTML report ({exc.strerror or exc})"
            ) from None
        print(f"wrote {args.html}", file=err)
    return extras.verdict(reports, err, _verdict(reports, rules, err, engine))


def _verdict(reports: list[TraceReport], rules: list[FailRule], err: TextIO, engine: Engine) -> int:
    counts = {s: sum(1 for r in reports if r.status == s) for s in ("PASS", "WARN", "FAIL")}
    print(
        f"{len(reports)} trace(s): {counts['PASS']} PASS, {counts['WARN']} WARN, "
        f"{counts['FAIL']} FAIL ({engine.stats.spans_received} span(s), "
        f"{engine.stats.evaluator_errors} evaluator error(s))",
        file=err,
    )
    tripped = False
    for rule in rules:
        hits = rule.tripped_by(reports)
        if hits:
            tripped = True
            ids = ", ".join(r.trace_id for r in hits[:5]) + (" …" if len(hits) > 5 else "")
            print(f"--fail-on {rule.text}: tripped by {len(hits)} trace(s): {ids}", file=err)
    return EXIT_FAIL if tripped else EXIT_OK


def write_summary(report: TraceReport, out: TextIO, width: int) -> None:
    t = report.trace.trajectory
    top = t.runs[0].agent_name if t.runs else "-"
    conventions = ", ".join(t.conventions) or "no GenAI spans"
    out.write(
        f"{report.status:<4}  trace {report.trace_id}  {top} · {conventions} · "
        f"{len(t.steps)} step(s)\n"
    )
    for result in report.trace_results:
        special = result_line(result, width)  # drift and golden results
        if special is not None:
            out.write(special)
            continue
        score = f"{result.score_value:.2f}" if result.score_value is not None else "-"
        label = result.score_label or result.error_type or ""
        why = _clip(result.explanation, width)
        out.write(
            f"{result_prefix(result)}{result.name} = {score} {label}{' — ' + why if why else ''}\n"
        )
    for result in report.span_results:
        if result_status(result) != "PASS":
            out.write(
                f"{result_prefix(result)}span {result.span_id}: "
                f"{_clip(result.explanation, width)}\n"
            )


# --- entry point --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tracehound",
        description="Evaluate AI-agent traces inside the OpenTelemetry pipeline.",
    )
    parser.add_argument("--version", action="version", version=f"tracehound {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    inspect = sub.add_parser(
        "inspect",
        help="print each trace's normalized trajectory (what tracehound understood)",
        description="Read OTLP traces and logs (JSON, JSON lines or protobuf; files, folders "
        "or '-' for stdin) and print each trace's normalized trajectory.",
    )
    inspect.add_argument("files", nargs="*", help="OTLP files or folders; '-' reads stdin")
    inspect.add_argument(
        "--examples",
        action="store_true",
        help="also read the example traces bundled with tracehound",
    )
    inspect.add_argument("--format", choices=("text", "json"), default="text")
    inspect.add_argument(
        "--genai-only", action="store_true", help="skip traces without any GenAI step"
    )
    inspect.add_argument("--width", type=int, default=80, help="clip texts to this many characters")
    inspect.set_defaults(handler=cmd_inspect)

    evaluate = sub.add_parser(
        "eval",
        help="evaluate traces offline (CI): summary, JSON lines, HTML report, exit code",
        description="Evaluate OTLP traces and logs (JSON, JSON lines or protobuf), tracecheck "
        "traces or evidenceflow step lists; files, folders or '-' for stdin. Exit code 1 when a "
        "--fail-on rule trips, 2 for usage errors or unreadable input.",
    )
    evaluate.add_argument("files", nargs="*", help="input files or folders; '-' reads stdin")
    evaluate.add_argument(
        "--examples",
        action="store_true",
        help="also read the example traces bundled with tracehound",
    )
    evaluate.add_argument("--format", choices=("text", "json"), default="text")
    evaluate.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report")
    evaluate.add_argument(
        "--fail-on",
        action="append",
        default=[],
        metavar="RULE",
        help="exit 1 when a trace matches: loop, fail, warn, error, or NAME OP VALUE "
        "(evidence<0.2, survival<0.5, loops>=1, drift>=alert); with --against: regressed, "
        "drifted; with expectation rules: expectations, expectations:RULE; repeatable",
    )
    evaluate.add_argument(
        "--evaluators",
        action="append",
        metavar="NAMES",
        help="comma-separated evaluators to run (built in: evidence, loops, and drift with "
        "--baselines; or installed plugins); default: evidence, loops (and drift with "
        "--baselines); expectations runs whenever rules are given (--config, --expect)",
    )
    evaluate.add_argument(
        "--config",
        metavar="FILE",
        help="TOML settings file whose [expectations] rules are checked (default: "
        "$TRACEHOUND_CONFIG)",
    )
    evaluate.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="FILE",
        help="golden set, JSON lines {key, expected_tools, ...}: checked on the runs of the "
        "traces whose key matches; repeatable",
    )
    evaluate.add_argument(
        "--expect-key",
        metavar="KEY",
        help="what a golden line's key is compared with: input (the first user input; "
        "default), trace_id, or attribute:NAME",
    )
    evaluate.add_argument(
        "--genai-only", action="store_true", help="skip traces without GenAI steps"
    )
    evaluate.add_argument("--width", type=int, default=100, help="clip explanations to this width")
    add_eval_arguments(evaluate)
    evaluate.set_defaults(handler=cmd_eval)
    add_baseline_parser(sub)
    add_runs_parser(sub)
    from tracehound.cli_mcp import add_mcp_parser

    add_mcp_parser(sub)
    from tracehound.server.cli import add_serve_parser  # the sidecar's own module

    add_serve_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args, sys.stdout, sys.stderr)
    except InputError as exc:
        print(f"tracehound: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `tracehound inspect … | head`
        return EXIT_OK
    return code


if __name__ == "__main__":
    sys.exit(main())
