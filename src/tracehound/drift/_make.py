"""Making the drift code's frozen dataclasses from all their fields' values."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar, cast

from tracehound import _wire

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["fields_maker"]

_T = TypeVar("_T", bound="DataclassInstance")


def fields_maker(cls: type[_T]) -> Callable[..., _T]:
    """What makes a `cls` instance from the values of all its fields, in their order (those
    not in `__init__` included): the C accelerator's `SlotsMaker`, which stores them in the
    slots without the generated `__init__` (Python code per field, and an `object.__setattr__`
    call per field when frozen); else the class itself.

    For slotted dataclasses without `__post_init__`: the instance is the one the class would
    make with those values.
    """
    names = tuple(f.name for f in fields(cls))
    native = getattr(_wire._native, "SlotsMaker", None)
    if native is not None:
        return cast("Callable[..., _T]", native(cls, names, ()))
    in_init = tuple(f.init for f in fields(cls))

    def make(*values: Any) -> _T:
        out = cls(**{n: v for n, v, i in zip(names, values, in_init, strict=True) if i})
        for name, value, init in zip(names, values, in_init, strict=True):
            if not init:
                object.__setattr__(out, name, value)
        return out

    return make
