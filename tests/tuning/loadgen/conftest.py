"""Both transports for the streaming tests."""

from __future__ import annotations

import pytest

TRANSPORTS = ["aiohttp", "raw"]


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    """Both transports must pass every streaming test: they share the SSE reader, not the HTTP."""
    return str(request.param)
