"""Server-sent events -> one `RequestRecord`: TTFT, ITL, usage and the outcome of a response.

Why it works on bytes: vLLM sends one SSE event per token, so this is the client's hot path. A read
that holds only content chunks is handled with a few C-level `bytes.count/find` calls, with no JSON
parsing and no per-chunk objects beyond the ITL floats the record keeps. Only the first content
chunk, the usage chunk, errors and anything unusual are parsed (`classify`).
A stream that ends without a `usage` chunk is a failure (`no_usage`), its timings kept: the lab
never counts chunks as tokens, and a silent fallback would mix two ways of counting in one number.
A `usage` that cannot be true (`core.plausible`: a count that is negative, not whole or not
finite, more output tokens than max_tokens asked, more input tokens than the request could hold)
fails the same way (`implausible_usage`), its numbers kept out of the record and quoted in its
error; checked once per request in `finish`, never per chunk.
"""

from __future__ import annotations

import json
import time
from itertools import repeat
from typing import Any

from core.plausible import count, input_tokens_problem, output_tokens_problem
from core.records import RequestRecord
from core.redact import scrub_key

ERROR_EXCERPT = 300  # characters of a server's error body kept in a record

_SEP = b"\n\n"
_CONTENT = b'"choices":[{'
_ERROR_KEY = b'"error":'
_USAGE = b'"usage":{'
_DONE = b"[DONE]"


class SSEReader:
    """One response being read: SSE events -> the record's TTFT, ITL, usage and outcome.

    Every read is stamped once (`t`): chunks that arrived together get ITL 0 after the first, which
    is what happened on the wire. Runs of plain content chunks are counted in bulk with C-level
    `bytes.count/find`; the first chunk, usage, [DONE], errors and anything unusual go through
    `classify` one by one.
    """

    __slots__ = (
        "rec",
        "st",
        "itl",
        "last",
        "first",
        "done",
        "usage",
        "fail",
        "pending",
        "asked",
        "kept_alive",
    )

    def __init__(
        self, rec: RequestRecord, st: float, asked: tuple[int | None, int] = (None, 0)
    ) -> None:
        """`asked`: what the request asked for, for the usage check: (max_tokens, body bytes)."""
        self.rec = rec
        self.st = st
        self.itl = rec.itl
        self.last = st
        self.first = True
        self.done = False
        self.usage: Any = None  # the server's `usage` as it came: checked in finish()
        self.fail: tuple[str, str] | None = None
        self.pending = b""
        self.asked = asked
        # Only comments so far (keep-alives, no data): the stream has begun, so its silence of
        # data counts toward the stall timeout from the request's start (client._sweep_stalls).
        self.kept_alive = False

    def stalled(self, limit: float) -> None:
        """No data for `limit` s after the first token, or only comments since it was sent."""
        if self.first:
            self.fail = ("stalled", f"only keep-alive comments, no data, for {limit:g} s")
        else:
            self.fail = ("stalled", f"no data for {limit:g} s after the first token")

    def http_error(self, status: int, reason: str, raw: bytes) -> None:
        excerpt = raw.decode("utf-8", "replace").strip()[:ERROR_EXCERPT]
        self.fail = ("http", f"HTTP {status} {reason}: {excerpt}")

    def feed(self, data: bytes, t: float) -> bool:
        """The body bytes of one read, all received at `t`; False when the stream must stop."""
        if self.pending:
            data = self.pending + data
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        cut = data.rfind(_SEP)
        if cut < 0:
            self.pending = data
            return True
        size = len(data)
        self.pending = data[cut + 2 :] if cut + 2 < size else b""
        first = self.first
        if (
            not first
            and cut + 2 == size
            and data.find(_SEP, 0, cut) < 0
            and _CONTENT in data
            and _ERROR_KEY not in data
            and _USAGE not in data
        ):
            # One whole content event, as each token arrives from a server that keeps up.
            self.itl.append(t - self.last)
            self.last = t
            return True
        itl = self.itl
        last = self.last
        bulk = not first
        pos = 0
        while pos <= cut:
            if bulk:
                lc = data.rfind(_CONTENT, pos, cut)
                if lc >= 0:
                    le = data.find(_SEP, lc, cut)
                    if le < 0:
                        le = cut
                    n = data.count(_SEP, pos, le) + 1
                    if (
                        data.count(_CONTENT, pos, le) == n
                        and data.find(_ERROR_KEY, pos, le) < 0
                        and data.find(_USAGE, pos, le) < 0
                    ):
                        itl.append(t - last)  # n chunks that arrived together
                        if n > 1:
                            itl.extend(repeat(0.0, n - 1))
                        last = t
                        pos = le + 2
                        continue
                bulk = False  # nothing left to bulk, or a mixed run
            end = data.find(_SEP, pos, cut)
            if end < 0:
                end = cut
            kind, obj = classify(data[pos:end])
            pos = end + 2
            if kind == "content":
                if first:
                    first = False
                    bulk = True
                    self.rec.ttft = t - self.st
                else:
                    itl.append(t - last)
                last = t
                if obj is not None and obj.get("usage"):
                    self.usage = obj["usage"]
            elif kind == "usage":
                self.usage = obj["usage"] if obj is not None else None
            elif kind == "done":
                self.done = True
            elif kind == "error":
                self.fail = ("stream_error", _error_text(obj))
                self.first, self.last = first, last
                return False
            elif first:  # a comment before any data (a content chunk never comes here)
                self.kept_alive = True
        self.first, self.last = first, last
        return True

    def finish(self) -> None:
        """The body ended: read a last event that had no blank line, then decide the outcome."""
        if self.pending.strip():
            pending, self.pending = self.pending, b""
            if not self.feed(pending + _SEP, time.perf_counter()):
                return
        if self.first:
            self.fail = ("early_end", "the stream ended without any choices chunk")
        elif not self.done:
            self.fail = ("early_end", "the stream ended without [DONE]")
        elif self.usage is None:
            self.fail = (
                "no_usage",
                "the stream had no usage chunk; output tokens unknown "
                "(the lab does not count chunks as tokens)",
            )
        elif not isinstance(self.usage, dict):
            words = f"server's usage is {str(self.usage)[:ERROR_EXCERPT]!r}, not an object"
            self.fail = ("implausible_usage", words)
        elif self.usage.get("completion_tokens") is None:
            self.fail = ("no_usage", "the usage chunk had no completion_tokens")
        else:
            self._take_usage(self.usage)

    def _take_usage(self, usage: dict[str, Any]) -> None:
        """The usage's token counts into the record, or `implausible_usage` when they cannot be
        true (then neither is kept: one lie makes the other unsure)."""
        max_tokens, request_bytes = self.asked
        chunks = 1 + len(self.itl)  # content chunks: the first, then one per gap
        output, prompt = usage.get("completion_tokens"), usage.get("prompt_tokens")
        problems = [
            p
            for p in (
                output_tokens_problem(output, chunks, max_tokens),
                input_tokens_problem(prompt, request_bytes),
            )
            if p
        ]
        if problems:
            self.fail = ("implausible_usage", "; ".join(problems))
            return
        self.rec.output_tokens = count(output)
        self.rec.prompt_tokens = count(prompt)

    def close(self, t0: float, secret: str | None) -> None:
        """Write the outcome into the record: times relative to t0, the error text scrubbed."""
        rec = self.rec
        if not self.first:
            rec.end = self.last - t0
        if self.fail is None:
            rec.ok = True
        else:
            rec.ok = False
            rec.error_kind = self.fail[0]
            rec.error = scrub_key(self.fail[1], secret)[: ERROR_EXCERPT + 100]


def classify(event: bytes) -> tuple[str, dict[str, Any] | None]:
    """One SSE event -> (kind, parsed JSON or None). Kinds: content, usage, done, error, skip.

    Content chunks are recognised without parsing when they look like vLLM's compact JSON; anything
    else (spaced JSON, usage, errors, unknown events) is parsed so nothing is misread.
    """
    event = event.strip()
    if not event or event.startswith(b":"):
        return "skip", None
    if event.startswith(b"data:") and b"\n" not in event:
        payload = event[5:].strip()
    else:
        lines = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
        if not lines:
            return "skip", None
        payload = b"\n".join(lines)
    if payload == _DONE:
        return "done", None
    if _CONTENT in payload and _ERROR_KEY not in payload and _USAGE not in payload:
        return "content", None
    try:
        obj = json.loads(payload)
    except ValueError:
        return "error", {
            "error": {
                "message": "unparseable stream event: " + payload[:200].decode("utf-8", "replace")
            }
        }
    if not isinstance(obj, dict):
        return "error", {"error": {"message": f"unexpected stream event: {str(obj)[:200]}"}}
    if "error" in obj or obj.get("object") == "error":
        return "error", obj
    if obj.get("choices"):
        return "content", obj
    if obj.get("usage"):
        return "usage", obj
    return "skip", None


def _error_text(obj: dict[str, Any] | None) -> str:
    if not obj:
        return "error event in the stream"
    err = obj.get("error", obj)
    if isinstance(err, dict):
        msg = err.get("message") or json.dumps(err)[:ERROR_EXCERPT]
        code = err.get("code") or err.get("type")
        return f"error event in the stream: {msg}" + (f" ({code})" if code else "")
    return f"error event in the stream: {err}"
