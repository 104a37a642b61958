"""Numbers for people, in one place: byte counts in binary units (1 GiB = 2^30 B, as vLLM means
them) both ways, so a table, a chart, an export and an input box agree on what "1 GiB" is, and
`fmt`, a number in its unit (times with their unit, counts with separators).

Reading follows vLLM's own `human_readable_int` (vllm/utils/argparse_utils.py): `1K` = 1024,
`1k` = 1000, `1G` = 2^30, `1g` = 10^9; on top of it the spelled-out binary units a person writes
(`1 GiB`, `512MiB`, `1.5 GiB`) and a plain `B`. Writing always uses binary units.
"""

from __future__ import annotations

import math
import re
from typing import Any

NONE = "—"  # a missing number, everywhere

KIB, MIB, GIB, TIB, PIB = (2**10, 2**20, 2**30, 2**40, 2**50)
# Largest first: the unit a count is written in is the largest it reaches.
BYTE_UNITS: tuple[tuple[str, int], ...] = (
    ("PiB", PIB),
    ("TiB", TIB),
    ("GiB", GIB),
    ("MiB", MIB),
    ("KiB", KIB),
)
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": KIB, "M": MIB, "G": GIB, "T": TIB}
_VLLM = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgGtT]?)$")
_SPELLED = re.compile(r"^(\d+(?:\.\d+)?)\s*(?:([kKmMgGtTpP])i[bB]|([bB]))$")


def parse_bytes(text: str) -> int:
    """'1 GiB', '512MiB', '1.5GiB', '1G' (2^30), '1g' (10^9), '4096', '64 B' -> a whole number
    of bytes; ValueError for anything else (a bare number with decimals, 'GB', a sign)."""
    raw = text.strip()
    m = _VLLM.match(raw)
    if m:
        number, suffix = m.groups()
        if not suffix:
            if "." in number:
                raise ValueError(text)
            return int(number)
        return int(float(number) * (_BINARY.get(suffix) or _DECIMAL[suffix]))
    m = _SPELLED.match(raw)
    if not m:
        raise ValueError(text)
    number, prefix, plain = m.groups()
    scale = 1 if plain else dict(BYTE_UNITS)[f"{prefix.upper()}iB"]
    value = float(number) * scale
    if plain and not value.is_integer():
        raise ValueError(text)
    return int(value)


def format_bytes(value: float, decimals: int = 2) -> str:
    """A byte count in the largest binary unit it reaches, trailing zeros dropped:
    1073741824 -> '1 GiB', 1610612736 -> '1.5 GiB', 536870912 -> '512 MiB', 10**9 ->
    '953.67 MiB', 512 -> '512 B'; negative counts keep their sign."""
    name, scale = next(((n, s) for n, s in BYTE_UNITS if abs(value) >= s), ("B", 1))
    if scale == 1:
        return f"{value:,.0f} B"
    text = f"{value / scale:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text} {name}"


def fmt(value: Any, unit: str = "", *, spec: str | None = None, none: str = NONE) -> str:
    """A number in its unit: bytes in binary units, fractions in %, counts and tokens whole,
    anything else with a precision that suits its size; `spec` ('{:.1f}') overrides the number's
    format. Missing or non-finite -> `none`; text is shown as it is."""
    if value is None or isinstance(value, float) and not math.isfinite(value):
        return none
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if unit == "bytes":
        return format_bytes(value)
    if unit == "fraction":
        return f"{value * 100:,.1f} %"
    if spec is not None:
        text = spec.format(value)
    elif unit in ("count", "tokens"):
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
    else:
        text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"
    return f"{text} {unit}" if unit else text
