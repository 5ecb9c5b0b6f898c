"""Spinning bodies keep their energy: the step takes the floating base's velocity-product
(gyroscopic and centripetal) terms implicitly, with the linearly implicit midpoint rule
(``wb_sim/gyroscopic.py``, docs/physics.md "Integration").

Explicit in those terms (the step up to fdb5e48), a spinning body's precession was
integrated with explicit Euler, whose amplitude grows every step: on fdb5e48 the wheel
below gained 10.4 % of its energy in 5 s at 30 rad/s and diverged at 1.55 s at 100 rad/s,
the off-centre body gained 47 times its energy, the top diverged at 0.17 s with either
contact model. Each test compares with a closed-form value or a conservation law, 5 s at
1 kHz:

* a free wheel (thin disc, origin at its centre of mass, no gravity) spinning at 30 and
  100 rad/s, its angular velocity 0.05 rad off its axis: energy within 1 % (it is kept to
  rounding: the scheme keeps an axisymmetric body's energy and |L| exactly), world
  angular momentum within 2e-3 / 5e-3 (7.5e-4 / 2.5e-3 measured), the axle precessing
  about L at |L| / I_1 (to 1e-3; 4e-5 / 4e-4 measured);
* a free asymmetric body whose origin is off its centre of mass (the centripetal terms
  of the base's linear rows), tumbling at 50 rad/s: energy within 1 %;
* a top spinning at 300 rad/s on its tip, gravity on, with either contact model: total
  energy (kinetic + potential) within 1 %, the precession rate m g l / (I_3 w) within 2 %,
  the tilt kept (no fall, no rise), the tip where it was;
* a free body's step, and the correction's formula on the humanoid's model, against a
  dense solve of the same equations;
* bit-identical repeats.

Articulated robots keep the explicit step (the root body's share is a small part of
their velocity-product terms: it changed nothing measurable and cost 15-19 % of
icub_stand's step); test_physics.py holds their forward dynamics to ABA.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from helpers.dynamics import implicit_acceleration, implicit_increment, stepping_model

G = 9.81
RATE = 1000.0
SECONDS = 5.0
NO_TORQUE = np.zeros(0)


def _inertial(m, ixx, iyy, izz, xyz=(0.0, 0.0, 0.0)):
    x, y, z = xyz
    return (f'<inertial><origin xyz="{x} {y} {z}" rpy="0 0 0"/><mass value="{m}"/>'
            f'<inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{iyy}" iyz="0" izz="{izz}"/>'
            f'</inertial>')


def _body_urdf(m, inertia, com=(0.0, 0.0, 0.0), name="body"):
    return f'<robot name="{name}"><link name="{name}">{_inertial(m, *inertia, com)}</link></robot>'


def _free_body(m, inertia, com=(0.0, 0.0, 0.0)):
    """A single free body in the air, no gravity, base at rest at identity."""
    return wb_sim.Simulator.from_params({
        "robot_description": _body_urdf(m, inertia, com), "floating_base": True,
        "gravity": [0.0, 0.0, 0.0], "initial.base_position": [0.0, 0.0, 1.0],
        "physics_rate_hz": RATE})


def _run(sim, steps, record):
    out = []
    for _ in range(steps):
        sim.step(NO_TORQUE)
        out.append(record(sim))
    return out


def _rotation(sim):
    return pin.Quaternion(sim.q[3:7]).matrix()


def _momenta(sim, m, inertia, com):
    """(kinetic energy, world angular momentum about the centre of mass, world velocity of
    the centre of mass) of a single body; the API's base twist is in base axes."""
    R, v, w = _rotation(sim), sim.v[:3], sim.v[3:6]
    I_c = np.diag(inertia)
    v_com = R @ (v + np.cross(w, com))
    return 0.5 * w @ I_c @ w + 0.5 * m * v_com @ v_com, R @ I_c @ w, v_com


# ---------------------------------------------------------------------------
# free wheel
# ---------------------------------------------------------------------------

WHEEL_M, WHEEL_R, WHEEL_T = 1.0, 0.1, 0.01
WHEEL_I1 = WHEEL_M * (3 * WHEEL_R**2 + WHEEL_T**2) / 12  # about a diameter
WHEEL_I3 = 0.5 * WHEEL_M * WHEEL_R**2                     # about the axle
WHEEL_INERTIA = (WHEEL_I1, WHEEL_I1, WHEEL_I3)
WOBBLE = 0.05  # rad between the angular velocity and the axle


@pytest.mark.parametrize("spin, l_tol", [(30.0, 2e-3), (100.0, 5e-3)])
def test_free_wheel_keeps_energy_angular_momentum_and_precession(spin, l_tol):
    """Torque-free disc: energy and world angular momentum are conserved, and the axle
    precesses about L at |L| / I_1 (Euler's free symmetric top)."""
    sim = _free_body(WHEEL_M, WHEEL_INERTIA)
    sim.set_base_state(angular_velocity=[spin * math.sin(WOBBLE), 0.0, spin * math.cos(WOBBLE)])
    com = np.zeros(3)
    e0, L0, _ = _momenta(sim, WHEEL_M, WHEEL_INERTIA, com)
    rows = _run(sim, int(SECONDS * RATE),
                lambda s: (*_momenta(s, WHEEL_M, WHEEL_INERTIA, com), _rotation(s)[:, 2]))
    e = np.array([r[0] for r in rows])
    L = np.array([r[1] for r in rows])
    axle = np.array([r[3] for r in rows])
    de = np.abs(e / e0 - 1.0).max()
    dL = (np.linalg.norm(L - L0, axis=1) / np.linalg.norm(L0)).max()
    assert de < 1e-2, f"energy drift {de:.2e}"
    # axisymmetric: kinetic energy and |L| are kept to rounding (the scheme's invariants)
    assert de < 1e-12, f"energy drift {de:.2e}"
    np.testing.assert_allclose(np.linalg.norm(L, axis=1), np.linalg.norm(L0), rtol=1e-12)
    assert dL < l_tol, f"world angular momentum drift {dL:.2e}"
    assert np.abs(np.array([r[2] for r in rows])).max() == 0.0  # no force: the centre stays
    # the axle turns about L at |L| / I_1
    n = L0 / np.linalg.norm(L0)
    e1 = np.cross(n, [1.0, 0.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(n, e1)
    angle = np.unwrap(np.arctan2(axle @ e2, axle @ e1))
    t = np.arange(1, len(angle) + 1) / RATE
    rate = np.polyfit(t, angle, 1)[0]
    expected = np.linalg.norm(L0) / WHEEL_I1
    assert abs(rate / expected - 1.0) < 1e-3, f"precession {rate:.4f} vs {expected:.4f} rad/s"


def test_free_asymmetric_body_off_its_origin_keeps_energy():
    """An asymmetric body whose base origin is 10 cm from its centre of mass, tumbling at
    50 rad/s near its major axis: the base's linear rows carry the centripetal terms
    m R (w x (w x c)), taken implicitly as well. Energy within 1 % (0.73 % measured, a
    bounded oscillation of the centre of mass's velocity, as before; left explicit, those
    terms let it gain 30 %; the explicit step of fdb5e48, 47 times)."""
    m, inertia, com = 2.0, (0.02, 0.03, 0.045), np.array([0.05, -0.03, 0.08])
    sim = _free_body(m, inertia, com)
    w = 50.0 * np.array([0.1, 0.05, 1.0]) / np.linalg.norm([0.1, 0.05, 1.0])
    sim.set_base_state(angular_velocity=w)
    e0, _, _ = _momenta(sim, m, inertia, com)
    e = np.array(_run(sim, int(SECONDS * RATE), lambda s: _momenta(s, m, inertia, com)[0]))
    de = np.abs(e / e0 - 1.0).max()
    assert de < 1e-2, f"energy drift {de:.2e}"


# ---------------------------------------------------------------------------
# top on its tip
# ---------------------------------------------------------------------------

TOP_M, TOP_R, TOP_L = 0.5, 0.04, 0.01  # a flat disc 1 cm above its tip
TOP_I1 = 0.25 * TOP_M * TOP_R**2        # about a diameter through the centre of mass
TOP_I3 = 0.5 * TOP_M * TOP_R**2
TOP_SPIN, TOP_TILT = 300.0, 0.1


def _top(model):
    """The top: base origin at its tip, one contact point there; tilted TOP_TILT about x,
    spinning at TOP_SPIN about its axis with a WOBBLE off it, gravity on."""
    quat = pin.Quaternion(pin.rpy.rpyToMatrix(TOP_TILT, 0.0, 0.0)).coeffs()
    sim = wb_sim.Simulator.from_params({
        "robot_description": _body_urdf(TOP_M, (TOP_I1, TOP_I1, TOP_I3), (0.0, 0.0, TOP_L),
                                        "top"),
        "floating_base": True, "gravity": [0.0, 0.0, -G], "physics_rate_hz": RATE,
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


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_top_on_its_tip_keeps_energy_and_precesses(model):
    """A fast top precesses about the vertical at m g l / (I_3 w) without falling: energy
    within 1 % (0.16 % measured, the tip's first slip, the same at 10 kHz), the mean
    precession rate within 2 % (+0.5 % measured, +0.3 % at 10 kHz), the tilt within
    0.02 rad of its start over the last second (0.102 rad), the tip within 5 mm of where it
    stood (2.4 mm, 2.3 mm at 10 kHz)."""
    sim = _top(model)
    e0 = _top_energy(sim)

    def record(s):
        axis = _rotation(s)[:, 2]
        return _top_energy(s), math.acos(axis[2]), math.atan2(axis[1], axis[0])

    rows = np.array(_run(sim, int(SECONDS * RATE), record))
    de = np.abs(rows[:, 0] / e0 - 1.0).max()
    assert de < 1e-2, f"energy drift {de:.2e}"
    t = np.arange(1, len(rows) + 1) / RATE
    rate = np.polyfit(t, np.unwrap(rows[:, 2]), 1)[0]
    expected = TOP_M * G * TOP_L / (TOP_I3 * TOP_SPIN)
    assert abs(rate / expected - 1.0) < 2e-2, f"precession {rate:.4f} vs {expected:.4f} rad/s"
    tilt = rows[:, 1]
    assert abs(tilt[-int(RATE):].mean() - TOP_TILT) < 2e-2, tilt[-int(RATE):].mean()
    assert np.linalg.norm(sim.q[:2]) < 5e-3


# ---------------------------------------------------------------------------
# the step against the dense solve, determinism
# ---------------------------------------------------------------------------


def test_free_body_step_matches_the_dense_implicit_solve():
    """One step of the off-centre asymmetric body, pushed and spinning: its mean
    acceleration equals (M + dt/2 D)^-1 (tau - b) (helpers.dynamics: a dense solve, D by
    polarization of pinocchio's bias forces) to 1e-9; ABA's explicit one differs."""
    m, inertia, com = 2.0, (0.02, 0.03, 0.045), (0.05, -0.03, 0.08)
    sim = _free_body(m, inertia, com)
    sim.set_base_state(linear_velocity=[0.3, -0.2, 0.1], angular_velocity=[2.0, -30.0, 7.0])
    sim.apply_external_wrench("body", [3.0, -1.0, 2.0], [0.2, 0.1, -0.3], duration_s=1.0)
    for _ in range(20):
        sim.step(NO_TORQUE)
    q, v = sim.q.copy(), sim.v.copy()
    a = sim.forward_dynamics(NO_TORQUE)  # with the push, as the step
    tau = np.array([3.0, -1.0, 2.0, 0.2, 0.1, -0.3])  # the push, base axes: the generalized force
    a_ref = implicit_acceleration(sim, q, v, tau)
    tol = 1e-9 * np.abs(a_ref).max()
    np.testing.assert_allclose(a, a_ref, rtol=0, atol=tol)
    a_aba = pin.aba(sim.model, sim.model.createData(), q, v, tau)
    assert np.abs(a_aba - a_ref).max() > 1e3 * tol


def test_woodbury_correction_on_an_articulated_model_matches_the_dense_solve(make_humanoid):
    """wb_sim.gyroscopic's correction solves (M + dt/2 D) dv' = M dv through M^-1 (rank 3,
    Woodbury) for any number of joints: on the humanoid's stepping model, spinning at
    8 rad/s with its joints moving, it equals the dense solve to 1e-12. (The simulator
    applies it to one-body floating bases only; this holds the formula.)"""
    from wb_sim.gyroscopic import RootGyroscopic

    sim = make_humanoid(**{"gravity": [0.0, 0.0, 0.0]})
    model = stepping_model(sim)
    data = model.createData()
    rng = np.random.default_rng(7)
    q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
    v = rng.normal(0.0, 1.0, model.nv)
    v[3:6] = [2.0, -3.0, 7.0]
    dt = sim.dt
    dv = pin.aba(model, data, q, v, rng.normal(0.0, 5.0, model.nv), pin.Convention.WORLD) * dt
    dv += rng.normal(0.0, 0.01, model.nv)  # as if impulses had acted
    Minv_upper = pin.computeMinverse(model, data)
    v_next = RootGyroscopic(model, data, dt).correct(v[3:6], Minv_upper, v + dv)
    ref = implicit_increment(model, q, v, dv, dt)
    tol = 1e-12 * np.abs(ref).max()
    np.testing.assert_allclose(v_next - v, ref, rtol=0, atol=tol)
    assert np.abs(ref - dv).max() > 1e4 * tol  # the correction is there (1.3e-6 of dv)


def test_spinning_runs_are_bit_identical():
    runs = []
    for _ in range(2):
        sim = _top("compliant")
        for _ in range(300):
            sim.step(NO_TORQUE)
        runs.append((sim.q.copy(), sim.v.copy()))
    assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])
