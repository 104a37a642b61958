"""Reading an engine's flags from its own parser in its own interpreter; checking values by it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tuning.engine.flags.catalog import (
    Catalog,
    CatalogError,
    check_in_engine,
    engine_python,
    read_catalog,
)


def test_every_flag_with_its_kind_default_help_and_group(fake_vllm_python: str) -> None:
    catalog = read_catalog(fake_vllm_python)
    assert catalog.vllm_version == "0.32.0+fake"
    assert catalog.parser.endswith("make_arg_parser")
    kinds = {name: f.kind for name, f in catalog.flags.items()}
    assert kinds["async-scheduling"] == "bool" and kinds["disable-log-stats"] == "switch"
    assert kinds["scheduling-policy"] == "choice" and kinds["max-num-seqs"] == "int"
    assert kinds["compilation-config"] == "json"
    policy = catalog.flags["scheduling-policy"]
    assert policy.choices == ("fcfs", "priority") and policy.default == "fcfs"
    assert policy.group == "SchedulerConfig" and "(default fcfs)" in policy.help
    assert catalog.flags["cudagraph-capture-sizes"].nargs == "+"
    assert catalog.get("max_num_seqs") is catalog.flags["max-num-seqs"]  # by dest too
    assert [f.name for f in catalog.search("prefill")] == ["long-prefill-token-threshold"]
    assert Catalog.from_dict(catalog.to_dict()) == catalog


def test_values_checked_by_the_engines_own_types_and_models(fake_vllm_python: str) -> None:
    checked = check_in_engine(
        fake_vllm_python,
        [
            ("--max-num-seqs", "abc"),
            ("--scheduling-policy", "priority"),
            ("--compilation-config", '{"mode": 3}'),
            ("--compilation-config", '{"no_such_field": 1}'),
            ("--async-scheduling", None),
        ],
    )
    assert [c.ok for c in checked] == [False, True, True, False, True]
    assert "invalid int value: 'abc'" in str(checked[0].error)
    assert "no_such_field" in str(checked[3].error)
    assert checked[1].parsed == "priority" and checked[4].parsed is True


def test_an_engine_that_cannot_be_read_says_why(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="no interpreter"):
        read_catalog(str(tmp_path / "nope" / "python"))
    # This interpreter has no vllm: the probe's own error, in one line.
    env_path = os.environ.pop("PYTHONPATH", None)
    try:
        with pytest.raises(CatalogError, match="No module named 'vllm'"):
            read_catalog(os.sys.executable)  # type: ignore[attr-defined]
    finally:
        if env_path is not None:
            os.environ["PYTHONPATH"] = env_path


def test_the_interpreter_behind_a_vllm_script(tmp_path: Path) -> None:
    script = tmp_path / "vllm"
    script.write_text("#!/opt/venv/bin/python3.12\nimport sys\n")
    assert engine_python([str(script), "serve"]) == "/opt/venv/bin/python3.12"
    script.write_text("#!/usr/bin/env python3\n")
    assert engine_python([str(script)]) == "python3"
    assert engine_python(["/x/bin/python", "-m", "vllm"]) == "/x/bin/python"
    (tmp_path / "bin").write_bytes(b"\x7fELF")
    with pytest.raises(CatalogError, match="not a Python script"):
        engine_python([str(tmp_path / "bin")])


def test_vllms_own_knobs_only_with_their_help_and_choices(fake_vllm_python: str) -> None:
    env = read_catalog(fake_vllm_python).env
    # the table also reads the system's and other libraries' variables: not vLLM's to tune
    assert "LD_LIBRARY_PATH" not in env and "S3_SECRET_ACCESS_KEY" not in env
    assert all(name.startswith("VLLM_") for name in env) and "VLLM_FAKE_STEPS" in env
    # vLLM documents a knob in the comment lines above it (a banner is no help)
    assert env["VLLM_HOST_IP"].help == (
        "used in distributed environment to determine the ip address of the current node"
    )
    assert env["VLLM_FAKE_STEPS"].help == "Decode steps per fake scheduler tick"
    assert env["VLLM_FAKE_ASYNC"].help == ""  # the comment after VLLM_FAKE_SPLIT is no header
    method = env["VLLM_WORKER_MULTIPROC_METHOD"]
    assert method.kind == "choice" and method.choices == ("spawn", "fork")
    assert method.default == "fork"
    # searched by help as flags are: a knob is found by what it does, not only by its name
    found = read_catalog(fake_vllm_python).search("openmp", env=True)
    assert [k.name for k in found] == ["VLLM_CPU_OMP_THREADS_BIND"]


def test_the_engines_config_classes_say_which_flags_and_keys_name_code(
    fake_vllm_python: str,
) -> None:
    """Issue 41 case 10: read from the fake's vllm.config as from vLLM's own (a flag's group is its
    class, its dest the field): a class-typed field, its named options, and the keys of a JSON
    value typed or documented as code or a file, nested ones too."""
    flags = read_catalog(fake_vllm_python).flags
    assert flags["scheduler-cls"].names_code and flags["scheduler-cls"].options == ()
    assert flags["fake-worker-hook"].names_code  # by its type alone
    backend = flags["distributed-executor-backend"]
    assert backend.names_code and backend.options == ("external_launcher", "mp", "ray", "uni")
    assert flags["structured-outputs-config"].code_keys == ("reasoning_parser_plugin",)
    assert flags["compilation-config"].code_keys == (
        "backend",  # documented as "a qualified name ... to import"
        "debug_dump_path",  # a Path
        "pass_config.post_pass",  # a Callable, one level down
    )
    for plain in ("max-num-seqs", "scheduling-policy", "reasoning-parser", "max-lora-cls-labels"):
        assert not flags[plain].names_code and flags[plain].code_keys == (), plain
