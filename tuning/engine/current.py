"""Which vLLM the lab starts: the user's own (the settings' custom engine: an interpreter or a
whole command such as `vllm serve`) or the embedded one, and what it is, in one dict."""

from __future__ import annotations

import shlex
from pathlib import Path

from tuning.engine.embedded import embedded_spec
from tuning.engine.find import EMBEDDED_SERVED_NAME, locate, served_name_for, vllm_version
from tuning.engine.flags.catalog import CatalogError, engine_python
from tuning.engine.spec import API_SERVER_MODULE, EngineError, EngineSpec
from tuning.settings import Settings, load_settings


def custom_spec(settings: Settings) -> EngineSpec:
    """The user's own vLLM: an interpreter path, or a whole command like `vllm serve`. The served
    name follows the model unless one is set (the embedded engine's "tiny" counts as unset)."""
    if not settings.engine_command or not settings.engine_model:
        raise EngineError(
            "a custom engine needs engine_command and engine_model in the settings (Settings)"
        )
    parts = shlex.split(settings.engine_command)
    is_python = Path(parts[0]).name.startswith("python")
    command = [parts[0], *API_SERVER_MODULE] if is_python and len(parts) == 1 else parts
    # `vllm serve` takes --model as well as a positional model, so both forms get --model.
    version = "unknown"
    if locate(parts[0]):
        try:
            version = vllm_version(engine_python(parts))[0] or "unknown"
        except CatalogError:
            pass
    served = settings.served_model_name
    return EngineSpec(
        name="custom",
        command=command,
        model=settings.engine_model,
        served_model_name=served
        if served and served != EMBEDDED_SERVED_NAME
        else served_name_for(settings.engine_model),
        backend=settings.engine_backend or "gpu",
        load_format=settings.engine_load_format or None,
        env={"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "VLLM_DISABLE_LOG_LOGO": "1"},
        vllm_version=version,
    )


def current_spec(settings: Settings | None = None) -> EngineSpec:
    chosen = settings or load_settings()
    if chosen.engine == "custom":
        return custom_spec(chosen)
    return embedded_spec()


def engine_info(settings: Settings | None = None) -> dict[str, object]:
    spec = current_spec(settings)
    interpreter = spec.command[0]
    return {
        "engine": spec.name,
        "interpreter": interpreter,
        "installed": locate(interpreter) is not None,
        "vllm_version": spec.vllm_version,
        "model_path": spec.model,
        "served_model_name": spec.served_model_name,
        "backend": spec.backend,
        "load_format": spec.load_format,
        "command": spec.command,
        "baseline": spec.baseline,
    }
