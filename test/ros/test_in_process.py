"""In-process controllers: ``controller.callable`` runs a ``wb_sim.control`` controller inside
the node at the physics rate, with every ROS output on.

Numbers checked: the humanoid stands 10 s under the example PD run in-process
(``wb_sim.controllers:pd_gravity``), and every joint state the node publishes equals the
headless core run with the same controller (``wb_sim.control.ControllerLoop``) bit for bit;
commands on topics are refused and counted; a controller that raises ends the node with
exit code 1 and says why; lockstep with an in-process controller is refused at the start.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np
import pytest

from helpers.extras import require_ros

require_ros()

from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

import wb_sim  # noqa: E402
from wb_sim.config import read_yaml_params  # noqa: E402
from wb_sim.control import ControllerLoop  # noqa: E402
from helpers.ros import (HUMANOID_YAML, STARTUP_TIMEOUT, Proc, SimSetup,  # noqa: E402
                         fresh_domain_id, pd_gains_param, sim_node_argv, stamp_ns)

DT_NS = 1_000_000
STATE_QOS = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
PD = "wb_sim.controllers:pd_gravity"


def _headless(seconds: float) -> dict[int, tuple]:
    sim = wb_sim.Simulator.from_yaml(HUMANOID_YAML)
    g = read_yaml_params(HUMANOID_YAML, node_name="wb_sim_pd_controller")
    loop = ControllerLoop(sim, PD, {"kp": g["kp"], "kd": g["kd"]})
    out = {}
    for k in range(round(seconds / sim.dt) + 1):
        out[k * DT_NS] = (tuple(sim.joint_positions), tuple(sim.joint_velocities))
        sim.step(loop.torques())
    return out


def test_the_humanoid_stands_10_s_under_the_in_process_pd_bit_identical_to_headless(tmp_path):
    # real time: the node steps from its start, and this test's reader matches seconds later
    # on a loaded machine; every state it gets must be the headless run's, the last included
    s = SimSetup(tmp_path, f"controller.callable:={PD}", pd_gains_param(), "real_time_factor:=1.0",
                 "stop_after_s:=10.0", "publish.stats_period_s:=2.0")
    try:
        js = s.ros.record(JointState, "joint_states", STATE_QOS)
        assert s.node.wait_for_log("stop_after_s = 10 s of simulated time reached", 60,
                                   spin=s.ros.spin_for), s.describe()
        # the last state went out before that line; this reader takes it once it has caught
        # up with the 1 kHz stream (CI's Jazzy run, beside the other test worker: it was more
        # than 0.5 s behind)
        s.ros.spin_until(lambda: js.msgs and stamp_ns(js.msgs[-1]) >= 10 * 10**9, 10.0)
        s.ros.stop_recording(js)
        assert s.node.popen.wait(10) == 0, s.describe()
    finally:
        s.close()
    log = s.node.log()
    assert "in-process controller 'wb_sim.controllers:pd_gravity'" in log
    got = {stamp_ns(m): (tuple(m.position), tuple(m.velocity)) for m in js.msgs}
    ref = _headless(10.0)
    assert 10 * 10**9 in got, "the last joint state (t = 10 s) did not arrive"
    assert len(got) >= 2000, f"only {len(got)} of 10001 joint states received"
    bad = [t for t in sorted(got) if got[t] != ref[t]]
    assert not bad, (f"{len(bad)} of {len(got)} joint states differ from the headless run, "
                     f"first at t = {bad[0] / 1e9} s")
    sim = wb_sim.Simulator.from_yaml(HUMANOID_YAML)
    assert "in-process controller called 10000 times in all" in log, log[-2000:]
    # it stands: the final joint posture is the initial one within 0.02 rad
    assert np.abs(np.array(got[10 * 10**9][0]) - sim.joint_positions).max() < 0.02


FROZEN_READER = """
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
rclpy.init()
node = rclpy.create_node("frozen_reader")
got = []
node.create_subscription(JointState, "joint_states", got.append,
                         QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
while rclpy.ok() and not got:
    rclpy.spin_once(node, timeout_sec=0.1)
print("matched", flush=True)
while rclpy.ok():
    rclpy.spin_once(node, timeout_sec=0.1)
"""


def test_the_node_waits_at_most_2_s_for_a_subscriber_that_does_not_acknowledge(tmp_path):
    # a reliable reader frozen (SIGSTOP) before the last samples: the node waits for its
    # acknowledgement before its publishers go (a reader that was behind then gets the
    # final state), at most FLUSH_S, names the topic in a warning, and exits with 0
    s = SimSetup(tmp_path, f"controller.callable:={PD}", pd_gains_param(), "real_time_factor:=1.0",
                 "stop_after_s:=6.0", "publish.stats_period_s:=2.0")
    reader = s.start("reader", [sys.executable, "-c", FROZEN_READER])
    try:
        assert reader.wait_for_log("matched", STARTUP_TIMEOUT, spin=s.ros.spin_for), s.describe()
        assert s.node.alive(), s.describe()
        os.kill(reader.pid, signal.SIGSTOP)
        assert s.node.wait_for_log("stopped at t = 6.000 s", 60, spin=s.ros.spin_for), \
            s.describe()
        stopped = time.monotonic()
        assert s.node.popen.wait(15) == 0, s.describe()
        waited = time.monotonic() - stopped
        log = s.node.log()
        assert "a subscriber of /joint_states had not acknowledged the last samples 2 s after" in log, \
            log[-2000:]
        assert 1.5 < waited < 12.0, f"exited {waited:.1f} s after it stopped"
    finally:
        os.kill(reader.pid, signal.SIGCONT)
        s.close()


def test_commands_on_topics_are_refused_beside_an_in_process_controller(tmp_path):
    s = SimSetup(tmp_path, f"controller.callable:={PD}", pd_gains_param(), "real_time_factor:=1.0",
                 "publish.stats_period_s:=0.5")
    try:
        pub = s.ros.publisher(JointState, "joint_commands")
        for _ in range(5):
            pub.publish(JointState(name=["l_knee"], effort=[50.0]))
            s.ros.spin_for(0.1)
        assert s.node.wait_for_log("joint_commands in-process controller", 10,
                                   spin=s.ros.spin_for), s.describe()
        assert "drives the joints (controller.callable)" in s.node.log()
    finally:
        s.close()


def test_a_failing_in_process_controller_ends_the_node_with_exit_1(tmp_path):
    domain = fresh_domain_id()
    p = Proc("wb_sim", sim_node_argv(f"controller.callable:={PD}",
                                     'controller.params:="{kp: [1.0, 2.0], kd: 1.0}"'),
             domain, tmp_path)
    try:
        assert p.popen.wait(STARTUP_TIMEOUT) == 2, p.describe()  # the factory fails at start
        assert "cannot start" in p.log() and "controller" in p.log(), p.log()
    finally:
        p.close()
    ctrl = tmp_path / "bad_ctrl.py"
    ctrl.write_text("import numpy as np\n"
                    "def make(sim, case):\n"
                    "    def ctrl(obs):\n"
                    "        if obs.t > 0.05:\n"
                    "            raise RuntimeError('my controller broke')\n"
                    "        return np.zeros(sim.nj)\n"
                    "    return ctrl\n")
    env_path = str(tmp_path)
    from helpers.ros import ros_env
    env = ros_env(domain)
    env["PYTHONPATH"] = env_path + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = Proc("wb_sim2", sim_node_argv("controller.callable:=bad_ctrl:make"), domain, tmp_path,
             env=env)
    try:
        assert p.popen.wait(60) == 1, p.describe()
        assert "failed at t = 0.05" in p.log() and "my controller broke" in p.log(), p.log()
    finally:
        p.close()


@pytest.mark.parametrize("case", ["lockstep", "not a factory"])
def test_in_process_controllers_refuse_what_cannot_work_at_the_start(tmp_path, case):
    args = {"lockstep": (f"controller.callable:={PD}", pd_gains_param(), "sync.mode:=lockstep"),
            "not a factory": ("controller.callable:=wb_sim.controllers:nothing_here",)}[case]
    p = Proc("wb_sim", sim_node_argv(*args), fresh_domain_id(), tmp_path)
    try:
        assert p.popen.wait(STARTUP_TIMEOUT) == 2, p.describe()
        expected = {"lockstep": "waits for an external controller's answers",
                    "not a factory": "has no attribute 'nothing_here'"}[case]
        assert expected in p.log(), p.log()
    finally:
        p.close()
