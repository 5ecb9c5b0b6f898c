"""Whole-body collision: the links' URDF ``<collision>`` geometry against the ground
and the terrain, through the contact model the feet already use.

**Geometry to points.** The collision geometry is loaded with pinocchio's geometry
model (``buildGeomFromUrdf``, COLLISION; meshes through coal) and every geometry
becomes a few contact points with a radius, fixed in its parent joint's frame:

* sphere: its centre, with its radius;
* capsule: spheres of its radius along its axis (the ends, and one at least every
  ``collision.point_spacing``);
* cylinder: points on its two rims (8 per rim at least, and enough that the rim's
  polygon is within 1 mm of the circle, as ``max_points`` allows);
* box: its 8 corners and points along its edges (at least every ``point_spacing``);
* mesh: the vertices of its convex hull (scipy), reduced to ``collision.max_points``:
  those extreme along as many directions spread over the sphere (what a plane of
  each of those normals touches first), topped up by farthest-point sampling.

A point with a radius touches at its centre minus radius times the terrain's
normal, as a sphere foot does. Against a plane the lowest point of a sphere, a
capsule, a cylinder or a box is one of these; a mesh's sampled hull sinks
between its samples (iCub's, at 32 points: 5 mm typically, 12 mm at worst over
every direction).

**Broad phase.** Each geometry has a bounding box (axes of its joint's frame) and
a bounding sphere. Once per step, from the joint placements the step's ABA
already left in pinocchio's data, one small product gives every joint's
``R^T n`` and ``n . t``, and one more, of ``[those, their absolute values, 1]``
with a constant matrix, the height of every box's lowest corner over the ground
plane (the box centre's height and its half extent along the normal are linear
in them): five numpy calls on preallocated buffers, no allocation. With boxes
or a heightfield, one terrain query of the bounding spheres' centres. Only when
a box (sphere) comes within ``collision.margin`` of the terrain are its points
placed and queried (the narrow phase), and only points within the margin get
Jacobian rows.

**The contact.** While no collision point is within the margin, the contact
model solves the feet alone, exactly as without collision. Otherwise a second
instance of the same model solves the feet and the near collision points
together, in one problem (:class:`MergedPoints` presents them as one point set;
the collision points' rows come after the feet's). The collision points' state
(ground deformation, last forces and positions) lives in
:class:`WholeBodyContact`'s snapshot, so ``Simulator.get_state`` /
``set_state`` continue bit-identically.

Self-collision (the links against each other, ``collision.self_collision``, off by
default) lives in :mod:`wb_sim.self_collision`: its sphere pairs join the same merged
problem after the collision points (:class:`MergedPoints`), and
:class:`WholeBodyContact` carries their state.

:func:`reference_near`, :func:`reference_narrow` are plain per-geometry and
per-point versions of the broad and narrow phases (the tests hold the fast ones
to them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .contact.points import ContactPoints, Ground, _placement_view, twist_rows
from .errors import ConfigError, ModelError, WbSimError
from .parameters import Param
from .terrain import tangent_bases, tangent_bases_reference

#: the ``collision.*`` parameters
PARAMETERS: tuple[Param, ...] = (
    Param("collision.enabled", "bool", False, "",
          "Whole-body collision: the links' URDF <collision> geometry (boxes, spheres, "
          "cylinders, capsules; meshes through their convex hulls) meets the ground and the "
          "terrain through the contact model, as contact points with a radius. false: only the "
          "contact surfaces touch; the other links pass through the ground."),
    Param("collision.links", "strs", [], "",
          "Links that collide ([] = every link with <collision> geometry except the links "
          "rigidly attached to a contact surface's frame, and collision.exclude_links; in "
          "self-collision those links too: the feet meet each other)."),
    Param("collision.exclude_links", "strs", [], "",
          "Links left out of the default set of collision.links (ground and self-collision)."),
    Param("collision.max_points", "int", 32, "",
          "Most contact points per collision geometry: a mesh's convex hull is reduced to it "
          "(its vertices extreme along as many spread directions); boxes, cylinders and "
          "capsules use what point_spacing asks, up to it.", lo=4, hi=256),
    Param("collision.point_spacing", "float", 0.1, "m",
          "Box edges and capsule axes get a contact point at least every this far (cylinder "
          "rims get 8 or more, within 1 mm of the circle).", lo=0.0, lo_open=True),
    Param("collision.margin", "float", 0.02, "m",
          "Broad phase: geometries whose bounding box (sphere, on terrain) and points are "
          "farther than this from the terrain are skipped for the step. It must exceed the "
          "farthest a link moves in one step (0.02 m: 20 m/s at 1 kHz, 5 m/s at 250 Hz). "
          "Self-collision: pairs of geometries whose bounding spheres, and spheres, are farther "
          "apart than this are skipped.",
          lo=0.0, lo_open=True),
    Param("collision.self_collision", "bool", False, "",
          "Self-collision: the links' <collision> geometry, as spheres inside it "
          "(collision.self_spheres), meets the other links' through the contact model, with "
          "equal and opposite forces on the two links. Never paired: two links rigidly "
          "attached or joined by one joint, and the pairs collision.srdf_path disables. "
          "Independent of collision.enabled. false: the links pass through each other."),
    Param("collision.srdf_path", "str", "", "",
          "SRDF file whose <disable_collisions link1= link2=> pairs self-collision leaves out "
          "('' = none): a path (relative: to the YAML file that sets it) or "
          "'example-robot-data:<path under robots/>', as urdf_path; read only with "
          "collision.self_collision. A link it names that the model lacks is an error."),
    Param("collision.self_spheres", "int", 12, "",
          "Self-collision: most spheres per collision geometry. Spheres and capsules are exact "
          "(a capsule's surface dips at most 1 mm between its spheres where this allows); "
          "boxes, cylinders and meshes (their convex hulls) get spheres inscribed in them, "
          "which round their edges and corners off.", lo=1, hi=64),
)

#: points on each cylinder rim at least
RIM_POINTS = 8
#: a cylinder rim's polygon is at most this far inside its circle (while max_points
#: allows), m
RIM_SAGITTA = 1.0e-3


# ----------------------------------------------------------------------------
# Geometry -> points
# ----------------------------------------------------------------------------


def farthest_points(P: np.ndarray, k: int, first: int | None = None) -> np.ndarray:
    """Indices of ``k`` of the points P (n, 3) by farthest-point sampling: first the
    points ``[0, first)`` if ``first`` is given (else the point farthest from their
    centroid), then each time the one farthest from those chosen (deterministic:
    ties go to the lowest index). All of them if n <= k."""
    n = len(P)
    if n <= k:
        return np.arange(n)
    if first:
        chosen = list(range(min(first, k)))
        d = np.min(np.linalg.norm(P[:, None] - P[None, chosen], axis=2), axis=1)
    else:
        chosen = [int(np.argmax(np.linalg.norm(P - P.mean(axis=0), axis=1)))]
        d = np.linalg.norm(P - P[chosen[0]], axis=1)
    for _ in range(k - len(chosen)):
        i = int(np.argmax(d))
        chosen.append(i)
        d = np.minimum(d, np.linalg.norm(P - P[i], axis=1))
    return np.array(chosen)


def fibonacci_directions(k: int) -> np.ndarray:
    """(k, 3) unit vectors spread evenly over the sphere (a Fibonacci lattice)."""
    i = np.arange(k) + 0.5
    polar = np.arccos(1.0 - 2.0 * i / k)
    azimuth = math.pi * (1.0 + math.sqrt(5.0)) * i
    return np.column_stack([np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar),
                            np.cos(polar)])


def hull_sample(H: np.ndarray, k: int) -> np.ndarray:
    """Indices of at most ``k`` of the hull vertices H (n, 3): those extreme along ``k``
    directions spread over the sphere (what a plane of each of those normals would
    touch), topped up to ``k`` by farthest-point sampling."""
    if len(H) <= k:
        return np.arange(len(H))
    extreme = np.unique(np.argmax((H - H.mean(axis=0)) @ fibonacci_directions(k).T, axis=0))
    order = np.concatenate([extreme, np.setdiff1d(np.arange(len(H)), extreme)])
    return np.sort(order[farthest_points(H[order], k, first=len(extreme))])


def _hull_vertices(V: np.ndarray) -> np.ndarray:
    from scipy.spatial import ConvexHull, QhullError
    V = np.unique(np.asarray(V, dtype=float), axis=0)
    for options in ("", "QJ"):
        try:
            return V[ConvexHull(V, qhull_options=options or None).vertices]
        except (QhullError, ValueError):
            continue
    return V  # flat or degenerate: every distinct vertex


def _edge_points(a: np.ndarray, b: np.ndarray, spacing: float) -> list[np.ndarray]:
    """Points strictly between a and b, at most ``spacing`` apart."""
    m = int(math.ceil(np.linalg.norm(b - a) / spacing - 1e-9))
    return [a + (b - a) * (i / m) for i in range(1, m)]


def geometry_points(geometry, link: str, max_points: int,
                    spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """(points (k, 3) in the geometry's frame, radius (k,)) of a coal collision
    geometry; ModelError naming the link for a kind that is not supported."""
    import coal

    if isinstance(geometry, coal.Sphere):
        return np.zeros((1, 3)), np.array([float(geometry.radius)])
    if isinstance(geometry, coal.Capsule):
        r, hl = float(geometry.radius), float(geometry.halfLength)
        count = min(max(2, int(math.ceil(2 * hl / spacing - 1e-9)) + 1), max_points)
        z = np.linspace(-hl, hl, count)
        return np.column_stack([np.zeros(count), np.zeros(count), z]), np.full(count, r)
    if isinstance(geometry, coal.Cylinder):
        r, hl = float(geometry.radius), float(geometry.halfLength)
        # enough points that the polygon is within RIM_SAGITTA of the circle
        need = math.pi / math.acos(max(-1.0, 1.0 - RIM_SAGITTA / r)) if r > 0 else 1.0
        k = min(max(RIM_POINTS, int(math.ceil(need - 1e-9))), max(max_points // 2, 2))
        a = 2 * math.pi * np.arange(k) / k
        rim = np.column_stack([r * np.cos(a), r * np.sin(a)])
        P = np.vstack([np.column_stack([rim, np.full(k, -hl)]),
                       np.column_stack([rim, np.full(k, hl)])])
        return P, np.zeros(len(P))
    if isinstance(geometry, coal.Box):
        h = np.asarray(geometry.halfSide, dtype=float)
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
        corners = signs * h
        pts = list(corners)
        for i in range(8):
            for j in range(i + 1, 8):
                if np.count_nonzero(signs[i] != signs[j]) == 1:  # an edge
                    pts += _edge_points(corners[i], corners[j], spacing)
        P = np.array(pts)
        P = P[farthest_points(P, max_points, first=8)]  # the corners first
        return P, np.zeros(len(P))
    vertices = mesh_vertices(geometry, link, "boxes, spheres, cylinders, capsules and meshes")
    hull = _hull_vertices(vertices)
    P = hull[hull_sample(hull, max_points)]
    return P, np.zeros(len(P))


def mesh_vertices(geometry, link: str, supported: str, feature: str = "") -> np.ndarray:
    """The vertices (n, 3) of a mesh or convex collision geometry; ModelError naming
    the link for any other kind (``supported``: the kinds the caller handles, for
    the message; ``feature``: what does not support it, e.g. " by self-collision")."""
    vertices = None
    if hasattr(geometry, "vertices") and hasattr(geometry, "num_vertices"):  # BVH meshes
        vertices = np.asarray(geometry.vertices(), dtype=float)
    elif hasattr(geometry, "points") and hasattr(geometry, "num_points"):  # coal.Convex
        vertices = np.asarray(geometry.points(), dtype=float)
    if vertices is None:
        raise ModelError(f"link '{link}': collision geometry of kind {type(geometry).__name__} "
                         f"is not supported{feature} ({supported} are); leave the link out "
                         f"with collision.exclude_links")
    if len(vertices) == 0 or not np.isfinite(vertices).all():
        raise ModelError(f"link '{link}': its collision mesh has no finite vertices")
    return vertices


@dataclass(frozen=True)
class LinkGeometry:
    """The contact points of one collision geometry, in its parent joint's frame."""

    link: str
    name: str  #: the geometry's name (pinocchio's)
    joint: int  #: pinocchio joint id
    points: np.ndarray  #: (k, 3) m, joint frame
    radius: np.ndarray  #: (k,) m
    centre: np.ndarray  #: (3,) centre of the bounding box (and sphere), joint frame
    half: np.ndarray  #: (3,) half sizes of the bounding box, axes of the joint frame, m
    bound: float  #: bounding sphere radius (points and their radii inside), m
    shape: object = None  #: the coal geometry the points come from
    placement: pin.SE3 | None = None  #: joint <- geometry


def geometry_by_link(robot, config) -> tuple[pin.GeometryModel, dict[str, list]]:
    """(the geometry model, {link: its geometry objects}) of the URDF's ``<collision>``
    elements, every link with some (the objects belong to the geometry model: keep it
    while using them); checks ``collision.links`` and ``collision.exclude_links``
    against the model (ModelError naming the link)."""
    from .robot import package_share_dir, resolve_mesh_uris
    import re

    cfg = config.collision
    model = robot.model
    xml = resolve_mesh_uris(robot.urdf_xml, robot.urdf_file)
    package_dirs = []
    for package in sorted(set(re.findall(r'filename\s*=\s*["\']package://([^/"\']+)/', xml))):
        try:
            package_dirs.append(str(package_share_dir(package).parent))
        except WbSimError:
            pass  # pinocchio's own search (ROS_PACKAGE_PATH, AMENT_PREFIX_PATH) may know it
    try:
        gmodel = pin.buildGeomFromUrdfString(model, xml, pin.GeometryType.COLLISION,
                                             package_dirs=package_dirs)
    except (RuntimeError, ValueError) as e:
        origin = f"'{robot.urdf_file}'" if robot.urdf_file else "robot_description"
        key = "collision.enabled" if cfg.enabled else "collision.self_collision"
        raise ModelError(f"{key}: cannot load the collision geometry of {origin}: {e}") from e
    links = {f.name for f in model.frames if f.type == pin.FrameType.BODY}
    by_link: dict[str, list] = {}
    for g in gmodel.geometryObjects:
        by_link.setdefault(model.frames[g.parentFrame].name, []).append(g)
    for key in ("collision.links", "collision.exclude_links"):
        for name in getattr(cfg, key.partition(".")[2]):
            if name not in links:
                raise ModelError(f"parameter '{key}': link '{name}' is not in the model")
            if key == "collision.links" and name not in by_link:
                raise ModelError(f"parameter '{key}': link '{name}' has no <collision> geometry "
                                 f"in the URDF")
    return gmodel, by_link


def self_collision_links(config, by_link: dict) -> dict[str, list]:
    """The links of :func:`geometry_by_link` that self-collision uses: ``collision.links``,
    or every link but ``collision.exclude_links`` (the contact surfaces' too)."""
    cfg = config.collision
    names = cfg.links if cfg.links else [n for n in by_link if n not in cfg.exclude_links]
    return {name: by_link[name] for name in names}


def collision_geometries(robot, config, surface_joints, by_link: dict | None = None
                         ) -> list[LinkGeometry]:
    """The collision geometries of the links ``collision.*`` selects, as points.
    ``surface_joints``: joint ids of the contact surfaces' frames (their links are
    left out of the default set); ``by_link``: :func:`geometry_by_link`'s if already loaded."""
    cfg = config.collision
    if by_link is None:
        gmodel, by_link = geometry_by_link(robot, config)  # gmodel keeps the objects alive
    if cfg.links:
        chosen = list(cfg.links)
    else:
        chosen = [name for name, gs in by_link.items()
                  if name not in cfg.exclude_links
                  and not any(g.parentJoint in surface_joints for g in gs)]
    out = []
    for name in chosen:
        for g in by_link[name]:
            if g.parentJoint == 0:  # welded to the world: it never moves
                continue
            P, r = geometry_points(g.geometry, name, cfg.max_points, cfg.point_spacing)
            M = g.placement  # joint <- geometry
            Pj = P @ M.rotation.T + M.translation
            lo, hi = (Pj - r[:, None]).min(axis=0), (Pj + r[:, None]).max(axis=0)
            c = (lo + hi) / 2.0
            bound = float(np.max(np.linalg.norm(Pj - c, axis=1) + r))
            out.append(LinkGeometry(name, g.name, int(g.parentJoint), Pj, r, c, (hi - lo) / 2.0,
                                    bound, g.geometry, pin.SE3(M)))
    return out


# ----------------------------------------------------------------------------
# Broad and narrow phase
# ----------------------------------------------------------------------------


class CollisionPoints:
    """The collision points of all geometries, with the broad and narrow phases.

    Attributes (G geometries, m points, grouped by geometry):
        geometries: the G :class:`LinkGeometry`.
        m: number of points; point_geometry (m,), point_joint (m,), r_local (m, 3),
            radius (m,).
        near: (G,) bool, geometries the last broad phase found within the margin.
        candidates: (kc,) indices of the points within the margin after the last
            narrow phase; depth (m,) their penetration (-inf for the others).
        position: (kc, 3) world contact points of the candidates; bases (kc, 3, 3)
            columns (t1, t2, n); J_cm (3, kc, nv) their Jacobian, component-major.
    """

    def __init__(self, model: pin.Model, geometries: list[LinkGeometry], ground: Ground,
                 terrain, margin: float):
        self.model = model
        self.geometries = geometries
        self.ground, self.terrain, self.margin = ground, terrain, margin
        G = len(geometries)
        self.link_names = tuple(g.link for g in geometries)
        counts = [len(g.points) for g in geometries]
        self.m = int(sum(counts))
        self.point_geometry = np.repeat(np.arange(G), counts).astype(int)
        self.geometry_joint = np.array([g.joint for g in geometries], dtype=int)
        self.point_joint = self.geometry_joint[self.point_geometry]
        self.r_local = np.vstack([g.points for g in geometries]) if G else np.zeros((0, 3))
        self.radius = np.concatenate([g.radius for g in geometries]) if G else np.zeros(0)
        self.joint_ids = np.unique(self.geometry_joint)
        self.nv = model.nv
        njoints = model.njoints
        self._basis = np.column_stack([*ground.tangent_basis(), ground.normal])
        #: (3, 9): p @ it gives [p x b_0, p x b_1, p x b_2] (b_c the basis' columns)
        self._skew_basis = np.hstack([pin.skew(self._basis[:, c]) for c in range(3)])
        n, o = ground.normal, ground.origin
        # the plane's broad phase. For joint j, u_j = R_j^T n and n . t_j are the columns of
        # U = N^T rec^T (4, njoints), rec the (njoints, 12) placement records (rotation
        # column-major, then translation). Geometry g on joint j has its box's centre at
        # height u_j . c_g + n . t_j and its half extent along the normal is
        # sum_a e_ga |u_ja|: both linear in W = [U, |U[:3]|, 1], so one product h = W @ M
        # gives every box's lowest corner's height minus the plane's offset and the margin
        N = np.zeros((12, 4))
        for a in range(3):
            N[3 * a:3 * a + 3, a] = n  # record[3 a + b] = R[b, a]
        N[9:12, 3] = n  # record[9 + b] = t[b]
        self._NT = N.T.copy()
        nj = njoints
        M = np.zeros((7 * nj + 1, G))
        for k, g in enumerate(geometries):
            j = g.joint
            for a in range(3):
                M[a * nj + j, k] = g.centre[a]
                M[(4 + a) * nj + j, k] = -g.half[a]
            M[3 * nj + j, k] = 1.0
        M[7 * nj, :] = -(float(n @ o) + margin)
        self._M = M
        self._W = np.zeros(7 * nj + 1)
        self._W[-1] = 1.0
        self._U = self._W[:4 * nj].reshape(4, nj)
        self._U3 = self._U[:3]
        self._absU = self._W[4 * nj:7 * nj].reshape(3, nj)
        self._heights = np.zeros(G)
        self._below = np.zeros(G)
        self._zeros = np.zeros(G)
        # the terrain's: centres (3G,) = Mc @ x, x the (njoints * 12) placement records
        Mc = np.zeros((3 * G, 12 * njoints))
        for k, g in enumerate(geometries):
            base = 12 * g.joint
            for a in range(3):
                for b in range(3):
                    Mc[3 * k + b, base + 3 * a + b] = g.centre[a]
            for b in range(3):
                Mc[3 * k + b, base + 9 + b] = 1.0
        self._Mc = Mc
        self.bound = np.array([g.bound for g in geometries])
        self._bound_margin = self.bound + margin
        # dofs that move each joint: support[j] (nv,) for every joint id
        support = np.zeros((njoints, model.nv))
        for j in range(1, njoints):
            for a in model.supports[j]:
                if a > 0:
                    support[j, model.idx_vs[a]:model.idx_vs[a] + model.nvs[a]] = 1.0
        self._support = support
        self._bound_to = None
        self.near = np.zeros(G, dtype=bool)
        self.clear()

    def clear(self) -> None:
        """No point within the margin (the state of a quiet step)."""
        self.candidates = np.zeros(0, dtype=int)
        self.depth = np.full(self.m, -np.inf)
        self.position = np.zeros((0, 3))
        self.bases = np.zeros((0, 3, 3))
        self.J_cm = np.zeros((3, 0, self.nv))

    def _bind(self, data: pin.Data) -> None:
        rows = _placement_view(data, np.arange(self.model.njoints))
        self._rows = rows
        self._bound_to = data

    def _records(self, data: pin.Data) -> np.ndarray:
        """(njoints, 12) placement records of ``data`` (a view where possible)."""
        if data is not self._bound_to:
            self._bind(data)
        if self._rows is not None:
            return self._rows
        return np.array([np.concatenate([M.rotation.T.reshape(-1), M.translation])
                         for M in data.oMi])

    def any_near(self, data: pin.Data) -> bool:
        """The broad phase: whether a geometry's bounding sphere is within the margin
        of the terrain, from the joint placements in ``data``; sets :attr:`near` only
        when one is. On the plane it allocates nothing."""
        if not len(self.geometries):
            return False
        if data is not self._bound_to:
            self._bind(data)
        if self.terrain is None:
            # five calls into preallocated buffers: no allocation (numpy's reductions allocate
            # scratch memory, so "any below" is a dot product of the clipped heights)
            np.dot(self._NT, self._records(data).T, out=self._U)
            np.abs(self._U3, out=self._absU)
            h = self._W.dot(self._M, out=self._heights)  # lowest corner - offset - margin
            below = np.minimum(h, self._zeros, out=self._below)
            if not below.dot(below) > 0.0:
                return False
            self.near = h < 0.0
            return True
        centres = self._Mc.dot(self._records(data).reshape(-1)).reshape(-1, 3)
        sdf, _ = self.terrain.query(centres)
        near = sdf < self._bound_margin
        if not near.any():
            return False
        self.near = near
        return True

    def narrow(self, data: pin.Data) -> int:
        """Places the points of the near geometries, queries the terrain, and for the
        points within the margin computes contact points, bases and Jacobian rows.
        Returns the number of such points (0: the feet solve alone)."""
        rows = self._records(data)
        idx = np.flatnonzero(self.near[self.point_geometry])
        rec = rows[self.point_joint[idx]]  # (k, 12)
        r = self.r_local[idx]
        P = (rec[:, 0:3] * r[:, 0:1] + rec[:, 3:6] * r[:, 1:2] + rec[:, 6:9] * r[:, 2:3]
             + rec[:, 9:12])
        if self.terrain is None:
            sdf = (P - self.ground.origin) @ self.ground.normal
            normals = None
        else:
            sdf, normals = self.terrain.query(P)
        depth = self.radius[idx] - sdf
        keep = depth > -self.margin
        self.depth = np.full(self.m, -np.inf)
        if not keep.any():
            self.clear()
            return 0
        cand = idx[keep]
        self.depth[cand] = depth[keep]
        self.candidates = cand
        Pk = P[keep]
        k = len(cand)
        # C (3, k, 6): row c of point i is [b_c, p_i x b_c] (its velocity along b_c is
        # C @ the world-frame joint twist)
        if normals is None:  # one basis: p x b_c = P @ skew(b_c) for all points at once
            pos = Pk - self.radius[cand][:, None] * self.ground.normal
            self.bases = np.broadcast_to(self._basis, (k, 3, 3))
            C = np.empty((3, k, 6))
            C[:, :, :3] = self._basis.T[:, None, :]
            C[:, :, 3:] = pos.dot(self._skew_basis).reshape(k, 3, 3).transpose(1, 0, 2)
        else:
            nrm = normals[keep]
            pos = Pk - self.radius[cand][:, None] * nrm
            self.bases = tangent_bases(nrm)
            C = twist_rows(self.bases, pos)
        self.position = pos
        J = C.reshape(-1, 6).dot(data.J).reshape(3, k, self.nv)
        J *= self._support[self.point_joint[cand]]
        self.J_cm = J
        return k

    def world_forces(self, force_g: np.ndarray) -> np.ndarray:
        """(kc, 3) world forces of the candidates from ground coordinates (kc, 3)."""
        return np.einsum("kij,kj->ki", self.bases, force_g)


def reference_near(points: CollisionPoints, data: pin.Data) -> np.ndarray:
    """Plain broad phase: per geometry, on the plane the height of the lowest of its
    bounding box's 8 corners (placed by ``data.oMi``), with terrain its bounding
    sphere's signed distance; (G,) bool, near within the margin."""
    out = []
    signs = [np.array([sx, sy, sz]) for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    for g in points.geometries:
        M = data.oMi[g.joint]
        if points.terrain is None:
            d = min(float(points.ground.normal @ (M.act(g.centre + s * g.half)
                                                  - points.ground.origin)) for s in signs)
        else:
            d = float(points.terrain.query(M.act(g.centre)[None, :])[0][0]) - g.bound
        out.append(d < points.margin)
    return np.array(out, dtype=bool)


def reference_narrow(points: CollisionPoints, model: pin.Model, data: pin.Data, q: np.ndarray):
    """Plain narrow phase of every point (near or not): {point index: (depth, contact
    point (3,), basis (3, 3), Jacobian (3, nv) rows t1, t2, n)} for the points within
    the margin, each point's Jacobian from pinocchio's joint Jacobian at ``q``
    (LOCAL_WORLD_ALIGNED, shifted to the point)."""
    pin.computeJointJacobians(model, data, q)
    out = {}
    for i in range(points.m):
        j = int(points.point_joint[i])
        c = data.oMi[j].act(points.r_local[i])
        if points.terrain is None:
            sdf = float(points.ground.normal @ (c - points.ground.origin))
            n = np.asarray(points.ground.normal, dtype=float)
            B = points._basis
        else:
            s, nn = points.terrain.query(c[None, :])
            sdf, n = float(s[0]), nn[0]
            B = tangent_bases_reference(nn)[0]
        depth = points.radius[i] - sdf
        if depth <= -points.margin:
            continue
        p = c - points.radius[i] * n
        Jj = pin.getJointJacobian(model, data, j, pin.LOCAL_WORLD_ALIGNED)
        Jp = Jj[:3] - pin.skew(p - data.oMi[j].translation) @ Jj[3:]
        out[i] = (depth, p, B, B.T @ Jp)
    return out


# ----------------------------------------------------------------------------
# The feet and the near collision points as one point set
# ----------------------------------------------------------------------------


class MergedPoints:
    """The contact surfaces' points (first), the collision points (after them) and the
    self-collision slots (last, :attr:`SelfCollision.capacity` of them, with
    ``collision.self_collision``) as the one point set a contact model solves: the
    subset of :class:`ContactPoints`' interface the models use. Collision points outside
    the margin and free self-collision slots have depth -inf (they never enter a solve)
    and no Jacobian rows."""

    def __init__(self, feet: ContactPoints, coll: CollisionPoints, selfc=None):
        self.feet, self.coll, self.selfc = feet, coll, selfc
        self.nf = feet.n
        self.ns0 = feet.n + coll.m  #: the first self-collision slot
        self.ns = selfc.capacity if selfc is not None else 0
        self.n = self.ns0 + self.ns
        self.model = feet.model
        self.nv = feet.nv
        self.joint_ids = next(ids for ids in (feet.joint_ids, coll.joint_ids,
                                              selfc.joint_ids if selfc is not None else [1])
                              if len(ids))
        #: the rigid model's impulse unit is one point's share of the weight: the feet's
        self.reference_count = max(feet.n, 1)
        self.depth = np.full(self.n, -np.inf)
        self._row = np.full(coll.m, -1, dtype=int)
        self._k_self = 0

    def refresh(self) -> None:
        """After the feet's update and the collision and self-collision narrow phases."""
        parts = [self.feet.depth, self.coll.depth]
        if self.selfc is not None:
            parts.append(self.selfc.slot_depth)
            self._k_self = self.selfc.k
        self.depth = np.concatenate(parts)
        self._row = np.full(self.coll.m, -1, dtype=int)
        self._row[self.coll.candidates] = np.arange(len(self.coll.candidates))

    def normal_velocity(self, v: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n)
        if self.nf:
            out[:self.nf] = self.feet.normal_velocity(v)
        out[self.nf + self.coll.candidates] = self.coll.J_cm[2].dot(v)
        if self._k_self:
            out[self.ns0:self.ns0 + self._k_self] = self.selfc.J_cm[2].dot(v)
        return out

    def jacobian_component_major(self, idx: np.ndarray | None = None) -> np.ndarray:
        """(3k, nv) rows t1 of all, t2 of all, n of all, for the points ``idx`` (sorted;
        collision points among them must be within the margin, self-collision slots in
        use); for all points (``None``, the plain references' call) the rows of the
        others are zero."""
        if idx is None:
            J = np.zeros((3, self.n, self.nv))
            if self.nf:
                J[:, :self.nf] = self.feet.jacobian_component_major(
                    np.arange(self.nf)).reshape(3, self.nf, self.nv)
            J[:, self.nf + self.coll.candidates] = self.coll.J_cm
            if self._k_self:
                J[:, self.ns0:self.ns0 + self._k_self] = self.selfc.J_cm
            return J.reshape(-1, self.nv)
        idx = np.asarray(idx)
        f = idx[idx < self.nf]
        c = self._row[idx[(idx >= self.nf) & (idx < self.ns0)] - self.nf]
        if np.any(c < 0):
            raise AssertionError("a collision point outside the margin entered the solve")
        blocks = [self.feet.jacobian_component_major(f).reshape(3, len(f), self.nv),
                  self.coll.J_cm[:, c]]
        if self.ns:
            sl = idx[idx >= self.ns0] - self.ns0
            if np.any(sl >= self._k_self):
                raise AssertionError("a free self-collision slot entered the solve")
            blocks.append(self.selfc.J_cm[:, sl])
        return np.concatenate(blocks, axis=1).reshape(-1, self.nv)

    def jacobian_g(self, idx: np.ndarray | None = None) -> np.ndarray:
        """(3k, nv) the same rows point-major (t1, t2, n per point)."""
        J = self.jacobian_component_major(idx)
        k = J.shape[0] // 3
        return J.reshape(3, k, self.nv).transpose(1, 0, 2).reshape(-1, self.nv)


# ----------------------------------------------------------------------------
# The contact model with collision
# ----------------------------------------------------------------------------


class WholeBodyContact:
    """The contact model the simulator talks to with ``collision.enabled`` or
    ``collision.self_collision``: the feet's model (``feet``) while no collision point
    and no pair of self-collision spheres is within the margin, else a second instance
    (``merged``) over :class:`MergedPoints`. Its interface is the
    :class:`~wb_sim.contact.ContactModel` one for the contact surfaces' points (depth,
    status, forces and state are theirs), plus the collision points' and the
    self-contacts' readings."""

    def __init__(self, feet_model, merged_model, collision: CollisionPoints,
                 merged_points: MergedPoints, data: pin.Data, self_collision=None):
        self.feet, self.merged = feet_model, merged_model
        self.collision = collision
        #: wb_sim.self_collision.SelfCollision, or None
        self.self_collision = self_collision
        self.points = merged_points
        self._data = data
        self.name = feet_model.name
        self.PARAMETERS = feet_model.PARAMETERS
        self.LIVE_PARAMETERS = feet_model.LIVE_PARAMETERS
        self.max_penetration = feet_model.max_penetration
        self.nf = merged_points.nf
        self.initial_state()

    # -- state
    def initial_state(self) -> np.ndarray:
        u = self.feet.initial_state()
        self.merged.initial_state()
        self._merged_last = False
        self._uc = np.zeros((2, self.collision.m))
        self._contacts = _NO_CONTACTS
        self._self = _NO_SELF
        return u

    def clear_deformation(self) -> None:
        """The collision points' ground deformation and the self-contacts' deformation
        back to zero (the readings stay): a reset's trial step must not leave its
        deformation, as the feet's is dropped."""
        self._uc = np.zeros((2, self.collision.m))
        if self._self is not _NO_SELF:
            ids, _, ws_t, ws_rest, readings = self._self
            self._self = (ids, np.zeros((len(ids), 3)), ws_t, ws_rest, readings)

    def snapshot(self) -> tuple:
        return (self.feet.snapshot(), self.merged.snapshot(), self._merged_last, self._uc,
                self._contacts, self._self)

    def restore(self, snap: tuple) -> None:
        feet, merged, self._merged_last, self._uc, self._contacts, self._self = snap
        self.feet.restore(feet)
        self.merged.restore(merged)

    # -- readings of the contact surfaces
    @property
    def _last(self):
        return self.merged if self._merged_last else self.feet

    @property
    def depth(self) -> np.ndarray:
        return self._last.depth[:self.nf]

    @property
    def status(self) -> np.ndarray:
        return self._last.status[:self.nf]

    @property
    def max_depth(self) -> float:
        return self._last.max_depth if (self.nf or self._merged_last) else -math.inf

    def deepest(self, surface_names, surface_of_point) -> tuple[str, float]:
        """(what: "contact surface 'x'", "link 'y'" or "links 'a' and 'b'", depth m) of
        the deepest point."""
        depth = np.asarray(self._last.depth)
        worst = int(np.argmax(depth))
        if worst < self.nf:
            return f"contact surface '{surface_names[surface_of_point[worst]]}'", depth[worst]
        if worst < self.points.ns0:
            g = self.collision.point_geometry[worst - self.nf]
            return f"link '{self.collision.link_names[g]}'", depth[worst]
        slot = worst - self.points.ns0
        a, b = self.self_collision.pair_links()
        return f"links '{a[slot]}' and '{b[slot]}' (self-collision)", depth[worst]

    def parameters(self) -> dict:
        return self.feet.parameters()

    def set_parameters(self, **values) -> None:
        self.feet.set_parameters(**values)  # checked here first: nothing changes on an error
        self.merged.set_parameters(**values)

    def resolution_note(self, delassus, weight, dt):
        return self.feet.resolution_note(delassus, weight, dt)

    def statistics(self) -> dict:
        out = dict(self.feet.statistics())
        for key, value in self.merged.statistics().items():
            if key in ("solves", "nonconverged", "active_set_solves"):
                out[key] = out.get(key, 0) + value
            out[f"collision_{key}"] = value
        if self.self_collision is not None:
            sc = self.self_collision
            #: steps that ran the self-collision phases (the others: its quiet test), and
            #: sphere pairs left out of a full problem (SELF_CAPACITY)
            out["self_collision_checks"] = sc.checked_steps
            out["self_contacts_dropped"] = sc.dropped
        return out

    # -- the step
    def solve(self, Minv_upper, v_free, u, dt):
        coll, selfc, data = self.collision, self.self_collision, self._data
        ground = coll.any_near(data) and coll.narrow(data)
        touch = selfc is not None and selfc.contacts(data, v_free, dt,
                                                     self.merged.activation_margin, self._self[0])
        if not (ground or touch):
            if self._merged_last:  # hand the warm start back
                self.feet.set_warm_start(self.merged.warm_start()[:self.nf])
                self._merged_last = False
            if self._contacts is not _NO_CONTACTS:
                self._contacts = _NO_CONTACTS
                self._uc = np.zeros((2, coll.m))
            self._self = _NO_SELF
            if not self.nf:
                return v_free, np.zeros((0, 3)), u
            return self.feet.solve(Minv_upper, v_free, u, dt)
        if not ground:
            coll.clear()  # the last narrow phase's candidates are not this step's
        if not touch and selfc is not None:
            selfc.clear()
        pts = self.points
        pts.refresh()
        if not self._merged_last:
            self.merged.set_warm_start(self.feet.warm_start())
            self._merged_last = True
        parts = [u, self._uc]
        if pts.ns:
            parts.append(self._self_before(selfc))
        v_next, force, u_next = self.merged.solve(Minv_upper, v_free,
                                                  np.concatenate(parts, axis=1), dt)
        nf, s0 = self.nf, pts.ns0
        self._uc = u_next[:, nf:s0]
        cand = coll.candidates
        fc = force[nf + cand]
        self._contacts = (cand, coll.position.copy(), coll.world_forces(fc),
                          coll.depth[cand].copy(), np.asarray(self.merged.status)[nf + cand])
        if pts.ns:
            self._self_after(selfc, u_next[:, s0:s0 + selfc.k], force[s0:s0 + selfc.k])
        return v_next, force[:nf], u_next[:, :nf]

    def _self_before(self, selfc) -> np.ndarray:
        """(2, capacity) the self-contacts' tangential deformation for this step's slots,
        and their warm start set in ``merged``: each contact's from the last step (by
        its identity, turned onto its new tangent plane), zeros for new ones."""
        from .self_collision import carry

        k, s0 = selfc.k, self.points.ns0
        ids, u_world, ws_t, ws_rest, _ = self._self
        both = carry(ids, np.stack([u_world, ws_t], axis=1), selfc.ids, selfc.bases)
        out = np.zeros((2, selfc.capacity))
        out[:, :k] = both[:, 0].T
        warm = np.array(self.merged.warm_start(), dtype=float)
        rows = warm[s0:]
        rows[...] = 0.0
        rows[:k, :2] = both[:, 1]
        if ws_rest.shape[1] and len(ids) and k:  # the rigid model's normal impulses
            pos = np.minimum(np.searchsorted(ids, selfc.ids), len(ids) - 1)
            match = ids[pos] == selfc.ids
            rows[:k, 2:][match] = ws_rest[pos[match]]
        self.merged.set_warm_start(warm)
        return out

    def _self_after(self, selfc, u_slots: np.ndarray, force: np.ndarray) -> None:
        """Keep the self-contacts' deformation and warm start by identity, in world
        axes, and their readings."""
        from .self_collision import to_world

        k = selfc.k
        if not k:
            self._self = _NO_SELF
            return
        s0 = self.points.ns0
        warm = np.asarray(self.merged.warm_start())[s0:s0 + k]
        status = np.asarray(self.merged.status)[s0:s0 + k]
        links = selfc.pair_links()
        readings = (links[0], links[1], selfc.position.copy(), selfc.world_forces(force),
                    selfc.depth.copy(), status)
        self._self = (selfc.ids, to_world(u_slots.T, selfc.bases),
                      to_world(warm[:, :2], selfc.bases), warm[:, 2:].copy(), readings)

    # -- readings of the collision points
    def contacts(self) -> tuple:
        """(point indices, world positions (k, 3), world forces (k, 3), depths (k,),
        status codes (k,)) of the collision points within the margin at the last step."""
        return self._contacts

    def self_contacts(self) -> tuple:
        """(first links (k,), second links (k,), world contact points (k, 3), world forces
        on the first links (k, 3) (the second links get the opposite), depths (k,),
        status codes (k,)) of the self-collision sphere pairs within the margin at the
        last step."""
        return self._self[4]

    def wrench(self) -> np.ndarray:
        """(6,) total [force, torque] of the ground on the collision points at the last
        step, world axes, torque about the world origin."""
        _, pos, f, _, _ = self._contacts
        out = np.zeros(6)
        if len(f):
            out[:3] = f.sum(axis=0)
            out[3:] = np.cross(pos, f).sum(axis=0)
        return out


_NO_CONTACTS = (np.zeros(0, dtype=int), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0),
                np.zeros(0, dtype=np.int8))
#: no self-contact: (ids, deformation, warm start (tangential, world; the rest), readings)
_NO_SELF = (np.zeros(0, dtype=np.int64), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 0)),
            ((), (), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros(0, dtype=np.int8)))


def build_whole_body_contact(robot, config, feet_points: ContactPoints, feet_model,
                             make_model, ground: Ground, terrain, model_step: pin.Model,
                             data_step: pin.Data, notes: list[str] | None = None
                             ) -> WholeBodyContact:
    """The :class:`WholeBodyContact` of a configuration with ``collision.enabled`` or
    ``collision.self_collision``. ``make_model(points)``: a contact model of the
    configured kind over ``points``; ``notes`` gets what the build wants said once."""
    from .self_collision import build_self_collision

    cfg = config.collision
    gmodel, by_link = geometry_by_link(robot, config)  # gmodel keeps the objects alive
    geometries = []
    if cfg.enabled:
        surface_joints = {int(robot.model.frames[robot.frame_id(s.frame, key=f"{s.name}.frame")]
                              .parentJoint) for s in config.surfaces}
        geometries = collision_geometries(robot, config, surface_joints, by_link)
        if not geometries:
            raise ConfigError("parameter 'collision.enabled': no link of the robot has "
                              "<collision> geometry left to collide (check collision.links / "
                              "collision.exclude_links, or set collision.enabled: false)")
    selfc = None
    if cfg.self_collision:
        selfc = build_self_collision(model_step, robot.model,
                                     self_collision_links(config, by_link), config,
                                     notes if notes is not None else [], robot.floating_base)
    del gmodel
    coll = CollisionPoints(model_step, geometries, ground, terrain, cfg.margin)
    merged_points = MergedPoints(feet_points, coll, selfc)
    return WholeBodyContact(feet_model, make_model(merged_points), coll, merged_points,
                            data_step, selfc)
