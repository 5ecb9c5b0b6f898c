"""The drives' readings in a recording: ``wb_sim_record`` of the humanoid node with
``actuators.model: dc_motor`` on its legs (lockstep, the example PD controller), read back
by :func:`history_from_bag` and plotted by ``wb_sim_plot``.

Checked:

* the bag has ``actuators/current``, ``actuators/voltage``, ``actuators/temperature``
  (std_msgs/Float64MultiArray) beside the node's other topics, each at its 100 Hz: about
  one message per ten joint states, the three counts within a message or two of each other
  (their subscriptions start a moment apart);
* each reading lands on the joint state of its step (the type has no stamp; the reader
  takes the joint state received last before it): the drive's torque N eta kt I is that
  joint state's effort, and its speed (U - R I) / (kt N) the previous joint state's
  velocity (the step's start), on every sample where the previous state was recorded;
* a reading on (nearly) every joint state at a whole 10 ms step (the stream's decimation
  from t = 0), and (nearly) none elsewhere;
* ``wb_sim_plot`` on the bag writes the eight figures, the drives' three among them.

Measured when written (3 s of wall time): 226 messages on each reading topic against 2248
joint states; readings on all 225 samples at whole 10 ms steps and on none elsewhere; the
drive's torque equal to the effort (difference 0), its speed to the previous velocity
within 2.7e-16 rad/s.

Skipped without rclpy, rosbags or matplotlib unless ``WB_SIM_REQUIRE_ROS=1``.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from helpers.extras import require_ros

require_ros("sensor_msgs.msg", "geometry_msgs.msg", "nav_msgs.msg", "std_msgs.msg",
            "rcl_interfaces.srv", "rosgraph_msgs.msg", "rosbags", "matplotlib")

from helpers.ros import Proc, fresh_domain_id, pd_controller_argv, sim_node_argv  # noqa: E402
from wb_sim.ros.record import ACTUATOR_TOPICS  # noqa: E402
from wb_sim.tools.bag import bag_topics, history_from_bag  # noqa: E402
from wb_sim.tools.plot import main as plot_main  # noqa: E402
from wb_sim.tools.recording import operating_points  # noqa: E402

STARTUP_TIMEOUT = 30.0
RECORD_WALL_S = 3.0
LEGS = [f"{s}_{j}" for s in "lr" for j in ("hip_yaw", "hip_roll", "hip_pitch", "knee",
                                           "ankle_pitch", "ankle_roll")]
NS = 1_000_000_000


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drives")
    out = tmp / "drives"
    domain = fresh_domain_id()
    procs = []
    try:
        node = Proc("wb_sim", sim_node_argv(
            "sync.mode:=lockstep", "actuators.model:=dc_motor",
            f"actuators.joints:=[{','.join(LEGS)}]", "publish.stats_period_s:=0.0"),
            domain, tmp)
        procs.append(node)
        rec = Proc("record", [sys.executable, "-m", "wb_sim.ros.record", "-o", str(out),
                              "--wait", str(STARTUP_TIMEOUT)], domain, tmp)
        procs.append(rec)
        assert rec.wait_for_log("recording 18 topics into", STARTUP_TIMEOUT), \
            "\n".join(p.describe() for p in procs)
        ctrl = Proc("controller", pd_controller_argv(), domain, tmp)
        procs.append(ctrl)
        assert node.wait_for_log("the simulation starts", STARTUP_TIMEOUT), \
            "\n".join(p.describe() for p in procs)
        time.sleep(RECORD_WALL_S)
        code = rec.interrupt(20.0)
        log = rec.log()
        assert node.alive() and ctrl.alive(), "\n".join(p.describe() for p in procs)
    finally:
        for p in procs:
            p.close()
    assert code == 0, log
    return out


def test_the_bag_has_the_three_readings(bag):
    from wb_sim.ros.conversions import ACTUATOR_READINGS

    assert ACTUATOR_TOPICS == tuple(name for name, _ in ACTUATOR_READINGS)
    topics = bag_topics(bag)
    counts = [topics[f"/actuators/{r}"] for r in ACTUATOR_TOPICS]
    assert all(t == "std_msgs/msg/Float64MultiArray" for t, _ in counts), counts
    n = [c for _, c in counts]
    js = topics["/joint_states"][1]
    assert max(n) - min(n) <= 2, n
    # every 10th step, and the states published out of turn (the first, the resends), as
    # test_record.py's contact_state
    assert min(n) > 50 and 0.8 <= n[0] / (js / 10) <= 1.25, (n, js)


def test_the_readings_land_on_their_joint_states(bag):
    h = history_from_bag(bag)
    assert h.actuator_model == "dc_motor" and h.actuator_joints == tuple(LEGS)
    d = h.drive_index
    has = np.isfinite(h.motor_current).all(axis=1) & np.isfinite(h.motor_voltage).all(axis=1)
    # a reading at (nearly) every 10th step from t = 0, the stream's 100 Hz; a state sent
    # again out of turn (lockstep's resend) brings its readings too
    tenth = np.round(h.t * 1e3).astype(int) % 10 == 0
    assert has[tenth].sum() >= 0.9 * tenth.sum() and tenth.sum() > 50, (has.sum(), tenth.sum())
    assert has[~tenth].sum() <= 0.05 * has.sum(), h.t[has & ~tenth][:20]
    speed, torque = operating_points(h)
    # the readings carry no stamp (Float64MultiArray): each is put on the joint state received
    # just before it, and DDS may deliver the two topics of a step out of order now and then
    # (CI: 1 of 340 readings on its neighbour's step); all others exactly on theirs
    exact = np.isclose(torque[has], h.applied_torques[has][:, d], rtol=1e-9, atol=1e-9).all(axis=1)
    assert exact.mean() >= 0.99, (int((~exact).sum()), int(exact.size))
    prev = np.flatnonzero(has)
    prev = prev[(prev > 0) & np.isclose(h.t[prev] - h.t[np.maximum(prev - 1, 0)], h.dt)]
    assert prev.size > 0.9 * has.sum()
    same = np.isclose(speed[prev], h.joint_velocities[prev - 1][:, d], rtol=1e-9,
                      atol=1e-9).all(axis=1)
    assert same.mean() >= 0.99, (int((~same).sum()), int(same.size))
    temp = h.motor_temperature[has]
    assert (temp >= 25.0).all() and (temp < 90.0).all()


def test_wb_sim_plot_draws_the_drives_of_a_bag(bag, tmp_path, capsys):
    out = tmp_path / "plots"
    assert plot_main([str(bag), "-o", str(out)]) == 0
    # the five, contact_state.png, the three of the drives, solver_health.png
    assert "10 figures" in capsys.readouterr().out
    for name in ("motor_current.png", "motor_temperature.png", "torque_speed.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 20_000, name
