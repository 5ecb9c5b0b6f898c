"""contact.model: rigid -- impulses with a Coulomb cone on pinocchio's constraint solvers.
Every test asserts against analytic values, the compliant model, or the other solver."""

import math

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim import ConfigError, UnsupportedError
from wb_sim.controllers import PDGravityController

from helpers.extras import require_robot_data

G0 = 9.81
BOX = """<robot name="box"><link name="box"><inertial><mass value="{m}"/><origin xyz="0 0 0"/>
<inertia ixx="{i}" iyy="{i}" izz="{i}" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>"""


def box_sim(mass=2.0, z=0.0, **params):
    """A box whose contact points are the 4 corners of its 0.2 x 0.2 m bottom face
    (the frame origin is on that face)."""
    base = {"robot_description": BOX.format(m=mass, i=mass * 0.2 ** 2 / 6),
            "contact.model": "rigid", "contact_surfaces": ["b"], "b.frame": "box",
            "b.size": [0.2, 0.2], "initial.base_position": [0.0, 0.0, z]}
    base.update(params)
    return wb_sim.Simulator.from_params(base)


def vertical_force(sim):
    return sum(w.force[2] for w in sim.contact_wrenches().values())


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_box_at_rest_carries_its_weight_without_sinking_or_drifting(solver):
    sim = box_sim(**{"contact.solver": solver})
    z, fz = [], []
    for _ in range(10_000):  # 10 s
        sim.step([])
        z.append(sim.q[2])
        fz.append(vertical_force(sim))
    fz = np.array(fz[-1000:]) / (2.0 * G0)
    assert fz.mean() == pytest.approx(1.0, abs=1e-3)  # over the last second
    assert np.abs(fz - 1.0).max() < 5e-3  # and at every step
    assert sim.contact.depth.max() < 1e-4  # m
    assert np.ptp(z[1000:]) < 1e-6
    assert sim.contact.nonconverged == 0
    assert set(sim.contact_points_state().status) == {"stick"}


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_dropped_box_stops_at_touchdown_without_bounce_or_sink(solver):
    sim = box_sim(z=0.1, **{"contact.solver": solver})
    touched, vz_after, depth = None, [], 0.0
    for k in range(600):
        sim.step([])
        depth = max(depth, sim.contact.depth.max())
        if touched is None and sim.contact._impulse[:, 2].sum() > 0:
            touched = k
        elif touched is not None:
            vz_after.append(sim.v[2])
    v_impact = math.sqrt(2 * G0 * 0.1)
    assert touched is not None
    assert max(vz_after) < 1e-3 * v_impact  # restitution 0: no bounce
    assert depth < 1e-4  # no sink (m)
    assert sim.q[2] == pytest.approx(0.0, abs=1e-5)


def _incline_sim(theta, mu, solver="admm"):
    n = [0.0, -math.sin(theta), math.cos(theta)]  # plane tilted about x: downhill is +y
    return box_sim(**{"ground.normal": n, "contact.friction_coefficient": mu,
                      "contact.solver": solver, "initial.base_rpy": [theta, 0.0, 0.0]})


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_box_slides_down_an_incline_with_the_analytic_acceleration(solver):
    theta, mu = math.radians(30), 0.3
    sim = _incline_sim(theta, mu, solver)
    speeds = []
    for _ in range(500):
        sim.step([])
        speeds.append(np.linalg.norm(sim.state.base_linear_velocity))
    t = np.arange(1, 501) * sim.dt
    a = np.polyfit(t[100:], speeds[100:], 1)[0]
    assert a == pytest.approx(G0 * (math.sin(theta) - mu * math.cos(theta)), rel=1e-2)
    assert set(sim.contact_points_state().status) == {"slip"}


def test_box_sticks_on_an_incline_when_tan_theta_below_mu():
    sim = _incline_sim(math.radians(20), 0.5)
    for _ in range(200):
        sim.step([])
    p0 = sim.q[:3].copy()
    for _ in range(1000):
        sim.step([])
    assert np.linalg.norm(sim.q[:3] - p0) < 1e-5  # m in 1 s (sliding would cover 0.2 m)
    assert "slip" not in sim.contact_points_state().status




@pytest.mark.parametrize("mass", [0.1, 100.0])
def test_default_tolerance_fits_light_and_heavy_bodies(mass):
    """contact.tolerance measures impulses relative to the weight share of a point,
    so the same default holds a 0.1 kg and a 100 kg box to the same relative
    accuracy (an absolute impulse tolerance of this size lets the light box's
    reaction wander by tens of percent)."""
    sim = box_sim(mass=mass)
    fz = []
    for _ in range(1500):
        sim.step([])
        fz.append(vertical_force(sim))
    fz = np.array(fz[-1000:]) / (mass * G0)
    assert np.abs(fz - 1.0).max() < 2e-3, (fz.min(), fz.max())


def test_impact_and_stick_slip_figures_agree_between_admm_and_pgs():
    """Different impulse splits, same motion: the two solvers' velocity changes agree."""
    sims = {s: box_sim(z=0.05, **{"contact.solver": s, "contact.tolerance": 1e-9})
            for s in ("admm", "pgs")}
    for _ in range(300):
        for s in sims.values():
            s.step([])
    qa, qp = sims["admm"].q, sims["pgs"].q
    assert np.abs(qa - qp).max() < 1e-5
    fa, fp = vertical_force(sims["admm"]), vertical_force(sims["pgs"])
    assert fa == pytest.approx(fp, rel=1e-4)


def _icub(**extra):
    require_robot_data("icub")
    path = wb_sim.config_path("icub")
    sim = wb_sim.Simulator.from_yaml(path, {"contact.model": "rigid", **extra})
    gains = wb_sim.config.read_yaml_params(path, "wb_sim_pd_controller")
    ctrl = PDGravityController(sim.robot, sim.state.joint_positions, gains["kp"], gains["kd"],
                               gravity=sim.config.gravity)
    return sim, ctrl


def test_icub_stands_10_s_on_rigid_feet():
    sim, ctrl = _icub()
    soles0 = np.array([sim.frame_pose(f).translation[:2] for f in ("l_sole", "r_sole")])
    z = []
    for _ in range(10_000):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        z.append(sim.q[2])
    soles = np.array([sim.frame_pose(f).translation[:2] for f in ("l_sole", "r_sole")])
    assert vertical_force(sim) / (sim.mass * G0) == pytest.approx(1.0, abs=1e-3)
    assert np.abs(soles - soles0).max() < 1e-4  # slip < 0.1 mm
    assert np.ptp(z[5000:]) < 1e-3
    assert sim.contact.depth.max() < 1e-4
    assert sim.contact.statistics()["nonconverged"] <= 10  # counted, reported; at most at touchdown


def test_quadruped_with_sphere_feet_stands():
    require_robot_data("anymal")
    path = wb_sim.config_path("anymal")
    sim = wb_sim.Simulator.from_yaml(path, {"contact.model": "rigid"})
    gains = wb_sim.config.read_yaml_params(path, "wb_sim_pd_controller")
    ctrl = PDGravityController(sim.robot, sim.state.joint_positions, gains["kp"], gains["kd"],
                               gravity=sim.config.gravity)
    z0 = sim.q[2]
    for _ in range(3000):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
    assert sim.q[2] > z0 - 0.05
    assert (sim.contact_points_state().force[:, 2] > 0).all()  # all four feet loaded
    assert vertical_force(sim) / (sim.mass * G0) == pytest.approx(1.0, abs=2e-2)


def test_not_converged_steps_complete_and_are_counted():
    sim = box_sim(z=0.05, **{"contact.max_iterations": 1, "contact.tolerance": 1e-14})
    for _ in range(200):
        sim.step([])  # never raises
    assert sim.contact.nonconverged > 0
    assert sim.contact.statistics()["nonconverged"] == sim.contact.nonconverged
    assert np.isfinite(sim.q).all()


@pytest.mark.parametrize("key,value,match", [
    ("contact.solver", "qp", "contact.solver"),
    ("contact.baumgarte_gain", 1.5, "contact.baumgarte_gain"),
    ("contact.max_iterations", 0, "contact.max_iterations"),
    ("contact.tolerance", 0.0, "contact.tolerance"),
    ("contact.regularization", -1e-6, "contact.regularization"),
    ("contact.regularization", 2.0, "contact.regularization"),
    ("contact.activation_margin", -0.01, "contact.activation_margin"),
])
def test_bad_rigid_parameters_are_refused_by_name(key, value, match):
    with pytest.raises(ConfigError, match=match):
        box_sim(**{key: value})


def test_rigid_needs_pinocchio_4_solvers(monkeypatch):
    monkeypatch.delattr(pin, "ADMMConstraintSolver")
    with pytest.raises(UnsupportedError, match="pinocchio >= 4"):
        box_sim()
    sim = box_sim(**{"contact.model": "compliant", "contact.damping": 50.0,  # still works
                     "contact.tangential_damping": 50.0})
    sim.step([])


def test_live_friction_change_and_refused_stiffness():
    sim = _incline_sim(math.radians(20), 0.5)
    for _ in range(500):
        sim.step([])
    assert np.linalg.norm(sim.state.base_linear_velocity) < 1e-3
    sim.set_contact_parameters(friction_coefficient=0.1)  # tan 20 deg = 0.36 > 0.1: slides
    for _ in range(200):
        sim.step([])
    assert np.linalg.norm(sim.state.base_linear_velocity) > 0.1
    with pytest.raises(ConfigError, match="contact.stiffness"):
        sim.set_contact_parameters(stiffness=1e5)


@pytest.mark.filterwarnings("ignore::wb_sim.simulator.InitialPenetrationWarning")  # 2 cm deep
@pytest.mark.parametrize("mass, rate", [(2.0, 1000.0), (0.5, 4000.0), (200.0, 500.0)])
def test_the_small_point_set_gap_tests_are_numpys_bit_for_bit(monkeypatch, mass, rate):
    """Up to SMALL_POINT_SETS points the step's gap tests (which points enter the problem,
    their free gap velocity with the Baumgarte push) run on Python floats: the same
    operations as the numpy lines, so a tilted box started 2 cm deep, pushed out and dropping
    back on one edge, corner after corner, has the same trajectory bit for bit either way,
    light or heavy, at 500 Hz to 4 kHz; each run covers each branch (a point outside the
    problem, a gap closing, a push by the gain and one capped by the fall speed)."""
    from wb_sim.contact import rigid
    seen = {"partial": 0, "gap": 0, "gain": 0, "capped": 0}
    original = rigid.RigidContact._free_velocity

    def spy(self, vel, ph, k, dt):
        seen["partial"] += k < self.points.n
        for p in ph.tolist():
            if p >= 0.0:
                seen["gap"] += 1
            elif self.baumgarte_gain / dt * -p < math.sqrt(2.0 * rigid.STANDARD_GRAVITY * -p):
                seen["gain"] += 1
            else:
                seen["capped"] += 1
        return original(self, vel, ph, k, dt)

    monkeypatch.setattr(rigid.RigidContact, "_free_velocity", spy)

    def run(small):
        monkeypatch.setattr(rigid, "SMALL_POINT_SETS", small)
        sim = box_sim(mass, z=-0.02, **{"initial.base_rpy": [0.3, 0.2, 0.0],
                                        "physics_rate_hz": rate})
        out = []
        for _ in range(round(0.4 * rate)):  # 0.4 s
            sim.step([])
            out.append(np.concatenate([sim.q, sim.v, sim.contact.warm_start().ravel()]))
        return np.array(out)

    python_floats = run(32)
    assert min(seen.values()) > 0, seen
    assert np.array_equal(python_floats, run(0))
