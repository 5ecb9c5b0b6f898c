"""Contact that holds for any body, at any rate, with DEFAULT parameters (issue 18).

Every simulation here sets only what the scenario needs (the body, the rate,
``contact.model``; for the parameter sweeps the swept keys): the contact
stiffness, damping and solver settings are wb_sim's defaults. The numbers the
simulator is held to are computed independently:

* compliant impacts against the exact solution of the same contact law, the
  1-D ODE ``m z'' = -m g + 4 f(d, d')`` integrated finely by
  ``contact_reference`` (itself checked here against energy conservation, the
  closed-form static sink and a second integrator);
* rest states against the closed-form sink ``(W sqrt(d_ref) / (4 k))^(2/3)``;
* sliding against Coulomb's ``a = g (sin th - mu cos th)`` and a slide's
  length against ``v^2 / (2 mu g)``.

The body is a 0.1 m cube (link origin at the centre of its bottom face, the
4 bottom corners as contact points) whose density gives the mass. A drop from
height H is started just above the ground with the impact speed sqrt(2 g H),
given by a one-step push (``apply_external_wrench``), which saves the free
fall's steps.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import wb_sim
from wb_sim.errors import ConfigError, DivergenceError

from helpers.contact_reference import G, drop, rk4_drop, state_at, static_sink

NO_TORQUE = np.zeros(0)
SIDE = 0.1  # m, cube edge
D_REF = 1e-3  # m, default contact.reference_depth
K_DEFAULT = 4.0e4  # N/m, default contact.stiffness (checked against the table below)
C_DEFAULT = 400.0  # N*s/m, default contact.damping

MASSES = (0.05, 0.5, 2.0, 20.0, 200.0)  # kg
HEIGHTS = (0.2, 1.0, 2.0)  # m, drop height of the bottom face
RATES = (250, 500, 1000, 2000, 4000)  # Hz

CUBE = ('<robot name="cube"><link name="cube"><inertial><origin xyz="0 0 {h}" rpy="0 0 0"/>'
        '<mass value="{m}"/><inertia ixx="{i}" iyy="{i}" izz="{iz}" ixy="0" ixz="0" iyz="0"/>'
        '</inertial></link></robot>')


def cube_params(mass, height=SIDE, **extra):
    """A free SIDE x SIDE x ``height`` box standing on the 4 corners of its bottom
    face; only the given parameters besides the body are set (everything else
    is wb_sim's default)."""
    p = {"robot_description": CUBE.format(m=mass, h=height / 2,
                                          i=mass * (SIDE**2 + height**2) / 12,
                                          iz=mass * SIDE**2 / 6),
         "contact_surfaces": ["bottom"], "bottom.frame": "cube", "bottom.shape": "box",
         "bottom.size": [SIDE, SIDE]}
    p.update(extra)
    return p


def cube(mass, height=SIDE, **extra) -> wb_sim.Simulator:
    return wb_sim.Simulator.from_params(cube_params(mass, height, **extra))


def test_defaults_are_the_ones_the_reference_uses():
    """The exact solutions below are computed with k = 4e4 N/m, c = 400 N*s/m,
    d_ref = 1 mm: those must be wb_sim's defaults, or the comparison is void."""
    table = {p.key: p.default for p in wb_sim.config.PARAMETERS}
    assert table["contact.model"] == "compliant"
    assert table["contact.stiffness"] == K_DEFAULT
    assert table["contact.damping"] == C_DEFAULT
    assert table["contact.reference_depth"] == D_REF


# ---------------------------------------------------------------------------
# the reference itself
# ---------------------------------------------------------------------------


def test_reference_without_damping_conserves_energy():
    """With c = 0 the law is conservative: the body leaves the ground with its
    impact speed and rebounds to the drop height (1e-6 relative)."""
    for m, H in ((2.0, 0.2), (200.0, 1.0)):
        v0 = math.sqrt(2 * G * H)
        r = drop(m, v0, k=K_DEFAULT, c=0.0)
        assert r.left_ground
        assert r.exit_speed == pytest.approx(v0, rel=1e-6)
        assert r.rebound == pytest.approx(H, rel=1e-6)
        # deepest point: the spring's energy 4 k/sqrt(d_ref) (2/5) d^(5/2) = m g (H + d)
        d = r.max_depth
        assert 4 * K_DEFAULT / math.sqrt(D_REF) * 0.4 * d**2.5 == pytest.approx(
            m * G * (H + d), rel=1e-6)


def test_reference_comes_to_rest_at_the_static_sink():
    """A damped impact that does not bounce ends at (W sqrt(d_ref) / (4 k))^(2/3)."""
    r = drop(0.05, math.sqrt(2 * G * 0.2))  # overdamped: rises straight to the sink
    assert not r.left_ground
    assert -r.rebound == pytest.approx(static_sink(0.05, K_DEFAULT), rel=1e-3)
    for m in (0.05, 2.0, 20.0):
        z, v = state_at(m, math.sqrt(2 * G * 0.2), 1.0)
        assert -z == pytest.approx(static_sink(m, K_DEFAULT), rel=1e-6)
        assert abs(v) < 1e-8


def test_reference_agrees_with_an_independent_rk4_integration():
    """LSODA with events and RK4 at 1 us give the same deepest point and exit."""
    m, v0 = 2.0, math.sqrt(2 * G * 1.0)
    t, z = rk4_drop(m, v0, K_DEFAULT, C_DEFAULT, t_end=0.03)
    r = drop(m, v0)
    assert -z.min() == pytest.approx(r.max_depth, rel=1e-5)
    # lift-off speed from the RK4 trajectory: slope where z crosses 0 upwards
    i = int(np.flatnonzero((z[:-1] < 0) & (z[1:] >= 0))[0])
    assert (z[i + 1] - z[i]) / (t[1] - t[0]) == pytest.approx(r.exit_speed, rel=1e-3)


# ---------------------------------------------------------------------------
# drop matrix
# ---------------------------------------------------------------------------


def run_drop(mass, height, rate, model, t_max=3.0, **extra):
    """Drop the cube flat from ``height`` (bottom face) at ``rate``; returns
    (sim, z history of the bottom face, index of the impact's bottom, rest?,
    final sink = mean depth over the last 50 ms).

    The cube starts 0.5 mm above the ground after a one-step push that gives it
    the downward speed sqrt(2 g H); it runs until it is at rest after the
    impact (over 50 ms the bottom face moves less than 1e-3 of the static sink,
    at least 10 nm, compliant; less than 0.2 um, rigid) or ``t_max``."""
    v0 = math.sqrt(2 * G * height)
    dt = 1.0 / rate
    sim = cube(mass, **{"contact.model": model, "physics_rate_hz": float(rate),
                        "initial.base_position": [0.0, 0.0, 5e-4 + v0 * dt]}, **extra)
    # v after one step: -dt (F/m + g) = -v0
    sim.apply_external_wrench("cube", force=[0.0, 0.0, -mass * (v0 / dt - G)], duration_s=dt)
    chunk = max(1, round(0.05 / dt))
    z = np.empty(int(t_max / dt) + chunk)
    # at rest: the bottom face moves less than this over 50 ms (rigid: the solver's
    # tolerance leaves a jitter of a few 1e-8 m at 250 Hz)
    tol = max(1e-3 * static_sink(mass, K_DEFAULT), 1e-8) if model == "compliant" else 2e-7
    n, bottom, rest = 0, None, False
    step = sim.step
    while n * dt < t_max:
        for i in range(n, n + chunk):
            step(NO_TORQUE)
            z[i] = sim.q[2]
        n += chunk
        if bottom is None:
            rising = np.flatnonzero((z[:n - 1] < 0.0) & (z[1:n] >= z[:n - 1]))
            if len(rising):
                bottom = int(rising[0])
        if bottom is not None and n - chunk > bottom:
            last = z[n - chunk:n]
            if last.max() < 0.0 and np.ptp(last) < tol:
                rest = True
                break
    return sim, z[:n], bottom, rest, float(-z[n - chunk:n].mean())


def _drop_case(model, mass, height):
    """Runs the drop at every rate; returns per-rate (rebound, final sink, rest) and
    a list of failures (construction, divergence)."""
    out, errors = {}, []
    for rate in RATES:
        try:
            sim, z, bottom, rest, sink = run_drop(mass, height, rate, model)
        except ConfigError as e:
            errors.append(f"{rate} Hz: refused: {e}")
            continue
        except DivergenceError as e:
            errors.append(f"{rate} Hz: DivergenceError: {e}")
            continue
        assert bottom is not None, f"{rate} Hz: the cube never touched the ground"
        assert np.isfinite(sim.q).all()
        out[rate] = (float(z[bottom:].max()), sink, rest)
    return out, errors


@pytest.mark.parametrize("height", HEIGHTS)
@pytest.mark.parametrize("mass", MASSES)
def test_compliant_drop_with_default_parameters(mass, height):
    """Compliant contact, default parameters, 0.05-200 kg, 0.2-2 m, 250-4000 Hz:
    constructed without error, no divergence; the rebound never exceeds the
    exact rebound of the contact law (0 where the law does not leave the
    ground) + 10 % of the drop height (an explicit
    integration rebounded 82 mm where the law gives 10 mm); at rest the cube
    sinks the law's static sink within 3 % at every rate."""
    out, errors = _drop_case("compliant", mass, height)
    exact = drop(mass, math.sqrt(2 * G * height))
    if any("DivergenceError" in e for e in errors):
        errors.append(f"(the exact law's deepest point: {exact.max_depth * 1e3:.1f} mm)")
    sink = static_sink(mass, K_DEFAULT)
    for rate, (rebound, final, rest) in out.items():
        if rebound > max(exact.rebound, 0.0) + 0.1 * height:
            errors.append(f"{rate} Hz: rebound {rebound * 1e3:.2f} mm > exact "
                          f"{max(exact.rebound, 0) * 1e3:.2f} mm + 10 % of {height} m")
        if not rest:
            errors.append(f"{rate} Hz: not at rest after 3 s (depth {final * 1e3:.4f} mm)")
        elif abs(final - sink) > 0.03 * sink:
            errors.append(f"{rate} Hz: sink at rest {final * 1e6:.3f} um, law {sink * 1e6:.3f} um")
    assert not errors, f"{mass} kg from {height} m (compliant):\n" + "\n".join(errors)


@pytest.mark.parametrize("height", HEIGHTS)
@pytest.mark.parametrize("mass", MASSES)
def test_rigid_drop_with_default_parameters(mass, height):
    """Rigid contact, default parameters, 0.05-200 kg, 0.2-2 m, 250-4000 Hz:
    no error, rebound <= 1 mm at every rate (it was 36 mm at 16 kHz and grew
    as the step shrank), and the sink at rest small (< 10 um) and
    non-increasing as the rate rises (it shrinks at least 4x from 250 Hz to
    4 kHz: it converges to 0)."""
    out, errors = _drop_case("rigid", mass, height)
    for rate, (rebound, final, rest) in out.items():
        if rebound > 1e-3:
            errors.append(f"{rate} Hz: rebound {rebound * 1e3:.3f} mm > 1 mm")
        if not rest:
            errors.append(f"{rate} Hz: not at rest after 3 s")
        if not final < 1e-5:
            errors.append(f"{rate} Hz: sink at rest {final * 1e6:.3f} um >= 10 um")
    rates = sorted(out)
    sinks = [out[r][1] for r in rates]
    for (r0, s0), (r1, s1) in zip(zip(rates, sinks), zip(rates[1:], sinks[1:])):
        if s1 > s0 + 5e-8:
            errors.append(f"sink grows with the rate: {s0 * 1e6:.4f} um at {r0} Hz, "
                          f"{s1 * 1e6:.4f} um at {r1} Hz")
    if 250 in out and 4000 in out and not out[4000][1] <= out[250][1] / 4 + 2e-8:
        errors.append(f"sink does not converge: {out[250][1] * 1e6:.4f} um at 250 Hz, "
                      f"{out[4000][1] * 1e6:.4f} um at 4 kHz")
    assert not errors, f"{mass} kg from {height} m (rigid):\n" + "\n".join(errors)


# ---------------------------------------------------------------------------
# any stiffness and damping
# ---------------------------------------------------------------------------

STIFFNESSES = (1e3, 1e4, 1e5, 1e6, 1e7)  # N/m
DAMPINGS = (0.0, 100.0, 1e4)  # N*s/m


@pytest.mark.parametrize("damping", DAMPINGS)
@pytest.mark.parametrize("stiffness", STIFFNESSES)
def test_any_stiffness_and_damping_is_accepted_and_stable(stiffness, damping):
    """k from 1e3 to 1e7 N/m and c from 0 to 1e4 N*s/m (normal and tangential)
    are accepted (no ConfigError) and stable on the 2 kg cube dropped from
    0.2 m at the default 1 kHz: no divergence, finite state, no energy gained
    (rebound <= the law's + 10 % of H), never deeper than the law's deepest
    point + one step of travel, and 1 s after the impact, where the law is at
    rest, the cube is at rest at the law's sink (3 %; where the step does not
    resolve that sink, 1.5 g dt^2 > sink, at most that depth). A note in
    ``sim.notes`` says when the rate does not resolve the contact."""
    mass, height, rate = 2.0, 0.2, 1000.0
    v0 = math.sqrt(2 * G * height)
    dt = 1.0 / rate
    sim = cube(mass, **{"physics_rate_hz": rate,
                        "contact.stiffness": stiffness, "contact.damping": damping,
                        "contact.tangential_stiffness": stiffness,
                        "contact.tangential_damping": damping,
                        "initial.base_position": [0.0, 0.0, 5e-4 + v0 * dt]})
    sim.apply_external_wrench("cube", force=[0.0, 0.0, -mass * (v0 / dt - G)], duration_s=dt)
    n = int(1.05 / dt)
    z = np.empty(n)
    for i in range(n):
        sim.step(NO_TORQUE)
        z[i] = sim.q[2]
    assert np.isfinite(sim.q).all() and np.isfinite(sim.v).all()
    assert np.abs(sim.q[3:6]).max() < 1e-6  # still flat
    exact = drop(mass, v0, k=stiffness, c=damping)
    touch = int(np.argmax(z < 0.0))
    bottom = touch + int(np.argmax(np.diff(z[touch:]) >= 0.0))
    assert z[bottom:].max() <= max(exact.rebound, 0.0) + 0.1 * height
    assert -z.min() <= 1.1 * exact.max_depth + v0 * dt
    z_ref, v_ref = state_at(mass, v0, (n - 2) * dt, k=stiffness, c=damping)
    sink = static_sink(mass, stiffness)
    if z_ref < 0 and abs(v_ref) < 1e-5:  # the law is at rest by now
        last = z[-int(0.05 / dt):]
        assert np.ptp(last) < max(1e-3 * sink, 1e-8), "not at rest"
        resolved = sink >= 1.5 * G * dt**2
        if resolved:
            assert -last.mean() == pytest.approx(sink, rel=0.03)
        else:
            assert 0.97 * sink <= -last.mean() <= 1.03 * 1.5 * G * dt**2
    # the note: c = 1e4 N*s/m damps a point carrying 0.5 kg in 0.5 kg / 1e4 = 50 us << dt,
    # and k = 1e6 sinks 29 um < 1.5 g dt^2 (omega dt > 1); k <= 1e4 with c = 100 is
    # resolved (omega dt < 0.2, c dt / 0.5 kg = 0.2)
    contact_notes = [note for note in sim.notes if note.startswith("contact")]
    if damping >= 1e4 and stiffness >= 1e6:
        assert contact_notes, sim.notes
    if damping <= 100.0 and stiffness <= 1e4:
        assert not contact_notes, sim.notes


# ---------------------------------------------------------------------------
# sliding
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("tangential_damping", [1.0, 5.0, 19.0, 20.0, 50.0, 1e3, 1e4])
def test_coulomb_acceleration_on_an_incline_for_any_tangential_damping(tangential_damping):
    """A 2 kg cube on a 30 deg slope with mu = 0.3 slides with
    a = g (sin th - mu cos th) = 2.356 m/s^2 within 1 % whatever the
    tangential damping (with an explicit slip update c_t = 19 N*s/m gave
    4.28 m/s^2 and c_t = 15 a deformation of 1e191 m); the ground's tangential
    deformation stays bounded (< 1 mm)."""
    th, mu = math.radians(30.0), 0.3
    sim = cube(2.0, **{"ground.normal": [0.0, -math.sin(th), math.cos(th)],
                       "initial.base_rpy": [th, 0.0, 0.0],
                       "contact.friction_coefficient": mu,
                       "contact.tangential_damping": tangential_damping})
    down = np.array([0.0, -math.cos(th), -math.sin(th)])  # downhill, in the plane
    n = int(0.5 / sim.dt)
    x = np.empty(n)
    u_max = 0.0
    for i in range(n):
        sim.step(NO_TORQUE)
        x[i] = sim.q[:3] @ down
        u_max = max(u_max, float(np.abs(sim.state.contact_deformation).max()))
    assert np.isfinite(u_max) and u_max < 1e-3, u_max
    t = np.arange(1, n + 1) * sim.dt
    w = t >= 0.1
    a = 2 * np.polyfit(t[w], x[w], 2)[0]
    assert a == pytest.approx(G * (math.sin(th) - mu * math.cos(th)), rel=1e-2)


@pytest.mark.parametrize("tangential_damping", [None, 5.0, 1e4])
def test_box_that_slides_to_a_stop_stays_stopped(tangential_damping):
    """A 2 kg box (0.1 x 0.1 x 0.04 m: flat, so that mu = 1 does not tip it)
    resting on flat ground (default mu = 1), pushed to ~0.5 m/s, slides
    v^2 / (2 mu g) (5 %) and then stays where it stopped: < 0.1 mm of motion
    over the next 0.5 s (the tangential spring loaded while slipping sprang it
    back 0.5 mm). What is left is the law's elastic pre-slide mu f_n / (s k_t),
    0.05 mm at the default k_t, plus the box's pitch relaxing. Positions are the
    centre of mass's."""
    mass, height = 2.0, 0.04
    extra = {} if tangential_damping is None else {"contact.tangential_damping":
                                                   tangential_damping}
    sim = cube(mass, height, **{"initial.base_position":
                                [0.0, 0.0, -static_sink(mass, K_DEFAULT)]}, **extra)
    dt = sim.dt
    for _ in range(int(0.05 / dt)):
        sim.step(NO_TORQUE)
    com = sim.center_of_mass
    x0 = com()[0]
    # 0.5 m/s in one step, applied at the centre of mass (torque about the bottom-face origin)
    f = mass * 0.5 / dt
    sim.apply_external_wrench("cube", force=[f, 0.0, 0.0], torque=[0.0, f * height / 2, 0.0],
                              duration_s=dt)
    sim.step(NO_TORQUE)
    v1 = sim.v[0]
    assert 0.4 < v1 < 0.55
    x = [com()[0]]
    while True:
        sim.step(NO_TORQUE)
        x.append(com()[0])
        if (x[-1] - x[-2]) / dt < 1e-3 or len(x) * dt > 1.0:
            break
    x_stop = x[-1]
    assert x_stop - x0 == pytest.approx(v1**2 / (2 * 1.0 * G), rel=0.05)
    after = []
    for _ in range(int(0.5 / dt)):
        sim.step(NO_TORQUE)
        after.append(com()[0])
    assert np.abs(np.array(after) - x_stop).max() < 1e-4


# ---------------------------------------------------------------------------
# very light and very heavy bodies at rest
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["compliant", "rigid"])
@pytest.mark.parametrize("rate", [250, 4000])
@pytest.mark.parametrize("mass", [0.05, 200.0])
def test_light_and_heavy_bodies_rest_with_default_parameters(mass, rate, model):
    """A 0.05 kg and a 200 kg cube placed on the ground, default contact
    parameters, 250 Hz and 4 kHz, both models: the ground carries the weight
    (1 % at every step of the last 0.2 s), the cube sinks the law's static sink
    (compliant, 3 %) or less than 10 um (rigid), and does not drift (< 1 um)."""
    sink = static_sink(mass, K_DEFAULT) if model == "compliant" else 0.0
    sim = cube(mass, **{"contact.model": model, "physics_rate_hz": float(rate),
                        "initial.base_position": [0.0, 0.0, -sink]})
    n = int(1.0 * rate)
    fz = np.empty(n)
    for i in range(n):
        sim.step(NO_TORQUE)
        fz[i] = sim.contact_wrench_array()[0, 2]
    ratio = fz[-int(0.2 * rate):] / (mass * G)
    assert np.abs(ratio - 1.0).max() < 1e-2, (ratio.min(), ratio.max())
    depth = -sim.q[2]
    if model == "compliant":
        assert depth == pytest.approx(sink, rel=0.03)
    else:
        assert depth < 1e-5
    assert np.abs(sim.q[:2]).max() < 1e-6
