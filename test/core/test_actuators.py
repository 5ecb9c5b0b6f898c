"""The joints' drives (wb_sim.actuators, ``actuators.model``) against closed forms: the
DC motor's torque-speed envelope (no-load speed, stall torque), the torque loop's
second-order step response, the winding's exponential heating with derating and trip;
``ideal`` bit-identical to the default; snapshots; the humanoid standing on dc_motor legs.

The motor is the default parameter set, the T-Motor AK80-9's published numbers
(docs/physics.md): kt 0.091 N*m/A, R 0.17 ohm, 48 V, 9:1, efficiency 0.9 (assumed):
stall torque 208.1 N*m, no-load speed 58.61 rad/s at the joint.

Figures measured when written: no-load speed and stall torque within 1e-15 of the closed
forms; rise time (10-90 %) 11.646 ms and overshoot 25.383 %, within 2e-5 and 4e-6 of the
closed form's; heating within 1e-12 K.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
from scipy.optimize import brentq

import wb_sim
from wb_sim.actuators import DcMotorActuators, second_order_transition

KT, R, V, N, ETA = 0.091, 0.17, 48.0, 9.0, 0.9
STALL = N * ETA * KT * V / R
NO_LOAD = V / (KT * N)


def wheel(izz: float = 0.05, lower: float | None = None, upper: float | None = None,
          **params) -> wb_sim.Simulator:
    """A wheel on a vertical axis (gravity does no work on it), fixed base, no URDF
    friction or damping, effort limit far above the motor's stall torque."""
    joint = ("revolute" if lower is not None else "continuous")
    limit = (f'lower="{lower}" upper="{upper}" ' if lower is not None else "")
    urdf = (f'<robot name="wheel"><link name="base"/><link name="wheel"><inertial>'
            f'<mass value="1.0"/><inertia ixx="0.01" iyy="0.01" izz="{izz}" ixy="0" ixz="0" '
            f'iyz="0"/></inertial></link><joint name="spin" type="{joint}"><parent link="base"/>'
            f'<child link="wheel"/><axis xyz="0 0 1"/><limit {limit}effort="10000" '
            f'velocity="1000"/></joint></robot>')
    return wb_sim.Simulator.from_params({"robot_description": urdf, "floating_base": False,
                                         "actuators.model": "dc_motor", **params})


def step_response(t, zeta, f):
    """The unit step response of x'' + 2 zeta w x' + w^2 x = w^2 (under-damped), at t."""
    w = 2 * math.pi * f
    wd = w * math.sqrt(1 - zeta**2)
    return 1 - np.exp(-zeta * w * t) * (np.cos(wd * t) + zeta / math.sqrt(1 - zeta**2)
                                        * np.sin(wd * t))


def crossing(t, y, level):
    """The first time y crosses level, linearly interpolated between samples."""
    k = int(np.argmax(y >= level))
    return t[k - 1] + (level - y[k - 1]) / (y[k] - y[k - 1]) * (t[k] - t[k - 1])


# ---------------------------------------------------------------------------
# the torque loop's discretisation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("zeta", [0.0, 0.3, 1.0, 2.5])
@pytest.mark.parametrize("f, dt", [(20.0, 1e-3), (300.0, 1e-2), (5.0, 1e-4)])
def test_transition_is_the_matrix_exponential(zeta, f, dt):
    w = 2 * math.pi * f
    expected = scipy.linalg.expm(np.array([[0.0, 1.0], [-w * w, -2 * zeta * w]]) * dt)
    phi = second_order_transition(np.array([f]), np.array([zeta]), dt)[:, 0]
    scale = np.array([1.0, w, 1.0 / w, 1.0])  # the entries made dimensionless
    np.testing.assert_allclose(phi * scale, expected.ravel() * scale, rtol=1e-9, atol=1e-11)


# ---------------------------------------------------------------------------
# the torque-speed envelope: no-load speed, stall torque, the line between
# ---------------------------------------------------------------------------


def test_full_voltage_reaches_the_no_load_speed_on_the_envelope():
    sim = wheel()
    assert sim.actuators.stall_torque()[0] == pytest.approx(STALL, rel=1e-12)
    assert sim.actuators.no_load_speed()[0] == pytest.approx(NO_LOAD, rel=1e-12)
    speeds, torques = [], []
    for _ in range(1000):  # 1 s; the mechanical time constant is I R / (N^2 eta kt^2) = 14 ms
        speeds.append(sim.joint_velocities[0])
        sim.step([1.0e4])  # far above the stall torque: the envelope decides
        torques.append(sim.applied_torques[0])
    speeds, torques = np.array(speeds), np.array(torques)
    assert sim.joint_velocities[0] == pytest.approx(NO_LOAD, rel=0.01)
    assert torques[0] == pytest.approx(STALL, rel=0.01)  # from rest: the stall torque
    # every step on the line stall (1 - w / w0), the back-EMF's
    np.testing.assert_allclose(torques, STALL * (1 - speeds / NO_LOAD), atol=1e-9 * STALL)
    r = sim.actuator_readings
    assert r.voltage[0] == pytest.approx(V, rel=1e-9)  # all of it back-EMF at no load
    assert abs(r.current[0]) < 1e-6


def test_a_held_joint_stalls_at_the_stall_torque():
    """The wheel pushed against its position limit: at rest there, the drive gives the
    stall torque N eta kt V / R, with the current V / R and the full voltage."""
    sim = wheel(lower=-0.1, upper=0.1)
    for _ in range(500):
        sim.step([1.0e4])
    assert abs(sim.joint_velocities[0]) < 1e-3 * NO_LOAD
    assert sim.applied_torques[0] == pytest.approx(STALL, rel=0.01)
    r = sim.actuator_readings
    assert r.current[0] == pytest.approx(V / R, rel=0.01)
    assert r.voltage[0] == pytest.approx(V, rel=0.01)


def test_within_the_envelope_the_command_acts_unchanged():
    sim = wheel(izz=100.0)
    sim.step([50.0])
    assert sim.applied_torques[0] == pytest.approx(50.0, rel=1e-12)
    sim.step([-50.0])
    assert sim.applied_torques[0] == pytest.approx(-50.0, rel=1e-12)
    assert sim.actuator_readings.current[0] == pytest.approx(-50.0 / (N * ETA * KT), rel=1e-12)


# ---------------------------------------------------------------------------
# the torque loop's step response
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [10000.0, 1000.0, 100.0])
def test_torque_step_response_is_the_second_order_closed_form(rate):
    """20 Hz, zeta 0.4: the applied torque at the end of step k is the closed form at
    (k + 1) dt (exact discretisation: at 100 Hz, w dt = 1.26, too). At 10 kHz the rise time
    (10-90 %) and overshoot read off the samples match the closed form's within 2 %."""
    f, zeta, cmd = 20.0, 0.4, 10.0
    sim = wheel(izz=100.0, physics_rate_hz=rate, **{"actuators.bandwidth": [f],
                                                   "actuators.damping_ratio": [zeta]})
    n = int(round(0.25 * rate))
    tau = np.empty(n)
    for k in range(n):
        sim.step([cmd])
        tau[k] = sim.applied_torques[0]
    t = (np.arange(n) + 1) / rate
    np.testing.assert_allclose(tau, cmd * step_response(t, zeta, f), atol=1e-9 * cmd)
    if rate < 10000.0:
        return
    y = tau / cmd
    rise = crossing(t, y, 0.9) - crossing(t, y, 0.1)
    rise_exact = (brentq(lambda s: step_response(s, zeta, f) - 0.9, 1e-6, 0.02)
                  - brentq(lambda s: step_response(s, zeta, f) - 0.1, 1e-6, 0.02))
    assert rise == pytest.approx(rise_exact, rel=0.02)
    overshoot = y.max() - 1.0
    assert overshoot == pytest.approx(math.exp(-zeta * math.pi / math.sqrt(1 - zeta**2)),
                                      rel=0.02)


def test_zero_bandwidth_is_instantaneous():
    sim = wheel(izz=100.0, **{"actuators.bandwidth": [0.0]})
    sim.step([7.0])
    assert sim.applied_torques[0] == pytest.approx(7.0, rel=1e-12)


# ---------------------------------------------------------------------------
# heat: the exponential, derating, trip
# ---------------------------------------------------------------------------

THERMAL = {"actuators.thermal_resistance": [0.5], "actuators.thermal_capacitance": [20.0],
           "actuators.ambient_temperature": 25.0, "physics_rate_hz": 200.0}
HOLD = 20.0  # N*m at the joint: I = 27.1 A, P = 125.2 W, T_inf = 87.6 C


def heat_run(seconds: float, **params):
    """A heavy wheel (it barely turns: the back-EMF stays < 1 V) held at HOLD N*m; the
    time, the applied torques and the temperatures."""
    sim = wheel(izz=1000.0, **{**THERMAL, **params})
    n = int(round(seconds * 200.0))
    temp, tau = np.empty(n + 1), np.empty(n)
    temp[0] = sim.actuator_readings.temperature[0]
    for k in range(n):
        sim.step([HOLD])
        tau[k] = sim.applied_torques[0]
        temp[k + 1] = sim.actuator_readings.temperature[0]
    return sim, np.arange(n + 1) / 200.0, tau, temp


def test_a_held_motor_heats_along_the_thermal_exponential():
    sim, t, tau, temp = heat_run(30.0, **{"actuators.temperature_limit": [500.0]})
    current = HOLD / (N * ETA * KT)
    power = current**2 * R
    expected = 25.0 + power * 0.5 * (1 - np.exp(-t / (0.5 * 20.0)))
    np.testing.assert_allclose(temp - 25.0, expected - 25.0, rtol=0.02)
    assert np.max(np.abs(temp - expected)) < 1e-9
    assert abs(sim.joint_velocities[0] * N * KT) < 1.0  # the back-EMF stayed small
    np.testing.assert_allclose(tau, HOLD, rtol=1e-12)  # never derated
    assert sim.actuator_readings.current[0] == pytest.approx(current, rel=1e-12)


def test_derating_holds_the_winding_below_its_limit():
    """Limit 60 C, band 10 K: the current is scaled by (60 - T) / 10 from 50 C on; the
    winding settles inside the band where the derated losses balance the cooling."""
    limit, band = 60.0, 10.0
    sim, t, tau, temp = heat_run(120.0, **{"actuators.temperature_limit": [limit],
                                           "actuators.derate_band": [band]})
    assert temp.max() < limit
    scale = np.clip((limit - temp[:-1]) / band, 0.0, 1.0)
    np.testing.assert_allclose(tau, HOLD * scale, atol=1e-9)
    assert tau[0] == pytest.approx(HOLD, rel=1e-12) and tau[-1] < 0.99 * HOLD
    # the balance at the end: T - T_amb = (s I)^2 R R_th
    s_end = (limit - temp[-1]) / band
    balance = 25.0 + (s_end * HOLD / (N * ETA * KT))**2 * R * 0.5
    assert temp[-1] == pytest.approx(balance, abs=0.01)
    assert limit - band < temp[-1] < limit


def test_trip_drops_the_torque_at_the_limit_and_latches():
    limit = 60.0
    sim, t, tau, temp = heat_run(40.0, **{"actuators.temperature_limit": [limit],
                                          "actuators.limit_action": "trip"})
    power = (HOLD / (N * ETA * KT))**2 * R
    t_trip = -10.0 * math.log(1 - (limit - 25.0) / (power * 0.5))  # closed form: 7.6 s
    k = int(np.argmax(temp >= limit))  # temp[k]: after step k - 1
    assert t[k] == pytest.approx(t_trip, abs=1 / 200.0)
    np.testing.assert_allclose(tau[:k], HOLD, rtol=1e-12)
    assert np.all(tau[k:] == 0.0)
    assert temp[-1] < limit - 20.0  # cooling since
    assert sim.actuator_readings.current[0] == 0.0
    sim.reset()  # the latch clears with the state
    sim.step([HOLD])
    assert sim.applied_torques[0] == pytest.approx(HOLD)


# ---------------------------------------------------------------------------
# the transmission's friction, reflected
# ---------------------------------------------------------------------------


def test_motor_friction_is_reflected_through_the_gear():
    sim = wheel(**{"actuators.friction": [0.05], "actuators.viscous_friction": [1e-4],
                   "joints.urdf_dynamics": False})
    assert sim.actuation.friction[0] == pytest.approx(N * 0.05)
    assert sim.actuation.damping[0] == pytest.approx(N**2 * 1e-4)
    for _ in range(2000):
        sim.step([1.0e4])
    # the no-load speed falls where the envelope meets the friction:
    # stall (1 - w / w0) = N f_c + N^2 b_m w (tanh saturated)
    w = (STALL - N * 0.05) / (STALL / NO_LOAD + N**2 * 1e-4)
    assert sim.joint_velocities[0] == pytest.approx(w, rel=1e-3)


# ---------------------------------------------------------------------------
# ideal, snapshots, configuration errors
# ---------------------------------------------------------------------------


def _run(sim, ctrl, steps):
    out = []
    for _ in range(steps):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        out.append(np.concatenate([sim.q, sim.v, sim.applied_torques]))
    return np.array(out)


def test_ideal_is_the_default_bit_for_bit(make_humanoid, shipped_controller):
    default = make_humanoid()
    ideal = make_humanoid(**{"actuators.model": "ideal"})
    a = _run(default, shipped_controller(default), 300)
    b = _run(ideal, shipped_controller(ideal), 300)
    assert np.array_equal(a, b)
    assert ideal.get_state().actuator is None
    assert np.isnan(ideal.actuator_readings.temperature).all()
    # and a drive that does something is not (the comparison can fail)
    motor = make_humanoid(**{"actuators.model": "dc_motor", "actuators.bandwidth": [50.0]})
    c = _run(motor, shipped_controller(motor), 300)
    assert not np.array_equal(a, c)


def test_snapshot_carries_the_drives_state(make_humanoid, shipped_controller):
    sim = make_humanoid(**{"actuators.model": "dc_motor", "actuators.bandwidth": [80.0],
                           "actuators.thermal_capacitance": [2.0]})
    ctrl = shipped_controller(sim)
    _run(sim, ctrl, 100)
    snap = sim.get_state()
    first = _run(sim, ctrl, 100)
    r1 = sim.actuator_readings
    sim.set_state(snap)
    second = _run(sim, ctrl, 100)
    r2 = sim.actuator_readings
    assert np.array_equal(first, second)
    for f in ("current", "voltage", "temperature"):
        assert np.array_equal(getattr(r1, f), getattr(r2, f))
    assert r1.temperature.max() > 25.0  # it did heat
    ideal = make_humanoid()
    with pytest.raises(wb_sim.CommandError, match="actuators.model"):
        ideal.set_state(snap)
    legs = make_humanoid(**{"actuators.model": "dc_motor", "actuators.joints": LEGS})
    with pytest.raises(wb_sim.CommandError, match="actuators.joints"):
        legs.set_state(snap)


def test_configuration_errors_name_the_parameter():
    with pytest.raises(wb_sim.ModelError, match="actuators.joints.*l_kne"):
        wheel(**{"actuators.joints": ["l_kne"]})
    with pytest.raises(wb_sim.ConfigError, match="actuators.resistance"):
        wheel(**{"actuators.resistance": [0.1, 0.2]})
    with pytest.raises(wb_sim.ConfigError, match="actuators.temperature_limit"):
        wheel(**{"actuators.temperature_limit": [20.0]})
    with pytest.raises(wb_sim.ConfigError, match="actuators.model"):
        wheel(**{"actuators.model": "stepper"})
    with pytest.raises(wb_sim.ConfigError, match="actuators.gear_efficiency"):
        wheel(**{"actuators.gear_efficiency": [1.2]})


# ---------------------------------------------------------------------------
# the humanoid on dc_motor legs
# ---------------------------------------------------------------------------

LEGS = [f"{s}_{j}" for s in "lr" for j in ("hip_yaw", "hip_roll", "hip_pitch", "knee",
                                           "ankle_pitch", "ankle_roll")]


def test_humanoid_stands_on_dc_motor_legs(make_humanoid, shipped_controller):
    """AK80-9 numbers on the 12 leg joints, a 200 Hz torque loop (assumed): the shipped
    PD + gravity controller holds the crouch 5 s as with ideal drives."""
    sim = make_humanoid(**{"actuators.model": "dc_motor", "actuators.joints": LEGS,
                           "actuators.bandwidth": [200.0], "actuators.damping_ratio": [0.7]})
    ctrl = shipped_controller(sim)
    z0 = sim.state.base_position[2]
    z = []
    for _ in range(5000):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        z.append(sim.state.base_position[2])
    z = np.array(z)
    final = sim.state
    tilt = math.degrees(math.acos(min(1.0, final.base_pose.rotation[2, 2])))
    assert abs(z[-1] - z0) < 0.02 and tilt < 5.0
    assert np.ptp(z[-1000:]) < 1e-3
    r = sim.actuator_readings
    legs = [sim.joint_names.index(n) for n in LEGS]
    others = [i for i in range(sim.nj) if i not in legs]
    assert np.isfinite(r.current[legs]).all() and np.isnan(r.current[others]).all()
    assert (r.temperature[legs] >= 25.0).all()
    knee = sim.joint_names.index("l_knee")
    assert abs(r.current[knee]) > 1.0  # the knee carries the crouch
    # the reading is the applied torque's current
    assert r.current[knee] == pytest.approx(sim.applied_torques[knee] / (N * ETA * KT), rel=1e-9)


def test_readings_shape_and_names():
    sim = wheel()
    r = sim.actuator_readings
    assert r.joint_names == ("spin",)
    assert r.temperature[0] == 25.0 and r.current[0] == 0.0
    assert isinstance(sim.actuators, DcMotorActuators)


def test_squat_and_rise_meets_the_torque_speed_envelope(make_humanoid, shipped_controller):
    """The legs on AK80-9s fed 8 V (stall 34.7 N*m, no-load 9.77 rad/s): a squat of 1.2 rad
    at the knees and back in 1.5 s, twice, under the shipped controller. Every applied leg
    torque lies within N eta kt (+-V - kt N qdot) / R at the step's starting speed, the
    envelope binds on hundreds of steps (measured: 979 of 3000), and the robot rises back."""
    sim = make_humanoid(**{"actuators.model": "dc_motor", "actuators.joints": LEGS,
                           "actuators.supply_voltage": [8.0]})
    ctrl = shipped_controller(sim)
    q0, z0 = ctrl.q_ref.copy(), sim.state.base_position[2]
    squat = np.zeros(sim.nj)
    for s in "lr":
        squat[[sim.joint_names.index(f"{s}_{j}") for j in ("hip_pitch", "knee",
                                                           "ankle_pitch")]] = -0.6, 1.2, -0.6
    a = sim.actuators
    bound, excess, z_low = 0, 0.0, z0
    for k in range(3000):
        ctrl.q_ref = q0 + squat * 0.5 * (1 - math.cos(2 * math.pi * k * sim.dt / 1.5))
        st = sim.state
        w = st.joint_velocities[a.idx]
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        tau = sim.applied_torques[a.idx]
        hi = a.gain * (a.V - a.ke * w) / a.R
        lo = a.gain * (-a.V - a.ke * w) / a.R
        excess = max(excess, float(np.max(tau - hi)), float(np.max(lo - tau)))
        bound += bool(np.any(np.isclose(tau, hi, rtol=1e-9) | np.isclose(tau, lo, rtol=1e-9)))
        z_low = min(z_low, sim.state.base_position[2])
    assert excess < 1e-9 * a.stall_torque()[0]
    assert bound > 300
    assert z_low < z0 - 0.1  # it did squat
    assert abs(sim.state.base_position[2] - z0) < 0.02  # and rose
