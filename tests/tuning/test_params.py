"""The registry refuses hostile and malformed input before any process exists."""

from __future__ import annotations

import math
from unittest import mock

import pytest

from tuning.engine import launch, params, validate
from tuning.engine.launch import build_launch
from tuning.engine.params import PARAMS, ParamError, parse_bytes
from tuning.engine.validate import validate_value

REQUIRED = [
    "block-size",
    "gpu-memory-utilization",
    "kv-cache-memory-bytes",
    "max-num-seqs",
    "max-num-batched-tokens",
    "max-model-len",
    "enable-prefix-caching",
    "enable-chunked-prefill",
    "kv-cache-dtype",
    "enforce-eager",
    "dtype",
    "tensor-parallel-size",
    "VLLM_CPU_KVCACHE_SPACE",
]


def test_registry_has_every_required_parameter_with_metadata() -> None:
    for name in REQUIRED:
        p = PARAMS[name]
        assert p.help and p.type and p.backends, name
        assert p.describe_range()
    assert "gpu" in PARAMS["tensor-parallel-size"].backends
    assert PARAMS["VLLM_CPU_KVCACHE_SPACE"].backends == frozenset({"cpu"})


@pytest.mark.parametrize(
    "name,raw",
    [
        ("gpu-memory-utilization", float("nan")),
        ("gpu-memory-utilization", "nan"),
        ("gpu-memory-utilization", float("inf")),
        ("gpu-memory-utilization", "-inf"),
        ("gpu-memory-utilization", 1.5),
        ("gpu-memory-utilization", "0"),
        ("max-num-seqs", 0),
        ("max-num-seqs", -4),
        ("max-num-seqs", "-4"),
        ("max-num-seqs", 2.5),
        ("max-num-seqs", "16; rm -rf /"),
        ("max-num-seqs", "$(reboot)"),
        ("max-num-seqs", "`id`"),
        ("max-num-seqs", "16 --disable-log-stats"),
        ("max-num-seqs", "--disable-log-stats"),
        ("max-num-seqs", True),
        ("max-num-seqs", "sixteen"),
        ("max-num-seqs", ""),
        ("max-num-seqs", None),
        ("max-num-seqs", [16]),
        ("max-num-seqs", 10**9),
        ("block-size", "16|cat"),
        ("kv-cache-dtype", "fp9"),
        ("kv-cache-dtype", "auto && id"),
        ("dtype", "--dtype"),
        ("enable-prefix-caching", "maybe"),
        ("enable-prefix-caching", 2),
        ("kv-cache-memory-bytes", "1Q"),
        ("kv-cache-memory-bytes", "1.5"),
        ("kv-cache-memory-bytes", -1),
        ("kv-cache-memory-bytes", "2G>x"),
        ("max-model-len", "2048\n--port 1"),
        ("VLLM_CPU_KVCACHE_SPACE", "1;id"),
        ("VLLM_CPU_KVCACHE_SPACE", 0),
    ],
)
def test_hostile_and_malformed_values_are_refused(name: str, raw: object) -> None:
    with pytest.raises(ParamError) as err:
        validate_value(name, raw)
    assert name in str(err.value)


@pytest.mark.parametrize(
    "key",
    [
        "host",
        "port",
        "disable-log-stats",
        "--max-num-seqs",
        "model",
        "api-key",
        "max_num_seqs_typo",
        "served-model-name",
    ],
)
def test_unknown_keys_are_refused(key: str) -> None:
    with pytest.raises(ParamError, match="unknown parameter"):
        build_launch(["vllm"], "m", "m", {key: "1"}, "cpu")


def test_nothing_is_started_when_a_value_is_refused() -> None:
    with mock.patch("subprocess.Popen") as popen:
        for bad in ({"max-num-seqs": "1;id"}, {"host": "0.0.0.0"}, {"dtype": "nan"}):
            with pytest.raises(ParamError):
                build_launch(["vllm"], "m", "m", bad, "cpu")
        popen.assert_not_called()


def test_valid_values_are_typed() -> None:
    assert validate_value("max-num-seqs", "16") == 16
    assert validate_value("max-num-seqs", 16.0) == 16
    assert math.isclose(validate_value("gpu-memory-utilization", "0.5"), 0.5)
    assert validate_value("enable-prefix-caching", "false") is False
    assert validate_value("kv-cache-memory-bytes", "2G") == 2 * 2**30
    assert validate_value("kv-cache-memory-bytes", "2g") == 2 * 10**9
    assert parse_bytes("1k") == 1000 and parse_bytes("1K") == 1024
    assert validate_value("max_num_seqs", 4) == 4  # underscores are accepted like vLLM


def test_backend_restrictions() -> None:
    with pytest.raises(ParamError, match="not honoured by the cpu backend"):
        build_launch(["vllm"], "m", "m", {"tensor-parallel-size": 2}, "cpu")
    with pytest.raises(ParamError, match="not honoured by the gpu backend"):
        build_launch(["vllm"], "m", "m", {"VLLM_CPU_KVCACHE_SPACE": 2}, "gpu")
    with pytest.raises(ParamError, match="workload"):
        build_launch(["vllm"], "m", "m", {"concurrency": 2}, "cpu")


def test_launch_argv_and_env() -> None:
    launch = build_launch(
        ["python", "-m", "vllm.entrypoints.openai.api_server"],
        "/m",
        "tiny",
        {
            "max-num-seqs": 8,
            "enable-prefix-caching": False,
            "enforce-eager": True,
            "VLLM_CPU_KVCACHE_SPACE": 2,
        },
        "cpu",
        load_format="dummy",
        base_env={"HF_HUB_OFFLINE": "1"},
    )
    argv = launch.argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert "--no-enable-prefix-caching" in argv and "--enforce-eager" in argv
    assert argv[argv.index("--max-num-seqs") + 1] == "8"
    assert "--disable-log-stats" not in argv
    assert launch.env == {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2"}
    assert 1024 < launch.port < 65536 and launch.base_url.startswith("http://127.0.0.1:")
    assert all(isinstance(a, str) for a in argv)


def test_free_port_is_free() -> None:
    from tuning.engine.server import port_is_free

    assert port_is_free("127.0.0.1", launch.free_port())


def test_parse_values() -> None:
    assert validate.parse_values("max-num-seqs", "2, 16") == [2, 16]
    with pytest.raises(ParamError):
        validate.parse_values("max-num-seqs", "2,x")
    with pytest.raises(ParamError):
        validate.parse_values("max-num-seqs", " , ")


def test_values_typed_with_spaces_or_twice_are_refused_with_the_fix() -> None:
    """Issue 23: "2 16" got "characters other than letters..." and "2,2" was accepted silently."""
    with pytest.raises(params.ParamError, match="separate values with commas: 2,16"):
        validate.parse_values("max-num-seqs", "2 16")
    with pytest.raises(params.ParamError, match="2 is given twice"):
        validate.parse_values("max-num-seqs", "2,2")
    with pytest.raises(params.ParamError, match="1073741824 is given twice"):
        validate.parse_values("kv-cache-memory-bytes", "1G,1073741824")  # the same bytes
    assert validate.parse_values("max-num-seqs", "2, 16") == [2, 16]


def test_bytes_values_accept_binary_units_and_store_the_same_count() -> None:
    """Issue 23 item 4: "1 GiB" was refused; '1 GiB', '1GiB', '1G' and 1073741824 are one value."""
    for text in ("1 GiB", "1GiB", "1G", "1073741824", " 1 GiB "):
        assert validate_value("kv-cache-memory-bytes", text) == 2**30
    assert validate.parse_values("kv-cache-memory-bytes", "512MiB, 1 GiB, 1.5 GiB") == [
        2**29,
        2**30,
        3 * 2**29,
    ]
    with pytest.raises(params.ParamError, match="separate values with commas: 1,2"):
        validate.parse_values("kv-cache-memory-bytes", "1 2")
    with pytest.raises(params.ParamError, match="kv-cache-memory-bytes"):
        validate_value("kv-cache-memory-bytes", "1 GB")
    # the argv keeps the canonical count vLLM reads
    assert params.format_value(validate_value("kv-cache-memory-bytes", "1 GiB")) == "1073741824"


def test_a_bytes_range_reads_in_binary_units() -> None:
    allowed = PARAMS["kv-cache-memory-bytes"].describe_range()
    assert allowed.startswith("1 B..1 PiB") and "e+" not in allowed


def test_floats_reach_the_argv_and_env_with_every_digit() -> None:
    """Issue 41 case 5: 0.9000001 and 0.9000002 both launched as 0.9 (`:g`), and a learned float
    flag's 1234567.5 as 1.23457e+06."""
    values = validate.parse_values("gpu-memory-utilization", "0.9000001,0.9000002")
    argvs = [
        build_launch(["vllm"], "m", "m", {"gpu-memory-utilization": v}, "gpu").argv for v in values
    ]
    assert [a[a.index("--gpu-memory-utilization") + 1] for a in argvs] == ["0.9000001", "0.9000002"]
    learned = {
        "cpu-offload-gb": params.Param(
            name="cpu-offload-gb", type="float", help="", flag="--cpu-offload-gb", source="learned"
        ),
        "VLLM_FAKE_RATIO": params.Param(
            name="VLLM_FAKE_RATIO", type="float", help="", kind="env", env="VLLM_FAKE_RATIO",
            source="learned",
        ),
    }  # fmt: skip
    config = {"cpu-offload-gb": "1234567.5", "VLLM_FAKE_RATIO": "0.30000000000000004"}
    made = build_launch(["vllm"], "m", "m", config, "gpu", learned=learned)
    assert made.argv[made.argv.index("--cpu-offload-gb") + 1] == "1234567.5"
    assert made.env["VLLM_FAKE_RATIO"] == "0.30000000000000004"


def test_a_text_value_that_is_a_comma_list_is_refused_unquoted_and_kept_whole_quoted() -> None:
    """Issue 41 case 12: `--values AWS_,HF_` for a knob whose value is a comma-separated list
    became two runs, AWS_ and HF_; now it is refused in one line saying how to quote, and the
    quoted forms give one value or two."""
    knob = "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY"
    learned = {
        knob: params.Param(
            name=knob, type="text", kind="env", env=knob, source="learned",
            help="Comma-separated *additional* prefixes of env vars to copy to Ray workers.",
        ),
        "tool-call-parser": params.Param(
            name="tool-call-parser", type="text", help="The tool call parser.",
            flag="--tool-call-parser", source="learned",
        ),
    }  # fmt: skip
    with pytest.raises(ParamError) as err:
        validate.parse_values(knob, "AWS_,HF_", learned)
    message = str(err.value)
    assert message.startswith(f"{knob} takes a comma-separated list") and "\n" not in message
    assert '"AWS_,HF_" for one value or "AWS_","HF_" for 2' in message
    assert validate.parse_values(knob, '"AWS_,HF_"', learned) == ["AWS_,HF_"]
    assert validate.parse_values(knob, '"AWS_","HF_"', learned) == ["AWS_", "HF_"]
    assert validate.parse_values(knob, '"AWS_,HF_",OTHER_', learned) == ["AWS_,HF_", "OTHER_"]
    assert validate.parse_values(knob, "AWS_", learned) == ["AWS_"]  # one value: nothing to ask
    assert validate.parse_values(knob, ["AWS_", "HF_"], learned) == ["AWS_", "HF_"]  # split already
    # a text flag whose value is no list: a bare comma still separates values, as it always did
    assert validate.parse_values("tool-call-parser", "hermes,mistral", learned) == [
        "hermes",
        "mistral",
    ]
    assert validate.parse_values("max-num-seqs", '"2",16') == [2, 16]
    with pytest.raises(ParamError, match="max-num-seqs: the quote at character 1 is not closed"):
        validate.parse_values("max-num-seqs", '"2,16')


def test_a_json_value_keeps_its_numbers_or_is_refused() -> None:
    """Issue 41 case 5 inside JSON: 1e400 became `Infinity` (and NaN passed) on its way to vLLM;
    a float keeps every digit."""
    learned = {
        "compilation-config": params.Param(
            name="compilation-config", type="json", help="", flag="--compilation-config",
            source="learned",
        )
    }  # fmt: skip
    exact = validate_value(
        "compilation-config", '{"ratio": 0.9000001, "n": 12345678901234567890}', learned
    )
    assert exact == '{"n":12345678901234567890,"ratio":0.9000001}'
    for raw in ('{"ratio": 1e400}', '{"ratio": NaN}', '{"ratio": -Infinity}'):
        with pytest.raises(ParamError, match="compilation-config: .* not finite"):
            validate_value("compilation-config", raw, learned)
