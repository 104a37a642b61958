"""Writes the lab's small, self-made workload files, deterministically (same bytes every run).

    .venv/bin/python workloads/make_datasets.py        # rewrites the files next to this script

- chat-500.sharegpt.json: 500 ShareGPT conversations. Turns per conversation, user-message and
  answer lengths follow long-tailed (lognormal) distributions like public chat logs, scaled down so
  every conversation fits the embedded engine's 2,048-token context. Text is recombined from
  tuning/engine/assets/corpus.txt: no downloads, no real users' words.
- mooncake-small.jsonl: 300 requests in Mooncake's trace format (timestamp in ms, input_length,
  output_length, hash_ids of 512-token blocks). Requests come in bursts; most reuse the blocks of
  one of a few shared system prompts, and follow-up requests of a session extend their previous
  request's blocks, so a prefix cache has real work.
- prompts-40.jsonl / prompts-40.csv: small examples of the JSONL (`prompt` or OpenAI `messages`,
  with `output_len` or `max_tokens`) and CSV (prompt, output_len) formats.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "tuning" / "engine" / "assets" / "corpus.txt"
SEED = 12
BLOCK = 512
OPENERS = (
    "Can you explain",
    "Why does",
    "How should I think about",
    "Summarize",
    "Give me a short answer:",
    "I am tuning a server.",
    "Quick question:",
    "Compare",
)


def _sentences() -> list[str]:
    text = " ".join(CORPUS.read_text().split())
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def _lognormal_int(rng: random.Random, mean: float, sigma: float, low: int, high: int) -> int:
    mu = math.log(mean) - sigma**2 / 2
    return max(low, min(high, round(rng.lognormvariate(mu, sigma))))


def _words(rng: random.Random, sentences: list[str], n: int) -> str:
    """About `n` words of corpus sentences in random order (the last one cut to fit)."""
    out: list[str] = []
    while len(out) < n:
        out.extend(rng.choice(sentences).split())
    return " ".join(out[:n])


def _user(rng: random.Random, sentences: list[str], n: int) -> str:
    body = _words(rng, sentences, max(n - 3, 1))
    return f"{rng.choice(OPENERS)} {body.rstrip('.')}?"


def chat(n_conversations: int = 500) -> list[dict[str, object]]:
    """ShareGPT entries; a conversation stops before its words would pass ~1,500 (~1,800 tokens)."""
    rng = random.Random(SEED)
    sentences = _sentences()
    out: list[dict[str, object]] = []
    for i in range(n_conversations):
        turns = _lognormal_int(rng, 1.7, 0.6, 1, 6)
        messages: list[dict[str, str]] = []
        budget = 1500
        for _ in range(turns):
            user = _lognormal_int(rng, 28, 0.9, 4, 400)
            answer = _lognormal_int(rng, 60, 0.7, 6, 300)
            if user + answer > budget and messages:
                break
            budget -= user + answer
            messages.append({"from": "human", "value": _user(rng, sentences, user)})
            messages.append({"from": "gpt", "value": _words(rng, sentences, answer)})
        out.append({"id": f"chat-{i:03d}", "conversations": messages})
    return out


def trace(n_requests: int = 300) -> list[dict[str, object]]:
    """Mooncake lines: bursty arrivals, a few shared system prompts, sessions that grow."""
    rng = random.Random(SEED + 1)
    next_block = 0

    def new_blocks(k: int) -> list[int]:
        nonlocal next_block
        ids = list(range(next_block, next_block + k))
        next_block += k
        return ids

    systems = [new_blocks(1 + k % 2) for k in range(4)]  # 1 or 2 shared blocks each
    sessions: list[list[int]] = []
    t = 0.0
    lines: list[dict[str, object]] = []
    for _ in range(n_requests):
        burst = rng.random() < 0.15
        t += rng.expovariate(1 / 40.0) if burst else rng.expovariate(1 / 300.0)
        output = _lognormal_int(rng, 120, 0.6, 8, 400)
        if sessions and rng.random() < 0.3:  # a follow-up: the session's blocks, plus one more
            ids = rng.choice(sessions)
            ids.extend(new_blocks(1))
        else:
            ids = list(rng.choice(systems)) if rng.random() < 0.7 else []
            ids.extend(new_blocks(rng.randint(0, 1)))
            if ids:
                sessions.append(ids)
        if len(ids) * BLOCK > 2048 - output or not ids:
            ids = ids[: (2048 - output) // BLOCK]
        full = max(len(ids) - 1, 0) * BLOCK
        last = rng.randint(BLOCK // 4, BLOCK) if ids else rng.randint(40, 480)
        input_length = min(full + last, 2048 - output)
        lines.append(
            {
                "timestamp": round(t),
                "input_length": input_length,
                "output_length": output,
                "hash_ids": list(ids),
            }
        )
    return lines


def examples(n: int = 40) -> tuple[list[dict[str, object]], list[list[object]]]:
    """JSONL lines (half `prompt`, half `messages`) and CSV rows."""
    rng = random.Random(SEED + 2)
    sentences = _sentences()
    jsonl: list[dict[str, object]] = []
    rows: list[list[object]] = [["prompt", "output_len"]]
    for i in range(n):
        prompt = _user(rng, sentences, _lognormal_int(rng, 40, 0.8, 5, 400))
        out = _lognormal_int(rng, 100, 0.5, 8, 400)
        if i % 2:
            messages = [
                {"role": "system", "content": "You answer questions about serving LLMs."},
                {"role": "user", "content": prompt},
            ]
            jsonl.append({"messages": messages, "max_tokens": out})
        else:
            jsonl.append({"prompt": prompt, "output_len": out})
        rows.append([prompt, out])
    return jsonl, rows


def _jsonl(items: list[dict[str, object]]) -> str:
    return "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)


def main() -> None:
    entries = ",\n".join(json.dumps(entry, ensure_ascii=False) for entry in chat())
    (HERE / "chat-500.sharegpt.json").write_text("[\n" + entries + "\n]\n")  # an entry a line
    (HERE / "mooncake-small.jsonl").write_text(_jsonl(trace()))
    jsonl, rows = examples()
    (HERE / "prompts-40.jsonl").write_text(_jsonl(jsonl))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    (HERE / "prompts-40.csv").write_text(buf.getvalue())
    for name in ("chat-500.sharegpt.json", "mooncake-small.jsonl", "prompts-40.jsonl"):
        print(f"{name}: {(HERE / name).stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
