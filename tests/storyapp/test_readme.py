"""The README's settings table names what bin/run reads (issue 24:
DEMO_MODEL_PORT was missing), with the default bin/run really uses."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_model_port_is_in_the_settings_table_with_its_real_default():
    run = (ROOT / "bin" / "run").read_text()
    default = re.search(r"\$\{DEMO_MODEL_PORT:-(\d+)\}", run).group(1)
    rows = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `DEMO_MODEL_PORT`")]
    assert len(rows) == 1 and f"(default {default})" in rows[0]
