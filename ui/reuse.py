"""The New experiment page's reuse offer: earlier runs with a planned run's exact fingerprint,
named, dated and by whom, counted only when the user ticks the box (never silently)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from tuning.experiment.reuse import Offer, apply_offer, decoded, find_offer
from tuning.experiment.spec import ExperimentSpec
from ui.common import md_escape

REUSE_HELP = (
    "Same engine and vLLM version, the same flags, model, hardware and workload: these runs "
    "measured exactly what this experiment would. Ticked, they count toward its repeats (marked "
    "as reused, with where they came from) and only the missing runs are measured; a teammate's "
    "bundle is imported first. Unticked, every run is measured."
)


def render_reuse_offer(db_path: Path, spec: ExperimentSpec, team_folder: str) -> Offer | None:
    """Show the offer for the experiment `spec` would write; the offer when the user ticked
    "count these N earlier runs", else None."""
    draft = {**decoded(spec.row().columns()), "id": None}
    offer = find_offer(db_path, draft, team_folder=team_folder or None)
    for note in offer.notes:  # bundle names and errors may be a teammate's: plain text
        st.caption(md_escape(note))
    if not offer.count:
        return None
    st.info("  \n".join(md_escape(line) for line in offer.lines()))
    take = st.checkbox(
        f"count these {offer.count} earlier runs", value=False, key="new_reuse", help=REUSE_HELP
    )
    return offer if take else None


def take_offer(db_path: Path, experiment_id: int, offer: Offer | None) -> None:
    """Copy the ticked offer's runs into the new experiment and say how many were counted."""
    if offer is not None:
        copies = apply_offer(db_path, experiment_id, offer)
        st.info(f"Counted {len(copies)} earlier runs as reused evidence; the rest are measured.")
