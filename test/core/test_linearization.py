"""Simulator.linearize_step: (A, B) of the simulator's own step by central differences
on the manifold, against the closed-form Jacobian of the semi-implicit Euler step of a
free double pendulum (pinocchio's ABA derivatives), and without side effect: the state
after the call is bit-identical, and the run continues as if it had never been called."""

from __future__ import annotations

import dataclasses

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.errors import CommandError
from wb_sim.simulator import LINEARIZATION_EPS
from wb_sim.state import copy_record

from helpers.robots import make_humanoid


def _inertial(m, ixx, iyy, izz, xyz=(0, 0, 0)):
    return (f'<inertial><origin xyz="{xyz[0]} {xyz[1]} {xyz[2]}" rpy="0 0 0"/>'
            f'<mass value="{m}"/><inertia ixx="{ixx}" iyy="{iyy}" izz="{izz}" ixy="0" ixz="0" '
            f'iyz="0"/></inertial>')


# a double pendulum, fixed base, revolute joints about y and x (the two axes couple)
PENDULUM_URDF = (
    '<robot name="double_pendulum">'
    f'<link name="base">{_inertial(1.0, 1e-2, 1e-2, 1e-2)}</link>'
    f'<link name="l1">{_inertial(1.0, 2e-3, 3e-3, 1e-3, (0.05, 0, -0.5))}</link>'
    f'<link name="l2">{_inertial(0.8, 1e-3, 2e-3, 3e-3, (0, 0.03, -0.4))}</link>'
    '<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>'
    '<origin xyz="0 0 0" rpy="0 0 0"/><axis xyz="0 1 0"/>'
    '<limit lower="-3" upper="3" effort="100" velocity="100"/></joint>'
    '<joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/>'
    '<origin xyz="0 0 -0.5" rpy="0 0 0"/><axis xyz="1 0 0"/>'
    '<limit lower="-3" upper="3" effort="100" velocity="100"/></joint>'
    '</robot>')


def _pendulum():
    sim = wb_sim.Simulator.from_params({
        "robot_description": PENDULUM_URDF, "floating_base": False, "physics_rate_hz": 500.0,
        "joints.urdf_dynamics": False, "joints.position_limits": False,
        "initial.joint_names": ["j1", "j2"], "initial.joint_positions": [0.8, -0.5]})
    for _ in range(40):  # swinging: the velocity terms count
        sim.step(np.array([0.3, -0.2]))
    return sim


def test_pendulum_equals_the_closed_form_jacobian_of_the_step():
    """Without contact, limits or damping the step is v' = v + h a(q, v, tau), q' = q + h v'
    (a = ABA): A = [[I + h^2 da/dq, h I + h^2 da/dv], [h da/dq, I + h da/dv]],
    B = [[h^2 M^-1], [h M^-1]] with pinocchio's computeABADerivatives at the state; the
    central differences agree within 1e-8 (their truncation and rounding errors)."""
    sim = _pendulum()
    tau = np.array([1.5, -0.7])
    q, v, h = np.array(sim.q), np.array(sim.v), sim.dt
    assert np.abs(v).max() > 0.1
    A, B = sim.linearize_step(tau)
    data = sim.model.createData()
    pin.computeABADerivatives(sim.model, data, q, v, tau)
    da_dq, da_dv = np.array(data.ddq_dq), np.array(data.ddq_dv)
    Minv = np.array(data.Minv)
    Minv = np.triu(Minv) + np.triu(Minv, 1).T
    eye = np.eye(2)
    A_ref = np.block([[eye + h * h * da_dq, h * eye + h * h * da_dv],
                      [h * da_dq, eye + h * da_dv]])
    B_ref = np.vstack([h * h * Minv, h * Minv])
    np.testing.assert_allclose(A, A_ref, rtol=0, atol=1e-8)
    np.testing.assert_allclose(B, B_ref, rtol=0, atol=1e-8)
    assert np.abs(da_dq).max() > 1.0 and np.abs(da_dv).max() > 1e-3  # not a trivial case
    # and it predicts the simulator's step from a perturbed state: error O(|dx|^2)
    # (measured 1.2e-9 against a change of 3.2e-4: 4e-6 relative)
    dx, du = np.array([1e-4, -2e-4, 3e-4, 1e-4]), np.array([0.01, -0.02])
    s0 = sim.get_state()
    sim.step(tau)
    q_ref, v_ref = np.array(sim.q), np.array(sim.v)
    sim.set_state(s0)
    _set_qv(sim, q + dx[:2], v + dx[2:])
    sim.step(tau + du)
    actual = np.concatenate([sim.q - q_ref, sim.v - v_ref])
    predicted = A @ dx + B @ du
    assert np.abs(predicted - actual).max() < 2e-5 * np.abs(actual).max()


def test_no_side_effect_on_the_standing_humanoid():
    """The humanoid on the compliant ground (contacts, drives, everything the step does):
    after linearize_step the state is bit-identical (q, v, deformation, warm starts) and the
    run continues bit for bit as the same run without the call. A and B have the sizes of
    the tangent space; the gravity column of B acts (a torque moves the velocities)."""
    ref, sim = make_humanoid(), make_humanoid()
    rng = np.random.default_rng(3)
    taus = [sim.gravity_torques() + rng.normal(0.0, 2.0, sim.nj) for _ in range(30)]
    for tau in taus[:20]:
        ref.step(tau)
        sim.step(tau)
    before = sim.get_state()
    A, B = sim.linearize_step()
    nv = sim.model.nv
    assert A.shape == (2 * nv, 2 * nv) and B.shape == (2 * nv, sim.nj)
    assert np.isfinite(A).all() and np.isfinite(B).all()
    assert np.abs(B[nv:]).max() > 1e-3
    after = sim.get_state()
    for field in ("q", "v", "u", "q_prev", "v_prev", "force", "tau_applied"):
        assert np.array_equal(getattr(before, field), getattr(after, field)), field
    assert before.step_count == after.step_count
    for tau in taus[20:]:
        ref.step(tau)
        sim.step(tau)
    assert np.array_equal(ref.q, sim.q) and np.array_equal(ref.v, sim.v)
    assert np.array_equal(ref.state.contact_deformation, sim.state.contact_deformation)


def test_a_small_perturbation_of_the_humanoid_is_predicted():
    """Standing on the compliant ground: a random perturbation of 1e-6 (rad, m, rad/s, m/s)
    and 1e-5 N*m moves the next state by ~1e-4; A dx + B dtau predicts it within 1e-3 of
    that (measured 5e-4 relative: the stiff compliant contact makes the step strongly
    nonlinear; at 1e-5 the error is already 1 %)."""
    sim = make_humanoid()
    for _ in range(50):
        sim.step(sim.gravity_torques())
    A, B = sim.linearize_step()
    s0 = sim.get_state()
    tau0 = np.array(sim.applied_torques)
    sim.step(tau0)
    q_ref, v_ref = np.array(sim.q), np.array(sim.v)
    nv = sim.model.nv
    rng = np.random.default_rng(0)
    dx, du = rng.normal(0.0, 1e-6, 2 * nv), rng.normal(0.0, 1e-5, sim.nj)
    # the perturbed start through the public API: joints and base set as a new state
    sim.set_state(s0)
    _set_qv(sim, pin.integrate(sim.model, s0.q, dx[:nv]), np.array(sim.v) + dx[nv:])
    sim.step(tau0 + du)
    actual = np.concatenate([pin.difference(sim.model, q_ref, np.array(sim.q)),
                             np.array(sim.v) - v_ref])
    predicted = A @ dx + B @ du
    assert np.abs(actual).max() > 1e-5
    assert np.abs(predicted - actual).max() < 2e-3 * np.abs(actual).max()


def _set_qv(sim, q, v):
    """The state moved to (q, v) (v in pinocchio's convention), the rest kept: an edited
    snapshot (what linearize_step does inside)."""
    snap = sim.get_state()
    record = copy_record(snap.record)
    v_step = np.array(v)
    if sim.robot.floating_base:  # stepping coordinates: the base's linear velocity in world axes
        v_step[:3] = pin.Quaternion(q[3:7]).matrix() @ v[:3]
    record.q, record.v = q, v_step
    sim.set_state(dataclasses.replace(snap, record=record))


def test_bad_eps_is_refused():
    sim = _pendulum()
    with pytest.raises(CommandError, match="eps"):
        sim.linearize_step(eps=0.0)
    assert LINEARIZATION_EPS == 1e-6


def test_a_diverging_perturbed_step_leaves_the_state_and_says_so():
    """A state at the edge of the domain (a speed just under MAX_SPEED): a perturbed step
    diverges, linearize_step raises DivergenceError, and the state is the one before."""
    from wb_sim.errors import DivergenceError
    from wb_sim.simulator import MAX_SPEED
    sim = _pendulum()
    _set_qv(sim, np.array(sim.q), np.array([MAX_SPEED * 0.9999999, 0.0]))
    before = sim.get_state()
    with pytest.raises(DivergenceError):
        sim.linearize_step(eps=1e-1)
    after = sim.get_state()
    assert np.array_equal(before.q, after.q) and np.array_equal(before.v, after.v)
    assert before.step_count == after.step_count
