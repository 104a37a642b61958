"""Prepare everything the H200 test machine needs to run the lab's CLI against real vLLM 0.25.

The machine has PyTorch 2.11 (cu130) and no network; each `run` call carries at most 64 MiB (working
tree included). This script follows ../shared/tools/gpu-vllm/README.md (beside the repo root), from
this machine (needs PyPI), and is idempotent (each download and build is skipped when its output
exists):

  .gpu-build/dl/        vllm-0.25.0 cp312 manylinux wheel (~250 MB, never carried)
  .gpu-build/slim/      the slim wheel made by make_slim_wheel.py (~101 MB)
  .carry1/              call 1: vllm.whl.part-aa + gpu-model/ (the 1B dummy Llama)
  .carry1b/ ...         the calls between (only when the tree is too large for two): one more
                        piece of the wheel each
  .carry2/              the last call: the last piece + wheels/ (the recipe's 21 small wheels and
                        what the lab's CLI needs beyond the machine's image: sqlite-utils,
                        sqlite-fts4, click-default-group)

The working tree travels with every call, so the fewer calls the better: as many as it takes for
each call (its piece + the tree) to stay 1 MiB under the limit, the wheel cut so all weigh the
same. The folders are ignored through .git/info/exclude (added here). The plan printed at the end
says which folder goes with which call.

    .venv/bin/python benchmarks/gpu/prepare_carry.py [--recipe ../shared/tools/gpu-vllm]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / ".gpu-build"
CARRY1 = REPO / ".carry1"
CARRY2 = REPO / ".carry2"
IGNORED = ["/.gpu-build/", "/.carry1/", "/.carry2/", "/.carry1?/"]
VLLM = "vllm==0.25.0"
# sqlite-utils and its two pure-python needs the image lacks (tabulate, python-dateutil and pluggy
# are already there, per the device's KINDS.md package list); click too, pinned to the version the
# lab is tested with here (sqlite-utils 4.2.1 wants click>=8.3.1; the image's version is unknown).
LAB_WHEELS = [
    "sqlite-utils==4.2.1",
    "sqlite-fts4==1.0.3",
    "click-default-group==1.2.4",
    "click==8.5.1",
    # `python -m tuning compare` (run_on_h200.py's collect step) imports tuning.present.export
    # -> altair; the image has pandas, jinja2, attrs, packaging but no altair/jsonschema.
    # (`experiment`, `bench`, `server` and `runs` start without altair.) narwhals pinned to the
    # version the lab is tested with.
    "altair==6.3.0",
    "jsonschema==4.26.0",
    "referencing==0.37.0",
    "jsonschema-specifications==2025.9.1",
    "rpds-py==2026.9.1",
    "narwhals==2.29.0",
    # a vLLM dependency the recipe leaves out: without it vLLM cannot title its
    # children ("VLLM::EngineCore"), and the lab's telemetry labels the engine process
    # "python3:<pid>" instead of "EngineCore:<pid>" (the 2026-12-02 run was without it).
    "setproctitle==1.3.7",
]
CALL_LIMIT = 64 * 1024 * 1024
HEADROOM = 1024 * 1024  # a tree that grows towards the limit fails the plan's test, not a call
# What the last build weighed (2026-12-02: call 1 carried 52.1 MiB, call 2 57 MiB): the slim wheel,
# the 1B dummy model folder (config + tokenizer) and call 2's small wheels. The test of the plan
# (tests/examples/test_gpu_carry.py) uses them with the working tree as it is now.
LAST_BUILD_BYTES = {"slim_wheel": 101_000_000, "gpu_model": 105_000, "wheels": 13_300_000}


def calls_needed(tree: int, slim: int, model: int, wheels: int) -> int:
    """The fewest calls (at least two: the model and the wheels ride separately) whose balanced
    share of the carry, plus the tree each one sends, stays HEADROOM under the limit."""
    for calls in range(2, 9):
        if -(-(slim + model + wheels) // calls) + tree < CALL_LIMIT - HEADROOM:
            return calls
    raise SystemExit(f"the working tree ({tree / 2**20:.1f} MiB) leaves no room to carry vLLM")


def piece_bytes(slim: int, model: int, wheels: int, calls: int) -> list[int]:
    """Where to cut the slim wheel so every call carries the same: the first piece travels with
    the model, the last with the wheels (the recipe's fixed 52 MiB cut left a call over)."""
    each = (slim + model + wheels) // calls
    pieces = [each - model] + [each] * (calls - 2)
    return [*pieces, slim - sum(pieces)]


def carry_folders(calls: int) -> list[Path]:
    """.carry1, then .carry1b, .carry1c ... for the calls between, then .carry2 (the last)."""
    return [CARRY1, *(REPO / f".carry1{chr(ord('b') + i)}" for i in range(calls - 2)), CARRY2]


def plan_bytes(tree: int, slim: int, model: int, wheels: int) -> list[int]:
    """Bytes each call sends: its carry plus the working tree (it travels with every call)."""
    pieces = piece_bytes(slim, model, wheels, calls_needed(tree, slim, model, wheels))
    extra = [model] + [0] * (len(pieces) - 2) + [wheels]
    return [p + e + tree for p, e in zip(pieces, extra, strict=True)]


PLATFORM = [
    "--only-binary=:all:",
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    *[
        a
        for p in (
            "manylinux_2_28_x86_64",
            "manylinux_2_17_x86_64",
            "manylinux2014_x86_64",
            "manylinux_2_27_x86_64",
            "manylinux_2_31_x86_64",
            "manylinux_2_34_x86_64",
            "manylinux1_x86_64",
        )
        for a in ("--platform", p)
    ],
]


def say(msg: str) -> None:
    print(msg, flush=True)


def run(argv: list[str], cwd: Path | None = None) -> None:
    say("  $ " + " ".join(argv))
    subprocess.run(argv, check=True, cwd=cwd)


def pip_download(specs: list[str], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            *PLATFORM,
            "-d",
            str(dest),
            *specs,
        ]
    )


def wheel_present(folder: Path, spec: str) -> bool:
    name, _, version = spec.partition("==")
    stem = name.replace("-", "_").lower()
    return any(p.name.lower().startswith(f"{stem}-{version}-") for p in folder.glob("*.whl"))


def ensure_excluded() -> None:
    git_dir = Path(
        subprocess.run(
            ["git", "rev-parse", "--git-dir"], cwd=REPO, check=True, capture_output=True, text=True
        ).stdout.strip()
    )
    exclude = (REPO / git_dir if not git_dir.is_absolute() else git_dir) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    missing = [p for p in IGNORED if p not in lines]
    if missing:
        with open(exclude, "a") as fh:
            fh.write("".join(p + "\n" for p in missing))
        say(f"added to {exclude}: {' '.join(missing)}")


def split(src: Path, dests: list[Path], sizes: list[int]) -> list[Path]:
    """Cut src into these sizes (the last takes the rest), named like `split`: <name>.part-aa,
    -ab, -ac ..."""
    parts = []
    with open(src, "rb") as fh:
        for i, size in enumerate([*sizes[:-1], -1]):
            part = dests[i] / f"vllm.whl.part-a{chr(ord('a') + i)}"
            for stale in dests[i].glob("vllm.whl.part-a*"):
                if stale != part:
                    stale.unlink()
            data = fh.read(size)
            if not (
                part.exists() and part.stat().st_size == len(data) and part.read_bytes() == data
            ):
                part.parent.mkdir(parents=True, exist_ok=True)
                part.write_bytes(data)
            parts.append(part)
    return parts


def tree_bytes(path: Path) -> int:
    return (
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        if path.is_dir()
        else path.stat().st_size
    )


def working_tree_bytes() -> int:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout
    total = 0
    for rel in filter(None, out.split(b"\0")):
        p = REPO / rel.decode()
        if p.is_file():
            total += p.stat().st_size
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", type=Path, default=REPO.parent / "shared" / "tools" / "gpu-vllm")
    ap.add_argument("--json", action="store_true", help="print the plan as JSON too")
    args = ap.parse_args()
    recipe = args.recipe
    ensure_excluded()

    dl, slim = BUILD / "dl", BUILD / "slim"
    wheels = CARRY2 / "wheels"
    say("1. vLLM 0.25.0 wheel (cp312, manylinux)")
    if not list(dl.glob("vllm-0.25.0-*.whl")):
        pip_download([VLLM], dl)
    src = sorted(dl.glob("vllm-0.25.0-*.whl"))[0]
    say(f"   {src.name}: {src.stat().st_size / 1e6:.0f} MB")

    say("2. slim wheel (make_slim_wheel.py)")
    if not list(slim.glob("vllm-0.25.0-*.whl")):
        slim.mkdir(parents=True, exist_ok=True)
        run([sys.executable, str(recipe / "make_slim_wheel.py"), str(src), str(slim)])
    slim_whl = sorted(slim.glob("vllm-0.25.0-*.whl"))[0]
    say(f"   {slim_whl.name}: {slim_whl.stat().st_size / 1e6:.0f} MB")

    say("3. the recipe's small wheels + the lab's extra wheels")
    wanted = [
        ln.strip()
        for ln in (recipe / "carry-requirements.txt").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ] + LAB_WHEELS
    missing = [s for s in wanted if not wheel_present(wheels, s)]
    if missing:
        pip_download(missing, wheels)
    still = [s for s in wanted if not wheel_present(wheels, s)]
    if still:
        raise SystemExit(f"wheels not found after download: {still}")
    say(f"   {len(wanted)} wheels in {wheels.relative_to(REPO)}")

    say("4. the 1B dummy Llama folder (make_tiny_model.py: config + tokenizer, no weights)")
    model = CARRY1 / "gpu-model"
    if not (model / "config.json").exists():
        model.mkdir(parents=True, exist_ok=True)
        run([sys.executable, str(recipe / "make_tiny_model.py"), str(model)])
    shape = json.loads((model / "config.json").read_text())
    say(
        "   "
        + ", ".join(
            f"{k}={shape[k]}"
            for k in (
                "hidden_size",
                "intermediate_size",
                "num_hidden_layers",
                "num_attention_heads",
                "num_key_value_heads",
                "head_dim",
                "vocab_size",
                "max_position_embeddings",
            )
        )
    )

    say("5. cut the slim wheel so every call carries the same")
    tree = working_tree_bytes()
    rest = tree_bytes(wheels) + len(slim_whl.name) + 1  # + WHEEL_NAME
    calls = calls_needed(tree, slim_whl.stat().st_size, tree_bytes(model), rest)
    folders = carry_folders(calls)
    for stale in REPO.glob(".carry1?"):
        if stale not in folders:
            shutil.rmtree(stale)
    split(slim_whl, folders, piece_bytes(slim_whl.stat().st_size, tree_bytes(model), rest, calls))
    (CARRY2 / "WHEEL_NAME").write_text(slim_whl.name + "\n")

    plan = []
    for i, folder in enumerate(folders, start=1):
        size = tree_bytes(folder)
        plan.append(
            {
                "call": i,
                "carry": [folder.name],
                "carry_bytes": size,
                "with_tree_bytes": size + tree,
                "contents": sorted(str(p.relative_to(folder)) for p in folder.iterdir()),
            }
        )
    say(f"\ncarry plan (working tree {tree / 2**20:.1f} MiB travels with each call; limit 64 MiB)")
    ok = True
    for item in plan:
        total = item["with_tree_bytes"]
        ok &= total < CALL_LIMIT
        say(
            f"  call {item['call']}: carry={item['carry']}  {item['carry_bytes'] / 2**20:.1f} MiB "
            f"+ tree = {total / 2**20:.1f} MiB {'OK' if total < CALL_LIMIT else 'TOO BIG'}"
        )
        say(f"          {', '.join(item['contents'])}")
    say(
        "  each call but the last runs `run_on_h200.py stage1 --carry FOLDER` (keeps its piece, and"
        " the model, in ~/acc); the last runs `stage2` (cats the pieces, installs with --target "
        "~/acc/site, starts the pipeline): see benchmarks/gpu/README.md"
    )
    if args.json:
        print(json.dumps(plan, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
