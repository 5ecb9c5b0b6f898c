"""The vectorized compliant contact step against its plain per-point reference
(`wb_sim.contact.compliant.reference_solve`): same impulses, velocity change and
next deformation on random penetrating states of a box and of the humanoid,
sticking, slipping and separating points included."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.contact.compliant import reference_solve


def _box(**extra):
    from core.test_physics import box_params
    return wb_sim.Simulator.from_params(box_params(**{"contact.stiffness": 4e4,
                                                      "contact.damping": 400.0, **extra}))


def _humanoid():
    # the feet's contact model alone is under test (the shipped file adds whole-body
    # collision, whose merged model test_collision checks)
    return wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"),
                                      overrides={"collision.enabled": False})


def _prepare(sim, rng, depth_scale):
    """A random configuration near the ground with random velocities and
    deformations; returns (Minv_upper, v_free, u) after the points' update."""
    model, data, pts = sim._model_step, sim._data_step, sim.contact_points
    q = np.array(sim.q0)
    if sim.robot.floating_base:
        q[:3] += rng.normal(0.0, 0.002, 3)
        rpy = rng.normal(0.0, 0.03, 3)
        q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(*rpy) @ pin.Quaternion(q[3:7]).matrix()
                                ).coeffs()
    # lower the robot until its lowest point is depth_scale below the ground
    pin.forwardKinematics(model, data, q)
    pin.computeJointJacobians(model, data, q)
    pts.update(model, data, None)
    lowest = (pts.position_gT[2] - pts.plane_z).min()
    q[2] -= lowest + depth_scale
    v = rng.normal(0.0, 0.3, model.nv)
    tau = np.zeros(model.nv)
    v_free = pin.aba(model, data, q, v, tau, pin.Convention.WORLD) * sim.dt + v
    Minv = pin.computeMinverse(model, data)
    pts.update(model, data, None)
    u = rng.normal(0.0, 1e-4, (2, pts.n))
    return Minv, v_free, u


@pytest.mark.parametrize("make, depth", [(_box, 2e-3), (_box, 5e-4), (_humanoid, 2e-3),
                                         (_humanoid, 4e-4)])
def test_vectorized_compliant_step_equals_the_per_point_reference(make, depth):
    sim = make()
    contact = sim.contact
    rng = np.random.default_rng(7)
    kinds = set()
    for trial in range(60):
        Minv, v_free, u = _prepare(sim, rng, depth)
        contact.initial_state()  # no slip warm start: the reference has none
        v_next, force, u_next = contact.solve(Minv, v_free, u, sim.dt)
        kinds |= set(contact.status.tolist())
        Mfull = np.triu(Minv) + np.triu(Minv, 1).T
        v_r, force_r, u_r = reference_solve(sim.contact_points, Mfull, v_free, u, sim.dt,
                                             contact.parameters(), contact.reference_depth)
        scale = max(1.0, np.abs(force_r).max())
        np.testing.assert_allclose(force, force_r, atol=1e-8 * scale, err_msg=f"trial {trial}")
        np.testing.assert_allclose(v_next, v_r, atol=1e-9 * max(1.0, np.abs(v_r - v_free).max()))
        np.testing.assert_allclose(u_next, u_r, atol=1e-12)
    # the comparison covered sticking and slipping or released points, not one easy case
    assert 1 in kinds and (2 in kinds or 0 in kinds), kinds


def test_reference_and_fast_step_agree_with_friction_off():
    """mu = 0: normal rows only, every loaded point slides."""
    sim = _box(**{"contact.friction_coefficient": 0.0})
    rng = np.random.default_rng(3)
    for _ in range(10):
        Minv, v_free, u = _prepare(sim, rng, 1e-3)
        sim.contact.initial_state()
        _, force, _ = sim.contact.solve(Minv, v_free, u, sim.dt)
        assert np.all(force[:, :2] == 0.0)
        assert np.all(force[:, 2] >= 0.0)
        assert set(sim.contact.status.tolist()) <= {0, 2}


@pytest.mark.parametrize("make", [_box, _humanoid])
def test_point_kinematics_read_through_the_placement_view_equal_the_plain_copy(make):
    """ContactPoints reads the joint placements through a view of pinocchio's
    storage (checked when bound); the plain path copies them joint by joint.
    Positions, Jacobian and surface wrenches agree exactly at random
    configurations, and a data object whose storage cannot be viewed falls back."""
    from wb_sim.pin_views import placement_view
    sim = make()
    model, pts = sim._model_step, sim.contact_points
    data = model.createData()
    rng = np.random.default_rng(5)
    force = rng.normal(0.0, 10.0, (pts.n, 3))
    for _ in range(5):
        q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq)) \
            if sim.robot.floating_base else rng.normal(0.0, 1.0, model.nq)
        pin.computeJointJacobians(model, data, q)
        pts.update(model, data, None)
        assert pts._placement_rows is not None  # the fast path ran
        fast = (pts.position_gT.copy(), pts.jacobian_component_major().copy(),
                pts.surface_wrenches(force))
        rows, pts._placement_rows = pts._placement_rows, None
        pts.update(model, data, None)
        plain = (pts.position_gT.copy(), pts.jacobian_component_major().copy(),
                 pts.surface_wrenches(force))
        pts._placement_rows = rows
        for a, b in zip(fast, plain):
            np.testing.assert_array_equal(a, b)
        # the plain copy is the placements themselves
        for jid, block in pts._joint_blocks:
            np.testing.assert_array_equal(block, data.oMi[jid].homogeneous[:3])
    # the view follows the data: a second data object gets its own
    other = model.createData()
    pin.computeJointJacobians(model, other, q)
    pts.update(model, other, None)
    np.testing.assert_array_equal(pts.position_gT, plain[0])
    assert placement_view(other, pts.joint_ids) is not None
    assert placement_view(pin.Model().createData(), np.array([0])) is None  # one joint: no stride


def test_a_standing_robot_takes_the_single_solve_path(make_humanoid, shipped_controller):
    """Standing, every step is one Cholesky solve: after the first 0.2 s of settling
    no step of the humanoid under its PD needs the active-set loop (which costs
    several solves); a tilted box landing on a corner does need it (the count can move)."""
    sim = make_humanoid()
    ctrl = shipped_controller(sim)
    for k in range(1200):
        if k == 200:
            settled = dict(sim.contact.statistics())
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
    stats = sim.contact.statistics()
    assert stats["solves"] - settled["solves"] == 1000
    assert stats["active_set_solves"] == settled["active_set_solves"], stats
    box = _box(**{"initial.base_position": [0.0, 0.0, 0.05], "initial.base_rpy": [0.3, 0.2, 0.0]})
    for _ in range(300):
        box.step(np.zeros(box.nj))
    assert box.contact.statistics()["active_set_solves"] >= 1
