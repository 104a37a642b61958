"""Every chart kind builds from a comparison, downsampled to a bounded size."""

from __future__ import annotations

import json
from typing import Any

from tuning.present import export
from tuning.present.charts import build as ch
from tuning.present.charts import common, kinds


def test_every_chart_kind_builds_small(charts_lab: dict[str, Any]) -> None:
    for kind in kinds.CHART_KINDS:
        chart = ch.build_chart(charts_lab["db"], charts_lab["cmp"], kind)
        assert chart is not None, kind
        spec = chart.to_dict()
        blob = json.dumps(spec)
        rows = sum(len(v) for v in spec.get("datasets", {}).values())
        assert rows <= common.MAX_POINTS + 200, (kind, rows)
        assert len(blob) < 600_000, kind
    svg = export.chart_svg(ch.build_chart(charts_lab["db"], charts_lab["cmp"], "memory"))
    assert b"pre-allocates" in svg
