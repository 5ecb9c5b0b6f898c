"""A solid ball spinning on the ground with torsional friction
(test/core/contact/test_torsional_friction.py asserts on these runs, docs/physics.md quotes
them through test/helpers/docs_rows.py). Runs are deterministic and cached per process."""

from __future__ import annotations

import functools
import math

import numpy as np

import wb_sim

G = 9.81
M, R = 1.0, 0.1
I_BALL = 0.4 * M * R**2
ELL = 0.01  # m: alpha = ELL m g / I = 24.5 rad/s^2
ALPHA = ELL * M * G / I_BALL
BALL = (f'<robot name="ball"><link name="ball"><inertial><origin xyz="0 0 0"/>'
        f'<mass value="{M}"/><inertia ixx="{I_BALL}" ixy="0" ixz="0" iyy="{I_BALL}" iyz="0" '
        f'izz="{I_BALL}"/></inertial></link></robot>')
MODELS = ("compliant", "rigid")


def ball_sim(model: str, rate: float = 1000.0, **extra) -> wb_sim.Simulator:
    """The ball resting on the ground, settled for 0.2 s."""
    sim = wb_sim.Simulator.from_params({
        "robot_description": BALL, "physics_rate_hz": rate, "contact_surfaces": ["foot"],
        "foot.frame": "ball", "foot.shape": "sphere", "foot.radius": R,
        "contact.model": model, "initial.base_position": [0.0, 0.0, R], **extra})
    for _ in range(int(0.2 * rate)):
        sim.step([])
    return sim


def yaw_of(sim) -> float:
    rot = sim.frame_pose("ball").rotation
    return math.atan2(rot[1, 0], rot[0, 0])


def spin(sim, seconds: float, yaw: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Step for ``seconds``: (t, spin rate about the vertical); ``yaw`` gets the yaw
    angle after each step."""
    t, w = [], []
    for _ in range(int(round(seconds / sim.dt))):
        sim.step([])
        t.append(sim.t)
        w.append(sim.state.base_angular_velocity[2])
        if yaw is not None:
            yaw.append(yaw_of(sim))
    return np.array(t), np.array(w)


@functools.lru_cache(maxsize=None)
def braking(model: str, rate: float) -> dict:
    """The ball spun at 10 rad/s with ``contact.torsional_friction`` ELL, 0.6 s, then 0.5 s
    more: ``alpha`` (the braking fitted between 9 and 1 rad/s, rad/s^2), after the stop
    ``spin_after`` (largest |spin|, rad/s) and ``yaw_ptp`` (rad), ``drift`` (horizontal, m),
    ``z`` (the centre's height, m)."""
    sim = ball_sim(model, rate, **{"contact.torsional_friction": ELL})
    sim.set_base_state(angular_velocity=[0.0, 0.0, 10.0])
    t, w = spin(sim, 0.6)  # it stops after 10 / 24.5 = 0.41 s
    turning = (w < 9.0) & (w > 1.0)
    alpha = -np.polyfit(t[turning], w[turning], 1)[0]
    yaw = []
    _, w = spin(sim, 0.5, yaw)
    return {"alpha": float(alpha), "spin_after": float(np.abs(w).max()),
            "yaw_ptp": float(np.ptp(yaw)),
            "drift": float(np.hypot(*sim.state.base_position[:2])),
            "z": float(sim.state.base_position[2])}
