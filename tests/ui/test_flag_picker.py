"""New experiment's picker over the engine's catalog: which names it offers for a search and a
group, and which it lists as never tuned, without a browser or an engine."""

from __future__ import annotations

from tuning.engine.flags.catalog import Catalog, FlagInfo
from tuning.engine.learn import resolve
from tuning.engine.params import PARAMS
from tuning.engine.validate import parse_values
from ui.flag_picker import ALL, ENV, offers, start_index, suggested_values


def _catalog() -> Catalog:
    flags = [
        FlagInfo("async-scheduling", "async_scheduling", "bool", group="SchedulerConfig"),
        FlagInfo("max-num-seqs", "max_num_seqs", "int", group="SchedulerConfig"),
        FlagInfo("trust-remote-code", "trust_remote_code", "bool", group="ModelConfig"),
    ]
    knobs = [
        FlagInfo("VLLM_CPU_OMP_THREADS_BIND", "x", "str", group="environment", help="OpenMP cores"),
        FlagInfo("VLLM_CPU_KVCACHE_SPACE", "x", "int", group="environment", help="KV cache GiB"),
        FlagInfo("VLLM_HOST_IP", "x", "str", group="environment", help="the node's ip address"),
        FlagInfo("VLLM_USE_FASTOKENS", "x", "bool", group="environment", help="a tokenizer shim"),
    ]
    return Catalog(
        "python", "0.32.0", "p", {f.name: f for f in flags}, env={k.name: k for k in knobs}
    )


def test_environment_knobs_are_offered_in_their_own_group_only() -> None:
    catalog = _catalog()
    names, _ = offers(catalog, "cpu", "", ALL)
    assert "async-scheduling" in names and "VLLM_USE_FASTOKENS" not in names  # flags only
    assert "VLLM_CPU_KVCACHE_SPACE" in names  # the curated knob, as before
    names, refused = offers(catalog, "cpu", "", ENV)
    assert names == ["VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND", "VLLM_USE_FASTOKENS"]
    assert [n for n, _ in refused] == ["VLLM_HOST_IP"]  # the group lists its refused knobs
    names, refused = offers(catalog, "gpu", "ip address", ENV)  # found by its help
    assert names == [] and [n for n, _ in refused] == ["VLLM_HOST_IP"]
    assert "who can reach" in refused[0][1]
    names, _ = offers(catalog, "gpu", "", ENV)  # the curated CPU knob is not a GPU's
    assert "VLLM_CPU_KVCACHE_SPACE" not in names and "VLLM_USE_FASTOKENS" in names
    assert catalog.get("VLLM_HOST_IP") is catalog.env["VLLM_HOST_IP"]


def test_a_picked_flag_starts_from_values_that_fit_it() -> None:
    catalog = _catalog()
    learned = [
        FlagInfo("VLLM_CPU_OMP_THREADS_BIND", "x", "str", default="auto", group="environment"),
        FlagInfo("compilation-config", "c", "json", default="{'mode': None}"),  # vLLM's repr
        FlagInfo("long-prefill-token-threshold", "l", "int", default=0),
        FlagInfo("scheduling-policy", "s", "choice", choices=("fcfs", "priority")),
        FlagInfo(
            "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY",
            "r",
            "str",
            default="MYLIB_,OTHER_",
            help="Comma-separated *additional* prefixes of env vars to copy",
            group="environment",
        ),
    ]
    starts = {
        info.name: suggested_values(resolve(info.name, _with(catalog, learned))) for info in learned
    }
    # a text knob starts from its default, not the last flag's "2,16" (OpenMP cores 2 and 16)
    assert starts["VLLM_CPU_OMP_THREADS_BIND"] == "auto"
    assert starts["compilation-config"] == ""  # no runnable default: the user types JSON
    assert starts["long-prefill-token-threshold"] is None  # numbers typed stay
    assert starts["scheduling-policy"] == "fcfs,priority"
    # issue 41 case 12: a default that holds a comma starts quoted, as one value
    knob = "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY"
    assert starts[knob] == '"MYLIB_,OTHER_"'
    param = resolve(knob, _with(catalog, learned))
    assert parse_values(knob, str(starts[knob]), {knob: param}) == ["MYLIB_,OTHER_"]
    assert suggested_values(PARAMS["enforce-eager"]) == "false,true"
    assert suggested_values(PARAMS["max-num-seqs"]) is None


def _with(catalog: Catalog, infos: list[FlagInfo]) -> Catalog:
    flags = {**catalog.flags, **{i.name: i for i in infos if not i.name.startswith("VLLM_")}}
    env = {**catalog.env, **{i.name: i for i in infos if i.name.startswith("VLLM_")}}
    return Catalog(catalog.python, catalog.vllm_version, catalog.parser, flags, env=env)


def test_a_list_valued_flag_starts_from_its_default_list_or_empty() -> None:
    """Issue 40 item 5: a list flag's numbers typed for the last flag ("2,16") are no list; it
    starts from its own default list, which parses back as one value, or empty."""
    catalog = _catalog()
    learned = [
        FlagInfo("cudagraph-capture-sizes", "c", "int", nargs="+"),
        FlagInfo(
            "kv-cache-dtype-skip-layers", "k", "str", default=["0", "sliding_window"], nargs="+"
        ),
    ]
    empty = FlagInfo("skip-nothing", "s", "str", default=[], nargs="+")  # vLLM 0.25's default
    both = _with(catalog, [*learned, empty])
    assert suggested_values(resolve("cudagraph-capture-sizes", both)) == ""
    assert suggested_values(resolve("skip-nothing", both)) == ""  # "[]" would be refused
    layers = resolve("kv-cache-dtype-skip-layers", both)
    start = str(suggested_values(layers))
    assert start == '["0","sliding_window"]'
    assert parse_values(layers.name, start, {layers.name: layers}) == [start]
    names, refused = offers(both, "gpu", "cudagraph")
    assert names == ["cudagraph-capture-sizes"] and refused == []


def test_build_time_variables_are_refused_with_why_and_nothing_is_preselected() -> None:
    """Issue 40 item 4: an older lab cached CMAKE_BUILD_TYPE (and MAX_JOBS ...) among the knobs,
    and the group opened on it with a red error; they are refused as build-time, listed with
    the reason, and the group preselects no knob."""
    catalog = _catalog()
    build = [
        FlagInfo(n, n, "str", group="environment", help="build")
        for n in ("CMAKE_BUILD_TYPE", "MAX_JOBS", "NVCC_THREADS", "VLLM_USE_PRECOMPILED")
    ]
    env = {**catalog.env, **{i.name: i for i in build}}
    both = Catalog(catalog.python, catalog.vllm_version, catalog.parser, catalog.flags, env=env)
    names, refused = offers(both, "gpu", "", ENV)
    assert names == ["VLLM_CPU_OMP_THREADS_BIND", "VLLM_USE_FASTOKENS"]  # runtime ones only
    why = dict(refused)
    for name in ("CMAKE_BUILD_TYPE", "MAX_JOBS", "NVCC_THREADS", "VLLM_USE_PRECOMPILED"):
        assert "only when it is built" in why[name], (name, why)
    assert start_index(names, ENV) is None
    assert start_index(["a", "max-num-seqs"], ALL) == 1 and start_index(["a"], ALL) == 0
