"""`tracehound mcp` driven through the MCP SDK's own client over stdio: a real `tracehound mcp`
subprocess, over a store that real `tracehound eval --baselines` runs filled (framework captures
and the drift scenarios); every tool called, the same queries through the CLI (`--format json`)
and through MCP compared, the errors a client can cause, and the install hint without the SDK.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

UNIT_TESTS = Path(__file__).resolve().parents[1] / "unit"
if str(UNIT_TESTS) not in sys.path:
    sys.path.insert(0, str(UNIT_TESTS))

from _drift_scenarios import SCENARIOS, scenario_documents  # noqa: E402

from helpers import child_environ  # noqa: E402

FRAMEWORKS = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
CAPTURES = [
    "strands_default_clean.otlp.json",
    "strands_default_loop.otlp.json",
    "openai_agents_chat_clean.otlp.json",
    "openai_agents_chat_loop.otlp.json",
]
PLANNER = "research-service/planner"  # the drift scenarios' agent
ORDER_AGENT = "capture-strands/order_agent"
RUN_TOOLS = {
    "list_runs",
    "search_runs",
    "get_run",
    "explain_run",
    "delete_runs",
    "recent_findings",
}
LOOPING = {  # the framework captures whose order_agent loops on get_order_status
    "ade389a36d25c06f1c63dab5757f044a": "capture-strands/order_agent",
    "eeae7d36c85684d8f435a994eab2b513": "capture-openai-agents/order_agent",
}
EVER = "2000-01-01"  # `since` for every recorded run (the fixtures are of fixed dates)
BASELINE_TOOLS = {
    "list_baselines",
    "get_baseline",
    "pin_baseline",
    "unpin_baseline",
    "reset_baseline",
    "accept_baseline",
}
READ_ONLY = {
    "list_runs",
    "search_runs",
    "get_run",
    "explain_run",
    "recent_findings",
    "list_baselines",
    "get_baseline",
}
DESTRUCTIVE = {"delete_runs", "reset_baseline", "accept_baseline"}
CALL_TIMEOUT = 60.0

T = TypeVar("T")


# --- the store, filled by real evaluations ----------------------------------------------------


def tracehound(
    *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`tracehound ARGS` in a subprocess, as a user runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "tracehound.cli", *args],
        capture_output=True,
        text=True,
        env={**child_environ(), **(env or {})},
        timeout=300,
        check=False,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def cli_json(*args: str) -> Any:
    return json.loads(tracehound(*args).stdout)


def _write_documents(folder: Path, documents: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    for i, document in enumerate(documents):
        (folder / f"{i:02d}.otlp.json").write_text(json.dumps(document), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store built by `tracehound eval --baselines`: the framework captures (two agents per
    framework, one of them looping), then the planner's 10 control runs and 5 runs of tool drift
    (an open drift episode of 5 runs)."""
    root = tmp_path_factory.mktemp("mcp")
    db = root / "baselines.sqlite3"
    tracehound("eval", "--baselines", str(db), *(str(FRAMEWORKS / name) for name in CAPTURES))
    control = scenario_documents(SCENARIOS["control"]())
    tool_drift = SCENARIOS["tool_drift"]()
    drifted = scenario_documents(tool_drift)[tool_drift.baseline_runs :]
    base = _write_documents(root / "base", control[:10])
    tracehound("eval", "--evaluators", "loops", "--baselines", str(db), str(base))
    shifted = _write_documents(root / "drifted", drifted)
    tracehound("eval", "--evaluators", "loops", "--baselines", str(db), str(shifted))
    return db


@pytest.fixture
def db(seeded: Path, tmp_path: Path) -> Path:
    """A copy of the seeded store for one test to change."""
    path = tmp_path / "baselines.sqlite3"
    shutil.copyfile(seeded, path)
    return path


# --- the client -------------------------------------------------------------------------------


@dataclass
class Served:
    """What a session saw besides the answers: anything on stdout that was not a protocol
    message arrives as an exception; the server's stderr is kept for the logs."""

    stream_errors: list[Exception] = field(default_factory=list)
    stderr: str = ""


def with_session(
    location: str | Path,
    script: Callable[[ClientSession], Awaitable[T]],
    tmp_path: Path,
    *extra: str,
) -> tuple[T, Served]:
    """Start `tracehound mcp --baselines LOCATION` through the SDK's stdio client, run `script`
    on an initialized session, close it (the server exits when its stdin closes)."""
    served = Served()
    errlog = tmp_path / f"mcp-stderr-{len(list(tmp_path.glob('mcp-stderr-*')))}.log"

    async def record(message: object) -> None:
        if isinstance(message, Exception):
            served.stream_errors.append(message)

    async def main() -> T:
        parameters = StdioServerParameters(
            command=sys.executable,
            args=["-m", "tracehound.cli", "mcp", "--baselines", str(location), *extra],
            env=child_environ(),
        )
        with errlog.open("w", encoding="utf-8") as err:
            async with (
                stdio_client(parameters, errlog=err) as (read, write),
                ClientSession(
                    read, write, read_timeout_seconds=CALL_TIMEOUT, message_handler=record
                ) as session,
            ):
                await session.initialize()
                return await script(session)

    result = anyio.run(main)
    served.stderr = errlog.read_text(encoding="utf-8")
    return result, served


def call(
    location: str | Path, tmp_path: Path, tool: str, arguments: dict[str, Any] | None = None
) -> CallToolResult:
    async def script(session: ClientSession) -> CallToolResult:
        return await session.call_tool(tool, arguments or {})

    result, served = with_session(location, script, tmp_path)
    assert not served.stream_errors, served.stream_errors
    return result


def structured(result: CallToolResult) -> dict[str, Any]:
    """The result's JSON document: structured content, the same as its text content."""
    assert not result.is_error, error_text(result)
    assert result.structured_content is not None
    (content,) = result.content
    assert isinstance(content, TextContent)
    assert json.loads(content.text) == result.structured_content
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    texts = [c.text for c in result.content if isinstance(c, TextContent)]
    return "\n".join(texts)


def tool_error(result: CallToolResult) -> str:
    """The one-line message of a tool error (not a protocol error, not a crash)."""
    assert result.is_error
    text = error_text(result)
    assert "\n" not in text, text
    assert "Traceback" not in text
    return text


def same_but_store(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert {k: v for k, v in a.items() if k != "store"} == {
        k: v for k, v in b.items() if k != "store"
    }


# --- tools ------------------------------------------------------------------------------------


def test_the_tools_describe_themselves(seeded: Path, tmp_path: Path) -> None:
    async def script(session: ClientSession) -> Any:
        return await session.list_tools()

    listed, served = with_session(seeded, script, tmp_path)
    assert not served.stream_errors
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == RUN_TOOLS | BASELINE_TOOLS
    for name, tool in tools.items():
        assert tool.description and len(tool.description) > 40, name
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", name
        for parameter, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), f"{name}.{parameter} has no description"
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (name in READ_ONLY)
        if name in DESTRUCTIVE:
            assert tool.annotations.destructive_hint is True
    assert tools["get_baseline"].input_schema["required"] == ["agent"]
    assert tools["search_runs"].input_schema["required"] == ["keyword"]
    assert "required" not in tools["list_runs"].input_schema
    severity = tools["list_runs"].input_schema["properties"]["severity"]
    assert severity["enum"] == ["none", "warning", "alert", "critical", None]


# --- runs -------------------------------------------------------------------------------------


def test_which_runs_of_an_agent_drifted_and_why(seeded: Path, tmp_path: Path) -> None:
    async def script(session: ClientSession) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        drifted = structured(
            await session.call_tool(
                "list_runs", {"agent": "planner", "severity": "warning", "since": EVER}
            )
        )
        explained = [
            structured(await session.call_tool("explain_run", {"trace_id": row["trace_id"]}))
            for row in drifted["runs"]
        ]
        return drifted, explained

    (drifted, explained), served = with_session(seeded, script, tmp_path)
    assert not served.stream_errors
    assert drifted["count"] == 5  # the five runs of tool drift, not the ten control runs
    assert {row["agent"] for row in drifted["runs"]} == {PLANNER}
    assert all(row["primary_driver"] == "tool_mix" for row in drifted["runs"])
    ends = [row["end"] for row in drifted["runs"]]
    assert ends == sorted(ends, reverse=True)  # newest first
    for row, why in zip(drifted["runs"], explained, strict=True):
        assert (why["trace_id"], why["run_id"]) == (row["trace_id"], row["run_id"])
        assert why["primary_driver"] == "tool_mix"
        assert why["drift"]["severity"] == row["drift_severity"] != "none"
        tool_mix = next(c for c in why["components"] if c["name"] == "tool_mix")
        assert (
            tool_mix["tools_appeared"]
            or tool_mix["tools_disappeared"]
            or (tool_mix["tools_shifted"])
        )
        assert f"tracehound baseline accept {PLANNER}" in why["recommendation"]
    # an agent that did not drift has no such run
    quiet = structured(
        call(seeded, tmp_path, "list_runs", {"agent": "*order_agent", "severity": "warning"})
    )
    assert quiet["count"] == 0


def test_the_traces_where_a_tool_looped(seeded: Path, tmp_path: Path) -> None:
    async def script(session: ClientSession) -> list[dict[str, Any]]:
        return [
            structured(await session.call_tool(tool, arguments))
            for tool, arguments in (
                ("search_runs", {"keyword": "get_order", "loop_kind": "any", "since": EVER}),
                ("list_runs", {"tool": "get_order*", "loop_kind": "no_progress"}),
                ("list_runs", {"tool": "get_weather", "loop_kind": "any"}),
                ("get_run", {"trace_id": "ade389a36d25c06f1c63dab5757f044a"}),
                ("recent_findings", {"agent": "*order_agent", "since": EVER}),
            )
        ]

    (searched, listed, none, record, findings), served = with_session(seeded, script, tmp_path)
    assert not served.stream_errors
    assert searched["keyword"] == "get_order"
    for found in (searched, listed):
        assert {row["trace_id"]: row["agent"] for row in found["runs"]} == LOOPING
        for row in found["runs"]:
            assert row["verdict"] == "fail" and row["tools"] == {"get_order_status": 4}
            assert "no_progress" in row["loop_kinds"]
    assert none["count"] == 0  # the travel agent's runs did not loop
    (run,) = record["runs"]
    assert run["agent"] == ORDER_AGENT and run["tool_calls"] == {"get_order_status": 4}
    assert run["loops"]["tools"] == ["get_order_status"]
    assert findings["runs"] == 2 and findings["verdicts"] == {"pass": 0, "warn": 0, "fail": 2}
    (loops,) = findings["loops"]
    assert (loops["tool"], loops["runs"]) == ("get_order_status", 2)
    assert loops["last_trace_id"] in LOOPING


# the same question through `tracehound runs … --format json` and through MCP
PARITY: list[tuple[list[str], str, dict[str, Any]]] = [
    (["list", "--since", EVER, "--limit", "1000"], "list_runs", {"since": EVER, "limit": 1000}),
    (["list"], "list_runs", {}),
    (
        ["list", "--agent", "planner", "--severity", "warning", "--since", EVER],
        "list_runs",
        {"agent": "planner", "severity": "warning", "since": EVER},
    ),
    (
        ["list", "--tool", "get_order*", "--loop-kind", "no_progress", "--verdict", "fail"],
        "list_runs",
        {"tool": "get_order*", "loop_kind": "no_progress", "verdict": "fail"},
    ),
    (
        ["list", "--min-drift", "0.3", "--max-drift", "1", "--until", "2026-06-01", "--limit", "3"],
        "list_runs",
        {"min_drift": 0.3, "max_drift": 1.0, "until": "2026-06-01", "limit": 3},
    ),
    (
        ["search", "get_order", "--loop-kind", "any"],
        "search_runs",
        {"keyword": "get_order", "loop_kind": "any"},
    ),
    (
        ["search", "tool_mix", "--agent", "research-*"],
        "search_runs",
        {"keyword": "tool_mix", "agent": "research-*"},
    ),
    (["show", next(iter(LOOPING))], "get_run", {"trace_id": next(iter(LOOPING))}),
    (
        ["show", f"{next(iter(LOOPING))}/c7e4af07c377071a"],
        "get_run",
        {"trace_id": next(iter(LOOPING)), "run_id": "c7e4af07c377071a"},
    ),
    (["explain", next(iter(LOOPING))], "explain_run", {"trace_id": next(iter(LOOPING))}),
    (
        ["findings", "--agent", "*order_agent", "--since", EVER],
        "recent_findings",
        {"agent": "*order_agent", "since": EVER},
    ),
]


def test_the_cli_and_mcp_answer_the_same(seeded: Path, tmp_path: Path) -> None:
    async def script(session: ClientSession) -> list[CallToolResult]:
        return [await session.call_tool(tool, arguments) for _, tool, arguments in PARITY]

    results, served = with_session(seeded, script, tmp_path)
    assert not served.stream_errors
    drifted = structured(results[2])["runs"]
    assert len(drifted) == 5  # the parity is of real answers, not of empty ones
    explained = [
        structured(call(seeded, tmp_path, "explain_run", {"trace_id": row["trace_id"]}))
        for row in drifted[:1]
    ]
    for (argv, tool, arguments), result in zip(PARITY, results, strict=True):
        expected = cli_json("runs", *argv, "--format", "json", "--baselines", str(seeded))
        assert structured(result) == expected, (tool, arguments)
        assert expected.get("count", 1) > 0 or argv[0] != "search", argv
    (why,) = explained
    assert why == cli_json(
        "runs", "explain", why["trace_id"], "--format", "json", "--baselines", str(seeded)
    )
    assert why["components"]  # a scored run: the drift breakdown is there


def test_delete_runs_deletes_what_the_cli_deletes(seeded: Path, tmp_path: Path) -> None:
    by_mcp, by_cli = tmp_path / "mcp.sqlite3", tmp_path / "cli.sqlite3"
    shutil.copyfile(seeded, by_mcp)
    shutil.copyfile(seeded, by_cli)
    deletions: list[tuple[list[str], dict[str, Any]]] = [
        ([next(iter(LOOPING))], {"runs": [next(iter(LOOPING))]}),
        (["--agent", "planner", "--severity", "alert"], {"agent": "planner", "severity": "alert"}),
        (
            ["--keep-baseline", "--verdict", "pass", "--since", EVER],
            {"verdict": "pass", "since": EVER, "forget_baseline": False},
        ),
    ]

    async def script(session: ClientSession) -> list[CallToolResult]:
        return [await session.call_tool("delete_runs", arguments) for _, arguments in deletions]

    results, served = with_session(by_mcp, script, tmp_path)
    assert not served.stream_errors
    for (argv, arguments), result in zip(deletions, results, strict=True):
        expected = cli_json("runs", "delete", *argv, "--format", "json", "--baselines", str(by_cli))
        assert structured(result) == expected, arguments
        assert expected["count"] > 0
    for store in (by_mcp, by_cli):
        left = cli_json(
            "runs", "list", "--since", EVER, "--format", "json", "--baselines", str(store)
        )
        assert left["count"] == 1 and left["runs"][0]["verdict"] == "fail"  # the other loop


def _flood(path: Path, runs: int) -> Path:
    """`runs` distinct traces (the planner's control runs, each with a trace id and an hour of
    its own) as OTLP JSON lines."""
    control = scenario_documents(SCENARIOS["control"]())
    with path.open("w", encoding="utf-8") as out:
        for i in range(runs):
            document = json.loads(json.dumps(control[i % len(control)]))
            for span in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
                span["traceId"] = f"f100d{i:027x}"
                for edge in ("startTimeUnixNano", "endTimeUnixNano"):
                    span[edge] = str(int(span[edge]) + i * 3_600_000_000_000)
            out.write(json.dumps(document) + "\n")
    return path


def test_a_run_flood_stays_within_the_retention_bounds(tmp_path: Path) -> None:
    """Two `eval` processes write 600 runs into a history bounded to 150 runs; MCP and the
    CLI see the same 150, of the later write, and a listing is capped at MAX_LIMIT runs."""
    db = tmp_path / "flood.sqlite3"
    flood = _flood(tmp_path / "flood.jsonl", 600)
    lines = flood.read_text(encoding="utf-8").splitlines()
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
    second.write_text("\n".join(lines[300:]) + "\n", encoding="utf-8")
    bounded = {"TRACEHOUND_HISTORY_MAX_RUNS": "150"}
    for part in (first, second):
        tracehound("eval", "--evaluators", "loops", "--baselines", str(db), str(part), env=bounded)

    async def script(session: ClientSession) -> list[CallToolResult]:
        return [
            await session.call_tool("list_runs", {"since": EVER, "limit": 1000}),
            await session.call_tool("recent_findings", {"since": EVER}),
            await session.call_tool("list_runs", {"limit": 1001}),
        ]

    (listing, findings, too_many), served = with_session(db, script, tmp_path)
    assert not served.stream_errors
    listed = structured(listing)
    assert listed["count"] == 150
    kept = {row["trace_id"] for row in listed["runs"]}
    assert kept <= {f"f100d{i:027x}" for i in range(300, 600)}  # of the second, later write
    assert structured(findings)["runs"] == 150
    assert "limit: Input should be less than or equal to 1000" in tool_error(too_many)
    assert listed == cli_json(
        "runs",
        "list",
        "--since",
        EVER,
        "--limit",
        "1000",
        "--format",
        "json",
        "--baselines",
        str(db),
    )
    baseline = structured(call(db, tmp_path, "get_baseline", {"agent": PLANNER}))
    assert baseline["runs"] >= 150  # the baseline's sums keep every learned run


def test_delete_runs_needs_ids_or_a_filter(db: Path, tmp_path: Path) -> None:
    strands_loop = next(iter(LOOPING))

    async def script(session: ClientSession) -> list[CallToolResult]:
        return [
            await session.call_tool("delete_runs", {}),
            await session.call_tool("delete_runs", {"runs": []}),
            await session.call_tool("delete_runs", {"agent": ""}),
            await session.call_tool("delete_runs", {"runs": ["0" * 32]}),
            await session.call_tool("list_runs", {"since": EVER, "limit": 1000}),
            await session.call_tool("delete_runs", {"runs": [strands_loop]}),
            await session.call_tool("delete_runs", {"agent": "planner", "verdict": "pass"}),
            await session.call_tool("get_run", {"trace_id": strands_loop}),
            await session.call_tool("list_runs", {"since": EVER, "limit": 1000}),
        ]

    results, served = with_session(db, script, tmp_path)
    assert not served.stream_errors
    nothing, empty, blank, unknown, before, by_id, by_filter, gone, after = results
    for refused in (nothing, empty, blank):
        assert "name runs (TRACE or TRACE/RUN) or give a filter" in tool_error(refused)
    assert f"no trace {'0' * 32} in the run history" in tool_error(unknown)
    deleted = structured(by_id)
    assert deleted["count"] == 1
    assert deleted["deleted"] == [
        {"trace_id": strands_loop, "run_id": "c7e4af07c377071a", "agent": ORDER_AGENT}
    ]
    filtered = structured(by_filter)
    assert filtered["count"] > 0 and {d["agent"] for d in filtered["deleted"]} == {PLANNER}
    assert f"no trace {strands_loop}" in tool_error(gone)
    assert structured(after)["count"] == structured(before)["count"] - 1 - filtered["count"]


def test_list_and_get_baseline_are_the_cli_documents(seeded: Path, tmp_path: Path) -> None:
    async def script(session: ClientSession) -> list[CallToolResult]:
        return [
            await session.call_tool("list_baselines", {}),
            await session.call_tool("get_baseline", {"agent": ORDER_AGENT}),
            await session.call_tool("get_baseline", {"agent": PLANNER}),
        ]

    (listing, order, planner), served = with_session(seeded, script, tmp_path)
    assert not served.stream_errors
    listed = structured(listing)
    assert listed == cli_json("baseline", "list", "--format", "json", "--baselines", str(seeded))
    agents = {b["agent"]: b for b in listed["baselines"]}
    assert ORDER_AGENT in agents and "capture-openai-agents/order_agent" in agents
    assert agents[PLANNER]["runs"] == 10 and agents[PLANNER]["drifting_runs"] == 5
    assert agents[ORDER_AGENT]["drifting_runs"] == 0
    shown = structured(order)
    assert shown == cli_json("baseline", "show", ORDER_AGENT, "--baselines", str(seeded))
    assert shown["tools"] == {"get_order_status": 1.0}
    assert shown["recent_runs"][0]["trace_id"] == "ade389a36d25c06f1c63dab5757f044a"
    assert structured(planner) == cli_json("baseline", "show", PLANNER, "--baselines", str(seeded))


def test_pin_unpin_reset_accept_change_the_store_as_the_cli_does(
    seeded: Path, tmp_path: Path
) -> None:
    by_mcp, by_cli = tmp_path / "mcp.sqlite3", tmp_path / "cli.sqlite3"
    shutil.copyfile(seeded, by_mcp)
    shutil.copyfile(seeded, by_cli)
    actions: list[tuple[str, str]] = [
        ("pin", PLANNER),
        ("pin", PLANNER),  # already pinned: changed false
        ("accept", PLANNER),  # the episode replaces the baseline, the pin kept
        ("accept", PLANNER),  # not drifting any more: nothing to accept
        ("unpin", PLANNER),
        ("reset", ORDER_AGENT),
    ]

    async def script(session: ClientSession) -> list[CallToolResult]:
        return [
            await session.call_tool(f"{action}_baseline", {"agent": agent})
            for action, agent in actions
        ]

    results, served = with_session(by_mcp, script, tmp_path)
    assert not served.stream_errors
    documents = [structured(r) for r in results]
    for (action, agent), document in zip(actions, documents, strict=True):
        same_but_store(
            document,
            cli_json("baseline", action, agent, "--format", "json", "--baselines", str(by_cli)),
        )
    pin, again, accept, nothing, unpin, reset = documents
    assert (pin["pinned"], pin["changed"], pin["runs"]) == (True, True, 10)
    assert (again["pinned"], again["changed"]) == (True, False)
    assert accept["accepted"] and (accept["runs"], accept["replaced_runs"]) == (5, 10)
    assert accept["pinned"] and accept["drifting_since_ns"] > 0
    assert not nothing["accepted"] and nothing["runs"] == 5
    assert (unpin["pinned"], unpin["changed"]) == (False, True)
    assert reset["agent"] == ORDER_AGENT and reset["runs"] == 1
    # the store the MCP server changed is the one the CLI changed (but for the write times)
    listed = cli_json("baseline", "list", "--format", "json", "--baselines", str(by_mcp))
    other = cli_json("baseline", "list", "--format", "json", "--baselines", str(by_cli))
    assert [{**b, "updated_at": 0} for b in listed["baselines"]] == [
        {**b, "updated_at": 0} for b in other["baselines"]
    ]
    planner = next(b for b in listed["baselines"] if b["agent"] == PLANNER)
    assert (planner["runs"], planner["drifting_runs"], planner["pinned"]) == (5, 0, False)
    assert ORDER_AGENT not in {b["agent"] for b in listed["baselines"]}


def test_a_redis_store_serves_the_same_documents(
    seeded: Path, redis_url: str, tmp_path: Path
) -> None:
    exported = tmp_path / "export.json"
    tracehound("baseline", "export", str(exported), "--baselines", str(seeded))
    tracehound("baseline", "import", str(exported), "--baselines", redis_url)
    listing = structured(call(redis_url, tmp_path, "list_baselines"))
    assert listing == cli_json("baseline", "list", "--format", "json", "--baselines", redis_url)
    from_file = cli_json("baseline", "list", "--format", "json", "--baselines", str(seeded))
    assert [{**b, "updated_at": 0} for b in listing["baselines"]] == [
        {**b, "updated_at": 0} for b in from_file["baselines"]
    ]
    shown = structured(call(redis_url, tmp_path, "get_baseline", {"agent": PLANNER}))
    assert shown == cli_json("baseline", "show", PLANNER, "--baselines", redis_url)
    same_but_store(shown, cli_json("baseline", "show", PLANNER, "--baselines", str(seeded)))


# --- errors -----------------------------------------------------------------------------------


def test_bad_calls_are_one_line_tool_errors_and_the_server_goes_on(
    db: Path, tmp_path: Path
) -> None:
    async def script(session: ClientSession) -> list[CallToolResult]:
        return [
            await session.call_tool("list_runs", {"severity": "bad"}),
            await session.call_tool("list_runs", {"since": "last tuesday"}),
            await session.call_tool("list_runs", {"min_drift": 2}),
            await session.call_tool("list_runs", {"limit": 0}),
            await session.call_tool("search_runs", {"keyword": "  "}),
            await session.call_tool("explain_run", {"trace_id": "f" * 32}),
            await session.call_tool("get_baseline", {"agent": "order_agent"}),
            await session.call_tool("get_baseline", {"agent": ""}),
            await session.call_tool("get_baseline", {}),
            await session.call_tool("pin_baseline", {"agent": 7}),
            await session.call_tool("reset_baseline", {"agent": "x" * 2000}),
            await session.call_tool("no_such_tool", {}),
            await session.call_tool("list_baselines", {}),  # still serving
        ]

    results, served = with_session(db, script, tmp_path)
    assert not served.stream_errors
    severity, since, drift, limit, keyword, no_run = results[:6]
    unknown, empty, missing, wrong_type, too_long, no_tool, listing = results[6:]
    assert "severity must be one of none, warning, alert, critical, not 'bad'" in (
        tool_error(severity)
    )
    assert "since: 'last tuesday' is neither an ISO date/time" in tool_error(since)
    assert "min_drift must be a number within [0, 1]" in tool_error(drift)
    assert "limit: Input should be greater than or equal to 1" in tool_error(limit)
    assert "keyword: give a word to search for" in tool_error(keyword)
    assert f"no trace {'f' * 32} in the run history" in tool_error(no_run)
    message = tool_error(unknown)
    assert "no baseline for agent 'order_agent'" in message
    assert "did you mean 'capture-openai-agents/order_agent', 'capture-strands/order_agent'" in (
        message
    )
    assert "agent: String should have at least 1 character" in tool_error(empty)
    assert "agent: Field required" in tool_error(missing)
    assert "agent: Input should be a valid string" in tool_error(wrong_type)
    assert "agent: String should have at most 1024 characters" in tool_error(too_long)
    assert "no_such_tool" in tool_error(no_tool)
    assert structured(listing)["baselines"]
    assert "Traceback" not in served.stderr
    # nothing was changed by the failed calls
    assert cli_json("baseline", "list", "--format", "json", "--baselines", str(db)) == (
        structured(listing)
    )


def test_an_unreachable_store_is_a_tool_error_per_call(tmp_path: Path) -> None:
    from redis_helpers import free_port

    url = f"redis://127.0.0.1:{free_port()}/0?socket_connect_timeout=0.5"

    async def script(session: ClientSession) -> list[CallToolResult]:
        return [
            await session.call_tool("list_baselines", {}),
            await session.call_tool("get_baseline", {"agent": PLANNER}),
            await session.call_tool("list_runs", {}),
            await session.call_tool("explain_run", {"trace_id": "f" * 32}),
        ]

    results, served = with_session(url, script, tmp_path)
    assert not served.stream_errors
    for result in results:
        message = tool_error(result)
        assert "127.0.0.1" in message and "redis" in message.lower()
    assert "Traceback" not in served.stderr


def test_a_file_that_is_not_a_store_is_a_tool_error(tmp_path: Path) -> None:
    not_a_store = tmp_path / "notes.sqlite3"
    not_a_store.write_text("not a database\n" * 100, encoding="utf-8")
    message = tool_error(call(not_a_store, tmp_path, "list_baselines"))
    assert str(not_a_store) in message
    cli = tracehound("baseline", "list", "--baselines", str(not_a_store), check=False)
    assert cli.returncode == 2
    assert cli.stderr.strip().removeprefix("tracehound: error: ") in message


def test_a_store_that_does_not_exist_lists_empty_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "none" / "baselines.sqlite3"
    listing = structured(call(missing, tmp_path, "list_baselines"))
    assert listing == {"store": f"{missing} (does not exist)", "baselines": []}
    assert "it is empty" in tool_error(call(missing, tmp_path, "pin_baseline", {"agent": PLANNER}))
    assert not missing.parent.exists()


def test_an_unsupported_store_url_stops_at_start(tmp_path: Path) -> None:
    done = tracehound("mcp", "--baselines", "ftp://example.invalid/b", check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "--baselines: unsupported baseline store 'ftp://example.invalid/b'" in done.stderr


def test_a_line_on_stdout_that_is_not_the_protocol_is_seen(tmp_path: Path) -> None:
    """The check every session above makes (nothing but protocol messages on stdout) can fail:
    a server whose process prints one line before serving is caught."""
    served = Served()

    async def record(message: object) -> None:
        if isinstance(message, Exception):
            served.stream_errors.append(message)

    async def main() -> dict[str, Any]:
        parameters = StdioServerParameters(
            command=sys.executable,
            args=[
                "-c",
                "print('hello from stdout', flush=True)\n"
                "from tracehound.cli import main\n"
                "main(['mcp', '--baselines', 'memory'])",
            ],
            env=child_environ(),
        )
        async with (
            stdio_client(parameters) as (read, write),
            ClientSession(
                read, write, read_timeout_seconds=CALL_TIMEOUT, message_handler=record
            ) as session,
        ):
            await session.initialize()
            return structured(await session.call_tool("list_baselines", {}))

    assert anyio.run(main)["baselines"] == []
    assert served.stream_errors  # the stray line, reported to the session


def test_without_the_sdk_the_command_names_the_extra(tmp_path: Path) -> None:
    """The `mcp` package made unimportable in a real interpreter (None in `sys.modules` is how
    Python marks a module that must not be imported): exit 2, one line, the install hint."""
    blocked = (
        "import sys\n"
        "for name in [m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')]:\n"
        "    del sys.modules[name]\n"
        "sys.modules['mcp'] = None\n"
        "from tracehound.cli import main\n"
        "sys.exit(main(['mcp', '--baselines', 'memory']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked],
        capture_output=True,
        text=True,
        env=child_environ(),
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "tracehound: error: tracehound mcp needs the MCP SDK: pip install 'tracehound[mcp]'\n"
    )
