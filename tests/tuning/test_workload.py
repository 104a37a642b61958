"""Workload validation and fingerprint, and prompts of exact token length (local and server
tokenizer)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.fakes.fake_openai import fake_server, fake_tokens
from tuning.measure.traffic.workload import (
    LocalTokenizer,
    ServerTokenizer,
    Workload,
    WorkloadError,
    build_prompts,
    prompt_digest,
    server_root,
)


def wl(**kw: object) -> Workload:
    base: dict[str, object] = dict(num_requests=20, concurrency=4, input_len=32, output_len=8)
    base.update(kw)
    return Workload(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"num_requests": 0}, "num_requests"),
        ({"concurrency": -1}, "concurrency"),
        ({"input_len": 2.5}, "input_len"),
        ({"output_len": True}, "output_len"),
        ({"shared_prefix_len": 33}, "longer than"),
        ({"endpoint": "embeddings"}, "endpoint"),
        ({"num_warmups": -1}, "num_warmups"),
        ({"request_timeout_s": 0}, "request_timeout_s"),
        ({"request_timeout_s": float("nan")}, "request_timeout_s"),
    ],
)
def test_invalid_workloads_are_refused(kw: dict[str, object], match: str) -> None:
    with pytest.raises(WorkloadError, match=match):
        wl(**kw)


def test_warmups_default_to_one_wave_and_follow_concurrency() -> None:
    w = wl()
    assert w.num_warmups is None and w.warmups == 4 and w.total_prompts == 24
    assert w.with_value("concurrency", 16).warmups == 16
    assert wl(num_warmups=0).warmups == 0
    assert w.with_value("input-len", 64).input_len == 64
    with pytest.raises(WorkloadError):
        w.with_value("block-size", 32)


def test_fingerprint_is_stable_and_covers_the_load() -> None:
    w = wl()
    assert w.fingerprint() == wl().fingerprint() == Workload.from_dict(w.to_dict()).fingerprint()
    assert len(w.fingerprint()) == 16
    assert w.fingerprint() == "26b6b46305083b62", "changing the recipe must be deliberate"
    for change in (
        {"seed": 1},
        {"input_len": 33},
        {"output_len": 9},
        {"shared_prefix_len": 4},
        {"endpoint": "chat"},
        {"num_requests": 21},
        {"concurrency": 5},
        {"num_warmups": 0},
    ):
        assert wl(**change).fingerprint() != w.fingerprint(), change
    assert wl(request_timeout_s=5).fingerprint() == w.fingerprint()
    assert wl(num_warmups=4).fingerprint() == w.fingerprint()  # None resolves to C = 4
    assert wl(concurrency=8).fingerprint(ignore=["concurrency", "num_warmups"]) == w.fingerprint(
        ignore=["concurrency", "num_warmups"]
    )
    with pytest.raises(WorkloadError):
        w.fingerprint(ignore=["nope"])


def test_dict_round_trip_and_unknown_fields() -> None:
    w = wl(shared_prefix_len=8, endpoint="chat", seed=3, num_warmups=2, request_timeout_s=9)
    assert Workload.from_dict(w.to_dict()) == w
    with pytest.raises(WorkloadError, match="unknown"):
        Workload.from_dict({**w.to_dict(), "rate": 3})


@pytest.mark.parametrize(
    "url", ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/", " http://h:1/v1// "]
)
def test_server_root(url: str) -> None:
    assert server_root(url) == "http://h:1"


def test_server_root_refuses_other_schemes() -> None:
    with pytest.raises(WorkloadError):
        server_root("ftp://h")


def _check_prompts(prompts: Sequence[str], w: Workload, encode: object) -> None:
    enc = [encode(p) for p in prompts]  # type: ignore[operator]
    assert len(prompts) == w.total_prompts
    assert {len(e) for e in enc} == {w.input_len}
    p = w.shared_prefix_len
    assert len({tuple(e[:p]) for e in enc}) == 1
    if w.input_len - p >= 4:
        assert len(set(prompts)) == len(prompts)


@pytest.mark.parametrize(
    "input_len, prefix", [(1, 0), (7, 0), (64, 0), (64, 32), (300, 299), (16, 16), (513, 100)]
)
def test_local_prompts_have_exact_lengths(
    input_len: int, prefix: int, tiny_tokenizer: Path
) -> None:
    tok = LocalTokenizer(tiny_tokenizer)
    w = wl(num_requests=30, input_len=input_len, shared_prefix_len=prefix, seed=input_len)
    prompts = build_prompts(w, tok)
    _check_prompts(prompts, w, tok.encode)
    assert not any(i in tok.special_ids for p in prompts for i in tok.encode(p))


def test_prompts_are_deterministic_from_the_seed(tiny_tokenizer: Path) -> None:
    tok = LocalTokenizer(tiny_tokenizer.parent)  # a folder works too
    a = build_prompts(wl(seed=5), tok)
    assert a == build_prompts(wl(seed=5), LocalTokenizer(tiny_tokenizer))
    assert a != build_prompts(wl(seed=6), tok)
    assert prompt_digest(a) == prompt_digest(list(a)) != prompt_digest(a[::-1])


def test_usable_ids_skip_specials_and_partial_bytes(tiny_tokenizer: Path) -> None:
    tok = LocalTokenizer(tiny_tokenizer)
    pool = tok.usable_ids()
    assert pool and not set(pool) & set(tok.special_ids)
    assert all("\ufffd" not in tok.decode([i]) and "<" not in tok.decode([i]) for i in pool)


def test_missing_tokenizer_file() -> None:
    with pytest.raises(WorkloadError, match="tokenizer.json"):
        LocalTokenizer("/nonexistent/tokenizer.json")


class Stubborn:
    """A tokenizer whose encoding always grows: prompt building must give up, loudly."""

    def encode(self, text: str) -> list[int]:
        return [1] * (len(text) + 1)

    def decode(self, ids: Sequence[int]) -> str:
        return "x" * len(ids)

    def usable_ids(self) -> list[int]:
        return [1, 2, 3]


def test_building_fails_loudly_when_it_cannot_converge() -> None:
    with pytest.raises(WorkloadError, match="exactly 8 tokens"):
        build_prompts(wl(input_len=8), Stubborn())


def test_server_tokenizer_via_tokenize_endpoint() -> None:
    with fake_server() as srv:
        tok = ServerTokenizer(srv.base_url + "/v1/", "fake-model")
        w = wl(num_requests=10, input_len=40, shared_prefix_len=10)
        prompts = build_prompts(w, tok)
        tok.close()
    _check_prompts(prompts, w, fake_tokens)
    assert not any(ch in p for p in prompts for ch in "<>[]|")


def test_server_tokenizer_reports_a_server_without_tokenize() -> None:
    with fake_server() as srv:
        tok = ServerTokenizer(srv.base_url, "fake-model")
        srv.stop()
        with pytest.raises(WorkloadError, match="/tokenize"):
            tok.encode("hello")
