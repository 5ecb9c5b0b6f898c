"""The drives' readings recorded (``Recorder`` / ``History``) and plotted (``wb_sim_plot``):
the squat-and-rise of test/core/test_actuators.py (the humanoid's legs on AK80-9 motors fed
8 V: stall 34.7 N*m, no-load 9.77 rad/s; 1.2 rad at the knees and back in 1.5 s, twice).

Checked, from the arrays the plot draws (not from the image):

* the torque-speed figure's samples (:func:`operating_points`, from the recorded current
  and voltage) are the run's applied torques (exactly) at the joint speeds of the step's
  start, the previous sample's recorded joint velocities (within 1e-12 rad/s; measured
  1.3e-15);
* every sample lies within the envelope N eta kt (+-V - kt N w) / R, computed here from the
  simulator's constants (measured excess: none, 0 N*m), and on it for hundreds of steps
  (measured: 979 of 3000 per knee), so the check can fail; braking, the knee goes past the
  stall torque (measured: 438 samples, up to 115 % of it): the envelope is not clipped there;
* the winding heats (the knees' temperature rises) and the readings survive the .npz;
* ``wb_sim_plot`` on the saved .npz writes the five figures and the drives' three;
* a version 1 history (before the drives were recorded) still loads, the new fields NaN;
* a bag as the node and wb_sim_record write it (from a headless run, without ROS): each
  unstamped reading lands on the joint state received just before it, equal to the
  Recorder's, and the drive's constants come from the recorded parameters.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from helpers.extras import require_modules

require_modules("matplotlib", why="pip install wb_sim[plot] (the plot extra)")

from helpers.robots import make_humanoid, shipped_controller  # noqa: E402
from wb_sim.tools.plot import main as plot_main, plot_history  # noqa: E402
from wb_sim.tools.recording import (DRIVE_COLUMNS, History, Recorder,  # noqa: E402
                                    operating_points, torque_speed_envelope)

LEGS = [f"{s}_{j}" for s in "lr" for j in ("hip_yaw", "hip_roll", "hip_pitch", "knee",
                                           "ankle_pitch", "ankle_roll")]
DRIVE_FIGURES = ["motor_current.png", "motor_temperature.png", "torque_speed.png"]


@pytest.fixture(scope="module")
def squat(tmp_path_factory):
    """(simulator, the saved .npz read back, its path) of the squat-and-rise, every step
    recorded."""
    sim = make_humanoid(**{"actuators.model": "dc_motor", "actuators.joints": LEGS,
                           "actuators.supply_voltage": [8.0]})
    ctrl = shipped_controller(sim)
    q0 = ctrl.q_ref.copy()
    bend = np.zeros(sim.nj)
    for s in "lr":
        bend[[sim.joint_names.index(f"{s}_{j}") for j in ("hip_pitch", "knee",
                                                          "ankle_pitch")]] = -0.6, 1.2, -0.6
    rec = Recorder(sim)
    for k in range(3000):
        ctrl.q_ref = q0 + bend * 0.5 * (1 - math.cos(2 * math.pi * k * sim.dt / 1.5))
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        rec.record(sim, ctrl.q_ref)
    path = rec.history().save(tmp_path_factory.mktemp("squat") / "squat.npz")
    return sim, History.load(path), path


def test_the_readings_are_recorded(squat):
    sim, h, _ = squat
    assert h.actuator_model == "dc_motor" and h.actuator_joints == tuple(LEGS)
    assert h.motor_current.shape == h.motor_voltage.shape == (3000, 12)
    a = sim.actuators
    assert np.array_equal(h.drive_parameters, np.column_stack(
        [a.kt, a.R, a.V, a.N, a.eta, a.t_lim]))
    assert DRIVE_COLUMNS[2] == "supply_voltage" and np.all(h.drive("supply_voltage") == 8.0)
    last = sim.actuator_readings
    d = h.drive_index
    assert np.array_equal(h.motor_current[-1], last.current[d])
    assert np.array_equal(h.motor_temperature[-1], last.temperature[d])
    knee = LEGS.index("l_knee")
    assert h.motor_temperature[0, knee] >= 25.0
    assert h.motor_temperature[-1, knee] > h.motor_temperature[0, knee] + 1e-3  # it heats
    assert np.array_equal(h.joint_velocities[-1], sim.state.joint_velocities)


def test_torque_speed_samples_lie_in_the_envelope(squat):
    sim, h, _ = squat
    speed, torque = operating_points(h)
    d = h.drive_index
    # the samples are the run's: the applied torque at the speed the step started from
    assert np.array_equal(torque, h.applied_torques[:, d])
    assert np.max(np.abs(speed[1:] - h.joint_velocities[:-1, d])) < 1e-12
    # under the envelope line, computed from the simulator's own constants
    a = sim.actuators
    upper = a.gain * (a.V - a.ke * speed) / a.R
    lower = a.gain * (-a.V - a.ke * speed) / a.R
    tol = 1e-9 * a.stall_torque()
    assert np.all(torque <= upper + tol) and np.all(torque >= lower - tol)
    lo, hi = torque_speed_envelope(h, speed)  # the line the figure draws is that one
    np.testing.assert_allclose(hi, upper, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lo, lower, rtol=1e-12, atol=1e-12)
    on = np.isclose(torque, upper, rtol=1e-9) | np.isclose(torque, lower, rtol=1e-9)
    knee = LEGS.index("l_knee")
    assert on[:, knee].sum() > 300  # the envelope binds: the check above can fail
    # braking (torque against the motion) the winding carries more than V / R: the
    # envelope is not clipped at the stall torque
    braking = torque * speed < 0
    assert np.any(braking & (np.abs(torque) > 1.05 * a.stall_torque()))


def test_wb_sim_plot_draws_the_drives(squat, tmp_path, capsys):
    _, h, path = squat
    out = tmp_path / "plots"
    assert plot_main([str(path), "-o", str(out)]) == 0
    # the five, contact_state.png (the Recorder's contact truth), the drives' three
    assert "9 figures" in capsys.readouterr().out
    for name in DRIVE_FIGURES:
        p = out / name
        assert p.is_file() and p.stat().st_size > 20_000, (name, p.stat().st_size)


def test_a_version_1_history_loads_without_the_drives(squat, tmp_path):
    _, h, path = squat
    with np.load(path) as z:
        old = {k: z[k] for k in z.files}
    for k in ("joint_velocities", "actuator_model", "actuator_joints", "motor_current",
              "motor_voltage", "motor_temperature", "drive_parameters"):
        del old[k]
    old["format_version"] = np.array(1)
    np.savez(tmp_path / "v1.npz", **old)
    back = History.load(tmp_path / "v1.npz")
    assert back.actuator_joints == () and back.actuator_model == ""
    assert back.joint_velocities.shape == (3000, 23) and np.isnan(back.joint_velocities).all()
    assert np.array_equal(back.applied_torques, h.applied_torques)


ARM = """<robot name="arm"><link name="base"/>
  <link name="l1"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01"
    ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="l2"><inertial><origin xyz="0 0 0.1"/><mass value="1"/><inertia ixx="0.01"
    iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="100" velocity="100"/></joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/>
    <axis xyz="1 0 0"/><limit lower="-3" upper="3" effort="100" velocity="100"/></joint>
</robot>"""


def test_a_bag_gives_each_reading_the_joint_state_received_before_it(tmp_path):
    """A bag as the node and wb_sim_record write it, from a headless run (fixed-base arm,
    j2 on a dc_motor fed 4 V, a 10 Hz torque square wave): joint states every step, the
    readings every 10th step (received just after that step's joint state, before the next
    one), the recorder's parameters. The reader's readings are the Recorder's, bit for bit,
    at those samples, NaN elsewhere; the drive's constants come from the parameters."""
    require_modules("rosbags", why="pip install rosbags (the plot extra)")
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    import wb_sim
    from wb_sim.tools.bag import history_from_bag

    params = {"robot_description": ARM, "floating_base": False, "actuators.model": "dc_motor",
              "actuators.joints": ["j2"], "actuators.supply_voltage": [4.0],
              "actuators.thermal_capacitance": [1.0]}
    sim = wb_sim.Simulator.from_params(params)
    rec = Recorder(sim)
    ts = get_typestore(Stores.ROS2_KILTED)
    T = ts.types
    Time, Header = T["builtin_interfaces/msg/Time"], T["std_msgs/msg/Header"]
    js_type, arr_type, str_type = ("sensor_msgs/msg/JointState",
                                   "std_msgs/msg/Float64MultiArray", "std_msgs/msg/String")
    layout = T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    with Writer(tmp_path / "bag", version=8, storage_plugin=StoragePlugin.MCAP) as w:
        def conn(topic, msgtype):
            return w.add_connection(topic, msgtype, typestore=ts)
        c_par, c_urdf = conn("/wb_sim_record/parameters", str_type), \
            conn("/robot_description", str_type)
        c_js = conn("/joint_states", js_type)
        c_act = {r: conn(f"/actuators/{r}", arr_type)
                 for r in ("current", "voltage", "temperature")}
        recorded = {**params, "physics_rate_hz": 1000.0}
        w.write(c_par, 1, ts.serialize_cdr(T[str_type](data=json.dumps(
            {"parameters": recorded})), str_type))
        w.write(c_urdf, 2, ts.serialize_cdr(T[str_type](data=ARM), str_type))
        for k in range(400):
            if k:
                sim.step(np.array([0.0, 3.0 if (k // 50) % 2 else -3.0]))
            rec.record(sim)
            t_ns = round(sim.t * 1e9)
            st = sim.state
            js = T[js_type](header=Header(stamp=Time(sec=t_ns // 10**9, nanosec=t_ns % 10**9),
                                          frame_id=""),
                            name=list(sim.joint_names), position=st.joint_positions,
                            velocity=st.joint_velocities, effort=sim.applied_torques)
            log = 10**9 + 1_000_000 * k  # received 1 ms apart
            w.write(c_js, log, ts.serialize_cdr(js, js_type))
            if k % 10 == 0:
                r = sim.actuator_readings
                for name, c in c_act.items():
                    w.write(c, log + 50_000, ts.serialize_cdr(
                        T[arr_type](layout=layout, data=np.asarray(getattr(r, name))),
                        arr_type))
    h = history_from_bag(tmp_path / "bag")
    ref = rec.history()
    assert h.n == ref.n == 400 and h.actuator_joints == ("j2",)
    assert np.array_equal(h.drive_parameters, ref.drive_parameters)
    at = np.arange(400) % 10 == 0
    for field in ("motor_current", "motor_voltage", "motor_temperature"):
        got, want = getattr(h, field), getattr(ref, field)
        assert np.array_equal(got[at], want[at]), field
        assert np.isnan(got[~at]).all(), field
    assert np.array_equal(h.joint_velocities, ref.joint_velocities)
    assert np.abs(ref.motor_current).max() > 1.0 and ref.motor_temperature[-1, 0] > 25.0
    paths = plot_history(h, tmp_path / "plots")
    assert [p.name for p in paths[-3:]] == DRIVE_FIGURES
