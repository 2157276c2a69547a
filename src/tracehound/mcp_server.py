"""`tracehound mcp`: the run history and the drift baselines as MCP tools, over stdio.

A coding agent (Claude Code, Cursor, VS Code, Claude Desktop …) starts `tracehound mcp` and asks
"which runs of support_agent drifted this week, and why?" through tools that mirror the CLI:
each tool calls the function behind the matching `tracehound runs …` or `tracehound baseline …`
command and returns its JSON document as structured content (with an output schema). A bad
argument, an unknown agent or run, or an unusable store comes back as a tool error with the
CLI's one-line message; the server keeps running.

Needs `tracehound[mcp]` (the `mcp` SDK); `tracehound.cli_mcp` checks for it before importing
this module. The store is opened for each call, as the CLI does, so the server sees what
`tracehound eval` and the sidecar write meanwhile and holds no lock between calls. Sync tools
run on the SDK's worker threads, one store connection per call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import Field, ValidationError

from tracehound import __version__, history, names
from tracehound.baselines import BaselineStoreError
from tracehound.cli_baseline import (
    BaselineDetail,
    BaselineList,
    BaselineReset,
    DriftAcceptance,
    PinChange,
    accept_baseline,
    get_baseline,
    list_baselines,
    reset_baseline,
    set_baseline_pin,
)
from tracehound.cli_runs import open_history_store, store_location
from tracehound.files import InputError

__all__ = ["SERVER_NAME", "build_server", "serve"]

SERVER_NAME = "tracehound"
_INSTRUCTIONS = (
    "tracehound evaluates AI-agent traces (evidence use, loops, drift against a per-agent "
    "baseline). These tools read its store: the evaluated runs (list, search, explain, delete) "
    "and the per-agent drift baselines (list, show, pin, unpin, reset, accept). Times are "
    "nanoseconds since the Unix epoch (UTC); agent keys are as `list_baselines` shows them."
)

MAX_LIMIT = 1000
"""The most runs one listing returns: a reply must fit a model's context."""

_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_PIN = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_DESTROY = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)

Agent = Annotated[
    str,
    Field(
        description="The agent key, as `list_baselines` shows it, e.g. 'service/support_agent'",
        min_length=1,
        max_length=1024,
    ),
]

# The run filters, as `tracehound runs list` takes them; the history layer checks the values
# (its one-line ValueError comes back as the tool error), the schema only advertises them.
AgentGlob = Annotated[
    str | None,
    Field(
        description="Agent filter, a glob (case-sensitive) on the agent key 'service/agent' "
        "or on the bare agent name, e.g. 'support_agent' or 'support-service/*'"
    ),
]
Severity = Annotated[
    str | None,
    Field(
        description="Minimum drift severity: runs scored at this level or worse; unscored runs "
        "never match",
        json_schema_extra={"enum": [*names.DRIFT_SEVERITIES, None]},
    ),
]
MinDrift = Annotated[
    float | None, Field(description="Runs with a drift score of at least this (0 to 1)")
]
MaxDrift = Annotated[
    float | None, Field(description="Runs with a drift score of at most this (0 to 1)")
]
ToolGlob = Annotated[
    str | None, Field(description="Runs that called this tool, a glob, e.g. 'get_order*'")
]
LoopKind = Annotated[
    str | None,
    Field(
        description="Runs with a loop of this kind, or 'any' for any loop",
        json_schema_extra={"enum": [*names.LOOP_KINDS, "any", None]},
    ),
]
Since = Annotated[
    str | None,
    Field(
        description="Runs that ended at or after this: an ISO date or date-time (UTC unless it "
        "says), e.g. '2026-01-31', or a time ago, e.g. '7d', '24h', '30m', '2w'"
    ),
]
Until = Annotated[
    str | None,
    Field(description="Runs that ended before this (the same forms as `since`)"),
]
Verdict = Annotated[
    str | None,
    Field(
        description="Runs with this overall verdict",
        json_schema_extra={"enum": [*history.VERDICTS, None]},
    ),
]
Limit = Annotated[
    int,
    Field(description="At most this many runs, newest first", ge=1, le=MAX_LIMIT),
]
TraceId = Annotated[
    str,
    Field(
        description="The trace id (32 hex digits) of a recorded run, as the listings give it; "
        "'TRACE/RUN' names one run of it",
        min_length=1,
        max_length=256,
    ),
]
RunId = Annotated[
    str | None,
    Field(
        description="One run of the trace (its run id); default: every run of the trace "
        "(explain_run: the run with the highest drift score)",
        max_length=256,
    ),
]

T = TypeVar("T")


def _answer(query: Callable[[], T]) -> T:
    """Run one query; its one-line error (unknown agent or run, bad filter value, unusable
    store) becomes a tool error, which the client shows to the model as the call's result."""
    try:
        return query()
    except (InputError, ValueError, LookupError, BaselineStoreError) as exc:
        raise ToolError(str(exc)) from None


def _on_history(location: str | None, query: Callable[[Any], T]) -> T:
    """`query` over the store's run history, opened for the call only as `tracehound runs`
    opens it."""

    def run() -> T:
        with open_history_store(location) as store:
            return query(store)

    return _answer(run)


class _Server(MCPServer[Any]):
    """The SDK's server, with arguments that fail a tool's input schema reported on one line
    (`agent: String should have at least 1 character`), as the CLI reports a bad option."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
                for error in cause.errors()
            )
            message = f"Error executing tool {name}: invalid arguments: {problems}"
            raise ToolError(message) from cause


def build_server(location: str | None) -> MCPServer[Any]:
    """The MCP server over the store at `location` (`--baselines`; None: the store
    `tracehound serve` would use, see `tracehound.cli_runs.store_location`), its tools
    registered."""
    # one store for both kinds of tools: the one the run history is written to
    resolved, _ = store_location(location)
    server = _Server(
        SERVER_NAME,
        title="tracehound",
        description="Run history and drift baselines of tracehound's AI-agent trace evaluation",
        instructions=_INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )

    # --- runs -----------------------------------------------------------------------------------

    @server.tool(name="list_runs", annotations=_READ)
    def list_runs_tool(
        *,
        agent: AgentGlob = None,
        severity: Severity = None,
        min_drift: MinDrift = None,
        max_drift: MaxDrift = None,
        tool: ToolGlob = None,
        loop_kind: LoopKind = None,
        since: Since = None,
        until: Until = None,
        verdict: Verdict = None,
        limit: Limit = 50,
    ) -> dict[str, Any]:
        """List evaluated runs matching every filter given, newest first: per run its trace and
        run ids, agent, end time, verdict (pass / warn / fail), drift score, severity and
        primary driver, loop kinds, tool call counts, failed expectations and errors. E.g.
        the runs of support_agent that drifted this week: agent='support_agent',
        severity='warning', since='7d'. Same as `tracehound runs list --format json`."""
        return _on_history(
            location,
            lambda store: history.list_runs(
                store,
                agent=agent,
                severity=severity,
                min_drift=min_drift,
                max_drift=max_drift,
                tool=tool,
                loop_kind=loop_kind,
                since=since,
                until=until,
                verdict=verdict,
                limit=limit,
            ),
        )

    @server.tool(name="search_runs", annotations=_READ)
    def search_runs_tool(
        *,
        keyword: Annotated[
            str,
            Field(
                description="A word or phrase (case-insensitive) looked for in the run's ids, "
                "agent, tools, findings (loop kinds and tools, failure modes, failed "
                "expectations, drift driver and recommendation), models and kept content",
                min_length=1,
                max_length=1024,
            ),
        ],
        agent: AgentGlob = None,
        severity: Severity = None,
        min_drift: MinDrift = None,
        max_drift: MaxDrift = None,
        tool: ToolGlob = None,
        loop_kind: LoopKind = None,
        since: Since = None,
        until: Until = None,
        verdict: Verdict = None,
        limit: Limit = 50,
    ) -> dict[str, Any]:
        """Search the evaluated runs for a keyword, with the filters of `list_runs`; the same
        rows, newest first. E.g. the traces where get_order looped: keyword='get_order',
        loop_kind='any'. Same as `tracehound runs search KEYWORD --format json`."""
        return _on_history(
            location,
            lambda store: history.search_runs(
                store,
                keyword,
                agent=agent,
                severity=severity,
                min_drift=min_drift,
                max_drift=max_drift,
                tool=tool,
                loop_kind=loop_kind,
                since=since,
                until=until,
                verdict=verdict,
                limit=limit,
            ),
        )

    @server.tool(name="get_run", annotations=_READ)
    def get_run_tool(trace_id: TraceId, run_id: RunId = None) -> dict[str, Any]:
        """The full records of a trace's runs (or of one run): times, verdict, drift (score,
        severity, components, baseline), loops, failure modes, evidence, expectations, tool
        calls, models. Same as `tracehound runs show TRACE --format json`."""
        return _on_history(location, lambda store: history.get_run(store, trace_id, run_id))

    @server.tool(name="explain_run", annotations=_READ)
    def explain_run_tool(trace_id: TraceId, run_id: RunId = None) -> dict[str, Any]:
        """Why a run scored as it did: its drift breakdown (tool mix: tools that appeared,
        disappeared or shifted; semantic distance with a sample; complexity dimensions that
        moved), the baseline runs it diverged from, its other findings (loops, failure modes,
        failed expectations, evidence) and what to do about it. Same as
        `tracehound runs explain TRACE --format json`."""
        return _on_history(location, lambda store: history.explain_run(store, trace_id, run_id))

    @server.tool(name="delete_runs", annotations=_DESTROY)
    def delete_runs_tool(
        *,
        runs: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=512)]],
            Field(
                description="Runs to delete by id: 'TRACE' (all its runs) or 'TRACE/RUN'; "
                "with filters too, only the named runs that match them",
                max_length=MAX_LIMIT,
            ),
        ] = [],  # noqa: B006 (pydantic copies defaults)
        agent: AgentGlob = None,
        severity: Severity = None,
        min_drift: MinDrift = None,
        max_drift: MaxDrift = None,
        tool: ToolGlob = None,
        loop_kind: LoopKind = None,
        since: Since = None,
        until: Until = None,
        verdict: Verdict = None,
        forget_baseline: Annotated[
            bool,
            Field(
                description="Also remove the runs from their agent's recent-runs ring in the "
                "baseline (what they added to the baseline's sums stays)"
            ),
        ] = True,
    ) -> dict[str, Any]:
        """Delete runs from the run history: those named in `runs` and/or every run matching
        the filters. Needs ids or at least one filter: it never deletes everything by
        accident. Returns what was deleted and what cannot be undone. Same as
        `tracehound runs delete --format json`."""
        return _on_history(
            location,
            lambda store: history.delete_runs(
                store,
                runs=runs,
                agent=agent,
                severity=severity,
                min_drift=min_drift,
                max_drift=max_drift,
                tool=tool,
                loop_kind=loop_kind,
                since=since,
                until=until,
                verdict=verdict,
                forget_baseline=forget_baseline,
            ),
        )

    @server.tool(name="recent_findings", annotations=_READ)
    def recent_findings_tool(
        agent: AgentGlob = None,
        since: Annotated[
            str, Field(description="Since when (the forms of list_runs' `since`)")
        ] = "7d",
        limit: Annotated[
            int, Field(description="At most this many entries per list", ge=1, le=MAX_LIMIT)
        ] = 10,
    ) -> dict[str, Any]:
        """What went wrong lately, for one agent (a glob) or every agent: verdict counts, the
        drifted runs (newest first), loops by tool, failed expectations and failure modes,
        each list sorted by how many runs (`tracehound runs list` lists the same runs)."""
        return _on_history(
            location,
            lambda store: history.recent_findings(store, agent, since=since, limit=limit),
        )

    # --- baselines ------------------------------------------------------------------------------

    @server.tool(name="list_baselines", annotations=_READ)
    def list_baselines_tool() -> BaselineList:
        """List every agent's drift baseline: runs in it, runs in its open drift episode
        (`drifting_runs` > 0: the agent is drifting), pinned or not, embedder, first and last
        run. Same as `tracehound baseline list --format json`."""
        return _answer(lambda: list_baselines(resolved))

    @server.tool(name="get_baseline", annotations=_READ)
    def get_baseline_tool(agent: Agent) -> BaselineDetail:
        """One agent's baseline: the share of each tool in its calls, the mean and standard
        deviation of each complexity dimension (steps, tool calls, tokens …), and its most
        recent runs. Same as `tracehound baseline show AGENT --format json`."""
        return _answer(lambda: get_baseline(resolved, agent))

    @server.tool(name="pin_baseline", annotations=_PIN)
    def pin_baseline_tool(agent: Agent) -> PinChange:
        """Pin an agent's baseline: later runs are scored against it but never added to it (a
        regression gate against a known-good behaviour). Same as `tracehound baseline pin`."""
        return _answer(lambda: set_baseline_pin(resolved, agent, pinned=True))

    @server.tool(name="unpin_baseline", annotations=_PIN)
    def unpin_baseline_tool(agent: Agent) -> PinChange:
        """Unpin an agent's baseline: later runs update it again. Same as
        `tracehound baseline unpin`."""
        return _answer(lambda: set_baseline_pin(resolved, agent, pinned=False))

    @server.tool(name="reset_baseline", annotations=_DESTROY)
    def reset_baseline_tool(agent: Agent) -> BaselineReset:
        """Delete an agent's baseline and its drift episode; the next runs rebuild it. Returns
        what was removed. Same as `tracehound baseline reset`."""
        return _answer(lambda: reset_baseline(resolved, agent))

    @server.tool(name="accept_baseline", annotations=_DESTROY)
    def accept_baseline_tool(agent: Agent) -> DriftAcceptance:
        """Accept an agent's drift as its new normal: the runs of its open drift episode replace
        its baseline (a pin is kept). `accepted` is false when the agent is not drifting.
        Same as `tracehound baseline accept`."""
        return _answer(lambda: accept_baseline(resolved, agent))

    return server


def serve(location: str | None) -> None:
    """Serve the tools over stdin/stdout until the client closes stdin."""
    build_server(location).run("stdio")
