"""A compressed lab DB is expanded once per file and per schema version: two checkouts of the lab on
one machine (a fresh clone's `make test` beside a newer main) each open their own expansion. A
shared one, migrated by the newer lab, was refused by the older ("written by a newer version of
the lab (schema step(s) m013_plans unknown here)": a fresh-clone run failed on it)."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from store import open_db, schema_version, snapshot


def test_each_schema_version_opens_its_own_expansion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    plain = tmp_path / "lab.db"
    open_db(plain).conn.close()
    packed = tmp_path / "lab.db.xz"
    packed.write_bytes(lzma.compress(plain.read_bytes()))

    ours = snapshot.expanded(packed)
    assert snapshot.expanded(packed) == ours  # expanded once
    assert ours.is_relative_to(tmp_path / "cache")
    known = schema_version.known_migrations()
    monkeypatch.setattr(
        schema_version, "known_migrations", lambda: [*known, "m999_from_the_future"]
    )
    newer = snapshot.expanded(packed)
    assert newer != ours and newer.exists()
    assert packed.read_bytes() == lzma.compress(plain.read_bytes())  # the file itself unchanged
