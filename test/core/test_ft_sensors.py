"""Force-torque sensors (parameters ft_sensors.*, the URDF's Gazebo sensors) against statics
and against pinocchio's RNEA computed here, independently of wb_sim's code: a model parsed
afresh from the URDF with pinocchio's own free-flyer (the API's coordinates), the step's
acceleration rebuilt from the velocities before and after it, the contact forces from the
readings.

Figures when written: the humanoid standing 10 s, its left ankle's reading equals the foot's
contact wrench moved to the ankle plus the foot's weight to 2.8e-8 of the load (the rest is the
foot's residual motion, which the statics leave out); a massless sole's fixed joint reads minus
the contact wrench to 3e-14 N; over 50 steps of a 60 N push four joints' readings equal RNEA's
data.f to 3.3e-16 of the weight; iCub's hip and foot sensors (URDF fixed joints inside bodies)
equal RNEA's data.f of the same URDF with those joints made revolute to 1.0e-16 of the weight.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.errors import ConfigError, ModelError

from helpers.extras import require_robot_data
from helpers.robots import make_humanoid, shipped_controller

from core.test_payloads import with_payload_link

G = np.array([0.0, 0.0, -9.81])


def stand(sim, seconds, robot="humanoid"):
    ctrl = shipped_controller(sim, robot)
    for _ in range(int(round(seconds / sim.dt))):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
    return ctrl


def test_ankle_in_statics_reads_the_contact_wrench_and_the_foot_weight():
    sim = make_humanoid(**{"ft_sensors.names": ["ankle", "ankle_c2p", "pitch", "pitch_parent",
                                                "sole"],
                           "ft_sensors.joints": ["l_ankle_roll", "l_ankle_roll", "l_ankle_pitch",
                                                 "l_ankle_pitch", "l_sole_joint"],
                           "ft_sensors.frames": ["child", "child", "child", "parent", "child"],
                           "ft_sensors.directions": ["parent_to_child", "child_to_parent",
                                                     "parent_to_child", "parent_to_child",
                                                     "parent_to_child"]})
    stand(sim, 10.0)
    ft = sim.ft_wrenches
    model = pin.buildModelFromXML(sim.robot.urdf_xml, pin.JointModelFreeFlyer())
    data = model.createData()
    pin.framesForwardKinematics(model, data, sim.get_state().q_prev)  # the step's start
    j = model.getJointId("l_ankle_roll")
    oMj, oMs = data.oMi[j], data.oMf[model.getFrameId("l_sole")]
    cw = sim.contact_wrenches()["left_foot"]
    contact = oMj.actInv(oMs.act(pin.Force(cw.force, cw.torque)))
    foot = model.inertias[j]  # l_foot with l_sole (massless), in the ankle's frame
    weight = foot.mass * oMj.rotation.T @ G
    expected = (contact + pin.Force(weight, np.cross(foot.lever, weight))).vector  # child on parent
    load = abs(expected[2])
    assert load > 100.0
    c2p = np.concatenate([ft["ankle_c2p"].force, ft["ankle_c2p"].torque])
    p2c = np.concatenate([ft["ankle"].force, ft["ankle"].torque])
    assert np.abs(c2p - expected).max() < 1e-6 * load
    assert np.array_equal(p2c, -c2p)
    # the parent side's frame: the joint's origin on the shank, turned back by the joint
    jp = model.getJointId("l_ankle_pitch")
    oMp = data.oMi[model.parents[jp]] * model.jointPlacements[jp]
    child = np.concatenate([ft["pitch"].force, ft["pitch"].torque])
    parent = oMp.actInv(data.oMi[jp].act(pin.Force(child))).vector
    got = np.concatenate([ft["pitch_parent"].force, ft["pitch_parent"].torque])
    assert np.abs(got - parent).max() < 1e-9 * load
    assert np.abs(got - child).max() > 10.0  # the ankle is bent 0.3 rad: the frames differ
    # a massless link's fixed joint: the parent holds exactly the contact
    sole = np.concatenate([ft["sole"].force, ft["sole"].torque])
    assert np.abs(sole + np.concatenate([cw.force, cw.torque])).max() < 1e-9 * load
    assert ft["ankle"].link == "l_foot" and ft["sole"].link == "l_sole"


def _step_acceleration(q0, v0, q1, v1, dt):
    """The step's mean acceleration in pinocchio's free-flyer coordinates, from the states
    before and after it (the base's linear velocity is integrated in world axes)."""
    R0, R1 = pin.Quaternion(q0[3:7]).matrix(), pin.Quaternion(q1[3:7]).matrix()
    a = (v1 - v0) / dt
    a_world = (R1 @ v1[:3] - R0 @ v0[:3]) / dt
    a[:3] = R0.T @ a_world - np.cross(v0[3:6], v0[:3])
    return a


def reference_wrenches(sim, model, q0, v0, a, pushes, joints):
    """RNEA's data.f of ``joints`` in ``model`` (free-flyer, the API's coordinates) at the
    step's start with the step's acceleration and external forces from the readings."""
    data = model.createData()

    def index(src_model, x, vel):  # sim's layout -> model's, joint by joint (by name)
        out = np.zeros(model.nv if vel else model.nq)
        if not vel:
            out[:] = pin.neutral(model)
        out[:(6 if vel else 7)] = x[:(6 if vel else 7)]
        for jid in range(2, src_model.njoints):
            k = model.getJointId(src_model.names[jid])
            i = src_model.idx_vs[jid] if vel else src_model.idx_qs[jid]
            out[model.idx_vs[k] if vel else model.idx_qs[k]] = x[i]
        return out

    q, v, acc = index(sim.model, q0, False), index(sim.model, v0, True), index(sim.model, a, True)
    pin.framesForwardKinematics(model, data, q)
    fext = [pin.Force.Zero() for _ in range(model.njoints)]

    def add(link, position, force):
        jid = model.frames[model.getFrameId(link)].parentJoint
        fext[jid] += data.oMi[jid].actInv(pin.Force(force, np.cross(position, force)))

    surface_frame = {s.name: s.frame for s in sim.config.surfaces}
    cp = sim.contact_points_state()
    for name, p, f in zip(cp.surface, cp.position, cp.force):
        add(surface_frame[name], p, f)
    col = sim.collision_points_state()
    for link, p, f in zip(col.surface, col.position, col.force):
        add(link, p, f)
    for link, w in pushes:
        frame = model.frames[model.getFrameId(link)]
        fext[frame.parentJoint] += frame.placement.act(pin.Force(np.asarray(w)))
    pin.rnea(model, data, q, v, acc, pin.StdVec_Force(fext))
    return {name: data.f[model.getJointId(name)].vector.copy() for name in joints}


def _pushed_step(sim, ctrl, link, wrench):
    q0, v0 = sim.q.copy(), sim.v.copy()
    sim.apply_external_wrench(link, wrench[:3], wrench[3:])
    st = sim.state
    sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
    return q0, v0, _step_acceleration(q0, v0, sim.q, sim.v, sim.dt)


def test_ankle_in_a_push_equals_rnea_of_the_same_step():
    joints = ["l_ankle_roll", "r_knee", "l_hip_yaw", "torso_yaw"]
    sim = make_humanoid(**{"ft_sensors.names": joints, "ft_sensors.joints": joints})
    ctrl = stand(sim, 1.0)
    model = pin.buildModelFromXML(sim.robot.urdf_xml, pin.JointModelFreeFlyer())
    wrench = np.array([60.0, -20.0, 0.0, 0.0, 0.0, 5.0])
    worst = 0.0
    for _ in range(50):
        q0, v0, a = _pushed_step(sim, ctrl, "pelvis", wrench)
        ref = reference_wrenches(sim, model, q0, v0, a, [("pelvis", wrench)], joints)
        got = sim.ft_wrench_array()
        for i, name in enumerate(joints):
            worst = max(worst, float(np.abs(got[i] - ref[name]).max()))
    assert np.abs(sim.v).max() > 0.05  # it was pushed
    assert worst < 1e-12 * sim.mass * 9.81


@pytest.mark.parametrize("payload", [False, True])
def test_a_fixed_joint_inside_a_body_equals_rnea_with_that_joint_made_movable(payload):
    require_robot_data("icub")
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("icub"), overrides={
        "ft_sensors.names": ["hip", "foot"], "ft_sensors.from_urdf": False,
        "ft_sensors.joints": ["l_leg_ft_sensor", "l_foot_ft_sensor"]})
    xml = sim.robot.urdf_xml
    if payload:  # on l_foot: beyond the foot's sensor, in the body it cuts
        inertia = np.array([[0.004, 0.0002, 0.0], [0.0002, 0.003, 0.0], [0.0, 0.0, 0.002]])
        sim.attach_payload("l_foot", 1.5, (0.03, 0.0, -0.02), inertia)
        xml = with_payload_link(xml, "l_foot", 1.5, (0.03, 0.0, -0.02), inertia)
    ctrl = stand(sim, 0.3, robot="icub")
    for joint in ("l_leg_ft_sensor", "l_foot_ft_sensor"):
        a = xml.index(f'<joint name="{joint}" type="fixed"')
        b = xml.index(">", a)
        xml = (xml[:a] + f'<joint name="{joint}" type="revolute"><axis xyz="1 0 0"/>'
               f'<limit lower="-1" upper="1" effort="1" velocity="1"/' + xml[b:])
    model = pin.buildModelFromXML(xml, pin.JointModelFreeFlyer())
    assert model.njoints == sim.model.njoints + 2
    wrench = np.array([30.0, 10.0, 0.0, 0.0, 0.0, 0.0])
    for _ in range(20):
        q0, v0, a = _pushed_step(sim, ctrl, "root_link", wrench)
    ref = reference_wrenches(sim, model, q0, v0, a, [("root_link", wrench)],
                             ["l_leg_ft_sensor", "l_foot_ft_sensor"])
    got = sim.ft_wrench_array()
    load = sim.mass * 9.81
    assert np.abs(got[0] - ref["l_leg_ft_sensor"]).max() < 1e-12 * load
    assert np.abs(got[1] - ref["l_foot_ft_sensor"]).max() < 1e-12 * load
    assert abs(got[1][2]) > 0.3 * load  # the foot's sensor carries its share


def test_the_urdf_gazebo_sensors_are_read():
    require_robot_data("icub")
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("icub"), overrides={
        "ft_sensors.names": ["mine"], "ft_sensors.joints": ["l_foot_ft_sensor"]})
    names = sim.ft_sensors.names
    assert names == ("mine", "l_leg_ft", "r_leg_ft", "l_foot_ft", "r_foot_ft", "l_arm_ft",
                     "r_arm_ft")
    stand(sim, 0.2, robot="icub")
    ft = sim.ft_wrenches
    gz = ft["l_foot_ft"]
    assert gz.direction == "child_to_parent" and gz.frame == "sensor"
    # the URDF's sensor pose is the identity to 2e-16: child_to_parent is the opposite
    assert np.abs(gz.force + ft["mine"].force).max() < 1e-12 * sim.mass * 9.81
    assert np.abs(gz.force).max() > 1.0


def test_noise_and_bias_are_seeded_and_part_of_the_snapshot():
    params = {"ft_sensors.names": ["a", "b"], "ft_sensors.joints": ["l_ankle_roll", "r_knee"],
              "ft_sensors.force_noise_std": 2.0, "ft_sensors.torque_noise_std": 0.1,
              "ft_sensors.force_bias": [1.0, 0.0, 0.0, 0.0, 0.0, -3.0],
              "ft_sensors.seed": 7}
    noisy, clean = make_humanoid(**params), make_humanoid(**{
        k: v for k, v in params.items() if "noise" not in k and "bias" not in k})
    twin = make_humanoid(**params)
    ctrl = shipped_controller(noisy)
    diffs, snap, after = [], None, []
    for k in range(1000):
        for s in (noisy, clean, twin):
            st = s.state
            s.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        diffs.append(noisy.ft_wrench_array() - clean.ft_wrench_array())
        assert np.array_equal(noisy.ft_wrench_array(), twin.ft_wrench_array())
        if k == 500:
            snap = noisy.get_state()
        if k > 500:
            after.append(noisy.ft_wrench_array())
    d = np.array(diffs)  # (steps, 2, 6)
    assert d[:, 0, :3].mean(axis=0) == pytest.approx([1.0, 0.0, 0.0], abs=0.15)
    assert d[:, 1, 2].mean() == pytest.approx(-3.0, abs=0.15)
    d -= d.mean(axis=0)
    assert d[:, :, :3].std() == pytest.approx(2.0, rel=0.05)
    assert d[:, :, 3:].std() == pytest.approx(0.1, rel=0.05)
    noisy.set_state(snap)
    again = []
    for _ in range(len(after)):
        st = noisy.state
        noisy.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        again.append(noisy.ft_wrench_array())
    assert np.array_equal(np.array(again), np.array(after))
    other = make_humanoid(**{**params, "ft_sensors.seed": 8})
    other.step(np.zeros(other.nj))
    noisy.reset()
    noisy.step(np.zeros(noisy.nj))
    assert not np.array_equal(other.ft_wrench_array(), noisy.ft_wrench_array())


def test_bad_sensors_are_typed_errors():
    with pytest.raises(ModelError, match="did you mean 'l_ankle_roll'"):
        make_humanoid(**{"ft_sensors.names": ["a"], "ft_sensors.joints": ["l_ankle_rol"]})
    with pytest.raises(ConfigError, match="ft_sensors.frames"):
        make_humanoid(**{"ft_sensors.names": ["a"], "ft_sensors.joints": ["l_ankle_roll"],
                         "ft_sensors.frames": ["world"]})
    with pytest.raises(ConfigError, match="ft_sensors.joints"):
        make_humanoid(**{"ft_sensors.names": ["a", "b"], "ft_sensors.joints": ["l_ankle_roll"]})
    assert make_humanoid().ft_wrenches == {}
    assert dataclasses.is_dataclass(wb_sim.WrenchReading)
