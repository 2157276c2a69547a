"""Regenerate the live framework captures in tests/fixtures/frameworks/ (and their manifest).

Each framework gets its own pinned virtualenv under .venvs/frameworks/<name>/ (made or reused),
and its driver (scripts/frameworks/drivers/<name>.py) runs there against the scripted fake
OpenAI server (fake_llm.py) on 127.0.0.1. The drivers write one OTLP/JSON line per scenario; this
script adds each capture's ground truth, from scenarios.py and from what the real tool functions
returned, to manifest.json.

    python scripts/frameworks/capture.py                     # every framework
    python scripts/frameworks/capture.py --only strands,smolagents
    python scripts/frameworks/capture.py --list
    python scripts/frameworks/capture.py --check --only strands   # structure vs committed

Stdlib only; runs with any Python >= 3.10 that has venv.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from otlp_shape import diff_summary, structure  # noqa: E402
from scenarios import (  # noqa: E402
    NEW_SCENARIOS,
    SCENARIOS,
    Scenario,
    expected_tool_calls,
    with_agent_call_arguments,
)

FIXTURES = ROOT / "tests" / "fixtures" / "frameworks"
MANIFEST = FIXTURES / "manifest.json"
VENVS = ROOT / ".venvs" / "frameworks"
DRIVERS = HERE / "drivers"
VENV_PYTHON = os.environ.get("FRAMEWORK_CAPTURE_PYTHON", "python3.11")

# what every driver needs to write OTLP/JSON
OTEL = ["opentelemetry-sdk==1.45.1", "opentelemetry-exporter-otlp-proto-common==1.45.1"]
SEMCONV = "OTEL_SEMCONV_STABILITY_OPT_IN"
CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ADK_SPANS = "ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS"
ADK_NONE = (
    "neither the spans nor the log records carry message or tool content (only the tool "
    "definitions)"
)


@dataclass(frozen=True)
class Variant:
    name: str  # "" for the framework's only variant
    env: dict[str, str] = field(default_factory=dict)
    driver_args: tuple[str, ...] = ()
    scenarios: tuple[str, ...] | None = None  # None: the framework's scenarios
    # set when the instrumentation records no message or tool content: what it lacks
    no_content: str = ""


@dataclass(frozen=True)
class Framework:
    name: str
    requirements: tuple[str, ...]
    instrumentation: str
    scenarios: tuple[str, ...]
    variants: tuple[Variant, ...] = (Variant(""),)
    timeout_s: int = 300
    driver: str | None = None  # default: drivers/<name>.py
    # installed first with --no-deps (a package whose own pins pip cannot resolve)
    no_deps: tuple[str, ...] = ()

    @property
    def driver_path(self) -> Path:
        return DRIVERS / (self.driver or f"{self.name}.py")

    def stem(self, variant: Variant) -> str:
        return f"{self.name}_{variant.name}" if variant.name else self.name


FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        Framework(
            name="strands",
            requirements=("strands-agents[openai]==1.62.0", "openai==2.54.0", *OTEL),
            instrumentation="strands-agents built-in telemetry (strands.telemetry)",
            scenarios=("loop", "clean", "nested", *NEW_SCENARIOS),
            variants=(
                Variant("default", {SEMCONV: ""}),
                Variant("latest", {SEMCONV: "gen_ai_latest_experimental"}),
                Variant(
                    "latest_attrs",
                    {SEMCONV: "gen_ai_latest_experimental,gen_ai_span_attributes_only"},
                ),
            ),
        ),
        Framework(
            name="smolagents",
            requirements=(
                "smolagents==1.26.0",
                "openinference-instrumentation-smolagents==0.1.43",
                "openai==2.54.0",
                *OTEL,
            ),
            instrumentation="openinference-instrumentation-smolagents",
            scenarios=("loop", "clean", "nested", *NEW_SCENARIOS),
        ),
        Framework(
            name="llamaindex",
            requirements=(
                "llama-index-core==0.14.25",
                "llama-index-llms-openai==0.8.3",
                "openinference-instrumentation-llama-index==4.6.1",
                "openai==2.54.0",
                *OTEL,
            ),
            instrumentation="openinference-instrumentation-llama-index",
            scenarios=("loop", "clean", "nested", "rag", *NEW_SCENARIOS),
        ),
        *(
            Framework(
                name=f"langgraph_{instrumentation}",
                requirements=(
                    "langgraph==1.2.24",
                    "langchain==1.5.2",
                    "langchain-core==1.8.3",
                    "langchain-openai==1.7.4",
                    "openai==3.57.0",
                    "numpy==2.4.6",  # langchain-core's in-memory vector store needs it
                    package,
                    *OTEL,
                ),
                instrumentation=package.split("==")[0],
                driver="langgraph_agents.py",
                scenarios=("loop", "clean", "nested", *NEW_SCENARIOS),
                variants=(
                    Variant(
                        "react",
                        driver_args=("--agent", "react", "--instrumentation", instrumentation),
                    ),
                    Variant(
                        "create_agent",
                        driver_args=(
                            "--agent",
                            "create_agent",
                            "--instrumentation",
                            instrumentation,
                        ),
                    ),
                    Variant(
                        "chain",
                        driver_args=("--agent", "chain", "--instrumentation", instrumentation),
                        scenarios=("rag",),
                    ),
                ),
            )
            for instrumentation, package in (
                ("openinference", "openinference-instrumentation-langchain==0.1.80"),
                ("traceloop", "opentelemetry-instrumentation-langchain==0.62.4"),
            )
        ),
        Framework(
            name="openai_agents",
            requirements=(
                "openai-agents==0.24.0",
                "openai==3.57.0",
                "openinference-instrumentation-openai-agents==2.6.0",
                *OTEL,
            ),
            instrumentation="openinference-instrumentation-openai-agents",
            scenarios=("loop", "clean", "nested", *NEW_SCENARIOS),
            variants=(
                Variant("chat", driver_args=("--model", "chat")),
                Variant("chat_stream", driver_args=("--model", "chat", "--stream")),
                Variant("responses", driver_args=("--model", "responses")),
                Variant("responses_stream", driver_args=("--model", "responses", "--stream")),
            ),
        ),
        Framework(
            name="traceloop_sdk",
            # traceloop-sdk requires ~40 unpinned instrumentation packages that pip cannot
            # resolve together; it is installed alone and only what it imports is added
            no_deps=("traceloop-sdk==0.62.4",),
            requirements=(
                "openai==3.57.0",
                "opentelemetry-instrumentation-openai==0.62.4",
                "opentelemetry-instrumentation-logging==0.66b1",
                "opentelemetry-instrumentation-threading==0.66b1",
                "opentelemetry-instrumentation-requests==0.66b1",
                "opentelemetry-instrumentation-urllib3==0.66b1",
                "opentelemetry-exporter-otlp-proto-grpc==1.45.1",
                "opentelemetry-exporter-otlp-proto-http==1.45.1",
                "opentelemetry-semantic-conventions-ai==0.5.1",
                "aiohttp==3.14.5",
                "colorama==0.4.6",
                "cuid==0.4",
                "Deprecated==1.3.1",
                "httpx==0.28.1",
                "Jinja2==3.1.6",
                "pydantic==2.14.4",
                "tenacity==9.2.1",
                *OTEL,
            ),
            instrumentation="traceloop-sdk decorators + opentelemetry-instrumentation-openai",
            scenarios=("loop", "clean", "nested", *NEW_SCENARIOS),
        ),
        Framework(
            name="google_adk",
            requirements=(
                "google-adk==2.13.0",
                "google-genai==2.34.0",
                "litellm==1.110.2",
                # google-adk holds the OTel SDK below 1.45
                "opentelemetry-sdk==1.44.0",
                "opentelemetry-exporter-otlp-proto-common==1.44.0",
            ),
            instrumentation="google-adk built-in telemetry (google.adk.telemetry)",
            scenarios=("loop", "clean", "nested", *NEW_SCENARIOS),
            variants=(
                # ADK's defaults (content-in-spans switch on); with google-adk 2.13.0 and a
                # LiteLLM model no message or tool content lands on the spans or log records
                Variant(
                    "default", {ADK_SPANS: "true", SEMCONV: "", CAPTURE: ""}, no_content=ADK_NONE
                ),
                # latest GenAI semconv, content only in log records
                Variant(
                    "content_logs",
                    {
                        ADK_SPANS: "false",
                        SEMCONV: "gen_ai_latest_experimental",
                        CAPTURE: "EVENT_ONLY",
                    },
                ),
                # no content anywhere
                Variant(
                    "no_content",
                    {
                        ADK_SPANS: "false",
                        SEMCONV: "gen_ai_latest_experimental",
                        CAPTURE: "NO_CONTENT",
                    },
                    no_content=ADK_NONE,
                ),
            ),
        ),
        Framework(
            name="agent_framework",
            requirements=(
                "agent-framework-core==1.23.0",
                "agent-framework-openai==1.17.0",
                "openai==3.57.0",
                *OTEL,
            ),
            instrumentation="agent-framework-core built-in observability (sensitive data on)",
            scenarios=("loop", "clean", "nested", *NEW_SCENARIOS),
        ),
        Framework(
            name="crewai",
            requirements=(
                "crewai==1.15.30",
                "openinference-instrumentation-crewai==1.1.21",
                "openai==2.54.0",
                *OTEL,
            ),
            instrumentation="openinference-instrumentation-crewai (event-listener mode)",
            scenarios=("loop", "clean", "nested", *NEW_SCENARIOS),
        ),
        Framework(
            name="autogen",
            requirements=(
                "autogen-agentchat==0.7.5",
                "autogen-core==0.7.5",
                "autogen-ext[openai]==0.7.5",
                "openai==3.57.0",
                "openinference-instrumentation-autogen-agentchat==0.1.22",
                *OTEL,
            ),
            instrumentation="autogen-core built-in telemetry / openinference-instrumentation-"
            "autogen-agentchat (one per variant)",
            scenarios=("loop", "clean", "nested", *NEW_SCENARIOS),
            variants=(
                Variant(
                    "builtin",
                    driver_args=("--instrumentation", "builtin"),
                    no_content="autogen-core's own spans carry agent and tool names and ids "
                    "only: no messages, arguments or results",
                ),
                Variant("openinference", driver_args=("--instrumentation", "openinference")),
            ),
        ),
    )
}


# frameworks the brief lists that have no capture yet, and why (copied into the manifest)
NOT_CAPTURED: dict[str, str] = {}


# --- venvs -------------------------------------------------------------------------------------


def venv_python(framework: Framework) -> Path:
    return VENVS / framework.name / "bin" / "python"


def ensure_venv(framework: Framework) -> Path:
    """Make (or reuse) the framework's venv with exactly its pinned requirements."""
    venv = VENVS / framework.name
    stamp = venv / "capture-requirements.txt"
    wanted = "\n".join(framework.requirements) + "\n"
    if framework.no_deps:
        wanted += "# --no-deps: " + " ".join(framework.no_deps) + "\n"
    if stamp.exists() and stamp.read_text() == wanted and venv_python(framework).exists():
        return venv_python(framework)
    if not venv_python(framework).exists():
        subprocess.run([VENV_PYTHON, "-m", "venv", str(venv)], check=True)
    pip = [
        str(venv_python(framework)),
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    if framework.no_deps:
        subprocess.run([*pip, "--no-deps", *framework.no_deps], check=True, timeout=1800)
    requirements = venv / "requirements.txt"
    requirements.write_text("\n".join(framework.requirements) + "\n")
    print(f"[{framework.name}] pip install {' '.join(framework.requirements)}", flush=True)
    subprocess.run([*pip, "-r", str(requirements)], check=True, timeout=1800)
    stamp.write_text(wanted)
    return venv_python(framework)


# --- running drivers ---------------------------------------------------------------------------


def driver_env(variant: Variant) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "OPENAI_", "LANGCHAIN_", "LANGSMITH_", "TRACELOOP_"))
    }
    env.update({"PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"})
    for key, value in variant.env.items():
        if value:
            env[key] = value
        else:
            env.pop(key, None)  # "" = leave the switch unset
    return env


def variant_scenarios(
    framework: Framework, variant: Variant, only: tuple[str, ...] | None = None
) -> list[str]:
    """The variant's scenarios, narrowed to `only` when given (in the variant's order)."""
    scenarios = variant.scenarios or framework.scenarios
    return [s for s in scenarios if only is None or s in only]


def run_driver(
    framework: Framework, variant: Variant, out_dir: Path, scenarios: list[str]
) -> dict[str, Any]:
    python = ensure_venv(framework)
    results = out_dir / f".{framework.stem(variant)}.results.json"
    command = [
        str(python),
        str(framework.driver_path),
        "--out-dir",
        str(out_dir),
        "--results",
        str(results),
        "--stem",
        framework.stem(variant),
        "--scenarios",
        ",".join(scenarios),
        *variant.driver_args,
    ]
    started = time.monotonic()
    print(f"[{framework.stem(variant)}] running driver", flush=True)
    subprocess.run(
        command,
        env=driver_env(variant),
        check=True,
        timeout=framework.timeout_s,
        cwd=tempfile.gettempdir(),
    )
    print(f"[{framework.stem(variant)}] done in {time.monotonic() - started:.1f}s", flush=True)
    payload: dict[str, Any] = json.loads(results.read_text(encoding="utf-8"))
    results.unlink()
    return payload


# --- ground truth ------------------------------------------------------------------------------


def _agent_tree(scenario: Scenario, name: str) -> dict[str, Any]:
    spec = scenario.agent(name)
    return {
        "name": name,
        "tools": list(spec.tools),
        "sub_agents": [_agent_tree(scenario, sub) for sub in spec.sub_agents],
    }


def ground_truth(
    scenario: Scenario, recorded: dict[str, Any], no_content: str = ""
) -> dict[str, Any]:
    """The truth of one capture: the scenario script checked against what the tools recorded."""
    extra = recorded.get("extra", {})
    if "agent_call_arguments" in extra:
        scenario = with_agent_call_arguments(scenario, extra["agent_call_arguments"])
    expected = expected_tool_calls(scenario)
    recorded_calls = recorded["tool_calls"]
    functions_expected = [
        (c["name"], c["arguments"], c["result"], c.get("error", False))
        for c in expected
        if c["kind"] == "function"
    ]
    functions_seen = [
        (c["name"], c["arguments"], c["result"], c.get("error", False))
        for c in recorded_calls
        if c["kind"] == "function"
    ]
    if any(len(t.tool_calls) > 1 for a in scenario.agents for t in a.script.turns):
        # calls of one model response may run concurrently: their start order is the framework's
        functions_expected.sort(key=repr)
        functions_seen.sort(key=repr)
    if functions_seen != functions_expected:
        raise RuntimeError(
            f"{scenario.name}: the tools recorded {functions_seen}, the script asks for "
            f"{functions_expected}"
        )
    final_seen = recorded["final_answer"].strip()
    if final_seen != scenario.final_answer:
        raise RuntimeError(
            f"{scenario.name}: final answer {final_seen!r}, script says {scenario.final_answer!r}"
        )
    truth: dict[str, Any] = {
        "tool_calls": expected,
        "final_answer": scenario.final_answer,
        "agents": extra.get("agents", [_agent_tree(scenario, scenario.main.name)]),
        "is_loop": scenario.is_loop,
        "final_reuses_tool_results": list(scenario.final_reuses),
        "final_reuses_no_tool_result": not (scenario.final_reuses or scenario.final_quotes),
        "model_requests": extra.get("model_requests"),
    }
    if scenario.final_quotes:
        truth["final_quotes"] = list(scenario.final_quotes)
    preambles = [t.preamble for a in scenario.agents for t in a.script.turns if t.preamble]
    if preambles:
        truth["preambles"] = preambles
    if "retrievals" in extra:
        truth["retrievals"] = extra["retrievals"]
    if scenario.notes:
        truth["notes"] = scenario.notes
    if no_content:
        truth["content_captured"] = False
        truth["content_note"] = no_content
    return truth


def _pinned(framework: Framework, versions: dict[str, str]) -> dict[str, str | None]:
    names = [
        r.split("==")[0].split("[")[0].lower()
        for r in (*framework.no_deps, *framework.requirements)
    ]
    keys = [k for k in versions if k.startswith(("opentelemetry", "openinference", "traceloop"))]
    keys += ["openai", "litellm", "protobuf"]
    return {
        n: versions.get(n)
        for n in dict.fromkeys(names + sorted(keys))
        if n in versions or n in names
    }


def manifest_entries(framework: Framework, variant: Variant, payload: dict[str, Any]) -> dict:
    entries = {}
    for recorded in payload["captures"]:
        scenario = SCENARIOS[recorded["scenario"]]
        trace_file = recorded["files"][0]
        entries[trace_file] = {
            "file": trace_file,
            "logs_file": recorded["files"][1] if len(recorded["files"]) > 1 else None,
            "framework": framework.name,
            "variant": variant.name or None,
            "scenario": scenario.name,
            "instrumentation": framework.instrumentation,
            "env": {k: (v or None) for k, v in variant.env.items()},
            "versions": _pinned(framework, payload["versions"]),
            "truth": ground_truth(scenario, recorded, variant.no_content),
        }
    return entries


def load_manifest() -> dict[str, Any]:
    if MANIFEST.exists():
        loaded: dict[str, Any] = json.loads(MANIFEST.read_text(encoding="utf-8"))
        return loaded
    return {"captures": {}, "environments": {}, "not_captured": {}}


def write_manifest(manifest: dict[str, Any]) -> None:
    manifest["captures"] = dict(sorted(manifest["captures"].items()))
    manifest["environments"] = dict(sorted(manifest["environments"].items()))
    MANIFEST.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# --- commands ----------------------------------------------------------------------------------


def capture(frameworks: list[Framework], only: tuple[str, ...] | None = None) -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest()
    for framework in frameworks:
        for variant in framework.variants:
            scenarios = variant_scenarios(framework, variant, only)
            if not scenarios:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                payload = run_driver(framework, variant, Path(tmp), scenarios)
                entries = manifest_entries(framework, variant, payload)
                for name in [n for e in entries.values() for n in (e["file"], e["logs_file"]) if n]:
                    shutil.copyfile(Path(tmp) / name, FIXTURES / name)
            stale = [
                k
                for k, e in manifest["captures"].items()
                if e["framework"] == framework.name
                and e["variant"] == (variant.name or None)
                and e["scenario"] in scenarios
            ]
            for key in stale:
                manifest["captures"].pop(key)
            manifest["captures"].update(entries)
            manifest["environments"][framework.name] = payload["versions"]
            manifest["not_captured"] = dict(NOT_CAPTURED)
            write_manifest(manifest)


def check(frameworks: list[Framework], only: tuple[str, ...] | None = None) -> int:
    """Re-capture into a temporary directory and compare structures with the committed files."""
    changes = []
    for framework in frameworks:
        for variant in framework.variants:
            scenarios = variant_scenarios(framework, variant, only)
            if not scenarios:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                payload = run_driver(framework, variant, Path(tmp), scenarios)
                manifest_entries(framework, variant, payload)  # the truth must still hold
                for name in [n for c in payload["captures"] for n in c["files"]]:
                    committed = FIXTURES / name
                    if not committed.exists():
                        changes.append(f"{name}: not committed")
                        continue
                    summary = diff_summary(structure(committed), structure(Path(tmp) / name))
                    if summary:
                        changes.append(f"{name}: {summary}")
    for line in changes:
        print(f"CHANGED {line}")
    if not changes:
        print(f"structure unchanged for {', '.join(f.name for f in frameworks)}")
    return 1 if changes else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", help="comma-separated framework names")
    parser.add_argument(
        "--scenarios",
        help="comma-separated scenario names (default: each variant's own); the manifest "
        "keeps the other scenarios' entries",
    )
    parser.add_argument("--list", action="store_true", help="list frameworks and variants")
    parser.add_argument(
        "--check",
        action="store_true",
        help="re-capture to a temp dir and compare structure with the committed",
    )
    ns = parser.parse_args()
    if ns.list:
        for f in FRAMEWORKS.values():
            print(f"{f.name}  ({f.instrumentation})")
            for v in f.variants:
                print(f"    {f.stem(v)}: {', '.join(v.scenarios or f.scenarios)}")
        for name, why in NOT_CAPTURED.items():
            print(f"{name}  NOT CAPTURED: {why}")
        return 0
    names = [n for n in (ns.only or ",".join(FRAMEWORKS)).split(",") if n]
    unknown = [n for n in names if n not in FRAMEWORKS]
    if unknown:
        parser.error(f"unknown frameworks {unknown}; --list shows them")
    chosen = [FRAMEWORKS[n] for n in names]
    only = tuple(n for n in ns.scenarios.split(",") if n) if ns.scenarios else None
    unknown = [n for n in only or () if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenarios {unknown}; --list shows them")
    if ns.check:
        return check(chosen, only)
    capture(chosen, only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
