"""The pages' shared fixture: the terminal token a `make run` app has (ui/terminal_token.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ui import terminal_token


@pytest.fixture
def terminal_token_issued() -> Iterator[str]:
    """This process's app has a terminal token, as under `make run`; none again afterwards."""
    try:
        yield terminal_token.issue()
    finally:
        terminal_token.revoke()
