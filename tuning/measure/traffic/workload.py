"""The fixed workload of an experiment, its fingerprint, and prompts of exact token lengths.

Every run of an experiment replays the same `Workload`; the fingerprint says whether two runs saw
the same load, so a comparison never mixes different loads by accident. Prompts are built from
random vocabulary ids and checked by re-encoding: byte-level BPE does not round-trip (decode then
encode can merge or split tokens), so the builder iterates until the re-encoded prompt has exactly
`input_len` tokens and fails loudly when it cannot.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import math
import random
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from tuning.engine.embedded import CORPUS, corpus_tokenizer

Endpoint = Literal["completions", "chat"]
ENDPOINTS: tuple[str, ...] = ("completions", "chat")
# Bump when build_prompts changes the prompts it makes for the same workload: old fingerprints then
# stop matching new runs, which is the point.
PROMPT_RECIPE = "exact-random-ids/v1"
# Characters that special tokens of common models are made of (<s>, <|eot_id|>, [INST]); random
# tokens never contain them, so a prompt can never spell a special token by accident.
_SPECIAL_CHARS = frozenset("<>[]|")
_MAX_FIT_ROUNDS = 64
# Workload fields that are the client's patience, not the load the server sees (not fingerprinted).
_CLIENT_FIELDS = ("request_timeout_s", "stall_timeout_s")
DEFAULT_STALL_TIMEOUT_S = 60.0
# Requests one run may send (a bound on the schedule's length: a million is days of load).
MAX_REQUESTS = 1_000_000
# What a server without the route answers (not found, method not allowed, not implemented, or a
# gateway's "bad request" for a path it does not know).
_NO_ROUTE = frozenset({400, 404, 405, 422, 501})
# The shipped text: the embedded model's tokenizer is trained on it, prompts sample its ids.


class WorkloadError(ValueError):
    """A workload the lab refuses, or prompts that cannot be built; the message says which rule."""


class TokenizeUnavailable(WorkloadError):
    """The server answers, but not /tokenize (an OpenAI-compatible gateway, not vLLM)."""


@dataclass(frozen=True)
class Workload:
    """What the load generator replays: N requests, C in flight, I prompt tokens, O output tokens.

    `num_warmups=None` means "one wave": `concurrency` warm-ups (see `warmups`), which open every
    connection of the pool and warm the server at the batch size it will see before anything is
    measured; None is kept as is, so changing the concurrency moves the warm-ups with it.
    `output_len` is sent as `max_tokens` with `ignore_eos`, so every request generates
    exactly that many tokens. `request_timeout_s` bounds a whole request; `stall_timeout_s` bounds
    the silence of a stream after its first token (a request failed `stalled`). Both are the
    client's patience, not the load: the fingerprint leaves them out.
    """

    num_requests: int
    concurrency: int
    input_len: int
    output_len: int
    shared_prefix_len: int = 0
    endpoint: Endpoint = "completions"
    seed: int = 0
    num_warmups: int | None = None
    request_timeout_s: float = 600.0
    stall_timeout_s: float = 60.0  # DEFAULT_STALL_TIMEOUT_S

    def __post_init__(self) -> None:
        for name in ("num_requests", "concurrency", "input_len", "output_len"):
            _check_int(name, getattr(self, name), minimum=1)
        for name in ("num_requests", "num_warmups"):
            count = getattr(self, name)
            if isinstance(count, int) and count > MAX_REQUESTS:
                raise WorkloadError(f"{name} must be <= {MAX_REQUESTS:,}, got {count:,}")
        _check_int("shared_prefix_len", self.shared_prefix_len, minimum=0)
        _check_int("seed", self.seed, minimum=0)
        if self.shared_prefix_len > self.input_len:
            raise WorkloadError(
                f"shared_prefix_len ({self.shared_prefix_len}) is longer than "
                f"input_len ({self.input_len})"
            )
        if self.endpoint not in ENDPOINTS:
            raise WorkloadError(f"endpoint {self.endpoint!r} is not one of {', '.join(ENDPOINTS)}")
        if self.num_warmups is not None:
            _check_int("num_warmups", self.num_warmups, minimum=0)
        for name in _CLIENT_FIELDS:
            timeout = getattr(self, name)
            if (
                isinstance(timeout, bool)
                or not isinstance(timeout, (int, float))
                or not math.isfinite(timeout)
                or timeout <= 0
            ):
                raise WorkloadError(f"{name} must be a positive number, got {timeout!r}")
            object.__setattr__(self, name, float(timeout))

    @property
    def warmups(self) -> int:
        """Warm-up requests actually sent: `num_warmups`, or `concurrency` when it is None."""
        return self.concurrency if self.num_warmups is None else self.num_warmups

    @property
    def total_prompts(self) -> int:
        return self.warmups + self.num_requests

    def with_value(self, name: str, value: Any) -> Workload:
        """A copy with one field changed; accepts the registry's spelling ('input-len')."""
        key = name.strip().replace("-", "_")
        if key not in {f.name for f in fields(self)}:
            raise WorkloadError(f"{name!r} is not a workload field")
        return replace(self, **{key: value})

    def shape(self) -> dict[str, Any]:
        """The fields that change what the server sees, plus the prompt recipe version.

        `request_timeout_s` and `stall_timeout_s` are left out: they only decide when the client
        gives up on a request. `num_warmups` is in: a cold and a warm server are different loads.
        """
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _CLIENT_FIELDS}
        out["num_warmups"] = self.warmups
        out["prompt_recipe"] = PROMPT_RECIPE
        return out

    def fingerprint(self, ignore: Iterable[str] = ()) -> str:
        """16 hex chars of sha256 over `shape()`; `ignore` drops fields (a swept concurrency)."""
        shape = self.shape()
        for name in ignore:
            if name not in shape:
                raise WorkloadError(f"cannot ignore unknown workload field {name!r}")
            shape.pop(name)
        blob = json.dumps(shape, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """The fields; `stall_timeout_s` only when not the default, so a workload stored before
        the field existed reads back and writes out the same."""
        out = asdict(self)
        if out["stall_timeout_s"] == DEFAULT_STALL_TIMEOUT_S:
            del out["stall_timeout_s"]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Workload:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise WorkloadError(f"unknown workload field(s): {', '.join(unknown)}")
        return cls(**dict(data))


STALL_HELP = (
    "seconds without data after a stream's first token (or of SSE comments only) before it "
    "counts as stalled"
)


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    """The workload flags of `experiment` and `search` (read by workload_from_args)."""
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--num-requests", type=int, default=64)
    p.add_argument("--input-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--shared-prefix-len", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-warmups", type=int, default=None)
    p.add_argument("--endpoint", choices=["completions", "chat"], default="completions")
    p.add_argument("--request-timeout", type=float, default=600.0)
    p.add_argument("--stall-timeout", type=float, default=60.0, help=STALL_HELP)


def workload_from_args(args: argparse.Namespace) -> Workload:
    """The workload the command-line flags describe (`bench` and `experiment` share their names)."""
    return Workload(
        num_requests=args.num_requests,
        concurrency=args.concurrency,
        input_len=args.input_len,
        output_len=args.output_len,
        shared_prefix_len=args.shared_prefix_len,
        endpoint=args.endpoint,
        seed=args.seed,
        num_warmups=args.num_warmups,
        request_timeout_s=args.request_timeout,
        stall_timeout_s=args.stall_timeout,
    )


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkloadError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise WorkloadError(f"{name} must be >= {minimum}, got {value}")


@runtime_checkable
class TokenizerLike(Protocol):
    """The little the prompt builder needs: encode without special tokens, decode, and a pool of
    ids that are safe to sample (no special tokens, no partial UTF-8, no `<>[]|`)."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def usable_ids(self) -> list[int]: ...


def _safe_piece(piece: str) -> bool:
    return bool(piece) and "\ufffd" not in piece and not (_SPECIAL_CHARS & set(piece))


class LocalTokenizer:
    """A `tokenizer.json` read with the `tokenizers` library: fast, no server round trips."""

    def __init__(self, path: str | Path, *, tokenizer: Any = None) -> None:
        from tokenizers import Tokenizer

        p = Path(path)
        if tokenizer is None:
            if p.is_dir():
                p = p / "tokenizer.json"
            if not p.is_file():
                raise WorkloadError(f"no tokenizer.json at {p}")
        self.path = p
        self._tok = tokenizer or Tokenizer.from_file(str(p))
        self._special = frozenset(self._tok.get_added_tokens_decoder())
        self._pool: list[int] | None = None

    @property
    def special_ids(self) -> frozenset[int]:
        return self._special

    @property
    def raw(self) -> Any:
        """The `tokenizers.Tokenizer` itself (one given in memory has no file to read again)."""
        return self._tok

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=False))

    def usable_ids(self) -> list[int]:
        """Ids whose text re-encodes to themselves; computed once, in one batch call."""
        if self._pool is None:
            candidates = [i for i in range(self._tok.get_vocab_size()) if i not in self._special]
            pieces = [self._tok.decode([i], skip_special_tokens=False) for i in candidates]
            encoded = self._tok.encode_batch(pieces, add_special_tokens=False)
            self._pool = [
                i
                for i, piece, enc in zip(candidates, pieces, encoded, strict=True)
                if _safe_piece(piece) and list(enc.ids) == [i]
            ]
            if not self._pool:
                raise WorkloadError(f"tokenizer {self.path} has no usable ids")
        return self._pool


def server_root(base_url: str) -> str:
    """'http://h:p/v1/' -> 'http://h:p': the lab accepts base URLs with or without /v1 and '/'."""
    from core.redact import display_url

    root = base_url.strip().rstrip("/")
    if root.endswith("/v1"):
        root = root[:-3].rstrip("/")
    shown = display_url(base_url)  # an error never echoes `?token=` or `user:pw@`
    if not root.startswith(("http://", "https://")):
        raise WorkloadError(f"base URL {shown!r} must start with http:// or https://")
    try:
        parts = urllib.parse.urlsplit(root)
        parts.port  # noqa: B018  a bad port (`:x`, `:99999`) raises only when read
    except ValueError as exc:  # `http://[::1:8000`: Invalid IPv6 URL
        raise WorkloadError(f"base URL {shown!r} is not a valid URL ({exc})") from None
    if not parts.hostname:
        raise WorkloadError(f"base URL {shown!r} names no host")
    return root


class ServerTokenizer:
    """vLLM's own tokenizer through POST /tokenize and /detokenize: exact for whatever it serves.

    Sampling needs a pool of ids known to be plain text; the server does not list its vocabulary, so
    the pool is the set of ids the server gives the lab's shipped corpus (with `<>[]|` removed).
    One keep-alive connection serves all calls: building thousands of prompts is thousands of calls.
    """

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 30.0
    ) -> None:
        self.root = server_root(base_url)
        self.model = model
        self._api_key = api_key
        self._timeout = timeout_s
        self._pool: list[int] | None = None
        self._conn: http.client.HTTPConnection | None = None
        parts = urllib.parse.urlsplit(self.root)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self._timeout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        body = json.dumps(payload).encode()
        for attempt in (0, 1):  # one retry: the server may have closed an idle keep-alive socket
            conn = self._connection()
            try:
                conn.request("POST", self._prefix + path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if attempt:
                    raise WorkloadError(f"POST {path} failed: {exc}") from None
                continue
            if resp.status in _NO_ROUTE:
                raise TokenizeUnavailable(f"POST {path} answered HTTP {resp.status}")
            if resp.status != 200:
                raise WorkloadError(
                    f"POST {path} answered HTTP {resp.status}; the server must "
                    "be vLLM (it serves /tokenize), or pass a local tokenizer"
                )
            try:
                return dict(json.loads(data))
            except ValueError:
                raise TokenizeUnavailable(f"POST {path} did not answer JSON") from None
        raise AssertionError("unreachable")

    def encode(self, text: str) -> list[int]:
        out = self._post(
            "/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False}
        )
        return [int(i) for i in out["tokens"]]

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._post("/detokenize", {"model": self.model, "tokens": list(ids)})["prompt"])

    def usable_ids(self) -> list[int]:
        if self._pool is None:
            text = "".join(ch for ch in CORPUS.read_text() if ch not in _SPECIAL_CHARS)
            self._pool = sorted(set(self.encode(text)))
            if not self._pool:
                raise WorkloadError("the server's tokenizer gave no ids for the corpus")
        return self._pool


def _fit(
    tok: TokenizerLike,
    prefix_text: str,
    prefix_ids: list[int],
    body: list[int],
    target: int,
    pool: list[int],
    rng: random.Random,
    specials: frozenset[int],
) -> str:
    """prefix + decode(body), adjusted until it re-encodes to exactly `target` tokens with the
    prefix's tokens intact and no special ids; WorkloadError after a bounded number of rounds."""
    p = len(prefix_ids)
    need = target - p
    body = list(body)
    for _ in range(_MAX_FIT_ROUNDS):
        text = prefix_text + tok.decode(body)
        enc = tok.encode(text)
        if enc[:p] != prefix_ids:
            # The first body token merged into the prefix: pick another boundary token.
            body[0] = rng.choice(pool)
            continue
        got = enc[p:]
        bad = [k for k, i in enumerate(got) if i in specials]
        if not bad and len(got) == need:
            return text
        for k in bad:
            got[k] = rng.choice(pool)
        if len(got) > need:
            got = got[:need]
        elif len(got) < need:
            got += rng.choices(pool, k=need - len(got))
        if need > 0 and got == body:
            got[-1] = rng.choice(pool)  # stuck: the same ids keep re-encoding the same way
        body = got
    raise WorkloadError(
        f"could not build a prompt of exactly {target} tokens in {_MAX_FIT_ROUNDS} "
        "rounds (the tokenizer keeps merging the random tokens)"
    )


def build_prompts(workload: Workload, tokenizer: TokenizerLike) -> list[str]:
    """`num_warmups + num_requests` prompts, warm-ups first, deterministic from the seed.

    Each is the same `shared_prefix_len`-token prefix followed by random tokens, and re-encodes to
    exactly `input_len` tokens (without special tokens: the server may add a BOS, or a chat
    template, on top; its `usage` reports what it really counted).
    """
    rng = random.Random(workload.seed)
    pool = tokenizer.usable_ids()
    if not pool:
        raise WorkloadError("the tokenizer has no usable ids")
    specials = frozenset(getattr(tokenizer, "special_ids", frozenset()))
    p = workload.shared_prefix_len
    prefix_text, prefix_ids = "", []
    if p:
        prefix_text = _fit(tokenizer, "", [], rng.choices(pool, k=p), p, pool, rng, specials)
        prefix_ids = tokenizer.encode(prefix_text)
    body_len = workload.input_len - p
    prompts: list[str] = []
    for _ in range(workload.total_prompts):
        if body_len == 0:
            prompts.append(prefix_text)
            continue
        prompts.append(
            _fit(
                tokenizer,
                prefix_text,
                prefix_ids,
                rng.choices(pool, k=body_len),
                workload.input_len,
                pool,
                rng,
                specials,
            )
        )
    return prompts


def prompt_digest(prompts: Sequence[str]) -> str:
    """16 hex chars of sha256 over the exact prompt texts: did two runs send the same bytes?"""
    digest = hashlib.sha256()
    for text in prompts:
        data = text.encode()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:16]


# The tokenizer_id of a run whose prompts were built with the lab's own tokenizer because the
# server has no /tokenize: its prompts have `input_len` tokens by that tokenizer, not the model's.
FALLBACK_TOKENIZER_ID = "lab:corpus-bpe (fallback, approximate input lengths)"
FALLBACK_NOTE = (
    "the server has no /tokenize (not vLLM?): prompts are built with the lab's own tokenizer, "
    "so input lengths are approximate (the model's tokenizer may count more or fewer tokens; "
    "the server's own counts are in input_lens). Pass --tokenizer FILE for exact lengths."
)


def choose_tokenizer(
    tokenizer: str | None, model: str, base_url: str, api_key: str | None
) -> tuple[TokenizerLike, str]:
    """A local tokenizer.json if one is given or the model is a local folder, else the server's
    (/tokenize), else, when the server does not tokenize, the lab's own (FALLBACK_TOKENIZER_ID)."""
    if tokenizer:
        return LocalTokenizer(tokenizer), str(tokenizer)
    local = Path(model)
    if (local / "tokenizer.json").is_file():
        return LocalTokenizer(local), str(local / "tokenizer.json")
    server = ServerTokenizer(base_url, model, api_key=api_key)
    try:
        server.usable_ids()  # the probe: the pool is needed anyway, and fetched once
    except TokenizeUnavailable:
        server.close()
        fallback = LocalTokenizer("lab:corpus-bpe", tokenizer=corpus_tokenizer())
        return fallback, FALLBACK_TOKENIZER_ID
    return server, "server:/tokenize"
