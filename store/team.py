"""A team folder: a shared directory where each lab publishes bundles and imports its teammates'.

Nothing but bundle files lives there, one per publish, named
``<author>-<host>-<UTC timestamp>-<short uid>.bundle.zip`` (sanitized). Listing reads only each
bundle's manifest (who, where, when, counts), and says which are already here by their run uids;
"import new" runs the full validation of `store.bundle.import_bundle` on each one, so a damaged
or hostile file is refused on its own and the others still come in. The folder, the author and the
host are the caller's (its settings): the store reads no settings.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from store.bundle import (
    DEFAULT_LIMITS,
    SUFFIX,
    BundleError,
    BundleLimits,
    ImportResult,
    Manifest,
    export_bundle,
    import_bundle,
    read_manifest,
)
from store.db import connect
from store.queries import present_uids

MAX_LISTED = 2000
_UNSAFE = re.compile(r"[^A-Za-z0-9._]+")


class TeamError(RuntimeError):
    """The team folder is not set, missing or not writable."""


@dataclass
class TeamBundle:
    """One file in the team folder and where it stands against the local lab."""

    path: Path
    manifest: Manifest | None
    error: str | None = None
    runs_present: int = 0
    experiments_present: int = 0

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def state(self) -> str:
        """'invalid', 'new', 'partly imported' or 'imported' (yours count as imported)."""
        if self.manifest is None:
            return "invalid"
        m = self.manifest
        if self.runs_present >= len(m.runs) and self.experiments_present >= len(m.experiments):
            return "imported"
        if self.runs_present == 0 and self.experiments_present == 0:
            return "new"
        return "partly imported"

    @property
    def needs_import(self) -> bool:
        return self.state in ("new", "partly imported")


@dataclass
class TeamImport:
    """The outcome of importing one team bundle: a result or the reason it was refused."""

    bundle: TeamBundle
    result: ImportResult | None = None
    error: str | None = None
    kind: str | None = None


@dataclass
class TeamSummary:
    imports: list[TeamImport] = field(default_factory=list)

    @property
    def runs_added(self) -> int:
        return sum(len(i.result.runs_added) for i in self.imports if i.result)

    @property
    def refused(self) -> list[TeamImport]:
        return [i for i in self.imports if i.error]


def _part(text: str, fallback: str, limit: int = 32) -> str:
    """One file-name part: letters, digits, dot and underscore only ('-' separates parts)."""
    clean = _UNSAFE.sub("_", str(text)).strip("._")[:limit].strip("._")
    return clean or fallback


def bundle_file_name(
    author: str, host: str, created: datetime | None = None, bundle_uid: str | None = None
) -> str:
    """'ada-gpu_box_3-20250101T120000Z-1a2b3c4d.bundle.zip': never a path, never hidden."""
    when = (created or datetime.now(UTC)).astimezone(UTC)
    short = _part((bundle_uid or uuid.uuid4().hex)[:8], "00000000", 8)
    return f"{_part(author, 'unknown')}-{_part(host, 'host')}-{when:%Y%m%dT%H%M%SZ}-{short}{SUFFIX}"


def team_folder_path(folder: str | Path | None) -> Path:
    """The configured folder, which must exist: a missing share is a mistake, not a mkdir."""
    if folder is None or not str(folder).strip():
        raise TeamError("no team folder set (Settings → Team folder, or TUNING_LAB_TEAM_FOLDER)")
    path = Path(str(folder).strip()).expanduser()
    if not path.is_dir():
        raise TeamError(
            f"team folder {path} does not exist or is not a folder (is the share mounted?)"
        )
    return path


def publish(
    db_path: str | Path,
    team_folder: str | Path | None,
    *,
    author: str,
    host: str,
    run_ids: Iterable[int] = (),
    experiment_ids: Iterable[int] = (),
    note: str = "",
    include_prompts: bool = False,
) -> Path:
    """Export the selection as a new bundle file in the team folder; returns its path."""
    folder = team_folder_path(team_folder)
    uid = uuid.uuid4().hex
    target = folder / bundle_file_name(author, host, bundle_uid=uid)
    if target.exists():
        raise TeamError(f"{target.name} already exists in the team folder")
    export_bundle(
        db_path,
        target,
        run_ids=run_ids,
        experiment_ids=experiment_ids,
        author=author,
        host=host,
        note=note,
        bundle_uid=uid,
        include_prompts=include_prompts,
    )
    return target


def list_team(
    team_folder: str | Path | None,
    db_path: str | Path | None = None,
    limits: BundleLimits = DEFAULT_LIMITS,
) -> list[TeamBundle]:
    """Every bundle in the folder, newest first, with what the local lab already holds."""
    folder = team_folder_path(team_folder)
    files = [
        p
        for p in folder.iterdir()
        if p.name.endswith(SUFFIX)
        and not p.name.startswith(".")
        and not p.is_symlink()
        and p.is_file()
    ]
    files.sort(key=lambda p: p.name)
    out: list[TeamBundle] = []
    for path in files[-MAX_LISTED:]:
        try:
            out.append(TeamBundle(path, read_manifest(path, limits)))
        except BundleError as exc:
            out.append(TeamBundle(path, None, error=str(exc)))
    if db_path is not None and Path(db_path).exists():
        with connect(db_path, readonly=True) as db:
            for item in out:
                if item.manifest is not None:
                    item.runs_present = len(present_uids(db, "runs", item.manifest.run_uids))
                    item.experiments_present = len(
                        present_uids(db, "experiments", item.manifest.experiment_uids)
                    )
    out.sort(key=lambda b: (b.manifest.created_at if b.manifest else "", b.name), reverse=True)
    return out


def import_new(
    db_path: str | Path, team_folder: str | Path | None, limits: BundleLimits = DEFAULT_LIMITS
) -> TeamSummary:
    """Import every bundle not (fully) here yet, oldest first; a refused one does not stop the
    rest, and its reason is in the summary."""
    summary = TeamSummary()
    pending = [b for b in list_team(team_folder, db_path, limits) if b.needs_import]
    for item in sorted(
        pending, key=lambda b: (b.manifest.created_at if b.manifest else "", b.name)
    ):
        try:
            summary.imports.append(TeamImport(item, import_bundle(db_path, item.path, limits)))
        except BundleError as exc:
            summary.imports.append(TeamImport(item, error=str(exc), kind=exc.kind))
    return summary
