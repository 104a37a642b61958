"""Help text for the flags that are defined without any: mostly the shared workload and traffic
flags that lower layers add to several commands (tuning.measure.traffic, tuning.experiment.spec),
whose words for the user are the CLI's to say. `fill_help` gives each flagless action its line once
the parser is built; a flag that already has help keeps it. tests/tuning/cli/test_cli_habits.py
walks the whole parser and fails on any flag left without help."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

# By option string (or a positional's dest), the same meaning in every command that has it.
FLAG_HELP: dict[str, str] = {
    "--json": "print the result as JSON on stdout instead of the table",
    "--model": "the served model name (default: the configured engine's)",
    "--name": "a name for the experiment, shown in lists and reports",
    "--concurrency": "requests kept in flight",
    "--num-requests": "measured requests per run",
    "--input-len": "prompt tokens per request, exact",
    "--output-len": "output tokens per request (max_tokens with ignore_eos)",
    "--shared-prefix-len": "tokens of a prefix shared by every prompt",
    "--seed": "random seed of the prompts and the arrival schedule (same seed, same requests)",
    "--num-warmups": "unmeasured requests sent first (default: one wave = concurrency)",
    "--endpoint": "the OpenAI API the requests use",
    "--request-timeout": "seconds one request may take before it counts as failed",
    "--dataset-format": "the data file's format (default: told from its name and content)",
    "--dataset": "a data file (workloads/ is searched too)",
    "--request-rate": "open loop: requests per second",
    "--max-concurrency": "open loop / trace: in-flight cap",
    "--burstiness": "gamma shape of the arrivals; 1 = Poisson",
    "--multi-turn": "conversations: TURNS turns each",
    "--think-time": "seconds between a conversation's turns",
    "--trace-speed": "trace replay speed factor (2 = twice as fast)",
    "--start-timeout": "seconds each server may take to become healthy before its run fails",
    "--force": "do it again even when it is already done",
    "--out": "the file to write",
    "--title": "the report's title (default: one made from what it compares)",
    "--note": "a line for the bundle's manifest",
    "--param": "the engine parameter (a vLLM flag name, e.g. max-num-seqs)",
    "--run": "the run (its id, as `runs` prints it)",
    "bundle": "the bundle file to import (.tlab.zip)",
    "name": "the name to save it under (then --workload NAME uses it)",
    "action": "what to do",
}

# By command path and option, where one command means something more specific.
COMMAND_HELP: dict[tuple[str, str], str] = {
    ("workload preview", "--concurrency"): "requests kept in flight for the preview's schedule",
    ("workload preview", "--json"): "the preview as JSON",
    ("fleet", "action"): "status: the nodes, slots, GPUs and what each runs",
    ("report", "--out"): "the HTML file to write",
    ("engine info", "--json"): "the engine's facts as JSON",
    ("engine detect", "--json"): "what was found, as JSON",
    ("server start", "--json"): "the started server's facts as JSON",
    ("server status", "--json"): "the server's state as JSON",
    ("predict", "--json"): "the predictions as JSON",
    ("findings", "--json"): "the findings as JSON",
    ("team", "--json"): "the teammates' bundles as JSON",
    ("import", "--json"): "what was imported, as JSON",
    ("publish", "--note"): "a line for the published bundle's manifest",
    ("engine setup", "--force"): "rebuild the venv and the model even when they are ready",
}


def _walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield from _walk(sub, (*path, name))


def fill_help(parser: argparse.ArgumentParser) -> None:
    """Every action without help gets its line from COMMAND_HELP, else FLAG_HELP."""
    for path, sub in _walk(parser):
        command = " ".join(path)
        for action in sub._actions:
            if action.help is not None or isinstance(action, argparse._SubParsersAction):
                continue
            for key in [*action.option_strings, action.dest]:
                text = COMMAND_HELP.get((command, key)) or FLAG_HELP.get(key)
                if text:
                    action.help = text
                    break
