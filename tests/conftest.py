"""Shared fixtures: a throwaway lab home and DB per test, the seeded labs several test packages
read (built by tests.factories), the lab's CLI in a subprocess, and the real embedded engine and
its tokenizer when they are built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from core.clock import now_iso
from store import connect, open_db, queries, repo
from store.team import publish
from tests.factories import (
    TINY_MODEL,
    Load,
    add_experiment,
    add_run,
    engine_json,
    seed_clean_lab,
    seed_lab,
    workload,
)
from tests.fakes.engines import fake_settings_env
from tests.fakes.hostile import seed_breakout_lab
from tests.parts import missing, require_module
from tuning.compare.comparison import build_comparison, default_baseline
from tuning.engine import embedded as engine_module
from tuning.engine.embedded import build_tiny_model, embedded_spec, model_dir, venv_python
from tuning.engine.spec import EngineSpec

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def lab_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "lab"
    monkeypatch.setenv("TUNING_LAB_HOME", str(home))
    monkeypatch.delenv("TUNING_LAB_DB", raising=False)
    monkeypatch.setenv("TUNING_LAB_LOCK", str(tmp_path / "runner.lock"))
    return home


@pytest.fixture
def fresh_db(lab_home: Path) -> Path:
    path = lab_home / "lab.db"
    open_db(path).conn.close()
    return path


def _run_cli(
    args: list[str], home: Path, *, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "TUNING_LAB_HOME": str(home), "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "tuning", *args],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def tuning_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`python -m tuning ARGS` in a subprocess, from the repo, with a lab home (and extra env)."""
    return _run_cli


@pytest.fixture(scope="session")
def fake_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`fake_cli(home, *ARGS, faults="", timeout=600)`: `python -m tuning ARGS` in a subprocess
    whose engine is the fake vLLM (with those faults) and whose lab is `home`."""

    def run(
        home: Path, *args: str, faults: str = "", timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        return _run_cli(list(args), home, timeout=timeout, env=fake_settings_env(home, faults))

    return run


# --------------------------------------------------------------------------------------------
# Seeded labs (tests.factories) that more than one test package reads
# --------------------------------------------------------------------------------------------


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A lab to export: ada's sweep with a failed start and planted secrets, and bob's run."""
    monkeypatch.setenv("TUNING_LAB_HOME", str(tmp_path / "home"))
    path = tmp_path / "src.db"
    info = seed_lab(path)
    other = seed_clean_lab(
        path, "bob", "box-b", values=(4,), repeats=1, seed=3, name="bob's single run"
    )
    info.update(path=path, other=other)
    return info


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Two teammates' labs (ada on box-a, bob on box-b with other hardware) and a shared folder;
    `publish_bob()` puts bob's sweep in the folder. Both run the embedded engine on the same
    tiny model folder (`engine`), so a run of one can match a planned run of the other."""
    monkeypatch.setenv("TUNING_LAB_HOME", str(tmp_path / "home"))
    folder = tmp_path / "share"
    folder.mkdir()
    model = tmp_path / "models" / "tiny-llama"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(TINY_MODEL))
    engine = engine_json(model=str(model))
    ada, bob = tmp_path / "ada.db", tmp_path / "bob.db"
    ada_info = seed_lab(
        ada, author="ada", host="box-a", hardware="cpu-2core", with_secrets=False, engine=engine
    )
    bob_info = seed_clean_lab(
        bob, "bob", "box-b", hardware="gpu-h100", seed=5, name="bob's sweep", engine=engine
    )

    def publish_bob() -> Path:
        experiment_ids = [bob_info["experiment_id"]]
        return publish(bob, folder, experiment_ids=experiment_ids, author="bob", host="box-b")

    return {
        "folder": folder,
        "ada": ada,
        "bob": bob,
        "ada_info": ada_info,
        "bob_info": bob_info,
        "publish_bob": publish_bob,
        "engine": engine,
    }


@pytest.fixture(scope="session")
def charts_lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """block-size 16 vs 8 x 3 repeats, 30 requests each, 300 s of samples at 100 ms (enough to
    be downsampled); 8 is 10 % slower to the first token. Built once: tests must not change it."""
    path = tmp_path_factory.mktemp("charts") / "lab.db"
    load = Load(
        ttft_s=lambda value: 0.100 if value == 16 else 0.110,
        ttft_jitter=0.01,
        failed_requests=(),
        duration_s=300.0,
        period_s=0.1,
        queue=False,
        processes=False,
    )
    info = seed_lab(
        path,
        param="block-size",
        values=(16, 8),
        repeats=3,
        with_failed=False,
        with_secrets=False,
        seed=1,
        wl=workload(num_requests=30, concurrency=4, input_len=16, output_len=8),
        load=load,
    )
    db = open_db(path)
    runs = queries.load_runs(db, queries.experiment_run_ids(db, info["experiment_id"]))
    cmp = build_comparison(runs, default_baseline(runs))
    return {"path": path, "db": db, "exp": info["experiment_id"], "cmp": cmp, "runs": runs}


@pytest.fixture
def dashboard_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """What the pages show: experiment 1 done (max-num-seqs 2/16/64 x 3 repeats, 64 failed to
    start, one run on other hardware); experiment 2 running now (its runner pid is this process
    and its heartbeat fresh, so the home page's stale-runner sweep leaves it alone), with a log."""
    import streamlit as st

    home, path = tmp_path / "lab", tmp_path / "lab.db"
    monkeypatch.setenv("TUNING_LAB_HOME", str(home))
    monkeypatch.setenv("TUNING_LAB_DB", str(path))
    monkeypatch.setenv("TUNING_LAB_LOCK", str(tmp_path / "runner.lock"))  # not the machine's
    done = seed_lab(path, values=(2, 16), repeats=3, with_secrets=False)
    log = home / "logs" / "run-live.log"
    log.parent.mkdir(parents=True)
    log.write_text("INFO starting vLLM\nINFO KV cache: 8192 tokens\nINFO live-log-marker\n")
    rng = np.random.default_rng(7)
    with connect(path) as db:
        repo.update_run(db, done["run_ids"][7], hardware="other-box")  # 16, third repeat
        live_exp = add_experiment(
            db, values=[4, 8], status="running", phase="loading", runs_done=1, author="bob"
        )
        live_done = add_run(db, live_exp, seq=0, value=4, rng=rng)
        live = add_run(db, live_exp, seq=1, value=8, rng=rng, status="running", log_path=str(log))
        repo.update_experiment(
            db,
            live_exp,
            current_run_id=live,
            requests_done=17,
            requests_total=40,
            runner_pid=os.getpid(),
            heartbeat_at=now_iso(),
            started_at=now_iso(),
        )
    yield {
        "db": path,
        "done_exp": done["experiment_id"],
        "runs": done["run_ids"],
        "live_exp": live_exp,
        "live_run": live,
        "live_done": live_done,
    }
    st.cache_data.clear()
    st.cache_resource.clear()


# --------------------------------------------------------------------------------------------
# The real embedded engine (engine tier) and its tokenizer
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def built_engine() -> EngineSpec:
    """The embedded engine; `make test` builds it first, so there it must exist."""
    if not (venv_python().exists() and (model_dir() / "config.json").exists()):
        missing("the embedded engine", "make setup")
    return embedded_spec()


@pytest.fixture(scope="session")
def ray_installed() -> ModuleType:
    """Ray, for the fleet tests: a broken install fails `make test` instead of skipping them."""
    return require_module("ray", "make fleet")


@pytest.fixture
def engine(built_engine: EngineSpec, lab_home: Path) -> EngineSpec:
    """The embedded engine, for a test with its own lab home."""
    return built_engine


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A lab whose every value and text closes an inline <script> (tests.fakes.hostile), with the
    comparison of its experiment: for the export tests, once a module."""
    return seed_breakout_lab(tmp_path_factory.mktemp("hostile-export"))


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    """A model folder with only the tiny-llama's config.json: enough for tuning.engine.predict."""
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_MODEL))
    return folder


@pytest.fixture(scope="session")
def tiny_engine_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An engine folder holding only the tiny model's files, built here by the lab's own recipe
    (offline, a second or two, byte-identical to `make setup`'s): no test waits for the engine."""
    root = tmp_path_factory.mktemp("engine")
    build_tiny_model(root / "tiny-llama")
    return root


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_engine_dir: Path) -> Path:
    """The embedded engine's tokenizer.json, built for the session (never skipped)."""
    return tiny_engine_dir / "tiny-llama" / "tokenizer.json"


@pytest.fixture
def lab_tokenizer(tiny_engine_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The lab's default tokenizer (`model_dir()`, what `workload preview` and the app read) is
    the session's tiny one, in this process and in the CLI subprocesses a test starts."""
    monkeypatch.setattr(engine_module, "ENGINE_DIR", tiny_engine_dir)
    monkeypatch.setenv("TUNING_LAB_ENGINE_DIR", str(tiny_engine_dir))
    return model_dir() / "tokenizer.json"
