"""The rigid contact's solver_health(): the energy its impulses added and the residual of
its last solve, against the box's own kinematics and the reference residual.

A box dropped flat at 1 m/s onto the rigid ground: one step's impulses stop its fall, the
kinetic energy they take is 1/2 m (v_after^2 - v_free^2) of the vertical velocity alone (no
rotation: the four corners share the load), equal to ``impulse_work`` within 1e-9 J;
converged, the residual is small (7e-5 m/s), and with the iteration cap at 1 (PGS)
it is 12 times larger (the figure can fail); the compliant ground measures
neither (NaN)."""

from __future__ import annotations

import math

import numpy as np

import wb_sim
from wb_sim.contact.rigid import _cone_projection, cone_projections

from core.test_physics import BOX_LZ, BOX_M, box_params


def _box(**extra):
    return wb_sim.Simulator.from_params(box_params(**{"contact.model": "rigid", **extra}))


def test_impact_energy_is_the_kinetic_energy_the_impulses_took():
    sim = _box()
    # 0.2 mm above the ground: the step's gap closes at 0.2 mm / dt, the rest is stopped
    sim.set_base_state(position=[0.0, 0.0, BOX_LZ / 2 + 2e-4], linear_velocity=[0, 0, -1.0])
    vz0, h = -1.0, sim.dt
    assert sim.contact.solver_health()["impulse_work"] == 0.0  # nothing touched yet
    sim.step(np.zeros(sim.nj))
    gz = sim.config.gravity[2]
    v_free = vz0 + gz * h
    v_after = sim.state.base_linear_velocity[2]
    assert v_after > v_free + 0.5  # the impulses stopped most of the fall
    health = sim.contact.solver_health()
    expected = 0.5 * BOX_M * (v_after ** 2 - v_free ** 2)
    assert expected < -0.4
    assert math.isclose(health["impulse_work"], expected, abs_tol=1e-9), (health, expected)
    assert np.abs(sim.v[[0, 1, 3, 4, 5]]).max() < 1e-9  # the vertical energy is all of it


def test_residual_small_when_converged_large_when_capped():
    good, capped = _box(), _box(**{"contact.max_iterations": 1, "contact.solver": "pgs"})
    for sim in (good, capped):
        sim.set_base_state(linear_velocity=[0.3, -0.2, -1.0], angular_velocity=[0.5, 1.0, 2.0])
        sim.step(np.zeros(sim.nj))
    r_good = good.contact.solver_health()["residual"]
    r_capped = capped.contact.solver_health()["residual"]
    assert r_good < 1e-4, r_good
    assert r_capped > 5 * max(r_good, 1e-6), (r_good, r_capped)  # measured 9.0e-4, 7.1e-5
    assert math.isnan(capped.contact.solver_health(residual=False)["residual"])


def test_compliant_measures_neither():
    sim = wb_sim.Simulator.from_params(box_params())
    sim.step(np.zeros(sim.nj))
    h = sim.contact.solver_health()
    assert math.isnan(h["residual"]) and math.isnan(h["impulse_work"])


def test_vectorized_cone_projection_equals_the_scalar_one():
    x = np.random.default_rng(0).normal(size=(500, 3))
    for mu in (0.0, 0.3, 1.0, 2.5):
        np.testing.assert_allclose(cone_projections(x, mu),
                                   np.array([_cone_projection(r, mu) for r in x]),
                                   rtol=0, atol=1e-15)
