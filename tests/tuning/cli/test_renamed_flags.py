"""One name per idea (issue 40): `--slo` is `--goodput` (vLLM bench's word for a request's latency
SLOs), `server start --timeout` is `--start-timeout`, `plan --report` and `bench --result-json`
are `--out` (the file a command writes), `cancel/run-experiment --id` is `--experiment` (as
`runs --experiment ID`). Each old name still works, as a hidden alias that says its new name in
one line on stderr; help shows only the new one."""

from __future__ import annotations

import argparse

import pytest

from tuning.cli.main import build_parser, main

# (the command's words, its other required arguments, old name, new name, a value, the dest)
RENAMED = [
    (["compare"], ["1", "2"], "--slo", "--goodput", "ttft:500", "goodput"),
    (["chart"], ["--out", "c.png", "1"], "--slo", "--goodput", "ttft:500", "goodput"),
    (
        ["search"],
        ["--param", "max-num-seqs", "--range", "1:8"],
        "--slo",
        "--goodput",
        "ttft:200",
        "goodput",
    ),
    (["plan"], ["--params", "max-num-seqs"], "--slo", "--goodput", "tpot:50", "goodput"),
    (["plan"], ["--params", "max-num-seqs"], "--report", "--out", "plan.html", "out"),
    (
        ["bench"],
        ["--base-url", "http://127.0.0.1:9", "--model", "m"],
        "--result-json",
        "--out",
        "r.json",
        "out",
    ),
    (["server", "start"], [], "--timeout", "--start-timeout", "42", "start_timeout"),
    (["cancel"], [], "--id", "--experiment", "3", "experiment"),
    (["run-experiment"], [], "--id", "--experiment", "3", "experiment"),
]
IDS = [f"{' '.join(words)} {old}" for words, _, old, *_ in RENAMED]


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


@pytest.mark.parametrize(("words", "rest", "old", "new", "value", "dest"), RENAMED, ids=IDS)
def test_the_old_name_still_works_and_says_the_new_one(
    words: list[str],
    rest: list[str],
    old: str,
    new: str,
    value: str,
    dest: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with_new = _parse([*words, *rest, new, value])
    assert capsys.readouterr().err == ""  # the new name: nothing said
    with_old = _parse([*words, *rest, old, value])
    assert capsys.readouterr().err == f"{old} is now {new}\n"
    assert vars(with_old) == vars(with_new)
    assert getattr(with_new, dest) not in (None, [])
    _parse([*words, *rest, f"{old}={value}"])  # the `--flag=value` form too
    assert capsys.readouterr().err == f"{old} is now {new}\n"


@pytest.mark.parametrize(("words", "rest", "old", "new", "value", "dest"), RENAMED, ids=IDS)
def test_help_shows_only_the_new_name(
    words: list[str],
    rest: list[str],
    old: str,
    new: str,
    value: str,
    dest: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as ended:
        main([*words, "--help"])
    assert ended.value.code == 0
    shown = capsys.readouterr().out
    assert new in shown
    assert old not in shown.replace(new, "")  # `--timeout` is inside `--start-timeout`


def test_an_old_name_used_twice_is_said_once(capsys: pytest.CaptureFixture[str]) -> None:
    parsed = _parse(["compare", "1", "2", "--slo", "ttft:500", "--slo", "tpot:50"])
    assert parsed.goodput == ["ttft:500", "tpot:50"]
    assert capsys.readouterr().err == "--slo is now --goodput\n"


def test_a_value_after_the_double_dash_is_left_alone() -> None:
    from tuning.cli.parser import new_names

    assert new_names(["--slo", "a", "--", "--slo"], {"--slo": "--goodput"}) == [
        "--goodput",
        "a",
        "--",
        "--slo",
    ]
