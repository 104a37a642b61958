"""Bundles: export selected runs or experiments as one file, import it anywhere, safely.

Round trip (summaries, per-request rows, samples equal after export -> import; a second import adds
nothing), secrets scrubbed, and every refusal (truncated, corrupted, extra tables, triggers, views,
newer format, oversized, ../ members, checksum mismatch, wrong types ...) leaves the target DB
byte-for-byte as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.clock import now_iso
from core.records import RequestRecord, SampleRow
from core.redact import REDACTED, is_secret_key, scrub_argv, scrub_row, scrub_text
from store import open_db, queries, repo
from store.bundle import (
    BundleError,
    Limits,
    export_bundle,
    import_bundle,
    read_manifest,
    verify_bundle,
)
from store.bundle.format import DATA_NAME, FORMAT_VERSION, LOCAL_ONLY, MANIFEST_NAME
from tuning.cli.main import main as cli_main
from tuning.metrics import summarize
from tuning.params import PARAMS

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = {
    "num_requests": 24,
    "concurrency": 8,
    "input_len": 64,
    "output_len": 16,
    "shared_prefix_len": 0,
    "endpoint": "completions",
    "seed": 0,
    "num_warmups": None,
    "request_timeout_s": 600.0,
}
# Secrets planted in one run the way a careless setup could leak them; none may leave the lab.
SECRET_ENV = "hf_canaryEnvToken1234567890"
SECRET_ARGV = "sk-canary-argv-0123456789"
SECRET_LOG = "sk-canary-log-9876543210"
SECRET_URL = "canaryUrlPassw0rd"
SECRETS = (SECRET_ENV, SECRET_ARGV, SECRET_LOG, SECRET_URL)


# --------------------------------------------------------------------------------------------
# A realistic synthetic lab, written through store.repo the way the runner writes it
# --------------------------------------------------------------------------------------------


def _records(rng: np.random.Generator, n: int, ttft_s: float, tpot_s: float) -> list[RequestRecord]:
    out = []
    for i in range(n):
        start = i * 0.04
        ttft = ttft_s * (1 + rng.normal(0, 0.05))
        itl = [float(x) for x in np.abs(rng.normal(tpot_s, tpot_s * 0.1, 15))]
        ok = i != 5
        out.append(
            RequestRecord(
                index=i,
                start=start,
                ttft=ttft if ok else None,
                end=start + ttft + sum(itl) if ok else None,
                itl=itl if ok else [],
                prompt_tokens=64,
                output_tokens=16 if ok else None,
                ok=ok,
                http_status=200 if ok else 500,
                error=None if ok else "HTTP 500: engine overloaded",
                error_kind=None if ok else "http",
            )
        )
    return out


def _samples(duration: float, kv_peak: float, rss: float) -> list[SampleRow]:
    rows = []
    for k in range(int(duration * 4)):
        t = k / 4
        load = 1.0 if 3 <= t <= duration - 1 else 0.0
        rows += [
            SampleRow(t, "tree_rss_bytes", rss * min(1.0, t / 3), ""),
            SampleRow(t, "tree_rss_bytes", rss * 0.1, "EngineCore:4242"),
            SampleRow(t, "kv_cache_usage_perc", kv_peak * load),
            SampleRow(t, "generation_tokens_total", max(0.0, t - 3) * 250),
            SampleRow(t, "num_requests_running", 8 * load),
            SampleRow(t, "num_requests_waiting", 1 * load),
        ]
    return rows


def seed_lab(
    path: Path,
    *,
    author: str = "ada",
    host: str = "box-a",
    hardware: str = "cpu-test",
    values: tuple[int, ...] = (2, 16),
    repeats: int = 2,
    with_failed: bool = True,
    with_secrets: bool = True,
    seed: int = 7,
    name: str | None = None,
) -> dict[str, Any]:
    """One finished max-num-seqs experiment: values x repeats measured runs with request rows
    and samples, plus (optionally) one failed start with a log tail. Returns the ids."""
    db = open_db(path)
    rng = np.random.default_rng(seed)
    engine_json = {
        "name": "embedded-cpu",
        "command": [
            "/home/ada/.engine/venv/bin/python",
            "-m",
            "vllm.entrypoints.openai.api_server",
        ],
        "model": "/home/ada/.engine/tiny-llama",
        "served_model_name": "tiny",
        "backend": "cpu",
        "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
        "vllm_version": "0.32.0",
    }
    if with_secrets:
        engine_json["env"]["HF_TOKEN"] = SECRET_ENV
    all_values = list(values) + ([64] if with_failed else [])
    exp = repo.create_experiment(
        db,
        name=name or f"max-num-seqs = {', '.join(map(str, all_values))}",
        param="max-num-seqs",
        values_json=all_values,
        repeats=repeats,
        config_json={"block-size": 16, "enforce-eager": True},
        workload_json=WORKLOAD,
        engine_json=engine_json,
        model="tiny",
        status="done",
        phase="done",
        runs_total=len(all_values) * repeats,
        runs_done=len(all_values) * repeats,
        runner_pid=4321,
        author=author,
        host=host,
        started_at=now_iso(),
        finished_at=now_iso(),
        notes="baseline sweep; see run 1",
        tags="cpu,sweep",
    )
    run_ids: list[int] = []
    seq = 0
    for rep in range(repeats):
        for value in all_values:
            failed = value == 64
            argv = [
                "/home/ada/.engine/venv/bin/python",
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                "/home/ada/.engine/tiny-llama",
                "--host",
                "127.0.0.1",
                "--port",
                "40123",
                "--block-size",
                "16",
                "--max-num-seqs",
                str(value),
            ]
            env = {"VLLM_CPU_KVCACHE_SPACE": "1"}
            if with_secrets and seq == 0:
                argv += ["--api-key", SECRET_ARGV]
                env["HF_TOKEN"] = SECRET_ENV
            rid = repo.create_run(
                db,
                experiment_id=exp,
                seq=seq,
                repeat_index=rep,
                param="max-num-seqs",
                value=str(value),
                config_json={"block-size": 16, "enforce-eager": True, "max-num-seqs": value},
                workload_json=WORKLOAD,
                workload_fingerprint="fp-seeded",
                engine="embedded-cpu",
                vllm_version="0.32.0",
                model="tiny",
                backend="cpu",
                hardware=hardware,
                hardware_json={"summary": hardware, "cpus": 2},
                argv_json=argv,
                env_json=env,
                log_path=f"/home/{author}/lab/logs/experiment-{exp}/run-{seq}.log",
                server_pid=5000 + seq,
                started_at=now_iso(),
                author=author,
                host=host,
                status="running",
            )
            seq += 1
            run_ids.append(rid)
            if failed:
                tail = "INFO starting\nERROR: KV cache needs 3 GiB, 1 GiB available\n"
                if with_secrets:
                    tail += f"DEBUG request headers: Authorization: Bearer {SECRET_LOG}\n"
                repo.update_run(
                    db,
                    rid,
                    status="failed",
                    phase="failed",
                    failure_kind="oom",
                    failure_reason="not enough KV cache memory",
                    failure_hint="lower max-num-seqs or raise the KV space",
                    log_tail=tail,
                    finished_at=now_iso(),
                    base_url=(
                        f"http://ada:{SECRET_URL}@127.0.0.1:8000/v1" if with_secrets else None
                    ),
                )
                continue
            recs = _records(
                rng, WORKLOAD["num_requests"], 0.05 + value / 1000, 0.004 * (1 + value / 32)
            )
            repo.insert_requests(db, rid, recs)
            repo.insert_samples(db, rid, _samples(12.0, 0.2 + value / 100, 1.2 * 2**30))
            summary = summarize(recs, 2.0 + value / 100)
            summary.update(
                peak_tree_rss_bytes=int(1.2 * 2**30),
                peak_kv_cache_usage_perc=0.2 + value / 100,
                preemptions=0,
                load_window_s=[3.0, 11.0],
            )
            repo.store_summary(db, rid, summary)
            repo.update_run(
                db,
                rid,
                status="done",
                phase="done",
                time_to_healthy_s=9.5,
                kv_cache_tokens=8192,
                block_size=16,
                max_concurrency=4.0,
                startup_json={"kv_cache_tokens": 8192, "reused_server": False},
                health_json={"verdict": "ok", "client": {"lag_ms": 1.0}},
                log_tail="INFO Application startup complete.\n",
                finished_at=now_iso(),
            )
    db.conn.close()
    return {"experiment_id": exp, "run_ids": run_ids}


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def db_fingerprint(path: Path) -> dict[str, str]:
    """sha256 of the DB file and of its -wal/-shm companions (what 'unchanged' means)."""
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


def unpacked(bundle: Path) -> bytes:
    """Every member's decompressed bytes (a deflated secret would hide from a raw grep)."""
    with zipfile.ZipFile(bundle) as zf:
        return b"".join(zf.read(n) for n in zf.namelist())


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


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("TUNING_LAB_HOME", str(tmp_path / "home"))
    path = tmp_path / "src.db"
    info = seed_lab(path)
    other = seed_lab(
        path,
        author="bob",
        host="box-b",
        values=(4,),
        repeats=1,
        with_failed=False,
        with_secrets=False,
        seed=3,
        name="bob's single run",
    )
    info.update(path=path, other=other)
    return info


@pytest.fixture
def bundle(source: dict[str, Any], tmp_path: Path) -> Path:
    out = tmp_path / "ada.bundle.zip"
    export_bundle(
        source["path"], out, experiment_ids=[source["experiment_id"]], author="ada", host="box-a"
    )
    return out


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A lab with rows of its own, so imported ids cannot coincide with the source's."""
    path = tmp_path / "target.db"
    seed_lab(
        path,
        author="cy",
        host="box-c",
        values=(8,),
        repeats=1,
        with_failed=False,
        with_secrets=False,
        seed=11,
        name="cy's own",
    )
    return path


# --------------------------------------------------------------------------------------------
# Round trip
# --------------------------------------------------------------------------------------------

RUN_LOCAL = {"id", "experiment_id", "origin", "hidden", *LOCAL_ONLY["runs"]}
EXP_LOCAL = {"id", "origin", "hidden", *LOCAL_ONLY["experiments"]}


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
    for uid, orig in exported.items():
        got = dst_runs[uid]
        expected = scrub_row(orig)
        for col in set(orig) - RUN_LOCAL:
            assert got[col] == expected[col], (uid, col)
        # The headline numbers survive untouched (no secret-scrubbing of data).
        for col in (
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
        ):
            assert got[col] == orig[col], col
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
    orig_exp = scrub_row(src_exp[uid])
    for col in set(orig_exp) - EXP_LOCAL:
        assert got_exp[col] == orig_exp[col], col
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


# --------------------------------------------------------------------------------------------
# Secrets
# --------------------------------------------------------------------------------------------


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
    assert failed["base_url"] == f"http://{REDACTED}@127.0.0.1:8000/v1"
    exp = table_rows(fresh, "experiments")[0]
    assert json.loads(exp["engine_json"])["env"]["HF_TOKEN"] == REDACTED
    assert json.loads(exp["engine_json"])["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_secret_detection_spares_the_lab_s_own_names() -> None:
    for name in (
        "HF_TOKEN",
        "OPENAI_API_KEY",
        "api-key",
        "--hf-token",
        "AWS_SECRET_ACCESS_KEY",
        "password",
        "Authorization",
        "auth_token",
        "GITHUB_TOKEN",
    ):
        assert is_secret_key(name.lstrip("-")), name
    for name in [
        *PARAMS,
        "total_token_throughput",
        "max_tokens",
        "num_key_value_heads",
        "eos_token_id",
        "kv_cache_tokens",
        "prompt_tokens",
        "author",
        "host",
        "tokenizer",
        "VLLM_CPU_KVCACHE_SPACE",
        "HF_HUB_OFFLINE",
    ]:
        assert not is_secret_key(name), name
    assert scrub_argv(["vllm", "--api-key=abc", "--token", "xyz", "--port", "80"]) == [
        "vllm",
        f"--api-key={REDACTED}",
        "--token",
        REDACTED,
        "--port",
        "80",
    ]
    assert scrub_text("key sk-abcdefghijkl and Bearer abc.def") == f"key {REDACTED} and {REDACTED}"
    assert scrub_text("https://gw/v1?api_key=s3cr3t&x=1") == f"https://gw/v1?api_key={REDACTED}&x=1"
    assert scrub_text("max-num-seqs=16 block-size=32") == "max-num-seqs=16 block-size=32"


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


# --------------------------------------------------------------------------------------------
# Refusals: each leaves the target exactly as it was
# --------------------------------------------------------------------------------------------


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


BAD_BUNDLES: dict[str, tuple[str, Callable[[Path, Path, Path], Path]]] = {
    "truncated": (
        "truncated",
        lambda g, o, t: o.write_bytes(g.read_bytes()[: g.stat().st_size // 2]) and o,
    ),
    "truncated-tail": ("truncated", lambda g, o, t: o.write_bytes(g.read_bytes()[:-30]) and o),
    "empty-file": ("truncated", lambda g, o, t: o.write_bytes(b"") is not None and o),
    "not-a-zip": (
        "truncated",
        lambda g, o, t: o.write_bytes(b"SQLite format 3\x00" + b"x" * 5000) and o,
    ),
    "flipped-bytes": ("corrupted", lambda g, o, t: o.write_bytes(_flip(g.read_bytes(), 0.5)) and o),
    "flipped-near-end": (
        "corrupted",
        lambda g, o, t: o.write_bytes(_flip(g.read_bytes(), 0.9)) and o,
    ),
    "garbled-sqlite-with-valid-checksum": (
        "corrupted",
        lambda g, o, t: rebuild(g, o, t, data_edit=_garble_pages),
    ),
    "checksum-mismatch": (
        "checksum",
        lambda g, o, t: rebuild(
            g,
            o,
            t,
            sqlite_edit=lambda c: c.execute("update runs set value = '3' where seq = 0"),
            fix_checksum=False,
        ),
    ),
    "extra-table": (
        "schema",
        lambda g, o, t: rebuild(
            g, o, t, sqlite_edit=lambda c: c.execute("create table evil (x text)")
        ),
    ),
    "trigger": (
        "schema",
        lambda g, o, t: rebuild(
            g,
            o,
            t,
            sqlite_edit=lambda c: c.execute(
                "create trigger t1 after insert on runs begin delete from runs; end"
            ),
        ),
    ),
    "view": (
        "schema",
        lambda g, o, t: rebuild(
            g, o, t, sqlite_edit=lambda c: c.execute("create view v as select * from runs")
        ),
    ),
    "extra-index": (
        "schema",
        lambda g, o, t: rebuild(
            g, o, t, sqlite_edit=lambda c: c.execute("create index idx_evil on runs (notes)")
        ),
    ),
    "unknown-column": (
        "schema",
        lambda g, o, t: rebuild(
            g, o, t, sqlite_edit=lambda c: c.execute("alter table runs add column evil text")
        ),
    ),
    "wrong-value-type": (
        "types",
        lambda g, o, t: rebuild(
            g,
            o,
            t,
            sqlite_edit=lambda c: c.execute(
                "update runs set output_throughput = 'very fast' where seq = 1"
            ),
        ),
    ),
    "wrong-declared-type": (
        "types",
        lambda g, o, t: rebuild(
            g,
            o,
            t,
            sqlite_edit=lambda c: c.executescript(
                "alter table samples rename to s_old; create table samples (run_id INTEGER, "
                "t_s TEXT, series TEXT, label TEXT, value REAL); insert into samples select * "
                "from s_old; drop table s_old;"
            ),
        ),
    ),
    "invalid-json": (
        "types",
        lambda g, o, t: rebuild(
            g,
            o,
            t,
            sqlite_edit=lambda c: c.execute("update runs set summary_json = '{oops' where seq = 1"),
        ),
    ),
    "dangling-run-id": (
        "invalid",
        lambda g, o, t: rebuild(
            g,
            o,
            t,
            sqlite_edit=lambda c: c.execute("update samples set run_id = 4242 where rowid = 1"),
        ),
    ),
    "unfinished-run": (
        "invalid",
        lambda g, o, t: rebuild(
            g,
            o,
            t,
            sqlite_edit=lambda c: c.execute("update runs set status = 'running' where seq = 1"),
        ),
    ),
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
    "manifest-count-mismatch": (
        "manifest",
        lambda g, o, t: rebuild(
            g, o, t, sqlite_edit=lambda c: c.execute("delete from samples where rowid < 10")
        ),
    ),
    "manifest-uids-mismatch": (
        "manifest",
        lambda g, o, t: rebuild(
            g,
            o,
            t,
            sqlite_edit=lambda c: c.execute(
                "update runs set uid = 'ffffffffffffffffffffffffffffffff' where seq = 0"
            ),
        ),
    ),
    "dotdot-member": (
        "unsafe_path",
        lambda g, o, t: rebuild(g, o, t, extra={"../evil.sh": b"rm -rf ~"}),
    ),
    "absolute-member": ("unsafe_path", lambda g, o, t: rebuild(g, o, t, extra={"/etc/evil": b"x"})),
    "unexpected-member": (
        "unexpected_member",
        lambda g, o, t: rebuild(g, o, t, extra={"readme.txt": b"hi"}),
    ),
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
        (Limits(max_bundle_bytes=2000), "the limit is 2,000"),
        (Limits(max_data_bytes=10_000), "the limit is 10,000"),
        (Limits(max_runs=3), "6 runs rows; the limit is 3"),
        (Limits(max_samples=100), "samples rows; the limit is 100"),
        (Limits(max_manifest_bytes=100), "the limit is 100"),
    ],
)
def test_oversized_bundles_are_refused(
    limits: Limits, what: str, bundle: Path, target: Path
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
        import_bundle(target, bomb, Limits(max_data_bytes=1 << 20))
    assert err.value.kind == "too_large"
    assert db_fingerprint(target) == before


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def test_cli_export_and_import(
    source: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli.bundle.zip"
    rc = cli_main(
        [
            "export",
            "--db",
            str(source["path"]),
            "--experiment",
            str(source["experiment_id"]),
            str(source["other"]["run_ids"][0]),
            "--out",
            str(out),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert "2 experiment(s), 7 run(s)" in capsys.readouterr().out
    fresh = tmp_path / "fresh.db"
    assert cli_main(["import", "--db", str(fresh), str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["runs_added"]) == 7 and data["origin"].startswith("bundle:")
    assert cli_main(["import", "--db", str(fresh), str(out)]) == 0
    assert "0 run(s) and 0 experiment(s) added" in capsys.readouterr().out
    broken = tmp_path / "broken.bundle.zip"
    broken.write_bytes(out.read_bytes()[:100])
    before = db_fingerprint(fresh)
    assert cli_main(["import", "--db", str(fresh), str(broken)]) == 2
    assert "refused:" in capsys.readouterr().err
    assert db_fingerprint(fresh) == before
    assert (
        cli_main(["export", "--db", str(source["path"]), "--out", str(tmp_path / "none.zip")]) == 2
    )


# --------------------------------------------------------------------------------------------
# Canary: an API key set for an attached experiment appears nowhere the lab writes
# --------------------------------------------------------------------------------------------

CANARY = "sk-canary-XYZ-7f3e9a"


def _cmdline_watch(stop: threading.Event, seen: list[str]) -> None:
    """Read every process's argv while the experiment runs (argv is public on a shared box)."""
    while not stop.is_set():
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if CANARY.encode() in argv:
                seen.append(argv.decode("utf-8", "replace"))
        stop.wait(0.02)


def test_api_key_canary_reaches_no_db_bundle_report_log_or_argv(
    lab_home: Path, tmp_path: Path
) -> None:
    from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer

    db_path = lab_home / "lab.db"
    env = {**os.environ, "TUNING_LAB_HOME": str(lab_home), "OPENAI_API_KEY": CANARY}
    stop, seen = threading.Event(), []
    watcher = threading.Thread(target=_cmdline_watch, args=(stop, seen), daemon=True)
    watcher.start()
    try:
        with FakeOpenAIServer(
            FakeConfig(model="gw-model", itl_ms=1.0, ttft_ms=3.0, api_key=CANARY)
        ) as srv:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tuning",
                    "experiment",
                    "--base-url",
                    srv.base_url + "/v1",
                    "--model",
                    "gw-model",
                    "--param",
                    "concurrency",
                    "--values",
                    "2,4",
                    "--repeats",
                    "2",
                    "--num-requests",
                    "16",
                    "--input-len",
                    "16",
                    "--output-len",
                    "8",
                    "--db",
                    str(db_path),
                    "--json",
                ],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            assert set(srv.stats.authorization) == {f"Bearer {CANARY}"}  # the key was used
        ids = json.loads(done.stdout.strip().splitlines()[-1])
        out_dir = tmp_path / "out"
        out_dir.mkdir()
        for args in (
            [
                "export",
                "--experiment",
                str(ids["experiment_id"]),
                "--out",
                str(out_dir / "canary.bundle.zip"),
            ],
            [
                "report",
                "--experiment",
                str(ids["experiment_id"]),
                "--out",
                str(out_dir / "canary.html"),
            ],
        ):
            step = subprocess.run(
                [sys.executable, "-m", "tuning", *args, "--db", str(db_path)],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert step.returncode == 0, step.stdout + step.stderr
            assert CANARY not in step.stdout + step.stderr
        assert CANARY not in done.stdout + done.stderr
        imported = tmp_path / "imported.db"
        import_bundle(imported, out_dir / "canary.bundle.zip")
    finally:
        stop.set()
        watcher.join(timeout=2)
    assert not seen, seen
    blobs = [p for root in (lab_home, out_dir) for p in root.rglob("*") if p.is_file()]
    blobs += [p for p in tmp_path.glob("imported.db*")]
    assert any(p.name == "canary.html" for p in blobs) and any(p.suffix == ".zip" for p in blobs)
    for path in blobs:
        raw = path.read_bytes()
        if path.suffix == ".zip":
            raw += unpacked(path)
        assert CANARY.encode() not in raw, path
    html = (out_dir / "canary.html").read_text()
    assert "<svg" in html and "gw-model" in html


def test_the_working_directory_is_not_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    from core.redact import env_secrets, is_secret_key

    monkeypatch.setenv("PWD", "/tmp/some-clone")
    monkeypatch.setenv("DB_PWD", "hunter2hunter2")
    assert not is_secret_key("PWD") and is_secret_key("DB_PWD")
    assert "/tmp/some-clone" not in env_secrets() and "hunter2hunter2" in env_secrets()
