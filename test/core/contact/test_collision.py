"""Whole-body collision (wb_sim/contact/ground_collision.py, whole_body.py): the links' URDF collision geometry as
contact points with a radius, a broad phase on the joint placements, and the feet's
contact model solving the feet and the near links together.

Checked against numbers: each primitive's points lie on its surface; the broad and
narrow phases equal their plain per-geometry / per-point references (and the
broad phase allocates nothing on the plane); the merged solve equals the compliant
model's plain reference; with nothing near the ground the trajectory is the one
without collision, bit for bit; the humanoid and iCub pushed over come to rest
lying on the ground, no collision point deeper than the sink of the whole weight
on one point, the ground carrying the weight (the humanoid at 250 Hz, 1 kHz and
4 kHz, with both contact models); a 50 g and a 200 kg body with nothing but a
collision geometry land and rest where the contact law puts them, at 250 Hz and
4 kHz, with default parameters; snapshots continue bit-identically
with collision contacts in the state; bad link names get typed errors naming them.
"""

from __future__ import annotations

import functools
import math
import tracemalloc
from itertools import repeat

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.contact.geometry import contact_slots, farthest_points
from wb_sim.contact.ground_collision import reference_narrow, reference_near
from wb_sim.contact.manifold import CAP_POINTS, contact_manifold, hull_shape, support_feature
from wb_sim.contact.compliant import reference_solve
from wb_sim.errors import ConfigError, ModelError

from helpers.contact_reference import static_sink
from helpers.extras import require_robot_data

G0 = 9.81
#: how much deeper the true shapes may be than their contact points, m: nothing (the slots
#: and a hull's manifold hold each shape's lowest point: a cylinder's rim, not a polygon's
#: vertex; a mesh's lowest vertex, not a sample's), but rounding
SHAPE_ERROR = 1e-9
#: what the rigid model's points may sink (its solver stops at a velocity tolerance), m
RIGID_SINK = 1e-4


def _lying(make_humanoid, **overrides):
    """The humanoid on its back 2 cm above the ground (pelvis half-thickness 7 cm)."""
    return make_humanoid(**{"collision.enabled": True, "initial.base_position": [0, 0, 0.09],
                            "initial.base_rpy": [0.0, -math.pi / 2, 0.0], **overrides})


# ----------------------------------------------------------------------------- geometry


def test_each_primitive_becomes_slots_on_its_surface():
    """A primitive's slots: the points where a plane of any normal first touches it (a
    sphere's centre with its radius, a box's corners; a capsule's ends and a cylinder's
    rim points, placed from the normal every step); a mesh has none (its convex hull
    meets the ground through the manifold)."""
    import coal
    s = contact_slots(coal.Sphere(0.05), "s")
    assert s.centre.tolist() == [[0.0, 0.0, 0.0]] and s.radius.tolist() == [0.05]
    s = contact_slots(coal.Capsule(0.03, 0.25), "c")  # radius, length
    np.testing.assert_allclose(s.centre, [[0, 0, -0.125], [0, 0, 0.125]])
    assert s.cap.all() and s.rim.tolist() == [0.03, 0.03] and not s.radius.any()
    np.testing.assert_allclose(s.axis, [[0, 0, -1], [0, 0, 1]])  # out of each end
    s = contact_slots(coal.Cylinder(0.05, 0.2), "y")
    assert len(s.centre) == 2 * CAP_POINTS and not s.radius.any()
    np.testing.assert_allclose(np.abs(s.centre[:, 2]), 0.1)
    np.testing.assert_allclose(s.rim, 0.05)
    np.testing.assert_allclose(s.axis, np.tile([0, 0, 1.0], (8, 1)))
    np.testing.assert_allclose(s.angle[:CAP_POINTS], np.arange(CAP_POINTS) * math.pi / 2)
    s = contact_slots(coal.Box(0.3, 0.2, 0.1), "b")
    assert len(s.centre) == 8 and np.allclose(np.abs(s.centre), [0.15, 0.1, 0.05])
    assert s.centre[5].tolist() == [0.15, -0.1, 0.05]  # index bits: x (1), y (2), z (4) +

    class Mesh:  # what coal's BVH meshes offer
        num_vertices = 4

        @staticmethod
        def vertices():
            return np.eye(3)

    assert contact_slots(Mesh(), "m") is None


def test_a_mesh_meets_a_face_at_a_bounded_polygon_of_its_hull():
    rng = np.random.default_rng(1)
    surface = rng.normal(size=(600, 3))
    surface /= np.linalg.norm(surface, axis=1)[:, None]
    flat = np.vstack([surface * [1, 1, 0.2], [[x, y, -0.2] for x in (-1, 0, 1)
                                               for y in (-1, 0, 1)]])
    hull = hull_shape(np.vstack([flat, rng.uniform(-0.1, 0.1, (400, 3))]), max_points=6)
    V, codes = support_feature(hull, np.eye(3), np.zeros(3), np.array([0.0, 0.0, -1.0]))
    assert 3 <= len(V) <= 6 and np.allclose(V[:, 2], -0.2)  # the bottom face, reduced
    np.testing.assert_array_equal(V, hull.vertices[codes])  # its vertices: exact points
    assert farthest_points(surface, 5).tolist() == farthest_points(surface, 5).tolist()


def test_the_default_links_are_those_with_geometry_but_the_feet(make_humanoid):
    sim = make_humanoid(**{"collision.enabled": True})
    links = set(sim.collision.link_names)
    assert "l_foot" not in links and "r_foot" not in links  # they carry the contact surfaces
    assert {"pelvis", "torso", "head", "l_shank", "r_forearm", "l_ankle_link"} <= links
    assert len(links) == 22
    sim = make_humanoid(**{"collision.enabled": True, "collision.exclude_links": ["head"]})
    assert "head" not in sim.collision.link_names
    sim = make_humanoid(**{"collision.enabled": True, "collision.links": ["pelvis", "l_foot"]})
    assert set(sim.collision.link_names) == {"pelvis", "l_foot"}


def test_bad_collision_parameters_get_typed_errors_naming_the_link(make_humanoid):
    with pytest.raises(ModelError, match="'collision.links': link 'l_wing' is not in the model"):
        make_humanoid(**{"collision.enabled": True, "collision.links": ["l_wing"]})
    with pytest.raises(ModelError, match="link 'imu_link' has no <collision> geometry"):
        make_humanoid(**{"collision.enabled": True, "collision.links": ["imu_link"]})
    with pytest.raises(ModelError, match="'collision.exclude_links': link 'tail'"):
        make_humanoid(**{"collision.enabled": True, "collision.exclude_links": ["tail"]})
    with pytest.raises(ConfigError, match="'collision.max_points'"):
        make_humanoid(**{"collision.enabled": True, "collision.max_points": 2})
    with pytest.raises(ConfigError, match="collision.point_spacing"):  # gone: no samples
        make_humanoid(**{"collision.enabled": True, "collision.point_spacing": 0.1})
    with pytest.raises(ConfigError, match="'collision.margin'"):
        make_humanoid(**{"collision.margin": 0.0})


# ----------------------------------------------------------------------------- phases


def _random_configurations(sim, count, rng):
    for _ in range(count):
        q = np.array(sim.q0)
        q[7:] += rng.uniform(-1.0, 1.0, sim.model.nq - 7)
        q[:3] = [rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), rng.uniform(-0.1, 0.9)]
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
        yield q


@pytest.mark.parametrize("terrain", [False, True])
def test_broad_and_narrow_phases_equal_their_plain_references(make_humanoid, terrain):
    extra = {"terrain.boxes": [0.3, 0.0, 0.05, 0.4, 0.6, 0.1, 0.3]} if terrain else {}
    sim = make_humanoid(**{"collision.enabled": True}, **extra)
    coll, model = sim.collision, sim._model_step
    data, ref_data = model.createData(), model.createData()
    rng = np.random.default_rng(7)
    seen_near = seen_far = points = 0
    for q in _random_configurations(sim, 60, rng):
        pin.computeJointJacobians(model, data, q)
        pin.forwardKinematics(model, ref_data, q)
        near = reference_near(coll, ref_data)
        assert coll.any_near(data) == near.any()
        if not near.any():
            seen_far += 1
            continue
        seen_near += 1
        np.testing.assert_array_equal(coll.near, near)
        coll.narrow(data)
        ref = reference_narrow(coll, model, ref_data, q)
        # the narrow phase looks at the near geometries' points: those of the reference
        # that belong to them, and no other
        expected = sorted(i for i in ref if near[coll.point_geometry[i]])
        assert coll.candidates.tolist() == expected
        for row, i in enumerate(coll.candidates):
            depth, p, B, J = ref[i]
            assert coll.depth[i] == pytest.approx(depth, abs=1e-12)
            np.testing.assert_allclose(coll.position[row], p, atol=1e-12)
            np.testing.assert_allclose(coll.bases[row], B, atol=1e-12)
            np.testing.assert_allclose(coll.J_cm[:, row], J, atol=1e-10)
            points += 1
    assert seen_near > 10 and seen_far > 5 and points > 200


@pytest.mark.parametrize("normal", [[0.0, 0.0, 1.0], [0.6, 0.0, 0.8]], ids=["level", "tilted"])
def test_the_planes_narrow_phase_equals_its_reference_for_every_primitive(make_humanoid, normal):
    """The plane's narrow phase computes each slot's height from the broad phase's R^T n
    (a rim's lowest point: rim cos(phi) rho) and places only the slots within the margin:
    capsules (their ends out of and along the axis), cylinders, boxes and spheres on the
    humanoid's links, off-centre and turned, held to the plain per-slot reference; its
    compiled twin (collision_plane_*) held to it at each configuration, on a level ground
    (its rows' sums skip the basis' zero terms) and a tilted one (all six terms)."""
    import coal
    from wb_sim.contact.geometry import link_geometry
    from wb_sim.contact.ground_collision import CollisionPoints
    sim = make_humanoid(**{"collision.enabled": True, "ground.normal": normal})
    model = sim._model_step
    shapes = [coal.Capsule(0.04, 0.3), coal.Cylinder(0.05, 0.2), coal.Box(0.2, 0.1, 0.05),
              coal.Sphere(0.06), coal.Capsule(0.02, 0.1)]
    rng = np.random.default_rng(11)
    geometries = []
    for j in range(1, model.njoints):
        shape = shapes[j % len(shapes)]
        M = pin.SE3(pin.exp3(rng.normal(size=3)), rng.uniform(-0.05, 0.05, 3))
        g = pin.GeometryObject(f"g{j}", j, M, shape)
        geometries.append(link_geometry(model.names[j], g, 8))
    coll = CollisionPoints(model, geometries, sim.collision.ground, None, 0.02)
    assert coll._has_caps and coll._has_rims
    data, ref_data = model.createData(), model.createData()
    points = ends = 0
    compiled_too = coll._kernels is not None  # (not with WB_SIM_PLAIN=1)
    for q in _random_configurations(sim, 60, rng):
        pin.computeJointJacobians(model, data, q)
        if not coll.any_near(data) or not coll.narrow_plain(data):
            continue
        if compiled_too:  # the compiled narrow phase against numpy's, to rounding
            plain = (coll.candidates, coll.depth, coll.position, coll.J_cm)
            assert coll.narrow(data) == len(plain[0]) and coll._plan is not None
            assert coll.candidates.tolist() == plain[0].tolist()
            np.testing.assert_array_equal(np.isinf(coll.depth), np.isinf(plain[1]))
            finite = np.isfinite(plain[1])
            np.testing.assert_allclose(coll.depth[finite], plain[1][finite], rtol=0, atol=1e-13)
            np.testing.assert_allclose(coll.position, plain[2], rtol=0, atol=1e-13)
            np.testing.assert_allclose(coll.J_cm, plain[3], rtol=0, atol=1e-12)
            assert coll.bases.shape == (len(plain[0]), 3, 3)
        ref = reference_narrow(coll, model, ref_data, q)
        expected = sorted(i for i in ref if coll.near[coll.point_geometry[i]])
        assert coll.candidates.tolist() == expected
        for row, i in enumerate(coll.candidates):
            depth, p, B, J = ref[i]
            assert coll.depth[i] == pytest.approx(depth, abs=1e-12)
            np.testing.assert_allclose(coll.position[row], p, atol=1e-12)
            np.testing.assert_allclose(coll.J_cm[:, row], J, atol=1e-10)
            points += 1
            R = ref_data.oMi[int(coll.point_joint[i])].rotation
            ends += bool(coll.cap[i] and (R @ coll.axis_local[i])[2] <= 0.0)
    assert points > 300 and ends > 20, (points, ends)


@pytest.mark.parametrize("normal", [[0.0, 0.0, 1.0], (np.array([0.2, -0.1, 1.0]) / math.sqrt(1.05)).tolist()],
                         ids=["level", "tilted"])
def test_the_broad_and_narrow_phases_in_one_call_equal_the_two(make_humanoid, monkeypatch,
                                                                  normal):
    """CollisionPoints.near_and_narrow (the compiled broad phase and depths in one call,
    then the rows) sets what any_near and narrow set, at random configurations: the same
    near geometries and candidates, and the same depths, points and rows, bit for bit on a
    level ground (R^T n is then exact in any order) and to rounding on a tilted one; with
    nothing near it reports so and leaves the last near geometries as any_near does."""
    monkeypatch.setenv("WB_SIM_PLAIN", "0")
    sim = make_humanoid(**{"collision.enabled": True, "ground.normal": normal})
    exact = normal[2] == 1.0
    coll, model = sim.collision, sim._model_step
    data = model.createData()
    assert coll._kernels is not None, "the compiled kernels are not built"
    rng = np.random.default_rng(5)
    near_seen = far_seen = 0
    for q in _random_configurations(sim, 80, rng):
        pin.computeJointJacobians(model, data, q)
        near = coll.any_near(data)
        kc = coll.narrow(data) if near else 0
        two = (coll.near.copy(), coll.candidates, coll.depth, coll.position, coll.J_cm)
        last_near = coll.near
        assert coll.near_and_narrow(data) == (near, kc)
        if not near:
            assert coll.near is last_near
            far_seen += 1
            continue
        near_seen += 1
        np.testing.assert_array_equal(coll.near, two[0])
        np.testing.assert_array_equal(coll.candidates, two[1])
        for got, want in zip((coll.depth, coll.position, coll.J_cm), two[2:]):
            assert got.dtype == want.dtype and got.shape == want.shape
            if exact:
                np.testing.assert_array_equal(got, want)
            else:
                np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
                np.testing.assert_allclose(got[np.isfinite(got)], want[np.isfinite(want)],
                                           rtol=0, atol=1e-14)
    assert near_seen > 20 and far_seen > 5, (near_seen, far_seen)


def test_the_broad_phase_on_the_plane_allocates_nothing(make_humanoid):
    sim = make_humanoid(**{"collision.enabled": True})
    coll, data = sim.collision, sim._data_step
    pin.computeJointJacobians(sim._model_step, data, sim.q0)
    assert not coll.any_near(data)  # standing: only the feet are near the ground
    tracemalloc.start()
    try:
        for _ in repeat(None, 3):  # (a loop variable above 256 would be a new int)
            coll.any_near(data)
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for _ in repeat(None, 1000):
            coll.any_near(data)
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after == before
    assert peak - before < 256  # a numpy scalar or two at a time, never an array


@pytest.mark.filterwarnings("ignore::wb_sim.simulator.InitialPenetrationWarning")
def test_the_merged_solve_equals_the_plain_reference(make_humanoid):
    sim = _lying(make_humanoid, **{"initial.base_position": [0, 0, 0.065]})  # 5 mm into it
    contact = sim.contact
    model, data = sim._model_step, sim._data_step
    q, v = sim.q, np.zeros(model.nv)
    v_free = pin.aba(model, data, q, v, np.zeros(model.nv), pin.Convention.WORLD) * sim.dt + v
    Minv = pin.computeMinverse(model, data)
    sim.contact_points.update(model, data, None)
    assert contact.collision.any_near(data) and contact.collision.narrow(data) > 10
    merged = contact.points
    merged.refresh()
    u = np.zeros((2, merged.n))
    v_fast, f_fast, u_fast = contact.merged.solve(Minv, v_free, u, sim.dt)
    Minv_full = np.triu(Minv) + np.triu(Minv, 1).T
    v_ref, f_ref, u_ref = reference_solve(merged, Minv_full, v_free, u, sim.dt,
                                          contact.merged.parameters(), 1e-3)
    assert np.count_nonzero(f_ref[:, 2] > 0) >= 4
    np.testing.assert_allclose(v_fast, v_ref, atol=1e-9)
    np.testing.assert_allclose(f_fast, f_ref, atol=1e-6 * np.abs(f_ref).max())
    np.testing.assert_allclose(u_fast, u_ref, atol=1e-12)


@pytest.mark.parametrize("plain", [False, True], ids=["compiled", "plain"])
def test_the_merged_solve_over_its_candidates_is_the_general_path_bit_for_bit(
        make_humanoid, plain, monkeypatch):
    """The compliant solve reads MergedPoints.candidates (the points with rows: of the
    lying humanoid's 215, the feet's and the slots within the margin) and selects among
    them alone; a point set without candidates takes the general path over all points.
    The humanoid dropped on its back and pushed, 1500 steps: both trajectories equal bit
    for bit, impacts, slips and take-offs (the active set) included."""
    from wb_sim.contact.whole_body import MergedPoints
    if plain:
        monkeypatch.setenv("WB_SIM_PLAIN", "1")
    general = type("GeneralPath", (MergedPoints,), {"candidates": None})
    runs, selected = [], []
    for hide in (False, True):
        sim = _lying(make_humanoid)
        if hide:
            sim.contact.points.__class__ = general
        else:  # both the compiled selection and the Python lines read these velocities
            pts, calls = sim.contact.points, []
            original = pts.candidate_normal_velocity
            pts.candidate_normal_velocity = lambda v: calls.append(len(pts.candidates)) or \
                original(v)
            selected = calls
        sim.apply_external_wrench("pelvis", force=[0.0, 150.0, 0.0], duration_s=0.1)
        zero, states = np.zeros(sim.nj), []
        for _ in range(1500):
            sim.step(zero)
            states.append(np.concatenate([sim.q, sim.v, sim.collision_wrench_array(),
                                          sim.state.contact_deformation.ravel()]))
        runs.append((np.array(states), sim.contact.statistics()))
    (a, stats), (b, _) = runs
    assert len(selected) > 1000 and max(selected) >= 8  # the candidates' path ran
    assert stats["collision_active_set_solves"] > 0
    np.testing.assert_array_equal(a, b)


def test_the_compiled_solve_over_the_candidates_is_the_python_lines_bit_for_bit(
        make_humanoid, monkeypatch):
    """CompliantContact._stick_candidates runs the candidates' selection, the all-sticking
    solve and the scatter of its results in one compiled call; where a point pulls or slips
    it declines and the Python lines run. With the call declining always, the lines run at
    every step: the humanoid dropped on its back and pushed, 1500 steps, gives the same
    trajectory, forces, readings and J_c^T p bit for bit."""
    monkeypatch.setenv("WB_SIM_PLAIN", "0")  # a whole run may have WB_SIM_PLAIN=1
    runs, solved = [], []
    for fused in (True, False):
        sim = _lying(make_humanoid)
        merged = sim.contact.merged
        assert merged._kernels is not None, "the compiled kernels are not built"
        merged._stick_candidates = functools.partial(_counted, merged._stick_candidates, solved) \
            if fused else (lambda *a: None)
        runs.append(_pushed_run(sim, 1500))
    (a, sizes, stats), (b, sizes_lines, stats_lines) = runs
    assert sum(solved) > 300 and not all(solved), (sum(solved), len(solved))  # both ran
    assert stats == stats_lines and sizes == sizes_lines
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_the_plane_only_solve_is_the_general_one_bit_for_bit(make_humanoid, model):
    """WholeBodyContact._solve_plane (the feet and the ground's collision points alone: no
    terrain pairs, self-collision or sleeping objects) runs the general solve's lines
    without the blocks': the humanoid dropped on its back and pushed, 1200 steps, gives the
    same trajectory, forces, readings, J_c^T p and statistics with it turned off."""
    runs = []
    for plane_only in (True, False):
        sim = _lying(make_humanoid, **{"contact.model": model})
        assert sim.contact._plane_only
        sim.contact._plane_only = plane_only
        runs.append(_pushed_run(sim, 1200))
    (a, sizes, stats), (b, sizes_general, stats_general) = runs
    assert stats == stats_general and sizes == sizes_general and max(sizes) > min(sizes)
    np.testing.assert_array_equal(a, b)


def _pushed_run(sim, steps: int):
    """The lying ``sim`` pushed at the pelvis (150 N sideways for 0.1 s), ``steps`` steps
    limp: (every step's state, forces, readings, J_c^T p, max depth and contact counts in
    one array; each step's size; the contact statistics at the end)."""
    sim.apply_external_wrench("pelvis", force=[0.0, 150.0, 0.0], duration_s=0.1)
    zero, states = np.zeros(sim.nj), []
    for _ in range(steps):
        sim.step(zero)
        g = sim.contact.generalized_impulse()
        c = sim.collision_points_state()
        states.append(np.concatenate([
            sim.q, sim.v, sim.collision_wrench_array(), sim.contact_wrench_array().ravel(),
            sim.state.contact_deformation.ravel(), np.zeros(1) if g is None else g,
            c.force.ravel(), c.depth, [sim.contact.max_depth],
            [len(c.surface), sum(s == "stick" for s in c.status)]]))
    return np.concatenate(states), [len(x) for x in states], sim.contact.statistics()


def _counted(kernel, solved, *args):
    out = kernel(*args)
    solved.append(out is not None)
    return out


def test_with_nothing_near_the_ground_the_trajectory_is_the_one_without_collision(
        make_humanoid, shipped_controller):
    runs = []
    for on in (False, True):
        sim = make_humanoid(**{"collision.enabled": on})
        ctrl = shipped_controller(sim)
        for _ in range(500):
            sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
        runs.append((sim.q.copy(), sim.v.copy(), sim.contact_wrench_array()))
        if on:
            assert sim.collision_points_state().surface == ()
            assert not sim.collision_wrench_array().any()
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- lying down


def test_a_body_sliding_on_its_links_starts_newton_from_the_last_steps_slip(make_humanoid):
    """The merged contact problem (feet and collision points, no pair blocks) keeps its
    solver's warm start from one step to the next, as the feet alone do: a slipping
    contact's compliance from the last step starts the next step's Newton (the code before
    dropped it every step, in a round trip through set_warm_start)."""
    sim = _lying(make_humanoid)
    merged = sim.contact.merged
    starts = []
    active_set = merged._active_set

    def recording(A, rhs, k, r, p=None, warm=None):
        starts.append(warm is not None and bool((warm > 0.0).any()))
        return active_set(A, rhs, k, r, p, warm)

    merged._active_set = recording
    zero = np.zeros(sim.nj)
    for _ in range(300):  # lands on its back
        sim.step(zero)
    sim.apply_external_wrench("pelvis", force=[0.0, 250.0, 0.0], duration_s=0.3)
    for _ in range(300):  # slides sideways on its back
        sim.step(zero)
    assert len(starts) > 50 and sum(starts) > 20, (len(starts), sum(starts))


def _depths(sim) -> tuple[float, float]:
    """(deepest contact point of every collision geometry at the current q, not only
    the last step's candidates: the deepest of its slots, or of a mesh's hull's manifold
    on the ground; deepest point of the true shapes: exact for spheres, capsules,
    cylinders and boxes, every vertex for meshes), m below the ground."""
    import coal
    coll = sim.collision
    data = sim._model_step.createData()
    pin.forwardKinematics(sim._model_step, data, sim.q)
    ref = reference_narrow(coll, sim._model_step, sim._model_step.createData(), sim.q)
    points = max((depth for depth, *_ in ref.values()), default=-np.inf)
    shapes = -np.inf
    plane = (np.zeros(3), np.array([0.0, 0.0, 1.0]))
    for g in coll.geometries:
        M = data.oMi[g.joint]
        if not len(g.points):  # a mesh: its hull's manifold on the ground
            W = M * g.placement
            man = contact_manifold(g.convex, W.rotation, W.translation, None, None, None, 1.0,
                                   plane=plane)
            points = max(points, float(-man.gap.min()))
        W = M * g.placement  # world <- geometry
        c, a = W.translation[2], W.rotation[2, 2]  # centre height, axis' z component
        shape = g.shape
        if isinstance(shape, coal.Sphere):
            low = c - shape.radius
        elif isinstance(shape, coal.Capsule):
            low = c - shape.halfLength * abs(a) - shape.radius
        elif isinstance(shape, coal.Cylinder):
            low = c - shape.halfLength * abs(a) - shape.radius * math.sqrt(max(0.0, 1 - a * a))
        elif isinstance(shape, coal.Box):
            low = c - float(np.abs(W.rotation[2]) @ np.asarray(shape.halfSide))
        else:
            V = np.asarray(shape.vertices())
            low = float((V @ W.rotation[2]).min()) + c
        shapes = max(shapes, -low)
    return points, shapes


def _vertical_force(sim) -> float:
    """The ground's vertical force on the whole robot, N (the surfaces' wrenches are in
    their frames: their points' world forces instead)."""
    return sim.collision_wrench().force[2] + sim.contact_points_state().force[:, 2].sum()


def _pushed_over(sim, seconds: float, push: float, duration: float):
    """No controller; the root link pushed forward with ``push`` N for ``duration`` s."""
    zero = np.zeros(sim.nj)
    sim.apply_external_wrench(sim.robot.root_link, force=[push, 0.0, 0.0], duration_s=duration)
    for _ in range(round(seconds / sim.dt)):
        sim.step(zero)
    return sim


@pytest.fixture(scope="module")
def humanoid_lying():
    return _pushed_over(wb_sim.Simulator.from_yaml(
        wb_sim.config_path("humanoid"), overrides={"collision.enabled": True}), 3.0, 300.0, 0.2)


def _assert_lies_at_rest(sim, base_range, shape_error):
    """At rest on the ground: no contact point deeper than the sink of the whole weight
    on one point (rigid: RIGID_SINK), no true shape deeper than that plus ``shape_error`` (what the points
    miss of the shape: nothing now, SHAPE_ERROR)."""
    weight = sim.mass * G0
    k = sim.contact.parameters().get("stiffness")  # none: the rigid model
    # the whole weight on one point; rigid: no sink to speak of
    sink = static_sink(sim.mass, k, n=1) if k is not None else RIGID_SINK
    points, shapes = _depths(sim)
    assert points < sink
    assert shapes < sink + shape_error
    assert shapes < points + shape_error  # the contact points hold the lowest point
    pts = sim.collision_points_state()
    assert pts.depth.max() < sink
    assert base_range[0] < sim.q[2] < base_range[1]
    assert np.linalg.norm(sim.state.base_linear_velocity) < 0.02
    # the ground carries the weight: the vertical force over 0.2 s more (the limp
    # limbs still settle; the mean is the weight plus the mean rate of momentum)
    fz = []
    for _ in range(round(0.2 / sim.dt)):
        sim.step(np.zeros(sim.nj))
        fz.append(_vertical_force(sim))
    assert np.mean(fz) == pytest.approx(weight, rel=0.01)
    return sim.collision_points_state()


def test_the_humanoid_pushed_over_comes_to_rest_lying_on_the_ground(humanoid_lying):
    sim = humanoid_lying
    # lying: the pelvis (a 0.14 x 0.24 x 0.12 m box) rests 6-12 cm up
    pts = _assert_lies_at_rest(sim, (0.05, 0.13), shape_error=SHAPE_ERROR)
    up = pin.Quaternion(sim.q[3:7]).matrix()[:, 2]  # the pelvis' up axis: about horizontal
    assert abs(up[2]) < 0.3
    loaded = pts.force[:, 2] > 0
    # body, arms and legs on the ground: 6 links (pelvis, head, thighs, forearms) on 9
    # points (a face rests on its corners, a cylinder on its rims' lowest points: the
    # samples along box edges and rim polygons are gone)
    assert len(set(np.array(pts.surface)[loaded])) >= 6 and loaded.sum() >= 8
    assert {"torso", "head", "pelvis"} & set(np.array(pts.surface)[loaded])


@pytest.mark.parametrize("model", ["compliant", "rigid"])
@pytest.mark.parametrize("rate", [250, 4000])
def test_the_humanoid_lies_at_rest_at_other_rates_with_either_model(rate, model):
    """The same push at 250 Hz and 4 kHz, both contact models, default contact
    parameters: it lies at rest with the same bounds as at 1 kHz."""
    sim = _pushed_over(wb_sim.Simulator.from_yaml(
        wb_sim.config_path("humanoid"), overrides={"collision.enabled": True,
                                                    "contact.model": model,
                                                    "physics_rate_hz": float(rate)}),
        3.0, 300.0, 0.2)
    pts = _assert_lies_at_rest(sim, (0.05, 0.13), shape_error=SHAPE_ERROR)
    assert np.count_nonzero(pts.force[:, 2] > 0) >= 6


def test_the_other_links_wrench_is_the_sum_of_their_point_forces(humanoid_lying):
    sim = humanoid_lying
    pts = sim.collision_points_state()
    w = sim.collision_wrench()
    assert w.frame == "world"
    np.testing.assert_allclose(w.force, pts.force.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(w.torque, np.cross(pts.position, pts.force).sum(axis=0),
                               rtol=1e-12, atol=1e-9)
    assert w.force[2] > 0.5 * sim.mass * G0  # the body, not the feet, carries the weight
    np.testing.assert_array_equal(sim.collision_wrench_array(), np.concatenate([w.force,
                                                                                w.torque]))


def test_icub_pushed_over_comes_to_rest_lying_on_its_collision_meshes():
    require_robot_data("icub")
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("icub"),
                                     overrides={"collision.enabled": True})
    assert len(sim.collision.geometries) >= 30  # meshes, through their hulls
    _pushed_over(sim, 3.0, 150.0, 0.3)
    pts = _assert_lies_at_rest(sim, (0.03, 0.2), shape_error=SHAPE_ERROR)
    assert sim.frame_pose("chest").translation[2] < 0.2  # face down on its chest
    assert np.count_nonzero(pts.force[:, 2] > 0) >= 6


BODY = ('<robot name="body"><link name="body"><inertial><mass value="{m}"/>'
        '<inertia ixx="{i}" iyy="{i}" izz="{i}" ixy="0" ixz="0" iyz="0"/></inertial>'
        '<collision><geometry>{geometry}</geometry></collision></link></robot>')


@pytest.mark.parametrize("model", ["compliant", "rigid"])
@pytest.mark.parametrize("rate", [250, 4000])
@pytest.mark.parametrize("mass", [0.05, 200.0])
@pytest.mark.parametrize("shape", ["sphere", "box"])
def test_light_and_heavy_bodies_land_and_rest_on_their_collision_geometry(shape, mass, rate,
                                                                          model):
    """A body with nothing but a URDF collision geometry (a 5 cm-radius sphere, a 10 cm
    cube) and no contact surface, dropped from 0.5 m, tilted, with DEFAULT contact
    parameters: 50 g and 200 kg, 250 Hz and 4 kHz, both models. It comes to rest (the
    cube on a face) where the contact law puts it: the resting points (the sphere's
    one, the cube's 4 bottom corners) sink the law's static sink (compliant, 3 %; the
    law itself is checked in test_contact_robustness) or less than 10 um (rigid), and
    the ground carries the weight within 1 % at every step of the last 0.2 s (rigid: plus
    what its solver tolerance allows)."""
    geometry, n, half = (('<sphere radius="0.05"/>', 1, 0.05) if shape == "sphere"
                         else ('<box size="0.1 0.1 0.1"/>', 4, 0.05))
    sim = wb_sim.Simulator.from_params({
        "robot_description": BODY.format(m=mass, i=mass * 2e-3 / 12, geometry=geometry),
        "contact_surfaces": [], "collision.enabled": True, "contact.model": model,
        "physics_rate_hz": float(rate), "initial.base_position": [0.0, 0.0, 0.55],
        "initial.base_rpy": [0.3, 0.2, 0.1]})
    steps = 3 * rate
    fz = np.empty(steps)
    for k in range(steps):
        sim.step(np.zeros(0))
        fz[k] = sim.collision_wrench().force[2]
    ratio = fz[-rate // 5:] / (mass * G0)
    # rigid: the solver stops at contact.tolerance (1e-5 m/s) on each loaded point's
    # velocity, an impulse error of up to tolerance * rate / g of the weight per point
    # (0.4 % at 4 kHz); at rest it measured up to 1.1 % with the cube's 4 corners
    bound = 0.01 + (n * 1e-5 * rate / G0 if model == "rigid" else 0.0)
    assert np.abs(ratio - 1.0).max() < bound, (ratio.min(), ratio.max())
    assert np.abs(sim.v).max() < 2e-3
    sink = half - sim.q[2]
    if model == "compliant":
        assert sink == pytest.approx(static_sink(mass, 4.0e4, n=n), rel=0.03)
    else:
        assert abs(sink) < 1e-5
    if shape == "box":  # on a face: one of its axes vertical
        assert np.abs(pin.Quaternion(sim.q[3:7]).matrix()[2]).max() > 1.0 - 1e-6


def test_a_snapshot_with_collision_contacts_continues_bit_identically(make_humanoid):
    sim = _lying(make_humanoid, **{"contact.friction_coefficient": 0.3})
    rng = np.random.default_rng(3)
    for _ in range(150):
        sim.step(rng.normal(0, 3, sim.nj))
    assert len(sim.collision_points_state().surface) > 10
    snap = sim.get_state()
    taus = rng.normal(0, 3, (60, sim.nj))

    def run():
        out = []
        for tau in taus:
            sim.step(tau)
            out.append(np.concatenate([sim.q, sim.v, sim.collision_wrench_array(),
                                       sim.contact_wrench_array().ravel()]))
        return np.array(out)

    first = run()
    sim.set_state(snap)
    np.testing.assert_array_equal(run(), first)
    other = make_humanoid(**{"collision.enabled": False})
    with pytest.raises(wb_sim.CommandError, match="collision points"):
        other.set_state(snap)


def test_the_rigid_model_holds_the_lying_humanoid_too(make_humanoid):
    sim = _lying(make_humanoid, **{"contact.model": "rigid"})
    zero = np.zeros(sim.nj)
    for _ in range(600):
        sim.step(zero)
    pts = sim.collision_points_state()
    assert pts.depth.max() < 1e-3  # rigid: no sink to speak of
    fz = [_vertical_force(sim) for _ in range(100) if sim.step(zero) is None]
    assert np.mean(fz) == pytest.approx(sim.mass * G0, rel=0.01)
    assert sim.contact.statistics()["collision_solves"] > 0


def test_the_viewer_draws_the_links_contacts_with_the_feet(humanoid_lying):
    from wb_sim.tools.viewer import contact_arrows
    sim = humanoid_lying
    P, F = contact_arrows(sim)
    feet, links = sim.contact_points_state(), sim.collision_points_state()
    assert len(P) == len(feet.surface) + len(links.surface) > len(feet.surface)
    np.testing.assert_array_equal(P[len(feet.surface):], links.position)
    np.testing.assert_array_equal(F[len(feet.surface):], links.force)
