"""The node with whole-body collision (``collision.enabled``): the humanoid starts lying
on its back and the other links' total wrench comes out on ``contact_wrench/collision``
(geometry_msgs/WrenchStamped, world frame) at the contact wrenches' rate, carrying
most of the weight. Skipped without rclpy unless ``WB_SIM_REQUIRE_ROS=1`` (CI)."""

from __future__ import annotations

import numpy as np

from ros_helpers import require_ros

require_ros("geometry_msgs.msg")

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402

import wb_sim  # noqa: E402
from ros_helpers import HUMANOID_YAML, SimSetup, stamp_ns  # noqa: E402

NS = 1_000_000_000


def test_the_node_publishes_the_other_links_wrench_of_a_lying_humanoid(tmp_path):
    core = wb_sim.Simulator.from_yaml(HUMANOID_YAML)
    mg = core.mass * 9.81
    s = SimSetup(tmp_path, "collision.enabled:=true", "publish.contact_wrench_rate_hz:=100.0",
                 "publish.stats_period_s:=0.0", "initial.base_position:=[0.0, 0.0, 0.09]",
                 "initial.base_rpy:=[0.0, -1.5707963, 0.0]")
    try:
        rec = s.ros.record(WrenchStamped, "contact_wrench/collision",
                           QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        # 20 messages (0.2 s) once lying (after 1 s; the subscription may join later)
        ok = s.ros.spin_until(lambda: sum(stamp_ns(m) > 1.0 * NS for m in rec.msgs) > 20, 30)
        s.ros.stop_recording(rec)
        assert ok, s.describe()
    finally:
        s.close()
    st = np.array([stamp_ns(m) for m in rec.msgs])
    assert np.all(np.diff(st) % (NS // 100) == 0)  # 100 Hz, stamped with simulated time
    assert {m.header.frame_id for m in rec.msgs} == {"world"}
    last = [m for m in rec.msgs if stamp_ns(m) > 1.0 * NS]
    fz = np.array([m.wrench.force.z for m in last])
    assert len(fz) > 20 and np.all(fz > 0.5 * mg) and np.all(fz < 1.05 * mg), (fz.min(), fz.max())
