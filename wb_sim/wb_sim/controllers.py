"""Reference joint controllers, pure functions of the state (no I/O).

:class:`PDGravityController` is joint PD plus gravity compensation,
``tau = g_j(q) + Kp (q_ref - q_j) - Kd qdot_j``, with ``g_j`` the joint rows of
the full floating-base generalized gravity at the current configuration (the
``icub_stand`` benchmark's controller). It needs only the robot's URDF, so an
external process (e.g. a ROS controller node) can run it on its own model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .pin_views import new_data
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
        self.data = new_data(self.model)
        #: the robot's coordinates: a simulator's q with free objects (wb_sim.objects) has
        #: theirs after them, which the law ignores
        self.nq = self.model.nq
        self.idx_v = robot.idx_v
        first = int(robot.idx_v[0]) if len(robot.idx_v) else 0
        if np.array_equal(robot.idx_v, np.arange(first, first + len(robot.idx_v))):
            self.idx_v = slice(first, first + len(robot.idx_v))  # a view: cheaper
        self.q_ref = np.asarray(q_ref, dtype=float)
        self.kp = np.broadcast_to(np.asarray(kp, dtype=float), self.q_ref.shape).copy()
        self.kd = np.broadcast_to(np.asarray(kd, dtype=float), self.q_ref.shape).copy()

    def __call__(self, q: np.ndarray, qj: np.ndarray, vj: np.ndarray) -> np.ndarray:
        """Torques (nj,) from the full configuration ``q`` (pinocchio layout,
        for gravity; a free object's coordinates after the robot's are ignored) and the
        joint positions and velocities."""
        g = pin.computeGeneralizedGravity(self.model, self.data, q[:self.nq])
        tau = self.q_ref - qj
        tau *= self.kp
        tau += g[self.idx_v]
        tau -= self.kd * vj
        return tau

    def gravity(self, q: np.ndarray) -> np.ndarray:
        """``g_j(q)`` (nj,), N*m: the feed-forward of the same law run by a joint drive
        (:meth:`drive_targets`)."""
        return pin.computeGeneralizedGravity(self.model, self.data, q[:self.nq])[self.idx_v].copy()

    def drive_targets(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The same law as targets for a joint drive that evaluates
        ``kp (q_ref - q) + kd (v_ref - v) + tau_ff`` at every physics step
        (:class:`JointTargets`, the simulator node's ``joint_commands`` with
        ``command.kp`` = kp, ``command.kd`` = kd): ``(q_ref, v_ref = 0, tau_ff = g_j(q))``.
        Only the feed-forward depends on the state, so a command that arrives late
        changes the law by the change of gravity torque over the delay, where a late
        torque command applies a stale stiff feedback (the loop of ``kp`` is then
        closed ``delay`` steps late)."""
        return self.q_ref, np.zeros_like(self.q_ref), self.gravity(q)


class JointTargets:
    """The latest joint command in mixed modes, evaluated at every physics step as a
    motor drive runs it (the ros2_control interfaces position / velocity / effort,
    and the legged robots' low-level impedance command):

        tau = kp (q_ref - q) + kd (v_ref - v) + tau_ff        per joint

    A joint's mode is set by what its last command gave: a position target brings
    the kp term (with v_ref = 0 unless a velocity is given too), a velocity alone
    the kd term, an effort is the feed-forward ``tau_ff`` (0 when not given). A
    command of efforts only is applied as it is, as before. Gains are per joint
    (``kp``: N*m/rad, ``kd``: N*m*s/rad).
    """

    def __init__(self, nj: int, kp, kd):
        self.nj = nj
        self.kp = np.broadcast_to(np.asarray(kp, dtype=float), (nj,)).copy()
        self.kd = np.broadcast_to(np.asarray(kd, dtype=float), (nj,)).copy()
        self.q_ref = np.zeros(nj)
        self.v_ref = np.zeros(nj)
        self.tau_ff = np.zeros(nj)
        self.has_position = np.zeros(nj, dtype=bool)
        self.has_velocity = np.zeros(nj, dtype=bool)
        #: whether the last command gave the joint an effort (0.0 is an effort too)
        self.has_effort = np.zeros(nj, dtype=bool)
        #: counts the changes of the modes (``has_*``): whoever writes those arrays other
        #: than :meth:`set` calls :meth:`modes_changed`
        self.modes = 0
        #: (joints, fields given) of the last :meth:`set`, while the modes are still its:
        #: a set for the same read-only index array (owning its memory) with the same fields
        #: changes no mode
        self._last_set = None
        #: (modes, any joint servoed, every joint on position) for :meth:`torques`
        self._servo_of = (-1, False, False)
        self._buf = np.zeros(nj)

    def set(self, joints, position=None, velocity=None, effort=None) -> None:
        """The command for the joints ``joints`` (indices): each field an array in
        that order, or None where the command does not give it. The other joints
        keep their command."""
        given = (position is not None, velocity is not None, effort is not None)
        last = self._last_set
        # a controller sends the same joints with the same fields at every step (the node's
        # command reader hands the same read-only index array while the names do not change)
        same = last is not None and last[0] is joints and last[1] == given
        joints = np.asarray(joints, dtype=int)
        if not same:
            self.has_position[joints], self.has_velocity[joints], self.has_effort[joints] = given
            self.modes += 1
            # only an array that owns its memory and cannot be written stays these joints
            fixed = isinstance(joints, np.ndarray) and not joints.flags.writeable \
                and joints.base is None
            self._last_set = (joints, given) if fixed else None
        self.q_ref[joints] = 0.0 if position is None else position
        self.v_ref[joints] = 0.0 if velocity is None else velocity
        self.tau_ff[joints] = 0.0 if effort is None else effort

    def modes_changed(self) -> None:
        """Say that ``has_position``, ``has_velocity`` or ``has_effort`` were written
        other than by :meth:`set`."""
        self.modes += 1
        self._last_set = None

    def torques(self, qj: np.ndarray, vj: np.ndarray) -> np.ndarray:
        """Torques (nj,) at joint positions ``qj`` and velocities ``vj`` (a new array)."""
        modes, servoed, every = self._servo_of
        if modes != self.modes:
            servo = self.has_position | self.has_velocity
            servoed, every = bool(servo.any()), bool(self.has_position.all())
            self._servo_of = (self.modes, servoed, every)
        if not servoed:
            return self.tau_ff.copy()
        if every:  # every joint on position (and velocity) targets: no masks, the same sums
            e = np.subtract(self.q_ref, qj, out=self._buf)
            e *= self.kp
            tau = self.tau_ff + e
            np.subtract(self.v_ref, vj, out=e)
            e *= self.kd
            tau += e
            return tau
        return self.torques_reference(qj, vj)

    def torques_reference(self, qj: np.ndarray, vj: np.ndarray) -> np.ndarray:
        """:meth:`torques`, masked joint by joint: the plain law its fast path is held to."""
        tau = self.tau_ff.copy()
        servo = self.has_position | self.has_velocity
        if servo.any():
            tau += np.where(self.has_position, self.kp * (self.q_ref - qj), 0.0)
            tau += np.where(servo, self.kd * (self.v_ref - vj), 0.0)
        return tau


def pd_gravity(sim, case=None, *, kp, kd):
    """The example controller as an in-process controller (:mod:`wb_sim.control`):
    :class:`PDGravityController` holding the simulator's posture at creation, with gains
    ``kp`` (N*m/rad) and ``kd`` (N*m*s/rad), scalars or one per joint (the configurations'
    ``wb_sim_pd_controller`` gains). ``wb_sim.controllers:pd_gravity``."""
    pd = PDGravityController(sim.robot, sim.joint_positions.copy(), kp, kd,
                             gravity=sim.config.gravity)

    def control(obs):
        return pd(obs.q, obs.joint_positions, obs.joint_velocities)
    return control


pd_gravity.wants_imu = False  # the law needs no IMU reading
pd_gravity.wants_velocity = False  # nor the base velocity (its joints' are obs.joint_velocities)


# ----------------------------------------------------------------------------
# drive gains derived from the robot
# ----------------------------------------------------------------------------

#: the drives' bandwidth: f = physics rate / this (50 Hz at 1 kHz)
RATE_DIVISOR = 20.0
#: the largest eigenvalue of M^-1 (kp dt^2 + 2 kd dt) the gains may reach (the explicit PD
#: diverges at 4: a quarter of room for the contact)
STABILITY = 3.0


@dataclass(frozen=True)
class DerivedGains:
    """Drive gains from the robot's inertia (:func:`derived_gains`), per joint."""

    kp: np.ndarray  #: N*m/rad (N/m for a prismatic joint)
    kd: np.ndarray  #: N*m*s/rad (N*s/m)
    inertia: np.ndarray  #: the joints' reflected inertia 1 / (M^-1)_ii, kg*m^2 (kg)
    w: np.ndarray  #: each joint's bandwidth, rad/s (w0, lowered where coupled joints need it)
    w0: float  #: 2 pi rate / divisor, rad/s
    load: float  #: the largest eigenvalue of M^-1 (kp dt^2 + 2 kd dt) reached (< 4: stable)


def derived_gains(M: np.ndarray, idx_v, rate: float, *, divisor: float = RATE_DIVISOR,
                  stability: float = STABILITY, min_kp: float = 0.0) -> DerivedGains:
    """Joint drive gains from the mass matrix ``M`` (nv, nv; armature included) at a pose,
    for the joints of velocity indices ``idx_v``, at physics rate ``rate`` (Hz): each
    joint's reflected inertia ``I = 1 / (M^-1)_ii`` (what it drives with the other joints
    and a floating base free: the smallest it meets), ``kp = I w^2``, ``kd = 2 I w``
    (critically damped), ``w = 2 pi rate / divisor``. Joints are coupled through M: where
    the largest eigenvalue of ``M^-1 (kp dt^2 + 2 kd dt)`` (the explicit PD's step matrix)
    exceeds ``stability``, ``w`` is lowered for the joints of that mode (the most for those
    that move most in it) until it does not. ``kp`` is at least ``min_kp``. The rule of
    ``wb_sim_robot`` (:mod:`wb_sim.tools.robot_setup`) and of the node's drives where
    ``command.kp`` / ``command.kd`` are not given."""
    Minv = np.linalg.inv(M)[np.ix_(idx_v, idx_v)]
    inertia = 1.0 / np.diag(Minv)
    w0 = 2.0 * np.pi * rate / divisor
    dt = 1.0 / rate

    def load(w):
        r = np.sqrt(inertia * (w * w * dt * dt + 4 * w * dt))
        lam, vec = np.linalg.eigh(r[:, None] * Minv * r[None, :])
        return float(lam[-1]), np.abs(vec[:, -1])

    w = np.full(len(inertia), w0)
    lam, v = load(w)
    for _ in range(500):
        if lam <= stability:
            break
        w *= (stability / lam) ** (v / v.max())
        lam, v = load(w)
    kp = np.maximum(inertia * w * w, min_kp)
    kd = 2.0 * inertia * w
    return DerivedGains(kp=kp, kd=kd, inertia=inertia, w=w, w0=float(w0), load=lam)


def simulator_drive_gains(sim) -> DerivedGains:
    """:func:`derived_gains` of simulator ``sim`` at its initial pose and physics rate."""
    return derived_gains(sim.mass_matrix(sim.q0), sim.robot.idx_v, 1.0 / sim.dt)
