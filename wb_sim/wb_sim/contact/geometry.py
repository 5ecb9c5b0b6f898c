"""The geometry of the URDF ``<collision>`` shapes, written once for every contact
source that needs it.

pinocchio loads the shapes (:meth:`wb_sim.robot.RobotModel.geometry_model`: coal
objects, meshes through coal); this module turns them into what the contact code uses:

* the *slots* of a primitive against the ground (:func:`contact_slots`,
  :mod:`wb_sim.contact.ground_collision`): the points where it can touch a plane, each
  with a radius, fixed to the link; a plane of any normal touches the shape first at one
  of them, and a face resting on it at the face's own (a manifold):

  - sphere: its centre, with its radius;
  - capsule: its two ends, placed every step from the plane's normal: each end's point of
    the surface lowest towards the plane (on its hemisphere or on the side's line; lying:
    both, a line contact);
  - box: its 8 corners (a face: 4 of them, an edge: 2);
  - cylinder: :data:`~wb_sim.contact.manifold.CAP_POINTS` points on each rim, placed every
    step from the plane's normal: the rim's point farthest along it (its true lowest
    point: rolling, the cylinder meets the plane on its circle, not on a polygon) and the
    others at equal angles from it (a cap resting on the plane: a square of its rim).

  A point with a radius touches at its centre minus radius times the terrain's normal,
  as a sphere foot does.
* the :class:`~wb_sim.contact.manifold.Convex` of every shape (a mesh: its convex hull),
  whose exact contacts with a plane, a terrain box or another shape
  :mod:`wb_sim.contact.manifold` computes through coal;
* the vertices of meshes and convex shapes (:func:`mesh_vertices`), which
  self-collision fills with spheres (:mod:`wb_sim.contact.self_collision`);
* which links collide (:func:`geometry_by_link`, :func:`collision_geometries`,
  :func:`self_collision_links`), from ``collision.links`` and
  ``collision.exclude_links``.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..errors import ModelError

# ----------------------------------------------------------------------------
# Geometry -> slots
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


def hull_vertices(V: np.ndarray) -> np.ndarray:
    from scipy.spatial import ConvexHull, QhullError
    V = np.unique(np.asarray(V, dtype=float), axis=0)
    for options in ("", "QJ"):
        try:
            return V[ConvexHull(V, qhull_options=options or None).vertices]
        except (QhullError, ValueError):
            continue
    return V  # flat or degenerate: every distinct vertex


@dataclass(frozen=True)
class Slots:
    """The slots of one primitive (see the module docstring), in its geometry's frame:
    slot i touches at ``centre[i] + rim[i] (cos angle[i] u + sin angle[i] (axis[i] x u))
    - radius[i] n`` for a plane of normal n, u the unit direction of ``-n`` in the plane
    normal to ``axis[i]`` (``perp[i]`` where -n is along the axis); ``rim`` is 0 but for a
    cylinder's rims and a capsule's ends (``cap``: ``centre + rim u``, or ``centre - rim n``
    where -n points out of the end along its ``axis``: the end's point of the surface
    lowest towards the plane). Slot i's code in
    :func:`wb_sim.contact.manifold.support_feature` is i."""

    centre: np.ndarray  #: (k, 3)
    radius: np.ndarray  #: (k,)
    axis: np.ndarray  #: (k, 3) unit (a rim's), else 0
    rim: np.ndarray  #: (k,) the rim's radius, else 0
    angle: np.ndarray  #: (k,) rad
    perp: np.ndarray  #: (k, 3) a unit vector normal to the axis (a rim's), else 0
    cap: np.ndarray  #: (k,) bool: a capsule's end (axis: out of it)


def _slots(centre, radius, axis=None, rim=None, angle=None, perp=None, cap=None) -> Slots:
    centre = np.asarray(centre, dtype=float).reshape(-1, 3)
    k = len(centre)
    zeros3, zeros = np.zeros((k, 3)), np.zeros(k)
    return Slots(centre, np.asarray(radius, dtype=float).reshape(k),
                 zeros3 if axis is None else np.asarray(axis, dtype=float),
                 zeros if rim is None else np.asarray(rim, dtype=float),
                 zeros if angle is None else angle,
                 zeros3 if perp is None else np.asarray(perp, dtype=float),
                 np.zeros(k, dtype=bool) if cap is None else np.asarray(cap, dtype=bool))


def contact_slots(geometry, link: str) -> Slots | None:
    """The slots of a coal primitive (sphere, capsule, box, cylinder), geometry frame;
    None for a mesh (its contacts come from :mod:`wb_sim.contact.manifold`); ModelError
    naming the link for a kind that is not supported."""
    import coal

    from .manifold import CAP_POINTS

    if isinstance(geometry, coal.Sphere):
        return _slots(np.zeros((1, 3)), [float(geometry.radius)])
    if isinstance(geometry, coal.Capsule):
        r, hl = float(geometry.radius), float(geometry.halfLength)
        return _slots([[0.0, 0.0, -hl], [0.0, 0.0, hl]], [0.0, 0.0],
                      axis=[[0.0, 0.0, -1.0], [0.0, 0.0, 1.0]], rim=[r, r],
                      perp=[[1.0, 0.0, 0.0]] * 2, cap=[True, True])
    if isinstance(geometry, coal.Box):
        h = np.asarray(geometry.halfSide, dtype=float)
        corners = [[h[0] if i & 1 else -h[0], h[1] if i & 2 else -h[1], h[2] if i & 4 else -h[2]]
                   for i in range(8)]  # index bits: x, y, z positive (manifold.box_shape's)
        return _slots(corners, np.zeros(8))
    if isinstance(geometry, coal.Cylinder):
        r, hl = float(geometry.radius), float(geometry.halfLength)
        k = 2 * CAP_POINTS
        z = np.repeat([-hl, hl], CAP_POINTS)
        centre = np.column_stack([np.zeros(k), np.zeros(k), z])
        axis = np.tile([0.0, 0.0, 1.0], (k, 1))
        perp = np.tile([1.0, 0.0, 0.0], (k, 1))  # manifold.rim_direction's fallback
        angle = np.tile(2.0 * math.pi * np.arange(CAP_POINTS) / CAP_POINTS, 2)
        return _slots(centre, np.zeros(k), axis, np.full(k, r), angle, perp)
    mesh_vertices(geometry, link, "boxes, spheres, cylinders, capsules and meshes")
    return None


def shape_bounds(geometry, hull: np.ndarray | None) -> np.ndarray:
    """(2, 3) the corners (low, high) of a box holding the shape, geometry frame."""
    import coal

    if isinstance(geometry, coal.Sphere):
        r = float(geometry.radius)
        return np.array([[-r] * 3, [r] * 3])
    if isinstance(geometry, coal.Capsule):
        r, hl = float(geometry.radius), float(geometry.halfLength)
        return np.array([[-r, -r, -hl - r], [r, r, hl + r]])
    if isinstance(geometry, coal.Cylinder):
        r, hl = float(geometry.radius), float(geometry.halfLength)
        return np.array([[-r, -r, -hl], [r, r, hl]])
    if isinstance(geometry, coal.Box):
        h = np.asarray(geometry.halfSide, dtype=float)
        return np.array([-h, h])
    return np.array([hull.min(axis=0), hull.max(axis=0)])


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
    """One collision geometry of a link: its slots (a primitive's, in its parent joint's
    frame; none for a mesh), its :class:`~wb_sim.contact.manifold.Convex` and bounds."""

    link: str
    name: str  #: the geometry's name (pinocchio's)
    joint: int  #: pinocchio joint id
    points: np.ndarray  #: (k, 3) the slots' centres, m, joint frame
    radius: np.ndarray  #: (k,) m
    centre: np.ndarray  #: (3,) centre of the bounding box (and sphere), joint frame
    half: np.ndarray  #: (3,) half sizes of the bounding box, axes of the joint frame, m
    bound: float  #: bounding sphere radius (the shape inside), m
    shape: object = None  #: the coal geometry
    placement: pin.SE3 | None = None  #: joint <- geometry
    convex: object = None  #: its manifold.Convex (a mesh: its convex hull), geometry frame
    #: the slots' rims (:class:`Slots`), joint frame: axis (k, 3), rim (k,), angle (k,),
    #: perp (k, 3)
    axis: np.ndarray | None = None
    rim: np.ndarray | None = None
    angle: np.ndarray | None = None
    perp: np.ndarray | None = None
    cap: np.ndarray | None = None  #: (k,) bool: a capsule's end


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
    """The collision geometries of the links ``collision.*`` selects, with their slots
    and convex shapes. ``surface_joints``: joint ids of the contact surfaces' frames
    (their links are left out of the default set); ``by_link``:
    :func:`geometry_by_link`'s if already loaded; ``cfg``: the ``collision`` group."""
    if by_link is None:
        gmodel, by_link = geometry_by_link(robot, cfg)  # gmodel keeps the objects alive
    if cfg.links:
        chosen = list(cfg.links)
    else:
        chosen = [name for name, gs in by_link.items()
                  if name not in cfg.exclude_links
                  and not any(g.parentJoint in surface_joints for g in gs)]
    out = []
    built = _LINK_GEOMETRIES.setdefault(robot, {})
    for name in chosen:
        for i, g in enumerate(by_link[name]):
            if g.parentJoint == 0:  # welded to the world: it never moves
                continue
            key = (name, i, g.name, cfg.max_points)
            if key not in built:
                built[key] = _read_only(link_geometry(name, g, cfg.max_points))
            out.append(built[key])
    return out


def _read_only(geometry: LinkGeometry) -> LinkGeometry:
    """``geometry`` with its arrays (and its Convex's) made read-only: it is shared."""
    for obj in (geometry, geometry.convex):
        for f in dataclasses.fields(obj):
            x = getattr(obj, f.name)
            if isinstance(x, np.ndarray):
                x.setflags(write=False)
    return geometry


#: each robot's link geometries (immutable: nothing changes a LinkGeometry or its arrays), by
#: (link, its geometry's index and name, collision.max_points), computed once: a simulator
#: built again on the same robot (wb_sim.robot.RobotCache, a campaign's worker) reuses them
_LINK_GEOMETRIES: "weakref.WeakKeyDictionary[object, dict]" = weakref.WeakKeyDictionary()


def link_geometry(name: str, g, max_points: int) -> LinkGeometry:
    """The :class:`LinkGeometry` of one pinocchio geometry object ``g`` of link (or free
    object) ``name``: its slots, convex shape and bounds (``max_points``:
    ``collision.max_points``)."""
    from .manifold import convex_shape

    slots = contact_slots(g.geometry, name)
    hull = None
    if slots is None:
        hull = hull_vertices(mesh_vertices(g.geometry, name, ""))
        slots = _slots(np.zeros((0, 3)), np.zeros(0))
    convex = convex_shape(g.geometry, hull, max_points)
    if convex is None:
        raise ModelError(f"link '{name}': its collision mesh '{g.name}' is flat (no "
                         f"volume); leave the link out with collision.exclude_links")
    M = g.placement  # joint <- geometry
    R = M.rotation
    lo, hi = shape_bounds(g.geometry, hull)
    corners = np.array([[hi[0] if i & 1 else lo[0], hi[1] if i & 2 else lo[1],
                         hi[2] if i & 4 else lo[2]] for i in range(8)]) @ R.T \
        + M.translation
    blo, bhi = corners.min(axis=0), corners.max(axis=0)
    c = (blo + bhi) / 2.0
    centre_g = R.T @ (c - M.translation)  # the bounding centre, geometry frame
    if hull is not None:
        bound = float(np.max(np.linalg.norm(hull - centre_g, axis=1)))
    else:
        bound = shape_reach(g.geometry, centre_g)
    return LinkGeometry(
        name, g.name, int(g.parentJoint), slots.centre @ R.T + M.translation,
        slots.radius, c, (bhi - blo) / 2.0, bound, g.geometry, pin.SE3(M), convex,
        slots.axis @ R.T, slots.rim, slots.angle, slots.perp @ R.T, slots.cap)


def shape_reach(geometry, c: np.ndarray) -> float:
    """The radius of the sphere about c (geometry frame) holding a primitive."""
    import coal

    if isinstance(geometry, coal.Sphere):
        return float(np.linalg.norm(c)) + float(geometry.radius)
    if isinstance(geometry, coal.Capsule):
        r, hl = float(geometry.radius), float(geometry.halfLength)
        return max(float(np.linalg.norm(c - [0, 0, z])) for z in (-hl, hl)) + r
    if isinstance(geometry, coal.Cylinder):
        r, hl = float(geometry.radius), float(geometry.halfLength)
        return max(math.hypot(math.hypot(c[0], c[1]) + r, abs(c[2] - z)) for z in (-hl, hl))
    h = np.asarray(geometry.halfSide, dtype=float)
    return float(np.linalg.norm(np.abs(c) + h))
