"""`python -m tuning experiment` against a server the lab did not start (the fake stands in for a
gateway): a workload sweep, and an API key that reaches no DB, bundle, report, log or argv."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from store import open_db, queries
from store.bundle import import_bundle
from tests.checks import unpacked
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer


def attached_sweep(base_url: str, db_path: Path, values: str, *extra: str) -> list[str]:
    """The CLI arguments of a concurrency sweep against `base_url` with model gw-model."""
    return [
        "experiment",
        "--repeats",
        "1",
        "--base-url",
        base_url,
        "--model",
        "gw-model",
        "--param",
        "concurrency",
        "--values",
        values,
        *extra,
        "--input-len",
        "16",
        "--output-len",
        "8",
        "--db",
        str(db_path),
        "--json",
    ]


def test_attached_concurrency_experiment_from_the_cli(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    db_path = lab_home / "lab.db"
    with FakeOpenAIServer(
        FakeConfig(model="gw-model", itl_ms=1.0, ttft_ms=5.0, api_key="sk-canary-123")
    ) as srv:
        args = attached_sweep(srv.base_url + "/v1/", db_path, "2,8", "--num-requests", "24")
        out = tuning_cli(args, lab_home, timeout=120, env={"OPENAI_API_KEY": "sk-canary-123"})
        assert out.returncode == 0, out.stdout + out.stderr
        peak_seen = srv.stats.max_concurrent
    ids = json.loads(out.stdout.strip().splitlines()[-1])["run_ids"]
    db = open_db(db_path)
    low, high = (queries.get_run(db, i) for i in ids)
    assert (low["value"], high["value"]) == ("2", "8")
    for run in (low, high):
        assert run["status"] == "done" and run["completed"] == 24 and run["failed"] == 0
        # Server-side facts the lab cannot know are unknown, not guessed.
        assert run["kv_cache_tokens"] is None and run["time_to_healthy_s"] is None
        assert run["engine"] == "attached" and run["hardware"] is None
        assert run["workload"]["concurrency"] == int(run["value"])
    assert low["workload_fingerprint"] != high["workload_fingerprint"]
    assert peak_seen == 8
    raw = db_path.read_bytes() + b"".join(
        p.read_bytes() for p in lab_home.rglob("*") if p.is_file()
    )
    assert b"sk-canary-123" not in raw


CANARY = "sk-canary-XYZ-7f3e9a"


def _cmdline_watch(stop: threading.Event, seen: list[str]) -> None:
    """Read every process's argv while the experiment runs (argv is public on a shared box)."""
    while not stop.is_set():
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if CANARY.encode() in argv:
                seen.append(argv.decode("utf-8", "replace"))
        stop.wait(0.02)


def test_api_key_canary_reaches_no_db_bundle_report_log_or_argv(
    lab_home: Path, tmp_path: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    db_path = lab_home / "lab.db"
    env = {"OPENAI_API_KEY": CANARY}
    stop, seen = threading.Event(), []
    watcher = threading.Thread(target=_cmdline_watch, args=(stop, seen), daemon=True)
    watcher.start()
    try:
        with FakeOpenAIServer(
            FakeConfig(model="gw-model", itl_ms=1.0, ttft_ms=3.0, api_key=CANARY)
        ) as srv:
            args = attached_sweep(
                srv.base_url + "/v1", db_path, "2,4", "--repeats", "2", "--num-requests", "16"
            )
            done = tuning_cli(args, lab_home, timeout=300, env=env)
            assert done.returncode == 0, done.stdout + done.stderr
            assert set(srv.stats.authorization) == {f"Bearer {CANARY}"}  # the key was used
        ids = json.loads(done.stdout.strip().splitlines()[-1])
        out_dir = tmp_path / "out"
        out_dir.mkdir()
        for args in (
            [
                "export",
                "--experiment",
                str(ids["experiment_id"]),
                "--out",
                str(out_dir / "canary.bundle.zip"),
            ],
            [
                "report",
                "--experiment",
                str(ids["experiment_id"]),
                "--out",
                str(out_dir / "canary.html"),
            ],
        ):
            step = tuning_cli([*args, "--db", str(db_path)], lab_home, timeout=300, env=env)
            assert step.returncode == 0, step.stdout + step.stderr
            assert CANARY not in step.stdout + step.stderr
        assert CANARY not in done.stdout + done.stderr
        imported = tmp_path / "imported.db"
        import_bundle(imported, out_dir / "canary.bundle.zip")
    finally:
        stop.set()
        watcher.join(timeout=2)
    assert not seen, seen
    blobs = [p for root in (lab_home, out_dir) for p in root.rglob("*") if p.is_file()]
    blobs += [p for p in tmp_path.glob("imported.db*")]
    assert any(p.name == "canary.html" for p in blobs) and any(p.suffix == ".zip" for p in blobs)
    for path in blobs:
        raw = path.read_bytes()
        if path.suffix == ".zip":
            raw += unpacked(path)
        assert CANARY.encode() not in raw, path
    html = (out_dir / "canary.html").read_text()
    assert "<svg" in html and "gw-model" in html


def test_one_run_a_side_warns_in_one_line(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    """Issue 37 item 3: `--repeats 1` ran and ended with no verdict, and nothing warned."""
    with FakeOpenAIServer(FakeConfig(model="gw-model", itl_ms=1.0, ttft_ms=1.0)) as srv:
        args = attached_sweep(srv.base_url + "/v1/", lab_home / "lab.db", "1,2")
        out = tuning_cli([*args, "--num-requests", "2"], lab_home, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    warned = [line for line in out.stderr.splitlines() if "cannot decide" in line]
    assert warned == [
        "warning: --repeats 1: one run a side cannot decide anything (a verdict needs at least "
        "two runs of each value): repeat until decided, the default, or ask for 2 or more"
    ]


def test_after_its_runs_the_cli_says_whether_longer_loads_would_decide_sooner(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    """Issue 37 item 3 / issue 38 item 6: nothing said whether runs were long enough for the
    noise seen. With two runs a side stored, the CLI prints the load length advice, its numbers
    from those runs, on stderr and in --json."""
    with FakeOpenAIServer(FakeConfig(model="gw-model", itl_ms=1.0, ttft_ms=2.0)) as srv:
        args = attached_sweep(srv.base_url + "/v1/", lab_home / "lab.db", "1,2")
        args[args.index("--repeats") + 1] = "2"
        out = tuning_cli([*args, "--num-requests", "16"], lab_home, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    said = [line for line in out.stderr.splitlines() if line.startswith("load length: ")]
    assert len(said) == 1, out.stderr
    advice = json.loads(out.stdout.strip().splitlines()[-1])["load_advice"]
    assert advice["line"] == said[0] and advice["current"]["requests"] == 16
    assert advice["current"]["runs_a_side"] >= 2 and advice["start_s"] >= 0
