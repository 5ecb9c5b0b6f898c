"""``python -m wb_sim.tools.delay_margin``: how many steps of command delay a controller survives.

The example controller's law, joint PD + gravity compensation, sent two ways (headless,
the core alone, no ROS):

* ``torque``: the whole law as torques ``kp (q_ref - q) - kd v + g(q)``, computed at
  step k and acting from step k + d: the simulator's ``joints.command_delay_steps: d``
  (the stiff loop closes d steps late);
* ``drive``: the same law as a drive command, targets ``(q_ref, v_ref = 0,
  tau_ff = g(q))`` computed at step k and taken by the drive at step k + d, which
  evaluates ``kp (q_ref - q) + kd (v_ref - v) + tau_ff`` at every step from the current
  state (:class:`wb_sim.controllers.JointTargets`, what the node does with
  ``joint_commands`` and ``command.kp`` / ``command.kd``; its ``command.latency_steps: d``).

For each delay the robot must stand ``--duration`` s (:class:`~wb_sim.tools.stand.StandMonitor`:
base drop, foot slide, time at the effort limits); the margin is the largest delay of
the list before the first that fails. Prints one table row per delay.
"""

from __future__ import annotations

import argparse
import collections
import sys

import numpy as np

from .. import Simulator, config_path
from ..config import read_yaml_params
from ..controllers import JointTargets, PDGravityController
from ..errors import DivergenceError
from .stand import StandMonitor

MODES = ("torque", "drive")
DEFAULT_DELAYS = (0, 1, 2, 3, 5, 10, 20, 40)


def run(robot: str, mode: str, delay: int, duration: float):
    """One headless run: ``(stands, verdict summary)``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    path = config_path(robot)
    overrides = {"joints.command_delay_steps": delay} if mode == "torque" else {}
    sim = Simulator.from_yaml(path, overrides=overrides)
    gains = read_yaml_params(path, node_name="wb_sim_pd_controller")
    ctrl = PDGravityController(sim.robot, sim.joint_positions.copy(), gains["kp"], gains["kd"],
                               gravity=sim.config.gravity)
    monitor = StandMonitor(sim.joint_names, sim.actuation.effort_limit, sim.robot.floating_base)
    drive = JointTargets(sim.nj, ctrl.kp, ctrl.kd)
    joints = np.arange(sim.nj)
    # drive: the targets in flight, the oldest first; until the first arrives the drive
    # holds the first command (as joints.command_delay_steps does with torques)
    pending: collections.deque = collections.deque()
    first = ctrl.drive_targets(sim.q)
    drive.set(joints, *first)
    try:
        for _ in range(round(duration / sim.dt)):
            if mode == "torque":
                tau = ctrl(sim.q, sim.joint_positions, sim.joint_velocities)
            else:
                pending.append(ctrl.drive_targets(sim.q))
                if len(pending) > delay:
                    drive.set(joints, *pending.popleft())
                tau = drive.torques(sim.joint_positions, sim.joint_velocities)
            sim.step(tau)
            monitor.watch(sim)
    except DivergenceError as e:
        return False, f"diverged: {e}"
    v = monitor.verdict()
    return v.stands, v.summary()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m wb_sim.tools.delay_margin",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="humanoid")
    ap.add_argument("--duration", type=float, default=8.0, help="simulated seconds per run (8)")
    ap.add_argument("--mode", choices=MODES, action="append",
                    help="torque and/or drive (default: both)")
    ap.add_argument("--delays", type=int, nargs="+", default=list(DEFAULT_DELAYS),
                    help=f"delays to try, steps (default {' '.join(map(str, DEFAULT_DELAYS))})")
    args = ap.parse_args(argv)
    if not args.duration > 0 or any(d < 0 or d > 1000 for d in args.delays):
        ap.error("--duration must be > 0 and each delay in 0..1000 steps")
    for mode in args.mode or MODES:
        margin = None
        for d in sorted(args.delays):
            stands, summary = run(args.robot, mode, d, args.duration)
            print(f"{args.robot} {mode:6s} delay {d:3d} steps: {'stands' if stands else 'FAILS '}"
                  f"  {summary}", flush=True)
            if not stands and margin is None:
                margin = d
        below = [d for d in args.delays if margin is None or d < margin]
        print(f"{args.robot} {mode}: margin {max(below) if below else 'none'} steps "
              f"(first failure at {margin if margin is not None else 'none of the delays'})",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
