"""`tracehound runs list | show | search | explain | delete`: the run history from the shell.

Each action calls the query layer (`tracehound.history`) and prints its dict: `--format json`
prints it exactly (one JSON document), text prints an aligned table or a short report. The
store is the one `tracehound serve` writes to: `--baselines`, else `$TRACEHOUND_BASELINES`, else
`$TRACEHOUND_REDIS_URL`, else the default SQLite file (a file that does not exist reads as an
empty history and is not created).

Errors (bad filter, unknown run, unusable store) raise `InputError`: one line, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from tracehound.files import InputError

__all__ = ["add_runs_parser", "cmd_runs", "open_history_store", "store_location"]

EXIT_OK = 0
_STORE_HELP = (
    "baseline store holding the run history: an SQLite file or a redis:// URL (default: "
    "$TRACEHOUND_BASELINES, else $TRACEHOUND_REDIS_URL, else "
    "$XDG_STATE_HOME/tracehound/baselines.sqlite3)"
)
_FILTERS = (
    "agent",
    "severity",
    "min_drift",
    "max_drift",
    "tool",
    "loop_kind",
    "since",
    "until",
    "verdict",
)


def store_location(given: str | None, environ: dict[str, str] | None = None) -> tuple[str, str]:
    """(location, where it came from) of the history store, as `tracehound serve` picks it."""
    from tracehound.baselines import ENV_BASELINES, ENV_REDIS_URL, default_store_path

    env = dict(os.environ if environ is None else environ)
    if given:
        return given, "--baselines"
    for name in (ENV_BASELINES, ENV_REDIS_URL):
        value = env.get(name, "").strip()
        if value:
            return value, f"${name}"
    return str(default_store_path(env)), "default"


@contextmanager
def open_history_store(location: str | None = None) -> Iterator[Any]:
    """The store at `location` (None: `store_location`'s choice), closed afterwards. A store
    file that does not exist yields an empty `MemoryStore` (nothing is created)."""
    from tracehound.baselines import (
        BaselineStoreError,
        MemoryStore,
        is_redis_url,
        open_store,
        shown_location,
    )

    chosen, source = store_location(location)
    if chosen not in ("memory", ":memory:") and not is_redis_url(chosen):
        path = Path(chosen).expanduser()
        if not path.exists():
            yield MemoryStore()
            return
        chosen = str(path)
    try:
        store = open_store(chosen)
    except BaselineStoreError as exc:
        raise InputError(f"baselines (from {source}) {shown_location(chosen)}: {exc}") from None
    try:
        yield store
    finally:
        store.close()


def _drift(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number within [0, 1]") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number within [0, 1]")
    return value


def _limit(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def add_runs_parser(sub: Any) -> None:
    """Register `tracehound runs …` on the main parser's subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--baselines", metavar="PATH", help=_STORE_HELP, default=argparse.SUPPRESS)
    common.add_argument("--format", choices=("text", "json"), default="text")
    filters = argparse.ArgumentParser(add_help=False)
    group = filters.add_argument_group("filters (all given must match)")
    group.add_argument("--agent", help="agent key or name; a glob (support_*, svc/*)")
    group.add_argument(
        "--severity",
        choices=("none", "warning", "alert", "critical"),
        help="drift severity at least this",
    )
    group.add_argument("--min-drift", type=_drift, metavar="SCORE", help="drift score >= SCORE")
    group.add_argument("--max-drift", type=_drift, metavar="SCORE", help="drift score <= SCORE")
    group.add_argument("--tool", help="runs that called this tool (a glob)")
    group.add_argument(
        "--loop-kind", metavar="KIND", help="runs with a loop of this kind (or 'any')"
    )
    group.add_argument(
        "--since", metavar="WHEN", help="ended at/after: ISO date/time or a time ago (7d, 24h)"
    )
    group.add_argument("--until", metavar="WHEN", help="ended before: ISO date/time or 7d, 24h")
    group.add_argument("--verdict", choices=("pass", "warn", "fail"))
    limited = argparse.ArgumentParser(add_help=False)
    limited.add_argument(
        "--limit", type=_limit, default=50, help="at most this many runs (default 50; 0: none)"
    )
    runs = sub.add_parser(
        "runs",
        help="list, search, show, explain and delete the evaluated runs in the run history",
        description="Query the run history that `tracehound serve`, the processor and "
        "`tracehound eval --baselines` keep in the baseline store. Exit code 2 for a bad "
        "filter, an unknown run or an unusable store.",
    )
    runs.add_argument("--baselines", metavar="PATH", help=_STORE_HELP)
    actions = runs.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser(
        "list", parents=[common, filters, limited], help="runs matching the filters, newest first"
    )
    search = actions.add_parser(
        "search",
        parents=[common, filters, limited],
        help="runs whose ids, agent, tools or findings contain KEYWORD",
    )
    search.add_argument("keyword", metavar="KEYWORD")
    for name, what in (
        ("show", "the full records of a trace's runs"),
        ("explain", "why a run drifted: driver, components, diverged-from runs, recommendation"),
    ):
        action = actions.add_parser(name, parents=[common], help=what, description=what)
        action.add_argument("run", metavar="TRACE[/RUN]", help="a trace id (or trace/run id)")
    findings = actions.add_parser(
        "findings",
        parents=[common],
        help="what went wrong lately: drifted runs, loops by tool, failed expectations",
        description="Recent findings of one agent (a glob) or of every agent: verdict counts, "
        "drifted runs, loops by tool, failed expectations and failure modes since WHEN.",
    )
    findings.add_argument("--agent", help="agent key or name; a glob (support_*, svc/*)")
    findings.add_argument(
        "--since", metavar="WHEN", default="7d", help="ISO date/time or a time ago (default 7d)"
    )
    findings.add_argument(
        "--limit", type=_limit, default=10, help="at most this many entries per list (default 10)"
    )
    delete = actions.add_parser(
        "delete",
        parents=[common, filters],
        help="delete runs by id and/or filter (at least one); prints what it removed",
        description="Delete runs named by id and/or matching the filters (one of them is "
        "required: nothing is deleted by accident). Each deleted run also leaves its agent's "
        "recent-runs ring; what it added to the baseline's sums stays (see docs/history.md).",
    )
    delete.add_argument("runs", nargs="*", metavar="TRACE[/RUN]")
    delete.add_argument(
        "--keep-baseline",
        action="store_true",
        help="leave the baselines' recent-runs rings as they are",
    )
    runs.set_defaults(handler=cmd_runs)


def cmd_runs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from tracehound.baselines import BaselineStoreError
    from tracehound.history import RunNotFoundError

    try:
        with open_history_store(getattr(args, "baselines", None)) as store:
            result = _ACTIONS[args.action](store, args)
    except (ValueError, RunNotFoundError) as exc:
        raise InputError(str(exc)) from None
    except BaselineStoreError as exc:
        raise InputError(str(exc)) from None
    if args.format == "json":
        out.write(json.dumps(result, ensure_ascii=False, indent=2) + "\n")
    else:
        _TEXT[args.action](result, out)
    return EXIT_OK


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name in _FILTERS}


def _list(store: Any, args: argparse.Namespace) -> dict[str, Any]:
    from tracehound.history import list_runs

    return list_runs(store, limit=args.limit, **_filters(args))


def _search(store: Any, args: argparse.Namespace) -> dict[str, Any]:
    from tracehound.history import search_runs

    return search_runs(store, args.keyword, limit=args.limit, **_filters(args))


def _show(store: Any, args: argparse.Namespace) -> dict[str, Any]:
    from tracehound.history import get_run

    return get_run(store, args.run)


def _explain(store: Any, args: argparse.Namespace) -> dict[str, Any]:
    from tracehound.history import explain_run

    return explain_run(store, args.run)


def _findings(store: Any, args: argparse.Namespace) -> dict[str, Any]:
    from tracehound.history import recent_findings

    return recent_findings(store, args.agent, since=args.since, limit=args.limit)


def _delete(store: Any, args: argparse.Namespace) -> dict[str, Any]:
    from tracehound.history import delete_runs

    return delete_runs(
        store, runs=args.runs, forget_baseline=not args.keep_baseline, **_filters(args)
    )


_ACTIONS = {
    "list": _list,
    "search": _search,
    "show": _show,
    "explain": _explain,
    "findings": _findings,
    "delete": _delete,
}


# --- text ------------------------------------------------------------------------------------


def _table(rows: list[dict[str, Any]], out: TextIO) -> None:
    headers = ("END", "TRACE/RUN", "AGENT", "VERDICT", "DRIFT", "DRIVER", "LOOPS", "TOOLS")
    lines = [
        (
            row["end"][:19].replace("T", " "),
            f"{row['trace_id']}/{row['run_id']}",
            row["agent"],
            row["verdict"],
            "-"
            if row["drift_score"] is None
            else f"{row['drift_score']:.2f} {row['drift_severity']}",
            row["primary_driver"] or "-",
            ",".join(row["loop_kinds"]) or "-",
            ",".join(f"{t}:{n}" for t, n in row["tools"].items()) or "-",
        )
        for row in rows
    ]
    widths = [max([len(h), *(len(line[i]) for line in lines)]) for i, h in enumerate(headers)]
    for line in (headers, *lines):
        out.write("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() + "\n")


def _list_text(result: dict[str, Any], out: TextIO) -> None:
    if not result["runs"]:
        out.write("no run matches\n")
        return
    _table(result["runs"], out)
    limit = result["limit"]
    full = limit is not None and result["count"] == limit
    more = " (the limit: --limit N shows more)" if full else ""
    out.write(f"{result['count']} run(s){more}\n")


def _show_text(result: dict[str, Any], out: TextIO) -> None:
    for record in result["runs"]:
        drift = record["drift"]
        score = "-" if drift["score"] is None else f"{drift['score']:.2f} ({drift['severity']})"
        out.write(f"run {record['trace_id']}/{record['run_id']}  {record['agent']}\n")
        out.write(f"  time      {record['start']} → {record['end']}\n")
        out.write(f"  verdict   {record['verdict']}\n")
        out.write(
            f"  drift     {score}, driver {drift['primary_driver'] or '-'}, baseline of "
            f"{drift['baseline_runs']} run(s){', learned' if drift['learned'] else ''}\n"
        )
        tools = ", ".join(f"{t} x{n}" for t, n in record["tool_calls"].items()) or "none"
        out.write(f"  tools     {tools} ({record['steps']} steps, {record['errors']} errors)\n")
        loops = record["loops"]
        if loops["kinds"]:
            out.write(
                f"  loops     {', '.join(loops['kinds'])} on {', '.join(loops['tools']) or '-'}\n"
            )
        if record["expectations"]["failed"]:
            out.write(f"  failed    {', '.join(record['expectations']['failed'])}\n")
        if record["evidence"]:
            shown = ", ".join(f"{k} {v:.2f}" for k, v in record["evidence"].items())
            out.write(f"  evidence  {shown}\n")


def _explain_text(result: dict[str, Any], out: TextIO) -> None:
    drift = result["drift"]
    run = f"{result['trace_id']}/{result['run_id']}"
    out.write(f"run {run}  {result['agent']}  ({result['end']})\n")
    if drift["score"] is None:
        out.write("  drift: not scored\n")
    else:
        out.write(
            f"  drift {drift['score']:.2f} ({drift['severity']}, confidence "
            f"{drift['confidence']}, baseline of {drift['baseline_runs']} run(s)); primary "
            f"driver: {result['primary_driver']}\n"
        )
    for component in result["components"]:
        out.write(f"  {component['name']:<10} {component['value']:.2f}")
        if component["name"] == "tool_mix":
            parts = []
            if component["tools_appeared"]:
                parts.append("appeared " + ", ".join(component["tools_appeared"]))
            if component["tools_disappeared"]:
                parts.append("disappeared " + ", ".join(component["tools_disappeared"]))
            for shift in component["tools_shifted"]:
                parts.append(
                    f"{shift['tool']} {shift['baseline_share']:.0%}→{shift['run_share']:.0%}"
                )
            out.write("  " + ("; ".join(parts) or "same mix"))
        elif component["name"] == "semantic":
            distance = component["distance"]
            out.write("  " + ("no text" if distance is None else f"distance {distance:.2f}"))
        else:
            moved = [
                f"{m['dimension']} {m['baseline_mean']:g}→{m['value']:g} ({m['z']:+.1f}σ)"
                for m in component["moved"]
            ]
            out.write("  " + (", ".join(moved) or "within one standard deviation"))
        out.write("\n")
    if result["diverged_from"]:
        out.write("  diverged most from:\n")
        for entry in result["diverged_from"]:
            known = "" if entry["in_history"] else "  (not in the history)"
            out.write(
                f"    {entry['trace_id']}/{entry['run_id']}  {entry['divergence']:.2f}{known}\n"
            )
    for sentence in result["recommendations"]:
        out.write(f"  → {sentence}\n")


def _findings_text(result: dict[str, Any], out: TextIO) -> None:
    verdicts = result["verdicts"]
    out.write(
        f"{result['agent'] or 'every agent'} since {result['since']}: {result['runs']} run(s), "
        f"{verdicts['pass']} pass, {verdicts['warn']} warn, {verdicts['fail']} fail\n"
    )
    if result["drifted"]:
        out.write("drifted:\n")
        _table(result["drifted"], out)
    for loop in result["loops"]:
        out.write(
            f"loop: {loop['tool'] or '(no tool)'} {', '.join(loop['kinds'])} in "
            f"{loop['runs']} run(s), last trace {loop['last_trace_id']}\n"
        )
    for key, what in (("expectations_failed", "expectation failed"), ("failure_modes", "failure")):
        for entry in result[key]:
            out.write(f"{what}: {entry['name']} in {entry['runs']} run(s)\n")


def _delete_text(result: dict[str, Any], out: TextIO) -> None:
    for entry in result["deleted"]:
        out.write(f"deleted {entry['trace_id']}/{entry['run_id']}  {entry['agent']}\n")
    out.write(
        f"{result['count']} run(s) deleted; {result['ring_entries_removed']} recent-run "
        "entr(y/ies) removed from baselines\n"
    )
    if result["count"]:
        out.write(f"note: {result['not_undone']}\n")


_TEXT = {
    "list": _list_text,
    "search": _list_text,
    "show": _show_text,
    "explain": _explain_text,
    "findings": _findings_text,
    "delete": _delete_text,
}
