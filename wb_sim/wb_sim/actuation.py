"""Joint actuation effects: torque saturation, viscous damping, Coulomb
friction, position limits and motor armature.

* Saturation: commanded torques are clipped to the effort limits (URDF or
  ``joints.effort_limit``); the clipped value is what the robot feels and what
  the sensors report as applied effort.
* Viscous damping ``-D qdot`` is integrated implicitly: the step solves
  ``(M + h D) a = tau - D qdot - b`` by adding ``h D`` to the armature of the
  model used for stepping, so any damping is stable. Queries of the mass
  matrix use the physical model (armature only).
* Coulomb friction ``-f tanh(qdot / v_s)``, explicit; ``v_s`` is raised per
  joint to at least ``f h / I`` so its slope stays inside the explicit
  stability bound (I = the joint's effective inertia).
* Position limits: a unilateral spring-damper beyond the limit that only
  pushes back, ``k = I / tau^2``, ``c = 2 zeta I / tau`` with the joint's
  effective inertia ``I = 1 / (M^-1)_jj`` at the current configuration,
  ``tau = joints.limit_time_constant`` and ``zeta = joints.limit_damping_ratio``.
  It is integrated implicitly, all joints beyond a limit together, with the
  step's M^-1 (:meth:`Actuation.limit_impulses`): stable at every posture and
  rate, whatever the inertia does (an explicit spring tuned at the initial
  posture diverged when swinging a leg lowered the hip's inertia).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dposv as _posv  # Cholesky solve of an SPD system

from .errors import ConfigError
from .parameters import Group
from .robot import RobotModel


def per_joint(key: str, values: tuple[float, ...], robot: RobotModel,
              default: np.ndarray | None = None) -> np.ndarray:
    """Expand a 'scalar or per joint' parameter to (nj,)."""
    if len(values) == 0:
        if default is None:
            raise ConfigError(f"parameter '{key}' needs one value or {robot.nj}")
        return np.array(default, dtype=float)
    if len(values) == 1:
        return np.full(robot.nj, values[0])
    if len(values) == robot.nj:
        return np.array(values, dtype=float)
    raise ConfigError(f"parameter '{key}' has {len(values)} values; expected 1 or one per "
                      f"actuated joint ({robot.nj}: {', '.join(robot.joint_names)})")


class Actuation:
    """Per-joint actuation constants and the torque laws; see the module docstring."""

    #: (the effort limits it was formed from, their negatives): saturate's lower bound
    _floor = (None, None)

    def __init__(self, robot: RobotModel, cfg: Group, dt: float,
                 reflected: tuple[np.ndarray, np.ndarray] | None = None):
        """``reflected``: (Coulomb N*m, viscous N*m*s/rad) per joint the drives'
        transmissions add (wb_sim.actuators), whatever joints.urdf_dynamics says."""
        nj = robot.nj
        self.dt = dt
        self.armature = per_joint("joints.armature", cfg.armature, robot)
        self.effort_limit = (per_joint("joints.effort_limit", cfg.effort_limit, robot,
                                       default=robot.effort_limit)
                             if cfg.effort_limits else np.full(nj, np.inf))
        if cfg.urdf_dynamics:
            self.damping = per_joint("joints.damping", cfg.damping, robot, default=robot.damping)
            self.friction = per_joint("joints.friction", cfg.friction, robot,
                                      default=robot.friction)
        else:
            self.damping = np.zeros(nj)
            self.friction = np.zeros(nj)
        if reflected is not None:
            self.friction = self.friction + reflected[0]
            self.damping = self.damping + reflected[1]
        self.has_friction = bool(np.any(self.friction > 0))
        self.has_damping = bool(np.any(self.damping > 0))
        self.saturating = bool(np.any(np.isfinite(self.effort_limit)))
        self.friction_velocity = np.full(nj, cfg.friction_velocity)
        self.limits_enabled = cfg.position_limits
        self.lower = robot.position_lower.copy()
        self.upper = robot.position_upper.copy()
        self.limited = np.isfinite(self.lower) | np.isfinite(self.upper)
        #: whether :meth:`passive_torques` returns anything
        self.has_passive = self.has_damping or self.has_friction
        self._tau_limit = cfg.limit_time_constant
        self._zeta_limit = cfg.limit_damping_ratio
        #: per joint (nj,) limit time constant and damping ratio where several robots with
        #: their own joints.* share one actuation (:func:`combine_actuation`); else None
        self._tau_joints = self._zeta_joints = None

    def _limit_constants(self, idx):
        """(time constant, damping ratio) of the limits of the joints ``idx`` (scalars for
        one robot, (k,) arrays for several robots, :func:`combine_actuation`)."""
        if self._tau_joints is None or idx is None:
            return self._tau_limit, self._zeta_limit
        return self._tau_joints[idx], self._zeta_joints[idx]

    def limit_constants(self) -> tuple[np.ndarray, np.ndarray]:
        """(time constant, damping ratio) of every joint's limit, (nj,) arrays each."""
        if self._tau_joints is not None:
            return self._tau_joints.astype(float), self._zeta_joints.astype(float)
        n = len(self.lower)
        return np.full(n, float(self._tau_limit)), np.full(n, float(self._zeta_limit))

    def step_armature(self) -> np.ndarray:
        """Armature of the stepping model: physical armature + h D (implicit damping)."""
        return self.armature + self.dt * self.damping

    def set_effective_inertia(self, inertia: np.ndarray) -> None:
        """Derive the friction smoothing from the joints' effective inertias
        ``1 / (M^-1)_jj`` (kg*m^2) of the stepping model."""
        self.friction_velocity = np.maximum(self.friction_velocity,
                                            self.friction * self.dt / inertia)

    def saturate(self, tau: np.ndarray) -> np.ndarray:
        """Torques clipped to the effort limits (a new array)."""
        if not self.saturating:
            return tau.copy()
        lim = self.effort_limit
        floor = self._floor
        if floor[0] is not lim:  # -lim, formed once per limits array (not each step)
            floor = self._floor = (lim, -lim)
        out = np.maximum(tau, floor[1])
        return np.minimum(out, lim, out=out)

    def passive_torques(self, qj: np.ndarray, vj: np.ndarray) -> np.ndarray | None:
        """Explicit joint torques: -D qdot (its implicit part is in the armature) and
        Coulomb friction, (nj,); ``None`` when both are off."""
        if not self.has_passive:
            return None
        tau = -self.damping * vj
        if self.has_friction:
            tau -= self.friction * np.tanh(vj / self.friction_velocity)
        return tau

    def limit_violations(self, qj: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Joints beyond a position limit: their indices (k,) in joint order and the
        signed distances back to the limit (k,), ``> 0`` below the lower limit and
        ``< 0`` above the upper one; ``None`` if none is (or limits are off)."""
        if not self.limits_enabled:
            return None
        # d = clip(q, lower, upper) - q: 0 within the limits (one dot product tells)
        d = np.minimum(np.maximum(qj, self.lower), self.upper)
        d -= qj
        if not d.dot(d) > 0.0:
            return None
        idx = np.flatnonzero(d)
        return idx, d[idx]

    def limit_impulses(self, d: np.ndarray, v_free: np.ndarray, Minv: np.ndarray,
                       dt: float, idx: np.ndarray | None = None) -> np.ndarray:
        """Impulses (k,) of the limit spring-dampers of the joints beyond a limit,
        signed like ``d``, by backward Euler with the current effective inertias.

        Args:
            d: (k,) signed distances back to the limits (:meth:`limit_violations`), rad or m.
            v_free: (k,) those joints' end-of-step velocities without the limits.
            Minv: (k, k) symmetric block of M^-1 on those joints.
            idx: (k,) those joints' indices (joint order): their own limit constants
                where several robots share the actuation (:func:`combine_actuation`).
        Per joint ``f = k d' - c qdot'`` along sign(d) with ``d' = d - h qdot'``,
        ``k = I / tau^2``, ``c = 2 zeta I / tau``, ``I = 1 / Minv_jj``; with
        ``qdot' = v_free + Minv p`` the impulses solve
        ``(Minv + (h B)^-1) p = B^-1 k d - qdot_free`` (``B = k h + c``), and a
        joint whose impulse would pull leaves the system (unilateral).

        The fast path of :meth:`limit_impulses_reference` (same numbers, tested): one
        joint in closed form with Python floats, several with one solve, the
        active-set loop only when an impulse pulls."""
        tau, zeta = self._limit_constants(idx)
        h = dt
        if len(d) == 1:  # the common case: one joint on its stop
            if self._tau_joints is not None and idx is not None:
                tau, zeta = float(tau[0]), float(zeta[0])
            m = float(Minv[0, 0])
            d0 = float(d[0])
            s = 1.0 if d0 > 0.0 else -1.0
            inertia = 1.0 / m
            stiffness = inertia / tau**2
            B = stiffness * h + 2.0 * zeta * inertia / tau
            p = (stiffness * abs(d0) / B - s * float(v_free[0])) / (m + 1.0 / (h * B))
            return np.array([s * p if p > 0.0 else 0.0])
        # the reference's system in fewer operations: with I = 1 / Minv_jj, k / B =
        # 1 / (tau^2 c) and 1 / (h B) = Minv_jj / (h c), c = h / tau^2 + 2 zeta / tau
        sign = np.sign(d)
        c = h / tau**2 + 2.0 * zeta / tau
        A = Minv * sign[:, None]
        A *= sign
        A.flat[::len(d) + 1] += Minv.diagonal() / (h * c)
        rhs = np.abs(d) / (tau**2 * c)
        rhs -= sign * v_free
        _, p, info = _posv(A, rhs)  # A is symmetric positive definite: Cholesky
        if info == 0 and p.min() >= 0.0:
            p *= sign
            return p
        return self._limit_active_set(A, rhs, sign)

    def limit_impulses_reference(self, d: np.ndarray, v_free: np.ndarray, Minv: np.ndarray,
                                 dt: float, idx: np.ndarray | None = None) -> np.ndarray:
        """:meth:`limit_impulses` the plain way: the system for every joint beyond a limit,
        then the active-set loop (a joint whose impulse would pull leaves it)."""
        return self._limit_active_set(*self._limit_system(d, v_free, Minv, dt, idx))

    def _limit_system(self, d, v_free, Minv, dt, idx=None):
        """(A, rhs, sign) of the limits' system ``A p = rhs`` in unsigned impulses."""
        sign = np.sign(d)
        inertia = 1.0 / np.diag(Minv)
        tau, zeta = self._limit_constants(idx)
        h = dt
        stiffness = inertia / tau**2
        B = stiffness * h + 2.0 * zeta * inertia / tau
        A = Minv * np.outer(sign, sign)
        A.flat[::len(d) + 1] += 1.0 / (h * B)
        rhs = stiffness * np.abs(d) / B - sign * v_free
        return A, rhs, sign

    @staticmethod
    def _limit_active_set(A, rhs, sign) -> np.ndarray:
        keep = np.ones(len(rhs), dtype=bool)
        p = np.zeros(len(rhs))
        while keep.any():
            sub = np.flatnonzero(keep)
            p[:] = 0.0
            p[sub] = np.linalg.solve(A[np.ix_(sub, sub)], rhs[sub])
            pulling = keep & (p < 0.0)
            if not pulling.any():
                break
            keep &= ~pulling
        return sign * np.maximum(p, 0.0)

    def check_initial_positions(self, robot: RobotModel, qj: np.ndarray,
                                key: str = "initial.joint_positions") -> None:
        """With limits enforced, the initial posture (or a named pose: ``key`` names its
        parameter) must respect them."""
        if not self.limits_enabled:
            return
        for name, x, lo, hi in zip(robot.joint_names, qj, self.lower, self.upper):
            if not lo - 1e-9 <= x <= hi + 1e-9:
                raise ConfigError(
                    f"parameter '{key}': joint '{name}' starts at {x:.4g}, "
                    f"outside its limits [{lo:.4g}, {hi:.4g}] (set its initial position, or "
                    f"joints.position_limits: false)")


def combine_actuation(parts: list[Actuation]) -> Actuation:
    """One :class:`Actuation` over several robots' joints (wb_sim.multirobot), each robot's
    own (its own ``joints.*`` on its own model, built alone) concatenated in the combined
    joint order, the first robot's first: the same per-joint numbers each robot has alone.
    A robot whose ``joints.position_limits`` is false gets no limits (its bounds infinite);
    ``limit_time_constant`` and ``limit_damping_ratio`` become per joint."""
    first = parts[0]
    out = Actuation.__new__(Actuation)
    out.dt = first.dt
    for attr in ("armature", "effort_limit", "damping", "friction", "friction_velocity"):
        setattr(out, attr, np.concatenate([getattr(p, attr) for p in parts]))
    out.lower = np.concatenate([p.lower if p.limits_enabled else np.full(len(p.lower), -np.inf)
                                for p in parts])
    out.upper = np.concatenate([p.upper if p.limits_enabled else np.full(len(p.upper), np.inf)
                                for p in parts])
    out.limited = np.isfinite(out.lower) | np.isfinite(out.upper)
    out.limits_enabled = any(p.limits_enabled for p in parts)
    out.has_friction = bool(np.any(out.friction > 0))
    out.has_damping = bool(np.any(out.damping > 0))
    out.saturating = bool(np.any(np.isfinite(out.effort_limit)))
    out.has_passive = out.has_damping or out.has_friction
    out._tau_limit, out._zeta_limit = first._tau_limit, first._zeta_limit
    out._tau_joints = np.concatenate([np.full(len(p.lower), p._tau_limit) for p in parts])
    out._zeta_joints = np.concatenate([np.full(len(p.lower), p._zeta_limit) for p in parts])
    return out
