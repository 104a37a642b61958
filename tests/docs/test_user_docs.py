"""The documentation site is for users (issue 40 item 2): no page but docs/contributing.md names a
commit hash, "these machines", a "test bed" or a count of tests, and no page shows an interval of
a ratio below -100 %, which the lab never prints (a ratio is judged on its log scale)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
BUILDERS = DOCS / "contributing.md"  # the one page for people who work on the lab itself
TEXT = (".md", ".txt", ".json")

# 7 to 40 hex digits with at least one digit and one letter (a word such as "decade" or a number
# such as 1000000 is not a hash); a workload's fingerprint is a hash of content, named as such.
HASH = re.compile(r"(?<![\w-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")
FINGERPRINT = re.compile(r"fingerprint\W{0,4}$", re.IGNORECASE)
WORDS = re.compile(r"these machines|test ?bed|\b\d[\d,]* (?:[\w-]+ )?tests\b", re.IGNORECASE)
# '95 % CI -620.8 … +1520.8 %': a lower bound at or below -100 % of a ratio cannot happen.
BELOW = re.compile(r"CI\s+[-−](\d+(?:\.\d+)?)\s*(?:…|\.\.\.)\s*[-−+]?\d+(?:\.\d+)?\s*%")


def problems(text: str) -> list[str]:
    """Every builder's word, commit hash and impossible interval in `text`, one line each."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in HASH.finditer(line):
            if not FINGERPRINT.search(line[: m.start()]):
                found.append(f"line {n}: commit hash? {m.group()}")
        found += [f"line {n}: builder's words {m.group()!r}" for m in WORDS.finditer(line)]
        for m in BELOW.finditer(line):
            if float(m.group(1)) >= 100:
                found.append(f"line {n}: an interval below -100 %: {m.group()}")
    return found


def user_pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*") if p.suffix in TEXT and p != BUILDERS)


def test_there_are_user_pages_and_a_contributing_page() -> None:
    names = {p.relative_to(DOCS).as_posix() for p in user_pages()}
    assert {"index.md", "getting-started.md", "guides/gpu-box.md"} <= names
    assert BUILDERS.is_file()
    assert "contributing.md" in (DOCS.parent / "mkdocs.yml").read_text()


@pytest.mark.parametrize("page", user_pages(), ids=lambda p: p.relative_to(DOCS).as_posix())
def test_a_user_page_has_no_builder_material_or_impossible_interval(page: Path) -> None:
    assert problems(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "planted",
    [
        "made on 35a2190 the same day",
        "main at 9aeadaf",
        "a full 40-digit 0123456789abcdef0123456789abcdef01234567 sha",
        "on these machines pip finds the wheel",
        "on the 2-core test bed 25 s quiet",
        "then 1,162 tests",
        "41 fast-tier tests run",
        "mean TPOT undecided (95 % CI -620.8 ... +1520.8 %)",
        "p99 TTFT (98.3 % CI −100.0 … +12.0 %)",
    ],
)
def test_the_check_catches_a_planted_problem(planted: str) -> None:
    assert problems(f"text before\n{planted}\n")


@pytest.mark.parametrize(
    "fine",
    [
        "source        sharegpt  fingerprint 90ed387daf9cb37c",
        '"fingerprint": "a1c7805392f87d18"',
        "a facade of 1000000 decades, deadline",
        "95 % CI -97.1 … +5441.9 % — wide: 2 + 2 runs",
        "the tests mirror the source tree; this machine",
    ],
)
def test_the_check_lets_user_text_through(fine: str) -> None:
    assert problems(fine) == []
