"""The CLI's entry point starts light (no Altair, pandas or Streamlit imported) and knows every
chart kind."""

from __future__ import annotations

import subprocess
import sys

from tuning.cli import compare as cli_compare
from tuning.present.charts import kinds


def test_cli_starts_without_altair_and_knows_every_chart_kind() -> None:
    assert cli_compare.CHART_KINDS == kinds.CHART_KINDS
    code = (
        "import sys, tuning.cli.main as m; m.build_parser(); "
        "sys.exit(1 if {'altair', 'pandas', 'streamlit'} & set(sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
