"""Simulator.contact_jacobian: the contact surfaces' points and their Jacobian at the
current state (served by the node's ~/get_dynamics), against finite differences of
the points' positions along the configuration manifold (pin.integrate), and against the
contact model's own points at a reset (where the step's kinematics are at q)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from helpers.extras import require_robot_data


@pytest.mark.parametrize("config", ["humanoid", "icub", "anymal"])  # anymal: spheres
def test_the_jacobian_is_the_derivative_of_the_points(config):
    if config != "humanoid":
        require_robot_data(config)
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path(config))
    rng = np.random.default_rng(1)
    sim.reset()
    P0, _ = sim.contact_jacobian()
    # the contact model's own points at the reset's configuration
    np.testing.assert_allclose(P0, sim.contact_points_state().position, rtol=0, atol=1e-12)
    q = pin.integrate(sim.model, sim.q, rng.normal(0.0, 0.3, sim.model.nv))  # a tilted pose
    P, J = sim.contact_jacobian(q)
    n = sim.contact_points.n
    assert n > 0 and P.shape == (n, 3) and J.shape == (3 * n, sim.model.nv)
    # each row block: the velocity of the body point at the contact point (for a sphere's
    # lowest point, the material point there, not the derivative of the lowest point): its
    # position in its joint's frame held, moved with the joint along the manifold
    pts, model = sim.contact_points, sim.model
    joints = [int(pts.joint_ids[pts.slot[k]]) for k in range(n)]
    data = model.createData()

    def body_points(qq, local):
        pin.forwardKinematics(model, data, qq)
        return np.concatenate([data.oMi[j].act(x) for j, x in zip(joints, local)])

    pin.forwardKinematics(model, data, q)
    local = [data.oMi[j].actInv(p) for j, p in zip(joints, P)]
    eps = 1e-6
    for i in range(model.nv):
        dv = np.zeros(model.nv)
        dv[i] = eps
        col = (body_points(pin.integrate(model, q, dv), local)
               - body_points(pin.integrate(model, q, -dv), local)) / (2 * eps)
        np.testing.assert_allclose(J[:, i], col, rtol=0, atol=1e-8, err_msg=f"column {i}")
    # a query changes nothing
    np.testing.assert_array_equal(sim.contact_jacobian()[0], P0)
