"""Icons that render everywhere (AppTest over every page of the seeded lab): every icon is one of
Streamlit's Material icons, and nothing the pages draw is an emoji (a browser without an emoji
font shows those as empty boxes)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest import open_page
from ui.common import ICONS

# Pictographs, dingbats and misc symbols (⚖ ⚙ ⚠ 🧪 📈 ...) and the emoji variation selector.
EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f]")
PAGES = [
    None,
    "app_pages/1_New_experiment.py",
    "app_pages/2_Runs.py",
    "app_pages/3_Live.py",
    "app_pages/4_Compare.py",
    "app_pages/5_History.py",
    "app_pages/6_Settings.py",
]


def _nodes(node: Any) -> Iterator[Any]:
    yield node
    for child in (getattr(node, "children", None) or {}).values():
        yield from _nodes(child)


def icons_and_texts(at: AppTest) -> tuple[list[str], list[str]]:
    icons, texts = [], []
    for node in _nodes(at._tree):
        proto = getattr(node, "proto", None)
        fields = getattr(getattr(proto, "DESCRIPTOR", None), "fields_by_name", None) or {}
        if "icon" in fields and getattr(proto, "icon", ""):
            icons.append(proto.icon)
        for name in ("body", "label", "help", "text", "placeholder"):
            value = getattr(proto, name, None) if name in fields else None
            if isinstance(value, str) and value:
                texts.append(value)
    return icons, texts


def test_icons_are_material_names() -> None:
    assert all(re.fullmatch(r":material/[a-z_]+:", i) for i in ICONS.values())


@pytest.mark.parametrize("page", PAGES)
def test_pages_draw_material_icons_and_no_emoji(dashboard_lab: dict[str, Any], page: str) -> None:
    at = open_page(page)
    icons, texts = icons_and_texts(at)
    assert all(i.startswith(":material/") for i in icons), icons
    if page is None:
        assert set(ICONS[k] for k in ("new", "runs", "live", "compare", "history")) <= set(icons)
    emoji = [t for t in texts + icons if EMOJI.search(t)]
    assert emoji == [], emoji[:3]
