"""The serialized-message templates the node publishes: deserialized, they are the
messages the plain conversion functions build, for every stream."""

import numpy as np
import pytest
from helpers.extras import require_ros

require_ros("rosgraph_msgs", "nav_msgs", "sensor_msgs", "geometry_msgs")

from rclpy.serialization import deserialize_message  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import Imu, JointState  # noqa: E402

from wb_sim.ros import conversions as cv  # noqa: E402

RNG = np.random.default_rng(3)
T_NS = 123 * cv.NS_PER_S + 456_789_012


def _stamp_ok(header):
    assert (header.stamp.sec, header.stamp.nanosec) == (123, 456_789_012)


def test_joint_state_template():
    names = [f"j{i}" for i in range(23)]
    q, v, e = RNG.normal(size=(3, 23))
    m = deserialize_message(cv.joint_state_template(names).serialize(T_NS, q, v, e), JointState)
    _stamp_ok(m.header)
    assert list(m.name) == names
    assert np.array_equal(m.position, q) and np.array_equal(m.velocity, v)
    assert np.array_equal(m.effort, e)


def test_imu_template_keeps_frame_and_covariances():
    cov = cv.imu_covariances(0.1, 0.2)
    o, w, a = RNG.normal(size=4), RNG.normal(size=3), RNG.normal(size=3)
    m = deserialize_message(cv.imu_template("imu_link", cov).serialize(T_NS, o, w, a), Imu)
    _stamp_ok(m.header)
    assert m.header.frame_id == "imu_link"
    assert [m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w] == o.tolist()
    assert [m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z] == w.tolist()
    assert [m.linear_acceleration.z] == [a[2]]
    assert m.angular_velocity_covariance[0] == pytest.approx(0.01)
    assert m.linear_acceleration_covariance[8] == pytest.approx(0.04)


def test_wrench_odometry_clock_templates():
    f, t = RNG.normal(size=3), RNG.normal(size=3)
    m = deserialize_message(cv.wrench_template("l_sole").serialize(T_NS, f, t), WrenchStamped)
    _stamp_ok(m.header)
    assert m.header.frame_id == "l_sole"
    assert [m.wrench.force.x, m.wrench.torque.z] == [f[0], t[2]]
    p, qt, lv, av = RNG.normal(size=3), RNG.normal(size=4), RNG.normal(size=3), RNG.normal(size=3)
    o = deserialize_message(cv.odometry_template("world", "pelvis").serialize(T_NS, p, qt, lv, av),
                            Odometry)
    _stamp_ok(o.header)
    assert (o.header.frame_id, o.child_frame_id) == ("world", "pelvis")
    assert [o.pose.pose.position.y, o.pose.pose.orientation.w] == [p[1], qt[3]]
    assert [o.twist.twist.linear.z, o.twist.twist.angular.x] == [lv[2], av[0]]
    c = deserialize_message(cv.clock_template().serialize(T_NS), Clock)
    assert (c.clock.sec, c.clock.nanosec) == (123, 456_789_012)


def test_tf_template_every_transform_stamped_and_filled():
    parents, children = ["world", "a", "b"], ["a", "b", "c"]
    rows = RNG.normal(size=(3, 7))
    m = deserialize_message(cv.tf_template(parents, children).serialize(T_NS, *rows), TFMessage)
    assert [(t.header.frame_id, t.child_frame_id) for t in m.transforms] == list(zip(parents,
                                                                                      children))
    for t, r in zip(m.transforms, rows):
        _stamp_ok(t.header)
        tr, ro = t.transform.translation, t.transform.rotation
        assert [tr.x, tr.y, tr.z, ro.x, ro.y, ro.z, ro.w] == r.tolist()


def test_template_reuse_gives_independent_messages():
    tpl = cv.joint_state_template(["a", "b"])
    first = tpl.serialize(1, np.ones(2), np.ones(2), np.ones(2))
    tpl.serialize(2, np.zeros(2), np.zeros(2), np.zeros(2))
    m = deserialize_message(first, JointState)
    assert list(m.position) == [1.0, 1.0] and m.header.stamp.nanosec == 1
