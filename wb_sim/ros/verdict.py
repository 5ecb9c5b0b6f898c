"""Effort saturation, chattering and posture drift, counted per step in the node for its
stats line.

Plain Python and numpy, no rclpy.

* :class:`EffortWatch` (the node, in the physics loop): after each step it counts,
  from the applied torques (after the effort limits) and the joint positions, what
  :meth:`EffortWatch.period_text` puts in the stats line, then starts a new period.
  Allocation-free: preallocated buffers and ``out=`` ufuncs; for the humanoid's 23
  joints 1.7 us a step while no joint is at its limit, 4.5 us while one is (a
  physics step takes about 60 us).

Definitions (joint ``j``, step ``k``, applied torque ``tau[k, j]``, effort limit
``L[j]``):

* *at its limit*: ``|tau[k, j]| >= L[j] * (1 - 1e-9)`` (up to the rounding of one
  division: it is computed as ``|tau / (L (1 - 1e-9))| >= 1``). A joint without a finite,
  positive limit (``inf``: unlimited; 0: passive) is never at its limit.
* *at limits*: a step in which any joint is at its limit; the stats line gives
  their number and share of the period's steps, and the (up to
  :data:`WORST_JOINTS`) joints at their limit in the most steps, with their share.
* *sign flip between limits* (chattering): a step in which a joint is at its limit
  with the sign opposite to that of its previous at-limit step, however many
  steps lie between the two (a joint that goes +L, -L, +L over three steps makes
  two flips; +L, then unsaturated, then -L is one flip). The first at-limit step
  of a joint is no flip; the memory of the last sign survives the periods (a
  flip across two stats lines counts in the second). Summed over the joints.
* *largest joint deviation*: ``max |q[k, j] - q0[j]|`` over the period's steps and
  the joints, rad or m (its joint's unit), ``q0`` the initial posture (the one
  ``~/reset`` returns to); a continuous joint's angle is read in (-pi, pi].
"""

from __future__ import annotations

import numpy as np

#: the joints the stats line names as most at their limits
WORST_JOINTS = 3
#: an at-limit test with this relative margin: the clipped torque equals the limit
#: up to rounding
AT_LIMIT_TOLERANCE = 1e-9


class EffortWatch:
    """Counts, one step at a time, the figures of the stats line's effort part (see the
    module docstring for the definitions).

    Args:
        joint_names: the actuated joints, in the order of the torques and positions.
        effort_limits: (nj,) N*m or N; ``inf`` where unlimited (never at its limit).
        initial_positions: (nj,) the posture the deviation is measured from, rad or m.
        prismatic: (nj,) bool, True where the joint's unit is m (default: all rad).
    """

    def __init__(self, joint_names, effort_limits, initial_positions, prismatic=None):
        self.joint_names = tuple(joint_names)
        nj = len(self.joint_names)
        limits = np.asarray(effort_limits, dtype=float).reshape(-1)
        q0 = np.asarray(initial_positions, dtype=float).reshape(-1)
        if limits.shape != (nj,) or q0.shape != (nj,):
            raise ValueError(f"effort_limits and initial_positions need one value per joint "
                             f"({nj}), got {limits.size} and {q0.size}")
        self._prismatic = (np.zeros(nj, dtype=bool) if prismatic is None
                           else np.asarray(prismatic, dtype=bool).reshape(nj))
        counted = np.isfinite(limits) & (limits > 0)
        self.limited = bool(counted.any())
        #: tau / threshold truncates to -1 at the -limit, +1 at the +limit, 0 between
        #: (threshold L (1 - 1e-9); 0 for a joint never at its limit)
        self._inv_threshold = np.zeros(nj)
        self._inv_threshold[counted] = 1.0 / (limits[counted] * (1.0 - AT_LIMIT_TOLERANCE))
        self.q0 = q0.copy()
        # per-step scratch
        self._side = np.empty(nj)  # -1, 0, +1: at the -limit, not at a limit, at the +limit
        self._abs = np.empty(nj)
        self._prod = np.empty(nj)
        self._mask = np.empty(nj, dtype=bool)
        self._zero = np.zeros(nj)
        self._one = np.ones(nj)
        #: the side of each joint's last at-limit step (0: never at its limit yet)
        self._last = np.zeros(nj)
        # the period's counts
        self._joint_steps = np.zeros(nj)  # steps at its limit, per joint (whole numbers)
        self._qmax = np.empty(nj)  # the period's range of each joint's position
        self._qmin = np.empty(nj)
        self.start_period()

    @classmethod
    def from_simulator(cls, sim) -> "EffortWatch":
        """For a :class:`~wb_sim.Simulator`: its effort limits, its initial posture
        (``q0``) and its prismatic joints."""
        robot = sim.robot
        prismatic = [robot.model.joints[int(j)].shortname().startswith("JointModelP")
                     for j in robot.joint_ids]
        return cls(sim.joint_names, sim.actuation.effort_limit,
                   robot.joint_positions(sim.q0), prismatic)

    def after_step(self, tau: np.ndarray, q: np.ndarray) -> None:
        """Count one step: ``tau`` the torques applied at it (after the effort limits),
        ``q`` the joint positions after it, both (nj,)."""
        np.maximum(self._qmax, q, out=self._qmax)
        np.minimum(self._qmin, q, out=self._qmin)
        self.steps += 1
        if not self.limited:
            return
        side = self._side
        np.trunc(np.multiply(tau, self._inv_threshold, out=side), out=side)
        if not np.count_nonzero(side):  # the usual step: nothing more to count
            return
        self.steps_at_limit += 1
        np.add(self._joint_steps, np.abs(side, out=self._abs), out=self._joint_steps)
        # a flip: at a limit on the side opposite to the joint's last at-limit step
        prod, last = self._prod, self._last
        np.less(np.multiply(side, last, out=prod), self._zero, out=self._mask)
        self.flips += np.count_nonzero(self._mask)
        # last = side where at a limit, else unchanged (copyto's where= allocates a mask)
        np.multiply(last, np.subtract(self._one, self._abs, out=prod), out=last)
        np.add(last, side, out=last)

    def deviation(self) -> tuple[float, int]:
        """The period's largest joint deviation from the initial posture (rad or m) and
        its joint's index (0.0, -1 without joints or steps)."""
        if not self.joint_names or not self.steps:
            return 0.0, -1
        dev = np.maximum(self._qmax - self.q0, self.q0 - self._qmin)
        j = int(np.argmax(dev))
        return float(dev[j]), j

    def worst(self, n: int = WORST_JOINTS) -> list[tuple[str, float]]:
        """Up to ``n`` joints at their limit in the most steps of the period, with their
        share of the steps, the most first (ties in joint order)."""
        if not self.steps:
            return []
        order = np.argsort(-self._joint_steps, kind="stable")[:n]
        return [(self.joint_names[j], float(self._joint_steps[j]) / self.steps) for j in order
                if self._joint_steps[j] > 0]

    def text(self) -> str:
        """The stats line's part, e.g. ``efforts at limits in 12 of 1000 steps (1.2 %:
        r_knee 1.0 %, l_knee 0.2 %), 4 sign flips between limits, largest joint
        deviation 0.0123 rad (r_knee)``"""
        if self.limited:
            share = 100.0 * self.steps_at_limit / self.steps if self.steps else 0.0
            worst = ", ".join(f"{n} {100 * s:.1f} %" for n, s in self.worst())
            efforts = (f"efforts at limits in {self.steps_at_limit} of {self.steps} steps "
                       f"({share:.1f} %{': ' + worst if worst else ''}), {self.flips} sign "
                       f"flips between limits")
        else:
            efforts = f"no effort limits ({self.steps} steps)"
        dev, j = self.deviation()
        where = (f"{'m' if self._prismatic[j] else 'rad'} ({self.joint_names[j]})" if j >= 0
                 else "rad (none)")
        return f"{efforts}, largest joint deviation {dev:.4f} {where}"

    def start_period(self) -> None:
        """Forget the period's counts (not the last signs: a flip may span two periods)."""
        self._joint_steps[:] = 0
        self._qmax[:] = -np.inf
        self._qmin[:] = np.inf
        self.steps = self.steps_at_limit = self.flips = 0

    def period_text(self) -> str:
        """:meth:`text`, then :meth:`start_period` (the stats line's call)."""
        out = self.text()
        self.start_period()
        return out

