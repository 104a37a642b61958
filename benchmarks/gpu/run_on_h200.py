"""The lab on a real GPU: what runs on the H200 test machine (see benchmarks/gpu/README.md).

Everything goes through the lab's own CLI (`python -m tuning experiment|bench|server|runs`) with a
custom engine = real vLLM 0.25.0 carried in by benchmarks/gpu/prepare_carry.py. State lives in a
scratch folder outside the working tree (ACC, default ~/acc) so it survives between calls on the
same still-warm machine. Steps, each a separate device call, made back to back (the machine goes
back ~30 s after a command ends, and then everything under ACC is gone):

    python3 benchmarks/gpu/run_on_h200.py stage1                  # call 1 (carry .carry1): keep
                                                                  # part-aa + the model in ACC
    H200_STEPS=a,b python3 benchmarks/gpu/run_on_h200.py stage2 --until 560
                                                                  # call 2 (carry .carry2): install,
                                                                  # verify imports, run (a) and (b)
    H200_STEPS=c python3 benchmarks/gpu/run_on_h200.py start --until 540
                                                                  # call 3: run (c)
    python3 benchmarks/gpu/run_on_h200.py wait --until 540        # only if a step outlived its call
    python3 benchmarks/gpu/run_on_h200.py lab experiment --resume 1 --budget-minutes 22
                                                                  # any lab command, same settings
                                                                  # and DB; then `collect`

The pipeline (`pipeline`, started by stage2/start in its own session so it runs on between calls;
H200_STEPS picks the steps, default a,b,c):
  (a) experiment gpu-memory-utilization 0.5,0.9, repeats 2, concurrency 64
  (b) experiment max-num-seqs 32,256, repeats 2, concurrency 256
  (d) experiment kv-cache-memory-bytes 1G,4G,16G at concurrency 256, 512 in / 256 out, 2,048
      requests, repeats H200_REPEATS (2, or auto): the memory wall decided
  (c) one server (`server start`), then `tuning bench` and vLLM's serving benchmark interleaved
      A B A B at concurrency 64 and 256; medians and ratios lab / vLLM
  (m) resident engines: max-num-seqs 8 vs 128 until decided, switched by sleep / wake
      (benchmarks/gpu/resident_step.py), its result in resident-<gpu>.json
Every wait/stage2 call ends with `collect`: at most 8 flat files into $OUT (an xz DB snapshot
made with VACUUM INTO, bench JSON, logs, `runs --json`, `compare` output, the text summary).

`summary --db FILE [--bench FILE]` prints the compact summary anywhere (sqlite3 only).
No shell: every process is an argv list; servers are stopped by the lab (process group).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks import common  # noqa: E402
from benchmarks.gpu import resident_step as resident  # noqa: E402

ACC = Path(os.environ.get("H200_ACC") or Path.home() / "acc")
SITE = ACC / "site"
MODEL_DIR = ACC / "gpu-model"
LAB_HOME = ACC / "labhome"
DB = ACC / "lab.db"
BENCH_DIR = ACC / "bench"
PIPE_LOG = ACC / "pipeline.log"
EXTRA_WHEELS = ACC / "extra-wheels"  # kept by `stage1 --carry .carry-ray` (prepare_ray_carry.py)
DONE = ACC / "DONE"
SERVED = "llama1b"
INPUT_LEN, OUTPUT_LEN = 64, 128
NUM_REQUESTS = int(os.environ.get("H200_NUM_REQUESTS", "512"))
BENCH_CONCURRENCY = (64, 256)
BENCH_PAIRS = int(os.environ.get("H200_BENCH_PAIRS", "2"))
T0 = time.monotonic()
GIB = 1 << 30
# Steps (a) and (b): the parameter, its values and the concurrency; two repeats of each value.
EXPERIMENTS = {
    "a": ("gpu-memory-utilization", "0.5,0.9", 64),
    "b": ("max-num-seqs", "32,256", 256),
    # (d) the memory wall of issue 13: the KV budget decides preemptions and TTFT at C=256.
    "d": ("kv-cache-memory-bytes", "1G,4G,16G", 256),
    # (e) the memory wall's two ends, repeated until decided (eager: a faster restart per repeat).
    "e": ("kv-cache-memory-bytes", "1G,16G", 256),
    # (g) the fleet path with one slot (Ray on this machine, started and stopped by the lab).
    "g": ("kv-cache-memory-bytes", "4G,16G", 256),
    # (h) the same as (g) without the fleet, in the same session: fleet vs local on one GPU.
    "h": ("kv-cache-memory-bytes", "4G,16G", 256),
    # (i) a flag outside the curated registry, learned from this vLLM's own parser (issue 21);
    # compiled, not eager: the first start compiles cold, the later ones hit the compile cache.
    "i": ("async-scheduling", "false,true", 256),
    # (j) a JSON-valued flag outside the registry: CUDA graphs on (vLLM's default mode, asked
    # explicitly) vs off, through compilation-config; each value checked by vLLM's own parser.
    "j": (
        "compilation-config",
        '{"cudagraph_mode":"FULL_AND_PIECEWISE"},{"cudagraph_mode":"NONE"}',
        256,
    ),
    # (k) the memory wall through a flag outside the registry: the KV cache's size in blocks
    # (16 tokens each: 32,768 vs 524,288 tokens; C=256 of 768 tokens needs about 196,608).
    "k": ("num-gpu-blocks-override", "2048,32768", 256),
    # (m) resident engines (benchmarks/gpu/resident_step.py): a large effect, switched by sleep /
    # wake, until decided; its JSON result is resident-<gpu>.json.
    resident.KEY: (resident.PARAM, resident.VALUES, resident.CONCURRENCY),
}
EXPERIMENT_REPEATS = os.environ.get("H200_REPEATS", "2")  # "auto": repeat until decided
# Steps with their own workload (input, output, requests): >= 30 s of load per run.
STEP_WORKLOAD = {
    "d": (512, 256, int(os.environ.get("H200_D_REQUESTS", "2048"))),
    "e": (512, 256, 2048),
    "g": (512, 256, 2048),
    "h": (512, 256, 2048),
    "i": (512, 256, 3072),
    "j": (512, 256, 2048),
    "k": (512, 256, int(os.environ.get("H200_K_REQUESTS", "2048"))),
    resident.KEY: resident.WORKLOAD,
}
# Steps with their own flags (the last --repeats wins over the default one).
STEP_FLAGS = {
    "e": ["--repeats", "auto", "--max-repeats", "3", "--budget-minutes", "11"]
    + ["--set", "enforce-eager=true"],
    "g": ["--repeats", "1", "--fleet", "local", "--slots", "1", "--set", "enforce-eager=true"],
    "h": ["--repeats", "1", "--set", "enforce-eager=true"],
    "i": ["--repeats", "auto", "--max-repeats", "3", "--budget-minutes", "9"],
    "j": ["--repeats", "auto", "--max-repeats", "3", "--budget-minutes", "11"],
    "k": ["--repeats", "auto", "--max-repeats", "3"]
    + ["--budget-minutes", os.environ.get("H200_K_BUDGET", "14")]
    + ["--set", "enforce-eager=true"],
    resident.KEY: resident.FLAGS,
}
# (f) one search under a TTFT SLO: the highest concurrency whose p99 TTFT meets the SLO, on one
# server kept up (a 4 GiB KV budget: about 170 requests of 768 tokens fit at once).
SEARCH = {
    "range": os.environ.get("H200_F_RANGE", "64:512"),
    "slo": os.environ.get("H200_F_SLO", "ttft:1000"),
    "budget_runs": os.environ.get("H200_F_BUDGET", "6"),
    "requests": 1536,
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} +{time.monotonic() - T0:5.0f}s] {msg}", flush=True)


def lab_env() -> dict[str, str]:
    """The lab's settings for a user's own vLLM (tuning/settings.py) + the recipe's environment."""
    return common.client_env(
        TUNING_LAB_ENGINE="custom",
        TUNING_LAB_ENGINE_COMMAND=f"{sys.executable} -m vllm.entrypoints.openai.api_server "
        "--attention-backend FLASH_ATTN",
        TUNING_LAB_ENGINE_MODEL=str(MODEL_DIR),
        TUNING_LAB_ENGINE_BACKEND="gpu",
        TUNING_LAB_ENGINE_LOAD_FORMAT="dummy",
        TUNING_LAB_SERVED_MODEL_NAME=SERVED,
        TUNING_LAB_HOME=str(LAB_HOME),
        PYTHONPATH=str(SITE),
        VLLM_USE_FLASHINFER_SAMPLER="0",
        # `pip install --target` puts Ray's `ray` command in SITE/bin: the fleet starts Ray with it
        PATH=f"{SITE / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    )


def call(
    argv: list[str],
    timeout: float,
    env: dict[str, str] | None = None,
    capture: bool = False,
    stdout_only: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run one argv (no shell); capture both streams, stdout only (stderr streams to our log),
    or nothing."""
    log("$ " + " ".join(a if len(a) < 120 else a[:40] + "..." for a in argv))
    pipe = subprocess.PIPE
    return subprocess.run(
        argv,
        cwd=REPO,
        env=env or lab_env(),
        timeout=timeout,
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=pipe if capture or stdout_only else None,
        stderr=pipe if capture else None,
    )


# --- stage 1 / stage 2 --------------------------------------------------------------------------


def stage1(args: argparse.Namespace) -> int:
    """Keep this call's piece of the wheel (and the model, carried by the first call) in ACC."""
    carry = REPO / args.carry
    ACC.mkdir(parents=True, exist_ok=True)
    for part in sorted(carry.glob("vllm.whl.part-*")):
        shutil.copy2(part, ACC / part.name)
        log(f"kept {part.name} ({part.stat().st_size} bytes) in {ACC}")
    if (carry / "wheels").exists() and args.carry != ".carry2":  # .carry-ray: Ray for step (g)
        EXTRA_WHEELS.mkdir(parents=True, exist_ok=True)
        for whl in (carry / "wheels").glob("*.whl"):
            shutil.copy2(whl, EXTRA_WHEELS / whl.name)
        log(f"kept {len(list(EXTRA_WHEELS.glob('*.whl')))} extra wheels in {EXTRA_WHEELS}")
    if (carry / "gpu-model").exists():
        if MODEL_DIR.exists():
            shutil.rmtree(MODEL_DIR)
        shutil.copytree(carry / "gpu-model", MODEL_DIR)
        log(f"kept gpu-model in {ACC}")
    if args.carry != ".carry1":
        return 0  # the machine was probed by the first call
    subprocess.run(
        ["nvidia-smi", "--query-gpu=name,memory.total,memory.used,driver_version", "--format=csv"],
        check=False,
    )
    probe = (
        "import importlib.metadata as m\n"
        "for d in ('click','tabulate','python-dateutil','pluggy','aiohttp','uvloop','psutil',"
        "'prometheus-client','nvidia-ml-py','numpy','tokenizers','tqdm','transformers',"
        "'torch','pillow','regex'):\n"
        "    try: print(d, m.version(d))\n"
        "    except m.PackageNotFoundError: print(d, 'MISSING')\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=False)
    return 0


def stage2(args: argparse.Namespace) -> int:
    carry = REPO / args.carry
    name = (carry / "WHEEL_NAME").read_text().strip()
    wheel = ACC / name
    kept = {p.name: p for p in ACC.glob("vllm.whl.part-*")}
    kept.update({p.name: p for p in carry.glob("vllm.whl.part-*")})
    with open(wheel, "wb") as out:
        for part in (kept[k] for k in sorted(kept)):
            with open(part, "rb") as fh:
                shutil.copyfileobj(fh, out, 1 << 22)
    log(f"joined {wheel.name}: {wheel.stat().st_size} bytes")
    if SITE.exists():
        shutil.rmtree(SITE)
    wheels = sorted(str(p) for p in (carry / "wheels").glob("*.whl"))
    wheels += sorted(str(p) for p in EXTRA_WHEELS.glob("*.whl"))
    rc = call(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--target",
            str(SITE),
            *wheels,
            str(wheel),
        ],
        timeout=300,
    ).returncode
    if rc:
        log(f"pip install failed ({rc})")
        return rc
    verify = (
        "import time; t=time.time()\n"
        "import tuning.cli.main, tuning.experiment.runner, tuning.cli.bench\n"
        "import tuning.measure.loadgen.child, store\n"
        "import sqlite_utils, pynvml, aiohttp, uvloop\n"
        "print('lab CLI imports OK', round(time.time()-t,1), 's; sqlite_utils',"
        " sqlite_utils.__version__ if hasattr(sqlite_utils,'__version__') else '?')\n"
        "import vllm; print('vllm', vllm.__version__, round(time.time()-t,1), 's')\n"
        "from vllm.benchmarks.serve import add_cli_args, main\n"
        "print('vllm.benchmarks.serve OK', round(time.time()-t,1), 's')\n"
        "try:\n    import ray; print('ray', ray.__version__)\n"
        "except ImportError:\n    print('no ray: step (g) cannot run')\n"
    )
    rc = call([sys.executable, "-c", verify], timeout=240).returncode
    if rc:
        log(f"import check failed ({rc})")
        return rc
    helped = call(
        [sys.executable, "-m", "tuning", "experiment", "--help"], timeout=60, capture=True
    )
    log(f"`python -m tuning experiment --help` exit {helped.returncode}")
    if helped.returncode:
        print(helped.stderr[-3000:])
        return helped.returncode
    return start(args)


def start(args: argparse.Namespace) -> int:
    """Start the pipeline in its own session (it runs on between calls), then follow it."""
    DONE.unlink(missing_ok=True)
    PIPE_LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(PIPE_LOG, "ab") as fh:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "pipeline"],
            cwd=REPO,
            env=lab_env(),
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    log(f"pipeline started in its own session: pid {proc.pid}, log {PIPE_LOG}")
    return wait(args)


# --- the pipeline -------------------------------------------------------------------------------


def experiment(key: str) -> dict[str, Any]:
    param, values, concurrency = EXPERIMENTS[key]
    input_len, output_len, requests = STEP_WORKLOAD.get(key, (INPUT_LEN, OUTPUT_LEN, NUM_REQUESTS))
    json_values = values.startswith("{")
    shown = values.replace("},{", "} vs {") if json_values else values.replace(",", " vs ")
    name = f"GPU ({key}) {param} {shown}, C={concurrency}"  # the runs store which GPU
    argv = [
        sys.executable,
        "-m",
        "tuning",
        "experiment",
        "--param",
        param,
        "--values",
        values,
        "--repeats",
        EXPERIMENT_REPEATS,
        "--concurrency",
        str(concurrency),
        "--num-requests",
        str(requests),
        "--input-len",
        str(input_len),
        "--output-len",
        str(output_len),
        "--set",
        "max-model-len=2048",
        "--start-timeout",
        "420",
        "--name",
        name,
        "--db",
        str(DB),
        "--json",
        *STEP_FLAGS.get(key, []),
    ]
    t = time.monotonic()
    done = call(argv, timeout=1500, stdout_only=True)
    out: dict[str, Any] = {"key": key, "rc": done.returncode, "wall_s": time.monotonic() - t}
    for line in (done.stdout or "").splitlines():
        if line.startswith("{"):
            out.update(json.loads(line))
    log(f"experiment ({key}): {json.dumps(out)}")
    return out


def learn_flags() -> dict[str, Any]:
    """(l) the flags this vLLM defines, read from its own parser by the lab (`tuning flags`)."""
    done = call([sys.executable, "-m", "tuning", "flags", "--json"], timeout=300, capture=True)
    out: dict[str, Any] = {"rc": done.returncode, "stderr_tail": (done.stderr or "")[-2000:]}
    if done.returncode == 0:
        (ACC / "flags-h200.json").write_text(done.stdout)
        flags = json.loads(done.stdout)
        out.update({k: flags.get(k) for k in ("vllm_version", "parser", "count")})
        out["async-scheduling"] = [f for f in flags["flags"] if f["name"] == "async-scheduling"]
    log(f"flags: {json.dumps(out)[:1500]}")
    return out


def bench_pair_runs(base_url: str) -> list[dict[str, Any]]:
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for c, i, tool in common.interleaved(
        BENCH_CONCURRENCY, BENCH_PAIRS, ("lab", "vllm"), alternate=False
    ):
        out = BENCH_DIR / f"{tool}-c{c}-{i}.json"
        out.unlink(missing_ok=True)
        load = common.Load(base_url, SERVED, MODEL_DIR, c, NUM_REQUESTS, INPUT_LEN, OUTPUT_LEN)
        argv = (common.lab_argv if tool == "lab" else common.vllm_argv)(sys.executable, load, out)
        t = time.monotonic()
        done = call(argv, timeout=300, capture=True)
        wall = time.monotonic() - t
        if done.returncode != 0 or not out.exists():
            log(
                f"{tool} C={c} #{i} FAILED rc={done.returncode}\n"
                f"{(done.stdout or '')[-1500:]}\n{(done.stderr or '')[-2500:]}"
            )
            rows.append({"tool": tool, "concurrency": c, "pair": i, "error": True})
            continue
        result = json.loads(out.read_text())
        row = common.result_row(result, common.AGREEMENT_KEYS)
        row.update(
            tool=tool,
            concurrency=c,
            pair=i,
            wall_s=round(wall, 1),
            total_output_tokens=result.get("total_output_tokens"),
            duration=result.get("duration"),
        )
        if tool == "lab":
            row["client_bound"] = (result.get("lab") or {}).get("client_bound")
        rows.append(row)
        log(
            f"{tool:5} C={c:<4} #{i} {row['output_throughput']:9.0f} tok/s  TTFT "
            f"{row['mean_ttft_ms']:7.1f} ms  p99 {row['p99_ttft_ms']:7.1f}  TPOT "
            f"{row['mean_tpot_ms']:6.2f} ms  failed {row['failed']}  ({wall:.0f} s wall)"
        )
        time.sleep(1)
    return rows


def start_server(*settings: str) -> dict[str, Any] | None:
    """`tuning server start` with max-model-len 2048 and these NAME=VALUE settings; its state."""
    sets = [a for kv in ("max-model-len=2048", *settings) for a in ("--set", kv)]
    started = call(
        [sys.executable, "-m", "tuning", "server", "start", *sets]
        + ["--start-timeout", "420", "--json"],
        timeout=480,
        capture=True,
    )
    text = started.stdout or ""
    try:
        state: dict[str, Any] = json.loads(text[text.index("{") :])
    except ValueError:
        log(f"server start failed rc={started.returncode}: {text[-2000:]} {started.stderr[-2000:]}")
        return None
    facts = state.get("facts") or {}
    log(
        f"server healthy after {facts.get('time_to_healthy_s')} s at {state['base_url']}, "
        f"KV {facts.get('kv_cache_tokens')} tokens"
    )
    return state


def search_result(
    key: str, done: subprocess.CompletedProcess[str], wall_s: float, name: str
) -> dict[str, Any]:
    """A search step's result: its exit code, wall time and `--json` output (the tail of what it
    printed when that is not JSON), also written to ACC/name for `collect`."""
    out: dict[str, Any] = {"key": key, "rc": done.returncode, "wall_s": wall_s}
    text = done.stdout or ""
    if "{" in text:
        try:
            out["search"] = json.loads(text[text.index("{") :])
        except ValueError:
            out["stdout"] = text[-3000:]
    (ACC / name).write_text(json.dumps(out, indent=2, default=str))
    return out


def search() -> dict[str, Any]:
    """(f) `tuning search` over the concurrency under a p99 TTFT SLO, attached to one server."""
    state = start_server("kv-cache-memory-bytes=4G", "enforce-eager=true")
    if state is None:
        return {"error": "server start failed"}
    argv = [
        sys.executable, "-m", "tuning", "search",
        "--param", "concurrency", "--range", SEARCH["range"],
        "--objective", "output_throughput", "--goodput", SEARCH["slo"],
        "--budget-runs", SEARCH["budget_runs"],
        "--base-url", state["base_url"], "--model", SERVED,
        "--num-requests", str(SEARCH["requests"]), "--input-len", "512", "--output-len", "256",
        "--db", str(DB), "--json",
    ]  # fmt: skip
    t = time.monotonic()
    try:
        done = call(argv, timeout=1500, stdout_only=True)
    finally:
        call([sys.executable, "-m", "tuning", "server", "stop"], timeout=120)
    out = search_result("f", done, time.monotonic() - t, "search-h200.json")
    log(f"search (f): chosen {out.get('search', {}).get('chosen')} rc {done.returncode}")
    return out


# (n) a server-flag search under a latency SLO, settled by its confirm (issue 37): max-num-seqs
# over a range at C=256 (each value a restart, eager), the objective output throughput under a
# p99 TPOT SLO, then `--confirm`: the leader against its closest rival, repeated until decided
# within the confirm's limits.
SEARCH_CONFIRM = {
    "range": os.environ.get("H200_N_RANGE", "64:256"),
    "slo": os.environ.get("H200_N_SLO", "tpot:80"),
    "budget_runs": os.environ.get("H200_N_BUDGET", "4"),
    "requests": os.environ.get("H200_N_REQUESTS", "2048"),
    "max_repeats": os.environ.get("H200_N_MAX_REPEATS", "4"),
    "minutes": os.environ.get("H200_N_MINUTES", "9"),
}


def search_confirm() -> dict[str, Any]:
    """(n) `tuning search --param max-num-seqs ... --goodput ... --confirm`: the lab starts each
    value's server itself; the result (choice, interval or named tie) in search-confirm.json."""
    spec = SEARCH_CONFIRM
    argv = [
        sys.executable, "-m", "tuning", "search",
        "--param", "max-num-seqs", "--range", spec["range"], "--coarse", "2",
        "--objective", "output_throughput", "--goodput", spec["slo"],
        "--budget-runs", spec["budget_runs"], "--confirm",
        "--max-repeats", spec["max_repeats"], "--budget-minutes", spec["minutes"],
        "--set", "max-model-len=2048", "--set", "enforce-eager=true",
        "--concurrency", "256", "--num-requests", spec["requests"],
        "--input-len", "512", "--output-len", "256", "--start-timeout", "420",
        "--db", str(DB), "--json",
    ]  # fmt: skip
    t = time.monotonic()
    done = call(argv, timeout=3000, stdout_only=True)
    out = search_result("n", done, time.monotonic() - t, "search-confirm.json")
    found = out.get("search", {})
    log(f"search (n): choice {json.dumps(found.get('choice'))} rc {done.returncode}")
    return out


def bench() -> dict[str, Any]:
    state = start_server("max-num-seqs=256")
    if state is None:
        return {"error": "server start failed"}
    facts = state.get("facts") or {}
    rows: list[dict[str, Any]] = []
    try:
        rows = bench_pair_runs(state["base_url"])
    finally:
        call([sys.executable, "-m", "tuning", "server", "stop"], timeout=120)
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "server": {"argv": state.get("argv"), "facts": facts},
        "workload": {
            "input_len": INPUT_LEN,
            "output_len": OUTPUT_LEN,
            "num_requests": NUM_REQUESTS,
            "ignore_eos": True,
            "warmups": "one wave (= concurrency)",
        },
        "order": "A B A B (lab, vLLM) per concurrency",
        "runs": rows,
        "summary": common.ratio_summary(rows, common.AGREEMENT_KEYS),
    }
    (ACC / "bench-agreement.json").write_text(json.dumps(result, indent=2))
    for c, s in result["summary"].items():
        r = s["ratio"]
        log(
            f"ratio lab/vLLM C={c}: throughput {r['output_throughput']:.3f}  mean TTFT "
            f"{r['mean_ttft_ms']:.3f}  p99 TTFT {r['p99_ttft_ms']:.3f}  mean TPOT "
            f"{r['mean_tpot_ms']:.3f}"
        )
    return result


def resident_run() -> dict[str, Any]:
    """Step (m): resident engines until decided; its JSON result named by the GPU."""
    return resident.resident_step(experiment, DB, ACC)


def pipeline(args: argparse.Namespace) -> int:
    log(f"pipeline: {NUM_REQUESTS} requests/run, {INPUT_LEN} in / {OUTPUT_LEN} out, DB {DB}")
    steps = [s for s in (os.environ.get("H200_STEPS") or "a,b,c").split(",") if s]
    results: dict[str, Any] = {}
    for step in steps:
        log(f"=== step ({step}) ===")
        try:
            special = {
                "c": bench,
                "f": search,
                "l": learn_flags,
                "m": resident_run,
                "n": search_confirm,
            }
            results[step] = special[step]() if step in special else experiment(step)
        except Exception as exc:  # one step's failure must not lose the others
            log(f"step ({step}) raised {type(exc).__name__}: {exc}")
            results[step] = {"error": f"{type(exc).__name__}: {exc}"}
        (ACC / "pipeline-results.json").write_text(json.dumps(results, indent=2, default=str))
    log("pipeline done")
    DONE.write_text(json.dumps(results, default=str))
    return 0


# --- follow + collect ---------------------------------------------------------------------------


def wait(args: argparse.Namespace) -> int:
    """Print the pipeline log as it grows until DONE or `--until` seconds since this call began."""
    if not PIPE_LOG.exists():
        # A fresh machine (the last one went back between calls): nothing to follow, and waiting
        # would only burn device time. Start again from stage1.
        log(f"no pipeline here ({PIPE_LOG} missing): the machine is a fresh one; run stage1")
        return 3
    pos = 0
    while True:
        if PIPE_LOG.exists():
            with open(PIPE_LOG, "rb") as fh:
                fh.seek(pos)
                chunk = fh.read()
                pos += len(chunk)
            if chunk:
                sys.stdout.write(chunk.decode(errors="replace"))
                sys.stdout.flush()
        if DONE.exists() or time.monotonic() - T0 > args.until:
            break
        time.sleep(2)
    log("DONE" if DONE.exists() else f"pipeline still running after {args.until:.0f} s")
    return collect(args)


def snapshot_db(dest: Path) -> None:
    """VACUUM INTO a consistent copy (the runner may still be writing), round the per-request
    inter-token latencies to 3 significant digits, then xz it: unrounded, ten runs of 2,048
    requests made 30.8 MB of xz, too large to come back from the device (2.5 MB rounded)."""
    tmp = ACC / "snapshot.db"
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(DB, timeout=30)
    try:
        con.execute("VACUUM INTO ?", (str(tmp),))
    finally:
        con.close()
    con = sqlite3.connect(tmp)
    try:
        rows = con.execute("SELECT rowid, itl_json FROM requests WHERE itl_json IS NOT NULL")
        for rowid, text in rows.fetchall():
            gaps = json.loads(text)
            if isinstance(gaps, list):
                small = [float(f"{x:.3g}") if isinstance(x, int | float) else x for x in gaps]
                con.execute(
                    "UPDATE requests SET itl_json = ? WHERE rowid = ?",
                    (json.dumps(small, separators=(",", ":")), rowid),
                )
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()
    with open(tmp, "rb") as src, lzma.open(dest, "wb", preset=6) as out:
        shutil.copyfileobj(src, out, 1 << 22)
    log(
        f"DB snapshot {tmp.stat().st_size / 2**20:.1f} MiB -> {dest.name} "
        f"{dest.stat().st_size / 2**20:.1f} MiB"
    )


def collect(args: argparse.Namespace) -> int:
    out = Path(os.environ.get("OUT") or ACC / "out")
    out.mkdir(parents=True, exist_ok=True)
    if DB.exists():
        try:
            snapshot_db(out / "lab-h200.db.xz")
        except Exception as exc:
            log(f"snapshot failed: {exc}")
        done = call(
            [sys.executable, "-m", "tuning", "runs", "--db", str(DB), "--json"],
            timeout=120,
            capture=True,
        )
        (out / "runs.json").write_text(done.stdout or done.stderr or "")
        has_compare = (
            call(
                [sys.executable, "-m", "tuning", "compare", "--help"], timeout=60, capture=True
            ).returncode
            == 0
        )
        if has_compare:
            texts = []
            con = sqlite3.connect(DB, timeout=30)
            exp_ids = [r[0] for r in con.execute("SELECT id FROM experiments ORDER BY id")]
            con.close()
            for eid in exp_ids:
                done = call(
                    [
                        sys.executable,
                        "-m",
                        "tuning",
                        "compare",
                        "--db",
                        str(DB),
                        "--experiment",
                        str(eid),
                    ],
                    timeout=120,
                    capture=True,
                )
                texts.append(
                    f"$ python -m tuning compare --db lab.db --experiment {eid}\n"
                    f"{done.stdout}{done.stderr}"
                )
            (out / "compare.txt").write_text("\n".join(texts))
        else:
            log("`python -m tuning compare` is not wired into the CLI here: skipped")
        try:
            (out / "summary.txt").write_text(summary_text(DB, ACC / "bench-agreement.json"))
            sys.stdout.write((out / "summary.txt").read_text())
        except Exception as exc:
            log(f"summary failed: {type(exc).__name__}: {exc}")
    for name in (
        "bench-agreement.json",
        "search-h200.json",
        "flags-h200.json",
        "search-confirm.json",
    ):
        if (ACC / name).exists():
            shutil.copy2(ACC / name, out / name)
    for found in sorted(ACC.glob("resident-*.json")):  # step (m), named by the GPU
        shutil.copy2(found, out / found.name)
    if PIPE_LOG.exists():
        shutil.copy2(PIPE_LOG, out / "run-log.txt")
    if LAB_HOME.exists() or BENCH_DIR.exists():
        with tarfile.open(out / "server-logs.tar.gz", "w:gz") as tar:
            for folder in (LAB_HOME / "logs", BENCH_DIR):
                if folder.exists():
                    tar.add(folder, arcname=folder.name)
    for p in sorted(out.iterdir()):
        log(f"out: {p.name} {p.stat().st_size} bytes")
    return 0


# --- summary (runs anywhere: sqlite3 only) ------------------------------------------------------


def _gib(x: Any) -> str:
    return "-" if x is None else f"{x / GIB:.1f}"


def _fmt(x: Any, spec: str = "{:.0f}") -> str:
    return "-" if x is None else spec.format(x)


def _role(label: str, roles: dict[int, str]) -> str:
    """'python3:682' -> 'python3:682 (=EngineCore per the log)' when the label lacks the role."""
    name, _, pid = label.rpartition(":")
    role = roles.get(int(pid)) if pid.isdigit() else None
    return label if not role or role == name else f"{label} (={role} per the log)"


def memory_story(con: sqlite3.Connection, run_id: int) -> dict[str, Any]:
    """Per-process attribution and the climb: weights step, KV step, release."""
    row = con.execute("SELECT startup_json FROM runs WHERE id=?", (run_id,)).fetchone()
    roles = {}
    try:
        roles = {
            int(pid): name
            for name, pid in (json.loads(row[0] or "{}").get("engine_pids") or {}).items()
        }
    except (TypeError, ValueError):
        pass
    procs = {
        _role(label, roles): mx
        for label, mx in con.execute(
            "SELECT label, MAX(value) FROM samples WHERE run_id=? AND series='gpu_proc_bytes' "
            "GROUP BY label ORDER BY 2 DESC",
            (run_id,),
        )
    }
    story: dict[str, Any] = {"gpu_proc_peak": procs}
    for series in ("gpu_tree_bytes", "gpu_used_bytes"):
        pts = con.execute(
            "SELECT t_s, value FROM samples WHERE run_id=? AND series=? ORDER BY t_s",
            (run_id, series),
        ).fetchall()
        if not pts:
            continue
        peak = max(v for _, v in pts)
        first = pts[0][1]
        t_kv = next((t for t, v in pts if v >= first + 0.5 * (peak - first)), None)
        before = [v for t, v in pts if t_kv is not None and t < t_kv - 0.5]
        t_w = next((t for t, v in pts if v >= first + 1 * GIB), None)
        story[series] = {
            "n": len(pts),
            "first": first,
            "peak": peak,
            "t_first_gib": t_w,
            "level_before_kv": before[-1] if before else None,
            "t_kv_step": t_kv,
            "last": pts[-1][1],
            "t_last": pts[-1][0],
        }
    return story


def summary_text(db_path: Path, bench_json: Path | None = None) -> str:
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    con.row_factory = sqlite3.Row
    lines = []
    exps = con.execute("SELECT id, name, status, error FROM experiments ORDER BY id").fetchall()
    for e in exps:
        lines.append(
            f"experiment {e['id']}: {e['name']} [{e['status']}]"
            + (f" error: {e['error']}" if e["error"] else "")
        )
        lines.append(
            f"  {'run':>3} {'value':>6} {'rep':>3} {'status':7} {'KV tokens':>10} "
            f"{'healthy':>7} {'peak tree':>9} {'peak dev':>8} {'tok/s':>7} "
            f"{'TTFT ms':>8} {'TPOT ms':>7} {'fail':>4} {'ach.C':>5}"
        )
        for r in con.execute("SELECT * FROM runs WHERE experiment_id=? ORDER BY seq", (e["id"],)):
            lines.append(
                f"  {r['id']:>3} {r['value']:>6} {r['repeat_index']:>3} {r['status']:7} "
                f"{_fmt(r['kv_cache_tokens'], '{:,}'):>10} "
                f"{_fmt(r['time_to_healthy_s'], '{:.0f} s'):>7} "
                f"{_gib(r['peak_gpu_tree_bytes']):>5} GiB {_gib(r['peak_gpu_used_bytes']):>4} GiB "
                f"{_fmt(r['output_throughput']):>7} {_fmt(r['mean_ttft_ms'], '{:.1f}'):>8} "
                f"{_fmt(r['mean_tpot_ms'], '{:.2f}'):>7} {_fmt(r['failed'], '{}'):>4} "
                f"{_fmt(r['achieved_concurrency'], '{:.0f}'):>5}"
                + (f"  [{r['failure_kind']}: {r['failure_reason']}]" if r["failure_kind"] else "")
            )
            st = memory_story(con, r["id"])
            procs = ", ".join(f"{k} {_gib(v)} GiB" for k, v in st["gpu_proc_peak"].items())
            tree = st.get("gpu_tree_bytes") or {}
            dev = st.get("gpu_used_bytes") or {}
            lines.append(
                f"        GPU by process: {procs or 'none'}; tree: "
                f"{_gib(tree.get('first'))} -> {_gib(tree.get('level_before_kv'))} GiB (weights, "
                f"from {_fmt(tree.get('t_first_gib'), '{:.0f}')} s) -> "
                f"{_gib(tree.get('peak'))} GiB at KV step {_fmt(tree.get('t_kv_step'), '{:.0f}')} s"
                f"; device: {_gib(dev.get('first'))} -> {_gib(dev.get('peak'))} GiB, last "
                f"{_gib(dev.get('last'))} GiB at {_fmt(dev.get('t_last'), '{:.0f}')} s "
                f"({tree.get('n', 0)}+{dev.get('n', 0)} samples)"
            )
    if bench_json and bench_json.exists():
        data = json.loads(bench_json.read_text())
        lines.append(
            "\nlab bench vs vLLM bench serve, same server, A B A B "
            f"({data['workload']['num_requests']} requests, 64 in / 128 out, ignore_eos)"
        )
        lines.append(
            f"  {'tool':5} {'C':>4} {'tok/s':>8} {'TTFT ms':>8} {'p99 TTFT':>8} "
            f"{'TPOT ms':>8} {'failed':>6}"
        )
        for r in data["runs"]:
            if r.get("error"):
                lines.append(f"  {r['tool']:5} {r['concurrency']:>4} FAILED")
                continue
            lines.append(
                f"  {r['tool']:5} {r['concurrency']:>4} {r['output_throughput']:>8.0f} "
                f"{r['mean_ttft_ms']:>8.1f} {r['p99_ttft_ms']:>8.1f} "
                f"{r['mean_tpot_ms']:>8.2f} {r['failed']:>6}"
            )
        lines.append(
            "  ratios of medians lab / vLLM: C, throughput, mean TTFT, p99 TTFT, mean TPOT"
        )
        for c, s in data["summary"].items():
            r = s["ratio"]
            lines.append(
                f"  {c:>4} {r['output_throughput']:.3f} {r['mean_ttft_ms']:.3f} "
                f"{r['p99_ttft_ms']:.3f} {r['mean_tpot_ms']:.3f}"
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("stage1").add_argument("--carry", default=".carry1", help="this call's carry")
    for name in ("stage2", "start", "wait", "collect"):
        p = sub.add_parser(name)
        if name == "stage2":
            p.add_argument("--carry", default=".carry2", help="this call's carry (the last one)")
        p.add_argument(
            "--until",
            type=float,
            default=540.0,
            help="stop following after this many seconds since the call began",
        )
    sub.add_parser("pipeline")
    lab = sub.add_parser("lab", help="one lab CLI command with the lab's GPU settings")
    lab.add_argument("argv", nargs=argparse.REMAINDER, help="e.g. experiment --resume 1 ...")
    s = sub.add_parser("summary")
    s.add_argument("--db", type=Path, required=True)
    s.add_argument("--bench", type=Path, default=None)
    args = ap.parse_args()
    if args.cmd == "lab":  # e.g. go on with a budget-stopped experiment on the warm machine
        argv = [a for a in args.argv if a != "--"]
        return call([sys.executable, "-m", "tuning", *argv, "--db", str(DB)], 590).returncode
    if args.cmd == "summary":
        if args.db.suffix in (".xz", ".gz"):  # the committed example: expanded, never written
            from store import snapshot

            args.db = snapshot.expanded(args.db)
        sys.stdout.write(summary_text(args.db, args.bench))
        return 0
    return {
        "stage1": stage1,
        "stage2": stage2,
        "start": start,
        "wait": wait,
        "collect": collect,
        "pipeline": pipeline,
    }[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
