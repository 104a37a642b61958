"""docs/reference/cli-examples.md shows real outputs (issue 40 item 2: each command's doc page
shows a real output): tools/cli_examples.py runs each command against a scratch lab made by the
tests' fake-run helpers. These tests fail when the committed page is not what the commands print
now, or when a command it shows no longer runs."""

from __future__ import annotations

from tools.cli_examples import LABS, PAGE, REGENERATE, render

STALE = f"docs/reference/cli-examples.md is stale: regenerate it with {REGENERATE} and commit it"


def test_the_committed_page_is_what_the_commands_print() -> None:
    assert PAGE.read_text() == render(), STALE


def test_the_page_shows_the_commands_that_read_results() -> None:
    page = PAGE.read_text()
    shown = {
        argv[0] if argv[0] not in ("plan", "search") else " ".join(argv[:2])
        for _, _, cmds in LABS
        for argv in cmds
    }
    assert {"runs", "compare", "findings", "plan list", "plan show", "search show"} <= shown
    for _, _, commands in LABS:
        for argv in commands:
            line = "$ tuning-lab " + " ".join(a.format(db="lab.db") for a in argv)
            assert line in page


def test_the_outputs_are_the_commands_own() -> None:
    """A real verdict table and run list, not a placeholder."""
    page = PAGE.read_text()
    assert "output throughput              objective" in page
    assert "max-num-seqs                 16 done" in page
    assert "Recommended: serve: vllm serve m --max-num-seqs 16 --block-size 32" in page
    assert (
        "$ tuning-lab search show 1 --db lab.db\nsearch 1 (done): max-num-seqs over 2..32" in page
    )
    assert "  step 1: max-num-seqs = 2, run 1 done, output throughput " in page
    assert "/tmp" not in page and "cli-examples-" not in page  # the scratch path never shows


def test_the_cli_reference_and_the_site_link_the_page() -> None:
    from tools.cli_reference import REPO

    assert "cli-examples.md" in (REPO / "docs" / "reference" / "cli.md").read_text()
    assert "reference/cli-examples.md" in (REPO / "mkdocs.yml").read_text()
