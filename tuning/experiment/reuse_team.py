"""The team folder's side of reuse: runs in teammates' bundles not imported yet that measured
exactly what a planned run would, and the import that makes them this lab's evidence once the
user counts them. Imported bundles need nothing here: their runs are in the lab already.

A bundle is offered only when its integrity holds (tuning.experiment.reuse_trust says what is
checked and what no check can tell: a copied hardware string is one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlite_utils import Database

from store import connect, queries
from store.bundle import BundleError, import_bundle
from store.bundle.validate import open_bundle
from store.team import TeamError, list_team
from tuning.experiment.reuse_match import Match, collect, wanted_value
from tuning.experiment.reuse_trust import evidence_problem


def team_matches(
    db_path: str | Path, team_folder: str, wanted: dict[str, str], notes: list[str]
) -> dict[str, list[Match]]:
    """value -> matches in the folder's bundles not (fully) imported; a folder or bundle that
    cannot be read is a note, never a stop."""
    try:
        bundles = [b for b in list_team(team_folder, db_path) if b.needs_import]
    except (TeamError, OSError) as exc:
        notes.append(f"team folder not searched: {exc}")
        return {}
    found: dict[str, list[Match]] = {}
    for item in bundles:
        try:
            with open_bundle(item.path) as (manifest, conn):  # every integrity check of import
                theirs = _new_matching(db_path, Database(conn), wanted)
                why = _first_problem(Database(conn), theirs)
        except (BundleError, OSError) as exc:
            notes.append(f"team bundle {item.name} not offered: {exc}")
            continue
        if why:
            notes.append(f"team bundle {item.name} not offered: {why}")
            continue
        where = f"team folder: {item.name}"
        runs = [{**r, "origin": manifest.origin} for r in theirs]
        for value, matches in collect(runs, wanted, where, str(item.path)).items():
            found.setdefault(value, []).extend(matches)
    return found


def _new_matching(
    db_path: str | Path, bundle: Database, wanted: dict[str, str]
) -> list[dict[str, Any]]:
    """The bundle's runs whose fingerprint, recomputed from their rows, a planned run wants and
    whose uid this lab does not hold yet."""
    runs = [r for r in queries.reusable_runs(bundle) if wanted_value(r, wanted)]
    with connect(db_path, readonly=True) as db:
        here = queries.run_ids_by_uid(db, [str(r["uid"]) for r in runs])
    return [r for r in runs if str(r["uid"]) not in here]


def _first_problem(bundle: Database, runs: list[dict[str, Any]]) -> str | None:
    """The first of these runs whose numbers its own request rows do not give, said in a line."""
    for run in runs:
        why = evidence_problem(bundle, run)
        if why:
            return f"run {str(run['uid'])[:8]} ({run.get('param')} = {run.get('value')}): {why}"
    return None


def import_sources(db_path: str | Path, matches: list[Match], notes: list[str]) -> dict[str, int]:
    """uid -> this lab's run id for each match, importing the team bundles they are in first
    (the whole bundle, as `team --import-new` would); a refused bundle is a note."""
    for path in sorted({m.bundle for m in matches if m.bundle}):
        try:
            import_bundle(db_path, path)
        except BundleError as exc:
            notes.append(f"team bundle {Path(path).name} not imported: {exc}")
    with connect(db_path, readonly=True) as db:
        return queries.run_ids_by_uid(db, [m.uid for m in matches])
