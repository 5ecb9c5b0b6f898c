"""State snapshots: Simulator.get_state() / set_state() capture everything that
determines the future, so a restored run continues bit-identically, with either
contact model, pushes in flight, a noisy IMU and slipping feet."""

from __future__ import annotations

import numpy as np
import pytest

import wb_sim
from wb_sim.controllers import PDGravityController

from helpers.extras import require_robot_data

BASE = "pelvis"  #: the humanoid's root link


def _trajectory(sim, ctrl, steps, rng):
    out = []
    for k in range(steps):
        st = sim.state
        tau = ctrl(st.q, st.joint_positions, st.joint_velocities) + rng.normal(0, 2, sim.nj)
        if k == 5:
            sim.apply_external_wrench(BASE, force=[40.0, 10.0, 0.0], duration_s=0.02)
        sim.step(tau)
        readings = [sim.q, sim.v, sim.contact_wrench_array().ravel(),
                    sim.contact_points_state().depth]
        if sim.imu_sensor is not None:
            r = sim.imu()
            readings += [r.angular_velocity, r.linear_acceleration]
        out.append(np.concatenate(readings))
    return np.array(out)


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_restoring_a_snapshot_continues_bit_identically(model, make_humanoid):
    noisy = {"contact.model": model, "imu.angular_velocity_noise_std": 0.01,
             "imu.linear_acceleration_noise_std": 0.05, "contact.friction_coefficient": 0.3}
    sim = make_humanoid(**noisy)
    ctrl = PDGravityController(sim.robot, sim.state.joint_positions, 200.0, 5.0)
    for _ in range(300):  # land and settle
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
    snap = sim.get_state()
    assert snap.t == pytest.approx(0.3)
    first = _trajectory(sim, ctrl, 200, np.random.default_rng(1))
    # continue elsewhere, reset, then come back: the same future, to the bit
    _trajectory(sim, ctrl, 50, np.random.default_rng(9))
    sim.reset()
    sim.set_state(snap)
    assert sim.t == pytest.approx(0.3)
    again = _trajectory(sim, ctrl, 200, np.random.default_rng(1))
    assert np.array_equal(first, again)
    # a second simulator built from the same configuration takes the snapshot too
    twin = make_humanoid(**noisy)
    twin.set_state(snap)
    assert np.array_equal(_trajectory(twin, ctrl, 200, np.random.default_rng(1)), first)


def test_a_snapshot_keeps_the_slip_warm_start(make_humanoid):
    """Mid-slide (feet slipping on mu 0.05 under a push), the snapshot still
    continues bit-identically: the compliant model's slip directions are in it."""
    sim = make_humanoid(**{"contact.friction_coefficient": 0.05})
    ctrl = PDGravityController(sim.robot, sim.state.joint_positions, 200.0, 5.0)
    for k in range(400):
        if k >= 300:
            sim.apply_external_wrench(BASE, force=[80.0, 0.0, 0.0])
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
    assert "slip" in sim.contact_points_state().status
    snap = sim.get_state()
    first = _trajectory(sim, ctrl, 100, np.random.default_rng(2))
    sim.set_state(snap)
    assert np.array_equal(_trajectory(sim, ctrl, 100, np.random.default_rng(2)), first)


def test_readings_are_those_of_the_state_after_a_query_or_a_restore(humanoid):
    """forward_dynamics at another state leaves the contact readings alone, and
    set_state brings back the readings of the snapshot's last step."""
    sim = humanoid
    ctrl = PDGravityController(sim.robot, sim.state.joint_positions, 200.0, 5.0)
    for _ in range(200):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
    before = sim.contact_points_state()
    W = sim.contact_wrench_array()
    q = np.array(sim.q)
    q[2] -= 0.01  # deeper: other forces there
    sim.forward_dynamics(np.zeros(sim.nj), q=q)
    after = sim.contact_points_state()
    assert np.array_equal(before.force, after.force) and before.status == after.status
    assert np.array_equal(before.position, after.position)
    assert np.array_equal(W, sim.contact_wrench_array())
    snap = sim.get_state()
    for _ in range(50):
        sim.step(np.zeros(sim.nj))
    sim.set_state(snap)
    assert np.array_equal(sim.contact_wrench_array(), W)
    assert np.array_equal(sim.contact_points_state().depth, before.depth)


def test_set_state_refuses_a_foreign_snapshot(humanoid):
    require_robot_data("anymal")
    sim = humanoid
    other = wb_sim.Simulator.from_yaml(wb_sim.config_path("anymal"))
    q = sim.q.copy()
    with pytest.raises(wb_sim.CommandError, match="another robot"):
        sim.set_state(other.get_state())
    with pytest.raises(wb_sim.CommandError, match="SimState"):
        sim.set_state({"q": q})
    assert np.array_equal(sim.q, q)
