"""The New experiment page's traffic section: real traffic (a data file from workloads/, an upload
or a saved workload; an open-loop rate; conversations) and its preview before anything starts.

`traffic_section(...)` draws the choices and returns the spec they make (None: the classic fixed
lengths above it) and the errors to show; the preview is built only when asked (a button), with the
configured model's tokenizer (the CLI's choice: tuning.measure.traffic.tokenizer_choice), and
shows numbers and length histograms, never a prompt's words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from store import connect, queries
from tuning.measure.traffic import TrafficError, WorkloadSpec
from tuning.measure.traffic.options import TrafficOptions
from tuning.settings import REPO_ROOT, lab_home

CLASSIC = "fixed lengths (above)"
SYNTHETIC = "synthetic (above) + arrival / turns"
SAVED = "saved: "
DATA_SUFFIXES = (".json", ".jsonl", ".csv")
PAGE_FIX = "set Settings' Model path or ID to a folder that has a tokenizer.json"


def _choices(db_path: Path) -> list[str]:
    files = sorted(p.name for p in (REPO_ROOT / "workloads").iterdir() if p.suffix in DATA_SUFFIXES)
    saved: list[str] = []
    if db_path.exists():
        with connect(db_path) as db:  # not read-only: an older lab is migrated first
            saved = [SAVED + str(r["name"]) for r in queries.list_workloads(db)]
    return [CLASSIC, SYNTHETIC, *files, *saved]


def _upload() -> str | None:
    got = st.file_uploader("…or upload a data file", type=[s[1:] for s in DATA_SUFFIXES])
    if got is None:
        return None
    folder = lab_home() / "workloads"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / Path(got.name).name
    path.write_bytes(got.getvalue())
    return str(path)


def traffic_section(
    db_path: Path, classic: dict[str, Any], param_name: str
) -> tuple[WorkloadSpec | None, list[str]]:
    """Draw the choices; return (the spec, errors). `classic` holds the page's workload numbers
    (num_requests, concurrency, input_len, output_len, shared_prefix_len, seed)."""
    source = st.selectbox("Traffic", _choices(db_path), key="wl_source")
    uploaded = _upload()
    c1, c2, c3, c4 = st.columns(4)
    rate = c1.number_input("Request rate (req/s, 0 = closed loop)", 0.0, 1e6, 0.0, key="wl_rate")
    burst = c2.number_input("Burstiness (1 = Poisson)", 0.01, 1000.0, 1.0, key="wl_burst")
    cap = c3.number_input("Max concurrency (0 = none)", 0, 100000, 0, key="wl_cap")
    turns = c4.number_input("Turns (0 = single requests)", 0, 64, 0, key="wl_turns")
    think = st.number_input("Think time between turns (s)", 0.0, 3600.0, 0.0, key="wl_think")
    options = TrafficOptions(
        **classic,
        param=param_name,
        workload=source[len(SAVED) :] if source.startswith(SAVED) else None,
        dataset=uploaded
        or (None if source in (CLASSIC, SYNTHETIC) or source.startswith(SAVED) else source),
        dataset_format=None,
        request_rate=float(rate) or None,
        burstiness=float(burst),
        max_concurrency=int(cap) or None,
        multi_turn=int(turns) or None,
        think_time=float(think),
        trace_speed=1.0,
    )
    if source == CLASSIC and not uploaded and param_name not in ("request-rate", "burstiness"):
        if rate or turns:
            st.caption("Pick 'synthetic' or a file to use the rate and turns.")
        return None, []
    try:
        spec = _spec_of(options, str(db_path), _stamp(options.dataset))
    except (TrafficError, ValueError) as exc:
        return None, [f"workload: {exc}"]
    if spec is None:  # synthetic, closed loop, single requests: the fixed lengths above
        st.caption("With no rate and no turns this is the fixed-lengths workload above.")
        return None, []
    if st.button("Preview workload", key="wl_preview"):
        _preview(spec)
    return spec, []


def _stamp(path: str | None) -> tuple[int, int] | None:
    """The data file's size and mtime: a changed file is read again, an unchanged one is not."""
    if not path:
        return None
    from tuning.measure.traffic.bounded import resolve_path

    try:
        st_ = resolve_path(path).stat()
    except OSError:
        return None
    return st_.st_size, st_.st_mtime_ns


@st.cache_data(max_entries=16, show_spinner=False)
def _spec_of(
    options: TrafficOptions, db_path: str | None, stamp: tuple[int, int] | None
) -> WorkloadSpec | None:
    """The options' spec, its data file read and checked once per file version, not on every
    rerun of the page (a dataset may be 100 MB)."""
    return options.to_spec(Path(db_path) if db_path else None)


def _preview(spec: WorkloadSpec) -> None:
    from tuning.measure.traffic import fingerprint, materialize, preview
    from tuning.measure.traffic.tokenizer_choice import preview_tokenizer
    from tuning.measure.traffic.workload import WorkloadError

    try:
        with st.spinner("materializing the request list…"):
            tokenizer = preview_tokenizer(fix=PAGE_FIX)
            plan = materialize(spec, tokenizer)
    except (TrafficError, WorkloadError) as exc:
        st.error(f"workload: {exc}")
        return
    p = preview(plan)
    m = st.columns(5)
    m[0].metric("Requests", p["requests"])
    m[1].metric("Conversations", p["conversations"])
    m[2].metric("Input tokens", f"{p['tokens']['input']:,}")
    m[3].metric("Output tokens", f"{p['tokens']['output']:,}")
    m[4].metric("Reusable (prefix cache)", f"{100 * p['prefix_sharing']['reusable_share']:.0f}%")
    h1, h2 = st.columns(2)
    for col, key in ((h1, "input_len"), (h2, "output_len")):
        h = p[key]
        frame = pd.DataFrame({"tokens": [int(e) for e in h["edges"][:-1]], "requests": h["counts"]})
        col.caption(f"{key.replace('_', ' ')}: mean {h['mean']:.0f}, p90 {h.get('p90', 0):.0f}")
        col.bar_chart(frame, x="tokens", y="requests")
    a = p["arrival"]
    st.caption(
        f"arrival: {a['kind']}"
        + (f", {a['rate']:.2f} req/s over {a['duration_s']:.1f} s" if "rate" in a else "")
        + f" · fingerprint `{fingerprint(plan)}`"
    )
