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

import numpy as np
import pinocchio as pin
import pytest

from helpers.dynamics import implicit_acceleration, implicit_increment, stepping_model
from helpers.spinning import (NO_TORQUE, TOP_TILT, asymmetric_body, free_body, free_wheel,
                              top, top_sim)


@pytest.mark.parametrize("spin, l_tol", [(30.0, 2e-3), (100.0, 5e-3)])
def test_free_wheel_keeps_energy_angular_momentum_and_precession(spin, l_tol):
    """Torque-free disc: energy and world angular momentum are conserved, and the axle
    precesses about L at |L| / I_1 (Euler's free symmetric top)."""
    got = free_wheel(spin)
    assert got["energy"] < 1e-2, f"energy drift {got['energy']:.2e}"
    # axisymmetric: kinetic energy and |L| are kept to rounding (the scheme's invariants)
    assert got["energy"] < 1e-12, f"energy drift {got['energy']:.2e}"
    assert got["L_norm"] < 1e-12, f"|L| drift {got['L_norm']:.2e}"
    assert got["L"] < l_tol, f"world angular momentum drift {got['L']:.2e}"
    assert got["centre"] == 0.0  # no force: the centre stays
    # the axle turns about L at |L| / I_1
    assert abs(got["precession"]) < 1e-3, f"precession off by {got['precession']:.2e}"


def test_free_asymmetric_body_off_its_origin_keeps_energy():
    """An asymmetric body whose base origin is 10 cm from its centre of mass, tumbling at
    50 rad/s near its major axis: the base's linear rows carry the centripetal terms
    m R (w x (w x c)), taken implicitly as well. Energy within 1 % (0.73 % measured, a
    bounded oscillation of the centre of mass's velocity, as before; left explicit, those
    terms let it gain 30 %; the explicit step of fdb5e48, 47 times)."""
    de = abs(asymmetric_body())
    assert de < 1e-2, f"energy drift {de:.2e}"


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_top_on_its_tip_keeps_energy_and_precesses(model):
    """A fast top precesses about the vertical at m g l / (I_3 w) without falling: energy
    within 1 % (0.16 % measured, the tip's first slip, the same at 10 kHz), the mean
    precession rate within 2 % (+0.5 % measured, +0.3 % at 10 kHz), the tilt within
    0.02 rad of its start over the last second (0.102 rad), the tip within 5 mm of where it
    stood (2.4 mm, 2.3 mm at 10 kHz)."""
    got = top(model)
    assert abs(got["energy"]) < 1e-2, f"energy drift {got['energy']:.2e}"
    assert abs(got["precession"]) < 2e-2, f"precession off by {got['precession']:.2e}"
    assert abs(got["tilt"] - TOP_TILT) < 2e-2, got["tilt"]
    assert got["tip"] < 5e-3


# ---------------------------------------------------------------------------
# the step against the dense solve, determinism
# ---------------------------------------------------------------------------


def test_free_body_step_matches_the_dense_implicit_solve():
    """One step of the off-centre asymmetric body, pushed and spinning: its mean
    acceleration equals (M + dt/2 D)^-1 (tau - b) (helpers.dynamics: a dense solve, D by
    polarization of pinocchio's bias forces) to 1e-9; ABA's explicit one differs."""
    sim = free_body(2.0, (0.02, 0.03, 0.045), (0.05, -0.03, 0.08))
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
        sim = top_sim("compliant")
        for _ in range(300):
            sim.step(NO_TORQUE)
        runs.append((sim.q.copy(), sim.v.copy()))
    assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])
