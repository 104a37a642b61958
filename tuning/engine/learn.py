"""From a name the user typed to a parameter the lab can launch: the curated table first, then the
flags of the user's own vLLM (its catalog), never a flag of the deny-list (the engine's parser then
checks a learned flag's values: tuning.engine.parser_check; tuning.experiment.spec asks both, once
per experiment).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from store import connect
from store import engine_flags as cache
from tuning.engine.flags.catalog import (
    FORMAT,
    Catalog,
    FlagInfo,
    engine_python,
    read_catalog,
)
from tuning.engine.flags.policy import CODE, flag_refusal, refusal
from tuning.engine.params import (
    PARAMS,
    Param,
    ParamError,
    ValueType,
    get_param,
    suggest,
)
from tuning.engine.spec import EngineSpec, installed_vllm_version
from tuning.engine.value_text import list_elements, list_text

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
    item: ValueType | None = None
    if info.nargs in LISTS:  # several values at once: each value of the lab's is one list
        item, kind, default = kind, "list", _list_default(info.default)
    return Param(
        name=info.name,
        type=kind,
        item=item,
        nargs=info.nargs if item else None,
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


# argparse's nargs the lab launches: one list per value, one argv item per element
LISTS = ("+", "*")


def _list_default(default: object) -> str | None:
    """The parser's default of a list-valued flag as a list value's stored text, when it is one."""
    if not isinstance(default, list):
        return None
    try:
        return list_text(list_elements(default))
    except ValueError:
        return None


def why_not_launched(info: FlagInfo) -> str | None:
    """Why a flag the policy allows still cannot be launched, in the user's words: a list of
    true/false or of JSON values, or a value that is optional or a fixed count of items."""
    if info.nargs is None:
        return None
    if info.nargs in LISTS:
        if info.kind in ("bool", "switch", "json"):
            return f"it takes a list of {_KIND_WORDS[info.kind]}, which the lab cannot launch yet"
        return None
    if info.nargs == "?":
        return "its value may be left out (given bare), which the lab cannot launch yet"
    return f"it takes exactly {info.nargs} values at once, which the lab cannot launch yet"


_KIND_WORDS = {"bool": "true/false values", "switch": "true/false values", "json": "JSON values"}


def flag_status(info: FlagInfo) -> tuple[str, str | None]:
    """("curated" | "tunable" | "refused", why refused): how the lab treats one flag of the
    engine, for the CLI's listing and New experiment's picker alike."""
    if info.name in PARAMS:
        return "curated", None
    if why := why_refused(info) or why_not_launched(info):
        return "refused", why
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
    if why := why_not_launched(info):
        raise ParamError(f"{info.name}: {why}")
    return to_param(info)


def learned_for(names: Iterable[str], catalog: Catalog | None) -> dict[str, Param]:
    """The non-curated parameters among `names`, each resolved (refused ones raise)."""
    out: dict[str, Param] = {}
    for name in names:
        param = resolve(name, catalog)
        if param.source != "curated":
            out[param.name] = param
    return out


def catalog_key(spec: EngineSpec) -> tuple[str, str]:
    """The cache's key: the engine's interpreter and its installed vLLM version (a quick metadata
    read), so an upgraded vLLM is read again."""
    python = engine_python(spec.command)
    version = spec.vllm_version
    if version == "unknown":
        version = installed_vllm_version(python)
    return python, version


def cached_catalog(db_path: str | Path, spec: EngineSpec) -> Catalog | None:
    """The engine's catalog when the store has it cached; None otherwise (never read here)."""
    python, version = catalog_key(spec)
    with connect(db_path) as db:
        raw = cache.load(db, python, version)
    return Catalog.from_dict(raw) if raw is not None and raw.get("format") == FORMAT else None


def catalog_for(db_path: str | Path, spec: EngineSpec, refresh: bool = False) -> Catalog:
    """The engine's catalog from the store's cache, read (and cached) when missing or asked."""
    if not refresh and (cached := cached_catalog(db_path, spec)) is not None:
        return cached
    python, version = catalog_key(spec)
    catalog = read_catalog(python)
    with connect(db_path) as db:
        cache.save(db, python, version, catalog.to_dict())
    return catalog


def read_beside(db_path: str | Path, spec: EngineSpec) -> threading.Thread:
    """Read (and cache) the engine's catalog in a thread, for a caller that need not wait for it
    now (a resident experiment's first start); join the thread, then `cached_catalog`."""

    def read() -> None:
        try:
            catalog_for(db_path, spec)
        except Exception as exc:  # noqa: BLE001 (the caller reads no catalog: said as unknown)
            print(f"runner: this vLLM's flags not read: {exc}", file=sys.stderr, flush=True)

    thread = threading.Thread(target=read, name="read-engine-flags", daemon=True)
    thread.start()
    return thread


def learned_flags(
    db_path: str | Path | None,
    spec: EngineSpec,
    names: Sequence[str],
    catalog: Catalog | None = None,
) -> dict[str, Param]:
    """The flags of the user's vLLM among `names` (beyond the curated table and what `spec`
    already learned), each resolved by the engine's catalog: `catalog` when the caller holds it,
    else the store's cached one, read from the engine only when a name needs it. A name the
    deny-list refuses is refused before any catalog is read. Nothing is changed on `spec`."""
    known = spec.learned_params()
    todo = [n for n in names if n.strip().removeprefix("--") not in known]
    for name in todo:  # refused before the catalog is read: no reason to wait for it
        if not is_curated(name) and (why := refusal(name)):
            raise ParamError(f"{name.strip().removeprefix('--')}: never tuned by the lab: {why}")
    if catalog is None and db_path is not None and needs_catalog(todo):
        catalog = catalog_for(db_path, spec)
    return {**known, **learned_for(todo, catalog)}


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
