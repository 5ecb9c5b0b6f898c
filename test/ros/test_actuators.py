"""The drives' readings on ROS (``topics.actuators``): one std_msgs/Float64MultiArray per
reading (current A, voltage V, temperature C), one entry per joint in joint_states order,
NaN for a joint without a motor model; nothing where every drive is ideal. Skipped without
rclpy unless ``WB_SIM_REQUIRE_ROS=1`` (CI)."""

from __future__ import annotations

import numpy as np

from helpers.extras import require_ros

require_ros("std_msgs.msg")

from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

import wb_sim  # noqa: E402
from wb_sim.ros import conversions as cv  # noqa: E402
from helpers.ros import HUMANOID_YAML, SimSetup  # noqa: E402

LEGS = [f"{s}_{j}" for s in "lr" for j in ("hip_yaw", "hip_roll", "hip_pitch", "knee",
                                           "ankle_pitch", "ankle_roll")]


def test_actuator_arrays_round_trip():
    """The core's reading of a humanoid on dc_motor legs, into the messages and back."""
    sim = wb_sim.Simulator.from_yaml(HUMANOID_YAML, overrides={
        "actuators.model": "dc_motor", "actuators.joints": LEGS})
    rng = np.random.default_rng(3)
    msgs = cv.actuator_arrays(sim.joint_names)
    for _ in range(3):  # the node reuses the messages
        sim.step(rng.normal(0.0, 20.0, sim.nj))
        r = sim.actuator_readings
        out = cv.fill_actuator_arrays(msgs, r)
        assert [m.layout.dim[0].label for m in out] == ["joints"] * 3
        assert [m.layout.dim[0].size for m in out] == [sim.nj] * 3
        for m, field in zip(out, ("current", "voltage", "temperature")):
            np.testing.assert_array_equal(np.asarray(m.data), getattr(r, field))
    legs = [sim.joint_names.index(n) for n in LEGS]
    current = np.asarray(msgs[0].data)
    assert np.isfinite(current[legs]).all() and np.abs(current[legs]).max() > 0.1
    assert np.isnan(np.delete(current, legs)).all()


def test_the_node_publishes_the_drives_readings(tmp_path):
    s = SimSetup(tmp_path, "actuators.model:=dc_motor", "publish.actuators_rate_hz:=100.0",
                 "publish.stats_period_s:=0.0")
    try:
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        recs = [s.ros.record(Float64MultiArray, f"actuators/{name}", qos)
                for name in ("current", "voltage", "temperature")]
        ok = s.ros.spin_until(lambda: all(len(r.msgs) >= 5 for r in recs), 30)
        for r in recs:
            s.ros.stop_recording(r)
        assert ok, s.describe()
    finally:
        s.close()
    nj = len(s.first_js.name)
    for r in recs:
        assert all(len(m.data) == nj and m.layout.dim[0].label == "joints" for m in r.msgs)
    temperature = np.array([m.data for m in recs[2].msgs])
    current = np.array([m.data for m in recs[0].msgs])
    assert np.isfinite(current).all() and np.isfinite(temperature).all()
    assert (temperature >= 25.0).all() and (temperature < 90.0).all()


def test_ideal_drives_publish_nothing(tmp_path):
    s = SimSetup(tmp_path, "publish.stats_period_s:=0.0")
    try:
        assert s.ros.node.count_publishers("/actuators/current") == 0
    finally:
        s.close()
