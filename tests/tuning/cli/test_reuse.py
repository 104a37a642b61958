"""Issue 25 item 3 end to end on the fake vLLM: an experiment repeated with an identical
fingerprint is offered the earlier runs; without --reuse every run is measured (and it says so),
with --reuse only the missing repeats run and Compare's verdict counts both, marked reused."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from store import connect, queries
from tests.fakes.engines import fake_settings_env

FakeCli = Callable[..., CompletedProcess[str]]
FAKE_PKG = Path(__file__).resolve().parents[2] / "fakes" / "fake_vllm_pkg"
PYTHONPATH = os.environ.get("PYTHONPATH", "")
SWEEP = [
    "--repeats",
    "1",
    "--param",
    "block-size",
    "--values",
    "16,32",
    "--num-requests",
    "6",
    "--concurrency",
    "3",
]
SWEEP += ["--input-len", "8", "--output-len", "4", "--num-warmups", "1", "--start-timeout", "240"]


def _experiment(cli: FakeCli, home: Path, *args: str) -> tuple[dict[str, Any], str]:
    done = cli(home, "experiment", *SWEEP, "--json", *args, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout), done.stderr


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, fake_cli: FakeCli) -> dict[str, Any]:
    """One round of 16 vs 32; the same again with 2 repeats and no choice; then 4 with --reuse.
    The fake package on PYTHONPATH lets the lab read the engine's vLLM version before a start,
    as it does for a real install (an unknown version is never matched)."""
    home = tmp_path_factory.mktemp("reuse")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(FAKE_PKG), PYTHONPATH])))
        first, first_err = _experiment(fake_cli, home, "--repeats", "1")
        plain, plain_err = _experiment(fake_cli, home, "--repeats", "2")
        reused, reused_err = _experiment(fake_cli, home, "--repeats", "4", "--reuse")
    with connect(home / "lab.db", readonly=True) as db:
        runs = {
            e["experiment_id"]: queries.list_runs(db, e["experiment_id"], include_hidden=True)
            for e in (first, plain, reused)
        }
    return {
        "home": home,
        "out": (first, plain, reused),
        "err": (first_err, plain_err, reused_err),
        "runs": runs,
    }


def test_without_a_choice_the_offer_is_printed_and_every_run_is_measured(
    lab: dict[str, Any],
) -> None:
    first, plain, _ = lab["out"]
    assert first["reuse"]["count"] == 0 and "earlier run" not in lab["err"][0]
    (r16, r32) = lab["runs"][first["experiment_id"]]
    err = lab["err"][1]
    assert (
        f"1 earlier run matches block-size = 16 exactly (run {r16['id']}, "
        f"{r16['finished_at'][:10]}, by {r16['author']}@{r16['host']}): --reuse to count them, "
        "--no-reuse to run anyway" in err
    )
    assert f"block-size = 32 exactly (run {r32['id']}, " in err
    assert "did not reuse them (no --reuse given): every run is measured" in err
    assert plain["reuse"]["choice"] == "none" and plain["reuse"]["count"] == 2
    assert plain["reuse"]["reused_run_ids"] == [] and len(plain["run_ids"]) == 4
    runs = lab["runs"][plain["experiment_id"]]
    assert len(runs) == 4 and all(r["reused_from"] is None for r in runs)


def test_with_reuse_only_the_missing_repeats_run(lab: dict[str, Any]) -> None:
    first, plain, reused = lab["out"]
    offer = reused["reuse"]
    assert offer["choice"] == "reuse" and offer["count"] == 6  # 1 + 2 earlier runs per value
    earlier = {r["uid"] for e in (first, plain) for r in lab["runs"][e["experiment_id"]]}
    assert {m["uid"] for v in offer["values"] for m in v["matches"]} == earlier
    assert "counted 6 earlier run(s) as reused evidence; only the 2 missing run(s)" in lab["err"][2]
    runs = lab["runs"][reused["experiment_id"]]
    measured = [r for r in runs if r["reused_from"] is None]
    assert len(runs) == 8 and [r["id"] for r in measured] == reused["run_ids"]
    assert sorted(r["value"] for r in measured) == ["16", "32"]  # one missing repeat a value
    assert sorted(r["id"] for r in runs if r["reused_from"]) == sorted(offer["reused_run_ids"])
    assert {r["reused_from"]["uid"] for r in runs if r["reused_from"]} == earlier
    assert sorted(r["seq"] for r in runs) == list(range(8)) and reused["status"] == "done"


def test_compare_counts_the_reused_runs_and_says_so(lab: dict[str, Any], fake_cli: FakeCli) -> None:
    reused = lab["out"][2]
    exp = str(reused["experiment_id"])
    done = fake_cli(lab["home"], "compare", "--experiment", exp, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert {r["runs"] for r in data["rows"]} == {4}  # 3 reused + 1 measured per side
    assert len(data["baseline"]["reused"]) == 3 and len(data["candidates"][0]["reused"]) == 3
    text = fake_cli(lab["home"], "compare", "--experiment", exp).stdout
    assert "Reused from earlier runs (not measured again): 6 of 8 runs" in text


def test_another_model_serving_the_same_name_is_measured_not_reused(
    tmp_path: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    """Issue 41 case 1 as it was seen: `meta-llama/Llama-3.1-8B`, then `evil-org/Llama-3.1-8B`
    with --reuse; both serve the name `Llama-3.1-8B`. The second model is measured."""
    home = tmp_path / "home"
    env = {
        **fake_settings_env(home),
        "TUNING_LAB_SERVED_MODEL_NAME": "",  # the served name follows the model: Llama-3.1-8B
        "PYTHONPATH": os.pathsep.join(filter(None, [str(FAKE_PKG), PYTHONPATH])),
    }
    args = ["experiment", *SWEEP[:5], "16", *SWEEP[6:], "--json"]
    out = []
    for model, extra in (("meta-llama/Llama-3.1-8B", []), ("evil-org/Llama-3.1-8B", ["--reuse"])):
        done = tuning_cli(
            [*args, *extra], home, env={**env, "TUNING_LAB_ENGINE_MODEL": model}, timeout=400
        )
        assert done.returncode == 0, done.stdout + done.stderr
        out.append(json.loads(done.stdout))
    assert out[1]["reuse"]["count"] == 0 and out[1]["reuse"]["reused_run_ids"] == []
    with connect(home / "lab.db", readonly=True) as db:
        (run,) = queries.list_runs(db, out[1]["experiment_id"], include_hidden=True)
    assert run["reused_from"] is None and run["id"] in out[1]["run_ids"]  # measured here
    assert run["model"] == "Llama-3.1-8B" and run["engine_identity"]["model"] == model
