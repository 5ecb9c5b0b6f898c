"""Simulator.set_base_state: a floating base moved now (the ROS SetEntityState of
simulation_interfaces builds on it): the state reads back exactly, the joints
and time stay, and the simulation continues deterministically."""

from __future__ import annotations

import numpy as np
import pytest

import wb_sim

from helpers.extras import require_robot_data


def test_set_base_state_reads_back_exactly_and_continues_deterministically(make_humanoid):
    sim, twin = make_humanoid(), make_humanoid()
    for s in (sim, twin):
        for _ in range(100):
            s.step(np.zeros(s.nj))
    joints, t = sim.joint_positions.copy(), sim.t
    quat = np.array([0.0, 0.0, np.sin(0.3), np.cos(0.3)])  # 0.6 rad of yaw
    for s in (sim, twin):
        s.set_base_state(position=[0.5, -0.2, 0.9], quaternion=quat,
                         linear_velocity=[0.1, 0.0, 0.2], angular_velocity=[0.0, 0.3, 0.0])
    st = sim.state
    np.testing.assert_allclose(st.base_position, [0.5, -0.2, 0.9], atol=0)
    np.testing.assert_allclose(st.base_quaternion, quat, atol=1e-15)
    np.testing.assert_allclose(st.base_linear_velocity, [0.1, 0.0, 0.2], atol=1e-15)
    np.testing.assert_allclose(st.base_angular_velocity, [0.0, 0.3, 0.0], atol=1e-15)
    np.testing.assert_array_equal(sim.joint_positions, joints)
    assert sim.t == t
    for _ in range(200):
        sim.step(np.zeros(sim.nj))
        twin.step(np.zeros(twin.nj))
    np.testing.assert_array_equal(sim.q, twin.q)
    # in the air 0.2 s, nothing touching: the base falls as a free body would
    assert sim.q[2] < 0.9


def test_turning_the_base_keeps_its_world_velocity(make_humanoid):
    sim = make_humanoid()
    sim.set_base_state(position=[0.0, 0.0, 2.0], linear_velocity=[1.0, 0.0, 0.0],
                       angular_velocity=[0.0, 0.0, 0.5])
    sim.set_base_state(quaternion=[0.0, 0.0, 1.0, 0.0])  # 180 deg yaw
    st = sim.state
    np.testing.assert_allclose(st.base_linear_velocity, [1.0, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(st.base_angular_velocity, [0.0, 0.0, 0.5], atol=1e-12)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"quaternion": [0.0, 0.0, 0.0, 0.0]}, "quaternion is zero"),
    ({"position": [0.0, np.nan, 1.0]}, "non-finite"),
    ({"linear_velocity": [1.0, 2.0]}, "shape"),
])
def test_bad_base_states_are_refused_and_change_nothing(make_humanoid, kwargs, fragment):
    sim = make_humanoid()
    q = sim.q.copy()
    with pytest.raises(wb_sim.CommandError, match=fragment):
        sim.set_base_state(**kwargs)
    np.testing.assert_array_equal(sim.q, q)


def test_a_fixed_base_cannot_be_moved():
    require_robot_data("panda")
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("panda"))
    with pytest.raises(wb_sim.CommandError, match="fixed base"):
        sim.set_base_state(position=[0.0, 0.0, 1.0])
