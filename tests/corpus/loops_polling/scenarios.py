"""A second loop corpus: polling, pagination, backoff and stuck calls, written as scenario tables.

    python tests/corpus/loops_polling/scenarios.py          # write the files
    python tests/corpus/loops_polling/scenarios.py --check  # exit 1 if they are stale

Written apart from `../loops/generate.py` and by another method: no random draws, no shared
texts. Each scenario below is a hand-written table — a name, its labels (the kinds a reader of
the trace would name, decided when the table was written, never by running a detector), the
shape of its spans and its rows, one tool call each: tool, arguments, and what came back
(`ok(text)`, `err(message)`, or `None` when the result was not recorded). A row may also be
`"fill"` (an unrelated call with its own result). Shapes: `chat` — an `invoke_agent` root, one
`chat` span per call whose output proposes it, then its `execute_tool` span; `tools` — the
`execute_tool` spans alone under an `invoke_agent` span (frameworks that record no model
output); `workflow` — `chat` spans without tool-call parts under an agent span that is itself
the child of a non-GenAI workflow span.

What the labels say, in the reader's words:

- a job, pipeline, export, upload, deployment or queue polled while its status moves (status
  words, percentages, counters, fields of a JSON document, a long listing whose end changes,
  one-character results) is *progress*: no loop, up to ten polls of the same call;
- the same result again — verbatim, or differing only in a date-time, a clock time, an epoch
  timestamp or a request UUID — is a stuck call: `repeat` once made three times, `consecutive`
  when the same call follows itself, `no_progress` when one tool gave the very same text three
  times;
- a failed call retried until it works, with at most two retries, is backoff; three failures
  in a row are a `retry_storm` (and a `repeat`); any failure is a `tool_call_error`;
- more than ten polls of one call are a loop (`repeat`, `consecutive`) whatever they return.

Output, next to this file: `otlp/polling.jsonl` (one OTLP/JSON request per trace),
`labels.json` (trace id → kinds) and `tracecheck.jsonl` (the same traces in tracecheck's JSONL).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
T0 = 1_780_000_000_000_000_000  # a fixed start; each scenario an hour after the previous one
MS = 1_000_000


@dataclass(frozen=True)
class Outcome:
    text: str | None = None
    error: str | None = None


def ok(text: str) -> Outcome:
    return Outcome(text=text)


def err(message: str) -> Outcome:
    return Outcome(error=message)


Row = tuple[str, dict[str, Any], Outcome | None] | str


@dataclass(frozen=True)
class Scenario:
    name: str
    labels: frozenset[str]
    shape: str
    rows: tuple[Row, ...]


def _scenario(name: str, labels: str, shape: str, rows: list[Row]) -> Scenario:
    return Scenario(name, frozenset(labels.split()), shape, tuple(rows))


def _poll(tool: str, args: dict[str, Any], results: list[str | Outcome | None]) -> list[Row]:
    rows: list[Row] = []
    for r in results:
        outcome = ok(r) if isinstance(r, str) else r
        rows.append((tool, args, outcome))
    return rows


_NODES = [f"node-{i:03d}" for i in range(60)]


def _listing(ready: int) -> str:
    """A long JSON listing of nodes: the first `ready` are Ready."""
    items = [
        {"name": n, "status": "Ready" if i < ready else "NotReady"} for i, n in enumerate(_NODES)
    ]
    return json.dumps({"kind": "NodeList", "items": items})


_LOG = "\n".join(
    f"[worker] step {i}: compiled module m{i} in {i * 7 % 13 + 1}ms" for i in range(80)
)

STUCK = "repeat consecutive"
STUCK_SAME = "repeat consecutive no_progress"
STORM = "retry_storm repeat tool_call_error"

SCENARIOS: list[Scenario] = [
    # --- progress: the status moves -------------------------------------------------------------
    _scenario(
        "job_status_words",
        "",
        "chat",
        [
            ("submit_job", {"image": "etl:4.2"}, ok("accepted as job 8812")),
            *_poll(
                "job_status",
                {"job_id": 8812},
                ["queued", "running 30%", "running 70%", "done"],
            ),
        ],
    ),
    _scenario(
        "pipeline_stages",
        "",
        "tools",
        _poll(
            "pipeline_state",
            {"pipeline": "web-release", "run": 57},
            [
                "pending: waiting for a runner",
                "running: stage 2/5 (unit tests)",
                "running: stage 4/5 (integration)",
                "success: all 5 stages passed",
            ],
        ),
    ),
    _scenario(
        "export_percentages",
        "",
        "chat",
        _poll(
            "export_progress",
            {"export": "crm-contacts"},
            ["export 12% complete", "export 47% complete", "export 88% complete", "export ready"],
        ),
    ),
    _scenario(
        "upload_counter",
        "",
        "workflow",
        _poll(
            "upload_status",
            {"batch": "photos-2026-05"},
            ["3 of 40 files uploaded", "17 of 40 files uploaded", "40 of 40 files uploaded"],
        ),
    ),
    _scenario(
        "json_changing_field",
        "",
        "chat",
        _poll(
            "describe_deployment",
            {"name": "checkout", "namespace": "shop"},
            [
                json.dumps({"name": "checkout", "phase": "Progressing", "readyReplicas": r})
                for r in (0, 1, 2)
            ]
            + [json.dumps({"name": "checkout", "phase": "Available", "readyReplicas": 3})],
        ),
    ),
    _scenario(
        "json_long_listing",
        "",
        "tools",
        _poll("list_nodes", {"cluster": "eu-2"}, [_listing(n) for n in (40, 52, 60)]),
    ),
    _scenario(
        "queue_position_short",
        "",
        "chat",
        _poll("queue_position", {"ticket": "T-4471"}, ["3", "2", "1", "0"]),
    ),
    _scenario(
        "status_and_clock_move",
        "",
        "workflow",
        _poll(
            "check_build",
            {"build": "b-901"},
            ["queued @ 10:00:01", "compiling @ 10:00:31", "linking @ 10:01:02", "ok @ 10:01:40"],
        ),
    ),
    _scenario(
        "download_bytes",
        "",
        "chat",
        _poll(
            "transfer_status",
            {"transfer": "tx-77"},
            ["1.2 MB of 10 MB", "4.8 MB of 10 MB", "9.1 MB of 10 MB", "complete: 10 MB"],
        ),
    ),
    _scenario(
        "order_tracking",
        "",
        "chat",
        [
            ("find_order", {"email": "ana@example.org"}, ok("order 55-1932")),
            *_poll(
                "track_order",
                {"order": "55-1932"},
                ["processing", "shipped", "out for delivery", "delivered at the front door"],
            ),
        ],
    ),
    _scenario(
        "ten_polls_within_budget",
        "",
        "tools",
        _poll(
            "rollout_status",
            {"service": "search-api"},
            [f"rollout {p}% of pods updated" for p in (5, 15, 25, 40, 55, 65, 75, 85, 95, 100)],
        ),
    ),
    _scenario(
        "two_jobs_alternating",
        "",
        "chat",
        [
            row
            for step in range(3)
            for row in (
                ("job_status", {"job_id": "a"}, ok(f"a: {30 * (step + 1)}% done")),
                ("job_status", {"job_id": "b"}, ok(f"b: {20 * (step + 1)}% done")),
            )
        ],
    ),
    _scenario(
        "stream_cursor_same_call",
        "",
        "tools",
        _poll(
            "read_stream",
            {"topic": "payments"},
            [
                json.dumps({"events": [f"evt-{i}" for i in range(s, s + 5)], "more": True})
                for s in (0, 5, 10)
            ]
            + [json.dumps({"events": [], "more": False})],
        ),
    ),
    _scenario(
        "cursor_in_arguments",
        "",
        "chat",
        [
            ("list_repos", {"org": "acme", "after": cursor}, ok(page))
            for cursor, page in (
                (None, "repos 1-30, next: Y3Vyc29yOjMw"),
                ("Y3Vyc29yOjMw", "repos 31-60, next: Y3Vyc29yOjYw"),
                ("Y3Vyc29yOjYw", "repos 61-74, last page"),
            )
        ],
    ),
    _scenario(
        "one_retry_then_success",
        "tool_call_error",
        "chat",
        [
            ("fetch_invoice", {"invoice": "INV-300"}, err("429 Too Many Requests")),
            ("fetch_invoice", {"invoice": "INV-300"}, ok("INV-300: 120.00 EUR, paid")),
        ],
    ),
    _scenario(
        "two_retries_then_success",
        "tool_call_error",
        "tools",
        [
            ("geocode", {"address": "1 Main St, Springfield"}, err("connection reset by peer")),
            "fill",
            ("geocode", {"address": "1 Main St, Springfield"}, err("connection reset by peer")),
            ("geocode", {"address": "1 Main St, Springfield"}, ok("39.78, -89.65")),
        ],
    ),
    _scenario(
        "retry_then_polling",
        "tool_call_error",
        "workflow",
        _poll(
            "index_status",
            {"index": "docs-v3"},
            [err("503 backend unavailable"), "building 20%", "building 60%", "ready"],
        ),
    ),
    # --- stuck: the same result again -----------------------------------------------------------
    _scenario(
        "status_word_identical",
        STUCK_SAME,
        "chat",
        _poll("job_status", {"job_id": 9120}, ["queued", "queued", "queued", "queued"]),
    ),
    _scenario(
        "percentage_stalls",
        STUCK_SAME,
        "tools",
        _poll(
            "export_progress",
            {"export": "ledger-q1"},
            ["export 10% complete", *["export 40% complete"] * 3],
        ),
    ),
    _scenario(
        "timestamp_only_changes",
        STUCK,
        "chat",
        _poll(
            "check_payment",
            {"payment": "pay_31"},
            [f"pending (last checked 2026-06-01T08:1{i}:00Z)" for i in range(4)],
        ),
    ),
    _scenario(
        "json_updated_at_only",
        STUCK,
        "workflow",
        _poll(
            "get_certificate",
            {"domain": "shop.example.com"},
            [
                json.dumps({"domain": "shop.example.com", "state": "validating", "at": t})
                for t in ("2026-06-02T09:00:00+00:00", "2026-06-02T09:00:30+00:00")
            ]
            + [
                json.dumps(
                    {
                        "domain": "shop.example.com",
                        "state": "validating",
                        "at": "2026-06-02T09:01:00+00:00",
                    }
                )
            ],
        ),
    ),
    _scenario(
        "request_uuid_only",
        STUCK,
        "tools",
        _poll(
            "provision_status",
            {"db": "orders-replica"},
            [
                f"creating; request {u}"
                for u in (
                    "6f1d2c4e-0b3a-4e8f-9d21-3c5b7a9e1f02",
                    "a09e7b11-52cd-4f6a-8e3b-d4c2f1a0b9e7",
                    "0c3b8d5f-9e2a-41c7-b6d8-7f1e2a3c4d5b",
                )
            ],
        ),
    ),
    _scenario(
        "epoch_seconds_only",
        STUCK,
        "chat",
        _poll(
            "poll_refund",
            {"refund": "re_88"},
            [
                json.dumps({"refund": "re_88", "status": "pending", "ts": t})
                for t in (1780000000, 1780000060, 1780000120)
            ],
        ),
    ),
    _scenario(
        "clock_time_only",
        STUCK,
        "workflow",
        _poll(
            "wait_for_approval",
            {"request": "CR-1201"},
            [f"still waiting for approver ({t})" for t in ("09:14:05", "09:19:05", "09:24:05")],
        ),
    ),
    _scenario(
        "long_identical_log",
        STUCK_SAME,
        "tools",
        _poll("tail_log", {"job": "compile-7"}, [_LOG, _LOG, _LOG]),
    ),
    _scenario(
        "short_identical_empty",
        STUCK_SAME,
        "chat",
        _poll("inbox_unread", {"folder": "support"}, ["[]", "[]", "[]"]),
    ),
    _scenario(
        "counter_does_not_move",
        STUCK_SAME,
        "workflow",
        _poll(
            "upload_status",
            {"batch": "scans-11"},
            ["12 of 90 files uploaded", "12 of 90 files uploaded", "12 of 90 files uploaded"],
        ),
    ),
    _scenario(
        "same_call_spaced_identical",
        "repeat no_progress",
        "chat",
        [
            ("lookup_sku", {"sku": "A-100"}, ok("A-100: out of stock")),
            "fill",
            ("lookup_sku", {"sku": "A-100"}, ok("A-100: out of stock")),
            "fill",
            ("lookup_sku", {"sku": "A-100"}, ok("A-100: out of stock")),
        ],
    ),
    _scenario(
        "cursor_stuck_same_page",
        STUCK_SAME,
        "tools",
        _poll(
            "next_page",
            {"feed": "audit"},
            [json.dumps({"entries": ["e-40", "e-41"], "next": "cur_40"})] * 3,
        ),
    ),
    _scenario(
        "progress_then_frozen_json",
        STUCK,
        "chat",
        _poll(
            "describe_stack",
            {"stack": "networking"},
            [
                json.dumps({"stack": "networking", "status": "CREATE_IN_PROGRESS", "done": 2}),
                json.dumps({"stack": "networking", "status": "CREATE_IN_PROGRESS", "done": 5}),
                json.dumps({"stack": "networking", "status": "CREATE_IN_PROGRESS", "done": 5}),
            ],
        ),
    ),
    _scenario(
        "polls_past_the_budget",
        STUCK,
        "tools",
        _poll(
            "replication_lag",
            {"replica": "r2"},
            [f"lag {s} seconds" for s in (300, 280, 260, 240, 220, 200, 180, 160, 140, 120, 100)],
        ),
    ),
    _scenario(
        "retries_never_succeed",
        STORM,
        "chat",
        _poll(
            "send_email",
            {"to": "ops@example.org", "template": "outage"},
            [err("SMTP 421 try again later")] * 3,
        ),
    ),
    _scenario(
        "four_failures_then_success",
        STORM,
        "tools",
        _poll(
            "charge_card",
            {"customer": "cus_12", "amount": 4200},
            [err("gateway timeout")] * 4 + ["charged: ch_9"],
        ),
    ),
    _scenario(
        "unrecorded_results_repeat",
        STUCK,
        "chat",
        _poll("job_status", {"job_id": 77}, [None, None, None]),
    ),
]


# --- building the traces ----------------------------------------------------------------------


def _hex(*parts: object, n: int = 16) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:n]


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": str(value)}}


def build_trace(
    index: int, scenario: Scenario
) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """(trace id, OTLP spans in end order, tracecheck steps) of one scenario."""
    trace_id = _hex("polling-corpus", scenario.name, n=32)
    t = T0 + index * 3_600_000 * MS
    spans: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    workflow = _hex(scenario.name, "workflow") if scenario.shape == "workflow" else ""
    agent = _hex(scenario.name, "agent")
    agent_start = t

    def span(  # noqa: PLR0917
        span_id: str,
        parent: str,
        name: str,
        start: int,
        end: int,
        attrs: dict[str, Any],
        error: str | None = None,
    ) -> None:
        doc: dict[str, Any] = {
            "traceId": trace_id,
            "spanId": span_id,
            "parentSpanId": parent,
            "name": name,
            "kind": 3 if name.startswith("chat") else 1,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end),
            "attributes": [_attr(k, v) for k, v in attrs.items()],
        }
        if error is not None:
            doc["status"] = {"code": 2, "message": error}
        spans.append(doc)

    t += 2 * MS
    for n, row in enumerate(scenario.rows):
        if row == "fill":
            tool, args, outcome = "read_note", {"note": f"n{n}"}, ok(f"note {n}: nothing new")
        else:
            assert not isinstance(row, str)
            tool, args, outcome = row
        call_id = f"toolu_{_hex(scenario.name, n, n=12)}"
        if scenario.shape != "tools":
            chat = _hex(scenario.name, "chat", n)
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "claude-sonnet-4",
                "gen_ai.usage.input_tokens": 800 + 40 * n,
                "gen_ai.usage.output_tokens": 60,
            }
            if scenario.shape == "chat":
                part = {"type": "tool_call", "id": call_id, "name": tool, "arguments": args}
                message = {"role": "assistant", "parts": [part], "finish_reason": "tool_call"}
                attrs["gen_ai.output.messages"] = json.dumps([message], separators=(",", ":"))
            span(chat, agent, "chat claude-sonnet-4", t, t + 400 * MS, attrs)
            steps.append({"type": "llm_call", "name": "claude-sonnet-4"})
            t += 401 * MS
        tool_span = _hex(scenario.name, "tool", n)
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": json.dumps(args, separators=(",", ":")),
        }
        error = None
        step: dict[str, Any] = {"type": "tool_call", "name": tool, "input": args}
        if outcome is not None and outcome.error is not None:
            error = outcome.error
            attrs["error.type"] = "ToolError"
        elif outcome is not None and outcome.text is not None:
            attrs["gen_ai.tool.call.result"] = outcome.text
            step["output"] = outcome.text
        span(tool_span, agent, f"execute_tool {tool}", t, t + 120 * MS, attrs, error)
        steps.append(step)
        if error is not None:
            steps.append({"type": "error", "name": f"execute_tool {tool}", "error": error})
        t += 30_000 * MS  # a poll every half minute
    agent_attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.agent.name": "operator",
        "corpus.scenario": scenario.name,
    }
    span(agent, workflow, "invoke_agent operator", agent_start, t, agent_attrs)
    if workflow:
        span(
            workflow,
            "",
            "workflow nightly",
            agent_start - MS,
            t + MS,
            {"corpus.scenario": scenario.name},
        )
    return trace_id, spans, steps


def build() -> dict[str, bytes]:
    """Every corpus file, by path relative to this folder."""
    lines, labels, tracecheck = [], {}, []
    for index, scenario in enumerate(SCENARIOS):
        trace_id, spans, steps = build_trace(index, scenario)
        resource = {"attributes": [_attr("service.name", "ops-assistant")]}
        scope = {"scope": {"name": "corpus.polling"}, "spans": spans}
        document = {"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]}
        lines.append(json.dumps(document, separators=(",", ":")))
        labels[trace_id] = sorted(scenario.labels)
        record = {"trace_id": trace_id, "agent_name": "operator", "steps": steps}
        tracecheck.append(json.dumps(record, separators=(",", ":")))
    return {
        "otlp/polling.jsonl": ("\n".join(lines) + "\n").encode(),
        "labels.json": (json.dumps(labels, indent=0, sort_keys=True) + "\n").encode(),
        "tracecheck.jsonl": ("\n".join(tracecheck) + "\n").encode(),
    }


def iter_stale(files: dict[str, bytes]) -> Iterator[str]:
    for rel, data in files.items():
        path = HERE / rel
        if not path.exists() or path.read_bytes() != data:
            yield rel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the files are stale")
    args = parser.parse_args(argv)
    files = build()
    if args.check:
        stale = list(iter_stale(files))
        for rel in stale:
            print(f"stale: {rel}", file=sys.stderr)
        return 1 if stale else 0
    for rel, data in files.items():
        path = HERE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    print(f"{len(SCENARIOS)} traces written to {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
