"""The geometry of the URDF ``<collision>`` shapes, written once for every contact
source that needs it.

pinocchio loads the shapes (:meth:`wb_sim.robot.RobotModel.geometry_model`: coal
objects, meshes through coal); this module turns them into what the contact code uses:

* contact points with a radius for the ground (:func:`geometry_points`,
  :mod:`wb_sim.contact.ground_collision`):

  - sphere: its centre, with its radius;
  - capsule: spheres of its radius along its axis (the ends, and one at least every
    ``collision.point_spacing``);
  - cylinder: points on its two rims (8 per rim at least, and enough that the rim's
    polygon is within 1 mm of the circle, as ``max_points`` allows);
  - box: its 8 corners and points along its edges (at least every ``point_spacing``);
  - mesh: the vertices of its convex hull (scipy), reduced to ``collision.max_points``:
    those extreme along as many directions spread over the sphere (what a plane of
    each of those normals touches first), topped up by farthest-point sampling.

  A point with a radius touches at its centre minus radius times the terrain's
  normal, as a sphere foot does. Against a plane the lowest point of a sphere, a
  capsule, a cylinder or a box is one of these; a mesh's sampled hull sinks between
  its samples (iCub's, at 32 points: 5 mm typically, 12 mm at worst over every
  direction).
* the vertices of meshes and convex shapes (:func:`mesh_vertices`), which
  self-collision fills with spheres (:mod:`wb_sim.contact.self_collision`);
* which links collide (:func:`geometry_by_link`, :func:`collision_geometries`,
  :func:`self_collision_links`), from ``collision.links`` and
  ``collision.exclude_links``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..errors import ModelError

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


def geometry_by_link(robot, cfg) -> tuple[pin.GeometryModel, dict[str, list]]:
    """(the geometry model, {link: its geometry objects}) of the URDF's ``<collision>``
    elements, every link with some (the objects belong to the geometry model: keep it
    while using them); checks ``collision.links`` and ``collision.exclude_links``
    against the model (ModelError naming the link). ``cfg``: the ``collision`` group."""
    model = robot.model
    gmodel = robot.geometry_model(
        "collision", key="collision.enabled" if cfg.enabled else "collision.self_collision")
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


def self_collision_links(cfg, by_link: dict) -> dict[str, list]:
    """The links of :func:`geometry_by_link` that self-collision uses: ``collision.links``,
    or every link but ``collision.exclude_links`` (the contact surfaces' too). ``cfg``: the
    ``collision`` group."""
    names = cfg.links if cfg.links else [n for n in by_link if n not in cfg.exclude_links]
    return {name: by_link[name] for name in names}


def collision_geometries(robot, cfg, surface_joints, by_link: dict | None = None
                         ) -> list[LinkGeometry]:
    """The collision geometries of the links ``collision.*`` selects, as points.
    ``surface_joints``: joint ids of the contact surfaces' frames (their links are
    left out of the default set); ``by_link``: :func:`geometry_by_link`'s if already loaded;
    ``cfg``: the ``collision`` group."""
    if by_link is None:
        gmodel, by_link = geometry_by_link(robot, cfg)  # gmodel keeps the objects alive
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
