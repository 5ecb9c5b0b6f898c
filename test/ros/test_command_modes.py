"""Command modes over real DDS, against the installed node: ``joint_commands`` whose
position / velocity / effort fields select each joint's mode (docs/ros.md, "Command
modes"), and topic_based_ros2_control's JointStateTopicSystem, played by a stand-in
that puts on the wire what its ``write()`` publishes.

* realtime, the stand-in for a ``<ros2_control>`` system whose joints all have a
  ``position`` command interface, at a controller_manager rate of 100 Hz, the node
  configured by docs/ros.md's parameter file (the plugin's topics, gains, ...): NaN commands
  while no controller is active (``command.nan_is_unset``: refused as "no command",
  the physics waits), then a position controller holding the posture: the humanoid
  stands; then the plugin stops publishing (its threshold), the watchdog holds the
  last command (``command.timeout_action: hold``) and the humanoid still stands;
* lockstep, the controller in this process at 200 Hz (``publish.joint_states_rate_hz``),
  ``command.kp`` 1000, ``command.kd`` 20: an impedance stand (the posture as q_ref,
  v_ref 0, gravity at the state as tau_ff), a position-only trajectory of the left
  arm with its tracking error, and efforts alone applied exactly despite the gains.
  Each run's joint states equal, bit for bit, the core's driven through the same
  gate: the drive law is evaluated at every physics step from the latest command.

Skipped without rclpy unless ``WB_SIM_REQUIRE_ROS=1`` (CI).
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from helpers.extras import require_ros

require_ros("sensor_msgs.msg", "nav_msgs.msg")

from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

import wb_sim  # noqa: E402
from helpers.ros import (PKG, ROOT, STARTUP_TIMEOUT, LockstepController, Proc,  # noqa: E402
                         RosClient, SimSetup, fresh_domain_id, sim_node_argv, stamp_ns)

STATE_QOS = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)
COMMAND_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
KP, KD = 1000.0, 20.0  # N*m/rad, N*m*s/rad: the example controller's gains, as the drives'
DECIMATION = 5  # physics steps per controller cycle: 200 Hz at 1 kHz

_model = None


def model() -> wb_sim.Simulator:
    """The humanoid as the node loads it, for its joint names, initial posture and
    gravity torques (never stepped)."""
    global _model
    if _model is None:
        _model = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    return _model


# ----------------------------------------------------------------------------- the stand-in


class JointStateTopicSystemStandIn:
    """What ``joint_state_topic_hardware_interface/JointStateTopicSystem`` (formerly
    ``topic_based_ros2_control/TopicBasedSystem``) exchanges with a simulator, for a
    system whose joints each have one ``position`` command interface, at every
    controller_manager cycle: ``read()`` copies the finite positions of the latest
    JointState on ``joint_states_topic`` (SensorDataQoS: best effort, depth 5) by name;
    ``write()`` sums |state - command| over the command interfaces and, unless that
    is <= ``trigger_joint_command_threshold`` (1e-5; NaN never is), publishes on
    ``joint_commands_topic`` (``rclcpp::QoS(1)``: reliable, volatile, depth 1) a
    JointState with every joint of the system in its ``<ros2_control>`` order and the
    ``position`` field only, stamped with its own node's clock (system time, not the
    simulator's). A command interface no controller has written holds NaN."""

    def __init__(self, node, joints, initial, rate_hz: float = 100.0,
                 states_topic: str = "/robot_joint_states",
                 commands_topic: str = "/robot_joint_commands"):
        self.node = node
        self.joints = list(joints)
        self.index = {n: i for i, n in enumerate(self.joints)}
        self.state = np.array(initial, dtype=float)  # the state interfaces' initial_value
        self.command = np.full(len(self.joints), math.nan)
        self.threshold = 1e-5
        self.latest = None
        self.received = 0
        self.published = 0
        self.pub = node.create_publisher(JointState, commands_topic, QoSProfile(depth=1))
        self.sub = node.create_subscription(JointState, states_topic, self._on_state,
                                            qos_profile_sensor_data)
        self.timer = node.create_timer(1.0 / rate_hz, self.cycle)

    def _on_state(self, msg) -> None:
        self.latest = msg
        self.received += 1

    def cycle(self) -> None:
        m = self.latest
        if m is not None:  # read()
            for name, x in zip(m.name, m.position):
                if name in self.index and math.isfinite(x):
                    self.state[self.index[name]] = x
        diff = float(np.abs(self.state - self.command).sum())  # write()
        if diff <= self.threshold:
            return
        msg = JointState(name=self.joints, position=[float(x) for x in self.command])
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.pub.publish(msg)
        self.published += 1

    def activate_position_controller(self) -> None:
        """A JointTrajectoryController activating: it commands the current state (holds)."""
        self.command = self.state.copy()

    def close(self) -> None:
        self.node.destroy_timer(self.timer)
        self.node.destroy_subscription(self.sub)
        self.node.destroy_publisher(self.pub)


#: the streams the stand-in test does not need at 1 kHz
SPARE = ("publish.odom_rate_hz:=100.0", "publish.imu_rate_hz:=100.0",
         "publish.contact_wrench_rate_hz:=100.0", "publish.clock_rate_hz:=100.0",
         "publish.stats_period_s:=1.0")


def docs_parameter_file(tmp_path) -> str:
    """docs/ros.md's parameter file for topic_based_ros2_control, as a file."""
    text = (ROOT / "docs" / "ros.md").read_text()
    start = text.index("```yaml\nwb_sim:", text.index("wb_sim speaks this dialect"))
    block = text[start + len("```yaml\n"):text.index("```", start + 3)]
    path = tmp_path / "topic_based.yaml"
    path.write_text(block)
    return str(path)


def test_a_joint_state_topic_system_stand_in_drives_the_humanoid(tmp_path):
    domain = fresh_domain_id()
    ros = RosClient(domain)
    argv = sim_node_argv(*SPARE) + ["--params-file", docs_parameter_file(tmp_path)]
    node = Proc("wb_sim", argv, domain, tmp_path)
    standin = None
    try:
        assert node.wait_for_log("simulating", STARTUP_TIMEOUT, spin=ros.spin_for), \
            node.describe()
        m = model()
        order = sorted(m.joint_names)  # a <ros2_control> block has its own joint order
        initial = [m.joint_positions[m.joint_names.index(n)] for n in order]
        z0 = float(m.q[2])
        odom = ros.record(Odometry, "odom/ground_truth", STATE_QOS)
        standin = JointStateTopicSystemStandIn(ros.node, order, initial)
        # docs/ros.md's URDF: trigger_joint_command_threshold -1, it publishes at every
        # cycle (with the default, a controller holding the state it reads publishes
        # nothing, and the physics would wait for its first command for ever)
        standin.threshold = -1.0
        assert ros.spin_until(lambda: standin.pub.get_subscription_count() >= 1,
                              STARTUP_TIMEOUT), node.describe()
        # no controller active: NaN commands; refused as "no command", the physics waits
        assert node.wait_for_log("every entry is NaN", 10.0, spin=ros.spin_for), node.describe()
        ros.spin_for(0.3)
        # only the initial state (published while the physics waits): no step
        assert {m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in odom.msgs} \
            <= {0}, "the physics ran on NaN commands"
        standin.activate_position_controller()
        assert node.wait_for_log("first command received", 10.0, spin=ros.spin_for), \
            node.describe()
        ros.spin_for(2.0)
        sent = standin.published
        # a plugin with a threshold the posture is within goes quiet: the watchdog holds
        standin.threshold = 10.0
        ros.spin_for(0.8)
        assert standin.published == sent
        assert node.wait_for_log("holding the last command", 5.0, spin=ros.spin_for), \
            node.describe()
        ros.spin_for(0.5)
        log = node.log()
        z = np.array([msg.pose.pose.position.z for msg in odom.msgs])
        t_end = stamp_ns(odom.msgs[-1]) / 1e9
    finally:
        if standin is not None:
            standin.close()
        ros.close()
        node.close()
    assert sent >= 100, sent  # 100 Hz for 2 s on a loaded machine
    assert standin.received >= 100, standin.received  # SensorDataQoS reads our joint states
    assert np.abs(standin.state - np.array(initial)).max() < 0.05, "read() saw another posture"
    assert t_end >= 2.0, t_end
    drop = z0 - z.min()
    print(f"stand-in: {sent} commands before it went quiet, {standin.received} joint states read; base "
          f"sank {drop * 1e3:.1f} mm over {t_end:.2f} s")
    assert 0.0 < drop < 0.01 and z.max() < z0 + 0.002, (drop, z.max() - z0)
    for bad in ("length mismatch", "non-finite", "unknown joint", "malformed", "diverged"):
        assert bad not in log, (bad, log[-3000:])


# ----------------------------------------------------------------------------- lockstep


@pytest.fixture(scope="module")
def lockstep(tmp_path_factory):
    """The node in lockstep at 200 Hz (every stream decimated to the controller's
    rate), drives with command.kp 1000 and command.kd 20; ``sync.timeout_s`` 0 (wait for
    every answer, as ``wb_sim_replay`` does): the tests compare the closed loop with the
    core's bit for bit, and with the default 1 s (wall time) a late answer of this test's
    controller on a loaded machine counted as lost and the physics stepped on without it
    (seen at load 8 and 11 on two cores: the arm ended 1e-21 rad from the core)."""
    rate = 1000.0 / DECIMATION
    s = SimSetup(tmp_path_factory.mktemp("command_modes"), "sync.mode:=lockstep",
                 "sync.timeout_s:=0.0",
                 "real_time_factor:=0.0", f"command.kp:={KP}", f"command.kd:={KD}",
                 *(f"publish.{x}_rate_hz:={rate}" for x in ("joint_states", "odom", "imu",
                                                            "contact_wrench", "clock")))
    yield s
    s.close()


def headless(law, cycles: int) -> list[np.ndarray]:
    """The same closed loop in the core, through the node's own gate and configuration:
    the joint positions at each controller cycle."""
    from wb_sim.ros.gate import CommandGate
    from wb_sim.ros.pacer import PacerStats
    from wb_sim.ros.parameters import load_node_config
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    names = list(sim.joint_names)
    gate = CommandGate(names, names, load_node_config({"command.kp": KP, "command.kd": KD}),
                       PacerStats(), lambda *a: None)
    out = []
    for i in range(cycles + 1):
        out.append(sim.joint_positions.copy())
        if i == cycles:
            break
        fields = law(i, sim.joint_positions.copy(), sim.joint_velocities.copy(), sim.q.copy())
        now = sim.step_count * 1_000_000
        assert gate.joint_command(0, names, fields.get("effort", []), now, 0.0,
                                  position=fields.get("position", []),
                                  velocity=fields.get("velocity", []))
        for _ in range(DECIMATION):
            sim.step(gate.torques(sim.step_count * 1_000_000, sim.joint_velocities, 0.0,
                                  sim.joint_positions))
    return out


def _same_as_headless(states, law, cycles):
    ref = headless(law, cycles)
    worst = max(float(np.abs(a[0] - b).max()) for a, b in zip(states, ref))
    assert all(np.array_equal(a[0], b) for a, b in zip(states, ref)), \
        f"the node's closed loop differs from the core's by up to {worst} rad"


def test_impedance_stand_with_the_controller_at_200_hz(lockstep):
    """q_ref = the initial posture, v_ref = 0, tau_ff = gravity at the state, sent at
    200 Hz; the drives run kp 1000, kd 20 at 1 kHz. 3 s: the base sinks less than
    1 cm (into the compliant ground) and never rises."""
    m = model()
    posture = m.joint_positions.copy()
    zeros = np.zeros(m.nj)

    def law(i, qj, vj, q):
        return {"position": posture, "velocity": zeros, "effort": m.gravity_torques(q)}

    cycles = 600  # 3 s
    states = LockstepController(lockstep, law, cycles).run(lockstep)
    z = np.array([st[3] for st in states])
    z0 = float(m.q[2])
    print(f"impedance stand: base sank {(z0 - z.min()) * 1e3:.1f} mm in 3 s")
    assert 0.0 < z0 - z.min() < 0.01 and z.max() <= z0 + 1e-6, (z0 - z.min(), z.max() - z0)
    assert np.abs(states[-1][0] - posture).max() < 0.02
    _same_as_headless(states, law, cycles)


ARM = ("l_shoulder_pitch", "l_elbow")
ARM_STROKE = np.array([-0.8, -0.7])  # rad
ARM_T = 1.5  # s, a half-cosine from the posture


def test_position_trajectory_of_the_arm_is_tracked(lockstep):
    """Position mode only (what a JointTrajectoryController with the position interface
    sends: no velocity, no effort), every joint: the body holds its posture, the left
    shoulder and elbow follow a half-cosine of 0.8 and 0.7 rad in 1.5 s. The error
    against the target in force (the last command) stays below 0.02 rad while moving
    (a kd qdot / kp lag and gravity sag) and 0.005 rad settled (gravity sag);
    docs/ros.md quotes the figures printed here."""
    m = model()
    posture = m.joint_positions.copy()
    arm = [m.joint_names.index(n) for n in ARM]

    def target(i):
        s = min(i * DECIMATION * m.dt / ARM_T, 1.0)
        ref = posture.copy()
        ref[arm] += ARM_STROKE * 0.5 * (1 - math.cos(math.pi * s))
        return ref

    def law(i, qj, vj, q):
        return {"position": target(i)}

    cycles = 500  # 2.5 s
    states = LockstepController(lockstep, law, cycles).run(lockstep)
    err = np.array([np.abs(states[i][0][arm] - target(i - 1)[arm]).max()
                    for i in range(1, cycles + 1)])
    t = np.arange(1, cycles + 1) * DECIMATION * m.dt
    moving, settled = err[t <= ARM_T + 0.25].max(), err[t >= ARM_T + 0.5].max()
    print(f"arm tracking error: {moving:.4f} rad while moving, {settled:.4f} rad settled")
    assert moving < 0.02 and settled < 0.005, (moving, settled)
    assert abs(states[-1][3] - float(m.q[2])) < 0.01  # still standing
    _same_as_headless(states, law, cycles)


def test_efforts_alone_are_applied_exactly_despite_the_gains(lockstep):
    """command.kp and kd are set, yet a command of efforts alone is applied as given:
    the next joint state's efforts (the applied torques) equal it bit for bit."""
    m = model()
    efforts = [1.0 + 0.1 * k + 1e-12 for k in range(m.nj)]  # within every effort limit

    def law(i, qj, vj, q):
        return {"effort": efforts}

    states = LockstepController(lockstep, law, 3).run(lockstep)
    for qj, vj, applied, *_ in states[1:]:
        assert applied.tolist() == efforts


def test_gains_are_live_and_a_change_is_checked_whole(lockstep):
    """command.kp / command.kd through /wb_sim/set_parameters: a list that fits no
    joint list is refused with the reason and changes nothing; a good value is taken."""
    ros = lockstep.ros
    res = ros.set_parameter("command.kp", [1.0, 2.0, 3.0])
    assert not res.successful
    assert "parameter 'command.kp': expected one value (for every joint) or 23" in res.reason
    res = ros.set_parameter("command.kd", -1.0)
    assert not res.successful and "command.kd" in res.reason
    assert ros.get_parameters("command.kp")["command.kp"] == KP
    n = len(model().joint_names)
    assert ros.set_parameter("command.kd", [float(k) for k in range(n)]).successful
    assert list(ros.get_parameters("command.kd")["command.kd"]) == [float(k) for k in range(n)]
    assert ros.set_parameter("command.kd", KD).successful


def test_gains_of_the_wrong_length_end_the_node_at_start(tmp_path):
    domain = fresh_domain_id()
    node = Proc("wb_sim", sim_node_argv("command.kp:=[1.0, 2.0]"), domain, tmp_path)
    try:
        code = node.popen.wait(STARTUP_TIMEOUT)
    finally:
        node.close()
    assert code == 2, node.describe()
    assert "cannot start: parameter 'command.kp': expected one value" in node.log()


# ----------------------------------------------------------------------------- derived gains


def test_the_panda_tracks_a_position_step_through_joint_commands(tmp_path):
    """config/panda.yaml gives no drive gains: a ROS user's position controller (every
    joint's position, 20 Hz) steps the shoulder by 0.3 rad; at 3 s of simulated time every
    joint is within 0.05 rad of its target, on the gains the node derived from the arm and
    logged once (before them the arm fell: joint 1 off by 0.56-1.1 rad after 3 s). The
    watchdog is given 1 s (command.timeout_s) so that a busy machine's late publish does
    not trip it; the core's figure: test/ros/test_derived_gains.py."""
    from helpers.extras import require_robot_data
    require_robot_data("panda")
    s = SimSetup(tmp_path, "command.wait_for_first:=true", "command.timeout_s:=1.0",
                 "publish.joint_states_rate_hz:=100.0", "publish.stats_period_s:=1.0",
                 params_file=PKG / "config" / "panda.yaml")
    try:
        names = list(s.first_js.name)
        target = np.array(s.first_js.position)
        target[names.index("panda_joint2")] += 0.3
        js = s.ros.record(JointState, "joint_states", STATE_QOS)
        pub = s.ros.publisher(JointState, "joint_commands")
        msg = JointState(name=names, position=[float(x) for x in target])
        late = [m for m in js.msgs if stamp_ns(m) >= 3 * 10**9]
        deadline = time.monotonic() + 60.0
        while not late and time.monotonic() < deadline and s.node.alive():
            pub.publish(msg)
            s.ros.spin_for(0.05)
            late = [m for m in js.msgs if stamp_ns(m) >= 3 * 10**9]
        assert late, f"no joint state at 3 s\n{s.describe()}"
        log = s.node.log()
    finally:
        s.close()
    at3 = late[0]
    err = np.abs(np.array(at3.position) - target)
    print(f"Panda through joint_commands: largest error {err.max():.4f} rad at "
          f"t = {stamp_ns(at3) / 1e9:.3f} s")
    assert err.max() < 0.05, dict(zip(names, err.round(4)))
    assert log.count("position commands use derived gains") == 1, log[-3000:]
    assert "no torque at all" not in log and "no valid command" not in log
