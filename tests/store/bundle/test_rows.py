"""Issue 22, Bounded input: a NULL where every reader expects a value (an experiment's or a run's
`param`, a run's value or experiment) imported, then `runs` died with a traceback. Validation now
refuses it in one line naming the bundle, the table and the field, and writes nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store.bundle import BundleError, import_bundle
from tests.checks import db_fingerprint
from tests.store.bundle.test_validate import rebuild

Cli = Callable[..., CompletedProcess[str]]
NULLS = [
    ("experiments", "param"),
    ("experiments", "values_json"),
    ("runs", "param"),
    ("runs", "value"),
    ("runs", "experiment_id"),
]


def _with_null(bundle: Path, tmp_path: Path, table: str, column: str) -> Path:
    def edit(conn: sqlite3.Connection) -> None:
        conn.execute(
            f'UPDATE "{table}" SET "{column}" = NULL WHERE id = (SELECT max(id) FROM "{table}")'
        )

    return rebuild(bundle, tmp_path / f"null-{column}.bundle.zip", tmp_path, sqlite_edit=edit)


@pytest.mark.parametrize(("table", "column"), NULLS)
def test_a_null_field_the_lab_reads_is_refused(
    table: str, column: str, bundle: Path, target: Path, tmp_path: Path
) -> None:
    bad = _with_null(bundle, tmp_path, table, column)
    before = db_fingerprint(target)
    with pytest.raises(BundleError, match=rf"{table}\.{column} is empty \(NULL\)") as err:
        import_bundle(target, bad)
    assert err.value.kind == "types"
    assert db_fingerprint(target) == before


def test_the_cli_names_the_bundle_the_table_and_the_field(
    bundle: Path, target: Path, tmp_path: Path, tuning_cli: Cli
) -> None:
    bad = _with_null(bundle, tmp_path, "runs", "param")
    before = db_fingerprint(target)
    out = tuning_cli(["import", str(bad), "--db", str(target)], tmp_path / "home", timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert bad.name in lines[0] and "runs.param is empty (NULL)" in lines[0]
    assert db_fingerprint(target) == before
