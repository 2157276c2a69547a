"""tracehound: deterministic, in-flight evaluation of AI-agent traces in OpenTelemetry.

Spans from any GenAI instrumentation (OTel GenAI, OpenInference, OpenLLMetry/Traceloop,
pydantic-ai, Vercel AI SDK) are viewed (`SpanView`), mapped (`normalize`), turned into an ordered
agent trajectory (`Trajectory` of `Step`s grouped in `Run`s) and evaluated by the `Engine`.

`TracehoundSpanProcessor` (in-process) and the built-in evaluators are imported from here on
first use, so that `import tracehound` stays cheap and pulls in no OTel SDK.
"""

from typing import TYPE_CHECKING, Any

from tracehound.conventions import NormalizedSpan, normalize
from tracehound.engine import Engine, EngineConfig, EngineStats, FinalizedTrace, SpanOutcome
from tracehound.evaluators.base import EvaluationResult, Evaluator, TraceInfo, load_plugins
from tracehound.spans import LogView, SpanView
from tracehound.steps import Run, Step, Trajectory, build_trajectory

if TYPE_CHECKING:
    from tracehound.evaluators.drift import DriftEvaluator, DriftEvaluatorConfig
    from tracehound.evaluators.evidence import EvidenceEvaluator
    from tracehound.evaluators.loops import LoopConfig, LoopEvaluator
    from tracehound.processor import TracehoundLogProcessor, TracehoundSpanProcessor

# Public names defined in submodules that are imported on first access (PEP 562).
_LAZY = {
    "DriftEvaluator": "tracehound.evaluators.drift",
    "DriftEvaluatorConfig": "tracehound.evaluators.drift",
    "EvidenceEvaluator": "tracehound.evaluators.evidence",
    "LoopConfig": "tracehound.evaluators.loops",
    "LoopEvaluator": "tracehound.evaluators.loops",
    "TracehoundLogProcessor": "tracehound.processor",
    "TracehoundSpanProcessor": "tracehound.processor",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tracehound' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"

__all__ = [
    "DriftEvaluator",
    "DriftEvaluatorConfig",
    "Engine",
    "EngineConfig",
    "EngineStats",
    "EvaluationResult",
    "Evaluator",
    "EvidenceEvaluator",
    "FinalizedTrace",
    "LogView",
    "LoopConfig",
    "LoopEvaluator",
    "NormalizedSpan",
    "Run",
    "SpanOutcome",
    "SpanView",
    "Step",
    "TraceInfo",
    "TracehoundLogProcessor",
    "TracehoundSpanProcessor",
    "Trajectory",
    "__version__",
    "build_trajectory",
    "load_plugins",
    "normalize",
]
