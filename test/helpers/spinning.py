"""Spinning single bodies, 5 s at 1 kHz (test/core/test_gyroscopic.py asserts on them,
docs/physics.md's "Integration" table quotes them through test/helpers/docs_rows.py): a free
wheel, an asymmetric body off its origin, a top on its tip. Each run returns its measured
figures (plain floats); runs are deterministic, so they are cached per process and a run the
tests made is not made again for the docs."""

from __future__ import annotations

import functools
import math

import numpy as np
import pinocchio as pin

import wb_sim

G = 9.81
RATE = 1000.0
SECONDS = 5.0
NO_TORQUE = np.zeros(0)


def _inertial(m, ixx, iyy, izz, xyz=(0.0, 0.0, 0.0)):
    x, y, z = xyz
    return (f'<inertial><origin xyz="{x} {y} {z}" rpy="0 0 0"/><mass value="{m}"/>'
            f'<inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{iyy}" iyz="0" izz="{izz}"/>'
            f'</inertial>')


def body_urdf(m, inertia, com=(0.0, 0.0, 0.0), name="body"):
    return f'<robot name="{name}"><link name="{name}">{_inertial(m, *inertia, com)}</link></robot>'


def free_body(m, inertia, com=(0.0, 0.0, 0.0)):
    """A single free body in the air, no gravity, base at rest at identity."""
    return wb_sim.Simulator.from_params({
        "robot_description": body_urdf(m, inertia, com), "floating_base": True,
        "gravity": [0.0, 0.0, 0.0], "initial.base_position": [0.0, 0.0, 1.0],
        "physics_rate_hz": RATE})


def run(sim, steps, record):
    out = []
    for _ in range(steps):
        sim.step(NO_TORQUE)
        out.append(record(sim))
    return out


def rotation(sim):
    return pin.Quaternion(sim.q[3:7]).matrix()


def momenta(sim, m, inertia, com):
    """(kinetic energy, world angular momentum about the centre of mass, world velocity of
    the centre of mass) of a single body; the API's base twist is in base axes."""
    R, v, w = rotation(sim), sim.v[:3], sim.v[3:6]
    I_c = np.diag(inertia)
    v_com = R @ (v + np.cross(w, com))
    return 0.5 * w @ I_c @ w + 0.5 * m * v_com @ v_com, R @ I_c @ w, v_com


def _signed_extreme(ratio):
    """The relative deviation of largest magnitude, with its sign."""
    dev = np.asarray(ratio) - 1.0
    return float(dev[np.abs(dev).argmax()])


# free wheel: a thin disc, origin at its centre of mass
WHEEL_M, WHEEL_R, WHEEL_T = 1.0, 0.1, 0.01
WHEEL_I1 = WHEEL_M * (3 * WHEEL_R**2 + WHEEL_T**2) / 12  # about a diameter
WHEEL_I3 = 0.5 * WHEEL_M * WHEEL_R**2                     # about the axle
WHEEL_INERTIA = (WHEEL_I1, WHEEL_I1, WHEEL_I3)
WOBBLE = 0.05  # rad between the angular velocity and the axle


@functools.lru_cache(maxsize=None)
def free_wheel(spin: float) -> dict:
    """The torque-free disc spinning at ``spin`` rad/s, WOBBLE off its axle, SECONDS at RATE:
    ``energy`` (largest |E/E0 - 1|), ``L_norm`` (largest ||L|/|L0| - 1|), ``L`` (largest
    |L - L0| / |L0|, world frame), ``centre`` (largest drift of the centre of mass's speed,
    m/s), ``precession`` (the axle's mean turning rate about L against |L| / I_1, - 1)."""
    sim = free_body(WHEEL_M, WHEEL_INERTIA)
    sim.set_base_state(angular_velocity=[spin * math.sin(WOBBLE), 0.0, spin * math.cos(WOBBLE)])
    com = np.zeros(3)
    e0, L0, _ = momenta(sim, WHEEL_M, WHEEL_INERTIA, com)
    rows = run(sim, int(SECONDS * RATE),
               lambda s: (*momenta(s, WHEEL_M, WHEEL_INERTIA, com), rotation(s)[:, 2]))
    e = np.array([r[0] for r in rows])
    L = np.array([r[1] for r in rows])
    axle = np.array([r[3] for r in rows])
    n = L0 / np.linalg.norm(L0)
    e1 = np.cross(n, [1.0, 0.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(n, e1)
    angle = np.unwrap(np.arctan2(axle @ e2, axle @ e1))
    t = np.arange(1, len(angle) + 1) / RATE
    rate = np.polyfit(t, angle, 1)[0]
    return {"energy": float(np.abs(e / e0 - 1.0).max()),
            "L_norm": float(np.abs(np.linalg.norm(L, axis=1) / np.linalg.norm(L0) - 1.0).max()),
            "L": float((np.linalg.norm(L - L0, axis=1) / np.linalg.norm(L0)).max()),
            "centre": float(np.abs(np.array([r[2] for r in rows])).max()),
            "precession": float(rate / (np.linalg.norm(L0) / WHEEL_I1) - 1.0)}


ASYM_M, ASYM_INERTIA, ASYM_COM = 2.0, (0.02, 0.03, 0.045), (0.05, -0.03, 0.08)


@functools.lru_cache(maxsize=None)
def asymmetric_body() -> float:
    """An asymmetric body whose base origin is 10 cm from its centre of mass, tumbling at
    50 rad/s near its major axis, SECONDS at RATE: its energy's signed largest relative
    deviation."""
    com = np.array(ASYM_COM)
    sim = free_body(ASYM_M, ASYM_INERTIA, com)
    w = 50.0 * np.array([0.1, 0.05, 1.0]) / np.linalg.norm([0.1, 0.05, 1.0])
    sim.set_base_state(angular_velocity=w)
    e0, _, _ = momenta(sim, ASYM_M, ASYM_INERTIA, com)
    e = np.array(run(sim, int(SECONDS * RATE), lambda s: momenta(s, ASYM_M, ASYM_INERTIA, com)[0]))
    return _signed_extreme(e / e0)


# top on its tip: a flat disc 1 cm above its tip
TOP_M, TOP_R, TOP_L = 0.5, 0.04, 0.01
TOP_I1 = 0.25 * TOP_M * TOP_R**2        # about a diameter through the centre of mass
TOP_I3 = 0.5 * TOP_M * TOP_R**2
TOP_SPIN, TOP_TILT = 300.0, 0.1


def top_sim(model: str, rate: float = RATE):
    """The top: base origin at its tip, one contact point there; tilted TOP_TILT about x,
    spinning at TOP_SPIN about its axis with a WOBBLE off it, gravity on."""
    quat = pin.Quaternion(pin.rpy.rpyToMatrix(TOP_TILT, 0.0, 0.0)).coeffs()
    sim = wb_sim.Simulator.from_params({
        "robot_description": body_urdf(TOP_M, (TOP_I1, TOP_I1, TOP_I3), (0.0, 0.0, TOP_L),
                                       "top"),
        "floating_base": True, "gravity": [0.0, 0.0, -G], "physics_rate_hz": rate,
        "contact.model": model, "contact.friction_coefficient": 1.0,
        "contact_surfaces": ["tip"], "tip.frame": "top", "tip.shape": "points",
        "tip.points": [0.0, 0.0, 0.0], "initial.base_position": [0.0, 0.0, 0.0]})
    R = pin.Quaternion(quat).matrix()
    sim.set_base_state(quaternion=quat, angular_velocity=R @ (
        TOP_SPIN * np.array([math.sin(WOBBLE), 0.0, math.cos(WOBBLE)])))
    return sim


def _top_energy(sim):
    """Kinetic + potential energy, J (the contact's elastic energy is below 1e-5 J)."""
    v = sim.v
    return 0.5 * v @ sim.mass_matrix() @ v + TOP_M * G * sim.center_of_mass()[2]


@functools.lru_cache(maxsize=None)
def top(model: str, rate: float = RATE) -> dict:
    """The top SECONDS at ``rate``: ``energy`` (signed largest relative deviation of the total
    energy), ``precession`` (mean precession rate against m g l / (I_3 w), - 1), ``tilt``
    (mean tilt over the last second, rad), ``tip`` (the tip's horizontal distance from where
    it stood, m)."""
    sim = top_sim(model, rate)
    e0 = _top_energy(sim)

    def record(s):
        axis = rotation(s)[:, 2]
        return _top_energy(s), math.acos(axis[2]), math.atan2(axis[1], axis[0])

    rows = np.array(run(sim, int(SECONDS * rate), record))
    t = np.arange(1, len(rows) + 1) / rate
    rate_fit = np.polyfit(t, np.unwrap(rows[:, 2]), 1)[0]
    expected = TOP_M * G * TOP_L / (TOP_I3 * TOP_SPIN)
    return {"energy": _signed_extreme(rows[:, 0] / e0),
            "precession": float(rate_fit / expected - 1.0),
            "tilt": float(rows[-int(rate):, 1].mean()),
            "tip": float(np.linalg.norm(sim.q[:2]))}
