"""Issue 40 item 1: the CLI keeps the habits users of `vllm`, `gh` and coreutils expect. The program
is named as it was run (`tuning-lab`); `--version`; no prefix matching; did-you-mean for commands,
flags and values; every flag has help and help shows defaults; internal commands hidden but
working; a closed pipe ends it quietly; exit codes per the documented table (refusals 1, usage 2);
a missing or finished experiment is a refusal, not a silent 0."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.factories import seed_clean_lab
from tuning.cli.main import build_parser, main

REPO = Path(__file__).resolve().parents[3]


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """main(argv) must end in argparse's usage error (exit 2); its stderr."""
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    return capsys.readouterr().err


@pytest.fixture
def lab(tmp_path: Path, lab_home: Path) -> Path:
    path = tmp_path / "lab.db"
    seed_clean_lab(path, values=(2, 4), repeats=2)
    return path


def _cli(*args: str, stdout: int | None = subprocess.PIPE, argv0: str | None = None, **kw: str):
    """The CLI in a subprocess from this tree; argv0 sets sys.argv[0] as a console script does."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **kw}
    if argv0 is None:
        command = [sys.executable, "-m", "tuning", *args]
    else:
        code = (
            f"import sys; sys.argv[0] = {argv0!r}; from tuning.__main__ import main; "
            "sys.exit(main())"
        )
        command = [sys.executable, "-c", code, *args]
    return subprocess.run(
        command, cwd=REPO, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120
    )


# --- the program's name ----------------------------------------------------------------------


def test_the_program_is_named_as_it_was_run() -> None:
    from tuning.cli.parser import prog_name

    assert prog_name("/home/u/.venv/bin/tuning-lab") == "tuning-lab"
    assert prog_name("/repo/tuning/__main__.py") == "python -m tuning"
    console = _cli("rnus", argv0="/home/u/.venv/bin/tuning-lab")
    assert console.returncode == 2
    assert console.stderr.startswith("usage: tuning-lab "), console.stderr
    assert "python -m tuning" not in console.stderr
    module = _cli("--help")
    assert module.returncode == 0 and module.stdout.startswith("usage: python -m tuning ")


# --- --version -------------------------------------------------------------------------------


def test_version_prints_the_lab_and_starts_nothing() -> None:
    from importlib.metadata import version

    done = _cli("--version")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first == f"tuning-lab {version('vllm-tuning-lab')}"
    assert "vLLM" in done.stdout.splitlines()[1]


def test_version_reads_vllm_from_the_engine_environment_without_running_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tuning.cli import version as cli_version

    env = tmp_path / "conda-env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("#!/bin/sh\nexit 9\n")
    meta = env / "lib" / "python3.12" / "site-packages" / "vllm-0.11.2.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.11.2\n\nbody\n")

    def no_process(*_: object, **__: object) -> None:
        raise AssertionError("--version started a process")

    monkeypatch.setattr(subprocess, "run", no_process)
    monkeypatch.setattr(subprocess, "Popen", no_process)
    monkeypatch.setattr(cli_version, "configured_python", lambda: str(env / "bin" / "python"))
    assert cli_version.installed_vllm(env / "bin" / "python") == "0.11.2"
    assert "vLLM 0.11.2 (the configured engine)" in cli_version.version_text()
    assert cli_version.installed_vllm(tmp_path / "none" / "bin" / "python") is None


# --- no prefixes, did-you-mean ---------------------------------------------------------------


def test_a_prefix_of_a_flag_is_refused_with_the_whole_flag_suggested(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _usage_error(["runs", "--exp", "1", "--db", str(lab)], capsys)
    assert "unrecognized arguments: --exp 1" in err and "did you mean '--experiment'" in err
    assert "usage: " in err and " runs " in err  # the usage of the command it was given to
    for path, parser in _parsers(build_parser()):
        assert parser.allow_abbrev is False, path or "the top level"


def test_a_mistyped_command_flag_or_value_gets_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert "invalid choice: 'rnus'; did you mean 'runs'?" in _usage_error(["rnus"], capsys)
    assert "did you mean 'status'" in _usage_error(["server", "stauts"], capsys)
    assert "did you mean '--json'?" in _usage_error(["runs", "--jsno"], capsys)
    err = _usage_error(["search", "--endpoint", "chta"], capsys)
    assert "did you mean 'chat'?" in err
    # nothing close: the choices are listed, and no hidden command is ever offered
    err = _usage_error(["zzzzzz"], capsys)
    assert "choose from" in err and "run-experiment" not in err


# --- help ------------------------------------------------------------------------------------


def test_every_flag_of_every_command_has_help() -> None:
    missing = [
        f"{path or '(top)'} {'/'.join(a.option_strings) or a.dest}"
        for path, parser in _parsers(build_parser())
        for a in parser._actions
        if not isinstance(a, argparse._SubParsersAction) and not (a.help or "").strip()
    ]
    assert missing == []


def test_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "requests kept in flight (default: 16)" in out
    assert "(default: 0)" in out  # --seed 0: a zero is a default worth saying
    assert "(default: None)" not in out and "(default: False)" not in out


def test_help_lists_each_command_once_under_its_group(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for heading in ("start here:", "measure:", "read results:", "share:", "engine and runs:"):
        assert f"\n{heading}\n" in text
    top = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    listed = [
        line.split()[0]
        for line in text.splitlines()
        if line.startswith("  ") and line[2:3].isalpha()
    ]
    assert sorted(listed) == sorted(a.dest for a in top._choices_actions)


def test_internal_commands_and_flags_are_hidden_but_work(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "run-experiment" not in top and "runs " in top and "cancel" in top
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    assert "--record" not in capsys.readouterr().out
    parsed = build_parser().parse_args(["run-experiment", "--experiment", "3", "--db", str(lab)])
    assert (parsed.command, parsed.experiment) == ("run-experiment", 3)
    parsed = build_parser().parse_args(["search", "show", "1", "--record", "7"])
    assert parsed.record == 7


# --- the output's edges ----------------------------------------------------------------------


def test_a_closed_pipe_ends_quietly(lab: Path, lab_home: Path) -> None:
    """`runs | head -1`: the reader is gone before the table is written (here: before it
    starts, so the write fails every time). No traceback, no 'Exception ignored', exit 141."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = _cli("runs", "--db", str(lab), stdout=write, TUNING_LAB_HOME=str(lab_home))
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert "Exception ignored" not in done.stderr
    assert done.returncode == 141


# --- exit codes and lookups of what does not exist -------------------------------------------


def test_lookups_of_what_does_not_exist_are_refused_with_exit_1(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from store import connect, queries

    assert main(["runs", "--experiment", "999", "--db", str(lab)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "refused: no experiment 999\n"
    assert main(["cancel", "--experiment", "999", "--db", str(lab)]) == 1
    assert capsys.readouterr().err == "refused: no experiment 999\n"
    assert main(["cancel", "--experiment", "1", "--db", str(lab)]) == 1  # it has finished
    err = capsys.readouterr().err
    assert err.startswith("refused: experiment 1 is already done") and err.count("\n") == 1
    with connect(lab, readonly=True) as db:
        assert not queries.get_experiment(db, 1).get("cancel_requested")


def test_exit_codes_refused_1_usage_2(
    lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tuning.cli.args import EXIT_CODES, refused

    assert refused("x") == 1
    assert main(["search", "show", "999", "--db", str(lab)]) == 1  # refused: no such search
    assert _usage_error(["cancel", "--db", str(lab)], capsys)  # --id missing: usage
    assert {code for code, _ in EXIT_CODES} == {0, 1, 2, 130}


def test_the_cli_reference_documents_the_exit_codes() -> None:
    from tuning.cli.args import EXIT_CODES

    page = (REPO / "docs" / "reference" / "cli.md").read_text()
    assert "## Exit codes" in page and "## `tuning-lab runs`" in page
    for code, meaning in EXIT_CODES:
        assert f"| {code} | {meaning} |" in page


# --- a run's output: progress only on a terminal, each warning once --------------------------


BROKEN_NVML = "def nvmlInit():\n    raise RuntimeError('NVML driver not loaded (test)')\n"


def test_redirected_progress_has_no_carriage_returns_and_a_warning_is_said_once(
    tmp_path: Path,
) -> None:
    """Two runs on the fake vLLM with NVML broken, stderr a pipe read as bytes (text mode would
    turn `\\r` into newlines): the bar is not drawn, and 'GPU sampling off' is said once for the
    process, not once per run."""
    from tests.fakes.engines import fake_settings_env

    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "pynvml.py").write_text(BROKEN_NVML)
    home = tmp_path / "home"
    env = {**os.environ, **fake_settings_env(home), "PYTHONPATH": f"{shadow}{os.pathsep}{REPO}"}
    args = ["experiment", "--param", "max-num-seqs", "--values", "2,4", "--repeats", "1"]
    args += ["--num-requests", "4", "--concurrency", "2", "--input-len", "8", "--output-len", "4"]
    done = subprocess.run(
        [sys.executable, "-m", "tuning", *args], cwd=REPO, env=env, capture_output=True, timeout=240
    )
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 0, err[-3000:]
    assert b"\r" not in done.stderr, err[-3000:]
    assert err.count("NVML unavailable") == 1, err[-3000:]
    forced = subprocess.run(
        [sys.executable, "-m", "tuning", *args, "--progress"],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=240,
    )
    assert forced.returncode == 0 and b"\r" in forced.stderr  # --progress draws it anyway
