"""What each JSON column holds: the type of its top-level value and of the fields the lab reads.

A bundle's rows are checked against these before import (`problem` names what is wrong), and a
row already in a lab that does not fit is read as if the column were empty (`fits`), so one bad
row never takes a listing down with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from store.schema import SUMMARY_COLUMNS

Check = Callable[[Any], str | None]


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false"}.get(
        type(value), "null" if value is None else "a number"
    )


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and (not isinstance(value, float) or math.isfinite(value))
    )


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool)) or _is_number(value)


def _obj(fields: dict[str, Callable[[Any], bool]] | None = None, what: str = "") -> Check:
    """An object whose named fields, where present and not null, pass their test."""

    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return f"is {_kind(value)}, expected an object"
        for key, ok in (fields or {}).items():
            item = value.get(key)
            if item is not None and not ok(item):
                return f"field {key!r} is {_kind(item)}, expected {what or 'another type'}"
        return None

    return check


def _list_of(ok: Callable[[Any], bool], what: str) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, list):
            return f"is {_kind(value)}, expected a list of {what}"
        for item in value:
            if not ok(item):
                return f"holds {_kind(item)}, expected a list of {what}"
        return None

    return check


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(_is_scalar(v) for v in value.values())


def _engine(value: Any) -> str | None:
    if not isinstance(value, dict):
        return f"is {_kind(value)}, expected an object"
    if not _str_list(value.get("command")):
        return "field 'command' is not a list of text"
    if value.get("env") is not None and not _str_map(value["env"]):
        return "field 'env' is not an object of plain values"
    for key in ("name", "model", "served_model_name", "backend", "vllm_version", "load_format"):
        if value.get(key) is not None and not isinstance(value[key], str):
            return f"field {key!r} is {_kind(value[key])}, expected text"
    return None


def _env(value: Any) -> str | None:
    if not isinstance(value, dict):
        return f"is {_kind(value)}, expected an object"
    if not _str_map(value):
        return "holds a nested value, expected an object of plain values"
    return None


def _integer(value: Any) -> bool:
    return _is_number(value) and float(value).is_integer()


_WORKLOAD_INTS = ("num_requests", "concurrency", "input_len", "output_len", "shared_prefix_len")

# column -> check; None from a check means the value fits.
SHAPES: dict[str, Check] = {
    "values_json": _list_of(_is_scalar, "plain values"),
    "config_json": _obj(),
    "workload_json": _obj({k: _integer for k in _WORKLOAD_INTS}, "a whole number"),
    "engine_json": _engine,
    "argv_json": _list_of(lambda x: isinstance(x, str) or _is_number(x), "text"),
    "env_json": _env,
    "hardware_json": _obj(),
    "startup_json": _obj(),
    "summary_json": _obj({k: _is_number for k in SUMMARY_COLUMNS}, "a number"),
    "health_json": _obj(),
    "itl_json": _list_of(_is_number, "numbers"),
    "reused_from_json": _obj(),
    "engine_identity_json": _obj(),
    "anatomy_json": _obj(),
    "estimate_json": _obj(),
    "resident_json": _obj(),
}


def shape_problem(column: str, value: Any) -> str | None:
    """Why a parsed JSON value does not fit its column, or None (null always fits)."""
    check = SHAPES.get(column)
    if value is None or check is None:
        return None
    return check(value)


def fits(column: str, value: Any) -> bool:
    return shape_problem(column, value) is None
