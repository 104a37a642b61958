"""Reading back what the lab wrote, for assertions: table rows, a DB file's fingerprint, a bundle's
bytes, a PNG header, samples by series, an HTML page's start tags; and waiting for a condition
instead of a fixed sleep."""

from __future__ import annotations

import hashlib
import re
import sqlite3
import struct
import time
import zipfile
import zlib
from collections.abc import Callable, Iterable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from core.records import SampleRow
from core.redact import scrub_row
from store.bundle.format import LOCAL_ONLY

# Columns a bundle import sets on its own (ids, origin, the maker lab's uid an export stamps on an
# experiment) or empties (local-only): not compared.
RUN_LOCAL = {"id", "experiment_id", "origin", "hidden", *LOCAL_ONLY["runs"]}
EXP_LOCAL = {"id", "origin", "hidden", "lab_uid", *LOCAL_ONLY["experiments"]}


def wait_for(condition: Callable[[], bool], timeout: float = 10.0, poll: float = 0.02) -> bool:
    """True as soon as `condition()` holds, False once `timeout` seconds passed without it."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str, poll: float = 0.02
) -> None:
    """Return as soon as `condition()` holds; fail naming `what` once `timeout` seconds passed
    without it (a wait on the condition, never a fixed sleep that guesses how long it takes)."""
    if not wait_for(condition, timeout, poll):
        raise AssertionError(f"waited {timeout:g} s for {what}: it never happened")


def db_fingerprint(path: Path) -> dict[str, str]:
    """sha256 of the DB file and of its -wal/-journal companions (what 'unchanged' means)."""
    out = {}
    for suffix in ("", "-wal", "-journal"):
        p = Path(str(path) + suffix)
        if p.exists():
            out[suffix or "db"] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def table_rows(path: Path, table: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(f'select * from "{table}" order by rowid')]
    finally:
        conn.close()


def by_uid(path: Path, table: str) -> dict[str, dict[str, Any]]:
    return {r["uid"]: r for r in table_rows(path, table)}


def children(path: Path, table: str) -> dict[str, list[tuple[Any, ...]]]:
    """Per run uid, its request rows or samples without the local run id, in order."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        cols = [r[1] for r in conn.execute(f'pragma table_info("{table}")') if r[1] != "run_id"]
        order = "idx" if table == "requests" else "rowid"
        out: dict[str, list[tuple[Any, ...]]] = {}
        for uid, rid in conn.execute("select uid, id from runs"):
            out[uid] = [
                tuple(r)
                for r in conn.execute(
                    f'select {", ".join(cols)} from "{table}" where run_id = ? order by {order}',
                    [rid],
                )
            ]
        return out
    finally:
        conn.close()


def assert_imported(
    src: dict[str, dict[str, Any]],
    dst: dict[str, dict[str, Any]],
    local: set[str],
    untouched: Iterable[str] = (),
) -> None:
    """Every row of `src` (by uid) arrived in `dst` as a bundle carries it: scrubbed, `local`
    columns aside, and the `untouched` columns (the numbers) exactly as they were."""
    for uid, orig in src.items():
        got, expected = dst[uid], scrub_row(orig)
        for col in set(orig) - local:
            assert got[col] == expected[col], (uid, col)
        for col in untouched:
            assert got[col] == orig[col], (uid, col)


def unpacked(bundle: Path) -> bytes:
    """Every member's decompressed bytes (a deflated secret would hide from a raw grep)."""
    with zipfile.ZipFile(bundle) as zf:
        return b"".join(zf.read(n) for n in zf.namelist())


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, checking the signature and the chunk's CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    width, height = struct.unpack(">II", data[16:24])
    assert zlib.crc32(data[12:29]) == struct.unpack(">I", data[29:33])[0]
    return width, height


def by_series(rows: list[SampleRow], series: str) -> dict[str, float]:
    return {r.label: r.value for r in rows if r.series == series}


class _StartTags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def start_tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    """Every start tag of an HTML page and its attributes (what a browser would act on)."""
    parser = _StartTags()
    parser.feed(page)
    return parser.tags


# A negative change, '-95.6 %', or an interval's low end, '-110.9 … -80.3 %' (the minus sign as
# typed or as U+2212).
NEGATIVE_PCT = re.compile(r"[-−](\d[\d,]*(?:\.\d+)?)(?= ?%| … [-−+]?\d[\d,.]* ?%)")


def below_minus_100(text: str) -> list[str]:
    """Every change or interval end in `text` below -100 % (impossible for a non-negative
    quantity: the ratio's interval is on the log scale)."""
    return [
        m.group(0) for m in NEGATIVE_PCT.finditer(text) if float(m.group(1).replace(",", "")) > 100
    ]
