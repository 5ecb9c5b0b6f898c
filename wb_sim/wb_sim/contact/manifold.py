"""Exact contact between two convex shapes, through coal: the normal and the deepest
point from coal's collision (GJK/EPA and its primitive algorithms), several contact
points where a face meets a face (a manifold), each with its own depth.

A :class:`Convex` is one convex shape in its own frame: a URDF ``<collision>`` primitive
(sphere, capsule, cylinder along z, box), a mesh's convex hull (``hull``), a terrain box.
:func:`contact_manifold` of two of them, placed in the world (``a`` the one the normal
pushes, ``b`` the other):

1. ``coal.collide`` with ``security_margin``: the unit normal ``n`` from b to a and the
   signed distance (negative: overlap); nothing if the shapes are farther apart.
2. The *support feature* of each shape towards the other (a along ``-n``, b along ``+n``):
   the vertices of the face, edge or vertex that is extreme in that direction, a face
   or an edge while the direction is within :data:`TOL_ANGLE` of its normal: a box's face
   (4 corners), edge (2) or corner; a cylinder's cap (:data:`CAP_POINTS` points of its rim:
   the one farthest along the direction and the others at equal angles from it), its
   side's line (the two rims' farthest points) or its rim's farthest point; a capsule's
   side (each end's surface point farthest along the direction) or one end's; a sphere's
   farthest point; a hull's vertices within :func:`hull_tolerance` of its support plane,
   as a convex polygon of those extreme along ``collision.max_points`` directions, and its
   deepest vertex.
3. A vertex against anything, or two edges crossing: one contact, coal's two points (the
   features name it). Else the two features projected on the plane normal to ``n`` and
   intersected: a polygon clipped by a polygon (Sutherland-Hodgman), a segment by a
   polygon (Cyrus-Beck), two parallel segments' overlap; a rounded hull's deepest vertex
   where the other's polygon holds it.
4. Each point of the intersection lifted back onto both shapes along ``n``: on a's
   surface ``x_a``, on b's ``x_b``, its own gap ``(x_a - x_b) . n``: a feature's vertex is
   itself, a point on a flat feature (a box's face or edge, a cylinder's cap or side) is
   lifted onto it, a point on a hull's polygon or a capsule's side onto the true surface
   (the line against its faces' planes, its cylinder and end spheres). Where the points
   miss coal's deepest point (features within TOL_ANGLE of the normal but curved under
   it), that point joins them: the deepest gap is always coal's distance.

Every point carries a code: which vertices or edges of the two features made it (a box's
corner, a rim point, an edge crossing an edge). It stays the same while those features
touch, so the contact model can carry a contact's tangential state from step to step.
``full_within``: shapes farther apart get coal's closest points only (self-collision's
pairs that do not touch yet).

:func:`reference_deepest` is the plain check: coal's own deepest point and distance, which
the manifold's deepest gap equals (the tests hold one to the other).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

#: rad: a face (an edge, a cylinder's cap or side) is the support feature while the
#: direction is this close to its normal; the points of the face farther from the other
#: shape than the deepest are in the manifold with their own (smaller) depth
TOL_ANGLE = 0.1
_SIN_TOL, _COS_TOL = math.sin(TOL_ANGLE), math.cos(TOL_ANGLE)
#: points of a cylinder's cap in its support feature
CAP_POINTS = 4
#: m: at most this far from the support plane, a hull's vertex is in its support feature
HULL_TOLERANCE = 5e-3
_MASK = (1 << 62) - 1
#: m: where the manifold's deepest gap exceeds coal's distance by more, coal's points join it
WITNESS_TOLERANCE = 1e-7


@dataclass(frozen=True)
class Convex:
    """A convex shape in its own frame."""

    kind: str  #: "sphere", "capsule", "cylinder" (axis z), "box", "hull"
    #: sphere (r,); capsule, cylinder (r, half length); box half sides (3,); hull ()
    size: np.ndarray
    geometry: object = None  #: the coal shape (coal.Convex for a hull)
    vertices: np.ndarray | None = None  #: hull: (n, 3) its vertices
    extent: float = 0.0  #: farthest point from the frame's origin, m
    #: box: (8, 3) corners, index bits x (1), y (2), z (4) positive
    corners: np.ndarray | None = field(default=None, repr=False)
    max_points: int = 8  #: hull: most vertices of its support polygon
    #: hull: (F, 4) its faces' planes [m, c], m . x + c <= 0 inside, m unit outward
    planes: np.ndarray | None = field(default=None, repr=False)


#: a box's 12 triangles over its corners (index bits x (1), y (2), z (4) positive), each
#: counter-clockwise seen from outside: two per face
_BOX_TRIANGLES = ((0, 4, 6), (0, 6, 2), (1, 3, 7), (1, 7, 5),  # -x, +x
                  (0, 1, 5), (0, 5, 4), (2, 6, 7), (2, 7, 3),  # -y, +y
                  (0, 2, 3), (0, 3, 1), (4, 5, 7), (4, 7, 6))  # -z, +z


def box_shape(half) -> Convex:
    """A box of half sides ``half`` (3,). coal meets it as a ``coal.Convex`` of its 8
    corners, never as a ``coal.Box``: coal's support function of a Box (coal 3.0.x,
    ``src/narrowphase/support_functions.cpp``, ``getShapeSupport(const Box*, ...)``) scales
    its negative half by ``static const inflate = (dir.array() == 0).any() ? 1 + 1e-10 :
    1.``, a function-local static set once per process by the first direction any box
    query in the process asks for, so that every later query's rounding depended on what
    the process computed first (docs/physics.md; test/core/test_reproducibility.py)."""
    import coal
    half = np.asarray(half, dtype=float)
    signs = np.array([[1.0 if i & 1 else -1.0, 1.0 if i & 2 else -1.0, 1.0 if i & 4 else -1.0]
                      for i in range(8)])
    corners = signs * half
    points, triangles = coal.StdVec_Vec3s(), coal.StdVec_Triangle()
    for p in corners:
        points.append(p)
    for t in _BOX_TRIANGLES:
        triangles.append(coal.Triangle(*t))
    return Convex("box", half, coal.Convex(points, triangles), None, float(np.linalg.norm(half)),
                  corners)


def convex_shape(geometry, hull_vertices=None, max_points: int = 8) -> Convex | None:
    """The :class:`Convex` of a coal geometry (``hull_vertices``: a mesh's convex hull's
    vertices (n, 3), for a mesh, ``max_points`` the most vertices of its support polygon);
    None for a kind it does not describe, or a flat hull."""
    import coal
    if isinstance(geometry, coal.Sphere):
        r = float(geometry.radius)
        return Convex("sphere", np.array([r]), geometry, None, r)
    if isinstance(geometry, coal.Capsule):
        r, hl = float(geometry.radius), float(geometry.halfLength)
        return Convex("capsule", np.array([r, hl]), geometry, None, r + hl)
    if isinstance(geometry, coal.Cylinder):
        r, hl = float(geometry.radius), float(geometry.halfLength)
        return Convex("cylinder", np.array([r, hl]), geometry, None, math.hypot(r, hl))
    if isinstance(geometry, coal.Box):
        return box_shape(np.asarray(geometry.halfSide, dtype=float))
    if hull_vertices is not None and len(hull_vertices) >= 4:
        return hull_shape(hull_vertices, max_points)
    return None


def hull_shape(V: np.ndarray, max_points: int = 8) -> Convex | None:
    """The :class:`Convex` of the convex hull of the points V (n, 3) (None if flat)."""
    import coal
    from scipy.spatial import ConvexHull, QhullError
    V = np.unique(np.asarray(V, dtype=float), axis=0)
    try:
        hull = ConvexHull(V)
    except (QhullError, ValueError):
        return None
    H = V[hull.vertices]
    index = {int(v): i for i, v in enumerate(hull.vertices)}
    points, triangles = coal.StdVec_Vec3s(), coal.StdVec_Triangle()
    for p in H:
        points.append(p)
    for s in hull.simplices:
        triangles.append(coal.Triangle(*(index[int(k)] for k in s)))
    return Convex("hull", np.zeros(0), coal.Convex(points, triangles), H,
                  float(np.max(np.linalg.norm(H, axis=1))), None, max_points,
                  np.asarray(hull.equations, dtype=float))


# ----------------------------------------------------------------------------
# Support features
# ----------------------------------------------------------------------------


def _plane_basis(d: np.ndarray) -> np.ndarray:
    """(3, 2) two unit vectors spanning the plane normal to the unit vector d, columns
    (e1, d x e1) (np.cross costs 15 us on one vector)."""
    e1 = _perpendicular(d)
    out = np.empty((3, 2))
    out[:, 0] = e1
    out[0, 1] = d[1] * e1[2] - d[2] * e1[1]
    out[1, 1] = d[2] * e1[0] - d[0] * e1[2]
    out[2, 1] = d[0] * e1[1] - d[1] * e1[0]
    return out


def _perpendicular(a: np.ndarray) -> np.ndarray:
    """A unit vector normal to the unit vector a."""
    ref = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    u = ref - a * (ref @ a)
    return u / np.linalg.norm(u)


def rim_direction(dl: np.ndarray) -> np.ndarray:
    """(2,) the unit direction in a cylinder's cap plane (local x, y) towards which its rim
    reaches farthest along the local direction ``dl``; local x where ``dl`` is its axis."""
    rho = math.hypot(dl[0], dl[1])
    if rho <= 1e-12:
        return np.array([1.0, 0.0])
    return np.array([dl[0], dl[1]]) / rho


def support_feature(shape: Convex, R: np.ndarray, t: np.ndarray,
                    d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (k, 3) world, codes (k,)): :func:`support_polygon`'s points, all of them."""
    V, codes, _ = support_polygon(shape, R, t, d)
    return V, codes


def support_polygon(shape: Convex, R: np.ndarray, t: np.ndarray,
                    d: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(vertices (k, 3) world, codes (k,) int) of the part of ``shape`` (placed by
    rotation R, translation t) extreme along the unit world direction ``d``: a polygon
    (k >= 3, in cyclic order), a segment (k = 2) or a point. Codes name the vertices
    (a box's corner, a cylinder's rim point ``4 rim + k``, a capsule's end, a hull's
    vertex); and how many of them form the feature (all but a hull's deepest vertex where
    it is inside its polygon, a rounded hull's: then it comes last)."""
    dl = R.T @ d
    kind = shape.kind
    if kind == "sphere":
        return (t + shape.size[0] * d)[None, :], np.zeros(1, dtype=int), 1
    if kind == "capsule":
        # each end's point of the surface farthest along d: on its hemisphere (d pointing
        # out of that end), else on the side's line
        r, hl = shape.size
        u = np.array([*rim_direction(dl), 0.0])
        ends = np.array([[0.0, 0.0, -hl], [0.0, 0.0, hl]])
        ends[0] += r * (dl if dl[2] <= 0.0 else u)
        ends[1] += r * (dl if dl[2] >= 0.0 else u)
        ends = ends @ R.T + t
        if abs(dl[2]) < _SIN_TOL:
            return ends, np.array([0, 1]), 2
        e = 1 if dl[2] > 0 else 0
        return ends[e:e + 1], np.array([e]), 1
    if kind == "cylinder":
        r, hl = shape.size
        u = rim_direction(dl)
        if abs(dl[2]) > _COS_TOL:  # a cap
            rim = 1 if dl[2] > 0 else 0
            a = 2.0 * math.pi * np.arange(CAP_POINTS) / CAP_POINTS
            c, s = np.cos(a), np.sin(a)
            local = np.column_stack([r * (c * u[0] - s * u[1]), r * (c * u[1] + s * u[0]),
                                     np.full(CAP_POINTS, hl if rim else -hl)])
            return local @ R.T + t, CAP_POINTS * rim + np.arange(CAP_POINTS), CAP_POINTS
        low = np.array([[r * u[0], r * u[1], -hl], [r * u[0], r * u[1], hl]])
        if abs(dl[2]) < _SIN_TOL:  # the side: a line
            return low @ R.T + t, np.array([0, CAP_POINTS]), 2
        rim = 1 if dl[2] > 0 else 0
        return (low[rim] @ R.T + t)[None, :], np.array([CAP_POINTS * rim]), 1
    if kind == "box":
        free = np.abs(dl) < _SIN_TOL
        bits = sum(1 << a for a in range(3) if not free[a] and dl[a] > 0)
        axes = [a for a in range(3) if free[a]]
        if not axes:
            idx = [bits]
        elif len(axes) == 1:
            idx = [bits, bits | (1 << axes[0])]
        else:
            i, j = 1 << axes[0], 1 << axes[1]
            idx = [bits, bits | i, bits | i | j, bits | j]
        idx = np.array(idx)
        return shape.corners[idx] @ R.T + t, idx, len(idx)
    if kind == "hull":
        V = shape.vertices
        s = V @ dl
        top = float(s.max())
        near = np.flatnonzero(s >= top - hull_tolerance(shape))
        if len(near) == 1:
            return (V[near] @ R.T + t), near, 1
        # the polygon: those extreme along max_points directions in the plane (vertices of
        # the set's convex polygon, spread round it), in turn
        q = V[near] @ _plane_basis(dl)
        ring = np.unique(np.argmax(q @ _directions(shape.max_points), axis=0))
        if len(ring) >= 3:
            c = q[ring] - q[ring].mean(axis=0)
            ring = ring[np.argsort(np.arctan2(c[:, 1], c[:, 0]))]
        sel = near[ring]
        count = len(sel)
        deepest = near[int(np.argmax(s[near]))]
        if deepest not in sel:  # inside the polygon (a rounded hull): after it
            sel = np.append(sel, deepest)
        return V[sel] @ R.T + t, sel, count
    raise ValueError(f"no support feature for a {kind!r}")


@functools.lru_cache(maxsize=16)
def _directions(k: int) -> np.ndarray:
    """(2, k) unit vectors at equal angles in the plane."""
    a = 2.0 * math.pi * np.arange(k) / k
    return np.vstack([np.cos(a), np.sin(a)])


def hull_tolerance(shape: Convex) -> float:
    """m: how far below a hull's support plane its vertices are still in its support
    feature: the extent's sine of TOL_ANGLE, at most HULL_TOLERANCE."""
    return min(shape.extent * _SIN_TOL, HULL_TOLERANCE)


# ----------------------------------------------------------------------------
# Intersection of two features in the plane normal to n
# ----------------------------------------------------------------------------

# A point of the intersection records, for each feature (0: a's, 1: b's), where it lies
# on it: (1, i, 0) its vertex i, (2, i, j) its edge from vertex i to j, (0, 0, 0) inside
# it (a polygon's interior: lifted onto its plane).
_INSIDE = (0, 0, 0)


def _vertex(i):
    return (1, int(i), 0)


def _edge(i, j):
    return (2, int(i), int(j))


def _clip_polygon(subject, clip, owner_s):
    """Sutherland-Hodgman: the polygon ``subject`` (2-D points (k, 2), owner_s's feature)
    clipped by the convex polygon ``clip`` (the other's). Returns [(q, where)], where =
    (where on a's feature, where on b's)."""
    owner_c = 1 - owner_s
    k = len(subject)
    pts = []
    for i in range(k):
        w = [None, None]
        w[owner_s], w[owner_c] = _vertex(i), _INSIDE
        pts.append((subject[i], tuple(w)))
    # carrier of the edge from each point to the next: (owner, i, j)
    carriers = [(owner_s, i, (i + 1) % k) for i in range(k)]
    m = len(clip)
    area = 0.5 * float(np.sum(clip[:, 0] * np.roll(clip[:, 1], -1)
                              - np.roll(clip[:, 0], -1) * clip[:, 1]))
    orient = 1.0 if area >= 0 else -1.0
    scale = float(np.ptp(clip, axis=0).max()) or 1.0
    for e in range(m):
        if not pts:
            break
        c0, c1 = clip[e], clip[(e + 1) % m]
        edge = c1 - c0
        length = math.hypot(edge[0], edge[1]) or 1.0

        def side(p):
            return orient * (edge[0] * (p[1] - c0[1]) - edge[1] * (p[0] - c0[0])) / length

        out, out_carriers = [], []
        n = len(pts)
        for i in range(n):
            (p, wp), (q, _) = pts[i], pts[(i + 1) % n]
            sp, sq = side(p), side(q)
            tol = -1e-12 * scale
            if sp >= tol:
                out.append((p, wp))
                out_carriers.append(carriers[i])
            if (sp >= tol) != (sq >= tol) and n > 1:
                s = sp / (sp - sq)
                x = p + s * (q - p)
                owner, a, b = carriers[i]
                w = [None, None]
                if owner == owner_c:  # two edges of the clipping polygon: their vertex
                    shared = a if a in (e, (e + 1) % m) else b
                    w[owner_c], w[owner_s] = _vertex(shared), _INSIDE
                else:
                    w[owner_s], w[owner_c] = _edge(a, b), _edge(e, (e + 1) % m)
                out.append((x, tuple(w)))
                out_carriers.append((owner_c, e, (e + 1) % m) if sp >= tol else carriers[i])
        pts, carriers = out, out_carriers
    return pts


def _clip_segment(seg, clip, owner_s):
    """Cyrus-Beck: the segment ``seg`` (2, 2) clipped by the convex polygon ``clip``."""
    owner_c = 1 - owner_s
    m = len(clip)
    area = 0.5 * float(np.sum(clip[:, 0] * np.roll(clip[:, 1], -1)
                              - np.roll(clip[:, 0], -1) * clip[:, 1]))
    orient = 1.0 if area >= 0 else -1.0
    p0, p1 = seg[0], seg[1]
    lo, hi, lo_e, hi_e = 0.0, 1.0, None, None
    scale = float(np.ptp(clip, axis=0).max()) or 1.0
    for e in range(m):
        c0, c1 = clip[e], clip[(e + 1) % m]
        edge = c1 - c0
        length = math.hypot(edge[0], edge[1]) or 1.0
        s0 = orient * (edge[0] * (p0[1] - c0[1]) - edge[1] * (p0[0] - c0[0])) / length
        s1 = orient * (edge[0] * (p1[1] - c0[1]) - edge[1] * (p1[0] - c0[0])) / length
        tol = -1e-12 * scale
        if s0 < tol and s1 < tol:
            return []
        if s0 >= tol and s1 >= tol:
            continue
        s = s0 / (s0 - s1)
        if s0 < tol:  # entering
            if s > lo:
                lo, lo_e = s, e
        elif s < hi:
            hi, hi_e = s, e
    if lo > hi:
        return []
    out = []
    for s, e, end in ((lo, lo_e, 0), (hi, hi_e, 1)):
        w = [None, None]
        if e is None:
            w[owner_s], w[owner_c] = _vertex(end), _INSIDE
        else:
            w[owner_s], w[owner_c] = _edge(0, 1), _edge(e, (e + 1) % m)
        out.append((p0 + s * (p1 - p0), tuple(w)))
    if hi - lo <= 1e-12:
        out = out[:1]
    return out


def _segments(sa, sb):
    """Two segments (2, 2): their crossing, or their overlap where parallel."""
    da, db = sa[1] - sa[0], sb[1] - sb[0]
    la, lb = float(da @ da), float(db @ db)
    den = da[0] * db[1] - da[1] * db[0]
    if abs(den) > 1e-6 * math.sqrt(la * lb):
        r = sb[0] - sa[0]
        s = (r[0] * db[1] - r[1] * db[0]) / den
        u = (r[0] * da[1] - r[1] * da[0]) / den
        if -1e-9 <= s <= 1 + 1e-9 and -1e-9 <= u <= 1 + 1e-9:
            return [(sa[0] + s * da, (_edge(0, 1), _edge(0, 1)))]
        return []
    if la <= 0.0:
        return []
    # parallel: b's ends on a's line, the overlap of the two parameter ranges
    u0, u1 = float((sb[0] - sa[0]) @ da) / la, float((sb[1] - sa[0]) @ da) / la
    out = []
    for s, w in ((0.0, (_vertex(0), _edge(0, 1))), (1.0, (_vertex(1), _edge(0, 1))),
                 (u0, (_edge(0, 1), _vertex(0))), (u1, (_edge(0, 1), _vertex(1)))):
        if -1e-9 <= s <= 1 + 1e-9 and min(u0, u1) - 1e-9 <= s <= max(u0, u1) + 1e-9:
            out.append((sa[0] + s * da, w))
    if len(out) > 2:  # ends shared: the two extremes
        out.sort(key=lambda item: float((item[0] - sa[0]) @ da))
        out = [out[0], out[-1]]
    return out


def _intersect(qa, qb):
    """Points (q, where) of the intersection of two projected features (k, 2)."""
    ka, kb = len(qa), len(qb)
    if ka == 1:
        return [(qa[0], (_vertex(0), _INSIDE if kb >= 3 else (_edge(0, 1) if kb == 2
                                                              else _vertex(0))))]
    if kb == 1:
        return [(qb[0], (_INSIDE if ka >= 3 else _edge(0, 1), _vertex(0)))]
    if ka >= 3 and kb >= 3:
        return _clip_polygon(qa, qb, 0)
    if ka == 2 and kb >= 3:
        return _clip_segment(qa, qb, 0)
    if kb == 2 and ka >= 3:
        return _clip_segment(qb, qa, 1)
    return _segments(qa, qb)


def _lift_onto(shape: Convex, R, t, V, Q, ring: int, q, where, d, basis) -> np.ndarray:
    """The point of ``shape``'s surface that projects on q, farthest along d: a vertex of
    its feature itself; on a hull's (not flat) or a capsule's (its side's line is not on
    its surface where it is tilted) the line through q against the shape; else lifted
    onto the flat feature."""
    if where[0] != 1 and shape.kind == "hull":
        return _hull_lift(shape, R, t, basis @ q, d)
    if where[0] != 1 and shape.kind == "capsule":
        out = _capsule_lift(shape, R, t, basis @ q, d)
        if out is not None:
            return out
    return _lift(V, Q, ring, q, where, d, basis)


def _capsule_lift(shape: Convex, R, t, p: np.ndarray, d: np.ndarray) -> np.ndarray | None:
    """The point of a capsule on the line through p along d farthest along d (its side
    part or an end's sphere), or None if the line misses it."""
    r, hl = shape.size
    pl, e = R.T @ (p - t), R.T @ d
    best = None
    a2 = e[0] * e[0] + e[1] * e[1]
    if a2 > 1e-15:
        b2 = pl[0] * e[0] + pl[1] * e[1]
        disc = b2 * b2 - a2 * (pl[0] * pl[0] + pl[1] * pl[1] - r * r)
        if disc >= 0.0:
            s = (-b2 + math.sqrt(disc)) / a2
            if -hl <= pl[2] + s * e[2] <= hl:
                best = s
    for z in (-hl, hl):
        w = pl - np.array([0.0, 0.0, z])
        b = float(w @ e)
        disc = b * b - float(w @ w) + r * r
        if disc >= 0.0:
            s = -b + math.sqrt(disc)
            best = s if best is None else max(best, s)
    return None if best is None else R @ (pl + best * e) + t


def _hull_lift(shape: Convex, R, t, p: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The point of a hull on the line through p along d that is farthest along d
    (exact: the line against its faces' planes; its support polygon is not flat)."""
    m, c = shape.planes[:, :3], shape.planes[:, 3]
    pl, e = R.T @ (p - t), R.T @ d
    me = m @ e
    up = me > 1e-12
    s = float(np.min(-(m[up] @ pl + c[up]) / me[up])) if up.any() else 0.0
    return R @ (pl + s * e) + t


def _holds(poly: np.ndarray, q: np.ndarray) -> bool:
    """Whether the convex polygon (k, 2) holds the point q."""
    area = 0.5 * float(np.sum(poly[:, 0] * np.roll(poly[:, 1], -1)
                              - np.roll(poly[:, 0], -1) * poly[:, 1]))
    e = np.roll(poly, -1, axis=0) - poly
    side = e[:, 0] * (q[1] - poly[:, 1]) - e[:, 1] * (q[0] - poly[:, 0])
    return bool(np.all(side * (1.0 if area >= 0 else -1.0) >= 0.0))


def _lift(V: np.ndarray, Q: np.ndarray, ring: int, q: np.ndarray, where, n: np.ndarray,
          basis: np.ndarray) -> np.ndarray:
    """The point of the feature (world vertices V, projected Q, the first ``ring`` its
    polygon) that projects on q along n."""
    kind, i, j = where
    if kind == 1:
        return V[i]
    if ring == 1:
        return V[0]
    if kind == 2 or ring == 2:
        if kind != 2:
            i, j = 0, 1
        e = Q[j] - Q[i]
        ee = float(e @ e)
        s = 0.0 if ee <= 0.0 else min(max(float((q - Q[i]) @ e) / ee, 0.0), 1.0)
        return V[i] + s * (V[j] - V[i])
    V = V[:ring]
    # inside a polygon: onto its plane (Newell's normal) along n
    c = V.mean(axis=0)
    m = np.zeros(3)
    for k in range(len(V)):
        a, b = V[k] - c, V[(k + 1) % len(V)] - c
        m += np.cross(a, b)
    p = basis @ q  # the point of the projection plane (through the origin)
    den = float(m @ n)
    if abs(den) <= 1e-12 * (float(np.linalg.norm(m)) or 1.0):
        return c + (basis @ (q - basis.T @ c))
    return p + (float(m @ (c - p)) / den) * n


@functools.lru_cache(maxsize=65536)
def _code(where_a, where_b) -> int:
    key = 0
    for x in (*where_a, *where_b):
        key = ((key * 0x100000001B3) ^ (x + 1)) & _MASK
    return key


@dataclass
class Manifold:
    """Contact points of two shapes a and b, within the margin of touching."""

    normal: np.ndarray  #: (3,) unit, from b to a
    point_a: np.ndarray  #: (k, 3) on a's surface
    point_b: np.ndarray  #: (k, 3) on b's surface
    gap: np.ndarray  #: (k,) (point_a - point_b) . normal, m (< 0: overlap)
    codes: np.ndarray  #: (k,) int64, which features made each point
    distance: float  #: coal's signed distance of the two shapes, m


def _transform(R, t):
    import coal
    return coal.Transform3s(np.asarray(R, dtype=float), np.asarray(t, dtype=float))


def collide(a: Convex, Ra, ta, b: Convex, Rb, tb, margin: float):
    """coal's answer for two placed shapes within ``margin``: (normal from b to a,
    signed distance, point on a, point on b), or None when farther apart."""
    import coal
    req = coal.CollisionRequest()
    req.security_margin = margin
    res = coal.CollisionResult()
    coal.collide(a.geometry, _transform(Ra, ta), b.geometry, _transform(Rb, tb), req, res)
    if not res.numContacts():
        return None
    c = res.getContact(0)
    n = -np.asarray(c.normal, dtype=float)
    norm = float(np.linalg.norm(n))
    if not norm > 0.0:
        return None
    return (n / norm, float(c.penetration_depth), np.asarray(c.getNearestPoint1(), dtype=float),
            np.asarray(c.getNearestPoint2(), dtype=float))


def contact_manifold(a: Convex, Ra, ta, b: Convex, Rb, tb, margin: float,
                     plane: tuple[np.ndarray, np.ndarray] | None = None,
                     full_within: float | None = None) -> Manifold | None:
    """The contact manifold of shape a (placed by Ra, ta) against shape b (Rb, tb) within
    ``margin`` (see the module docstring), or None. ``plane`` = (a point, the unit
    normal): b is that half-space instead (Rb, tb unused). ``full_within`` (m): shapes
    farther apart than this get coal's closest points only (one point, that names no
    feature: a manifold is what touching shapes need)."""
    if plane is not None:
        o, n = (np.asarray(x, dtype=float) for x in plane)
        if a.kind == "hull":
            return hull_on_plane(a, Ra, ta, o, n, margin)
        Va, ca = support_feature(a, Ra, ta, -n)
        gap = (Va - o) @ n
        keep = gap < margin
        if not keep.any():
            return None
        Vb = Va - gap[:, None] * n
        codes = np.array([_code(_vertex(c), _INSIDE) for c in ca], dtype=np.int64)
        return Manifold(n, Va[keep], Vb[keep], gap[keep], codes[keep], float(gap.min()))
    hit = collide(a, Ra, ta, b, Rb, tb, margin)
    if hit is None:
        return None
    n, distance, pa, pb = hit
    if full_within is not None and distance > full_within:
        return Manifold(n, pa[None, :], pb[None, :], np.array([distance]),
                        np.array([_code((3, 0, 0), (3, 0, 0))], dtype=np.int64), distance)
    Va, ca, ka = support_polygon(a, Ra, ta, -n)
    Vb, cb, kb = support_polygon(b, Rb, tb, n)
    basis = _plane_basis(n)  # (3, 2)
    Qa, Qb = Va @ basis, Vb @ basis
    if ka == 1 or kb == 1 or (ka == 2 and kb == 2 and not _parallel(Qa[:2], Qb[:2])):
        # a vertex against anything, two edges crossing: one point, coal's (the features
        # name it: which vertex, which edges)
        wa = _vertex(0) if ka == 1 else _edge(0, 1) if ka == 2 else _INSIDE
        wb = _vertex(0) if kb == 1 else _edge(0, 1) if kb == 2 else _INSIDE
        if distance >= margin:
            return None
        return Manifold(n, pa[None, :], pb[None, :], np.array([distance]),
                        np.array([_code(_named(wa, ca), _named(wb, cb))], dtype=np.int64),
                        distance)
    found = _intersect(Qa[:ka], Qb[:kb])
    # a rounded hull's deepest vertex, inside its polygon: where the other's feature is
    # under it (a polygon holding its projection)
    if ka < len(Va) and kb >= 3 and _holds(Qb[:kb], Qa[ka]):
        found.append((Qa[ka], (_vertex(ka), _INSIDE)))
    if kb < len(Vb) and ka >= 3 and _holds(Qa[:ka], Qb[kb]):
        found.append((Qb[kb], (_INSIDE, _vertex(kb))))
    rows_a, rows_b, codes = [], [], []
    for q, (wa, wb) in found:
        rows_a.append(_lift_onto(a, Ra, ta, Va, Qa, ka, q, wa, -n, basis))
        rows_b.append(_lift_onto(b, Rb, tb, Vb, Qb, kb, q, wb, n, basis))
        codes.append(_code(_named(wa, ca), _named(wb, cb)))
    gap = ((np.array(rows_a) - np.array(rows_b)) @ n) if found else np.zeros(0)
    if not found or float(gap.min()) > distance + WITNESS_TOLERANCE:
        # the features (within TOL_ANGLE of the normal) miss coal's deepest point: it too
        rows_a.append(pa)
        rows_b.append(pb)
        codes.append(_code((3, 0, 0), (3, 0, 0)))
        gap = np.append(gap, distance)
    xa, xb = np.array(rows_a), np.array(rows_b)
    keep = gap < margin
    if not keep.any():
        return None
    return Manifold(n, xa[keep], xb[keep], gap[keep], np.array(codes, dtype=np.int64)[keep],
                    distance)


def hull_on_plane(a: Convex, R, t, o: np.ndarray, n: np.ndarray,
                  margin: float) -> Manifold | None:
    """A hull's manifold on the plane through o of unit normal n: its vertices within
    :func:`hull_tolerance` of its lowest (heights ``h``), those of them extreme along
    ``max_points`` directions of the plane (the plane's basis, :func:`plane_basis`: the
    first of equal ones) and the lowest (the first of equal ones), those within the
    margin. :class:`~wb_sim.contact.ground_collision.TerrainContacts` computes the same
    for all meshes at once."""
    P = a.vertices @ R.T + t
    h = (P - o) @ n
    low = float(h.min())
    if low >= margin:
        return None
    near = np.flatnonzero(h <= low + hull_tolerance(a))
    q = P[near] @ plane_basis(n)
    sel = np.unique(np.append(np.argmax(q @ _directions(a.max_points), axis=0),
                              np.argmin(h[near])))
    sel = near[sel]
    sel = sel[h[sel] < margin]
    codes = np.array([_code(_vertex(c), _INSIDE) for c in sel], dtype=np.int64)
    return Manifold(n, P[sel], P[sel] - h[sel, None] * n, h[sel], codes, low)


def plane_basis(n: np.ndarray) -> np.ndarray:
    """(3, 2) two unit vectors spanning the plane normal to the unit vector n."""
    return _plane_basis(np.asarray(n, dtype=float))


def vertex_code(c: int) -> int:
    """The code of a shape's vertex c touching the inside of the other's feature."""
    return _code(_vertex(c), _INSIDE)


def directions(k: int) -> np.ndarray:
    """(2, k) unit vectors at equal angles in a plane (the hull's polygon's)."""
    return _directions(k)


def _parallel(sa: np.ndarray, sb: np.ndarray) -> bool:
    """Whether two projected segments (2, 2) are parallel (within 1e-6 rad)."""
    da, db = sa[1] - sa[0], sb[1] - sb[0]
    den = da[0] * db[1] - da[1] * db[0]
    return abs(den) <= 1e-6 * math.sqrt(float(da @ da) * float(db @ db))


def _named(where, names):
    """``where`` with the feature's local vertex indices replaced by the shape's codes."""
    kind, i, j = where
    if kind == 1:
        return (1, int(names[i]), 0)
    if kind == 2:
        a, b = int(names[i]), int(names[j])
        return (2, min(a, b), max(a, b))
    return where


def reference_deepest(a: Convex, Ra, ta, b: Convex, Rb, tb, margin: float):
    """coal's own contact (normal from b to a, signed distance, point on a, point on b)
    of the two placed shapes, or None: what the manifold's deepest point must equal."""
    return collide(a, Ra, ta, b, Rb, tb, margin)
