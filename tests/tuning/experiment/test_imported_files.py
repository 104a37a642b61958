"""Another tool's result file stored as runs of an experiment (issue 40 item 3): the parameter
and value named when the file holds no server flags (refused before any write when missing),
several files one experiment, the same file twice adds nothing, the runs marked imported with an
incomplete fingerprint, and compare judges them as it judges native runs and says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store import queries
from store.db import connect
from tuning.cli.main import main as cli_main
from tuning.experiment.imported import ImportError_, import_field
from tuning.experiment.reuse_match import run_fingerprint

FIELD = Path(__file__).resolve().parents[2] / "fixtures" / "field"
VLLM = FIELD / "vllm_bench_serve.json"
GUIDELLM = FIELD / "guidellm_benchmarks.json"
AIPERF = FIELD / "aiperf" / "profile_export_aiperf.json"


def _counts(db_path: Path) -> tuple[int, int]:
    with connect(db_path, readonly=True) as db:
        return db["experiments"].count, db["runs"].count


@pytest.mark.parametrize("path", [VLLM, GUIDELLM, AIPERF])
def test_each_format_imports_into_runs_with_requests(fresh_db: Path, path: Path) -> None:
    result = import_field(fresh_db, path, param="max-num-seqs", value="16")
    assert len(result.runs_added) == 1 and result.experiment_id
    with connect(fresh_db, readonly=True) as db:
        run = queries.load_runs(db, result.runs_added)[0]
        exp = queries.get_experiment(db, result.experiment_id)
        assert len(queries.get_requests(db, run["id"])) == 24
    assert run["status"] == "done" and run["config"] == {"max-num-seqs": 16}
    assert run["origin"].startswith("file:") and run["engine"] == "imported"
    assert run["mean_ttft_ms"] > 0 and run["output_throughput"] > 0
    assert exp["param"] == "max-num-seqs" and exp["values"] == [16]
    assert run_fingerprint(run) is None  # incomplete: never offered as a reuse


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({}, "--param NAME --value V"),
        ({"param": "max-num-seqs"}, "--param NAME --value V"),
        ({"value": "16"}, "--value needs --param"),
        ({"param": "max-num-seqs", "value": "16", "experiment_id": 99}, "no such experiment"),
    ],
)
def test_missing_or_wrong_names_are_refused_before_any_write(
    fresh_db: Path, kwargs: dict, words: str
) -> None:
    with pytest.raises(ImportError_) as exc:
        import_field(fresh_db, GUIDELLM, **kwargs)
    assert words in str(exc.value) and "\n" not in str(exc.value)
    assert _counts(fresh_db) == (0, 0)


def test_importing_the_same_file_twice_adds_nothing(fresh_db: Path) -> None:
    first = import_field(fresh_db, VLLM, param="max-num-seqs", value="16")
    again = import_field(fresh_db, VLLM, param="max-num-seqs", value="16")
    assert again.runs_added == [] and again.runs_known == first.runs_added
    assert _counts(fresh_db) == (1, 1)


def _variant(tmp_path: Path, name: str, factor: float) -> Path:
    """The real vLLM file with its latencies scaled: another measurement of the same workload."""
    doc = json.loads(VLLM.read_text())
    doc["ttfts"] = [t * factor for t in doc["ttfts"]]
    doc["latencies"] = [t * factor for t in doc["latencies"]]
    doc["itls"] = [[g * factor for g in gaps] for gaps in doc["itls"]]
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_files_with_different_values_make_one_experiment_with_verdicts(
    fresh_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [(VLLM, "16"), (_variant(tmp_path, "b.json", 1.01), "16")]
    files += [(_variant(tmp_path, f"{n}.json", f), "64") for n, f in (("c", 1.5), ("d", 1.52))]
    eid = import_field(fresh_db, files[0][0], param="max-num-seqs", value="16").experiment_id
    for path, value in files[1:]:
        assert import_field(
            fresh_db, path, param="max-num-seqs", value=value, experiment_id=eid
        ).runs_added
    assert _counts(fresh_db) == (1, 4)
    assert cli_main(["compare", "--db", str(fresh_db), "--experiment", str(eid), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["not_comparable"] == []
    rows = [r for r in out["rows"] if r["metric"] == "p99_ttft_ms" and r["role"] == "candidate"]
    assert rows[0]["verdict"] == "worse"  # the same rule as native runs: 1.5x slower is decided
    assert len(out["candidates"][0]["imported"]) == 2
    assert cli_main(["compare", "--db", str(fresh_db), "--experiment", str(eid)]) == 0
    text = capsys.readouterr().out
    assert "Imported from result files: 4 of 4 runs" in text
    assert "fingerprint is incomplete" in text


def test_a_sweep_folder_imports_without_naming_its_flag(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["import", "--db", str(fresh_db), str(FIELD / "vllm_sweep"), "--json"]
    assert cli_main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["runs_added"]) == 4
    with connect(fresh_db, readonly=True) as db:
        exp = queries.get_experiment(db, out["experiment_id"])
    assert exp["param"] == "max-num-seqs" and sorted(exp["values"]) == [4, 8]
    assert cli_main(args) == 0  # again: nothing added
    assert json.loads(capsys.readouterr().out)["runs_added"] == []


def test_the_cli_refuses_a_missing_value_in_one_line_and_writes_nothing(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["import", "--db", str(fresh_db), str(AIPERF)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--param NAME --value V" in err
    assert _counts(fresh_db) == (0, 0)


def test_runs_of_another_experiment_kind_are_refused(fresh_db: Path) -> None:
    eid = import_field(fresh_db, VLLM, param="max-num-seqs", value="16").experiment_id
    with pytest.raises(ImportError_, match="varies max-num-seqs, not block-size"):
        import_field(fresh_db, GUIDELLM, param="block-size", value="16", experiment_id=eid)
    assert _counts(fresh_db) == (1, 1)
