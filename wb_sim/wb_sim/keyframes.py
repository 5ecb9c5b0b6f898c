"""A keyframe controller: joint PD + gravity compensation tracking postures that move
smoothly over time (an in-process controller, :mod:`wb_sim.control`; copy it to start your own).

``wb_sim.keyframes:keyframe_pd`` takes keyframes, a time (s) and, for some joints, an angle
(rad) each (``null``: no key for that joint at that time). Each joint's reference passes
through its keys on a clamped cubic spline (smooth: continuous velocity and acceleration, at
rest at its first and last key) and then holds its last::

    controller: wb_sim.keyframes:keyframe_pd
    controller_params:
      kp: 1000.0                    # N*m/rad
      kd: 20.0                      # N*m*s/rad
      times: [1.5, 2.0]             # s, after the controller's start
      postures:                     # rad, one per time; the joints left out keep their angle
        l_elbow: [-1.0, -1.0]
        r_elbow: [-1.0, -1.0]

The reference starts at the posture the simulator holds when the controller is made (at its
time 0), so the first keyframe comes after it. The law is the example's (``pd_gravity``) with
the reference's velocity: ``tau = g_j(q) + kp (q_ref(t) - q_j) + kd (v_ref(t) - qdot_j)``.
``config/worlds/humanoid_pushes_box.yaml`` pushes a box with it (docs/world.md).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from scipy.interpolate import CubicSpline

from .controllers import PDGravityController


def keyframe_pd(sim, case=None, *, kp, kd, times: Sequence[float],
                postures: Mapping[str, Sequence[float]]):
    """The keyframe controller of robot ``sim`` (module docstring); ValueError naming the
    joint or the keyframe that is wrong."""
    names = list(sim.robot.joint_names)
    times = np.asarray(times, dtype=float)
    if times.ndim != 1 or times.size == 0 or times[0] <= 0.0 or np.any(np.diff(times) <= 0.0):
        raise ValueError(f"'times' must be increasing times after 0 (s), got {times.tolist()}")
    q_start = sim.joint_positions.copy()
    # one clamped cubic spline per set of joints keyed at the same times (null: no key there)
    keyed: dict[tuple, list[tuple[int, np.ndarray]]] = {}
    for joint, angles in postures.items():
        if joint not in names:
            raise ValueError(f"'postures' names the joint '{joint}', which the robot does not "
                             f"have; its joints are: {', '.join(names)}")
        if len(angles) != times.size:
            raise ValueError(f"'postures.{joint}' gives {len(angles)} angles for "
                             f"{times.size} times: give one angle (rad) or null per time")
        at = tuple(i for i, a in enumerate(angles) if a is not None)
        keyed.setdefault(at, []).append(
            (names.index(joint), np.array([angles[i] for i in at], dtype=float)))
    splines = []  # (joint indices, spline of their angles, its derivative, its last key)
    for at, rows in keyed.items():
        if not at:
            continue
        idx = [j for j, _ in rows]
        keys = np.vstack([q_start[idx], np.array([a for _, a in rows]).T])
        spline = CubicSpline(np.r_[0.0, times[list(at)]], keys, bc_type="clamped")
        splines.append((idx, spline, spline.derivative(), times[at[-1]]))
    t0 = sim.t
    pd = PDGravityController(sim.robot, q_start, kp, kd, gravity=sim.config.gravity)
    v_ref = np.zeros_like(q_start)  # the reference's velocity, rad/s

    def control(obs):
        t = obs.t - t0
        for idx, spline, velocity, last in splines:
            pd.q_ref[idx] = spline(min(t, last))
            v_ref[idx] = velocity(min(t, last))
        return pd(obs.q, obs.joint_positions, obs.joint_velocities - v_ref)
    return control


keyframe_pd.wants_imu = False  # the law needs no IMU reading
keyframe_pd.wants_velocity = False  # nor the base velocity (its joints' are obs.joint_velocities)
