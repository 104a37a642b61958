"""A search's or a plan's step experiment named in words a user can read. Its stored name
carries the search's key (`search e85b9df451: max-num-seqs = 128`): that key is how a search finds
its steps, so the name stays as stored; shown, it reads with the search's id (`search 3:
max-num-seqs = 128`, `plan 2: confirm round 1 rival`). A step whose search has no row (a lab from
before searches were recorded) keeps its key: nothing else names its search."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from store import queries
from tuning.decide.search.driver import NAME_PREFIX
from tuning.decide.search.plan import NAME_PREFIX as PLAN_PREFIX

_STEP = re.compile(rf"({re.escape(NAME_PREFIX)}|{re.escape(PLAN_PREFIX)})([0-9a-f]{{10}}):")


def step_ids(db: Any) -> dict[str, str]:
    """Each stored step prefix ('search KEY:') with the words it reads as ('search 3:'); a key
    run again keeps its newest search's id."""
    out: dict[str, str] = {}
    for prefix, rows in (
        (NAME_PREFIX, queries.list_searches(db)),
        (PLAN_PREFIX, queries.list_plans(db)),
    ):
        for row in reversed(rows):  # newest first as listed: the newest is written last
            out[f"{prefix}{row['key']}:"] = f"{prefix}{int(row['id'])}:"
    return out


def shown_name(name: Any, ids: Mapping[str, str]) -> str:
    """An experiment's name as a user reads it: a step's key replaced by its search's id."""
    text = "" if name is None else str(name)
    found = _STEP.match(text)
    if found is None or found.group(0) not in ids:
        return text
    return ids[found.group(0)] + text[found.end() :]


def shown_names(db: Any, experiments: list[dict[str, Any]]) -> dict[int, str]:
    """Each experiment's id with its name as shown (one read of the searches and plans)."""
    ids = step_ids(db)
    return {int(e["id"]): shown_name(e.get("name"), ids) for e in experiments}
