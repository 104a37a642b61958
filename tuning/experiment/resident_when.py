"""Whether an experiment's runs may switch resident servers instead of restarting, decided once at
its first run (tuning.experiment.resident), and the engine's flags that question needs: on a GPU,
whether its vLLM has `--enable-sleep-mode`, from the cached catalog, else from its version while
the catalog is read beside the first start (the 18.6 s of an H100's first run, no longer waited
for), else read now.
"""

from __future__ import annotations

import threading
from typing import Any

from tuning.compare.resident_words import NO_REPEATS, NO_RESTARTS
from tuning.engine.params import Param
from tuning.engine.sleep_mode import MEMORY_FLAGS, SLEEP_FLAG, sleep_flag_by_version, why_not
from tuning.engine.spec import EngineSpec


def why_not_resident(
    exp: dict[str, Any], engine: EngineSpec | None, param: Param, db_path: Any
) -> tuple[str | None, threading.Thread | None]:
    """Why this experiment restarts for every run instead of switching resident servers (None
    when it may switch), and the thread reading the engine's flags when they are read beside the
    first start (`sleep_mode_flags`)."""
    asked = str((exp.get("resident") or {}).get("asked") or "auto")
    if asked == "off":
        return "--resident off", None
    if engine is None or not param.restarts_server:
        return NO_RESTARTS, None
    if not exp.get("repeats_auto") and int(exp.get("repeats") or 1) < 2:
        return NO_REPEATS, None
    if exp.get("fleet"):
        return "its runs go to the fleet (one server a slot)", None
    flags: set[str] | None = None
    reading: threading.Thread | None = None
    if engine.backend == "gpu" and param.name not in MEMORY_FLAGS:
        flags, reading = sleep_mode_flags(db_path, engine)
    return why_not(param.name, engine.backend, flags), reading


def sleep_mode_flags(
    db_path: Any, engine: EngineSpec
) -> tuple[set[str] | None, threading.Thread | None]:
    """The engine's flag names as far as sleep mode goes: its cached catalog's; else, for a vLLM
    whose version has had sleep mode (`sleep_flag_by_version`), that flag alone while the
    catalog is read beside the first start (the thread; `ResidentEngines` checks it before the
    first switch); else the catalog read now (None when that fails: unknown)."""
    from tuning.engine.learn import cached_catalog, catalog_for, catalog_key, read_beside

    try:
        cached = cached_catalog(db_path, engine)
        if cached is not None:
            return set(cached.flags), None
        if sleep_flag_by_version(catalog_key(engine)[1]):
            return {SLEEP_FLAG}, read_beside(db_path, engine)
        return set(catalog_for(db_path, engine).flags), None
    except Exception:  # noqa: BLE001 (unknown: said as such by why_not)
        return None, None
