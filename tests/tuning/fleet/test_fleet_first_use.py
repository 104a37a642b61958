"""The first `--fleet local` on a machine that never ran Ray. `ray start --head` with token auth
does not create the token (only `ray.init()` does): on the H200, a fresh machine, the lab's local
cluster failed with AuthenticationError before any run, while every machine that had run Ray once
passed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuning.decide.fleet.cluster import start_node
from tuning.engine.procs import group_alive

pytestmark = [pytest.mark.usefixtures("ray_installed"), pytest.mark.fleet, pytest.mark.timeout(300)]


def test_a_local_cluster_starts_in_a_home_without_a_ray_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE"):
        monkeypatch.delenv(name, raising=False)
    token = tmp_path / ".ray" / "auth_token"
    assert not token.exists()
    node = start_node(1, num_cpus=1)
    try:
        assert token.exists() and token.stat().st_size > 0
        # a second node joins with the same token, as the fleet's own tests do
        second = start_node(1, head_address=node.address, num_cpus=1)
        second.stop()
        assert not group_alive(second.pgid)
    finally:
        node.stop()
    assert not group_alive(node.pgid)
