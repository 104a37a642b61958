"""m016_chunked_streams: runs stored before the lab recorded tokens a chunk get them, and their mean
ITL per token, from their own request rows (the same numbers tuning.measure.metrics gives), so a
comparison of old stream-interval runs still says the chunk size differs; percentiles, which need
every gap, stay empty."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import connect, queries, repo
from tests.factories import record, seed_lab
from tuning.measure.metrics import summarize

STATS = ("mean", "median", "p90", "p99")
NEW = ("mean_tokens_per_chunk", *(f"{s}_itl_per_token_ms" for s in STATS))


def test_runs_stored_before_get_tokens_a_chunk_and_mean_itl_per_token(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    seed_lab(path, values=(1, 16), repeats=1, with_secrets=False)  # and a failed start
    chunky = [  # 64 tokens in 5 chunks (1, 16, 16, 16, 15), one request without usage, a failure
        *(record(i, 0.1 * i, 0.05, [0.16, 0.15 + 0.01 * i, 0.17, 0.16], 64, 8) for i in range(4)),
        record(4, 0.5, 0.05, [0.2], None, None),
        record(5, 0.6, None, [], None, None, ok=False, kind="http"),
    ]
    with connect(path) as db:
        run_ids = [int(r["id"]) for r in queries.list_runs(db) if r["status"] == "done"]
        target, other = run_ids[0], run_ids[1]
        db.execute("delete from requests where run_id = ?", [target])
        repo.insert_requests(db, target, chunky)
        summary = summarize(chunky, 3.0)
        repo.store_summary(db, target, summary)
        expected = {int(r["id"]): dict(r) for r in queries.list_runs(db)}
        # as a lab of the last version left them: no such columns' values, m016 not applied
        db.execute(f"update runs set {', '.join(f'{k} = null' for k in NEW)}")
        db.execute("delete from _sqlite_migrations where name = 'm016_chunked_streams'")
        db.conn.commit()
    with connect(path) as db:
        rows = {int(r["id"]): r for r in queries.list_runs(db)}
    got = rows[target]
    assert got["mean_tokens_per_chunk"] == pytest.approx(256 / 20)
    assert got["mean_tokens_per_chunk"] == pytest.approx(summary["mean_tokens_per_chunk"])
    assert got["mean_itl_per_token_ms"] == pytest.approx(summary["mean_itl_per_token_ms"])
    assert got["median_itl_per_token_ms"] is None and got["p99_itl_per_token_ms"] is None
    # a one-token-a-chunk run reads 1 token a chunk and its ITL per token is its ITL
    assert rows[other]["mean_tokens_per_chunk"] == pytest.approx(1.0)
    assert rows[other]["mean_itl_per_token_ms"] == pytest.approx(expected[other]["mean_itl_ms"])
    failed = [r for r in rows.values() if r["status"] != "done"]
    assert failed and all(r["mean_tokens_per_chunk"] is None for r in failed)
