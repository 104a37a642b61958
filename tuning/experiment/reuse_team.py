"""The team folder's side of reuse: runs in teammates' bundles not imported yet that measured
exactly what a planned run would, and the import that makes them this lab's evidence once the
user counts them. Imported bundles need nothing here: their runs are in the lab already."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlite_utils import Database

from store import connect, queries
from store.bundle import BundleError, import_bundle
from store.bundle.validate import open_bundle
from store.team import TeamError, list_team
from tuning.experiment.reuse_match import Match, collect


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
            with open_bundle(item.path) as (manifest, conn):
                runs = queries.reusable_runs(Database(conn))
        except (BundleError, OSError) as exc:
            notes.append(f"team bundle {item.name} not searched: {exc}")
            continue
        with connect(db_path, readonly=True) as db:
            here = queries.run_ids_by_uid(db, [str(r["uid"]) for r in runs])
        theirs: list[dict[str, Any]] = [
            {**r, "origin": manifest.origin} for r in runs if str(r["uid"]) not in here
        ]
        where = f"team folder: {item.name}"
        for value, matches in collect(theirs, wanted, where, str(item.path)).items():
            found.setdefault(value, []).extend(matches)
    return found


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
