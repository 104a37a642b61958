"""One way of starting vLLM as the lab keeps it with every experiment: the command before the
flags, the model, what the engine honours, and the version of vLLM an interpreter holds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tuning.engine.find import vllm_version
from tuning.engine.launch import Launch, build_launch
from tuning.engine.params import Param

API_SERVER_MODULE = ["-m", "vllm.entrypoints.openai.api_server"]


class EngineError(RuntimeError):
    """The engine cannot be set up or found; the message says what to run."""


@dataclass
class EngineSpec:
    """One way of starting vLLM: the command before the flags, the model, and what it honours."""

    name: str
    command: list[str]
    model: str
    served_model_name: str
    backend: str  # "cpu" or "gpu": which parameters the registry lets through
    load_format: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    baseline: dict[str, object] = field(default_factory=dict)
    vllm_version: str = "unknown"
    # The user's vLLM flags (beyond the curated table) this spec's experiment uses, as
    # Param.to_dict(): learned from its parser when planned (tuning.engine.flags), kept with the
    # row.
    learned: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    def learned_params(self) -> dict[str, Param]:
        return {name: Param.from_dict(raw) for name, raw in self.learned.items()}

    def launch(self, config: Mapping[str, Any], *, port: int | None = None) -> Launch:
        """One start of this engine with `config` (validated for its backend): argv and env."""
        return build_launch(
            self.command,
            self.model,
            self.served_model_name,
            config,
            self.backend,
            port=port,
            load_format=self.load_format,
            base_env=self.env,
            learned=self.learned_params(),
        )


def installed_vllm_version(python: Path | str) -> str:
    """The vLLM version installed in `python` (package metadata first), "unknown" when none."""
    return vllm_version(str(python))[0] or "unknown"
