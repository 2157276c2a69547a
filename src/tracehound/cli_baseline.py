"""Command line for drift baselines and golden traces.

- `tracehound baseline list | show AGENT | pin AGENT | unpin AGENT | reset AGENT | export [FILE] |
  import FILE [--merge]`, each with `--baselines PATH` (default: the store `serve` writes to,
  `$TRACEHOUND_BASELINES`, else `$TRACEHOUND_REDIS_URL`, else the user's state dir).
- `tracehound eval` options: `--baselines PATH` (the drift evaluator), `--no-update`,
  `--embedding-model DIR`, `--against GOLDEN` (the golden-trace comparison); `EvalExtras` carries
  them through `cmd_eval`, and `result_line` formats drift and golden results in its summary.

Errors (unknown agent, unusable store, mismatched embedder, bad import document) raise
`InputError`, which the entry point prints and turns into exit code 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from typing_extensions import TypedDict  # pydantic (the MCP schemas) needs it before 3.12

from tracehound import names
from tracehound.files import InputError
from tracehound.report import result_prefix

if TYPE_CHECKING:
    from tracehound.baselines import BaselineInfo, BaselineStore, ImportMode
    from tracehound.drift import Embedder
    from tracehound.engine import FinalizedTrace
    from tracehound.evaluators.base import EvaluationResult, Evaluator
    from tracehound.evaluators.drift import DriftEvaluator
    from tracehound.golden import AgentSummary, GoldenEvaluator, GoldenSet
    from tracehound.history import HistoryWriter
    from tracehound.report import TraceReport

__all__ = [
    "EvalExtras",
    "add_baseline_parser",
    "add_eval_arguments",
    "cmd_baseline",
    "result_line",
]

EXIT_OK, EXIT_USAGE = 0, 2
_STORE_HELP = (
    "baseline store: an SQLite file or a redis:// URL (default: $TRACEHOUND_BASELINES, else "
    "$TRACEHOUND_REDIS_URL, else $XDG_STATE_HOME/tracehound/baselines.sqlite3)"
)


# --- the `baseline` command ---------------------------------------------------------------------


def add_baseline_parser(sub: Any) -> None:
    """Register `tracehound baseline …` on the main parser's subcommands."""
    # --baselines before or after the action; the action's copy must not reset the other one
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--baselines", metavar="PATH", help=_STORE_HELP, default=argparse.SUPPRESS)
    baseline = sub.add_parser(
        "baseline",
        help="list, show, pin, reset, accept, export and import the per-agent drift baselines",
        description="Manage the per-agent drift baselines that `tracehound eval --baselines` "
        "scores runs against. Exit code 2 for an unknown agent or an unusable store.",
    )
    baseline.add_argument("--baselines", metavar="PATH", help=_STORE_HELP)
    actions = baseline.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", parents=[common], help="one line per baseline")
    listing.add_argument("--format", choices=("text", "json"), default="text")
    show = actions.add_parser(
        "show", parents=[common], help="one baseline: tools, complexity, recent runs"
    )
    show.add_argument("agent", metavar="AGENT", help="the agent key (see `baseline list`)")
    show.add_argument("--format", choices=("text", "json"), default="json")
    for name, what in (
        ("pin", "freeze a baseline: runs are scored against it, never added (regression gate)"),
        ("unpin", "let runs update a pinned baseline again"),
        ("reset", "delete a baseline (the next runs rebuild it); prints what it removed"),
        (
            "accept",
            "accept an agent's drift: its drifted runs (the open drift episode) become its "
            "baseline, keeping the pin",
        ),
    ):
        action = actions.add_parser(name, parents=[common], help=what, description=what)
        action.add_argument("agent", metavar="AGENT", help="the agent key (see `baseline list`)")
        action.add_argument("--format", choices=("text", "json"), default="text")
    export = actions.add_parser(
        "export", parents=[common], help="write every baseline as one JSON document"
    )
    export.add_argument("file", nargs="?", default="-", metavar="FILE", help="default: stdout")
    imports = actions.add_parser(
        "import",
        parents=[common],
        help="read baselines from an export document",
        description="Read an export document (FILE, or '-' for stdin). By default each baseline "
        "replaces the stored one; --merge adds its runs to the stored one (the stored pin wins), "
        "as partial baselines of several replicas combine. Nothing is written if any baseline of "
        "the document is invalid or of another embedder.",
    )
    imports.add_argument("file", metavar="FILE")
    imports.add_argument("--merge", action="store_true", help="merge instead of replacing")
    baseline.set_defaults(handler=cmd_baseline)


def cmd_baseline(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from tracehound.baselines import BaselineStoreError
    from tracehound.cli_runs import store_location
    from tracehound.drift import BaselineMismatchError

    handler = _ACTIONS[args.action]
    # no --baselines: the store `serve` writes to, as `runs` and `mcp` choose it
    args.baselines, _ = store_location(args.baselines)
    try:
        return handler(args, out, err)
    except BaselineMismatchError as exc:
        raise InputError(f"mismatched embedder: {exc}") from None
    except BaselineStoreError as exc:
        raise InputError(str(exc)) from None


@contextmanager
def _store(
    args: argparse.Namespace, *, create: bool = False
) -> Iterator[tuple[BaselineStore, str]]:
    """The store of `--baselines` and its location (see `baseline_store`)."""
    with baseline_store(args.baselines, create=create) as opened:
        yield opened


@contextmanager
def baseline_store(
    location: str | None, *, create: bool = False
) -> Iterator[tuple[BaselineStore, str]]:
    """The store at `location` (None: the default file) and its location for messages; a store
    file that does not exist is not created unless `create` (it reads as an empty store). A store
    failure inside the block (`BaselineStoreError`) becomes an `InputError` with its message."""
    from tracehound.baselines import (
        BaselineStoreError,
        MemoryStore,
        default_store_path,
        is_redis_url,
        open_store,
    )

    if location not in ("memory", ":memory:") and not is_redis_url(location):
        path = Path(location).expanduser() if location else default_store_path()
        if not create and not path.exists():
            yield MemoryStore(), f"{path} (does not exist)"
            return
        location = str(path)
    try:
        store = open_store(location)
    except BaselineStoreError as exc:
        raise InputError(str(exc)) from None
    try:
        yield store, store.location
    except BaselineStoreError as exc:
        raise InputError(str(exc)) from None
    finally:
        store.close()


def _unknown(key: str, where: str, store: BaselineStore) -> InputError:
    keys = [info.key for info in store.list()]
    close = [k for k in keys if key.lower() in k.lower()][:3]
    close += [k for k in difflib.get_close_matches(key, keys, n=3, cutoff=0.5) if k not in close]
    hint = f"; did you mean {', '.join(repr(k) for k in close)}?" if close else ""
    known = (
        f" ({len(keys)} baseline(s): see `tracehound baseline list`)" if keys else " (it is empty)"
    )
    return InputError(f"no baseline for agent {key!r} in {where}{known}{hint}")


def _time_ns(ns: int) -> str:
    if ns <= 0:
        return "-"
    return _time(ns / 1e9)


def _time(seconds: float) -> str:
    if seconds <= 0:
        return "-"
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


# --- the documents: one function per query, shared by the CLI (`--format json`) and MCP ---------


class BaselineEntry(TypedDict):
    """One baseline of `list_baselines`."""

    agent: str
    runs: int
    drifting_runs: int
    """Runs in the agent's open drift episode (0: not drifting)."""
    pinned: bool
    embedder: str
    dim: int
    first_ns: int
    last_ns: int
    updated_at: float
    """Seconds since the epoch of the last write in this store."""


class BaselineList(TypedDict):
    store: str
    baselines: list[BaselineEntry]


class RecentRun(TypedDict):
    trace_id: str
    run_id: str
    end_ns: int
    sample: str


class BaselineDetail(TypedDict):
    """One baseline of `get_baseline`: `Baseline.summary()` with its agent and store."""

    agent: str
    store: str
    runs: int
    weight: float
    pinned: bool
    embedder: str
    dim: int
    first_ns: int
    last_ns: int
    tools: dict[str, float]
    """Share of the tool calls per tool, largest first."""
    complexity_mean: dict[str, float]
    complexity_std: dict[str, float]
    recent_runs: list[RecentRun]


class PinChange(TypedDict):
    """What `set_baseline_pin` did."""

    store: str
    agent: str
    pinned: bool
    """The pin after the call."""
    changed: bool
    """False when it was pinned (or unpinned) already."""
    runs: int


class BaselineReset(TypedDict):
    """What `reset_baseline` removed."""

    store: str
    agent: str
    runs: int
    pinned: bool
    embedder: str
    dim: int
    first_ns: int
    last_ns: int
    drifting_runs: int
    """Runs of the open drift episode removed with it."""


class DriftAcceptance(TypedDict):
    """What `accept_baseline` did."""

    store: str
    agent: str
    accepted: bool
    """False when the agent was not drifting: nothing changed."""
    runs: int
    """Runs in the agent's baseline after the call."""
    replaced_runs: int
    """Runs of the baseline that the episode replaced (0 when not accepted)."""
    drifting_since_ns: int
    """Start of the accepted episode (0 when not accepted)."""
    pinned: bool


def _info_json(info: BaselineInfo, drifting_runs: int) -> BaselineEntry:
    return {
        "agent": info.key,
        "runs": info.runs,
        "drifting_runs": drifting_runs,
        "pinned": info.pinned,
        "embedder": info.embedder,
        "dim": info.dim,
        "first_ns": info.first_ns,
        "last_ns": info.last_ns,
        "updated_at": info.updated_at,
    }


def list_baselines(location: str | None) -> BaselineList:
    """Every baseline of the store; an agent's drift episode (`AGENT#drifting`) is its
    `drifting_runs` count, not an entry of its own."""
    from tracehound.names import DRIFT_EPISODE_SUFFIX

    with baseline_store(location) as (store, where):
        listed = store.list()
    keys = {i.key for i in listed}
    drifting = {
        i.key.removesuffix(DRIFT_EPISODE_SUFFIX): i.runs
        for i in listed
        if i.key.endswith(DRIFT_EPISODE_SUFFIX) and i.key.removesuffix(DRIFT_EPISODE_SUFFIX) in keys
    }
    shown_as_counts = {key + DRIFT_EPISODE_SUFFIX for key in drifting}
    entries = [
        _info_json(i, drifting.get(i.key, 0)) for i in listed if i.key not in shown_as_counts
    ]
    return {"store": where, "baselines": entries}


def get_baseline(location: str | None, agent: str) -> BaselineDetail:
    """One agent's baseline: tool shares, complexity means and σ, recent runs."""
    with baseline_store(location) as (store, where):
        baseline = store.get(_key(agent))
        if baseline is None:
            raise _unknown(agent, where, store)
    return cast("BaselineDetail", {"agent": agent, "store": where, **baseline.summary()})


def set_baseline_pin(location: str | None, agent: str, *, pinned: bool) -> PinChange:
    """Pin (freeze: runs are scored against it, never added) or unpin an agent's baseline."""
    key = _key(agent)
    with baseline_store(location) as (store, where):
        try:
            changed = store.pin(key) if pinned else store.unpin(key)
        except KeyError:
            raise _unknown(key, where, store) from None
        baseline = store.get(key)
    runs = baseline.runs if baseline is not None else 0
    return {"store": where, "agent": key, "pinned": pinned, "changed": changed, "runs": runs}


def reset_baseline(location: str | None, agent: str) -> BaselineReset:
    """Delete an agent's baseline and its drift episode (the next runs rebuild it)."""
    from tracehound.names import DRIFT_EPISODE_SUFFIX

    key = _key(agent)
    with baseline_store(location) as (store, where):
        baseline = store.get(key)
        if baseline is None or not store.reset(key):
            raise _unknown(key, where, store)
        episode = store.get(key + DRIFT_EPISODE_SUFFIX)
        store.reset(key + DRIFT_EPISODE_SUFFIX)
    return {
        "store": where,
        "agent": key,
        "runs": baseline.runs,
        "pinned": baseline.pinned,
        "embedder": baseline.embedder,
        "dim": baseline.dim,
        "first_ns": baseline.first_ns,
        "last_ns": baseline.last_ns,
        "drifting_runs": episode.runs if episode is not None else 0,
    }


def accept_baseline(location: str | None, agent: str) -> DriftAcceptance:
    """Accept an agent's drift: the runs of its open drift episode become its baseline (the pin
    kept). Not drifting: nothing changes (`accepted` false)."""
    from tracehound.names import DRIFT_EPISODE_SUFFIX

    key = _key(agent)
    with baseline_store(location) as (store, where):
        baseline = store.get(key)
        if baseline is None:
            raise _unknown(key, where, store)
        episode = store.get(key + DRIFT_EPISODE_SUFFIX)
        if episode is None:
            return {
                "store": where,
                "agent": key,
                "accepted": False,
                "runs": baseline.runs,
                "replaced_runs": 0,
                "drifting_since_ns": 0,
                "pinned": baseline.pinned,
            }
        episode.pinned = baseline.pinned
        store.put(key, episode)
        store.reset(key + DRIFT_EPISODE_SUFFIX)
    return {
        "store": where,
        "agent": key,
        "accepted": True,
        "runs": episode.runs,
        "replaced_runs": baseline.runs,
        "drifting_since_ns": episode.first_ns,
        "pinned": baseline.pinned,
    }


# --- the actions: the documents above, as JSON or as text ----------------------------------------


def _write_json(out: TextIO, document: Mapping[str, Any], *, indent: int | None = None) -> int:
    out.write(json.dumps(document, indent=indent) + "\n")
    return EXIT_OK


def _list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    listing = list_baselines(args.baselines)
    where, entries = listing["store"], listing["baselines"]
    if args.format == "json":
        return _write_json(out, listing)
    if not entries:
        out.write(f"no baselines in {where}\n")
        return EXIT_OK
    header = (
        "AGENT",
        "RUNS",
        "DRIFTING",
        "PINNED",
        "EMBEDDER",
        "DIM",
        "FIRST RUN",
        "LAST RUN",
        "UPDATED (UTC)",
    )
    rows = [
        (
            e["agent"],
            str(e["runs"]),
            str(e["drifting_runs"]) if e["drifting_runs"] else "-",
            "yes" if e["pinned"] else "no",
            e["embedder"],
            str(e["dim"]),
            _time_ns(e["first_ns"]),
            _time_ns(e["last_ns"]),
            _time(e["updated_at"]),
        )
        for e in entries
    ]
    widths = [max(len(r[c]) for r in (header, *rows)) for c in range(len(header))]
    numeric = {1, 2, 5}
    for row in (header, *rows):
        cells = [
            cell.rjust(widths[c]) if c in numeric else cell.ljust(widths[c])
            for c, cell in enumerate(row)
        ]
        out.write("  ".join(cells).rstrip() + "\n")
    out.write(f"{len(entries)} baseline(s) in {where}\n")
    return EXIT_OK


def _show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    summary = get_baseline(args.baselines, args.agent)
    if args.format == "json":
        return _write_json(out, summary, indent=2)
    out.write(f"agent       {args.agent}\nstore       {summary['store']}\n")
    out.write(
        f"runs        {summary['runs']} (weight {summary['weight']:.6g})"
        f"{', pinned' if summary['pinned'] else ''}\n"
    )
    out.write(f"embedder    {summary['embedder']}, {summary['dim']}-d\n")
    out.write(
        f"runs from   {_time_ns(summary['first_ns'])} to {_time_ns(summary['last_ns'])} UTC\n"
    )
    tools = ", ".join(f"{k} {v:.3f}" for k, v in summary["tools"].items()) or "none"
    out.write(f"tool shares {tools}\n")
    out.write("complexity  dimension            mean        std\n")
    for dim, mean in summary["complexity_mean"].items():
        std = summary["complexity_std"].get(dim, 0.0)
        out.write(f"            {dim:<16} {mean:>10.4g} {std:>10.4g}\n")
    recent = summary["recent_runs"]
    out.write(f"recent runs {len(recent)}\n")
    for run in recent:
        out.write(f"            {run['trace_id']}  {_time_ns(run['end_ns'])}  {run['sample']}\n")
    return EXIT_OK


def _key(agent: str) -> str:
    if not agent or len(agent) > 1024:
        raise InputError("AGENT must be a non-empty baseline key of at most 1024 characters")
    return agent


def _pin(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return _set_pin(args, out, pinned=True)


def _unpin(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return _set_pin(args, out, pinned=False)


def _set_pin(args: argparse.Namespace, out: TextIO, *, pinned: bool) -> int:
    change = set_baseline_pin(args.baselines, args.agent, pinned=pinned)
    if args.format == "json":
        return _write_json(out, change)
    key, runs, where = change["agent"], change["runs"], change["store"]
    verb = "pinned" if pinned else "unpinned"
    if change["changed"]:
        out.write(f"{verb} {key} ({runs} run(s)) in {where}\n")
    else:
        out.write(f"{key} was already {verb} ({runs} run(s)) in {where}\n")
    return EXIT_OK


def _accept(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    done = accept_baseline(args.baselines, args.agent)
    if args.format == "json":
        return _write_json(out, done)
    key, where = done["agent"], done["store"]
    if not done["accepted"]:
        out.write(f"{key} is not drifting in {where}: nothing to accept\n")
        return EXIT_OK
    out.write(
        f"accepted the drift of {key} in {where}: its {done['runs']} drifted run(s) since "
        f"{_time_ns(done['drifting_since_ns'])} UTC replace the baseline of "
        f"{done['replaced_runs']} run(s){' (still pinned)' if done['pinned'] else ''}\n"
    )
    return EXIT_OK


def _reset(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    removed = reset_baseline(args.baselines, args.agent)
    if args.format == "json":
        return _write_json(out, removed)
    out.write(
        f"removed baseline {removed['agent']} from {removed['store']}: {removed['runs']} run(s), "
        f"{'pinned, ' if removed['pinned'] else ''}embedder {removed['embedder']} "
        f"{removed['dim']}-d, runs from {_time_ns(removed['first_ns'])} to "
        f"{_time_ns(removed['last_ns'])} UTC\n"
    )
    return EXIT_OK


def _export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    with _store(args) as (store, where):
        document = store.export_baselines()
    text = json.dumps(document, indent=1) + "\n"
    count = len(document.get("baselines", {}))
    if args.file == "-":
        out.write(text)
    else:
        try:
            Path(args.file).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{args.file}: cannot write ({exc.strerror or exc})") from None
        out.write(f"exported {count} baseline(s) from {where} to {args.file}\n")
    return EXIT_OK


def _import(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from tracehound.drift import BaselineMismatchError

    name = "<stdin>" if args.file == "-" else args.file
    try:
        raw = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
        document = json.loads(raw)
    except OSError as exc:
        raise InputError(f"{name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}: not JSON ({exc.msg}, line {exc.lineno})") from None
    mode: ImportMode = "merge" if args.merge else "replace"
    with _store(args, create=True) as (store, where):
        try:
            keys = store.import_baselines(document, mode=mode)
        except BaselineMismatchError as exc:
            raise InputError(f"{name}: mismatched embedder, nothing imported: {exc}") from None
        except ValueError as exc:
            raise InputError(f"{name}: {exc}; nothing imported") from None
    listed = ", ".join(keys) if keys else "-"
    out.write(f"imported {len(keys)} baseline(s) into {where} ({mode}): {listed}\n")
    return EXIT_OK


_ACTIONS = {
    "list": _list,
    "show": _show,
    "pin": _pin,
    "unpin": _unpin,
    "reset": _reset,
    "accept": _accept,
    "export": _export,
    "import": _import,
}


# --- eval: --baselines, --no-update, --against ----------------------------------------------------


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The drift and golden-trace options of `tracehound eval`."""
    group = parser.add_argument_group("drift and golden traces")
    group.add_argument(
        "--baselines",
        metavar="PATH",
        help="add the drift evaluator: score each run against its agent's baseline in this SQLite "
        "file (created if missing; 'memory' for this input only) and add the run to it",
    )
    group.add_argument(
        "--no-update",
        action="store_true",
        help="with --baselines: score only, leave the baselines unchanged (a CI gate)",
    )
    group.add_argument(
        "--history",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --baselines: record each evaluated run in the store's run history "
        "(`tracehound runs`); default on ($TRACEHOUND_HISTORY); never with --no-update",
    )
    group.add_argument(
        "--history-content",
        action="store_true",
        default=None,
        help="also keep message content in the run records ($TRACEHOUND_HISTORY_CONTENT)",
    )
    group.add_argument(
        "--embedding-model",
        metavar="DIR",
        help="with --baselines: a local sentence-transformers model directory for the semantic "
        "component (needs tracehound[embeddings]); default: WordLlama with tracehound[semantic] "
        "installed, else the built-in hashing embedder (TRACEHOUND_EMBEDDER=hashing keeps it)",
    )
    group.add_argument(
        "--against",
        action="append",
        metavar="GOLDEN",
        help="compare each agent's path with the golden traces (OTLP files or folders) of the "
        "same agent: unchanged / drifted / regressed; repeatable",
    )


_DRIFT_RULE = re.compile(r"^\s*(drift|drift_severity|tracehound\.drift\.[\w.]+)\s*[<>=!]", re.I)
_GOLDEN_RULE = re.compile(r"^\s*(regressed|drifted)\s*$", re.I)


class EvalExtras:
    """What `--baselines` and `--against` add to one `tracehound eval`.

    Constructed before the input is read (validates the options, reads the golden traces);
    `evaluators()` opens the store for the engine run and closes it after; `write_report` and
    `verdict` run after the traces are reported.
    """

    def __init__(self, args: argparse.Namespace, err: TextIO | None = None) -> None:
        self.err = err or sys.stderr
        self.baselines: str | None = getattr(args, "baselines", None)
        self.update = not getattr(args, "no_update", False)
        self.format: str = getattr(args, "format", "text")
        rules: list[str] = list(getattr(args, "fail_on", []) or [])
        against: list[str] = list(getattr(args, "against", None) or [])
        model: str | None = getattr(args, "embedding_model", None)
        if self.baselines is None:
            if getattr(args, "no_update", False) or model:
                option = "--no-update" if getattr(args, "no_update", False) else "--embedding-model"
                raise InputError(f"{option} needs --baselines PATH")
            drift_rules = [r for r in rules if _DRIFT_RULE.match(r)]
            if drift_rules:
                raise InputError(
                    f"--fail-on {drift_rules[0]} needs --baselines PATH (the drift evaluator)"
                )
        if not against:
            golden_rules = [r for r in rules if _GOLDEN_RULE.match(r)]
            if golden_rules:
                raise InputError(
                    f"--fail-on {golden_rules[0].strip()} needs --against GOLDEN "
                    "(golden traces to compare with)"
                )
        if (
            self.baselines is not None
            and not self.update
            and self.baselines not in ("memory", ":memory:")
            and "://" not in self.baselines  # a store URL (Redis): checked when opened
            and not Path(self.baselines).expanduser().exists()
        ):
            raise InputError(
                f"--baselines {self.baselines}: no such store (with --no-update there is nothing "
                "to score against: build the baselines first, without --no-update)"
            )
        from tracehound.config import ConfigError, history_from_env

        try:
            history = history_from_env()
        except ConfigError as exc:
            raise InputError(str(exc)) from None
        enabled = getattr(args, "history", None)
        content = getattr(args, "history_content", None)
        self.history = replace(
            history,
            enabled=(history.enabled if enabled is None else enabled) and self.update,
            content=history.content if content is None else content,
        )
        self.history_writer: HistoryWriter | None = None
        self.embedder: Embedder | None = _embedder(model) if self.baselines is not None else None
        self.drift: DriftEvaluator | None = None
        self.golden: GoldenSet | None = load_golden(against, self.err) if against else None
        self.golden_evaluator: GoldenEvaluator | None = None
        if self.golden is not None:
            from tracehound.golden import GoldenEvaluator

            self.golden_evaluator = GoldenEvaluator(self.golden)

    @contextmanager
    def evaluators(self) -> Iterator[list[Evaluator]]:
        """The extra evaluators, with the baseline store open for the duration."""
        out: list[Evaluator] = []
        store: BaselineStore | None = None
        if self.baselines is not None:
            from tracehound.baselines import BaselineStoreError, open_store
            from tracehound.evaluators.drift import DriftEvaluator, DriftEvaluatorConfig

            try:
                store = open_store(self.baselines)
            except BaselineStoreError as exc:
                raise InputError(str(exc)) from None
            self.drift = DriftEvaluator(
                store, embedder=self.embedder, config=DriftEvaluatorConfig(update=self.update)
            )
            out.append(self.drift)
            if self.history.enabled:
                from tracehound.history import HistoryWriter, history_store_of

                kept = history_store_of([self.drift])
                self.history_writer = HistoryWriter(
                    lambda: kept, retention=self.history.retention, content=self.history.content
                )
        if self.golden_evaluator is not None:
            out.append(self.golden_evaluator)
        try:
            yield out
        finally:
            if store is not None:
                store.close()

    def record_history(self, traces: Sequence[FinalizedTrace]) -> None:
        """Write the traces' runs to the run history (while `evaluators()` holds the store)."""
        writer = self.history_writer
        if writer is None:
            return
        for trace in traces:
            writer.write(trace)
        if writer.errors:
            print(
                f"warning: run history of {self.baselines}: {writer.errors} trace(s) not "
                "recorded (the store failed; see the log)",
                file=self.err,
            )

    def summaries(self) -> list[AgentSummary]:
        from tracehound.golden import summarize

        if self.golden is None or self.golden_evaluator is None:
            return []
        return summarize(self.golden_evaluator.outcomes, self.golden)

    def write_report(self, reports: Sequence[TraceReport], out: TextIO, width: int) -> None:
        """The per-agent golden comparison, after the traces (text block or one JSON line)."""
        if self.golden is None:
            return
        summaries = self.summaries()
        against = list(self.golden.sources)
        if self.format == "json":
            record = {"golden": {"against": against, "agents": [s.to_dict() for s in summaries]}}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            return
        counts = {
            s: sum(1 for a in summaries if a.status == s)
            for s in (*names.GOLDEN_VERDICTS, "no_golden", "not_seen")
        }
        listed = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in counts.items() if n)
        out.write(
            f"golden comparison against {', '.join(against)}: {len(summaries)} agent(s): "
            f"{listed or 'none'}\n"
        )
        key_width = max((len(s.key) for s in summaries), default=5)
        for summary in summaries:
            out.write(
                f"  {summary.status.replace('_', ' '):<9}  {summary.key:<{key_width}}  "
                f"{_golden_detail(summary, width)}\n"
            )

    def verdict(self, reports: Sequence[TraceReport], err: TextIO, code: int) -> int:
        """Exit 2 when drift could not be evaluated (mismatched embedder, store failure); warn
        when a score-only run (`--no-update`) met agents without baseline (nothing gated them)."""
        if not self.update:
            unscored = sorted(
                {
                    str(r.attributes.get(names.ATTR_DRIFT_AGENT))
                    for report in reports
                    for r in report.trace_results
                    if r.name == names.EVAL_DRIFT and r.score_label == "initializing"
                }
            )
            if unscored:
                print(
                    f"warning: no baseline for {len(unscored)} agent(s), their runs were not "
                    f"scored: {', '.join(unscored)}",
                    file=err,
                )
        failures = [
            r
            for report in reports
            for r in report.trace_results
            if r.name == names.EVAL_DRIFT
            and r.error_type in ("BaselineMismatchError", "BaselineStoreError")
        ]
        if not failures:
            return code
        first = failures[0]
        hint = (
            " (the baselines were built with another embedder: use the same --embedding-model, "
            "or `tracehound baseline reset AGENT` to rebuild)"
            if first.error_type == "BaselineMismatchError"
            else ""
        )
        print(
            f"tracehound: error: {len(failures)} run(s) not drift-evaluated: "
            f"{first.explanation}{hint}",
            file=err,
        )
        return EXIT_USAGE


def _embedder(model: str | None) -> Embedder:
    from tracehound.drift import SentenceTransformerEmbedder, default_embedder

    if model is None:
        try:
            return default_embedder()
        except (ImportError, ValueError, OSError) as exc:
            raise InputError(f"drift embedder: {exc}") from None
    try:
        return SentenceTransformerEmbedder(model)
    except (ImportError, ValueError, OSError) as exc:
        raise InputError(f"--embedding-model {model}: {exc}") from None


def load_golden(paths: Sequence[str], err: TextIO) -> GoldenSet:
    """The golden runs of OTLP files or folders (`InputError` when there is none)."""
    from tracehound.cli import OFFLINE_CONFIG, imported_spans, run_engine
    from tracehound.engine import Engine
    from tracehound.files import Telemetry, read_paths
    from tracehound.golden import GoldenSet, PathCollector

    telemetry = Telemetry()
    for path in paths:
        if not Path(path).exists():
            raise InputError(f"--against {path}: no such file or folder")
        telemetry.extend(read_paths([path]))
    for problem in telemetry.problems:
        print(f"warning: golden traces: {problem}", file=err)
    imported_spans(telemetry)
    collector = PathCollector()
    run_engine(telemetry, Engine([collector], config=OFFLINE_CONFIG), err)
    if not collector.paths:
        raise InputError(f"--against {', '.join(paths)}: no agent run in the golden traces")
    return GoldenSet(collector.paths, sources=paths)


def _golden_detail(summary: AgentSummary, width: int) -> str:
    runs = f"{summary.runs} run(s), {summary.golden_runs} golden"
    if summary.status == "not_seen":
        return f"{runs} (no run of this agent in the input)"
    if summary.status == "no_golden":
        return f"{runs} (no golden run of this agent)"
    verdicts = ", ".join(f"{n} {v}" for v, n in summary.verdicts.items())
    worst = summary.worst
    why = "; ".join(worst.reasons()) if worst is not None else ""
    trace = f"; worst: trace {worst.run.trace_id}" if worst is not None and why else ""
    return _clip(f"{runs}: {verdicts}{' — ' + why if why else ''}{trace}", max(width, 40))


def _clip(text: str | None, width: int) -> str:
    if not text:
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 1)] + "…"


# --- summary lines ------------------------------------------------------------------------------


def result_line(result: EvaluationResult, width: int) -> str | None:
    """The `eval` summary line of a drift or golden result (None: print it generically)."""
    if result.name == names.EVAL_DRIFT:
        body = _drift_text(result, width)
    elif result.name == names.EVAL_GOLDEN:
        body = _golden_text(result, width)
    else:
        return None
    return f"{result_prefix(result)}{body}\n"


def _drift_text(result: EvaluationResult, width: int) -> str:
    a = result.attributes
    agent = a.get(names.ATTR_DRIFT_AGENT, "?")
    if result.error_type:
        return f"{agent}: not evaluated ({result.error_type}) — {_clip(result.explanation, width)}"
    runs = a.get(names.ATTR_DRIFT_BASELINE_RUNS, 0)
    state = []
    if a.get(names.ATTR_DRIFT_BASELINE_PINNED):
        state.append("pinned")
    state.append("baseline updated" if a.get(names.ATTR_DRIFT_BASELINE_UPDATED) else "not added")
    drifting = a.get(names.ATTR_DRIFT_DRIFTING_RUNS)
    if isinstance(drifting, int) and drifting > 0:
        state.append(f"drifting since {a.get(names.ATTR_DRIFT_DRIFTING_SINCE)} ({drifting} run(s))")
    score = a.get(names.ATTR_DRIFT_SCORE)
    if not isinstance(score, (int, float)):
        return f"{agent}: initializing (no baseline yet) · {', '.join(state)}"
    head = (
        f"{agent}: drift {score:.2f} {a.get(names.ATTR_DRIFT_SEVERITY)} · confidence "
        f"{a.get(names.ATTR_DRIFT_CONFIDENCE)} ({runs} run(s)) · driver "
        f"{a.get(names.ATTR_DRIFT_PRIMARY_DRIVER)} · {', '.join(state)}"
    )
    explanation = result.explanation or ""
    marker = explanation.find("primary driver:")
    detail = explanation[marker:] if marker >= 0 else explanation
    if marker >= 0:  # the driver is in the head already: keep what follows it
        detail = detail.split(".", 1)[1].strip() if "." in detail else ""
    return f"{head}{' — ' + _clip(detail, width) if detail else ''}"


def _golden_text(result: EvaluationResult, width: int) -> str:
    agent = result.attributes.get(names.ATTR_GOLDEN_AGENT, "?")
    label = result.score_label or result.error_type or "?"
    golden = result.attributes.get(names.ATTR_GOLDEN_TRACE_ID)
    why = result.explanation or ""
    if golden and why.startswith(f"{label} against golden trace {golden}: "):
        why = why.split(": ", 1)[1]
    return f"{agent}: {label}{f' (golden {golden})' if golden else ''} — {_clip(why, width)}"
