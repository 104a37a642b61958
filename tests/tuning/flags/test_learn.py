"""Any flag of the user's vLLM, from the name typed to the argv: refused with a reason, a typo
answered with a suggestion, values checked by the engine's parser, cached per engine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from store import connect
from tuning.engine.flags import catalog as catalog_mod
from tuning.engine.flags.policy import CODE, DENIED, refusal
from tuning.engine.learn import catalog_for, resolve
from tuning.engine.params import ParamError, suggest
from tuning.engine.spec import EngineSpec
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

WL = Workload(num_requests=4, concurrency=1, input_len=4, output_len=4)


def _spec(python: str) -> EngineSpec:
    return EngineSpec(
        name="custom",
        command=[python, "-m", "vllm.entrypoints.openai.api_server"],
        model="org/model",
        served_model_name="m",
        backend="gpu",
        vllm_version="0.32.0+fake",
    )


def prepare(
    db: Path, engine: EngineSpec, param: str, values: str, base: dict[str, str]
) -> ExperimentSpec:
    """The experiment these choices make, checked by the engine's own parser as the CLI does."""
    spec = ExperimentSpec.build(
        param=param, values=values, workload=WL, engine=engine, base_config=base, db_path=db
    )
    spec.check_with_engine()
    return spec


def typed(spec: ExperimentSpec) -> tuple[str, list[object]]:
    return spec.param.name, list(spec.values)


def test_what_must_never_be_tuned_says_why() -> None:
    for name in ("trust-remote-code", "host", "api-key", "model", "chat-template", "ssl-keyfile"):
        assert refusal(name), name
    assert "loads code" in str(refusal("--trust_remote_code"))
    assert refusal("max-num-seqs") is None and refusal("async-scheduling") is None
    assert all(why.strip() for why in DENIED.values())


def test_an_environment_knob_is_refused_by_the_words_of_its_name() -> None:
    # counts of tokens and a tokenizer's name are no auth tokens (all were refused "who can reach")
    for name in (
        "VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD",
        "VLLM_MAX_BAD_WORDS_TOTAL_TOKENS",
        "VLLM_MAX_TOKENS_PER_EXPERT_FP4_MOE",
        "VLLM_USE_FASTOKENS",
        "VLLM_CPU_OMP_THREADS_BIND",
        "VLLM_FLOAT32_MATMUL_PRECISION",
    ):
        assert refusal(name) is None, name
    reasons = {
        "VLLM_HOST_IP": "who can reach",
        "VLLM_DP_MASTER_IP": "who can reach",  # were tunable
        "VLLM_LOOPBACK_IP": "who can reach",
        "VLLM_API_KEY": "who can reach",
        "VLLM_SOME_HUB_TOKEN": "holds a secret",  # a secret ends in _TOKEN
        "VLLM_S3_SECRET_ACCESS_KEY": "holds a secret",
        "VLLM_TUNED_CONFIG_FOLDER": "reads a file",
        "VLLM_PLUGINS": "reads a file",
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "reads a file",
        "VLLM_LOGGING_LEVEL": "the lab reads vLLM's log",  # would hide what each run applied
        "VLLM_CONFIGURE_LOGGING": "the lab reads vLLM's log",
        "VLLM_NO_USAGE_STATS": "usage reporting off",
        "VLLM_USE_PRECOMPILED": "only when it is built",
        "VLLM_BUILD_URL": "only when it is built",
        "VLLM_TEST_FORCE_LOAD_FORMAT": "the lab sets it",
    }
    for name, why in reasons.items():
        assert why in str(refusal(name)), (name, refusal(name))


def test_a_typo_gets_did_you_mean() -> None:
    assert (
        suggest("max-num-seq", ["max-num-seqs", "max-model-len"])
        == " (did you mean `max-num-seqs`?)"
    )
    assert suggest("zzz", ["max-num-seqs"]) == ""


def test_refused_and_unknown_flags_before_anything_starts(
    fake_vllm_python: str, tmp_path: Path
) -> None:
    db = tmp_path / "lab.db"
    spec = _spec(fake_vllm_python)
    with pytest.raises(ParamError, match="trust-remote-code: never tuned by the lab: it reads"):
        prepare(db, spec, "trust-remote-code", "false,true", {})
    with pytest.raises(ParamError, match="did you mean `max-num-seqs`"):
        prepare(db, spec, "max-num-seq", "2,4", {})
    with pytest.raises(ParamError, match="takes a list for each value: write each in brackets"):
        prepare(db, spec, "cudagraph-capture-sizes", "1,2", {})  # issue 40: lists, in brackets
    with pytest.raises(ParamError, match="is not JSON"):
        prepare(db, spec, "compilation-config", "{bad", {})
    with pytest.raises(ParamError, match="refused by vLLM's own parser: .*no_such_field"):
        prepare(db, spec, "compilation-config", '{"mode": 3},{"no_such_field": 1}', {})
    with pytest.raises(ParamError, match="'lottery' is not one of fcfs, priority"):
        prepare(db, spec, "scheduling-policy", "fcfs,lottery", {})
    with pytest.raises(ParamError, match="host: never tuned"):
        prepare(db, spec, "async-scheduling", "false,true", {"host": "0.0.0.0"})


def test_a_learned_flag_is_planned_launched_and_kept_with_the_engine(
    fake_vllm_python: str, tmp_path: Path
) -> None:
    exp = prepare(
        tmp_path / "lab.db", _spec(fake_vllm_python), "compilation-config",
        '{"mode": 3},{"mode": 0}', {}
    )  # fmt: skip
    name, values = typed(exp)
    assert (name, values) == ("compilation-config", ['{"mode":3}', '{"mode":0}'])
    assert exp.engine is not None and exp.engine.learned["compilation-config"]["type"] == "json"
    stored = EngineSpec(**exp.engine.to_json())  # as the runner rebuilds it from the experiment row
    launch = stored.launch({"compilation-config": values[0], "max-num-seqs": 8})
    assert launch.argv[-4:] == ["--compilation-config", '{"mode":3}', "--max-num-seqs", "8"]
    assert set(launch.learned) == {"compilation-config"}
    with pytest.raises(ParamError, match="unknown parameter 'async-scheduling'"):
        stored.launch({"async-scheduling": True})  # not learned for this experiment


def test_async_scheduling_and_a_switch_reach_the_argv(
    fake_vllm_python: str, tmp_path: Path
) -> None:
    exp = prepare(
        tmp_path / "lab.db",
        _spec(fake_vllm_python),
        "async-scheduling",
        "false,true",
        {"enable-log-outputs": "false"},
    )
    assert exp.engine is not None
    spec = exp.engine
    off = spec.launch({"async-scheduling": False, "enable-log-outputs": False}).argv
    on = spec.launch({"async-scheduling": True, "enable-log-outputs": True}).argv
    assert "--no-async-scheduling" in off and "--enable-log-outputs" not in off
    assert "--async-scheduling" in on and "--enable-log-outputs" in on
    with pytest.raises(ParamError, match="unknown parameter 'scheduling-policy'"):
        spec.launch({"scheduling-policy": "priority"})  # not learned for this experiment


def test_the_catalog_is_read_once_per_engine_version(
    fake_vllm_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    real = catalog_mod.read_catalog

    def counting(python: str, timeout: float = 300.0) -> catalog_mod.Catalog:
        reads.append(python)
        return real(python, timeout)

    monkeypatch.setattr("tuning.engine.learn.read_catalog", counting)
    db = tmp_path / "lab.db"
    first = catalog_for(db, _spec(fake_vllm_python))
    again = catalog_for(db, _spec(fake_vllm_python))
    assert reads == [fake_vllm_python] and again.flags == first.flags
    newer = _spec(fake_vllm_python)
    newer.vllm_version = "0.33.0"
    catalog_for(db, newer)
    catalog_for(db, _spec(fake_vllm_python), refresh=True)
    assert len(reads) == 3
    with connect(db) as conn:  # a catalog cached by an older lab (no format): read again
        conn.execute("UPDATE engine_flags SET catalog_json = json_remove(catalog_json, '$.format')")
        conn.conn.commit()
    catalog_for(db, _spec(fake_vllm_python))
    assert len(reads) == 4


def test_curated_names_never_read_the_engine(tmp_path: Path) -> None:
    spec = _spec(str(tmp_path / "no-such-python"))  # reading it would fail
    exp = prepare(tmp_path / "lab.db", spec, "max-num-seqs", "2, 4", {"block-size": "32"})
    assert typed(exp) == ("max-num-seqs", [2, 4])
    assert exp.engine is not None and exp.engine.learned == {} and spec.learned == {}
    assert resolve("max_num_seqs", None).name == "max-num-seqs"
    assert sys.executable  # the fast tier's own interpreter stays the lab's


def test_an_environment_knob_is_tuned_when_named_and_checked_by_vllms_reader(
    fake_vllm_python: str, tmp_path: Path
) -> None:
    db = tmp_path / "lab.db"
    spec = _spec(fake_vllm_python)
    exp = prepare(db, spec, "VLLM_FAKE_STEPS", "4,8", {})
    assert typed(exp) == ("VLLM_FAKE_STEPS", [4, 8]) and exp.engine is not None
    assert spec.learned == {}  # what was learned is on the experiment's engine, not the argument
    launch = exp.engine.launch({"VLLM_FAKE_STEPS": 8})
    assert launch.env["VLLM_FAKE_STEPS"] == "8" and "--VLLM_FAKE_STEPS" not in " ".join(launch.argv)
    with pytest.raises(ParamError, match="is not a valid int"):
        prepare(db, _spec(fake_vllm_python), "VLLM_FAKE_STEPS", "4,many", {})
    spec_text = prepare(db, _spec(fake_vllm_python), "VLLM_CPU_OMP_THREADS_BIND", "auto,all", {})
    assert spec_text.engine is not None
    assert (
        spec_text.engine.launch({"VLLM_CPU_OMP_THREADS_BIND": "all"}).env[
            "VLLM_CPU_OMP_THREADS_BIND"
        ]
        == "all"
    )
    with pytest.raises(ParamError, match="VLLM_FAKE_SPLIT: refused by vLLM's own reader of it: Va"):
        prepare(db, _spec(fake_vllm_python), "VLLM_FAKE_SPLIT", "2,abc", {})  # typed only by vLLM
    # a knob with fixed choices (vLLM's env_with_choices) is a choice: the lab checks it first
    method = "VLLM_WORKER_MULTIPROC_METHOD"
    assert typed(prepare(db, _spec(fake_vllm_python), method, "spawn,fork", {})) == (
        method,
        ["spawn", "fork"],
    )
    with pytest.raises(ParamError, match="forkserver"):
        prepare(db, _spec(fake_vllm_python), method, "fork,forkserver", {})
    with pytest.raises(ParamError, match="VLLM_HOST_IP: never tuned by the lab: it changes who"):
        prepare(db, _spec(fake_vllm_python), "VLLM_HOST_IP", "1.2.3.4", {})
    with pytest.raises(ParamError, match="did you mean `VLLM_FAKE_STEPS`"):
        prepare(db, _spec(fake_vllm_python), "VLLM_FAKE_STEP", "4", {})


CODE_REASON = f"never tuned by the lab: {CODE}"


def test_code_and_files_are_refused_inside_json_values_and_class_fields(
    fake_vllm_python: str, tmp_path: Path
) -> None:
    """Issue 41 case 10: `structured-outputs-config {"reasoning_parser_plugin": ...}` got through
    while `--reasoning-parser-plugin` was refused; `distributed-executor-backend some.module.Class`,
    `scheduler-cls` and dump paths were tunable. Each is refused with the flag policy's reason,
    before anything starts; what is left of each flag stays tunable."""
    db = tmp_path / "lab.db"

    def refused(param: str, values: str, base: dict[str, str] | None = None) -> str:
        with pytest.raises(ParamError) as err:
            prepare(db, _spec(fake_vllm_python), param, values, base or {})
        return str(err.value)

    plugin = '{"reasoning_parser_plugin": "/tmp/evil.py"}'
    assert refused("structured-outputs-config", f'{{"backend": "auto"}},{plugin}') == (
        "structured-outputs-config: reasoning_parser_plugin inside it is " + CODE_REASON
    )
    assert refused("reasoning-parser-plugin", "/tmp/evil.py").endswith(CODE_REASON)  # as ever
    # the same in the baseline (--set), and for keys only the engine's config classes name
    assert CODE_REASON in refused("max-num-seqs", "2,4", {"structured-outputs-config": plugin})
    for value, key in (
        ('{"debug_dump_path": "/tmp/dump"}', "debug_dump_path"),
        ('{"backend": "evil.module.compile"}', "backend"),
        ('{"pass_config": {"post_pass": "evil.module.fn"}}', "pass_config.post_pass"),
    ):
        message = refused("compilation-config", value)
        assert message == f"compilation-config: {key} inside it is {CODE_REASON}", message
    # a value that is a class to import; a flag whose name or type says it takes one
    message = refused("distributed-executor-backend", "mp,some.module.Class")
    assert "'some.module.Class' is a class to import" in message
    assert "external_launcher, mp, ray, uni" in message
    assert message.endswith(CODE_REASON)  # issue 40: the reason every code flag gives
    assert refused("scheduler-cls", "some.module.Sched").endswith(CODE_REASON)
    assert refused("fake-worker-hook", "some.module.Hook").endswith(CODE_REASON)  # by its type
    assert refused("fake-dump-path", "/tmp/x").endswith(CODE_REASON)  # by its name
    assert refused("ec-transfer-config", '{"ec_connector_module_path": "evil"}').endswith(
        "it changes who can reach the server (the lab binds it to 127.0.0.1 itself)"
    )
    # what is left stays tunable, checked by vLLM's own parser as before
    exp = prepare(db, _spec(fake_vllm_python), "distributed-executor-backend", "mp,uni", {})
    assert typed(exp) == ("distributed-executor-backend", ["mp", "uni"])
    assert exp.engine is not None
    assert exp.engine.launch({"distributed-executor-backend": "uni"}).argv[-2:] == [
        "--distributed-executor-backend",
        "uni",
    ]
    assert typed(prepare(db, _spec(fake_vllm_python), "structured-outputs-config",
                         '{"backend": "auto"}', {}))[1] == ['{"backend":"auto"}']  # fmt: skip
    assert typed(prepare(db, _spec(fake_vllm_python), "max-lora-cls-labels", "2,4", {}))[1] == [
        2,
        4,
    ]


def test_a_stored_experiment_cannot_smuggle_a_plugin_into_a_start(
    fake_vllm_python: str, tmp_path: Path
) -> None:
    """The runner rebuilds each start from the stored experiment: a JSON value edited into the
    DB (or stored by an older lab) is held to the same policy when it is launched."""
    exp = prepare(
        tmp_path / "lab.db",
        _spec(fake_vllm_python),
        "structured-outputs-config",
        '{"backend": "auto"}',
        {},
    )
    assert exp.engine is not None
    stored = EngineSpec(**exp.engine.to_json())
    plugin = {"structured-outputs-config": '{"reasoning_parser_plugin": "/tmp/e.py"}'}
    with pytest.raises(ParamError, match="reasoning_parser_plugin inside it is never tuned"):
        stored.launch(plugin)
    assert list(stored.learned["structured-outputs-config"]["code_keys"]) == [
        "reasoning_parser_plugin"
    ]
    old = dict(stored.learned["structured-outputs-config"], code_keys=[])  # an older lab's record
    stored.learned = {"structured-outputs-config": old}
    with pytest.raises(ParamError, match="reasoning_parser_plugin inside it is never tuned"):
        stored.launch(plugin)
