"""Can this endpoint be used as given? One GET /v1/models, and a message that says what to check.

The API key comes from OPENAI_API_KEY or an explicit argument, never a flag or argv; it is sent as a
Bearer header and `scrub_key` takes it out of every error text the lab stores or prints.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

from core.redact import display_url
from tuning.workload import WorkloadError, server_root


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


def check_endpoint(
    base_url: str, model: str, api_key: str | None = None, timeout_s: float = 10.0
) -> list[str]:
    """GET /v1/models and say plainly what is wrong; returns the served model ids.

    401/403 -> check OPENAI_API_KEY; 404, refused or unreachable -> check the base URL; a model that
    is not listed -> check the model name, with the names that are served.
    """
    try:
        root = server_root(base_url)
    except WorkloadError as exc:
        raise EndpointError(f"{exc}; check the base URL") from None
    shown = display_url(root)
    key = api_key if api_key is not None else api_key_from_env()
    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(root + "/v1/models", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            what = "no API key was sent" if not key else "the API key was refused"
            raise EndpointError(
                f"{shown}/v1/models answered HTTP {exc.code}: {what}; check OPENAI_API_KEY"
            ) from None
        if exc.code == 404:
            raise EndpointError(
                f"{shown}/v1/models answered HTTP 404: this is not an "
                "OpenAI-compatible server root; check the base URL"
            ) from None
        raise EndpointError(
            f"{shown}/v1/models answered HTTP {exc.code}; check the base URL "
            "and that the server is healthy"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, ConnectionRefusedError):
            why = "connection refused"
        elif isinstance(reason, TimeoutError):
            why = f"no answer in {timeout_s:g} s"
        else:
            why = scrub_key(str(reason), key)
        raise EndpointError(
            f"cannot reach {shown} ({why}); check the base URL and that the server is running"
        ) from None
    try:
        data = json.loads(body)
        served = [str(item["id"]) for item in data["data"]]
    except (ValueError, KeyError, TypeError):
        raise EndpointError(
            f"{shown}/v1/models did not answer a model list; check the base URL"
        ) from None
    if model not in served:
        raise EndpointError(
            f"model {model!r} is not served at {shown}; check the model name "
            f"(served: {', '.join(served) or 'none'})"
        )
    return served
