"""What vLLM's own lines of one launch say about it: a server log's facts, read in one pass.

A fact is taken only from a line of vLLM's logger (`(EngineCore pid=1235) INFO ...`) whose pid is
a process of the launch (`pids`, the launched process tree; any pid when a text is read without
one): an engine command can print anything, lines that look like vLLM's included, and a line
without the prefix, or naming another pid, is never a fact. Each fact keeps its last value. Where
the launch's own processes disagree on an engine-wide fact (two KV token counts, two versions), or
one process on its own fact (a worker's weights), the disagreement is a `Conflict`: the run shows
it beside its config mismatches. Under data parallelism, ranks that size different KV caches are
such a conflict too: the lab stores one number for a server.

Lines come from `tuning.engine.server_log` (capped before any pattern sees them); every pattern
here is
found by a literal marker first and matched from there, so a line costs time linear in its length.
The interpretation of what is read (a config repr, a phase's seconds) stays with its module:
`tuning.engine.server` (startup facts), `tuning.engine.startup_anatomy` (what vLLM says each part
took),
`tuning.engine.effective` (what the engine runs with).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tuning.engine.log_marks import Marked, marks
from tuning.engine.server_log import Block, Lines, LogLine, log_line

SOURCE = "the server log's own lines"
MAX_ROLES = 64  # process roles kept per launch (vLLM has a handful)
MAX_VALUES = 4  # distinct values a conflict keeps
SHOWN_CHARS = 120  # of a value, in a conflict's words
FOREIGN_PIDS_KEPT = 8
MAX_LOOKED_UP = 256  # pids a following sheet asks the process tree about, at most

# Facts checked for disagreement, in words; "launch": one value for the whole server, "role": one
# per process (a TP worker's weights, an engine rank's config).
CHECKED: dict[str, tuple[str, str]] = {
    "kv_cache_tokens": ("KV cache size (tokens)", "launch"),
    "max_concurrency": ("maximum concurrency", "launch"),
    "max_concurrency_tokens_per_request": ("tokens a request of the maximum concurrency", "launch"),
    "vllm_version": ("vLLM version", "launch"),
    "max_model_len": ("max model len", "launch"),
    "non_default_args": ("non-default args", "launch"),
    "kv_gib_available": ("available KV cache memory (GiB)", "role"),
    "kv_gib_cpu": ("KV cache memory set on the CPU (GiB)", "role"),
    "cpu_kv_budget": ("who sized the CPU KV cache", "role"),
    "weights_gib": ("weights memory (GiB)", "role"),
    "init_engine_seconds": ("init engine seconds", "role"),
    "engine_config": ("engine config line", "role"),
}


@dataclass
class Conflict:
    """One fact the launch's own lines gave different values for; the last is the one kept."""

    fact: str
    values: list[str] = field(default_factory=list)  # distinct, in the order said
    said_by: list[str] = field(default_factory=list)  # "EngineCore pid 1235", one per value

    @property
    def reason(self) -> str:
        label = CHECKED.get(self.fact, (self.fact, ""))[0]
        pairs = zip(self.said_by, self.values, strict=True)
        said = ", then ".join(f"{who} said {_short(value)}" for who, value in pairs)
        return (
            f"{label}: the engine's own log lines disagree ({said}); the lab kept the last, "
            "so the number stored may not be the engine's"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "reason": self.reason}


def _short(value: str) -> str:
    return value if len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS] + "..."


class Sheet:
    """The facts of one log, filled line by line (`feed`); bounded whatever the log holds.

    `pids` is read as it is when a line comes: a sheet that follows a log while its server starts
    is given the server's own set, and `look_up` to call once for a pid it does not hold yet (a
    process started since the last look): after that call, a pid still missing is not ours.
    """

    def __init__(
        self, pids: Collection[int] | None = None, look_up: Callable[[], None] | None = None
    ) -> None:
        self.pids = pids
        self.look_up = look_up
        self._looked_up: set[int] = set()
        self.values: dict[str, Any] = {}
        self.sums: dict[str, float] = {}
        self.seen: set[str] = set()
        self.engine_pids: dict[str, int] = {}
        self.conflicts: dict[str, Conflict] = {}
        self.foreign_lines = 0  # lines that could hold a fact, naming a pid outside the launch
        self.foreign_pids: list[int] = []
        self.complete = True  # False: a deadline cut the read short
        self.bytes_read = 0
        self._said: dict[tuple[str, str], tuple[str, str]] = {}  # (fact, scope) -> (value, who)

    def accepts(self, line: LogLine) -> bool:
        if line.pid is None or line.role is None:
            return False
        if self.pids is None or line.pid in self.pids or self._new_of_ours(line.pid):
            return line.role in self.engine_pids or len(self.engine_pids) < MAX_ROLES
        self.foreign_lines += 1
        if line.pid not in self.foreign_pids and len(self.foreign_pids) < FOREIGN_PIDS_KEPT:
            self.foreign_pids.append(line.pid)
        return False

    def _new_of_ours(self, pid: int) -> bool:
        if self.look_up is None or pid in self._looked_up:
            return False
        if len(self._looked_up) >= MAX_LOOKED_UP:
            return False
        self._looked_up.add(pid)
        self.look_up()
        return self.pids is not None and pid in self.pids

    def feed_block(self, block: Block) -> None:
        """The lines of a block that can hold a fact (one of ANCHORS within its cap)."""
        self.feed_marked(marks(ANCHORS).lines(block))

    def feed_marked(self, lines: Iterable[Marked]) -> None:
        """The lines among `lines` (tuning.engine.log_marks) that hold one of ANCHORS: a follower
        searches a block once for these and its own anchors."""
        for line in lines:
            if not line.held.isdisjoint(ANCHORS):
                self.feed(log_line(line.raw, line.cut))

    def feed(self, line: LogLine) -> None:
        if self.accepts(line):
            assert line.role is not None and line.pid is not None
            self.engine_pids[line.role] = line.pid
            _read(line, self)

    def put(self, fact: str, value: Any, line: LogLine) -> None:
        """`value` is what `line` says `fact` is: the last one wins; a different one said before
        (by the launch, or by this process for a per-process fact) is a conflict."""
        self.values[fact] = value
        if fact not in CHECKED:
            return
        scope = (line.role or "") if CHECKED[fact][1] == "role" else ""
        text, who = str(value), f"{line.role} pid {line.pid}"
        before = self._said.get((fact, scope))
        self._said[(fact, scope)] = (text, who)
        if before is None or before[0] == text:
            return
        found = self.conflicts.get(fact)
        if found is None:
            found = self.conflicts[fact] = Conflict(fact, [before[0]], [before[1]])
        if len(found.values) < MAX_VALUES and text != found.values[-1]:
            found.values.append(text)
            found.said_by.append(who)

    def add(self, fact: str, value: float) -> None:
        self.sums[fact] = self.sums.get(fact, 0.0) + value

    def get(self, fact: str) -> Any:
        return self.values.get(fact)

    def read_record(self) -> dict[str, Any]:
        """How the log was read, for the run's startup record."""
        return {
            "bytes": self.bytes_read,
            "complete": self.complete,
            "foreign_lines": self.foreign_lines,
            "foreign_pids": list(self.foreign_pids),
        }


def read_sheet(
    source: Path | str | Sheet,
    pids: Collection[int] | None = None,
    deadline: float | None = None,
    also: Iterable[Callable[[Block], None]] = (),
) -> Sheet:
    """One pass over a log file (or a text), a block of whole lines at a time: its facts, and
    each block handed to `also` too (e.g. a failed start's words). A Sheet is returned as is."""
    if isinstance(source, Sheet):
        return source
    sheet = Sheet(pids)
    lines = Lines(source, deadline)
    more = list(also)
    for block in lines.blocks():
        sheet.feed_block(block)
        for consume in more:
            consume(block)
    sheet.complete, sheet.bytes_read = lines.complete, lines.bytes_read
    return sheet


# --- the lines --------------------------------------------------------------------------------
_INT = re.compile(r"(\d+)")
_FLOAT = re.compile(r"([\d.]+)")
_GIB = re.compile(r"([\d.]+) ?GiB")
_SECONDS = re.compile(r"([\d.]+) s")
_KV_REST = re.compile(
    r"([\d,]+) tokens(?:, Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x)?"
)
_CPU_KV = re.compile(r"set \(?([\d.]+)(?:/[\d.]+)?\)? $")
_WEIGHTS_FULL = re.compile(r"([\d.]+) ?GiB (?:memory )?and ([\d.]+) s")
_VERSION = re.compile(r"([\w.+-]+)")
_ENGINE_VERSION = re.compile(r"v([\w.+-]+)\)")
_ENGINE_CONFIG = re.compile(r"[^)]*\) with config: ")
_ARGS = re.compile(r"(\{.*\})\s*$")
_TAKES = re.compile(r".*? takes ([\d.]+) s")
_TOOK = re.compile(r".*? took ([\d.]+) s")
_GRAPHS = re.compile(r"([\d.]+) secs?, took ([\d.]+) GiB")
_CACHE_DIR = re.compile(r"(\S+) for vLLM's torch\.compile")
_COMPILE_TOTAL = (
    "torch.compile took ",
    "torch.compile and initial profiling/warmup run together took ",
)
_MEMORY_MARKERS = ("Free memory on device", "GiB for KV cache", "Available KV cache memory")
INIT_ENGINE_MARKER = "init engine (profile, create kv cache, warmup model) took "
# A line can hold a fact only if it holds one of these (each marker `_read` looks for contains
# one): they are found in a whole block at once, so the other lines cost nothing.
ANCHORS = (
    b"KV cache",
    b"Free memory on device",
    b" took ",
    b"Compiling a graph",
    b"torch.compile",
    b"Directly load",
    b"Enforce eager",
    b"server version",
    b"LLM engine (",
    b"max model len",
    b"non-default args",
)


def _at(message: str, marker: str) -> int:
    """Where what follows `marker` starts in `message`; -1 when it is not there."""
    i = message.find(marker)
    return -1 if i < 0 else i + len(marker)


def _num(text: str) -> int:
    return int(text.replace(",", ""))


def _read(line: LogLine, sheet: Sheet) -> None:  # noqa: C901 (one flat dispatch of markers)
    msg = line.message
    if (i := msg.find("KV cache size: ")) >= 0 and (m := _KV_REST.match(msg, i + 15)):
        head = msg[:i]
        device = any(d in head[head.rfind(":") + 1 :] for d in ("CPU", "GPU", "XPU"))
        sheet.put("kv_cache_tokens", _num(m.group(1)), line)
        if device and m.group(2):
            sheet.put("max_concurrency_tokens_per_request", _num(m.group(2)), line)
            sheet.put("max_concurrency", float(m.group(3)), line)
    if (i := _at(msg, "Available KV cache memory: ")) >= 0 and (m := _GIB.match(msg, i)):
        sheet.put("kv_gib_available", float(m.group(1)), line)
    if (i := msg.find("GiB for KV cache")) >= 0 and (m := _CPU_KV.search(msg, 0, i)):
        sheet.put("kv_gib_cpu", float(m.group(1)), line)
        before = msg[: m.start()]
        for word, budget in (("Explicitly ", "explicit"), ("Auto ", "auto")):
            edge = before[: -len(word)][-1:]
            if before.endswith(word) and not (edge.isalnum() or edge == "_"):
                sheet.put("cpu_kv_budget", budget, line)
    if any(marker in msg for marker in _MEMORY_MARKERS):
        sheet.put("memory_line", line.text.strip()[-400:], line)
    if (i := _at(msg, "Model loading took ")) >= 0 and (m := _GIB.match(msg, i)):
        sheet.put("weights_gib", float(m.group(1)), line)
        if full := _WEIGHTS_FULL.match(msg, i):
            sheet.put("weights_reported", (float(full.group(1)), float(full.group(2))), line)
    if (i := _at(msg, "Loading weights took ")) >= 0 and (m := _SECONDS.match(msg, i)):
        sheet.put("load_weights_s", float(m.group(1)), line)
    for marker in _COMPILE_TOTAL:
        if (i := _at(msg, marker)) >= 0 and (m := _SECONDS.match(msg, i)):
            sheet.put("compile_s", float(m.group(1)), line)
    if (i := _at(msg, "Compiling a graph for ")) >= 0 and (m := _TAKES.match(msg, i)):
        sheet.add("compile_graphs_s", float(m.group(1)))
    marker = "Directly load the compiled graph(s) for "
    if (i := _at(msg, marker)) >= 0 and (m := _TOOK.match(msg, i)):
        sheet.add("compile_cache_load_s", float(m.group(1)))
    if "Directly load AOT compilation" in msg:
        sheet.seen.add("aot_load")
    if (i := _at(msg, "Graph capturing finished in ")) >= 0 and (m := _GRAPHS.match(msg, i)):
        sheet.put("graph_capture", (float(m.group(1)), float(m.group(2))), line)
    if (i := _at(msg, INIT_ENGINE_MARKER)) >= 0 and (m := _SECONDS.match(msg, i)):
        sheet.put("init_engine_seconds", float(m.group(1)), line)
    if (i := _at(msg, "Using cache directory: ")) >= 0 and (m := _CACHE_DIR.match(msg, i)):
        sheet.put("compile_cache_dir", m.group(1), line)
    if "Enforce eager set" in msg or "disabling torch.compile" in msg:
        sheet.seen.add("eager")
    if "torch.compile cache is disabled" in msg:
        sheet.seen.add("compile_cache_off")
    i = msg.find("server version ")
    if i >= 0 and msg[:i].endswith(("vLLM ", "vLLM API ")) and (m := _VERSION.match(msg, i + 15)):
        sheet.put("vllm_version", m.group(1), line)
    if (i := _at(msg, "Initializing a V1 LLM engine (")) >= 0:
        if m := _ENGINE_VERSION.match(msg, i):
            sheet.put("vllm_version", m.group(1), line)
        if m := _ENGINE_CONFIG.match(msg, i):
            sheet.put("engine_config", msg[m.end() :], line)
    if (i := _at(msg, "Using max model len ")) >= 0 and (m := _INT.match(msg, i)):
        sheet.put("max_model_len", m.group(1), line)
    if (i := _at(msg, "non-default args: ")) >= 0:
        if m := _ARGS.match(msg, i):
            sheet.put("non_default_args", m.group(1), line)
            sheet.values["non_default_args_cut"] = False
        elif line.cut and msg.startswith("{", i):  # longer than ARGS_CAP: what it starts with
            sheet.put("non_default_args", msg[i:], line)
            sheet.values["non_default_args_cut"] = True
