"""Which stored runs the History page lists, and in what order: the filter as plain data applied
to `store.queries.history_rows`, so its rules are tested without a page and kept out of the UI."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Sort name -> (column, ascending); a run without the number goes last either way.
SORTS: dict[str, tuple[str, bool]] = {
    "newest first": ("id", False),
    "oldest first": ("id", True),
    "output throughput": ("output_throughput", False),
    "mean TTFT": ("mean_ttft_ms", True),
    "mean TPOT": ("mean_tpot_ms", True),
    "peak RSS": ("peak_tree_rss_bytes", True),
    "experiment": ("experiment_id", False),
}
# The columns a free-text search looks in (and "run N").
SEARCHED = (
    "param",
    "value",
    "status",
    "failure_kind",
    "model",
    "hardware",
    "engine",
    "author",
    "host",
    "notes",
    "tags",
    "experiment_name",
)

Row = Mapping[str, Any]


@dataclass(frozen=True)
class RunFilter:
    """An empty choice lets everything through; text is matched case-insensitively."""

    statuses: Sequence[str] = ()
    params: Sequence[str] = ()
    authors: Sequence[str] = ()
    text: str = ""
    show_hidden: bool = False
    sort: str = "newest first"

    def keeps(self, row: Row) -> bool:
        if not self.show_hidden and int(row.get("hidden") or 0):
            return False
        for chosen, column in (
            (self.statuses, "status"),
            (self.params, "param"),
            (self.authors, "author"),
        ):
            if chosen and row.get(column) not in chosen:
                return False
        needle = self.text.strip().lower()
        return not needle or needle in searchable_text(row)

    def apply(self, rows: Iterable[Row]) -> list[Row]:
        column, ascending = SORTS[self.sort]
        kept = [r for r in rows if self.keeps(r)]
        numbered = sorted(
            (r for r in kept if r.get(column) is not None),
            key=lambda r: r[column],
            reverse=not ascending,
        )
        return numbered + [r for r in kept if r.get(column) is None]


def searchable_text(row: Row) -> str:
    """What a search matches: the searched columns, then "run <id>", lower-cased."""
    words = ["" if row.get(c) is None else str(row[c]) for c in SEARCHED]
    return (" ".join(words) + f" run {row.get('id')}").lower()


def choices(rows: Iterable[Row], column: str) -> list[Any]:
    """The distinct values of a column, sorted, for a filter's options."""
    return sorted({r[column] for r in rows if r.get(column) is not None})
