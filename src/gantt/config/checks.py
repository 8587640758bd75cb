"""Checks several sections share: floats must be finite, and Nova's options that Gantt does not implement are
refused unless at Nova's default."""

from __future__ import annotations

import math

import msgspec
from msgspec import Struct


def finite_floats(values: Struct) -> None:
    for name in values.__struct_fields__:
        value = getattr(values, name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number")


def refuse_without_effect(section: str, values: Struct, options: dict[str, str]) -> None:
    """Nova options that would change a placement in Nova and that Gantt does not implement (``options``: name ->
    why) are accepted at Nova's default, so that a nova.conf that merely repeats it loads, and refused otherwise, so
    that no operator believes a setting is in force when it is not. (Those that change nothing Gantt decides:
    gantt.config.novaconf.NOT_USED.)"""
    defaults = {f.name: f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
                for f in msgspec.structs.fields(type(values))}
    for name, why in options.items():
        if getattr(values, name) != defaults[name]:
            raise ValueError(f"[{section}] {name} = {getattr(values, name)!r} would change decisions in Nova, and "
                             f"Gantt does not implement it ({why}); remove it or leave Nova's default "
                             f"({defaults[name]!r})")
