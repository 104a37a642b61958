"""Secrets out of anything that leaves the lab or reaches a log: argv, environment, URLs, text.

Used on export (bundles, reports), on import (defence in depth), on every stored base URL and
wherever a URL is printed.

Every pattern runs in linear time: each can start only at the beginning of a run of the
characters it matches (a look-behind) and stops at the first character outside it, so no
position is scanned twice over (a 200k-character note used to take a minute; 1 MB now takes
milliseconds). What is caught:
- known key shapes (sk-, hf_, ghp_, AKIA, AIza, xox?-, JWTs) and `Bearer <token>`;
- URL credentials (`scheme://user:pw@host`);
- `name=value`, `name: value` and `'name': value` wherever the name is secret
  (`?token=`, `client_secret=`, `HF_TOKEN=...`, `Authorization: Basic ...`, `x-api-key: ...`,
  `authorization = Token X`, URL-encoded `api_key%3DX`,
  vLLM's `non-default args: {... 'api_key': [...]}`);
- argv values after a secret flag (`--api-key X`, `--token=X`, `-k X`, `-k=X`) and `apikey X`;
- the values of this process's secret-looking environment variables, wherever they appear.
"""

from __future__ import annotations

import functools
import json
import os
import re
import string
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

REDACTED = "[redacted]"

# A name is secret when its last word is one (HF_TOKEN, OPENAI_API_KEY, API_KEYS, --api-key), it
# starts with auth/bearer, or it says secret/password anywhere; total_token_throughput and
# num_key_value_heads are not.
_SECRET_KEY = re.compile(
    r"(^|_)(api_?keys?|apikeys?|key|keys|token|auth|authorization|secret|password|passwd|pwd|"
    r"credentials?|cookie|bearer|signature|sig)$|^(auth|authorization|bearer)(_|$)|secret|passw|"
    r"private_?key|access_?key"
)
# Each branch starts with its literal (so the regex engine jumps to those characters) and then
# looks one character further back: a key starts where a word starts.
_AT_WORD = r"(?<![A-Za-z0-9].)"
_SECRET_VALUE = re.compile(
    r"s" + _AT_WORD + r"k-[A-Za-z0-9_-]{8,}"  # OpenAI-style keys
    r"|h" + _AT_WORD + r"f_[A-Za-z0-9]{16,}"  # Hugging Face tokens
    r"|g" + _AT_WORD + r"h[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|g" + _AT_WORD + r"ithub_pat_[A-Za-z0-9_]{20,}"
    r"|x" + _AT_WORD + r"ox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|A" + _AT_WORD + r"KIA[0-9A-Z]{16}"  # AWS access key id
    r"|A" + _AT_WORD + r"Iza[0-9A-Za-z_-]{30,}"  # Google API keys
    # JWTs; not inside a run of token characters, so `_eyJ_eyJ...` is scanned once
    r"|e(?<![A-Za-z0-9_-].)yJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
)
# ://userinfo@ : found by its literal; the userinfo stops at the first character a URL's
# userinfo cannot hold, and no `://` can start inside it, so every character is scanned once.
_URL_USERINFO = re.compile(r"://[^/@\s\"'?#<>]+@")
# The shell's working directory, not a password: a secret-looking name that is a path everywhere.
_NOT_SECRET = frozenset({"pwd", "oldpwd"})
_SECRET_FLAG = re.compile(r"^--?(?P<name>[A-Za-z0-9_-]+)(?:=(?P<value>.*))?$", re.DOTALL)
# Short argv flags that take a key (`-k KEY`, as several CLIs spell --api-key).
_SECRET_SHORT_FLAGS = frozenset({"k"})


@functools.lru_cache(maxsize=4096)
def is_secret_key(name: str) -> bool:
    """HF_TOKEN, OPENAI_API_KEY, --api-key, password ... (not max-num-batched-tokens)."""
    key = str(name).lower().replace("-", "_").replace(".", "_").strip("_")
    if key in _NOT_SECRET:
        return False
    return bool(_SECRET_KEY.search(key))


def env_secrets() -> list[str]:
    """Values of this process's secret-looking environment variables, longest first."""
    found = {v for k, v in os.environ.items() if is_secret_key(k) and len(v.strip()) >= 8}
    return sorted(found, key=len, reverse=True)


# Secret names in text, as `is_secret_key` decides them, matched on the text lower-cased (so the
# regex engine can jump from one candidate letter to the next; IGNORECASE would make it try every
# position): a last word that begins a word of the name and ends it (`api_key`, `HF_TOKEN`,
# `x-api-key`, `client_secret`; not `max_num_batched_tokens`), or secret/passw/private key/access
# key anywhere, or auth/bearer starting the name. Every alternative starts with a letter and
# looks back one character from there; the rest of a name is read once (possessive, <= 64).
_NC = r"[a-z0-9_.\-]"
_END = r"(?!" + _NC + r")"
_WORD = r"(?<![a-z0-9].)"  # after the first letter: that letter begins a word
_NAME_START = r"(?<!" + _NC + r".)"  # after the first letter: that letter begins the name
_REST = _NC + r"{0,60}+" + _END
# One alternative per first letter, each starting with its literal: the engine's fast scan.
_SECRET_NAME = (
    r"a(?:"
    + _WORD
    + r"(?:pi[-_.]?keys?|pikeys?|uthorization|uth)"
    + _END
    + r"|ccess[-_.]?key"
    + _REST
    + r"|"
    + _NAME_START
    + r"uth(?:orization)?[-_.]"
    + _REST
    + r")"
    + r"|k"
    + _WORD
    + r"eys?"
    + _END
    + r"|t"
    + _WORD
    + r"oken"
    + _END
    + r"|s(?:"
    + _WORD
    + r"(?:ignature|ig)"
    + _END
    + r"|ecret"
    + _REST
    + r")"
    + r"|c"
    + _WORD
    + r"(?:redentials?|ookie)"
    + _END
    + r"|b(?:"
    + _WORD
    + r"earer"
    + _END
    + r"|"
    + _NAME_START
    + r"earer[-_.]"
    + _REST
    + r")"
    + r"|p(?:"
    + _WORD
    + r"asswd"
    + _END
    + r"|assw"
    + _REST
    + r"|rivate[-_.]?key"
    + _REST
    + r"|(?<=[-_.]p)wd"
    + _END
    + r")"
)
# `name=value`, `'name': value`, `"name": value` and `name: value` (a header, not `http://`):
# the value (group v) is a quoted string, a [list] after a quoted name, or the run such a value
# holds (to the end of the line for a header, so `Authorization: Basic abc` loses all of it).
_PAIRS = re.compile(
    r"(?:" + _SECRET_NAME + r")(?P<q>['\"])?[ \t]*+(?:(?P<eq>=|%3d)|:(?!//))[ \t]*+"
    r"(?!\[redacted\])(?P<v>"
    r"(?(eq)(?:'[^'\r\n]*'|\"[^\"\r\n]*\"|(?:(?:token|basic|digest)[ \t]++)?[^&#\"'\s]+)"
    r"|(?(q)(?:'[^'\r\n]*'|\"[^\"\r\n]*\"|\[[^\]\r\n]*\]|[^,}\r\n]+)|[^\"'\r\n]+)))"
)
# `--api-key VALUE` in a logged command line.
_FLAGS = re.compile(
    r"-(?<![a-z0-9_.\-].)-(?="
    + _NC
    + r"{0,62}?(?:"
    + _SECRET_NAME
    + r"))"
    + _NC
    + r"{1,64}+[ \t]++(?=[^\s\-])(?!\[redacted\])(?P<v>[^\s\"']+)"
)
# `-k VALUE` (a short key flag) in a logged command line; not a path, URL or another flag.
_SHORT_KEY = re.compile(
    r"-(?<![a-z0-9_.\-].)k(?:[ \t]++|=)(?![-/\[]|[a-z][a-z0-9+.-]*+://)(?P<v>[^\s\"']+)"
)
# `apikey VALUE` in prose or a log line (no `=` or `:`): a value of 8 or more characters or one
# with a digit (`the api_key if given` keeps its words).
_SPACED_KEY = re.compile(
    r"a" + _WORD + r"pi[-_.]?keys?[ \t]++(?!\[redacted\])"
    r"(?=[^\s\"',;]{8}|[^\s\"',;]*?[0-9])(?P<v>[^\s\"',;]+)"
)
_BEARER = re.compile(r"b" + _WORD + r"earer\s++(?!\[redacted\])(?P<v>[^\s\"',;]+)")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _redact_groups(text: str, pattern: re.Pattern[str], whole: bool = False) -> str:
    """Group `v` (or the whole match) of every match of `pattern` on the lower-cased text,
    replaced in the original (ASCII lower-casing keeps every index)."""
    out: list[str] = []
    done = 0
    for m in pattern.finditer(text.translate(_ASCII_LOWER)):
        start, end = (m.start(), m.end()) if whole else m.span("v")
        out += [text[done:start], REDACTED]
        done = end
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _scrub_pairs(text: str) -> str:
    """Bearer tokens, then values of secret names, then values of secret flags."""
    text = _redact_groups(text, _BEARER, whole=True)
    text = _redact_groups(text, _PAIRS)
    text = _redact_groups(text, _SHORT_KEY)
    text = _redact_groups(text, _SPACED_KEY)
    return _redact_groups(text, _FLAGS)


def scrub_text(text: str, extra_secrets: Sequence[str] = ()) -> str:
    """Known key shapes, bearer tokens, URL credentials, secret-named values and the values of
    secret env vars; linear in the length of the text."""
    out = text
    for secret in extra_secrets:
        if secret and secret in out:
            out = out.replace(secret, REDACTED)
    out = _SECRET_VALUE.sub(REDACTED, out)
    out = _URL_USERINFO.sub("://" + REDACTED + "@", out)
    return _scrub_pairs(out)


def scrub_argv(argv: Sequence[Any], extra_secrets: Sequence[str] = ()) -> list[Any]:
    """`--api-key X`, `--api-key=X` and `-k X` lose their value; every item is text-scrubbed."""
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
            name = flag.group("name") if flag else ""
            short = flag is not None and not item.startswith("--") and name in _SECRET_SHORT_FLAGS
            if flag and (is_secret_key(name) or short):
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
        except (ValueError, RecursionError):
            return scrub_text(value, extra_secrets)
        clean = scrub_json(parsed, extra_secrets)
        if clean != parsed:
            return json.dumps(clean, sort_keys=True, default=str)
        return value
    return scrub_text(value, extra_secrets)


def scrub_row(row: Mapping[str, Any], extra_secrets: Sequence[str] = ()) -> dict[str, Any]:
    return {k: scrub_cell(k, v, extra_secrets) for k, v in row.items()}


def display_url(url: str) -> str:
    """A URL safe to print: no user:password@ part and the values of secret query parameters
    (`?token=`, `?api_key=`) redacted; one that does not parse (`http://[::1:8000`) is scrubbed
    as text, so printing a bad URL never raises."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # a bad port (`:99999`, `:x`) raises only here
    except ValueError:
        return scrub_text(url)
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        if any(is_secret_key(k) for k, _ in pairs):
            query = "&".join(
                f"{urllib.parse.quote(k)}={REDACTED if is_secret_key(k) else urllib.parse.quote(v)}"
                for k, v in pairs
            )
    if parts.username is None and parts.password is None:
        if query == parts.query:
            return url
        netloc = parts.netloc
    else:
        netloc = parts.hostname or ""
        if ":" in netloc:  # an IPv6 literal keeps its brackets
            netloc = f"[{netloc}]"
        if port:
            netloc = f"{netloc}:{port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def clean_url(url: str) -> str:
    """A URL to store: no user:password@ part and no secret query parameters (`?token=`,
    `?api_key=`, `?secret=` ...), so it still works where no credentials are needed."""
    parts = urllib.parse.urlsplit(display_url(url))  # ValueError for a URL that does not parse
    query = [
        (k, v)
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if not is_secret_key(k)
    ]
    return urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc, parts.path, urllib.parse.urlencode(query), parts.fragment)
    )


def scrub_key(text: str, key: str | None) -> str:
    """`text` without the API key: a careless server may echo the Authorization header."""
    if key:
        text = text.replace(key, "***")
    return text
