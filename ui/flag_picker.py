"""New experiment's parameter picker over every flag of the user's own vLLM: the lab's curated
parameters first, then the flags its parser defines (tuning.engine.flags), searchable and grouped
like
vLLM's own help; a flag the lab never tunes is listed with the reason instead of offered.

The first read of the engine's parser imports vLLM (10-30 s), so the catalog is read only when the
page needs it (a search, "show every flag", a baseline flag outside the curated table) or is
already cached; it is then kept by Streamlit (per engine interpreter and version) and the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st

from store import StoreError, connect
from store import engine_flags as cache
from tuning.compare.inert import inert_knobs
from tuning.engine.flags.catalog import FORMAT, Catalog, CatalogError, FlagInfo, engine_python
from tuning.engine.learn import LISTS, catalog_for, flag_status, needs_catalog, resolve
from tuning.engine.params import PARAMS, Param
from tuning.engine.spec import EngineSpec, installed_vllm_version
from tuning.engine.value_text import join_values, list_text, value_words
from ui.common import md_escape

ALL = "All groups"
CURATED = "Curated by the lab"
ENV = "Environment knobs (VLLM_*)"  # vLLM's own variables, offered only in their own group
READING = (
    "Reading the flags of your vLLM from its own parser: it imports vLLM, about 10-30 s the "
    "first time, then cached."
)
CHECKING = "Checking the values with your vLLM's own parser (it imports vLLM: 10-30 s)..."
INERT_HELP = (
    "Every value an experiment with repeats tried on that workload was within the equivalence "
    "margin of the reference on the watched metrics; a plan skips it on that workload unless "
    "told to include inert flags."
)
WANT_ALL = "new_flags_wanted"  # a UI choice: the user asked to see every flag
LAST_PARAM = "new_param_last"  # the parameter the values were typed for


@dataclass(frozen=True)
class Flags:
    """The engine's catalog when it has been read (or why it could not be)."""

    catalog: Catalog | None
    error: str | None = None


@dataclass(frozen=True)
class Picked:
    """The parameter the user chose (None: nothing matches the search) and the learned ones."""

    param: Param | None
    catalog: Catalog | None = None
    info: FlagInfo | None = None
    learned: dict[str, Param] = field(default_factory=dict)


@st.cache_data(show_spinner=False, max_entries=8, ttl=3600)
def _engine_key(command: tuple[str, ...], version: str) -> tuple[str, str]:
    """(interpreter, vLLM version): what a catalog is cached under (CatalogError is not cached)."""
    python = engine_python(command)
    return python, version if version != "unknown" else installed_vllm_version(python)


@st.cache_data(show_spinner=False, max_entries=8, ttl=600)
def _read(
    db_path: str, python: str, version: str, _spec: EngineSpec, form: int = FORMAT
) -> dict[str, Any]:
    """The catalog as a dict, or {"error": why}; read from the store, else from the engine (the
    lab's catalog format is part of the key: a newer reading is never served an older one)."""
    try:
        return {"catalog": catalog_for(db_path, _spec).to_dict()}
    except CatalogError as exc:
        return {"error": str(exc)}


def _peek(db_path: str | Path, python: str, version: str) -> Catalog | None:
    """The store's cached catalog of this engine, without starting anything; None when an older
    lab cached it (its `format` stamp is not the lab's reading: it is read again)."""
    try:
        with connect(db_path) as db:
            raw = cache.load(db, python, version)
    except StoreError:
        return None
    return Catalog.from_dict(raw) if raw and raw.get("format") == FORMAT else None


def engine_flags(db_path: str | Path, spec: EngineSpec, *, read: bool) -> Flags:
    """The engine's flags if cached; with `read`, read them now under a spinner that says why."""
    try:
        python, version = _engine_key(tuple(spec.command), spec.vllm_version)
    except CatalogError as exc:
        return Flags(None, str(exc))
    found = _peek(db_path, python, version)
    if found is not None or not read:
        return Flags(found)
    with st.spinner(READING):
        raw = _read(str(db_path), python, version, spec)
    if "catalog" in raw:
        return Flags(Catalog.from_dict(raw["catalog"]))
    return Flags(None, str(raw.get("error")))


@st.cache_data(show_spinner=False, max_entries=4, ttl=60)
def inert_notes(db_path: str) -> dict[str, list[str]]:
    """Flag -> one line per workload it was inert on (tuning.compare.inert), from the store."""
    notes: dict[str, list[str]] = {}
    try:
        with connect(db_path, readonly=True) as db:
            found = inert_knobs(db)
    except StoreError:
        return notes
    for k in found:
        notes.setdefault(k.param, []).append(
            f"workload {k.fingerprint} ({k.workload_text}): values {', '.join(k.values)} all "
            f"equivalent (experiment {', '.join(map(str, k.equivalent))})"
        )
    return notes


def _matches(word: str, *texts: str) -> bool:
    return not word or any(word in t.lower() for t in texts)


def offers(
    catalog: Catalog | None, backend: str, word: str = "", group: str = ALL
) -> tuple[list[str], list[tuple[str, str]]]:
    """(the names to offer: curated first, then the engine's tunable flags by help group, or
    its environment knobs in their own group; the ones never offered, each with why: the ones
    the search found, or every refused knob of the environment group (build-time variables,
    secrets ...))."""
    w = word.strip().lower().removeprefix("--")
    env = group == ENV
    infos = (catalog.env if env else catalog.flags) if catalog else {}
    names: list[str] = []
    for name, p in PARAMS.items():
        info = infos.get(name)
        if env:
            in_group = p.kind == "env"
        else:
            in_group = group in (ALL, CURATED) or (info is not None and info.group == group)
        if (
            backend in p.backends
            and in_group
            and _matches(w, name, p.help, info.group if info else "")
        ):
            names.append(name)
    refused: list[tuple[str, str]] = []
    for info in catalog.search(w or None, env=env) if catalog else []:
        status, why = flag_status(info)
        if status == "refused" and (w or env):
            refused.append((info.name, why or "never tuned"))
        elif status == "tunable" and (env or group in (ALL, info.group)):
            names.append(info.name)
    return names, refused


def _label(name: str, catalog: Catalog | None) -> str:
    if name in PARAMS:
        return f"{name} · curated ({PARAMS[name].type})"
    info = catalog.get(name) if catalog else None
    if info is None:
        return name
    kind = f"list of {info.kind}" if info.nargs in LISTS else info.kind
    return f"{name} · {info.group or 'other'} ({kind}{', deprecated' if info.deprecated else ''})"


def suggested_values(param: Param) -> str | None:
    """The values a newly picked parameter starts with, or None to keep what was typed: a choice
    or true/false one compares all its values; a text or JSON flag of the user's vLLM starts from
    its own default (numbers typed for the last flag would be launched as, say, OpenMP core ids)."""
    if param.type == "bool":
        return "false,true"
    if param.type == "choice" and param.choices:
        return join_values(param.choices[:4])
    if param.type == "list" and param.default == "[]" and param.nargs != "*":
        return ""  # an empty default list is no value the flag can be given
    if param.source == "learned" and param.type in ("text", "json", "list"):
        return "" if param.default is None else join_values([param.default])  # quoted if a list
    return None


def _suggest_values(param: Param) -> None:
    """When the parameter changes (picked, or the search left the old one out), start its values
    as `suggested_values` says; the first render keeps the page's own default."""
    last = st.session_state.get(LAST_PARAM)
    st.session_state[LAST_PARAM] = param.name
    if last is None or last == param.name:
        return
    if (values := suggested_values(param)) is not None:
        st.session_state["new_values"] = values


def render_picker(db_path: str | Path, spec: EngineSpec, baseline_names: Iterable[str]) -> Picked:
    """The search box, the help-group filter, the picker and the chosen flag's card."""
    word = st.text_input(
        "Search the flags",
        key="new_flag_search",
        placeholder="a name, a help group or a word of its help: schedul, prefill, cache",
        help="Every flag of your vLLM, as its own parser defines it; the lab's curated ones first.",
    )
    want = bool(word.strip()) or bool(st.session_state.get(WANT_ALL))
    flags = engine_flags(db_path, spec, read=want or needs_catalog(baseline_names))
    catalog = flags.catalog
    group = ALL
    if catalog is not None:
        groups = sorted({f.group for f in catalog.flags.values() if f.group})
        group = st.selectbox(
            "Help group (as your vLLM groups its flags)",
            [ALL, CURATED, *groups, *([ENV] if catalog.env else [])],
            key="new_flag_group",
            help=f"{ENV}: the variables vLLM reads at start, each set in the server's environment.",
        )
    elif flags.error and want:
        st.warning(md_escape(f"Only the lab's curated parameters: {flags.error}"))
    elif st.button("Show every flag of my vLLM", key="new_flags_all", help=READING):
        st.session_state[WANT_ALL] = True
        st.rerun()
    names, refused = offers(catalog, spec.backend, word, group)
    render_refused(refused)
    if not names:
        st.warning(md_escape(f"No tunable flag matches {word.strip()!r}."))
        return Picked(None, catalog)
    if catalog is not None:
        learned = sum(1 for n in names if n not in PARAMS)
        st.caption(
            md_escape(
                f"{len(names) - learned} curated and {learned} more of vLLM "
                f"{catalog.vllm_version}'s {'knobs' if group == ENV else 'flags'} offered"
            )
        )
    inert = inert_notes(str(db_path)) if Path(db_path).exists() else {}
    name = st.selectbox(
        "Parameter to vary",
        names,
        index=start_index(names, group),
        key="new_param",
        placeholder="pick the knob to vary",
        format_func=lambda n: (
            _label(n, catalog) + (" · inert on a stored workload" if n in inert else "")
        ),
    )
    if name is None:  # the environment group preselects nothing: the user picks the knob
        return Picked(None, catalog)
    info = catalog.get(name) if catalog else None
    if name in inert:  # plan skips it on those workloads; an experiment may still want it
        st.caption(md_escape("Inert on " + "; ".join(inert[name])), help=INERT_HELP)
    card = st.container(key="new_flag_card")  # a stable hook for the browser tests
    if name in PARAMS:
        param = PARAMS[name]
        _suggest_values(param)
        with card:
            render_curated(param, info)
        return Picked(param, catalog, info)
    param = resolve(name, catalog)  # offered, so tunable
    _suggest_values(param)
    with card:
        render_learned(param, info, catalog.vllm_version if catalog else "")
    return Picked(param, catalog, info, {param.name: param})


def start_index(names: list[str], group: str) -> int | None:
    """Which name the picker opens on: max-num-seqs where offered, nothing in the environment
    group (its first knob is no suggestion), else the first."""
    if "max-num-seqs" in names:
        return names.index("max-num-seqs")
    return None if group == ENV else 0


def render_refused(refused: list[tuple[str, str]]) -> None:
    """The flags or knobs never offered, folded into one expander, each with why."""
    if not refused:
        return
    with st.expander(f"{len(refused)} not offered, and why", expanded=False):
        st.markdown("\n".join("- " + md_escape(f"{name}: {why}") for name, why in refused))


def render_curated(param: Param, info: FlagInfo | None) -> None:
    """What the lab knows of a curated parameter, and the engine's own default when read."""
    engine = ""
    if info is not None:
        shown = md_escape(f"default {_shown(info.default)}, help group {info.group}")
        engine = f"  \nYour vLLM: {shown}"
    st.info(
        f"**{param.name}** — {param.help}  \nAllowed: {param.describe_range()}"
        + ("" if param.restarts_server else "  \nA workload parameter: no server restart.")
        + engine
    )


def render_learned(param: Param, info: FlagInfo | None, version: str) -> None:
    """A flag as the user's vLLM defines it: type, default, choices, help group and help."""
    kind = info.kind if info else param.type
    lines = [
        f"**{md_escape(param.name)}** · {md_escape(info.group if info else '')} · as your vLLM "
        f"{md_escape(version)} defines it"
    ]
    if param.type == "list":  # several values at once: each value of the experiment is one list
        lines.append(f"Takes {md_escape(param.describe_range())}")
    else:
        lines.append(
            f"Type: {md_escape(kind)}"
            + (f" ({md_escape(info.type_name)})" if info and info.type_name else "")
        )
    if param.choices:
        lines.append("Choices: " + md_escape(", ".join(param.choices)))
    lines.append("Default: " + md_escape(_shown(info.default if info else param.default)))
    if info and info.help:
        lines.append(md_escape(info.help))
    st.info("  \n".join(lines))
    checker = "reader of the variable" if param.kind == "env" else "parser"
    st.caption(
        f"The lab has no units or ranges for it: each value is checked by your vLLM's own "
        f"{checker} when you start, before any server starts."
    )


def _shown(value: Any) -> str:
    if isinstance(value, list):  # a list-valued flag's default, in words
        return value_words(list_text(value)) if value else "an empty list"
    return "none" if value is None else value_words(value)
