"""Bundles of runs made by the real engine: export -> import into a fresh lab gives back the same
summaries, request rows and samples; a second import adds nothing; a damaged copy is refused and
changes nothing; the report of the imported runs draws. Uses the session's `real_lab`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from store import open_db, queries
from store.bundle import BundleError, export_bundle, import_bundle, read_manifest
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
from tuning.measure.metrics import summarize
from tuning.present.report import build_report
from tuning.settings import load_settings

pytestmark = pytest.mark.engine

# The numbers that must arrive exactly as measured.
HEADLINE = (
    "summary_json",
    "output_throughput",
    "mean_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "peak_tree_rss_bytes",
    "kv_cache_tokens",
    "config_json",
    "workload_fingerprint",
    "hardware",
    "vllm_version",
    "author",
    "host",
)


def check_round_trip(lab: dict[str, Any], tmp_path: Path) -> None:
    """The whole check, on any lab dict with db, experiment_id and run_ids."""
    src = Path(lab["db"])
    exp_id = int(lab["experiment_id"])
    run_ids = [int(i) for i in lab["run_ids"]]
    src_runs = {u: r for u, r in by_uid(src, "runs").items() if r["id"] in run_ids}
    assert len(src_runs) == len(run_ids)
    # Who and where: every run carries an author, a host and a globally unique id.
    for run in src_runs.values():
        assert run["author"] and run["host"], run["id"]
        assert len(run["uid"]) == 32
    bundle = tmp_path / "real.bundle.zip"
    settings = load_settings()
    manifest = export_bundle(
        src,
        bundle,
        author=settings.resolved_author(),
        host=settings.resolved_host(),
        experiment_ids=[exp_id],
    )
    assert manifest.counts["runs"] == len(run_ids) and manifest.counts["experiments"] == 1
    assert manifest.counts["requests"] > 0 and manifest.counts["samples"] > 0
    assert read_manifest(bundle).bundle_uid == manifest.bundle_uid
    raw = unpacked(bundle)
    for run in src_runs.values():
        if run["log_path"]:
            assert run["log_path"].encode() not in raw  # a local path stays local
    fresh = tmp_path / "fresh.db"
    result = import_bundle(fresh, bundle)
    assert len(result.runs_added) == len(run_ids) and len(result.experiments_added) == 1
    dst_runs = by_uid(fresh, "runs")
    assert set(dst_runs) == set(src_runs)
    assert_imported(src_runs, dst_runs, RUN_LOCAL, HEADLINE)
    for uid in src_runs:
        got = dst_runs[uid]
        assert got["origin"] == result.manifest.origin and got["log_path"] is None
    src_children = {t: children(src, t) for t in ("requests", "samples")}
    for table in ("requests", "samples"):
        mine = {u: sorted(v, key=repr) for u, v in src_children[table].items() if u in src_runs}
        theirs = {u: sorted(v, key=repr) for u, v in children(fresh, table).items()}
        assert theirs == mine, table
    (src_exp,) = [e for e in table_rows(src, "experiments") if e["id"] == exp_id]
    (dst_exp,) = table_rows(fresh, "experiments")
    assert_imported({src_exp["uid"]: src_exp}, {src_exp["uid"]: dst_exp}, EXP_LOCAL)
    db = open_db(fresh)
    for rid in result.runs_added:
        run = queries.get_run(db, rid)
        if run["status"] == "done":
            again = summarize(queries.get_requests(db, rid), run["summary"]["duration"])
            for key in ("completed", "mean_ttft_ms", "p99_tpot_ms", "output_throughput"):
                assert again[key] == pytest.approx(run["summary"][key]), key
    db.conn.close()
    page = build_report(
        fresh, experiment_ids=[result.experiments_added[0]], kinds=("throughput", "memory")
    )
    assert page.count("<svg") >= 1 and "origin" in page
    dump = table_rows(fresh, "runs")
    before = db_fingerprint(fresh)
    second = import_bundle(fresh, bundle)
    assert not second.changed and second.runs_known == len(run_ids)
    assert table_rows(fresh, "runs") == dump and db_fingerprint(fresh) == before
    damaged = tmp_path / "damaged.bundle.zip"
    data = bundle.read_bytes()
    damaged.write_bytes(data[: len(data) // 2] + bytes(64) + data[len(data) // 2 + 64 :])
    with pytest.raises(BundleError):
        import_bundle(fresh, damaged)
    assert db_fingerprint(fresh) == before
    conn = sqlite3.connect(fresh)
    assert conn.execute("pragma integrity_check").fetchone()[0] == "ok"
    assert conn.execute("pragma foreign_key_check").fetchall() == []
    conn.close()
    assert json.loads(dst_runs[next(iter(dst_runs))]["workload_json"])


def test_real_runs_survive_a_bundle_round_trip(real_lab: dict[str, Any], tmp_path: Path) -> None:
    check_round_trip(real_lab, tmp_path)
