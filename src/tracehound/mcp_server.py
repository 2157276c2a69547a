"""`tracehound mcp`: the run history and the drift baselines as MCP tools, over stdio.

A coding agent (Claude Code, Cursor, VS Code, Claude Desktop …) starts `tracehound mcp` and asks
"which runs of support_agent drifted this week, and why?" through tools that mirror the CLI:
each tool calls the function behind the matching `tracehound baseline …` command and returns its
JSON document as structured content (with a published output schema). A bad argument, an unknown
agent or an unusable store comes back as a tool error with the CLI's one-line message; the
server keeps running.

Needs `tracehound[mcp]` (the `mcp` SDK); `tracehound.cli_mcp` checks for it before importing
this module. The store is opened for each call, as the CLI does, so the server sees what
`tracehound eval` and the sidecar write meanwhile and holds no lock between calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import Field, ValidationError

from tracehound import __version__
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
from tracehound.files import InputError

__all__ = ["SERVER_NAME", "build_server", "serve"]

SERVER_NAME = "tracehound"
_INSTRUCTIONS = (
    "tracehound evaluates AI-agent traces (evidence use, loops, drift against a per-agent "
    "baseline). These tools read its store: the evaluated runs (list, search, explain, delete) "
    "and the per-agent drift baselines (list, show, pin, unpin, reset, accept). Times are "
    "nanoseconds since the Unix epoch (UTC); agent keys are as `list_baselines` shows them."
)

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

T = TypeVar("T")


def _answer(query: Callable[[], T]) -> T:
    """Run one query; its one-line `InputError` (unknown agent, bad value, unusable store)
    becomes a tool error, which the client shows to the model as the result of the call."""
    try:
        return query()
    except InputError as exc:
        raise ToolError(str(exc)) from None


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
    """The MCP server over the store at `location` (None: the default SQLite file; see
    `tracehound.baselines.open_store`), its tools registered."""
    server = _Server(
        SERVER_NAME,
        title="tracehound",
        description="Run history and drift baselines of tracehound's AI-agent trace evaluation",
        instructions=_INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )

    # --- baselines ------------------------------------------------------------------------------

    @server.tool(name="list_baselines", annotations=_READ)
    def list_baselines_tool() -> BaselineList:
        """List every agent's drift baseline: runs in it, runs in its open drift episode
        (`drifting_runs` > 0: the agent is drifting), pinned or not, embedder, first and last
        run. Same as `tracehound baseline list --format json`."""
        return _answer(lambda: list_baselines(location))

    @server.tool(name="get_baseline", annotations=_READ)
    def get_baseline_tool(agent: Agent) -> BaselineDetail:
        """One agent's baseline: the share of each tool in its calls, the mean and standard
        deviation of each complexity dimension (steps, tool calls, tokens …), and its most
        recent runs. Same as `tracehound baseline show AGENT --format json`."""
        return _answer(lambda: get_baseline(location, agent))

    @server.tool(name="pin_baseline", annotations=_PIN)
    def pin_baseline_tool(agent: Agent) -> PinChange:
        """Pin an agent's baseline: later runs are scored against it but never added to it (a
        regression gate against a known-good behaviour). Same as `tracehound baseline pin`."""
        return _answer(lambda: set_baseline_pin(location, agent, pinned=True))

    @server.tool(name="unpin_baseline", annotations=_PIN)
    def unpin_baseline_tool(agent: Agent) -> PinChange:
        """Unpin an agent's baseline: later runs update it again. Same as
        `tracehound baseline unpin`."""
        return _answer(lambda: set_baseline_pin(location, agent, pinned=False))

    @server.tool(name="reset_baseline", annotations=_DESTROY)
    def reset_baseline_tool(agent: Agent) -> BaselineReset:
        """Delete an agent's baseline and its drift episode; the next runs rebuild it. Returns
        what was removed. Same as `tracehound baseline reset`."""
        return _answer(lambda: reset_baseline(location, agent))

    @server.tool(name="accept_baseline", annotations=_DESTROY)
    def accept_baseline_tool(agent: Agent) -> DriftAcceptance:
        """Accept an agent's drift as its new normal: the runs of its open drift episode replace
        its baseline (a pin is kept). `accepted` is false when the agent is not drifting.
        Same as `tracehound baseline accept`."""
        return _answer(lambda: accept_baseline(location, agent))

    return server


def serve(location: str | None) -> None:
    """Serve the tools over stdin/stdout until the client closes stdin."""
    build_server(location).run("stdio")
