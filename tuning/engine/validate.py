"""Every value a user types for a parameter passes through here before any process starts:
`validate_value` (one value), `validate_config` (a whole configuration), `check_starts` (each
start of an experiment), `parse_values` (a `--values` list) and `parse_assignments`
(`--set NAME=VALUE`). A hostile or malformed value (NaN, a
flag smuggled in as a value, shell metacharacters, code or a file named inside JSON) is refused
with a message the UI can show next to the field."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from core.units import parse_bytes
from tuning.engine.flags.policy import CODE
from tuning.engine.params import (
    CPU_KV_ENV,
    KV_BUDGET_FLAGS,
    Learned,
    Param,
    ParamError,
    get_param,
)
from tuning.engine.value_text import (
    Item,
    ambiguous_split,
    format_value,
    json_object_text,
    list_elements,
    list_text,
    value_items,
)

# `module.Class`, `pkg.mod:attr`: what vLLM imports by name (resolve_obj_by_qualname)
_QUALNAME = re.compile(r"^[A-Za-z_]\w*([.:][A-Za-z_]\w*)+$")
_SAFE_TEXT = re.compile(r"^[A-Za-z0-9_.]+$")
_PRINTABLE = re.compile(r"^[\x21-\x7e]+$")  # a learned text flag's value: one argv item, no space


def _reject_text(param: Param, text: str) -> None:
    if text.startswith("-") and not (param.type in ("int", "float") and param.source != "curated"):
        raise ParamError(f"{param.name}: value {text!r} starts with '-' (it would read as a flag)")
    if param.type == "json":
        return  # one argv item, parsed as JSON below
    if param.type == "text" and _PRINTABLE.match(text):
        return
    if not _SAFE_TEXT.match(text):
        raise ParamError(
            f"{param.name}: value {text!r} has characters other than letters, digits, '_' and '.'"
        )


def _json_value(param: Param, raw: Any) -> str:
    """A dict-valued flag's value as compact JSON, its keys held to the flag policy."""
    try:
        return json_object_text(raw, param.code_keys)
    except ValueError as exc:
        raise ParamError(f"{param.name}: {exc}") from None


def validate_value(name: str, raw: Any, learned: Learned | None = None) -> Any:
    """Return the typed value of `raw` for parameter `name`, or raise ParamError saying why not."""
    param = get_param(name, learned)
    if param.type == "list":
        return _list_value(param, raw)
    return _typed(param, raw)


def _list_value(param: Param, raw: Any) -> str:
    """A list-valued flag's value as its stored text (compact JSON), each element typed and
    checked as a value of the element's type."""
    if raw is None:
        raise ParamError(f"{param.name}: a value is required")
    try:
        elements = list_elements(raw)
    except ValueError as exc:
        raise ParamError(f"{param.name}: {exc}") from None
    if not elements and param.nargs != "*":
        raise ParamError(f"{param.name}: an empty list; give at least one item, as [1,2,4,8]")
    one = replace(param, type=param.item or "text", item=None, nargs=None)
    numbers = one.type in ("int", "float", "bytes")
    typed = [
        _typed(one, e if numbers and not isinstance(e, str) else format_value(e)) for e in elements
    ]
    try:
        return list_text(typed)
    except ValueError as exc:
        raise ParamError(f"{param.name}: {exc}") from None


def _typed(param: Param, raw: Any) -> Any:
    """`raw` as a value of `param`'s own (not list) type."""
    if raw is None:
        raise ParamError(f"{param.name}: a value is required")
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            raise ParamError(f"{param.name}: empty value")
        if param.names_code and text not in param.choices and _QUALNAME.match(text):
            # a class path beside the flag's named options
            raise ParamError(
                f"{param.name}: {text!r} is a class to import (its own choices: "
                f"{', '.join(param.choices)}): never tuned by the lab: {CODE}"
            )
        # '1 GiB' is one value: the space inside a byte count is not a character of the argv
        _reject_text(param, "".join(text.split()) if param.type == "bytes" else text)
    else:
        text = None
    value: Any
    if param.type == "bool":
        if isinstance(raw, bool):
            return raw
        if text is not None and text.lower() in ("true", "1", "yes", "on"):
            return True
        if text is not None and text.lower() in ("false", "0", "no", "off"):
            return False
        raise ParamError(f"{param.name}: expected true or false, got {raw!r}")
    if param.type == "json":
        return _json_value(param, raw)
    if param.type == "text":
        if text is None:
            raise ParamError(f"{param.name}: expected text, got {raw!r}")
        return text
    if param.type == "choice":
        if text is None or text not in param.choices:
            raise ParamError(f"{param.name}: {raw!r} is not {param.describe_range()}")
        return text
    if isinstance(raw, bool):
        raise ParamError(f"{param.name}: expected a number, got a boolean")
    try:
        if param.type == "bytes":
            value = parse_bytes(text) if text is not None else raw
            if isinstance(value, float):
                if not math.isfinite(value) or value != int(value):
                    raise ValueError(raw)
                value = int(value)
            if not isinstance(value, int):
                raise ValueError(raw)
        elif param.type == "int":
            if text is not None:
                value = int(text)
            elif isinstance(raw, float):
                if not math.isfinite(raw) or raw != int(raw):
                    raise ValueError(raw)
                value = int(raw)
            elif isinstance(raw, int):
                value = raw
            else:
                raise ValueError(raw)
        else:
            value = float(text) if text is not None else raw
            if not isinstance(value, (int, float)):
                raise ValueError(raw)
            value = float(value)
    except (ValueError, TypeError, OverflowError):
        raise ParamError(f"{param.name}: {raw!r} is not a valid {param.type}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ParamError(f"{param.name}: {raw!r} is not a finite number")
    if param.minimum is not None and value < param.minimum:
        raise ParamError(f"{param.name}: {value} is below the minimum {param.minimum:g}")
    if param.maximum is not None and value > param.maximum:
        raise ParamError(f"{param.name}: {value} is above the maximum {param.maximum:g}")
    return value


def validate_config(
    config: Mapping[str, Any], backend: str | None = None, learned: Learned | None = None
) -> dict[str, Any]:
    """Validate every key of a server configuration; workload keys are not allowed here."""
    out: dict[str, Any] = {}
    for key, raw in config.items():
        param = get_param(key, learned)
        if param.kind == "workload":
            raise ParamError(f"{param.name} is a workload setting, not a server flag")
        if backend is not None and backend not in param.backends:
            raise ParamError(f"{param.name} is not honoured by the {backend} backend")
        out[param.name] = validate_value(param.name, raw, learned)
    _refuse_ignored_budget(out)
    return out


def check_starts(
    config: Mapping[str, Any], param: Param, values: Iterable[Any], backend: str | None = None
) -> None:
    """Each start of an experiment as it will be launched: the validated baseline `config` with
    one of the validated `values` of server parameter `param` (e.g. two KV budgets meeting)."""
    if backend is not None and backend not in param.backends:
        raise ParamError(f"{param.name} is not honoured by the {backend} backend")
    for value in values:
        _refuse_ignored_budget({**config, param.name: value})


def _refuse_ignored_budget(config: Mapping[str, Any]) -> None:
    """Two KV budgets in one configuration: the engine would apply one and ignore the other."""
    flags = [name for name in KV_BUDGET_FLAGS if name in config]
    if CPU_KV_ENV in config and flags:
        raise ParamError(
            f"{flags[0]} and {CPU_KV_ENV} both set the KV-cache budget; on the CPU backend the "
            f"environment variable wins and {flags[0]} would be ignored: set only one"
        )
    if len(flags) == 2:
        raise ParamError(
            "kv-cache-memory-bytes and gpu-memory-utilization both set the KV-cache budget; "
            "vLLM ignores gpu-memory-utilization when kv-cache-memory-bytes is given: set only one"
        )


def _bytes(name: str, text: str) -> bool:
    """Whether `text` is a byte count ('1 GiB') for a bytes-typed parameter `name`."""
    try:
        if get_param(name).type != "bytes":
            return False
        parse_bytes(text)
    except ValueError:
        return False
    return True


def parse_values(name: str, text: str | Iterable[Any], learned: Learned | None = None) -> list[Any]:
    """'2,16' -> [2, 16], each validated; the UI calls this as the user types. The list syntax
    (JSON values, text in double quotes holding commas) is tuning.engine.value_text's."""
    try:
        found = value_items(text) if isinstance(text, str) else [Item(i) for i in text]
    except ValueError as exc:
        raise ParamError(f"{name}: {exc}") from None
    if not found:
        raise ParamError(f"{name}: give at least one value")
    items = [item.text for item in found]
    param = _known(name, learned)
    bare = [i for i in found if i.quoted or not str(i.text).startswith("[")]
    if param is not None and param.type == "list" and isinstance(text, str) and bare:
        raise ParamError(f"{param.name} {_bracket_hint(found, bare[0])}")
    spaced = [i.text for i in found if not i.quoted and _spaced(name, i.text)]
    if spaced:
        raise ParamError(f"{name}: separate values with commas: {','.join(spaced[0].split())}")
    if (
        isinstance(text, str)  # a list is split already
        and param
        and param.type == "text"
        and (why := ambiguous_split(found, param.help, param.default))
    ):
        raise ParamError(f"{param.name} {why}")
    values = [validate_value(name, item, learned) for item in items]
    seen: list[Any] = []
    for raw, value in zip(items, values, strict=True):
        if value in seen:
            raise ParamError(f"{name}: {raw} is given twice; each value runs once per repeat")
        seen.append(value)
    return values


def _bracket_hint(found: list[Item], bare: Item) -> str:
    """Why a list-valued flag's typed values are not lists, and how to write them."""
    if all(not i.quoted and not str(i.text).startswith("[") for i in found):
        one = "[" + ",".join(" ".join(str(i.text).split()) for i in found).replace(" ", ",") + "]"
        return (
            f"takes a list for each value: write each in brackets, as {one} for one value, or "
            f"{one},[...] for several (on a command line inside single quotes: --values '{one}')"
        )
    return f"takes a list for each value: {str(bare.text)!r} is not in brackets, as [1,2,4,8]"


def _spaced(name: str, text: Any) -> bool:
    """'2 16': two values typed without their comma (a JSON value or '1 GiB' is one)."""
    return (
        isinstance(text, str)
        and len(text.split()) > 1
        and text[:1] not in "{["
        and not _bytes(name, text)
    )


def _known(name: str, learned: Learned | None) -> Param | None:
    try:
        return get_param(name, learned)
    except ParamError:
        return None  # refused by name when the values are checked


def parse_assignments(items: Iterable[str], label: str) -> tuple[dict[str, str], list[str]]:
    """NAME=VALUE items -> (the values, one message per item without '='); blank items are skipped.

    Every malformed item is reported, so a form can list them all at once; names and values are
    checked later, by validate_config.
    """
    values: dict[str, str] = {}
    errors: list[str] = []
    for item in items:
        if not item.strip():
            continue
        if "=" not in item:
            errors.append(f"{label} {item!r} is not NAME=VALUE")
            continue
        key, value = item.split("=", 1)
        values[key.strip()] = value.strip()
    return values, errors
