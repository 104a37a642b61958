"""Secrets out of anything that leaves the lab or reaches a log: argv, environment, URLs, text.

Used on export (bundles, reports), on import (defence in depth) and wherever a URL is printed.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

REDACTED = "[redacted]"

# A name is secret when its last word is one (HF_TOKEN, OPENAI_API_KEY, --api-key), it starts
# with auth/bearer, or it says secret/password anywhere; total_token_throughput and
# num_key_value_heads are not.
_SECRET_KEY = re.compile(
    r"(^|_)(api_?key|apikey|key|token|auth|authorization|secret|password|passwd|pwd|"
    r"credentials?|cookie|bearer|signature)$|^(auth|authorization|bearer)(_|$)|secret|passw|"
    r"private_?key|access_?key"
)
_SECRET_VALUE = re.compile(
    r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{8,}"  # OpenAI-style keys
    r"|(?<![A-Za-z0-9])hf_[A-Za-z0-9]{16,}"  # Hugging Face tokens
    r"|(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|(?<![A-Za-z0-9])AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{30,}"  # Google API keys
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWTs
    r"|(?i:bearer)\s+[^\s\"',;]+"
)
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s\"']+@")
_URL_SECRET_PARAM = re.compile(
    r"(?P<key>[?&](?:api[_-]?key|key|token|access_token|auth|sig|signature|password)=)"
    r"[^&#\s\"']+",
    re.IGNORECASE,
)
# The shell's working directory, not a password: a secret-looking name that is a path everywhere.
_NOT_SECRET = frozenset({"pwd", "oldpwd"})
_SECRET_FLAG = re.compile(r"^--?(?P<name>[A-Za-z0-9_-]+)(?:=(?P<value>.*))?$", re.DOTALL)


def is_secret_key(name: str) -> bool:
    """HF_TOKEN, OPENAI_API_KEY, --api-key, password ... (not max-num-batched-tokens)."""
    key = str(name).lower().replace("-", "_").strip("_")
    if key in _NOT_SECRET:
        return False
    return bool(_SECRET_KEY.search(key))


def env_secrets() -> list[str]:
    """Values of this process's secret-looking environment variables, longest first."""
    found = {v for k, v in os.environ.items() if is_secret_key(k) and len(v.strip()) >= 8}
    return sorted(found, key=len, reverse=True)


def scrub_text(text: str, extra_secrets: Sequence[str] = ()) -> str:
    """Known key shapes, bearer tokens, URL credentials and the values of secret env vars."""
    out = text
    for secret in extra_secrets:
        if secret and secret in out:
            out = out.replace(secret, REDACTED)
    out = _SECRET_VALUE.sub(REDACTED, out)
    out = _URL_USERINFO.sub(lambda m: m.group("scheme") + REDACTED + "@", out)
    return _URL_SECRET_PARAM.sub(lambda m: m.group("key") + REDACTED, out)


def scrub_argv(argv: Sequence[Any], extra_secrets: Sequence[str] = ()) -> list[Any]:
    """`--api-key X` and `--api-key=X` lose their value; every item is text-scrubbed too."""
    out: list[Any] = []
    redact_next = False
    for item in argv:
        if redact_next and isinstance(item, str) and not item.startswith("--"):
            out.append(REDACTED)
            redact_next = False
            continue
        redact_next = False
        if isinstance(item, str):
            flag = _SECRET_FLAG.match(item)
            if flag and is_secret_key(flag.group("name")):
                if flag.group("value") is not None:
                    out.append(item.split("=", 1)[0] + "=" + REDACTED)
                else:
                    out.append(item)
                    redact_next = True
                continue
            out.append(scrub_text(item, extra_secrets))
        else:
            out.append(scrub_json(item, extra_secrets))
    return out


def scrub_json(value: Any, extra_secrets: Sequence[str] = ()) -> Any:
    """A parsed JSON value with secret-named keys' values and secret-shaped strings redacted."""
    if isinstance(value, dict):
        return {
            k: (
                REDACTED
                if is_secret_key(k)
                and v not in (None, "", [], {})
                and not isinstance(v, (bool, int, float))
                else scrub_json(v, extra_secrets)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return (
            scrub_argv(value, extra_secrets)
            if all(isinstance(x, str) for x in value)
            else [scrub_json(v, extra_secrets) for v in value]
        )
    if isinstance(value, str):
        return scrub_text(value, extra_secrets)
    return value


def scrub_cell(column: str, value: Any, extra_secrets: Sequence[str] = ()) -> Any:
    """One stored cell: JSON columns structurally (re-encoded only when something changed)."""
    if not isinstance(value, str):
        return value
    if column.endswith("_json"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return scrub_text(value, extra_secrets)
        clean = scrub_json(parsed, extra_secrets)
        if clean != parsed:
            return json.dumps(clean, sort_keys=True, default=str)
        return value
    return scrub_text(value, extra_secrets)


def scrub_row(row: Mapping[str, Any], extra_secrets: Sequence[str] = ()) -> dict[str, Any]:
    return {k: scrub_cell(k, v, extra_secrets) for k, v in row.items()}


def display_url(url: str) -> str:
    """A URL safe to print or store: any user:password@ part removed."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
