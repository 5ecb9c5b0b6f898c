"""The node with whole-body collision (``collision.enabled``): the humanoid starts lying
on its back and the other links' total wrench comes out on ``contact_wrench/collision``
(geometry_msgs/WrenchStamped, world frame) at the contact wrenches' rate, carrying
most of the weight; the contact markers for RViz (``contact_markers``) show every loaded
point, the feet's and the links', with its force. Skipped without rclpy unless
``WB_SIM_REQUIRE_ROS=1`` (CI)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.extras import require_ros

require_ros("geometry_msgs.msg", "visualization_msgs.msg")

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

import wb_sim  # noqa: E402
from helpers.ros import HUMANOID_YAML, SimSetup, stamp_ns  # noqa: E402

NS = 1_000_000_000
LYING = {"initial.base_position": [0.0, 0.0, 0.09], "initial.base_rpy": [0.0, -1.5707963, 0.0]}


def _marker_arrows(msg):
    """(points (n, 3), force lines' vectors (n, 3)) of a contact-markers message."""
    return _arrows_of(msg, "contact")


def _arrows_of(msg, ns):
    """The same for the namespaces ``<ns>_points`` / ``<ns>_forces``."""
    assert [m.ns for m in msg.markers] == ["contact_points", "contact_forces",
                                           "self_contact_points", "self_contact_forces"]
    points, lines = (m for m in msg.markers if m.ns in (f"{ns}_points", f"{ns}_forces"))
    assert (points.ns, points.type, lines.ns, lines.type) == (
        f"{ns}_points", Marker.SPHERE_LIST, f"{ns}_forces", Marker.LINE_LIST)
    p = np.array([[a.x, a.y, a.z] for a in points.points]).reshape(-1, 3)
    ends = np.array([[a.x, a.y, a.z] for a in lines.points]).reshape(-1, 2, 3)
    assert np.array_equal(ends[:, 0], p)  # each line starts at its point
    return p, ends[:, 1] - ends[:, 0]


def test_contact_markers_are_the_loaded_points_and_their_forces():
    """In the core, lying: the markers are exactly the points the ground pushes (feet and
    links), each force line 0.5 m per robot weight; standing: the feet's points only."""
    from wb_sim.ros.markers import WEIGHT_LENGTH_M, ContactMarkers
    from wb_sim.tools.viewer import contact_arrows
    sim = wb_sim.Simulator.from_yaml(HUMANOID_YAML, overrides=LYING)
    for _ in range(800):
        sim.step(np.zeros(sim.nj))
    mg = sim.mass * 9.81
    p, f = _marker_arrows(ContactMarkers(sim, "world").message(None))
    pos, force = contact_arrows(sim)
    loaded = np.linalg.norm(force, axis=1) > 0
    assert len(sim.collision_points_state().position) >= 5 and len(p) == loaded.sum() >= 5
    np.testing.assert_allclose(p, pos[loaded], rtol=0, atol=0)
    np.testing.assert_allclose(f, force[loaded] * WEIGHT_LENGTH_M / mg, rtol=1e-12, atol=1e-15)
    assert f[:, 2].sum() == pytest.approx(WEIGHT_LENGTH_M, rel=0.02)  # at rest: the weight
    standing = wb_sim.Simulator.from_yaml(HUMANOID_YAML)
    for _ in range(100):  # it starts 1 mm above the ground
        standing.step(standing.gravity_torques())
    p, f = _marker_arrows(ContactMarkers(standing, "world").message(None))
    assert len(p) == sum(np.linalg.norm(standing.contact_points_state().force, axis=1) > 0) > 0
    assert len(standing.collision_points_state().position) == 0
    assert len(_arrows_of(ContactMarkers(standing, "world").message(None), "self_contact")[0]) == 0


def test_contact_markers_show_the_self_contacts():
    """collision.self_collision: the humanoid's left forearm driven into its torso (as in
    test/core/contact/test_self_collision.py); the self-contact markers are the loaded
    pairs' points and the forces on their first links."""
    from wb_sim.controllers import PDGravityController
    from wb_sim.ros.markers import WEIGHT_LENGTH_M, ContactMarkers
    sim = wb_sim.Simulator.from_yaml(HUMANOID_YAML, overrides={
        "floating_base": False, "initial.base_position": [0.0, 0.0, 1.0],
        "collision.enabled": False, "collision.self_collision": True})
    target = np.zeros(sim.nj)
    target[sim.joint_names.index("l_shoulder_yaw")] = -1.5
    ctrl = PDGravityController(sim.robot, target, 200.0, 5.0, gravity=sim.config.gravity)
    elbow = sim.joint_names.index("l_elbow")
    for _ in range(1500):
        tau = ctrl(sim.q, sim.joint_positions, sim.joint_velocities)
        tau[elbow] = -30.0
        sim.step(tau)
    own = sim.self_collision_contacts()
    loaded = np.linalg.norm(own.force, axis=1) > 0
    assert loaded.sum() >= 1
    p, f = _arrows_of(ContactMarkers(sim, "world").message(None), "self_contact")
    np.testing.assert_array_equal(p, own.position[loaded])
    mg = sim.mass * 9.81
    np.testing.assert_allclose(f, own.force[loaded] * WEIGHT_LENGTH_M / mg, rtol=1e-12)


def test_the_node_publishes_the_other_links_wrench_of_a_lying_humanoid(tmp_path):
    core = wb_sim.Simulator.from_yaml(HUMANOID_YAML)
    mg = core.mass * 9.81
    s = SimSetup(tmp_path, "collision.enabled:=true", "publish.contact_wrench_rate_hz:=100.0",
                 "publish.stats_period_s:=0.0", "initial.base_position:=[0.0, 0.0, 0.09]",
                 "initial.base_rpy:=[0.0, -1.5707963, 0.0]")
    try:
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        rec = s.ros.record(WrenchStamped, "contact_wrench/collision", qos)
        markers = s.ros.record(MarkerArray, "contact_markers", qos)
        # 20 messages (0.2 s) once lying (after 1 s; the subscription may join later)
        ok = s.ros.spin_until(lambda: sum(stamp_ns(m) > 1.0 * NS for m in rec.msgs) > 20
                              and sum(stamp_ns(m.markers[0]) > 1.0 * NS
                                      for m in markers.msgs) > 5, 30)
        s.ros.stop_recording(rec)
        s.ros.stop_recording(markers)
        assert ok, s.describe()
    finally:
        s.close()
    st = np.array([stamp_ns(m) for m in rec.msgs])
    assert np.all(np.diff(st) % (NS // 100) == 0)  # 100 Hz, stamped with simulated time
    assert {m.header.frame_id for m in rec.msgs} == {"world"}
    last = [m for m in rec.msgs if stamp_ns(m) > 1.0 * NS]
    fz = np.array([m.wrench.force.z for m in last])
    assert len(fz) > 20 and np.all(fz > 0.5 * mg) and np.all(fz < 1.05 * mg), (fz.min(), fz.max())
    # the markers: ~30 Hz (every 33 steps), world frame, the weight on the loaded points
    ms = [m for m in markers.msgs if stamp_ns(m.markers[0]) > 1.0 * NS]
    st = np.array([stamp_ns(m.markers[0]) for m in ms])
    assert np.all(np.diff(st) % (33 * NS // 1000) == 0), np.diff(st)
    assert {mk.header.frame_id for m in ms for mk in m.markers} == {"world"}
    for m in ms:
        p, f = _marker_arrows(m)
        assert len(p) >= 5 and np.all(np.abs(p[:, 2]) < 0.02)  # on the ground
        assert 0.9 * 0.5 < f[:, 2].sum() < 1.1 * 0.5  # 0.5 m per weight: the weight
