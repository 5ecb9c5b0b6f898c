"""External wrenches (pushes) in the core: momentum balance against the impulse.

* free-floating humanoid (no gravity, no ground): linear momentum change =
  sum R_link(t) f dt for a force f in a link's frame, to the integrator's
  first-order error (< 0.5 %, halving with dt); angular momentum about the
  CoM = the moment of a pure torque (1e-3 relative);
* standing humanoid: m dv_com = sum (R f_push + F_ground + m g) dt, the ground
  forces taken from the contact readings of each step (1e-3 of the push);
* the push lasts exactly round(duration / dt) steps, pushes add up, reset
  removes them; bad links and values are refused.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.errors import CommandError, ModelError


def _humanoid(**overrides):
    return wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides=overrides)


def _floating(**overrides):
    # no gravity and 1 m of air under the soles: only the push acts
    return _humanoid(gravity=[0.0, 0.0, 0.0], **{"initial.base_position": [0.0, 0.0, 1.7]},
                     **overrides)


def _momentum(sim):
    """(linear momentum, angular momentum about the CoM), world frame."""
    h = pin.computeCentroidalMomentum(sim.model, sim.model.createData(), sim.q, sim.v)
    return h.linear.copy(), h.angular.copy()


def _momentum_error_after_push(link, rate_hz):
    sim = _floating(physics_rate_hz=rate_hz)
    link = link or sim.robot.root_link
    f_local = np.array([30.0, -12.0, 8.0])
    sim.apply_external_wrench(link, f_local, duration_s=0.05)
    expected = np.zeros(3)
    for _ in range(round(0.05 / sim.dt)):  # the force turns with the link: sum R(t) f dt
        expected += sim.frame_pose(link).rotation @ f_local * sim.dt
        sim.step(np.zeros(sim.nj))
    assert sim.external_wrenches == []
    p, _ = _momentum(sim)
    assert np.linalg.norm(expected - f_local * 0.05) > 1e-3  # the link did turn
    return np.linalg.norm(p - expected) / np.linalg.norm(expected)


@pytest.mark.parametrize("link", [None, "l_sole"])  # None: the base
def test_push_changes_linear_momentum_by_the_impulse(link):
    """Semi-implicit Euler changes the momentum by h F + O(h^2) per step, so the
    error is first order in dt (0.02 % on the base, 0.3 % on a foot at 1 kHz)."""
    e1 = _momentum_error_after_push(link, 1000.0)
    e2 = _momentum_error_after_push(link, 2000.0)
    assert e1 < 5e-3
    assert 1.8 < e1 / e2 < 2.2  # first order: a wrong frame or sign would not converge


def test_pure_torque_changes_angular_momentum_only():
    sim = _floating()
    base = sim.robot.root_link
    tau_local = np.array([0.0, 0.0, 2.0])
    R = sim.frame_pose(base).rotation
    sim.apply_external_wrench(base, (0.0, 0.0, 0.0), tau_local, duration_s=0.01)
    for _ in range(10):
        sim.step(np.zeros(sim.nj))
    p, L = _momentum(sim)
    expected = R @ tau_local * 0.01
    assert np.linalg.norm(p) < 1e-3 * np.linalg.norm(expected)  # (integrator: first order)
    assert np.linalg.norm(L - expected) < 1e-3 * np.linalg.norm(expected)


def test_push_on_standing_humanoid_balances_with_ground_forces():
    sim = _humanoid()
    q_ref = sim.state.joint_positions

    def tau():
        st = sim.state
        return sim.gravity_torques() + 200.0 * (q_ref - st.joint_positions) \
            - 10.0 * st.joint_velocities

    for _ in range(1000):  # settle
        sim.step(tau())
    m, g, base = sim.mass, np.array(sim.config.gravity), sim.robot.root_link
    data = sim.model.createData()
    pin.centerOfMass(sim.model, data, sim.q, sim.v)
    v0 = data.vcom[0].copy()
    f_base = np.array([60.0, 0.0, 0.0])  # N, base frame: forward
    sim.apply_external_wrench(base, f_base, duration_s=0.1)
    push = np.zeros(3)
    ground = np.zeros(3)
    for _ in range(100):
        push += sim.frame_pose(base).rotation @ f_base * sim.dt  # turns with the base
        sim.step(tau())
        ground += sim.contact_points_state().force.sum(axis=0) * sim.dt
    pin.centerOfMass(sim.model, data, sim.q, sim.v)
    dv = data.vcom[0] - v0
    impulse = push + ground + m * g * 0.1
    assert np.linalg.norm(m * dv - impulse) < 1e-3 * np.linalg.norm(push)
    # forward, and the feet hold part of it back
    assert 0.3 * 6.0 / m < dv[0] < 6.0 / m


def test_push_lasts_its_steps_adds_up_and_reset_removes_it():
    sim = _floating()
    base = sim.robot.root_link
    sim.apply_external_wrench(base, (1.0, 0, 0), duration_s=0.0034)  # rounds to 3 steps
    sim.apply_external_wrench(base, (1.0, 0, 0), duration_s=0.001)
    assert [round(d, 6) for _, _, d in sim.external_wrenches] == [0.003, 0.001]
    sim.step(np.zeros(sim.nj))
    p1, _ = _momentum(sim)
    assert np.allclose(p1[0], 2.0 * sim.dt, rtol=1e-6)  # both pushes in the first step
    sim.step(np.zeros(sim.nj))
    sim.step(np.zeros(sim.nj))
    assert sim.external_wrenches == []
    sim.step(np.zeros(sim.nj))
    p4, _ = _momentum(sim)
    assert np.allclose(p4[0], 4.0 * sim.dt, rtol=1e-6)  # 2 + 1 + 1 step-impulses, then none
    sim.apply_external_wrench(base, (1.0, 0, 0), duration_s=1.0)
    sim.reset()
    assert sim.external_wrenches == []


def test_bad_pushes_are_refused():
    sim = _floating()
    with pytest.raises(ModelError, match="no_such_link"):
        sim.apply_external_wrench("no_such_link", (1.0, 0, 0))
    with pytest.raises(CommandError, match="non-finite"):
        sim.apply_external_wrench(sim.robot.root_link, (np.nan, 0, 0))
    with pytest.raises(CommandError, match="3-vectors"):
        sim.apply_external_wrench(sim.robot.root_link, (1.0, 0))
    with pytest.raises(CommandError, match="duration"):
        sim.apply_external_wrench(sim.robot.root_link, (1.0, 0, 0), duration_s=0.0)
    assert sim.external_wrenches == []
