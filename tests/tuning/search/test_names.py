"""tuning.decide.search.names: a step's stored name reads with its search's id; a name of no
search, or of a search without a row (a lab from before searches were recorded), is as stored;
the stored name, which finds the search's steps, is as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import connect, queries
from tests.factories_search import add_search
from tuning.decide.search.names import shown_name, shown_names, step_ids


def test_a_step_reads_with_its_searchs_id_and_keeps_its_stored_name(fresh_db: Path) -> None:
    found = add_search(fresh_db, budget_runs=3)
    with connect(fresh_db, readonly=True) as db:
        exps = queries.list_experiments(db, True)
        shown = shown_names(db, exps)
        key = str(queries.get_search(db, found["search_id"])["key"])
    assert sorted(shown.values()) == [
        f"search {found['search_id']}: max-num-seqs = {v}" for v in (2, 32, 8)
    ]
    assert all(str(e["name"]).startswith(f"search {key}: ") for e in exps)  # the identity


def test_other_names_and_unrecorded_keys_are_as_stored() -> None:
    ids = {"search 0123456789:": "search 4:"}
    assert shown_name("search 0123456789: block-size = 16", ids) == "search 4: block-size = 16"
    assert shown_name("search abcdefabcd: block-size = 16", ids) == (
        "search abcdefabcd: block-size = 16"  # no row names it: the key is all there is
    )
    assert shown_name("my search 0123456789: x", ids) == "my search 0123456789: x"
    assert shown_name("kv sweep", ids) == "kv sweep" and shown_name(None, ids) == ""


def test_a_key_run_again_reads_with_its_newest_search(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"id": 5, "key": "0123456789"}, {"id": 2, "key": "0123456789"}]  # newest first
    monkeypatch.setattr(queries, "list_searches", lambda db: rows)
    monkeypatch.setattr(queries, "list_plans", lambda db: [{"id": 1, "key": "abcdefabcd"}])
    assert step_ids(None) == {"search 0123456789:": "search 5:", "plan abcdefabcd:": "plan 1:"}
