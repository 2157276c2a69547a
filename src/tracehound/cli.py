"""Command line: `tracehound inspect` (more commands arrive with their issues).

Exit codes: 0 success, 2 usage error or unreadable input (with the file and the reason).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TextIO

from tracehound import __version__
from tracehound.engine import Engine, EngineConfig, FinalizedTrace
from tracehound.files import InputError, Telemetry, read_paths, read_stdin
from tracehound.steps import Run, Step, Trajectory

EXIT_OK, EXIT_USAGE = 0, 2


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


def run_engine(telemetry: Telemetry, engine: Engine) -> list[FinalizedTrace]:
    """Feed a whole input to the engine: logs first (so they join on arrival), then spans."""
    for log in telemetry.logs:
        engine.add_log(log)
    for span in telemetry.spans:
        engine.add_span(span)
    return sorted(engine.flush(), key=lambda t: (_first_start(t.trajectory), t.trace_id))


def _first_start(trajectory: Trajectory) -> int:
    return min((s.start_ns for s in trajectory.steps), default=0)


# --- inspect ------------------------------------------------------------------------------------


def cmd_inspect(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    telemetry = load_input(args.files, args.examples)
    for problem in telemetry.problems:
        print(f"warning: {problem}", file=err)
    engine = Engine(config=EngineConfig(max_traces=1_000_000))
    traces = run_engine(telemetry, engine)
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
            f"{engine.stats.spans_received} span(s), {engine.stats.logs_received} GenAI log event(s)",
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
        return f"{step.source or '?'}: {len(step.documents)} document(s) for {_clip(step.text, width)!r}"
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


def _runs_depth_first(runs: Sequence[Run]) -> list[Run]:
    return sorted(runs, key=lambda r: (r.depth, r.start_ns))


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
        "--examples", action="store_true", help="also read the example traces bundled with tracehound"
    )
    inspect.add_argument("--format", choices=("text", "json"), default="text")
    inspect.add_argument(
        "--genai-only", action="store_true", help="skip traces without any GenAI step"
    )
    inspect.add_argument("--width", type=int, default=80, help="clip texts to this many characters")
    inspect.set_defaults(handler=cmd_inspect)
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
