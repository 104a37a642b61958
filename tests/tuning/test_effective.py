"""Issue 41 case 5, read back: a float the engine ran with is compared with every digit, so a
start that ran 0.9 for an asked 0.9000001 is a mismatch, not "applied" (it was within 1e-6)."""

from __future__ import annotations

from tuning.engine.effective import same
from tuning.engine.params import get_param


def test_a_float_is_applied_only_when_the_engine_ran_that_number() -> None:
    util = get_param("gpu-memory-utilization")
    assert not same(util, 0.9000001, "0.9")
    assert not same(util, 0.9000001, 0.9000002)
    assert same(util, 0.9000001, "0.9000001")
    assert same(util, 0.9, "0.9") and same(util, 0.3, 0.1 + 0.2)  # representation noise only
    assert not same(util, 0.9, "auto")
