"""The force-torque sensors recorded (``Recorder`` / ``History``, a bag's ``ft/<sensor>``)
and plotted (``wb_sim_plot``'s ``ft_sensors.png``): a fixed-base arm swinging under a
torque square wave, sensors at both joints (one in its child's frame, one in its parent's,
reversed, with seeded noise and a bias).

Checked against the simulator's readings and from the arrays the figure draws (not the
image): the Recorder's ``ft_wrench`` is ``Simulator.ft_wrench_array()`` after each step bit
for bit and survives the ``.npz``; the figure's lines are those columns bit for bit; a bag
as the node and wb_sim_record write it (every ``ft/<sensor>`` WrenchStamped stamped with the
joint state of the same step, from a headless run, without ROS) reads back to the same
arrays, the sensors in ``ft_sensors.names`` order; a sensor published every 5th step is held
between its messages; a version 2 history (before the sensors were recorded) loads without
them.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers.extras import require_modules

require_modules("matplotlib", why="pip install wb_sim[plot] (the plot extra)")

import wb_sim  # noqa: E402
from wb_sim.tools.plot import ft_figure, main as plot_main  # noqa: E402
from wb_sim.tools.recording import History, Recorder  # noqa: E402

ARM = """<robot name="arm"><link name="base"/>
  <link name="l1"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01"
    ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="l2"><inertial><origin xyz="0.05 0 0.1"/><mass value="1"/><inertia ixx="0.01"
    iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="100" velocity="100"/></joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/>
    <origin xyz="0 0 0.2"/><axis xyz="1 0 0"/><limit lower="-3" upper="3" effort="100"
    velocity="100"/></joint>
</robot>"""
SENSORS = ["shoulder_ft", "elbow_ft"]
PARAMS = {"robot_description": ARM, "floating_base": False,
          "ft_sensors.names": SENSORS, "ft_sensors.joints": ["j1", "j2"],
          "ft_sensors.frames": ["child", "parent"],
          "ft_sensors.directions": ["parent_to_child", "child_to_parent"],
          "ft_sensors.force_noise_std": 0.05, "ft_sensors.torque_noise_std": 0.01,
          "ft_sensors.force_bias": [0.1, 0.0, 0.0, 0.0, 0.0, -0.2], "ft_sensors.seed": 7}
STEPS = 400


def _torque(k):
    return np.array([0.5 if (k // 100) % 2 else -0.5, 3.0 if (k // 50) % 2 else -3.0])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(the readings after each step, the Recorder's history read back from its .npz, its
    path, the joint states and their stamps)."""
    sim = wb_sim.Simulator.from_params(PARAMS)
    rec = Recorder(sim)
    readings, states = [], []
    for k in range(STEPS):
        if k:
            sim.step(_torque(k))
        rec.record(sim)
        readings.append(sim.ft_wrench_array())
        st = sim.state
        states.append((round(sim.t * 1e9), st.joint_positions.copy(),
                       st.joint_velocities.copy(), sim.applied_torques.copy()))
    path = rec.history().save(tmp_path_factory.mktemp("ft") / "arm.npz")
    return np.array(readings), History.load(path), path, states


def test_the_readings_are_recorded(run):
    readings, h, _, _ = run
    assert h.ft_names == tuple(SENSORS)
    assert h.ft_wrench.shape == (STEPS, 2, 6)
    assert np.array_equal(h.ft_wrench, readings)
    assert np.abs(readings[1:, 1, 3]).max() > 1.0  # the elbow's torque about its axis: not zero


def test_the_plotted_lines_are_the_recorded_arrays(run, tmp_path, capsys):
    _, h, path, _ = run
    fig = ft_figure(h)
    axes = fig.axes
    assert len(axes) == 2 * len(SENSORS)
    for s, name in enumerate(SENSORS):
        for c in range(2):
            ax = axes[2 * s + c]
            assert ax.get_title() == f"{name}: {('force', 'torque')[c]}"
            lines = ax.get_lines()
            assert len(lines) == 3
            for a, line in enumerate(lines):
                assert np.array_equal(line.get_xdata(), h.t)
                assert np.array_equal(line.get_ydata(), h.ft_wrench[:, s, 3 * c + a]), (s, c, a)
    out = tmp_path / "plots"
    assert plot_main([str(path), "-o", str(out)]) == 0
    assert "ft_sensors.png" in capsys.readouterr().out
    assert (out / "ft_sensors.png").stat().st_size > 20_000


def test_a_version_2_history_loads_without_the_sensors(run, tmp_path):
    _, h, path, _ = run
    with np.load(path) as z:
        old = {k: z[k] for k in z.files}
    del old["ft_names"], old["ft_wrench"]
    old["format_version"] = np.array(2)
    np.savez(tmp_path / "v2.npz", **old)
    back = History.load(tmp_path / "v2.npz")
    assert back.ft_names == () and back.ft_wrench.shape == (STEPS, 0, 6)
    assert np.array_equal(back.applied_torques, h.applied_torques)


def test_a_bag_gives_the_recorded_readings(run, tmp_path):
    """The bag: joint states every step, the elbow's sensor every step, the shoulder's
    every 5th (publish.ft_rate_hz 200), the sensors' topics written in the reverse of
    their parameters' order; the reader gives the names' order, the readings bit for bit
    at their steps, held in between."""
    require_modules("rosbags", why="pip install rosbags (the plot extra)")
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    from wb_sim.tools.bag import history_from_bag

    readings, _, _, states = run
    ts = get_typestore(Stores.ROS2_KILTED)
    T = ts.types
    Time, Header = T["builtin_interfaces/msg/Time"], T["std_msgs/msg/Header"]
    V3, W = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Wrench"]
    js_type, w_type, str_type = ("sensor_msgs/msg/JointState", "geometry_msgs/msg/WrenchStamped",
                                 "std_msgs/msg/String")
    with Writer(tmp_path / "bag", version=8, storage_plugin=StoragePlugin.MCAP) as w:
        def conn(topic, msgtype):
            return w.add_connection(topic, msgtype, typestore=ts)
        c_par, c_urdf = conn("/wb_sim_record/parameters", str_type), \
            conn("/robot_description", str_type)
        c_js = conn("/joint_states", js_type)
        c_ft = {n: conn(f"/ft/{n}", w_type) for n in reversed(SENSORS)}
        w.write(c_par, 1, ts.serialize_cdr(T[str_type](data=json.dumps(
            {"parameters": {**PARAMS, "physics_rate_hz": 1000.0}})), str_type))
        w.write(c_urdf, 2, ts.serialize_cdr(T[str_type](data=ARM), str_type))
        for k, (t_ns, qj, vj, tau) in enumerate(states):
            header = Header(stamp=Time(sec=t_ns // 10**9, nanosec=t_ns % 10**9), frame_id="")
            log = 10**9 + 1_000_000 * k
            w.write(c_js, log, ts.serialize_cdr(T[js_type](
                header=header, name=["j1", "j2"], position=qj, velocity=vj, effort=tau), js_type))
            for s, name in enumerate(SENSORS):
                if name == "shoulder_ft" and k % 5:
                    continue
                r = readings[k, s]
                msg = T[w_type](header=Header(stamp=header.stamp, frame_id=name),
                                wrench=W(force=V3(x=r[0], y=r[1], z=r[2]),
                                         torque=V3(x=r[3], y=r[4], z=r[5])))
                w.write(c_ft[name], log + 10_000, ts.serialize_cdr(msg, w_type))
    h = history_from_bag(tmp_path / "bag")
    assert h.ft_names == tuple(SENSORS) and h.n == STEPS
    assert np.array_equal(h.ft_wrench[:, 1], readings[:, 1])
    held = readings[(np.arange(STEPS) // 5) * 5, 0]
    assert np.array_equal(h.ft_wrench[:, 0], held)
    assert not np.array_equal(held, readings[:, 0])  # holding is visible: the check can fail
    fig = ft_figure(h)
    assert np.array_equal(fig.axes[3].get_lines()[0].get_ydata(), readings[:, 1, 3])
