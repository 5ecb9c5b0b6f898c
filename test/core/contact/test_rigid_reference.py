"""The rigid contact step (pinocchio's ADMM through RigidContact.solve) against its
plain reference (`wb_sim.contact.rigid`: the problem built point by point,
`reference_problem`; Coulomb's law checked point by point, `coulomb_residual`;
and solved by its own nonsmooth Gauss-Seidel, `reference_solve`), on random
states of a box and of the humanoid, sticking, slipping and separating points
included: the fast result solves the plainly built problem, and where the
reference solver converged both give the same end-of-step velocity and the same
total wrench on every surface. (Per-point impulses of a rigid foot are not
unique; velocities and wrenches are, where the solution is.)"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.contact.rigid import coulomb_residual, reference_problem, reference_solve

TIGHT = {"contact.model": "rigid", "contact.tolerance": 1e-10, "contact.max_iterations": 10000}


def _box(**extra):
    from core.test_physics import box_params
    return wb_sim.Simulator.from_params(box_params(**TIGHT, **extra))


def _humanoid(**extra):
    # the feet's rigid model alone is under test (the shipped file adds whole-body collision)
    return wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"),
                                      overrides={**TIGHT, "collision.enabled": False, **extra})


def _state(sim, rng, depth, speed):
    """A random configuration whose lowest point is ``depth`` below the ground,
    random velocities of scale ``speed``; returns (Minv_upper, v_free)."""
    model, data = sim._model_step, sim._data_step
    q = np.array(sim.q0)
    q[:3] += rng.normal(0.0, 0.002, 3)
    rpy = rng.normal(0.0, 0.02, 3)
    q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(*rpy) @ pin.Quaternion(q[3:7]).matrix()).coeffs()
    pin.computeJointJacobians(model, data, q)
    sim.contact_points.update(model, data, None)
    pts = sim.contact_points
    q[2] -= (pts.position_gT[2] - pts.plane_z).min() + depth
    v = rng.normal(0.0, speed, model.nv)
    v_free = pin.aba(model, data, q, v, np.zeros(model.nv), pin.Convention.WORLD) * sim.dt + v
    Minv = pin.computeMinverse(model, data)
    pts.update(model, data, None)
    return Minv, v_free


@pytest.mark.parametrize("make", [_box, _humanoid])
@pytest.mark.parametrize("mu", [1.0, 0.05])
def test_rigid_step_equals_the_plain_reference(make, mu):
    sim = make(**{"contact.friction_coefficient": mu})
    contact, pts = sim.contact, sim.contact_points
    params = {"friction_coefficient": mu, "regularization": contact.regularization,
              "baumgarte_gain": contact.baumgarte_gain,
              "activation_margin": contact.margin}
    mass = pin.computeTotalMass(sim._model_step)
    rng = np.random.default_rng(11)
    kinds, compared = set(), 0
    for trial in range(24):
        speed = (0.3, 0.01, 0.001)[trial % 3]
        Minv, v_free = _state(sim, rng, (2e-4, 1e-6)[trial % 2], speed)
        contact.initial_state()
        v_next, force, _ = contact.solve(Minv, v_free, np.zeros((2, pts.n)), sim.dt)
        Mfull = np.triu(Minv) + np.triu(Minv, 1).T
        problem = reference_problem(pts, Mfull, v_free, sim.dt, params, mass)
        if problem is None:
            assert np.array_equal(v_next, v_free) and not force.any()
            continue
        # the fast result solves the problem as built point by point (m/s)
        assert coulomb_residual(problem, force, sim.dt, mu) < 1e-8, f"trial {trial}"
        w = (pts.jacobian_g() @ v_next).reshape(-1, 3)
        loaded = force[:, 2] > 0.0
        slide = np.hypot(w[:, 0], w[:, 1]) > 1e-6
        if (loaded & ~slide).any():
            kinds.add("stick")
        if (loaded & slide).any():
            kinds.add("slip")
        v_ref, force_ref = reference_solve(pts, Mfull, v_free, sim.dt, params, mass)
        if coulomb_residual(problem, force_ref, sim.dt, mu) > 1e-10:
            continue  # the plain Gauss-Seidel stalled on a coupled slide: checked above only
        compared += 1
        change = max(1.0, np.abs(v_ref - v_free).max())
        np.testing.assert_allclose(v_next, v_ref, atol=1e-7 * change, err_msg=f"trial {trial}")
        W, W_ref = pts.surface_wrenches(force), pts.surface_wrenches(force_ref)
        np.testing.assert_allclose(W, W_ref, atol=1e-7 * max(1.0, np.abs(W_ref).max()),
                                   err_msg=f"trial {trial}")
    # not one easy case: loaded sticking and slipping points, most states compared
    assert kinds == ({"stick", "slip"} if mu >= 1.0 else {"slip"}), kinds
    assert compared >= 12, compared


def test_the_reference_can_tell_a_wrong_answer():
    """The comparisons above can fail: on a sliding box, the problem built with
    another friction coefficient gives the fast result a large residual, and the
    reference solved with it another end-of-step velocity."""
    sim = _box(**{"contact.friction_coefficient": 0.3})
    contact, pts = sim.contact, sim.contact_points
    rng = np.random.default_rng(2)
    while True:  # a state with a loaded, sliding point
        Minv, v_free = _state(sim, rng, 1e-4, 0.3)
        v_next, force, _ = contact.solve(Minv, v_free, np.zeros((2, pts.n)), sim.dt)
        if 2 in contact.status.tolist():
            break
    Mfull = np.triu(Minv) + np.triu(Minv, 1).T
    mass = pin.computeTotalMass(sim._model_step)
    right = {"friction_coefficient": 0.3, "regularization": contact.regularization,
             "baumgarte_gain": contact.baumgarte_gain, "activation_margin": contact.margin}
    wrong = dict(right, friction_coefficient=0.6)
    assert coulomb_residual(reference_problem(pts, Mfull, v_free, sim.dt, right, mass), force,
                            sim.dt, 0.3) < 1e-8
    assert coulomb_residual(reference_problem(pts, Mfull, v_free, sim.dt, wrong, mass), force,
                            sim.dt, 0.6) > 1e-3
    v_ref, _ = reference_solve(pts, Mfull, v_free, sim.dt, wrong, mass)
    assert np.abs(v_next - v_ref).max() > 1e-3
