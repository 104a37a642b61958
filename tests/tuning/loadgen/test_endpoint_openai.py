"""Issue 11 item 15: the control calls to an endpoint (the model list and a one-token probe) are
made with the `openai` package, and its typed errors become the lab's plain messages about the key,
the base URL and the model name; `experiment --base-url` asks them before it plans anything."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import open_db, queries
from tests.fakes.fake_openai import fake_server
from tuning.loadgen import endpoint
from tuning.loadgen.endpoint import EndpointError, check_endpoint, probe_endpoint

MODEL = "fake-model"
KEY = "sk-probe-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_the_control_calls_go_through_the_openai_client(monkeypatch: pytest.MonkeyPatch) -> None:
    import openai

    made: list[openai.OpenAI] = []
    real = openai.OpenAI

    def spy(*args: object, **kwargs: object) -> openai.OpenAI:
        made.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return made[-1]

    monkeypatch.setattr(openai, "OpenAI", spy)
    with fake_server() as srv:
        assert check_endpoint(srv.base_url + "/v1", MODEL) == [MODEL]
        probe_endpoint(srv.base_url, MODEL)
        probe_endpoint(srv.base_url, MODEL, endpoint="chat")
        assert srv.stats.paths == ["/v1/completions", "/v1/chat/completions"]
        assert [b["max_tokens"] for b in srv.stats.bodies] == [1, 1]
        assert all(b["stream"] for b in srv.stats.bodies)
        assert srv.stats.authorization == [None, None, None]  # no key: no header at all
    assert len(made) == 3 and all(c.max_retries == 0 for c in made)


def test_the_probe_sends_the_key_and_names_the_model() -> None:
    """(A missing or wrong key and a wrong URL: test_endpoint.py, for both control calls.)"""
    with fake_server(api_key=KEY) as srv:
        probe_endpoint(srv.base_url, MODEL, KEY)
        assert srv.stats.authorization[-1] == f"Bearer {KEY}"
        with pytest.raises(EndpointError, match="model 'llama-9000'.*check the model name"):
            probe_endpoint(srv.base_url, "llama-9000", KEY)


def test_a_server_that_fails_or_hangs_is_a_plain_message() -> None:
    with fake_server(fail_http_on={0}, error_after={1: 0}, hang_on={2}) as srv:
        with pytest.raises(EndpointError, match="HTTP 500: injected failure.*healthy"):
            probe_endpoint(srv.base_url, MODEL)
        with pytest.raises(EndpointError, match="answered an error: injected stream error"):
            probe_endpoint(srv.base_url, MODEL)
        with pytest.raises(EndpointError, match=r"no answer in 1 s.*check the base URL"):
            probe_endpoint(srv.base_url, MODEL, timeout_s=1.0)
    not_root = pytest.raises(EndpointError, match="404.*not an OpenAI-compatible server root")
    with fake_server() as srv, not_root:  # /metrics is not a model list
        check_endpoint(srv.base_url + "/metrics", MODEL)
    assert endpoint.PROBE_PROMPT


def test_an_attached_experiment_with_a_wrong_model_plans_nothing(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    db_path = lab_home / "lab.db"
    with fake_server(model="gw-model", api_key=KEY) as srv:
        base = [
            "experiment",
            "--base-url",
            srv.base_url,
            "--param",
            "concurrency",
            "--values",
            "1",
            "--num-requests",
            "2",
            "--input-len",
            "4",
            "--output-len",
            "2",
            "--db",
            str(db_path),
            "--json",
        ]
        env = {"OPENAI_API_KEY": KEY}
        wrong = tuning_cli([*base, "--model", "gw-modle"], lab_home, timeout=120, env=env)
        assert wrong.returncode == 1, wrong.stdout + wrong.stderr
        assert "check the model name (served: gw-model)" in wrong.stderr
        bad_key = tuning_cli(
            [*base, "--model", "gw-model"], lab_home, timeout=120, env={"OPENAI_API_KEY": "sk-x"}
        )
        assert bad_key.returncode == 1 and "check OPENAI_API_KEY" in bad_key.stderr
        assert not db_path.exists() or queries.list_experiments(open_db(db_path)) == []
        ok = tuning_cli([*base, "--model", "gw-model"], lab_home, timeout=120, env=env)
        assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout.strip().splitlines()[-1])["run_ids"]
