"""Byte counts for people, in one place: binary units (1 GiB = 2^30 B, as vLLM means them) both
ways, so a table, a chart, an export and an input box agree on what "1 GiB" is.

Reading follows vLLM's own `human_readable_int` (vllm/utils/argparse_utils.py): `1K` = 1024,
`1k` = 1000, `1G` = 2^30, `1g` = 10^9; on top of it the spelled-out binary units a person writes
(`1 GiB`, `512MiB`, `1.5 GiB`) and a plain `B`. Writing always uses binary units.
"""

from __future__ import annotations

import re

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


def bytes_axis(largest: float) -> tuple[str, int]:
    """The unit and scale an axis of byte counts up to `largest` is drawn in ('GiB', 2^30)."""
    return next(((n, s) for n, s in BYTE_UNITS if abs(largest) >= s), ("B", 1))
