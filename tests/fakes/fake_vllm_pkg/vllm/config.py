"""vLLM's config classes, as the real `vllm.config` keeps them: dataclasses whose fields become the
flags of the parser group named after the class, each documented by the docstring under it. Only
the fields the lab's probe reads (tuning/engine/flags/engine_probe.py): a class to import, a
callable, a
path, text documented as a qualified name, and the plain fields beside them."""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

DistributedExecutorBackend = Literal["ray", "mp", "uni", "external_launcher"]


@dataclass
class SchedulerConfig:
    max_num_seqs: int | None = None
    """Maximum number of sequences to be processed in a single iteration."""
    scheduling_policy: Literal["fcfs", "priority"] = "fcfs"
    """The scheduling policy to use."""
    long_prefill_token_threshold: int = 0
    async_scheduling: bool | None = None
    scheduler_cls: str | type[object] | None = None
    """The scheduler class to use. Can be a class directly or the path to a class of form
    "mod.custom_class"."""
    max_lora_cls_labels: int | None = None
    """A count of labels: a number names no class."""


@dataclass
class ParallelConfig:
    distributed_executor_backend: str | DistributedExecutorBackend | type[Any] | None = None
    """Backend to use for distributed model workers, either "ray" or "mp" (multiprocessing)."""
    fake_worker_hook: str | type[object] | None = None
    """A class run in each worker (its name says nothing: its type does)."""


@dataclass
class PassConfig:
    fuse_norm_quant: bool = False
    """Fuse the norm and the quantization."""
    post_pass: str | Callable[..., Any] | None = None
    """A pass run after the others (its name says nothing: its type does)."""


@dataclass
class CompilationConfig:
    mode: int | None = None
    """The compilation approach used for torch.compile-based compilation of the model."""
    cudagraph_capture_sizes: list[int] | None = None
    """Sizes to capture cudagraph."""
    backend: str = ""
    """The backend for compilation. "full.module.name": a qualified name which can be used to
    import the backend function."""
    debug_dump_path: Path | None = None
    """The path to dump the debug information."""
    compile_cache_save_format: Literal["binary", "unpacked"] = "binary"
    """Format for saving torch compile cache (a file format: fixed choices, no path)."""
    pass_config: PassConfig = field(default_factory=PassConfig)
    """Custom inductor passes."""


@dataclass
class StructuredOutputsConfig:
    backend: Literal["auto", "xgrammar", "guidance"] = "auto"
    """Which engine will be used for structured outputs."""
    reasoning_parser: str = ""
    """Select the reasoning parser depending on the model that you're using."""
    reasoning_parser_plugin: str = ""
    """Path to a dynamically reasoning parser plugin that can be dynamically loaded."""


@dataclass
class VllmConfig:
    structured_outputs_config: StructuredOutputsConfig = field(
        default_factory=StructuredOutputsConfig
    )
    """Structured outputs configuration."""
