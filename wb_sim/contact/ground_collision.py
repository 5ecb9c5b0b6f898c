"""The links' URDF ``<collision>`` geometry against the ground and the terrain
(``collision.enabled``), as contact points with a radius (:mod:`wb_sim.contact.geometry`)
that the contact model solves as it solves the feet's (:mod:`wb_sim.contact.whole_body`).

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

:func:`reference_near`, :func:`reference_narrow` are plain per-geometry and
per-point versions of the broad and narrow phases (the tests hold the fast ones
to them).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from ..parameters import Param
from ..pin_views import copy_records, placement_view
from ..terrain import tangent_bases, tangent_bases_reference
from .geometry import LinkGeometry
from .points import Ground, twist_rows

#: the ``collision.*`` parameters of the links against the ground (the self-collision
#: ones: :mod:`wb_sim.contact.self_collision`)
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
          "rims get 8 or more, within 1 mm of the circle); at least 1 mm: the edges are "
          "sampled at this spacing before max_points keeps the spread ones (1e-9 m hung the "
          "start).", lo=0.001),
    Param("collision.margin", "float", 0.02, "m",
          "Broad phase: geometries whose bounding box (sphere, on terrain) and points are "
          "farther than this from the terrain are skipped for the step. It must exceed the "
          "farthest a link moves in one step (0.02 m: 20 m/s at 1 kHz, 5 m/s at 250 Hz). "
          "Self-collision: pairs of geometries whose bounding spheres, and spheres, are farther "
          "apart than this are skipped.",
          lo=0.0, lo_open=True),
)


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
        self._rows = placement_view(data, np.arange(self.model.njoints))
        self._bound_to = data  # also keeps the viewed storage alive

    def _records(self, data: pin.Data) -> np.ndarray:
        """(njoints, 12) placement records of ``data`` (a view where possible)."""
        if data is not self._bound_to:
            self._bind(data)
        return self._rows if self._rows is not None else copy_records(data)

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
