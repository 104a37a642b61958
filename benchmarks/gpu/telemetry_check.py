"""GPU proof for tuning.measure.telemetry: does the lab see the memory climb, in the right process?

Self-test (default): starts a process tree shaped like vLLM's in its own session, a parent python
that never touches CUDA (like the API server) and a child that allocates GPU memory in steps
(like EngineCore: 2, 4, 8 GiB held ~1 s each, then freed in steps), samples the parent's tree at
100 ms with the lab's own samplers, and prints per-process attribution, device totals, the climb
curve, the peak and PASS/FAIL checks. Exit code 0 when every check passes (or on a skip), 1 if not.

    python3 benchmarks/gpu/telemetry_check.py [--steps 2,4,8] [--hold 1.0] [--period 0.1]
    python3 benchmarks/gpu/telemetry_check.py --server-pid PID [--base-url URL] [--duration 30]

The second form samples an already-running vLLM server's tree (and its /metrics) for N seconds.
Without a GPU (no nvidia-ml-py, no driver, no device, or no torch for the self-test) it prints
one SKIP line and exits 0. It needs only what the GPU test machine has preinstalled (torch,
nvidia-ml-py, psutil, prometheus-client): it imports tuning.measure.telemetry (with
tuning.engine.procs) and
core.records only.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from core.records import SampleRow  # noqa: E402
from tuning.measure.telemetry.gpu import GpuSampler, wait_gpu_memory_released  # noqa: E402
from tuning.measure.telemetry.peaks import peaks  # noqa: E402
from tuning.measure.telemetry.proctree import ProcessTreeSampler  # noqa: E402
from tuning.measure.telemetry.prom import MetricsSampler  # noqa: E402
from tuning.measure.telemetry.recorder import Sampler, Telemetry  # noqa: E402

GIB = 1 << 30
MIB = 1 << 20
CTX_SLACK = int(1.5 * GIB)  # CUDA context + allocator rounding a process may add to its step
RELEASE_TOLERANCE = 256 * MIB


def gib(x: float | None) -> str:
    return "   -   " if x is None else f"{x / GIB:7.2f}"


# ---------------------------------------------------------------------------- roles


def role_child(steps: list[float], hold: float) -> int:
    """The "EngineCore": allocate up to each level, hold, then free level by level."""
    import torch

    def emit(kind: str, held: int) -> None:
        print(f"EVENT {time.monotonic():.3f} {kind} {held}", flush=True)

    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")  # create the CUDA context first, so it shows alone
    torch.cuda.synchronize()
    emit("context", 0)
    time.sleep(hold)
    held: list[torch.Tensor] = []
    total = 0
    for level in steps:
        need = int(level * GIB) - total
        block = torch.empty(need, dtype=torch.uint8, device="cuda")
        block.zero_()  # touch it: allocated memory, not just reserved
        torch.cuda.synchronize()
        held.append(block)
        del block  # the list is the only owner, so pop() frees it
        total += need
        emit("hold", total)
        time.sleep(hold)
    while held:
        total -= held.pop().numel()
        torch.cuda.empty_cache()  # hand it back to the driver so NVML sees the drop
        torch.cuda.synchronize()
        emit("hold", total)
        time.sleep(hold)
    emit("exit", 0)
    return 0


def role_parent(steps: str, hold: float, linger: float) -> int:
    """The "API server": no CUDA at all; starts the child, outlives it a little."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--role", "child", "--steps", steps, "--hold", str(hold)]
    )
    print(f"CHILD {child.pid}", flush=True)
    code = child.wait()
    print(f"EVENT {time.monotonic():.3f} child_exited {code}", flush=True)
    time.sleep(linger)
    return code


# ---------------------------------------------------------------------------- probing


def skip_reason(need_torch: bool) -> str | None:
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py (pynvml) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return f"NVML unavailable ({type(exc).__name__}: {exc})"
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            return "NVML sees no GPU"
    finally:
        pynvml.nvmlShutdown()
    if need_torch and importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    return None


def describe_devices() -> list[str]:
    import pynvml

    pynvml.nvmlInit()
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else name
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            out.append(
                f"gpu{i}: {name}, {mem.total / GIB:.1f} GiB total, {mem.used / GIB:.2f} GiB used"
            )
        driver = pynvml.nvmlSystemGetDriverVersion()
        out.append(f"driver {driver.decode() if isinstance(driver, bytes) else driver}")
        return out
    finally:
        pynvml.nvmlShutdown()


# ---------------------------------------------------------------------------- reporting


def series(rows: list[SampleRow], name: str) -> dict[float, float]:
    """t -> value summed over labels (GPUs) at that instant."""
    out: dict[float, float] = {}
    for r in rows:
        if r.series == name:
            out[r.t] = out.get(r.t, 0.0) + r.value
    return dict(sorted(out.items()))


def print_attribution(rows: list[SampleRow], roles: dict[int, str]) -> dict[int, float]:
    """Peak GPU memory per process of the tree, by pid; processes NVML never listed show 0."""
    per_pid: dict[int, float] = {}
    labels: dict[int, str] = {}
    rss: dict[int, float] = {}
    for r in rows:
        if r.series in ("gpu_proc_bytes", "proc_rss_bytes") and ":" in r.label:
            pid = int(r.label.rsplit(":", 1)[1])
            labels.setdefault(pid, r.label)
            target = per_pid if r.series == "gpu_proc_bytes" else rss
            target[pid] = max(target.get(pid, 0.0), r.value)
    print("\nPer-process attribution through the tree (peaks):")
    print(f"  {'process':28s} {'role':22s} {'GPU GiB':>8s} {'RSS MiB':>8s}")
    for pid in sorted(set(labels) | set(roles)):
        gpu = per_pid.get(pid)
        print(
            f"  {labels.get(pid, str(pid)):28s} {roles.get(pid, ''):22s} "
            f"{'  absent' if gpu is None else gib(gpu):>8s} {rss.get(pid, 0.0) / MIB:8.0f}"
        )
    return per_pid


def print_curve(
    rows: list[SampleRow],
    baseline: float,
    marks: list[tuple[float, str]],
    every: float = 0.5,
    max_lines: int = 80,
) -> None:
    """A compact time table: one line per `every` seconds, plus every change > 128 MiB."""
    tree = series(rows, "gpu_tree_bytes")
    used = series(rows, "gpu_used_bytes")
    rss = series(rows, "tree_rss_bytes")
    times = sorted(set(tree) | set(used))
    print("\nClimb curve (t = seconds since the tree was launched):")
    print(f"  {'t':>6s} {'tree GiB':>8s} {'used-base':>9s} {'RSS MiB':>8s}  event")
    last_t = -1e9
    last_v = None
    lines = 0
    pending = sorted(marks)
    for t in times:
        v = tree.get(t)
        note = []
        while pending and pending[0][0] <= t:
            note.append(pending.pop(0)[1])
        changed = v is not None and last_v is not None and abs(v - last_v) > 128 * MIB
        if t - last_t >= every or changed or note:
            r = min(rss, key=lambda x: abs(x - t)) if rss else None
            u = used.get(t)
            print(
                f"  {t:6.2f} {gib(v):>8s} {gib(None if u is None else u - baseline):>9s} "
                f"{(rss[r] / MIB if r is not None else 0):8.0f}  {', '.join(note)}"
            )
            last_t = t
            lines += 1
            if lines >= max_lines:
                print("  ... (truncated)")
                break
        if v is not None:
            last_v = v


def nvml_call_costs(n: int = 200) -> str:
    """Microseconds per NVML call the GPU sampler makes, to explain its cost."""
    import pynvml

    pynvml.nvmlInit()
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        out = []
        for name, fn in (
            ("memory_info", pynvml.nvmlDeviceGetMemoryInfo),
            ("compute_procs", pynvml.nvmlDeviceGetComputeRunningProcesses),
            ("utilization", pynvml.nvmlDeviceGetUtilizationRates),
        ):
            t0 = time.perf_counter()
            c0 = time.thread_time()
            for _ in range(n):
                fn(h)
            out.append(
                f"{name} {1e6 * (time.perf_counter() - t0) / n:.0f} us wall / "
                f"{1e6 * (time.thread_time() - c0) / n:.0f} us cpu"
            )
        return ", ".join(out)
    finally:
        pynvml.nvmlShutdown()


def print_costs(tel: Telemetry) -> None:
    print("\nSampler cost (own thread CPU):")
    for s in tel.stats().values():
        print(
            f"  {s.name:14s} period {s.period * 1000:4.0f} ms  samples {s.samples:5d}  "
            f"missed {s.missed_ticks:3d}  errors {s.errors:2d}  "
            f"cpu {s.cpu_percent:5.2f}% of one core "
            f"({1000 * s.cpu_seconds / max(1, s.samples):.2f} ms/sample)"
        )


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    def __call__(self, ok: bool, what: str, detail: str) -> None:
        self.failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {what}: {detail}")


# ---------------------------------------------------------------------------- modes


def self_test(args: argparse.Namespace) -> int:
    steps = [float(x) for x in args.steps.split(",")]
    largest = int(max(steps) * GIB)
    print("telemetry_check: self-test on", "; ".join(describe_devices()))
    gpu = GpuSampler(None, period=args.period)
    base = gpu.baseline()
    base_total = float(sum(base.values()))
    print(f"baseline used: {', '.join(f'{k} {v / GIB:.2f} GiB' for k, v in base.items())}")

    origin = time.monotonic()
    parent = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--role",
            "parent",
            "--steps",
            args.steps,
            "--hold",
            str(args.hold),
            "--linger",
            str(args.linger),
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    gpu.root_pid = parent.pid
    rows: list[SampleRow] = []
    tel = Telemetry(origin=origin)
    tel.start(
        [ProcessTreeSampler(parent.pid, period=args.period), gpu], rows.extend, flush_every=0.5
    )
    timer = threading.Timer(args.timeout, lambda: os.killpg(parent.pid, signal.SIGKILL))
    timer.start()
    marks: list[tuple[float, str]] = []
    events: list[tuple[float, str, int]] = []
    child_pid = None
    assert parent.stdout is not None
    try:
        for line in parent.stdout:
            parts = line.split()
            if parts[:1] == ["CHILD"]:
                child_pid = int(parts[1])
            elif parts[:1] == ["EVENT"]:
                t, kind, value = float(parts[1]) - origin, parts[2], int(parts[3])
                events.append((t, kind, value))
                marks.append((t, kind if kind != "hold" else f"child holds {value / GIB:.0f} GiB"))
        code = parent.wait()
    finally:
        timer.cancel()
        try:
            os.killpg(parent.pid, signal.SIGKILL)  # our own group; normally already gone
        except ProcessLookupError:
            pass
        parent.wait()
    released = wait_gpu_memory_released(base, tolerance=RELEASE_TOLERANCE, timeout=20.0)
    time.sleep(3 * args.period)
    result = tel.stop()
    result["peak_gpu_used_over_baseline_bytes"] = peaks(rows, base)[
        "peak_gpu_used_over_baseline_bytes"
    ]

    roles = {parent.pid: "parent (like APIServer)"}
    if child_pid:
        roles[child_pid] = "child (like EngineCore)"
    per_pid = print_attribution(rows, roles)
    used = series(rows, "gpu_used_bytes")
    tree = series(rows, "gpu_tree_bytes")
    print("\nDevice totals:")
    print(
        f"  baseline {gib(base_total)} GiB, peak used {gib(result['peak_gpu_used_bytes'])} GiB,"
        f" peak over baseline {gib(result['peak_gpu_used_over_baseline_bytes'])} GiB, "
        f"final used {gib(list(used.values())[-1] if used else None)} GiB"
    )
    print_curve(rows, base_total, marks)
    print(
        f"\nPeak: tree {gib(result['peak_gpu_tree_bytes'])} GiB (largest step "
        f"{largest / GIB:.0f} GiB), tree RSS {gib(result['peak_tree_rss_bytes'])} GiB"
    )
    print_costs(tel)
    print(f"  NVML calls: {nvml_call_costs()}")

    print()
    check = Checks()
    check(
        code == 0,
        "workload",
        f"parent exited {code}" + ("" if code == 0 else " (see the child's traceback above)"),
    )
    peak_tree = result["peak_gpu_tree_bytes"] or 0.0
    check(
        largest <= peak_tree <= largest + CTX_SLACK,
        "peak tree memory = largest step",
        f"{peak_tree / GIB:.2f} GiB vs {largest / GIB:.0f} GiB (+ <= {CTX_SLACK / GIB:.1f} "
        f"GiB context)",
    )
    child_peak = per_pid.get(child_pid or -1, 0.0)
    parent_peak = per_pid.get(parent.pid, 0.0)
    check(
        child_peak >= largest and parent_peak < 1 * GIB,
        "attribution to the child",
        f"child {child_peak / GIB:.2f} GiB, parent {parent_peak / GIB:.2f} GiB",
    )
    over = result["peak_gpu_used_over_baseline_bytes"] or 0.0
    check(
        abs(over - peak_tree) <= 1 * GIB,
        "device total agrees with the tree",
        f"used - baseline {over / GIB:.2f} GiB vs tree {peak_tree / GIB:.2f} GiB",
    )
    # Every plateau, up and down: the samples from 0.3 s after an event to 0.1 s before the next sit
    # at that level (plus at most the context), and there is at least one of them.
    holds = [(t, v) for t, k, v in events if k in ("hold", "exit")]
    plateaus = []
    for (t0, level), (t1, _) in itertools.pairwise(holds):
        inside = [v for t, v in tree.items() if t0 + 0.3 <= t < t1 - 0.1]
        ok = bool(inside) and all(level <= v <= level + CTX_SLACK for v in inside)
        plateaus.append((level, ok, inside))
    bad = [
        f"{lv / GIB:.0f} GiB saw {min(vs, default=0) / GIB:.2f}..{max(vs, default=0) / GIB:.2f}"
        for lv, ok, vs in plateaus
        if not ok
    ]
    check(
        bool(plateaus) and not bad,
        "every plateau seen at the right height",
        f"{sum(ok for _, ok, _ in plateaus)}/{len(plateaus)} "
        f"({' -> '.join(f'{lv / GIB:.0f}' for lv, _, _ in plateaus)} GiB)"
        + (f"; wrong: {'; '.join(bad)}" if bad else ""),
    )
    exit_t = next((t for t, k, _ in events if k == "child_exited"), None)
    after = [v for t, v in tree.items() if exit_t is not None and t > exit_t + 0.3]
    final_used = list(used.values())[-1] if used else float("inf")
    check(
        released
        and final_used <= base_total + RELEASE_TOLERANCE
        and bool(after)
        and after[-1] == 0,
        "memory back to baseline after the child ends",
        f"final used {final_used / GIB:.2f} GiB vs baseline {base_total / GIB:.2f} GiB, "
        f"tree after exit {after[-1] / GIB if after else float('nan'):.2f} GiB, "
        f"wait_gpu_memory_released={released}",
    )
    gpu_stats = tel.stats().get("gpu")
    wall = max(used) - min(used) if used else 0.0
    expected = wall / args.period + 1
    check(
        gpu_stats is not None and len(used) >= 0.8 * expected,
        "sampling rate",
        f"{len(used)} GPU samples over {wall:.1f} s at {args.period * 1000:.0f} ms "
        f"(expected ~{expected:.0f})",
    )
    print(f"\n{'ALL PASS' if not check.failed else f'{check.failed} FAILED'}")
    return 0 if not check.failed else 1


def server_mode(args: argparse.Namespace) -> int:
    pid = args.server_pid
    print(f"telemetry_check: sampling server tree of pid {pid} for {args.duration:.0f} s")
    try:
        print("  " + "; ".join(describe_devices()))
    except Exception as exc:
        print(f"  no GPU description ({type(exc).__name__}: {exc})")
    samplers: list[Sampler] = [
        ProcessTreeSampler(pid, period=args.period),
        GpuSampler(pid, period=args.period),
    ]
    metrics = MetricsSampler(args.base_url, period=0.5) if args.base_url else None
    if metrics:
        samplers.append(metrics)
    rows: list[SampleRow] = []
    tel = Telemetry()
    tel.start(samplers, rows.extend, flush_every=0.5)
    time.sleep(args.duration)
    result = tel.stop()
    print_attribution(rows, {pid: "launched pid"})
    print_curve(rows, 0.0, [], every=max(0.5, args.duration / 60))
    print("\nPeaks:")
    for key, value in result.items():
        if value is not None:
            print(f"  {key:36s} {value:,.4g}")
    if metrics:
        print(
            f"  /metrics scrapes {metrics.scrapes}, failures {metrics.failures}"
            f"{'' if not metrics.last_error else ' (last: ' + metrics.last_error + ')'}"
        )
    print_costs(tel)
    found = result["peak_gpu_tree_bytes"]
    print(
        f"\n{'PASS' if found else 'FAIL'}  the tree's GPU memory is attributed: "
        f"peak {gib(found)} GiB"
    )
    return 0 if found else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", default="2,4,8", help="GiB levels the child holds, comma-separated")
    ap.add_argument("--hold", type=float, default=1.0, help="seconds at each level")
    ap.add_argument("--linger", type=float, default=1.5, help="parent's life after the child")
    ap.add_argument("--period", type=float, default=0.1, help="sampling period, seconds")
    ap.add_argument("--timeout", type=float, default=120.0, help="kill the tree after this")
    ap.add_argument("--server-pid", type=int, help="sample this running server's tree instead")
    ap.add_argument("--base-url", help="with --server-pid: also scrape <url>/metrics")
    ap.add_argument("--duration", type=float, default=30.0, help="with --server-pid: seconds")
    ap.add_argument("--role", choices=["parent", "child"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.role == "child":
        return role_child([float(x) for x in args.steps.split(",")], args.hold)
    if args.role == "parent":
        return role_parent(args.steps, args.hold, args.linger)
    if args.server_pid is None:
        reason = skip_reason(need_torch=True)
        if reason:
            print(f"SKIP telemetry_check: {reason}")
            return 0
        return self_test(args)
    reason = skip_reason(need_torch=False)
    if reason:
        print(f"SKIP telemetry_check: {reason}")
        return 0
    return server_mode(args)


if __name__ == "__main__":
    sys.exit(main())
