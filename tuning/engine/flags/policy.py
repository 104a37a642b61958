"""Which of the engine's flags the lab never tunes, and why; the same inside a JSON value.

A tuning run changes how vLLM serves, never what it serves or who can reach it: the model, the
tokenizer and the served name are the lab's to set (the workload and the tokenizer depend on
them); network, TLS and keys would expose the server the lab binds to 127.0.0.1; flags that read
a file or import code would let a value run something. Every other flag of the user's vLLM is
tunable "as your vLLM defines it". The deny-list names today's flags; the words of a flag's name
(`-cls`, `-plugin`, `-path`, `-port`, ...) catch tomorrow's, and a JSON value's keys (at any depth)
are held to both, so a plugin refused as a flag is refused inside `structured-outputs-config` too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
        "ec-transfer-config",  # as kv-transfer-config: connects instances, loads a connector
        "master-addr",
        "master-port",
        "tool-server",
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
        "scheduler-cls",
        "io-processor-plugin",
        "model-class-overrides",
        "mm-encoder-fp8-scale-path",
        "mm-encoder-fp8-scale-save-path",
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
    # read by vLLM's setup.py when it is built (an older lab cached them among the knobs)
    "CMAKE_BUILD_TYPE": BUILD,
    "MAX_JOBS": BUILD,
    "NVCC_THREADS": BUILD,
    "VERBOSE": BUILD,
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
    if key.startswith("VLLM_") or key in _ENV_NAMES:
        return _env_refusal(key)
    return DENIED.get(key.replace("_", "-"))


# The words of a flag's (or a JSON key's) name that say what its value is: code to import or a
# file, somewhere on the network, a secret. Whole words only (`max-lora-cls-labels` counts labels:
# a number names no class, so the code words apply to text values only).
_CODE_WORDS = frozenset(
    {"cls", "class", "plugin", "plugins", "module", "path", "paths", "dir", "directory"}
    | {"file", "files", "folder", "root"}
)
_REACH_WORDS = frozenset(
    {"host", "hostname", "port", "url", "urls", "addr", "address", "ip", "ips", "endpoint", "rpc"}
)
_SECRET_WORDS = frozenset({"secret", "password", "credentials", "auth"})
_TEXT_KINDS = frozenset({"str", "json", "text"})
_NO_VALUE_KINDS = frozenset({"bool", "switch"})


def _by_words(name: str, text: bool) -> str | None:
    """The reason the words of `name` give, for a value that is text (`text`) or a number."""
    words = name.lower().replace("-", "_").split("_")
    if words[-1] in ("token", "key") or _SECRET_WORDS.intersection(words):
        return SECRET
    if _REACH_WORDS.intersection(words):
        return REACH
    if text and _CODE_WORDS.intersection(words):
        return CODE
    return None


def flag_refusal(name: str, kind: str) -> str | None:
    """Why a flag of the engine (`kind` as its catalog reads it) is never tuned: the deny-list,
    else the words of its name; a switch (true/false) names nothing."""
    if why := refusal(name):
        return why
    if kind in _NO_VALUE_KINDS or name.startswith("VLLM_"):
        return None
    return _by_words(name.removeprefix("--"), kind in _TEXT_KINDS)


def key_refusal(key: str, value: Any) -> str | None:
    """Why the key `key` of a JSON value, holding `value`, is never tuned: a key named as a
    refused flag (`trust_remote_code`, `model`) gets that flag's reason, else its words do (a
    true/false or null names nothing)."""
    if why := DENIED.get(key.replace("_", "-")):
        return why
    if value is None or isinstance(value, bool):
        return None
    return _by_words(key, not isinstance(value, (int, float)))


def json_refusal(value: Any, code_keys: Iterable[str] = ()) -> tuple[str, str] | None:
    """(the dotted key, why) of the first key of a parsed JSON value that is never tuned, or None.
    `code_keys`: dotted keys the engine's own config classes type or document as code to import
    or a file (tuning.engine.flags.engine_probe), whatever their names. Walked without recursion."""
    known = set(code_keys)
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, list):
            stack.extend((where, item) for item in reversed(node))
            continue
        if not isinstance(node, dict):
            continue
        for key, inner in node.items():
            path = f"{where}.{key}" if where else str(key)
            why = CODE if path in known and inner is not None else key_refusal(str(key), inner)
            if why:
                return path, why
        stack.extend(
            (f"{where}.{k}" if where else str(k), v) for k, v in reversed(list(node.items()))
        )
    return None
