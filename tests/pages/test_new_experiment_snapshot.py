"""Issue 41 case 7 on New experiment: with TUNING_LAB_DB at a compressed snapshot (lab.db.xz),
Start planned and ran an experiment into the snapshot's cached expansion under ~/.cache, where
its results lived unseen. The page says the snapshot is read-only, with the way out, and Start
stays off."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from tests.apptest import open_page
from tests.factories import seed_clean_lab
from tests.fakes.engines import fake_settings_env


def test_start_is_off_on_a_compressed_snapshot(
    lab_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "snap.db"
    seed_clean_lab(plain, values=(2,), repeats=1)
    packed = tmp_path / "snap.db.xz"
    packed.write_bytes(lzma.compress(plain.read_bytes()))
    plain.unlink()
    for name, value in fake_settings_env(lab_home).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TUNING_LAB_DB", str(packed))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    at = open_page("app_pages/1_New_experiment.py")
    assert not at.exception, at.exception
    said = [e.value for e in at.error if "compressed snapshot, read-only" in e.value]
    assert said and "xz -dk" in said[0], [e.value for e in at.error]
    assert at.button(key="new_start").disabled
