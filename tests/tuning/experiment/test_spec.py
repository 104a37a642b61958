"""Issue 39 item 4 ("one way through") and issue 37 item 3 ("defaults that decide"): an
experiment is one typed, frozen `ExperimentSpec`, built and checked once, the same object from the
CLI (`from_cli_args`) and New experiment, handed typed to the store; the CLI's default repeats
until decided under a time budget, and one run a side warns that it cannot decide."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from core.records import NewExperiment
from store import connect, queries, repo
from tests.apptest import open_page
from tests.fakes.engines import fake_settings_env
from tuning.cli.main import build_parser
from tuning.engine.current import current_spec
from tuning.engine.params import ParamError
from tuning.experiment.plan import plan_experiment
from tuning.experiment.repeats import AutoRepeats
from tuning.experiment.size import DEFAULT_BUDGET_MINUTES, DEFAULT_MAX_REPEATS
from tuning.experiment.spec import ONE_RUN, ExperimentSpec
from tuning.measure.traffic.workload import Workload
from tuning.settings import load_settings

WL = Workload(num_requests=4, concurrency=2, input_len=4, output_len=4)


@pytest.fixture
def fake_engine(lab_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, value in fake_settings_env(lab_home).items():
        monkeypatch.setenv(name, value)
    return lab_home / "lab.db"


def _cli(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["experiment", *argv])


def test_the_cli_defaults_to_until_decided_with_a_budget_and_stores_it(fake_engine: Path) -> None:
    """`experiment` defaulted to `--repeats 1`: an experiment that could never end in a verdict."""
    spec = ExperimentSpec.from_cli_args(
        _cli("--param", "max-num-seqs", "--values", "2,16"), fake_engine
    )
    assert spec.auto == AutoRepeats(DEFAULT_MAX_REPEATS, DEFAULT_BUDGET_MINUTES)
    assert spec.warning is None
    exp_id = plan_experiment(fake_engine, spec)
    with connect(fake_engine, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
    stored = {k: exp[k] for k in ("repeats_auto", "max_repeats", "budget_minutes", "repeats")}
    assert stored == {
        "repeats_auto": 1,
        "max_repeats": DEFAULT_MAX_REPEATS,
        "budget_minutes": DEFAULT_BUDGET_MINUTES,
        "repeats": 2,  # the first rounds; the runner adds the rest
    }
    limits = ExperimentSpec.from_cli_args(
        _cli("--param", "max-num-seqs", "--values", "2,16", "--budget-minutes", "0"), fake_engine
    )
    assert limits.auto == AutoRepeats(DEFAULT_MAX_REPEATS, None)  # 0: no budget, as on the page


def test_fixed_repeats_stay_and_one_run_a_side_says_it_cannot_decide(fake_engine: Path) -> None:
    one = ExperimentSpec.from_cli_args(
        _cli("--param", "max-num-seqs", "--values", "2,16", "--repeats", "1"), fake_engine
    )
    assert (one.auto, one.repeats, one.warning) == (None, 1, ONE_RUN)
    two = ExperimentSpec.from_cli_args(
        _cli("--param", "max-num-seqs", "--values", "2,16", "--repeats", "2"), fake_engine
    )
    assert two.warning is None and two.row().repeats == 2 and not two.row().repeats_auto
    with pytest.raises(ValueError, match="need --repeats auto"):
        ExperimentSpec.from_cli_args(
            _cli("--param", "max-num-seqs", "--values", "2,16", "--repeats", "3",
                 "--max-repeats", "4"),
            fake_engine,
        )  # fmt: skip


def test_the_store_receives_the_typed_spec_and_the_page_builds_the_same_one(
    fake_engine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plan_experiment(**plan: Any)` dropped every type at the main seam, and the page and the
    CLI each assembled their own keywords. Now New experiment, untouched, hands the store the
    very row `experiment --param max-num-seqs --values 2,16` would."""
    received: list[NewExperiment] = []
    create = repo.create_experiment

    def recording(db: Any, new: NewExperiment, **state: Any) -> int:
        received.append(new)
        return create(db, new, **state)

    monkeypatch.setattr(repo, "create_experiment", recording)
    monkeypatch.setattr("tuning.experiment.supervisor.spawn_runner", lambda path, exp_id: None)
    at = open_page("app_pages/1_New_experiment.py")
    at.button(key="new_start").click().run()
    assert not at.exception, at.exception
    cli = ExperimentSpec.from_cli_args(
        _cli("--param", "max-num-seqs", "--values", "2,16"), fake_engine
    )
    plan_experiment(fake_engine, cli)
    assert len(received) == 2 and all(isinstance(r, NewExperiment) for r in received)
    from_page, from_cli = received
    assert from_page == from_cli == cli.row()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cli.values = (1,)  # type: ignore[misc]


def test_every_value_is_checked_once_in_build_and_the_engine_is_not_changed(
    fake_engine: Path,
) -> None:
    engine = current_spec(load_settings())
    before = engine.to_json()
    spec = ExperimentSpec.build(
        param="max_num_seqs",
        values="2, 16",
        workload=WL,
        engine=engine,
        base_config={"block-size": "32", "max-num-seqs": "8"},
    )
    assert (spec.param.name, spec.values) == ("max-num-seqs", (2, 16))
    assert spec.config["block-size"] == 32 and "max-num-seqs" not in spec.config
    assert spec.name == "max-num-seqs = 2, 16"
    assert engine.to_json() == before  # nothing returned through the argument
    for values, base, said in (
        ("2,2", {}, "2 is given twice"),
        ("2 16", {}, "separate values with commas"),
        ("2,nan", {}, "max-num-seqs: 'nan' is not a valid int"),
        ("[" * 5000, {}, "max-num-seqs: "),
        ("2,16", {"host": "0.0.0.0"}, "host: never tuned by the lab"),
        (
            "1G,2G",
            {"gpu-memory-utilization": "0.5"},
            "kv-cache-memory-bytes and gpu-memory-utilization both set",
        ),
    ):
        param = "kv-cache-memory-bytes" if values == "1G,2G" else "max-num-seqs"
        with pytest.raises(ParamError, match=said):
            ExperimentSpec.build(
                param=param, values=values, workload=WL, engine=engine, base_config=base
            )
    with pytest.raises(ValueError, match="needs a server restart"):
        ExperimentSpec.build(
            param="max-num-seqs", values="2,16", workload=WL, engine=None, base_url="http://x"
        )


def test_a_value_is_validated_once_on_its_way_from_the_cli_to_the_store(
    fake_engine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39 item 4: a value's validation ran three times (parse_values in flags.learn.prepare,
    validate_value in experiment_fields, validate_config per start). Now once, in `build`."""
    from collections import Counter

    from tuning.engine import validate

    seen: Counter[tuple[str, str]] = Counter()
    real = validate.validate_value

    def counting(name: str, raw: Any, learned: Any = None) -> Any:
        seen[(name, str(raw))] += 1
        return real(name, raw, learned)

    monkeypatch.setattr(validate, "validate_value", counting)
    args = _cli("--param", "max-num-seqs", "--values", "2,16", "--set", "block-size=32")
    plan_experiment(fake_engine, ExperimentSpec.from_cli_args(args, fake_engine))
    assert seen[("max-num-seqs", "2")] == seen[("max-num-seqs", "16")] == 1
    assert seen[("block-size", "32")] == 1
    assert set(seen.values()) == {1}, seen
