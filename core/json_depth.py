"""How deep a JSON text nests, counted before any parser recurses.

Python's `json` recurses once per bracket: a 5,000-level `[[[[...]]]]` raises RecursionError
(not a ValueError), a traceback wherever the caller only expected bad JSON. Every JSON text that
comes from outside the lab (a workload file, a flag value, a bundle's manifest, a model's
config.json, a search's --json output) is scanned here first, in linear time: strings are skipped
whole (a bracket inside one counts for nothing) and the scan stops at the first bracket past the
limit.
"""

from __future__ import annotations

import json
import re
from typing import Any

# What the lab's own JSON needs, with room to spare: a workload record (an object, its messages,
# their content parts), a bundle's manifest, a flag's config object, a model's config.json.
MAX_NESTING = 64
# A JSON string (closing quote optional: an unterminated one is one linear match) or a bracket.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.S)


class TooDeep(ValueError):
    """A JSON text nested deeper than the limit: refused before it is parsed."""


def too_deep(text: str, start: int = 0, limit: int = MAX_NESTING, whole: bool = True) -> bool:
    """Whether the JSON value in `text` from `start` nests deeper than `limit` brackets. With
    `whole` False the scan stops where the first value's brackets close (one array entry)."""
    depth = 0
    for m in _TOKENS.finditer(text, start):
        tok = m.group()
        if tok in "[{":
            depth += 1
            if depth > limit:
                return True
        elif tok in "]}":
            depth -= 1
            if depth <= 0 and not whole:
                return False
    return False


def nesting_words(limit: int = MAX_NESTING) -> str:
    return f"JSON nested deeper than {limit} levels"


def loads(text: str, limit: int = MAX_NESTING) -> Any:
    """`json.loads` after the nesting check: TooDeep (a ValueError, so a caller's "not valid
    JSON" handling words it too) instead of a RecursionError."""
    if too_deep(text, limit=limit):
        raise TooDeep(nesting_words(limit))
    return json.loads(text)
