"""From a name the user typed to a parameter the lab can launch: the curated table first, then the
flags of the user's own vLLM (its catalog), never a flag of the deny-list; values checked by the
engine's own parser before anything restarts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from store import connect
from store import engine_flags as cache
from tuning.engine.flags.catalog import (
    FORMAT,
    Catalog,
    CatalogError,
    Checked,
    FlagInfo,
    check_in_engine,
    engine_python,
    read_catalog,
)
from tuning.engine.flags.policy import CODE, flag_refusal, refusal
from tuning.engine.params import (
    PARAMS,
    Param,
    ParamError,
    ValueType,
    format_value,
    get_param,
    suggest,
)
from tuning.engine.spec import EngineSpec, installed_vllm_version
from tuning.engine.validate import parse_values, validate_value

_TYPES: dict[str, ValueType] = {
    "bool": "bool",
    "switch": "bool",
    "choice": "choice",
    "int": "int",
    "float": "float",
    "json": "json",
    "str": "text",
}


def to_param(info: FlagInfo) -> Param:
    """A flag of the user's vLLM as a launchable parameter: no lab ranges, the engine checks."""
    kind: ValueType = _TYPES.get(info.kind, "text")
    if info.name.startswith("VLLM_"):  # an environment knob: set in the server's environment
        return Param(
            name=info.name,
            type=kind,
            help=info.help or "vLLM environment variable, as your vLLM reads it",
            kind="env",
            env=info.name,
            choices=info.choices,
            default=info.default if isinstance(info.default, (bool, int, float, str)) else None,
            source="learned",
            group="environment",
        )
    if info.kind == "bytes":  # vLLM's human-readable ints (1k, 1K, 1G)
        kind = "bytes" if "bytes" in info.name or "memory" in info.name else "int"
    default = info.runnable_default
    choices = info.choices
    if info.names_code:  # a class path or one of its named options: the options only
        kind, choices = "choice", info.options
        default = default if default in choices else None
    return Param(
        name=info.name,
        type=kind,
        help=info.help,
        flag="--" + info.name,
        choices=choices,
        default=default,
        negatable=info.kind == "bool",
        source="learned",
        group=info.group,
        code_keys=info.code_keys,
        names_code=info.names_code,
    )


def why_refused(info: FlagInfo) -> str | None:
    """Why the lab never tunes this flag of the engine: the policy by its name (and kind), or its
    value is a class to import with no named option to choose instead."""
    if why := flag_refusal(info.name, info.kind):
        return why
    return CODE if info.names_code and not info.options else None


def flag_status(info: FlagInfo) -> tuple[str, str | None]:
    """("curated" | "tunable" | "refused", why refused): how the lab treats one flag of the
    engine, for the CLI's listing and New experiment's picker alike."""
    if info.name in PARAMS:
        return "curated", None
    if why := why_refused(info):
        return "refused", why
    if info.nargs is not None:
        return "refused", f"takes several values at once (nargs {info.nargs})"
    return "tunable", None


def resolve(name: str, catalog: Catalog | None) -> Param:
    """The parameter `name` means, or ParamError saying why it cannot be tuned."""
    key = name.strip().removeprefix("--")
    try:
        return get_param(key)
    except ParamError:
        pass
    if why := refusal(key):
        raise ParamError(f"{key}: never tuned by the lab: {why}")
    info = None
    if catalog is not None:
        info = catalog.env.get(key) if key.startswith("VLLM_") else catalog.get(key)
    if info is None:
        known = [*PARAMS, *(catalog.flags if catalog else ()), *(catalog.env if catalog else ())]
        where = f"vLLM {catalog.vllm_version}" if catalog else "the lab's table"
        raise ParamError(f"unknown parameter {key!r} in {where}{suggest(key, known)}")
    if why := why_refused(info):
        raise ParamError(f"{info.name}: never tuned by the lab: {why}")
    if info.nargs is not None:
        raise ParamError(
            f"{info.name} takes several values at once (nargs {info.nargs}), which the lab "
            "cannot sweep yet; a JSON-valued flag that holds them may (e.g. compilation-config)"
        )
    return to_param(info)


def learned_for(names: Iterable[str], catalog: Catalog | None) -> dict[str, Param]:
    """The non-curated parameters among `names`, each resolved (refused ones raise)."""
    out: dict[str, Param] = {}
    for name in names:
        param = resolve(name, catalog)
        if param.source != "curated":
            out[param.name] = param
    return out


def check_values(python: str, param: Param, values: Sequence[Any]) -> None:
    """Every value of a learned flag through the engine's own parser; ParamError with vLLM's
    message for the first it refuses (a typo in a JSON field, a choice it lacks)."""
    if param.source == "curated":
        return
    if param.kind == "env":
        pairs: list[tuple[str, str | None]] = [
            (param.env or param.name, format_value(v)) for v in values
        ]
        _refuse_any(param, _checked(python, param, pairs, env=True))
        return
    if param.flag is None:
        return
    argvs: list[tuple[str, str | None]] = []
    for value in values:
        if param.type == "bool":
            argvs.append((param.flag if value else "--no-" + param.flag[2:], None))
        else:
            argvs.append((param.flag, format_value(value)))
    if not param.negatable:
        argvs = [(flag, v) for flag, v in argvs if not flag.startswith("--no-")]
    _refuse_any(param, _checked(python, param, argvs))


def _checked(
    python: str, param: Param, items: list[tuple[str, str | None]], env: bool = False
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


def catalog_for(db_path: str | Path, spec: EngineSpec, refresh: bool = False) -> Catalog:
    """The engine's catalog from the store's cache, read (and cached) when missing or asked.
    The key is the interpreter and its installed vLLM version (a quick metadata read), so an
    upgraded vLLM is read again."""
    python = engine_python(spec.command)
    version = spec.vllm_version
    if version == "unknown":
        version = installed_vllm_version(python)
    if not refresh:
        with connect(db_path) as db:
            raw = cache.load(db, python, version)
        if raw is not None and raw.get("format") == FORMAT:
            return Catalog.from_dict(raw)
    catalog = read_catalog(python)
    with connect(db_path) as db:
        cache.save(db, python, version, catalog.to_dict())
    return catalog


def prepare(
    db_path: str | Path, spec: EngineSpec, param: str, values: str, base: dict[str, Any]
) -> tuple[str, list[Any]]:
    """Resolve an experiment's parameter and baseline flags for `spec` (its catalog is read only
    when a name is not curated), record the learned ones on the spec, and check the values with
    the engine's own parser: (the parameter's name, its typed values). Nothing starts."""
    names = [param, *base]
    for name in names:  # refused before the catalog is read: no reason to wait for it
        if not is_curated(name) and (why := refusal(name)):
            raise ParamError(f"{name.strip().removeprefix('--')}: never tuned by the lab: {why}")
    catalog = catalog_for(db_path, spec) if needs_catalog(names) else None
    learned = learned_for(names, catalog)
    spec.learned = {name: p.to_dict() for name, p in learned.items()}
    chosen = resolve(param, catalog)
    typed = parse_values(chosen.name, values, learned)
    if learned:
        python = engine_python(spec.command)
        check_values(python, chosen, typed)
        for name, raw in base.items():
            flag = resolve(name, catalog)
            if flag.source != "curated":
                check_values(python, flag, [validate_value(flag.name, raw, learned)])
    return chosen.name, typed


def is_curated(name: str) -> bool:
    """In the lab's own table (a name, or its underscore form)?"""
    try:
        get_param(name.strip().removeprefix("--"))
    except ParamError:
        return False
    return True


def needs_catalog(names: Iterable[str]) -> bool:
    """A name only the engine's catalog can resolve (refused names need no catalog to refuse)."""
    return any(not is_curated(n) and refusal(n) is None for n in names)
