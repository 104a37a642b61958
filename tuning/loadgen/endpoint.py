"""Can this endpoint be used as given? The control calls, made with the `openai` package: list the
served models (GET /v1/models) and, before an experiment on an attached endpoint, a one-request
probe (one streamed token). Its typed errors become a message that says what to check: the key
(authentication, permission), the base URL (not found, refused, no answer) or the model name. The
per-chunk load path stays the lab's own client (tuning.loadgen.client).

The API key comes from OPENAI_API_KEY or an explicit argument, never a flag or argv; it is sent as a
Bearer header (no header at all without a key) and `scrub_key` takes it out of every error text the
lab stores or prints.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from core.redact import display_url
from tuning.workload import WorkloadError, server_root

if TYPE_CHECKING:
    import openai

PROBE_PROMPT = "Hello"


class EndpointError(RuntimeError):
    """The endpoint cannot be used as given; the message says what to check."""


def api_key_from_env() -> str | None:
    """The only source of the key besides an explicit argument: never a flag, never argv."""
    key = os.environ.get("OPENAI_API_KEY", "").strip()
    return key or None


def scrub_key(text: str, key: str | None) -> str:
    """`text` without the API key: a careless server may echo the Authorization header."""
    if key:
        text = text.replace(key, "***")
    return text


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
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
    return str(getattr(exc, "message", exc))[:300]


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
    timeout_s: float = 30.0,
) -> None:
    """One streamed request for one token, closed at its first chunk: the model generates at this
    URL with this key. Raises EndpointError with what to check."""
    import openai

    root = _root(base_url)
    shown = display_url(root)
    key = api_key if api_key is not None else api_key_from_env()
    client, headers = _client(root, key, timeout_s)
    call = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
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
                for _chunk in stream:
                    break
                else:
                    raise EndpointError(
                        f"{shown}{call} streamed nothing for model {model!r}; check the model "
                        "name and that the server is healthy"
                    )
    except EndpointError:
        raise
    except (openai.OpenAIError, OSError, ValueError) as exc:
        raise plain_error(exc, shown, call, key, timeout_s, model) from None
