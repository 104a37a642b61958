"""Checking an endpoint before a run: every way it can be wrong gets a message that says what to
check, and never echoes a key (the probe's own cases: test_endpoint_openai.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.fakes.fake_openai import fake_server
from tuning.engine.launch import free_port
from tuning.measure.loadgen.endpoint import EndpointError, check_endpoint, probe_endpoint

MODEL = "fake-model"
KEY = "sk-test-0123456789abcdef"


@pytest.mark.parametrize("call", [check_endpoint, probe_endpoint])
def test_a_missing_key_wrong_key_or_wrong_url_says_what_to_check(
    call: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both control calls (the model list and the one-token probe)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with fake_server(api_key=KEY) as srv:
        with pytest.raises(EndpointError, match="no API key was sent; check OPENAI_API_KEY"):
            call(srv.base_url, MODEL)
        with pytest.raises(EndpointError, match="refused; check OPENAI_API_KEY") as wrong:
            call(srv.base_url, MODEL, "sk-wrong-key")
        assert "sk-wrong-key" not in str(wrong.value)
    with pytest.raises(EndpointError, match="connection refused.*check the base URL"):
        call(f"http://127.0.0.1:{free_port()}", MODEL)
    with pytest.raises(EndpointError, match="check the base URL"):
        call("localhost:8000", MODEL)


def test_check_endpoint_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_server(api_key=KEY) as srv:
        assert check_endpoint(srv.base_url, MODEL) == [MODEL]
        with pytest.raises(EndpointError, match=r"check the model name \(served: fake-model\)"):
            check_endpoint(srv.base_url, "llama-9000")
        with pytest.raises(EndpointError, match="404.*check the base URL"):
            check_endpoint(srv.base_url + "/somewhere", MODEL)
