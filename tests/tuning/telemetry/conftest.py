"""A real process tree to sample and a local /metrics endpoint, per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.fake_metrics import MetricsServer
from tests.fakes.proc_tree import Tree


@pytest.fixture
def tree() -> Iterator[Tree]:
    with Tree() as t:
        yield t


@pytest.fixture
def metrics_server() -> Iterator[MetricsServer]:
    with MetricsServer() as server:
        yield server
