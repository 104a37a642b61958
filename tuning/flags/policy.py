"""Which of the engine's flags the lab never tunes, and why.

A tuning run changes how vLLM serves, never what it serves or who can reach it: the model, the
tokenizer and the served name are the lab's to set (the workload and the tokenizer depend on
them); network, TLS and keys would expose the server the lab binds to 127.0.0.1; flags that read
a file or import code would let a value run something. Every other flag of the user's vLLM is
tunable "as your vLLM defines it".
"""

from __future__ import annotations

WHAT = "it changes what is served, so runs would not measure the same thing"
REACH = "it changes who can reach the server (the lab binds it to 127.0.0.1 itself)"
CODE = "it reads a file or loads code, which a tuning value must never do"
LAB = "the lab sets it itself for every start"
STATS = "the lab reads vLLM's /metrics; without them a run has no server-side numbers"

_GROUPS: dict[str, tuple[str, ...]] = {
    WHAT: (
        "model",
        "model-tag",
        "tokenizer",
        "tokenizer-mode",
        "skip-tokenizer-init",
        "revision",
        "code-revision",
        "tokenizer-revision",
        "hf-config-path",
        "hf-overrides",
        "served-model-name",
        "chat-template",
        "chat-template-content-format",
        "response-role",
        "lora-modules",
        "generation-config",
        "override-generation-config",
        "tokens-only",
    ),
    REACH: (
        "host",
        "port",
        "uds",
        "api-key",
        "ssl-keyfile",
        "ssl-certfile",
        "ssl-ca-certs",
        "ssl-cert-reqs",
        "ssl-ciphers",
        "enable-ssl-refresh",
        "root-path",
        "allowed-origins",
        "allowed-methods",
        "allowed-headers",
        "allow-credentials",
        "middleware",
        "data-parallel-address",
        "data-parallel-rpc-port",
        "kv-transfer-config",
        "kv-events-config",
        "otlp-traces-endpoint",
        "headless",
        "grpc",
    ),
    CODE: (
        "trust-remote-code",
        "allowed-local-media-path",
        "allowed-media-domains",
        "download-dir",
        "hf-token",
        "ignore-patterns",
        "config",
        "log-config-file",
        "logits-processors",
        "tool-parser-plugin",
        "reasoning-parser-plugin",
        "worker-cls",
        "worker-extension-cls",
        "model-loader-extra-config",
        "pt-load-map-location",
        "trust-request-chat-template",
    ),
    LAB: ("load-format", "disable-log-requests", "enable-log-requests"),
    STATS: ("disable-log-stats",),
}
DENIED: dict[str, str] = {name: why for why, names in _GROUPS.items() for name in names}


# vLLM's environment knobs (VLLM_*): refused by what their names say they hold.
_ENV_WORDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("KEY", "TOKEN", "SECRET", "HOST", "PORT", "URL", "ADDR", "ENDPOINT", "RPC"), REACH),
    (("PATH", "ROOT", "DIR", "FILE", "PLUGIN", "MODELSCOPE", "INSECURE", "DEV_MODE"), CODE),
    (("LOG", "USAGE", "TRACK", "CONFIGURE"), LAB),
)


def refusal(name: str) -> str | None:
    """Why `name` (a flag without `--`, or a VLLM_* variable) is never tuned, or None."""
    key = name.strip().removeprefix("--")
    if key.startswith("VLLM_"):
        parts = set(key.split("_"))
        for words, why in _ENV_WORDS:
            if any(w in parts or (len(w) > 4 and w in key) for w in words):
                return why
        return None
    return DENIED.get(key.replace("_", "-"))
