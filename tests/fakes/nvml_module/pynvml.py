"""`import pynvml` in a subprocess (the CLI, `make run`'s decision step) answered by FakeNvml:
put this folder first on PYTHONPATH, and the repository on it too. FAKE_NVML_GPUS says how many
GPUs it reports (default 2), so a machine without a driver simulates a GPU box."""

from __future__ import annotations

import os
import sys

from tests.fakes.fake_nvml import FakeNvml

sys.modules[__name__] = FakeNvml(devices=int(os.environ.get("FAKE_NVML_GPUS", "2")))  # type: ignore[assignment]
