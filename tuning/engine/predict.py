"""Predict the KV cache before restarting: bytes, tokens and blocks, and the concurrency that fits
at max-model-len, per value of one parameter, from the model's config.json and the configuration.

vLLM's arithmetic (0.30-0.33, full attention):
- bytes per token = 2 (K and V) x layers x KV heads x head dim x bytes of the KV dtype
  (`auto` = the model's dtype; fp8 = 1 byte);
- the KV budget: `kv-cache-memory-bytes` when given; on the CPU backend `VLLM_CPU_KVCACHE_SPACE`
  GiB when no KV flag is given (the lab drops it when one is: tuning.engine.launch.engine_env); on
  a GPU
  `gpu-memory-utilization` x device memory - weights - a runtime allowance (activations, CUDA
  context; `RUNTIME_GIB`), which only a device's size makes known;
- blocks = budget // (bytes per token x block size), capped by `num-gpu-blocks-override`;
  concurrency at max-model-len = blocks / ceil(max-model-len / block size), the "Maximum
  concurrency for N tokens per request" of the engine's log; KV tokens = that concurrency x
  max-model-len, as the engine logs them (`get_kv_cache_capacity`): blocks x block size when
  max-model-len is a multiple of the block size (without a max-model-len: blocks x block size);
- the start check (`check_enough_kv_cache_memory`) plans against one block less: the block pool
  holds one null block back, so one request of max-model-len must fit in blocks - 1
  (`max_model_len_limit` = (blocks - 1) x block size, the largest that starts).
A value that cannot start is flagged with the reason: max-model-len beyond that limit (vLLM
refuses: "To serve at least one request with the model's max seq len ..."), a block size the CPU
backend refuses (not a multiple of 32), max-model-len beyond the model's, fp8 KV on the CPU backend
(host dependent: a warning).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import json_depth
from tuning.engine.params import CPU_KV_ENV, format_value, get_param, parse_bytes
from tuning.engine.validate import validate_value

if TYPE_CHECKING:
    from tuning.engine.spec import EngineSpec

GIB = 2**30
# A model's config.json is a few KB; a larger file is not one (read whole, so it is capped).
MAX_CONFIG_BYTES = 16 * 2**20
# Default block size per backend when --block-size is not given (vllm-facts: CPU 128, CUDA 16).
DEFAULT_BLOCK = {"cpu": 128, "gpu": 16}
# GPU memory neither weights nor KV: activations at the profile run, the CUDA context, NCCL. The
# H200 runs in examples/h200 left 1.08 GiB besides 1.82 GiB of weights; an assumption, said so.
RUNTIME_GIB = 1.0
DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}


@dataclass(frozen=True)
class ModelShape:
    """What the KV cache and the weights' size depend on, from a Hugging Face config.json."""

    layers: int
    kv_heads: int
    head_dim: int
    dtype: str
    max_position_embeddings: int | None
    params: int  # an estimate from the shapes (embeddings, attention, MLP, head)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ModelShape:
        cfg = dict(config.get("text_config") or config)
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_dim = int(cfg.get("head_dim") or hidden // heads)
        layers = int(cfg["num_hidden_layers"])
        vocab = int(cfg.get("vocab_size") or 0)
        inter = int(cfg.get("intermediate_size") or 4 * hidden)
        attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
        per_layer = attn + 3 * hidden * inter + 2 * hidden
        head = 0 if cfg.get("tie_word_embeddings") else vocab * hidden
        dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
        mpe = cfg.get("max_position_embeddings")
        return cls(
            layers=layers,
            kv_heads=kv_heads,
            head_dim=head_dim,
            dtype=dtype,
            max_position_embeddings=int(mpe) if mpe else None,
            params=vocab * hidden + layers * per_layer + head + hidden,
        )

    @classmethod
    def load(cls, model: str | Path) -> ModelShape:
        """From a model folder (its config.json), a config.json path, or a hub id already in the
        Hugging Face cache (nothing is downloaded)."""
        from tuning.engine.find import model_config

        path = Path(model)
        path = path / "config.json" if path.is_dir() else path
        if not path.is_file():
            cached, _why = model_config(str(model))
            if cached is None:
                raise FileNotFoundError(
                    f"no config.json at {path}, and {model} is not in the Hugging Face cache"
                )
            path = cached
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ValueError(
                f"{path}: over {MAX_CONFIG_BYTES >> 20} MiB, not a model's config.json"
            )
        try:
            return cls.from_config(json_depth.loads(path.read_text()))
        except json_depth.TooDeep as exc:
            raise ValueError(f"{path}: {exc}") from None

    def kv_bytes_per_token(self, kv_dtype: str = "auto") -> int:
        kind = self.dtype if kv_dtype in ("auto", "", None) else kv_dtype
        return 2 * self.layers * self.kv_heads * self.head_dim * DTYPE_BYTES.get(kind, 2)

    def weights_bytes(self, dtype: str = "auto") -> int:
        kind = self.dtype if dtype in ("auto", "", None) else dtype
        return self.params * DTYPE_BYTES.get(kind, 2)


@dataclass
class Prediction:
    """The KV cache one configuration would get, and whether it can start."""

    value: str
    backend: str
    kv_dtype: str
    bytes_per_token: int
    block_size: int
    max_model_len: int | None
    budget_bytes: int | None
    budget_source: str
    kv_blocks: int | None = None
    kv_tokens: int | None = None
    max_concurrency: float | None = None
    max_model_len_limit: int | None = None  # the largest max-model-len the engine starts with
    can_start: bool = True
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _budget(
    config: Mapping[str, Any],
    env: Mapping[str, str],
    backend: str,
    shape: ModelShape,
    device_bytes: int | None,
) -> tuple[int | None, str]:
    if config.get("kv-cache-memory-bytes") is not None:
        raw = config["kv-cache-memory-bytes"]
        size = raw if isinstance(raw, int) else parse_bytes(str(raw))
        return int(size), "kv-cache-memory-bytes"
    util = config.get("gpu-memory-utilization")
    space = config.get(CPU_KV_ENV, env.get(CPU_KV_ENV))
    if backend == "cpu":
        if util is None and space not in (None, ""):
            return int(space) * GIB, f"{CPU_KV_ENV}={space} GiB"
        return None, "sized from the NUMA node's free RAM at start (unknown before it)"
    if device_bytes is None:
        return None, "gpu-memory-utilization x device memory: the device's size is unknown"
    share = float(util if util is not None else get_param("gpu-memory-utilization").default or 0.9)
    weights = shape.weights_bytes(str(config.get("dtype") or "auto"))
    budget = int(share * device_bytes - weights - RUNTIME_GIB * GIB)
    return budget, (
        f"{share:g} x {device_bytes / GIB:.1f} GiB - weights {weights / GIB:.2f} GiB "
        f"- {RUNTIME_GIB:g} GiB runtime (assumed)"
    )


def predict_config(
    config: Mapping[str, Any],
    shape: ModelShape,
    *,
    backend: str,
    env: Mapping[str, str] | None = None,
    device_bytes: int | None = None,
    value: str = "",
) -> Prediction:
    """The KV cache of one configuration (registry names -> values) on `backend`."""
    kv_dtype = str(config.get("kv-cache-dtype") or "auto")
    block = int(config.get("block-size") or DEFAULT_BLOCK.get(backend, 16))
    mml = config.get("max-model-len")
    max_len = int(mml) if mml is not None else shape.max_position_embeddings
    budget, source = _budget(config, env or {}, backend, shape, device_bytes)
    pred = Prediction(
        value=value,
        backend=backend,
        kv_dtype=kv_dtype,
        bytes_per_token=shape.kv_bytes_per_token(kv_dtype),
        block_size=block,
        max_model_len=max_len,
        budget_bytes=budget,
        budget_source=source,
    )
    if backend == "cpu" and block % 32:
        pred.problems.append(
            f"block-size {block}: the CPU attention backend needs a multiple of 32 "
            f'("No common block size for {block}")'
        )
    if backend == "cpu" and kv_dtype.startswith("fp8"):
        pred.warnings.append("fp8 KV on the CPU backend needs AVX-512 or AMX on this host")
    limit = shape.max_position_embeddings
    if max_len is not None and limit is not None and max_len > limit:
        pred.problems.append(
            f"max-model-len {max_len} is beyond the model's {limit} (max_position_embeddings)"
        )
    if budget is not None:
        blocks = max(0, budget) // (pred.bytes_per_token * block)
        override = config.get("num-gpu-blocks-override")
        if override is not None:
            blocks = min(blocks, int(override))
        pred.kv_blocks, pred.kv_tokens = blocks, blocks * block
        usable = max(0, blocks - 1)  # one block is the block pool's null block
        pred.max_model_len_limit = usable * block
        if max_len:
            per_request = math.ceil(max_len / block)
            concurrency = blocks / per_request
            pred.max_concurrency = round(concurrency, 2)
            pred.kv_tokens = int(concurrency * max_len)
            if usable < per_request:
                pred.problems.append(
                    f"{usable * block:,} usable KV tokens ({usable} of {blocks} blocks: one is "
                    f"the engine's null block) hold less than one request of max-model-len "
                    f"{max_len:,}: the engine refuses to start (needs {per_request} blocks of "
                    f"{block}; the largest max-model-len that starts is {usable * block:,})"
                )
    pred.can_start = not pred.problems
    return pred


def predict_values(
    param: str,
    values: Sequence[Any],
    base_config: Mapping[str, Any],
    shape: ModelShape,
    *,
    backend: str,
    env: Mapping[str, str] | None = None,
    device_bytes: int | None = None,
) -> list[Prediction]:
    """One prediction per value of `param` over `base_config` (the experiment's baseline)."""
    from tuning.engine.launch import engine_env

    out = []
    for raw in values:
        value = validate_value(param, raw)
        config = {**base_config, get_param(param).name: value}
        launch_env, _unset = engine_env(config, env)  # an explicit KV flag drops the CPU env var
        out.append(
            predict_config(
                config,
                shape,
                backend=backend,
                env=launch_env,
                device_bytes=device_bytes,
                value=format_value(value),
            )
        )
    return out


def error_pct(predicted: float | None, actual: float | None) -> float | None:
    """(predicted - actual) / actual in %, None when either is unknown or actual is 0."""
    if predicted is None or actual in (None, 0):
        return None
    return (float(predicted) - float(actual)) / float(actual) * 100.0


def run_columns(
    engine: EngineSpec, config: Mapping[str, Any], hardware: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The prediction for one run of `engine` with `config`, as the runs table's columns; {} when
    the model's config.json is not on this machine (a model by hub name) or cannot be read."""
    from tuning.engine.launch import engine_env

    try:
        shape = ModelShape.load(engine.model)
    except (OSError, ValueError, KeyError):
        return {}
    gpus = (hardware or {}).get("gpus") or []
    device = int(gpus[0]["memory_total_bytes"]) if gpus else None
    launch_env, _unset = engine_env(config, engine.env)
    pred = predict_config(
        config, shape, backend=engine.backend, env=launch_env, device_bytes=device
    )
    return {
        "predicted_kv_cache_tokens": pred.kv_tokens,
        "predicted_max_concurrency": pred.max_concurrency,
        "prediction_json": pred.to_json(),
    }
