"""Issue 41 case 10 (and issue 40's "every flag that names code to import refused with the same
reason"): the flag policy by the words of a name, and inside a JSON value at any depth.

`structured-outputs-config {"reasoning_parser_plugin": ...}` got through while
`--reasoning-parser-plugin` was refused; `ec-transfer-config` with a module path while
`kv-transfer-config` was refused; `scheduler-cls`, dump and save paths were tunable."""

from __future__ import annotations

import pytest

from tuning.engine.flags.policy import (
    CODE,
    REACH,
    SECRET,
    WHAT,
    flag_refusal,
    json_refusal,
    key_refusal,
    refusal,
)


@pytest.mark.parametrize(
    ("name", "kind", "why"),
    [
        ("scheduler-cls", "str", CODE),  # a class to import
        ("io-processor-plugin", "str", CODE),
        ("model-class-overrides", "json", CODE),
        ("mm-encoder-fp8-scale-save-path", "str", CODE),  # a file it writes
        ("ec-transfer-config", "json", REACH),  # as kv-transfer-config
        ("master-addr", "str", REACH),
        # tomorrow's flags, by the words of their names
        ("some-new-loader-cls", "str", CODE),
        ("trace-dump-dir", "str", CODE),
        ("profile-output-file", "str", CODE),
        ("data-parallel-supervisor-port", "int", REACH),  # a port is a number
        ("hub-auth", "str", SECRET),
        ("registry-token", "str", SECRET),
    ],
)
def test_flags_that_name_code_files_or_the_network_are_refused(
    name: str, kind: str, why: str
) -> None:
    assert flag_refusal(name, kind) == why


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("max-lora-cls-labels", "int"),  # counts labels: a number names no class
        ("data-parallel-multi-port-external-lb", "switch"),  # true/false names nothing
        ("compile-cache-save-format", "choice"),  # fixed choices name no file
        ("max-num-batched-tokens", "int"),  # tokens, not a token
        ("reasoning-parser", "str"),
        ("kv-offloading-backend", "str"),
    ],
)
def test_a_flag_whose_name_only_looks_alike_stays_tunable(name: str, kind: str) -> None:
    assert flag_refusal(name, kind) is None


def test_a_json_key_is_held_to_the_policy_of_the_flag_it_names_and_to_its_words() -> None:
    plugin = {"backend": "xgrammar", "reasoning_parser_plugin": "/tmp/evil.py"}
    assert json_refusal(plugin) == ("reasoning_parser_plugin", CODE)
    assert refusal("reasoning-parser-plugin") == CODE  # the same reason as the flag's own
    assert json_refusal({"ec_connector_module_path": "evil.mod"}) == (
        "ec_connector_module_path",
        CODE,
    )
    assert json_refusal({"trust_remote_code": True}) == ("trust_remote_code", CODE)
    assert json_refusal({"method": "eagle", "model": "evil-org/draft"}) == ("model", WHAT)
    assert json_refusal({"kv_port": 14579}) == ("kv_port", REACH)
    # at any depth, in lists too, named by its dotted path
    deep = {"pass_config": {"fuse": True, "stages": [{"n": 1}, {"dump_dir": "/tmp/x"}]}}
    assert json_refusal(deep) == ("pass_config.stages.dump_dir", CODE)
    # a switch, a null or a count names nothing
    fine = {"eager_host_mirror": True, "cache_dir": None, "max_lora_cls_labels": 3, "mode": 3}
    assert json_refusal(fine) is None
    assert key_refusal("cudagraph_capture_sizes", [1, 2, 4]) is None


def test_keys_the_engine_names_as_code_are_refused_whatever_their_names() -> None:
    """CompilationConfig.backend takes "a qualified name ... to import": nothing in its name says
    so, the engine's config class does (tuning.engine.flags.engine_probe reads it)."""
    value = {"mode": 3, "backend": "evil.module.fn", "pass_config": {"post_pass": "m.f"}}
    assert json_refusal(value) is None
    assert json_refusal(value, ["backend"]) == ("backend", CODE)
    assert json_refusal({"pass_config": {"post_pass": "m.f"}}, ["pass_config.post_pass"]) == (
        "pass_config.post_pass",
        CODE,
    )
    assert json_refusal({"backend": None}, ["backend"]) is None  # unset: nothing loaded


def test_a_deep_value_is_walked_without_recursion() -> None:
    value: dict[str, object] = {"leaf": {"plugin_path": "/x"}}
    for _ in range(5000):
        value = {"n": value}
    found = json_refusal(value)
    assert found is not None and found[0].endswith("leaf.plugin_path") and found[1] == CODE
