"""Issue 41 case 7: `experiment --db snap.db.xz` and `import --db snap.db.xz` exited 0 and wrote
into the snapshot's cached expansion under ~/.cache, where the results lived unseen while the .xz
never changed. A compressed snapshot is read-only now: a command that writes is refused in one
line with the way out (`xz -dk` and `--db snap.db`) before anything is expanded, asked or
written; readers still open it."""

from __future__ import annotations

import hashlib
import lzma
from pathlib import Path

import pytest

from store.bundle import export_bundle
from tests.factories import seed_clean_lab
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.cli.main import main as cli_main


@pytest.fixture
def snapshot(tmp_path: Path, lab_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A lab compressed as `snap.db.xz` (the plain DB removed), and an empty cache home."""
    plain = tmp_path / "snap.db"
    seed_clean_lab(plain, values=(2,), repeats=1)
    packed = tmp_path / "snap.db.xz"
    packed.write_bytes(lzma.compress(plain.read_bytes()))
    plain.unlink()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return packed


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _bundle(tmp_path: Path) -> Path:
    src = tmp_path / "other.db"
    info = seed_clean_lab(src, "bob", "box-b", values=(4,), repeats=1, seed=3)
    out = tmp_path / "bob.bundle.zip"
    export_bundle(src, out, run_ids=info["run_ids"], author="bob", host="box-b")
    return out


def _refused_with_the_way_out(err: str, packed: Path, how: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "compressed snapshot, read-only" in lines[0] and f"xz -dk {packed}" in lines[0]
    assert how in lines[0], lines[0]


def test_an_experiment_into_a_snapshot_is_refused_before_anything_is_written(
    snapshot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sha = _sha(snapshot)
    with FakeOpenAIServer(FakeConfig(model="m")) as srv:
        code = cli_main(
            [
                "experiment",
                "--repeats",
                "1",
                "--param",
                "concurrency",
                "--values",
                "1",
                "--num-requests",
                "2",
            ]
            + ["--base-url", srv.base_url, "--model", "m", "--db", str(snapshot)]
        )
        asked = list(srv.stats.paths)
    err = capsys.readouterr().err
    assert code == 1, err
    _refused_with_the_way_out(err, snapshot, f"--db {snapshot.with_suffix('')}")
    assert asked == []  # refused before the server was asked anything
    assert _sha(snapshot) == sha
    assert not (tmp_path / "cache").exists()  # not even expanded


def test_an_import_into_a_snapshot_is_refused(
    snapshot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _bundle(tmp_path)
    capsys.readouterr()
    sha = _sha(snapshot)
    code = cli_main(["import", str(bundle), "--db", str(snapshot)])
    err = capsys.readouterr().err
    assert code == 1, err
    _refused_with_the_way_out(err, snapshot, f"--db {snapshot.with_suffix('')}")
    assert _sha(snapshot) == sha and not (tmp_path / "cache").exists()


def test_a_snapshot_named_by_tuning_lab_db_is_read_only_too(
    snapshot: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TUNING_LAB_DB", str(snapshot))
    assert cli_main(["import", str(_bundle(tmp_path))]) == 1
    _refused_with_the_way_out(
        capsys.readouterr().err, snapshot, f"TUNING_LAB_DB={snapshot.with_suffix('')}"
    )
    assert not (tmp_path / "cache").exists()


def test_readers_still_open_a_snapshot(snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sha = _sha(snapshot)
    assert cli_main(["runs", "--json", "--db", str(snapshot)]) == 0
    assert '"status": "done"' in capsys.readouterr().out
    assert _sha(snapshot) == sha
