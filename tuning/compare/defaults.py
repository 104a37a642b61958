"""vLLM's own default for the parameter a comparison varies: the value the recommendation prefers
when no other value beats it (tuning.compare.prefer), since every flag left at its default is one
flag less to carry, explain and re-tune after an upgrade.

Where the default comes from, best first:
1. the engine's own parser, as the store caches it for the runs' vLLM version (store.engine_flags,
   filled by tuning.engine.flags): the truth for that version;
2. the flag as learned from that parser when the experiment was planned (experiments.engine_json's
   `learned`, tuning.engine.learn.prepare);
3. the lab's curated table (tuning.engine.params), for the flags it knows.
A workload parameter (concurrency, input-len, ...) is the load, not a flag: it has no engine
default. A flag whose parser default is None (block-size, max-num-seqs: vLLM picks one at start
by platform and usage) has none the lab can run either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store import StoreError, queries
from store import engine_flags as cache
from tuning.engine.flags.catalog import Catalog
from tuning.engine.params import Param, ParamError, format_value, get_param

Run = Mapping[str, Any]


@dataclass(frozen=True)
class EngineDefault:
    """The engine's default of one parameter, or why there is none."""

    param: str
    value: Any  # None when not known
    source: str  # where `value` comes from, in words; or why there is no default
    known: bool

    @property
    def text(self) -> str:
        """'true (vLLM 0.32.0's parser)' or the reason there is none."""
        return f"{format_value(self.value)} ({self.source})" if self.known else self.source

    def to_json(self) -> dict[str, Any]:
        return {
            "param": self.param,
            "value": self.value,
            "source": self.source,
            "known": self.known,
        }


def _python(engine: Mapping[str, Any] | None) -> str | None:
    """The engine's interpreter when its stored command names one (never read from disk: the
    runs may be a teammate's)."""
    command = (engine or {}).get("command")
    if isinstance(command, list) and command and Path(str(command[0])).name.startswith("python"):
        return str(command[0])
    return None


def _experiment_engine(db: Any, runs: Sequence[Run]) -> Mapping[str, Any] | None:
    ids = [int(r["experiment_id"]) for r in runs if r.get("experiment_id") is not None]
    if not ids:
        return None
    try:
        engine = queries.get_experiment(db, ids[0]).get("engine")
    except StoreError:
        return None
    return engine if isinstance(engine, Mapping) else None


def _from_catalog(db: Any, name: str, version: str, python: str | None) -> EngineDefault | None:
    raw = cache.load_version(db, version, python)
    if raw is None:
        return None
    catalog = Catalog.from_dict(raw)
    info = catalog.env.get(name) if name.startswith("VLLM_") else catalog.get(name)
    if info is None:
        return None
    where = f"vLLM {version}'s parser"
    if info.runnable_default is None:
        return EngineDefault(name, None, f"{where} gives {name} no fixed default", False)
    return EngineDefault(name, info.runnable_default, where, True)


def engine_default(db: Any, param: str, runs: Sequence[Run]) -> EngineDefault:
    """The default of `param` for the engine `runs` ran on (see the module docstring)."""
    engine = _experiment_engine(db, runs)
    learned_raw = (engine or {}).get("learned")
    learned: dict[str, Param] = {}
    if isinstance(learned_raw, Mapping):
        learned = {
            str(k): Param.from_dict(v) for k, v in learned_raw.items() if isinstance(v, Mapping)
        }
    try:
        spec = get_param(param, learned)
    except ParamError:
        return EngineDefault(param, None, f"{param} is not a parameter the lab knows", False)
    if spec.kind == "workload":
        return EngineDefault(
            spec.name, None, f"{spec.name} is the workload's, not a vLLM flag: no default", False
        )
    versions = sorted({str(r["vllm_version"]) for r in runs if r.get("vllm_version")})
    if len(versions) == 1 and versions[0] != "unknown":
        found = _from_catalog(db, spec.name, versions[0], _python(engine))
        if found is not None:
            return found
    if spec.default is not None:
        where = "vLLM's parser, when planned" if spec.source == "learned" else "the lab's table"
        return EngineDefault(spec.name, spec.default, where, True)
    if spec.source == "learned":
        why = f"vLLM's parser gives {spec.name} no fixed default"
        return EngineDefault(spec.name, None, why, False)
    return EngineDefault(
        spec.name,
        None,
        f"no known default for {spec.name}: the lab's table has none and vLLM "
        f"{'/'.join(versions) or '?'}'s flags were never read here (tuning-lab flags)",
        False,
    )
