"""Benchmarks. ``python -m wb_sim.tools.bench icub_stand`` runs the shared
``icub_stand`` scenario (``shared/benchmarks/icub_stand.md``) exactly:

* iCub ``iCubGazeboV2_5`` from icub-models, free-flyer on ``root_link``;
  URDF damping and friction ignored, no armature, no position limits, no
  torque clipping; gravity (0, 0, -9.81); ground z = 0; friction 1.0;
* one 160 mm x 72 mm rectangle per foot in the sole frames (4 corners each);
* all joints at 0, base at (0, 0, 0.620438), identity, at rest;
* every 1 ms: tau = g_j(q) + 200 (0 - q) - 5 qdot (zero-order hold);
* 10 000 steps, timed as a whole loop (read state, controller, write torques,
  step), median of 3 runs whose end states must be bit-identical. The physical
  figures come from one more, untimed, run with logging (same trajectory).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..contact import CONTACT_MODELS
from ..controllers import PDGravityController
from .progress import Progress
from ..simulator import Simulator
from .stand import StandMonitor

ICUB_STAND = {
    "urdf_path": "icub-models:iCubGazeboV2_5",
    "floating_base": True,
    "physics_rate_hz": 1000.0,
    "gravity": [0.0, 0.0, -9.81],
    "ground.height": 0.0,
    "ground.normal": [0.0, 0.0, 1.0],
    "contact.friction_coefficient": 1.0,
    "contact_surfaces": ["left_foot", "right_foot"],
    "left_foot.frame": "l_sole", "left_foot.shape": "box",
    "left_foot.size": [0.16, 0.072], "left_foot.offset": [0.0265, 0.005],
    "right_foot.frame": "r_sole", "right_foot.shape": "box",
    "right_foot.size": [0.16, 0.072], "right_foot.offset": [0.0265, -0.005],
    "initial.base_position": [0.0, 0.0, 0.620438],
    "joints.position_limits": False,
    "joints.effort_limits": False,
    "joints.urdf_dynamics": False,
    "joints.armature": [0.0],
}
STEPS = 10_000
KP, KD = 200.0, 5.0
#: steps between two progress updates (outside the inner loop: no cost per step)
CHUNK = 250


def _run(sim: Simulator, ctrl: PDGravityController, steps: int, log=None,
         progress: Progress | None = None) -> float:
    """Reset and run ``steps`` steps; returns the wall time of the loop, s."""
    sim.reset()
    step = sim.step
    t0 = time.perf_counter()
    for start in range(0, steps, CHUNK):
        for _ in range(min(CHUNK, steps - start)):
            step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
            if log is not None:
                log(sim)
        if progress is not None:
            progress.update(sim.t)
    wall = time.perf_counter() - t0
    if progress is not None:
        progress.close(sim.t, f"{wall / steps * 1e6:.1f} us/step")
    return wall


def icub_stand(contact: str = "compliant", runs: int = 3, progress: bool = True) -> dict:
    """Run the scenario; returns the report as a dict (also printed by main)."""
    params = dict(ICUB_STAND, **{"contact.model": contact})
    sim = Simulator.from_params(params)
    ctrl = PDGravityController(sim.robot, np.zeros(sim.nj), KP, KD, gravity=params["gravity"])
    times, ends = [], []
    for r in range(runs):
        bar = Progress(STEPS * sim.dt, label=f"  run {r + 1}/{runs}", enabled=progress)
        times.append(_run(sim, ctrl, STEPS, progress=bar))
        ends.append((sim.q.copy(), sim.v.copy()))
    identical = all(np.array_equal(e[0], ends[0][0]) and np.array_equal(e[1], ends[0][1])
                    for e in ends)

    # untimed run with logging for the physical figures
    z, fz, soles = [], [], []
    l_sole, r_sole = "l_sole", "r_sole"

    monitor = StandMonitor(sim.joint_names, sim.actuation.effort_limit, True)

    def log(s: Simulator) -> None:
        monitor.watch(s)
        z.append(s.q[2])
        fz.append(sum(w.force[2] for w in s.contact_wrenches().values()))
        soles.append(np.concatenate([s.frame_pose(l_sole).translation[:2],
                                     s.frame_pose(r_sole).translation[:2]]))

    solver_stats = sim.contact.statistics()
    sim.reset()
    sole0 = np.concatenate([sim.frame_pose(l_sole).translation[:2],
                            sim.frame_pose(r_sole).translation[:2]])
    _run(sim, ctrl, STEPS, log, Progress(STEPS * sim.dt, label="  logged run (untimed)",
                                         enabled=progress))
    z, fz, soles = np.array(z), np.array(fz), np.array(soles)
    slip = np.max(np.hypot(*(soles - sole0).reshape(-1, 2, 2).transpose(2, 0, 1)))
    weight = sim.mass * 9.81
    wall = statistics.median(times)
    return {
        "contact_model": contact,
        "us_per_step": wall / STEPS * 1e6,
        "real_time_factor": STEPS * sim.dt / wall,
        "final_base_height_m": float(z[-1]),
        "base_height_drift_last_5s_m": float(np.ptp(z[-5000:])),
        "vertical_reaction_over_weight_last_1s": float(np.mean(fz[-1000:]) / weight),
        "max_sole_slip_m": float(slip),
        "fell": bool(z.min() < 0.620438 - 0.1),
        "stand_verdict": monitor.verdict().summary(),
        "stands": monitor.verdict().stands,
        "bit_identical_runs": identical,
        "runs_us_per_step": [t / STEPS * 1e6 for t in times],
        "solver": solver_stats,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wb_sim.tools.bench",
                                     description="wb_sim benchmarks (see shared/benchmarks/).")
    parser.add_argument("scenario", choices=["icub_stand"])
    parser.add_argument("--contact", default="compliant", choices=sorted(CONTACT_MODELS),
                        help="contact model (default: compliant)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs (median reported)")
    parser.add_argument("--peer", metavar="SCRIPT",
                        help="also run this peer harness back to back (e.g. "
                             "../shared/benchmarks/peers/mujoco_icub_stand.py, which needs "
                             "pip install mujoco) and print the ratio of the two us/step")
    args = parser.parse_args(argv)
    print(f"icub_stand, contact model '{args.contact}', {STEPS} steps of 1 ms, "
          f"median of {args.runs} runs", file=sys.stderr)
    rep = icub_stand(args.contact, args.runs)
    print(f"us per step:                     {rep['us_per_step']:.1f}")
    print(f"real-time factor:                {rep['real_time_factor']:.1f}")
    print(f"final base height:               {rep['final_base_height_m']:.6f} m")
    print(f"base height drift, last 5 s:     {rep['base_height_drift_last_5s_m'] * 1e3:.4f} mm")
    print(f"vertical reaction / weight, 1 s: {rep['vertical_reaction_over_weight_last_1s']:.5f}")
    print(f"max horizontal sole slip:        {rep['max_sole_slip_m'] * 1e3:.4f} mm")
    print(f"fell:                            {'yes' if rep['fell'] else 'no'}")
    print(f"verdict:                         {rep['stand_verdict']}")
    print(f"timed runs bit-identical:        {'yes' if rep['bit_identical_runs'] else 'NO'}")
    st = rep["solver"]
    if "iterations_mean" in st:
        print(f"solver iterations per step:      mean {st['iterations_mean']:.2f}, "
              f"p99 {st['iterations_p99']:.0f}")
    if "nonconverged" in st:
        print(f"solves not converged:            {st['nonconverged']} of {st['solves']}")
    if "active_set_solves" in st:
        print(f"steps needing the active set:    {st['active_set_solves']} of {st['solves']}")
    ok = rep["bit_identical_runs"] and rep["stands"]
    if args.peer:
        peer = _run_peer(args.peer, args.runs)
        if peer is None:
            return 2
        ratio = rep["us_per_step"] / peer
        print(f"peer ({Path(args.peer).name}):  {peer:.1f} us/step; wb_sim / peer = {ratio:.2f}")
    return 0 if ok else 1


def _run_peer(script: str, runs: int) -> float | None:
    """us/step of a peer harness that prints one JSON line with 'us_per_step_median'."""
    try:
        out = subprocess.run([sys.executable, script, "--runs", str(runs)], capture_output=True,
                             text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"wb_sim.tools.bench: peer {script} did not run: {e}", file=sys.stderr)
        return None
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            return float(json.loads(line)["us_per_step_median"])
    print(f"wb_sim.tools.bench: peer {script} printed no result (exit {out.returncode}):\n"
          f"{out.stderr[-2000:]}", file=sys.stderr)
    return None


if __name__ == "__main__":
    sys.exit(main())
