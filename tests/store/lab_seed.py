"""A small finished lab written through store.repo, and a bundle of it: what the store's fault
tests need (the bundle tests in tests/test_bundle.py build a larger one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.clock import now_iso
from core.records import RequestRecord, SampleRow
from store import connect, repo
from store.bundle import export_bundle

WORKLOAD = {
    "num_requests": 8,
    "concurrency": 2,
    "input_len": 16,
    "output_len": 4,
    "shared_prefix_len": 0,
    "endpoint": "completions",
    "seed": 0,
    "num_warmups": None,
    "request_timeout_s": 600.0,
}
ENGINE = {
    "name": "embedded-cpu",
    "command": ["/home/ada/.engine/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"],
    "model": "/home/ada/.engine/tiny-llama",
    "served_model_name": "tiny",
    "backend": "cpu",
    "env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
    "vllm_version": "0.32.0",
}


def records(n: int, ttft: float = 0.05) -> list[RequestRecord]:
    return [
        RequestRecord(
            index=i,
            start=i * 0.01,
            ttft=ttft,
            end=i * 0.01 + ttft + 0.03,
            itl=[0.01, 0.01, 0.01],
            prompt_tokens=16,
            output_tokens=4,
            ok=True,
            http_status=200,
        )
        for i in range(n)
    ]


def samples(n: int) -> list[SampleRow]:
    return [SampleRow(k * 0.25, "tree_rss_bytes", 1e9 + k, "") for k in range(n)]


def seed_lab(
    path: Path, *, values: tuple[int, ...] = (2, 16), throughput: float = 182.0, **exp: Any
) -> dict[str, Any]:
    """One finished max-num-seqs experiment, one measured run per value; returns the ids."""
    with connect(path) as db:
        fields: dict[str, Any] = {
            "name": "max-num-seqs sweep",
            "param": "max-num-seqs",
            "values_json": list(values),
            "repeats": 1,
            "config_json": {"block-size": 16},
            "workload_json": WORKLOAD,
            "engine_json": ENGINE,
            "model": "tiny",
            "status": "done",
            "phase": "done",
            "runs_total": len(values),
            "runs_done": len(values),
            "author": "ada",
            "host": "box-a",
            "finished_at": now_iso(),
        }
        fields.update(exp)
        exp_id = repo.create_experiment(db, **fields)
        run_ids = []
        for seq, value in enumerate(values):
            rid = repo.create_run(
                db,
                experiment_id=exp_id,
                seq=seq,
                repeat_index=0,
                param="max-num-seqs",
                value=str(value),
                config_json={"block-size": 16, "max-num-seqs": value},
                workload_json=WORKLOAD,
                argv_json=["python", "-m", "vllm", "--max-num-seqs", str(value)],
                env_json={"VLLM_CPU_KVCACHE_SPACE": "1"},
                hardware="cpu-test",
                hardware_json={"summary": "cpu-test", "cpus": 2},
                author=fields["author"],
                host=fields["host"],
                status="running",
            )
            repo.insert_requests(db, rid, records(8))
            repo.insert_samples(db, rid, samples(8))
            repo.store_summary(
                db, rid, {"completed": 8, "failed": 0, "output_throughput": throughput}
            )
            repo.update_run(
                db,
                rid,
                status="done",
                phase="done",
                startup_json={"kv_cache_tokens": 8192},
                health_json={"verdict": "ok"},
                finished_at=now_iso(),
            )
            run_ids.append(rid)
    return {"experiment_id": exp_id, "run_ids": run_ids}


def make_bundle(tmp: Path, name: str = "src", **seed: Any) -> tuple[Path, dict[str, Any]]:
    """A lab of its own and a bundle of its experiment."""
    src = tmp / f"{name}.db"
    info = seed_lab(src, **seed)
    out = tmp / f"{name}.bundle.zip"
    export_bundle(src, out, experiment_ids=[info["experiment_id"]], author="bob", host="box-b")
    info.update(db=src, bundle=out)
    return out, info
