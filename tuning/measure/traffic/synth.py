"""Texts of exact token lengths, built with the lab's prompt builder (`traffic.workload`).

`build_prompts` makes one random text that re-encodes to exactly N tokens. A request is often
several texts in a row (a shared system prompt, the history, the new message; a trace's hash
blocks), and byte-level BPE can merge tokens across the seam, so `fit_tail` builds the last text
against what comes before it and retries with other seeds until the whole prompt has exactly the
wanted count. Seeds come from `derive_seed`, a hash of named parts, so the same spec gives the same
texts, and a hash block or a shared prefix is the same text in every request that uses it.
"""

from __future__ import annotations

import hashlib

from tuning.measure.traffic.errors import TrafficError
from tuning.measure.traffic.workload import LocalTokenizer, TokenizerLike, Workload, build_prompts

_FIT_TRIES = 24


def derive_seed(*parts: object) -> int:
    """A 31-bit seed from named parts: stable across runs and Python versions."""
    blob = "\x1f".join(repr(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "little") >> 1


def added_special_tokens(tokenizer: TokenizerLike) -> int:
    """Tokens the tokenizer adds to a plain encode (a BOS): what vLLM's dataset code counts in
    `tokenizer(text).input_ids` and the lab's counts leave out. 0 when it cannot tell."""
    declared = getattr(tokenizer, "added_special_tokens", None)
    if isinstance(declared, int):
        return declared
    if isinstance(tokenizer, LocalTokenizer):
        tok = tokenizer.raw
        with_special = len(tok.encode("a", add_special_tokens=True).ids)
        return with_special - len(tok.encode("a", add_special_tokens=False).ids)
    return 0


class TextMaker:
    """Makes and counts texts with one tokenizer; random texts are cached by (length, seed)."""

    def __init__(self, tokenizer: TokenizerLike) -> None:
        self.tokenizer = tokenizer
        self._cache: dict[tuple[int, int], str] = {}

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text)) if text else 0

    def random_text(self, tokens: int, seed: int) -> str:
        """A random text of exactly `tokens` tokens (0 gives '')."""
        if tokens <= 0:
            return ""
        key = (tokens, seed)
        if key not in self._cache:
            workload = Workload(
                num_requests=1,
                concurrency=1,
                input_len=tokens,
                output_len=1,
                seed=seed,
                num_warmups=0,
            )
            self._cache[key] = build_prompts(workload, self.tokenizer)[0]
        return self._cache[key]

    def fit_tail(
        self, head: str, tokens: int, seed: int, head_tokens: int | None = None
    ) -> tuple[str, int]:
        """A random text T of about `tokens` tokens such that head + T has exactly
        count(head) + `tokens` tokens; returns T and that total. The first try is
        `random_text(tokens, seed)`, so a tail that needs no fixing is the same text wherever it
        is used."""
        if not head:
            return self.random_text(tokens, seed), max(tokens, 0)
        base = self.count(head) if head_tokens is None else head_tokens
        target = base + tokens
        need = tokens
        for attempt in range(_FIT_TRIES):
            tail = self.random_text(need, seed if attempt == 0 else derive_seed(seed, attempt))
            got = self.count(head + tail)
            if got == target:
                return tail, target
            if attempt % 2:  # alternate: a new seed at the same length, then correct the drift
                need = max(1, need + target - got)
        raise TrafficError(
            f"could not build a text that brings a prompt to exactly {target} tokens in "
            f"{_FIT_TRIES} tries (the tokenizer keeps merging across the seam)"
        )
