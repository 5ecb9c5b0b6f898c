"""Self-collision (optional, ``collision.self_collision``): the links' URDF
``<collision>`` geometry against each other's, through the contact model the feet and
the ground collision already use.

**Exact shapes.** Two geometries whose shapes :mod:`wb_sim.contact.manifold` knows
(spheres, capsules, cylinders, boxes, meshes through their convex hulls: every URDF
primitive but cones and ellipsoids) meet exactly, through coal: the normal and the
deepest point from ``coal.collide``, a manifold of contact points where a face meets a
face (a box's corner on another's face: one point; a face on a face: the clipped polygon),
each with its own depth.

**Geometry to spheres**, for a pair with a cone or an ellipsoid: every such pair's
geometries get a volume of spheres, fixed in its parent joint's frame (at most
``collision.self_spheres`` each):

* sphere: itself;
* capsule: spheres of its radius along its axis, close enough that every point of its
  surface is within :data:`SELF_DIP` of one;
* box, cylinder, cone, ellipsoid, mesh (its convex hull): spheres inscribed in the
  shape, chosen greedily from a grid of candidate centres (each with its largest
  inscribed radius) to bring the shape's surface samples closest to them
  (:func:`sphere_cover`), until every sample is within :data:`COVER_TOLERANCE` of a
  sphere or the count is reached.

Inscribed spheres never reach outside the shape, so a self-contact never starts
before the two shapes touch; they round its edges and corners off: each geometry's
``cover_gap`` (m) is how far its surface samples are from the spheres at worst
(a capsule's dip; a box's corners, a cylinder's rim: centimetres; what the shapes
may overlap there before they push back, in a pair met by spheres).

**Pairs.** Every two geometries of two links with geometry (``collision.links``, or
all but ``collision.exclude_links``; the contact surfaces' links included: the feet
meet each other), except links rigidly attached to each other or joined by one joint
(adjacent in the kinematic tree: always in touch at the joint), and the pairs that
the SRDF ``collision.srdf_path`` disables (``<disable_collisions link1= link2=>``,
MoveIt's "Adjacent", "Never", "Default" pairs).

**Broad phase.** Each geometry has a bounding sphere (its shape inside). Once per
step, from the joint placements the step's ABA already left in pinocchio's data, one
batched product gives every bounding centre in the world and a handful of numpy calls
on preallocated buffers the pairs' squared distances against their thresholds: no
allocation unless a pair's bounding spheres come within ``collision.margin``.
Then (the narrow phase) the close exact pairs are solved by coal and their manifolds
clipped, the spheres of the other close pairs placed and every two of them compared.

**The contact.** An exact pair's manifold point: its normal ``n`` (coal's, from B to
A), its depth, its point ``p`` the middle of its two surface points; an identity from
the pair and the features that made it. Spheres a (link A) and b (link B) overlapping by
``d = r_a + r_b - |c_a - c_b|`` (or within the margin of it) make one contact point:
normal ``n = (c_a - c_b) / |c_a - c_b|`` (from B to A), point ``p`` the middle of the
overlap on the line of centres, basis (t1, t2, n). Its Jacobian is the relative one,
``B^T (J_A(p) - J_B(p))`` (the rows ``[b_c, p x b_c]`` of the world-frame joint
Jacobian masked by ``support(A) - support(B)``: the dofs both links share cancel), so
its force acts on A along ``+f`` and on B along ``-f`` at the same point: internal, it
changes neither the total linear nor angular momentum. To the contact model such a
pair is one more point after the feet and the ground collision points
(:class:`~wb_sim.contact.whole_body.MergedPoints`), with the same law (normal, friction in the
tangent plane of n). At most :data:`SELF_CAPACITY` pairs at once (the deepest; the
others are counted, ``self_contacts_dropped`` in the contact's statistics). The
tangential deformation and the warm start of a pair follow it from step to step by its
identity, carried in world axes and turned onto the new tangent plane (the bases turn
with the links).

:func:`reference_self_near` and :func:`reference_self_narrow` are plain per-pair
versions of the broad and narrow phases (the tests hold the fast ones to them).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

from ..errors import ConfigError, ModelError
from ..parameters import Param
from ..pin_views import copy_records, new_data, placement_view
from ..terrain import tangent_bases, tangent_bases_reference
from .geometry import fibonacci_directions, hull_vertices, mesh_vertices, shape_reach
from .manifold import contact_manifold
from .points import joint_support, twist_rows

#: the self-collision ``collision.*`` parameters (the group's others: ground_collision)
PARAMETERS: tuple[Param, ...] = (
    Param("collision.self_collision", "bool", False, "",
          "Self-collision: the links' <collision> geometry meets the other links' exactly "
          "(through coal; a pair with a cone or an ellipsoid: as spheres inside the shapes, "
          "collision.self_spheres) through the contact model, with "
          "equal and opposite forces on the two links. Never paired: two links rigidly "
          "attached or joined by one joint, and the pairs collision.srdf_path disables. "
          "Independent of collision.enabled. false: the links pass through each other."),
    Param("collision.srdf_path", "str", "", "",
          "SRDF file whose <disable_collisions link1= link2=> pairs self-collision leaves out "
          "('' = none): a path (relative: to the YAML file that sets it) or "
          "'example-robot-data:<path under robots/>', as urdf_path; read only with "
          "collision.self_collision. A link it names that the model lacks is an error."),
    Param("collision.self_spheres", "int", 12, "",
          "Self-collision of a pair with a cone or an ellipsoid (the others meet exactly): most "
          "spheres per collision geometry. Spheres and capsules are exact (a capsule's surface "
          "dips at most 1 mm between its spheres where this allows); boxes, cylinders, cones, "
          "ellipsoids and meshes (their convex hulls) get spheres inscribed in them, which "
          "round their edges and corners off.", lo=1, hi=64),
)

#: a capsule's spheres are close enough that its surface is at most this far from them, m
SELF_DIP = 1.0e-3
#: the greedy cover stops once every surface sample is this close to its spheres, m
COVER_TOLERANCE = 1.0e-3
#: candidate centres (a grid in the shape's bounding box) and surface samples of a cover
COVER_CANDIDATES = 600
COVER_SURFACE = 200
#: points on each rim of a cylinder (or a cone's base) before its hull is taken
ROUND_POINTS = 64
#: most sphere pairs in the contact problem at once (the deepest are kept)
SELF_CAPACITY = 64
#: m: an exact pair farther apart than this is one candidate (coal's closest points),
#: nearer its manifold (what touching shapes need; a self-collision pair is handed over
#: once it touches, now or after the step, so the manifold comes at the latest one step
#: after the first touch)
FULL_WITHIN = 1e-3
#: an exact pair's contact identity has this bit (a sphere pair's is below it)
EXACT_ID = 1 << 61
_ID_MASK = EXACT_ID - 1
_ONES3 = np.ones(3)
_NO_IDS = np.zeros(0, dtype=np.int64)
_SUM3 = np.tile(np.eye(3), (4, 1))  # (12, 3): sums entries 3 a + b over a
_SPLIT = np.repeat(np.eye(2), [9, 3], axis=0)  # (12, 2): sums a record's rotation, translation


# ----------------------------------------------------------------------------
# SRDF
# ----------------------------------------------------------------------------


def srdf_disabled_pairs(path: Path, links: set[str]) -> frozenset[frozenset[str]]:
    """The link pairs an SRDF file disables (``<disable_collisions link1= link2=>``).
    ConfigError for a file that is not an SRDF (not a regular file: a FIFO would block;
    not XML; XML whose root is not <robot>: any XML, even <html>, was taken for an SRDF
    with no pairs) or a pair without both links, ModelError naming the file and the link
    for a link not in ``links``."""
    if not Path(path).is_file():
        raise ConfigError(f"parameter 'collision.srdf_path': '{path}' is not a regular file")
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise ConfigError(f"parameter 'collision.srdf_path': cannot read SRDF '{path}': "
                          f"it is not valid XML: {e}") from e
    if root.tag != "robot":
        raise ConfigError(f"parameter 'collision.srdf_path': '{path}' is not an SRDF: its root "
                          f"element is <{root.tag}>, expected <robot>")
    pairs = set()
    for element in root.iter("disable_collisions"):
        a, b = element.get("link1"), element.get("link2")
        if not a or not b:
            raise ConfigError(f"parameter 'collision.srdf_path': '{path}' has a "
                              f"<disable_collisions> without link1 and link2")
        for name in (a, b):
            if name not in links:
                raise ModelError(f"parameter 'collision.srdf_path': '{path}' disables link "
                                 f"'{name}', which is not in the model (is it the SRDF of "
                                 f"another robot?)")
        pairs.add(frozenset((a, b)))
    return frozenset(pairs)


# ----------------------------------------------------------------------------
# Geometry -> spheres
# ----------------------------------------------------------------------------


def _round(radius: float, z0: float, z1: float | None) -> np.ndarray:
    """Rims of ROUND_POINTS points at heights z0 (and z1), as a cylinder's or cone's."""
    a = 2.0 * math.pi * np.arange(ROUND_POINTS) / ROUND_POINTS
    rim = np.column_stack([radius * np.cos(a), radius * np.sin(a)])
    out = [np.column_stack([rim, np.full(ROUND_POINTS, z0)])]
    if z1 is not None:
        out.append(np.column_stack([rim, np.full(ROUND_POINTS, z1)]))
    return np.vstack(out)


def _hull_vertices_of(geometry, link: str) -> np.ndarray:
    """Points whose convex hull is the shape (a cylinder's or cone's rims polygonal,
    within 0.12 % of its radius), geometry frame."""
    import coal

    if isinstance(geometry, coal.Box):
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
        return signs * np.asarray(geometry.halfSide, dtype=float)
    if isinstance(geometry, coal.Cylinder):
        hl = float(geometry.halfLength)
        return _round(float(geometry.radius), -hl, hl)
    if isinstance(geometry, coal.Cone):
        hl = float(geometry.halfLength)
        return np.vstack([_round(float(geometry.radius), -hl, None), [[0.0, 0.0, hl]]])
    if isinstance(geometry, coal.Ellipsoid):
        return fibonacci_directions(COVER_SURFACE) * np.asarray(geometry.radii, dtype=float)
    return mesh_vertices(geometry, link, "boxes, spheres, cylinders, capsules, cones, "
                         "ellipsoids and meshes", " by self-collision")


def sphere_cover(geometry, link: str, max_spheres: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(centres (k, 3) in the geometry's frame, radii (k,), gap m) of the spheres that
    stand for a coal collision geometry in self-collision (see the module docstring);
    ``gap``: the farthest surface sample from them. k = 0 for a flat shape (no volume).
    ModelError naming the link for a kind that is not supported."""
    import coal

    if isinstance(geometry, coal.Sphere):
        return np.zeros((1, 3)), np.array([float(geometry.radius)]), 0.0
    if isinstance(geometry, coal.Capsule):
        # spheres s apart leave the surface between them sqrt(r^2 + s^2 / 4) - r from both
        r, hl = float(geometry.radius), float(geometry.halfLength)
        step = 2.0 * math.sqrt(SELF_DIP * (2.0 * r + SELF_DIP))
        count = min(max(1, int(math.ceil(2.0 * hl / step - 1e-9)) + 1), max_spheres)
        half = hl / (count - 1) if count > 1 else hl  # half the spacing (or the half length)
        gap = math.hypot(r, half) - r
        z = np.linspace(-hl, hl, count) if count > 1 else np.zeros(1)
        return np.column_stack([np.zeros(count), np.zeros(count), z]), np.full(count, r), gap
    return cover_convex(_hull_vertices_of(geometry, link), max_spheres)


def cover_convex(V: np.ndarray, max_spheres: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Spheres inscribed in the convex hull of the points V (n, 3), chosen greedily
    (:func:`sphere_cover`): candidates on a grid of about COVER_CANDIDATES cells over
    the bounding box (an odd count along each axis: its middle plane is among them),
    each with the radius of the largest sphere centred there inside the hull; the
    surface samples are the hull's vertices and where COVER_SURFACE rays from the
    deepest candidate leave the hull. Each pick lowers the sum over the samples of their
    distance to the nearest sphere the most. Returns (centres, radii, the largest such
    distance left); no sphere for a flat hull. Deterministic."""
    from scipy.spatial import ConvexHull, QhullError

    V = np.unique(np.asarray(V, dtype=float), axis=0)
    try:
        hull = ConvexHull(V)
    except (QhullError, ValueError):
        return np.zeros((0, 3)), np.zeros(0), math.inf
    A, b = hull.equations[:, :3], hull.equations[:, 3]  # A x + b <= 0 inside, rows unit
    lo, hi = V.min(axis=0), V.max(axis=0)
    ext = hi - lo
    cell = (float(np.prod(ext)) / COVER_CANDIDATES) ** (1.0 / 3.0)
    axes = []
    for a in range(3):
        n = max(3, int(math.ceil(ext[a] / cell)))
        n += 1 - n % 2  # odd: the middle plane is a candidate
        axes.append(lo[a] + (np.arange(n) + 0.5) * ext[a] / n)
    X = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    rho = -(X @ A.T + b).max(axis=1)
    inside = rho > 1e-9 * max(float(ext.max()), 1e-12)
    if not inside.any():
        return np.zeros((0, 3)), np.zeros(0), math.inf
    X, rho = X[inside], rho[inside]
    c0 = X[int(np.argmax(rho))]
    d = fibonacci_directions(COVER_SURFACE)
    ad = d @ A.T
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(ad > 1e-12, -(c0 @ A.T + b)[None, :] / ad, np.inf).min(axis=1)
    S = np.vstack([c0 + t[:, None] * d, V[hull.vertices]])
    D = np.maximum(np.linalg.norm(S[:, None, :] - X[None, :, :], axis=2) - rho[None, :], 0.0)
    err = np.full(len(S), np.inf)
    chosen: list[int] = []
    while len(chosen) < max_spheres:
        j = int(np.argmin(np.minimum(err[:, None], D).sum(axis=0)))
        chosen.append(j)
        err = np.minimum(err, D[:, j])
        if err.max() <= COVER_TOLERANCE:
            break
    return X[chosen], rho[chosen], float(err.max())


@dataclass(frozen=True)
class SelfGeometry:
    """The spheres of one collision geometry, in its parent joint's frame."""

    link: str
    name: str  #: the geometry's name (pinocchio's)
    joint: int  #: pinocchio joint id (0: welded to the world)
    centres: np.ndarray  #: (k, 3) sphere centres, joint frame, m
    radius: np.ndarray  #: (k,) m
    gap: float  #: farthest surface sample of the shape from its spheres, m
    centre: np.ndarray  #: (3,) bounding sphere centre, joint frame
    bound: float  #: bounding sphere radius (the shape inside), m
    #: its manifold.Convex (a mesh: its convex hull), geometry frame: exact pairs; None (a
    #: cone, an ellipsoid): its spheres
    convex: object = None
    placement: pin.SE3 | None = None  #: joint <- geometry


def self_geometries(by_link: dict, max_spheres: int,
                    exact: bool = True) -> tuple[list[SelfGeometry], list[str]]:
    """The spheres (and, ``exact``, the convex shapes) of the geometries of the links
    ``by_link`` ({link: pinocchio geometry objects}), and the names of those left out for
    having no volume."""
    out, flat = [], []
    for link, objects in by_link.items():
        for g in objects:
            C, r, gap = sphere_cover(g.geometry, link, max_spheres)
            if not len(C):
                flat.append(f"{link} ({g.name})")
                continue
            M = g.placement  # joint <- geometry
            Cj = C @ M.rotation.T + M.translation
            lo, hi = (Cj - r[:, None]).min(axis=0), (Cj + r[:, None]).max(axis=0)
            c = (lo + hi) / 2.0
            bound = float(np.max(np.linalg.norm(Cj - c, axis=1) + r))
            convex = exact_shape(g.geometry, link) if exact else None
            if convex is not None:  # the bounding sphere holds the shape, not only its spheres
                cg = M.rotation.T @ (c - M.translation)
                reach = (float(np.max(np.linalg.norm(convex.vertices - cg, axis=1)))
                         if convex.kind == "hull" else shape_reach(g.geometry, cg))
                bound = max(bound, reach)
            out.append(SelfGeometry(link, g.name, int(g.parentJoint), Cj, r, gap, c, bound,
                                    convex, pin.SE3(M)))
    return out, flat


def exact_shape(geometry, link: str):
    """The :class:`~wb_sim.contact.manifold.Convex` of a geometry self-collision meets
    exactly (sphere, capsule, cylinder, box, a mesh's convex hull), or None."""
    import coal

    from .manifold import convex_shape
    hull = None
    if not isinstance(geometry, (coal.Sphere, coal.Capsule, coal.Cylinder, coal.Box,
                                 coal.Cone, coal.Ellipsoid)):
        hull = hull_vertices(mesh_vertices(geometry, link, "", " by self-collision"))
    return convex_shape(geometry, hull)


def adjacent(model: pin.Model, ja: int, jb: int) -> bool:
    """Whether links on joints ja and jb are rigidly attached (one joint) or joined by
    one joint (one's joint the parent of the other's)."""
    return ja == jb or model.parents[ja] == jb or model.parents[jb] == ja


def geometry_pairs(model: pin.Model, geometries: list[SelfGeometry],
                   disabled: frozenset) -> tuple[np.ndarray, np.ndarray]:
    """(pa, pb): the geometry pairs (pa < pb, ascending) that self-collision checks:
    links distinct, not adjacent (:func:`adjacent`), not disabled by the SRDF."""
    pa, pb = [], []
    for a, ga in enumerate(geometries):
        for b in range(a + 1, len(geometries)):
            gb = geometries[b]
            if (ga.link == gb.link or adjacent(model, ga.joint, gb.joint)
                    or frozenset((ga.link, gb.link)) in disabled):
                continue
            pa.append(a)
            pb.append(b)
    return np.array(pa, dtype=int), np.array(pb, dtype=int)


def _prismatic(joint) -> bool:
    name = joint.shortname()
    return name.startswith("JointModelP") or "Prismatic" in name


def motion_weights(model: pin.Model, sphere_joint: np.ndarray, r_local: np.ndarray,
                   free_root: bool) -> tuple[np.ndarray, np.ndarray]:
    """(w (njoints, 2), w_v (nv,)): weights that bound how much the joints can change any
    gap between two spheres. Joint i moves every sphere centre below it by at most
    ``L_i |dR_i|_2`` (turning by dR_i about its origin; L_i the farthest such centre from
    its origin, through the joint offsets: the same at every configuration) plus
    ``|dt_i|`` (sliding), where dR_i, dt_i change its local placement ``liMi``; so a gap
    changes by at most ``sum_i w_i0 |dR_i|_F + w_i1 |dt_i|`` (a turn about one axis has
    ``|dR|_2 = |dR|_F / sqrt(2)``; other joints count ``|dR|_F``), and at most at the rate
    ``w_v . |v|``. The root of a floating base weighs nothing: moving the whole robot
    changes no distance within it. Infinite where a prismatic joint without limits makes
    L unbounded."""
    njoints = model.njoints
    ext = np.zeros(njoints)  # the farthest joint k's origin is from its parent's
    for k in range(1, njoints):
        ext[k] = float(np.linalg.norm(model.jointPlacements[k].translation))
        if _prismatic(model.joints[k]):
            i = model.joints[k].idx_q
            lo, hi = model.lowerPositionLimit[i], model.upperPositionLimit[i]
            ext[k] += max(abs(lo), abs(hi)) if np.isfinite([lo, hi]).all() else math.inf
    L = np.zeros(njoints)
    for j, r in zip(sphere_joint, np.linalg.norm(r_local, axis=1)):
        path = 0.0
        for i in reversed(list(model.supports[int(j)])):
            L[i] = max(L[i], path + r)
            path += ext[i]
    w = np.zeros((njoints, 2))
    w_v = np.zeros(model.nv)
    for i in range(1, njoints):
        if free_root and i == 1:
            continue
        w[i] = (L[i] / math.sqrt(2.0) if model.nvs[i] == 1 else L[i], 1.0)
        dofs = slice(model.idx_vs[i], model.idx_vs[i] + model.nvs[i])
        w_v[dofs] = 1.0 if _prismatic(model.joints[i]) else L[i]
    return w, w_v


# ----------------------------------------------------------------------------
# Broad and narrow phase
# ----------------------------------------------------------------------------


class SelfCollision:
    """The self-collision spheres of all geometries and their pairs, with the broad and
    narrow phases.

    Attributes (G geometries, S spheres grouped by geometry, P geometry pairs):
        geometries, link_names: the G :class:`SelfGeometry` and their links.
        cover_gap: (G,) each geometry's ``gap``, m.
        pa, pb: (P,) the geometry pairs checked.
        capacity: slots for contacts in the merged point set (:data:`SELF_CAPACITY`).
        cand_*: the last narrow phase's candidates (sphere pairs within the margin of
            touching; see :meth:`narrow`).
        k: contacts (the candidates the contact model takes, :meth:`engage`) of the last
            step, in slot order (ascending ``ids``): ids (k,) int64 sphere-pair identities,
            sphere_a, sphere_b (k,), depth (k,) m, slot_depth (capacity,) the same with
            -inf in the free slots, position (k, 3) world contact points, bases (k, 3, 3)
            columns (t1, t2, n), J_cm (3, k, nv) relative Jacobian rows, component-major.
        dropped: sphere pairs left out for want of a slot, since construction.
    """

    def __init__(self, model: pin.Model, geometries: list[SelfGeometry], pa: np.ndarray,
                 pb: np.ndarray, margin: float, free_root: bool = False,
                 capacity: int = SELF_CAPACITY):
        self.model = model
        self.nv = model.nv
        self.geometries = geometries
        self.margin = margin
        self.capacity = capacity
        G = len(geometries)
        self.link_names = tuple(g.link for g in geometries)
        self.cover_gap = np.array([g.gap for g in geometries])
        counts = [len(g.centres) for g in geometries]
        self.s = int(sum(counts))
        self._first = np.concatenate([[0], np.cumsum(counts)]).astype(int)
        self.sphere_geometry = np.repeat(np.arange(G), counts).astype(int)
        self.geometry_joint = np.array([g.joint for g in geometries], dtype=int)
        self.sphere_joint = self.geometry_joint[self.sphere_geometry]
        self.r_local = np.vstack([g.centres for g in geometries]) if G else np.zeros((0, 3))
        self.radius = np.concatenate([g.radius for g in geometries]) if G else np.zeros(0)
        # the spheres' centres [c, 1], each entry thrice (see the broad phase's _c12)
        self._r12 = np.repeat(np.concatenate([self.r_local, np.ones((self.s, 1))], axis=1), 3,
                              axis=1)
        nonzero = self.geometry_joint[self.geometry_joint > 0]
        self.joint_ids = np.unique(nonzero) if len(nonzero) else np.array([1])
        self.pa, self.pb = np.asarray(pa, dtype=int), np.asarray(pb, dtype=int)
        P = len(self.pa)
        bound = self._bound = np.array([g.bound for g in geometries])
        self._thr2 = (bound[self.pa] + bound[self.pb] + margin) ** 2 if P else np.zeros(0)
        # the broad phase's buffers: a record (rotation column-major, then translation) of a
        # geometry's joint times [c_0, c_0, c_0, c_1, ..., 1, 1, 1], entry by entry, summed in
        # threes (a product with _SUM3) is R c + t, its bounding centre in the world
        c_aug = np.concatenate([np.array([g.centre for g in geometries]).reshape(-1, 3),
                                np.ones((G, 1))], axis=1)
        self._c12 = np.repeat(c_aug, 3, axis=1)
        self._grec = np.zeros((G, 12))
        #: bounding centres at the last broad phase, world
        self.centres_world = np.zeros((G, 3))
        self._A, self._B = np.zeros((P, 3)), np.zeros((P, 3))
        self._e2 = np.zeros(P)  # squared distances of the bounding centres
        self._d2 = np.zeros(P)  #: squared distance minus squared threshold (< 0: close)
        self._neg = np.zeros(P)
        self._bsum = bound[self.pa] + bound[self.pb] if P else np.zeros(0)
        self._gaps: tuple = ()  # what the last narrow phase found, for _lowest_gap
        self._support = joint_support(model)
        self._bound_to = None
        self._rows = None
        self._cache_key = None
        self.dropped = 0
        # the quiet test: the gaps at a reference configuration (their lower bound
        # ``slack``, m) and how far the joints have moved since (motion_weights)
        #: (G,) whether a geometry has its exact shape; (P,) whether a pair meets exactly
        #: (both have: :mod:`~wb_sim.contact.manifold` through coal), else by spheres
        self.exact = np.array([g.convex is not None for g in geometries], dtype=bool)
        self.exact_pair = (self.exact[self.pa] & self.exact[self.pb]) if P else \
            np.zeros(0, dtype=bool)
        # the levers: the spheres' centres, and where a shape is exact the farthest of its
        # points (its bounding sphere's reach from the joint)
        reach = [(g.joint, g.centre * ((np.linalg.norm(g.centre) + g.bound)
                                       / max(float(np.linalg.norm(g.centre)), 1e-12))
                  if np.linalg.norm(g.centre) > 0 else np.array([g.bound, 0.0, 0.0]))
                 for g in geometries if g.convex is not None]
        lever_joint = np.concatenate([self.sphere_joint, [j for j, _ in reach]]).astype(int)
        lever_point = np.vstack([self.r_local, *[p[None, :] for _, p in reach]])
        self._w, self._w_v = motion_weights(model, lever_joint, lever_point, free_root)
        self._exact_low = math.inf  #: the exact pairs' smallest gap at the last narrow phase
        self._quiet_test = bool(np.isfinite(self._w).all() and np.isfinite(self._w_v).all())
        self._li_ref = np.zeros((model.njoints, 12))
        self._li_diff = np.zeros((model.njoints, 12))
        self._li_norm = np.zeros((model.njoints, 2))  # per joint |dR|_F^2, |dt|^2, then roots
        self._li_norm_flat, self._w_flat = self._li_norm.reshape(-1), self._w.reshape(-1)
        self._abs_v = np.zeros(model.nv)
        self.slack = -math.inf  #: lower bound of every gap at the reference, m
        #: steps the quiet test settled, and those that ran the phases (statistics)
        self.quiet_steps = self.checked_steps = 0
        #: (P,) the pairs of two sleeping geometries (free objects asleep, Simulator's
        #: objects.sleep): left out of the narrow phase; None: none
        self.asleep_pairs: np.ndarray | None = None
        self.clear()

    def clear(self) -> None:
        """No contact (the state of a quiet step)."""
        self.cand_a = self.cand_b = np.zeros(0, dtype=int)
        self.cand_ids = np.zeros(0, dtype=np.int64)
        self.cand_depth = np.zeros(0)
        self.cand_normal = self.cand_position = np.zeros((0, 3))
        self.k = 0
        self.ids = np.zeros(0, dtype=np.int64)
        self.sphere_a = self.sphere_b = np.zeros(0, dtype=int)
        self.depth = np.zeros(0)
        self.slot_depth = np.full(self.capacity, -np.inf)
        self.position = np.zeros((0, 3))
        self.bases = np.zeros((0, 3, 3))
        self.J_cm = np.zeros((3, 0, self.nv))

    def _records(self, data: pin.Data) -> np.ndarray:
        """(njoints, 12) placement records of ``data`` (a view where possible)."""
        if data is not self._bound_to:
            joints = np.arange(self.model.njoints)
            self._rows = placement_view(data, joints)
            local = placement_view(data, joints, "liMi") if self._quiet_test else None
            self._li_rows = local
            self._bound_to = data
            self.slack = -math.inf  # another data: no reference
        return self._rows if self._rows is not None else copy_records(data)

    def contacts(self, data: pin.Data, v: np.ndarray, h: float, activation: float = 0.0,
                 held: np.ndarray = _NO_IDS) -> int:
        """The step's self-contacts (:meth:`engage`'s) at the placements in ``data``, the
        velocity ``v`` and the step ``h``; their number k. ``held``: the ids of the last
        step's contacts, which stay while within ``activation``. First, if there are none,
        the quiet test: when the joints have moved so little since the reference (the last
        time the phases ran) that no gap can have closed, even after the step, there are
        none (7 numpy calls, no allocation). Else the broad phase, the narrow phase and
        :meth:`engage`; a step that ends without contact sets the reference (its gaps'
        lower bound, :attr:`slack`)."""
        self._records(data)
        if (not len(held) and len(self.pa) and self._li_rows is not None
                and self._quiet(v, h)):
            self.quiet_steps += 1
            return 0
        self.checked_steps += 1
        self._gaps = ()
        self._exact_low = math.inf
        near = self.any_near(data)
        k = self.engage(v, h, activation, held) if near and self.narrow(data) else 0
        if not k:
            self.clear()
            if self._li_rows is not None:  # a new reference (while in contact none is used)
                np.copyto(self._li_ref, self._li_rows)
                self.slack = self._lowest_gap()
        return k

    def _lowest_gap(self) -> float:
        """A lower bound of every gap between two shapes (spheres) at the last broad and
        narrow phases, m: the far pairs' bounding spheres' gap; the exact pairs' smallest
        distance (coal's; the margin for those farther apart); in the other close pairs, a
        sphere's gap to the other side's bounding sphere if it was left out there (it
        bounds its gap to every sphere inside), else the exact gaps of the spheres kept."""
        far = self._d2 >= 0.0
        low = float(np.min(np.sqrt(self._e2[far]) - self._bsum[far], initial=math.inf))
        low = min(low, self._exact_low)
        if self._gaps:
            e2, keep, other, sphere, d2, rsum = self._gaps
            out = ~keep
            low = min(low, float(np.min(np.sqrt(e2[out]) - self._bound[other[out]]
                                        - self.radius[sphere[out]], initial=math.inf)))
            if d2 is not None:
                low = min(low, float(np.min(np.sqrt(d2) - rsum, initial=math.inf)))
        return low

    def _quiet(self, v: np.ndarray, h: float, margin: float = 0.0) -> bool:
        """Whether no gap can be closed now or after the step (:meth:`engage`'s test for
        pairs not in contact, with the rate bound of :func:`motion_weights`)."""
        diff, norm = self._li_diff, self._li_norm
        np.subtract(self._li_rows, self._li_ref, out=diff)
        np.multiply(diff, diff, out=diff)
        diff.dot(_SPLIT, out=norm)
        np.sqrt(norm, out=norm)
        np.abs(v, out=self._abs_v)
        closing = self._w_flat.dot(self._li_norm_flat) + h * self._w_v.dot(self._abs_v)
        return bool(self.slack - closing > 1e-9 + margin)

    def quiet_now(self, data: pin.Data, v: np.ndarray, h: float) -> bool:
        """The quiet test (:meth:`contacts`') with the margin, at the placements in
        ``data``: True when no gap of any pair can have come within the margin now or after
        the step since the last reference; False when it cannot tell."""
        if not len(self.pa):
            return True
        self._records(data)
        return bool(self._li_rows is not None and self._quiet(v, h, self.margin))

    def close_pairs(self, data: pin.Data) -> np.ndarray:
        """The broad phase (:meth:`any_near`): (P,) bool, the pairs whose bounding spheres
        are within the margin at the placements in ``data``."""
        if not len(self.pa):
            return np.zeros(0, dtype=bool)
        self.any_near(data)
        return self._d2 < 0.0

    def near_geometries(self, data: pin.Data, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The narrow phase of the pairs ``pairs`` (indices into pa, pb, after
        :meth:`close_pairs` at ``data``): (a, b) the geometries of each candidate (two
        shapes within the margin of touching). It leaves the candidates of those pairs
        (:meth:`contacts` finds the step's own)."""
        d2 = self._d2
        self._d2 = np.full(len(self.pa), np.inf)
        self._d2[pairs] = -1.0
        saved, self.asleep_pairs = self.asleep_pairs, None
        try:
            k = self.narrow(data)
        finally:
            self._d2, self.asleep_pairs = d2, saved
        if not k:
            return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
        g = self.sphere_geometry
        return g[self.cand_a], g[self.cand_b]

    def any_near(self, data: pin.Data) -> bool:
        """The broad phase: whether the bounding spheres of a pair are within the margin,
        from the joint placements in ``data``. Allocates nothing when none is."""
        if not len(self.pa):
            return False
        rows = self._records(data)
        # ndarray methods, ufuncs and 2-D products into the buffers (numpy's Python-level
        # wrappers, np.take and np.einsum, keep a little memory of their own; a batched
        # np.matmul allocates its iteration buffers)
        rows.take(self.geometry_joint, axis=0, out=self._grec, mode="clip")
        np.multiply(self._grec, self._c12, out=self._grec)
        c = self._grec.dot(_SUM3, out=self.centres_world)
        c.take(self.pa, axis=0, out=self._A, mode="clip")
        c.take(self.pb, axis=0, out=self._B, mode="clip")
        np.subtract(self._A, self._B, out=self._A)
        np.multiply(self._A, self._A, out=self._A)
        self._A.dot(_ONES3, out=self._e2)
        np.subtract(self._e2, self._thr2, out=self._d2)
        # numpy's reductions allocate scratch memory: "any below" as a dot product
        np.minimum(self._d2, 0.0, out=self._neg)
        return bool(self._neg.dot(self._neg) > 0.0)

    def _entries(self, close: np.ndarray):
        """For the close geometry pairs (indices into pa, pb): every sphere of either side
        as an entry to test against the other side's bounding sphere, grouped by pair (its
        side a first): (sphere, other geometry, pair (0..C-1), side a?, squared threshold,
        row among the used spheres), the used spheres' joints and centres (as
        ``_r12``: times their joints' records, summed in threes, they give the world
        centres) and C; kept while the set of close pairs stays the same."""
        key = close.tobytes()
        if key != self._cache_key:
            C = len(close)
            ga, gb = self.pa[close], self.pb[close]
            geometry = np.column_stack([ga, gb]).reshape(-1)  # a of pair 0, b of pair 0, ...
            counts = self._first[geometry + 1] - self._first[geometry]
            first = np.cumsum(counts) - counts
            sphere = (np.repeat(self._first[geometry] - first, counts)
                      + np.arange(int(counts.sum())))
            other = np.repeat(np.column_stack([gb, ga]).reshape(-1), counts)
            pair = np.repeat(np.repeat(np.arange(C), 2), counts)
            side_a = np.repeat(np.tile([True, False], C), counts)
            thr2 = (self.radius[sphere] + self._bound[other] + self.margin) ** 2
            used, local = np.unique(sphere, return_inverse=True)
            self._cache = (sphere, other, pair, side_a, thr2, local, self.sphere_joint[used],
                           self._r12[used], C)
            self._cache_key = key
        return self._cache

    def narrow(self, data: pin.Data) -> int:
        """After :meth:`any_near` found a close pair: the candidates (``cand_*``: the two
        spheres (of an exact pair: each geometry's first), ids ascending, depth, normal,
        contact point) of the close pairs: an exact pair's manifold
        (:func:`~wb_sim.contact.manifold.contact_manifold`, the contact point the middle of
        its two points); of the others, every two spheres (one of each side) within the
        margin of touching, among those within the margin of the other geometry's bounding
        sphere. Returns their number (0: none); :meth:`engage` makes contacts of them."""
        rows = self._records(data)
        self._data = data
        close = np.flatnonzero(self._d2 < 0.0 if self.asleep_pairs is None else
                               (self._d2 < 0.0) & ~self.asleep_pairs)
        exact = close[self.exact_pair[close]]
        found = self._exact_candidates(exact, rows) if len(exact) else None
        self._exact_low = math.inf if found is None else found[-1]
        k = self._sphere_candidates(close[~self.exact_pair[close]], rows)
        if found is None or not len(found[0]):
            return k
        a, b, ids, depth, normal, position, _ = found
        if k:
            a = np.concatenate([self.cand_a, a])
            b = np.concatenate([self.cand_b, b])
            ids = np.concatenate([self.cand_ids, ids])
            depth = np.concatenate([self.cand_depth, depth])
            normal = np.concatenate([self.cand_normal, normal])
            position = np.concatenate([self.cand_position, position])
        order = np.argsort(ids, kind="stable")
        self.cand_a, self.cand_b, self.cand_ids = a[order], b[order], ids[order]
        self.cand_depth, self.cand_normal = depth[order], normal[order]
        self.cand_position = position[order]
        return len(order)

    def _exact_candidates(self, pairs: np.ndarray, rows: np.ndarray):
        """(first spheres a, b, ids, depth, normal, contact point, the smallest gap (m,
        the margin where none is within it)) of the exact pairs ``pairs``."""
        rows_a, rows_b, ids, depth, normal, position = [], [], [], [], [], []
        low = self.margin
        for p in pairs:
            ga, gb = self.geometries[self.pa[p]], self.geometries[self.pb[p]]
            Ra, ta = _world(rows, ga)
            Rb, tb = _world(rows, gb)
            man = contact_manifold(ga.convex, Ra, ta, gb.convex, Rb, tb, self.margin,
                                   full_within=FULL_WITHIN)
            if man is None:
                continue
            low = min(low, man.distance)
            k = len(man.gap)
            rows_a.append(np.full(k, self._first[self.pa[p]]))
            rows_b.append(np.full(k, self._first[self.pb[p]]))
            ids.append([EXACT_ID | ((int(p) * 0x9E3779B97F4A7C15 ^ int(c)) & _ID_MASK)
                        for c in man.codes])
            depth.append(-man.gap)
            normal.append(np.tile(man.normal, (k, 1)))
            position.append((man.point_a + man.point_b) / 2.0)
        if not ids:
            return (np.zeros(0, dtype=int),) * 2 + (np.zeros(0, dtype=np.int64), np.zeros(0),
                                                    np.zeros((0, 3)), np.zeros((0, 3)), low)
        return (np.concatenate(rows_a), np.concatenate(rows_b),
                np.concatenate(ids).astype(np.int64), np.concatenate(depth),
                np.concatenate(normal), np.concatenate(position), low)

    def _sphere_candidates(self, close: np.ndarray, rows: np.ndarray) -> int:
        """The candidates of the close pairs met by spheres (sets ``cand_*``)."""
        if not len(close):
            self._gaps = ()
            return self._no_candidates()
        sphere, other, pair, side_a, thr2, local, joints, r12, C = self._entries(close)
        W = (rows[joints] * r12).dot(_SUM3)  # the used spheres' centres, world
        d = W[local] - self.centres_world[other]
        e2 = np.einsum("ij,ij->i", d, d)
        keep = e2 < thr2
        self._gaps = (e2, keep, other, sphere, None, None)
        ka, kb = keep & side_a, keep & ~side_a
        a_pair, a_local, a_sphere = pair[ka], local[ka], sphere[ka]
        b_pair, b_local, b_sphere = pair[kb], local[kb], sphere[kb]
        nb = np.bincount(b_pair, minlength=C)
        reps = nb[a_pair]  # each kept sphere of side a meets the kept ones of its pair's side b
        total = int(reps.sum())
        if not total:
            return self._no_candidates()
        offs = np.arange(total) + np.repeat((np.cumsum(nb) - nb)[a_pair] - (np.cumsum(reps) - reps),
                                            reps)
        la, lb = np.repeat(a_local, reps), b_local[offs]
        ia, ib = np.repeat(a_sphere, reps), b_sphere[offs]
        diff = W[la] - W[lb]
        d2 = np.einsum("ij,ij->i", diff, diff)
        rsum = self.radius[ia] + self.radius[ib]
        self._gaps = (e2, keep, other, sphere, d2, rsum)
        within = np.flatnonzero(d2 < (rsum + self.margin) ** 2)
        if not len(within):
            return self._no_candidates()
        ids = ia[within].astype(np.int64) * self.s + ib[within]
        order = np.argsort(ids, kind="stable")
        within, ids = within[order], ids[order]
        a, b = ia[within], ib[within]
        dist = np.sqrt(d2[within])
        depth = rsum[within] - dist
        rb = self.radius[b]
        normal = diff[within]
        tiny = dist <= 1e-12 * (1.0 + rsum[within])
        if tiny.any():  # coincident centres: along the line of the geometries' centres
            normal[tiny] = self._fallback_normals(a[tiny], b[tiny])
            normal /= np.linalg.norm(normal, axis=1)[:, None]
        else:
            normal /= dist[:, None]
        self.cand_a, self.cand_b, self.cand_ids, self.cand_depth = a, b, ids, depth
        self.cand_normal = normal
        self.cand_position = W[lb[within]] + normal * (rb - depth / 2.0)[:, None]
        return len(within)

    def _no_candidates(self) -> int:
        self.clear()
        return 0

    def engage(self, v: np.ndarray, h: float, activation: float = 0.0,
               held: np.ndarray = _NO_IDS) -> int:
        """Of the last :meth:`narrow`'s candidates, the contacts: those touching, now or
        after a step ``h`` at the velocity ``v`` (the contact models' own test, depth > 0 or
        depth - h v_n > 0, v_n the relative normal velocity); those of ``held`` (the last
        step's contacts) while within ``activation`` of it (the model's margin: the rigid
        model keeps a resting contact in its problem so); the deepest :attr:`capacity` of
        them; their bases and relative Jacobian rows. Returns their number k (0: none).
        Pairs near but apart are left out: the feet's solve, and the trajectory, stay
        those without self-collision."""
        data = self._data
        a, b, n, p = self.cand_a, self.cand_b, self.cand_normal, self.cand_position
        ja, jb = self.sphere_joint[a], self.sphere_joint[b]
        depth = self.cand_depth
        margin = (np.where(np.isin(self.cand_ids, held), activation, 0.0)
                  if activation > 0.0 and len(held) else 0.0)
        touch = depth > -margin
        # those apart that the fastest closing (motion_weights' rate bound) cannot bring
        # into contact in the step stay out without their relative velocity
        maybe = ~touch & (depth + h * self._w_v.dot(np.abs(v)) > -margin)
        if maybe.any():
            twists = (self._support * v).dot(data.J.T)  # (njoints, 6): world twists at 0
            m = np.flatnonzero(maybe)
            dt, nm, pm = twists[ja[m]] - twists[jb[m]], n[m], p[m]
            # n . (dv + dw x p) = n . dv + (p x n) . dw
            vn = (np.einsum("ij,ij->i", nm, dt[:, :3])
                  + np.einsum("ij,ij->i", np.cross(pm, nm), dt[:, 3:]))
            touch[m] = depth[m] - h * vn > -(margin[m] if np.ndim(margin) else margin)
        on = np.flatnonzero(touch)
        if not len(on):
            self.clear()
            return 0
        if len(on) > self.capacity:  # the deepest, then back in the order of ids
            self.dropped += len(on) - self.capacity
            on = np.sort(on[np.lexsort((self.cand_ids[on], -depth[on]))[:self.capacity]])
        k = len(on)
        a, b, n, p, ja, jb = a[on], b[on], n[on], p[on], ja[on], jb[on]
        B = tangent_bases(n)
        C = twist_rows(B, p)
        J = C.reshape(-1, 6).dot(data.J).reshape(3, k, self.nv)
        J *= self._support[ja] - self._support[jb]
        self.k = k
        self.ids, self.sphere_a, self.sphere_b = self.cand_ids[on], a, b
        self.depth = depth[on]
        slot = np.full(self.capacity, -np.inf)
        slot[:k] = self.depth
        self.slot_depth = slot
        self.position, self.bases, self.J_cm = p, B, J
        return k

    def _fallback_normals(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Unit normals for spheres with coincident centres: from b's geometry's bounding
        centre to a's, else the world z axis."""
        c = self.centres_world
        out = c[self.sphere_geometry[a]] - c[self.sphere_geometry[b]]
        norm = np.linalg.norm(out, axis=1)
        out[norm <= 1e-12] = [0.0, 0.0, 1.0]
        return out

    def world_forces(self, force_g: np.ndarray) -> np.ndarray:
        """(k, 3) world forces on the first link of each contact (the second link gets
        the opposite) from basis coordinates (k, 3)."""
        return np.einsum("kij,kj->ki", self.bases, force_g)

    def signature(self) -> tuple:
        """What a snapshot of its contacts fits: (spheres, pairs)."""
        return (self.s, len(self.pa))

    def pair_links(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The links of each current contact: (first links, second links)."""
        ga, gb = self.sphere_geometry[self.sphere_a], self.sphere_geometry[self.sphere_b]
        return (tuple(self.link_names[g] for g in ga), tuple(self.link_names[g] for g in gb))


def _world(rows: np.ndarray, g: SelfGeometry) -> tuple[np.ndarray, np.ndarray]:
    """(rotation, translation) of geometry g in the world from the placement records."""
    rec = rows[g.joint]
    Rj = rec[:9].reshape(3, 3).T
    return Rj @ g.placement.rotation, Rj @ g.placement.translation + rec[9:12]


def carry(old_ids: np.ndarray, old_world: np.ndarray, new_ids: np.ndarray,
          bases: np.ndarray) -> np.ndarray:
    """Tangential rows (k, c, 2) of the contacts ``new_ids`` in their bases (k, 3, 3) from
    c world vectors each (m, c, 3) of the contacts ``old_ids`` (both ascending): each
    old vector turned onto the new tangent plane with its length kept (a contact's
    tangent plane turns with the links); zeros for new contacts."""
    k, c = len(new_ids), old_world.shape[1]
    out = np.zeros((k, c, 2))
    if not len(old_ids) or not k:
        return out
    if len(old_ids) == k and np.array_equal(old_ids, new_ids):  # the same contacts
        match, w = slice(None), old_world
    else:
        pos = np.minimum(np.searchsorted(old_ids, new_ids), len(old_ids) - 1)
        match = old_ids[pos] == new_ids
        if not match.any():
            return out
        w = old_world[pos[match]]
    t = np.einsum("kib,kci->kcb", bases[match][:, :, :2], w)
    length, projected = np.linalg.norm(w, axis=2), np.linalg.norm(t, axis=2)
    scale = np.divide(length, projected, out=np.zeros_like(length), where=projected > 0.0)
    out[match] = t * scale[:, :, None]
    return out


def to_world(rows: np.ndarray, bases: np.ndarray) -> np.ndarray:
    """(k, 3) world vectors of tangential rows (k, 2) in the bases (k, 3, 3)."""
    return np.einsum("kij,kj->ki", bases[:, :, :2], rows)


# ----------------------------------------------------------------------------
# Plain references
# ----------------------------------------------------------------------------


def reference_self_near(sc: SelfCollision, data: pin.Data) -> np.ndarray:
    """Plain broad phase: (P,) bool, the pairs whose bounding spheres (placed by
    ``data.oMi``) are within the margin."""
    out = []
    for a, b in zip(sc.pa, sc.pb):
        ga, gb = sc.geometries[a], sc.geometries[b]
        ca, cb = data.oMi[ga.joint].act(ga.centre), data.oMi[gb.joint].act(gb.centre)
        out.append(float(np.linalg.norm(ca - cb)) < ga.bound + gb.bound + sc.margin)
    return np.array(out, dtype=bool)


def reference_self_narrow(sc: SelfCollision, model: pin.Model, data: pin.Data,
                          q: np.ndarray) -> dict:
    """Plain narrow phase of every pair (close or not): {contact id: (depth, contact point
    (3,), basis (3, 3), relative Jacobian (3, nv) rows t1, t2, n)} for those within the
    margin: an exact pair's manifold (placed by ``data.oMi``), every two spheres of a
    pair met by spheres; each link's point Jacobian from pinocchio's joint Jacobian at
    ``q`` (LOCAL_WORLD_ALIGNED, shifted to the point)."""
    pin.computeJointJacobians(model, data, q)

    def point_jacobian(joint: int, p: np.ndarray) -> np.ndarray:
        Jj = pin.getJointJacobian(model, data, joint, pin.LOCAL_WORLD_ALIGNED)
        return Jj[:3] - pin.skew(p - data.oMi[joint].translation) @ Jj[3:]

    out = {}
    for pair, (ga, gb) in enumerate(zip(sc.pa, sc.pb)):
        if sc.exact_pair[pair]:
            A, Bg = sc.geometries[ga], sc.geometries[gb]
            Ma, Mb = data.oMi[A.joint] * A.placement, data.oMi[Bg.joint] * Bg.placement
            man = contact_manifold(A.convex, Ma.rotation, Ma.translation, Bg.convex,
                                   Mb.rotation, Mb.translation, sc.margin,
                                   full_within=FULL_WITHIN)
            for c, gap, pa, pb in zip(*(() if man is None else
                                       (man.codes, man.gap, man.point_a, man.point_b))):
                p = (pa + pb) / 2.0
                B = tangent_bases_reference(man.normal[None, :])[0]
                J = B.T @ (point_jacobian(A.joint, p) - point_jacobian(Bg.joint, p))
                ident = EXACT_ID | ((pair * 0x9E3779B97F4A7C15 ^ int(c)) & _ID_MASK)
                out[ident] = (-gap, p, B, J)
            continue
        for i in range(sc._first[ga], sc._first[ga + 1]):
            for j in range(sc._first[gb], sc._first[gb + 1]):
                ja, jb = int(sc.sphere_joint[i]), int(sc.sphere_joint[j])
                ca = data.oMi[ja].act(sc.r_local[i])
                cb = data.oMi[jb].act(sc.r_local[j])
                dist = float(np.linalg.norm(ca - cb))
                depth = sc.radius[i] + sc.radius[j] - dist
                if depth <= -sc.margin:
                    continue
                n = (ca - cb) / dist
                p = cb + n * (sc.radius[j] - depth / 2.0)
                B = tangent_bases_reference(n[None, :])[0]
                J = B.T @ (point_jacobian(ja, p) - point_jacobian(jb, p))
                out[i * sc.s + j] = (depth, p, B, J)
    return out


# ----------------------------------------------------------------------------
# Pairs touching at a pose, as an SRDF
# ----------------------------------------------------------------------------


def touching_pairs(sc: SelfCollision, model: pin.Model, q: np.ndarray) -> list[tuple[str, str]]:
    """The link pairs (sorted) whose self-collision spheres overlap at the configuration
    ``q`` of ``model`` (the stepping model the spheres were built on)."""
    data = new_data(model)
    pin.computeJointJacobians(model, data, q)
    if not (sc.any_near(data) and sc.narrow(data)):
        return []
    a, b = sc.sphere_geometry[sc.cand_a], sc.sphere_geometry[sc.cand_b]
    pairs = {tuple(sorted((sc.link_names[i], sc.link_names[j])))
             for i, j, d in zip(a, b, sc.cand_depth) if d > 0.0}
    sc.clear()
    return sorted(pairs)


def srdf_text(robot_name: str, pairs, reason: str = "Default", comment: str = "") -> str:
    """An SRDF document disabling the link ``pairs`` (``reason`` as MoveIt writes it:
    "Default" for pairs in collision at the default pose)."""
    from xml.sax.saxutils import quoteattr

    lines = ['<?xml version="1.0" encoding="UTF-8"?>']
    if comment:
        lines.append(f"<!-- {comment.replace('--', '-')} -->")
    lines.append(f"<robot name={quoteattr(robot_name)}>")
    lines += [f"  <disable_collisions link1={quoteattr(a)} link2={quoteattr(b)} "
              f"reason={quoteattr(reason)}/>" for a, b in pairs]
    lines.append("</robot>")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------
# Building
# ----------------------------------------------------------------------------


def build_self_collision(model: pin.Model, robot_model: pin.Model, by_link: dict, cfg,
                         notes: list[str], free_root: bool,
                         only_with: set[str] | None = None,
                         between: dict | None = None) -> SelfCollision:
    """The :class:`SelfCollision` of a configuration with ``collision.self_collision``.
    ``by_link``: {link: pinocchio geometry objects} of the links that collide; ``model``
    the stepping model (its joints are the robot model's; ``free_root``: its joint 1 is a
    floating base); ``cfg``: the ``collision`` group; ``notes`` gets a sentence for the
    geometries left out; ``only_with``: keep only the pairs with a link of these names
    (free objects, without ``collision.self_collision``); ``between``: {link: its robot}
    (several robots in one physics): the pairs of two robots' links are kept too."""
    from ..robot import resolve_data_path

    links = {f.name for f in robot_model.frames if f.type == pin.FrameType.BODY}
    disabled: frozenset = frozenset()
    if cfg.srdf_path:
        path = resolve_data_path(cfg.srdf_path, "collision.srdf_path", "SRDF")
        disabled = srdf_disabled_pairs(path, links)
    geometries, flat = self_geometries(by_link, cfg.self_spheres)
    if flat:
        notes.append(f"self-collision: no volume, left out: {', '.join(flat)}")
    pa, pb = geometry_pairs(model, geometries, disabled)
    if only_with is not None:  # free objects without self-collision: their pairs only
        other = between or {}
        keep = np.array([geometries[a].link in only_with or geometries[b].link in only_with
                         or other.get(geometries[a].link, -1) != other.get(geometries[b].link,
                                                                          -1)
                         for a, b in zip(pa, pb)], dtype=bool)
        pa, pb = pa[keep], pb[keep]
    return SelfCollision(model, geometries, pa, pb, cfg.margin, free_root=free_root)
