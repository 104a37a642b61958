"""What a move of modules costs the test suite: two commits of the lab side by side.

Issue 39 asks that `tuning/` by layer (a `git mv` of 60 modules and their imports, commit 3a2ab43)
leaves `make test` no slower. A mechanical move changes no code path a test exercises; what it can
change is what every test and every CLI process pays before it runs: importing the lab (more
packages, longer chains), collecting the tests, and the house tests that parse the tree. This
script measures those for two commits, each exported into its own folder (`git archive`, its
bytecode compiled once before the rounds) and run with this checkout's venv, interleaved round by
round (A B, then B A), and prints medians and the ratio head / base of each process's CPU time
(user + system: what the work costs, where wall time on a shared machine is mostly its
neighbours) and of its wall time. `--fast-tier` adds the whole fast tier (minutes each).

    .venv/bin/python benchmarks/move_cost.py [--base 3a2ab43^] [--head 3a2ab43] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = REPO / ".venv" / "bin" / "python"
IMPORTS = 5  # fresh processes importing the CLI, a round
FAST = "not engine and not browser and not fleet"


def export(rev: str, into: Path) -> Path:
    """The tree of `rev` in `into` (no .git: what a fresh clone would hold)."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", rev], capture_output=True, check=True
    ).stdout
    tar_path = into.with_suffix(".tar")
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    tar_path.unlink()
    for shared in (".venv", ".engine"):  # the same parts for both trees
        if (REPO / shared).exists():
            (into / shared).symlink_to(REPO / shared)
    return into


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(argv: list[str], tree: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one process (and the processes it waited for)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cpu0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t0, _children_cpu() - cpu0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed in {tree}:\n{done.stdout[-2000:]}{done.stderr}")
    return took[1], took[0]


def measures(fast_tier: bool) -> dict[str, list[str]]:
    py = str(PYTHON)
    pytest = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    out = {
        "import the CLI (one process)": [py, "-c", "import tuning.cli.main"],
        "collect every test": [*pytest, "--collect-only"],
        "house tests": [*pytest, "tests/test_house.py"],
    }
    if fast_tier:
        out["fast tier"] = [*pytest, "-m", FAST]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", default="3a2ab43^", help="the commit before the move")
    parser.add_argument("--head", default="3a2ab43", help="the commit of the move")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fast-tier", action="store_true", help="also the whole fast tier")
    args = parser.parse_args()
    runs = measures(args.fast_tier)
    got: dict[tuple[str, str], list[tuple[float, float]]] = {
        (m, s): [] for m in runs for s in ("base", "head")
    }
    with tempfile.TemporaryDirectory(prefix="move-cost-") as tmp:
        trees = {
            side: export(rev, Path(tmp) / side)
            for side, rev in (("base", args.base), ("head", args.head))
        }
        for tree in trees.values():  # bytecode once, as a developer's checkout has it
            subprocess.run([str(PYTHON), "-m", "compileall", "-q", str(tree)], check=False)
        for r in range(args.rounds):
            order = ("base", "head") if r % 2 == 0 else ("head", "base")
            for name, argv in runs.items():
                for side in order:
                    repeat = IMPORTS if argv[1] == "-c" else 1
                    took = [timed(argv, trees[side]) for _ in range(repeat)]
                    got[(name, side)].append(
                        (
                            statistics.median(c for c, _ in took),
                            statistics.median(w for _, w in took),
                        )
                    )
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    print(f"base {args.base}, head {args.head}: {args.rounds} rounds interleaved, medians (s)")
    header = f"{'CPU base':>10}{'head':>8}{'ratio':>7}{'wall base':>11}{'head':>8}{'ratio':>7}"
    print(f"{'measure':<30}{header}")
    for name in runs:
        cells = []
        for i in (0, 1):
            base = statistics.median(t[i] for t in got[(name, "base")])
            head = statistics.median(t[i] for t in got[(name, "head")])
            cells.append(f"{base:>{10 if i == 0 else 11}.3f}{head:>8.3f}{head / base:>7.2f}")
        print(f"{name:<30}{''.join(cells)}")


if __name__ == "__main__":
    main()
