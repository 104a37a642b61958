"""Wall time to a decision: the same two-value until-decided experiment run by the lab before issue
38 (the old path: every restart's overhead as it was) and by this tree (the new path), interleaved.

    .venv/bin/python benchmarks/time_to_decision.py --engine fake [--pairs 2]
    .venv/bin/python benchmarks/time_to_decision.py --engine embedded [--pairs 2]
        [--old-rev 9db5357] [--param max-num-seqs --values 2,16] [--num-requests 64 ...]

The old path is the lab at `--old-rev` (default: the commit this work started from), exported with
`git archive` into a temporary folder and run from there; the new path is this tree. Both run
`python -m tuning experiment --param P --values A,B --repeats auto` in a fresh lab home of their
own, against the same engine: `--engine fake`, the fake vLLM (tests/fakes/fake_vllm.py, the slower
value's tokens delayed by a fault so there is something to decide) or `--engine embedded`, the real
embedded CPU engine (`make setup`; start it only where no other engine runs). Pairs alternate
which side goes first, so both see the same machine. Prints, for each experiment, its wall time
(the command, start to end), its runs and whether it decided; for each pair new / old; then the
median ratio, and each side's shares of its wall time: starting (sum of time to healthy), load
(sum of the load generator's durations) and the rest (everything else: stops, warm-ups, prompts,
storing, the runner), and for the new side its stored anatomy ("starting, load, warm-up, ...").
The issue's target on the embedded engine: new / old <= 0.6.

`--prelaunch off` runs the new side with TUNING_LAB_PRELAUNCH=0 (no next server spawned ahead to
import while the last one stops: tuning.engine.prelaunch), to see that part's share alone. A
prelaunched start's time to healthy includes its imports, as a plain start's would; the seconds of
it done while the previous server stopped (the anatomy's `prelaunch_ahead`) are printed and left
out of "starting" in the shares, so the shares still add up to the wall time. `--baseline
prelaunch-off` makes the "old" side this very tree with prelaunch off (nothing exported from
`--old-rev`), so the interleaved pairs measure prelaunch alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakes.engines import fake_command, fake_settings_env  # noqa: E402

OLD_REV = "9db5357"  # the lab before issue 38's run anatomy, overlap and kept prompts
# The fake's slower value: each token 10 ms late at max-num-seqs 2, a large effect to decide.
FAKE_FAULT = "itl_ms=10@max-num-seqs=2"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--engine", choices=("fake", "embedded"), required=True)
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--old-rev", default=OLD_REV, help="the old path: this commit of the lab")
    p.add_argument("--param", default="max-num-seqs")
    p.add_argument("--values", default="2,16")
    p.add_argument("--max-repeats", type=int, default=4)
    p.add_argument("--num-requests", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--input-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--start-timeout", type=int, default=600)
    p.add_argument("--json", type=Path, default=None, help="also write every experiment here")
    p.add_argument(
        "--prelaunch",
        choices=("on", "off"),
        default="on",
        help="the new side's prelaunch (TUNING_LAB_PRELAUNCH); the old side has none",
    )
    p.add_argument(
        "--baseline",
        choices=("old", "prelaunch-off"),
        default="old",
        help="the old side: the lab at --old-rev, or this tree with prelaunch off",
    )
    return p.parse_args()


def export_tree(rev: str, into: Path) -> Path:
    """The lab at `rev`, as files (no .git, no venv: this tree's interpreter runs it)."""
    data = subprocess.run(
        ["git", "archive", "--format=tar", rev], cwd=REPO, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def engine_env(engine: str, home: Path) -> dict[str, str]:
    """The lab's settings for `engine`, in a lab home of its own."""
    base = {
        "TUNING_LAB_HOME": str(home),
        "TUNING_LAB_DB": str(home / "lab.db"),
        "TUNING_LAB_LOCK": str(home / "runner.lock"),
        # the embedded engine is this tree's .engine for both sides (the old tree has none)
        "TUNING_LAB_ENGINE_DIR": str(
            Path(os.environ.get("TUNING_LAB_ENGINE_DIR") or REPO / ".engine")
        ),
    }
    if engine == "fake":
        env = fake_settings_env(home)
        env["TUNING_LAB_ENGINE_COMMAND"] = shlex.join(fake_command(FAKE_FAULT))
        return {**base, **env}
    return {**base, "TUNING_LAB_ENGINE": "embedded-cpu"}


def experiment(args: argparse.Namespace, tree: Path, side: str) -> dict[str, Any]:
    """One until-decided experiment with the lab in `tree`; its wall time, runs and decision."""
    home = Path(tempfile.mkdtemp(prefix=f"ttd-{side}-"))
    env = {**os.environ, **engine_env(args.engine, home), "PYTHONPATH": str(tree)}
    on = args.prelaunch == "on" and side == "new"
    env["TUNING_LAB_PRELAUNCH"] = "1" if on else "0"
    argv = [sys.executable, "-m", "tuning", "experiment", "--param", args.param]
    argv += ["--values", args.values, "--repeats", "auto", "--max-repeats", str(args.max_repeats)]
    argv += ["--num-requests", str(args.num_requests), "--concurrency", str(args.concurrency)]
    argv += ["--input-len", str(args.input_len), "--output-len", str(args.output_len)]
    argv += ["--start-timeout", str(args.start_timeout), "--json"]
    t0 = time.monotonic()
    done = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"{side}: experiment failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {"side": side, "wall_s": wall, **read_back(home / "lab.db")}


def read_back(db: Path) -> dict[str, Any]:
    """What the experiment stored: its runs' parts and its stopping rule's last word. Read with
    plain SQL: the old lab's database has no anatomy column."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    try:
        exp = dict(con.execute("select * from experiments order by id desc limit 1").fetchone())
        runs = [dict(r) for r in con.execute("select * from runs order by seq, id")]
    finally:
        con.close()
    plan = json.loads(exp.get("repeats_plan_json") or "{}")
    states = {k: v.get("state") for k, v in (plan.get("values") or {}).items()}
    starting = sum(float(r.get("time_to_healthy_s") or 0.0) for r in runs)
    load = sum(float(r.get("duration") or 0.0) for r in runs)
    anatomy = [json.loads(r["anatomy_json"]) for r in runs if r.get("anatomy_json")]
    hidden = sum(
        float(p.get("seconds") or 0.0)
        for a in anatomy
        for p in a.get("overlapped") or ()
        if p.get("key") == "prelaunch_ahead"
    )
    groups: dict[str, float] = {}
    if anatomy:
        from tuning.experiment.run_anatomy import grouped

        groups = grouped(anatomy)
    return {
        "runs": len(runs),
        "statuses": [r["status"] for r in runs],
        "decision": plan.get("reason", ""),
        "states": states,
        "starting_s": starting - hidden,  # what the wall time paid for its starts
        "hidden_s": hidden,
        "load_s": load,
        "anatomy_groups": groups,
    }


def shares(result: dict[str, Any]) -> str:
    wall = result["wall_s"]
    rest = wall - result["starting_s"] - result["load_s"]
    parts = (("starting", result["starting_s"]), ("load", result["load_s"]), ("the rest", rest))
    return ", ".join(f"{name} {100 * s / wall:.0f} %" for name, s in parts)


def main() -> int:
    args = parse_args()
    results: list[dict[str, Any]] = []
    ratios: list[float] = []
    per_run: list[float] = []  # the runs a decision takes vary with the noise: per run too
    with tempfile.TemporaryDirectory(prefix="ttd-old-") as tmp:
        baseline_is_old = args.baseline == "old"
        old_tree = export_tree(args.old_rev, Path(tmp)) if baseline_is_old else REPO
        trees = {"old": old_tree, "new": REPO}
        for pair in range(args.pairs):
            order = ("old", "new") if pair % 2 == 0 else ("new", "old")
            got = {side: experiment(args, trees[side], side) for side in order}
            for side in order:
                r = got[side]
                print(
                    f"pair {pair + 1} {side}: {r['wall_s']:.1f} s, {r['runs']} runs "
                    f"({', '.join(r['statuses'])}); {r['decision']}; {shares(r)}",
                    flush=True,
                )
                results.append({"pair": pair + 1, **r})
            ratios.append(got["new"]["wall_s"] / got["old"]["wall_s"])
            per_run.append(
                (got["new"]["wall_s"] / got["new"]["runs"])
                / (got["old"]["wall_s"] / got["old"]["runs"])
            )
            print(
                f"pair {pair + 1}: new / old = {ratios[-1]:.2f} to a decision, "
                f"{per_run[-1]:.2f} a run",
                flush=True,
            )
    median = statistics.median(ratios)
    print(
        f"\n{args.engine} engine, {args.pairs} pairs: median new / old = {median:.2f} to a "
        f"decision, {statistics.median(per_run):.2f} a run"
    )
    for side in ("old", "new"):
        mine = [r for r in results if r["side"] == side]
        walls = [r["wall_s"] for r in mine]
        print(
            f"{side}: median {statistics.median(walls):.1f} s to a decision; "
            + shares(
                {
                    "wall_s": sum(walls),
                    "starting_s": sum(r["starting_s"] for r in mine),
                    "load_s": sum(r["load_s"] for r in mine),
                }
            )
        )
    hidden = [r.get("hidden_s", 0.0) for r in results if r["side"] == "new"]
    if any(hidden):
        print(
            f"new: {sum(hidden):.1f} s of its starts (imports) done while the previous server "
            f"stopped (prelaunch), {statistics.median(hidden):.1f} s an experiment"
        )
    news = [r["anatomy_groups"] for r in results if r["side"] == "new" and r["anatomy_groups"]]
    if news:
        total: dict[str, float] = {}
        for g in news:
            for k, v in g.items():
                total[k] = total.get(k, 0.0) + v
        whole = sum(total.values())
        print(
            "new, by its stored anatomy: "
            + ", ".join(
                f"{k} {100 * v / whole:.0f} %"
                for k, v in sorted(total.items(), key=lambda x: -x[1])
            )
        )
    if args.json:
        out = {"ratios": ratios, "per_run": per_run, "experiments": results}
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
