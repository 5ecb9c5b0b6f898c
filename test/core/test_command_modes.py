"""Mixed-mode joint commands (wb_sim.controllers.JointTargets), evaluated at every
physics step: position, velocity and impedance modes against closed-form
responses, efforts unchanged, and an impedance stand of the humanoid with its
controller at 200 Hz."""

from __future__ import annotations

import math

import numpy as np
import pytest

import wb_sim
from wb_sim.controllers import JointTargets

I_ROTOR = 0.02  # kg m^2 about the joint axis
ROTOR = ('<robot name="rotor"><link name="base"/><link name="arm"><inertial>'
         '<origin xyz="0 0 0"/><mass value="1.0"/>'
         f'<inertia ixx="0.01" iyy="0.01" izz="{I_ROTOR}" ixy="0" ixz="0" iyz="0"/></inertial>'
         '</link><joint name="j" type="revolute"><parent link="base"/><child link="arm"/>'
         '<axis xyz="0 0 1"/><limit lower="-10" upper="10" effort="1000" velocity="100"/>'
         '</joint></robot>')


def _rotor():
    return wb_sim.Simulator.from_params({"robot_description": ROTOR, "floating_base": False,
                                         "joints.position_limits": False})


def test_efforts_alone_are_applied_as_given():
    law = JointTargets(3, kp=100.0, kd=5.0)
    law.set([0, 1, 2], effort=[1.0, -2.0, 3.0])
    np.testing.assert_array_equal(law.torques(np.ones(3), np.ones(3)), [1.0, -2.0, 3.0])


def test_position_mode_follows_the_closed_form_step_response():
    """I q'' = kp (q_ref - q) - kd q' about a vertical axis (no gravity torque):
    underdamped, zeta = 0.25, natural frequency 2.5 Hz, 1 kHz: q(t) is the analytic
    response within 1 % of the step over 1 s."""
    sim = _rotor()
    kp = 5.0
    kd = 0.5 * math.sqrt(kp * I_ROTOR)
    law = JointTargets(1, kp, kd)
    law.set([0], position=[1.0])
    wn = math.sqrt(kp / I_ROTOR)
    zeta = kd / (2 * math.sqrt(kp * I_ROTOR))
    wd = wn * math.sqrt(1 - zeta**2)
    worst = 0.0
    for k in range(1, 1001):
        sim.step(law.torques(sim.joint_positions, sim.joint_velocities))
        t = k * sim.dt
        exact = 1 - math.exp(-zeta * wn * t) * (math.cos(wd * t)
                                                + zeta / math.sqrt(1 - zeta**2) * math.sin(wd * t))
        worst = max(worst, abs(sim.joint_positions[0] - exact))
    assert worst < 0.01, worst


def test_velocity_mode_reaches_its_speed_with_time_constant_inertia_over_kd():
    sim = _rotor()
    kd = 0.2
    law = JointTargets(1, kp=50.0, kd=kd)
    law.set([0], velocity=[3.0])
    tau_c = I_ROTOR / kd
    for k in range(1, 301):
        sim.step(law.torques(sim.joint_positions, sim.joint_velocities))
    t = 300 * sim.dt
    assert sim.joint_velocities[0] == pytest.approx(3.0 * (1 - math.exp(-t / tau_c)), rel=0.01)


def test_humanoid_stands_on_an_impedance_command_sent_at_200_hz(make_humanoid):
    """The legged-robot split: the controller (gravity compensation as feed-forward,
    the posture as position target, the shipped PD gains as the drive's gains)
    runs at 200 Hz; the drives' law runs at the physics' 1 kHz from its latest
    command. The humanoid stands 3 s: base within 2 cm, no divergence."""
    from wb_sim.config import read_yaml_params
    sim = make_humanoid()
    gains = read_yaml_params(wb_sim.config_path("humanoid"), node_name="wb_sim_pd_controller")
    law = JointTargets(sim.nj, gains["kp"], gains["kd"])
    posture = sim.joint_positions.copy()
    joints = np.arange(sim.nj)
    z0 = sim.q[2]
    low = z0
    for k in range(3000):
        if k % 5 == 0:  # the 200 Hz controller
            g = sim.generalized_gravity()[6:]
            law.set(joints, position=posture, effort=g)
        sim.step(law.torques(sim.joint_positions, sim.joint_velocities))
        low = min(low, sim.q[2])
    assert z0 - low < 0.02, (z0 - low)


def test_the_drive_laws_fast_path_equals_its_masked_reference_bit_for_bit():
    """JointTargets.torques skips the masks while the modes stay those of the last set
    (a controller's command every step): over a sequence of commands that change the
    modes (all joints on position, some, efforts alone, a velocity target, a read-only
    index array reused, a writable one changed in place, modes written by hand), every
    step's torques equal torques_reference bit for bit, and a set of the same joints with
    the same fields does not count as a change of modes."""
    rng = np.random.default_rng(7)
    nj = 6
    law = JointTargets(nj, kp=rng.uniform(0, 200, nj), kd=rng.uniform(0, 5, nj))
    every = np.arange(nj)
    every.flags.writeable = False
    some = np.array([4, 1])
    some.flags.writeable = False
    mutable = np.array([0, 2])
    fields = [lambda k: dict(position=rng.normal(size=k), velocity=rng.normal(size=k),
                             effort=rng.normal(size=k)),
              lambda k: dict(position=rng.normal(size=k), effort=rng.normal(size=k)),
              lambda k: dict(velocity=rng.normal(size=k)),
              lambda k: dict(effort=rng.normal(size=k))]
    plan = [(every, 0)] * 5 + [(some, 2)] * 3 + [(every, 1)] * 3 + [(mutable, 0)] * 2 + \
        [(every, 3), (some, 0), (every, 0), (every, 0)]
    modes = []
    for step, (joints, f) in enumerate(plan):
        if step == 12:
            mutable[:] = [3, 5]  # the same (writable) array, other joints
        law.set(joints, **fields[f](len(joints)))
        if step == 14:
            law.has_velocity[:] = True
            law.modes_changed()
        modes.append(law.modes)
        for _ in range(3):
            q, v = rng.normal(size=nj), rng.normal(size=nj)
            fast, ref = law.torques(q, v), law.torques_reference(q, v)
            assert fast.tobytes() == ref.tobytes(), (step, fast, ref)
    assert modes[:5] == [modes[0]] * 5  # the same read-only joints and fields: no change
    assert modes[5] > modes[4] and modes[6] == modes[5]
    assert modes[12] > modes[11]  # a writable index array is never taken as unchanged
    assert modes[15] == modes[14] + 1 == modes[13] + 3 and modes[16] == modes[15]
