"""Sensor delay and inertial perturbations are the core's own parameters
(sensors.delay_steps, perturbation.*), so the Python API, campaigns and the ROS
node share them: exact checks of what they change, their errors, and snapshots."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.errors import ConfigError, ModelError


def _torso(sim):
    """(mass, com in the torso's parent joint frame) of the link 'torso' in the URDF."""
    import xml.etree.ElementTree as ET
    link = next(e for e in ET.fromstring(sim.robot.urdf_xml).iter("link")
                if e.get("name") == "torso")
    inertial = link.find("inertial")
    xyz = [float(x) for x in (inertial.find("origin").get("xyz") or "0 0 0").split()] \
        if inertial.find("origin") is not None else [0.0, 0.0, 0.0]
    return float(inertial.find("mass").get("value")), np.array(xyz)


def test_mass_scale_and_com_offset_change_exactly_what_they_say(make_humanoid):
    base = make_humanoid()
    m_torso, _ = _torso(base)
    offset = np.array([0.03, -0.02, 0.05])
    sim = make_humanoid(**{"perturbation.mass_scale_links": ["torso"],
                           "perturbation.mass_scale": [1.5],
                           "perturbation.com_offset_links": ["torso"],
                           "perturbation.com_offset": offset.tolist()})
    assert sim.mass == pytest.approx(base.mass + 0.5 * m_torso, rel=1e-12)
    m_new, _ = _torso(sim)
    assert m_new == pytest.approx(1.5 * m_torso, rel=1e-15)
    # the whole-body centre of mass at the same configuration moves by m' R offset / M'
    # plus the heavier torso's own share: compare with a model built from a hand-edited URDF
    q = base.q0
    com = pin.centerOfMass(sim.model, sim.model.createData(), q)
    data = base.model.createData()
    com0 = pin.centerOfMass(base.model, data, q)
    fid = base.model.getFrameId("torso")
    pin.updateFramePlacements(base.model, data)
    R = data.oMf[fid].rotation
    _, c_torso = _torso(base)
    p_torso = data.oMf[fid].act(c_torso)
    expected = (base.mass * com0 + 0.5 * m_torso * p_torso + 1.5 * m_torso * (R @ offset)) \
        / sim.mass
    np.testing.assert_allclose(com, expected, atol=1e-12)
    # the rotational inertia scales with the mass: the torso joint's spatial inertia
    # changes by 0.5 x the torso's (compare the mass matrices at q)
    M0, M1 = pin.crba(base.model, base.model.createData(), q), pin.crba(sim.model, sim.model.createData(), q)
    assert not np.allclose(M0, M1)


@pytest.mark.parametrize("params, error, fragment", [
    ({"perturbation.mass_scale_links": ["torsoo"], "perturbation.mass_scale": [1.2]},
     ModelError, "no link 'torsoo'"),
    ({"perturbation.mass_scale_links": ["torso"], "perturbation.mass_scale": [1.2, 1.0]},
     ConfigError, "perturbation.mass_scale"),
    ({"perturbation.mass_scale_links": ["torso"], "perturbation.mass_scale": [0.0]},
     ConfigError, "> 0"),
    ({"perturbation.com_offset_links": ["torso"], "perturbation.com_offset": [0.1, 0.2]},
     ConfigError, "3 numbers"),
    ({"perturbation.com_offset_links": ["imu_link"], "perturbation.com_offset": [0, 0, 0.1]},
     ModelError, "no <inertial>"),
    ({"sensors.delay_steps": -1}, ConfigError, "sensors.delay_steps"),
    ({"sensors.delay_steps": 10**6}, ConfigError, "sensors.delay_steps"),
])
def test_bad_perturbations_are_refused_naming_the_parameter(make_humanoid, params, error,
                                                            fragment):
    with pytest.raises(error, match=fragment.replace("(", r"\(").replace("[", r"\[")):
        make_humanoid(**params)


def test_sensed_readings_are_those_of_n_steps_ago(make_humanoid, shipped_controller):
    n = 3
    noisy = {"imu.angular_velocity_noise_std": 0.01, "imu.linear_acceleration_noise_std": 0.1}
    sim = make_humanoid(**{"sensors.delay_steps": n, **noisy})
    ref = make_humanoid(**noisy)  # the same run without delay: its readings, step by step
    ctrl = shipped_controller(ref)
    truth = [(ref.state, ref.imu(), ref.contact_wrench_array())]
    for k in range(40):
        st = ref.state
        tau = ctrl(st.q, st.joint_positions, st.joint_velocities)
        ref.step(tau)
        sim.step(tau)
        truth.append((ref.state, ref.imu(), ref.contact_wrench_array()))
        np.testing.assert_array_equal(sim.q, ref.q)  # the delay changes readings only
        old = truth[max(0, k + 1 - n)]
        s = sim.sensed_state
        assert s.t == pytest.approx(max(0.0, (k + 1 - n) * sim.dt))
        np.testing.assert_array_equal(s.q, old[0].q)
        np.testing.assert_array_equal(s.joint_velocities, old[0].joint_velocities)
        np.testing.assert_array_equal(sim.sensed_imu().linear_acceleration,
                                      old[1].linear_acceleration)
        np.testing.assert_array_equal(sim.sensed_contact_wrench_array(), old[2])
    # no delay: the sensed readings are the current ones
    np.testing.assert_array_equal(ref.sensed_state.q, ref.q)
    np.testing.assert_array_equal(ref.sensed_imu().angular_velocity, ref.imu().angular_velocity)


def test_a_snapshot_carries_the_readings_still_in_the_pipe(make_humanoid):
    sim = make_humanoid(**{"sensors.delay_steps": 5})
    for _ in range(20):
        sim.step(np.zeros(sim.nj))
    snap = sim.get_state()
    ahead = []
    for _ in range(8):
        sim.step(np.zeros(sim.nj))
        ahead.append(sim.sensed_state.q.copy())
    sim.set_state(snap)
    for expected in ahead:
        sim.step(np.zeros(sim.nj))
        np.testing.assert_array_equal(sim.sensed_state.q, expected)
    with pytest.raises(wb_sim.CommandError, match="sensor"):
        make_humanoid(**{"sensors.delay_steps": 4}).set_state(snap)
