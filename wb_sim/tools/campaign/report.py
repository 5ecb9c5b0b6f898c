"""What a campaign leaves: :class:`CampaignResult`, the table (results.csv, and
results.parquet with pyarrow), the cases' wall times (timings.csv) and the summary plots
(matplotlib)."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import ConfigError
from .spec import Campaign


@dataclass
class CampaignResult:
    """What :func:`run_campaign` did."""
    rows: list  #: one dict per case, sorted by case id (the table)
    table: Path  #: results.csv
    parquet: Path | None  #: results.parquet (when pyarrow is importable)
    plots: list  #: PNG paths
    ran: int  #: cases run now
    cached: int  #: cases taken from the cache
    failed: int  #: cases with status 'error' or 'diverged'
    wall_s: float

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


def _cell(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return json.dumps(list(v))
    return str(v)


def columns(campaign: Campaign, rows: list) -> list:
    cols = ["case_id", "case_hash", "status", "seed"] + list(campaign.swept)
    extra = []
    for r in rows:
        for k in r:
            if k not in cols and k not in extra and not k.startswith("_") and k != "error":
                extra.append(k)
    metric_cols = [m for m in campaign.spec["metrics"] if m in extra]
    others = [k for k in extra if k not in metric_cols]
    return cols + metric_cols + others + ["error"]


def write_table(campaign: Campaign, rows: list, out: Path) -> tuple[Path, Path | None]:
    cols = columns(campaign, rows)
    path = out / "results.csv"
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([_cell(r.get(c, "")) for c in cols])
    os.replace(tmp, path)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return path, None
    data = {c: [r.get(c) if not isinstance(r.get(c), (list, tuple)) else json.dumps(r.get(c))
                for r in rows] for c in cols}
    pq.write_table(pa.table(data), out / "results.parquet")
    return path, out / "results.parquet"


def write_timings(wall: dict, out: Path) -> Path:
    """``out``/timings.csv: each case's wall time in its worker, s (not part of the results:
    they differ from run to run)."""
    path = out / "timings.csv"
    with open(path, "w") as f:
        f.write("case_id,wall_s\n" + "".join(f"{i},{w!r}\n" for i, w in sorted(wall.items())))
    return path


def plot_campaign(campaign: Campaign, rows: list, directory: Path) -> list:
    """Success rate ('stands') against each swept scalar parameter, and a histogram of each
    numeric metric; PNGs in ``directory``. Needs matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ConfigError(f"plots need matplotlib (pip install wb_sim[plot]), or set "
                          f"'plots: false': {e}") from None
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    made = []
    ok = [r for r in rows if "stands" in r]
    for key in campaign.swept:
        vals = [r.get(key) for r in ok]
        if not vals or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                               for v in vals):
            continue  # vectors and strings: no axis
        x = np.array(vals, dtype=float)
        series = {"stands": np.array([bool(r["stands"]) for r in ok], dtype=float)}
        if all("fell" in r for r in ok):
            series["fell"] = np.array([bool(r["fell"]) for r in ok], dtype=float)
        uniq = np.unique(x)
        if len(uniq) <= 12:
            groups = [x == u for u in uniq]
            centres = uniq
        else:
            edges = np.linspace(x.min(), x.max(), 11)
            idx = np.clip(np.digitize(x, edges) - 1, 0, 9)
            keep = [i for i in range(10) if np.any(idx == i)]
            groups = [idx == i for i in keep]
            centres = np.array([(edges[i] + edges[i + 1]) / 2 for i in keep])
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, s in series.items():
            rate = np.array([s[g].mean() for g in groups])
            ax.plot(centres, 100 * rate, "o-" if name == "stands" else "s--", label=name)
        for c, g in zip(centres, groups):
            ax.annotate(f"n={int(g.sum())}", (c, 0), textcoords="offset points", xytext=(0, -14),
                        ha="center", fontsize=7)
        ax.legend()
        ax.set_xlabel(key)
        ax.set_ylabel("% of the cases")
        ax.set_ylim(-12, 105)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"stands / fell against {key}")
        made.append(_save(plt, fig, directory / f"success_vs_{key.replace('/', '_')}.png"))
    numeric = [c for c in columns(campaign, rows) if c not in ("case_id", "seed", "stands",
                                                                "fell") and c not in
               campaign.swept and all(isinstance(r.get(c), (int, float)) and
                                      not isinstance(r.get(c), bool) for r in rows if c in r)
               and any(c in r for r in rows)]
    for c in numeric:
        v = np.array([r[c] for r in rows if c in r], dtype=float)
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.hist(v[np.isfinite(v)], bins=min(30, max(5, len(v) // 3)))
        ax.set_xlabel(c)
        ax.set_ylabel("cases")
        ax.set_title(f"{c} over {len(v)} cases")
        made.append(_save(plt, fig, directory / f"hist_{c}.png"))
    return made


def _save(plt, fig, path: Path) -> Path:
    """Write a figure as PNG (90 dpi) and close it."""
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
