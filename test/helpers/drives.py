"""The joints' drives (``actuators.model: dc_motor``) in runs that test/core/test_actuators.py
asserts on and docs/physics.md quotes (through test/helpers/docs_rows.py): the AK80-9 numbers
(the defaults of ``actuators.*``) on a wheel, and on the humanoid's legs standing and squatting
under the shipped controller. Runs are deterministic and cached per process; the returned
simulators are only read."""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.optimize import brentq

import wb_sim
from helpers.robots import make_humanoid, shipped_controller

KT, R, V, N, ETA = 0.091, 0.17, 48.0, 9.0, 0.9
STALL = N * ETA * KT * V / R
NO_LOAD = V / (KT * N)
LEGS = [f"{s}_{j}" for s in "lr" for j in ("hip_yaw", "hip_roll", "hip_pitch", "knee",
                                           "ankle_pitch", "ankle_roll")]


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


STEP_F, STEP_ZETA, STEP_CMD = 20.0, 0.4, 10.0  # Hz, -, N*m


@functools.lru_cache(maxsize=None)
def torque_step(rate: float) -> dict:
    """The 20 Hz, zeta 0.4 torque loop's response to a 10 N*m step, 0.25 s at ``rate``:
    ``error`` (largest |applied - closed form at (k + 1) dt| / command), ``rise`` and
    ``overshoot`` read off the samples (10-90 %, s; fraction) and the closed form's
    ``rise_exact``, ``overshoot_exact``."""
    f, zeta, cmd = STEP_F, STEP_ZETA, STEP_CMD
    sim = wheel(izz=100.0, physics_rate_hz=rate, **{"actuators.bandwidth": [f],
                                                   "actuators.damping_ratio": [zeta]})
    n = int(round(0.25 * rate))
    tau = np.empty(n)
    for k in range(n):
        sim.step([cmd])
        tau[k] = sim.applied_torques[0]
    t = (np.arange(n) + 1) / rate
    y = tau / cmd
    return {"error": float(np.abs(tau - cmd * step_response(t, zeta, f)).max() / cmd),
            "rise": float(crossing(t, y, 0.9) - crossing(t, y, 0.1)),
            "rise_exact": float(brentq(lambda s: step_response(s, zeta, f) - 0.9, 1e-6, 0.02)
                                - brentq(lambda s: step_response(s, zeta, f) - 0.1, 1e-6, 0.02)),
            "overshoot": float(y.max() - 1.0),
            "overshoot_exact": math.exp(-zeta * math.pi / math.sqrt(1 - zeta**2))}


@functools.lru_cache(maxsize=None)
def legs_stand(drives: bool) -> dict:
    """The humanoid 5 s under the shipped PD + gravity controller, with (``drives``) the
    AK80-9 numbers on its 12 leg joints and a 200 Hz, zeta 0.7 torque loop, or ideal drives:
    ``sim`` (at the end), ``z`` (the base height per step), ``z0``, ``drop`` (start - end, m),
    ``tilt_deg``."""
    params = ({"actuators.model": "dc_motor", "actuators.joints": LEGS,
               "actuators.bandwidth": [200.0], "actuators.damping_ratio": [0.7]}
              if drives else {})
    sim = make_humanoid(**params)
    ctrl = shipped_controller(sim)
    z0 = sim.state.base_position[2]
    z = []
    for _ in range(5000):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        z.append(sim.state.base_position[2])
    z = np.array(z)
    tilt = math.degrees(math.acos(min(1.0, sim.state.base_pose.rotation[2, 2])))
    return {"sim": sim, "z": z, "z0": float(z0), "drop": float(z0 - z[-1]), "tilt_deg": tilt}


@functools.lru_cache(maxsize=None)
def squat(voltage: float) -> dict:
    """The legs on AK80-9s fed ``voltage``: a squat of 1.2 rad at the knees and back in
    1.5 s, twice (3000 steps), under the shipped controller. ``excess`` (the largest applied
    leg torque beyond N eta kt (+-V - kt N qdot) / R at the step's starting speed, over the
    stall torque), ``bound`` (steps where some leg torque is on that envelope), ``stall``,
    ``no_load`` (at the joint), ``depth`` (the base's lowest point below its start, m),
    ``end_dz`` (|end - start| of the base height, m)."""
    sim = make_humanoid(**{"actuators.model": "dc_motor", "actuators.joints": LEGS,
                           "actuators.supply_voltage": [voltage]})
    ctrl = shipped_controller(sim)
    q0, z0 = ctrl.q_ref.copy(), sim.state.base_position[2]
    bend = np.zeros(sim.nj)
    for s in "lr":
        bend[[sim.joint_names.index(f"{s}_{j}") for j in ("hip_pitch", "knee",
                                                          "ankle_pitch")]] = -0.6, 1.2, -0.6
    a = sim.actuators
    bound, excess, z_low = 0, 0.0, z0
    for k in range(3000):
        ctrl.q_ref = q0 + bend * 0.5 * (1 - math.cos(2 * math.pi * k * sim.dt / 1.5))
        st = sim.state
        w = st.joint_velocities[a.idx]
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        tau = sim.applied_torques[a.idx]
        hi = a.gain * (a.V - a.ke * w) / a.R
        lo = a.gain * (-a.V - a.ke * w) / a.R
        excess = max(excess, float(np.max(tau - hi)), float(np.max(lo - tau)))
        bound += bool(np.any(np.isclose(tau, hi, rtol=1e-9) | np.isclose(tau, lo, rtol=1e-9)))
        z_low = min(z_low, sim.state.base_position[2])
    return {"excess": excess / float(a.stall_torque()[0]), "bound": bound,
            "stall": float(a.stall_torque()[0]), "no_load": float(a.no_load_speed()[0]),
            "depth": float(z0 - z_low), "end_dz": float(abs(sim.state.base_position[2] - z0))}
