"""core.json_depth: the one nesting scan every JSON text from outside goes through before
`json` recurses (issue 41 case 12: a 5,000-level array raised RecursionError)."""

from __future__ import annotations

import pytest

from core.json_depth import MAX_NESTING, TooDeep, loads, too_deep

DEPTH = 5_000
DEEP_ARRAY = "[" * DEPTH + "]" * DEPTH
DEEP_OBJECT = '{"a":' * DEPTH + "1" + "}" * DEPTH
WORDS = f"JSON nested deeper than {MAX_NESTING} levels"


def test_the_scan_counts_brackets_outside_strings_only() -> None:
    assert too_deep(DEEP_ARRAY) and too_deep(DEEP_OBJECT)
    assert not too_deep("[" * MAX_NESTING + "]" * MAX_NESTING)
    assert not too_deep(f'{{"a": "{"[" * 10_000}"}}')  # brackets inside a string are text
    with pytest.raises(TooDeep, match=WORDS):
        loads(DEEP_ARRAY)
    assert loads('{"a": [1, {"b": 2}]}') == {"a": [1, {"b": 2}]}
