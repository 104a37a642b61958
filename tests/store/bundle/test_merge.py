"""Importing a bundle: a round trip gives back the same rows (summaries, per-request rows,
samples; secrets scrubbed, local-only columns emptied), a second import adds nothing, imported ids
are remapped next to the lab's own rows, and a bundle written by an older main still imports."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from core.redact import REDACTED
from store import connect, open_db, queries
from store.bundle import import_bundle, read_manifest
from tests.checks import (
    EXP_LOCAL,
    RUN_LOCAL,
    assert_imported,
    by_uid,
    children,
    db_fingerprint,
    table_rows,
    unpacked,
)
from tests.factories import SECRETS
from tuning.compare.comparison import build_comparison, default_baseline
from tuning.measure.metrics import summarize

HEADLINE = (
    "summary_json",
    "output_throughput",
    "mean_ttft_ms",
    "p99_tpot_ms",
    "config_json",
    "workload_json",
    "workload_fingerprint",
    "hardware",
    "author",
    "host",
    "uid",
    "value",
    "status",
)
OLD_BUNDLE = Path(__file__).resolve().parents[2] / "data" / "bundle-v1-main-7f1414c.bundle.zip"


def test_round_trip_into_a_fresh_db_and_twice_adds_nothing(
    source: dict[str, Any], bundle: Path, tmp_path: Path
) -> None:
    fresh = tmp_path / "fresh.db"
    result = import_bundle(fresh, bundle)
    assert len(result.runs_added) == 6 and len(result.experiments_added) == 1
    assert result.requests_added == 4 * 24 and result.samples_added == 4 * 48 * 6
    src_runs, dst_runs = by_uid(source["path"], "runs"), by_uid(fresh, "runs")
    exported = {u: r for u, r in src_runs.items() if r["experiment_id"] == source["experiment_id"]}
    assert set(dst_runs) == set(exported)
    # The headline numbers survive untouched (no secret-scrubbing of data).
    assert_imported(exported, dst_runs, RUN_LOCAL, HEADLINE)
    for uid in exported:
        got = dst_runs[uid]
        assert got["log_path"] is None and got["server_pid"] is None
        assert got["origin"] == result.manifest.origin
        assert got["origin"].startswith("bundle:") and "from ada@box-a" in got["origin"]
    # Summaries recompute identically from the imported request rows.
    assert children(fresh, "requests") == {
        u: v for u, v in children(source["path"], "requests").items() if u in exported
    }
    assert children(fresh, "samples") == {
        u: v for u, v in children(source["path"], "samples").items() if u in exported
    }
    src_exp = by_uid(source["path"], "experiments")
    dst_exp = by_uid(fresh, "experiments")
    assert len(dst_exp) == 1
    ((uid, got_exp),) = dst_exp.items()
    assert_imported({uid: src_exp[uid]}, dst_exp, EXP_LOCAL)
    assert got_exp["runner_pid"] is None and got_exp["origin"] == result.manifest.origin
    db = open_db(fresh)
    for rid in result.runs_added:
        run = queries.get_run(db, rid)
        if run["status"] == "done":
            again = summarize(queries.get_requests(db, rid), run["summary"]["duration"])
            assert again["mean_ttft_ms"] == pytest.approx(run["mean_ttft_ms"])
            assert again["output_throughput"] == pytest.approx(run["output_throughput"])
    db.conn.close()
    dump_before = table_rows(fresh, "runs")
    before = db_fingerprint(fresh)
    second = import_bundle(fresh, bundle)
    assert not second.changed and second.runs_known == 6 and second.experiments_known == 1
    assert second.requests_added == 0 and second.samples_added == 0
    assert table_rows(fresh, "runs") == dump_before
    assert db_fingerprint(fresh) == before


def test_import_remaps_ids_next_to_existing_rows(
    source: dict[str, Any], bundle: Path, target: Path
) -> None:
    own = by_uid(target, "runs")
    result = import_bundle(target, bundle)
    runs = table_rows(target, "runs")
    exps = {e["id"]: e for e in table_rows(target, "experiments")}
    imported = [r for r in runs if r["uid"] not in own]
    assert sorted(r["id"] for r in imported) == sorted(result.runs_added)
    assert min(result.runs_added) > max(r["id"] for r in own.values())
    (new_exp,) = result.experiments_added
    assert {r["experiment_id"] for r in imported} == {new_exp}
    assert exps[new_exp]["origin"] == result.manifest.origin
    assert all(r["author"] == "ada" and r["host"] == "box-a" for r in imported)
    assert all(r["origin"] == "local" for r in runs if r["uid"] in own)
    conn = sqlite3.connect(target)
    for table in ("requests", "samples"):
        orphans = conn.execute(
            f"select count(*) from {table} where run_id not in (select id from runs)"
        ).fetchone()[0]
        assert orphans == 0
        per_run = dict(conn.execute(f"select run_id, count(*) from {table} group by run_id"))
        assert all(
            per_run.get(rid, 0) > 0
            for rid in result.runs_added
            if next(r for r in imported if r["id"] == rid)["status"] == "done"
        )
    conn.close()


def test_a_bundle_exported_by_main_before_the_rebuild_still_imports(tmp_path: Path) -> None:
    """tests/data holds a bundle that `python -m tuning export` wrote at commit 7f1414c (the last
    main before the house was rebuilt), from that commit's own seeded lab: ada's max-num-seqs
    2/16/64 sweep, 2 repeats, 64 failed to start, secrets planted."""
    manifest = read_manifest(OLD_BUNDLE)
    assert manifest.format_version == 1 and (manifest.author, manifest.host) == ("ada", "box-a")
    raw = unpacked(OLD_BUNDLE)
    assert not [s for s in SECRETS if s.encode() in raw]
    lab = tmp_path / "lab.db"
    result = import_bundle(lab, OLD_BUNDLE)
    counts = manifest.counts
    assert len(result.experiments_added) == counts["experiments"] == 1
    assert len(result.runs_added) == counts["runs"] == 6
    assert result.requests_added == counts["requests"] == 4 * 24
    assert result.samples_added == counts["samples"] == 4 * 48 * 6
    rows = by_uid(lab, "runs")
    assert set(rows) == set(manifest.run_uids)
    assert {r["origin"] for r in rows.values()} == {result.manifest.origin}
    with connect(lab, readonly=True) as db:
        runs = queries.load_runs(db, result.runs_added)
        done = [r for r in runs if r["status"] == "done"]
        assert len(done) == 4 and {r["value"] for r in done} == {"2", "16"}
        for run in done:
            assert run["summary"]["completed"] == 23 and run["summary"]["failed"] == 1
            again = summarize(queries.get_requests(db, run["id"]), run["summary"]["duration"])
            assert again["mean_ttft_ms"] == pytest.approx(run["mean_ttft_ms"])
        failed = [r for r in rows.values() if r["status"] == "failed"]
        assert [r["value"] for r in failed] == ["64", "64"]
        assert all(r["failure_kind"] == "oom" and REDACTED in r["log_tail"] for r in failed)
        cmp = build_comparison(runs, default_baseline(runs))
    assert cmp.baseline.label == "max-num-seqs = 2"
    assert [s.label for s in cmp.candidates] == ["max-num-seqs = 16", "max-num-seqs = 64"]
    assert cmp.changes[("max-num-seqs = 16", "mean_ttft_ms")].verdict == "worse"
    again = import_bundle(lab, OLD_BUNDLE)
    assert not again.changed and again.runs_known == 6
