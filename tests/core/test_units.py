"""core.units: byte counts read the way vLLM reads them and written in binary units."""

from __future__ import annotations

import pytest

from core.units import GIB, MIB, fmt, format_bytes, parse_bytes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 GiB", GIB),
        ("1GiB", GIB),
        ("512MiB", 512 * MIB),
        ("1.5 GiB", 3 * GIB // 2),
        ("2 kib", 2048),
        ("1G", GIB),  # vLLM's human_readable_int: upper case is binary
        ("1g", 10**9),  # lower case is decimal
        ("1K", 1024),
        ("25.6k", 25_600),
        ("4096", 4096),
        ("64 B", 64),
    ],
)
def test_parse_bytes_reads_binary_units_and_vllms_suffixes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["1.5", "1 GB", "-1G", "1 G B", "GiB", "1.5 B", "1e9"])
def test_parse_bytes_refuses_what_is_not_a_byte_count(text: str) -> None:
    with pytest.raises(ValueError):
        parse_bytes(text)


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (GIB, "1 GiB"),
        (16 * GIB, "16 GiB"),
        (512 * MIB, "512 MiB"),
        (3 * GIB // 2, "1.5 GiB"),
        (10**9, "953.67 MiB"),
        (2**50, "1 PiB"),
        (512, "512 B"),
        (0, "0 B"),
    ],
)
def test_format_bytes_writes_the_largest_binary_unit(count: int, expected: str) -> None:
    assert format_bytes(count) == expected


def test_format_then_parse_gives_the_count_back_for_whole_units() -> None:
    for count in (GIB, 16 * GIB, 512 * MIB, 3 * GIB // 2, 7 * 2**10):
        assert parse_bytes(format_bytes(count)) == count


def test_fmt_gives_times_a_unit_and_counts_separators() -> None:
    assert fmt(18_160.4, "ms") == "18,160 ms"
    assert fmt(524_288, "tokens") == "524,288"
    assert fmt(17 * GIB, "bytes") == "17 GiB"
    assert fmt(0.92, "fraction") == "92.0 %"
    assert fmt(None, "ms") == "—"
