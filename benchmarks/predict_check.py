"""Does `tuning predict` agree with the engine? Starts the embedded CPU engine (tiny-llama) once per
configuration, reads the KV cache it reports (tokens, blocks, concurrency at max-model-len) and
prints it beside the prediction with the error in %; a configuration predicted not to start is
started too, to see the engine refuse it. Then the stored H200 runs (examples/h200/lab-h200.db.xz,
gpu-memory-utilization x the device's memory) against the same arithmetic.

Run it alone on the machine (it starts the real engine, one server at a time):

    flock /tmp/engine.lock .venv/bin/python benchmarks/predict_check.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from store import connect, queries, snapshot  # noqa: E402
from tuning.engine.embedded import embedded_spec  # noqa: E402
from tuning.engine.predict import ModelShape, error_pct, predict_config  # noqa: E402
from tuning.engine.server import ServerProcess, StartFailure  # noqa: E402

H200_DB = REPO / "examples" / "h200" / "lab-h200.db.xz"
# The 1B dummy Llama of ../shared/tools/gpu-vllm/make_tiny_model.py (vocab ~1k: tiny embeddings).
H200_MODEL = json.loads((H200_DB.parent / "model-config.json").read_text())
# 2 MiB holds 8 blocks of 128 tokens (2,048 bytes a token), one of them the engine's null block:
# max-model-len 512 starts, 1,024 does not (it needs 8 usable blocks).
CONFIGS: list[dict[str, Any]] = [
    {"kv-cache-memory-bytes": "2M", "max-model-len": 512},
    {"kv-cache-memory-bytes": "1G", "max-model-len": 2048},
    {"kv-cache-memory-bytes": "2M", "max-model-len": 512, "block-size": 32},
    {"kv-cache-memory-bytes": "1G", "max-model-len": 2048, "block-size": 64},
    {"kv-cache-memory-bytes": "2M", "max-model-len": 1024},  # predicted not to start
]


def engine_facts(config: dict[str, Any], log_dir: Path) -> dict[str, Any]:
    spec = embedded_spec()
    launch = spec.launch({**spec.baseline, **config})
    server = ServerProcess(launch, log_dir / f"start-{len(list(log_dir.iterdir()))}.log")
    server.start()
    try:
        facts = server.wait_healthy(600.0).to_dict()  # a loaded 2-core machine is slow
        return {"started": True, **facts}
    except StartFailure as failure:
        return {"started": False, "kind": failure.kind, "reason": failure.reason[:400]}
    finally:
        server.stop()


def h200_check() -> float:
    """Print the stored H200 runs beside their prediction; the worst error in %."""
    h200 = ModelShape.from_config(H200_MODEL)
    worst = 0.0
    runs = []
    for name in ("lab-h200.db.xz", "lab-h200-memory-wall.db.xz", "lab-h200-decisions.db.xz"):
        with connect(snapshot.expanded(H200_DB.with_name(name)), readonly=True) as db:
            runs += [r for r in queries.list_runs(db) if r["kv_cache_tokens"]]  # not attached
    for run in runs:
        gpus = (run.get("hardware_info") or {}).get("gpus") or [{}]
        device = gpus[0].get("memory_total_bytes")
        pred = predict_config(run["config"], h200, backend="gpu", device_bytes=device)
        err = error_pct(pred.kv_tokens, run.get("kv_cache_tokens"))
        worst = max(worst, abs(err or 0.0))
        print(
            f"  run {run['id']} {json.dumps(run['config']):58} predicted "
            f"{pred.kv_tokens:,} engine {run['kv_cache_tokens']:,} ({err:+.2f} %)"
        )
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the first two configurations only")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    ap.add_argument("--h200-only", action="store_true", help="the stored H200 runs only")
    ap.add_argument("--log-dir", type=Path, default=None, help="keep the engine's logs here")
    args = ap.parse_args(argv)
    spec = embedded_spec()
    shape = ModelShape.load(spec.model)
    rows = []
    worst = 0.0
    print(f"{'configuration':58} {'predicted':>22} {'engine':>22} {'error':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        logs = args.log_dir or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        configs = [] if args.h200_only else CONFIGS[:2] if args.quick else CONFIGS
        for config in configs:
            full = {**spec.baseline, **config}
            env = {k: v for k, v in spec.env.items() if k != "VLLM_CPU_KVCACHE_SPACE"}
            pred = predict_config(full, shape, backend="cpu", env=env)
            got = engine_facts(config, logs)
            err = error_pct(pred.kv_tokens, got.get("kv_cache_tokens"))
            said = (
                f"{got['kv_cache_tokens']:,} tok {got.get('max_concurrency')}x"
                if got["started"]
                else f"refused ({got['kind']})"
            )
            mine = (
                f"{pred.kv_tokens:,} tok {pred.max_concurrency}x"
                if pred.can_start
                else "cannot start"
            )
            agree = pred.can_start == got["started"]
            if err is not None:
                worst = max(worst, abs(err))
            text = json.dumps(config, separators=(",", ":"))
            shown = f"{err:+.2f} %" if err is not None else ("ok" if agree else "WRONG")
            print(f"{text:58} {mine:>22} {said:>22} {shown:>8}")
            if not got["started"]:
                print(f"{'':58}   engine: {got['reason']}")
            rows.append({"config": config, "predicted": pred.to_json(), "engine": got})
            if not agree:
                worst = max(worst, 100.0)
    print("\nH200 runs (stored): gpu-memory-utilization x device memory - weights - runtime")
    h200_worst = h200_check()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    ok = worst <= 2.0 and h200_worst <= 5.0
    print(
        f"\nworst error: embedded {worst:.2f} % (target 2 %), H200 {h200_worst:.2f} % "
        f"(target 5 %): {'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
