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
from tracehound.evaluators.loops import LoopConfig, LoopEvaluator

__all__ = [
    "PLUGIN_GROUP",
    "EvaluationResult",
    "Evaluator",
    "LoopConfig",
    "LoopEvaluator",
    "PluginError",
    "SafeEvaluator",
    "TraceInfo",
    "load_plugins",
]
