"""A square box sliding and spinning on its 4 corners against Coulomb's closed forms
(test/core/contact/test_friction_direction.py asserts on these runs, docs/physics.md's
friction table quotes them through test/helpers/docs_rows.py). Each run returns its measured
figures; runs are deterministic, so they are cached per process."""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.integrate import solve_ivp

import wb_sim

G = 9.81
M, L, H, MU = 2.0, 0.2, 0.05, 0.5
I_XX = M * (L**2 + H**2) / 12
I_ZZ = M * (2 * L**2) / 12
BOX = (f'<robot name="box"><link name="box"><inertial><origin xyz="0 0 0"/><mass value="{M}"/>'
       f'<inertia ixx="{I_XX}" ixy="0" ixz="0" iyy="{I_XX}" iyz="0" izz="{I_ZZ}"/></inertial>'
       f'</link><link name="sole"/><joint name="sole_joint" type="fixed"><parent link="box"/>'
       f'<child link="sole"/><origin xyz="0 0 {-H / 2}"/></joint></robot>')
RATES = (250, 1000, 4000)
MODELS = ("compliant", "rigid")
#: the spin's exact braking, mu m g r / I_zz (104.05 rad/s^2)
ALPHA = MU * M * G * math.hypot(L / 2, L / 2) / I_ZZ
V0, PUSH = 2.0, 3.0 * M  # launch speed along x (m/s), sideways force along y (N) < mu m g


def box_sim(model: str, rate: float, **extra) -> wb_sim.Simulator:
    """The square box resting on its 4 bottom corners, settled for 0.2 s."""
    sim = wb_sim.Simulator.from_params({
        "robot_description": BOX, "physics_rate_hz": rate, "contact_surfaces": ["sole"],
        "sole.frame": "sole", "sole.shape": "box", "sole.size": [L, L],
        "contact.model": model, "contact.friction_coefficient": MU,
        "initial.base_position": [0.0, 0.0, H / 2], **extra})
    for _ in range(int(0.2 * rate)):
        sim.step([])
    return sim


@functools.lru_cache(maxsize=None)
def spin_braking(model: str, rate: float) -> dict:
    """The box spun at 20 rad/s until below 2 rad/s, then 0.3 s more: ``alpha`` (the braking
    fitted between 18 and 3 rad/s, rad/s^2), ``all_slip`` (every corner slipped at every
    step, compliant; None for rigid), ``spin_after`` (rad/s) and ``centre`` (m) at the end."""
    sim = box_sim(model, rate)
    sim.set_base_state(angular_velocity=[0.0, 0.0, 20.0])
    t, w, all_slip = [], [], model == "compliant" or None
    while True:
        sim.step([])
        t.append(sim.t)
        w.append(sim.state.base_angular_velocity[2])
        if w[-1] < 2.0:
            break
        if model == "compliant":
            all_slip = all_slip and set(sim.contact_points_state().status) == {"slip"}
    t, w = np.array(t), np.array(w)
    spinning = (w < 18.0) & (w > 3.0)  # after the first steps, before the stop
    alpha = -np.polyfit(t[spinning], w[spinning], 1)[0]
    for _ in range(int(0.3 * rate)):
        sim.step([])
    return {"alpha": float(alpha), "all_slip": all_slip,
            "spin_after": float(sim.state.base_angular_velocity[2]),
            "centre": float(np.hypot(*sim.state.base_position[:2]))}


@functools.lru_cache(maxsize=None)
def exact_curve() -> tuple[float, tuple[float, float]]:
    """(stop time, stop position) of a point mass launched at V0 along x, pushed by PUSH
    along y, braked by mu m g against its velocity (scipy's solve_ivp at 1e-12)."""
    def rhs(t, y):
        vx, vy = y[2], y[3]
        speed = math.hypot(vx, vy)
        return [vx, vy, -MU * G * vx / speed, PUSH / M - MU * G * vy / speed]

    def stop(t, y):
        return math.hypot(y[2], y[3]) - 1e-9

    stop.terminal = True
    sol = solve_ivp(rhs, (0.0, 5.0), [0.0, 0.0, V0, 0.0], method="DOP853", rtol=1e-12,
                    atol=1e-13, events=stop)
    assert sol.status == 1  # it stopped
    return float(sol.t[-1]), (float(sol.y[0, -1]), float(sol.y[1, -1]))


@functools.lru_cache(maxsize=None)
def sideways_slide(model: str, rate: float) -> dict:
    """The box launched at V0 along x and pushed by PUSH along y until 0.35 s after the exact
    stop: ``end`` (its displacement (x, y), m), ``speed`` (m/s) and ``spin`` (rad/s) at the
    end, ``last_move`` (how far it moved over the last 0.1 s, m)."""
    t_stop, _ = exact_curve()  # 0.651 s, (0.450, 0.199) m
    sim = box_sim(model, rate)
    p0 = sim.state.base_position.copy()
    sim.set_base_state(linear_velocity=[V0, 0.0, 0.0])
    sim.apply_external_wrench("box", [0.0, PUSH, 0.0], duration_s=10.0)
    path = []
    for _ in range(int((t_stop + 0.35) * rate)):
        sim.step([])
        path.append(sim.state.base_position[:2] - p0[:2])
    return {"end": tuple(float(x) for x in path[-1]),
            "speed": float(np.linalg.norm(sim.state.base_linear_velocity)),
            "spin": float(sim.state.base_angular_velocity[2]),
            "last_move": float(np.linalg.norm(path[-1] - path[-int(0.1 * rate)]))}
