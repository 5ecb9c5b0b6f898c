"""``python -m wb_sim.tools.bench.campaign``: campaign throughput against a plain loop.

Runs ``--runs`` cases of ``--duration`` s of the default humanoid standing under the example
controller (a grid over the friction coefficient, 0.9-1.0, so every case is distinct), as

* a plain loop in this process: build the simulator and the PD, step, no metrics;
* a campaign on the local pool with 1 worker, then with 2 (``--workers``), in a fresh output
  directory each (nothing cached),

and prints runs per second, the scaling efficiency (rate on n workers / (n x rate on 1)) and
the campaign's overhead against the plain loop, both end to end (pool start-up, table) and
per case: the case's own wall time in its worker (metrics included) against a plain run's, and
its CPU time (``time.process_time`` of the worker) against a plain run's, the figure a loaded
machine's other processes do not move. First, ``--pairs`` cases run by the runner's own
function in this process, each right after a plain run of the same case (:func:`paired`):
the median of those CPU ratios is the per-case overhead with the machine's drift taken out.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def plain_run(mu: float, duration: float) -> tuple[float, float]:
    """Wall and CPU seconds of one plain run (build + loop) at friction ``mu``."""
    from ... import Simulator, config_path
    from ...config import read_yaml_params
    from ...controllers import PDGravityController
    path = config_path("humanoid")
    gains = read_yaml_params(path, node_name="wb_sim_pd_controller")
    t0, c0 = time.perf_counter(), time.process_time()
    sim = Simulator.from_yaml(path, overrides={"contact.friction_coefficient": float(mu)})
    pd = PDGravityController(sim.robot, sim.state.joint_positions, gains["kp"], gains["kd"],
                             gravity=sim.config.gravity)
    for _ in range(int(round(duration / sim.dt))):
        sim.step(pd(sim.q, sim.joint_positions, sim.joint_velocities))
    return time.perf_counter() - t0, time.process_time() - c0


def plain_runs(runs: int, duration: float) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each plain run (build + loop)."""
    times = [plain_run(float(mu), duration) for mu in np.linspace(0.9, 1.0, runs)]
    return [w for w, _ in times], [c for _, c in times]


def paired(camp: dict, pairs: int, duration: float) -> list[float]:
    """CPU time of a case run by the campaign's runner (``run_case``: the case's build on the
    worker's cached robot, its controller loop, its metrics) over a plain run's, for
    ``pairs`` cases, each right after the plain run of the same friction, in this process:
    the machine's drift and the pool's processes leave these ratios alone. The first case
    (not counted) fills the robot cache, as a worker's first case does."""
    from ..campaign import case as runner
    from ..campaign.spec import load_campaign
    spec = load_campaign(camp)
    cases = spec.cases
    runner.run_case({"spec": spec.spec, "case": cases[0], "out": None})
    ratios = []
    for i in range(pairs):
        case = cases[i % len(cases)]
        _, plain_cpu = plain_run(case["params"]["contact.friction_coefficient"], duration)
        c0 = time.process_time()
        row = runner.run_case({"spec": spec.spec, "case": case, "out": None})
        if row["status"] != "ok":
            raise RuntimeError(f"campaign bench: case {case['index']}: {row['error']}")
        ratios.append((time.process_time() - c0) / plain_cpu)
    return ratios


def main(argv=None) -> int:
    from ..campaign import run_campaign
    parser = argparse.ArgumentParser(prog="python -m wb_sim.tools.bench.campaign",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8, help="cases per measurement (default 8)")
    parser.add_argument("--duration", type=float, default=5.0, help="simulated s per case")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument("--pairs", type=int, default=8,
                        help="cases timed in this process, each after a plain run (default 8; "
                             "0: none)")
    args = parser.parse_args(argv)
    camp = {"robot": "humanoid", "duration_s": args.duration, "controller": "pd",
            "plots": False, "grid": {"contact.friction_coefficient":
                                     [float(x) for x in np.linspace(0.9, 1.0, args.runs)]}}
    if args.pairs > 0:
        ratios = paired(camp, args.pairs, args.duration)
        print(f"per case in one process, each after a plain run ({args.pairs} pairs): CPU "
              f"{100 * (statistics.median(ratios) - 1):+.0f} % against the plain run's (median "
              f"of the pairs' ratios; range {100 * (min(ratios) - 1):+.0f} to "
              f"{100 * (max(ratios) - 1):+.0f} %)")
    walls, cpus = plain_runs(args.runs, args.duration)
    plain_rate = args.runs / sum(walls)
    print(f"plain loop: {args.runs} runs of {args.duration:g} s in {sum(walls):.2f} s: "
          f"{plain_rate:.3f} runs/s ({statistics.median(walls):.3f} s per run, "
          f"{statistics.median(cpus):.3f} s CPU, medians)")
    rates = {}
    for w in args.workers:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            res = run_campaign(camp, backend=args.backend, workers=w, out=Path(tmp) / "o",
                               progress=False)
            wall = time.perf_counter() - t0
            lines = (Path(tmp) / "o" / "timings.csv").read_text().splitlines()[1:]
            case_walls = [float(line.split(",")[1]) for line in lines]
            case_cpus = [float(line.split(",")[2]) for line in lines]
        if res.failed or res.ran != args.runs:
            print(f"campaign on {w} workers: {res.failed} cases failed", file=sys.stderr)
            return 1
        rates[w] = args.runs / wall
        stands = sum(r["stands"] for r in res.rows)
        per_case, cpu_case = statistics.median(case_walls), statistics.median(case_cpus)
        print(f"campaign, {args.backend}, {w} worker(s): {args.runs} runs in {wall:.2f} s: "
              f"{rates[w]:.3f} runs/s (stands {stands}/{args.runs}); per case in its worker "
              f"(medians) {per_case:.3f} s, "
              f"{100 * (per_case / statistics.median(walls) - 1):+.0f} % against the plain run; "
              f"CPU {cpu_case:.3f} s, "
              f"{100 * (cpu_case / statistics.median(cpus) - 1):+.0f} % against the plain run's")
    base = rates.get(1)
    for w, r in rates.items():
        if base and w > 1:
            print(f"scaling efficiency on {w} workers: {100 * r / (w * base):.0f} %")
    if base:
        print(f"end-to-end overhead on 1 worker against the plain loop: "
              f"{100 * (plain_rate / base - 1):+.0f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
