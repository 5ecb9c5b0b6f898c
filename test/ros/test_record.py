"""Recording the node's topics with ``wb_sim_record`` (rosbag2, MCAP) and reading
them back with ``wb_sim.tools.bag`` and ``wb_sim_plot``, end to end over real ROS 2.

One session: the simulator node (humanoid, lockstep) in its own
ROS_DOMAIN_ID, the recorder, then the example PD controller (which starts the
physics, so the bag begins at t = 0). Checked:

* the recorder refuses an existing output path (exit 2) before touching ROS;
* SIGINT closes the bag (exit 0; the node paused first, the recorder drained): a ``metadata.yaml`` and an ``.mcap`` file
  that rosbags reads independently of wb_sim, with every topic of the node,
  the commands, the recorder's parameter message and the controller's
  parameters (asked for while recording: the controller starts after the recorder);
* no step is lost: the ``joint_states`` stamps are consecutive 1 ms steps
  (1000 messages per simulated second), and the rates of the other 1 kHz
  streams match;
* :func:`history_from_bag` gives the standing robot: base height within 5 mm
  of the core simulator's, the ground carrying m g within 5 %, the
  controller's reference (the initial posture) and the URDF effort limits;
* ``wb_sim_plot`` on the bag writes the five figures.

Skipped without rclpy, tf2_msgs, rosbags or matplotlib unless ``WB_SIM_REQUIRE_ROS=1``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from helpers.extras import require_ros

require_ros("sensor_msgs.msg", "geometry_msgs.msg", "nav_msgs.msg", "std_msgs.msg",
            "rcl_interfaces.srv", "rosgraph_msgs.msg", "std_srvs.srv", "rosbags", "matplotlib")

import wb_sim  # noqa: E402
from helpers.ros import (HUMANOID_YAML, Proc, RosClient, fresh_domain_id,  # noqa: E402
                         pd_controller_argv, sim_node_argv)
from std_srvs.srv import SetBool  # noqa: E402
from wb_sim.tools.bag import bag_topics, history_from_bag  # noqa: E402
from wb_sim.config import read_yaml_params  # noqa: E402
from wb_sim.controllers import PDGravityController  # noqa: E402
from wb_sim.tools.plot import main as plot_main  # noqa: E402

STARTUP_TIMEOUT = 30.0
RECORD_WALL_S = 3.0
#: s: what the recorder has in flight when the node pauses is written within this
DRAIN_S = 2.0
NS = 1_000_000_000


def record_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "wb_sim.ros.record", *args]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A bag of the standing humanoid under the PD controller (about 3 s of wall time):
    15 topics, contact_wrench/collision, contact_state and /diagnostics among them (the shipped humanoid has collision)."""
    tmp = tmp_path_factory.mktemp("bag")
    bag = tmp / "standing"
    domain = fresh_domain_id()
    procs = []
    try:
        # lockstep: the closed loop stands whatever the load of the machine (this test
        # checks the recording, not the real-time loop)
        node = Proc("wb_sim", sim_node_argv("sync.mode:=lockstep"), domain, tmp)
        procs.append(node)
        rec = Proc("record", record_argv("-o", str(bag), "--wait", str(STARTUP_TIMEOUT)),
                   domain, tmp)
        procs.append(rec)
        assert rec.wait_for_log("recording 15 topics into", STARTUP_TIMEOUT), \
            "\n".join(p.describe() for p in procs)
        ctrl = Proc("controller", pd_controller_argv(), domain, tmp)
        procs.append(ctrl)
        assert node.wait_for_log("the simulation starts", STARTUP_TIMEOUT), \
            "\n".join(p.describe() for p in procs)
        time.sleep(RECORD_WALL_S)
        # paused, the node publishes nothing more: the recorder, which may be behind on
        # some topics on a loaded machine (by 10 messages of one beside another test
        # worker), takes what is in flight before it is stopped
        client = RosClient(domain)
        try:
            res = client.call(SetBool, "/wb_sim/pause", SetBool.Request(data=True))
            assert res.success, res.message
            client.spin_for(DRAIN_S)
            code = rec.interrupt(20.0)
            res = client.call(SetBool, "/wb_sim/pause", SetBool.Request(data=False))
            assert res.success, res.message
        finally:
            client.close()
        log = rec.log()
        # a second recorder: two topics, for one second
        short = tmp / "short"
        rec2 = Proc("record2", record_argv("-o", str(short), "--duration", "1", "--topics",
                                           "joint_states", "/clock"), domain, tmp)
        procs.append(rec2)
        code2 = rec2.popen.wait(STARTUP_TIMEOUT + 30)
        assert node.alive() and ctrl.alive(), "\n".join(p.describe() for p in procs)
    finally:
        for p in procs:
            p.close()
    assert code == 0, log
    assert code2 == 0, rec2.log()
    return bag, log, short


def test_duration_and_topic_selection(recorded):
    _, _, short = recorded
    topics = bag_topics(short)
    assert sorted(topics) == ["/clock", "/joint_states", "/wb_sim_record/parameters"]
    assert topics["/joint_states"][1] > 50 and topics["/clock"][1] > 50


def test_refuses_to_overwrite(tmp_path):
    out = subprocess.run(record_argv("-o", str(tmp_path)), capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert out.returncode == 2
    assert "exists; not overwriting" in out.stderr and out.stderr.count("\n") == 1


def test_bag_is_a_readable_mcap_rosbag2(recorded, tmp_path):
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    bag, log, _ = recorded
    mcap = bag / f"{bag.name}.mcap"
    assert (bag / "metadata.yaml").is_file() and mcap.read_bytes()[:5] == b"\x89MCAP"
    assert f"closed '{bag}'" in log, log
    core = wb_sim.Simulator.from_yaml(HUMANOID_YAML)
    ts = get_typestore(Stores.ROS2_KILTED)
    with Reader(bag) as reader:
        topics = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
        js_conn = [c for c in reader.connections if c.topic == "/joint_states"]
        stamps, names = [], None
        for c, _, raw in reader.messages(js_conn):
            m = ts.deserialize_cdr(raw, c.msgtype)
            stamps.append(m.header.stamp.sec * NS + m.header.stamp.nanosec)
            names = names or tuple(m.name)
        cmd_conn = [c for c in reader.connections if c.topic == "/joint_commands"]
        cmd_stamps = [(lambda m: m.header.stamp.sec * NS + m.header.stamp.nanosec)(
            ts.deserialize_cdr(raw, c.msgtype)) for c, _, raw in reader.messages(cmd_conn)]
        pconn = [c for c in reader.connections if c.topic == "/wb_sim_record/parameters"]
        params = [json.loads(ts.deserialize_cdr(raw, c.msgtype).data)
                  for c, _, raw in reader.messages(pconn)]
        cconn = [c for c in reader.connections
                 if c.topic == "/wb_sim_record/controller_parameters"]
        controllers = [json.loads(ts.deserialize_cdr(raw, c.msgtype).data)
                       for c, _, raw in reader.messages(cconn)]
    expected = {
        "/joint_states": "sensor_msgs/msg/JointState", "/imu/data": "sensor_msgs/msg/Imu",
        "/odom/ground_truth": "nav_msgs/msg/Odometry", "/tf": "tf2_msgs/msg/TFMessage",
        "/tf_static": "tf2_msgs/msg/TFMessage", "/clock": "rosgraph_msgs/msg/Clock",
        "/robot_description": "std_msgs/msg/String",
        "/joint_commands": "sensor_msgs/msg/JointState",
        "/effort_commands": "std_msgs/msg/Float64MultiArray",
        "/external_wrench": "geometry_msgs/msg/WrenchStamped",
        "/contact_state": "wb_sim_interfaces/msg/ContactState",
        "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
        "/contact_wrench/left_foot": "geometry_msgs/msg/WrenchStamped",
        "/contact_wrench/right_foot": "geometry_msgs/msg/WrenchStamped",
        "/contact_wrench/collision": "geometry_msgs/msg/WrenchStamped",
        "/wb_sim_record/parameters": "std_msgs/msg/String",
        "/wb_sim_record/controller_parameters": "std_msgs/msg/String"}
    assert {t: m for t, (m, _) in topics.items()} == expected
    # the contact truth, recorded at its 100 Hz, read back from the bag with the definition
    # the bag carries (MCAP's schema: wb_sim_interfaces is not in rosbags' typestore)
    with Reader(bag) as reader:
        conn = [c for c in reader.connections if c.topic == "/contact_state"]
        last = _contact_states(reader, conn)[-1]
    # (every 10th step, and the states published out of turn: the first, the resends)
    assert 0.8 <= topics["/contact_state"][1] / (topics["/joint_states"][1] / 10) <= 1.25
    assert len(last.points) == 8 and [p.index for p in last.points[:5]] == [0, 1, 2, 3, 0]
    assert [f.name for f in last.surfaces] == ["left_foot", "right_foot"]
    assert all(f.normal_force > 50.0 for f in last.surfaces)  # standing
    assert np.isfinite([[f.centre_of_pressure.x, f.centre_of_pressure.y]
                        for f in last.surfaces]).all()
    assert topics["/robot_description"][1] == topics["/tf_static"][1] == 1
    assert topics["/wb_sim_record/parameters"][1] == 1 and len(params) == 1
    p = params[0]["parameters"]
    assert p["contact_surfaces"] == ["left_foot", "right_foot"]
    assert p["contact.friction_coefficient"] == 1.0 and p["physics_rate_hz"] == 1000.0
    # the one node publishing commands: the example controller, with the robot file's gains
    assert [c["node"] for c in controllers] == ["/wb_sim_pd_controller"], controllers
    assert controllers[0]["publishes"] == ["/joint_commands"]
    gains = read_yaml_params(HUMANOID_YAML, node_name="wb_sim_pd_controller")
    assert {k: controllers[0]["parameters"][k] for k in ("kp", "kd")} == \
        {k: gains[k] for k in ("kp", "kd")}
    # every step: consecutive 1 ms stamps from t = 0 (1000 messages per simulated second).
    # A machine loaded by other work can starve a process's DDS threads for longer than
    # the node's publisher queue (1000 messages) now and then; a recorder that cannot keep
    # up would lose far more than 5 %
    assert names == core.joint_names
    stamps = np.unique(stamps)  # lockstep sends a state again while it waits
    assert len(stamps) > 500 and stamps[0] <= 5_000_000, (len(stamps), stamps[0])
    assert np.all(stamps % 1_000_000 == 0)
    steps = (stamps[-1] - stamps[0]) // 1_000_000 + 1
    assert len(stamps) >= 0.95 * steps, (len(stamps), steps)
    lost = int(log.split("; lost ")[1].split(";")[0])
    assert lost <= 0.05 * 8 * len(stamps), log
    n = topics["/joint_states"][1]
    for t in ("/imu/data", "/odom/ground_truth", "/clock", "/contact_wrench/left_foot",
              "/contact_wrench/right_foot"):
        assert abs(topics[t][1] - n) <= 0.05 * n + 5, (t, topics[t][1], n)
    assert topics["/tf"][1] == pytest.approx(n / 10, rel=0.1, abs=5)  # 100 Hz
    # one command per joint state (the controller echoes its stamp) once the recorder has
    # discovered the controller: a starved machine can delay that discovery by a second or
    # two, so count from the first command recorded
    cmd_stamps = np.unique(cmd_stamps)
    assert len(cmd_stamps) > 100, len(cmd_stamps)
    answered = stamps[stamps >= cmd_stamps[0]]
    assert len(cmd_stamps) >= 0.95 * len(answered), (len(cmd_stamps), len(answered))
    assert np.isin(cmd_stamps, stamps).mean() > 0.95  # commands answer recorded states
    assert topics["/joint_commands"][1] <= 1.1 * n + 5
    assert bag_topics(bag) == {t: topics[t] for t in topics}
    alone = tmp_path / "alone.mcap"  # the .mcap file without its metadata.yaml
    shutil.copy(mcap, alone)
    assert bag_topics(alone) == bag_topics(bag)


def test_history_from_bag_is_the_standing_robot(recorded):
    bag, _, _ = recorded
    h = history_from_bag(bag)
    core = wb_sim.Simulator.from_yaml(HUMANOID_YAML)
    # the core, headless, under the same controller, to the bag's last time
    q0 = core.state.joint_positions
    ctrl = PDGravityController(core.robot, q0, 1000.0, 20.0, gravity=core.config.gravity)
    for _ in range(int(round(h.t[-1] / core.dt))):
        core.step(ctrl(core.q, core.q[7:], core.v[6:]))
    assert h.n > 500 and h.joint_names == core.joint_names
    assert h.surface_names == ("left_foot", "right_foot")
    # wall: the receive times (system clock, from the transport), in stamp order: they
    # advance with the stamps, but a loaded machine may deliver a state a few ms late
    # (CI once saw 40 ms), so only rare and small steps back are allowed
    dw = np.diff(h.wall)
    assert h.wall[0] == 0.0 and h.wall[-1] > 0.5 * (h.t[-1] - h.t[0])
    assert np.mean(dw < 0) < 0.01 and dw.min() > -0.2, (np.mean(dw < 0), dw.min())
    assert np.all(np.diff(h.t) > 0) and np.median(np.diff(h.t)) == pytest.approx(1e-3)
    assert h.dt == 1e-3
    assert abs(h.base_position[-1, 2] - core.q[2]) < 5e-3, (h.base_position[-1], core.q[:3])
    assert np.abs(h.base_position[:, :2]).max() < 0.02
    weight = core.mass * 9.81
    settled = h.t >= h.t[0] + 0.3
    fz = h.normal_force.sum(axis=0)[settled]
    assert abs(fz.mean() / weight - 1.0) < 0.05, fz.mean() / weight
    # the centre of mass of the recorded configurations, rebuilt from the URDF
    assert abs(h.com[-1, 2] - core.center_of_mass()[2]) < 5e-3
    assert h.friction_coefficient == 1.0 and h.mass == pytest.approx(core.mass)
    assert np.array_equal(h.torque_limits, core.actuation.effort_limit)
    # the controller's reference: the initial posture, from its first recorded command on
    known = np.isfinite(h.reference_positions).all(axis=1)
    assert known[-1] and np.all(known[np.argmax(known):])
    assert np.allclose(h.reference_positions[known], q0, atol=1e-12)
    assert np.abs(h.joint_positions[-1] - q0).max() < 0.05


def test_bag_of_ros2_bag_record_without_parameters(recorded, tmp_path):
    """A bag without wb_sim_record's parameter message (as ``ros2 bag record`` makes it):
    the friction coefficient is unknown, the rest comes from the URDF and the defaults."""
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer

    from wb_sim.tools.bag import typestore

    bag, _, _ = recorded
    plain = tmp_path / "plain"
    with Reader(bag) as reader, Writer(plain, version=8,
                                       storage_plugin=StoragePlugin.MCAP) as writer:
        ts = typestore(reader)  # with the bag's own definitions (ContactState's)
        conns = {c.id: writer.add_connection(c.topic, c.msgtype, typestore=ts)
                 for c in reader.connections if c.topic != "/wb_sim_record/parameters"}
        for c, log_ns, raw in reader.messages([c for c in reader.connections if c.id in conns]):
            writer.write(conns[c.id], log_ns, raw)
    full, h = history_from_bag(bag), history_from_bag(plain)
    assert np.isnan(h.friction_coefficient) and full.friction_coefficient == 1.0
    assert h.n == full.n and h.surface_names == full.surface_names
    assert np.array_equal(h.com, full.com) and np.array_equal(h.contact_force, full.contact_force)
    assert np.array_equal(h.torque_limits, full.torque_limits)  # the URDF's, here
    assert h.dt == pytest.approx(1e-3)


def test_the_other_links_wrench_in_a_bag_is_not_a_contact_surface(recorded):
    """The shipped humanoid has whole-body collision: the bag holds
    ``contact_wrench/collision`` (the other links' total wrench, zero while it stands),
    which the reader leaves out of the contact surfaces."""
    from rosbags.rosbag2 import Reader
    bag, _, _ = recorded
    with Reader(bag) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
    # one message per topic per step, the node paused before the recorder stopped (the
    # recorder had drained): the counts agree to within one message (a pause may fall
    # between two topics of a step)
    assert counts["/contact_wrench/left_foot"] > 1000
    assert abs(counts["/contact_wrench/collision"] - counts["/contact_wrench/left_foot"]) <= 1
    h = history_from_bag(bag)
    assert h.surface_names == ("left_foot", "right_foot")


def test_wb_sim_record_plans_the_other_links_wrench_only_with_collision():
    from wb_sim.ros.record import plan_topics
    params = {"contact_surfaces": ["left_foot", "right_foot"]}
    plain = [t for t, _, _ in plan_topics(params)]
    assert "/contact_wrench/left_foot" in plain and "/contact_wrench/collision" not in plain
    on = [t for t, _, _ in plan_topics({**params, "collision.enabled": True,
                                        "topics.contact_wrench": "w"})]
    assert "/w/collision" in on and "/w/right_foot" in on


def test_wb_sim_record_plans_the_sensors_topics():
    """The parameters' force-torque sensors (WrenchStamped on topics.ft/<name>) and, only
    with contact_sensors.active, the contact sensors' array."""
    from wb_sim.ros.record import plan_topics
    params = {"ft_sensors.names": ["l_ft", "r_ft"]}
    plain = {t: (m, s) for t, m, s in plan_topics(params)}
    assert plain["/ft/l_ft"] == ("geometry_msgs/msg/WrenchStamped", "ft") and "/ft/r_ft" in plain
    assert "/contact_sensors" not in plain
    on = {t: (m, s) for t, m, s in plan_topics({**params, "topics.ft": "wrenches",
                                                "contact_sensors.active": True})}
    assert "/wrenches/r_ft" in on and "/ft/r_ft" not in on
    assert on["/contact_sensors"] == ("std_msgs/msg/Float64MultiArray", "contact_sensors")


def test_wb_sim_record_plans_each_robots_sensors_under_its_name(tmp_path):
    """A node serving several robots (world_file, <name>.initial.* parameters): each robot's
    own force-torque sensors on /<name>/ft/<sensor> and, where its contact_sensors.active,
    /<name>/contact_sensors (read from the world file for the robots after the first);
    nothing un-namespaced."""
    import yaml

    from wb_sim.paths import share_dir
    from wb_sim.ros.record import plan_topics
    from wb_sim.world import load_world_robots
    doc = yaml.safe_load((share_dir() / "config" / "worlds" / "two_humanoids.yaml").read_text())
    for e, ft in zip(doc["world"]["robots"], (["l_ft"], ["l_ft", "r_ft"])):
        e["parameters"] = {"ft_sensors": {"names": ft, "joints": ["l_ankle_roll", "r_ankle_roll"]
                                          [:len(ft)]},
                           "contact_sensors": {"active": e["name"] == "bob"}}
    world = tmp_path / "w.yaml"
    world.write_text(yaml.safe_dump(doc))
    robots = load_world_robots(world)
    params = {**robots[0][0], "world_file": str(world)}
    for p, info in robots:  # what the node declares per robot
        params[f"{info.name}.initial.joint_names"] = p.get("initial.joint_names", [])
        params[f"{info.name}.initial.base_position"] = p.get("initial.base_position")
    plan = {t: (m, s) for t, m, s in plan_topics(params) if s in ("ft", "contact_sensors")}
    assert plan == {
        "/alice/ft/l_ft": ("geometry_msgs/msg/WrenchStamped", "ft"),
        "/bob/ft/l_ft": ("geometry_msgs/msg/WrenchStamped", "ft"),
        "/bob/ft/r_ft": ("geometry_msgs/msg/WrenchStamped", "ft"),
        "/bob/contact_sensors": ("std_msgs/msg/Float64MultiArray", "contact_sensors")}


def test_wb_sim_record_plans_the_loop_closures_topic():
    """The closures' wrenches (one labelled Float64MultiArray) only where the robot has
    closures: the parameters' (loop_closures.frames_a) or an MJCF's (urdf_path .xml)."""
    from wb_sim.ros.record import plan_topics
    assert "/loop_closures" not in {t for t, _, _ in plan_topics({})}
    for params in ({"loop_closures.frames_a": ["tip"]}, {"urdf_path": "/robots/leg.xml"}):
        plan = {t: (m, s) for t, m, s in plan_topics(params)}
        assert plan["/loop_closures"] == ("std_msgs/msg/Float64MultiArray", "loop_closures")
    plan = {t for t, _, _ in plan_topics({"urdf_path": "leg.xml", "topics.loop_closures": ""})}
    assert "/loop_closures" not in plan


def test_plot_of_the_bag(recorded, tmp_path):
    bag, _, _ = recorded
    assert plot_main([str(bag), "-o", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.glob("*.png"))
    assert names == sorted(["base_com.png", "contact_forces.png", "joint_tracking.png",
                            "torques.png", "real_time_factor.png", "contact_state.png",
                            "solver_health.png"])
    assert all(p.stat().st_size > 20_000 for p in tmp_path.glob("*.png"))


def test_run_records_and_plots(tmp_path):
    """``wb_sim_run --record BAG --plot DIR``: node, recorder and controller, then the plots."""
    from helpers.ros import ros_env

    bag, plots = tmp_path / "run_bag", tmp_path / "run_plots"
    lockstep = tmp_path / "lockstep.yaml"  # the loop stands whatever the machine's load
    lockstep.write_text("wb_sim:\n  ros__parameters:\n    sync:\n      mode: lockstep\n")
    out = subprocess.run([sys.executable, "-m", "wb_sim.ros.run", "--duration", "1.0",
                          "--config", str(lockstep), "--record", str(bag), "--plot", str(plots)],
                         capture_output=True, text=True, timeout=180, cwd=tmp_path,
                         env=ros_env(fresh_domain_id()))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "[record]" in out.stdout and f"closed '{bag}'" in out.stdout
    assert "wb_sim_plot: " in out.stdout and "stands" in out.stdout
    topics = bag_topics(bag)
    assert topics["/joint_states"][1] >= 900 and topics["/robot_description"][1] == 1
    # contact_state.png and solver_health.png: the truth and the health were recorded
    assert len(list(plots.glob("*.png"))) == 7
    # an existing bag is refused before anything starts
    again = subprocess.run([sys.executable, "-m", "wb_sim.ros.run", "--record", str(bag)],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert again.returncode == 2 and "exists; not overwriting" in again.stderr


def _contact_states(reader, conns) -> list:
    """The ContactState messages of ``conns``, deserialized by rosbags with the type
    registered from the bag's own definition (its MCAP schema, ros2msg) alone."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
    ts = get_typestore(Stores.ROS2_KILTED)
    assert "wb_sim_interfaces/msg/ContactState" not in ts.fielddefs
    c = conns[0]
    assert c.msgdef.data.startswith("std_msgs/Header header\n"), c.msgdef.data[:200]
    assert "MSG: wb_sim_interfaces/ContactPoint" in c.msgdef.data
    types = get_types_from_msg(c.msgdef.data, c.msgtype)
    ts.register({k: v for k, v in types.items() if k not in ts.fielddefs})
    return [ts.deserialize_cdr(raw, c.msgtype) for c, _, raw in reader.messages(conns)]


def _xyz(p) -> list[float]:
    return [p.x, p.y, p.z]


def test_contact_state_is_read_and_plotted_as_recorded(recorded, tmp_path, monkeypatch):
    """The bag's contact_state messages, read independently (rosbags with the bag's own
    definition, the fields read here), one per stamp: history_from_bag's truth_t,
    per-surface CoP and ZMP equal them bit for bit (NaN where a foot carried nothing), and
    contact_state.png's curves are those arrays (x and y against time, and the top view),
    the ZMP between the feet once standing."""
    from rosbags.rosbag2 import Reader

    from wb_sim.tools import plot
    bag = recorded[0]
    by_stamp = {}
    with Reader(bag) as reader:
        conn = [c for c in reader.connections if c.topic == "/contact_state"]
        for m in _contact_states(reader, conn):
            by_stamp.setdefault(m.header.stamp.sec * NS + m.header.stamp.nanosec, m)
    stamps = sorted(by_stamp)
    h = history_from_bag(bag)
    assert len(stamps) > 50 and h.truth_t.size == len(stamps)
    assert np.array_equal(h.truth_t, np.array(stamps) / NS)
    assert h.cop_names == ("left_foot", "right_foot")
    cop = np.array([[_xyz(f.centre_of_pressure) for f in by_stamp[t].surfaces]
                    for t in stamps]).transpose(1, 0, 2)
    zmp = np.array([_xyz(by_stamp[t].zmp) for t in stamps])
    assert np.array_equal(h.cop, cop, equal_nan=True)
    assert np.array_equal(h.zmp, zmp, equal_nan=True)
    last = cop[:, -1, 1]
    assert min(last) < zmp[-1, 1] < max(last)  # standing: the ZMP between the feet
    figures = {}

    def keep(fig, out_dir, name):
        figures[name] = fig
        return out_dir / name
    monkeypatch.setattr(plot, "_save", keep)
    plot.plot_history(h, tmp_path)
    ax_x, ax_y, ax_top = figures["contact_state.png"].axes
    series = [("CoP left_foot", cop[0]), ("CoP right_foot", cop[1]), ("ZMP", zmp)]
    for ax, xs, ys in ((ax_x, lambda p: h.truth_t, lambda p: p[:, 0]),
                       (ax_y, lambda p: h.truth_t, lambda p: p[:, 1]),
                       (ax_top, lambda p: p[:, 0], lambda p: p[:, 1])):
        assert [line.get_label() for line in ax.lines] == [s[0] for s in series]
        for line, (_, p) in zip(ax.lines, series):
            assert np.array_equal(line.get_xdata(), xs(p), equal_nan=True)
            assert np.array_equal(line.get_ydata(), ys(p), equal_nan=True)


def test_solver_health_is_read_and_plotted_as_recorded(recorded):
    """The bag's /diagnostics (the node's solver health, about 1 Hz of wall clock), read
    independently (rosbags): history_from_bag's health columns are float() of the
    published texts of the 'wb_sim: <group>' statuses bit for bit ('not measured': NaN),
    in stamp order, and solver_health.png's lines are those columns."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    from wb_sim.tools.plot import health_figure
    bag = recorded[0]
    ts = get_typestore(Stores.ROS2_KILTED)
    msgs = []
    with Reader(bag) as reader:
        conn = [c for c in reader.connections if c.topic == "/diagnostics"]
        for c, log, raw in reader.messages(conn):
            m = ts.deserialize_cdr(raw, c.msgtype)
            msgs.append((m.header.stamp.sec * NS + m.header.stamp.nanosec, log, {
                f"{s.name.removeprefix('wb_sim: ')}/{kv.key}": kv.value
                for s in m.status for kv in s.values}))
    msgs.sort(key=lambda m: m[:2])
    h = history_from_bag(bag)
    assert len(msgs) >= 2 and h.health_t.size == len(msgs)
    assert np.array_equal(h.health_t, np.array([m[0] for m in msgs]) / NS)
    assert "contact/penetration_m" in h.health_names and "timing/steps" in h.health_names
    assert "contact solver/contact model" not in h.health_names  # a text, not a number
    want = np.array([[np.nan if m[2][n] == "not measured" else float(m[2][n])
                      for n in h.health_names] for m in msgs])
    assert np.array_equal(h.health, want, equal_nan=True)
    assert h.health[-1, h.health_names.index("timing/steps")] > 100  # the physics ran
    shown = [ax for ax in health_figure(h).axes if ax.get_visible()]
    for k, ax in enumerate(shown):
        assert ax.get_title() == h.health_names[k]
        assert np.array_equal(ax.get_lines()[0].get_ydata(), h.health[:, k], equal_nan=True)
