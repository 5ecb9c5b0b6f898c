"""Contact points attached to the robot and their kinematics, shared by all
contact models.

Every contact surface of the configuration becomes a set of points rigidly
attached to the parent joint of its frame (a sphere contributes its centre and
radius: its contact point is the centre minus radius times the ground normal,
the lowest point, recomputed every step as the foot rolls).

:meth:`ContactPoints.update` computes, once per step and into preallocated
buffers, the positions of all points and their Jacobian from the joint
placements and Jacobians that the step's ABA already left in pinocchio's data;
the contact models take velocities and Delassus matrices from that Jacobian, so
the step needs no other kinematics.

Layout, chosen so that a step costs a handful of numpy calls whatever the
number of points (with 8 points every call is overhead-bound): per-point
arrays are stored component-major, ``(3, n)`` with rows (t1, t2, n) in ground
coordinates, so the contact law works on contiguous rows. The point Jacobian
(3n, nv), rows in that order, is ``Jp = (C(P) @ J) * S``: ``J`` (6, nv) is
pinocchio's world-frame joint Jacobian (every joint's twist at the world
origin), ``C(P)`` (3n, 6) holds ``B^T [I, -[p]x]`` for each point (``B`` the
ground basis) and the constant mask ``S`` keeps, on each row, the dofs that
move that point's parent joint. ``C``'s constant part is built once; its
``-B^T [p]x`` blocks are one matmul and one scatter per step. Velocities are
``Jp @ v``, generalized forces ``f @ Jp``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .. import compiled
from ..pin_views import placement_view
from ..robot import RobotModel
from ..terrain import tangent_bases as terrain_bases


@dataclass(frozen=True)
class Ground:
    """The ground plane {x : n . (x - o) = 0}, o = (0, 0, height), n its unit normal."""

    height: float
    normal: np.ndarray

    @property
    def origin(self) -> np.ndarray:
        return np.array([0.0, 0.0, self.height])

    def tangent_basis(self) -> np.ndarray:
        """Two unit vectors spanning the plane, (2, 3)."""
        n = self.normal
        a = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
        t1 = a - n * (a @ n)
        t1 /= np.linalg.norm(t1)
        return np.stack([t1, np.cross(n, t1)])


class ContactPoints:
    """All contact points of all surfaces, vectorized (see the module docstring).

    Attributes (n points, J distinct parent joints, S surfaces; "ground
    coordinates" are components along (t1, t2, n) of the ground plane):
        surface_names: the S surface names, configuration order.
        surface_frames: the S frame names.
        surface_of_point: (n,) surface index of each point.
        joint_ids: (J,) pinocchio joint index of each distinct parent joint.
        slot: (n,) index into ``joint_ids`` of each point's parent joint.
        r_local: (n, 3) point (or sphere centre) in its parent joint frame, m.
        radius: (n,) sphere radius (0 for box and explicit points), m.
        position_T: (3, n) world position of each contact point (the material
            point) after :meth:`update`, m; ``position`` is its (n, 3) view.
        position_gT: (3, n) position in ground coordinates (rows t1, t2, n), m.
        plane_z: the plane is {third ground coordinate == plane_z}.
    """

    #: every point can enter a solve (MergedPoints names the few that can)
    candidates = None

    def __init__(self, robot: RobotModel, surfaces, ground: Ground, terrain=None,
                 model=None):
        """``surfaces``: the contact surfaces' parameter groups (``SimConfig.surfaces``);
        ``model``: the model the step integrates where it has more joints than the robot's
        (free objects appended, :mod:`wb_sim.objects`), else the robot's."""
        model = robot.model if model is None else model
        self.ground = ground
        #: wb_sim.terrain.Terrain beyond the plane, or None (the single-basis fast path)
        self.terrain = terrain
        #: (n, 3, 3) per-point bases, columns (t1, t2, n), with terrain (else None)
        self.bases = None
        self.surface_names = tuple(s.name for s in surfaces)
        self.surface_frames = tuple(s.frame for s in surfaces)
        placements = []
        r_local, radius, surface_of_point, joint_of_point = [], [], [], []
        for k, s in enumerate(surfaces):
            fid = robot.frame_id(s.frame, key=f"{s.name}.frame")
            frame = model.frames[fid]
            jid = frame.parentJoint
            placements.append(frame.placement)  # joint <- surface frame
            pts = s.local_points()
            pts_joint = (frame.placement.rotation @ pts.T).T + frame.placement.translation
            r_local.append(pts_joint)
            radius.append(np.full(len(pts), s.radius if s.shape == "sphere" else 0.0))
            surface_of_point += [k] * len(pts)
            joint_of_point += [jid] * len(pts)
        self.n = n = len(surface_of_point)
        self.joint_ids = np.array(sorted(set(joint_of_point)), dtype=int)
        J = len(self.joint_ids)
        self.slot = np.searchsorted(self.joint_ids, np.array(joint_of_point, dtype=int))
        self.surface_of_point = np.array(surface_of_point, dtype=int)
        self.r_local = np.vstack(r_local) if r_local else np.zeros((0, 3))
        self.radius = np.concatenate(radius) if radius else np.zeros(0)
        self.has_spheres = bool(np.any(self.radius > 0))
        self.nv = nv = model.nv
        self.model = model
        # Ground coordinates: columns t1, t2, n, so that x_g = (x - o) @ basis has its
        # third component equal to the signed distance to the plane.
        self.basis = np.column_stack([*ground.tangent_basis(), ground.normal])
        self._rotated = not np.allclose(self.basis, np.eye(3))
        BT = self.basis.T
        self.plane_z = 0.0 if self._rotated else ground.height
        # world points, (3, n) = HT (3, 4J) @ r_augT (4J, n); HT = [R_j, t_j] per joint
        self._HT = np.zeros((3, 4 * J))
        self._HT_now = self._HT  #: HT at the last update
        self._r_augT = np.zeros((4 * J, n))
        for i, (k, r) in enumerate(zip(self.slot, self.r_local)):
            self._r_augT[4 * k:4 * k + 3, i] = r
            self._r_augT[4 * k + 3, i] = 1.0
        self._sphere_offsetT = (self.radius[:, None] * ground.normal).T.copy()  # centre -> lowest
        self._originT = ground.origin[:, None]
        self._allocate_positions()
        # support[j, k] = 1 if velocity k moves joint j
        support = np.zeros((J, nv))
        for k, jid in enumerate(self.joint_ids):
            for a in model.supports[int(jid)]:
                if a > 0:
                    support[k, model.idx_vs[a]:model.idx_vs[a] + model.nvs[a]] = 1.0
        # S (3n, nv): row c * n + i keeps the dofs that move point i
        self._row_support = np.tile(support[self.slot], (3, 1))
        # C (3n, 6), rows c * n + i: constant B^T (linear part) ...
        self._C = np.zeros((3 * n, 6))
        self._C[:, :3] = np.repeat(BT, n, axis=0)
        # ... and -B^T [p_i]x, written every step: blocks (n, 9) = P (n, 3) @ _skew_map,
        # blocks[i, 3 c + b] = -(B^T [p_i]x)[c, b], scattered into C at _skew_index
        self._skew_map = -np.einsum("ca,kab->kcb", BT, _LEVI_CIVITA).reshape(3, 9)
        rows = (np.arange(3)[None, :, None] * n + np.arange(n)[:, None, None])  # (n, 3, 1)
        cols = 3 + np.arange(3)[None, None, :]  # (1, 1, 3)
        self._skew_index = (rows * 6 + cols).reshape(n, 9)
        self._C_flat = self._C.reshape(-1)
        self._build_wrench_map(placements)
        self._Jp = np.zeros((3 * n, nv))
        self._Jp_blocks = self._Jp.reshape(3, n, nv).transpose(1, 0, 2)  # [point, component]
        self._Jc_all = np.zeros((3 * n, nv))
        self._Jc_point_major = self._Jc_all.reshape(n, 3, nv)
        self._component_offsets = n * np.arange(3)[None, :]
        #: (pinocchio joint id, its (3, 4) block of HT) per parent joint
        self._joint_blocks = [(int(j), self._HT[:, 4 * k:4 * k + 4])
                              for k, j in enumerate(self.joint_ids)]
        #: the data last updated from, and how its joint placements are read: a view of
        #: its storage (:func:`wb_sim.pin_views.placement_view`) or, where that is not available, per joint
        self._placements_of = None
        self._placement_rows = None
        self._placements = ()
        #: the compiled update against the plane (wb_sim/_compiled.c, points_plane; this
        #: class's Python code is its reference), None: the plain path (WB_SIM_PLAIN=1, not
        #: built, or a terrain)
        self._kernels = compiled.kernels() if terrain is None and n else None
        self._points_plane = None if self._kernels is None else self._kernels.points_plane
        self._plan = None  #: its arrays, checked and held (points_plane_bind), per data

    def _allocate_positions(self) -> None:
        n = self.n
        self.position_T = np.zeros((3, n))
        self.position = self.position_T.T
        separate = self._rotated or self.terrain is not None
        self.position_gT = np.zeros((3, n)) if separate else self.position_T
        self.depth = np.full(n, -np.inf)

    def update(self, model: pin.Model, data: pin.Data, v: None = None) -> None:
        """Positions (world and ground coordinates) of all points and their Jacobian.
        (``v`` is accepted and ignored: velocities come from :meth:`jacobian_g` /
        :meth:`normal_velocity` with the velocity the caller means.)

        Precondition: the joint placements and Jacobians of ``q`` are in ``data``
        (``pin.computeJointJacobians(model, data, q)``, or ABA in the WORLD
        convention, or ``computeMinverse(model, data, q)``).
        """
        if self.n == 0:
            return
        if data is not self._placements_of:
            self._bind(data)
        if self._plan is not None:
            # what the plain code below does against the plane, in one call (to rounding)
            self.depth = depth = np.empty(self.n)
            self._points_plane(self._plan, data.J, depth)
            self._HT_now = self._HT
            return
        if self._placement_rows is not None:
            # the (J, 12) records are the columns of each [R_j | t_j]: HT in one gather
            HT = self._placement_rows[self.joint_ids].reshape(-1, 3).T
        else:
            HT = self._read_placements()
        self._HT_now = HT  # for surface_wrenches
        PT = HT.dot(self._r_augT, self.position_T)
        if self.terrain is not None:
            self._update_on_terrain(PT)
        else:
            if self.has_spheres:
                PT -= self._sphere_offsetT
            if self._rotated:
                self.basis.T.dot(PT - self._originT, self.position_gT)
            self._C_flat[self._skew_index] = PT.T.dot(self._skew_map)
            #: (n,) penetration of each point, m (> 0 below the ground); a new array
            self.depth = self.plane_z - self.position_gT[2]
        Jp = self._C.dot(data.J, self._Jp)
        np.multiply(Jp, self._row_support, out=Jp)

    def _update_on_terrain(self, PT: np.ndarray) -> None:
        """Positions, depths, per-point bases and the rows of C against the terrain:
        each point (a sphere's centre) asks the terrain for its signed distance and
        normal; a sphere touches at ``centre - radius n``."""
        centres = PT.T.copy()
        sdf, normals = self.terrain.query(centres)
        self.depth = self.radius - sdf
        if self.has_spheres:
            PT -= (self.radius[:, None] * normals).T
        pos = PT.T
        B = terrain_bases(normals)
        self.bases = B
        # ground coordinates per point: (t1 . p, t2 . p, n . p); depth comes from the terrain
        np.einsum("nic,ni->cn", B, pos, out=self.position_gT)
        lin = B.transpose(2, 0, 1).reshape(-1, 3)  # rows c * n + i: component c of point i
        self._C[:, :3] = lin
        self._C[:, 3:] = np.cross(np.tile(pos, (3, 1)), lin)  # p x B_c: the angular part

    def world_forces(self, force_g: np.ndarray) -> np.ndarray:
        """(n, 3) point forces in world axes from ground coordinates (t1, t2, n)."""
        if self.bases is not None:
            return np.einsum("nij,nj->ni", self.bases, force_g)
        return force_g @ self.basis.T

    def _bind(self, data: pin.Data) -> None:
        """Prepare reading the joint placements of ``data`` (once per data object)."""
        self._placements = [(data.oMi[jid], block) for jid, block in self._joint_blocks]
        self._placement_rows = placement_view(data, self.joint_ids)
        self._placements_of = data  # also keeps the viewed storage alive
        self._plan = None
        if self._kernels is not None and self._placement_rows is not None:
            self._plan = self._kernels.points_plane_bind(
                self._placement_rows, self.joint_ids, self.slot, self.r_local,
                self._sphere_offsetT.T.copy() if self.has_spheres else None, self.basis,
                self.ground.origin, self.plane_z, self._rotated, self._row_support, self._HT,
                self.position_T, self.position_gT, self._Jp)

    def _read_placements(self) -> np.ndarray:
        """HT (3, 4J) copied joint by joint: the plain path (and the fast one's reference).
        An element of ``data.oMi`` refers to the data's own storage, so the objects are
        looked up once per data."""
        for placement, block in self._placements:
            block[...] = placement.homogeneous[:3]
        return self._HT

    def jacobian_g(self, idx: np.ndarray | None = None) -> np.ndarray:
        """(3k, nv) Jacobian of the points ``idx`` (default: all) in ground
        coordinates, rows t1, t2, n per point, at the last :meth:`update`. For all
        points it is a reused buffer, overwritten by the next call."""
        if idx is None or len(idx) == self.n:
            # a strided copy of the (3, n, nv) blocks: half the cost of row indexing
            self._Jc_point_major[...] = self._Jp_blocks
            return self._Jc_all
        rows = (np.asarray(idx)[:, None] + self._component_offsets).reshape(-1)
        return self._Jp[rows]

    def jacobian_component_major(self, idx: np.ndarray | None = None) -> np.ndarray:
        """(3k, nv) Jacobian of the points ``idx`` (default: all, the stored array
        itself, read-only use) in ground coordinates, rows component-major: all t1
        rows, all t2 rows, all normal rows."""
        if idx is None:
            return self._Jp
        return self._Jp[(self._component_offsets.T + idx[None, :]).reshape(-1)]

    def torsion_jacobian(self, idx: np.ndarray | None = None) -> np.ndarray:
        """(k, nv) rows ``n_i . omega_i`` of the points ``idx`` (default: all): the
        angular velocity of each point's link about its ground normal (rad/s), at the
        last :meth:`update` (the spin a torsional friction opposes). Computed on demand
        from the joint Jacobians the update read (their angular rows), masked as the
        point rows are; a new array."""
        n = self.n
        idx = np.arange(n) if idx is None else np.asarray(idx)
        Jw = self._placements_of.J[3:6]  # (3, nv) angular rows, world axes
        if self.bases is not None:  # terrain: each point its own normal
            rows = self.bases[idx, :, 2].dot(Jw)
        else:
            rows = np.tile(self.basis[:, 2].dot(Jw), (len(idx), 1))
        rows *= self._row_support[idx]  # the first n rows: each point's dofs
        return rows

    def normal_velocity(self, v: np.ndarray) -> np.ndarray:
        """(n,) velocity of each point along the ground normal under the generalized
        velocity ``v``, at the configuration of the last :meth:`update`, m/s."""
        return self._Jp[2 * self.n:].dot(v)

    def surface_wrenches(self, force_g: np.ndarray) -> np.ndarray:
        """(S, 6) wrenches ``[force (N), torque (N*m)]`` of each surface, torque about
        the surface frame's origin, both in the surface frame, from point forces
        (n, 3) in ground coordinates at the configuration of the last update.

        In its parent joint's frame a point's force is ``R_j^T f`` and its lever
        arm ``r_local`` is constant (a sphere adds ``R_j^T (-radius n x f)``, the
        lowest point's offset from the centre), so the wrenches are a constant
        linear map of ``HT^T [f | -radius n x f]`` (HT holds every ``[R_j, t_j]``):
        two products for all surfaces."""
        if self.bases is not None:
            f_wT = self.world_forces(force_g).T
        else:
            f_wT = force_g.T if not self._rotated else self.basis.dot(force_g.T)
        F = self._wrench_forces
        F[:, :self.n] = f_wT
        if self.has_spheres and self.bases is not None:  # the lever -radius n_i, per point
            F[:, self.n:] = np.cross(-self.radius[:, None] * self.bases[:, :, 2], f_wT.T).T
        elif self.has_spheres:
            np.multiply(self._neg_radius_nx.dot(f_wT), self._radius_row, out=F[:, self.n:])
        return self._wrench_map.dot(self._HT_now.T.dot(F).reshape(-1)).reshape(-1, 6)

    def _build_wrench_map(self, placements) -> None:
        """The constant (6S, 4J * 2n) map of :meth:`surface_wrenches`: entry
        ``(4 slot + a) * 2n + i`` of ``HT^T [f | t]`` is component ``a`` of point
        ``i``'s force (i < n) or sphere torque (column n + i) in its joint's frame."""
        n, S, J = self.n, len(placements), len(self.joint_ids)
        K = np.zeros((6 * S, 4 * J, 2 * n))
        for i in range(n):
            s, k = int(self.surface_of_point[i]), int(self.slot[i])
            R, p = placements[s].rotation, placements[s].translation
            # joint-frame wrench [F; r x F + t] -> surface frame: [R^T F; R^T (tau - p x F)]
            K[6 * s:6 * s + 3, 4 * k:4 * k + 3, i] = R.T
            K[6 * s + 3:6 * s + 6, 4 * k:4 * k + 3, i] = R.T @ pin.skew(self.r_local[i] - p)
            K[6 * s + 3:6 * s + 6, 4 * k:4 * k + 3, n + i] = R.T
        self._wrench_map = K.reshape(6 * S, 8 * J * n)
        self._wrench_forces = np.zeros((3, 2 * n))  # [f (world) | sphere torques], columns
        self._neg_radius_nx = -pin.skew(self.ground.normal)  # -n x
        self._radius_row = self.radius[None, :].copy()


def twist_rows(bases: np.ndarray, position: np.ndarray) -> np.ndarray:
    """C (3, k, 6): row c of point i is [b_c, p_i x b_c] for the bases (k, 3, 3) (columns
    t1, t2, n) and world positions (k, 3) of k points: the velocity of point i along b_c
    is C[c, i] @ the world-frame twist of its joint (``data.J``'s columns)."""
    k = len(position)
    C = np.empty((3, k, 6))
    lin = bases.transpose(2, 0, 1)  # (3, k, 3): [c, i] = b_c of point i
    C[:, :, :3] = lin
    px, py, pz = position[:, 0], position[:, 1], position[:, 2]
    bx, by, bz = lin[:, :, 0], lin[:, :, 1], lin[:, :, 2]
    C[:, :, 3] = py * bz - pz * by
    C[:, :, 4] = pz * bx - px * bz
    C[:, :, 5] = px * by - py * bx
    return C


def joint_support(model: pin.Model) -> np.ndarray:
    """(njoints, nv): row j is 1 on the dofs that move joint j (0 for the world): the
    mask that keeps a point's Jacobian to the joints that carry it (ground collision,
    self-collision)."""
    support = np.zeros((model.njoints, model.nv))
    for j in range(1, model.njoints):
        for a in model.supports[j]:
            if a > 0:
                support[j, model.idx_vs[a]:model.idx_vs[a] + model.nvs[a]] = 1.0
    return support


#: skew(p) = sum_k p_k _LEVI_CIVITA[k]
_LEVI_CIVITA = np.array([[[0, 0, 0], [0, 0, -1], [0, 1, 0]],
                         [[0, 0, 1], [0, 0, 0], [-1, 0, 0]],
                         [[0, -1, 0], [1, 0, 0], [0, 0, 0]]], dtype=float)

