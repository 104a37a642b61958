"""Issue 40: the verdict words are words a user knows. "undecided" was drawn as "? undecided" on
the pages, the CLI and the report, a "?" that reads as a missing value; each label now ends with
its verdict's own word and none carries a "?"."""

from __future__ import annotations

from tests.factories import undecided_and_better_runs
from tuning.compare.comparison import build_comparison
from tuning.compare.present import VERDICT_LABEL, table_rows, verdict_text


def test_every_verdict_label_is_its_word_with_no_question_mark() -> None:
    for verdict, label in VERDICT_LABEL.items():
        assert label.endswith(verdict) and "?" not in label, label
    assert VERDICT_LABEL["undecided"] == "undecided"


def test_an_undecided_change_reads_undecided_in_its_text_and_table_cell() -> None:
    cmp = build_comparison(undecided_and_better_runs(), [1, 2])
    change = cmp.changes[(cmp.candidates[0].label, "output_throughput")]
    assert change.verdict == "undecided"
    assert verdict_text(change).startswith("undecided (")
    cells = [c.text for row in table_rows(cmp) for c in row]
    assert any(c.startswith("undecided (") for c in cells), cells
    assert not any("?" in c for c in cells), cells
