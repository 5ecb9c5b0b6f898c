"""The solver health recorded (a bag's ``/diagnostics``, as ``wb_sim_record`` writes it) and
plotted (``wb_sim_plot``'s ``solver_health.png``), issue 32.

The messages are the node's: the standing humanoid on rigid contact under its shipped
controller, its :class:`~wb_sim.ros.health.HealthMonitor` sampled every 60 steps (watching
the steps), each window's statuses as a diagnostic_msgs/DiagnosticArray stamped with the
state's simulated time, plus a status of another node on the same topic (skipped by the
reader). Written to a bag without ROS (rosbags), one message out of its stamp order.
Checked from the arrays the figure draws (not the image): ``history_from_bag``'s
``health`` columns are ``float`` of the recorded texts bit for bit (``'not measured'``:
NaN), in stamp order; a text figure (the contact model) is no column; the figure's lines
are those columns; the History keeps them through its ``.npz``; a version 4 file loads
without them.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from helpers.extras import require_modules

require_modules("matplotlib", "rosbags", why="pip install wb_sim[plot] (the plot extra)")

import wb_sim  # noqa: E402
from helpers.robots import make_humanoid, shipped_controller  # noqa: E402
from wb_sim.ros.health import CHECKS, HealthMonitor  # noqa: E402
from wb_sim.tools.bag import history_from_bag  # noqa: E402
from wb_sim.tools.plot import health_figure, main as plot_main  # noqa: E402
from wb_sim.tools.recording import History  # noqa: E402

STEPS, EVERY = 360, 60
NS = 1_000_000_000


class _Stats:
    """The pacer's counters HealthMonitor reads (a headless loop: every step on time)."""

    def __init__(self):
        self.steps_total = self.misses_total = 0

    def take_latency_peak(self) -> float:
        return 2.5e-4


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(the bag's path, [(stamp ns, {status name: {key: text}})] in stamp order)."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    sim = make_humanoid(**{"contact.model": "rigid"})
    ctrl = shipped_controller(sim)
    stats = _Stats()
    monitor = HealthMonitor(sim, stats, {c.key: c.default for c in CHECKS})
    monitor.watching = True
    states, samples = [], []
    for k in range(1, STEPS + 1):
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
        stats.steps_total += 1
        monitor.after_step()
        t_ns = round(sim.t * NS)
        states.append((t_ns, sim.joint_positions.copy(), sim.q[:7].copy()))
        if k % EVERY == 0:
            samples.append((t_ns, {s.name: dict(s.values) for s in monitor.sample()}))
    ts = get_typestore(Stores.ROS2_KILTED)
    T = ts.types
    Time, Header = T["builtin_interfaces/msg/Time"], T["std_msgs/msg/Header"]
    Status, KeyValue = T["diagnostic_msgs/msg/DiagnosticStatus"], T["diagnostic_msgs/msg/KeyValue"]
    js, odom, arr, string = ("sensor_msgs/msg/JointState", "nav_msgs/msg/Odometry",
                             "diagnostic_msgs/msg/DiagnosticArray", "std_msgs/msg/String")

    def stamp(t_ns):
        return Header(stamp=Time(sec=t_ns // NS, nanosec=t_ns % NS), frame_id="")
    bag = tmp_path_factory.mktemp("health") / "bag"
    urdf = (wb_sim.config_path("humanoid").parent.parent / "urdf" / "humanoid.urdf").read_text()
    with Writer(bag, version=8, storage_plugin=StoragePlugin.MCAP) as w:
        def conn(topic, msgtype):
            return w.add_connection(topic, msgtype, typestore=ts)
        c_par, c_urdf, c_js, c_odom, c_diag = (conn("/wb_sim_record/parameters", string),
                                               conn("/robot_description", string),
                                               conn("/joint_states", js),
                                               conn("/odom/ground_truth", odom),
                                               conn("/diagnostics", arr))
        w.write(c_par, 1, ts.serialize_cdr(T[string](data=json.dumps({"parameters": {
            "physics_rate_hz": 1000.0, "floating_base": True}})), string))
        w.write(c_urdf, 2, ts.serialize_cdr(T[string](data=urdf), string))
        for k, (t_ns, qj, base) in enumerate(states):
            log = NS + 1_000_000 * k
            w.write(c_js, log, ts.serialize_cdr(T[js](header=stamp(t_ns), name=list(
                sim.joint_names), position=qj, velocity=np.zeros(0), effort=np.zeros(0)), js))
            pose = T["geometry_msgs/msg/Pose"](position=T["geometry_msgs/msg/Point"](
                x=base[0], y=base[1], z=base[2]), orientation=T["geometry_msgs/msg/Quaternion"](
                x=base[3], y=base[4], z=base[5], w=base[6]))
            zero = T["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0)
            m = T[odom](header=stamp(t_ns), child_frame_id="base",
                        pose=T["geometry_msgs/msg/PoseWithCovariance"](
                            pose=pose, covariance=np.zeros(36)),
                        twist=T["geometry_msgs/msg/TwistWithCovariance"](
                            twist=T["geometry_msgs/msg/Twist"](linear=zero, angular=zero),
                            covariance=np.zeros(36)))
            w.write(c_odom, log, ts.serialize_cdr(m, odom))
        # the last two windows received in the reverse of their stamps' order
        order = list(range(len(samples) - 2)) + [len(samples) - 1, len(samples) - 2]
        for i, j in enumerate(order):
            t_ns, statuses = samples[j]
            status = [Status(level=0, name=name, message="OK", hardware_id="humanoid",
                             values=[KeyValue(key=key, value=v) for key, v in values.items()])
                      for name, values in statuses.items()]
            status.append(Status(level=0, name="wb_sim_pd_controller: loop", message="",
                                 hardware_id="", values=[KeyValue(key="period_s",
                                                                  value="0.001")]))
            w.write(c_diag, 2 * NS + i, ts.serialize_cdr(T[arr](header=stamp(t_ns),
                                                               status=status), arr))
    return bag, samples


def test_the_bag_gives_the_recorded_values(run, tmp_path):
    bag, samples = run
    h = history_from_bag(bag)
    assert np.array_equal(h.health_t, np.array([t for t, _ in samples]) / NS)
    names = [f"{st.removeprefix('wb_sim: ')}/{key}" for st, values in samples[0][1].items()
             for key in values if key != "contact model"]
    assert h.health_names == tuple(names)
    assert "contact solver/solver_residual_mps" in names and "timing/steps" in names
    assert not any(n.startswith("wb_sim_pd_controller") or n.endswith("contact model")
                   for n in h.health_names)
    expected = np.array([[math.nan if values[f"wb_sim: {n.split('/')[0]}"][n.split("/")[1]]
                          == "not measured" else
                          float(values[f"wb_sim: {n.split('/')[0]}"][n.split("/")[1]])
                          for n in names] for _, statuses in samples
                         for values in [statuses]])
    assert np.array_equal(h.health, expected, equal_nan=True)
    col = {n: k for k, n in enumerate(h.health_names)}
    # a rigid contact's figures: measured (solves every step, a residual, iterations)
    assert (h.health[:, col["contact solver/solves"]] == EVERY).all()
    assert np.isfinite(h.health[:, col["contact solver/solver_residual_mps"]]).all()
    assert (h.health[:, col["timing/command_latency_s"]] == 2.5e-4).all()
    assert (h.health[:, col["contact/penetration_m"]] > 0).all()
    # the figure: one panel per column, its line the column bit for bit
    fig = health_figure(h)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == list(h.health_names)
    for k, ax in enumerate(shown):
        (line,) = ax.get_lines()
        assert np.array_equal(line.get_xdata(), h.health_t)
        assert np.array_equal(line.get_ydata(), h.health[:, k], equal_nan=True), names[k]
    # through the .npz, and wb_sim_plot writes the figure
    back = History.load(h.save(tmp_path / "run.npz"))
    assert back.health_names == h.health_names and np.array_equal(back.health_t, h.health_t)
    assert np.array_equal(back.health, h.health, equal_nan=True)
    out = tmp_path / "plots"
    assert plot_main([str(bag), "-o", str(out)]) == 0
    assert (out / "solver_health.png").stat().st_size > 20_000


def test_a_version_4_history_loads_without_the_health(run, tmp_path):
    h = history_from_bag(run[0])
    path = h.save(tmp_path / "v5.npz")
    with np.load(path) as z:
        old = {k: z[k] for k in z.files}
    for key in ("health_t", "health", "health_names"):
        del old[key]
    old["format_version"] = np.array(4)
    np.savez(tmp_path / "v4.npz", **old)
    back = History.load(tmp_path / "v4.npz")
    assert back.health_names == () and back.health.shape == (0, 0)
    assert np.array_equal(back.joint_positions, h.joint_positions, equal_nan=True)


def test_wb_sim_record_plans_the_diagnostics():
    from wb_sim.ros.record import plan_topics
    plan = {t: m for t, m, _ in plan_topics({})}
    assert plan["/diagnostics"] == "diagnostic_msgs/msg/DiagnosticArray"
    assert "/diagnostics" not in {t for t, _, _ in plan_topics({"topics.diagnostics": ""})}
    assert "/health" in {t for t, _, _ in plan_topics({"topics.diagnostics": "health"})}
