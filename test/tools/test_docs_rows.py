"""The rows the docs quote from a run are that run's: docs/campaigns.md's excerpt of the
push-recovery campaign (``examples/push_recovery.yaml``) is regenerated here from its five
cases and must equal what the page shows (issue 28: the page said 1.13 for case 31's peak
torque ratio long after the physics had made it 8). When the physics changes the rows on
purpose, run ``python test/tools/test_docs_rows.py`` to write the new excerpt into the page."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "campaigns.md"
CAMPAIGN = ROOT / "examples" / "push_recovery.yaml"
CASES = (1, 25, 28, 31, 37)
KEYS = ["case_id", "pushes.0.magnitude", "pushes.0.direction_deg", "contact.stiffness", "stands",
        "fell", "max_tilt_deg", "com_deviation_m", "foot_slip_m", "peak_torque_ratio"]
#: the excerpt: from its header line to the first blank line
BLOCK = re.compile(r"^\| case_id \| pushes\.0\.magnitude .*?(?=\n\n)", re.S | re.M)


def excerpt() -> str:
    from wb_sim.tools.campaign.case import run_case
    from wb_sim.tools.campaign.report import markdown_rows
    from wb_sim.tools.campaign.spec import load_campaign
    campaign = load_campaign(CAMPAIGN)
    rows = []
    for case in campaign.cases:
        if case["index"] in CASES:
            row = run_case({"spec": campaign.spec, "case": case, "out": None})
            assert row["status"] == "ok", row
            rows.append({**case["params"], **row})
    return markdown_rows(rows, KEYS)


def test_the_campaign_excerpt_in_the_docs_is_this_runs():
    page = PAGE.read_text()
    shown = BLOCK.search(page)
    assert shown, f"no excerpt table in {PAGE}"
    now = excerpt()
    assert shown.group(0) == now, (f"docs/campaigns.md's excerpt is stale; this run gives:\n{now}\n"
                                   f"(python test/tools/test_docs_rows.py writes it there)")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    text = PAGE.read_text()
    PAGE.write_text(BLOCK.sub(lambda _: excerpt(), text, count=1))
    print(f"wrote the excerpt into {PAGE}")
