"""Reference joint controllers, pure functions of the state (no I/O).

:class:`PDGravityController` is joint PD plus gravity compensation,
``tau = g_j(q) + Kp (q_ref - q_j) - Kd qdot_j``, with ``g_j`` the joint rows of
the full floating-base generalized gravity at the current configuration (the
``icub_stand`` benchmark's controller). It needs only the robot's URDF, so an
external process (e.g. a ROS controller node) can run it on its own model.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from .robot import RobotModel


class PDGravityController:
    """Joint PD + gravity compensation.

    Args:
        robot: the robot model (its own pinocchio data is created here).
        q_ref: (nj,) target joint positions, rad.
        kp: N*m/rad, scalar or (nj,).  kd: N*m*s/rad, scalar or (nj,).
        gravity: world gravity, m/s^2.
    """

    def __init__(self, robot: RobotModel, q_ref, kp, kd, gravity=(0.0, 0.0, -9.81)):
        self.model = pin.Model(robot.model)
        self.model.gravity = pin.Motion(np.asarray(gravity, dtype=float), np.zeros(3))
        self.data = self.model.createData()
        self.idx_v = robot.idx_v
        first = int(robot.idx_v[0]) if len(robot.idx_v) else 0
        if np.array_equal(robot.idx_v, np.arange(first, first + len(robot.idx_v))):
            self.idx_v = slice(first, first + len(robot.idx_v))  # a view: cheaper
        self.q_ref = np.asarray(q_ref, dtype=float)
        self.kp = np.broadcast_to(np.asarray(kp, dtype=float), self.q_ref.shape).copy()
        self.kd = np.broadcast_to(np.asarray(kd, dtype=float), self.q_ref.shape).copy()

    def __call__(self, q: np.ndarray, qj: np.ndarray, vj: np.ndarray) -> np.ndarray:
        """Torques (nj,) from the full configuration ``q`` (pinocchio layout,
        for gravity) and the joint positions and velocities."""
        g = pin.computeGeneralizedGravity(self.model, self.data, q)
        tau = self.q_ref - qj
        tau *= self.kp
        tau += g[self.idx_v]
        tau -= self.kd * vj
        return tau
