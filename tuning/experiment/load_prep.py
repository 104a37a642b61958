"""The prompts of a run's load, built once per tokenizer and workload and kept for the runs after
it: the runs of one experiment send the same prompts (their fingerprint says so), so building
them again for every restart only costs time (thousands of /tokenize round trips on a GPU box).

What is kept is reused only when it would be built the same: the same workload (and traffic
spec), and the same tokenizer. A local tokenizer.json is the same file (path, size, mtime); the
server's own tokenizer (/tokenize) is asked again at each new server whether it still tokenizes
alike: the pool of ids it gives the lab's corpus, and a few kept prompts re-encoded to the same
ids (two or three short calls). Anything else (another tokenizer, a flag under test that changes
tokenization) builds afresh.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tuning.engine.spec import EngineSpec
from tuning.experiment import planned
from tuning.measure.traffic import Schedule, WorkloadSpec
from tuning.measure.traffic.workload import (
    LocalTokenizer,
    ServerTokenizer,
    TokenizerLike,
    Workload,
    build_prompts,
    choose_tokenizer,
)

# Kept prompts re-encoded by a new server before they are reused: the first, a middle, the last.
PROBES = 3


@dataclass(frozen=True)
class PreparedLoad:
    """What one run's load generator is given: its prompts (warm-ups first), the workload it
    runs (a traffic plan's own), the plan and its fingerprint (traffic only)."""

    tokenizer_id: str
    prompts: list[str]
    workload: Workload
    plan: Schedule | None = None
    fingerprint: str | None = None
    reused: bool = False  # built for an earlier run and checked for this one


@dataclass
class _Kept:
    load: PreparedLoad
    pool: list[int] | None  # the server's pool of corpus ids (a server tokenizer only)
    probes: dict[int, list[int]]  # prompt index -> its ids (a server tokenizer only)


def _workload_key(wl: Workload, spec: WorkloadSpec | None) -> str:
    shape = {"workload": wl.to_dict(), "spec": spec.to_dict() if spec is not None else None}
    return json.dumps(shape, sort_keys=True, default=str)


def _file_key(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return str(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _probe_indexes(n: int) -> list[int]:
    return sorted({0, n // 2, n - 1})[:PROBES] if n else []


class LoadPrep:
    """Builds each run's prompts, or hands back the ones built for an earlier run of the same
    tokenizer and workload."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], _Kept] = {}

    def prepare(
        self,
        engine: EngineSpec | None,
        base_url: str,
        model: str,
        wl: Workload,
        spec: WorkloadSpec | None,
        choose: Callable[[str, str], tuple[TokenizerLike, str]] | None = None,
    ) -> PreparedLoad:
        """The run's prompts; `choose(base_url, model)` picks the tokenizer when the engine has
        no local one (default: tuning.measure.traffic.workload.choose_tokenizer)."""
        local = Path(engine.model) / "tokenizer.json" if engine is not None else None
        wkey = _workload_key(wl, spec)
        if local is not None and local.exists():
            key = (f"file:{_file_key(local)}", wkey)
            kept = self._kept.get(key)
            if kept is not None:
                return _again(kept.load)
            load = _build(LocalTokenizer(local), str(local), wl, spec)
            self._kept[key] = _Kept(load, None, {})
            return load
        server_key = (f"server:{model}", wkey)
        kept = self._kept.get(server_key)
        if kept is not None and engine is not None and _server_agrees(kept, base_url, model):
            return _again(kept.load)
        pick = choose or (
            lambda url, name: choose_tokenizer(None, name, url, os.environ.get("OPENAI_API_KEY"))
        )
        tokenizer, tokenizer_id = pick(base_url, model)
        load = _build(tokenizer, tokenizer_id, wl, spec)
        if isinstance(tokenizer, ServerTokenizer) and engine is not None:
            indexes = _probe_indexes(len(load.prompts))
            probes = {i: tokenizer.encode(load.prompts[i]) for i in indexes}
            self._kept[server_key] = _Kept(load, list(tokenizer.usable_ids()), probes)
        if isinstance(tokenizer, ServerTokenizer):
            tokenizer.close()
        return load


def _again(load: PreparedLoad) -> PreparedLoad:
    return PreparedLoad(
        load.tokenizer_id,
        load.prompts,
        load.workload,
        load.plan,
        load.fingerprint,
        reused=True,
    )


def _build(
    tokenizer: TokenizerLike, tokenizer_id: str, wl: Workload, spec: WorkloadSpec | None
) -> PreparedLoad:
    if spec is None:
        return PreparedLoad(tokenizer_id, build_prompts(wl, tokenizer), wl)
    prep = planned.prepare(wl, spec, tokenizer)
    return PreparedLoad(
        tokenizer_id, prep.warmup_prompts, prep.workload, prep.plan, prep.fingerprint
    )


def _server_agrees(kept: _Kept, base_url: str, model: str) -> bool:
    """Does the new server tokenize as the one the kept prompts were built with? Its pool of
    corpus ids and the probe prompts' ids must be the same; any error: no."""
    if kept.pool is None:
        return False
    server = ServerTokenizer(base_url, model, api_key=os.environ.get("OPENAI_API_KEY"))
    try:
        if list(server.usable_ids()) != kept.pool:
            return False
        prompts: Sequence[str] = kept.load.prompts
        return all(server.encode(prompts[i]) == ids for i, ids in kept.probes.items())
    except Exception:  # noqa: BLE001 (a server that cannot say: build afresh, and be told there)
        return False
    finally:
        server.close()
