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

import wb_sim
from helpers.drives import (ETA, KT, LEGS, N, NO_LOAD, R, STALL, V, legs_stand, squat,
                            torque_step, wheel)
from wb_sim.actuators import DcMotorActuators, second_order_transition


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
    got = torque_step(rate)
    assert got["error"] < 1e-9
    if rate < 10000.0:
        return
    assert got["rise"] == pytest.approx(got["rise_exact"], rel=0.02)
    assert got["overshoot"] == pytest.approx(got["overshoot_exact"], rel=0.02)


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

def test_humanoid_stands_on_dc_motor_legs():
    """AK80-9 numbers on the 12 leg joints, a 200 Hz torque loop (assumed): the shipped
    PD + gravity controller holds the crouch 5 s as with ideal drives."""
    got = legs_stand(True)
    sim, z = got["sim"], got["z"]
    assert abs(got["drop"]) < 0.02 and got["tilt_deg"] < 5.0
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


def test_squat_and_rise_meets_the_torque_speed_envelope():
    """The legs on AK80-9s fed 8 V (stall 34.7 N*m, no-load 9.77 rad/s): a squat of 1.2 rad
    at the knees and back in 1.5 s, twice, under the shipped controller. Every applied leg
    torque lies within N eta kt (+-V - kt N qdot) / R at the step's starting speed, the
    envelope binds on hundreds of steps (measured: 979 of 3000), and the robot rises back."""
    got = squat(8.0)
    assert got["excess"] < 1e-9
    assert got["bound"] > 300
    assert got["depth"] > 0.1  # it did squat
    assert got["end_dz"] < 0.02  # and rose
