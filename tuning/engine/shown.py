"""A parameter's value as a person reads it: a bytes-typed one in binary units ('1 GiB'), anything
else as the registry writes it. For tables, chips, labels, charts and reports only: an argv, a
stored value and a command line keep `format_value`'s canonical text ('1073741824')."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.units import format_bytes, parse_bytes
from tuning.engine.params import Learned, format_value, get_param


def show_value(name: str | None, value: Any, learned: Learned | None = None) -> str:
    """`value` of parameter `name` for people; an unknown parameter's or an unparsable value as
    `format_value` writes it."""
    if value is None:
        return "unset"
    try:
        param = get_param(name, learned) if name else None
        if param is not None and param.type == "bytes" and not isinstance(value, bool):
            n = value if isinstance(value, (int, float)) else parse_bytes(str(value))
            return format_bytes(n)
    except ValueError:  # ParamError is one
        pass
    return format_value(value)


def run_value(run: Mapping[str, Any]) -> str:
    """A stored run's value (its `param`, `value`) as a person reads it."""
    return show_value(run.get("param"), run.get("value"))
