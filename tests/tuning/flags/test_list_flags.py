"""Issue 40 item 5: a flag vLLM takes several values for (argparse nargs "+" / "*", e.g.
`--cudagraph-capture-sizes 1 2 4 8`) was refused, 8 of them in vLLM 0.25. Each value of the lab's
is now one JSON list (`--values '[1,2,4,8],[1,2,4,8,16,32]'`: the commas inside brackets do not
split), stored as its compact JSON text, launched one argv item per element, checked element by
element and by vLLM's own parser with the same argv, read back element by element, and shown in
words ("1, 2, 4, 8"). A flag whose value names code to import is refused with the code reason."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import connect, queries
from tuning.engine.effective import compare, read_effective, same
from tuning.engine.flags.catalog import FlagInfo, check_in_engine, read_catalog
from tuning.engine.flags.policy import CODE
from tuning.engine.launch import config_args
from tuning.engine.learn import flag_status, resolve
from tuning.engine.params import Param, ParamError, show_value
from tuning.engine.validate import parse_values, validate_value
from tuning.engine.value_text import join_values, split_values, value_words

from .test_learn import _spec, prepare, typed

SIZES = Param(
    name="cudagraph-capture-sizes",
    type="list",
    item="int",
    nargs="+",
    help="Sizes to capture cudagraph.",
    flag="--cudagraph-capture-sizes",
    negatable=False,
    source="learned",
)
LEARNED = {SIZES.name: SIZES}
CODE_REASON = f"never tuned by the lab: {CODE}"


def _info(name: str, kind: str, nargs: str | None, **more: object) -> FlagInfo:
    return FlagInfo.from_dict({"name": name, "kind": kind, "nargs": nargs, **more})


def test_a_list_of_values_keeps_each_list_whole_and_exact() -> None:
    values = parse_values(SIZES.name, "[1,2,4,8],[1, 2, 4, 8, 16, 32]", LEARNED)
    assert values == ["[1,2,4,8]", "[1,2,4,8,16,32]"]  # the stored text: compact JSON
    assert split_values(join_values(values)) == values  # a command line gives them back
    assert parse_values(SIZES.name, values, LEARNED) == values  # as the runner reads them again
    assert validate_value(SIZES.name, [8, 4, 4], LEARNED) == "[8,4,4]"  # order kept, as given
    argv, env = config_args({SIZES.name: values[1]}, LEARNED)
    assert argv == ["--cudagraph-capture-sizes", "1", "2", "4", "8", "16", "32"] and env == {}
    assert show_value(SIZES.name, values[0], LEARNED) == "1, 2, 4, 8"
    assert value_words("[1,2,4,8,16,32]") == "1, 2, 4, 8, 16, 32"  # without the parameter too
    assert value_words("2") == "2" and value_words('{"mode":3}') == '{"mode":3}'
    assert "a list of whole numbers" in SIZES.describe_range()


@pytest.mark.parametrize(
    ("typed_values", "why"),
    [
        ("1,2,4,8", "write each in brackets, as [1,2,4,8] for one value"),
        ("1 2 4 8", "--values '[1,2,4,8]'"),
        ("[1,2],4", "'4' is not in brackets"),
        ("[1,2],[1, 2]", "[1, 2] is given twice"),
        ("[]", "an empty list; give at least one item"),
        ('[1,"x"]', "'x' is not a valid int"),
        ("[1.5]", "1.5 is not a valid int"),
        ("[[1],[2]]", "[1] inside '[[1],[2]]' is not one plain value"),
        ("[1,null]", "null inside"),
        ("[1,2", "not a JSON list"),
        (f"[{','.join(['1'] * 1025)}]", "at most 1024"),
    ],
)
def test_a_malformed_list_is_refused_in_one_line(typed_values: str, why: str) -> None:
    with pytest.raises(ParamError) as err:
        parse_values(SIZES.name, typed_values, LEARNED)
    message = str(err.value)
    assert message.startswith("cudagraph-capture-sizes") and why in message, message
    assert "\n" not in message


def test_text_elements_are_held_to_the_text_rules() -> None:
    layers = Param(
        name="kv-cache-dtype-skip-layers",
        type="list",
        item="text",
        nargs="+",
        help="",
        flag="--kv-cache-dtype-skip-layers",
        source="learned",
    )
    table = {layers.name: layers}
    assert validate_value(layers.name, '[0,"sliding_window"]', table) == '["0","sliding_window"]'
    argv, _ = config_args({layers.name: '["0","sliding_window"]'}, table)
    assert argv == ["--kv-cache-dtype-skip-layers", "0", "sliding_window"]
    for smuggled in ('["--host"]', '["a b"]', '["a\\nb"]', '[""]'):
        with pytest.raises(ParamError):
            validate_value(layers.name, smuggled, table)
    empty_ok = Param(**{**layers.to_dict(), "nargs": "*", "backends": ["cpu", "gpu"]})
    assert validate_value(layers.name, "[]", {layers.name: empty_ok}) == "[]"
    assert config_args({layers.name: "[]"}, {layers.name: empty_ok})[0] == [layers.flag]
    assert value_words("[]") == "an empty list"


def test_the_engines_record_is_compared_element_by_element() -> None:
    assert same(SIZES, "[1,2,4,8]", [1, 2, 4, 8])  # non-default args: a Python list
    assert same(SIZES, "[1,2,4,8]", "[1, 2, 4, 8]")  # or its repr
    assert not same(SIZES, "[1,2,4,8]", [1, 2, 4])
    assert not same(SIZES, "[1,2,4,8]", [1, 2, 8, 4])
    assert not same(SIZES, "[1,2,4,8]", 8)


def test_list_flags_of_the_engine_are_tunable_with_their_element_type(
    fake_vllm_python: str,
) -> None:
    catalog = read_catalog(fake_vllm_python)
    info = catalog.flags["cudagraph-capture-sizes"]
    assert flag_status(info) == ("tunable", None)
    param = resolve("cudagraph-capture-sizes", catalog)
    assert (param.type, param.item, param.nargs) == ("list", "int", "+")
    assert param.to_dict()["item"] == "int" and Param.from_dict(param.to_dict()) == param
    # what is still not launched says why in the user's words, never argparse's
    for nargs, words in (("?", "may be left out"), ("2", "exactly 2 values")):
        status, why = flag_status(_info("odd-flag", "int", nargs))
        assert status == "refused" and why is not None and words in why and "nargs" not in why
    status, why = flag_status(_info("many-switches", "bool", "+"))
    assert status == "refused" and "list of true/false values" in str(why)
    # the policy by name holds for a list flag too (a list of plugins names code)
    assert flag_status(_info("logits-processors", "str", "+")) == ("refused", CODE)
    assert flag_status(_info("fake-extra-plugins", "str", "+")) == ("refused", CODE)


def test_vllms_own_parser_checks_each_list_as_one_argv_item_per_element(
    fake_vllm_python: str,
) -> None:
    good, bad = check_in_engine(
        fake_vllm_python,
        [("--cudagraph-capture-sizes", ["1", "2", "4"]), ("--cudagraph-capture-sizes", ["1", "x"])],
    )
    assert good.ok and good.parsed == "[1, 2, 4]", good
    assert not bad.ok and "invalid int value: 'x'" in str(bad.error), bad


def test_an_experiment_of_lists_is_built_checked_and_launched(
    fake_vllm_python: str, tmp_path: Path
) -> None:
    exp = prepare(
        tmp_path / "lab.db",
        _spec(fake_vllm_python),
        "cudagraph-capture-sizes",
        "[1,2,4,8],[1,2,4,8,16,32]",
        {},
    )
    assert typed(exp) == ("cudagraph-capture-sizes", ["[1,2,4,8]", "[1,2,4,8,16,32]"])
    assert exp.name == "cudagraph-capture-sizes = 1, 2, 4, 8; 1, 2, 4, 8, 16, 32"
    assert exp.row().values == ("[1,2,4,8]", "[1,2,4,8,16,32]")
    assert exp.engine is not None
    launch = exp.engine.launch({"cudagraph-capture-sizes": exp.values[0]})
    assert launch.argv[-5:] == ["--cudagraph-capture-sizes", "1", "2", "4", "8"]
    with pytest.raises(ParamError, match="takes a list for each value"):
        prepare(tmp_path / "lab.db", _spec(fake_vllm_python), "cudagraph-capture-sizes", "1,2", {})
    assert sys.executable


def test_a_dotted_path_for_a_class_typed_flag_is_refused_with_the_code_reason(
    fake_vllm_python: str, tmp_path: Path
) -> None:
    """`distributed-executor-backend some.module.Class` said "is not one of ..." where every other
    flag that names code says the code reason; its named options stay tunable."""
    db = tmp_path / "lab.db"
    for value in ("some.module.Class", "pkg.mod:Executor"):
        with pytest.raises(ParamError) as err:
            prepare(db, _spec(fake_vllm_python), "distributed-executor-backend", f"mp,{value}", {})
        assert str(err.value).endswith(CODE_REASON), err.value
        assert "external_launcher, mp, ray, uni" in str(err.value)
    for name in ("scheduler-cls", "reasoning-parser-plugin", "fake-worker-hook"):
        with pytest.raises(ParamError) as err:
            prepare(db, _spec(fake_vllm_python), name, "some.module.Class", {})
        assert str(err.value) == f"{name}: {CODE_REASON}", err.value
    with pytest.raises(ParamError, match="'mpp' is not one of external_launcher, mp"):
        prepare(db, _spec(fake_vllm_python), "distributed-executor-backend", "mp,mpp", {})
    exp = prepare(db, _spec(fake_vllm_python), "distributed-executor-backend", "mp,uni", {})
    assert typed(exp) == ("distributed-executor-backend", ["mp", "uni"])


WORKLOAD = ["--num-requests", "2", "--concurrency", "1", "--input-len", "8", "--output-len", "2"]
WORKLOAD += ["--num-warmups", "0", "--start-timeout", "240"]


def test_two_lists_run_end_to_end_on_the_fake_vllm(
    fake_cli: Callable[..., CompletedProcess[str]],
    fake_vllm_python: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each server got `--cudagraph-capture-sizes 1 2 4 8` (one argv item per element, as vLLM's
    parser wants for nargs +), each run stores its list exactly, the engine's record of it is
    compared element by element (no mismatch), and the CLI shows it in words."""
    listed = fake_cli(tmp_path, "flags", "--search", "cudagraph")
    assert "--cudagraph-capture-sizes (a list of int, each value in brackets;" in listed.stdout
    assert "nargs" not in listed.stdout and "never tuned:" not in listed.stdout, listed.stdout
    (row,) = json.loads(fake_cli(tmp_path, "flags", "--json", "--search", "cudagraph").stdout)[
        "flags"
    ]
    assert (row["status"], row["type"], row["nargs"]) == ("tunable", "int", "+")
    record = tmp_path / "starts.jsonl"
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(record))
    args = ["--param", "cudagraph-capture-sizes", "--values", "[1,2,4,8],[1,2,4,8,16,32]"]
    done = fake_cli(tmp_path, "experiment", "--repeats", "1", *args, *WORKLOAD, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    launched = []
    for line in record.read_text().splitlines():
        start = json.loads(line)
        argv = [str(a) for a in start["argv"]]
        at = argv.index("--cudagraph-capture-sizes") + 1
        end = next((i for i in range(at, len(argv)) if argv[i].startswith("--")), len(argv))
        launched.append(argv[at:end])
        assert start["flags"]["cudagraph_capture_sizes"] == [int(a) for a in argv[at:end]]
    assert sorted(launched, key=len) == [["1", "2", "4", "8"], ["1", "2", "4", "8", "16", "32"]]
    with connect(tmp_path / "lab.db") as db:
        (exp,) = queries.list_experiments(db)
        runs = queries.list_runs(db, int(exp["id"]))
    assert exp["values"] == ["[1,2,4,8]", "[1,2,4,8,16,32]"]  # stored exactly, two values
    assert exp["name"] == "cudagraph-capture-sizes = 1, 2, 4, 8; 1, 2, 4, 8, 16, 32"
    assert sorted((r["value"], r["status"]) for r in runs) == [
        ("[1,2,4,8,16,32]", "done"),
        ("[1,2,4,8]", "done"),
    ]
    for run in runs:
        eff = run["effective_config"]
        assert (
            json.dumps(eff["non_default_args"]["cudagraph-capture-sizes"]).replace(" ", "")
            == (run["value"])
        )
        assert run["config_mismatch"] == [], run["config_mismatch"]
    table = fake_cli(tmp_path, "runs").stdout
    assert "1, 2, 4, 8, 16, 32" in table and "[1,2" not in table, table


def test_a_list_is_read_back_from_a_non_default_args_line_that_is_no_literal() -> None:
    """vLLM's line may hold a config object's repr (no Python literal): the simple items are then
    taken one by one, and a flat list is one of them (it was lost: "did not receive it")."""
    line = (
        "(APIServer pid=4242) INFO 12-05 09:40:00 [api_utils.py:273] non-default args: "
        "{'model': 'x', 'scheduler_cls': <class 'Sched'>, 'cudagraph_capture_sizes': [1, 2, 4, 8]}"
    )
    eff = read_effective(line, None, LEARNED)
    assert eff.non_default_args == {"cudagraph-capture-sizes": [1, 2, 4, 8]}
    assert compare({SIZES.name: "[1,2,4,8]"}, eff, "gpu", LEARNED) == ([], [])
    (wrong,), _ = compare({SIZES.name: "[1,2,4]"}, eff, "gpu", LEARNED)
    assert "asked [1,2,4], the engine ran with [1, 2, 4, 8]" in wrong.reason, wrong.reason
