"""Sliding friction opposes the slip of each step, in both contact models, at 250 Hz,
1 kHz and 4 kHz, against exact solutions:

* a square box (2 kg, 0.2 x 0.2 x 0.05 m, mu = 0.5) spinning on its 4 corners: every
  corner slips along its circle, so friction brakes the spin at
  ``alpha = mu m g r / I_zz`` = 104.05 rad/s^2 (the compliant model used to keep a
  slipping corner's friction direction until the slip turned more than 90 degrees
  away: 70.4 rad/s^2, -32 %);
* the same box launched at 2 m/s and pushed sideways by a constant force below the
  friction limit: it slides along a curve and stops where a point mass under Coulomb
  friction opposing its velocity stops (scipy's solve_ivp at 1e-12; the fixed
  direction drifted 125-217 % too far sideways);
* the compliant step's forces satisfy the law they are solved for (stick, or slip on
  the cone with the force opposing the step's slip, no pulling), checked point by
  point by :func:`wb_sim.contact.compliant.law_residual` on random states, and the
  check tells a wrong direction from the right one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from helpers.friction_box import (ALPHA, MODELS, PUSH, RATES, V0, box_sim, exact_curve,
                                  sideways_slide, spin_braking)
from wb_sim.contact.compliant import law_residual


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize("model", MODELS)
def test_a_box_spinning_on_its_corners_brakes_at_the_coulomb_rate(model, rate):
    got = spin_braking(model, rate)
    if model == "compliant":  # every corner slips, its friction on the cone
        assert got["all_slip"]
    assert got["alpha"] == pytest.approx(ALPHA, rel=2e-2), \
        f"{got['alpha']:.2f} vs {ALPHA:.2f} rad/s^2"
    # it stops and stays stopped, on the spot (a pure spin moves no centre)
    assert abs(got["spin_after"]) < 1e-3
    assert got["centre"] < 1e-3


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize("model", MODELS)
def test_a_box_pushed_sideways_slides_along_the_coulomb_curve(model, rate):
    _, stop = exact_curve()  # 0.651 s, (0.450, 0.199) m
    got = sideways_slide(model, rate)
    np.testing.assert_allclose(got["end"], stop, rtol=2e-2, err_msg=f"stop {got['end']} vs {stop}")
    # the push is below the friction limit: stopped, it stays; it never turned (square sole)
    assert got["speed"] < 1e-3
    assert got["last_move"] < 1e-4
    assert abs(got["spin"]) < 1e-3


def _random_states(sim, rng, depth, count):
    """Random states near the ground (the vectorized-step test's), as
    (Minv_upper, v_free, u), with the points updated."""
    from core.contact.test_compliant_vectorized import _prepare
    for _ in range(count):
        yield _prepare(sim, rng, depth)


@pytest.mark.parametrize("robot", ["box", "humanoid"])
def test_the_compliant_step_solves_its_law(robot):
    """Per point, plainly: sticking groups have no slip, slipping ones sit on their cone
    with the force opposing the step's slip, loaded points have no normal slip, points
    without force are not pulled into the ground."""
    from core.contact.test_compliant_vectorized import _box, _humanoid
    sim = _box() if robot == "box" else _humanoid()
    contact = sim.contact
    rng = np.random.default_rng(17)
    codes = set()
    for trial, (Minv, v_free, u) in enumerate(_random_states(sim, rng, 2e-3, 40)):
        contact.initial_state()
        _, force, _ = contact.solve(Minv, v_free, u, sim.dt)
        codes |= set(contact.status.tolist())
        Mfull = np.triu(Minv) + np.triu(Minv, 1).T
        res = law_residual(sim.contact_points, Mfull, v_free, u, sim.dt, contact.parameters(),
                           contact.reference_depth, force)
        assert res < 1e-9, f"trial {trial}: {res:.2e} m/s"
    assert {1, 2} <= codes, codes


def test_the_law_residual_tells_a_wrong_friction_direction():
    """The check above can fail: a slipping point's friction turned by 30 degrees (what
    keeping the last step's direction does to a spinning box) is caught, and so is a
    friction 10 % off the cone."""
    sim = box_sim("compliant", 1000)
    sim.set_base_state(angular_velocity=[0.0, 0.0, 20.0])
    contact = sim.contact
    captured = {}
    solve = contact.solve

    def spy(Minv, v_free, u, dt):
        out = solve(Minv, v_free, u, dt)
        captured.update(Minv=np.triu(Minv) + np.triu(Minv, 1).T, v_free=v_free, u=u,
                        force=out[1].copy(), dt=dt)
        return out

    contact.solve = spy
    sim.step([])
    c = captured
    params, d_ref = contact.parameters(), contact.reference_depth

    def residual(force):
        return law_residual(contact.points, c["Minv"], c["v_free"], c["u"], c["dt"], params,
                            d_ref, force)

    assert set(contact.status.tolist()) == {2}
    assert residual(c["force"]) < 1e-9
    turned = c["force"].copy()
    a = math.radians(30.0)
    rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    turned[:, :2] = turned[:, :2] @ rot.T
    assert residual(turned) > 0.1  # m/s: the slip no longer opposes the friction
    weak = c["force"].copy()
    weak[:, :2] *= 0.9
    assert residual(weak) > 1e-3  # inside the cone but slipping


def test_along_a_pitching_slide_the_step_equals_its_reference_and_its_law(monkeypatch):
    """The box launched at 2 m/s and pushed sideways at 250 Hz rocks on its corners
    (the rear ones lightly loaded): at every step the vectorized step's
    forces equal the plain reference's and solve the law, including the steps where
    Newton's method on the slip compliances goes astray and the friction directions
    are found as a fixed point instead."""
    from wb_sim.contact import compliant
    from wb_sim.contact.compliant import reference_solve
    fallbacks = []
    direction_solve = compliant._direction_solve

    def counted(*args):
        fallbacks.append(1)
        return direction_solve(*args)

    monkeypatch.setattr(compliant, "_direction_solve", counted)
    sim = box_sim("compliant", 250)
    sim.set_base_state(linear_velocity=[V0, 0.0, 0.0])
    sim.apply_external_wrench("box", [0.0, PUSH, 0.0], duration_s=10.0)
    contact = sim.contact
    solve = contact.solve
    seen = {"steps": 0, "slip": 0}

    def checked(Minv, v_free, u, dt):
        out = solve(Minv, v_free, u, dt)
        Mfull = np.triu(Minv) + np.triu(Minv, 1).T
        params = contact.parameters()
        v_r, f_r, u_r = reference_solve(contact.points, Mfull, v_free, u, dt, params,
                                        contact.reference_depth)
        np.testing.assert_allclose(out[1], f_r, atol=1e-9 * max(1.0, np.abs(f_r).max()))
        np.testing.assert_allclose(out[2], u_r, atol=1e-12)
        assert law_residual(contact.points, Mfull, v_free, u, dt, params,
                            contact.reference_depth, out[1]) < 1e-9
        seen["steps"] += 1
        seen["slip"] += int((contact.status == 2).all())
        return out

    contact.solve = checked
    for _ in range(int(0.8 * 250)):
        sim.step([])
    assert seen["steps"] == 200 and seen["slip"] >= 100 and fallbacks, (seen, len(fallbacks))
