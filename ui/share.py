"""Sharing on the History page: export a bundle, download a report, publish to the team folder,
and see and import teammates' bundles.

`render_sharing(db_path)` is the one entry point. Files are built only when a download button is
clicked (deferred callables), publishing and importing run in button callbacks, and the only
session state is a one-shot flash message. Widget keys start with `share_`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from core.status import is_active
from store import connect, queries
from store.bundle import SUFFIX, BundleError, export_bundle, import_bundle
from store.team import TeamError, bundle_file_name, import_new, list_team, publish
from tuning.decide.search.names import shown_names
from tuning.present.report import build_report, report_file_name
from tuning.settings import load_settings
from ui.common import md_code
from ui.common import md_escape as esc

FLASH_KEY = "share_flash"


def _flash(kind: str, text: str) -> None:
    st.session_state[FLASH_KEY] = (kind, text)


def _who() -> dict[str, str]:
    """Who shares, as a bundle records it: the author and host settings (or the system's)."""
    settings = load_settings()
    return {"author": settings.resolved_author(), "host": settings.resolved_host()}


def _bundle_bytes(
    db_path: Path, run_ids: Sequence[int], exp_ids: Sequence[int]
) -> Callable[[], bytes]:
    """Deferred: the bundle is written only when the download button is clicked."""

    def make() -> bytes:
        with tempfile.TemporaryDirectory(prefix="share-") as tmp:
            out = Path(tmp) / f"bundle{SUFFIX}"
            export_bundle(db_path, out, **_who(), run_ids=run_ids, experiment_ids=exp_ids)
            return out.read_bytes()

    return make


def report_bytes(
    db_path: Path,
    run_ids: Sequence[int],
    exp_ids: Sequence[int],
    baseline_ids: Sequence[int] = (),
    slo_ms: Mapping[str, float] | None = None,
) -> Callable[[], bytes]:
    """Deferred like the bundle: the report is built only when its button is clicked (History's
    selection, or Compare's runs with its baseline and SLOs)."""

    def make() -> bytes:
        page = build_report(
            db_path,
            run_ids=run_ids,
            experiment_ids=exp_ids,
            baseline_ids=baseline_ids,
            slo_ms=slo_ms,
        )
        return page.encode("utf-8")

    return make


def _publish(db_path: Path, folder: str, run_ids: list[int], exp_ids: list[int]) -> None:
    try:
        path = publish(db_path, folder, **_who(), run_ids=run_ids, experiment_ids=exp_ids)
    except (BundleError, TeamError) as exc:
        _flash("error", f"not published: {esc(exc)}")
        return
    _flash("success", f"published {esc(path.name)} to the team folder")


def _import_new(db_path: Path, folder: str) -> None:
    try:
        summary = import_new(db_path, folder)
    except TeamError as exc:
        _flash("error", esc(exc))
        return
    # File names and reasons come from the team folder, i.e. from teammates: text, not markdown.
    lines = [
        f"{esc(i.bundle.name)}: {esc(i.result.describe())}" for i in summary.imports if i.result
    ]
    lines += [f"{esc(i.bundle.name)} refused: {esc(i.error)}" for i in summary.refused]
    if not summary.imports:
        _flash("info", "nothing new in the team folder")
    else:
        _flash(
            "warning" if summary.refused else "success",
            f"imported {summary.runs_added} run(s)\n\n" + "\n\n".join(f"- {x}" for x in lines),
        )


def _import_file(db_path: Path) -> None:
    upload = st.session_state.get("share_upload")
    if upload is None:
        return
    with tempfile.TemporaryDirectory(prefix="share-upload-") as tmp:
        path = Path(tmp) / "upload.bundle.zip"
        path.write_bytes(upload.getvalue())
        try:
            result = import_bundle(db_path, path)
        except BundleError as exc:
            _flash("error", f"{esc(upload.name)} refused: {esc(exc)}")
            return
    _flash("success", f"{esc(upload.name)}: {esc(result.describe())}")


def _selection(conn: Any) -> tuple[list[int], list[int]]:
    exps = [
        e
        for e in queries.list_experiments(conn, include_hidden=True)
        if not is_active(e.get("status"))
    ]
    runs = [r for r in queries.history_rows(conn) if not is_active(r.get("status"))]
    shown = shown_names(conn, exps)  # a search's step by its search's id, not its key
    exp_label = {
        int(e["id"]): f"experiment {e['id']}: {shown[int(e['id'])]} ({e.get('author') or '?'})"
        for e in exps
    }
    run_label = {
        int(r["id"]): f"run {r['id']} · {r.get('param')} = {r.get('value')} · "
        f"{r.get('status')} · {r.get('author') or '?'}"
        for r in runs
    }
    c1, c2 = st.columns(2)
    exp_ids = c1.multiselect(
        "Experiments (all their runs)",
        list(exp_label),
        format_func=exp_label.__getitem__,
        key="share_experiments",
    )
    run_ids = c2.multiselect(
        "Runs", list(run_label), format_func=run_label.__getitem__, key="share_runs"
    )
    return [int(i) for i in run_ids], [int(i) for i in exp_ids]


def _team_section(db_path: Path, folder: str) -> None:
    st.markdown("#### Team folder")
    if not folder:
        st.info(
            "No team folder set: choose a shared folder in Settings to publish bundles "
            "there and import your teammates'."
        )
        return
    try:
        bundles = list_team(folder, db_path)
    except TeamError as exc:
        st.warning(esc(exc))
        return
    st.caption(
        f"{md_code(folder)} · {len(bundles)} bundle(s). Imported runs keep their author and "
        "host; Compare flags runs from different hardware as not comparable."
    )
    if bundles:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "file": b.name,
                        "author": b.manifest.author if b.manifest else None,
                        "host": b.manifest.host if b.manifest else None,
                        "created (UTC)": b.manifest.created_at if b.manifest else None,
                        "experiments": b.manifest.counts["experiments"] if b.manifest else None,
                        "runs": b.manifest.counts["runs"] if b.manifest else None,
                        "state": b.state if not b.error else f"invalid: {b.error}",
                    }
                    for b in bundles
                ]
            ),
            hide_index=True,
            key="share_team_table",
        )
    n_new = sum(1 for b in bundles if b.needs_import)
    st.button(
        f"Import new ({n_new})",
        key="share_import_new",
        on_click=_import_new,
        args=(db_path, folder),
        disabled=n_new == 0,
        help="Each bundle is checked first (checksums, schema, types, limits); a bad one "
        "is refused on its own and changes nothing.",
    )


def render_sharing(db_path: Path) -> None:
    """The sharing section: select, export, report, publish; then the team folder."""
    with st.container(key="share"):
        st.markdown("### Share")
        flash = st.session_state.pop(FLASH_KEY, None)
        if flash:
            getattr(st, flash[0])(flash[1])
        settings = load_settings()
        folder = settings.team_folder.strip()
        path = Path(db_path)
        if not path.exists():
            st.info("No runs yet: nothing to share.")
            _team_section(path, folder)
            return
        with connect(path, readonly=True) as conn:
            run_ids, exp_ids = _selection(conn)
        chosen = bool(run_ids or exp_ids)
        author, host = settings.resolved_author(), settings.resolved_host()
        c1, c2, c3 = st.columns(3)
        c1.download_button(
            "Export bundle",
            data=_bundle_bytes(path, run_ids, exp_ids),
            file_name=bundle_file_name(author, host),
            mime="application/zip",
            key="share_export",
            disabled=not chosen,
            on_click="ignore",
            help="One file with configuration, workload, summaries, request "
            "rows, samples and log excerpts; secrets scrubbed.",
        )
        c2.download_button(
            "Report (HTML)",
            data=report_bytes(path, run_ids, exp_ids),
            file_name=report_file_name(
                exp_ids[0] if len(exp_ids) == 1 and not run_ids else None, run_ids
            ),
            mime="text/html",
            key="share_report",
            disabled=not chosen,
            on_click="ignore",
            help="Standalone, opens offline.",
        )
        c3.button(
            "Publish selected",
            key="share_publish",
            on_click=_publish,
            args=(path, folder, run_ids, exp_ids),
            disabled=not chosen or not folder,
            help="Write a bundle into the team folder"
            if folder
            else "Set a team folder in Settings first",
        )
        st.file_uploader(
            "Import a bundle file",
            type=["zip"],
            key="share_upload",
            on_change=_import_file,
            args=(path,),
        )
        _team_section(path, folder)
