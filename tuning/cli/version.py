"""`tuning-lab --version`: the lab's package version and, when it can be read without starting
anything, the configured engine's vLLM version (from its installed package metadata on disk)."""

from __future__ import annotations

import shlex
from importlib import metadata
from pathlib import Path

DIST = "vllm-tuning-lab"  # pyproject.toml [project] name


def lab_version() -> str:
    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:
        return "unknown (not installed: `make setup` installs it)"


def installed_vllm(python: str | Path) -> str | None:
    """vLLM's version in the environment of an interpreter (a venv or conda env), read from its
    `vllm-*.dist-info/METADATA` on disk: no process is started and vllm is not imported; None when
    there is none to read."""
    env = Path(python).expanduser().parent.parent  # .../env/bin/python -> .../env
    for meta in sorted(env.glob("lib/python3*/site-packages/vllm-*.dist-info/METADATA")):
        try:
            for line in meta.read_text(errors="replace").splitlines():
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip() or None
                if not line.strip():
                    break
        except OSError:
            continue
    return None


def configured_python() -> str | None:
    """The interpreter of the configured engine, as the settings name it (nothing is run)."""
    from tuning.engine.embedded import venv_python
    from tuning.engine.find import locate
    from tuning.settings import load_settings

    settings = load_settings()
    if settings.engine != "custom":
        return str(venv_python())
    if not settings.engine_command:
        return None
    try:
        program = shlex.split(settings.engine_command)[0]
    except (ValueError, IndexError):
        return None
    return locate(program)


def version_text() -> str:
    """`tuning-lab 0.1.0`, then `vLLM 0.x.y (configured engine)` when known cheaply."""
    lines = [f"tuning-lab {lab_version()}"]
    try:
        python = configured_python()
        vllm = installed_vllm(python) if python else None
    except Exception:  # unreadable settings: the lab's own version still prints
        vllm = None
    lines.append(
        f"vLLM {vllm} (the configured engine)"
        if vllm
        else "vLLM: not known without starting the engine (`tuning-lab engine info` asks it)"
    )
    return "\n".join(lines)
