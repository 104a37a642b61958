"""Where a server's start went: the phases between launch and the first /health 200.

A restart is most of what a decision costs (82-117 s cold, 40-69 s warm on the H200; 25-300 s on
the 2-core test bed), so the lab splits `time_to_healthy_s` into the engine's own milestones. vLLM's
log timestamps have one-second resolution and none for the launch itself, so the lab stamps each
milestone with its own clock when the line reaches the log file (`LogStamps`, read every 0.1 s).
The phases run from one milestone to the next and the last ends at healthy: they add up to
`time_to_healthy_s` by construction. Beside them, what vLLM reports about itself (weights, compile,
CUDA-graph capture, in its own seconds) and whether torch.compile came from its cache.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tuning.engine.log_facts import ANCHORS as FACT_ANCHORS
from tuning.engine.log_facts import Sheet, read_sheet
from tuning.engine.log_marks import Marked, marks
from tuning.engine.server_log import CHUNK, Block, Blocks

POLL_S = 0.1
# (key, what the phase that ends at this milestone did, the first log line that marks it), in
# the order vLLM reaches them. A milestone a backend never logs (CUDA graphs on CPU, a worker
# process on one GPU) is left out and its time falls to the next phase.
MILESTONES: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    # a prelaunched start (tuning.engine.prelaunch): its imports, done before it was let go
    (
        "prelaunch_imports",
        "imports (prelaunched)",
        re.compile(r"tuning-lab prelaunch: imports took"),
    ),
    ("api_process", "API server up (imports, arguments)", re.compile(r"\(APIServer pid=\d+\)")),
    ("engine_process", "engine core started", re.compile(r"Initializing a V1 LLM engine")),
    ("worker_process", "worker started", re.compile(r"\((?:Vllm)?Worker[\w-]* pid=\d+\)")),
    (
        "weights",
        "model loaded",
        re.compile(r"Model loading took|Loading weights took|Initializing model took"),
    ),
    (
        "compile",
        "torch.compile",
        re.compile(r"torch\.compile (?:took|and initial profiling/warmup run together took)"),
    ),
    (
        "kv_cache",
        "memory profiled, KV cache allocated",
        re.compile(r"KV cache size: [\d,]+ tokens"),
    ),
    ("graphs", "CUDA graphs captured", re.compile(r"Graph capturing finished in")),
    ("engine_ready", "engine warmed up", re.compile(r"init engine \(profile, create kv cache")),
    (
        "api_listening",
        "API routes up",
        re.compile(r"Starting vLLM (?:API )?server on|Uvicorn running on|Application startup"),
    ),
)
# The same patterns on bytes, for a block of lines at once (tuning.engine.server_log), each on the
# lines that hold a literal its every match holds (tuning.engine.log_marks finds them).
_ON_BYTES = {key: re.compile(rx.pattern.encode()) for key, _, rx in MILESTONES}
_ANCHORS: dict[str, tuple[bytes, ...]] = {
    "prelaunch_imports": (b"tuning-lab prelaunch: imports took",),
    "api_process": (b"(APIServer pid=",),
    "engine_process": (b"Initializing a V1 LLM engine",),
    "worker_process": (b"Worker",),
    "weights": (b" took ",),
    "compile": (b"torch.compile ",),
    "kv_cache": (b"KV cache size: ",),
    "graphs": (b"Graph capturing finished in",),
    "engine_ready": (b"init engine (profile",),
    "api_listening": (b"Starting vLLM ", b"Uvicorn running on", b"Application startup"),
}
HEALTHY = ("healthy", "first /health 200")
LABELS = {key: label for key, label, _ in MILESTONES} | {HEALTHY[0]: HEALTHY[1]}


class LogStamps:
    """Follows a server's log from its launch and stamps each milestone's first line with the
    lab's clock (seconds since `t0`, `time.monotonic()`), in a daemon thread. Given a `sheet`
    (tuning.engine.log_facts), it fills it from the same reads: the log is read once, while the
    server
    starts, and what is left at healthy is what was written since the last read."""

    def __init__(self, path: Path, t0: float, sheet: Sheet | None = None):
        self.path = path
        self.t0 = t0
        self.sheet = sheet
        self.stamps: dict[str, float] = {}
        self._pending = [key for key, _, _ in MILESTONES]
        self._offset = 0
        self._blocks = Blocks()  # a line being written is held only up to its cap
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._follow, name="log-stamps", daemon=True)

    def start(self) -> LogStamps:
        self._thread.start()
        return self

    def _follow(self) -> None:
        while not self._stop.wait(POLL_S):
            self.read(follow=True)

    def read(self, deadline: float | None = None, follow: bool = False) -> bool:
        """Take in the lines written since the last read (in chunks, until `deadline`; the
        follower's own reads end when it is stopped); without a sheet, nothing is read once every
        milestone is stamped. False: the deadline came first."""
        with self._lock:
            if not self._pending and self.sheet is None:
                return True
            try:
                with open(self.path, "rb") as fh:
                    fh.seek(self._offset)
                    while chunk := fh.read(CHUNK):
                        now = time.monotonic() - self.t0
                        self._offset += len(chunk)
                        for block in self._blocks.feed(chunk):
                            self._take(block, now)
                        if not self._pending and self.sheet is None:
                            return True
                        if deadline is not None and time.monotonic() > deadline:
                            return False
                        if follow and self._stop.is_set():  # stop() reads on, to its deadline
                            return True
            except OSError:
                pass
            return True

    def _take(self, block: Block, now: float) -> None:
        """Stamp each pending milestone that a line of `block` shows within its cap; the sheet
        takes the block's facts. The block is searched once, for the sheet's anchors and those of
        the milestones still pending (tuning.engine.log_marks): a milestone a backend never logs
        costs no pass of its own."""
        anchors = tuple(a for key in self._pending for a in _ANCHORS[key])
        if self.sheet is not None:
            anchors = FACT_ANCHORS + anchors
        for line in marks(anchors).lines(block):
            for key in list(self._pending):
                if _shows(block.data, line, _ON_BYTES[key], _ANCHORS[key]):
                    self.stamps[key] = round(now, 3)
                    self._pending.remove(key)
            if self.sheet is not None:
                self.sheet.feed_marked((line,))

    def stop(self, until_s: float | None = None, deadline: float | None = None) -> dict[str, float]:
        """One last read (until `deadline`; a sheet it did not finish says so), then the stamps;
        none later than `until_s` (a line read after the healthy answer was written before it).
        A line still being written is left out: half a line is no milestone, and no fact."""
        if self._stop.is_set():  # stopped before: nothing more is read (the load's own lines)
            return dict(self.stamps)
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        done = self.read(deadline)
        if self.sheet is not None:
            self.sheet.complete = self.sheet.complete and done
            self.sheet.bytes_read = self._offset
        if until_s is not None:
            self.stamps = {k: min(v, until_s) for k, v in self.stamps.items()}
        return dict(self.stamps)


def _shows(data: bytes, line: Marked, rx: re.Pattern[bytes], anchors: tuple[bytes, ...]) -> bool:
    """Does `line` of `data` hold one of `anchors` and match `rx` within its cap (the line's
    first match, as a line-by-line search would see it)?"""
    if line.held.isdisjoint(anchors):
        return False
    m = rx.search(data, line.start, line.end)
    return m is not None and m.end() - line.start <= len(line.raw)


def phases(stamps: dict[str, float], healthy_s: float) -> list[dict[str, Any]]:
    """Launch -> each milestone seen -> healthy, in time order; the seconds add up to healthy_s."""
    order = {key: i for i, (key, _, _) in enumerate(MILESTONES)}
    seen = sorted(
        ((min(t, healthy_s), key) for key, t in stamps.items() if key in order),
        key=lambda item: (item[0], order[item[1]]),
    )
    out: list[dict[str, Any]] = []
    start = 0.0
    for end, key in [*seen, (healthy_s, HEALTHY[0])]:
        out.append(
            {
                "key": key,
                "label": LABELS[key],
                "start_s": round(start, 3),
                "end_s": round(end, 3),
                "seconds": round(end - start, 3),
            }
        )
        start = end
    return out


def reported(log: str | Sheet) -> dict[str, Any]:
    """What vLLM's own log lines say each part took (its clock, its words); None: not said."""
    sheet = read_sheet(log)
    said, sums = sheet.values, sheet.sums
    out: dict[str, Any] = {}
    if weights := said.get("weights_reported"):
        out["weights_gib"], out["weights_s"] = weights
    elif "load_weights_s" in said:
        out["weights_s"] = said["load_weights_s"]
    if "compile_s" in said:
        out["compile_s"] = said["compile_s"]
    if "compile_graphs_s" in sums:
        out["compile_graphs_s"] = round(sums["compile_graphs_s"], 3)
    if "compile_cache_load_s" in sums:
        out["compile_cache_load_s"] = round(sums["compile_cache_load_s"], 3)
    if graphs := said.get("graph_capture"):
        out["graph_capture_s"], out["graph_capture_gib"] = graphs
    if "init_engine_seconds" in said:
        out["init_engine_s"] = said["init_engine_seconds"]
    return out


def compile_cache(log: str | Sheet) -> dict[str, Any]:
    """Whether torch.compile ran, and whether it came from vLLM's compile cache: `hit` (every
    graph loaded), `miss` (every graph compiled), `partial`, `disabled`, `eager` (no compile)."""
    sheet = read_sheet(log)
    hit = "compile_cache_load_s" in sheet.sums or "aot_load" in sheet.seen
    miss = "compile_graphs_s" in sheet.sums
    if hit or miss:
        state = "partial" if hit and miss else "hit" if hit else "miss"
    elif "compile_cache_off" in sheet.seen:
        state = "disabled"
    elif "eager" in sheet.seen:
        state = "eager"
    else:
        state = None
    return {"state": state, "dir": sheet.get("compile_cache_dir")}


# Compile-cache states of a start that compiled (a cold start): not a warm time to healthy.
COLD = frozenset({"miss", "partial"})


def compile_state(run: Mapping[str, Any]) -> str | None:
    """The compile-cache state of a stored run's start (`compile_cache`), None when unknown (no
    start of its own, or stored before the lab read it)."""
    startup = run.get("startup")
    anat = startup.get("anatomy") if isinstance(startup, Mapping) else None
    cache = anat.get("compile_cache") if isinstance(anat, Mapping) else None
    state = cache.get("state") if isinstance(cache, Mapping) else None
    return str(state) if isinstance(state, str) else None


def anatomy(stamps: dict[str, float], healthy_s: float, log: str | Sheet) -> dict[str, Any]:
    """The start of one server, as stored in `startup_json.anatomy` and shown on Live/Compare."""
    sheet = read_sheet(log)
    parts = phases(stamps, healthy_s)
    return {
        "healthy_s": healthy_s,
        "phases": parts,
        "phases_sum_s": round(sum(p["seconds"] for p in parts), 3),
        "reported": reported(sheet),
        "compile_cache": compile_cache(sheet),
        "stamped_every_s": POLL_S,
    }


def anatomy_text(anat: dict[str, Any]) -> str:
    """One line for a page or the CLI: where the seconds went and what the compile cache did."""
    parts = [p for p in anat.get("phases") or () if p["seconds"] >= 0.05]
    text = " · ".join(f"{p['label']} {p['seconds']:.1f} s" for p in parts)
    cache = (anat.get("compile_cache") or {}).get("state")
    said = anat.get("reported") or {}
    if cache in ("hit", "miss", "partial"):
        seconds = said.get("compile_s")
        took = f", torch.compile {seconds:.1f} s by vLLM's count" if seconds is not None else ""
        text += f" · compile cache: {cache}{took}"
    elif cache:
        text += f" · compile: {cache}"
    return f"healthy after {anat.get('healthy_s', 0):.1f} s: {text}"


def phase_rows(runs: Iterable[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """(label, anatomy) per run -> one row per run and phase, for the timeline chart."""
    return [
        {"run": label, "phase": p["label"], "key": p["key"], "order": i, **p}
        for label, anat in runs
        for i, p in enumerate(anat.get("phases") or ())
    ]


def phase_table(sides: Iterable[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """(side label, its runs' anatomies) -> one row per phase with each side's mean seconds, and
    a last row with each side's compile-cache states: Compare's startup rows."""
    sides = list(sides)
    rows: list[dict[str, Any]] = []
    for key, label in [(k, lbl) for k, lbl, _ in MILESTONES] + [HEALTHY]:
        row: dict[str, Any] = {"phase": label}
        for side, anats in sides:
            secs = [p["seconds"] for a in anats for p in a.get("phases") or () if p["key"] == key]
            row[side] = round(sum(secs) / len(anats), 1) if secs and anats else None
        if any(row[side] is not None for side, _ in sides):
            rows.append(row)
    if rows:
        cache_row: dict[str, Any] = {"phase": "compile cache"}
        for side, anats in sides:
            states = [(a.get("compile_cache") or {}).get("state") or "?" for a in anats]
            cache_row[side] = " ".join(states) or None
        rows.append(cache_row)
    return rows
