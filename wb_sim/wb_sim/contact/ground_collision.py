"""The links' URDF ``<collision>`` geometry against the ground and the terrain
(``collision.enabled``), exact: contact points that the contact model solves as it
solves the feet's (:mod:`wb_sim.contact.whole_body`).

Two sources, each a block of the merged point set:

* :class:`CollisionPoints`: the primitives' *slots* (:func:`wb_sim.contact.geometry.contact_slots`:
  spheres, capsules' end spheres, boxes' corners, cylinders' rim points placed every step
  from the normal) against the ground plane and the heightfield: a fixed set of points per
  geometry (a point's index is its identity), placed and queried together in a few numpy
  calls. Against a plane they are exact (the lowest point of each shape is one of them,
  a face resting on it rests on its own corners or rim points).
* :class:`TerrainContacts`: the pairs :mod:`wb_sim.contact.manifold` solves through coal,
  one by one: every geometry against the terrain's boxes (steps, platforms, stairs:
  a box's edge pushing on a link's face, a link's face on a box's edge, corners, rims),
  and the meshes' convex hulls against the ground plane (their support polygon) and the
  heightfield (the polygon's vertices queried on it). Up to ``capacity`` contacts a step,
  each with an identity (the pair and the features that made it) by which the contact
  model's tangential state follows it.

**Broad phase.** Each geometry has a bounding box (axes of its joint's frame) and
a bounding sphere. Once per step, from the joint placements the step's ABA
already left in pinocchio's data, one small product gives every joint's
``R^T n`` and ``n . t``, and one more, of ``[those, their absolute values, 1]``
with a constant matrix, the height of every box's lowest corner over the ground
plane (the box centre's height and its half extent along the normal are linear
in them): five numpy calls on preallocated buffers, no allocation. With a
heightfield, one query of the bounding spheres' centres; with terrain boxes, one
product for the centres and one signed distance of each to every box. Only when a
box (sphere) comes within ``collision.margin`` of the terrain are its slots placed and
queried, or its pairs solved (the narrow phase), and only points within the margin get
Jacobian rows.

:func:`reference_near`, :func:`reference_narrow`, :func:`reference_terrain` are plain
per-geometry and per-point versions of the phases (the tests hold the fast ones to them).
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from .. import compiled
from ..parameters import Param
from ..pin_views import copy_records, placement_view
from ..terrain import box_distances, box_pose, tangent_bases, tangent_bases_reference
from .geometry import LinkGeometry
from .manifold import (box_shape, contact_manifold, directions, hull_tolerance, plane_basis,
                       support_feature, vertex_code)
from .points import Ground, joint_support, twist_rows

#: the ``collision.*`` parameters of the links against the ground (the self-collision
#: ones: :mod:`wb_sim.contact.self_collision`)
PARAMETERS: tuple[Param, ...] = (
    Param("collision.enabled", "bool", False, "",
          "Whole-body collision: the links' URDF <collision> geometry (boxes, spheres, "
          "cylinders, capsules; meshes through their convex hulls) meets the ground and the "
          "terrain through the contact model, at exact contact points (several where a face "
          "rests on a face). false: only the contact surfaces touch; the other links pass "
          "through the ground."),
    Param("collision.links", "strs", [], "",
          "Links that collide ([] = every link with <collision> geometry except the links "
          "rigidly attached to a contact surface's frame, and collision.exclude_links; in "
          "self-collision those links too: the feet meet each other)."),
    Param("collision.exclude_links", "strs", [], "",
          "Links left out of the default set of collision.links (ground and self-collision)."),
    Param("collision.max_points", "int", 8, "",
          "Where a convex mesh (its hull) meets the ground, a terrain box or another shape: of "
          "its vertices within 5 mm of the deepest, those extreme along this many directions "
          "(its support polygon), and the deepest.", lo=3, hi=64),
    Param("collision.margin", "float", 0.02, "m",
          "Broad phase: geometries whose bounding box (sphere, on terrain) and points are "
          "farther than this from the terrain are skipped for the step. It must exceed the "
          "farthest a link moves in one step (0.02 m: 20 m/s at 1 kHz, 5 m/s at 250 Hz). "
          "Self-collision: pairs of geometries whose bounding spheres, and spheres, are farther "
          "apart than this are skipped.",
          lo=0.0, lo_open=True),
)


# ----------------------------------------------------------------------------
# The slots against the plane and the heightfield
# ----------------------------------------------------------------------------

#: most contacts of the terrain pairs in the contact problem at once (the deepest kept)
TERRAIN_CAPACITY = 128


def _rotate(rec: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rows R_i v_i for placement records rec (k, 12) and vectors v (k, 3)."""
    return rec[:, 0:3] * v[:, 0:1] + rec[:, 3:6] * v[:, 1:2] + rec[:, 6:9] * v[:, 2:3]


def _place_rims(S: np.ndarray, x: np.ndarray, y: np.ndarray, dl: np.ndarray,
                out_of_end: np.ndarray | None) -> np.ndarray:
    """(k, 3) the points of k slots in their joints' frames, from their rows ``S`` of
    :class:`CollisionPoints`' slot table and ``d = R^T (-n)`` (``dl``, (k, 3)) in each rim's
    own axes (``x = d . u1``, ``y = d . u2``; both overwritten): the lowest point of a rim
    lies along ``u = (x e1 + y e2) / rho`` and its slot at angle phi from it at ``rim ((c x
    - s y) e1 + (c y + s x) e2) / rho`` (e = u rim); a capsule's end that d points out of
    (``out_of_end``) at its hemisphere's lowest point, ``centre + rim d``. A slot without a
    rim (rim 0) stays at its centre."""
    rho = np.sqrt(x * x + y * y)
    flat = rho <= 1e-12  # along the axis: towards e1 (manifold.rim_direction's)
    if flat.any():
        x[flat], y[flat], rho[flat] = 1.0, 0.0, 1.0
    c, s = S[:, 18], S[:, 19]
    a, b = (c * x - s * y) / rho, (c * y + s * x) / rho
    r = S[:, 0:3] + a[:, None] * S[:, 12:15]
    r += b[:, None] * S[:, 15:18]
    if out_of_end is not None and out_of_end.any():
        r[out_of_end] = S[out_of_end, 0:3] + S[out_of_end, 20:21] * dl[out_of_end]
    return r


class CollisionPoints:
    """The slots of all primitive geometries (a mesh has none: :class:`TerrainContacts`),
    with the broad phase of every geometry against the plane (and heightfield) and the
    slots' narrow phase.

    Attributes (G geometries, m slots, grouped by geometry):
        geometries: the G :class:`LinkGeometry`.
        m: number of slots; point_geometry (m,), point_joint (m,), r_local (m, 3) their
            centres, radius (m,); the rims' axis_local, perp_local (m, 3), rim (m,).
        near: (G,) bool, geometries the last broad phase found within the margin.
        candidates: (kc,) indices of the slots within the margin after the last
            narrow phase; depth (m,) their penetration (-inf for the others).
        position: (kc, 3) world contact points of the candidates; bases (kc, 3, 3)
            columns (t1, t2, n); J_cm (3, kc, nv) their Jacobian, component-major.
    """

    def __init__(self, model: pin.Model, geometries: list[LinkGeometry], ground: Ground,
                 terrain, margin: float):
        self.model = model
        self.geometries = geometries
        self.ground, self.margin = ground, margin
        #: what the slots meet besides the plane: the heightfield (terrain boxes are
        #: TerrainContacts'), else None (the plane's fast path)
        self.terrain = terrain if terrain is not None and terrain.heightfield is not None \
            else None
        G = len(geometries)
        self.link_names = tuple(g.link for g in geometries)
        counts = [len(g.points) for g in geometries]
        self.m = int(sum(counts))
        self.point_geometry = np.repeat(np.arange(G), counts).astype(int)
        self.geometry_joint = np.array([g.joint for g in geometries], dtype=int)
        self.point_joint = self.geometry_joint[self.point_geometry]

        def stack(name, shape):
            parts = [getattr(g, name) for g in geometries if len(g.points)]
            return np.concatenate(parts) if parts else np.zeros(shape)

        self.r_local = stack("points", (0, 3))
        self.radius = stack("radius", (0,))
        self.axis_local = stack("axis", (0, 3))
        self.perp_local = stack("perp", (0, 3))
        self.rim = stack("rim", (0,))
        self.cap = stack("cap", (0,)).astype(bool)
        self.angle = stack("angle", (0,))
        self._has_rims = bool(np.any(self.rim > 0.0))
        self._has_caps = bool(np.any(self.cap))
        # each rim's own axes in its joint's frame: e1 (its perp), e2 = axis x e1, unit
        # (u1, u2) and times its radius (e1, e2)
        u1 = self.perp_local
        u2 = np.cross(self.axis_local, self.perp_local) if self.m else np.zeros((0, 3))
        #: (m, 23) every slot's constants, gathered in one call by the narrow phase: centre,
        #: rim axes u1, u2, axis (0:12, the vectors d is dotted with), e1, e2 (12:18), cos,
        #: sin of its angle (18, 19), rim radius (20), capsule end (21), radius (22)
        self._slots = np.column_stack([
            self.r_local, u1, u2, self.axis_local, u1 * self.rim[:, None],
            u2 * self.rim[:, None], np.cos(self.angle), np.sin(self.angle), self.rim,
            self.cap.astype(float), self.radius]) if self.m else np.zeros((0, 23))
        self.joint_ids = np.unique(self.geometry_joint)
        self.nv = model.nv
        njoints = model.njoints
        self._basis = np.column_stack([*ground.tangent_basis(), ground.normal])
        self._plane_offset = float(ground.normal @ ground.origin)
        #: read-only (k, 3, 3) views of the plane's one basis, by k
        self._plane_bases: dict[int, np.ndarray] = {}
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
        #: each geometry's joint and its box (centre, half extents, in the joint's frame): the
        #: compiled broad phase's (near_and_narrow)
        self._geometry_joint = np.array([g.joint for g in geometries], dtype=np.int64)
        self._boxes = np.array([[*g.centre, *g.half] for g in geometries], dtype=float).reshape(G, 6)
        self._below = np.zeros(G)
        self._zeros = np.zeros(G)
        #: centres (3G,) = _Mc @ x, x the (njoints * 12) placement records
        self._Mc = centre_matrix(geometries, njoints)
        self.bound = np.array([g.bound for g in geometries])
        self._bound_margin = self.bound + margin
        self._support = joint_support(model)
        self._bound_to = None
        self.near = np.zeros(G, dtype=bool)
        #: the plane's narrow phase in two compiled calls (wb_sim/_compiled.c,
        #: collision_plane_*; :meth:`narrow_plain` is its reference), its arrays held per
        #: data; None: the plain path (WB_SIM_PLAIN=1, not built, a heightfield)
        self._kernels = compiled.kernels() if self.terrain is None and self.m else None
        self._plan = None
        self.clear()

    def clear(self) -> None:
        """No point within the margin (the state of a quiet step)."""
        #: a merged point set's arrays joined by :meth:`near_and_narrow`; None: not this step
        self.joined = None
        self.candidates = np.zeros(0, dtype=int)
        self.depth = np.full(self.m, -np.inf)
        self.position = np.zeros((0, 3))
        self.bases = np.zeros((0, 3, 3))
        self.J_cm = np.zeros((3, 0, self.nv))

    def _bind(self, data: pin.Data) -> None:
        self._rows = placement_view(data, np.arange(self.model.njoints))
        self._bound_to = data  # also keeps the viewed storage alive
        self._plan = None
        if self._kernels is not None and self._rows is not None:
            self._plan = self._kernels.collision_plane_bind(
                self._rows, self.point_geometry, self.point_joint, self._slots,
                len(self.geometries), self._basis, self.ground.normal, self._support,
                self._U, self.margin, self._plane_offset, self._has_rims, self._has_caps,
                self._geometry_joint, self._boxes)

    def _records(self, data: pin.Data) -> np.ndarray:
        """(njoints, 12) placement records of ``data`` (a view where possible)."""
        if data is not self._bound_to:
            self._bind(data)
        return self._rows if self._rows is not None else copy_records(data)

    def any_near(self, data: pin.Data) -> bool:
        """The broad phase: whether a geometry's bounding box (sphere, with a
        heightfield) is within the margin of the plane (and heightfield), from the joint
        placements in ``data``; sets :attr:`near` only when one is. On the plane it
        allocates nothing."""
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
        sdf, _ = self.terrain.query(centres, boxes=False)
        near = sdf < self._bound_margin
        if not near.any():
            return False
        self.near = near
        return True

    def near_and_narrow(self, data: pin.Data, lead=None) -> tuple[bool, int]:
        """``(any_near(data), narrow(data) where one is near, else 0)``, with the same
        attributes set. On the plane with the compiled kernels the broad phase and the
        depths are one call (``collision_plane_near``; its R^T n, n . t and heights are
        summed in another order than any_near's products: equal to rounding, exact on a
        level ground), and the rows a second.

        ``lead``: ``(depth (l,), rows (3 l, nv) component-major)`` of the points a merged
        point set places before these (MergedPoints: the feet). Where the kernels ran and a
        slot is within the margin, :attr:`joined` then holds that set's ``(depth (l + m,),
        rows (3, l + kc, nv), index (l + kc,))`` with the lead's first, and :attr:`depth`
        and :attr:`J_cm` are views of them (MergedPoints.refresh takes them)."""
        self.joined = None
        if data is not self._bound_to:
            self._bind(data)
        plan = self._plan
        if plan is None:
            near = self.any_near(data)
            return near, (self.narrow(data) if near else 0)
        lead_depth = None if lead is None else lead[0]
        l = 0 if lead is None else len(lead_depth)
        near, depth = np.empty(len(self.geometries), dtype=bool), np.empty(l + self.m)
        kc = self._kernels.collision_plane_near(plan, near, depth, lead_depth)
        if kc < 0:
            return False, 0
        self.near, self.depth = near, depth[l:]
        if not kc:
            self.clear()
            return True, 0
        return True, self._rows_of(data, kc, lead, depth)

    def narrow(self, data: pin.Data) -> int:
        """Places the slots of the near geometries, queries the plane (heightfield), and
        for the slots within the margin computes contact points, bases and Jacobian rows.
        Returns the number of such slots (0: none). After :meth:`any_near` on ``data``
        (the plane's path reads its ``R^T n`` and ``n . t``)."""
        self.joined = None
        if data is not self._bound_to:
            self._bind(data)
        plan = self._plan
        if plan is None:
            return self.narrow_plain(data)
        self.depth = depth = np.empty(self.m)
        kc = self._kernels.collision_plane_depths(plan, self.near, depth)
        if not kc:
            self.clear()
            return 0
        return self._rows_of(data, kc)

    def _rows_of(self, data: pin.Data, kc: int, lead=None, depth_all=None) -> int:
        """The compiled narrow phase's second call: the kc candidates of its depths, their
        points, bases and rows; after ``lead``'s rows where :meth:`near_and_narrow` gives
        one (``depth_all``: the depths it wrote after the lead's)."""
        l = 0 if lead is None else len(lead[0])
        cand, pos = np.empty(kc, dtype=np.int64), np.empty((kc, 3))
        J = np.empty((3, l + kc, self.nv))
        index = None if lead is None else np.empty(l + kc, dtype=np.int64)
        self._kernels.collision_plane_rows(self._plan, data.J, cand, pos, J,
                                           None if lead is None else lead[1], index)
        self.candidates, self.position, self.J_cm = cand, pos, J[:, l:]
        if lead is not None:
            self.joined = (depth_all, J, index)
        self.bases = self._bases(kc)
        return kc

    def _bases(self, kc: int) -> np.ndarray:
        """(kc, 3, 3) read-only: the plane's one basis for each of kc contacts."""
        bases = self._plane_bases.get(kc)
        if bases is None:
            bases = self._plane_bases[kc] = np.broadcast_to(self._basis, (kc, 3, 3))
        return bases

    def narrow_plain(self, data: pin.Data) -> int:
        """:meth:`narrow` in numpy: the plain path and the compiled one's reference."""
        # (take: a gather in a fraction of fancy indexing's time on these small arrays)
        idx = self.near.take(self.point_geometry).nonzero()[0]
        if not len(idx):
            self.clear()
            return 0
        if self.terrain is not None:
            return self._narrow_terrain(data, idx)
        joints = self.point_joint.take(idx)
        k = len(idx)
        S = self._slots.take(idx, axis=0)  # every per-slot constant in one gather
        dl = np.negative(self._U3.take(joints, axis=1).T)  # R_j^T (-n): the broad phase's
        # d . [centre, u1, u2, axis] of every slot (joint frame) in one product
        Q = np.matmul(S[:, 0:12].reshape(k, 4, 3), dl[:, :, None])[:, :, 0]
        # each slot's height over the plane without placing it: its point c = centre + offset
        # is at n . (R c + t) - n . o = n . t - n . o - d . centre - d . offset. A rim's
        # lowest point lies along u = (x u1 + y u2) / rho (x = d . u1, y = d . u2, rho their
        # norm), and the slot at angle phi from it at rim (cos phi u + sin phi axis x u): d .
        # offset = rim cos(phi) rho. Out of a capsule's end: its hemisphere's lowest point,
        # d . offset = rim
        d_c = Q[:, 0]
        if self._has_rims:
            x, y = Q[:, 1], Q[:, 2]
            lift = np.sqrt(x * x + y * y)
            lift *= S[:, 18]
            lift *= S[:, 20]
            if self._has_caps:
                ends = (S[:, 21] > 0.0) & (Q[:, 3] >= 0.0)
                np.copyto(lift, S[:, 20], where=ends)
            d_c += lift
        depth = S[:, 22] - self._U[3].take(joints)
        depth += d_c
        depth += self._plane_offset  # radius - (n . t - n . o - d . c)
        keep = depth > -self.margin
        self.depth = np.full(self.m, -np.inf)
        if not keep.any():
            self.clear()
            return 0
        kept = keep.nonzero()[0]
        cand = idx.take(kept)
        self.depth[cand] = depth.take(kept)
        self.candidates = cand
        kc = len(cand)
        # only the slots within the margin are placed: their points in the joint frames
        Sk = S.take(kept, axis=0)
        if self._has_rims:
            ends = (Sk[:, 21] > 0.0) & (Q[:, 3].take(kept) >= 0.0) if self._has_caps else None
            r_local = _place_rims(Sk, Q[:, 1].take(kept), Q[:, 2].take(kept),
                                  dl.take(kept, axis=0), ends)
        else:
            r_local = Sk[:, 0:3]
        jk = joints.take(kept)
        rec = self._records(data).take(jk, axis=0)  # (kc, 12)
        # P = R c + t: the record's first 9 entries are R column-major, so as a (3, 3) R^T
        P = np.matmul(r_local[:, None, :], rec[:, :9].reshape(kc, 3, 3))[:, 0]
        P += rec[:, 9:12]
        P -= Sk[:, 22:23] * self.ground.normal  # the contact point: on the surface
        pos = P
        self.bases = self._bases(kc)
        # C (3, kc, 6): row c of point i is [b_c, p_i x b_c] (its velocity along b_c is
        # C @ the world-frame joint twist); one basis: p x b_c = P @ skew(b_c) for all
        C = np.empty((3, kc, 6))
        C[:, :, :3] = self._basis.T[:, None, :]
        C[:, :, 3:] = pos.dot(self._skew_basis).reshape(kc, 3, 3).transpose(1, 0, 2)
        self.position = pos
        J = C.reshape(-1, 6).dot(data.J).reshape(3, kc, self.nv)
        J *= self._support.take(jk, axis=0)
        self.J_cm = J
        return kc

    def _narrow_terrain(self, data: pin.Data, idx: np.ndarray) -> int:
        """:meth:`narrow` on the heightfield: the slots ``idx`` placed in the world and
        queried there."""
        rows = self._records(data)
        joints = self.point_joint[idx]
        rec = rows[joints]  # (k, 12)
        r_local = self.r_local[idx]
        if self._has_rims:  # as narrow's, d from the heightfield's normal at the centres
            P = _rotate(rec, r_local) + rec[:, 9:12]
            _, normals = self.terrain.query(P, boxes=False)
            dl = -np.stack([np.einsum("ij,ij->i", rec[:, 3 * a:3 * a + 3], normals)
                            for a in range(3)], axis=1)
            S = self._slots.take(idx, axis=0)
            ends = (S[:, 21] > 0.0) & (np.einsum("ij,ij->i", dl, S[:, 9:12]) >= 0.0) \
                if self._has_caps else None
            r_local = _place_rims(S, np.einsum("ij,ij->i", dl, S[:, 3:6]),
                                  np.einsum("ij,ij->i", dl, S[:, 6:9]), dl, ends)
        P = _rotate(rec, r_local) + rec[:, 9:12]
        sdf, normals = self.terrain.query(P, boxes=False)
        depth = self.radius[idx] - sdf
        keep = depth > -self.margin
        self.depth = np.full(self.m, -np.inf)
        if not keep.any():
            self.clear()
            return 0
        cand = idx[keep]
        self.depth[cand] = depth[keep]
        self.candidates = cand
        nrm = normals[keep]
        pos = P[keep] - self.radius[cand][:, None] * nrm
        self.bases = tangent_bases(nrm)
        C = twist_rows(self.bases, pos)
        self.position = pos
        k = len(cand)
        J = C.reshape(-1, 6).dot(data.J).reshape(3, k, self.nv)
        J *= self._support[self.point_joint[cand]]
        self.J_cm = J
        return k

    def world_forces(self, force_g: np.ndarray, bases: np.ndarray | None = None) -> np.ndarray:
        """(kc, 3) world forces of the candidates from ground coordinates (kc, 3), in the
        contact bases ``bases`` (kc, 3, 3) of a narrow phase (default: the last one's)."""
        if self.terrain is None:  # the plane's one basis
            return force_g.dot(self._basis.T)
        return np.einsum("kij,kj->ki", self.bases if bases is None else bases, force_g)

    def links(self, idx: np.ndarray) -> tuple[str, ...]:
        """The link of each of the slots ``idx``."""
        return tuple(self.link_names[self.point_geometry[i]] for i in idx)


def centre_matrix(geometries, njoints: int) -> np.ndarray:
    """(3G, 12 njoints): times the placement records (flat), the geometries' bounding
    centres in the world."""
    G = len(geometries)
    Mc = np.zeros((3 * G, 12 * njoints))
    for k, g in enumerate(geometries):
        base = 12 * g.joint
        for a in range(3):
            for b in range(3):
                Mc[3 * k + b, base + 3 * a + b] = g.centre[a]
        for b in range(3):
            Mc[3 * k + b, base + 9 + b] = 1.0
    return Mc


def reference_near(points: CollisionPoints, data: pin.Data) -> np.ndarray:
    """Plain broad phase: per geometry, on the plane the height of the lowest of its
    bounding box's 8 corners (placed by ``data.oMi``), with a heightfield its bounding
    sphere's signed distance; (G,) bool, near within the margin."""
    out = []
    signs = [np.array([sx, sy, sz]) for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    for g in points.geometries:
        M = data.oMi[g.joint]
        if points.terrain is None:
            d = min(float(points.ground.normal @ (M.act(g.centre + s * g.half)
                                                  - points.ground.origin)) for s in signs)
        else:
            d = float(points.terrain.query(M.act(g.centre)[None, :], boxes=False)[0][0]) \
                - g.bound
        out.append(d < points.margin)
    return np.array(out, dtype=bool)


def _point_jacobian(model, data, joint: int, p: np.ndarray) -> np.ndarray:
    """(3, nv) the world velocity Jacobian of the point p fixed to ``joint``."""
    Jj = pin.getJointJacobian(model, data, joint, pin.LOCAL_WORLD_ALIGNED)
    return Jj[:3] - pin.skew(p - data.oMi[joint].translation) @ Jj[3:]


def reference_narrow(points: CollisionPoints, model: pin.Model, data: pin.Data, q: np.ndarray):
    """Plain narrow phase of every slot (near or not): {slot index: (depth, contact
    point (3,), basis (3, 3), Jacobian (3, nv) rows t1, t2, n)} for the slots within
    the margin, each slot placed one by one (a rim's point from the normal at its
    rim's centre, through the rim's own frame), its Jacobian from pinocchio's joint
    Jacobian at ``q`` (LOCAL_WORLD_ALIGNED, shifted to the point)."""
    pin.computeJointJacobians(model, data, q)

    def query(c):
        if points.terrain is None:
            return (float(points.ground.normal @ (c - points.ground.origin)),
                    np.asarray(points.ground.normal, dtype=float))
        s, nn = points.terrain.query(c[None, :], boxes=False)
        return float(s[0]), nn[0]

    out = {}
    for i in range(points.m):
        j = int(points.point_joint[i])
        M = data.oMi[j]
        c = M.act(points.r_local[i])
        if points.rim[i] > 0.0:
            a = M.rotation @ points.axis_local[i]
            d = -query(c)[1]
            u = d - (d @ a) * a
            u = M.rotation @ points.perp_local[i] if np.linalg.norm(u) <= 1e-12 \
                else u / np.linalg.norm(u)
            ang = points.angle[i]
            if points.cap[i] and d @ a >= 0.0:  # out of a capsule's end: its hemisphere
                c = c + points.rim[i] * d
            else:
                c = c + points.rim[i] * (math.cos(ang) * u + math.sin(ang) * np.cross(a, u))
        sdf, n = query(c)
        B = points._basis if points.terrain is None else tangent_bases_reference(n[None, :])[0]
        depth = points.radius[i] - sdf
        if depth <= -points.margin:
            continue
        p = c - points.radius[i] * n
        out[i] = (depth, p, B, B.T @ _point_jacobian(model, data, j, p))
    return out


# ----------------------------------------------------------------------------
# The pairs: geometries against the terrain's boxes, meshes against the ground
# ----------------------------------------------------------------------------


def _mix(pair: int, code: int) -> int:
    """A contact's identity (int64 >= 0) from its pair's index and its features' code."""
    return ((pair * 0x9E3779B97F4A7C15) ^ code) & ((1 << 62) - 1)


def world_placement(rec: np.ndarray, g: LinkGeometry) -> tuple[np.ndarray, np.ndarray]:
    """(rotation, translation) of geometry g in the world from its joint's record (12,)."""
    Rj = rec[:9].reshape(3, 3).T
    M = g.placement
    return Rj @ M.rotation, Rj @ M.translation + rec[9:12]


class TerrainContacts:
    """The contacts :mod:`wb_sim.contact.manifold` makes pair by pair (see the module
    docstring): every geometry against every terrain box, the meshes against the plane and
    the heightfield. Items: 0 the plane, 1 the heightfield, 2 + b terrain box b.

    Attributes (after :meth:`contacts`): capacity; k contacts, in slot order (ascending
    ``ids``): ids (k,) int64 identities, geometry (k,), depth (k,) m, slot_depth
    (capacity,) the same with -inf in the free slots, position (k, 3) the world contact
    points (on the link's surface), bases (k, 3, 3) columns (t1, t2, n), J_cm (3, k, nv)
    Jacobian rows, component-major; dropped: contacts left out for want of a slot, since
    construction.
    """

    def __init__(self, model: pin.Model, geometries: list[LinkGeometry], ground: Ground,
                 terrain, margin: float, capacity: int = TERRAIN_CAPACITY):
        self.model, self.nv = model, model.nv
        self.geometries = geometries
        self.link_names = tuple(g.link for g in geometries)
        self.ground, self.terrain, self.margin = ground, terrain, margin
        self.capacity = capacity
        self.meshes = np.array([i for i, g in enumerate(geometries) if not len(g.points)],
                               dtype=int)
        boxes = list(terrain.boxes) if terrain is not None else []
        self.boxes = boxes
        self._box_shapes = [(box_shape(b.half), *box_pose(b)) for b in boxes]
        self.heightfield = terrain.heightfield if terrain is not None else None
        self.n_items = 2 + len(boxes)
        self.geometry_joint = np.array([g.joint for g in geometries], dtype=int)
        self.joint_ids = np.unique(self.geometry_joint) if len(geometries) else np.array([1])
        self._Mc = centre_matrix(geometries, model.njoints)
        self._bound_margin = np.array([g.bound for g in geometries]) + margin
        self._support = joint_support(model)
        self._bound_to = None
        self.dropped = 0
        #: (G,) the geometries awake (free objects asleep are not: Simulator's
        #: objects.sleep); None: all
        self.awake: np.ndarray | None = None
        self.active = bool(boxes) or bool(len(self.meshes))
        # the meshes on the plane, all at once: their hulls' vertices in their joints' frames,
        # grouped by mesh, and each vertex's identity as a contact with the plane (item 0)
        self._plane_B = plane_basis(ground.normal)
        self._plane_o = float(ground.normal @ ground.origin)
        rows, geo, ids, tol = [], [], [], np.zeros(len(geometries))
        self._mesh_rows: dict[int, np.ndarray] = {}
        at = 0
        for g in self.meshes:
            geo_g = geometries[g]
            M = geo_g.placement
            V = geo_g.convex.vertices
            rows.append(V @ M.rotation.T + M.translation)
            geo.append(np.full(len(V), g))
            ids.append([_mix(int(g) * self.n_items, vertex_code(c)) for c in range(len(V))])
            tol[g] = hull_tolerance(geo_g.convex)
            self._mesh_rows[int(g)] = np.arange(at, at + len(V))
            at += len(V)
        self._mesh_V = np.vstack(rows) if rows else np.zeros((0, 3))
        self._mesh_Vg = {g: self._mesh_V[r] for g, r in self._mesh_rows.items()}  # per mesh
        self._mesh_geometry = np.concatenate(geo).astype(int) if geo else np.zeros(0, dtype=int)
        self._mesh_joint = self.geometry_joint[self._mesh_geometry]
        self._mesh_ids = np.concatenate([np.array(i, dtype=np.int64) for i in ids]) if ids \
            else np.zeros(0, dtype=np.int64)
        self._mesh_tol = tol
        self._dirs = directions(geometries[self.meshes[0]].convex.max_points) \
            if len(self.meshes) else None
        self.clear()

    def clear(self) -> None:
        """No contact."""
        self.k = 0
        self.ids = np.zeros(0, dtype=np.int64)
        self.geometry = np.zeros(0, dtype=int)
        self.depth = np.zeros(0)
        self.slot_depth = np.full(self.capacity, -np.inf)
        self.position = np.zeros((0, 3))
        self.bases = np.zeros((0, 3, 3))
        self.J_cm = np.zeros((3, 0, self.nv))

    def _records(self, data: pin.Data) -> np.ndarray:
        if data is not self._bound_to:
            self._rows = placement_view(data, np.arange(self.model.njoints))
            self._bound_to = data
        return self._rows if self._rows is not None else copy_records(data)

    def near_pairs(self, data: pin.Data, near_ground: np.ndarray | None) -> list:
        """The broad phase: [(geometry, item)] whose bounding sphere (box) is within the
        margin: the meshes ``near_ground`` flags (CollisionPoints.near, None: none) with
        the plane and heightfield, every geometry near a terrain box with it."""
        pairs = []
        if near_ground is not None and len(self.meshes):
            for g in self.meshes[near_ground[self.meshes]]:
                pairs.append((int(g), 0))
                if self.heightfield is not None:
                    pairs.append((int(g), 1))
        if self.boxes:
            rows = self._records(data)
            centres = self._Mc.dot(rows.reshape(-1)).reshape(-1, 3)
            close = box_distances(self.boxes, centres) < self._bound_margin[None, :]
            if self.awake is not None:
                close &= self.awake[None, :]
            for b, g in zip(*np.nonzero(close)):
                pairs.append((int(g), 2 + int(b)))
        return pairs

    def contacts(self, data: pin.Data, near_ground: np.ndarray | None) -> int:
        """The broad and narrow phases: the step's contacts (their number k)."""
        if not self.active:
            return 0
        pairs = self.near_pairs(data, near_ground)
        if not pairs:
            self.clear()
            return 0
        rows = self._records(data)
        on_plane = [g for g, item in pairs if item == 0]
        found = [self.meshes_on_plane(rows, on_plane)] if on_plane else []
        found += [self.pair_contacts(g, item, rows[self.geometries[g].joint])
                  for g, item in pairs if item != 0]
        found = [f for f in found if f is not None]
        if not found:
            self.clear()
            return 0
        ids = np.concatenate([f[0] for f in found])
        geometry = np.concatenate([f[1] for f in found])
        depth = np.concatenate([f[2] for f in found])
        pos = np.concatenate([f[3] for f in found])
        nrm = np.concatenate([f[4] for f in found])
        if len(ids) > self.capacity:  # the deepest
            self.dropped += len(ids) - self.capacity
            on = np.lexsort((ids, -depth))[:self.capacity]
            ids, geometry, depth, pos, nrm = ids[on], geometry[on], depth[on], pos[on], nrm[on]
        order = np.argsort(ids, kind="stable")
        ids, geometry, depth, pos, nrm = ids[order], geometry[order], depth[order], pos[order], \
            nrm[order]
        if len(ids) > 1 and not np.all(np.diff(ids) > 0):  # an identity twice: keep the first
            first = np.concatenate([[True], np.diff(ids) > 0])
            ids, geometry, depth, pos, nrm = ids[first], geometry[first], depth[first], \
                pos[first], nrm[first]
        k = len(ids)
        B = tangent_bases(nrm)
        J = twist_rows(B, pos).reshape(-1, 6).dot(data.J).reshape(3, k, self.nv)
        J *= self._support[self.geometry_joint[geometry]]
        self.k, self.ids, self.geometry, self.depth = k, ids, geometry, depth
        slot = np.full(self.capacity, -np.inf)
        slot[:k] = depth
        self.slot_depth = slot
        self.position, self.bases, self.J_cm = pos, B, J
        return k

    def meshes_on_plane(self, rows: np.ndarray, meshes: list[int]):
        """(ids, geometry, depth, contact points, normals) of the meshes ``meshes`` on the
        plane, all at once: :func:`~wb_sim.contact.manifold.hull_on_plane`'s points (the
        vertices within the hull's tolerance of its lowest, of those the first extreme
        along each direction and the first lowest, within the margin), or None."""
        n = self.ground.normal
        # heights first (each joint's R^T n and n . t, one product per mesh), the world
        # points of the candidates only
        u = rows[:, :9].reshape(-1, 3, 3).dot(n)
        c = rows[:, 9:12].dot(n) - self._plane_o
        counts = np.array([len(self._mesh_rows[g]) for g in meshes])
        idx = np.concatenate([self._mesh_rows[g] for g in meshes])
        joints = [self.geometries[g].joint for g in meshes]
        h = np.concatenate([self._mesh_Vg[g].dot(u[j]) + c[j] for g, j in zip(meshes, joints)])
        starts = np.cumsum(counts) - counts
        low = np.minimum.reduceat(h, starts)
        ok = low < self.margin
        if not ok.any():
            return None
        limit = low + self._mesh_tol[np.asarray(meshes)]
        segment = np.repeat(np.arange(len(meshes)), counts)
        cand = np.flatnonzero((h <= limit[segment]) & ok[segment])
        seg = segment[cand]  # grouped, ascending
        used, first = np.unique(seg, return_index=True)
        row = np.searchsorted(used, seg)
        rec = rows[self._mesh_joint[idx[cand]]]
        Pc = _rotate(rec, self._mesh_V[idx[cand]]) + rec[:, 9:12]
        vals = (Pc @ self._plane_B) @ self._dirs  # (c, K)
        pos = np.arange(len(cand))
        big = len(cand)
        top = np.maximum.reduceat(vals, first, axis=0)[row]
        extreme = np.minimum.reduceat(np.where(vals == top, pos[:, None], big), first, axis=0)
        hc = h[cand]
        lowest = np.minimum.reduceat(np.where(hc == low[used][row], pos, big), first)
        chosen = np.unique(np.concatenate([extreme.ravel(), lowest]))  # rows of cand
        chosen = chosen[hc[chosen] < self.margin]
        vertex = idx[cand[chosen]]
        k = len(chosen)
        return (self._mesh_ids[vertex], self._mesh_geometry[vertex], -hc[chosen], Pc[chosen],
                np.broadcast_to(n, (k, 3)))

    def pair_contacts(self, g: int, item: int, rec: np.ndarray):
        """(ids, geometry, depth, contact points, normals) of one pair within the
        margin, or None."""
        geo = self.geometries[g]
        R, t = world_placement(rec, geo)
        pair = g * self.n_items + item
        if item == 1:  # a mesh on the heightfield: its support polygon's vertices, queried
            _, n0 = self.heightfield.query(t[None, :])
            V, codes = support_feature(geo.convex, R, t, -n0[0])
            sdf, nrm = self.heightfield.query(V)
            keep = sdf < self.margin
            if not keep.any():
                return None
            ids = np.array([_mix(pair, int(c)) for c in codes[keep]], dtype=np.int64)
            return ids, np.full(len(ids), g), -sdf[keep], V[keep], nrm[keep]
        if item == 0:
            man = contact_manifold(geo.convex, R, t, None, None, None, self.margin,
                                   plane=(self.ground.origin, self.ground.normal))
        else:
            shape, Rb, tb = self._box_shapes[item - 2]
            man = contact_manifold(geo.convex, R, t, shape, Rb, tb, self.margin)
        if man is None:
            return None
        ids = np.array([_mix(pair, int(c)) for c in man.codes], dtype=np.int64)
        k = len(ids)
        return ids, np.full(k, g), -man.gap, man.point_a, np.tile(man.normal, (k, 1))

    def world_forces(self, force_g: np.ndarray) -> np.ndarray:
        """(k, 3) world forces from basis coordinates (k, 3)."""
        return np.einsum("kij,kj->ki", self.bases, force_g)

    def links(self) -> tuple[str, ...]:
        """The link of each current contact."""
        return tuple(self.link_names[g] for g in self.geometry)


def reference_terrain(tc: TerrainContacts, model: pin.Model, data: pin.Data, q: np.ndarray,
                      near_ground: np.ndarray | None) -> dict:
    """Plain narrow phase of the pairs: {identity: (depth, contact point, basis, Jacobian
    (3, nv))} of every pair within the margin (checked one by one, the placements from
    ``data.oMi``, each contact's Jacobian from pinocchio's joint Jacobian at ``q``)."""
    pin.computeJointJacobians(model, data, q)
    out = {}
    for g, geo in enumerate(tc.geometries):
        items = [2 + b for b in range(len(tc.boxes))]
        if near_ground is not None and not len(geo.points) and near_ground[g]:
            items = [0] + ([1] if tc.heightfield is not None else []) + items
        M = data.oMi[geo.joint]
        rec = np.concatenate([M.rotation.T.reshape(-1), M.translation])
        for item in items:
            found = tc.pair_contacts(g, item, rec)
            if found is None:
                continue
            for i, depth, p, n in zip(found[0], found[2], found[3], found[4]):
                B = tangent_bases_reference(n[None, :])[0]
                out[int(i)] = (depth, p, B, B.T @ _point_jacobian(model, data, geo.joint, p))
    return out
