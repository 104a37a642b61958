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


# vLLM's environment knobs (VLLM_*): by name where the name does not say, else by the words of
# the name, whole words only (VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD counts tokens: it is no auth
# token, and VLLM_USE_FASTOKENS picks a tokenizer).
LOGS = "the lab reads vLLM's log for what each run applied, so its log stays as vLLM writes it"
USAGE = "the lab turns vLLM's usage reporting off for every start"
BUILD = "vLLM reads it only when it is built or packaged: a running server never sees it"
SECRET = "it holds a secret, and the lab stores every value it tunes"
_ENV_NAMES: dict[str, str] = {
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": CODE,  # clients may then load adapters from files
    "VLLM_LORA_RESOLVER_HF_REPO_LIST": CODE,  # adapters downloaded from the hub
    "VLLM_ASSETS_CACHE": CODE,  # a directory
    "VLLM_MEDIA_CACHE": CODE,  # a directory
    "VLLM_MEDIA_URL_ALLOW_REDIRECTS": CODE,  # what the server fetches
    "VLLM_HUMMING_INPUT_QUANT_CONFIG": CODE,  # JSON or a file's path
    "VLLM_HUMMING_ONLINE_QUANT_CONFIG": CODE,
    "VLLM_SERVER_DEV_MODE": CODE,  # endpoints that run methods on the workers
    "VLLM_GPT_OSS_HARMONY_SYSTEM_INSTRUCTIONS": WHAT,
    "VLLM_TEST_FORCE_LOAD_FORMAT": LAB,  # as --load-format
    "VLLM_DISABLE_LOG_LOGO": LAB,
    "VLLM_TARGET_DEVICE": BUILD,
    "VLLM_MAIN_CUDA_VERSION": BUILD,
    "VLLM_DOCKER_BUILD_CONTEXT": BUILD,
    "VLLM_IMAGE_TAG": BUILD,
    "VLLM_SKIP_VERSION_SUFFIX": BUILD,
}
_ENV_WORDS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"BUILD", "PRECOMPILED"}), BUILD),
    (frozenset({"SECRET", "PASSWORD", "CREDENTIALS", "AUTH"}), SECRET),
    (
        frozenset(
            {
                "KEY",
                "HOST",
                "HOSTNAME",
                "PORT",
                "URL",
                "ADDR",
                "ADDRESS",
                "IP",
                "IPS",
                "ENDPOINT",
                "RPC",
            }
        ),
        REACH,
    ),
    (
        frozenset(
            {"PATH", "ROOT", "DIR", "FILE", "FOLDER", "PLUGIN", "PLUGINS", "MODELSCOPE", "INSECURE"}
        ),
        CODE,
    ),
    (frozenset({"LOG", "LOGGING"}), LOGS),
    (frozenset({"USAGE", "TRACK"}), USAGE),
)


def _env_refusal(name: str) -> str | None:
    if name in _ENV_NAMES:
        return _ENV_NAMES[name]
    words = name.split("_")[1:]
    if words and words[-1] == "TOKEN":  # a secret (HF_TOKEN's kind), not a count of tokens
        return SECRET
    for listed, why in _ENV_WORDS:
        if listed.intersection(words):
            return why
    return None


def refusal(name: str) -> str | None:
    """Why `name` (a flag without `--`, or a VLLM_* variable) is never tuned, or None."""
    key = name.strip().removeprefix("--")
    if key.startswith("VLLM_"):
        return _env_refusal(key)
    return DENIED.get(key.replace("_", "-"))
