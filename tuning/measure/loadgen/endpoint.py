"""Can this endpoint be used as given? The control calls, made with the `openai` package: list the
served models (GET /v1/models) and, before an experiment on an attached endpoint, a one-request
probe (one streamed token). Its typed errors become a message that says what to check: the key
(authentication, permission), the base URL (not found, refused, no answer) or the model name. The
per-chunk load path stays the lab's own client (tuning.measure.loadgen.client).

The probe is bounded: it reads its stream itself (the lab's SSE classifier,
tuning.measure.loadgen.sse) up
to the first data event, and ends with what it saw when none came within its total deadline, or
when the server sent only keep-alive comments for its stall deadline (a stream held open saying
nothing, which no read timeout ends), or one event grew past `PROBE_EVENT_MAX` bytes.

The API key comes from OPENAI_API_KEY or an explicit argument, never a flag or argv; it is sent as a
Bearer header (no header at all without a key) and `scrub_key` takes it out of every error text the
lab stores or prints.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from core.redact import display_url, scrub_key
from tuning.measure.traffic.workload import WorkloadError, server_root

if TYPE_CHECKING:
    import openai

PROBE_PROMPT = "Hello"
PROBE_TIMEOUT_S = 30.0  # the probe's total deadline
PROBE_STALL_S = 10.0  # how long its stream may send only keep-alive comments
PROBE_EVENT_MAX = 1 << 20  # bytes of one unfinished event the probe holds before giving up


class EndpointError(RuntimeError):
    """The endpoint cannot be used as given; the message says what to check."""


def api_key_from_env() -> str | None:
    """The only source of the key besides an explicit argument: never a flag, never argv."""
    key = os.environ.get("OPENAI_API_KEY", "").strip()
    return key or None


def _root(base_url: str) -> str:
    try:
        return server_root(base_url)
    except WorkloadError as exc:
        raise EndpointError(f"{exc}; check the base URL") from None


def _client(root: str, key: str | None, timeout_s: float) -> tuple[openai.OpenAI, dict[str, Any]]:
    """A client without retries (a control call says what is wrong at once) and the per-call
    headers: no Authorization header at all when there is no key."""
    import openai  # lazily: a few seconds to import, and only control calls need it

    client = openai.OpenAI(
        base_url=root + "/v1", api_key=key or "unused", max_retries=0, timeout=timeout_s
    )
    headers: dict[str, Any] = {} if key else {"Authorization": openai.Omit()}
    return client, headers


def plain_error(
    exc: Exception, shown: str, call: str, key: str | None, timeout_s: float, model: str = ""
) -> EndpointError:
    """The lab's plain message for one of the `openai` package's typed errors."""
    import openai

    code = getattr(exc, "status_code", None)
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
        what = "no API key was sent" if not key else "the API key was refused"
        return EndpointError(f"{shown}{call} answered HTTP {code}: {what}; check OPENAI_API_KEY")
    if isinstance(exc, openai.NotFoundError):
        if call.endswith("/models"):
            return EndpointError(
                f"{shown}{call} answered HTTP 404: this is not an OpenAI-compatible server root; "
                "check the base URL"
            )
        return EndpointError(
            f"{shown}{call} answered HTTP 404 for model {model!r}: "
            f"{scrub_key(_message(exc), key)}; check the model name"
        )
    if isinstance(exc, openai.APITimeoutError):
        why = f"no answer in {timeout_s:g} s"
    elif isinstance(exc, openai.APIConnectionError):
        cause = str(exc.__cause__ or exc)
        why = "connection refused" if "refused" in cause.lower() else scrub_key(cause, key)
    elif isinstance(exc, openai.APIStatusError):
        return EndpointError(
            f"{shown}{call} answered HTTP {code}: {scrub_key(_message(exc), key)}; check the base "
            "URL, the model name and that the server is healthy"
        )
    elif isinstance(exc, openai.APIError):  # an error object inside a 200 stream
        return EndpointError(
            f"{shown}{call} answered an error: {scrub_key(_message(exc), key)}; check the model "
            "name and that the server is healthy"
        )
    else:
        why = scrub_key(f"{type(exc).__name__}: {exc}", key)
    return EndpointError(
        f"cannot reach {shown} ({why}); check the base URL and that the server is running"
    )


def _message(exc: Exception) -> str:
    return _body_message(getattr(exc, "body", None)) or str(getattr(exc, "message", exc))[:300]


def _body_message(body: Any) -> str | None:
    """The `message` of an error body ({"error": {"message": ...}} or {"message": ...})."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
    return None


def check_endpoint(
    base_url: str, model: str, api_key: str | None = None, timeout_s: float = 10.0
) -> list[str]:
    """List the served models and say plainly what is wrong; returns the served model ids.

    401/403 -> check OPENAI_API_KEY; 404, refused or unreachable -> check the base URL; a model that
    is not listed -> check the model name, with the names that are served.
    """
    import openai

    root = _root(base_url)
    shown = display_url(root)
    key = api_key if api_key is not None else api_key_from_env()
    client, headers = _client(root, key, timeout_s)
    not_a_list = f"{shown}/v1/models did not answer a model list; check the base URL"
    try:
        with client:
            served = [str(m.id) for m in client.models.list(extra_headers=headers)]
    except openai.APIResponseValidationError:
        raise EndpointError(not_a_list) from None
    except openai.APIError as exc:
        raise plain_error(exc, shown, "/v1/models", key, timeout_s) from None
    except (openai.OpenAIError, ValueError, TypeError, AttributeError):
        raise EndpointError(not_a_list) from None
    if model not in served:
        raise EndpointError(
            f"model {model!r} is not served at {shown}; check the model name "
            f"(served: {', '.join(served) or 'none'})"
        )
    return served


def probe_endpoint(
    base_url: str,
    model: str,
    api_key: str | None = None,
    endpoint: str = "completions",
    timeout_s: float = PROBE_TIMEOUT_S,
    stall_s: float = PROBE_STALL_S,
) -> None:
    """One streamed request for one token, closed at its first data event: the model generates at
    this URL with this key. No data event within `timeout_s`, or only keep-alive comments for
    `stall_s`, ends it. Raises EndpointError with what to check and what was seen."""
    import openai

    root = _root(base_url)
    shown = display_url(root)
    key = api_key if api_key is not None else api_key_from_env()
    client, headers = _client(root, key, timeout_s)
    call = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
    deadline = time.monotonic() + timeout_s
    try:
        with client:
            stream: Any
            if endpoint == "chat":
                stream = client.chat.completions.create(
                    model=model,
                    messages=[{"role": "user", "content": PROBE_PROMPT}],
                    max_tokens=1,
                    stream=True,
                    extra_headers=headers,
                )
            else:
                stream = client.completions.create(
                    model=model,
                    prompt=PROBE_PROMPT,
                    max_tokens=1,
                    stream=True,
                    extra_headers=headers,
                )
            with stream:
                probe = _Probe(shown + call, model, key, (deadline, timeout_s), stall_s)
                _first_event(stream.response, probe)
    except EndpointError:
        raise
    except (openai.OpenAIError, OSError, ValueError) as exc:
        raise plain_error(exc, shown, call, key, timeout_s, model) from None


class _Probe:
    """What the probe's read is bounded by, and the words for what it saw."""

    def __init__(
        self, where: str, model: str, key: str | None, total: tuple[float, float], stall_s: float
    ):
        self.where = where
        self.model = model
        self.key = key
        self.deadline, self.total_s = total  # when the whole call ends, and its length
        self.stall_s = stall_s
        self.begun = time.monotonic()  # the stream's start: the stall deadline counts from here

    def nothing(self) -> EndpointError:
        return EndpointError(
            f"{self.where} streamed nothing for model {self.model!r}; check the model name and "
            "that the server is healthy"
        )

    def error(self, obj: Any) -> EndpointError:
        text = scrub_key(_body_message(obj) or "an error event", self.key)
        return EndpointError(
            f"{self.where} answered an error: {text}; check the model name and that the server "
            "is healthy"
        )

    def overdue(self, comments: int, pending: bytes) -> EndpointError | None:
        """The error for a stream past a deadline (None while within both); `pending` is the
        unfinished event read so far."""
        now = time.monotonic()
        if len(pending) > PROBE_EVENT_MAX:
            return EndpointError(
                f"{self.where} sent {len(pending):,} bytes without ending an event; check that "
                "the base URL is an OpenAI-compatible server"
            )
        stalled = now - self.begun >= self.stall_s
        if not stalled and now < self.deadline:
            return None
        waited = self.stall_s if stalled else self.total_s
        if comments and (not pending.strip() or pending.lstrip().startswith(b":")):
            saw = f"answered only keep-alive comments for {waited:g} s (no data event)"
        else:
            saw = f"sent no data event in {waited:g} s ({comments} comments, {len(pending)} bytes)"
        return EndpointError(
            f"{self.where} {saw} for model {self.model!r}; check that the server is healthy "
            "and serves this model"
        )


def _first_event(response: Any, probe: _Probe) -> None:
    """Read the probe's stream up to its first data event (a token or usage); EndpointError for
    an error event, a stream that ends first, or one past a deadline. A read blocks at most the
    client's timeout; the deadlines are checked after every read."""
    import httpx2  # the openai package's HTTP client: its stream raises these
    import openai

    pending = b""
    comments = 0
    try:
        for data in response.iter_bytes():
            pending += data
            if b"\r" in pending:
                pending = pending.replace(b"\r\n", b"\n")
            while (cut := pending.find(b"\n\n")) >= 0:
                event, pending = pending[:cut], pending[cut + 2 :]
                if _answered(event, probe):
                    return
                comments += 1
            if (late := probe.overdue(comments, pending)) is not None:
                raise late
    except httpx2.TimeoutException:
        raise openai.APITimeoutError(request=response.request) from None
    except httpx2.RequestError as exc:  # its words: the cause plain_error quotes
        raise openai.APIConnectionError(request=response.request) from exc
    if pending.strip() and _answered(pending, probe):  # a last event without its blank line
        return
    raise probe.nothing()


def _answered(event: bytes, probe: _Probe) -> bool:
    """True for a data event (a token or usage), False for a comment or an event without data;
    EndpointError for an error event or [DONE] before any data."""
    from tuning.measure.loadgen.sse import classify

    kind, obj = classify(event)
    if kind == "error":
        raise probe.error(obj)
    if kind == "done":
        raise probe.nothing()
    return kind != "skip"
