"""Issue 38, item 4 shown: an experiment's resident engines in a user's words, from what its runner
stored: switches and starts, the check with its numbers (each side's mean, the interval, the
verdict), a fall back with its reason, and the note its verdict carries when it fell back or its
check differs. The checks here are the real check (tuning.experiment.resident_check) over runs."""

from __future__ import annotations

from typing import Any

from core.status import Status
from tuning.compare.resident_words import (
    NO_REPEATS,
    check_line,
    resident_json,
    resident_lines,
    resident_note,
)
from tuning.experiment.resident_check import resident_check

KEYS = ("output_throughput",)


def _runs(restarted: list[float], switched: list[float]) -> list[dict[str, Any]]:
    runs = []
    for mode, values in (("start", restarted), ("switch", switched)):
        for v in values:
            runs.append(
                {
                    "status": Status.DONE,
                    "value": 16,
                    "startup": {"resident": mode},
                    "output_throughput": v,
                }
            )
    return runs


def _state(check: dict[str, Any], fallback: str | None = None) -> dict[str, Any]:
    state = {"asked": "auto", "used": True, "switches": 4, "starts": 2, "restart_every": 3}
    return {**state, "check": check, **({"fallback": fallback} if fallback else {})}


def test_a_check_that_differs_is_said_with_its_numbers_and_the_verdict_notes_it() -> None:
    check = resident_check(_runs([100.0, 101.0, 99.0], [150.0, 151.0, 149.0]), KEYS)
    assert check["verdict"] == "differs"
    line = check_line(check)
    assert line.startswith("resident check: differs (switched runs differ from restarted ones)")
    # the numbers: each side's runs, its mean, the interval of the change and the verdict
    assert ": value 16: 3 restarted, 3 switched" in line
    assert "output throughput 100 tok/s restarted vs 150 tok/s switched" in line
    assert "% .. +" in line and "better)" in line
    state = _state(check, fallback=f"the check: {check['why']}")
    lines = resident_lines(state)
    assert lines[0].startswith("resident engines: 4 switches, 2 starts (a switch: ")
    assert "a real restart every 3 rounds" in lines[0]
    assert lines[1] == line
    assert lines[2] == f"resident engines fell back to restarts: the check: {check['why']}"
    note = resident_note(state)
    assert note is not None and note.startswith("Note: resident engines fell back to restarts")
    assert "4 of its runs were on a switched (slept, then woken) server" in note


def test_a_check_that_differs_after_another_fall_back_is_noted_too() -> None:
    check = resident_check(_runs([100.0, 101.0, 99.0], [150.0, 151.0, 149.0]), KEYS)
    note = resident_note({**_state(check), "used": True})
    assert note is not None and note.startswith("Note: the resident check differs (")


def test_an_equivalent_check_needs_no_note() -> None:
    check = resident_check(_runs([100.0, 100.1, 99.9, 100.0], [100.0, 99.9, 100.1, 100.0]), KEYS)
    assert check["verdict"] == "equivalent"
    state = _state(check)
    assert (
        "resident check: equivalent (switched and restarted runs give equivalent"
        in (resident_lines(state)[1])
    )
    assert resident_note(state) is None
    out = resident_json(state)
    assert out is not None and out["check"]["verdict"] == "equivalent" and out["note"] is None
    assert (out["switches"], out["starts"], out["fallback"]) == (4, 2, None)


def test_an_undecided_check_says_so() -> None:
    check = resident_check(_runs([100.0], [101.0]), KEYS)
    assert check_line(check).startswith("resident check: undecided (too few runs a side")


def test_a_fall_back_says_why_and_the_verdict_notes_it() -> None:
    state = {"asked": "auto", "used": True, "switches": 1, "starts": 2}
    state["fallback"] = "sleep mode failed: POST /sleep answered 500"
    assert resident_lines(state)[-1] == (
        "resident engines fell back to restarts: sleep mode failed: POST /sleep answered 500"
    )
    assert "1 of its runs" in str(resident_note(state))


def test_not_used_is_said_only_when_it_needs_saying() -> None:
    off = {"asked": "off", "used": False, "why_not": "--resident off"}
    assert resident_lines(off) == [
        "resident engines not used: --resident off; every run restarted its server"
    ]
    assert resident_lines({"asked": "auto", "used": False, "why_not": NO_REPEATS}) == []
    assert resident_note(off) is None
    assert resident_lines(None) == [] and resident_json(None) is None
    assert resident_lines({"asked": "auto"}) == []  # asked, never run: nothing to say yet


def test_a_cpu_vllms_servers_are_said_paused_not_asleep() -> None:
    check = resident_check(_runs([100.0, 101.0], [100.5, 100.2]), KEYS)
    paused = {**_state(check, fallback="RAM for a second server: ..."), "parked": "paused"}
    lines = resident_lines(paused)
    assert (
        "the server in hand paused (no CPU used, its RAM kept) and the value's continued"
        in (lines[0])
    )
    assert "put to sleep" not in " ".join(lines)
    assert "on a switched (paused, then continued) server" in (resident_note(paused) or "")
    asleep = _state(check, fallback="sleep mode failed")
    assert "put to sleep and the value's woken" in resident_lines(asleep)[0]
    assert "(slept, then woken)" in (resident_note(asleep) or "")
