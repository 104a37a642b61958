"""What travels to the H200 stays under the device's 64 MiB a call, and the committed example DB
opens as it is without ever being written."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from types import ModuleType

from store import open_db, queries, snapshot

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "h200" / "lab-h200.db.xz"


def _prepare_carry() -> ModuleType:
    path = REPO / "benchmarks" / "gpu" / "prepare_carry.py"
    spec = importlib.util.spec_from_file_location("prepare_carry", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tracked_bytes() -> int:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True
    ).stdout
    return sum((REPO / p.decode()).stat().st_size for p in filter(None, out.split(b"\0")))


def test_every_call_of_the_carry_plan_fits_with_the_tree_as_it_is() -> None:
    carry = _prepare_carry()
    build = carry.LAST_BUILD_BYTES
    calls = carry.plan_bytes(
        _tracked_bytes(), build["slim_wheel"], build["gpu_model"], build["wheels"]
    )
    assert 2 <= len(calls) <= 4
    # 1 MiB of headroom each: a tree that grows towards the limit fails here, not on the device.
    assert all(c < carry.CALL_LIMIT - 2**20 for c in calls), [round(c / 2**20, 1) for c in calls]
    # The cut balances the calls (the recipe's fixed 52 MiB cut left call 2 at 67.3 MiB).
    assert max(calls) - min(calls) <= len(calls)


def test_a_larger_tree_takes_a_third_call_instead_of_overflowing() -> None:
    carry = _prepare_carry()
    slim, model, wheels = 101_000_000, 105_000, 13_300_000
    small = carry.plan_bytes(4 * 2**20, slim, model, wheels)
    large = carry.plan_bytes(11 * 2**20, slim, model, wheels)  # 2 calls would be 65+ MiB each
    assert len(small) == 2 and len(large) == 3
    assert sum(large) - 3 * 11 * 2**20 == slim + model + wheels  # every byte carried once
    assert [f.name for f in carry.carry_folders(3)] == [".carry1", ".carry1b", ".carry2"]


def test_the_recipe_is_found_beside_the_repo_not_by_an_absolute_path() -> None:
    text = (REPO / "benchmarks" / "gpu" / "prepare_carry.py").read_text()
    assert "/work/" not in text
    assert 'REPO.parent / "shared" / "tools" / "gpu-vllm"' in text


def test_the_compressed_example_opens_and_is_never_written(
    tuning_cli: Callable[..., CompletedProcess[str]], tmp_path: Path
) -> None:
    before = hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    out = tuning_cli(
        ["compare", "--db", str(EXAMPLE), "--experiment", "1"],
        tmp_path,
        env={"XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert out.returncode == 0, out.stderr
    assert "gpu-memory-utilization" in out.stdout
    assert hashlib.sha256(EXAMPLE.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in EXAMPLE.parent.glob("lab-h200.db*")) == ["lab-h200.db.xz"]
    copy = next((tmp_path / "cache").rglob("*.db"))
    assert len(queries.list_runs(open_db(copy))) == 8


def test_a_plain_path_is_opened_as_given(tmp_path: Path) -> None:
    plain = tmp_path / "lab.db"
    assert snapshot.expanded(plain) == plain


def test_the_gpu_script_runs_any_lab_command_on_its_db(tmp_path: Path) -> None:
    """`run_on_h200.py lab ...`: how a budget-stopped experiment goes on on the warm machine,
    with the script's settings and its DB (`--db` added)."""
    shutil.copy(
        snapshot.expanded(REPO / "examples/h200/lab-h100-gpu-blocks.db.xz"), tmp_path / "lab.db"
    )
    out = subprocess.run(
        [sys.executable, "benchmarks/gpu/run_on_h200.py", "lab", "runs", "--json"],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "H200_ACC": str(tmp_path), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert f"--json --db {tmp_path / 'lab.db'}" in out.stdout  # the script's log line
    runs = json.loads(out.stdout[out.stdout.index("\n[") :])
    values = [r["value"] for r in sorted(runs, key=lambda r: int(r["id"]))]
    assert values == ["2048", "32768", "32768", "2048", "2048", "32768"]
