"""A flag outside the curated table, end to end on the fake vLLM (whose parser is the fake
package's): planned, launched, read back from the engine's `non-default args` line, stored on
each run and shown by `runs --json`; `flags --json` lists the engine's flags. The real engine's
runs are in tests/engine/test_engine_flags.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import connect, queries
from tests.fakes.engines import fake_settings_env
from tuning.cli.main import main

FakeCli = Callable[..., CompletedProcess[str]]
WORKLOAD = ["--num-requests", "4", "--concurrency", "2", "--input-len", "8", "--output-len", "4"]
WORKLOAD += ["--num-warmups", "0", "--start-timeout", "240"]
KNOB = "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY"  # "Comma-separated ... prefixes", as in vLLM
Here = Callable[..., tuple[int, str, str]]


@pytest.fixture
def here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Here:
    """`here(*ARGS)` -> (exit code, stdout, stderr): the CLI's main in this process, with the lab
    and engine fake_cli's subprocess has (tmp_path, the fake vLLM). For what reads the flags or
    the store, or is refused before any work: an interpreter's start-up proves nothing more."""
    for name, value in fake_settings_env(tmp_path).items():
        monkeypatch.setenv(name, value)

    def call(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    return call


def test_scheduling_policy_runs_and_the_engine_record_is_stored(
    fake_cli: FakeCli, fake_vllm_python: str, tmp_path: Path, here: Here
) -> None:
    code, listed, err = here("flags", "--json", "--search", "schedul")
    assert code == 0, err
    flags = {f["name"]: f for f in json.loads(listed)["flags"]}
    assert flags["scheduling-policy"]["choices"] == ["fcfs", "priority"]
    assert flags["async-scheduling"]["status"] == "tunable"
    text = here("flags", "--search", "schedul")[1]  # each flag with its help
    assert "--scheduling-policy (choice {fcfs,priority}; default 'fcfs')\n     " in text
    assert "(default fcfs)" in text
    knobs = here("flags", "--env")[1]
    assert "VLLM_FAKE_STEPS (int; default 4)\n     Decode steps per fake scheduler tick" in knobs
    assert "LD_LIBRARY_PATH" not in knobs  # not vLLM's own
    args = ["--repeats", "1", "--param", "scheduling-policy", "--values", "fcfs,priority"]
    args += [*WORKLOAD, "--json"]
    done = fake_cli(tmp_path, "experiment", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    runs = json.loads(here("runs", "--json")[1])
    assert sorted((r["value"], r["status"]) for r in runs) == [
        ("fcfs", "done"),
        ("priority", "done"),
    ]
    for run in runs:
        eff = run["effective_config"]
        assert eff["non_default_args"]["scheduling-policy"] == run["value"]  # the engine's record
        assert eff["sources"]["scheduling-policy"] == "'non-default args' log line"
        assert run["config_mismatch"] == []


def test_flags_shows_what_is_never_tuned_inside_a_flag(fake_vllm_python: str, here: Here) -> None:
    """Issue 41 case 10 in the listing: a class-typed flag offers only its named options, a JSON
    flag names the keys the lab refuses inside it, and a class flag is refused with the code
    reason."""
    code, listed, err = here("flags", "--json")
    assert code == 0, err
    flags = {f["name"]: f for f in json.loads(listed)["flags"]}
    backend = flags["distributed-executor-backend"]
    assert backend["status"] == "tunable"
    assert backend["choices"] == ["external_launcher", "mp", "ray", "uni"]
    assert flags["structured-outputs-config"]["code_keys"] == ["reasoning_parser_plugin"]
    for name in ("scheduler-cls", "fake-worker-hook", "fake-dump-path"):
        assert flags[name]["status"] == "refused", name
        assert "reads a file or loads code" in flags[name]["reason"], name
    text = here("flags", "--search", "structured")[1]
    assert "never tuned inside it: reasoning_parser_plugin" in text


def test_refusals_write_nothing(fake_vllm_python: str, here: Here) -> None:
    """Each refusal in this process (`here`): it comes before any work."""
    cases = {
        "trust-remote-code": (
            "false,true",
            "never tuned by the lab: it reads a file or loads code",
        ),
        "max-num-seq": ("2,4", "did you mean `max-num-seqs`?"),
        "compilation-config": ('{"mode": 3,}', "is not JSON"),
        # issue 41 case 10: code and files inside JSON values and class-typed fields
        "structured-outputs-config": (
            '{"reasoning_parser_plugin": "/tmp/evil.py"}',
            "reasoning_parser_plugin inside it is never tuned by the lab: it reads a file",
        ),
        "distributed-executor-backend": ("mp,some.module.Class", "is a class to import"),
        "scheduler-cls": ("some.module.Sched", "never tuned by the lab: it reads a file"),
    }
    for param, (values, message) in cases.items():
        args = ["--repeats", "1", "--param", param, "--values", values, *WORKLOAD]
        code, _, err = here("experiment", *args)
        assert code == 1 and message in err, (param, err)
    code, out, _ = here("runs", "--json")
    assert code == 0 and json.loads(out) == []


def test_a_comma_inside_a_text_value_is_refused_unquoted_and_one_value_quoted(
    fake_cli: FakeCli, fake_vllm_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41 case 12: `--values AWS_,HF_` for a knob whose value is a comma-separated list
    became two runs, AWS_ and HF_ (the fake records each start's VLLM_ environment)."""
    record = tmp_path / "starts.jsonl"
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(record))
    refused = fake_cli(
        tmp_path, "experiment", "--repeats", "1", "--param", KNOB, "--values", "AWS_,HF_", *WORKLOAD
    )
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stderr.count("\n") == 1 and "comma-separated list" in refused.stderr
    assert "--values '\"AWS_,HF_\"'" in refused.stderr
    assert not record.exists()
    with connect(tmp_path / "lab.db") as db:
        assert queries.list_experiments(db) == []
    done = fake_cli(
        tmp_path,
        "experiment",
        "--repeats",
        "1",
        "--param",
        KNOB,
        "--values",
        '"AWS_,HF_"',
        *WORKLOAD,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (start,) = [json.loads(x) for x in record.read_text().splitlines()]
    assert start["env"][KNOB] == "AWS_,HF_"
    with connect(tmp_path / "lab.db") as db:
        (exp,) = queries.list_experiments(db)
        (run,) = queries.list_runs(db, int(exp["id"]))
    assert exp["values"] == ["AWS_,HF_"] and run["value"] == "AWS_,HF_"
