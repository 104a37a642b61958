"""Planned traffic against the fake server: closed loop over conversations, open loop at a rate
under a concurrency cap, trace replay at a speed factor, and multi-turn conversations that send the
previous real answer. Asserts are on planned offsets, ordering and bodies, never on wall timings."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import uvloop

from tests.fakes.fake_openai import fake_server
from tuning.measure.loadgen.schedule import (
    answer_text,
    dispatch_lags,
    plan_concurrency,
    plan_workload,
    run_schedule_sync,
    sleep_until,
)
from tuning.measure.traffic import (
    Arrival,
    LengthDist,
    MultiTurn,
    Schedule,
    Source,
    WorkloadSpec,
    materialize,
    render_messages,
    render_text,
)
from tuning.measure.traffic.arrival import gap_stats
from tuning.measure.traffic.workload import LocalTokenizer

MODEL = "fake-model"
WORKLOADS = Path(__file__).resolve().parents[3] / "workloads"
TOKEN = " tok"  # what the fake streams, one per token


@pytest.fixture(scope="module")
def tok(tiny_tokenizer: Path) -> LocalTokenizer:
    return LocalTokenizer(tiny_tokenizer)


def small(**kw: object) -> WorkloadSpec:
    base: dict[str, object] = {
        "input": LengthDist("uniform", 24, range_ratio=0.5),
        "output": LengthDist("fixed", 3),
        "num_requests": 24,
        "seed": 5,
    }
    base.update(kw)
    return WorkloadSpec(**base)  # type: ignore[arg-type]


def run(plan: Schedule, endpoint: str = "completions", **fake: object) -> tuple[list, list]:  # type: ignore[type-arg]
    wl = plan_workload(plan, 0, endpoint)  # type: ignore[arg-type]
    with fake_server(**fake) as srv:
        res = run_schedule_sync(srv.base_url, MODEL, plan, [], wl, transport="raw")
        bodies = list(srv.stats.bodies)
        peak = srv.stats.max_concurrent
    assert not res.cancelled and len(res.records) == len(plan.requests)
    assert all(r.ok for r in res.records), [r.error for r in res.records if not r.ok]
    return res.records, [bodies, peak]


def test_closed_single_turn_sends_the_plan_in_order_at_c(tok: LocalTokenizer) -> None:
    plan = materialize(small(arrival=Arrival("closed", concurrency=3)), tok)
    records, (bodies, peak) = run(plan, ttft_ms=5)
    assert plan_concurrency(plan) == 3 and peak <= 3
    assert [r.index for r in records] == list(range(len(plan.requests)))
    assert [r.output_tokens for r in records] == [r.output_len for r in plan.requests]
    sent = {b["prompt"]: b["max_tokens"] for b in bodies}
    assert sent == {r.prompt: r.output_len for r in plan.requests}
    assert all(r.turn == 0 and r.dispatch_lag is None for r in records)  # nothing planned


def test_open_loop_follows_planned_offsets_under_the_cap(tok: LocalTokenizer) -> None:
    spec = small(num_requests=30, arrival=Arrival("open", rate=60.0, max_concurrency=2))
    plan = materialize(spec, tok)
    offsets = [r.offset_s for r in plan.requests]
    assert all(o is not None for o in offsets)
    # The plan's achieved rate is the target (vLLM normalizes the last offset to n / rate).
    assert gap_stats(offsets)["rate"] == pytest.approx(60.0, rel=0.03)  # type: ignore[arg-type]
    records, (_, peak) = run(plan, ttft_ms=20)
    assert peak <= 2  # the cap holds even where the schedule wants more
    for rec, req in zip(records, plan.requests, strict=True):
        assert rec.conversation == req.conversation and rec.turn == 0
        assert rec.dispatch_lag is not None and rec.dispatch_lag >= 0  # never early
        assert rec.start >= (req.offset_s or 0) - 0.002
    # Dispatch order is planned order (offsets increase with the index).
    by_start = sorted(records, key=lambda r: r.start)
    assert [r.index for r in by_start] == sorted(r.index for r in records)
    # Never faster than planned: the achieved rate is at most the target.
    assert len(records) / max(r.start for r in records) <= 60.0 * 1.05
    assert dispatch_lags(records)["planned"] == 30


def test_multi_turn_sends_the_previous_real_answer(tok: LocalTokenizer) -> None:
    spec = small(
        num_requests=12,
        output=LengthDist("uniform", 6, range_ratio=0.5),
        multi_turn=MultiTurn(True, turns=LengthDist("fixed", 3), think_time_s=0.01),
        arrival=Arrival("closed", concurrency=2),
    )
    plan = materialize(spec, tok)
    assert {r.turn for r in plan.requests} == {0, 1, 2}
    records, (bodies, _) = run(plan)
    sent = [b["prompt"] for b in bodies]
    for req in plan.requests:
        answers = {
            p.turn: TOKEN * p.output_len
            for p in plan.requests
            if p.conversation == req.conversation and p.turn < req.turn
        }
        expected = render_text(req, answers)
        assert expected in sent  # turn k carries turn k-1's real answer ...
        if req.turn:
            placeholder = req.messages[-2]
            assert placeholder.answer_turn == req.turn - 1
            assert TOKEN * plan.requests[req.index - 1].output_len in expected
            assert placeholder.content not in expected  # ... not the plan's placeholder
    # A conversation's turns go in order, each after the previous answer ended.
    for a, b in zip(records, records[1:], strict=False):
        if a.conversation == b.conversation:
            assert b.turn == a.turn + 1 and a.end is not None and b.start >= a.end
            assert b.dispatch_lag is not None
    # Prompts grow turn by turn: the server saw the history.
    by_conv: dict[int, list[int]] = {}
    for r in records:
        by_conv.setdefault(r.conversation or 0, []).append(r.prompt_tokens or 0)
    assert all(p == sorted(p) and len(set(p)) == len(p) for p in by_conv.values())


def test_multi_turn_chat_puts_the_answer_in_the_assistant_message(tok: LocalTokenizer) -> None:
    spec = small(
        num_requests=4,
        multi_turn=MultiTurn(True, turns=LengthDist("fixed", 2)),
        arrival=Arrival("closed", concurrency=1),
    )
    plan = materialize(spec, tok)
    _, (bodies, _) = run(plan, endpoint="chat", chat_role_chunk=True)
    later = [r for r in plan.requests if r.turn == 1]
    for req in later:
        out0 = plan.requests[req.index - 1].output_len
        expected = render_messages(req, {0: TOKEN * out0})
        assert expected in [b["messages"] for b in bodies]
        assert expected[-2] == {"role": "assistant", "content": TOKEN * out0}


def test_trace_replay_at_a_speed_factor(tok: LocalTokenizer) -> None:
    spec = WorkloadSpec(
        source=Source("trace", str(WORKLOADS / "mooncake-small.jsonl")),
        input=None,
        output=None,
        num_requests=16,
        arrival=Arrival("trace", speed=40.0, max_concurrency=4),
    )
    plan = materialize(spec, tok)
    stamps = [
        int(line.split('"timestamp": ')[1].split(",")[0])
        for line in (WORKLOADS / "mooncake-small.jsonl").read_text().splitlines()[:40]
    ]
    offsets = [r.offset_s for r in plan.requests]
    assert offsets[0] == 0.0
    # Each offset is the trace's own gap, played 40x as fast.
    kept = [s for s in stamps if (s - stamps[0]) / 1000 / 40 in offsets]
    assert len(kept) >= len(offsets) - 1
    assert offsets == sorted(offsets)  # type: ignore[type-var]
    records, (bodies, peak) = run(plan, ttft_ms=1)
    assert peak <= 4
    # Every planned request reached the server with its planned length. Which one arrived first
    # is not the lab's to keep: two sends 1.55 ms apart can swap on the way (it failed 1 in 5).
    assert sorted(b["max_tokens"] for b in bodies) == sorted(r.output_len for r in plan.requests)
    # The schedule the load generator kept: each request planned at its trace offset (planned =
    # start - lag), none sent early, and sent in trace order.
    for rec, req in zip(records, plan.requests, strict=True):
        assert rec.dispatch_lag is not None and rec.dispatch_lag >= 0
        assert rec.start - rec.dispatch_lag == pytest.approx(req.offset_s, abs=1e-6)
    firsts = sorted(records, key=lambda r: r.start)
    assert [r.index for r in firsts] == [r.index for r in records]  # trace order kept


def test_answer_text_reads_completions_and_chat_streams() -> None:
    comp = (
        b'data: {"choices":[{"text":"a"}]}\n\ndata: {"choices":[{"text":"b"}]}\n\ndata: [DONE]\n\n'
    )
    chat = (
        b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\r\n\r\n'
        b'data: {"choices": [{"delta": {"content": "x"}}]}\r\n\r\n'
        b'data: {"choices":[],"usage":{"completion_tokens":1}}\r\n\r\n'
    )
    assert answer_text(comp) == "ab"
    assert answer_text(chat) == "x"


def test_a_plan_in_the_child_process_with_warmups(tok: LocalTokenizer) -> None:
    from tuning.measure.loadgen.child import run_load_in_subprocess

    spec = small(
        num_requests=6,
        multi_turn=MultiTurn(True, turns=LengthDist("fixed", 2)),
        arrival=Arrival("open", rate=100.0, max_concurrency=2),
    )
    plan = materialize(spec, tok)
    wl = plan_workload(plan, 2)
    phases: list[str] = []
    with fake_server() as srv:
        res = run_load_in_subprocess(
            srv.base_url, MODEL, ["warm-0", "warm-1"], wl, plan=plan, on_phase=phases.append
        )
        prompts = [b["prompt"] for b in srv.stats.bodies]
    # The two warm-ups go out together (concurrency 2): first, in either order.
    assert phases == ["warming_up", "loading"] and set(prompts[:2]) == {"warm-0", "warm-1"}
    assert [(r.conversation, r.turn) for r in res.records] == [
        (r.conversation, r.turn) for r in plan.requests
    ]
    assert all(r.ok and r.dispatch_lag is not None for r in res.records)
    assert any(TOKEN * plan.requests[0].output_len in p for p in prompts[3:])  # a real answer


def test_sleep_until_never_wakes_before_its_deadline() -> None:
    """uvloop (the load generator's loop) fired 121 of 300 sub-4 ms sleeps early; CI stored a
    dispatch lag of -89 us from one. `sleep_until` sleeps again for what is left."""

    async def early_wakes() -> int:
        early = 0
        for i in range(200):
            deadline = time.perf_counter() + 0.0001 + (i % 40) * 0.0001
            await sleep_until(deadline)
            early += time.perf_counter() < deadline
        return early

    assert uvloop.run(early_wakes()) == 0
