"""The node on rclpy's public API only (issue 14): ``WB_SIM_RCLPY_PUBLIC_API=1`` forces
every fallback of wb_sim.ros.rclpy_shim (``Publisher.publish`` instead of
``publish_raw``, executor-delivered command callbacks instead of the physics loop's
own takes, an event instead of an rcl wait set in lockstep). The node must still
publish, apply commands, count and survive bad input, and step in lockstep.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from helpers.extras import require_ros

require_ros()

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

import wb_sim  # noqa: E402
from helpers.ros import HUMANOID_YAML, SimSetup, stamp_ns  # noqa: E402

PUBLIC = {"WB_SIM_RCLPY_PUBLIC_API": "1"}
STATE_QOS = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)
DEEP_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
NAMES = list(wb_sim.Simulator.from_yaml(HUMANOID_YAML).joint_names)
NJ = len(NAMES)


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    s = SimSetup(tmp_path_factory.mktemp("public_api"), "publish.stats_period_s:=1.0",
                 "command.timeout_s:=0.0", "realtime_priority:=0", env=PUBLIC)
    try:
        yield s
    finally:
        s.close()


def test_the_node_says_it_uses_the_public_api_only(public):
    assert public.node.wait_for_log("rclpy: public API only (forced by WB_SIM_RCLPY_PUBLIC_API=1)",
                                    10.0, spin=public.ros.spin_for), public.describe()
    assert "internals used" not in public.node.log()


def test_it_publishes_and_applies_a_command_at_the_next_step(public):
    s, ros = public, public.ros
    jc = ros.publisher(JointState, "joint_commands")
    js = ros.record(JointState, "joint_states", STATE_QOS)
    knee = NAMES.index("l_knee")
    try:
        s.pause(True)
        ros.spin_for(0.3)
        jc.publish(JointState(name=["l_knee"], effort=[7.25]))
        ros.spin_for(0.5)  # the node's executor delivers it to the gate
        n = len(js.msgs)
        assert s.step().success
        assert ros.spin_until(lambda: len(js.msgs) > n, 5)
        assert js.msgs[-1].effort[knee] == 7.25
        assert all(e == 0.0 for i, e in enumerate(js.msgs[-1].effort) if i != knee)
    finally:
        s.pause(False)
        ros.stop_recording(js)
        ros.node.destroy_publisher(jc)


def test_bad_input_is_rejected_counted_and_the_node_lives_on(public):
    s, ros = public, public.ros
    jc = ros.publisher(JointState, "joint_commands")
    ec = ros.publisher(Float64MultiArray, "effort_commands")
    wr = ros.publisher(WrenchStamped, "external_wrench")
    bad_wrench = WrenchStamped()
    bad_wrench.header.frame_id = "no_such_link"
    cases = [(jc, JointState(name=["l_knee"], effort=[math.nan]),
              "'joint_commands': non-finite effort for l_knee"),
             (jc, JointState(name=["no_such_joint"], effort=[1.0]),
              "'joint_commands': unknown joint 'no_such_joint'"),
             (ec, Float64MultiArray(data=[1.0] * (NJ - 1)),
              f"'effort_commands': expected {NJ} efforts"),
             (wr, bad_wrench, "frame 'no_such_link' is not in the model")]
    try:
        for pub, msg, text in cases:
            deadline = time.monotonic() + 10
            while text not in s.node.log() and time.monotonic() < deadline:
                pub.publish(msg)
                ros.spin_for(0.2)
            assert text in s.node.log(), s.describe()
        assert s.node.wait_for_log("rejected messages: ", 5.0, spin=ros.spin_for)
        js = ros.record(JointState, "joint_states", STATE_QOS)
        assert ros.spin_until(lambda: len(js.msgs) >= 50, 10)
        ros.stop_recording(js)
        stamps = [stamp_ns(m) for m in js.msgs]
        assert all(b > a for a, b in zip(stamps, stamps[1:]))
        assert np.isfinite([list(m.position) + list(m.effort) for m in js.msgs]).all()
        assert s.node.alive(), s.describe()
    finally:
        for p in (jc, ec, wr):
            ros.node.destroy_publisher(p)


def test_lockstep_steps_once_per_stamped_answer(tmp_path):
    """Lockstep waits on the executor-delivered commands: 100 answers, 100 steps, each
    state's stamp one step after the one it answered."""
    s = SimSetup(tmp_path, "sync.mode:=lockstep", "real_time_factor:=0.0", env=PUBLIC)
    try:
        ros = s.ros
        pub = ros.node.create_publisher(JointState, "joint_commands", DEEP_QOS)
        states: list[int] = []
        sub = ros.node.create_subscription(JointState, "joint_states",
                                           lambda m: states.append(stamp_ns(m)), STATE_QOS)
        assert ros.spin_until(lambda: pub.get_subscription_count() > 0, 10)
        answered: list[int] = []
        t0 = time.monotonic()
        while len(answered) < 100 and time.monotonic() - t0 < 60:
            ros.executor.spin_once(timeout_sec=0.01)
            for st in [x for x in states if x not in answered]:
                m = JointState(name=NAMES, effort=[0.0] * NJ)
                m.header.stamp.sec, m.header.stamp.nanosec = divmod(st, 1_000_000_000)
                pub.publish(m)
                answered.append(st)
        assert len(answered) >= 100, s.describe()
        steps = sorted(set(answered))
        # resends repeat a stamp; every new state is exactly one step (1 ms) after the last
        assert np.all(np.diff(steps)[:99] == 1_000_000), np.diff(steps)[:99]
        ros.node.destroy_subscription(sub)
        ros.node.destroy_publisher(pub)
        assert s.node.alive()
    finally:
        s.close()


def test_this_rclpy_has_every_internal_the_shim_uses():
    """On the installed rclpy (CI runs this file on Kilted and on Jazzy, docs/testing.md)
    every internal is there: a new rclpy that drops one turns this red instead of leaving
    the node on the slower path unnoticed."""
    import os
    from wb_sim.ros import rclpy_shim
    if os.environ.get(rclpy_shim.FORCE_PUBLIC_ENV, "") not in ("", "0"):
        pytest.skip(f"{rclpy_shim.FORCE_PUBLIC_ENV} is set in this environment")
    assert rclpy_shim.INTERNALS == {"RCLError": True, "publish_raw": True,
                                    "polled subscriptions": True, "parameter overrides": True,
                                    "events wait": True, "served requests": True}
    assert ("internals used: RCLError, publish_raw, polled subscriptions, parameter overrides, "
            "events wait, served requests" in rclpy_shim.describe())


def test_the_environment_variable_turns_every_internal_off():
    import subprocess
    import sys
    code = ("from wb_sim.ros import rclpy_shim as s; "
            "print(s.INTERNALS['publish_raw'], s.INTERNALS['polled subscriptions'], s.describe())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, **PUBLIC}).stdout
    assert out.startswith("False False rclpy: public API only"), out


def test_the_events_executor_serves_the_command_subscriptions_on_this_rclpy(capfd):
    """Lockstep's wait (``CommandIntake.wait_events``) on the installed rclpy: its
    EventsExecutor accepts the stand-in node holding only the polled command
    subscriptions and runs each command's callback on the waiting thread, in order. An
    rclpy whose executor reads more of a node would take the wait-set fallback (with a
    warning): the node would still work, more slowly, and this turns red."""
    import threading

    from helpers.ros import RosClient, fresh_domain_id
    from rclpy.node import Node
    from wb_sim.ros import rclpy_shim
    if rclpy_shim.FORCED_PUBLIC:
        pytest.skip(f"{rclpy_shim.FORCE_PUBLIC_ENV} is set in this environment")

    class Polled(rclpy_shim.PolledNodeMixin, Node):
        pass

    client = RosClient(fresh_domain_id())
    node = Polled("wb_sim_intake_test", context=client.context)
    intake = rclpy_shim.CommandIntake(node)
    got: list[tuple[float, str]] = []
    try:
        assert intake.polled
        intake.subscribe(Float64MultiArray, "commands",
                         lambda m: got.append((m.data[0], threading.current_thread().name)),
                         DEEP_QOS)
        pub = client.node.create_publisher(Float64MultiArray, "commands", DEEP_QOS)
        assert client.spin_until(lambda: pub.get_subscription_count() > 0, 10)
        for i in range(20):
            pub.publish(Float64MultiArray(data=[float(i)]))
            deadline = time.monotonic() + 5
            while len(got) <= i and time.monotonic() < deadline:
                intake.wait_events(0.5)
        assert rclpy_shim.INTERNALS["events wait"], capfd.readouterr().err
        assert type(intake._events).__name__ == "EventsExecutor"
        me = threading.current_thread().name
        assert got == [(float(i), me) for i in range(20)]
    finally:
        intake.close()
        node.destroy_node()
        client.close()
