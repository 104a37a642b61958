"""Exporting selected runs or experiments as one file: the manifest says who, where and what, the
export is a consistent snapshot, unfinished or missing runs are refused, and secrets never go in
while the configuration does."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zipfile
from pathlib import Path
from typing import Any

import pytest

from core.redact import REDACTED
from store import open_db, repo
from store.bundle import BundleError, export_bundle, import_bundle, read_manifest, verify_bundle
from store.bundle.format import DATA_NAME, FORMAT_VERSION, MANIFEST_NAME
from tests.checks import table_rows, unpacked
from tests.factories import SECRETS


def test_selected_runs_bring_their_experiment(source: dict[str, Any], tmp_path: Path) -> None:
    picked = source["run_ids"][:2]
    out = tmp_path / "two.bundle.zip"
    m = export_bundle(source["path"], out, run_ids=picked, author="ada", host="box-a")
    assert m.counts["runs"] == 2 and m.counts["experiments"] == 1
    assert m.counts["requests"] == 48
    assert {r["experiment_uid"] for r in m.runs} == set(m.experiment_uids)
    fresh = tmp_path / "fresh.db"
    result = import_bundle(fresh, out)
    assert len(result.runs_added) == 2
    # The whole experiment later: its other runs join the experiment imported before.
    whole = tmp_path / "whole.bundle.zip"
    export_bundle(
        source["path"], whole, experiment_ids=[source["experiment_id"]], author="ada", host="box-a"
    )
    later = import_bundle(fresh, whole)
    assert later.runs_known == 2 and len(later.runs_added) == 4
    assert later.experiments_added == [] and later.experiments_known == 1
    assert {r["experiment_id"] for r in table_rows(fresh, "runs")} == set(result.experiments_added)


def test_manifest_says_who_where_and_what(source: dict[str, Any], bundle: Path) -> None:
    m = read_manifest(bundle)
    assert m.format_version == FORMAT_VERSION
    assert (m.author, m.host) == ("ada", "box-a") and m.created_at
    assert m.counts == {"experiments": 1, "runs": 6, "requests": 4 * 24, "samples": 4 * 48 * 6}
    assert len(m.run_uids) == 6 and len(set(m.run_uids)) == 6
    assert m.lab_schema_version >= 1
    with zipfile.ZipFile(bundle) as zf:
        assert sorted(zf.namelist()) == sorted([MANIFEST_NAME, DATA_NAME])
        data = zf.read(DATA_NAME)
    assert hashlib.sha256(data).hexdigest() == m.data_sha256 and len(data) == m.data_bytes
    assert verify_bundle(bundle).bundle_uid == m.bundle_uid
    odd = export_bundle(
        source["path"],
        bundle.with_name("odd.bundle.zip"),
        run_ids=[source["run_ids"][0]],
        author="ada\nlove\x00lace",
        host="  box\tA  ",
    )
    assert (odd.author, odd.host) == ("ada love lace", "box A")


def test_export_is_a_consistent_snapshot_not_a_file_copy(
    source: dict[str, Any], tmp_path: Path
) -> None:
    """A writer mid-transaction (the runner) is neither seen nor blocking."""
    writer = sqlite3.connect(source["path"], timeout=1)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute(
        "insert into runs (uid, experiment_id, status, param, value) values "
        "('uncommitted-run-0001', ?, 'done', 'max-num-seqs', '99')",
        [source["experiment_id"]],
    )
    try:
        out = tmp_path / "snap.bundle.zip"
        m = export_bundle(
            source["path"],
            out,
            experiment_ids=[source["experiment_id"]],
            author="ada",
            host="box-a",
        )
    finally:
        writer.rollback()
        writer.close()
    assert "uncommitted-run-0001" not in m.run_uids and m.counts["runs"] == 6


def test_export_refuses_what_is_not_finished_or_not_there(
    source: dict[str, Any], tmp_path: Path
) -> None:
    db = open_db(source["path"])
    repo.update_run(db, source["run_ids"][0], status="running")
    db.conn.close()
    out = tmp_path / "x.bundle.zip"
    with pytest.raises(BundleError, match="still running") as err:
        export_bundle(
            source["path"], out, experiment_ids=[source["experiment_id"]], author="a", host="h"
        )
    assert err.value.kind == "active"
    with pytest.raises(BundleError, match="no run 999"):
        export_bundle(source["path"], out, run_ids=[999], author="a", host="h")
    with pytest.raises(BundleError, match="no experiment 77"):
        export_bundle(source["path"], out, experiment_ids=[77], author="a", host="h")
    with pytest.raises(BundleError, match="nothing to export"):
        export_bundle(source["path"], out, author="a", host="h")
    assert not out.exists() and not list(tmp_path.glob(".*partial"))


def test_secrets_never_go_in_but_the_configuration_does(
    source: dict[str, Any], bundle: Path, tmp_path: Path
) -> None:
    raw = unpacked(bundle)
    for secret in SECRETS:
        assert secret.encode() not in raw, secret
    assert b"/lab/logs/" not in raw  # log_path is a local path: dropped
    fresh = tmp_path / "fresh.db"
    import_bundle(fresh, bundle)
    runs = table_rows(fresh, "runs")
    first = next(r for r in runs if r["seq"] == 0)
    argv = json.loads(first["argv_json"])
    assert argv[argv.index("--api-key") + 1] == REDACTED
    assert argv[argv.index("--max-num-seqs") + 1] == "2" and "--block-size" in argv
    env = json.loads(first["env_json"])
    assert env == {"HF_TOKEN": REDACTED, "VLLM_CPU_KVCACHE_SPACE": "1"}
    failed = next(r for r in runs if r["status"] == "failed")
    assert "KV cache needs 3 GiB" in failed["log_tail"] and REDACTED in failed["log_tail"]
    assert failed["base_url"] == "http://127.0.0.1:8000/v1"  # stored without its user:pw@
    exp = table_rows(fresh, "experiments")[0]
    assert json.loads(exp["engine_json"])["env"]["HF_TOKEN"] == REDACTED
    assert json.loads(exp["engine_json"])["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_the_exporting_process_s_secret_env_values_are_scrubbed(
    source: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key with no recognisable shape is still caught by value when it is in the environment."""
    odd = "zq7-plainlooking-value-42"
    db = open_db(source["path"])
    repo.update_run(db, source["run_ids"][1], notes=f"tried with {odd} first")
    db.conn.close()
    monkeypatch.setenv("MY_GATEWAY_TOKEN", odd)
    out = tmp_path / "env.bundle.zip"
    export_bundle(source["path"], out, run_ids=[source["run_ids"][1]], author="a", host="h")
    assert odd.encode() not in unpacked(out)
