"""The force-torque and contact sensors' ROS pieces, without a process or DDS traffic.

* :func:`wb_sim.ros.frames.ft_sensor_frames`: three sensors on the humanoid's left knee, in
  its 'child', 'parent' and 'sensor' frames (a Gazebo sensor with a pose written into the
  URDF): each reading moved to the world through its frame's TF chain (the node's ``/tf``
  and ``/tf_static`` transforms, composed here) is one and the same wrench, and equals
  pinocchio's RNEA transmitted wrench ``data.f`` of the knee moved to the world with
  ``oMi`` (a frame off by its offset or rotation would move the torque); a sensor named as a
  link gets ``<name>_frame`` and a note.
* :class:`wb_sim.ros.conversions.ContactSensorsMessage`: the layout (stamp, then one
  labelled row per sensor) round-trips bit for bit.

Needs the message packages, not a running ROS graph; skipped without them unless
``WB_SIM_REQUIRE_ROS=1``.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from helpers import PKG
from helpers.extras import require_ros

require_ros("std_msgs", "geometry_msgs")

import wb_sim  # noqa: E402
from wb_sim.errors import ConfigError  # noqa: E402
from wb_sim.ros import conversions as cv  # noqa: E402
from wb_sim.ros.frames import FrameTree, ft_sensor_frames  # noqa: E402

POSE = "0.01 0.02 -0.03 0.1 0.2 0.3"
GAZEBO = f"""<gazebo reference="l_knee"><sensor type="force_torque" name="knee_sensor">
<pose>{POSE}</pose><force_torque><frame>sensor</frame>
<measure_direction>parent_to_child</measure_direction></force_torque></sensor></gazebo>
</robot>"""


def _sim(tmp_path, **overrides):
    text = (PKG / "urdf" / "humanoid.urdf").read_text()
    urdf = tmp_path / "humanoid_ft.urdf"
    urdf.write_text(text.replace("</robot>", GAZEBO))
    return wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
        "urdf_path": str(urdf), "collision.srdf_path": str(PKG / "urdf" / "humanoid.srdf"),
        **overrides})


def _world(chain: dict, frame: str) -> pin.SE3:
    M = pin.SE3.Identity()
    while frame in chain:
        parent, T = chain[frame]
        M = T * M
        frame = parent
    return M


def _se3(t) -> pin.SE3:
    x, y, z, w = t.rotation
    return pin.SE3(pin.Quaternion(w, x, y, z).toRotationMatrix(), np.array(t.translation))


def test_each_sensors_frame_in_tf_carries_the_transmitted_wrench(tmp_path):
    sim = _sim(tmp_path, **{"ft_sensors.names": ["knee_child", "knee_parent"],
                            "ft_sensors.joints": ["l_knee", "l_knee"],
                            "ft_sensors.frames": ["child", "parent"]})
    assert sim.ft_sensors.names == ("knee_child", "knee_parent", "knee_sensor")
    ids, static, notes = ft_sensor_frames(sim.ft_sensors, sim.robot.urdf_xml, {"world"})
    assert ids == ["l_shank", "knee_parent", "knee_sensor"] and not notes
    assert [(t.parent, t.child) for t in static] == [("l_thigh", "knee_parent"),
                                                     ("l_shank", "knee_sensor")]
    rng = np.random.default_rng(3)
    for _ in range(30):  # moving, the knee bending: the frames' rotations differ
        sim.step(rng.normal(0.0, 20.0, sim.nj))
    # the readings are of the step just taken, at its starting state: its joint positions
    # (the stepping coordinates' base takes 7 numbers, as the API's)
    qj = np.array(sim._s.q_prev[7:])
    tree = FrameTree(sim.robot, "world", pin.SE3.Identity())
    q = np.concatenate([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], qj])  # the base at the origin
    chain = {t.child: (t.parent, _se3(t)) for t in
             tree.moving_transforms(q) + tree.static_transforms() + static}
    readings = sim.ft_wrench_array()
    world = [_world(chain, f).act(pin.Force(w)).vector for f, w in zip(ids, readings)]
    # pinocchio, independently: the knee's joint frame (the child side's) at the same q
    model, data = sim.robot.model, sim.robot.model.createData()
    pin.forwardKinematics(model, data, q)
    knee = data.oMi[model.getJointId("l_knee")].act(pin.Force(readings[0])).vector
    scale = np.abs(knee).max()
    assert scale > 1.0
    for w in world:
        np.testing.assert_allclose(w, knee, rtol=0, atol=1e-9 * scale)
    # the three readings differ in their own frames (else the test could not fail)
    assert np.abs(readings[1] - readings[0]).max() > 1e-3 * scale
    assert np.abs(readings[2] - readings[0]).max() > 1e-3 * scale


def test_a_sensor_named_as_a_link_gets_a_frame_of_its_own(tmp_path):
    sim = _sim(tmp_path, **{"ft_sensors.names": ["l_shank", "l_foot_ft"],
                            "ft_sensors.joints": ["l_knee", "l_sole_joint"],
                            "ft_sensors.frames": ["parent", "parent"]})
    ids, static, notes = ft_sensor_frames(sim.ft_sensors, sim.robot.urdf_xml, {"world"})
    # a fixed joint's parent frame is its child frame: the sole, no new frame
    assert ids == ["l_shank_frame", "l_sole", "knee_sensor"]
    assert [t.child for t in static] == ["l_shank_frame", "knee_sensor"]
    assert len(notes) == 1 and "'l_shank_frame'" in notes[0]
    with pytest.raises(ConfigError, match="l_shank.*rename"):
        ft_sensor_frames(sim.ft_sensors, sim.robot.urdf_xml, {"world", "l_shank_frame"})


def test_the_contact_sensors_message_round_trips():
    names = ("left_foot", "right_foot", "pelvis")
    readings = np.array([[60.123456789, 1.0, 1.0], [0.5, 0.0, 1.0], [0.0, 0.0, 0.0]])
    make = cv.ContactSensorsMessage(names)
    msg = make(12 * 10**9 + 345, readings)
    assert [(d.label, d.size, d.stride) for d in msg.layout.dim] == [
        ("stamp", 1, 2), ("left_foot", 1, 3), ("right_foot", 1, 3), ("pelvis", 1, 3)]
    t_ns, got = cv.read_contact_sensors(msg)
    assert t_ns == 12 * 10**9 + 345
    assert list(got) == list(names)
    for name, row in zip(names, readings):
        assert np.array_equal(got[name], row)
