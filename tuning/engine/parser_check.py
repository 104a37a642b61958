"""A learned flag's typed values through the engine's own parser (or its reader of a VLLM_*
variable) before anything restarts: vLLM's own message, on one line, for the first it refuses (a
typo in a JSON field, a choice it lacks). It imports vLLM: 10-30 s the first time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tuning.engine.flags.catalog import CatalogError, Checked, check_in_engine, engine_python
from tuning.engine.params import Param, ParamError, format_value
from tuning.engine.spec import EngineSpec
from tuning.engine.value_text import list_argv


def check_with_engine(
    spec: EngineSpec, learned: Mapping[str, Param], checks: Iterable[tuple[str, Sequence[Any]]]
) -> None:
    """Each (flag, typed values) of the user's vLLM through the engine's own parser (curated ones
    are the lab's to check, and were); ParamError with vLLM's message for the first it refuses.
    It imports vLLM: 10-30 s the first time."""
    todo = [(learned[name], values) for name, values in checks if name in learned]
    if not todo:
        return
    python = engine_python(spec.command)
    for param, values in todo:
        check_values(python, param, values)


def check_values(python: str, param: Param, values: Sequence[Any]) -> None:
    """Every value of a learned flag through the engine's own parser; ParamError with vLLM's
    message for the first it refuses (a typo in a JSON field, a choice it lacks)."""
    if param.source == "curated":
        return
    if param.kind == "env":
        pairs: list[tuple[str, str | list[str] | None]] = [
            (param.env or param.name, format_value(v)) for v in values
        ]
        _refuse_any(param, _checked(python, param, pairs, env=True))
        return
    if param.flag is None:
        return
    argvs: list[tuple[str, str | list[str] | None]] = []
    for value in values:
        if param.type == "bool":
            argvs.append((param.flag if value else "--no-" + param.flag[2:], None))
        elif param.type == "list":
            argvs.append((param.flag, list_argv(value)))
        else:
            argvs.append((param.flag, format_value(value)))
    if not param.negatable:
        argvs = [(flag, v) for flag, v in argvs if not flag.startswith("--no-")]
    _refuse_any(param, _checked(python, param, argvs))


def _checked(
    python: str, param: Param, items: list[tuple[str, str | list[str] | None]], env: bool = False
) -> list[Checked]:
    try:
        return check_in_engine(python, items, env=env)
    except CatalogError as exc:
        raise ParamError(f"{param.name}: {exc}") from None


def _refuse_any(param: Param, checked: list[Checked]) -> None:
    who = "vLLM's own reader of it" if param.kind == "env" else "vLLM's own parser"
    for item in checked:
        if not item.ok:
            raise ParamError(f"{param.name}: refused by {who}: {_one_line(item.error)}")


def _one_line(message: str | None) -> str:
    """vLLM's (pydantic's) message on one line, without its "further information" link."""
    lines = [ln.strip() for ln in (message or "no reason given").splitlines()]
    return "; ".join(ln for ln in lines if ln and not ln.startswith("For further information"))
