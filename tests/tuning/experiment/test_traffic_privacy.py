"""Issue 12, item 7 (privacy), with the fake vLLM: a planned run stores each request's prompt hash
and text locally; a bundle (export or publish) carries the lengths and hashes, the prompt text only
with --include-prompts; a report never prints prompt text. The prompts carry a unique marker, looked
for in the bundle file's bytes and in every member once decompressed, and in the report's HTML."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zipfile
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from store import connect
from tests.tuning.experiment.test_traffic_experiment import SMALL
from tuning.cli.main import main as cli_main

MARKER = "PRIVATE-7f3a9c-zebra"


@pytest.fixture(scope="module")
def marked(
    tmp_path_factory: pytest.TempPathFactory, fake_cli: Callable[..., CompletedProcess[str]]
) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("privacy")
    data = home / "private.jsonl"
    lines = [
        {
            "prompt": f"{MARKER} question {i}: how do I reset the router in room {i}?",
            "output_len": 4,
        }
        for i in range(8)
    ]
    data.write_text("".join(json.dumps(x) + "\n" for x in lines))
    done = fake_cli(
        home,
        *(
            "experiment",
            "--repeats",
            "1",
            "--param",
            "concurrency",
            "--values",
            "2",
            "--dataset",
            str(data),
        ),
        *SMALL,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = json.loads(done.stdout.strip().splitlines()[-1])["run_ids"][0]
    return {"home": home, "db": home / "lab.db", "run_id": run_id}


def bundle_bytes(path: Path) -> list[bytes]:
    """The bundle file as stored, and each of its members decompressed."""
    with zipfile.ZipFile(path) as zf:
        return [path.read_bytes(), *(zf.read(name) for name in zf.namelist())]


def bundle_requests(path: Path, tmp: Path) -> list[tuple[Any, ...]]:
    with zipfile.ZipFile(path) as zf:
        zf.extract("bundle.sqlite", tmp)
    conn = sqlite3.connect(tmp / "bundle.sqlite")
    try:
        return conn.execute(
            "select prompt_tokens, prompt_sha256, prompt_text from requests order by idx"
        ).fetchall()
    finally:
        conn.close()


def test_a_planned_run_keeps_each_prompts_hash_and_text_locally(marked: dict[str, Any]) -> None:
    with connect(marked["db"], readonly=True) as db:
        rows = db.execute(
            "select prompt_sha256, prompt_text from requests where run_id = ? order by idx",
            [marked["run_id"]],
        ).fetchall()
    assert len(rows) == 8
    for digest, text in rows:
        assert MARKER in text
        assert digest == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("command", ["export", "publish"])
def test_a_bundle_has_prompt_text_only_with_include_prompts(
    marked: dict[str, Any],
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TUNING_LAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TUNING_LAB_TEAM_FOLDER", str(tmp_path))
    found = {}
    for flag in ([], ["--include-prompts"]):
        argv = [command, "--db", str(marked["db"]), str(marked["run_id"]), *flag]
        out = tmp_path / f"{command}{len(flag)}.bundle.zip"
        assert cli_main([*argv, "--out", str(out)] if command == "export" else argv) == 0
        if command == "publish":
            out = Path(capsys.readouterr().out.split("published ", 1)[1].strip())
        blobs = bundle_bytes(out)
        manifest = json.loads(blobs[1])
        emptied = "requests.prompt_text" in manifest["scrubbed"]["emptied_columns"]
        rows = bundle_requests(out, tmp_path / f"x{len(flag)}")
        assert len(rows) == 8 and all(r[0] and len(r[1]) == 64 for r in rows)  # lengths, hashes
        found[bool(flag)] = (any(MARKER.encode() in b for b in blobs), emptied, rows)
        out.unlink()
    assert found[False][:2] == (False, True)  # not in the file, nor in any member
    assert all(r[2] is None for r in found[False][2])
    assert found[True][:2] == (True, False)
    assert all(hashlib.sha256(r[2].encode()).hexdigest() == r[1] for r in found[True][2])


def test_a_report_never_prints_prompt_text(marked: dict[str, Any], tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    assert (
        cli_main(["report", "--db", str(marked["db"]), str(marked["run_id"]), "--out", str(html)])
        == 0
    )
    body = html.read_bytes()
    assert b"<html" in body.lower() and MARKER.encode() not in body
