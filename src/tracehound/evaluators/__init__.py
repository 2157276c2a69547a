"""Evaluators: the protocol (`base`) and the built-in evaluators."""

from tracehound.evaluators.base import (
    PLUGIN_GROUP,
    EvaluationResult,
    Evaluator,
    PluginError,
    SafeEvaluator,
    TraceInfo,
    load_plugins,
)

__all__ = [
    "PLUGIN_GROUP",
    "EvaluationResult",
    "Evaluator",
    "PluginError",
    "SafeEvaluator",
    "TraceInfo",
    "load_plugins",
]
