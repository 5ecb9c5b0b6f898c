"""Torsional (spin) friction, ``contact.torsional_friction`` l (m): the torque of a
contact about its normal is at most ``l f_n``, in both contact models.

A solid ball (1 kg, r = 0.1 m, I = 0.004 kg m^2) resting on the ground touches it at
one point, on its spin axis: without torsional friction (the default, as MuJoCo's
condim 3, Gazebo, PhysX, Bullet) nothing brakes a spin about the vertical; with it the
spin brakes at ``alpha = l m g / I`` and stops. A torque below ``l m g`` does not turn
the ball (the compliant ground twists elastically, the rigid one not at all); above
it, the ball turns with ``(tau - l m g) / I``. The compliant model's twist is state:
a snapshot taken mid-spin continues bit-identically.
"""

from __future__ import annotations


import numpy as np
import pytest

import wb_sim
from wb_sim.config import PARAMETER_BY_KEY
from wb_sim.contact import CONTACT_MODELS
from wb_sim.contact.compliant import law_residual, reference_solve

from helpers.torsion import (ALPHA, ELL, G, I_BALL, M, MODELS, R, ball_sim, braking, spin,
                             yaw_of as _yaw)


def test_the_parameter_is_declared_once_off_by_default_and_live():
    p = PARAMETER_BY_KEY["contact.torsional_friction"]
    assert p.default == 0.0 and p.unit == "m" and p.live
    for cls in CONTACT_MODELS.values():
        assert p in cls.PARAMETERS and "torsional_friction" in cls.LIVE_PARAMETERS


@pytest.mark.parametrize("model", MODELS)
def test_without_torsional_friction_a_spinning_ball_never_slows(model):
    sim = ball_sim(model)
    sim.set_base_state(angular_velocity=[0.0, 0.0, 10.0])
    _, w = spin(sim, 1.0)
    assert np.abs(w - 10.0).max() < 1e-6


@pytest.mark.parametrize("rate", [250, 1000, 4000])
@pytest.mark.parametrize("model", MODELS)
def test_a_spinning_ball_brakes_at_the_torsional_rate_and_stops(model, rate):
    got = braking(model, rate)
    assert got["alpha"] == pytest.approx(ALPHA, rel=1e-2), \
        f"{got['alpha']:.3f} vs {ALPHA:.3f} rad/s^2"
    # stopped, it stays: the compliant ground springs back by its elastic twist (about
    # l m g / (s k_t l^2) = 8 mrad here) and rings down; the rigid one holds still
    if model == "rigid":
        assert got["spin_after"] < 1e-3
    assert got["yaw_ptp"] < 2e-2
    # the ball did not roll away or hop: only its spin was braked
    assert got["drift"] < 1e-6
    assert got["z"] == pytest.approx(R, abs=1e-3)


@pytest.mark.parametrize("model", MODELS)
def test_a_torque_below_the_limit_holds_and_above_it_turns_the_ball(model):
    limit = ELL * M * G
    sim = ball_sim(model, **{"contact.torsional_friction": ELL})
    yaw0 = _yaw(sim)
    sim.apply_external_wrench("ball", [0.0, 0.0, 0.0], [0.0, 0.0, 0.8 * limit], duration_s=1.0)
    yaw = []
    spin(sim, 1.0, yaw)
    held = np.array(yaw) - yaw0
    # the compliant ground twists by tau / (s k_t l^2) (6 mrad here) and rings about it;
    # the rigid one does not give; neither creeps
    assert np.abs(held).max() < (2e-2 if model == "compliant" else 1e-4), held
    assert abs(held[-250:].mean() - held[-500:-250].mean()) < 2e-3
    sim.apply_external_wrench("ball", [0.0, 0.0, 0.0], [0.0, 0.0, 1.5 * limit], duration_s=0.5)
    t, w = spin(sim, 0.5)
    turning = t > t[0] + 0.1
    measured = np.polyfit(t[turning], w[turning], 1)[0]
    assert measured == pytest.approx(0.5 * limit / I_BALL, rel=2e-2)


@pytest.mark.parametrize("model", MODELS)
def test_torsional_friction_is_live(model):
    sim = ball_sim(model)
    sim.set_base_state(angular_velocity=[0.0, 0.0, 10.0])
    spin(sim, 0.1)
    assert sim.state.base_angular_velocity[2] == pytest.approx(10.0, abs=1e-6)
    sim.set_contact_parameters(torsional_friction=ELL)
    t, w = spin(sim, 0.2)
    measured = -np.polyfit(t[10:], w[10:], 1)[0]
    assert measured == pytest.approx(ELL * M * G / I_BALL, rel=2e-2)
    with pytest.raises(wb_sim.ConfigError):
        sim.set_contact_parameters(torsional_friction=-1.0)


def test_the_compliant_twist_is_in_the_snapshot():
    sim = ball_sim("compliant", **{"contact.torsional_friction": ELL})
    sim.apply_external_wrench("ball", [0.0, 0.0, 0.0], [0.0, 0.0, 0.05], duration_s=1.0)
    spin(sim, 0.05)
    assert abs(sim.contact.twist[0]) > 1e-6  # twisted elastically
    snap = sim.get_state()
    _, w_a = spin(sim, 0.3)
    sim.set_state(snap)
    _, w_b = spin(sim, 0.3)
    np.testing.assert_array_equal(w_a, w_b)
    # and a reset leaves no twist behind
    sim.reset()
    assert not sim.contact.twist.any()


def test_the_compliant_step_with_torsion_equals_its_reference_and_law():
    """On the ball twisted, sliding and spinning at random (stick and slip of the spin
    both), the vectorized step, its plain reference and the law agree."""
    import pinocchio as pin
    sim = ball_sim("compliant", **{"contact.torsional_friction": ELL})
    contact, pts = sim.contact, sim.contact_points
    model, data = sim._model_step, sim._data_step
    rng = np.random.default_rng(3)
    slipped, stuck = 0, 0
    for trial in range(40):
        q = np.array(sim.q)
        q[2] = R - rng.uniform(1e-4, 1e-3)
        v = np.zeros(model.nv)
        v[:3] = rng.normal(0.0, 0.05, 3)
        v[3:6] = rng.normal(0.0, 0.3, 3)
        v[5] = rng.normal(0.0, (0.01, 8.0)[trial % 2])  # the spin: slow or fast
        v_free = pin.aba(model, data, q, v, np.zeros(model.nv), pin.Convention.WORLD) * sim.dt + v
        Minv = pin.computeMinverse(model, data)
        pts.update(model, data, None)
        u = rng.normal(0.0, 1e-5, (2, pts.n))
        twist = rng.normal(0.0, 2e-5, pts.n)
        contact.initial_state()
        contact.set_warm_start(np.column_stack([np.zeros((pts.n, 2)), twist]))
        v_next, force, u_next = contact.solve(Minv, v_free, u, sim.dt)
        Mfull = np.triu(Minv) + np.triu(Minv, 1).T
        params = contact.parameters()
        v_r, f_r, u_r, twist_r = reference_solve(pts, Mfull, v_free, u, sim.dt, params,
                                                 contact.reference_depth, twist)
        np.testing.assert_allclose(force, f_r, atol=1e-8 * max(1.0, np.abs(f_r).max()))
        np.testing.assert_allclose(v_next, v_r, atol=1e-10)
        np.testing.assert_allclose(u_next, u_r, atol=1e-12)
        np.testing.assert_allclose(contact.twist, twist_r, atol=1e-12)
        # the spin torque from the velocity change: I dw_z = h tau (the ball's inertia is
        # isotropic, its contact point on the spin axis)
        torque = I_BALL * (v_next[5] - v_free[5]) / sim.dt
        assert abs(torque) <= ELL * force[0, 2] * (1 + 1e-9)
        if abs(torque) > ELL * force[0, 2] * (1 - 1e-9):
            slipped += 1
        else:
            stuck += 1
        res = law_residual(pts, Mfull, v_free, u, sim.dt, params, contact.reference_depth,
                           force, twist, np.array([torque]))
        assert res < 1e-9, f"trial {trial}: {res:.2e}"
    assert slipped >= 5 and stuck >= 5, (slipped, stuck)


@pytest.mark.filterwarnings("ignore::wb_sim.simulator.InitialPenetrationWarning")
def test_the_merged_solve_with_collision_points_keeps_the_feet_spin_rows(make_humanoid):
    """With whole-body collision, the feet and the links' collision points are solved
    together: the feet keep their spin rows (the links have none), the twist is handed
    to and from that solve, and the merged step equals the plain reference."""
    import pinocchio as pin
    from core.contact.test_collision import _lying
    sim = _lying(make_humanoid, **{"initial.base_position": [0, 0, 0.065],
                                   "contact.torsional_friction": ELL})
    contact = sim.contact
    model, data = sim._model_step, sim._data_step
    q = sim.q
    v = np.random.default_rng(1).normal(0.0, 0.2, model.nv)
    v_free = pin.aba(model, data, q, v, np.zeros(model.nv), pin.Convention.WORLD) * sim.dt + v
    Minv = pin.computeMinverse(model, data)
    sim.contact_points.update(model, data, None)
    assert contact.collision.any_near(data) and contact.collision.narrow(data) > 10
    merged = contact.points
    merged.refresh()
    rows = merged.torsion_jacobian()
    nf = merged.nf
    assert np.abs(rows[:nf]).max() > 0.5 and not rows[nf:].any()
    np.testing.assert_array_equal(rows[:nf], sim.contact_points.torsion_jacobian())
    twist = np.zeros(merged.n)
    twist[:nf] = np.linspace(-2e-5, 2e-5, nf)
    contact.merged.set_warm_start(np.column_stack([np.zeros((merged.n, 2)), twist]))
    u = np.zeros((2, merged.n))
    v_fast, f_fast, u_fast = contact.merged.solve(Minv, v_free, u, sim.dt)
    Minv_full = np.triu(Minv) + np.triu(Minv, 1).T
    v_ref, f_ref, u_ref, twist_ref = reference_solve(
        merged, Minv_full, v_free, u, sim.dt, contact.merged.parameters(), 1e-3, twist)
    assert np.count_nonzero(f_ref[:, 2] > 0) >= 4
    np.testing.assert_allclose(v_fast, v_ref, atol=1e-9)
    np.testing.assert_allclose(f_fast, f_ref, atol=1e-6 * np.abs(f_ref).max())
    np.testing.assert_allclose(contact.merged.twist, twist_ref, atol=1e-12)
    # and the hand-over: the feet's instance takes the twist back by point
    contact.feet.set_warm_start(contact.merged.warm_start()[:nf])
    np.testing.assert_array_equal(contact.feet.twist, contact.merged.twist[:nf])
