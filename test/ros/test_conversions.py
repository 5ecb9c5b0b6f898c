"""The ROS node's pure pieces, without any process or DDS traffic.

* :mod:`wb_sim.ros.conversions`: time stamps round-trip exactly (also near the
  int32 end of ``builtin_interfaces/Time``); every ``fill_*`` writes the input
  numbers bit for bit; command parsing maps subsets to the simulator's joint
  indices and rejects, with a reason, unknown names, length mismatches,
  duplicates, NaN, infinities and empty messages; the IMU covariances are the
  noise variances on the diagonal.
* :class:`wb_sim.ros.frames.FrameTree`: one transform per URDF joint (plus
  world -> root), equal to pinocchio's ``oMf[parent].actInv(oMf[child])`` to
  1e-12 at random configurations, for the humanoid, iCub and (fixed base) Panda.

Needs the message packages (``sensor_msgs`` ...), not a running ROS graph; the
module is skipped without them unless ``WB_SIM_REQUIRE_ROS=1``.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest

from helpers.extras import require_ros

require_ros("sensor_msgs", "geometry_msgs", "nav_msgs", "std_msgs", "builtin_interfaces")

from builtin_interfaces.msg import Time  # noqa: E402
from geometry_msgs.msg import TransformStamped, WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from sensor_msgs.msg import Imu, JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

import wb_sim  # noqa: E402
from wb_sim.ros import conversions as cv  # noqa: E402
from wb_sim.ros.frames import FrameTree, Transform  # noqa: E402
from wb_sim.sensors import ContactWrench, ImuReading  # noqa: E402

from helpers.extras import require_robot_data

NS = 1_000_000_000
INT32_MAX = 2**31 - 1

# ----------------------------------------------------------------------------- time


@pytest.mark.parametrize("t_ns, sec, nanosec", [
    (0, 0, 0),
    (1, 0, 1),
    (999_999_999, 0, 999_999_999),
    (NS, 1, 0),
    (1_500_000_001, 1, 500_000_001),
    (1_000_000 * 12_345, 12, 345_000_000),           # a 1 kHz step count
    (INT32_MAX * NS + 999_999_999, INT32_MAX, 999_999_999),  # the last representable stamp
])
def test_time_msg_exact(t_ns, sec, nanosec):
    msg = cv.time_msg(t_ns)
    assert isinstance(msg, Time)
    assert (msg.sec, msg.nanosec) == (sec, nanosec)
    assert cv.time_ns(msg) == t_ns


def test_time_round_trip_random_large_values():
    rng = np.random.default_rng(1)
    # int64 nanoseconds up to the int32 seconds limit (68 years), and 1 kHz step multiples
    values = [int(x) for x in rng.integers(0, INT32_MAX * NS, size=2000, dtype=np.int64)]
    values += [k * 1_000_000 for k in rng.integers(0, 2**40, size=500).tolist()]
    for t in values:
        m = cv.time_msg(t)
        assert 0 <= m.nanosec < NS
        assert cv.time_ns(m) == t
    # and the other way round
    for sec, nsec in zip(rng.integers(0, INT32_MAX, 500).tolist(),
                         rng.integers(0, NS, 500).tolist()):
        m = cv.time_msg(cv.time_ns(Time(sec=sec, nanosec=nsec)))
        assert (m.sec, m.nanosec) == (sec, nsec)


def test_time_ns_is_integer_exact_beyond_float_precision():
    # 10^9 s + 1 ns is not representable as a float64 number of seconds
    t = 1_000_000_000 * NS + 1
    assert float(t) / NS == float(t - 1) / NS  # a float conversion would lose it
    assert cv.time_ns(cv.time_msg(t)) == t
    assert isinstance(cv.time_ns(cv.time_msg(t)), int)


# ----------------------------------------------------------------------------- fill_*


def _rand(rng, *shape):
    return rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 4, size=shape)


def test_fill_joint_state_round_trip():
    rng = np.random.default_rng(2)
    names = [f"j{i}" for i in range(23)]
    msg = JointState(name=list(names))
    for _ in range(5):  # the node reuses one message
        q, v, e = _rand(rng, 23), _rand(rng, 23), _rand(rng, 23)
        stamp = cv.time_msg(int(rng.integers(0, 10**15)))
        out = cv.fill_joint_state(msg, stamp, q, v, e)
        assert out is msg
        assert list(msg.name) == names
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (stamp.sec, stamp.nanosec)
        assert np.array_equal(np.asarray(msg.position), q)
        assert np.array_equal(np.asarray(msg.velocity), v)
        assert np.array_equal(np.asarray(msg.effort), e)


def test_fill_imu_round_trip():
    rng = np.random.default_rng(3)
    msg = Imu()
    msg.header.frame_id = "imu_link"
    quat = rng.standard_normal(4)
    quat /= np.linalg.norm(quat)
    reading = ImuReading(frame="imu_link", orientation=quat, angular_velocity=_rand(rng, 3),
                         linear_acceleration=_rand(rng, 3))
    stamp = cv.time_msg(7 * NS + 3)
    cv.fill_imu(msg, stamp, reading)
    o, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
    assert [o.x, o.y, o.z, o.w] == quat.tolist()  # (x, y, z, w) on both sides
    assert [w.x, w.y, w.z] == reading.angular_velocity.tolist()
    assert [a.x, a.y, a.z] == reading.linear_acceleration.tolist()
    assert cv.time_ns(msg.header.stamp) == 7 * NS + 3
    assert msg.header.frame_id == "imu_link"


def test_fill_wrench_round_trip():
    rng = np.random.default_rng(4)
    msg = WrenchStamped()
    w = ContactWrench(frame="l_sole", force=_rand(rng, 3), torque=_rand(rng, 3))
    cv.fill_wrench(msg, cv.time_msg(12_345), w)
    f, t = msg.wrench.force, msg.wrench.torque
    assert [f.x, f.y, f.z] == w.force.tolist()
    assert [t.x, t.y, t.z] == w.torque.tolist()
    assert msg.header.frame_id == "l_sole"
    assert cv.time_ns(msg.header.stamp) == 12_345


def test_fill_odometry_round_trip():
    rng = np.random.default_rng(5)
    msg = Odometry()
    msg.header.frame_id, msg.child_frame_id = "world", "pelvis"
    p, quat, lin, ang = _rand(rng, 3), rng.standard_normal(4), _rand(rng, 3), _rand(rng, 3)
    cv.fill_odometry(msg, cv.time_msg(42 * NS), p, quat, lin, ang)
    pp, o = msg.pose.pose.position, msg.pose.pose.orientation
    tl, ta = msg.twist.twist.linear, msg.twist.twist.angular
    assert [pp.x, pp.y, pp.z] == p.tolist()
    assert [o.x, o.y, o.z, o.w] == quat.tolist()
    assert [tl.x, tl.y, tl.z] == lin.tolist()
    assert [ta.x, ta.y, ta.z] == ang.tolist()
    assert (msg.header.frame_id, msg.child_frame_id) == ("world", "pelvis")
    assert cv.time_ns(msg.header.stamp) == 42 * NS


def test_transform_msgs_and_fill_transforms_round_trip():
    rng = np.random.default_rng(6)
    parents, children = ["world", "a", "b"], ["a", "b", "c"]
    msgs = cv.transform_msgs(parents, children)
    assert all(isinstance(m, TransformStamped) for m in msgs)
    for _ in range(3):
        t, r = _rand(rng, 3, 3), rng.standard_normal((3, 4))
        out = cv.fill_transforms(msgs, cv.time_msg(5 * NS + 1), t, r)
        assert out is msgs
        for m, p, c, ti, ri in zip(msgs, parents, children, t, r):
            assert (m.header.frame_id, m.child_frame_id) == (p, c)
            tr, ro = m.transform.translation, m.transform.rotation
            assert [tr.x, tr.y, tr.z] == ti.tolist()
            assert [ro.x, ro.y, ro.z, ro.w] == ri.tolist()
            assert cv.time_ns(m.header.stamp) == 5 * NS + 1


def test_transform_msg_from_transform():
    tf = Transform("l_ankle", "l_sole", np.array([0.01, -0.02, -0.05]),
                   np.array([0.0, 0.0, 0.38268343236508984, 0.9238795325112867]))
    m = cv.transform_msg(cv.time_msg(3), tf)
    assert (m.header.frame_id, m.child_frame_id) == ("l_ankle", "l_sole")
    t, r = m.transform.translation, m.transform.rotation
    assert [t.x, t.y, t.z] == tf.translation.tolist()
    assert [r.x, r.y, r.z, r.w] == tf.rotation.tolist()
    assert cv.time_ns(m.header.stamp) == 3


@pytest.mark.parametrize("gyro_std, acc_std", [(0.0, 0.0), (0.01, 0.05), (3.0, 0.2)])
def test_imu_covariances_are_variances_on_the_diagonal(gyro_std, acc_std):
    orientation, gyro, acc = cv.imu_covariances(gyro_std, acc_std)
    for cov, std in ((gyro, gyro_std), (acc, acc_std)):
        m = np.array(cov, dtype=float).reshape(3, 3)
        assert np.array_equal(np.diag(m), np.full(3, std * std))
        assert np.array_equal(m - np.diag(np.diag(m)), np.zeros((3, 3)))
    assert np.array_equal(np.array(orientation, dtype=float), np.zeros(9))
    msg = Imu()  # and the lists fit the message's 9-element arrays
    msg.orientation_covariance, msg.angular_velocity_covariance, \
        msg.linear_acceleration_covariance = orientation, gyro, acc
    assert msg.angular_velocity_covariance[4] == gyro_std ** 2


# ----------------------------------------------------------------------------- commands

INDEX = {n: i for i, n in enumerate(["a", "b", "c", "d", "e"])}


def _js(names, effort, **kw):
    return JointState(name=list(names), effort=[float(x) for x in effort], **kw)


def test_parse_joint_commands_full_set_in_order():
    idx, val = cv.parse_joint_commands(_js("abcde", [1, 2, 3, 4, 5]), INDEX)
    assert idx.tolist() == [0, 1, 2, 3, 4]
    assert val.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_parse_joint_commands_subset_maps_indices():
    idx, val = cv.parse_joint_commands(_js(["d", "a"], [-1.5, 2.25]), INDEX)
    assert idx.tolist() == [3, 0]
    assert val.tolist() == [-1.5, 2.25]
    tau = np.zeros(5)
    tau[idx] = val  # as the node applies it
    assert tau.tolist() == [2.25, 0.0, 0.0, -1.5, 0.0]


def test_parse_joint_commands_ignores_position_and_velocity():
    msg = _js(["c"], [7.0], position=[1.0], velocity=[2.0])
    idx, val = cv.parse_joint_commands(msg, INDEX)
    assert (idx.tolist(), val.tolist()) == ([2], [7.0])


@pytest.mark.parametrize("names, effort, why", [
    (["a", "zz"], [1.0, 2.0], "unknown joint 'zz'"),
    (["a", "b"], [1.0], "2 names but 1 efforts"),
    (["a"], [1.0, 2.0], "1 names but 2 efforts"),
    (["a", "b"], [], "2 names but 0 efforts"),       # a position-only JointState
    (["a", "b", "a"], [1.0, 2.0, 3.0], "duplicated"),
    (["a", "b"], [1.0, math.nan], "non-finite effort for b"),
    (["a", "b"], [math.inf, 0.0], "non-finite effort for a"),
    (["c"], [-math.inf], "non-finite effort for c"),
    ([], [], "no joint names"),
])
def test_parse_joint_commands_rejects(names, effort, why):
    with pytest.raises(cv.CommandRejected) as e:
        cv.parse_joint_commands(_js(names, effort), INDEX)
    assert why in str(e.value)
    assert isinstance(e.value, ValueError)


def test_parse_effort_commands():
    names = list(INDEX)
    val = cv.parse_effort_commands(Float64MultiArray(data=[1.0, -2.0, 3.5, 0.0, 1e-9]), names)
    assert val.tolist() == [1.0, -2.0, 3.5, 0.0, 1e-9]


@pytest.mark.parametrize("data, why", [
    ([1.0, 2.0, 3.0, 4.0], "expected 5 efforts"),
    ([1.0] * 6, "expected 5 efforts"),
    ([], "expected 5 efforts"),
    ([1.0, 2.0, math.nan, 4.0, 5.0], "non-finite effort for c"),
    ([1.0, 2.0, 3.0, 4.0, -math.inf], "non-finite effort for e"),
])
def test_parse_effort_commands_rejects(data, why):
    with pytest.raises(cv.CommandRejected) as e:
        cv.parse_effort_commands(Float64MultiArray(data=data), list(INDEX))
    assert why in str(e.value)


def _push(frame, force=(1.0, 2.0, 3.0), torque=(0.5, 0.0, -0.5)):
    w = WrenchStamped()
    w.header.frame_id = frame
    (w.wrench.force.x, w.wrench.force.y, w.wrench.force.z) = force
    (w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z) = torque
    return w


def test_parse_external_wrench():
    link, f, t = cv.parse_external_wrench(_push("l_foot"))
    assert (link, f.tolist(), t.tolist()) == ("l_foot", [1.0, 2.0, 3.0], [0.5, 0.0, -0.5])


@pytest.mark.parametrize("msg, why", [
    (_push(""), "frame_id is empty"),
    (_push("a", force=(math.nan, 0.0, 0.0)), "non-finite wrench on 'a'"),
    (_push("a", torque=(0.0, math.inf, 0.0)), "non-finite wrench on 'a'"),
])
def test_parse_external_wrench_rejects(msg, why):
    with pytest.raises(cv.CommandRejected, match=why):
        cv.parse_external_wrench(msg)


def test_joint_commands_msg_round_trips_through_the_parser():
    msg = cv.joint_commands_msg(["e", "b"], [3, -4.5], stamp=cv.time_msg(2 * NS + 7))
    assert isinstance(msg, JointState)
    assert cv.time_ns(msg.header.stamp) == 2 * NS + 7
    idx, val = cv.parse_joint_commands(msg, INDEX)
    assert (idx.tolist(), val.tolist()) == ([4, 1], [3.0, -4.5])


# ----------------------------------------------------------------------------- FrameTree


def _urdf_joints(xml: str) -> list[tuple[str, str, str]]:
    root = ET.fromstring(xml)
    return [(j.get("type"), j.find("parent").get("link"), j.find("child").get("link"))
            for j in root.findall("joint")]


def _random_configuration(robot, rng) -> np.ndarray:
    q = pin.neutral(robot.model)
    if robot.floating_base:
        q[:3] = rng.uniform(-2.0, 2.0, 3)
        quat = rng.standard_normal(4)
        q[3:7] = quat / np.linalg.norm(quat)
    lo = np.where(np.isfinite(robot.position_lower), robot.position_lower, -math.pi)
    hi = np.where(np.isfinite(robot.position_upper), robot.position_upper, math.pi)
    robot.set_joint_positions(q, rng.uniform(lo, hi))
    return q


def _quat_matrix(xyzw) -> np.ndarray:
    x, y, z, w = xyzw
    return pin.Quaternion(w, x, y, z).toRotationMatrix()


@pytest.fixture(scope="module", params=["humanoid", "icub", "panda"])
def robot_and_base(request):
    require_robot_data(request.param)
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path(request.param))
    ini = sim.config.initial
    base = pin.SE3(pin.rpy.rpyToMatrix(*ini.base_rpy), np.array(ini.base_position))
    return request.param, sim.robot, base


def test_frame_tree_has_one_transform_per_urdf_joint(robot_and_base):
    name, robot, base = robot_and_base
    tree = FrameTree(robot, "world", base)
    joints = _urdf_joints(robot.urdf_xml)
    q = pin.neutral(robot.model)
    moving = [(t.parent, t.child) for t in tree.moving_transforms(q)]
    static = [(t.parent, t.child) for t in tree.static_transforms()]
    world_root = [("world", robot.root_link)]
    expected_moving = [(p, c) for t, p, c in joints if t != "fixed"]
    expected_static = [(p, c) for t, p, c in joints if t == "fixed"]
    if robot.floating_base:
        assert moving == world_root + expected_moving
        assert sorted(static) == sorted(expected_static)
    else:
        assert moving == expected_moving
        assert sorted(static) == sorted(world_root + expected_static)
    assert len(expected_moving) == robot.nj
    # every URDF link is the child of exactly one transform: a tree rooted at world
    children = [c for _, c in moving + static]
    links = {lk.get("name") for lk in ET.fromstring(robot.urdf_xml).findall("link")}
    assert sorted(children) == sorted(links), name


def test_frame_tree_matches_pinocchio_at_random_configurations(robot_and_base):
    name, robot, base = robot_and_base
    tree = FrameTree(robot, "world", base)
    model = robot.model
    data = model.createData()
    body = {f.name: i for i, f in enumerate(model.frames) if f.type == pin.FrameType.BODY}
    rng = np.random.default_rng(7)
    static = tree.static_transforms()
    worst = 0.0
    for _ in range(10):
        q = _random_configuration(robot, rng)
        pin.framesForwardKinematics(model, data, q)
        transforms = tree.moving_transforms(q) + static
        for tf in transforms:
            child = data.oMf[body[tf.child]]
            ref = child if tf.parent == "world" else data.oMf[body[tf.parent]].actInv(child)
            assert abs(np.linalg.norm(tf.rotation) - 1.0) < 1e-12, (name, tf.parent, tf.child)
            err_t = np.abs(tf.translation - ref.translation).max()
            err_r = np.abs(_quat_matrix(tf.rotation) - ref.rotation).max()
            worst = max(worst, err_t, err_r)
            assert err_t < 1e-12 and err_r < 1e-12, (name, tf.parent, tf.child, err_t, err_r)
        # moving_arrays is what the node publishes: the same numbers
        trans, rot = tree.moving_arrays(robot.joint_positions(q))
        moving = tree.moving_transforms(q)[1 if robot.floating_base else 0:]
        assert np.array_equal(trans, np.array([t.translation for t in moving]))
        assert np.array_equal(rot, np.array([t.rotation for t in moving]))
    print(f"{name}: worst deviation from pinocchio {worst:.2e}")


def test_frame_tree_check_can_fail(robot_and_base):
    """The comparison above detects a wrong joint angle: a 1e-9 rad error is seen."""
    name, robot, base = robot_and_base
    tree = FrameTree(robot, "world", base)
    model, data = robot.model, robot.model.createData()
    rng = np.random.default_rng(8)
    q = _random_configuration(robot, rng)
    pin.framesForwardKinematics(model, data, q)
    qj = robot.joint_positions(q)
    qj[-1] += 1e-9
    trans, rot = tree.moving_arrays(qj)
    body = {f.name: i for i, f in enumerate(model.frames) if f.type == pin.FrameType.BODY}
    errs = []
    for (p, c), t, r in zip(tree.moving, trans, rot):
        ref = data.oMf[body[p]].actInv(data.oMf[body[c]])
        errs.append(max(np.abs(t - ref.translation).max(),
                        np.abs(_quat_matrix(r) - ref.rotation).max()))
    assert max(errs) > 1e-12, name


# ----------------------------------------------------------------------------- CDR in


def _random_joint_state(rng, n):
    m = JointState(name=["j" * int(rng.integers(1, 9)) + str(i) for i in range(n)],
                   position=rng.normal(size=n).tolist(), velocity=rng.normal(size=n).tolist(),
                   effort=rng.normal(size=int(rng.integers(0, n + 1))).tolist())
    m.header.frame_id = "f" * int(rng.integers(0, 7))  # every padding length
    m.header.stamp = Time(sec=int(rng.integers(-5, 2**31 - 1)), nanosec=int(rng.integers(0, NS)))
    return m


@pytest.fixture(params=["compiled", "plain"])
def cdr_path(request, monkeypatch):
    """The CDR readers made now run this path (the compiled one must be built: CI builds it)."""
    from wb_sim import compiled
    if request.param == "plain":
        monkeypatch.setenv(compiled.PLAIN_ENV, "1")
    else:
        monkeypatch.delenv(compiled.PLAIN_ENV, raising=False)
        assert compiled.kernels() is not None, "wb_sim's compiled kernels are not built"
    return request.param


def test_joint_state_reader_matches_rclpy_serialization(cdr_path):
    from rclpy.serialization import serialize_message
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = _random_joint_state(rng, int(rng.integers(0, 30)))
        data = serialize_message(m)
        read = cv.JointStateReader()
        assert (read._kernel is None) == (cdr_path == "plain")
        stamp, p, v, e = read(data)
        assert stamp == m.header.stamp.sec * NS + m.header.stamp.nanosec
        assert read.names == list(m.name) and read.names_changed
        assert (p.tolist(), v.tolist(), e.tolist()) == (list(m.position), list(m.velocity),
                                                        list(m.effort))
        assert read(data)[1].tolist() == p.tolist() and not read.names_changed  # cached
        other = JointState(name=list(m.name)[::-1] + ["x"], position=[1.0] * (len(m.name) + 1))
        read(serialize_message(other))
        assert read.names_changed and read.names == list(other.name)


def test_joint_state_reader_reads_the_node_template(cdr_path):
    names = ["a", "bb", "ccc"]
    tpl = cv.joint_state_template(names)
    read = cv.JointStateReader()
    q, v, e = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]), np.array([7.0, 8.0, 9.0])
    assert read(tpl.serialize(5 * NS + 3, q, v, e))[0] == 5 * NS + 3
    stamp, q2, v2, e2 = read(tpl.serialize(6 * NS, q + 1, v, e))
    assert not read.names_changed and read.names == names  # the template's bytes repeat
    assert stamp == 6 * NS and q2.tolist() == (q + 1).tolist() and e2.tolist() == e.tolist()


def test_read_odometry_pose_matches_rclpy_serialization(cdr_path):
    from rclpy.serialization import serialize_message
    rng = np.random.default_rng(1)
    read = cv.OdometryPoseReader()
    assert (read._kernel is None) == (cdr_path == "plain")
    for _ in range(50):
        o = Odometry()
        o.header.frame_id = "w" * int(rng.integers(0, 7))
        o.child_frame_id = "b" * int(rng.integers(0, 9))
        o.header.stamp = Time(sec=3, nanosec=7)
        x = rng.normal(size=7)
        p, r = o.pose.pose.position, o.pose.pose.orientation
        p.x, p.y, p.z, r.x, r.y, r.z, r.w = x.tolist()
        o.twist.twist.linear.x = 99.0
        stamp, pose = read(serialize_message(o))
        assert stamp == 3 * NS + 7 and pose.tolist() == x.tolist()


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x00\x00" + bytes(8), b"\x00\x01\x00\x00" +
                                  bytes(8) + b"\x05\x00\x00\x00ab"])
def test_cdr_readers_reject_malformed_data(data, cdr_path):
    with pytest.raises(ValueError):
        cv.JointStateReader()(data)
    with pytest.raises(ValueError):
        cv.OdometryPoseReader()(data)


def _outcome(read, data):
    """What a reader makes of ``data``: its result as plain values, or the error's text."""
    try:
        out = read(data)
    except ValueError as e:
        return ("error", str(e))
    return tuple(x.tolist() if isinstance(x, np.ndarray) else x for x in out)


def test_the_compiled_cdr_readers_equal_their_python_reference_on_any_bytes(monkeypatch):
    """Every truncation of valid JointState and Odometry messages, and 3000 with random bytes
    changed (counts, lengths, the encapsulation header): the compiled readers give what the
    Python readers give, value for value, or the same ValueError; on a stream of valid messages
    whose names change or repeat, the same names and names_changed."""
    from rclpy.serialization import serialize_message
    from wb_sim import compiled
    monkeypatch.delenv(compiled.PLAIN_ENV, raising=False)
    assert compiled.kernels() is not None, "wb_sim's compiled kernels are not built"
    rng = np.random.default_rng(5)
    odom = Odometry(child_frame_id="base")
    odom.pose.pose.position.z = 0.7
    samples = [serialize_message(_random_joint_state(rng, n)) for n in (0, 1, 3, 23)]
    stream = cv.JointStateReader()
    reference = cv.JointStateReader()
    for data in samples + samples[::-1] + samples[2:3] * 3:  # names new, repeated
        assert _outcome(stream, data) == _outcome(reference.read_plain, data)
        assert (stream.names, stream.names_changed) == (reference.names, reference.names_changed)
    cases = [d[:k] for d in samples for k in range(len(d) + 1)]
    odoms = [serialize_message(odom)[:k] for k in range(len(serialize_message(odom)) + 1)]
    for _ in range(3000):
        d = bytearray(samples[int(rng.integers(len(samples)))])
        for _ in range(int(rng.integers(1, 4))):
            d[int(rng.integers(len(d)))] = int(rng.integers(256))
        cases.append(bytes(d))
        o = bytearray(serialize_message(odom))
        o[int(rng.integers(len(o)))] = int(rng.integers(256))
        odoms.append(bytes(o))
    errors = 0
    for data in cases:
        fast = _outcome(cv.JointStateReader(), data)
        errors += fast[0] == "error"
        assert fast == _outcome(cv.JointStateReader().read_plain, data), data
    assert errors > 500  # the malformed cases were exercised
    read = cv.OdometryPoseReader()
    for data in odoms:
        assert _outcome(read, data) == _outcome(cv.read_odometry_pose, data), data


def test_contact_state_round_trip_and_its_cop():
    """contact_state_msg -> read_contact_state gives the reading's numbers back exactly
    (points with their surfaces, frames and indices, the stamp, the centre of mass and
    momentum), each surface's force and normal force are its points' sums; through CDR
    (rclpy's serialization, then rosbags' deserialization with the installed definitions)
    the same numbers; a surface without normal force has a NaN CoP; a CoP is the
    normal-force-weighted mean of its points (two points, by hand)."""
    from rclpy.serialization import serialize_message

    import wb_sim
    from wb_sim.ros.conversions import contact_state_msg, pressure_centre
    from wb_sim.tools.bag import read_contact_state, typestore
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    for _ in range(60):
        sim.step(np.zeros(sim.nj))
    r = sim.contact_points_state()
    com, h = sim.centroidal_momentum()
    t_ns = 12 * 10**9 + 345_678_901
    pts = sim.contact_points
    msg = contact_state_msg(t_ns, r, pts.surface_names, pts.surface_frames, com, h, "odom")
    x = read_contact_state(msg)
    assert x["stamp_ns"] == t_ns and x["frame_id"] == "odom"
    assert x["surface"] == list(r.surface) and x["surface_names"] == list(sim.surface_names)
    assert x["frame"] == [pts.surface_frames[k] for k in pts.surface_of_point]
    assert list(x["index"][:5]) == [0, 1, 2, 3, 0] and len(x["index"]) == 8
    assert np.array_equal(x["position"], r.position) and np.array_equal(x["normal"], r.normal)
    assert np.array_equal(x["force"], r.force) and np.array_equal(x["penetration"], r.depth)
    assert list(x["mode"]) == [{"none": 0, "stick": 1, "slip": 2}[c] for c in r.status]
    assert np.array_equal(x["com"], com) and np.array_equal(x["momentum"], h)
    fn = np.einsum("ij,ij->i", r.force, r.normal)
    for j in range(2):
        rows = pts.surface_of_point == j
        np.testing.assert_allclose(x["surface_force"][j], r.force[rows].sum(axis=0),
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(x["normal_force"][j], fn[rows].sum(), rtol=0, atol=1e-12)
        assert x["normal_force"][j] > 10.0  # standing on both feet after 60 steps
    ts = typestore()
    y = read_contact_state(ts.deserialize_cdr(bytes(serialize_message(msg)),
                                              "wb_sim_interfaces/msg/ContactState"))
    for key, value in x.items():
        assert np.array_equal(y[key], value, equal_nan=isinstance(value, np.ndarray)), key
    n = np.array([0.0, 0.0, 1.0])
    P = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 0.0]])
    F = np.array([[5.0, 1.0, 30.0], [0.0, -2.0, 10.0]])
    np.testing.assert_allclose(pressure_centre(P, F, np.stack([n, n])), [0.25, 0.5, 0.0],
                               rtol=0, atol=1e-15)
    assert np.isnan(pressure_centre(P, -F, np.stack([n, n]))).all()  # pulling: no CoP
