"""Whole robots from config/*.yaml held by the reference PD + gravity
compensation controller, plus determinism, joint limits, torque saturation and
armature.

Each robot runs once per configuration (module-scoped fixtures) and several
tests assert on the recorded run. Figures measured when these tests were written
(1 kHz, the YAML gains unless stated):

* iCub, 10 s: base height range over the last 5 s 7.9 um, mean vertical
  reaction / weight over the last 1 s 1.0000001, all 8 sole corners sticking;
* humanoid, 5 s (kp 1000, kd 20): base height range over the last 1 s ~0.1 mm,
  reaction / weight 1.0000, all 8 sole corners in contact;
* ANYmal, 3 s: feet always in contact, reaction / weight 1.0000 (the YAML's
  damping passes the combined stability check, ratio 0.79; 200 N*s/m, which
  chattered, is now refused at construction);
* Talos, 2 s (kp 3000, kd 30): base within 5 mm of its start height;
* Panda: step tracking error 7e-5 rad after 3 s, gravity compensation drift
  4e-16 rad over 1 s.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest
import yaml

import wb_sim
from wb_sim.controllers import PDGravityController

from helpers.extras import require_robot_data

G = 9.81


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def yaml_gains(robot: str) -> tuple[np.ndarray, np.ndarray]:
    """(kp, kd) of the ``wb_sim_pd_controller`` block of config/<robot>.yaml: a
    scalar or one value per joint each."""
    with open(wb_sim.config_path(robot)) as f:
        doc = yaml.safe_load(f)
    p = doc["wb_sim_pd_controller"]["ros__parameters"]
    return np.asarray(p["kp"], dtype=float), np.asarray(p["kd"], dtype=float)


def hold_controller(sim, kp, kd, q_ref=None) -> PDGravityController:
    q_ref = sim.state.joint_positions.copy() if q_ref is None else q_ref
    return PDGravityController(sim.robot, q_ref, kp, kd, gravity=sim.config.gravity)


class StandRun:
    """Per-step record of a PD + gravity compensation run from the initial state."""

    def __init__(self, sim, ctrl, seconds):
        n = int(round(seconds / sim.dt))
        self.sim, self.dt, self.n = sim, sim.dt, n
        self.weight = sim.mass * G
        self.z0 = sim.state.base_position[2]
        self.xy0 = sim.state.base_position[:2].copy()
        self.z = np.empty(n)
        self.tilt = np.empty(n)  # deg, angle between the base z axis and the world z axis
        self.fz = np.empty(n)  # N, sum of the vertical ground forces
        self.depth = np.empty(n)  # m, deepest contact point
        self.in_contact = np.empty((n, sim.contact_points.n), dtype=bool)
        for k in range(n):
            st = sim.state
            sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
            st = sim.state
            self.z[k] = st.base_position[2]
            self.tilt[k] = math.degrees(math.acos(min(1.0, st.base_pose.rotation[2, 2])))
            cp = sim.contact_points_state()
            self.fz[k] = cp.force[:, 2].sum()
            self.depth[k] = cp.depth.max()
            self.in_contact[k] = [s != "none" for s in cp.status]
        self.final = sim.state

    def last(self, seconds):
        return slice(self.n - int(round(seconds / self.dt)), self.n)

    def drift(self, seconds):
        """max - min of the base height over the last ``seconds``, m."""
        return float(np.ptp(self.z[self.last(seconds)]))

    def load_ratio(self, seconds):
        """Mean vertical ground force over the last ``seconds`` / weight."""
        return float(self.fz[self.last(seconds)].mean() / self.weight)

    def slide(self):
        """Horizontal displacement of the base at the end, m."""
        return float(np.linalg.norm(self.final.base_position[:2] - self.xy0))


def build(robot, **overrides):
    require_robot_data(robot)
    return wb_sim.Simulator.from_yaml(wb_sim.config_path(robot), overrides=overrides)


# ---------------------------------------------------------------------------
# 1. iCub stands 10 s
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def icub_run():
    sim = build("icub")
    return StandRun(sim, hold_controller(sim, *yaml_gains("icub")), 10.0)


def test_icub_model(icub_run):
    sim = icub_run.sim
    assert sim.nj == 32
    assert sim.mass == pytest.approx(33.06, abs=0.01)
    assert icub_run.n == 10_000


def assert_stands(r, *, window, drift, height, tilt, slide):
    """A standing run: base height range over the last ``window`` s below
    ``drift`` (m); no fall (final height within ``height`` m of the start, tilt
    below ``tilt`` deg, base slid less than ``slide`` m); every contact point in
    contact over the last second."""
    assert r.drift(window) < drift, f"base height range over the last {window} s: {r.drift(window):.3e} m"
    assert abs(r.final.base_position[2] - r.z0) < height
    assert r.tilt.max() < tilt
    assert r.slide() < slide
    assert r.in_contact[r.last(1.0)].all(), "every sole corner in contact over the last 1 s"


def test_icub_stands_without_drift(icub_run):
    assert_stands(icub_run, window=5.0, drift=1e-3, height=0.01, tilt=2.0, slide=0.01)


def test_icub_ground_carries_its_weight(icub_run):
    ratio = icub_run.load_ratio(1.0)
    assert ratio == pytest.approx(1.0, abs=0.01), f"reaction / weight = {ratio:.6f}"


# ---------------------------------------------------------------------------
# 2. the default humanoid stands 5 s
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def humanoid_run():
    sim = build("humanoid")
    return StandRun(sim, hold_controller(sim, *yaml_gains("humanoid")), 5.0)


def test_humanoid_stands(humanoid_run):
    r = humanoid_run
    # the crouched humanoid settles for a couple of seconds, so the height is
    # judged over the last second
    assert_stands(r, window=1.0, drift=1e-3, height=0.02, tilt=5.0, slide=0.03)
    ratio = r.load_ratio(1.0)
    assert ratio == pytest.approx(1.0, abs=0.01), f"reaction / weight = {ratio:.6f}"


def test_humanoid_sinks_at_most_2mm(humanoid_run):
    r = humanoid_run
    assert r.depth.max() <= 2e-3, f"deepest contact point: {r.depth.max() * 1e3:.3f} mm"
    # and it does stand on the ground (a run without contact would pass the line above)
    assert r.depth[r.last(1.0)].min() > 0.0


# ---------------------------------------------------------------------------
# 3. ANYmal (sphere feet) stands 3 s
# ---------------------------------------------------------------------------

ANYMAL_CASES = [
    pytest.param({}, id="yaml"),
    # softer still: the stability check's margin is not what keeps it standing
    pytest.param({"contact.tangential_damping": 60.0}, id="tangential_damping_60"),
]


@pytest.fixture(scope="module", params=ANYMAL_CASES)
def anymal_run(request):
    sim = build("anymal", **request.param)
    return StandRun(sim, hold_controller(sim, *yaml_gains("anymal")), 3.0)


def test_anymal_stands_on_four_feet(anymal_run):
    r = anymal_run  # StandRun raising DivergenceError would error this test
    assert r.sim.surface_names == ("lf_foot", "rf_foot", "lh_foot", "rh_foot")
    assert r.drift(1.0) < 1e-3, f"base height range over the last 1 s: {r.drift(1.0):.3e} m"
    assert r.tilt[r.last(1.0)].max() < 2.0
    frac = r.in_contact[r.last(1.0)].mean(axis=0)
    assert (frac == 1.0).all(), f"fraction of the last 1 s each foot is in contact: {frac}"
    assert r.in_contact[-1].all(), f"feet in contact at the end: {r.in_contact[-1]}"
    ratio = r.load_ratio(1.0)
    assert ratio == pytest.approx(1.0, abs=0.02), f"reaction / weight = {ratio:.6f}"
    # the base sags under the uncompensated contact load, but stays on its legs
    assert 0.40 < r.final.base_position[2] < r.z0


# ---------------------------------------------------------------------------
# 4. Talos
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def talos():
    return build("talos")


def test_talos_loads(talos):
    assert talos.nj == 32
    assert talos.mass == pytest.approx(90.27, abs=0.01)
    assert len(talos.joint_names) == 32 and "leg_left_4_joint" in talos.joint_names


@pytest.mark.parametrize("kp", [pytest.param(None, id="yaml_gains")])
def test_talos_stands_2s(talos, kp):
    kp_yaml, kd_yaml = yaml_gains("talos")
    talos.reset()
    r = StandRun(talos, hold_controller(talos, kp_yaml if kp is None else kp, kd_yaml), 2.0)
    dz = r.final.base_position[2] - r.z0
    assert abs(dz) < 0.05, f"base height change {dz * 1e3:.1f} mm"
    assert r.tilt.max() < 5.0, f"max tilt {r.tilt.max():.2f} deg"


# ---------------------------------------------------------------------------
# 5. Panda: tracking, gravity compensation, saturation
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def panda():
    return build("panda")


def run_controller(sim, ctrl, n):
    for _ in range(n):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))


def test_panda_tracks_a_step(panda):
    panda.reset()
    assert not panda.robot.floating_base and panda.nj == 9
    q0 = panda.state.joint_positions.copy()
    ref = q0.copy()
    idx = [panda.robot.joint_index(n) for n in ("panda_joint1", "panda_joint2", "panda_joint4")]
    ref[idx] += 0.2  # fingers unchanged
    ctrl = hold_controller(panda, *yaml_gains("panda"), q_ref=ref)
    run_controller(panda, ctrl, 1)
    assert np.abs(panda.state.joint_positions - ref)[idx].min() > 0.19  # it starts away
    run_controller(panda, ctrl, 2999)
    assert panda.t == pytest.approx(3.0)
    err = np.abs(panda.state.joint_positions - ref)
    assert err.max() < 1e-3, f"tracking error after 3 s: {err}"
    assert np.abs(panda.state.joint_velocities).max() < 1e-2


def test_panda_gravity_compensation_holds(panda):
    panda.reset()
    q0 = panda.state.joint_positions.copy()
    ctrl = hold_controller(panda, 0.0, 0.0)
    run_controller(panda, ctrl, 1000)
    drift = np.abs(panda.state.joint_positions - q0).max()
    assert drift < 1e-3, f"drift over 1 s: {drift:.3e} rad"
    # the compensation torques are not trivially zero: the arm would fall without them
    assert np.abs(panda.state.applied_torques).max() > 1.0


def test_panda_limp_falls_without_gravity_compensation(panda):
    """Control for the test above: zero torque does move the arm."""
    panda.reset()
    q0 = panda.state.joint_positions.copy()
    for _ in range(1000):
        panda.step(np.zeros(panda.nj))
    assert np.abs(panda.state.joint_positions - q0).max() > 0.1


def test_panda_torques_saturate_at_the_urdf_effort_limit(panda):
    panda.reset()
    limit = panda.robot.effort_limit
    np.testing.assert_array_equal(limit, [87, 87, 87, 87, 12, 12, 12, 100, 100])
    tau = 2.5 * limit * np.array([1, -1, 1, -1, 1, -1, 1, -1, 1])
    tau[2] = 0.5 * limit[2]  # inside the limit: passed through unchanged
    panda.step(tau)
    applied = panda.state.applied_torques
    expected = np.sign(tau) * limit
    expected[2] = tau[2]
    np.testing.assert_array_equal(applied, expected)
    # the dynamics feel the clipped torque: same step with exactly the limits
    q_sat, v_sat = panda.state.q.copy(), panda.state.v.copy()
    panda.reset()
    panda.step(expected)
    np.testing.assert_array_equal(panda.state.q, q_sat)
    np.testing.assert_array_equal(panda.state.v, v_sat)


# ---------------------------------------------------------------------------
# 6. determinism
# ---------------------------------------------------------------------------


def _humanoid_trajectory(sim, ctrl, n, every=100):
    out = []
    for k in range(n):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        if (k + 1) % every == 0:
            out.append(np.concatenate([sim.state.q, sim.state.v]))
    return np.array(out)


def test_determinism_two_fresh_simulators():
    kp, kd = yaml_gains("humanoid")
    ends = []
    for _ in range(2):
        sim = build("humanoid")
        _humanoid_trajectory(sim, hold_controller(sim, kp, kd), 2000)
        ends.append((sim.state.q.copy(), sim.state.v.copy(), sim.t))
    (q1, v1, t1), (q2, v2, t2) = ends
    assert t1 == t2 == pytest.approx(2.0)
    assert not np.array_equal(q1, sim.q0)  # the robot moved (landing, sag)
    assert np.array_equal(q1, q2) and np.array_equal(v1, v2)


def test_determinism_after_reset_mid_run():
    kp, kd = yaml_gains("humanoid")
    sim = build("humanoid")
    ctrl = hold_controller(sim, kp, kd)
    first = _humanoid_trajectory(sim, ctrl, 2000)
    sim.reset()
    assert sim.t == 0.0 and np.array_equal(sim.state.q, sim.q0)
    _humanoid_trajectory(sim, ctrl, 700)  # interrupted run
    sim.reset()
    again = _humanoid_trajectory(sim, ctrl, 2000)
    assert first.shape == again.shape == (20, sim.model.nq + sim.model.nv)
    assert np.abs(first[-1] - first[0]).max() > 1e-4  # not a trivially constant trajectory
    assert np.array_equal(first, again)


# ---------------------------------------------------------------------------
# 7. joint limits
# ---------------------------------------------------------------------------


def limp_limit_violation(sim, seconds=3.0):
    """Largest excursion (rad or m) of each joint past its limits, zero torque."""
    sim.reset()
    lo, hi = sim.robot.position_lower, sim.robot.position_upper
    worst = np.zeros(sim.nj)
    zero = np.zeros(sim.nj)
    for _ in range(int(round(seconds / sim.dt))):
        sim.step(zero)
        qj = sim.state.joint_positions
        np.maximum(worst, np.maximum(lo - qj, qj - hi), out=worst)
    return worst


@pytest.mark.parametrize("time_constant", [pytest.param(None, id="default_5ms")])
def test_limp_panda_stays_within_joint_limits(time_constant):
    extra = {} if time_constant is None else {"joints.limit_time_constant": time_constant}
    sim = build("panda", **extra)
    worst = limp_limit_violation(sim)
    assert worst.max() > 0.0  # it does reach its limits
    assert worst.max() < 0.05, dict(zip(sim.joint_names, worst.round(4)))


def test_limp_panda_passes_its_limits_when_they_are_off():
    sim = build("panda", **{"joints.position_limits": False})
    worst = limp_limit_violation(sim)
    assert worst.max() > 0.5, dict(zip(sim.joint_names, worst.round(4)))


# ---------------------------------------------------------------------------
# 8. armature
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("robot", ["panda", "humanoid"])
def test_armature_adds_to_the_mass_matrix_diagonal(robot):
    geared = build(robot, **{"joints.armature": [0.1]})
    # reference: pinocchio's CRBA of the bare URDF (no armature) at the same q
    urdf = str(geared.robot.urdf_file)
    model = (pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer())
             if geared.robot.floating_base else pin.buildModelFromUrdf(urdf))
    q = geared.q0
    if not geared.robot.floating_base:  # same joints, same q layout; root placement irrelevant
        assert model.nq == geared.model.nq
    M0 = pin.crba(model, model.createData(), q)
    M0 = np.triu(M0) + np.triu(M0, 1).T
    M1 = geared.mass_matrix()
    iv = geared.robot.idx_v
    assert len(iv) == geared.nj
    diff = M1 - M0
    np.testing.assert_allclose(np.diag(diff)[iv], 0.1, rtol=0, atol=1e-9)
    off = diff.copy()
    off[iv, iv] = 0.0
    np.testing.assert_allclose(off, 0.0, atol=1e-9)  # base rows and off-diagonal untouched
    # per-joint values go to their own rows
    per = np.linspace(0.05, 0.01 * (5 + geared.nj), geared.nj)
    M2 = build(robot, **{"joints.armature": per.tolist()}).mass_matrix()
    np.testing.assert_allclose(np.diag(M2 - M0)[iv], per, rtol=0, atol=1e-9)
