"""Force-torque sensors, contact sensors and payloads through the node, over real DDS.

The node starts from a parameters file (the humanoid's, plus two force-torque sensors, the
contact sensors with a 5 ms debounce and a 2 kg payload on the torso) in lockstep; this
test's controller answers each joint state with efforts (a stiff spring to the zero posture
plus seeded noise). The core, built from the same file, driven by the same law from its own
states:

* the joint states (positions, velocities, applied efforts) equal the core's bit for bit at
  every cycle: the payload of the parameters file is the core's (a core without it ends
  elsewhere: the test could fail);
* every ``ft/<sensor>`` WrenchStamped equals the core's ``ft_wrench_array()`` row after the
  same steps bit for bit, its ``header.frame_id`` is a frame of TF (the child link on
  ``/tf``; the 'parent' frame on ``/tf_static`` at the URDF joint's origin);
* every ``contact_sensors`` message equals the core's ``contact_sensor_array()`` bit for
  bit, the debounce visible (raw on, debounced still off, at touch-down).

Skipped without rclpy unless ``WB_SIM_REQUIRE_ROS=1``.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from helpers.extras import require_ros

require_ros("sensor_msgs.msg", "geometry_msgs.msg", "std_msgs.msg", "tf2_msgs.msg")

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

import wb_sim  # noqa: E402
from helpers.ros import HUMANOID_YAML, LockstepController, SimSetup, stamp_ns  # noqa: E402
from wb_sim.ros.conversions import read_contact_sensors  # noqa: E402

STATE_QOS = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
CYCLES = 120
SENSORS = ("l_ankle_ft", "r_knee_ft")
EXTRA = {
    "ft_sensors": {"names": list(SENSORS), "joints": ["l_ankle_roll", "r_knee"],
                   "frames": ["child", "parent"],
                   "directions": ["parent_to_child", "child_to_parent"]},
    "contact_sensors": {"active": True, "threshold": 1.0, "t_on": 0.005, "t_off": 0.0},
    "payloads": {"names": ["box"], "links": ["torso"], "mass": [2.0],
                 "com": [0.05, 0.0, 0.1], "inertia": [0.01, 0.0, 0.0, 0.02, 0.0, 0.015]},
}
EFFORTS = np.random.default_rng(29).normal(0.0, 5.0, (CYCLES + 1, 64))


def _law(i, qj, vj, q):
    return {"effort": -80.0 * qj - 3.0 * vj + EFFORTS[i, :len(qj)]}


@pytest.fixture(scope="module")
def params_file(tmp_path_factory):
    doc = yaml.safe_load(HUMANOID_YAML.read_text())
    doc["wb_sim"]["ros__parameters"].update(EXTRA)
    path = tmp_path_factory.mktemp("sensors_params") / "humanoid_sensors.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory, params_file):
    """The lockstep run: (its states and stamps, the messages by topic and stamp, /tf_static,
    the child frames seen on /tf)."""
    s = SimSetup(tmp_path_factory.mktemp("sensors_ros"), "sync.mode:=lockstep",
                 "real_time_factor:=0.0", "sync.timeout_s:=0.0", params_file=params_file)
    try:
        ros = s.ros
        ft = {n: ros.record(WrenchStamped, f"ft/{n}", STATE_QOS) for n in SENSORS}
        cs = ros.record(Float64MultiArray, "contact_sensors", STATE_QOS)
        static = ros.record(TFMessage, "/tf_static", LATCHED_QOS)
        tf = ros.record(TFMessage, "/tf", QoSProfile(depth=100,
                                                     reliability=ReliabilityPolicy.RELIABLE))
        ros.spin_for(0.5)  # the node sees the subscribers (it looks every 50 ms)
        ctl = LockstepController(s, _law, CYCLES)
        states = ctl.run(s)
        stamps = ctl.stamps[:len(states)]
        ros.spin_until(lambda: all(stamps[-1] in {stamp_ns(m) for m in r.msgs}
                                   for r in ft.values()), 10.0)
        ros.spin_until(lambda: stamps[-1] in {read_contact_sensors(m)[0] for m in cs.msgs}, 10.0)
        ros.spin_until(lambda: bool(static.msgs) and bool(tf.msgs), 10.0)
        out = {"states": states, "stamps": stamps,
               "ft": {n: {stamp_ns(m): m for m in r.msgs} for n, r in ft.items()},
               "contact": {read_contact_sensors(m)[0]: read_contact_sensors(m)[1]
                           for m in cs.msgs},
               "static": [t for m in static.msgs for t in m.transforms],
               "tf_children": {t.child_frame_id for m in tf.msgs for t in m.transforms},
               "log": s.describe()}
        ros.stop_recording(*ft.values(), cs, static, tf)
    finally:
        s.close()
    return out


def _core(params_file, **overrides):
    return wb_sim.Simulator.from_yaml(params_file, overrides=overrides or None)


def test_joint_states_with_the_payload_equal_the_cores(run, params_file):
    core = _core(params_file)
    assert [p.name for p in core.payloads] == ["box"] and core.payloads[0].mass == 2.0
    bare = _core(params_file, **{"payloads.names": [], "payloads.links": [],
                                 "payloads.mass": [], "payloads.com": [],
                                 "payloads.inertia": []})
    for i, (qj, vj, effort, *_) in enumerate(run["states"]):
        assert np.array_equal(qj, core.joint_positions), i
        assert np.array_equal(vj, core.joint_velocities), i
        if i:
            assert np.array_equal(effort, core.applied_torques), i
        if i < CYCLES:
            core.step(_law(i, core.joint_positions, core.joint_velocities, core.q)["effort"])
            bare.step(_law(i, bare.joint_positions, bare.joint_velocities, bare.q)["effort"])
    # without the payload the run ends elsewhere
    assert np.abs(run["states"][-1][0] - bare.joint_positions).max() > 1e-6


def test_ft_wrenches_equal_the_cores_in_frames_of_tf(run, params_file):
    core = _core(params_file)
    assert core.ft_sensors.names == SENSORS
    compared = 0
    for i, t in enumerate(run["stamps"]):
        if i:  # the wrench of the step that led to this state
            want = core.ft_wrench_array()
            for k, name in enumerate(SENSORS):
                msg = run["ft"][name].get(t)
                assert msg is not None, (name, i)
                w = msg.wrench
                got = np.array([w.force.x, w.force.y, w.force.z,
                                w.torque.x, w.torque.y, w.torque.z])
                assert np.array_equal(got, want[k]), (name, i, got, want[k])
                compared += 1
        if i < CYCLES:
            core.step(_law(i, core.joint_positions, core.joint_velocities, core.q)["effort"])
    assert compared == 2 * CYCLES
    assert np.abs(want[0][:3]).max() > 1.0  # the ankle carries the robot
    frames = {name: next(iter(run["ft"][name].values())).header.frame_id for name in SENSORS}
    # the ankle's child frame is the foot link, moving on /tf; the knee's parent frame a
    # static one at the URDF joint's origin in the thigh
    assert frames == {"l_ankle_ft": "l_foot", "r_knee_ft": "r_knee_ft"}
    assert "l_foot" in run["tf_children"]
    knee = [t for t in run["static"] if t.child_frame_id == "r_knee_ft"]
    assert len(knee) == 1 and knee[0].header.frame_id == "r_thigh"
    origin = core.robot.model.jointPlacements[core.robot.model.getJointId("r_knee")]
    tr = knee[0].transform.translation
    assert np.allclose([tr.x, tr.y, tr.z], origin.translation, rtol=0, atol=1e-12)
    assert np.abs(origin.translation).max() > 0.01  # not the identity


def test_contact_sensors_equal_the_cores(run, params_file):
    core = _core(params_file)
    names = core.contact_sensors.names
    lag = 0
    for i, t in enumerate(run["stamps"]):
        if i:
            got = run["contact"].get(t)
            assert got is not None, i
            assert list(got) == list(names)
            want = core.contact_sensor_array()
            assert np.array_equal(np.array([got[n] for n in names]), want), i
            lag += int(((want[:, 1] == 1.0) & (want[:, 2] == 0.0)).any())
        if i < CYCLES:
            core.step(_law(i, core.joint_positions, core.joint_velocities, core.q)["effort"])
    assert lag >= 1, "no touch-down seen through the debounce: the test would not tell"
