"""Self-collision (wb_sim/contact/self_collision.py, ``collision.self_collision``): the links'
collision geometry as spheres inside it, every two geometries of links neither adjacent
nor disabled by the SRDF, overlapping sphere pairs in the contact problem with the
relative Jacobian J_A(p) - J_B(p).

Checked against numbers: the spheres lie inside their shapes (capsules exact within
1 mm); the broad and narrow phases and the relative Jacobian equal their plain per-pair
references, the broad phase and the quiet test allocate nothing, and the quiet test
never hides a contact the full phases find; two arms pushed together by known torques
sink exactly the compliant law's depth under that force (rigid: none), and pass
through each other without self-collision or with their pair disabled; the humanoid's
forearm driven into its torso stops there; the contact impulses change neither the
total linear nor the angular momentum of a free-floating robot (to 1e-12); off by
default, and on with nothing touching the trajectory is the one without, bit for bit;
snapshots with self-contacts continue bit-identically; a too deep self-penetration
raises DivergenceError naming the links; Talos and the Panda with their SRDFs from
example-robot-data have no self-contact at their default postures; bad SRDFs and
parameters get typed errors naming the file, link or parameter.
"""

from __future__ import annotations

import math
import tracemalloc
from itertools import repeat

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.config import load_config
from wb_sim.controllers import PDGravityController
from wb_sim.errors import ConfigError, ModelError
from wb_sim.contact.self_collision import (SELF_DIP, cover_convex, reference_self_narrow,
                                           reference_self_near, sphere_cover, srdf_text, touching_pairs)

from helpers.robots import shipped_controller

from helpers import PKG
from helpers.extras import require_robot_data

K, D_REF = 4.0e4, 1.0e-3  # the default compliant stiffness and reference depth

# Two arms on a fixed base, turning about z, each with a sphere (r 5 cm) 0.3 m out along
# its x axis; at 0 rad the spheres are 0.2 m apart (a gap of 0.1 m). Torques +tau on a and
# -tau on b swing them into each other.
ARM = """  <link name="{name}">
    <inertial><origin xyz="0.15 0 0"/><mass value="1.0"/>
      <inertia ixx="0.001" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0.3 0 0"/><geometry><sphere radius="0.05"/></geometry></collision>
  </link>
  <joint name="j_{name}" type="revolute"><parent link="{parent}"/><child link="{name}"/>
    <origin xyz="0 {y} 0"/><axis xyz="0 0 1"/>
    <limit lower="-1.5" upper="1.5" effort="100" velocity="20"/><dynamics damping="0.5"/></joint>
"""
BASE = """<link name="base"><inertial><mass value="5"/>
    <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><geometry><box size="0.1 0.3 0.1"/></geometry></collision></link>
"""
# a third link rigidly attached to a (a fixed joint), with geometry overlapping a's
FIXED_TO_A = """  <link name="a_tip"><collision><origin xyz="0.32 0 0"/>
    <geometry><sphere radius="0.03"/></geometry></collision></link>
  <joint name="a_tip_joint" type="fixed"><parent link="a"/><child link="a_tip"/></joint>
"""


def arms_urdf(extra: str = "") -> str:
    return ('<robot name="arms">' + BASE + ARM.format(name="a", parent="base", y=-0.1)
            + ARM.format(name="b", parent="base", y=0.1) + extra + "</robot>")


def arms(**overrides) -> wb_sim.Simulator:
    params = {"robot_description": arms_urdf(), "floating_base": False,
              "collision.self_collision": True}
    params.update(overrides)
    return wb_sim.Simulator.from_params(params)


def _sphere_centres(sim, q=None) -> tuple[np.ndarray, np.ndarray]:
    """World centres of the spheres of links a and b (at q, default: now)."""
    return tuple(sim.frame_pose(link, q).act(np.array([0.3, 0.0, 0.0])) for link in ("a", "b"))


def _push(sim, tau: float, steps: int = 1500):
    """``steps`` steps of +tau on a, -tau on b; the configuration the last one started
    from (where its readings were taken) is ``sim.last_q``."""
    for _ in range(steps):
        sim.last_q = sim.q
        sim.step([tau, -tau])
    return sim


# ----------------------------------------------------------------------------- geometry


def test_each_primitive_becomes_spheres_inside_it():
    import coal
    C, r, gap = sphere_cover(coal.Sphere(0.05), "s", 12)
    assert C.tolist() == [[0.0, 0.0, 0.0]] and r.tolist() == [0.05] and gap == 0.0
    # capsule r 3 cm, 0.25 m long: spheres of its radius along its axis, every point of its
    # surface within SELF_DIP of one (spacing <= 2 sqrt(dip (2 r + dip)) = 15.6 mm)
    C, r, gap = sphere_cover(coal.Capsule(0.03, 0.25), "c", 64)
    assert np.all(r == 0.03) and np.allclose(C[:, :2], 0.0)
    np.testing.assert_allclose(C[[0, -1], 2], [-0.125, 0.125])
    spacing = np.diff(C[:, 2])
    assert len(C) == 18 and spacing.max() <= 2 * math.sqrt(SELF_DIP * (0.06 + SELF_DIP))
    z = np.linspace(-0.125, 0.125, 2001)  # the capsule's side, against the spheres
    side = np.min(np.hypot(z[:, None] - C[None, :, 2], 0.03), axis=1) - 0.03
    assert side.max() == pytest.approx(gap, rel=1e-3) and gap <= SELF_DIP
    C, r, gap = sphere_cover(coal.Capsule(0.03, 0.25), "c", 4)  # capped: a coarser chain
    assert len(C) == 4 and gap == pytest.approx(math.hypot(0.03, 0.25 / 6) - 0.03)
    # box, cylinder: every sphere inside the shape; what they miss is reported
    half = np.array([0.08, 0.13, 0.125])
    C, r, gap = sphere_cover(coal.Box(*(2 * half)), "b", 12)
    assert len(C) == 12 and np.all(np.abs(C) + r[:, None] <= half + 1e-12)
    assert r.max() == pytest.approx(0.08, abs=0.01)  # the biggest fills the thinnest side
    assert 0.0 < gap < 0.07  # the corners: at most |half| (0.2 m) minus the inscribed 8 cm
    C, r, gap = sphere_cover(coal.Cylinder(0.035, 0.18), "y", 12)
    assert np.all(np.hypot(C[:, 0], C[:, 1]) + r <= 0.035 + 1e-12)
    assert np.all(np.abs(C[:, 2]) + r <= 0.09 + 1e-12)
    assert gap < 0.035  # the rims
    # a mesh: spheres inside its convex hull (the unit ball, sampled)
    rng = np.random.default_rng(2)
    V = rng.normal(size=(400, 3))
    V /= np.linalg.norm(V, axis=1)[:, None]
    C, r, gap = cover_convex(V, 8)
    assert np.all(np.linalg.norm(C, axis=1) + r <= 1.0 + 1e-9)
    assert r.max() > 0.9 and gap < 0.1
    assert cover_convex(np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0.0]]), 8)[0].shape \
        == (0, 3)  # flat: no volume, no sphere


def test_adjacent_and_rigidly_attached_links_are_never_paired():
    sim = arms(robot_description=arms_urdf(FIXED_TO_A))
    sc = sim.self_collision
    pairs = {frozenset((sc.link_names[a], sc.link_names[b])) for a, b in zip(sc.pa, sc.pb)}
    # base-a, base-b: one joint apart; a-a_tip: rigidly attached; base-a_tip: a_tip rides on
    # a, one joint from the base. Left: the two arms (a_tip counts as a)
    assert pairs == {frozenset(("a", "b")), frozenset(("a_tip", "b"))}
    assert sc.link_names.count("base") == 1  # welded to the world, still a geometry


def test_the_srdf_disables_its_pairs_and_bad_ones_get_typed_errors(tmp_path):
    srdf = tmp_path / "arms.srdf"
    srdf.write_text(srdf_text("arms", [("a", "b")], reason="Never"))
    sim = _push(arms(**{"collision.srdf_path": str(srdf)}), 3.0, 600)
    assert len(sim.self_collision.pa) == 0 and sim.self_collision_contacts().link_a == ()
    assert sim.joint_positions[0] > 1.4  # passed through b, to the joint limit
    bad = tmp_path / "bad.srdf"
    bad.write_text(srdf_text("arms", [("a", "wing")]))
    with pytest.raises(ModelError, match=r"srdf_path.*bad.srdf.*link 'wing'.*not in the model"):
        arms(**{"collision.srdf_path": str(bad)})
    with pytest.raises(ModelError, match=r"'collision.srdf_path': SRDF file not found: "
                                         r"'.*missing.srdf'"):
        arms(**{"collision.srdf_path": str(tmp_path / "missing.srdf")})
    broken = tmp_path / "broken.srdf"
    broken.write_text("<robot><disable_collisions link1='a'")
    with pytest.raises(ConfigError, match="collision.srdf_path.*broken.srdf"):
        arms(**{"collision.srdf_path": str(broken)})
    half = tmp_path / "half.srdf"
    half.write_text("<robot><disable_collisions link1='a'/></robot>")
    with pytest.raises(ConfigError, match="without link1 and link2"):
        arms(**{"collision.srdf_path": str(half)})
    with pytest.raises(ConfigError, match="'collision.srdf_path': unknown scheme 'nope:'"):
        arms(**{"collision.srdf_path": "nope:x.srdf"})
    with pytest.raises(ConfigError, match="'collision.srdf_path': expected 'package://"):
        arms(**{"collision.srdf_path": "package:/wb_sim/urdf/humanoid.srdf"})
    # a relative path in a YAML file is the YAML file's neighbour, as urdf_path is
    (tmp_path / "arms.urdf").write_text(arms_urdf())
    yaml = tmp_path / "arms.yaml"
    yaml.write_text("wb_sim:\n  ros__parameters:\n    urdf_path: arms.urdf\n"
                    "    floating_base: false\n    collision:\n      self_collision: true\n"
                    "      srdf_path: arms.srdf\n")
    assert len(wb_sim.Simulator.from_yaml(yaml).self_collision.pa) == 0


def test_self_collision_parameters_are_declared_and_checked():
    cfg = load_config({"robot_description": arms_urdf()}).collision
    assert (cfg.self_collision, cfg.srdf_path, cfg.self_spheres) == (False, "", 12)
    assert arms(**{"collision.self_collision": False}).self_collision is None
    assert wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid")).self_collision is None
    with pytest.raises(ConfigError, match="'collision.self_spheres'"):
        arms(**{"collision.self_spheres": 0})
    with pytest.raises(ConfigError, match="'collision.self_collision': expected a bool"):
        arms(**{"collision.self_collision": "yes"})


# ----------------------------------------------------------------------------- phases


def _random_configurations(sim, count, rng):
    for _ in range(count):
        q = np.array(sim.q0)
        q[7:] += rng.uniform(-1.5, 1.5, sim.model.nq - 7)
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
        yield q


def test_broad_and_narrow_phases_equal_their_plain_references(make_humanoid):
    sim = make_humanoid(**{"collision.self_collision": True})
    sc, model = sim.self_collision, sim._model_step
    sc.capacity = 10_000  # every candidate gets its rows
    data, ref_data = model.createData(), model.createData()
    rng = np.random.default_rng(11)
    seen = contacts = 0
    for q in _random_configurations(sim, 12, rng):
        pin.computeJointJacobians(model, data, q)
        pin.forwardKinematics(model, ref_data, q)
        near = reference_self_near(sc, ref_data)
        assert sc.any_near(data) == near.any()
        np.testing.assert_array_equal(sc._d2 < 0.0, near)
        ref = reference_self_narrow(sc, model, ref_data, q)
        k = sc.narrow(data) if near.any() else 0
        assert sc.cand_ids.tolist() == sorted(ref)
        if not k:
            continue
        seen += 1
        # every candidate held, with an activation of the margin: all are contacts
        assert sc.engage(np.zeros(model.nv), sim.dt, sc.margin, sc.cand_ids) == k
        for row, i in enumerate(sc.ids):
            depth, p, B, J = ref[int(i)]
            assert sc.depth[row] == pytest.approx(depth, abs=1e-12)
            np.testing.assert_allclose(sc.position[row], p, atol=1e-12)
            np.testing.assert_allclose(sc.bases[row], B, atol=1e-12)
            np.testing.assert_allclose(sc.J_cm[:, row], J, atol=1e-10)
            contacts += 1
    assert seen > 6 and contacts > 150


def test_the_broad_phase_and_the_quiet_test_allocate_nothing():
    sim = arms()
    sc, data = sim.self_collision, sim._data_step
    pin.computeJointJacobians(sim._model_step, data, sim.q0)
    v = np.zeros(sim.model.nv)
    assert not sc.any_near(data)  # at rest the arms' spheres are 10 cm apart
    assert sc.contacts(data, v, sim.dt, 0.0) == 0  # sets the reference
    assert sc.slack == pytest.approx(0.1)
    sc.quiet_steps = 10**6  # its count is an int object before and after, of one size
    for fn in (lambda: sc.any_near(data), lambda: sc.contacts(data, v, sim.dt, 0.0)):
        tracemalloc.start()
        try:
            for _ in repeat(None, 3):
                fn()
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            for _ in repeat(None, 1000):
                fn()
            after, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert after == before
        assert peak - before < 256  # a numpy scalar or two at a time, never an array
    assert sc.quiet_steps >= 10**6 + 1003


def test_the_quiet_test_never_hides_a_contact(make_humanoid):
    """The humanoid (fixed base) holding still, then swinging its forearm into its torso
    with random torques on every joint, and again: each step the quiet test answered,
    the phases run anyway and must find no contact."""
    sim = make_humanoid(**{"collision.self_collision": True, "floating_base": False,
                           "collision.enabled": False, "initial.base_position": [0.0, 0.0, 1.0]})
    sc = sim.self_collision
    contacts = sc.contacts
    hidden, answers = [], {True: 0, False: 0}

    def checked(*args):
        before = sc.quiet_steps
        k = contacts(*args)
        quiet = sc.quiet_steps > before
        answers[quiet] += 1
        if quiet:  # the quiet test answered: the phases, run anyway, must find nothing
            sc.slack = -math.inf
            if contacts(*args):
                hidden.append(sc.k)
        return k

    sc.contacts = checked
    names = sim.joint_names
    target = np.zeros(sim.nj)
    target[names.index("l_shoulder_yaw")] = -1.5
    ctrl = PDGravityController(sim.robot, target, 200.0, 5.0, gravity=sim.config.gravity)
    elbow = names.index("l_elbow")
    rng = np.random.default_rng(5)
    touching = 0
    for i in range(2000):
        tau = ctrl(sim.q, sim.joint_positions, sim.joint_velocities)
        if (i // 250) % 2:  # the forearm into the torso, every joint shaken
            tau[elbow] = -30.0
            tau += rng.normal(0.0, 10.0, sim.nj)
        sim.step(tau)
        touching += bool(sim.self_collision_contacts().link_a)
    assert not hidden
    assert answers[True] > 300 and answers[False] > 300  # both answers were exercised
    assert touching > 300


# ----------------------------------------------------------------------------- physics


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_two_spheres_pushed_together_sink_as_the_contact_law_says(model):
    tau = 3.0
    sim = _push(arms(**{"contact.model": model}), tau)
    ca, cb = _sphere_centres(sim, sim.last_q)  # the readings are the last step's
    overlap = 0.1 - float(np.linalg.norm(ca - cb))
    c = sim.self_collision_contacts()
    assert c.link_a == ("a",) and c.link_b == ("b",) and c.status == ("stick",)
    assert c.depth[0] == pytest.approx(overlap, abs=1e-12)
    # the force on a pushes it back along the line of centres; its lever about j_a is the
    # contact point's distance along a's arm (the joints are 0.2 m apart across it)
    n = (ca - cb) / np.linalg.norm(ca - cb)
    f = c.force[0]
    np.testing.assert_allclose(f, np.dot(f, n) * n, atol=1e-9)
    lever = np.cross(c.position[0] - np.array([0.0, -0.1, 0.0]), f)[2]
    assert lever == pytest.approx(-tau, rel=1e-3)  # holds the torque (damped to rest)
    F = float(np.linalg.norm(f))
    if model == "compliant":  # one point carries F: d = (F sqrt(d_ref) / k)^(2/3)
        assert overlap == pytest.approx((F * math.sqrt(D_REF) / K) ** (2 / 3), rel=1e-3)
        assert 3.9e-4 < overlap < 4.1e-4
    else:
        assert 0.0 < overlap < 1e-5
    # without self-collision the arms swing through each other to their limits
    free = _push(arms(**{"contact.model": model, "collision.self_collision": False}), tau)
    assert free.self_collision_contacts().link_a == ()
    np.testing.assert_allclose(free.joint_positions, [1.5, -1.5], atol=0.01)


@pytest.mark.parametrize("model", ["compliant", "rigid"])
@pytest.mark.parametrize("rate", [250, 4000])
@pytest.mark.parametrize("scale", [0.05, 200.0])
def test_light_and_heavy_arms_at_other_rates_hold_as_the_law_says(scale, rate, model):
    """The two arms with their masses, inertias, damping and effort limits scaled by
    0.05 and 200 (torques too), at 250 Hz and 4 kHz, default contact parameters: the
    spheres come to rest holding the torque, sunk the law's depth under the measured
    force (compliant; 13.7 mm under 2 kN) or less than 10 um (rigid)."""
    urdf = (arms_urdf()
            .replace('<mass value="1.0"/>', f'<mass value="{scale}"/>')
            .replace('ixx="0.001" iyy="0.01" izz="0.01"',
                     f'ixx="{0.001 * scale}" iyy="{0.01 * scale}" izz="{0.01 * scale}"')
            .replace('damping="0.5"', f'damping="{0.5 * scale}"')
            .replace('effort="100"', f'effort="{100 * scale}"'))
    assert urdf.count(f'<mass value="{scale}"/>') == 2
    sim = _push(wb_sim.Simulator.from_params({
        "robot_description": urdf, "floating_base": False, "collision.self_collision": True,
        "contact.model": model, "physics_rate_hz": float(rate)}), 3.0 * scale, round(1.5 * rate))
    ca, cb = _sphere_centres(sim, sim.last_q)
    overlap = 0.1 - float(np.linalg.norm(ca - cb))
    c = sim.self_collision_contacts()
    assert c.link_a == ("a",) and np.abs(sim.v).max() < 1e-4
    lever = np.cross(c.position[0] - np.array([0.0, -0.1, 0.0]), c.force[0])[2]
    assert lever == pytest.approx(-3.0 * scale, rel=1e-3)
    F = float(np.linalg.norm(c.force[0]))
    if model == "compliant":
        assert overlap == pytest.approx((F * math.sqrt(D_REF) / K) ** (2 / 3), rel=1e-3)
    else:
        assert abs(overlap) < 1e-5


def test_the_humanoids_forearm_driven_into_its_torso_stops_there(make_humanoid):
    """Shoulder turned in (yaw -1.5 rad), the elbow driven by -30 N*m: the forearm swings
    across the body into the pelvis's corner (the box's true corner: the spheres inscribed
    in it, before, rounded it off by 39-60 mm and let the forearm on to the torso, elbow
    -1.54 rad). Self-collision stops it there, no contact deeper than the compliant sink
    of the whole contact force on one point; without it the elbow reaches its limit (-2.5
    rad) through the body."""
    ends = {}
    for on in (False, True):
        sim = make_humanoid(**{"floating_base": False, "initial.base_position": [0.0, 0.0, 1.0],
                               "collision.enabled": False, "collision.self_collision": on})
        names = sim.joint_names
        target = np.zeros(sim.nj)
        target[names.index("l_shoulder_yaw")] = -1.5
        ctrl = PDGravityController(sim.robot, target, 200.0, 5.0, gravity=sim.config.gravity)
        elbow = names.index("l_elbow")
        for _ in range(1500):
            tau = ctrl(sim.q, sim.joint_positions, sim.joint_velocities)
            tau[elbow] = -30.0
            sim.step(tau)
        ends[on] = (sim.joint_positions[elbow], sim.self_collision_contacts())
    assert ends[False][0] == pytest.approx(-2.5, abs=0.01)
    angle, c = ends[True]
    assert -0.8 < angle < -0.6  # measured -0.689
    assert set(zip(c.link_a, c.link_b)) == {("pelvis", "l_forearm")}
    F = float(np.linalg.norm(c.force.sum(axis=0)))
    assert 150.0 < F < 250.0  # 30 N*m over the forearm's lever (0.12-0.2 m)
    assert 0.0 < c.depth.max() <= (F * math.sqrt(D_REF) / K) ** (2 / 3)


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_self_contact_forces_change_no_momentum(model):
    """A free-floating pair of arms (no gravity, no ground) swung into each other by its
    joint torques: at every step the contact impulses change the total linear and
    angular momentum (pinocchio's centroidal momentum, at the step's configuration) by
    nothing but rounding."""
    sim = arms(**{"floating_base": True, "gravity": [0.0, 0.0, 0.0], "contact.model": model,
                  "initial.base_position": [0.0, 0.0, 1.0]})
    contact, ms = sim.contact, sim._model_step
    ds = ms.createData()
    solve = contact.solve
    changes, kicks = [], []

    def recording(Minv_upper, v_free, u, dt):
        out = solve(Minv_upper, v_free, u, dt)
        if contact.self_collision.k:
            h_free = pin.computeCentroidalMomentum(ms, ds, sim.q, v_free).vector.copy()
            h_next = pin.computeCentroidalMomentum(ms, ds, sim.q, out[0]).vector.copy()
            changes.append(np.abs(h_next - h_free).max())
            M = pin.crba(ms, ds, sim.q)
            M = np.triu(M) + np.triu(M, 1).T
            kicks.append(np.abs(M @ (out[0] - v_free)).max())  # generalized impulse, N*s
        return out

    contact.solve = recording
    for _ in range(1500):
        sim.step([3.0, -3.0])
    assert len(changes) > 1000  # in contact most of the run
    assert max(kicks) > 5e-3  # the impulses are real: 10 N for 1 ms, N*s
    assert max(changes) < 1e-12 * max(1.0, max(kicks))
    c = sim.self_collision_contacts()
    assert float(np.linalg.norm(c.force)) == pytest.approx(3.0 / (0.3 * math.cos(
        sim.joint_positions[0])), rel=0.02)


# ----------------------------------------------------------------------------- the simulator


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_off_by_default_and_on_with_nothing_touching_the_trajectory_is_the_same(make_humanoid,
                                                                               model):
    runs = []
    for on in (False, True):
        sim = make_humanoid(**{"collision.self_collision": on, "contact.model": model})
        ctrl = shipped_controller(sim)
        for _ in range(500):
            sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
        runs.append((sim.q.copy(), sim.v.copy(), sim.contact_wrench_array()))
        if on:
            assert sim.self_collision_contacts().link_a == ()
            stats = sim.contact.statistics()
            # standing still: after the first steps the quiet test settles every step
            assert stats["self_collision_checks"] < 20
            assert stats["collision_solves"] == 0
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_snapshot_with_self_contacts_continues_bit_identically(model):
    sim = arms(**{"contact.model": model, "contact.friction_coefficient": 0.3})
    rng = np.random.default_rng(4)
    _push(sim, 3.0, 400)
    assert len(sim.self_collision_contacts().link_a) == 1
    snap = sim.get_state()
    taus = np.array([3.0, -3.0]) + rng.normal(0.0, 1.5, (200, 2))  # pressing and sliding

    def run():
        out = []
        for tau in taus:
            sim.step(tau)
            c = sim.self_collision_contacts()
            out.append(np.concatenate([sim.q, sim.v, c.force.ravel(), c.depth]))
        return out

    first = run()
    assert any(s == "slip" for s in sim.self_collision_contacts().status) or model == "rigid"
    sim.set_state(snap)
    second = run()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(wb_sim.CommandError, match="self-collision"):
        arms(**{"collision.self_collision": False}).set_state(snap)


def test_a_too_deep_self_penetration_names_the_links():
    sim = arms(**{"contact.max_penetration": 1e-3})
    with pytest.raises(wb_sim.DivergenceError, match="links 'a' and 'b' \\(self-collision\\)"):
        _push(sim, 60.0, 1500)  # 200 N on one point sinks 2.6 mm


# ----------------------------------------------------------------------------- real robots


def test_talos_with_its_srdf_stands_without_self_contacts():
    require_robot_data("talos")
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("talos"), overrides={
        "collision.self_collision": True,
        "collision.srdf_path": "example-robot-data:talos_data/srdf/talos.srdf"})
    sc = sim.self_collision
    assert len(sc.geometries) > 40 and len(sc.pa) > 800  # 459 pairs disabled of ~1300
    assert touching_pairs(sc, sim._model_step, sim.q0) == []
    ctrl = shipped_controller(sim, "talos")
    for _ in range(300):
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
        assert sim.self_collision_contacts().link_a == ()
    assert sim.contact.statistics()["self_contacts_dropped"] == 0
    # without the SRDF the half-sitting posture has links in touch (hips, shoulders)
    bare = wb_sim.Simulator.from_yaml(wb_sim.config_path("talos"), overrides={
        "collision.self_collision": True})
    assert len(touching_pairs(bare.self_collision, bare._model_step, bare.q0)) > 5


def test_the_panda_with_its_srdf_hangs_without_self_contacts():
    require_robot_data("panda")
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("panda"), overrides={
        "collision.self_collision": True,
        "collision.srdf_path": "example-robot-data:panda_description/srdf/panda.srdf"})
    assert touching_pairs(sim.self_collision, sim._model_step, sim.q0) == []
    ctrl = shipped_controller(sim, "panda")
    for _ in range(300):
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
        assert sim.self_collision_contacts().link_a == ()


def test_the_humanoids_srdf_is_what_the_tool_writes(tmp_path):
    from wb_sim.tools.srdf import main
    out = tmp_path / "humanoid.srdf"
    assert main(["--robot", "humanoid", "-o", str(out)]) == 0
    assert out.read_text() == (PKG / "urdf" / "humanoid.srdf").read_text()
    assert "l_hip_yaw_link" in out.read_text()
