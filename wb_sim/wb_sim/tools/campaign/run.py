"""``run_campaign``: the cases not in the output directory's cache onto a backend, each row
cached as it comes, then the table, the wall times and the plots."""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path
from typing import Mapping

from ...errors import ConfigError
from .backends import BACKENDS, cases_on
from .report import CampaignResult, plot_campaign, write_table, write_timings
from .spec import Campaign, load_campaign


def _tasks(campaign: Campaign, out: Path) -> tuple[list, dict]:
    """(tasks still to run, {case index: cached row})."""
    cache = out / "cases"
    cache.mkdir(parents=True, exist_ok=True)
    todo, done = [], {}
    for case in campaign.cases:
        f = cache / f"{case['hash']}.json"
        if f.is_file():
            try:
                row = json.loads(f.read_text())
            except (OSError, ValueError):
                row = None  # a torn file: run the case again
            if _cached_row_ok(row, case["hash"]):
                row["case_id"] = case["index"]
                done[case["index"]] = row
                continue
            warnings.warn(f"cached case file '{f}' is not a row of this case (torn, edited or "
                          f"null): running the case again", stacklevel=3)
        todo.append({"spec": campaign.spec, "case": case, "out": str(out)})
    return todo, done


#: the statuses a cached row may have ('error' rows are never cached)
CACHED_STATUSES = ("ok", "diverged")


def _cached_row_ok(row, case_hash: str) -> bool:
    """Whether ``row`` (a cache file's JSON) is a row wb_sim wrote for the case ``case_hash``:
    a mapping of its hash, a cached status, and plain values (a cell each)."""
    return (isinstance(row, dict) and row.get("case_hash") == case_hash
            and row.get("status") in CACHED_STATUSES
            and all(isinstance(k, str) and (v is None or isinstance(v, (str, int, float, bool)))
                    for k, v in row.items()))


def _store(out: Path, case: dict, row: dict) -> None:
    if row["status"] == "error":
        return  # not a result of the physics: run it again next time
    f = out / "cases" / f"{case['hash']}.json"
    tmp = f.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: v for k, v in row.items() if not k.startswith("_")}))
    os.replace(tmp, f)


def run_campaign(campaign: str | Path | Mapping | Campaign, backend: str = "local",
                 workers: int | None = None, out: str | Path | None = None,
                 address: str | None = None, progress: bool = True,
                 plots: bool | None = None) -> CampaignResult:
    """Run every case of a campaign (a YAML path, a dict or a :class:`Campaign`) and write
    ``out``/results.csv (and .parquet with pyarrow), ``out``/cases/ (the cache),
    ``out``/recordings/ (``record: true``) and ``out``/plots/ (``plots: true``, matplotlib).

    ``backend``: 'local' (a process pool of ``workers``, default all cores) or 'ray'
    (``address`` of an existing cluster, else a local instance). Raises
    :class:`~wb_sim.ConfigError` for a bad campaign, before running anything."""
    from ..progress import Progress
    if not isinstance(campaign, Campaign):
        if out is None and not isinstance(campaign, Mapping):
            out = Path(f"{Path(campaign).stem}_results")
        campaign = load_campaign(campaign)
    if out is None:
        raise ConfigError("run_campaign: give 'out', the output directory")
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend '{backend}'; choose 'local' or 'ray'")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ConfigError(f"workers must be a positive integer, got {workers!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    todo, rows = _tasks(campaign, out)
    cached = len(rows)
    n = len(campaign.cases)
    dur = campaign.spec["duration_s"]
    failed_now = 0
    bar = Progress(n * dur, label=f"campaign ({n} cases)", enabled=progress)
    bar.update(cached * dur, f"{cached}/{n} cases ({cached} cached)")
    if todo:
        workers = workers or os.cpu_count() or 1
        stream = cases_on(backend, todo, workers, address)
        try:
            for task, row in stream:
                case = task["case"]
                rows[case["index"]] = row
                _store(out, case, row)
                failed_now += row["status"] != "ok" or row.get("b.status", "ok") != "ok"
                bar.update(len(rows) * dur, f"{len(rows)}/{n} cases, {failed_now} failed")
        finally:
            bar.close()
    else:
        bar.close()
    for case in campaign.cases:
        row = rows[case["index"]]
        row["seed"] = case["seed"]
        for k in campaign.swept:
            row[k] = case["params"].get(k, "")
    table_rows = [rows[i] for i in sorted(rows)]
    wall = {r["case_id"]: r.get("_wall_s") for r in table_rows if "_wall_s" in r}
    cpu = {r["case_id"]: r.get("_cpu_s") for r in table_rows if "_cpu_s" in r}
    for r in table_rows:
        r.pop("_wall_s", None)
        r.pop("_cpu_s", None)
    table, parquet = write_table(campaign, table_rows, out)
    if wall:
        write_timings(wall, out, cpu)
    made = []
    if campaign.spec["plots"] if plots is None else plots:
        made = plot_campaign(campaign, table_rows, out / "plots")
    # a case fails when a run of it did not reach its end (with --ab: A or B)
    failed = sum(r["status"] != "ok" or r.get("b.status", "ok") != "ok" for r in table_rows)
    return CampaignResult(rows=table_rows, table=table, parquet=parquet, plots=made,
                          ran=len(todo), cached=cached, failed=failed,
                          wall_s=time.perf_counter() - t0)
