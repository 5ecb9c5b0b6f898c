"""Contact points attached to the robot and their kinematics, shared by all
contact models.

Every contact surface of the configuration becomes a set of points rigidly
attached to the parent joint of its frame (a sphere contributes its centre and
radius: its contact point is the centre minus radius times the ground normal,
the lowest point, recomputed every step as the foot rolls).

:meth:`ContactPoints.update` computes, once per step and into preallocated
buffers, the world positions and velocities of all points from one call to
``pinocchio.computeJointJacobians`` (which also does the forward kinematics).
:meth:`ContactPoints.generalized_force` maps world point forces to joint space
with the same Jacobians, so the step needs no other kinematics.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..config import SimConfig
from ..robot import RobotModel


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
    """All contact points of all surfaces, vectorized.

    Attributes (n points, J distinct parent joints, S surfaces; "ground
    coordinates" are components along (t1, t2, n) of the ground plane):
        surface_names: the S surface names, configuration order.
        surface_frames: the S frame names.
        surface_of_point: (n,) surface index of each point.
        joint_ids: (J,) pinocchio joint index of each distinct parent joint.
        slot: (n,) index into ``joint_ids`` of each point's parent joint.
        r_local: (n, 3) point (or sphere centre) in its parent joint frame, m.
        radius: (n,) sphere radius (0 for box and explicit points), m.
        position, velocity: (n, 3) world position and velocity of each contact
            point (the material point) after :meth:`update`.
        position_g, velocity_g: the same in ground coordinates.
    """

    def __init__(self, robot: RobotModel, config: SimConfig, ground: Ground):
        model = robot.model
        self.ground = ground
        self.surface_names = tuple(s.name for s in config.surfaces)
        self.surface_frames = tuple(s.frame for s in config.surfaces)
        joint_of_surface, placements = [], []
        r_local, radius, surface_of_point, joint_of_point = [], [], [], []
        for k, s in enumerate(config.surfaces):
            fid = robot.frame_id(s.frame, key=f"{s.name}.frame")
            frame = model.frames[fid]
            jid = frame.parentJoint
            joint_of_surface.append(jid)
            placements.append(frame.placement)  # joint <- surface frame
            pts = s.local_points()
            pts_joint = (frame.placement.rotation @ pts.T).T + frame.placement.translation
            r_local.append(pts_joint)
            radius.append(np.full(len(pts), s.radius if s.shape == "sphere" else 0.0))
            surface_of_point += [k] * len(pts)
            joint_of_point += [jid] * len(pts)
        self.n = len(surface_of_point)
        self.joint_ids = np.array(sorted(set(joint_of_point)), dtype=int)
        J = len(self.joint_ids)
        self.slot = np.searchsorted(self.joint_ids, np.array(joint_of_point, dtype=int))
        self.surface_slot = np.searchsorted(self.joint_ids, np.array(joint_of_surface, dtype=int))
        self.surface_placements = tuple(placements)
        self.surface_of_point = np.array(surface_of_point, dtype=int)
        #: (S, n) sums the points of each surface
        self._surface_sum = (self.surface_of_point[None, :] ==
                             np.arange(len(self.surface_slot))[:, None]).astype(float)
        self.r_local = np.vstack(r_local) if r_local else np.zeros((0, 3))
        self.radius = np.concatenate(radius) if radius else np.zeros(0)
        self.has_spheres = bool(np.any(self.radius > 0))
        n, nv = self.n, model.nv
        self.nv = nv
        self.model = model
        # Ground coordinates: columns t1, t2, n, so that x_g = (x - o) @ basis has its
        # third component equal to the signed distance to the plane.
        self.basis = np.column_stack([*ground.tangent_basis(), ground.normal])
        # r_aug[i, 4 slot(i) : 4 slot(i) + 4] = [r_i, 1]: world points = r_aug @ H_stack
        self._r_aug = np.zeros((n, 4 * J))
        for i, (k, r) in enumerate(zip(self.slot, self.r_local)):
            self._r_aug[i, 4 * k:4 * k + 3] = r
            self._r_aug[i, 4 * k + 3] = 1.0
        self._sphere_offset = self.radius[:, None] * ground.normal  # centre -> lowest point
        # one-hot (n, J) and (J, n): gather per-joint quantities / sum per joint
        self._gather = np.zeros((n, J))
        self._gather[np.arange(n), self.slot] = 1.0
        self._sum = np.ascontiguousarray(self._gather.T)
        # support[j, k] = 1 if velocity k moves joint j: twist_j = (support_j * v) @ J^T
        self._support = np.zeros((J, nv))
        for k, jid in enumerate(self.joint_ids):
            for a in model.supports[int(jid)]:
                if a > 0:
                    self._support[k, model.idx_vs[a]:model.idx_vs[a] + model.nvs[a]] = 1.0
        self._support_T = np.ascontiguousarray(self._support.T)
        self._point_support = self._support[self.slot][:, None, :]  # (n, 1, nv)
        # buffers written every step
        self._H = np.zeros((4 * J, 3))  # stacked [R^T; t^T] of each parent joint
        self.position = np.zeros((n, 3))  # world
        self.velocity = np.zeros((n, 3))  # world
        self.position_g = self.position  # ground coordinates (same array if the basis is I)
        self.velocity_g = self.velocity
        self._rotated = not np.allclose(self.basis, np.eye(3))
        #: the plane is {third ground coordinate == plane_z}
        self.plane_z = 0.0 if self._rotated else ground.height
        self._moment = np.zeros((n, 3))
        self._fm = np.zeros((n, 6))
        self._joint_list = [int(j) for j in self.joint_ids]
        self._jacobian = None

    def update(self, model: pin.Model, data: pin.Data, v: np.ndarray | None) -> None:
        """World and ground-coordinate positions and velocities of all points
        (``v=None``: positions only).

        Precondition: ``pin.computeJointJacobians(model, data, q)`` was called
        for the current ``q`` (it does the forward kinematics too).
        """
        if self.n == 0:
            return
        H = self._H
        oMi = data.oMi
        for k, jid in enumerate(self._joint_list):
            H[4 * k:4 * k + 4] = oMi[jid].homogeneous[:3].T
        self._jacobian = jac = data.J  # world frame, at the world origin (a view)
        if v is None:
            P = np.matmul(self._r_aug, H, out=self.position)
            if self.has_spheres:
                P -= self._sphere_offset
            self.position_g = (P - self.ground.origin) @ self.basis if self._rotated else P
            return
        twist = (self._support * v) @ jac.T  # (J, 6): velocity at world origin, angular
        per_point = self._gather @ twist  # (n, 6)
        P = np.matmul(self._r_aug, H, out=self.position)
        if self.has_spheres:
            P -= self._sphere_offset
        w = per_point[:, 3:]
        V = self.velocity
        V[:] = per_point[:, :3]
        V += _cross(w, P, self._moment)
        if self._rotated:
            self.position_g = (P - self.ground.origin) @ self.basis
            self.velocity_g = V @ self.basis
        else:
            self.position_g = P
            self.velocity_g = V

    def jacobian_g(self, idx: np.ndarray) -> np.ndarray:
        """(3k, nv) Jacobian of the points ``idx`` in ground coordinates (rows t1, t2, n
        per point), at the positions of the last :meth:`update`."""
        jac = np.ascontiguousarray(self._jacobian)  # world, at the origin: v_p = lin - p x ang
        every = len(idx) == self.n
        p = self.position if every else self.position[idx]
        J = np.matmul((p @ _LEVI_CIVITA_FLAT).reshape(-1, 3, 3), jac[3:])  # (k, 3, nv)
        np.subtract(jac[:3], J, out=J)
        # only the joints that move the point
        J *= self._point_support if every else self._point_support[idx]
        if self._rotated:
            J = np.matmul(self.basis.T, J)
        return J.reshape(3 * len(idx), -1)

    def generalized_force(self, force_g: np.ndarray) -> np.ndarray:
        """Joint-space force (nv,) of point forces (n, 3) in ground coordinates."""
        fm = self._fm
        F = fm[:, :3]
        if self._rotated:
            np.matmul(force_g, self.basis.T, out=F)
        else:
            F[:] = force_g
        _cross(self.position, F, fm[:, 3:])
        wrench = self._sum @ fm  # (J, 6): force and moment about the world origin
        return ((self._jacobian.T @ wrench.T) * self._support_T).sum(axis=1)

    def surface_wrenches(self, force_g: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per surface: (force, torque about the surface frame origin), both in
        the surface frame, from point forces (n, 3) in ground coordinates at the
        positions of the last update."""
        force = force_g @ self.basis.T
        fm = np.empty((self.n, 6))
        fm[:, :3] = force
        _cross(self.position, force, fm[:, 3:])
        W = self._surface_sum @ fm  # (S, 6): force, moment about the world origin (world)
        out = []
        for k, placement in enumerate(self.surface_placements):
            j = self.surface_slot[k]
            R_j, t_j = self._H[4 * j:4 * j + 3].T, self._H[4 * j + 3]
            R_s = R_j @ placement.rotation
            o_s = R_j @ placement.translation + t_j
            F, M = W[k, :3], W[k, 3:]
            o0, o1, o2 = o_s.tolist()
            F0, F1, F2 = F.tolist()  # M - o_s x F: the moment about the surface origin
            T = M - (o1 * F2 - o2 * F1, o2 * F0 - o0 * F2, o0 * F1 - o1 * F0)
            out.append((F @ R_s, T @ R_s))
        return out


#: skew(p) = sum_k p_k _LEVI_CIVITA[k]
_LEVI_CIVITA = np.array([[[0, 0, 0], [0, 0, -1], [0, 1, 0]],
                         [[0, 0, 1], [0, 0, 0], [-1, 0, 0]],
                         [[0, -1, 0], [1, 0, 0], [0, 0, 0]]], dtype=float)
_LEVI_CIVITA_FLAT = _LEVI_CIVITA.reshape(3, 9)


def _cross(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Row-wise a x b into ``out`` ((n, 3) arrays); cheaper than np.cross on small arrays."""
    a0, a1, a2 = a[:, 0], a[:, 1], a[:, 2]
    b0, b1, b2 = b[:, 0], b[:, 1], b[:, 2]
    out[:, 0] = a1 * b2 - a2 * b1
    out[:, 1] = a2 * b0 - a0 * b2
    out[:, 2] = a0 * b1 - a1 * b0
    return out
