"""Spec (+ data file) + tokenizer -> the request list the load generator sends (`Plan`).

Deterministic: the same spec, data bytes and tokenizer give the same plan. Where the spec asks for
a length the prompt has exactly that many tokens (re-encoded, as `traffic.workload` does for
synthetic prompts); file prompts are sent as written and counted. Choices follow vLLM's dataset
code so the two send the same requests:
- synthetic lengths come from `np.random.default_rng(seed)`, inputs then outputs (its random
  dataset's order); a shared prefix is added before the sampled input (`--random-prefix-len`).
- ShareGPT entries are shuffled with `random.Random(seed)`, the first turn is the prompt and the
  first answer's token count (`tokenizer(text).input_ids`, special tokens included) the output
  length; entries failing vLLM's length filter (`Limits`) are skipped, and too few valid entries
  are topped up by `random.Random(seed).choice`, as vLLM oversamples.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from tuning.measure.traffic.arrival import MAX_SCHEDULE_S, ScheduleTooLong, schedule
from tuning.measure.traffic.errors import DataError, TrafficError
from tuning.measure.traffic.lengths import sample
from tuning.measure.traffic.request import Message, PlannedRequest
from tuning.measure.traffic.sources import (
    Conversations,
    FileConversation,
    Trace,
    TraceEntry,
    read_source,
)
from tuning.measure.traffic.spec import LengthDist, SharedPrefixes, WorkloadSpec
from tuning.measure.traffic.synth import TextMaker, added_special_tokens, derive_seed
from tuning.measure.traffic.workload import TokenizerLike


@dataclass(frozen=True)
class Schedule:
    """The materialized workload. `skipped` counts file entries left out (vLLM's length filter,
    ShareGPT entries with fewer than two messages, trace lines over the context);
    `truncated_turns` the later turns cut because the history outgrew `max_total_len`;
    `oversampled` the duplicates added to reach `num_requests`."""

    spec: WorkloadSpec
    requests: tuple[PlannedRequest, ...]
    data_digest: str | None = None
    skipped: int = 0
    truncated_turns: int = 0
    oversampled: int = 0


@dataclass(frozen=True)
class _Turn:
    """A turn to build: the user message (text, or a length to synthesize), the output length, and
    whether it is sent (False: history only, followed by the file's `answer` as written)."""

    user: str | int
    output_len: int
    send: bool = True
    answer: str = ""


def prefix_assignment(prefixes: SharedPrefixes, n: int, seed: int) -> list[int | None]:
    """Which shared prefix each of `n` conversations opens with: exact shares (largest remainder),
    shuffled with its own seeded generator."""
    if not prefixes.count:
        return [None] * n
    quotas = [prefixes.share_of(k) * n for k in range(prefixes.count)]
    counts = [int(q) for q in quotas]
    free = min(n, round(sum(quotas))) - sum(counts)
    for k in sorted(range(len(quotas)), key=lambda k: counts[k] - quotas[k])[: max(free, 0)]:
        counts[k] += 1
    ids: list[int | None] = [k for k, c in enumerate(counts) for _ in range(c)]
    ids += [None] * (n - len(ids))
    order = np.random.default_rng([seed, 1]).permutation(n)
    return [ids[i] for i in order]


class _Builder:
    def __init__(self, spec: WorkloadSpec, tokenizer: TokenizerLike) -> None:
        self.spec = spec
        self.maker = TextMaker(tokenizer)
        self.truncated = 0
        self._systems: dict[tuple[int | None, str | None], list[Message]] = {}

    def message(self, role: str, text: str, answer_turn: int | None = None) -> Message:
        return Message(role, text, self.maker.count(text), answer_turn)

    def system(self, prefix_id: int | None, file_system: str | None) -> list[Message]:
        """The system message (shared prefix, then the file's system prompt), or none."""
        key = (prefix_id, file_system)
        if key not in self._systems:
            text = "" if prefix_id is None else self.prefix_text(prefix_id)
            text += file_system or ""
            self._systems[key] = [self.message("system", text)] if text else []
        return self._systems[key]

    def prefix_text(self, k: int) -> str:
        seed = derive_seed(self.spec.seed, "prefix", k)
        return self.maker.random_text(self.spec.prefixes.length, seed)

    def conversation(
        self, conv: int, prefix_id: int | None, system: str | None, turns: Sequence[_Turn]
    ) -> list[PlannedRequest]:
        """The sent turns of one conversation, each carrying the history before it; stops at the
        first turn that would not fit in `max_total_len` (counted in `truncated`)."""
        messages = list(self.system(prefix_id, system))
        out: list[PlannedRequest] = []
        last_send = max((k for k, t in enumerate(turns) if t.send), default=-1)
        for k, tp in enumerate(turns):
            head = "".join(m.content for m in messages)
            if isinstance(tp.user, int):
                seed = derive_seed(self.spec.seed, "user", conv, k)
                text, input_len = self.maker.fit_tail(head, tp.user, seed)
                tokens = tp.user if not head else self.maker.count(text)
                messages.append(Message("user", text, tokens))
            else:
                messages.append(self.message("user", tp.user))
                input_len = self.maker.count(head + tp.user)
            if not tp.send:
                messages.append(self.message("assistant", tp.answer))
                continue
            if input_len + tp.output_len > self.spec.limits.max_total_len:
                self.truncated += sum(t.send for t in turns[k:])
                break
            turn = len(out)
            think = self.spec.multi_turn.think_time_s if turn else 0.0
            out.append(
                PlannedRequest(
                    0,
                    conv,
                    turn,
                    tuple(messages),
                    input_len,
                    tp.output_len,
                    prefix_id,
                    think_time_s=think,
                )
            )
            if k == last_send:
                break
            seed = derive_seed(self.spec.seed, "answer", conv, turn)
            placeholder = self.maker.random_text(tp.output_len, seed)
            messages.append(Message("assistant", placeholder, tp.output_len, turn))
        return out


def _draws(dist: LengthDist, batch: int, rng: np.random.Generator) -> Iterator[int]:
    while True:
        yield from (int(x) for x in sample(dist, batch, rng))


def _synthetic(spec: WorkloadSpec, b: _Builder) -> list[list[PlannedRequest]]:
    assert spec.input is not None and spec.output is not None and spec.num_requests is not None
    n = spec.num_requests
    rng = np.random.default_rng(spec.seed)
    prefix_ids = prefix_assignment(spec.prefixes, n, spec.seed)
    if not spec.multi_turn.enabled:
        ins, outs = sample(spec.input, n, rng), sample(spec.output, n, rng)
        need = ins + outs + np.array([0 if p is None else spec.prefixes.length for p in prefix_ids])
        over = int((need > spec.limits.max_total_len).sum())
        if over:
            raise TrafficError(
                f"{over} of {n} requests need more than max_total_len="
                f"{spec.limits.max_total_len} tokens (prefix + input + output); set a maximum "
                "on the length distributions or raise the limit"
            )
        turns = [[_Turn(int(i), int(o))] for i, o in zip(ins, outs, strict=True)]
        return [b.conversation(c, prefix_ids[c], None, t) for c, t in enumerate(turns)]
    assert spec.multi_turn.turns is not None
    ins_it, outs_it = _draws(spec.input, n, rng), _draws(spec.output, n, rng)
    turns_it = _draws(spec.multi_turn.turns, n, rng)
    convs: list[list[PlannedRequest]] = []
    sent = 0
    while sent < n:
        c = len(convs)
        count = min(next(turns_it), n - sent)
        plan = [_Turn(next(ins_it), next(outs_it)) for _ in range(count)]
        reqs = b.conversation(c, prefix_ids[c % n], None, plan)
        if not reqs:
            raise TrafficError(
                f"conversation {c}: its first turn needs more than max_total_len="
                f"{spec.limits.max_total_len} tokens; lower the lengths or raise the limit"
            )
        convs.append(reqs)
        sent += len(reqs)
    return convs


def _file_turns(
    item: FileConversation, spec: WorkloadSpec, maker: TextMaker, special: int, out: Iterator[int]
) -> list[_Turn]:
    """The turns of one file entry: every turn (multi-turn), the first (ShareGPT, as vLLM), or
    the entry as written with its last user message sent (JSONL/CSV)."""

    def answer_len(k: int, text: str | None) -> int:
        if spec.output is not None:
            return next(out)
        if text is not None and (k < len(item.turns) - 1 or item.output_len is None):
            return maker.count(text) + special
        if item.output_len is None:
            raise DataError(
                spec.source.path or "",
                "no output length: give this entry one, or give the spec an output distribution",
                item.line,
                "output_len",
            )
        return item.output_len

    turns = item.turns
    if spec.multi_turn.enabled:
        return [_Turn(t.user, answer_len(k, t.answer)) for k, t in enumerate(turns)]
    if spec.source.kind == "sharegpt":
        return [_Turn(turns[0].user, answer_len(0, turns[0].answer))]
    history = [_Turn(t.user, 0, send=False, answer=t.answer or "") for t in turns[:-1]]
    last = len(turns) - 1
    return [*history, _Turn(turns[-1].user, answer_len(last, turns[-1].answer))]


def _valid(spec: WorkloadSpec, prompt_len: int, output_len: int) -> bool:
    """vLLM's `is_valid_sequence` (lengths counted with special tokens)."""
    lim = spec.limits
    short_out = spec.output is None and output_len < lim.min_len
    return not (
        prompt_len < lim.min_len
        or short_out
        or prompt_len > lim.max_input_len
        or prompt_len + output_len > lim.max_total_len
    )


def _from_file(
    spec: WorkloadSpec, data: Conversations, b: _Builder, special: int
) -> tuple[list[list[PlannedRequest]], int, int]:
    items = list(data.items)
    if spec.source.shuffle:
        random.Random(spec.seed).shuffle(items)
    limit = spec.num_requests
    out_it = _draws(spec.output, 256, np.random.default_rng(spec.seed)) if spec.output else iter(())
    prefix_ids = prefix_assignment(spec.prefixes, len(items), spec.seed)
    convs: list[list[PlannedRequest]] = []
    sent = skipped = 0
    for k, item in enumerate(items):
        if limit is not None and sent >= limit:
            break
        turns = _file_turns(item, spec, b.maker, special, out_it)
        first = next(t for t in turns if t.send)
        system = b.system(prefix_ids[k], item.system)
        head = "".join(m.content for m in system)
        history = "".join(str(t.user) + t.answer for t in turns if not t.send)
        assert isinstance(first.user, str)
        prompt_len = b.maker.count(head + history + first.user) + special
        if not _valid(spec, prompt_len, first.output_len):
            skipped += 1
            continue
        if limit is not None:
            keep = limit - sent
            sends = [i for i, t in enumerate(turns) if t.send][:keep]
            turns = turns[: sends[-1] + 1]
        reqs = b.conversation(len(convs), prefix_ids[k], item.system, turns)
        convs.append(reqs)
        sent += len(reqs)
    if not convs:
        raise DataError(data.path, f"no entry passes the length limits ({spec.limits})")
    oversampled = 0
    if limit is not None and sent < limit:
        if spec.multi_turn.enabled:
            raise DataError(
                data.path,
                f"only {sent} turns fit the limits in {len(convs)} conversations; "
                f"num_requests is {limit}",
            )
        pick = random.Random(spec.seed)
        pool = [c[0] for c in convs]
        for _ in range(limit - sent):
            convs.append([replace(pick.choice(pool), conversation=len(convs))])
            oversampled += 1
    return convs, skipped, oversampled


def _trace_request(entry: TraceEntry, k: int, spec: WorkloadSpec, b: _Builder) -> PlannedRequest:
    """A prompt of exactly `input_length` tokens whose i-th block of `block_size` tokens is the
    same text wherever its hash id appears (tokens past the hashed blocks are this request's)."""
    size = spec.source.block_size
    segments: list[tuple[int, int]] = []
    left = entry.input_length
    for h in entry.hash_ids:
        n = min(size, left)
        segments.append((n, derive_seed(spec.seed, "block", h, n)))
        left -= n
    if left > 0:
        segments.append((left, derive_seed(spec.seed, "trace", k)))
    head = "".join(b.maker.random_text(n, seed) for n, seed in segments[:-1])
    head_tokens = b.maker.count(head)
    need = entry.input_length - head_tokens
    tail, _ = b.maker.fit_tail(head, need, segments[-1][1], head_tokens)
    message = Message("user", head + tail, entry.input_length)
    return PlannedRequest(
        0, k, 0, (message,), entry.input_length, entry.output_length, hash_ids=entry.hash_ids
    )


def planned_duration_s(requests: Sequence[PlannedRequest]) -> float:
    """The least time the plan takes: a conversation's planned start plus the think time before
    its later turns (the answers' own time comes on top), for the longest conversation."""
    end: dict[int, float] = {}
    for r in requests:
        end[r.conversation] = end.get(r.conversation, 0.0) + (r.offset_s or 0.0) + r.think_time_s
    return max(end.values(), default=0.0)


def trace_entries(spec: WorkloadSpec, data: Trace) -> tuple[list[TraceEntry], int]:
    """The trace lines the plan replays (those within `max_total_len`, up to `num_requests`) and
    how many were skipped."""
    fit = [e for e in data.entries if e.input_length + e.output_length <= spec.limits.max_total_len]
    if not fit:
        raise DataError(data.path, f"no trace line fits max_total_len ({spec.limits})")
    return fit[: spec.num_requests], len(data.entries) - len(fit)


def check_schedule(spec: WorkloadSpec, n: int, data: Conversations | Trace | None) -> None:
    """The arrival schedule of `n` conversations within `MAX_SCHEDULE_S`, before any prompt is
    built; a trace's refusal names its file, the line and the timestamp field."""
    if isinstance(data, Trace) and spec.arrival.kind == "trace":
        entries, _ = trace_entries(spec, data)
        try:
            schedule(spec.arrival, len(entries), spec.seed, [e.timestamp_ms for e in entries])
        except ScheduleTooLong as exc:
            raise DataError(data.path, exc.detail, entries[exc.index].line, "timestamp") from None
    elif spec.arrival.kind == "open":
        schedule(spec.arrival, n, spec.seed)


def check(spec: WorkloadSpec) -> Conversations | Trace | None:
    """The spec's file read (within its caps) and its schedule's length checked, without a
    tokenizer: what a run would refuse, refused before anything is stored. An open loop is
    checked at its most conversations (`num_requests`, else the file's entries)."""
    data = None if spec.source.kind == "synthetic" else read_source(spec.source)
    n = spec.num_requests
    if n is None:
        n = len(data.entries) if isinstance(data, Trace) else len(data.items) if data else 1
    check_schedule(spec, n, data)
    return data


def materialize(
    spec: WorkloadSpec,
    tokenizer: TokenizerLike,
    data: Conversations | Trace | None = None,
    special_tokens: int | None = None,
) -> Schedule:
    """The request list for `spec`. `data` is the spec's file already read (`read_source`), or
    None to read it here; `special_tokens` is what the tokenizer adds to a plain encode (found
    from a `LocalTokenizer` when None), counted in file lengths as vLLM counts them."""
    b = _Builder(spec, tokenizer)
    kind = spec.source.kind
    if kind != "synthetic" and data is None:
        data = read_source(spec.source)
    skipped = oversampled = 0
    timestamps: list[float] | None = None
    if isinstance(data, Trace):
        if kind != "trace":
            raise TrafficError(f"a {kind} source was given a trace")
        entries, skipped = trace_entries(spec, data)
        check_schedule(spec, len(entries), data)
        convs = [[_trace_request(e, k, spec, b)] for k, e in enumerate(entries)]
        timestamps = [e.timestamp_ms for e in entries]
    elif data is not None:
        special = added_special_tokens(tokenizer) if special_tokens is None else special_tokens
        convs, skipped, oversampled = _from_file(spec, data, b, special)
    else:
        convs = _synthetic(spec, b)
    offsets = schedule(spec.arrival, len(convs), spec.seed, timestamps)
    requests: list[PlannedRequest] = []
    for c, reqs in enumerate(convs):
        for r in reqs:
            start = offsets[c] if offsets is not None and r.turn == 0 else None
            requests.append(replace(r, index=len(requests), conversation=c, offset_s=start))
    planned = planned_duration_s(requests)
    if planned > MAX_SCHEDULE_S:
        raise ScheduleTooLong(
            "multi_turn.think_time_s", len(requests) - 1, planned, "the think time between turns"
        )
    digest = None if data is None else data.digest
    return Schedule(spec, tuple(requests), digest, skipped, b.truncated, oversampled)
