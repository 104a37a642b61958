"""Issue 41 case 1: reuse matches only the same engine, not the same served name. Runs are created
the way the runner creates them (`new_run_fields`), measured, and an experiment that differs in one
part of the engine is planned: another hub repo serving the same name, an extra argument in the
engine command, another load format, another engine environment, an inherited VLLM_* knob, a
local model whose config.json changed. None of them may be offered the first experiment's runs;
the same engine is (the control). A run with no engine identity (a row from before) is never
offered, and nothing crashes on it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.clock import now_iso
from store import connect, queries, repo
from tests.factories import WORKLOAD, add_experiment, records
from tuning.engine.spec import API_SERVER_MODULE, EngineSpec
from tuning.experiment.reuse import find_offer
from tuning.experiment.run_unit import new_run_fields
from tuning.measure.metrics import summarize

HW = {"summary": "1x NVIDIA H100 80GB HBM3", "gpus": [{"index": 0, "name": "NVIDIA H100"}]}
META = "meta-llama/Llama-3.1-8B"


def _engine(**over: Any) -> dict[str, Any]:
    """A user's GPU vLLM as `custom_spec` makes it (served name from the model's last part)."""
    spec = EngineSpec(
        name="custom",
        command=[sys.executable, *API_SERVER_MODULE],
        model=META,
        served_model_name="Llama-3.1-8B",
        backend="gpu",
        env={"VLLM_NO_USAGE_STATS": "1"},
        vllm_version="0.11.0",
    )
    return {**spec.to_json(), **over}


def _experiment(path: Path, engine: dict[str, Any], status: str = "queued") -> int:
    with connect(path) as db:
        return add_experiment(
            db,
            values=[2, 16],
            status=status,
            engine_json=engine,
            model=engine["served_model_name"],  # what experiment_fields stores: the served name
        )


def _measured(path: Path, engine: dict[str, Any]) -> list[int]:
    """An experiment of `engine` whose two runs were created as the runner creates them, then
    measured (requests and summary stored, done)."""
    exp_id = _experiment(path, engine, status="done")
    rng = np.random.default_rng(3)
    ids = []
    with connect(path) as db:
        exp = queries.get_experiment(db, exp_id)
        for seq, value in enumerate(exp["values"]):
            rid = repo.create_run(db, **new_run_fields(exp, seq, value, 0, HW))
            recs = records(rng, WORKLOAD, 0.05, 0.004)
            repo.insert_requests(db, rid, recs)
            repo.store_summary(db, rid, summarize(recs, 2.0))
            repo.update_run(db, rid, status="done", phase="done", finished_at=now_iso())
            ids.append(rid)
    return ids


def _offered(path: Path, engine: dict[str, Any]) -> list[int]:
    """The run ids offered to a newly planned experiment of `engine`."""
    exp_id = _experiment(path, engine)
    with connect(path, readonly=True) as db:
        offer = find_offer(path, queries.get_experiment(db, exp_id), hw=HW)
    return sorted(m.run_id or 0 for v in offer.values for m in v.matches)


@pytest.mark.parametrize(
    "other",
    [
        pytest.param({"model": "evil-org/Llama-3.1-8B"}, id="another-repo-same-served-name"),
        pytest.param(
            {"command": [sys.executable, *API_SERVER_MODULE, "--some-extra-arg"]},
            id="extra-engine-argument",
        ),
        pytest.param({"load_format": "dummy"}, id="load-format-dummy-vs-unset"),
        pytest.param(
            {"env": {"VLLM_NO_USAGE_STATS": "1", "VLLM_ATTENTION_BACKEND": "FLEX_ATTENTION"}},
            id="engine-environment",
        ),
    ],
)
def test_another_engine_is_never_offered_the_runs(tmp_path: Path, other: dict[str, Any]) -> None:
    path = tmp_path / "lab.db"
    measured = _measured(path, _engine())
    assert _offered(path, _engine(**other)) == []  # nothing of the first engine's counts
    assert _offered(path, _engine()) == measured  # the same engine is offered both runs


def test_an_inherited_vllm_knob_is_part_of_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server inherits the lab's environment: a VLLM_* knob set there changes what runs."""
    path = tmp_path / "lab.db"
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    measured = _measured(path, _engine())
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0-1")
    assert _offered(path, _engine()) == []
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND")
    assert _offered(path, _engine()) == measured


def test_a_local_model_is_named_by_its_config_too(tmp_path: Path) -> None:
    """The same folder with another config.json is another model; an unreadable one is unknown."""
    path = tmp_path / "lab.db"
    folder = tmp_path / "models" / "llama"
    folder.mkdir(parents=True)
    config = folder / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 32}))
    local = _engine(model=str(folder), served_model_name="llama")
    measured = _measured(path, local)
    assert _offered(path, local) == measured
    config.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 16}))
    assert _offered(path, local) == []
    config.unlink()  # nothing says which model the folder holds now: never a match
    assert _offered(path, local) == []
    _measured(path, local)  # nor do runs measured while it could not be read match each other
    assert _offered(path, local) == []


def test_a_run_that_does_not_say_its_engine_is_never_offered(tmp_path: Path) -> None:
    """Rows written before the lab stored the engine's identity (or with it damaged) read as
    unknown: not offered, and the offer is still made for the rest."""
    path = tmp_path / "lab.db"
    old, kept = _measured(path, _engine())
    with connect(path) as db:
        repo.update_run(db, old, engine_identity_json=None)
        repo.update_run(db, kept, engine_identity_json={"command": ["x"]})
    assert _offered(path, _engine()) == []
