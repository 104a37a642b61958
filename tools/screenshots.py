"""`make screenshots`: the README's screenshots of every page, taken in Debian's chromium (through
Playwright) from a lab database of real runs.

    .venv/bin/python tools/screenshots.py [--db LAB.db|LAB.db.xz] [--out docs/screenshots]

The default database is examples/h200/lab-h200-decisions.db.xz: real runs of vLLM on an H200
(README, "On a real GPU"), with `--search examples/h200/decisions-search.json` its concurrency
search; `--db` takes any lab's, e.g. data/lab.db after the demo. The app is served on a copy of it
in a temporary lab home, so the database given is never written. Pages: home, New experiment (with
the workload preview), Live, Runs, Compare (on the experiment it opens on), History and Searches,
each written as a palette PNG of a few hundred KB at most.
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.browser import REPO, chromium, serve_app, wait_idle  # noqa: E402

DEFAULT_DB = REPO / "examples" / "h200" / "lab-h200-decisions.db.xz"
DEFAULT_OUT = REPO / "docs" / "screenshots"
MAX_HEIGHT = 2400  # px of a page kept; a longer page is cut at the bottom
VIEWPORT = {"width": 1280, "height": MAX_HEIGHT}
MAX_BYTES = 400_000


def copy_db(source: Path, target: Path) -> None:
    """The lab DB at `source` (plain or .xz) copied to `target`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.suffix == ".xz":
        with lzma.open(source) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
    else:
        shutil.copyfile(source, target)


def compared_experiment(db_path: Path) -> int:
    """The experiment Compare opens on (the latest with two or more values: a one-run search step
    has nothing to compare)."""
    from store import connect, queries
    from ui.compare import default_experiment

    with connect(db_path, readonly=True) as db:
        experiments = queries.list_experiments(db)
    if not experiments:
        raise SystemExit(f"{db_path}: no experiment to show")
    return int(experiments[default_experiment(experiments)]["id"])


def save_small(png: bytes, path: Path) -> int:
    """Write `png` as a 256-colour PNG no taller than MAX_HEIGHT; returns its size in bytes."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    if image.height > MAX_HEIGHT:
        image = image.crop((0, 0, image.width, MAX_HEIGHT))
    small = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)
    return path.stat().st_size


def whole_page(page: Any) -> bytes:
    """The page from its top down to the end of its content (at most MAX_HEIGHT): the window is
    MAX_HEIGHT tall from the start, since Streamlit scrolls its main block, not the document, and
    redraws its widgets after a resize."""
    try:  # Streamlit draws a skeleton where an element is still loading
        page.locator("[data-testid='stSkeleton']").first.wait_for(state="detached", timeout=60_000)
    except Exception:  # noqa: BLE001 (a picture with a placeholder beats none)
        pass
    page.wait_for_timeout(1000)
    bottom = page.evaluate(
        "(() => { const b = document.querySelector(\"[data-testid='stMainBlockContainer']\");"
        " return b.getBoundingClientRect().top + b.scrollHeight; })()"
    )
    height = min(int(bottom) + 48, MAX_HEIGHT)
    return bytes(
        page.screenshot(clip={"x": 0, "y": 0, "width": VIEWPORT["width"], "height": height})
    )


def preview_workload(page: Any) -> None:
    """New experiment: the traffic section opened, synthetic traffic at 4 requests/s, then the
    preview button."""
    page.locator("summary", has_text="Real traffic").click()
    page.locator(".st-key-wl_source").wait_for(state="visible", timeout=30_000)
    page.locator(".st-key-wl_source [role='combobox']").click()
    page.get_by_role("option").filter(has_text="synthetic").first.click()
    wait_idle(page)
    rate = page.get_by_label("Request rate (req/s, 0 = closed loop)")
    rate.fill("4")
    rate.press("Enter")
    wait_idle(page)
    page.locator(".st-key-wl_preview button").click()
    wait_idle(page)
    page.get_by_text("fingerprint").first.wait_for(timeout=60_000)


def shots(exp_id: int) -> list[tuple[str, str, Callable[[Any], None] | None]]:
    """(file name, page path, what to do before the picture)."""
    return [
        ("home.png", "", None),
        ("new-experiment.png", "New_experiment", preview_workload),
        ("live.png", f"Live?experiment={exp_id}", None),
        ("runs.png", "Runs", None),
        ("compare.png", f"Compare?experiment={exp_id}", None),
        ("history.png", "History", None),
        ("searches.png", "Searches", None),
    ]


def take(db: Path, out: Path, search: Path | None = None) -> list[tuple[Path, int]]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="lab-shots-") as tmp:
        home = Path(tmp) / "lab"
        copy_db(db, home / "lab.db")
        if search is not None:  # a search's --json output, recorded as the CLI's `search import`
            import json

            from tuning.decide.search.adopt import import_result

            import_result(home / "lab.db", json.loads(search.read_text()))
        exp_id = compared_experiment(home / "lab.db")
        with serve_app(home, Path(tmp) / "streamlit.log") as url, chromium() as browser:
            page = browser.new_page(viewport=VIEWPORT)
            for name, path, before in shots(exp_id):
                page.goto(f"{url}/{path}")
                wait_idle(page)
                page.wait_for_timeout(3000)  # charts and fragments draw after the script ends
                if before is not None:
                    before(page)
                    page.wait_for_timeout(1000)
                if page.locator("[data-testid='stException']").count():
                    raise SystemExit(f"{name}: the page shows an exception")
                target = out / name
                size = save_small(whole_page(page), target)
                written.append((target, size))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=DEFAULT_DB, help="lab DB (.db or .db.xz)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for the PNGs")
    parser.add_argument(
        "--search", type=Path, default=None, help="a search's --json output to show on Searches"
    )
    args = parser.parse_args(argv)
    for path, size in take(args.db, args.out, args.search):
        print(f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}: {size:,} bytes")
        if size > MAX_BYTES:
            print(f"  warning: over {MAX_BYTES:,} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
