"""Configuration of the in-process processor: `TRACEHOUND_*` environment variables.

Precedence, written down once (DESIGN §8): explicit arguments (constructor, CLI flags) >
environment variables (`TRACEHOUND_*`; the standard `OTEL_BSP_*` for the queue and batching, read
exactly as `BatchSpanProcessor` reads them) > defaults.

Bad values follow two rules:

- a value that cannot be *parsed* (`TRACEHOUND_MAX_TRACES=lots`, `TRACEHOUND_REDACT=maybe`,
  `OTEL_BSP_MAX_QUEUE_SIZE=big`) is logged and the default is used, as the OTel SDK does;
- a value that parses but is *not allowed* (an unknown mode or evaluator, a negative period, a
  trace timeout shorter than the quiet period, a batch larger than the queue) raises
  `ConfigError` at start-up: the user asked for something definite, and running with something
  else would silently change what is evaluated or exported.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, get_args

from tracehound.engine import EngineConfig
from tracehound.evaluators.base import Evaluator, PluginError
from tracehound.history import HistorySettings, Retention, parse_duration

if TYPE_CHECKING:
    from tracehound.baselines import BaselineStore

__all__ = [
    "TRACEHOUND_BASELINES",
    "TRACEHOUND_CONFIG",
    "TRACEHOUND_ENABLED",
    "TRACEHOUND_EVALUATORS",
    "TRACEHOUND_EVENTS",
    "TRACEHOUND_FORWARDING",
    "TRACEHOUND_HISTORY",
    "TRACEHOUND_HISTORY_CONTENT",
    "TRACEHOUND_HISTORY_MAX_AGE",
    "TRACEHOUND_HISTORY_MAX_RUNS",
    "TRACEHOUND_MAX_SPANS_PER_TRACE",
    "TRACEHOUND_MAX_TEXT_BYTES_PER_TRACE",
    "TRACEHOUND_MAX_TRACES",
    "TRACEHOUND_METRICS",
    "TRACEHOUND_MODE",
    "TRACEHOUND_QUIET_PERIOD",
    "TRACEHOUND_REDACT",
    "TRACEHOUND_REORDER_DELAY",
    "TRACEHOUND_SPAN_EVENTS",
    "TRACEHOUND_TRACE_TIMEOUT",
    "BatchSettings",
    "ConfigError",
    "Forwarding",
    "Mode",
    "ProcessorSettings",
    "build_evaluators",
    "configured_expectations",
    "history_from_env",
    "open_evaluators",
    "reopen_baselines",
]

_logger = logging.getLogger(__name__)

# --- environment variables ------------------------------------------------------------------------

TRACEHOUND_ENABLED = "TRACEHOUND_ENABLED"
"""`true` (default) / `false`. Read by the `opentelemetry-instrument` configurator: `false` gives
the plain OTel SDK set-up, without tracehound."""
TRACEHOUND_MODE = "TRACEHOUND_MODE"
"""`wrap` (default) or `observe`. Read by the `opentelemetry-instrument` configurator: `wrap`
puts tracehound in place of the `BatchSpanProcessor` of every configured span exporter (exported
spans carry tracehound's attributes); `observe` adds it beside them (results leave as events and
metrics only; exported spans are unchanged)."""
TRACEHOUND_FORWARDING = "TRACEHOUND_FORWARDING"
"""Wrap mode: `stream` (default) exports each span once evaluated and holds only the root span
until its trace is finalized; `hold` holds whole traces until finalization."""
TRACEHOUND_EVALUATORS = "TRACEHOUND_EVALUATORS"
"""Comma-separated evaluators (built in: `evidence`, `loops`, and `drift` on request; or installed
plugins). Default: `evidence` and `loops`. An unknown name fails at start-up."""
TRACEHOUND_BASELINES = "TRACEHOUND_BASELINES"
"""Where `drift` keeps its per-agent baselines: a SQLite file path (shared by the processes of one
machine), `memory` (this process only), or a store URL (`tracehound.baselines.open_store`, as for
`tracehound serve --baselines`). Default: `tracehound.baselines.default_store_path()`, the user's
state directory. The same variable as the sidecar's `--baselines` and the `tracehound baseline`
commands read. A store that cannot be opened fails at start-up."""
TRACEHOUND_CONFIG = "TRACEHOUND_CONFIG"
"""Path of the TOML settings file, the one `tracehound serve` reads: the processor reads its
`[expectations]` table (the rules of the `expectations` evaluator, off without one). A bad rule
fails at start-up with the file, line, rule and reason."""
TRACEHOUND_QUIET_PERIOD = "TRACEHOUND_QUIET_PERIOD"
"""Seconds (float) to wait after a trace's root span ended before finalizing it. Default 2."""
TRACEHOUND_TRACE_TIMEOUT = "TRACEHOUND_TRACE_TIMEOUT"
"""Seconds (float) after which an idle trace is finalized, root or not. Default 30."""
TRACEHOUND_REORDER_DELAY = "TRACEHOUND_REORDER_DELAY"
"""Seconds (float): the longest a GenAI span that arrived before its parent (SDK exporters send
children first) waits for its ancestors before it is evaluated — and, in `stream` forwarding,
exported — as it is. Default 1; 0 evaluates every span on arrival; at most the trace timeout."""
TRACEHOUND_MAX_TRACES = "TRACEHOUND_MAX_TRACES"
"""Traces held at once; past it the oldest is finalized early (counted). Default 10000."""
TRACEHOUND_MAX_SPANS_PER_TRACE = "TRACEHOUND_MAX_SPANS_PER_TRACE"
"""Spans evaluated per trace; later ones pass through unevaluated. Default 10000."""
TRACEHOUND_MAX_TEXT_BYTES_PER_TRACE = "TRACEHOUND_MAX_TEXT_BYTES_PER_TRACE"
"""Message/tool/document text indexed per trace, in bytes. Default 16 MiB."""
TRACEHOUND_REDACT = "TRACEHOUND_REDACT"
"""`true` / `false` (default): strip message content, tool arguments/results and retrieval
documents from exported copies, after evaluation (wrap mode)."""
TRACEHOUND_SPAN_EVENTS = "TRACEHOUND_SPAN_EVENTS"
"""`true` / `false` (default): also write each result as a `gen_ai.evaluation.result` span event
on the exported copy of the evaluated span (wrap mode)."""
TRACEHOUND_EVENTS = "TRACEHOUND_EVENTS"
"""`true` (default) / `false`: emit `gen_ai.evaluation.result` log records (OTel Logs SDK)."""
TRACEHOUND_METRICS = "TRACEHOUND_METRICS"
"""`true` (default) / `false`: record tracehound's metrics (OTel Metrics SDK)."""

TRACEHOUND_HISTORY = "TRACEHOUND_HISTORY"
"""`true` (default) / `false`: record each evaluated run in the run history of the baseline
store (when there is one: `drift` is on), for `tracehound runs`."""
TRACEHOUND_HISTORY_MAX_RUNS = "TRACEHOUND_HISTORY_MAX_RUNS"
"""Run records the store keeps at most, over all agents (the oldest go first). Default 10000."""
TRACEHOUND_HISTORY_MAX_AGE = "TRACEHOUND_HISTORY_MAX_AGE"
"""How long a run record is kept: a duration (`30d`, `12h`, `90m`) or seconds. Default 30d."""
TRACEHOUND_HISTORY_CONTENT = "TRACEHOUND_HISTORY_CONTENT"
"""`true` / `false` (default): also keep message content in run records (the run's final answer
and drift's text samples, clipped). Off: records hold ids, names, numbers and findings only."""

# The queue and batching use the standard OTEL_BSP_* variables (same names as the SDK's
# opentelemetry.sdk.environment_variables, spelled here to keep this module import-light).
OTEL_BSP_SCHEDULE_DELAY = "OTEL_BSP_SCHEDULE_DELAY"
OTEL_BSP_MAX_QUEUE_SIZE = "OTEL_BSP_MAX_QUEUE_SIZE"
OTEL_BSP_MAX_EXPORT_BATCH_SIZE = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
OTEL_BSP_EXPORT_TIMEOUT = "OTEL_BSP_EXPORT_TIMEOUT"

Mode = Literal["wrap", "observe"]
Forwarding = Literal["stream", "hold"]


class ConfigError(ValueError):
    """A configuration value that parses but is not allowed (raised at start-up, never later)."""


# --- parsing helpers ----------------------------------------------------------------------------

_TRUE = frozenset(("true", "1", "yes", "on"))
_FALSE = frozenset(("false", "0", "no", "off"))


def _raw(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def env_bool(environ: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _raw(environ, name)
    if raw is None:
        return default
    low = raw.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    _logger.warning(
        "Unable to parse value for %s as a boolean: %r. Defaulting to %s.", name, raw, default
    )
    return default


def env_int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = _raw(environ, name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        _logger.warning(
            "Unable to parse value for %s as integer: %r. Defaulting to %s.", name, raw, default
        )
        return default


def env_float(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = _raw(environ, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if math.isnan(value):  # NaN: unparsable, or literally "nan"
        _logger.warning(
            "Unable to parse value for %s as a number: %r. Defaulting to %s.", name, raw, default
        )
        return default
    return value


def env_choice(
    environ: Mapping[str, str], name: str, choices: tuple[str, ...], default: str
) -> str:
    raw = _raw(environ, name)
    if raw is None:
        return default
    low = raw.lower()
    if low not in choices:
        raise ConfigError(f"{name}={raw!r}: expected one of {', '.join(choices)}")
    return low


# --- batching: the BatchSpanProcessor contract ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchSettings:
    """Queue and batch settings: argument → `OTEL_BSP_*` → BatchSpanProcessor's defaults."""

    max_queue_size: int = 2048
    schedule_delay_millis: float = 5000
    max_export_batch_size: int = 512
    export_timeout_millis: float = 30000

    @classmethod
    def resolve(
        cls,
        max_queue_size: int | None = None,
        schedule_delay_millis: float | None = None,
        max_export_batch_size: int | None = None,
        export_timeout_millis: float | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> BatchSettings:
        """Fill what the caller left None from `OTEL_BSP_*`, then validate as the SDK does."""
        env = os.environ if environ is None else environ
        d = cls()
        settings = cls(
            max_queue_size=max_queue_size
            if max_queue_size is not None
            else env_int(env, OTEL_BSP_MAX_QUEUE_SIZE, d.max_queue_size),
            schedule_delay_millis=schedule_delay_millis
            if schedule_delay_millis is not None
            else env_int(env, OTEL_BSP_SCHEDULE_DELAY, int(d.schedule_delay_millis)),
            max_export_batch_size=max_export_batch_size
            if max_export_batch_size is not None
            else env_int(env, OTEL_BSP_MAX_EXPORT_BATCH_SIZE, d.max_export_batch_size),
            export_timeout_millis=export_timeout_millis
            if export_timeout_millis is not None
            else env_int(env, OTEL_BSP_EXPORT_TIMEOUT, int(d.export_timeout_millis)),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        # The same checks (and messages) as BatchSpanProcessor._validate_arguments.
        if self.max_queue_size <= 0:
            raise ValueError("max_queue_size must be a positive integer.")
        if self.schedule_delay_millis <= 0:
            raise ValueError("schedule_delay_millis must be positive.")
        if self.max_export_batch_size <= 0:
            raise ValueError("max_export_batch_size must be a positive integer.")
        if self.max_export_batch_size > self.max_queue_size:
            raise ValueError("max_export_batch_size must be less than or equal to max_queue_size.")
        if self.export_timeout_millis < 0:
            raise ValueError("export_timeout_millis must not be negative.")


# --- tracehound settings ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessorSettings:
    """What the processor does, beyond batching. `from_env` reads the `TRACEHOUND_*` variables."""

    enabled: bool = True
    mode: Mode = "wrap"
    forwarding: Forwarding = "stream"
    evaluators: tuple[str, ...] | None = None
    """Evaluator names; None: every built-in evaluator (`drift` only when named)."""
    baselines: str | None = None
    """The baseline store of `drift` (see `TRACEHOUND_BASELINES`); None: the default file."""
    config_file: str | None = None
    """The settings file whose `[expectations]` rules are checked (`TRACEHOUND_CONFIG`)."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    redact: bool = False
    span_events: bool = False
    events: bool = True
    metrics: bool = True
    history: HistorySettings = field(default_factory=HistorySettings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ProcessorSettings:
        env = os.environ if environ is None else environ
        d = EngineConfig()
        trace_timeout = env_float(env, TRACEHOUND_TRACE_TIMEOUT, d.trace_timeout)
        reorder_delay = env_float(env, TRACEHOUND_REORDER_DELAY, d.reorder_delay)
        if not 0 <= reorder_delay <= trace_timeout:
            raise ConfigError(
                f"reorder_delay (from env {TRACEHOUND_REORDER_DELAY}): {reorder_delay} is not "
                f"a number of seconds within [0, trace_timeout = {trace_timeout}]"
            )
        try:
            engine = EngineConfig(
                quiet_period=env_float(env, TRACEHOUND_QUIET_PERIOD, d.quiet_period),
                trace_timeout=trace_timeout,
                reorder_delay=reorder_delay,
                max_traces=env_int(env, TRACEHOUND_MAX_TRACES, d.max_traces),
                max_spans_per_trace=env_int(
                    env, TRACEHOUND_MAX_SPANS_PER_TRACE, d.max_spans_per_trace
                ),
                max_text_bytes_per_trace=env_int(
                    env, TRACEHOUND_MAX_TEXT_BYTES_PER_TRACE, d.max_text_bytes_per_trace
                ),
                finalized_cache_size=d.finalized_cache_size,
            )
        except ValueError as exc:
            raise ConfigError(f"{exc} (from TRACEHOUND_* environment variables)") from None
        raw_evaluators = _raw(env, TRACEHOUND_EVALUATORS)
        evaluators = (
            tuple(n.strip() for n in raw_evaluators.split(",") if n.strip())
            if raw_evaluators is not None
            else None
        )
        mode = env_choice(env, TRACEHOUND_MODE, get_args(Mode), "wrap")
        forwarding = env_choice(env, TRACEHOUND_FORWARDING, get_args(Forwarding), "stream")
        return cls(
            enabled=env_bool(env, TRACEHOUND_ENABLED, True),
            mode=mode,  # type: ignore[arg-type]  # checked by env_choice
            forwarding=forwarding,  # type: ignore[arg-type]
            evaluators=evaluators or None,
            baselines=_raw(env, TRACEHOUND_BASELINES),
            config_file=_raw(env, TRACEHOUND_CONFIG),
            engine=engine,
            redact=env_bool(env, TRACEHOUND_REDACT, False),
            span_events=env_bool(env, TRACEHOUND_SPAN_EVENTS, False),
            events=env_bool(env, TRACEHOUND_EVENTS, True),
            metrics=env_bool(env, TRACEHOUND_METRICS, True),
            history=history_from_env(env),
        )


def history_from_env(environ: Mapping[str, str] | None = None) -> HistorySettings:
    """The run-history settings of `TRACEHOUND_HISTORY*` (see their docstrings)."""
    env = os.environ if environ is None else environ
    default = Retention()
    max_age = default.max_age
    raw_age = _raw(env, TRACEHOUND_HISTORY_MAX_AGE)
    if raw_age is not None:
        try:
            numeric = raw_age.replace(".", "", 1).isdigit()
            max_age = float(raw_age) if numeric else parse_duration(raw_age)
        except ValueError:
            _logger.warning(
                "Unable to parse value for %s as a duration: %r. Defaulting to 30d.",
                TRACEHOUND_HISTORY_MAX_AGE,
                raw_age,
            )
    max_runs = env_int(env, TRACEHOUND_HISTORY_MAX_RUNS, default.max_runs)
    try:
        retention = Retention(max_runs=max_runs, max_age=max_age)
    except ValueError as exc:
        raise ConfigError(
            f"{exc} (from env {TRACEHOUND_HISTORY_MAX_RUNS} / {TRACEHOUND_HISTORY_MAX_AGE})"
        ) from None
    return HistorySettings(
        enabled=env_bool(env, TRACEHOUND_HISTORY, True),
        retention=retention,
        content=env_bool(env, TRACEHOUND_HISTORY_CONTENT, False),
    )


DRIFT = "drift"
"""The evaluator name that selects `DriftEvaluator` (it needs a baseline store, opened here)."""


def build_evaluators(evaluator_names: tuple[str, ...] | None) -> list[Evaluator]:
    """Instantiate evaluators by name (built-in first, then plugins); unknown names fail here.

    `drift` keeps its baselines in memory here (nothing to close); `open_evaluators` gives it
    the persistent store of `TRACEHOUND_BASELINES`."""
    return open_evaluators(evaluator_names, "memory")[0]


EXPECTATIONS = "expectations"
"""The evaluator name of the `expectations` rules: it runs whenever rules are configured; naming
it without any rule is an error."""


def configured_expectations(
    config_file: str | None, *, required: bool = False, source: str = TRACEHOUND_CONFIG
) -> Evaluator | None:
    """The `expectations` evaluator of the `[expectations]` table of `config_file` (None: no
    rules, the evaluator is off). A bad rule file raises `ConfigError` naming its line and rule;
    `required` (the evaluator was named) makes a missing table an error too."""
    from tracehound.evaluators.expectations import (
        ExpectationError,
        expectations_evaluator,
        load_expectations,
    )

    try:
        evaluator = expectations_evaluator(load_expectations(config_file)) if config_file else None
    except ExpectationError as exc:
        raise ConfigError(f"expectations (from {source}): {exc}") from None
    if evaluator is None and required:
        raise ConfigError(
            f"the {EXPECTATIONS} evaluator is named but no [expectations] rule is configured "
            f"(set {source} to a TOML file with [[expectations.rule]] tables)"
        )
    return evaluator


def open_evaluators(
    evaluator_names: tuple[str, ...] | None,
    baselines: str | None = None,
    config_file: str | None = None,
) -> tuple[list[Evaluator], BaselineStore | None]:
    """Instantiate evaluators by name, in the given order, as the sidecar does: `drift` gets the
    baseline store at `baselines` (`tracehound.baselines.open_store`; None: the default file);
    `expectations` is added, last, when `config_file` has `[expectations]` rules.

    Returns the evaluators and the store opened for them (None without `drift`): the caller owns
    it and closes it at shutdown. Unknown names, unusable stores and bad rule files raise
    `ConfigError` here.
    """
    named = tuple(evaluator_names or ())
    expectations = configured_expectations(config_file, required=EXPECTATIONS in named)
    if EXPECTATIONS in named:
        named = tuple(n for n in named if n != EXPECTATIONS)
        if not named:  # only the expectations
            return ([expectations] if expectations else []), None
    evaluators, store = _open_named(named or None, baselines)
    if expectations is not None:
        evaluators.append(expectations)
    return evaluators, store


def _open_named(
    evaluator_names: tuple[str, ...] | None, baselines: str | None
) -> tuple[list[Evaluator], BaselineStore | None]:
    from tracehound.cli import select_evaluators

    wanted = list(evaluator_names or ())
    others = [name for name in wanted if name != DRIFT]
    try:
        # Without any name, every built-in evaluator; `drift` is never implied (it writes a file).
        built = iter(select_evaluators(others) if others or not wanted else [])
    except PluginError as exc:
        raise ConfigError(f"{TRACEHOUND_EVALUATORS}: {exc}") from None
    if not wanted:
        return list(built), None
    store: BaselineStore | None = None
    evaluators: list[Evaluator] = []
    for name in wanted:
        if name != DRIFT:
            evaluators.append(next(built))
        elif store is None:  # a repeated `drift` would score (and update) every run twice
            from tracehound.drift import default_embedder
            from tracehound.evaluators.drift import DriftEvaluator

            try:
                embedder = default_embedder()
            except (ImportError, OSError, ValueError) as exc:
                raise ConfigError(f"drift embedder: {exc}") from None
            store = _open_baselines(baselines)
            evaluators.append(DriftEvaluator(store, embedder=embedder))
    return evaluators, store


def _open_baselines(location: str | None) -> BaselineStore:
    from tracehound.baselines import (
        BaselineStoreError,
        default_store_path,
        open_store,
        shown_location,
    )

    try:
        return open_store(location)
    except (BaselineStoreError, OSError, ValueError) as exc:
        if location is None:
            where = f"the default baseline store {str(default_store_path())!r}"
        else:
            where = f"{TRACEHOUND_BASELINES}={shown_location(location)!r}"
        raise ConfigError(f"{where}: {exc}") from None


def reopen_baselines(
    evaluators: Sequence[Evaluator], store: BaselineStore, location: str | None
) -> BaselineStore:
    """In a forked child: the same baseline store on a connection of its own.

    An SQLite connection must not be used by two processes, so the drift evaluators that used
    the parent's store get a new one (a `MemoryStore` is kept: it is the child's own copy).
    Returns the store now in use; on failure, logs and keeps the inherited one.
    """
    from tracehound.baselines import MemoryStore
    from tracehound.evaluators.drift import DriftEvaluator

    if isinstance(store, MemoryStore):
        return store
    try:
        fresh = _open_baselines(location)
    except ConfigError:
        _logger.exception("tracehound: cannot reopen the baseline store after fork")
        return store
    for evaluator in evaluators:
        if isinstance(evaluator, DriftEvaluator) and evaluator.store is store:
            evaluator.store = fresh
    return fresh
