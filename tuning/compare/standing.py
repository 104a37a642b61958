"""A run's standing in a comparison: whether it counts (done; suspect only when the user includes
those), and the words a counted or left-out run needs (its value not applied by its engine, reused
from an earlier run)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.status import MEASURED, Status
from tuning.engine.effective import stored_mismatches

Run = Mapping[str, Any]


def counted(run: Run, include_suspect: bool = False) -> bool:
    """A run whose numbers count: done (or suspect, when the user includes those), summarised."""
    statuses = MEASURED if include_suspect else {Status.DONE}
    return run.get("status") in statuses and run.get("completed") is not None


def _mismatches(run: Run) -> list[Any]:
    """A run's stored config mismatches; [] when none or not checked."""
    return stored_mismatches(run) or []


def not_applied(members: Sequence[Run], params: set[str]) -> list[str]:
    """Why a side's value was not what its engine ran with: each run's mismatch on `params`."""
    return [
        f"run {r['id']}: {m.get('reason') or m['param']}"
        for r in members
        for m in _mismatches(r)
        if isinstance(m, Mapping) and isinstance(m.get("param"), str) and m["param"] in params
    ]


def reused_words(run_id: int, source: Mapping[str, Any]) -> str:
    """'run 9: reused run 2 (2026-12-04, by ana@box)': a counted run that was not measured here."""
    name = source.get("run_id") or str(source.get("uid") or "?")[:8]
    when = str(source.get("finished_at") or "")[:10] or "undated"
    who = f"{source.get('author') or 'unknown'}@{source.get('host') or 'unknown'}"
    where = source.get("where") or "this lab"
    return f"run {run_id}: reused run {name} ({when}, by {who}, {where})"
