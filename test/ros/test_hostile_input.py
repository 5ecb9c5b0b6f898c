"""Hostile input to the ROS node (issue 13), one node process for many cases:

* live parameters: out of range, NaN, wrong type, read-only, undeclared, a good
  and a bad value in one atomic request: each refused with the reason, the
  value unchanged (1e300 as friction coefficient killed the node, exit 0);
* a real_time_factor of 1e-9 does not freeze the node: a new value, a reset
  and SIGTERM are served at once;
* malformed messages on every input topic: counted per reason, the node goes
  on; a valid command followed by 50 malformed ones in the queue is still the
  one applied; a flood of 3000 is counted in the stats line;
* services: bursts of 50 calls are all answered;
* startup: values out of range (ours and rclpy's own descriptor ranges),
  invalid topic names, absurd grids: the clean FATAL with exit code 2; a second
  node of the same name is refused.

After each case: the node process is alive, answers a parameter request and
publishes joint states with finite values and increasing stamps.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest

from helpers.extras import require_ros

require_ros()

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rcl_interfaces.srv import SetParameters, SetParametersAtomically  # noqa: E402
from rclpy._rclpy_pybind11 import RCLError  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from std_srvs.srv import SetBool, Trigger  # noqa: E402

import wb_sim  # noqa: E402
from helpers.ros import (HUMANOID_YAML, Proc, SimSetup, fresh_domain_id,  # noqa: E402
                         ros_env, sim_node_argv, stamp_ns)

STATE_QOS = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)
#: the test's publishers keep what they send (a depth-1 writer may overwrite a
#: message not yet delivered when it sends 50 in a row)
DEEP_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
NAMES = list(wb_sim.Simulator.from_yaml(HUMANOID_YAML).joint_names)
NJ = len(NAMES)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The humanoid node without a controller (the robot folds up, which does not
    matter here; the watchdog is off), stats every second, the streams nobody
    reads at 100 Hz."""
    s = SimSetup(tmp_path_factory.mktemp("hostile"), "publish.stats_period_s:=1.0",
                 "command.timeout_s:=0.0", "publish.odom_rate_hz:=100.0",
                 "publish.contact_wrench_rate_hz:=100.0", "publish.imu_rate_hz:=100.0")
    pubs = {"joint_commands": s.ros.node.create_publisher(JointState, "joint_commands", DEEP_QOS),
            "effort_commands": s.ros.node.create_publisher(Float64MultiArray, "effort_commands",
                                                           DEEP_QOS),
            "external_wrench": s.ros.node.create_publisher(WrenchStamped, "external_wrench",
                                                           DEEP_QOS)}
    assert s.ros.spin_until(lambda: all(p.get_subscription_count() for p in pubs.values()), 10)
    s.pubs = pubs
    try:
        yield s
    finally:
        s.close()


def assert_healthy(s: SimSetup, what: str = "") -> None:
    """Alive, answering a parameter request, publishing finite joint states with
    increasing stamps."""
    assert s.node.alive(), f"{what}: the node died\n{s.describe()}"
    assert s.ros.get_parameters("real_time_factor")["real_time_factor"] >= 0
    js = s.ros.record(JointState, "joint_states", STATE_QOS)
    ok = s.ros.spin_until(lambda: len(js.msgs) >= 20, 10)
    s.ros.stop_recording(js)
    assert ok, f"{what}: {len(js.msgs)} joint states in 10 s\n{s.describe()}"
    stamps = [stamp_ns(m) for m in js.msgs]
    assert all(b > a for a, b in zip(stamps, stamps[1:])), f"{what}: stamps not increasing"
    values = np.array([list(m.position) + list(m.velocity) + list(m.effort) for m in js.msgs])
    assert values.shape[1] == 3 * NJ and np.isfinite(values).all(), what


# ----------------------------------------------------------------------------- live parameters

@pytest.mark.parametrize("name, value, why", [
    ("contact.friction_coefficient", 1e300, "contact.friction_coefficient"),
    ("contact.friction_coefficient", math.nan, "contact.friction_coefficient"),
    ("contact.friction_coefficient", -0.5, "contact.friction_coefficient"),
    ("contact.stiffness", "abc", "contact.stiffness"),
    ("contact.stiffness", math.inf, "contact.stiffness"),
    ("contact.damping", [1.0, 2.0], "contact.damping"),
    ("contact.tangential_damping", -1.0, "contact.tangential_damping"),
    ("real_time_factor", -1.0, "real_time_factor"),
    ("real_time_factor", "fast", "real_time_factor"),
    ("real_time_factor", True, "real_time_factor"),
    ("command.timeout_s", math.nan, "command.timeout_s"),
    ("command.timeout_action", "explode", "command.timeout_action"),
    ("publish.stats_period_s", -1.0, "publish.stats_period_s"),
    ("external_wrench.duration_s", 0.0, "external_wrench.duration_s"),
    ("physics_rate_hz", 1e300, ""),  # read-only
    ("contact.reference_depth", 0.5, ""),  # read-only
])
def test_bad_live_parameter_is_refused_and_the_node_lives_on(hostile, name, value, why):
    ros = hostile.ros
    before = ros.get_parameters(name)[name]
    r = ros.set_parameter(name, value)
    assert not r.successful, f"{name} = {value!r} accepted"
    assert why in r.reason, r.reason
    after = ros.get_parameters(name)[name]
    assert after == before or (isinstance(before, float) and math.isnan(before) and math.isnan(after))
    assert_healthy(hostile, f"{name} = {value!r}")


def _declared(name: str):
    from wb_sim.config import PARAMETER_BY_KEY
    from wb_sim.ros.parameters import NODE_PARAMETERS
    return {**PARAMETER_BY_KEY, **{p.key: p for p in NODE_PARAMETERS}}[name]


@pytest.mark.parametrize("name, value", [
    ("contact.stiffness", math.inf), ("contact.stiffness", "abc"), ("real_time_factor", "fast"),
    ("command.timeout_action", "explode"), ("contact.damping", True)])
def test_a_refused_live_value_gets_the_declarations_message(hostile, name, value):
    """One declaration, one check: ``ros2 param set`` answers with the very ConfigError
    text that the declaration gives, as the Python API does."""
    with pytest.raises(wb_sim.ConfigError) as declared:
        _declared(name).coerce(value)
    r = hostile.ros.set_parameter(name, value)
    assert not r.successful and r.reason == str(declared.value), r.reason
    if name.startswith("contact."):
        with pytest.raises(wb_sim.ConfigError) as api:
            wb_sim.Simulator.from_yaml(HUMANOID_YAML).set_contact_parameters(**{name: value})
        assert str(api.value) == r.reason
    assert_healthy(hostile, f"{name} = {value!r}")


def test_the_nodes_descriptors_are_built_from_the_declarations(hostile):
    from rcl_interfaces.srv import DescribeParameters
    from wb_sim.config import PARAMETERS
    from wb_sim.ros.parameters import NODE_PARAMETERS, descriptor
    names = [p.key for p in PARAMETERS + NODE_PARAMETERS]
    res = hostile.ros.call(DescribeParameters, "/wb_sim/describe_parameters",
                           DescribeParameters.Request(names=names), idempotent=True)
    assert len(res.descriptors) == len(names)

    def fields(d):
        return (d.name, d.description, d.read_only, d.dynamic_typing, d.additional_constraints,
                list(d.floating_point_range), list(d.integer_range))

    for name, d in zip(names, res.descriptors):
        assert fields(d) == fields(descriptor(name, _declared(name))), name


def test_an_undeclared_parameter_is_refused(hostile):
    r = hostile.ros.set_parameter("no_such_parameter", 1.0)
    assert not r.successful
    assert_healthy(hostile, "undeclared")


def test_an_atomic_request_with_one_bad_value_changes_nothing(hostile):
    ros = hostile.ros
    before = ros.get_parameters("contact.stiffness", "contact.friction_coefficient")
    req = SetParametersAtomically.Request(parameters=[
        Parameter("contact.stiffness", value=50000.0).to_parameter_msg(),
        Parameter("contact.friction_coefficient", value=1e300).to_parameter_msg()])
    res = ros.call(SetParametersAtomically, "/wb_sim/set_parameters_atomically", req).result
    assert not res.successful
    assert ros.get_parameters("contact.stiffness", "contact.friction_coefficient") == before
    assert_healthy(hostile, "atomic")


def test_one_request_with_a_good_and_a_bad_value_applies_the_good_one_only(hostile):
    ros = hostile.ros
    req = SetParameters.Request(parameters=[
        Parameter("contact.friction_coefficient", value=0.8).to_parameter_msg(),
        Parameter("contact.friction_coefficient", value=math.nan).to_parameter_msg()])
    results = ros.call(SetParameters, "/wb_sim/set_parameters", req).results
    assert [r.successful for r in results] == [True, False]
    assert ros.get_parameters("contact.friction_coefficient")["contact.friction_coefficient"] == 0.8
    assert ros.set_parameter("contact.friction_coefficient", 1.0).successful
    assert_healthy(hostile, "mixed request")


def test_a_tiny_real_time_factor_does_not_freeze_the_node(hostile):
    """1e-9 asks for 1e6 s per step: the loop sleeps in slices, so a new value,
    a reset and a parameter read are served at once."""
    ros = hostile.ros
    clock = ros.record(Clock, "/clock", STATE_QOS)
    try:
        assert ros.set_parameter("real_time_factor", 1e-9).successful
        ros.spin_for(0.5)
        n = len(clock.msgs)
        ros.spin_for(1.0)
        assert len(clock.msgs) <= n + 1, "the clock still runs at a real-time factor of 1e-9"
        t0 = time.monotonic()
        hostile.reset()  # answered while the loop sleeps
        assert ros.get_parameters("real_time_factor")["real_time_factor"] == 1e-9
        assert ros.set_parameter("real_time_factor", 1.0).successful
        n = len(clock.msgs)
        assert ros.spin_until(lambda: len(clock.msgs) > n + 100, 5.0), \
            "the clock did not resume after real_time_factor went back to 1"
        # seconds, not the minutes a call queued behind the sleeping loop would take
        # (each call also waits 10 s at most: RosClient.call)
        assert time.monotonic() - t0 < 10.0
    finally:
        ros.set_parameter("real_time_factor", 1.0)
        ros.stop_recording(clock)
    assert_healthy(hostile, "tiny real-time factor")


# ----------------------------------------------------------------------------- topics

def _js(names, efforts, stamp_sec=0):
    m = JointState(name=list(names), effort=[float(e) for e in efforts])
    m.header.stamp.sec = stamp_sec
    return m


def _wrench(frame, force=(1.0, 0.0, 0.0), torque=(0.0, 0.0, 0.0)):
    w = WrenchStamped()
    w.header.frame_id = frame
    w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = force
    w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = torque
    return w


_nan_all = [0.0] * NJ
_nan_all[3] = math.nan

BAD_MESSAGES = [
    ("joint_commands", _js(["l_knee"], [math.nan]), "non-finite effort for l_knee"),
    ("joint_commands", _js(["r_knee"], [math.inf]), "non-finite effort for r_knee"),
    ("joint_commands", _js(["l_knee", "nope"], [1.0, 2.0]), "unknown joint 'nope'"),
    ("joint_commands", _js(["l_knee", "r_knee"], [1.0]), "2 names but 1 efforts"),
    ("joint_commands", _js([], []), "no joint names"),
    ("joint_commands", _js(["l_knee", "l_knee"], [1.0, 2.0]), "duplicated joint names"),
    ("joint_commands", _js(["l_knee", "r_knee"], [1e200, 1e200]), "efforts too large"),
    ("joint_commands", _js([""], [1.0]), "unknown joint ''"),
    ("effort_commands", Float64MultiArray(data=[0.0] * (NJ - 1)), f"expected {NJ} efforts"),
    ("effort_commands", Float64MultiArray(data=[0.0] * (NJ + 5)), f"got {NJ + 5}"),
    ("effort_commands", Float64MultiArray(data=_nan_all), f"non-finite effort for {NAMES[3]}"),
    ("effort_commands", Float64MultiArray(data=[]), "got 0"),
    ("external_wrench", _wrench("no_such_link"), "frame 'no_such_link' is not in the model"),
    ("external_wrench", _wrench(""), "header.frame_id is empty"),
    ("external_wrench", _wrench("pelvis", force=(math.nan, 0.0, 0.0)), "non-finite wrench"),
    ("external_wrench", _wrench("pelvis", torque=(0.0, math.inf, 0.0)), "non-finite wrench"),
]


@pytest.mark.parametrize("topic, msg, text", BAD_MESSAGES,
                         ids=[f"{t}-{x[:24]}" for t, _, x in BAD_MESSAGES])
def test_malformed_message_is_refused_with_its_reason(hostile, topic, msg, text):
    s = hostile
    log0 = len(s.node.log())
    deadline = time.monotonic() + 5.0  # a reason is logged at most once a second per kind
    while text not in s.node.log()[log0:]:
        assert time.monotonic() < deadline, f"'{text}' not logged\n{s.describe()}"
        s.pubs[topic].publish(msg)
        s.ros.spin_for(0.1)
    assert not any("push on '" in ln for ln in s.node.log()[log0:].splitlines())
    assert_healthy(hostile, text)


def _applied_after_one_step(s: SimSetup):
    js = s.ros.record(JointState, "joint_states", STATE_QOS)
    try:
        # paused, nothing arrives to show the subscription is matched: ask DDS, then
        # leave the node's writer time to match it in turn (rclpy has no
        # get_publisher_count before Iron)
        if hasattr(js.sub, "get_publisher_count"):
            assert s.ros.spin_until(lambda: js.sub.get_publisher_count() > 0, 10)
        s.ros.spin_for(0.2)
        n = len(js.msgs)
        res = s.step()
        assert res.success, res.message
        assert s.ros.spin_until(lambda: len(js.msgs) > n, 5)
        return np.array(js.msgs[-1].effort)
    finally:
        s.ros.stop_recording(js)


def test_a_valid_command_is_not_evicted_by_the_malformed_ones_after_it(hostile):
    """Paused, the controller's command (l_knee 7 N*m) is followed by 50 malformed
    ones before the node takes anything: the next step applies 7 N*m (with the
    old depth-1 queue the newest, malformed one, pushed it out)."""
    s = hostile
    knee = NAMES.index("l_knee")
    s.pause(True)
    try:
        s.ros.spin_for(0.2)
        s.pubs["joint_commands"].publish(_js(["l_knee"], [7.0]))
        for k in range(50):
            s.pubs["joint_commands"].publish(_js(["l_knee"] if k % 2 else ["x"], [math.nan]))
        applied = _applied_after_one_step(s)
        assert applied[knee] == 7.0, applied[knee]
        # and the newest of several valid ones wins
        for k in (1.0, 2.0, 3.0):
            s.pubs["joint_commands"].publish(_js(["l_knee"], [k]))
            s.pubs["joint_commands"].publish(_js(["l_knee"], [math.inf]))
        applied = _applied_after_one_step(s)
        assert applied[knee] == 3.0, applied[knee]
    finally:
        s.pause(False)
        s.pubs["joint_commands"].publish(_js(NAMES, [0.0] * NJ))
    assert_healthy(hostile, "eviction")


def test_a_flood_of_malformed_messages_is_counted_not_logged(hostile):
    s = hostile
    log0 = len(s.node.log())
    bad = [m for _, m, _ in BAD_MESSAGES]
    topics = [t for t, _, _ in BAD_MESSAGES]
    sent = 0
    for k in range(3000):
        i = k % len(bad)
        try:
            s.pubs[topics[i]].publish(bad[i])
            sent += 1
        except RCLError:
            # the flooder's own reliable writer is full (its reader, the node, is a
            # busy machine's process): its publish fails after blocking; the node is
            # not at fault, so the flood goes on a little slower
            s.ros.spin_for(0.01)
        if k % 200 == 0:
            s.ros.spin_for(0.001)
    assert sent >= 1500, sent
    assert s.node.wait_for_log("rejected messages:", 5.0, count=1 + s.node.log().count(
        "rejected messages:", 0, log0), spin=s.ros.spin_for)

    def counted_so_far() -> tuple[int, list[str]]:
        # each stats line counts the rejections of its own period (the gate's counter starts
        # again after each line)
        new = s.node.log()[log0:].splitlines()
        n = 0
        for ln in new:
            if "rejected messages: " in ln:
                for item in ln.split("rejected messages: ", 1)[1].split(", "):
                    n += int(item.rsplit(" ", 1)[1])
        return n, new

    # the stats lines until the node has taken the whole flood (a busy machine's node takes
    # the queued messages over several periods: CI once read 496 of 3000 after 1.2 s)
    deadline = time.monotonic() + 15.0
    counted, new = counted_so_far()
    while counted < min(500, sent // 4) and time.monotonic() < deadline:
        s.ros.spin_for(0.5)
        counted, new = counted_so_far()
    warnings_logged = sum(1 for ln in new if "[WARN]" in ln and "rejected a" in ln)
    # most arrive; DDS drops some of a burst (CI: 736 of 3000 counted in the stats lines
    # read); the point is that they are counted, not logged one by one
    assert counted >= min(500, sent // 4), (counted, sent, new[-5:])  # DDS may drop some of a burst; most arrive
    assert warnings_logged <= 16 * 3, warnings_logged  # per kind at most once a second
    assert_healthy(hostile, "flood")


# ----------------------------------------------------------------------------- services

def _burst(s: SimSetup, srv_type, name: str, request, n: int, timeout: float = 30.0):
    # the client's own response queue must hold the burst too (its default depth is 10)
    client = s.ros.node.create_client(srv_type, name, qos_profile=DEEP_QOS)
    try:
        assert s.ros.spin_until(client.service_is_ready, 10)
        futures = [client.call_async(request) for _ in range(n)]
        assert s.ros.spin_until(lambda: all(f.done() for f in futures), timeout), \
            f"{sum(f.done() for f in futures)} of {n} calls to {name} answered"
        return [f.result() for f in futures]
    finally:
        s.ros.node.destroy_client(client)


def test_a_burst_of_50_pause_calls_is_answered(hostile):
    res = _burst(hostile, SetBool, "/wb_sim/pause", SetBool.Request(data=False), 50)
    assert all(r.success for r in res)
    assert_healthy(hostile, "pause burst")


def test_a_burst_of_300_calls_above_the_old_depth_of_100_is_answered_whole(hostile):
    """Issue 27: 300 calls at once to one service, 212 answered: DDS kept the newest 100
    requests (the services' depth) while the node answered at its paced 25 a second, and
    dropped the others without telling anyone. The depth is now SERVICE_QUEUE_DEPTH."""
    from wb_sim.ros.services import SERVICE_QUEUE_DEPTH
    assert SERVICE_QUEUE_DEPTH >= 300
    res = _burst(hostile, SetBool, "/wb_sim/pause", SetBool.Request(data=False), 300, 90.0)
    assert len(res) == 300 and all(r.success and r.message == "running" for r in res)


def test_a_burst_of_30_resets_is_answered_and_the_clock_never_goes_back(hostile):
    clock = hostile.ros.record(Clock, "/clock", STATE_QOS)
    try:
        res = _burst(hostile, Trigger, "/wb_sim/reset", Trigger.Request(), 30)
        hostile.ros.spin_for(0.3)
    finally:
        hostile.ros.stop_recording(clock)
    assert all(r.success for r in res)
    t = [stamp_ns(m) for m in clock.msgs]
    assert all(b > a for a, b in zip(t, t[1:])), "/clock went back"
    assert_healthy(hostile, "reset burst")


def test_a_burst_of_step_calls_while_running_is_refused_each(hostile):
    res = _burst(hostile, Trigger, "/wb_sim/step", Trigger.Request(), 20)
    assert not any(r.success for r in res) and all("not paused" in r.message for r in res)
    assert_healthy(hostile, "step burst")


def test_a_second_node_with_the_same_name_is_refused(hostile):
    s = hostile
    from wb_sim.ros.process import DUPLICATE_CHECK_S
    age = time.time() - s.node.started
    if age < DUPLICATE_CHECK_S + 1:  # two nodes started close together may both refuse
        s.ros.spin_for(DUPLICATE_CHECK_S + 1 - age)
    dup = s.start("duplicate", sim_node_argv())
    try:
        rc = dup.popen.wait(60)
    except subprocess.TimeoutExpired:
        rc = None
    assert rc == 2, dup.describe()
    assert "another node named '/wb_sim' is already running" in dup.log()
    assert "[FATAL]" in dup.log()
    assert_healthy(hostile, "duplicate")


def test_sigterm_at_a_tiny_real_time_factor_ends_the_node_at_once(hostile):
    """Last of the module: it ends the node."""
    s = hostile
    assert s.ros.set_parameter("real_time_factor", 1e-9).successful
    s.ros.spin_for(0.3)
    t0 = time.monotonic()
    os.kill(s.node.pid, signal.SIGTERM)
    rc = s.node.popen.wait(10)
    assert rc == 0, s.describe()
    assert time.monotonic() - t0 < 5.0  # not the 1e9 s of sleep of one step


# ----------------------------------------------------------------------------- lockstep

@pytest.fixture(scope="module")
def lockstep(tmp_path_factory):
    s = SimSetup(tmp_path_factory.mktemp("hostile_lockstep"), "sync.mode:=lockstep",
                 "real_time_factor:=0.0", "publish.stats_period_s:=1.0",
                 "publish.odom_rate_hz:=100.0", "publish.contact_wrench_rate_hz:=100.0",
                 "publish.imu_rate_hz:=100.0", "publish.tf_rate_hz:=10.0")
    try:
        yield s
    finally:
        s.close()


def test_lockstep_is_not_derailed_by_wrongly_stamped_commands(lockstep):
    """The test answers 200 joint states, each answer followed by 20 commands with a
    stamp no state has: all 200 steps are taken, none waits for the 0.5 s resend
    (with a depth-1 queue the stale ones pushed the answer out, and a flood cut
    the loop to a few steps per second)."""
    s = lockstep
    pub = s.ros.node.create_publisher(JointState, "joint_commands", DEEP_QOS)
    states: list[int] = []
    sub = s.ros.node.create_subscription(JointState, "joint_states",
                                         lambda m: states.append(stamp_ns(m)), STATE_QOS)
    try:
        assert s.ros.spin_until(lambda: pub.get_subscription_count() > 0, 10)
        stale = _js(NAMES, [0.0] * NJ, stamp_sec=999_999)
        answered: set[int] = set()
        t0 = time.monotonic()
        while len(answered) < 200 and time.monotonic() - t0 < 90:
            s.ros.executor.spin_once(timeout_sec=0.01)
            for st in [x for x in states if x not in answered]:
                m = _js(NAMES, [0.0] * NJ)
                m.header.stamp.sec, m.header.stamp.nanosec = divmod(st, 1_000_000_000)
                pub.publish(m)
                for _ in range(20):
                    pub.publish(stale)
                answered.add(st)
        elapsed = time.monotonic() - t0
    finally:
        s.ros.node.destroy_subscription(sub)
        s.ros.node.destroy_publisher(pub)
    assert len(answered) >= 200, f"{len(answered)} states in {elapsed:.1f} s\n{s.describe()}"
    # without the fix every lost answer waited for the 0.5 s resend: 100 s for 200
    assert elapsed < 40.0, f"200 steps took {elapsed:.1f} s"
    print(f"200 lockstep steps, each answer followed by 20 stale commands: {elapsed:.2f} s")
    # a stats line comes after a step: the second one (the first came with the first
    # step), once the test, now silent, counts as lost and the physics steps on
    assert s.node.wait_for_log("stale commands ignored", 15.0, count=2, spin=s.ros.spin_for), \
        s.describe()
    assert re.search(r"stale commands ignored [1-9]", s.node.log()), s.describe()
    assert s.node.alive()


# ----------------------------------------------------------------------------- startup

STARTUP_CASES = [
    ("physics_rate_hz:=1.0e+300", "physics_rate_hz"),
    ("realtime_priority:=500", "realtime_priority"),
    ("real_time_factor:=-1.0", "real_time_factor"),
    ("contact.friction_coefficient:=1.0e+300", "contact.friction_coefficient"),
    ("imu.seed:=-1", "imu.seed"),
    ("topics.joint_states:=joint states", "topics.joint_states"),
    ("topics.imu:=1abc", "topics.imu"),
    ("topics.clock:=/clock/", "topics.clock"),
    ("left_foot.grid:=[45.0, 45.0]", "left_foot.grid"),
    ("joints.limit_damping_ratio:=1.0e+6", "joints.limit_damping_ratio"),
    ("urdf_path:=/nonexistent/robot.urdf", "/nonexistent/robot.urdf"),
    ("real_time_factor:=fast", "real_time_factor"),
    ("contact.baumgarte_gain:=2.0", "contact.baumgarte_gain"),  # the declared [0, 1] range
    ("contact.model:=soft", "contact.model"),  # the declared choices, CONTACT_MODELS
    # badly formed -p arrays, which rcl itself refuses (issue 27: an rclpy traceback, exit 1)
    ("joints.kp:=[1,a]", "parameter 'joints.kp': the value '[1,a]' given with -p cannot be"),
    ("initial.base_position:=[0,0", "parameter 'initial.base_position': the value '[0,0'"),
]


def test_bad_startup_values_give_the_clean_fatal_exit_2(tmp_path):
    """All at once, each in its own DDS domain: exit code 2, a FATAL line naming
    the parameter, no Python traceback; the 45 x 45 grid is refused in seconds."""
    procs = []
    try:
        for i, (override, _) in enumerate(STARTUP_CASES):
            procs.append(Proc(f"bad{i}", sim_node_argv(override), fresh_domain_id(), tmp_path))
        for p, (override, name) in zip(procs, STARTUP_CASES):
            try:
                rc = p.popen.wait(90)
            except subprocess.TimeoutExpired:
                rc = None
            log = p.log()
            assert rc == 2, f"{override}: exit {rc}\n{log[-2000:]}"
            assert "[FATAL]" in log and "cannot start" in log and name in log, \
                f"{override}\n{log[-2000:]}"
            assert "Traceback" not in log, f"{override}\n{log[-2000:]}"
    finally:
        for p in procs:
            p.close()


@pytest.mark.parametrize("override, name", [
    ("joints.kp:=[1,a]", "joints.kp"), ("initial.base_position:=[0,0", "initial.base_position")])
def test_a_badly_formed_p_array_is_one_fatal_line_and_exit_2(override, name):
    """rcl refuses the command line before the node exists: one FATAL line naming the
    parameter (rcl's own 'Failed to parse global arguments' silenced), exit 2."""
    out = subprocess.run(sim_node_argv(override), env=ros_env(fresh_domain_id()),
                         capture_output=True, text=True, timeout=120)
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert out.returncode == 2, (out.returncode, lines)
    assert len(lines) == 1 and "[FATAL]" in lines[0], lines
    assert f"cannot start: parameter '{name}'" in lines[0] and "cannot be parsed" in lines[0]
    assert "parse.c" not in lines[0]  # rcl's source locations left out
