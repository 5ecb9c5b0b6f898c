"""Exact contact geometry (wb_sim/contact/manifold.py through coal, the primitives' slots in
ground_collision.py): the links' URDF shapes meet the ground and the terrain at their true
surfaces, with several points where a face rests on a face.

Checked against numbers: the manifold of every kind of shape against a terrain box and
the ground holds coal's deepest point and distance (GJK/EPA, its primitive algorithms),
its points lie on both surfaces and their gaps are measured along the normal; the slots on
the plane hold coal's deepest point and the manifold's points; the terrain pairs' contacts
equal their plain per-pair reference (depth, point, basis, Jacobian); a URDF cylinder rolls
down a 10 degree slope at 2/3 g sin(theta) and a sphere at 5/7 g sin(theta) with both
contact models; a cube with its centre of mass 2 cm inside a platform's edge stays on it
(2 cm beyond it, it falls), and a box foot half over a stair's edge stands, with both
models; a box on its face rests on its 4 corners; snapshots with terrain contacts in the
state continue bit-identically.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.contact.ground_collision import reference_terrain
from wb_sim.contact.manifold import (box_shape, contact_manifold, convex_shape, hull_shape,
                                     reference_deepest)

from helpers.extras import require_robot_data

G0 = 9.81
BODY = ('<robot name="body"><link name="body"><inertial><mass value="{m}"/>'
        '<inertia ixx="{ixx}" iyy="{iyy}" izz="{izz}" ixy="0" ixz="0" iyz="0"/></inertial>'
        '<collision>{origin}<geometry>{geometry}</geometry></collision></link></robot>')


def _body(geometry: str, m: float, inertia, origin: str = "") -> str:
    ixx, iyy, izz = inertia
    return BODY.format(m=m, ixx=ixx, iyy=iyy, izz=izz, geometry=geometry, origin=origin)


# ----------------------------------------------------------------------------- shapes


def _shapes():
    import coal
    rng = np.random.default_rng(5)
    blob = rng.normal(size=(300, 3)) * [0.06, 0.04, 0.03]
    return {"box": box_shape([0.08, 0.05, 0.03]),
            "cylinder": convex_shape(coal.Cylinder(0.04, 0.15)),
            "capsule": convex_shape(coal.Capsule(0.03, 0.12)),
            "sphere": convex_shape(coal.Sphere(0.05)),
            "hull": hull_shape(blob)}


def _surface_distance(shape, R, t, p: np.ndarray) -> float:
    """Signed distance of the world point p to the shape's surface (exact)."""
    x = R.T @ (p - t)
    if shape.kind == "sphere":
        return float(np.linalg.norm(x)) - shape.size[0]
    if shape.kind == "capsule":
        r, hl = shape.size
        return float(np.linalg.norm(x - [0.0, 0.0, np.clip(x[2], -hl, hl)])) - r
    if shape.kind == "cylinder":
        r, hl = shape.size
        d = np.array([math.hypot(x[0], x[1]) - r, abs(x[2]) - hl])
        return float(min(max(d[0], d[1]), 0.0) + np.linalg.norm(np.maximum(d, 0.0)))
    if shape.kind == "box":
        q = np.abs(x) - shape.size
        return float(min(q.max(), 0.0) + np.linalg.norm(np.maximum(q, 0.0)))
    from scipy.spatial import ConvexHull
    eq = ConvexHull(shape.vertices).equations
    return float((eq[:, :3] @ x + eq[:, 3]).max())  # on the surface and inside: exact


def _random_rotation(rng) -> np.ndarray:
    q = rng.normal(size=4)
    return pin.Quaternion(*(q / np.linalg.norm(q))).matrix()


@pytest.mark.parametrize("kind", ["box", "cylinder", "capsule", "sphere", "hull"])
def test_the_manifold_against_a_terrain_box_holds_coals_deepest_point(kind):
    """Random placements of each kind of shape about a terrain box's top, edges and
    corners (some tilted a little, some resting flat): coal's distance is the manifold's
    deepest gap; each point lies on both surfaces; its gap is measured along the normal."""
    shape = _shapes()[kind]
    terrain = box_shape([0.3, 0.2, 0.1])
    Rb, tb = np.eye(3), np.zeros(3)
    rng = np.random.default_rng(11)
    margin, seen, points = 0.02, 0, 0
    for trial in range(300):
        R = _random_rotation(rng)
        if trial % 3 == 0:  # about flat: a face (cap, side) on the top
            axis = rng.normal(size=3)
            R = pin.AngleAxis(rng.uniform(0, 0.05), axis / np.linalg.norm(axis)).matrix() @ \
                pin.AngleAxis(rng.choice([0.0, math.pi / 2]), np.array([1.0, 0, 0])).matrix()
        t = np.array([rng.uniform(-0.35, 0.35), rng.uniform(-0.25, 0.25), 0.0])
        ref = None
        for height in np.linspace(0.0, 0.2, 41):  # lowered until it touches the top
            t[2] = 0.1 + 0.2 - height
            ref = reference_deepest(shape, R, t, terrain, Rb, tb, 0.0)
            if ref is not None:
                t[2] += rng.uniform(-0.004, 0.01)
                break
        ref = reference_deepest(shape, R, t, terrain, Rb, tb, margin)
        man = contact_manifold(shape, R, t, terrain, Rb, tb, margin)
        if ref is None:
            assert man is None
            continue
        seen += 1
        n, distance = ref[0], ref[1]
        assert man is not None
        assert float(man.gap.min()) == pytest.approx(distance, abs=2e-6)
        np.testing.assert_allclose(man.normal, n, atol=1e-12)
        np.testing.assert_allclose(man.gap, (man.point_a - man.point_b) @ man.normal,
                                   atol=1e-12)
        for pa, pb in zip(man.point_a, man.point_b):
            assert abs(_surface_distance(shape, R, t, pa)) < 2e-6
            assert abs(_surface_distance(terrain, Rb, tb, pb)) < 2e-6
            points += 1
        assert len(set(man.codes.tolist())) == len(man.codes)  # each point its identity
    assert seen > 150 and points >= seen


@pytest.mark.parametrize("kind", ["box", "cylinder", "capsule", "sphere", "hull"])
def test_the_manifold_on_the_ground_holds_coals_deepest_point(kind):
    """Against a tilted ground plane (coal's Halfspace): the deepest gap is coal's
    distance, every point is the shape's and its gap is its height over the plane."""
    import coal
    shape = _shapes()[kind]
    n = np.array([0.2, -0.1, 1.0]) / np.linalg.norm([0.2, -0.1, 1.0])
    o = np.array([0.0, 0.0, 0.1])
    plane = coal.Halfspace(n, float(n @ o))
    rng = np.random.default_rng(3)
    for _ in range(200):
        R = _random_rotation(rng)
        t = o + n * rng.uniform(-0.02, 0.1) + rng.uniform(-0.3, 0.3, 3) * [1, 1, 0]
        req, res = coal.CollisionRequest(), coal.CollisionResult()
        req.security_margin = 0.02
        coal.collide(shape.geometry, coal.Transform3s(R, t), plane, coal.Transform3s(), req, res)
        man = contact_manifold(shape, R, t, None, None, None, 0.02, plane=(o, n))
        if not res.numContacts():
            assert man is None or man.gap.min() > 0.02 - 1e-9
            continue
        assert float(man.gap.min()) == pytest.approx(res.getContact(0).penetration_depth,
                                                     abs=1e-9)
        np.testing.assert_allclose(man.gap, (man.point_a - o) @ n, atol=1e-12)
        for pa in man.point_a:
            assert abs(_surface_distance(shape, R, t, pa)) < 1e-9


def test_a_face_on_a_face_is_a_manifold_with_its_own_depths():
    """A 0.1 m cube resting on a platform 2 cm inside its edge: 4 points (2 corners, 2
    where the platform's edge crosses the cube's face); tilted over the edge by 0.05
    rad the platform's edge carries it (the normal is the cube's face's); tilted a
    little sideways, each corner has its own depth."""
    cube, platform = box_shape([0.05] * 3), box_shape([0.5, 0.5, 0.1])
    Rp, tp = np.eye(3), np.array([-0.5, 0.0, 0.0])  # top at z = 0.1, edge at x = 0
    man = contact_manifold(cube, np.eye(3), np.array([-0.02, 0.0, 0.149]), platform, Rp, tp,
                           0.02)
    np.testing.assert_allclose(np.sort(man.point_a[:, 0]), [-0.07, -0.07, 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(man.gap, -0.001, atol=1e-9)
    tilt = pin.AngleAxis(0.05, np.array([0.0, 1.0, 0.0])).matrix()
    man = contact_manifold(cube, tilt, np.array([-0.02, 0.0, 0.149]), platform, Rp, tp, 0.02)
    np.testing.assert_allclose(man.normal, [math.sin(0.05), 0.0, math.cos(0.05)], atol=1e-6)
    edge = np.abs(man.point_a[:, 0]) < 1e-3
    assert edge.sum() == 2 and man.gap[edge].max() < 0.0 < man.gap[~edge].min()
    side = pin.AngleAxis(0.01, np.array([1.0, 0.0, 0.0])).matrix()
    man = contact_manifold(cube, side, np.array([-0.3, 0.0, 0.149]), platform, Rp, tp, 0.02)
    assert len(man.gap) == 4 and np.ptp(man.gap) > 0.9e-3  # 0.1 m x sin(0.01) apart
    np.testing.assert_allclose(man.gap, man.point_a[:, 2] - 0.1, atol=1e-9)


def test_the_slots_on_the_ground_hold_the_manifolds_points(make_humanoid):
    """The humanoid's primitives at random poses over the plane: every point of a
    shape's manifold on the ground is one of its slots (same code, position, depth),
    and its deepest slot is coal's deepest point."""
    import coal
    from wb_sim.contact.ground_collision import reference_narrow
    sim = make_humanoid(**{"collision.enabled": True})
    coll, model = sim.collision, sim._model_step
    data = model.createData()
    n = np.array([0.0, 0.0, 1.0])
    plane = coal.Halfspace(n, 0.0)
    rng = np.random.default_rng(2)
    first = np.concatenate([[0], np.cumsum([len(g.points) for g in coll.geometries])])
    checked = 0
    for _ in range(40):
        q = np.array(sim.q0)
        q[7:] += rng.uniform(-1.0, 1.0, model.nq - 7)
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
        q[2] = rng.uniform(0.0, 0.3)
        ref = reference_narrow(coll, model, data, q)
        for gi, g in enumerate(coll.geometries):
            W = data.oMi[g.joint] * g.placement
            man = contact_manifold(g.convex, W.rotation, W.translation, None, None, None,
                                   coll.margin, plane=(np.zeros(3), n))
            if man is None:
                continue
            req, res = coal.CollisionRequest(), coal.CollisionResult()
            req.security_margin = coll.margin
            coal.collide(g.shape, coal.Transform3s(W.rotation, W.translation), plane,
                         coal.Transform3s(), req, res)
            slots = {i - first[gi]: ref[i] for i in range(first[gi], first[gi + 1]) if i in ref}
            deepest = max(d for d, *_ in slots.values())
            assert deepest == pytest.approx(-res.getContact(0).penetration_depth, abs=1e-9)
            for pa, gap in zip(man.point_a, man.gap):
                match = [s for s, (d, p, *_) in slots.items()
                         if np.allclose(p, pa, atol=1e-9) and abs(d + gap) < 1e-9]
                assert match, (g.link, pa, gap)
                checked += 1
    assert checked > 100


def test_the_terrain_pairs_equal_their_plain_reference(make_humanoid):
    """The humanoid about a terrain box and a step: the contacts of the pairs (every
    geometry against the boxes) equal their plain reference: identities, depths, points,
    bases and Jacobian rows."""
    sim = make_humanoid(**{"collision.enabled": True,
                           "terrain.boxes": [0.3, 0.0, 0.05, 0.4, 0.6, 0.1, 0.3],
                           "terrain.stairs": [-0.6, -0.3, 0.2, 0.25, 0.12, 0.8, 2, 0.0]})
    tc, model = sim.contact.terrain_contacts, sim._model_step
    data, ref_data = model.createData(), model.createData()
    rng = np.random.default_rng(9)
    seen = contacts = 0
    for _ in range(80):
        q = np.array(sim.q0)
        q[7:] += rng.uniform(-1.0, 1.0, model.nq - 7)
        q[:3] = [rng.uniform(-0.6, 0.6), rng.uniform(-0.5, 0.3), rng.uniform(0.0, 0.7)]
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
        pin.computeJointJacobians(model, data, q)
        k = tc.contacts(data, None)
        ref = reference_terrain(tc, model, ref_data, q, None)
        assert k == len(ref) == len(tc.ids)
        if not k:
            continue
        seen += 1
        assert sorted(ref) == tc.ids.tolist()
        for row, i in enumerate(tc.ids):
            depth, p, B, J = ref[int(i)]
            assert tc.depth[row] == pytest.approx(depth, abs=1e-12)
            np.testing.assert_allclose(tc.position[row], p, atol=1e-12)
            np.testing.assert_allclose(tc.bases[row], B, atol=1e-12)
            np.testing.assert_allclose(tc.J_cm[:, row], J, atol=1e-10)
            contacts += 1
    assert seen > 10 and contacts > 50


def test_the_meshes_on_the_ground_all_at_once_equal_their_plain_reference():
    """iCub's collision meshes (their hulls) at random poses over the ground: the contacts
    TerrainContacts computes for all near meshes at once equal each mesh's manifold on the
    plane, one by one (manifold.hull_on_plane): identities, depths, points, bases, Jacobian
    rows; the deepest is coal's (the hull's lowest vertex)."""
    require_robot_data("icub")
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("icub"),
                                     overrides={"collision.enabled": True})
    tc, coll, model = sim.contact.terrain_contacts, sim.collision, sim._model_step
    data, ref_data = model.createData(), model.createData()
    rng = np.random.default_rng(13)
    seen = contacts = 0
    for _ in range(40):
        q = np.array(sim.q0)
        q[7:] += rng.uniform(-0.8, 0.8, model.nq - 7)
        q[2] = rng.uniform(0.05, 0.4)
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
        pin.computeJointJacobians(model, data, q)
        near = coll.near.copy() if coll.any_near(data) else None
        k = tc.contacts(data, near)
        ref = reference_terrain(tc, model, ref_data, q, near)
        assert sorted(ref) == tc.ids.tolist()
        if not k:
            continue
        seen += 1
        for row, i in enumerate(tc.ids):
            depth, p, B, J = ref[int(i)]
            assert tc.depth[row] == pytest.approx(depth, abs=1e-12)
            np.testing.assert_allclose(tc.position[row], p, atol=1e-12)
            np.testing.assert_allclose(tc.bases[row], B, atol=1e-12)
            np.testing.assert_allclose(tc.J_cm[:, row], J, atol=1e-10)
            contacts += 1
    assert seen > 10 and contacts > 50


# ----------------------------------------------------------------------------- physics


def _rolling(shape: str, model: str, theta: float = math.radians(10.0)) -> tuple[float, float]:
    """(measured, expected) acceleration down a slope of ``theta`` (the ground's normal
    tilted) of a 1 kg cylinder (r 5 cm, 20 cm long, axis across the slope) or sphere (r 5
    cm) with nothing but its URDF collision geometry, rolling from rest for 1 s."""
    m, r, length = 1.0, 0.05, 0.2
    n = np.array([math.sin(theta), 0.0, math.cos(theta)])
    if shape == "cylinder":
        ia, it = m * r * r / 2, m * (3 * r * r + length * length) / 12
        urdf = _body(f'<cylinder radius="{r}" length="{length}"/>', m, (it, it, ia))
        rpy, expect = [math.pi / 2, 0.0, 0.0], 2 / 3 * G0 * math.sin(theta)
    else:
        i = 2 / 5 * m * r * r
        urdf = _body(f'<sphere radius="{r}"/>', m, (i, i, i))
        rpy, expect = [0.0, 0.0, 0.0], 5 / 7 * G0 * math.sin(theta)
    sim = wb_sim.Simulator.from_params({
        "robot_description": urdf, "contact_surfaces": [], "collision.enabled": True,
        "contact.model": model, "ground.normal": n.tolist(),
        "initial.base_position": ((r + 1e-4) * n).tolist(), "initial.base_rpy": rpy})
    down = np.array([math.cos(theta), 0.0, -math.sin(theta)])
    t, v = [], []
    for _ in range(1000):
        sim.step(np.zeros(0))
        t.append(sim.t)
        v.append(float(sim.state.base_linear_velocity @ down))
    t, v = np.array(t), np.array(v)
    later = t > 0.1  # after the landing's transient
    return float(np.polyfit(t[later], v[later], 1)[0]), expect


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_cylinder_rolls_down_a_slope_on_its_true_circle(model):
    """2/3 g sin(theta) within 2 % (measured: 0.000 %, both models; with its rims'
    16-point polygons, before, 48 % and 55 % slower)."""
    a, expect = _rolling("cylinder", model)
    assert a == pytest.approx(expect, rel=0.02)


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_sphere_rolls_down_a_slope(model):
    """5/7 g sin(theta) within 1 %."""
    a, expect = _rolling("sphere", model)
    assert a == pytest.approx(expect, rel=0.01)


def _on_an_edge(model: str, what: str, inside: float, seconds: float = 2.0) -> float:
    """The largest tilt (deg) over ``seconds`` of a body resting across a terrain edge at
    x = 0, its centre of mass ``inside`` m on the terrain's side: a 0.1 m cube on a
    platform (a terrain box), or a 0.22 x 0.12 x 0.05 m box foot (2 kg) whose middle is on
    a stair's edge (terrain.stairs), its centre of mass 2 cm behind its middle."""
    if what == "cube":
        urdf = _body('<box size="0.1 0.1 0.1"/>', 1.0, (0.02 / 12,) * 3)
        params = {"terrain.boxes": [-0.5, 0.0, 0.1, 1.0, 1.0, 0.2, 0.0],
                  "initial.base_position": [-inside, 0.0, 0.2501]}
    else:
        m = 2.0
        urdf = _body('<box size="0.22 0.12 0.05"/>', m,
                     (m * (0.12**2 + 0.05**2) / 12, m * (0.22**2 + 0.05**2) / 12,
                      m * (0.22**2 + 0.12**2) / 12), origin=f'<origin xyz="{inside} 0 0"/>')
        params = {"terrain.stairs": [-0.6, 0.0, 0.0, 0.3, 0.15, 1.0, 2, 0.0],
                  "initial.base_position": [-inside, 0.0, 0.3251]}
    sim = wb_sim.Simulator.from_params({"robot_description": urdf, "contact_surfaces": [],
                                        "collision.enabled": True, "contact.model": model,
                                        **params})
    tilt = 0.0
    for _ in range(round(seconds / sim.dt)):
        sim.step(np.zeros(0))
        up = pin.Quaternion(sim.q[3:7]).matrix()[2, 2]
        tilt = max(tilt, math.degrees(math.acos(min(1.0, up))))
    return tilt


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_cube_with_its_centre_2_cm_inside_a_platforms_edge_stays_on_it(model):
    """The platform's edge pushes on the cube's face (measured: 0.09 deg compliant, 0.00
    rigid; with points on the cube only, before, it fell off: 124 deg). 2 cm beyond the
    edge it falls."""
    assert _on_an_edge(model, "cube", 0.02) < 1.0
    assert _on_an_edge(model, "cube", -0.02, seconds=1.0) > 30.0


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_box_foot_half_over_a_stairs_edge_stands(model):
    """Measured: 0.15 deg compliant, 0.00 rigid (before: 96 deg, off the step)."""
    assert _on_an_edge(model, "foot", 0.02) < 1.0


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_box_rests_on_its_four_corners_and_a_cylinder_on_its_cap(model):
    """On the ground: the cube on a face carries its weight on its 4 bottom corners (a
    quarter each), a standing cylinder on its cap's rim points; neither tilts."""
    for geometry, count in (('<box size="0.1 0.1 0.1"/>', 4),
                            ('<cylinder radius="0.05" length="0.1"/>', 4)):
        sim = wb_sim.Simulator.from_params({
            "robot_description": _body(geometry, 1.0, (0.02 / 12,) * 3),
            "contact_surfaces": [], "collision.enabled": True, "contact.model": model,
            "initial.base_position": [0.0, 0.0, 0.0501]})
        for _ in range(1500):
            sim.step(np.zeros(0))
        pts = sim.collision_points_state()
        loaded = pts.force[:, 2] > 1e-3
        assert loaded.sum() == count
        np.testing.assert_allclose(pts.force[loaded, 2], G0 / count, rtol=0.02)
        assert pin.Quaternion(sim.q[3:7]).matrix()[2, 2] > 1.0 - 1e-6


def test_a_snapshot_with_terrain_contacts_continues_bit_identically():
    urdf = _body('<box size="0.1 0.1 0.1"/>', 1.0, (0.02 / 12,) * 3)
    sim = wb_sim.Simulator.from_params({
        "robot_description": urdf, "contact_surfaces": [], "collision.enabled": True,
        "contact.friction_coefficient": 0.3,
        "terrain.boxes": [-0.5, 0.0, 0.1, 1.0, 1.0, 0.2, 0.0],
        "initial.base_position": [-0.02, 0.0, 0.2501], "initial.base_rpy": [0.0, 0.1, 0.0]})
    rng = np.random.default_rng(4)
    for _ in range(300):
        sim.apply_external_wrench("body", force=rng.normal(0, 2, 3), duration_s=0.001)
        sim.step(np.zeros(0))
    assert len(sim.collision_points_state().surface) >= 2
    snap = sim.get_state()
    pushes = rng.normal(0, 2, (100, 3))

    def run():
        out = []
        for f in pushes:
            sim.apply_external_wrench("body", force=f, duration_s=0.001)
            sim.step(np.zeros(0))
            out.append(np.concatenate([sim.q, sim.v, sim.collision_wrench_array()]))
        return np.array(out)

    first = run()
    sim.set_state(snap)
    np.testing.assert_array_equal(run(), first)


# ----------------------------------------------------------------------------- self-collision

# Two arms on a fixed base turning about z, each with a 0.1 m cube 0.3 m out along its x
# axis: a's turned so that a corner points at b (its diagonal along y), b's a face towards
# a; at 0 rad a's corner is 63 mm from b's face. Torques +tau on a and -tau on b press
# them together.
CUBE_ARM = """  <link name="{name}">
    <inertial><origin xyz="0.15 0 0"/><mass value="1.0"/>
      <inertia ixx="0.001" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0.3 0 0" rpy="{rpy}"/><geometry><box size="0.1 0.1 0.1"/>
    </geometry></collision>
  </link>
  <joint name="j_{name}" type="revolute"><parent link="base"/><child link="{name}"/>
    <origin xyz="0 {y} 0"/><axis xyz="0 0 1"/>
    <limit lower="-1.5" upper="1.5" effort="100" velocity="20"/><dynamics damping="0.5"/></joint>
"""


#: turns the cube's diagonal (1, 1, 1) onto y
CORNER_RPY = "-0.38808702 0.50070414 0.71834696"


def _true_overlap(sim) -> float:
    """m: how deep the two cubes overlap at the current configuration (coal's distance,
    negated; < 0: apart)."""
    import coal
    shapes = []
    for link in ("a", "b"):
        M = sim.frame_pose(link) * sim.self_collision.geometries[
            sim.self_collision.link_names.index(link)].placement
        shapes.append((coal.Box(0.1, 0.1, 0.1), coal.Transform3s(M.rotation, M.translation)))
    req, res = coal.CollisionRequest(), coal.CollisionResult()
    req.security_margin = 1.0
    coal.collide(shapes[0][0], shapes[0][1], shapes[1][0], shapes[1][1], req, res)
    return -res.getContact(0).penetration_depth


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_two_boxes_pressed_corner_to_face_overlap_at_most_1_mm(model):
    """Self-collision between the cubes' true shapes (through coal): pressed by 1 N*m, a's
    corner on b's face overlaps the law's sink and no more (measured 0.19 mm compliant, 0
    rigid), never more than 1 mm through the impact; the contact's depth is the true
    overlap. (The spheres inscribed in the cubes, before, let the corner in 18.8 mm.)"""
    urdf = ('<robot name="arms"><link name="base"><inertial><mass value="5"/>'
            '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>'
            + CUBE_ARM.format(name="a", y=-0.1, rpy=CORNER_RPY)
            + CUBE_ARM.format(name="b", y=0.1, rpy="0 0 0") + "</robot>")
    sim = wb_sim.Simulator.from_params({"robot_description": urdf, "floating_base": False,
                                        "collision.self_collision": True, "contact.model": model})
    assert sim.self_collision.exact_pair.all()
    worst = -1.0
    for _ in range(1500):
        sim.step([1.0, -1.0])
        worst = max(worst, _true_overlap(sim))
    c = sim.self_collision_contacts()
    assert set(zip(c.link_a, c.link_b)) == {("a", "b")} and len(c.depth) == 1  # the corner
    overlap = _true_overlap(sim)
    assert c.depth[0] == pytest.approx(overlap, abs=1e-6)  # the reading: at the step's start
    assert worst <= 1e-3 and overlap <= 1e-3
    if model == "compliant":
        F = float(np.linalg.norm(c.force.sum(axis=0)))
        assert overlap == pytest.approx((F * math.sqrt(1e-3) / 4e4) ** (2 / 3), rel=0.05)
    else:
        assert overlap < 1e-5
    np.testing.assert_allclose(sim.joint_velocities, 0.0, atol=1e-3)  # at rest, held
