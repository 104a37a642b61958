"""Checking an endpoint before a run: every way it can be wrong gets a message that says what to
check, and never echoes a key."""

from __future__ import annotations

import pytest

from tests.fakes.fake_openai import fake_server
from tuning.loadgen.endpoint import EndpointError, check_endpoint
from tuning.params import free_port

MODEL = "fake-model"
KEY = "sk-test-0123456789abcdef"


def test_check_endpoint_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with fake_server(api_key=KEY) as srv:
        with pytest.raises(EndpointError, match="no API key was sent; check OPENAI_API_KEY"):
            check_endpoint(srv.base_url, MODEL)
        with pytest.raises(EndpointError, match="refused; check OPENAI_API_KEY") as wrong:
            check_endpoint(srv.base_url, MODEL, "sk-wrong-key")
        assert "sk-wrong-key" not in str(wrong.value)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        assert check_endpoint(srv.base_url, MODEL) == [MODEL]
        with pytest.raises(EndpointError, match=r"check the model name \(served: fake-model\)"):
            check_endpoint(srv.base_url, "llama-9000")
        with pytest.raises(EndpointError, match="404.*check the base URL"):
            check_endpoint(srv.base_url + "/somewhere", MODEL)
    with pytest.raises(EndpointError, match="connection refused.*check the base URL"):
        check_endpoint(f"http://127.0.0.1:{free_port()}", MODEL)
    with pytest.raises(EndpointError, match="check the base URL"):
        check_endpoint("localhost:8000", MODEL)
