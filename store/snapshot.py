"""Compressed lab DBs (`lab.db.xz`, `lab.db.gz`): committed examples and archived labs stay small
(what travels to a GPU box with every call is capped), and looking at one never changes it.

A compressed path is expanded once into a cache folder keyed by the file's hash and by this lab's
schema version; the lab then opens that copy (and migrates it, as any DB it opens). The compressed
file itself is never written, and nothing is stored in the copy either: commands that would write
are refused with the way out (`read_only_words`). The schema in the key keeps two checkouts of
the lab on one machine apart: a newer lab's migrated copy refused an older lab ("written by a
newer version") when both shared one expansion under ~/.cache.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any

OPENERS: dict[str, Any] = {".xz": lzma.open, ".gz": gzip.open}


UNPACK = {".xz": "xz -dk", ".gz": "gunzip -k"}


def is_compressed(path: Path) -> bool:
    return path.suffix in OPENERS


def read_only_words(path: Path, how: str) -> str:
    """Why nothing is written to a compressed snapshot, and the way out; `how` says how to name
    the expanded file (`--db {plain}`, `TUNING_LAB_DB={plain}`)."""
    plain = path.with_suffix("")
    return (
        f"{path} is a compressed snapshot, read-only: `{UNPACK[path.suffix]} {path}` and use "
        f"{how.format(plain=plain)} (nothing was written)"
    )


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tuning-lab" / "snapshots"


def expanded(path: Path) -> Path:
    """The SQLite file to open for `path`: itself, or the cached expansion of a compressed DB."""
    if not is_compressed(path):
        return path
    from store.schema_version import known_migrations  # here: `--help` starts without sqlite-utils

    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    schema = hashlib.sha256(" ".join(known_migrations()).encode()).hexdigest()[:8]
    target = cache_dir() / f"{path.with_suffix('').stem}-{digest}-s{schema}.db"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
    try:
        src: IO[bytes]
        with OPENERS[path.suffix](path, "rb") as src, os.fdopen(fd, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(tmp, target)  # atomic: a concurrent reader sees all of it or none
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target
