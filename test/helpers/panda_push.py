"""The Panda pushes a box (issue 31): one scenario for the core test
(test/core/test_objects.py) and the node's (test/ros/test_objects_ros.py).

The fixed-base Panda (``config/panda.yaml``, no drive gains: the derived ones, as the node
uses) starts with its hand low (about 0.15 m over the ground, 0.6 m out) at ``panda_joint1``
= -0.3 rad; a 0.12 m, 0.5 kg box rests on the ground at (0.6, 0, 0.06). Every joint is
given a position target each step (a position controller: ros2_control's position
interface); ``panda_joint1``'s ramps to +0.3 rad in 0.6 s, sweeping the hand through the
box, which is pushed toward +y. A terrain box stands out of reach.
"""

from __future__ import annotations

import warnings

import numpy as np

import wb_sim
from wb_sim.controllers import JointTargets, simulator_drive_gains

#: the arm's initial pose (rad, its 7 joints): the hand low and forward
Q0 = (-0.3, 0.6, 0.0, -2.0, 0.0, 2.6, 0.785)
SWEEP = (-0.3, 0.3, 0.6)  # panda_joint1 from, to (rad), in (s)
BOX = {"names": ["box"], "shapes": ["box"], "sizes": [0.12, 0.12, 0.12], "mass": [0.5],
       "positions": [0.6, 0.0, 0.06]}
#: a terrain box out of the arm's reach (the node's test spawns into it, refused)
TERRAIN_BOXES = [1.5, -1.5, 0.1, 0.4, 0.4, 0.2, 0.0]
#: the dotted parameters over config/panda.yaml
OVERRIDES = {"initial.joint_positions": list(Q0), "terrain.boxes": TERRAIN_BOXES,
             **{f"objects.{k}": v for k, v in BOX.items()}}


def panda_sim() -> wb_sim.Simulator:
    with warnings.catch_warnings():  # the Panda's mimic finger, simulated independent
        warnings.simplefilter("ignore")
        return wb_sim.Simulator.from_yaml(wb_sim.config_path("panda"), OVERRIDES)


def targets(i: int, dt: float, nj: int, sweep: bool = True) -> np.ndarray:
    """Every joint's position target (the fingers at 0) of cycle ``i`` (step of ``dt`` s);
    without ``sweep`` the initial pose held."""
    q = np.zeros(nj)
    q[:7] = Q0
    lo, hi, span = SWEEP
    q[0] = lo + (hi - lo) * min(1.0, i * dt / span) * sweep
    return q


def run_core(steps: int, sim: wb_sim.Simulator | None = None, sweep: bool = True):
    """The scenario headless, as the node's gate drives it (wb_sim.ros.gate: the derived
    gains, JointTargets): ``(sim, [box pose row after each step], contact steps)``."""
    sim = panda_sim() if sim is None else sim
    g = simulator_drive_gains(sim)
    drive = JointTargets(sim.nj, g.kp, g.kd)
    rows, touched = [], 0
    for i in range(steps):
        drive.set(np.arange(sim.nj), position=targets(i, sim.dt, sim.nj, sweep))
        sim.step(drive.torques(sim.joint_positions, sim.joint_velocities))
        rows.append(sim.object_poses()[0].copy())
        touched += len(sim.self_collision_contacts().force) > 0
    return sim, np.array(rows), touched
