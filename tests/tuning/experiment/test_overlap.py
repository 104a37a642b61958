"""What the next run does before the last one is over (issue 38, items 2 and 3): the server's stop
begins as soon as its load is over and runs beside the storing, yet no start ever meets a
server of the lab still alive; and each workload's prompts are built once and kept for the runs
after it, only while the tokenizer is the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store import connect, queries
from tests.fakes.engines import fake_spec
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.engine.prelaunch import PrelaunchedServer
from tuning.engine.procs import group_members
from tuning.engine.server import ServerProcess, port_is_free
from tuning.engine.spec import EngineSpec
from tuning.experiment.load_prep import LoadPrep
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import FALLBACK_TOKENIZER_ID, ServerTokenizer, Workload

WL = Workload(num_requests=6, concurrency=2, input_len=8, output_len=8, num_warmups=2)


def test_no_start_meets_a_server_of_the_lab_still_alive(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4 starts (max-num-seqs 4, 2, 2, 4): at each, every earlier server is gone, its whole
    process group and its port, though each stop began while its run was still storing. A server
    spawned ahead (tuning.engine.prelaunch) only imports until it is let go: its start is then."""
    started: list[ServerProcess] = []
    met: list[str] = []
    real_start, real_release = ServerProcess.start, PrelaunchedServer.release

    def check(new: ServerProcess) -> None:
        for old in started:
            if old is new:
                continue
            if old.alive() or group_members(old.pgid or 0):
                met.append(f"server {old.pid} alive at the next start")
            if not port_is_free(old.launch.host, old.launch.port):
                met.append(f"port {old.launch.port} still held at the next start")

    def start(self: ServerProcess) -> None:
        if not isinstance(self, PrelaunchedServer):
            check(self)
        real_start(self)
        started.append(self)

    def release(self: PrelaunchedServer) -> None:
        check(self)
        real_release(self)

    monkeypatch.setattr(ServerProcess, "start", start)
    monkeypatch.setattr(PrelaunchedServer, "release", release)
    db_path = lab_home / "lab.db"
    exp_id = plan_experiment(
        db_path,
        ExperimentSpec.build(
            param="max-num-seqs", values=[4, 2], repeats=2, workload=WL, engine=fake_spec()
        ),
    )
    run_experiment(db_path, exp_id, start_timeout=60)
    with connect(db_path, readonly=True) as db:
        runs = queries.list_runs(db, exp_id, include_hidden=True)
    assert [r["status"] for r in runs] == ["done"] * 4 and len(started) == 4
    assert met == []
    ahead = [
        p["seconds"]
        for r in runs[1:]
        for p in r["anatomy"]["overlapped"]
        if p["key"] == "stop_ahead"
    ]
    assert len(ahead) == 3  # runs 2-4 each found the last server's stop begun before them
    assert not any(s.alive() for s in started)


@pytest.fixture
def two_servers() -> Iterator[tuple[FakeOpenAIServer, FakeOpenAIServer]]:
    with (
        FakeOpenAIServer(FakeConfig(model="fake")) as a,
        FakeOpenAIServer(FakeConfig(model="fake")) as b,
    ):
        yield a, b


def test_a_server_tokenizers_prompts_are_kept_while_the_next_server_tokenizes_alike(
    two_servers: tuple[FakeOpenAIServer, FakeOpenAIServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two_servers
    loads, engine = LoadPrep(), fake_spec()
    first = loads.prepare(engine, a.base_url, "fake", WL, None)
    assert not first.reused and first.tokenizer_id == "server:/tokenize"
    again = loads.prepare(engine, b.base_url, "fake", WL, None)  # a new server, the same model
    assert again.reused and again.prompts == first.prompts
    other = loads.prepare(engine, b.base_url, "fake", Workload(**{**WL.to_dict(), "seed": 3}), None)
    assert not other.reused and other.prompts != first.prompts  # another workload: built
    # A server whose tokenizer gives the corpus other ids (a flag under test that changes
    # tokenization): the kept prompts are not trusted, they are built again.
    real = ServerTokenizer.usable_ids

    def other_pool(self: ServerTokenizer) -> list[int]:
        return real(self)[1:]

    monkeypatch.setattr(ServerTokenizer, "usable_ids", other_pool)
    changed = loads.prepare(engine, a.base_url, "fake", WL, None)
    assert not changed.reused


def test_a_server_that_cannot_say_how_it_tokenizes_gets_its_prompts_built() -> None:
    loads, engine = LoadPrep(), fake_spec()
    with FakeOpenAIServer(FakeConfig(model="fake")) as a:
        first = loads.prepare(engine, a.base_url, "fake", WL, None)
    with FakeOpenAIServer(FakeConfig(model="fake", tokenize=False)) as gateway:
        after = loads.prepare(engine, gateway.base_url, "fake", WL, None)
    assert not after.reused and after.tokenizer_id == FALLBACK_TOKENIZER_ID
    assert after.prompts != first.prompts


def test_a_local_tokenizers_prompts_are_kept_for_the_same_file(
    tiny_engine_dir: Path, tmp_path: Path
) -> None:
    model = tiny_engine_dir / "tiny-llama"
    engine = EngineSpec(
        name="custom", command=["vllm"], model=str(model), served_model_name="t", backend="gpu"
    )
    loads = LoadPrep()
    first = loads.prepare(engine, "http://127.0.0.1:9", "t", WL, None)  # no server needed
    again = loads.prepare(engine, "http://127.0.0.1:9", "t", WL, None)
    assert not first.reused and again.reused and again.prompts == first.prompts
    # Another folder holding a copy: another file, built again (the same prompts: same ids).
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "tokenizer.json").write_bytes((model / "tokenizer.json").read_bytes())
    moved = EngineSpec(
        name="custom", command=["vllm"], model=str(copy), served_model_name="t", backend="gpu"
    )
    rebuilt = loads.prepare(moved, "http://127.0.0.1:9", "t", WL, None)
    assert not rebuilt.reused and rebuilt.prompts == first.prompts
