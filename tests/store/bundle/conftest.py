"""A bundle of the `source` lab's sweep, and a target lab with rows of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from store.bundle import export_bundle
from tests.factories import seed_clean_lab


@pytest.fixture
def bundle(source: dict[str, Any], tmp_path: Path) -> Path:
    out = tmp_path / "ada.bundle.zip"
    export_bundle(
        source["path"], out, experiment_ids=[source["experiment_id"]], author="ada", host="box-a"
    )
    return out


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A lab with rows of its own, so imported ids cannot coincide with the source's."""
    path = tmp_path / "target.db"
    seed_clean_lab(path, "cy", "box-c", values=(8,), repeats=1, seed=11, name="cy's own")
    return path
