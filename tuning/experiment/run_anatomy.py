"""Where a run's wall time went, whole: from the previous run's end (or the runner's start) to its
own end, in named parts that follow one another on one clock.

The run unit marks each step as it begins (`RunClock.mark`); a part ends where the next begins, so
the parts tile the run's window and add up to its wall time by construction, whatever happens
(a failed start, a Stop, a lab error: the last part ends when the run is closed). The server's
start is one part here; its own phases are the startup anatomy (tuning.engine.startup_anatomy).
Work done beside a part (the server stopped while its run stores) is listed as `overlapped`, with
its seconds, and not added: the wall time did not pay for it.

Stored on the run (`runs.anatomy_json`) at every mark, so Live shows it as the run goes (`open`:
the last part still runs), and once more when the run ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Every part a run can have, in the order a run reaches them; a key not here is shown as is.
PARTS: dict[str, str] = {
    "runner_start": "the runner's start",
    "between": "between runs (bookkeeping, the next round's plan)",
    "prepare": "the run's row and the server's command",
    "stop": "stopping the previous server",
    "release": "waiting for its port and device memory",
    "sleep": "the other resident server put to sleep",
    "pause": "the other resident server paused (CPU: SIGSTOP once its load drained)",
    "kv_probe": "a first sleep-mode start, measuring the KV budget resident servers share",
    "start": "server start (launch to /health 200)",
    "switch": "switch: the server in hand put to sleep (CPU: paused), this value's woken "
    "(continued, /health answered)",
    "start_failed": "a failed start: its log read, the server stopped",
    "engine_facts": "the engine's own facts read (log, /metrics)",
    "workload": "tokenizer and prompts",
    "loadgen": "the load generator's start",
    "warmup": "warm-up",
    "load": "load (measured)",
    "drain": "drain (counters settle, the result comes back)",
    "storing": "storing",
    # beside the parts (`overlapped`), not added
    "stop_ahead": "the previous server's stop, begun while its run stored",
    "prelaunch_ahead": "this server's spawn and imports, done while the previous one stopped",
}
# The words of the one-line summary: each part counts under one of these (the rest: "other").
GROUPS: dict[str, tuple[str, ...]] = {
    "starting": ("start", "start_failed", "engine_facts", "kv_probe"),
    "switching": ("switch", "sleep", "pause"),
    "stopping": ("stop", "release"),
    "load": ("load",),
    "warm-up": ("warmup",),
    "load generator": ("loadgen",),
    "drain": ("drain",),
    "storing": ("storing",),
    "preparing": ("prepare", "workload"),
}
# The words a summary names whenever they took any time, however little.
ALWAYS_NAMED = ("switching",)
# How far the parts may be from the wall time (the acceptance: within 2 %).
TOLERANCE = 0.02


def label_of(key: str) -> str:
    return PARTS.get(key, key.replace("_", " "))


@dataclass
class RunClock:
    """The parts of one run's window on `time.monotonic()`: `origin` is where it began (the
    previous run's end), `first` the part that began there. `on_change(snapshot)` is called at
    each mark, for the live view."""

    origin: float
    first: str = "between"
    on_change: Callable[[dict[str, Any]], None] | None = None
    marks: list[tuple[str, float]] = field(default_factory=list)
    overlapped: dict[str, float] = field(default_factory=dict)
    closed_at: float | None = None

    def __post_init__(self) -> None:
        if not self.marks:
            self.marks = [(self.first, self.origin)]

    @property
    def current(self) -> str:
        return self.marks[-1][0]

    def mark(self, key: str, at: float | None = None) -> None:
        """The part `key` begins now (or at `at`, never before the part in hand began); marking
        the part in hand again changes nothing."""
        if self.closed_at is not None or key == self.current:
            return
        when = max(self.marks[-1][1], time.monotonic() if at is None else at)
        self.marks.append((key, when))
        self._changed()

    def retime(self, key: str, at: float) -> None:
        """Move the last start of part `key` to `at` (a clock read elsewhere, exact where the
        mark was late), kept between its neighbours; mark it when it was never marked."""
        if self.closed_at is not None:
            return
        found = [i for i, (k, _) in enumerate(self.marks) if k == key]
        if not found:
            self.mark(key, at)
            return
        i = found[-1]
        if i == 0:
            return  # the window's own start stays where it is
        low = self.marks[i - 1][1]
        high = self.marks[i + 1][1] if i + 1 < len(self.marks) else max(at, low)
        self.marks[i] = (key, min(max(at, low), high))
        self._changed()

    def beside(self, key: str, seconds: float) -> None:
        """Work of `seconds` done beside the parts (not on the run's clock): shown, not added."""
        self.overlapped[key] = round(self.overlapped.get(key, 0.0) + max(0.0, seconds), 3)

    def close(self, at: float | None = None) -> dict[str, Any]:
        """End the window (the run's end); the stored anatomy. Closing twice keeps the first."""
        if self.closed_at is None:
            self.closed_at = max(self.marks[-1][1], time.monotonic() if at is None else at)
        return self.snapshot()

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        """The anatomy so far: closed, or open with the part in hand running until `now`."""
        end = self.closed_at
        is_open = end is None
        if end is None:
            end = max(self.marks[-1][1], time.monotonic() if now is None else now)
        parts: list[dict[str, Any]] = []
        for i, (key, start) in enumerate(self.marks):
            stop = self.marks[i + 1][1] if i + 1 < len(self.marks) else end
            parts.append(
                {
                    "key": key,
                    "label": label_of(key),
                    "start_s": round(start - self.origin, 3),
                    "seconds": round(stop - start, 3),
                }
            )
        wall = round(end - self.origin, 3)
        return {
            "wall_s": wall,
            "parts": parts,
            "parts_sum_s": round(sum(float(p["seconds"]) for p in parts), 3),
            "open": is_open,
            "current": self.current if is_open else None,
            "overlapped": [
                {"key": k, "label": label_of(k), "seconds": sec}
                for k, sec in self.overlapped.items()
            ],
        }

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.snapshot())


# -- reading stored anatomies ---------------------------------------------------------------------
def parts_of(anat: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The stored parts, each with a key and its seconds (a malformed entry is left out)."""
    if not isinstance(anat, Mapping):
        return []
    out = []
    for part in anat.get("parts") or ():
        if isinstance(part, Mapping) and isinstance(part.get("seconds"), int | float):
            out.append({"key": str(part.get("key")), "seconds": float(part["seconds"])})
    return out


def adds_up(anat: Mapping[str, Any] | None, tolerance: float = TOLERANCE) -> bool:
    """Do the parts add up to the stored wall time within `tolerance`?"""
    if not isinstance(anat, Mapping) or not isinstance(anat.get("wall_s"), int | float):
        return False
    wall = float(anat["wall_s"])
    return abs(sum(p["seconds"] for p in parts_of(anat)) - wall) <= tolerance * max(wall, 1e-9)


def grouped(anats: Iterable[Mapping[str, Any] | None], outside_s: float = 0.0) -> dict[str, float]:
    """Seconds per summary word over `anats` (GROUPS; the rest is "other"), plus `outside_s` (an
    experiment's time outside its runs) under "other"."""
    where = {key: word for word, keys in GROUPS.items() for key in keys}
    out: dict[str, float] = {}
    for anat in anats:
        for part in parts_of(anat):
            word = where.get(part["key"], "other")
            out[word] = out.get(word, 0.0) + part["seconds"]
    if outside_s > 0:
        out["other"] = out.get("other", 0.0) + outside_s
    return out


def _amount(seconds: float, minutes: bool) -> str:
    return f"{seconds / 60:.1f}" if minutes else f"{seconds:.1f}"


def time_spent_line(groups: Mapping[str, float], total_s: float | None = None) -> str:
    """'9.0 min: 4.6 starting, 2.0 load, 1.1 stopping, 0.9 warm-up, 0.4 other, <0.1 switching'
    (largest first; seconds under 90 s; a part that rounds to 0.0 is left out, but switching is
    named whenever there was any). Empty without parts."""
    total = sum(groups.values()) if total_s is None else total_s
    if total <= 0 or not groups:
        return ""
    minutes = total >= 90
    unit = "min" if minutes else "s"
    items = sorted(((s, w) for w, s in groups.items()), key=lambda item: -item[0])
    shown = [(_amount(s, minutes), w, s) for s, w in items]
    # switching is named whenever there was any (a few 0.13 s switches in a 9 min experiment)
    words = ", ".join(
        f"{'<0.1' if amount == '0.0' else amount} {w}"
        for amount, w, s in shown
        if amount != "0.0" or (w in ALWAYS_NAMED and s > 0)
    )
    return f"{_amount(total, minutes)} {unit}: {words}"


def describe(anat: Mapping[str, Any] | None) -> str:
    """One run's anatomy in a line: its wall time and every part over 0.05 s, in order."""
    if not isinstance(anat, Mapping) or not anat.get("parts"):
        return ""
    shown = [p for p in anat["parts"] if p.get("seconds", 0) >= 0.05]
    text = " · ".join(f"{p.get('label') or label_of(p['key'])} {p['seconds']:.1f} s" for p in shown)
    beside = [p for p in anat.get("overlapped") or () if p.get("seconds", 0) >= 0.05]
    if beside:
        text += " · beside them: " + ", ".join(
            f"{p.get('label') or label_of(p['key'])} {p['seconds']:.1f} s" for p in beside
        )
    head = "so far" if anat.get("open") else "run"
    return f"{head} {float(anat.get('wall_s') or 0):.1f} s: {text}"


def timeline_rows(runs: Iterable[tuple[str, Mapping[str, Any] | None]]) -> list[dict[str, Any]]:
    """(label, anatomy) per run -> one row per part, in the shape of the startup timeline's rows
    (tuning.present.charts.startup), so the same chart draws it."""
    rows = []
    for label, anat in runs:
        if not isinstance(anat, Mapping):
            continue
        for i, part in enumerate(anat.get("parts") or ()):
            start = float(part.get("start_s") or 0.0)
            seconds = float(part.get("seconds") or 0.0)
            key = str(part.get("key"))
            rows.append(
                {
                    "run": label,
                    "phase": part.get("label") or label_of(key),
                    "key": key,
                    "order": list(PARTS).index(key) if key in PARTS else len(PARTS) + i,
                    "start_s": round(start, 3),
                    "end_s": round(start + seconds, 3),
                    "seconds": round(seconds, 3),
                }
            )
    return rows
