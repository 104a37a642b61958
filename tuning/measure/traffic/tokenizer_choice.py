"""Which tokenizer counts a workload preview's tokens: the one named, else the configured model's
(a local folder or the Hugging Face cache, never a download), else, when the embedded engine is
the configured one, its own. One choice for the CLI's `workload preview` and the app's preview."""

from __future__ import annotations

from pathlib import Path

from tuning.engine.embedded import corpus_tokenizer, model_dir
from tuning.engine.tokenizer_file import model_tokenizer
from tuning.measure.traffic.workload import LocalTokenizer, WorkloadError
from tuning.settings import Settings, load_settings


def configured_model(settings: Settings) -> str:
    """The model whose tokenizer the lab counts with: the custom engine's, "" for the embedded."""
    return settings.engine_model if settings.engine == "custom" else ""


def preview_tokenizer(
    tokenizer: str | Path | None = None,
    model: str | None = None,
    settings: Settings | None = None,
    *,
    fix: str = "pass --tokenizer FILE (a tokenizer.json or its folder)",
) -> LocalTokenizer:
    """`tokenizer` (a tokenizer.json or its folder), else `model`'s (else the configured engine's
    model), else the embedded engine's own (built from the shipped corpus if need be).
    WorkloadError (one line: which model, and how to give it a tokenizer: `fix`, then the
    download) when there is none."""
    if tokenizer:
        return LocalTokenizer(tokenizer)
    model = model or configured_model(settings or load_settings())
    if not model:  # the embedded engine: its tokenizer, built from the shipped corpus if need be
        if (model_dir() / "tokenizer.json").is_file():
            return LocalTokenizer(model_dir())
        return LocalTokenizer("lab:corpus-bpe", tokenizer=corpus_tokenizer())
    path, why = model_tokenizer(model)
    if path is None:
        raise WorkloadError(
            f"no tokenizer for model {model}: {why}; {fix}, or fetch it once: "
            f"huggingface-cli download {model} tokenizer.json"
        )
    return LocalTokenizer(path)
