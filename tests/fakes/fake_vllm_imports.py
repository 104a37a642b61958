"""The fake vLLM's heavy imports, slow or broken on demand (read once, when the API server imports
it; its EngineCore child skips it): `FAKE_VLLM_IMPORT_S=SECONDS` sleeps that long, as vLLM's API
server imports take 17-21 s on a GPU box; `FAKE_VLLM_IMPORT_ERROR=TEXT` raises ImportError(TEXT), a
broken install. Imported once a process, so a launcher that imported it ahead (tuning.engine.
prelaunch) pays it before go, and the fake's own run after go finds it imported."""

from __future__ import annotations

import os
import sys
import time

if "--fake-role" not in sys.argv:
    if os.environ.get("FAKE_VLLM_IMPORT_ERROR"):
        raise ImportError(os.environ["FAKE_VLLM_IMPORT_ERROR"])
    time.sleep(float(os.environ.get("FAKE_VLLM_IMPORT_S") or 0))
