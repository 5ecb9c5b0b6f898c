"""Closed kinematic chains: loop-closure constraints between two frames (``loop_closures.*``).

A closure ties an anchor on ``frame_b`` (its placement ``offset`` in ``frame_b``) to the
origin of ``frame_a``: type ``point`` holds the two points together (3 rows, the loop's
revolute or spherical joint), type ``frame`` also their orientations (6 rows, a weld).

In the step the closures are bilateral velocity rows ``J v' = b`` solved together with the
contact impulses. With ``U = M^-1 J^T`` and ``A = J U``, the closure impulse is eliminated
exactly (a Schur complement of the joint system of closure and contact rows)::

    v_free' = v_free + U A^+ (b - J v_free)        the free motion that keeps the loops
    M_c^-1  = M^-1 - U A^+ U^T                      the inverse inertia seen by the contacts

and the contact model solves its own problem with ``(M_c^-1, v_free')`` unchanged: its
impulses then move the robot only in ways that keep ``J v' = b`` (``J M_c^-1 = 0``), so
contacts and closures agree at the end of the step, for the compliant and the rigid model
alike. The joint limits' impulses act the same way (after the elimination, with M_c^-1);
:meth:`LoopClosures.impulse_after` gives the closures' impulse once the limits' and the
contacts' generalized impulse is known (``ContactModel.generalized_impulse``). ``A^+`` is a pseudo-inverse: a row that no joint can move (the out-of-plane row of
a planar linkage) takes no impulse.

The rows hold the closure at the velocity level, with the error the step itself makes
predicted to second order (the midpoint rule's term) and the rest fed back with the time
constant ``T = loop_closures.time_constant`` (s)::

    e' = e + h J v' + h^2/2 gamma    asked to be  e (1 - h/T):
    b  = -e / T - h/2 gamma

with ``e`` the closure's position (and orientation) error and ``gamma = dJ/dt v`` (the
anchors' classical accelerations at zero joint acceleration) at the step's start velocity
``v``, which keeps the loops (not at the free velocity, which a torque the loop resists
makes large: at rest that left an error ``T h/2 gamma(v_free)``, 1.15e-6 m on the
parallel ankle of test_parallel_ankle.py, 1e-16 m now). An error decays as ``exp(-t / T)``. Measured on a crank-rocker at 1 kHz (docs/physics.md):
without the ``h/2 gamma`` term the loop opened by 0.2 mm; the velocity projection takes
energy out at first order in h (0.4 %/s of that linkage's energy here); Baumgarte's
acceleration-level form (``J a + gamma = -2 de/T - e/T^2``) put it in instead (+0.9 %/s).
"""

from __future__ import annotations

import warnings

import numpy as np
import pinocchio as pin

from .errors import ConfigError, ModelError
from .linalg import upper_sym_mm
from .robot import did_you_mean

#: the closure types and their rows
ROWS = {"point": 3, "frame": 6}


class PassiveJointsWarning(UserWarning):
    """Joints of a closed chain take no torque (loop_closures.passive_joints)."""


def _skew(r: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])


class LoopClosures:
    """The configured closures of one robot, resolved against its stepping model."""

    def __init__(self, robot, model, cfg, dt: float):
        """``cfg``: the validated ``loop_closures`` group; ``model``: the stepping model
        (same frames as the robot's). The robot's own closures (an MJCF's ``<equality>``,
        :attr:`wb_sim.robot.RobotModel.closures`) come after the configured ones."""
        self.model = model
        n = len(cfg.frames_a)
        own = robot.closures
        self.types = (tuple(cfg.types) if cfg.types else ("point",) * n) + \
            tuple(c[0] for c in own)
        self.fa = [robot.frame_id(f, "loop_closures.frames_a") for f in cfg.frames_a] + \
            [robot.frame_id(c[1]) for c in own]
        self.fb = [robot.frame_id(f, "loop_closures.frames_b") for f in cfg.frames_b] + \
            [robot.frame_id(c[2]) for c in own]
        self.names = tuple(f"{a}-{b}" for a, b in zip(cfg.frames_a, cfg.frames_b)) + \
            tuple(f"{c[1]}-{c[2]}" for c in own)
        off = np.asarray(cfg.offsets, dtype=float).reshape(-1, 6) if cfg.offsets else \
            np.zeros((n, 6))
        #: the anchors' placements in frame_b
        self.offsets = [pin.SE3(pin.rpy.rpyToMatrix(*o[3:]), o[:3].copy()) for o in off] + \
            [pin.SE3.Identity() for _ in own]
        if cfg.time_constant < dt:
            raise ConfigError(
                f"parameter 'loop_closures.time_constant' = {cfg.time_constant} s is shorter "
                f"than the step dt = {dt} s: give at least dt (a few steps is usual)")
        self.time_constant = cfg.time_constant
        self.rows = [ROWS[t] for t in self.types]
        self.m = sum(self.rows)
        self.passive = self._passive(robot, cfg.passive_joints)
        #: the last step's closure impulses (m,), N*s (N*m*s for the orientation rows)
        self.impulse = np.zeros(self.m)
        self._parts = None  # (U, A^+, J) of the last solve, for the impulse after contacts

    @staticmethod
    def _passive(robot, names) -> np.ndarray:
        """Indices (in joint_names order) of the passive joints; warns naming them."""
        idx = []
        for name in names:
            if name not in robot.joint_names:
                raise ModelError(
                    f"parameter 'loop_closures.passive_joints': unknown joint '{name}'"
                    f"{did_you_mean(name, robot.joint_names)}; the model's joints are: "
                    f"{', '.join(robot.joint_names)}")
            idx.append(robot.joint_names.index(name))
        if idx:
            warnings.warn(f"loop closures: passive joints {', '.join(names)} take no torque "
                          f"(their commands are ignored)", PassiveJointsWarning, stacklevel=4)
        return np.array(sorted(set(idx)), dtype=int)

    def errors_and_jacobian(self, data) -> tuple[np.ndarray, np.ndarray]:
        """(e (m,), J (m, nv)) at the configuration whose kinematics and joint Jacobians
        ``data`` holds: e the position error p_a - p_anchor, world axes, m (then for a
        frame closure log3(R_a R_anchor^T), rad), J its rate's Jacobian (world axes)."""
        model = self.model
        e = np.empty(self.m)
        J = np.empty((self.m, model.nv))
        r0 = 0
        lwa = pin.LOCAL_WORLD_ALIGNED
        for fa, fb, off, k in zip(self.fa, self.fb, self.offsets, self.rows):
            oMa = pin.updateFramePlacement(model, data, fa)
            oMb = pin.updateFramePlacement(model, data, fb)
            oMt = oMb * off
            Ja = pin.getFrameJacobian(model, data, fa, lwa)
            Jb = pin.getFrameJacobian(model, data, fb, lwa)
            r = oMt.translation - oMb.translation
            e[r0:r0 + 3] = oMa.translation - oMt.translation
            J[r0:r0 + 3] = Ja[:3] - (Jb[:3] - _skew(r) @ Jb[3:])
            if k == 6:
                e[r0 + 3:r0 + 6] = pin.log3(oMa.rotation @ oMt.rotation.T)
                J[r0 + 3:r0 + 6] = Ja[3:] - Jb[3:]
            r0 += k
        return e, J

    def errors(self, model, data, q) -> np.ndarray:
        """The closures' errors at ``q`` (see :meth:`errors_and_jacobian`)."""
        pin.forwardKinematics(model, data, q)
        pin.computeJointJacobians(model, data, q)
        return self.errors_and_jacobian(data)[0]

    def drift(self, data, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """gamma = dJ/dt v (m,): the closures' error acceleration at zero joint acceleration
        (the points' classical accelerations; for a frame closure the angular ones)."""
        model = self.model
        pin.forwardKinematics(model, data, q, v, np.zeros(model.nv))
        lwa = pin.LOCAL_WORLD_ALIGNED
        out = np.empty(self.m)
        r0 = 0
        for fa, fb, off, k in zip(self.fa, self.fb, self.offsets, self.rows):
            oMb = data.oMf[fb]  # placed by errors_and_jacobian at this configuration
            r = oMb.rotation @ off.translation
            acc_b = pin.getFrameAcceleration(model, data, fb, lwa)
            vel_b = pin.getFrameVelocity(model, data, fb, lwa)
            w = vel_b.angular
            a_anchor = (acc_b.linear + np.cross(w, vel_b.linear) + np.cross(acc_b.angular, r)
                        + np.cross(w, np.cross(w, r)))
            out[r0:r0 + 3] = pin.getFrameClassicalAcceleration(model, data, fa, lwa).linear \
                - a_anchor
            if k == 6:
                out[r0 + 3:r0 + 6] = pin.getFrameAcceleration(model, data, fa, lwa).angular \
                    - acc_b.angular
            r0 += k
        return out

    def eliminate(self, data, Minv_upper: np.ndarray, q: np.ndarray, v: np.ndarray,
                  v_free: np.ndarray, dt: float):
        """(M_c^-1 symmetric, v_free') of the module docstring at the step's configuration
        ``q`` (whose kinematics and joint Jacobians ``data`` holds) from the step's start
        velocity ``v``; keeps what :meth:`impulse_after` needs."""
        e, J = self.errors_and_jacobian(data)
        # the error after the step, to second order: e' = e + h J v' + h^2/2 gamma; asked to
        # be e (1 - h / T); gamma at the step's start velocity, which keeps the loops (v' is
        # not known yet; the free velocity is off the loops by whatever the torques push)
        b = e * (-1.0 / self.time_constant) - (0.5 * dt) * self.drift(data, q, v)
        U = upper_sym_mm(Minv_upper, J.T)  # (nv, m): M^-1 J^T
        A = J @ U
        Ap = np.linalg.pinv(0.5 * (A + A.T), rcond=1e-10, hermitian=True)
        lam0 = Ap @ (b - J @ v_free)
        UA = U @ Ap
        Minv = np.triu(Minv_upper) + np.triu(Minv_upper, 1).T
        Minv_c = Minv - UA @ U.T
        self._parts = (U, Ap, b, J, v_free)
        self.impulse = lam0
        return Minv_c, v_free + U @ lam0

    def impulse_after(self, contact_impulse: np.ndarray | None) -> np.ndarray:
        """The closures' impulses of the step, given the generalized impulse (nv,) the
        rest of the step applied after the elimination with M_c^-1: the limits' and the
        contacts' ``J_c^T p`` (None: none acted)."""
        if contact_impulse is not None and self._parts is not None:
            U, Ap, b, J, v_free = self._parts
            self.impulse = Ap @ (b - J @ v_free - U.T @ contact_impulse)
        return self.impulse

    def wrenches(self, dt: float) -> np.ndarray:
        """(n, 6) per closure the wrench [force, torque] on frame_a at its origin, world
        axes, N and N*m (the one on frame_b's anchor is its opposite), of the last step."""
        out = np.zeros((len(self.rows), 6))
        r0 = 0
        for i, k in enumerate(self.rows):
            out[i, :k] = self.impulse[r0:r0 + k] / dt
            r0 += k
        return out
