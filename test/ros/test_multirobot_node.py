"""Several robots on the node (issue 31): ``config/worlds/two_humanoids.yaml`` (two default
humanoids 1 m apart, face to face) served by one node (``world_file``), each robot under its
own ``wb_sim_pd_controller`` process in its namespace (``robot:=<name>``), in lockstep as
fast as the controllers answer.

Numbers checked:

* each robot's topics under its name (``/alice/joint_states``, ``/bob/joint_commands``, ...)
  and none of the single robot's un-namespaced ones; ``/<name>/robot_description`` the
  robot's own URDF (unprefixed); ``/tf`` frames ``<name>/<link>`` whose bases are where the
  world file puts them (x = -0.5 and +0.5 m);
* both stand 3 s of simulated time: each base within 5 mm of its initial height and 1 cm
  of its place; two runs give bit-identical joint states of both robots at t = 3 s;
* each robot's own force-torque sensors on ``/<name>/ft/<sensor>`` (frames ``<name>/<link>``)
  hold its weight less its feet's at t = 3 s, bob's contact sensors on ``/bob/contact_sensors``
  (alice's off: none) show both feet touching, labelled with its own names;
* a push on ``/alice/external_wrench`` acts on alice's link, another robot's link refused;
* bob's controller killed at t ~ 1 s: only bob's watchdog trips (its log line names bob,
  alice's never), bob's gate alone is lost; alice still stands 2 s of simulated time later;
* each robot's own watchdog (``<name>.command.timeout_s``, ``<name>.command.timeout_action``):
  alice damps after 0.2 s, bob holds after the node-wide 0.1 s, each log line names its robot;
* wb_sim_record of the node records each robot's topics under its name; the bag reads back
  per robot (its joints, its base standing where the world puts it, its weight on its feet)
  and wb_sim_plot plots each;
* one robot: the node's topics are exactly the single robot's, un-namespaced (a test that
  fails if a name changes).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from helpers import PKG
from helpers.extras import require_ros

require_ros("sensor_msgs.msg", "nav_msgs.msg", "std_msgs.msg", "tf2_msgs.msg", "geometry_msgs.msg")

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, String  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from helpers.ros import (STARTUP_TIMEOUT, Proc, RosClient, SimSetup,  # noqa: E402
                         fresh_domain_id, sim_node_argv, stamp_ns)

WORLD = PKG / "config" / "worlds" / "two_humanoids.yaml"
ROBOTS = ("alice", "bob")
X0 = {"alice": -0.5, "bob": 0.5}  # the world file's base positions, m
Z0 = 0.696882
NS = 1_000_000_000
STATE_QOS = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)


#: the force-torque sensors each robot of :func:`_sensor_world` declares
FT = ("left_ankle", "right_ankle")


def _sensor_world(tmp_path):
    """The two-humanoid world with a force-torque sensor on each ankle of both robots, their
    own (ft_sensors.* per robot), and bob's contact sensors on (alice's off)."""
    import yaml
    doc = yaml.safe_load(WORLD.read_text())
    for entry in doc["world"]["robots"]:
        entry["parameters"] = {"ft_sensors": {"names": list(FT),
                                              "joints": ["l_ankle_roll", "r_ankle_roll"]},
                               "contact_sensors": {"active": entry["name"] == "bob"}}
    path = tmp_path / "two_humanoids_sensors.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _first_robot_params(tmp_path, world=WORLD):
    """The node's own parameters: the world's first robot (as wb_sim_run --world writes)."""
    from wb_sim.world import load_world_robots, write_params_file
    robots = load_world_robots(world)
    return write_params_file(*robots[0], tmp_path / "world_robot0.yaml"), robots


class FleetRun:
    """The node serving the two-humanoid world in lockstep (real-time factor 0) and one
    example controller per robot in its namespace; this test's client records each
    robot's joint states and base pose."""

    def __init__(self, tmp_path, stop_after_s: float, *overrides: str, world=WORLD):
        self.domain = fresh_domain_id()
        self.dir = tmp_path
        self.world = world
        params, robots = _first_robot_params(tmp_path, world)
        self.procs: dict[str, Proc] = {}
        self.ros = RosClient(self.domain)
        try:
            self.node = self._start("wb_sim", sim_node_argv(
                f"world_file:={world}", "sync.mode:=lockstep", "real_time_factor:=0.0",
                f"stop_after_s:={stop_after_s}", "publish.stats_period_s:=1.0",
                "publish.imu_rate_hz:=100.0", "publish.contact_wrench_rate_hz:=100.0",
                *overrides, params_file=params))
            self.js = {n: self.ros.record(JointState, f"/{n}/joint_states", STATE_QOS)
                       for n in ROBOTS}
            self.odom = {n: self.ros.record(Odometry, f"/{n}/odom/ground_truth", STATE_QOS)
                         for n in ROBOTS}
            self.tf = self.ros.record(TFMessage, "/tf", STATE_QOS)
            #: _sensor_world's: each robot's force-torque sensors, bob's contact sensors
            self.ft, self.contact = {}, None
            if world != WORLD:
                self.ft = {(n, s): self.ros.record(WrenchStamped, f"/{n}/ft/{s}", STATE_QOS)
                           for n in ROBOTS for s in FT}
                self.contact = self.ros.record(Float64MultiArray, "/bob/contact_sensors",
                                               STATE_QOS)
            assert self.ros.spin_until(lambda: all(r.msgs for r in self.js.values()),
                                       STARTUP_TIMEOUT), self.describe()
            for _, info in robots:
                kp, kd = info.controller_params["kp"], info.controller_params["kd"]
                self._start(f"controller_{info.name}", [
                    *sim_node_argv()[:1], "-m", "wb_sim.ros.pd_controller", "--ros-args",
                    "-r", f"__ns:=/{info.name}", "-p", f"robot:={info.name}",
                    "-p", f"kp:={float(kp)}", "-p", f"kd:={float(kd)}"])
            for n in ROBOTS:
                assert self.procs[f"controller_{n}"].wait_for_log(
                    "holding the initial posture", STARTUP_TIMEOUT, spin=self.ros.spin_for), \
                    self.describe()
        except BaseException:
            self.close()
            raise

    def _start(self, name, argv) -> Proc:
        p = Proc(name, argv, self.domain, self.dir)
        self.procs[name] = p
        return p

    def t(self, robot: str = "alice") -> float:
        msgs = self.js[robot].msgs
        return stamp_ns(msgs[-1]) / NS if msgs else 0.0

    def run_until(self, t_s: float, timeout: float = 120.0) -> None:
        """Spin until both robots' joint states and base poses reached ``t_s`` (simulated):
        on a loaded machine one reliable stream can arrive later than another (a lost sample
        is sent again and holds the later ones back), so each is waited for."""
        def reached() -> list[float]:
            return [self.t(n) for n in ROBOTS] + [
                stamp_ns(self.odom[n].last) / NS if self.odom[n].msgs else 0.0 for n in ROBOTS]
        ok = self.ros.spin_until(lambda: min(reached()) >= t_s - 1e-9
                                 or not self.node.alive(), timeout)
        assert ok and min(reached()) >= t_s - 1e-9, \
            f"t (joint states, base poses) = {reached()}\n{self.describe()}"

    def state_at(self, robot: str, t_s: float) -> np.ndarray:
        """The robot's joint positions and velocities stamped ``t_s`` (its last such)."""
        want = round(t_s * NS)
        for m in reversed(self.js[robot].msgs):
            if stamp_ns(m) == want:
                return np.concatenate([m.position, m.velocity])
        raise AssertionError(f"no joint state of {robot} at t = {t_s}")

    def base(self, robot: str) -> np.ndarray:
        p = self.odom[robot].msgs[-1].pose.pose.position
        return np.array([p.x, p.y, p.z])

    def describe(self) -> str:
        return "\n".join(p.describe() for p in self.procs.values())

    def close(self) -> None:
        for p in self.procs.values():
            p.close()
        self.ros.close()


def _stands(run: FleetRun, robot: str) -> None:
    b = run.base(robot)
    assert abs(b[2] - Z0) < 5e-3 and abs(b[0] - X0[robot]) < 1e-2 and abs(b[1]) < 1e-2, \
        (robot, b.tolist())


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    # paused at 3 s: the graph stays; a controller is lost only after 10 s of silence (a
    # loaded machine must not make one lost: the run would then depend on the host)
    tmp = tmp_path_factory.mktemp("fleet_a")
    run = FleetRun(tmp, 0.0, "sync.timeout_s:=10.0", "publish.ft_rate_hz:=100.0",
                   "publish.contact_sensors_rate_hz:=100.0", world=_sensor_world(tmp))
    try:
        run.run_until(3.0)
        from std_srvs.srv import SetBool
        assert run.ros.call(SetBool, "/wb_sim/pause", SetBool.Request(data=True)).success
        # paused, the node publishes nothing more; what it published up to t = 3 s may still
        # be on its way (a reliable stream holds later samples back while a lost one is sent
        # again, up to a heartbeat period on a loaded machine): wait until every recorded
        # sensor stream has reached 3 s, as the joint states have
        from wb_sim.ros.conversions import read_contact_sensors

        def reached() -> dict[str, int | None]:
            last = {r.topic: stamp_ns(r.last) if r.msgs else None for r in run.ft.values()}
            last[run.contact.topic] = read_contact_sensors(run.contact.last)[0] \
                if run.contact.msgs else None
            return last

        assert run.ros.spin_until(
            lambda: all(t is not None and t >= 3 * NS for t in reached().values()), 30.0), \
            reached()
        yield run
    finally:
        run.close()


def test_two_humanoids_stand_under_their_own_controllers(first_run):
    run = first_run
    for n in ROBOTS:
        _stands(run, n)
        assert run.state_at(n, 3.0).shape == (46,)  # its own 23 joints
        assert list(run.js[n].msgs[-1].name) == list(run.js["alice"].msgs[-1].name)
        assert not any("/" in x for x in run.js[n].msgs[-1].name)  # its own names
    log = run.node.log()
    # lockstep waited for both: no command was missed, neither watchdog acted
    assert "no valid command for" not in log, log[-3000:]
    assert "no answer from the controller" not in log, log[-3000:]
    for n in ROBOTS:
        assert f"robot '{n}': first command received" in log


def test_topics_frames_and_descriptions_are_per_robot(first_run):
    run, ros = first_run, first_run.ros
    topics = dict(ros.node.get_publisher_names_and_types_by_node("wb_sim", "/"))
    subs = dict(ros.node.get_subscriber_names_and_types_by_node("wb_sim", "/"))
    for n in ROBOTS:
        for t, typ in ((f"/{n}/joint_states", "sensor_msgs/msg/JointState"),
                       (f"/{n}/odom/ground_truth", "nav_msgs/msg/Odometry"),
                       (f"/{n}/imu/data", "sensor_msgs/msg/Imu"),
                       (f"/{n}/contact_wrench/left_foot", "geometry_msgs/msg/WrenchStamped"),
                       (f"/{n}/contact_wrench/right_foot", "geometry_msgs/msg/WrenchStamped"),
                       (f"/{n}/robot_description", "std_msgs/msg/String")):
            assert topics.get(t) == [typ], (t, sorted(topics))
        for t in (f"/{n}/joint_commands", f"/{n}/effort_commands", f"/{n}/external_wrench"):
            assert t in subs, (t, sorted(subs))
    for t in ("/joint_states", "/odom/ground_truth", "/robot_description", "/imu/data"):
        assert t not in topics, t  # nothing un-namespaced for a robot
    assert "/joint_commands" not in subs
    for t in ("/clock", "/tf", "/tf_static"):  # the world's
        assert t in topics, (t, sorted(topics))
    from wb_sim.robot import RobotModel
    for n in ROBOTS:
        rec = ros.record(String, f"/{n}/robot_description", LATCHED_QOS)
        assert ros.spin_until(lambda: bool(rec.msgs), 10), n
        robot = RobotModel.from_urdf(robot_description=rec.msgs[-1].data, floating_base=True)
        assert robot.nj == 23 and "l_knee" in robot.joint_names  # its own, unprefixed
    bases = {t.child_frame_id: t.transform.translation for m in run.tf.msgs[-5:]
             for t in m.transforms if t.header.frame_id == "world"}
    for n in ROBOTS:  # one tree: world -> each robot's base, its frames prefixed
        (x,) = [b.x for c, b in bases.items() if c.startswith(f"{n}/")]
        assert abs(x - X0[n]) < 1e-2, (n, x)
    moving = [t.child_frame_id for t in run.tf.msgs[-1].transforms]
    # each robot's base and its 23 moving joints' links, prefixed; nothing unprefixed
    assert sum(c.startswith("alice/") for c in moving) == 24, moving
    assert sum(c.startswith("bob/") for c in moving) == 24, moving
    assert len(moving) == 48 and "bob/pelvis" in moving, moving
    static = ros.record(TFMessage, "/tf_static", LATCHED_QOS)
    assert ros.spin_until(lambda: bool(static.msgs), 10)
    children = {t.child_frame_id for t in static.msgs[-1].transforms}
    assert {"alice/l_sole", "bob/l_sole", "alice/imu_link", "bob/imu_link"} <= children, children


def test_each_robots_force_torque_and_contact_sensors_under_its_name(first_run):
    """Each robot's own ft_sensors on <name>/ft/<sensor> (WrenchStamped, frame <name>/<its
    child link>), standing at t = 3 s: its two ankles hold its weight less its feet's (350.2
    N less 19.6 N on the humanoid), as the same sensors of one robot do (the last readings,
    paused after 3 s); bob's contact
    sensors (alice's off) on bob/contact_sensors, labelled with its own names, both feet
    touching with its weight between them; nothing un-namespaced."""
    from wb_sim.ros.conversions import read_contact_sensors
    run = first_run
    topics = dict(run.ros.node.get_publisher_names_and_types_by_node("wb_sim", "/"))
    for n in ROBOTS:
        for s in FT:
            assert topics.get(f"/{n}/ft/{s}") == ["geometry_msgs/msg/WrenchStamped"], \
                (n, s, sorted(topics))
    assert topics.get("/bob/contact_sensors") == ["std_msgs/msg/Float64MultiArray"]
    for t in ("/alice/contact_sensors", "/contact_sensors", "/ft/left_ankle"):
        assert t not in topics, t
    for n in ROBOTS:
        last = {s: run.ft[n, s].msgs[-1] for s in FT}
        assert (last["left_ankle"].header.frame_id,
                last["right_ankle"].header.frame_id) == (f"{n}/l_foot", f"{n}/r_foot")
        (t_ns,) = {stamp_ns(m) for m in last.values()}  # one step's readings
        assert t_ns >= 3 * NS, (n, t_ns)
        fz = sum(m.wrench.force.z for m in last.values())  # the child's (the foot's) axes
        assert 320.0 < -fz < 340.0, (n, fz)
        for m in last.values():  # each foot its share, nearly half
            assert 120.0 < -m.wrench.force.z < 210.0, (n, m.wrench.force.z)
    _, rows = read_contact_sensors(run.contact.msgs[-1])
    assert "left_foot" in rows and not any("/" in k for k in rows), sorted(rows)
    assert rows["left_foot"][1:].tolist() == [1.0, 1.0] == rows["right_foot"][1:].tolist()
    assert 340.0 < rows["left_foot"][0] + rows["right_foot"][0] < 360.0, rows
    assert rows["head"].tolist() == [0.0, 0.0, 0.0]


def test_each_robot_has_its_own_parameters(first_run):
    """<name>.initial.* (read-only) as the world file says, <name>.command.kp set by that
    robot's controller (its kp 1000 on its 23 joints), live per robot; the node-wide drive
    gains are refused, naming the robots' own."""
    ros = first_run.ros
    p = ros.get_parameters("alice.initial.base_position", "bob.initial.base_rpy",
                           "alice.command.kp", "bob.command.kd", "bob.floating_base")
    assert p["alice.initial.base_position"] == [-0.5, 0.0, 0.696882]
    assert p["bob.initial.base_rpy"] == pytest.approx([0.0, 0.0, np.pi], abs=1e-12)
    assert p["alice.command.kp"] == [1000.0] * 23 and p["bob.command.kd"] == [20.0] * 23
    assert p["bob.floating_base"] is True
    r = ros.set_parameter("command.kp", [500.0])
    assert not r.successful and "'alice.command.kp', 'bob.command.kp'" in r.reason, r.reason
    r = ros.set_parameter("bob.command.kd", [25.0])
    assert r.successful, r.reason
    assert ros.get_parameters("bob.command.kd")["bob.command.kd"] == [25.0]
    r = ros.set_parameter("bob.command.kd", [1.0, 2.0])  # neither one value nor 23
    assert not r.successful and "expected one value" in r.reason, r.reason
    assert not ros.set_parameter("bob.initial.base_position", [0.0, 0.0, 1.0]).successful


def test_lockstep_runs_are_bit_identical_for_both_robots(first_run, tmp_path):
    second = FleetRun(tmp_path, 0.0, "sync.timeout_s:=10.0", world=first_run.world)
    try:
        second.run_until(3.0)
        assert "no answer from the controller" not in second.node.log()
        for n in ROBOTS:
            a, b = first_run.state_at(n, 3.0), second.state_at(n, 3.0)
            assert np.array_equal(a, b), (n, np.abs(a - b).max())
            a, b = first_run.state_at(n, 1.5), second.state_at(n, 1.5)
            assert np.array_equal(a, b), (n, np.abs(a - b).max())
    finally:
        second.close()


def test_a_dead_controller_trips_only_its_robots_watchdog(tmp_path):
    run = FleetRun(tmp_path, 0.0, "sync.timeout_s:=3.0")  # alice never silent that long
    try:
        run.run_until(1.0)
        # a push on alice's topic names alice's own link; another robot's is not hers
        from geometry_msgs.msg import WrenchStamped
        push = run.ros.publisher(WrenchStamped, "/alice/external_wrench")
        for frame in ("pelvis", "bob/pelvis"):
            msg = WrenchStamped()
            msg.header.frame_id = frame
            msg.wrench.force.x = 2.0  # N, 0.1 s: alice stands it
            push.publish(msg)
        run.procs["controller_bob"].kill()
        # the kill lands at whatever simulated time the lockstep run has reached (CI: 3.8 s
        # once, the publisher's discovery taking wall time), then the node waits
        # sync.timeout_s (3 s wall) for bob's dead controller: read the kill time in that
        # pause, and judge both robots 2 s of simulated time after it
        run.ros.spin_for(1.5)
        t_kill = max(run.t(n) for n in ROBOTS)
        run.run_until(t_kill + 2.0)
        log = run.node.log()
        assert re.search(r"robot 'bob': lockstep: no answer from the controller", log), log[-3000:]
        assert re.search(r"robot 'bob': no valid command for 0\.1 s of simulated time", log), \
            log[-3000:]
        assert "robot 'alice': push on 'pelvis'" in log, log[-3000:]
        assert "robot 'alice': rejected a wrench on 'external_wrench': frame 'bob/pelvis' " \
            "is not in the model" in log, log[-3000:]
        assert "robot 'alice': no valid command" not in log
        assert "robot 'alice': lockstep: no answer" not in log
        _stands(run, "alice")  # its controller kept it standing, 2 s on
        # bob, damped (command.timeout_action: damp), sinks: its base below alice's
        assert run.base("bob")[2] < run.base("alice")[2] - 5e-3, run.base("bob").tolist()
        assert run.procs["controller_alice"].alive()
    finally:
        run.close()


def test_each_robot_has_its_own_watchdog(tmp_path):
    """<name>.command.timeout_s / timeout_action, by default the node-wide values: alice
    damps after 0.2 s, bob (node-wide 0.1 s) holds its last command; both controllers
    killed, each log line names the robot, its timeout and its action; the node-wide
    watchdog is refused live, naming the robots' own; bob's is live."""
    run = FleetRun(tmp_path, 0.0, "sync.timeout_s:=3.0", "alice.command.timeout_s:=0.2",
                   "bob.command.timeout_action:=hold")
    try:
        ros = run.ros
        p = ros.get_parameters("alice.command.timeout_s", "bob.command.timeout_s",
                               "alice.command.timeout_action", "bob.command.timeout_action")
        assert p == {"alice.command.timeout_s": 0.2, "bob.command.timeout_s": 0.1,
                     "alice.command.timeout_action": "damp",
                     "bob.command.timeout_action": "hold"}, p
        r = ros.set_parameter("command.timeout_action", "zero")
        assert not r.successful and "own watchdog" in r.reason and \
            "'alice.command.timeout_action', 'bob.command.timeout_action'" in r.reason, r.reason
        r = ros.set_parameter("bob.command.timeout_action", "sleep")
        assert not r.successful, r.reason
        run.run_until(1.0)
        for n in ROBOTS:
            run.procs[f"controller_{n}"].kill()
        # the kill lands at whatever simulated time the lockstep run has reached (CI: up to
        # 2 s on a busy machine), then the node waits sync.timeout_s (3 s wall) for the dead
        # controllers: read the kill time in that pause, when this client has caught up, and
        # judge both robots 2 s of simulated time after it
        run.ros.spin_for(1.5)
        t_kill = max(run.t(n) for n in ROBOTS)
        run.run_until(t_kill + 2.0)
        log = run.node.log()
        assert re.search(r"robot 'alice': no valid command for 0\.2 s of simulated time: joint "
                         r"damping \(20 N\*m\*s/rad\) \(command.timeout_action: damp\)", log), \
            log[-3000:]
        assert re.search(r"robot 'bob': no valid command for 0\.1 s of simulated time: holding "
                         r"the last command \(command.timeout_action: hold\)", log), log[-3000:]
        assert len(re.findall(r"robot '\w+': no valid command", log)) == 2, log[-3000:]
        # measured 2 s after the kill: alice damped sank backwards (base 0.178 m high); bob,
        # holding its last efforts (gravity compensation and all), still stands (0.6938 m)
        bases = {n: run.base(n).tolist() for n in ROBOTS} | {"t_kill": t_kill}
        assert run.base("alice")[2] < 0.5 and abs(run.base("bob")[2] - Z0) < 5e-3, bases
    finally:
        run.close()


def test_wb_sim_record_and_plot_of_both_robots(tmp_path):
    """wb_sim_record of the two-humanoid node records each robot's namespaced topics (and no
    single robot's un-namespaced ones); the bag reads back per robot
    (history_from_bag(bag, robot=...)): each its own 23 joints, its base where the world puts
    it and standing, its feet carrying its weight, its ankle force-torque sensors their
    share; wb_sim_plot plots each robot."""
    import sys

    from wb_sim.tools.bag import bag_robots, bag_topics, history_from_bag
    from wb_sim.tools.plot import main as plot_main
    from wb_sim.tools.recording import RecordingError

    bag = tmp_path / "fleet_bag"
    run = FleetRun(tmp_path, 0.0, "sync.timeout_s:=10.0", world=_sensor_world(tmp_path))
    try:
        run.run_until(0.2)
        rec = run._start("record", [sys.executable, "-m", "wb_sim.ros.record", "-o", str(bag),
                                    "--duration", "1", "--wait", str(STARTUP_TIMEOUT)])
        code = rec.popen.wait(STARTUP_TIMEOUT + 60)
        log = rec.log()
    finally:
        run.close()
    assert code == 0, log
    topics = bag_topics(bag)
    for n in ROBOTS:
        for t in ("joint_states", "odom/ground_truth", "robot_description",
                  "contact_wrench/left_foot", "contact_wrench/right_foot"):
            assert topics.get(f"/{n}/{t}", ("", 0))[1] > 0, (n, t, topics, log)
        # its commands: subscribed (their count depends on when the recorder discovers the
        # controllers, on a loaded machine possibly after its 1 s)
        assert f"/{n}/joint_commands" in topics and f"/{n}/external_wrench" in topics
    assert "/joint_states" not in topics and "/robot_description" not in topics
    assert bag_robots(bag) == ["alice", "bob"]
    with pytest.raises(RecordingError, match=r"records 2 robots \(alice, bob\)"):
        history_from_bag(bag)
    with pytest.raises(RecordingError, match="no robot named 'carol'"):
        history_from_bag(bag, robot="carol")
    for n in ROBOTS:
        h = history_from_bag(bag, robot=n)
        assert h.n > 50 and len(h.joint_names) == 23 and "l_knee" in h.joint_names
        assert h.surface_names == ("left_foot", "right_foot")
        assert abs(h.base_position[-1, 0] - X0[n]) < 1e-2 and \
            abs(h.base_position[-1, 2] - Z0) < 5e-3, (n, h.base_position[-1])
        fz = h.contact_force[:, -1, 2].sum()  # world z, N
        assert abs(fz / (h.mass * 9.81) - 1.0) < 0.1, (n, fz, h.mass)
        # its own force-torque sensors, read back from its ft/ (the first robot's moved
        # under its name with several robots): its weight less its feet's, as on the node
        assert h.ft_names == FT, (n, h.ft_names)
        last = h.ft_wrench[-1]
        assert np.isfinite(last).all() and 320.0 < -last[:, 2].sum() < 340.0, (n, last)
    a, b = (history_from_bag(bag, robot=n) for n in ROBOTS)
    assert not np.array_equal(a.base_position[:, 0], b.base_position[:, 0])
    out = tmp_path / "plots"
    assert plot_main([str(bag), "-o", str(out)]) == 0
    for n in ROBOTS:
        pngs = sorted(p.name for p in (out / n).glob("*.png"))
        assert "base_com.png" in pngs and "joint_tracking.png" in pngs, (n, pngs)


#: the single robot's node, default humanoid: every topic it publishes or takes, exactly
SINGLE_PUBLISHED = {
    "/clock", "/contact_markers", "/contact_state", "/contact_wrench/collision",
    "/contact_wrench/left_foot", "/contact_wrench/right_foot", "/diagnostics", "/imu/data",
    "/joint_states", "/objects", "/odom/ground_truth", "/parameter_events",
    "/robot_description", "/rosout", "/tf", "/tf_static"}
SINGLE_SUBSCRIBED = {"/effort_commands", "/external_wrench", "/joint_commands"}


def test_one_robot_keeps_its_topic_names(tmp_path):
    s = SimSetup(tmp_path, "publish.stats_period_s:=0.0")
    try:
        node = s.ros.node
        seen: dict = {}

        def complete():
            try:
                seen["pub"] = {t for t, _ in node.get_publisher_names_and_types_by_node(
                    "wb_sim", "/")}
                seen["sub"] = {t for t, _ in node.get_subscriber_names_and_types_by_node(
                    "wb_sim", "/")}
            except Exception:  # noqa: BLE001 - the node's name not discovered yet
                seen.update(pub=set(), sub=set())
                return False
            return SINGLE_PUBLISHED <= seen["pub"] and SINGLE_SUBSCRIBED <= seen["sub"]

        s.ros.spin_until(complete, 10)
        # the node's own (~/_started, the simulate_steps action where simulation_interfaces
        # imports) are the world's, the same with several robots
        for k in ("pub", "sub"):
            seen[k] = {t for t in seen[k] if not t.startswith("/wb_sim/")}
        assert seen["pub"] == SINGLE_PUBLISHED, sorted(seen["pub"] ^ SINGLE_PUBLISHED)
        assert seen["sub"] - {"/parameter_events"} == SINGLE_SUBSCRIBED, sorted(seen["sub"])
    finally:
        s.close()
