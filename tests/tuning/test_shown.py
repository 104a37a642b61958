"""tuning.engine.params: a parameter's value as a person reads it."""

from __future__ import annotations

from tuning.engine.params import run_value, show_value


def test_bytes_values_read_in_binary_units_and_others_as_they_are() -> None:
    assert show_value("kv-cache-memory-bytes", "17179869184") == "16 GiB"
    assert show_value("kv-cache-memory-bytes", 512 * 2**20) == "512 MiB"
    assert show_value("kv-cache-memory-bytes", "not bytes") == "not bytes"
    assert show_value("max-num-seqs", 256) == "256"
    assert show_value("not-a-param", "x") == "x"
    assert show_value("kv-cache-memory-bytes", None) == "unset"
    assert run_value({"param": "kv-cache-memory-bytes", "value": "1073741824"}) == "1 GiB"
