"""`tracehound._accel`, the one door to the C accelerator: what it lists is what the module
exports, the switch reaches every caller, and refusals are counted and exported."""

from __future__ import annotations

import os

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tracehound import _accel, names
from tracehound.conventions.base import parse_json_value
from tracehound.server._telemetry import ServerMetrics

try:
    from tracehound import _speedups
except ImportError:  # pragma: no cover - CI builds it (test_native_paths checks)
    _speedups = None  # type: ignore[assignment]

needs_build = pytest.mark.skipif(_speedups is None, reason="the C accelerator is not built")


@needs_build
def test_the_kernels_listed_are_exactly_what_the_module_exports() -> None:
    exported = {
        name
        for name in dir(_speedups)
        if not name.startswith("_") and callable(getattr(_speedups, name))
    }
    # and `configure`, through which the facade gives the kernels Python's constants: no kernel
    assert exported == {k.name for k in _accel.KERNELS} | {"configure"}
    assert "configure" not in {k.name for k in _accel.KERNELS}


def test_each_kernel_is_listed_once_with_its_reference() -> None:
    listed = [k.name for k in _accel.KERNELS]
    assert len(listed) == len(set(listed))
    assert all(k.reference and k.does for k in _accel.KERNELS)


def test_the_environment_switch_is_read_at_start_up() -> None:
    turned_off = os.environ.get(_accel.PURE_PYTHON_ENV, "").lower() in ("1", "true", "yes")
    if turned_off or _speedups is None:
        assert not _accel.NATIVE and _accel.kernel("json_loads") is None
        assert _accel.status().startswith(("off", "not built"))
    else:
        assert _accel.NATIVE and _accel.kernel("json_loads") is _speedups.json_loads
        assert _accel.status().startswith("in use")


@needs_build
def test_use_native_reaches_every_caller_and_restores() -> None:
    before = _accel.kernel("json_loads")
    with _accel.use_native(False):
        assert _accel.kernel("json_loads") is None
        with _accel.use_native(True):
            assert _accel.kernel("json_loads") is _speedups.json_loads
        assert _accel.kernel("json_loads") is None
    assert _accel.kernel("json_loads") is before
    assert _accel.kernel("no_such_kernel") is None


@needs_build
def test_a_declined_input_is_counted_and_gets_the_python_answer() -> None:
    # json.loads' own rules for lone surrogates: the C kernel leaves them to Python
    text = '["\\ud800"]'
    with _accel.use_native(True):
        assert _speedups.json_loads(text) is None
        before = _accel.fallbacks().get("json_loads", 0)
        assert parse_json_value(text, "x", []) == ["\ud800"]
        assert _accel.fallbacks()["json_loads"] == before + 1
    with _accel.use_native(False):
        assert parse_json_value(text, "x", []) == ["\ud800"]
        assert _accel.fallbacks()["json_loads"] == before + 1  # the Python path: no refusal


def test_fallbacks_are_exported_by_kernel() -> None:
    _accel.declined("test_kernel")
    reader = InMemoryMetricReader()
    ServerMetrics(MeterProvider(metric_readers=[reader]), "test")
    data = reader.get_metrics_data()
    assert data is not None
    points = {
        point.attributes[names.METRIC_ATTR_KERNEL]: point.value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == names.SERVE_METRIC_ACCELERATOR_FALLBACKS
        for point in metric.data.data_points  # type: ignore[union-attr]
        if point.attributes
    }
    assert points["test_kernel"] == _accel.fallbacks()["test_kernel"] >= 1
