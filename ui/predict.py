"""The KV cache each value would get, shown on New experiment before anything starts
(tuning.engine.predict), and predicted vs the engine's figures for the Runs table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from core.units import format_bytes
from tuning.engine.params import show_value
from tuning.engine.predict import ModelShape, error_pct, predict_values
from tuning.experiment.spec import ExperimentSpec
from ui.common import md_escape


def render_prediction(experiment: ExperimentSpec) -> None:
    """A table of the predicted KV cache per value of an experiment that starts the lab's engine;
    an error per value that cannot start."""
    spec, param, values = experiment.engine, experiment.param, experiment.values
    if spec is None or not param.restarts_server or not values:
        return
    try:
        shape = ModelShape.load(spec.model)
        config = dict(experiment.config)
        rows = predict_values(param.name, values, config, shape, backend=spec.backend, env=spec.env)
    except (OSError, ValueError, KeyError) as exc:
        st.caption(md_escape(f"No KV prediction: {exc}"))
        return
    st.subheader("Predicted KV cache")
    frame = pd.DataFrame(
        [
            {
                param.name: show_value(param.name, r.value),
                "bytes/token": r.bytes_per_token,
                "block size": r.block_size,
                "KV budget": None if r.budget_bytes is None else format_bytes(r.budget_bytes),
                "KV blocks": r.kv_blocks,
                "KV tokens": r.kv_tokens,
                "max concurrency": r.max_concurrency,
                "starts": "yes" if r.can_start else "no",
            }
            for r in rows
        ]
    )
    st.dataframe(frame, hide_index=True, key="new_prediction", width="stretch")
    mml = rows[0].max_model_len if rows else None
    st.caption(
        f"From the model's config.json. KV budget: {rows[0].budget_source}. Max concurrency = "
        f"KV blocks / blocks of one max-model-len ({mml}) request."
    )
    for r in rows:
        for problem in r.problems:
            st.error(
                md_escape(
                    f"{param.name} = {show_value(param.name, r.value)} cannot start: {problem}"
                )
            )
        for warning in r.warnings:
            st.warning(md_escape(f"{param.name} = {show_value(param.name, r.value)}: {warning}"))


def prediction_columns(run: Mapping[str, Any]) -> dict[str, Any]:
    """Predicted KV tokens beside the engine's, with the error in %, for the Runs table."""
    predicted = run.get("predicted_kv_cache_tokens")
    err = error_pct(predicted, run.get("kv_cache_tokens"))
    return {
        "KV tokens predicted": predicted,
        "prediction error %": None if err is None else round(err, 2),
    }
