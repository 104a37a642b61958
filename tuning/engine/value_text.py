"""A parameter value as text, both ways: a typed value list (`--values`, New experiment's field)
split into its items, a JSON value read under the flag policy, and a value written back as the
exact text vLLM, the environment, a stored label and a command line get.

The list syntax: items separated by commas. An item that starts with `{` or `[` is one JSON value
with its own commas (`{"a":1,"b":2},{}`; `[1,2,4],[1,2]` for list-valued flags, each list one
value, stored as its compact JSON text and launched one argv item per element); an item in
double quotes is JSON text that may hold commas (`"AWS_,HF_",OTHER_` is two values, the first
with a comma inside). Everything else runs to the next comma, as it always did (`2, 16`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from tuning.engine.flags.policy import json_refusal

_JSON_STARTS = '{["'
_DECODER = json.JSONDecoder()


class Item(NamedTuple):
    """One value of a typed list; `quoted` when the user wrote it in double quotes."""

    text: str
    quoted: bool = False


def value_items(text: str) -> list[Item]:
    """'2,16' -> [Item('2'), Item('16')]; '"a,b",c' -> [Item('a,b', True), Item('c')]. ValueError
    (saying where and how to quote) for a quoted item left open or followed by more than a comma.
    A list that starts with `{` or `[` and is not well-formed JSON stays one item, so the
    parameter's check names the JSON error."""
    whole = text.strip()
    items: list[Item] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        if text[i] not in _JSON_STARTS:
            end = text.find(",", i)
            end = n if end < 0 else end
            if bare := text[i:end].strip():
                items.append(Item(bare))
            i = end + 1
            continue
        try:
            value, end = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            if whole[:1] in "{[":
                return [Item(whole)]
            raise ValueError(
                f"the quote at character {i + 1} is not closed ({exc.msg}): write a value that "
                'holds a comma in double quotes, as "AWS_,HF_"'
            ) from None
        quoted = text[i] == '"'
        items.append(Item(str(value), True) if quoted else Item(text[i:end]))
        i = end
        while i < n and text[i].isspace():
            i += 1
        if i < n and text[i] != ",":
            if whole[:1] in "{[":
                return [Item(whole)]
            raise ValueError(
                f"{text[i:].strip()[:40]!r} follows a quoted value without a comma: separate "
                'values with commas, as "AWS_,HF_",OTHER_'
            )
        i += 1
    return items


def split_values(text: str) -> list[str]:
    """'2,16' -> ['2', '16']; JSON values and quoted text keep their own commas."""
    return [item.text for item in value_items(text)]


def format_value(value: Any) -> str:
    """The one text of a value for vLLM's argv, the environment, stored labels and command lines:
    a float with every digit it needs to read back as the same number ('0.9000001', never the 6
    significant digits of `:g`), and as short as `:g` writes it where that is exact ('0.9', '1e-05')
    so labels stored before stay the same."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)


MAX_LIST_ITEMS = 1024  # elements of one list value (vLLM's own capture-size list has about 70)


def list_elements(raw: Any) -> list[Any]:
    """A list-valued flag's value (its JSON text, or a list) as its elements; ValueError saying
    why not: not JSON, not a list, an element that is a list, an object or null, too many."""
    if isinstance(raw, (list, tuple)):
        value: Any = list(raw)
    else:
        text = str(raw).strip()
        if not text.startswith("["):
            raise ValueError(f"expected a list in brackets such as [1,2,4,8], got {raw!r}")
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{raw!r} is not a JSON list ({exc})") from None
    if not isinstance(value, list):
        raise ValueError(f"expected a list in brackets such as [1,2,4,8], got {raw!r}")
    if len(value) > MAX_LIST_ITEMS:
        raise ValueError(f"a list of {len(value)} items; at most {MAX_LIST_ITEMS}")
    for item in value:
        if item is None or isinstance(item, (list, dict)):
            raise ValueError(f"{json.dumps(item)} inside {raw!r} is not one plain value")
    return value


def list_text(elements: Iterable[Any]) -> str:
    """Typed elements as the one stored text of a list value: compact JSON ('[1,2,4,8]')."""
    try:
        return json.dumps(list(elements), separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise ValueError("a list holds a number that is not finite") from None


def list_argv(value: Any) -> list[str]:
    """A list value (its stored text, or a list) as the argv items after its flag, one each."""
    return [format_value(e) for e in list_elements(value)]


def value_words(value: Any) -> str:
    """A value as a person reads it, where no parameter says more: a list value (its stored JSON
    text) as its elements in words, '1, 2, 4, 8'; anything else as `format_value` writes it."""
    if isinstance(value, str) and value.startswith("["):
        try:
            elements = list_elements(value)
        except ValueError:
            return value
        return ", ".join(format_value(e) for e in elements) if elements else "an empty list"
    return format_value(value)


def json_object_text(raw: Any, code_keys: Iterable[str] = ()) -> str:
    """A dict-valued flag's value (JSON text or a dict) as compact JSON; ValueError saying why not:
    not JSON, not an object, a number JSON cannot carry (NaN, 1e400), or a key the flag policy
    refuses at any depth (a plugin, a class path, a file; `code_keys` are those the engine's
    config classes name). vLLM's own type function checks the rest."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise ValueError(f"{raw!r} is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f'expected a JSON object such as {{"key": 1}}, got {raw!r}')
    if refused := json_refusal(value, code_keys):
        raise ValueError(f"{refused[0]} inside it is never tuned by the lab: {refused[1]}")
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except ValueError:
        raise ValueError(f"{raw!r} holds a number that is not finite") from None


def join_values(values: Iterable[Any]) -> str:
    """Values as one `--values` list that splits back into the same values: text with a comma (or
    a leading quote) in double quotes."""
    out = []
    for value in values:
        text = format_value(value)
        needs_quotes = "," in text and text[:1] not in "{[" or text[:1] == '"'
        out.append(json.dumps(text) if needs_quotes else text)
    return ",".join(out)


_COMMA_LIST = re.compile(r"comma[- ]?(separated|delimited)|separated by commas?", re.IGNORECASE)


def ambiguous_split(items: list[Item], help_text: str, default: Any) -> str | None:
    """Why `items` of a text parameter are ambiguous, or None: when its value is itself a
    comma-separated list (its help says so, as VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY's does, or
    its default holds a comma), 'AWS_,HF_' unquoted could be one value or two."""
    if len(items) < 2 or any(item.quoted for item in items):
        return None  # one value, or the user quoted: unambiguous
    if not (_COMMA_LIST.search(help_text) or (isinstance(default, str) and "," in default)):
        return None
    texts = [item.text for item in items]
    one, two = json.dumps(",".join(texts)), ",".join(json.dumps(t) for t in texts)
    return (
        f"takes a comma-separated list, so {','.join(texts)!r} could be one value or "
        f"{len(texts)}: write {one} for one value or {two} for {len(texts)} (on a command line "
        f"inside single quotes: --values '{one}')"
    )
