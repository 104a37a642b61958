"""Bundle checks: every refusal (truncated, corrupted, extra tables, triggers, views, newer format,
oversized, ../ members, checksum mismatch, wrong types ...) names its kind and leaves the target DB
byte-for-byte as it was."""

from __future__ import annotations

import builtins
import hashlib
import json
import sqlite3
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from store.bundle import BundleError, BundleLimits, import_bundle
from store.bundle.format import DATA_NAME, FORMAT_VERSION, MANIFEST_NAME
from tests.checks import db_fingerprint


def rebuild(
    good: Path,
    out: Path,
    tmp: Path,
    *,
    sqlite_edit: Callable[[sqlite3.Connection], None] | None = None,
    manifest_edit: Callable[[dict[str, Any]], None] | None = None,
    extra: dict[str, bytes] | None = None,
    fix_checksum: bool = True,
    data_edit: Callable[[bytes], bytes] | None = None,
) -> Path:
    """A copy of a good bundle with one thing changed, and (by default) a checksum that matches,
    so the check under test is the one that fires."""
    with zipfile.ZipFile(good) as zf:
        manifest = json.loads(zf.read(MANIFEST_NAME))
        data = zf.read(DATA_NAME)
    work = tmp / f"edit-{out.stem}.sqlite"
    work.write_bytes(data)
    if sqlite_edit is not None:
        conn = sqlite3.connect(work)
        sqlite_edit(conn)
        conn.commit()
        conn.close()
    data = work.read_bytes()
    if data_edit is not None:
        data = data_edit(data)
    if fix_checksum:
        manifest["files"][DATA_NAME] = {
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
        }
    if manifest_edit is not None:
        manifest_edit(manifest)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(MANIFEST_NAME, json.dumps(manifest))
        zf.writestr(DATA_NAME, data)
        for name, blob in (extra or {}).items():
            zf.writestr(name, blob)
    return out


def _flip(data: bytes, at: float) -> bytes:
    pos = int(len(data) * at)
    return data[:pos] + bytes(b ^ 0xFF for b in data[pos : pos + 16]) + data[pos + 16 :]


def _zip_with(members: dict[str, bytes], out: Path) -> Path:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    return out


def _members(good: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(good) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _garble_pages(data: bytes) -> bytes:
    """Overwrite a run of bytes in the second page onward: the structure SQLite reads."""
    return data[: 4096 + 8] + b"\x07" * 2048 + data[4096 + 8 + 2048 :]


Maker = Callable[[Path, Path, Path], Path]  # (good bundle, where to write, tmp dir) -> bad one


def _bytes(edit: Callable[[bytes], bytes]) -> Maker:
    """The good bundle's file bytes, edited (no zip or SQLite structure kept)."""

    def make(good: Path, out: Path, tmp: Path) -> Path:
        out.write_bytes(edit(good.read_bytes()))
        return out

    return make


def _sql(script: str, *, fix_checksum: bool = True) -> Maker:
    """The good bundle with SQL run on its SQLite file (and, by default, a matching checksum)."""
    return lambda g, o, t: rebuild(
        g, o, t, sqlite_edit=lambda c: c.executescript(script), fix_checksum=fix_checksum
    )


def _extra(name: str, blob: bytes) -> Maker:
    """The good bundle with one more member."""
    return lambda g, o, t: rebuild(g, o, t, extra={name: blob})


BAD_BUNDLES: dict[str, tuple[str, Maker]] = {
    "truncated": ("truncated", _bytes(lambda b: b[: len(b) // 2])),
    "truncated-tail": ("truncated", _bytes(lambda b: b[:-30])),
    "empty-file": ("truncated", _bytes(lambda b: b"")),
    "not-a-zip": ("truncated", _bytes(lambda b: b"SQLite format 3\x00" + b"x" * 5000)),
    "flipped-bytes": ("corrupted", _bytes(lambda b: _flip(b, 0.5))),
    "flipped-near-end": ("corrupted", _bytes(lambda b: _flip(b, 0.9))),
    "garbled-sqlite-with-valid-checksum": (
        "corrupted",
        lambda g, o, t: rebuild(g, o, t, data_edit=_garble_pages),
    ),
    "checksum-mismatch": (
        "checksum",
        _sql("update runs set value = '3' where seq = 0", fix_checksum=False),
    ),
    "extra-table": ("schema", _sql("create table evil (x text)")),
    "trigger": (
        "schema",
        _sql("create trigger t1 after insert on runs begin delete from runs; end"),
    ),
    "view": ("schema", _sql("create view v as select * from runs")),
    "extra-index": ("schema", _sql("create index idx_evil on runs (notes)")),
    "unknown-column": ("schema", _sql("alter table runs add column evil text")),
    "wrong-value-type": (
        "types",
        _sql("update runs set output_throughput = 'very fast' where seq = 1"),
    ),
    "wrong-declared-type": (
        "types",
        _sql(
            "alter table samples rename to s_old; create table samples (run_id INTEGER, "
            "t_s TEXT, series TEXT, label TEXT, value REAL); insert into samples select * "
            "from s_old; drop table s_old;"
        ),
    ),
    "invalid-json": ("types", _sql("update runs set summary_json = '{oops' where seq = 1")),
    "dangling-run-id": ("invalid", _sql("update samples set run_id = 4242 where rowid = 1")),
    "unfinished-run": ("invalid", _sql("update runs set status = 'running' where seq = 1")),
    "newer-format": (
        "newer_version",
        lambda g, o, t: rebuild(
            g, o, t, manifest_edit=lambda m: m.update(format_version=FORMAT_VERSION + 1)
        ),
    ),
    "manifest-not-json": (
        "manifest",
        lambda g, o, t: _zip_with({**_members(g), MANIFEST_NAME: b"{not json"}, o),
    ),
    "manifest-count-mismatch": ("manifest", _sql("delete from samples where rowid < 10")),
    "manifest-uids-mismatch": (
        "manifest",
        _sql("update runs set uid = 'ffffffffffffffffffffffffffffffff' where seq = 0"),
    ),
    "dotdot-member": ("unsafe_path", _extra("../evil.sh", b"rm -rf ~")),
    "absolute-member": ("unsafe_path", _extra("/etc/evil", b"x")),
    "unexpected-member": ("unexpected_member", _extra("readme.txt", b"hi")),
    "missing-data": (
        "truncated",
        lambda g, o, t: _zip_with({MANIFEST_NAME: _members(g)[MANIFEST_NAME]}, o),
    ),
}


@pytest.mark.parametrize("case", list(BAD_BUNDLES))
def test_a_bad_bundle_is_refused_and_the_target_is_untouched(
    case: str, bundle: Path, target: Path, tmp_path: Path
) -> None:
    kind, make = BAD_BUNDLES[case]
    bad = make(bundle, tmp_path / f"{case}.bundle.zip", tmp_path)
    before = db_fingerprint(target)
    files_before = sorted(p.name for p in target.parent.iterdir())
    with pytest.raises(BundleError) as err:
        import_bundle(target, bad)
    assert err.value.kind == kind, (case, err.value.kind, str(err.value))
    assert str(err.value)
    assert db_fingerprint(target) == before
    assert sorted(p.name for p in target.parent.iterdir()) == files_before


@pytest.mark.parametrize(
    "limits, what",
    [
        (BundleLimits(max_bundle_bytes=2000), "the limit is 2,000"),
        (BundleLimits(max_data_bytes=10_000), "the limit is 10,000"),
        (BundleLimits(max_runs=3), "6 runs rows; the limit is 3"),
        (BundleLimits(max_samples=100), "samples rows; the limit is 100"),
        (BundleLimits(max_manifest_bytes=100), "the limit is 100"),
    ],
)
def test_oversized_bundles_are_refused(
    limits: BundleLimits, what: str, bundle: Path, target: Path
) -> None:
    before = db_fingerprint(target)
    with pytest.raises(BundleError, match=what) as err:
        import_bundle(target, bundle, limits)
    assert err.value.kind == "too_large"
    assert db_fingerprint(target) == before


def test_refusal_leaves_a_live_wal_untouched(bundle: Path, target: Path, tmp_path: Path) -> None:
    """With the app holding the DB open (uncheckpointed pages in -wal), a refusal changes
    neither the DB file nor its WAL."""
    holder = sqlite3.connect(target)
    holder.execute("pragma wal_autocheckpoint = 0")
    holder.execute("update runs set notes = 'edited while open'")
    holder.commit()
    try:
        assert Path(str(target) + "-wal").stat().st_size > 0
        before = db_fingerprint(target)
        bad = BAD_BUNDLES["trigger"][1](bundle, tmp_path / "t.bundle.zip", tmp_path)
        with pytest.raises(BundleError):
            import_bundle(target, bad)
        assert db_fingerprint(target) == before and "-wal" in before
    finally:
        holder.close()


def test_zip_bomb_is_stopped_while_streaming(bundle: Path, target: Path, tmp_path: Path) -> None:
    """A member that decompresses past the limit is cut off, whatever its header claims."""
    big = b"\x00" * (3 << 20)
    bomb = rebuild(bundle, tmp_path / "bomb.bundle.zip", tmp_path, data_edit=lambda d: d + big)
    before = db_fingerprint(target)
    with pytest.raises(BundleError) as err:
        import_bundle(target, bomb, BundleLimits(max_data_bytes=1 << 20))
    assert err.value.kind == "too_large"
    assert db_fingerprint(target) == before


def _honest_bomb(bundle: Path, out: Path, size: int) -> Path:
    """A good bundle whose bundle.sqlite is `size` bytes of zeros (a few KiB compressed) and
    whose manifest declares exactly that, with the matching sha256: nothing in the archive lies."""
    with zipfile.ZipFile(bundle) as zf:
        manifest = json.loads(zf.read(MANIFEST_NAME))
    digest = hashlib.sha256()
    zeros = b"\x00" * (1 << 20)
    for _ in range(size >> 20):
        digest.update(zeros)
    manifest["files"][DATA_NAME] = {"sha256": digest.hexdigest(), "bytes": size}
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(MANIFEST_NAME, json.dumps(manifest))
        with zf.open(DATA_NAME, "w") as member:
            for _ in range(size >> 20):
                member.write(zeros)
    return out


def test_a_small_zip_that_honestly_declares_a_huge_file_writes_nothing_near_it(
    bundle: Path, target: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 22: a 1 MB zip whose manifest honestly declared 1 GiB wrote 1,021 MiB to temp
    before it was refused. Here 24 MiB deflate to ~24 KiB; extraction is bounded by a small
    multiple of the compressed size (32x + 8 MiB), so nothing past that cap reaches the disk."""
    size = 24 << 20
    bomb = _honest_bomb(bundle, tmp_path / "honest.bundle.zip", size)
    assert bomb.stat().st_size < 64 << 10
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    written = [0]
    real_open = builtins.open

    class Counting:
        def __init__(self, fh: Any) -> None:
            self.fh = fh

        def write(self, data: bytes) -> int:
            written[0] += len(data)
            return int(self.fh.write(data))

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self.fh.close()

        def __getattr__(self, name: str) -> Any:
            return getattr(self.fh, name)

    def counting_open(file: Any, mode: str = "r", *args: Any, **kw: Any) -> Any:
        fh = real_open(file, mode, *args, **kw)
        under = str(file).startswith(str(scratch))
        return Counting(fh) if under and any(m in mode for m in "wax+") else fh

    monkeypatch.setattr(builtins, "open", counting_open)
    cap = 32 * bomb.stat().st_size + (8 << 20)  # the default budget, whole archive
    before = db_fingerprint(target)
    with pytest.raises(BundleError, match="the limit is") as err:
        import_bundle(target, bomb)
    assert err.value.kind == "too_large" and "\n" not in str(err.value)
    assert written[0] <= cap < size
    assert db_fingerprint(target) == before
    assert list(scratch.iterdir()) == []  # the scratch folder is gone too
