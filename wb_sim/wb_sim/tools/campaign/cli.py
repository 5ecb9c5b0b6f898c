"""``wb_sim_batch CAMPAIGN.yaml`` (``python -m wb_sim.tools.campaign``): a campaign from the
command line, its exit code and summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...errors import ConfigError, WbSimError
from ..ab import parse_overrides
from .run import run_campaign
from .spec import load_campaign


def main(argv=None) -> int:
    """``wb_sim_batch CAMPAIGN.yaml``: exit 0 when every case ran to its end, 1 when some
    did not (diverged or raised; the table says which and why), 2 for a bad campaign file
    or options."""
    parser = argparse.ArgumentParser(
        prog="wb_sim_batch", description="Run a wb_sim campaign: every case of a YAML "
        "campaign file into one results table (see wb_sim.tools.campaign).")
    parser.add_argument("campaign", help="campaign file (YAML)")
    parser.add_argument("--robot", help="a ready configuration's name (config/<robot>.yaml) or "
                        "the path of your robot's YAML file, in place of the campaign file's "
                        "robot (as python -m wb_sim's and wb_sim_run's --robot)")
    parser.add_argument("--config", help="a YAML parameter file loaded after the robot's (its "
                        "keys win, its wb_sim_pd_controller gains too), as python -m wb_sim's "
                        "and wb_sim_run's; the campaign's set, grid and random apply over it")
    parser.add_argument("--out", "-o", help="output directory (default: <campaign>_results); "
                        "cases already in its cache are not run again")
    parser.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="local process pool (default) or Ray")
    parser.add_argument("--workers", type=int, help="processes / Ray CPUs (default: all cores)")
    parser.add_argument("--address", help="Ray: address of an existing cluster "
                        "(default: start a local Ray instance)")
    parser.add_argument("--no-plots", action="store_true", help="skip the summary plots")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress line")
    parser.add_argument("--ab", action="append", default=[], metavar="KEY:=VALUE",
                        help="the A/B switch (repeatable): every case runs twice, as the "
                        "campaign says (A) and with these values over it (B), e.g. --ab "
                        "contact.model:=rigid; the table gets B's metrics (b.*) and where the "
                        "two runs diverge (ab.*); over the campaign file's 'ab'")
    args = parser.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        print("wb_sim_batch: --workers must be >= 1", file=sys.stderr)
        return 2
    if args.address and args.backend != "ray":
        print("wb_sim_batch: --address is for --backend ray", file=sys.stderr)
        return 2
    out = args.out or f"{Path(args.campaign).stem}_results"
    try:  # a bad -o is a bad option (exit 2), said before any case runs
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"wb_sim_batch: cannot use output directory '{out}' (-o): {e.strerror or e}",
              file=sys.stderr)
        return 2
    try:
        campaign = load_campaign(args.campaign, robot=args.robot, config=args.config,
                                 ab=parse_overrides(args.ab))
        result = run_campaign(campaign, backend=args.backend, workers=args.workers, out=out,
                              address=args.address, progress=not args.quiet,
                              plots=False if args.no_plots else None)
    except ConfigError as e:
        print(f"wb_sim_batch: {e}", file=sys.stderr)
        return 2
    except WbSimError as e:
        print(f"wb_sim_batch: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"wb_sim_batch: interrupted; finished cases are cached in {args.out or out}, "
              f"run the same command again to resume", file=sys.stderr)
        return 130
    rows = result.rows
    stands = sum(1 for r in rows if r.get("stands") is True)
    print(f"wb_sim_batch: {len(rows)} cases ({result.ran} run, {result.cached} cached) in "
          f"{result.wall_s:.1f} s; stands: {stands}/{len(rows)}; table: {result.table}"
          + (f", {result.parquet}" if result.parquet else "")
          + (f"; {len(result.plots)} plots in {result.plots[0].parent}" if result.plots else ""))
    ab = campaign.spec.get("ab")
    if ab:
        parted = [r for r in rows if r.get("ab.divergence_time_s") == r.get("ab.divergence_time_s")
                  and "ab.divergence_time_s" in r]
        stands_b = sum(1 for r in rows if r.get("b.stands") is True)
        print(f"wb_sim_batch: A/B ({', '.join(f'{k}={v}' for k, v in ab['set'].items())}): "
              f"B stands: {stands_b}/{len(rows)}; the runs diverge (base {ab['base_m']:g} m, "
              f"joint {ab['joint_rad']:g} rad) in {len(parted)}/{len(rows)} cases"
              + (f", first at t = {min(r['ab.divergence_time_s'] for r in parted):.3f} s"
                 if parted else ""))
    if result.failed:
        bad = [r for r in rows if r["status"] != "ok" or r.get("b.status", "ok") != "ok"]
        print(f"wb_sim_batch: {len(bad)} cases did not run to their end:", file=sys.stderr)
        for r in bad[:10]:
            if r["status"] != "ok":
                print(f"  case {r['case_id']}: {r['status']}: {r['error']}", file=sys.stderr)
            else:
                print(f"  case {r['case_id']} (B): {r['b.status']}: {r['b.error']}",
                      file=sys.stderr)
        if len(bad) > 10:
            print(f"  ... {len(bad) - 10} more (status column of {result.table})", file=sys.stderr)
    return result.exit_code
