"""TRACEHOUND_* configuration: precedence, log-and-default for unparsable values, fail fast for
values that are not allowed."""

from __future__ import annotations

import logging
import re

import pytest

from tracehound.config import BatchSettings, ConfigError, ProcessorSettings, build_evaluators


def test_defaults_without_environment() -> None:
    settings = ProcessorSettings.from_env({})
    assert settings == ProcessorSettings()
    assert (settings.mode, settings.forwarding, settings.redact) == ("wrap", "stream", False)
    assert BatchSettings.resolve(environ={}) == BatchSettings(2048, 5000, 512, 30000)


def test_values_from_environment() -> None:
    settings = ProcessorSettings.from_env(
        {
            "TRACEHOUND_MODE": "Observe",
            "TRACEHOUND_FORWARDING": "hold",
            "TRACEHOUND_EVALUATORS": "loops, evidence",
            "TRACEHOUND_QUIET_PERIOD": "0.5",
            "TRACEHOUND_REORDER_DELAY": "0.2",
            "TRACEHOUND_MAX_TRACES": "7",
            "TRACEHOUND_REDACT": "true",
            "TRACEHOUND_SPAN_EVENTS": "1",
            "TRACEHOUND_METRICS": "off",
            "TRACEHOUND_ENABLED": "false",
        }
    )
    assert (settings.mode, settings.forwarding) == ("observe", "hold")
    assert settings.evaluators == ("loops", "evidence")
    assert (settings.engine.quiet_period, settings.engine.max_traces) == (0.5, 7)
    assert settings.engine.reorder_delay == 0.2
    assert settings.redact and settings.span_events and not settings.metrics
    assert not settings.enabled
    assert [e.name for e in build_evaluators(settings.evaluators)] == ["loops", "evidence"]


def test_unparsable_values_are_logged_and_defaulted(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tracehound.config"):
        settings = ProcessorSettings.from_env(
            {
                "TRACEHOUND_MAX_TRACES": "lots",
                "TRACEHOUND_REDACT": "maybe",
                "TRACEHOUND_QUIET_PERIOD": "soon",
            }
        )
        batch = BatchSettings.resolve(environ={"OTEL_BSP_MAX_QUEUE_SIZE": "big"})
    assert settings.engine.max_traces == 10_000 and settings.redact is False
    assert settings.engine.quiet_period == 2.0
    assert batch.max_queue_size == 2048
    for name in (
        "TRACEHOUND_MAX_TRACES",
        "TRACEHOUND_REDACT",
        "TRACEHOUND_QUIET_PERIOD",
        "OTEL_BSP_MAX_QUEUE_SIZE",
    ):
        assert name in caplog.text


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"TRACEHOUND_MODE": "observer"}, "TRACEHOUND_MODE='observer'"),
        ({"TRACEHOUND_FORWARDING": "batch"}, "TRACEHOUND_FORWARDING"),
        ({"TRACEHOUND_QUIET_PERIOD": "-1"}, "quiet_period must be >= 0"),
        (
            {"TRACEHOUND_QUIET_PERIOD": "40", "TRACEHOUND_TRACE_TIMEOUT": "10"},
            "trace_timeout must be",
        ),
        ({"TRACEHOUND_MAX_TRACES": "0"}, "max_traces must be >= 1"),
        (
            {"TRACEHOUND_REORDER_DELAY": "-1"},
            "reorder_delay (from env TRACEHOUND_REORDER_DELAY): -1.0 is not",
        ),
        (
            {"TRACEHOUND_REORDER_DELAY": "20", "TRACEHOUND_TRACE_TIMEOUT": "10"},
            "reorder_delay (from env TRACEHOUND_REORDER_DELAY): 20.0 is not a number of "
            "seconds within [0, trace_timeout = 10.0]",
        ),
    ],
)
def test_values_not_allowed_fail_at_start(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        ProcessorSettings.from_env(environ)


def test_unknown_evaluator_fails_at_start() -> None:
    with pytest.raises(ConfigError, match="TRACEHOUND_EVALUATORS: unknown evaluator plugin"):
        build_evaluators(("loops", "no-such-evaluator"))


def test_batch_arguments_win_and_are_validated() -> None:
    env = {"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_SCHEDULE_DELAY": "250"}
    batch = BatchSettings.resolve(max_queue_size=10, max_export_batch_size=5, environ=env)
    assert (batch.max_queue_size, batch.schedule_delay_millis, batch.max_export_batch_size) == (
        10,
        250,
        5,
    )
    with pytest.raises(ValueError, match="max_queue_size must be a positive integer"):
        BatchSettings.resolve(max_queue_size=0, environ={})
