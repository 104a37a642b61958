"""Spec + tokenizer -> request list: exact token counts re-encoded with the embedded tokenizer,
shared prefixes, multi-turn history, traces' shared blocks, file sources and limits."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tuning.measure.traffic import (
    Arrival,
    DataError,
    LengthDist,
    Limits,
    MultiTurn,
    SharedPrefixes,
    Source,
    TrafficError,
    WorkloadSpec,
    materialize,
    render_messages,
    render_text,
)
from tuning.measure.traffic.materialize import prefix_assignment
from tuning.measure.traffic.workload import LocalTokenizer

WORKLOADS = Path(__file__).resolve().parents[3] / "workloads"


def synthetic(**kw: object) -> WorkloadSpec:
    base: dict[str, object] = {
        "input": LengthDist("uniform", 96, range_ratio=0.5),
        "output": LengthDist("uniform", 24, range_ratio=0.5),
        "num_requests": 40,
        "seed": 3,
    }
    base.update(kw)
    return WorkloadSpec(**base)  # type: ignore[arg-type]


def file_spec(kind: str, path: str, **kw: object) -> WorkloadSpec:
    base: dict[str, object] = {
        "source": Source(kind, path),
        "input": None,
        "output": None,
        "num_requests": None,
    }
    base.update(kw)
    return WorkloadSpec(**base)  # type: ignore[arg-type]


def test_synthetic_prompts_have_exact_token_counts(tok: LocalTokenizer) -> None:
    spec = synthetic(prefixes=SharedPrefixes(3, 32, (0.5, 0.25, 0.25)))
    plan = materialize(spec, tok)
    assert len(plan.requests) == 40
    for r in plan.requests:
        assert len(tok.encode(r.prompt)) == r.input_len
        assert sum(m.tokens for m in r.messages) in range(r.input_len - 2, r.input_len + 3)
        for m in r.messages:
            assert len(tok.encode(m.content)) == m.tokens
    # the prefix adds to the sampled input (vLLM's --random-prefix-len), and is shared text
    by_prefix = Counter(r.prefix_id for r in plan.requests)
    assert by_prefix == {0: 20, 1: 10, 2: 10}
    texts = {r.prefix_id: r.messages[0].content for r in plan.requests}
    assert all(r.messages[0].content == texts[r.prefix_id] for r in plan.requests)
    assert all(len(tok.encode(t)) == 32 for t in texts.values())
    assert all(48 + 32 <= r.input_len <= 144 + 32 for r in plan.requests)


def test_same_spec_same_plan_other_seed_other_plan(tok: LocalTokenizer) -> None:
    a, b = materialize(synthetic(), tok), materialize(synthetic(), tok)
    assert a.requests == b.requests
    c = materialize(synthetic(seed=4), tok)
    assert [r.prompt for r in c.requests] != [r.prompt for r in a.requests]


def test_synthetic_over_the_context_is_an_error(tok: LocalTokenizer) -> None:
    spec = synthetic(input=LengthDist(mean=2000), output=LengthDist(mean=100), num_requests=3)
    with pytest.raises(TrafficError, match="3 of 3 requests need more than max_total_len=2048"):
        materialize(spec, tok)


def test_multi_turn_history(tok: LocalTokenizer) -> None:
    spec = synthetic(
        multi_turn=MultiTurn(True, LengthDist(mean=3), think_time_s=1.5),
        prefixes=SharedPrefixes(1, 16),
        num_requests=7,
    )
    plan = materialize(spec, tok)
    assert [(r.conversation, r.turn) for r in plan.requests] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
        (1, 2),
        (2, 0),
    ]
    c0 = plan.requests[:3]
    for prev, cur in zip(c0, c0[1:], strict=False):
        # the whole previous prompt, then an answer placeholder of the previous output length
        assert cur.messages[: len(prev.messages)] == prev.messages
        answer = cur.messages[len(prev.messages)]
        assert answer.role == "assistant" and answer.answer_turn == prev.turn
        assert len(tok.encode(answer.content)) == prev.output_len == answer.tokens
        assert cur.messages[-1].role == "user" and cur.think_time_s == 1.5
        assert cur.prompt.startswith(prev.prompt + answer.content)
        assert len(tok.encode(cur.prompt)) == cur.input_len
    assert [m.role for m in c0[2].messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert c0[0].think_time_s == 0.0
    # the load generator puts the real answers in place of the placeholders
    real = {0: "REAL-0", 1: "REAL-1"}
    text = render_text(c0[2], real)
    assert "REAL-0" in text and "REAL-1" in text and c0[2].messages[-1].content in text
    chat = render_messages(c0[2], {0: "REAL-0"})
    assert chat[2] == {"role": "assistant", "content": "REAL-0"}
    assert chat[4]["content"] == c0[2].messages[4].content  # missing answer: placeholder stays


def test_conversations_stop_at_the_context_limit(tok: LocalTokenizer) -> None:
    spec = synthetic(
        input=LengthDist(mean=200),
        output=LengthDist(mean=100),
        multi_turn=MultiTurn(True, LengthDist(mean=10)),
        limits=Limits(max_total_len=1000),
        num_requests=6,
    )
    plan = materialize(spec, tok)
    assert len(plan.requests) == 6 and plan.truncated_turns > 0
    assert max(r.turn for r in plan.requests) == 2  # 200, 500, 800 (+100 each) fit; 1100 does not
    assert all(r.input_len + r.output_len <= 1000 for r in plan.requests)


def test_sharegpt_single_turn_is_vllms_sampling(tok: LocalTokenizer) -> None:
    path = WORKLOADS / "chat-500.sharegpt.json"
    plan = materialize(file_spec("sharegpt", str(path), num_requests=100), tok)
    entries = json.loads(path.read_text())
    import random

    random.Random(0).shuffle(entries)
    first = entries[0]["conversations"]
    r = plan.requests[0]
    assert r.prompt == first[0]["value"] and r.turn == 0
    assert r.output_len == len(tok.encode(first[1]["value"]))  # this tokenizer adds no BOS
    assert len(plan.requests) == 100 and plan.data_digest is not None


def test_sharegpt_multi_turn_uses_every_turn(tok: LocalTokenizer) -> None:
    spec = file_spec("sharegpt", "chat-500.sharegpt.json", multi_turn=MultiTurn(True))
    plan = materialize(spec, tok)
    data = json.loads((WORKLOADS / "chat-500.sharegpt.json").read_text())
    assert len(plan.requests) == sum(len(e["conversations"]) // 2 for e in data)
    assert len({r.conversation for r in plan.requests}) == 500
    for r in plan.requests[:200]:
        assert len(tok.encode(r.prompt)) == r.input_len
        assert r.input_len + r.output_len <= 2048


def test_oversampling_and_output_override(tok: LocalTokenizer, tmp_path: Path) -> None:
    path = tmp_path / "few.jsonl"
    path.write_text(
        "".join(json.dumps({"prompt": f"question number {i} " * 3}) + "\n" for i in range(5))
    )
    spec = file_spec("jsonl", str(path), output=LengthDist(mean=20), num_requests=12)
    plan = materialize(spec, tok)
    assert len(plan.requests) == 12 and plan.oversampled == 7
    assert {r.output_len for r in plan.requests} == {20}
    with pytest.raises(DataError, match="no output length") as exc:
        materialize(file_spec("jsonl", str(path)), tok)
    assert exc.value.field == "output_len"


def test_jsonl_messages_are_sent_as_written(tok: LocalTokenizer, tmp_path: Path) -> None:
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "first one"},
        {"role": "assistant", "content": "an answer"},
        {"role": "user", "content": "second"},
    ]
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"messages": msgs, "max_tokens": 9}) + "\n")
    (r,) = materialize(file_spec("jsonl", str(path)), tok).requests
    assert render_messages(r) == msgs and r.output_len == 9
    plan = materialize(file_spec("jsonl", str(path), multi_turn=MultiTurn(True)), tok)
    assert [r.turn for r in plan.requests] == [0, 1]
    assert plan.requests[0].output_len == len(tok.encode("an answer"))


def test_files_filtered_like_vllm(tok: LocalTokenizer, tmp_path: Path) -> None:
    rows = [
        {"prompt": "hi", "output_len": 10},  # too short a prompt (< 4 tokens)
        {"prompt": "a long enough question here", "output_len": 2},  # too short an output
        {"prompt": "a long enough question here", "output_len": 10},
    ]
    path = tmp_path / "f.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    plan = materialize(file_spec("jsonl", str(path), source=Source("jsonl", str(path), False)), tok)
    assert len(plan.requests) == 1 and plan.skipped == 2


def test_trace_blocks_are_shared_text(tok: LocalTokenizer) -> None:
    spec = file_spec("trace", "mooncake-small.jsonl", num_requests=60, arrival=Arrival("trace"))
    plan = materialize(spec, tok)
    assert len(plan.requests) == 60
    blocks: dict[int, str] = {}
    for r in plan.requests:
        ids = tok.encode(r.prompt)
        assert len(ids) == r.input_len
        for k, h in enumerate(r.hash_ids[:-1]):  # full blocks (the last may be partial)
            block = tok.decode(ids[k * 512 : (k + 1) * 512])
            assert blocks.setdefault(h, block) == block
    assert any(len(r.hash_ids) > 1 for r in plan.requests)
    offsets = [r.offset_s for r in plan.requests]
    assert offsets[0] == 0.0 and offsets == sorted(offsets)  # type: ignore[type-var]


def test_open_loop_offsets_go_to_first_turns(tok: LocalTokenizer) -> None:
    spec = synthetic(
        multi_turn=MultiTurn(True, LengthDist(mean=2)),
        arrival=Arrival("open", rate=4.0),
        num_requests=10,
    )
    plan = materialize(spec, tok)
    starts = [r.offset_s for r in plan.requests if r.turn == 0]
    assert all(s is not None for s in starts) and len(starts) == 5
    assert all(r.offset_s is None for r in plan.requests if r.turn > 0)
    assert starts[-1] == pytest.approx(5 / 4.0)
    closed = materialize(synthetic(num_requests=3), tok)
    assert all(r.offset_s is None for r in closed.requests)


def test_prefix_assignment_is_exact() -> None:
    ids = prefix_assignment(SharedPrefixes(2, 8, (0.3, 0.2)), 100, 0)
    assert Counter(ids) == {0: 30, 1: 20, None: 50}
    assert Counter(prefix_assignment(SharedPrefixes(3, 8), 10, 0)) == {0: 4, 1: 3, 2: 3}
