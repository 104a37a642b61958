"""Secret detection and scrubbing: the lab's own names are not secrets, keys and tokens are, by
name and by shape, and URLs lose their credentials."""

from __future__ import annotations

import pytest

from core.redact import (
    REDACTED,
    display_url,
    env_secrets,
    is_secret_key,
    scrub_argv,
    scrub_text,
)
from tuning.engine.params import PARAMS


def test_secret_detection_spares_the_lab_s_own_names() -> None:
    for name in (
        "HF_TOKEN",
        "OPENAI_API_KEY",
        "api-key",
        "--hf-token",
        "AWS_SECRET_ACCESS_KEY",
        "password",
        "Authorization",
        "auth_token",
        "GITHUB_TOKEN",
    ):
        assert is_secret_key(name.lstrip("-")), name
    for name in [
        *PARAMS,
        "total_token_throughput",
        "max_tokens",
        "num_key_value_heads",
        "eos_token_id",
        "kv_cache_tokens",
        "prompt_tokens",
        "author",
        "host",
        "tokenizer",
        "VLLM_CPU_KVCACHE_SPACE",
        "HF_HUB_OFFLINE",
    ]:
        assert not is_secret_key(name), name
    assert scrub_argv(["vllm", "--api-key=abc", "--token", "xyz", "--port", "80"]) == [
        "vllm",
        f"--api-key={REDACTED}",
        "--token",
        REDACTED,
        "--port",
        "80",
    ]
    assert scrub_text("key sk-abcdefghijkl and Bearer abc.def") == f"key {REDACTED} and {REDACTED}"
    assert scrub_text("https://gw/v1?api_key=s3cr3t&x=1") == f"https://gw/v1?api_key={REDACTED}&x=1"
    assert scrub_text("max-num-seqs=16 block-size=32") == "max-num-seqs=16 block-size=32"


def test_the_working_directory_is_not_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWD", "/tmp/some-clone")
    monkeypatch.setenv("DB_PWD", "hunter2hunter2")
    assert not is_secret_key("PWD") and is_secret_key("DB_PWD")
    assert "/tmp/some-clone" not in env_secrets() and "hunter2hunter2" in env_secrets()


def test_display_url_drops_credentials() -> None:
    assert display_url("http://user:pw@h:1/v1") == "http://h:1/v1"
    assert display_url("http://h:1") == "http://h:1"
