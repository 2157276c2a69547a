"""`tracehound._accel`, the one door to the C accelerator: what it lists is what the module
exports, the switch reaches every caller, and refusals are counted and exported."""

from __future__ import annotations

import os

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tracehound import _accel, _wire, names
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
    # and `configure`, through which the facade gives the kernels Python's constant: no kernel
    assert exported == {k.name for k in _accel.KERNELS} | {"configure"}
    assert "configure" not in {k.name for k in _accel.KERNELS}


def test_each_kernel_is_listed_once_with_its_reference() -> None:
    listed = [k.name for k in _accel.KERNELS]
    assert len(listed) == len(set(listed))
    assert all(k.reference and k.does for k in _accel.KERNELS)


def test_the_environment_switch_is_read_at_start_up() -> None:
    turned_off = os.environ.get(_accel.PURE_PYTHON_ENV, "").lower() in ("1", "true", "yes")
    if turned_off or _speedups is None:
        assert not _accel.NATIVE and _accel.kernel("decode_key_values") is None
        assert _accel.status().startswith(("off", "not built"))
    else:
        assert _accel.NATIVE and _accel.kernel("decode_key_values") is _speedups.decode_key_values
        assert _accel.status().startswith("in use")


@needs_build
def test_use_native_reaches_every_caller_and_restores() -> None:
    before = _accel.kernel("decode_key_values")
    with _accel.use_native(False):
        assert _accel.kernel("decode_key_values") is None
        with _accel.use_native(True):
            assert _accel.kernel("decode_key_values") is _speedups.decode_key_values
        assert _accel.kernel("decode_key_values") is None
    assert _accel.kernel("decode_key_values") is before
    assert _accel.kernel("no_such_kernel") is None


@needs_build
def test_a_declined_input_is_counted() -> None:
    # a KeyValue field cut short: the C kernel leaves it to upb, which raises its own error
    data = b"\x0a\x05\x0a\x01"
    with _accel.use_native(True):
        assert _speedups.decode_key_values(data, 0, len(data), 1) is None
        before = _accel.fallbacks().get("decode_key_values", 0)
        assert _wire.decode_key_values(data, 0, len(data), 1) is None
        assert _accel.fallbacks()["decode_key_values"] == before + 1
        good = b"\x0a\x03\x0a\x01a"
        assert _wire.decode_key_values(good, 0, len(good), 1) == {"a": None}
        assert _accel.fallbacks()["decode_key_values"] == before + 1
    with _accel.use_native(False):
        assert _wire.decode_key_values(data, 0, len(data), 1) is None
        assert _accel.fallbacks()["decode_key_values"] == before + 1  # the Python path: no refusal


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
