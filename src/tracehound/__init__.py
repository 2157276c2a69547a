"""tracehound: deterministic, in-flight evaluation of AI-agent traces in OpenTelemetry.

Spans from any GenAI instrumentation (OTel GenAI, OpenInference, OpenLLMetry/Traceloop,
pydantic-ai, Vercel AI SDK) are viewed (`SpanView`), mapped (`normalize`), turned into an ordered
agent trajectory (`Trajectory` of `Step`s grouped in `Run`s) and evaluated by the `Engine`.
"""

from tracehound.conventions import NormalizedSpan, normalize
from tracehound.engine import Engine, EngineConfig, EngineStats, FinalizedTrace, SpanOutcome
from tracehound.evaluators.base import EvaluationResult, Evaluator, TraceInfo, load_plugins
from tracehound.spans import LogView, SpanView
from tracehound.steps import Run, Step, Trajectory, build_trajectory

__version__ = "0.1.0"

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineStats",
    "EvaluationResult",
    "Evaluator",
    "FinalizedTrace",
    "LogView",
    "NormalizedSpan",
    "Run",
    "SpanOutcome",
    "SpanView",
    "Step",
    "TraceInfo",
    "Trajectory",
    "__version__",
    "build_trajectory",
    "load_plugins",
    "normalize",
]
