"""Effort saturation, chattering and posture drift: counted per step in the node, judged
over the whole run by ``wb_sim_run``.

Plain Python and numpy, no rclpy. Two halves that share the stats line's format:

* :class:`EffortWatch` (the node, in the physics loop): after each step it counts,
  from the applied torques (after the effort limits) and the joint positions, what
  :meth:`EffortWatch.period_text` puts in the stats line, then starts a new period.
  Allocation-free: preallocated buffers and ``out=`` ufuncs; for the humanoid's 23
  joints 1.7 us a step while no joint is at its limit, 4.5 us while one is (a
  physics step takes about 60 us).
* :class:`RunJudge` (``wb_sim_run``): reads the node's stats lines, adds them up
  over the run and gives the verdict (:meth:`RunJudge.verdict`).

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

import math
import re

import numpy as np

from ..tools.stand import MAX_DROP_FRACTION as STAND_DROP_FRACTION

#: the joints the stats line names as most at their limits
WORST_JOINTS = 3
#: an at-limit test with this relative margin: the clipped torque equals the limit
#: up to rounding
AT_LIMIT_TOLERANCE = 1e-9

# ----------------------------------------------------------------------------- the verdict's
# thresholds (run.py's docstring, docs/ros.md and the README say the same)

#: floating base: FELL when the base height dropped below its first reading by more than
#: this fraction of that reading (its height above the ground): the threshold scales with the
#: robot (0.104 m for the humanoid, 0.036 m for Solo12); the headless verdict's
#: (wb_sim.tools.stand)
MAX_DROP_FRACTION = STAND_DROP_FRACTION
#: floating base: UNSTEADY when it rose above its first reading by more than this fraction
#: of it (0.052 m for the humanoid)
MAX_RISE_FRACTION = 0.075
#: fixed base: DRIFTED when a joint left the initial posture by more (rad or m); a PD
#: hold of a posture stays within a few mrad, a controller that lets a joint sag does not
MAX_DEVIATION = 0.05
#: SATURATED when the share of steps with a joint at its effort limit is larger
MAX_AT_LIMIT_SHARE = 0.05
#: SATURATED when the sign flips between limits (all joints) exceed this per simulated
#: second: holding a posture makes none, a bang-bang move a couple per move, a
#: chattering joint up to half the physics rate
MAX_FLIPS_PER_S = 1.0


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
        deviation 0.0123 rad (r_knee)`` (:data:`EFFORTS` and :data:`DEVIATION` read it)."""
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


# ----------------------------------------------------------------------------- the run's verdict

#: the stats line's parts :class:`RunJudge` reads (the first is :meth:`Pacer.pace_text`'s
#: or :meth:`Pacer.lockstep_text`'s, the others :meth:`EffortWatch.text`'s)
PACE = re.compile(r"real-time factor (?P<rtf>[\d.]+|nan|inf) over (?P<wall>[\d.]+) s "
                  r"\(t = (?P<t>[\d.]+) s\)")
BASE = re.compile(r"base at \((?P<x>[-\d.]+), (?P<y>[-\d.]+), (?P<z>[-\d.]+)\) m")
EFFORTS = re.compile(r"efforts at limits in (?P<n>\d+) of (?P<steps>\d+) steps "
                     r"\([\d.]+ %(?:: (?P<worst>[^)]*))?\), (?P<flips>\d+) sign flips "
                     r"between limits")
NO_LIMITS = re.compile(r"no effort limits \((?P<steps>\d+) steps\)")
DEVIATION = re.compile(r"largest joint deviation (?P<dev>[\d.]+) (?P<unit>rad|m) "
                       r"\((?P<joint>[^)]*)\)")
_WORST = re.compile(r"(?P<joint>\S+) (?P<pct>[\d.]+) %")


class RunJudge:
    """The whole run's figures from the node's stats lines, and the verdict.

    :meth:`feed` takes each line the node logs (others are ignored); :meth:`verdict`
    adds them up. The thresholds are the module's constants; the verdict words:

    * floating base: ``stands``, ``FELL`` (the base height dropped below its first
      reading by more than :data:`MAX_DROP_FRACTION` of it) or ``UNSTEADY`` (it rose
      by more than :data:`MAX_RISE_FRACTION` of it);
    * fixed base: ``holds``, or ``DRIFTED`` (a joint left the initial posture by
      more than :data:`MAX_DEVIATION`, rad or m);
    * either: ``SATURATED`` besides, when a joint was at its effort limit in more
      than :data:`MAX_AT_LIMIT_SHARE` of the steps, or the sign flips between
      limits exceeded :data:`MAX_FLIPS_PER_S` per simulated second.

    ``floating_base``: whether the robot has one (the base height is judged) or not
    (the joint deviation is); ``robot``: with several robots on the node, whose base.
    """

    def __init__(self, floating_base: bool, robot: str | None = None):
        self.floating_base = floating_base
        #: several robots on the node: the base height judged is robot ``robot``'s (its
        #: "robot '<name>' base at" of the stats line; the efforts and joint deviation
        #: stay those of every robot together)
        self.robot = robot
        self._base = BASE if robot is None else re.compile(
            rf"robot '{re.escape(robot)}' " + BASE.pattern)
        self.lines = 0
        self.t = 0.0  # simulated time of the last line, s
        self.z0 = self.zmin = self.zmax = None
        self.sim_s = self.wall_s = 0.0  # the periods' simulated and wall time
        self.steps = self.steps_at_limit = self.flips = 0
        self.limited = None  # None: no line said (an older node)
        self.joint_steps: dict[str, int] = {}  # steps at the limit, from each period's worst
        self.deviation = None  # (value, unit, joint): the run's largest

    def feed(self, line: str) -> bool:
        """One line of the node's log; True if it was a stats line."""
        m = PACE.search(line)
        if m is None:
            return False
        self.lines += 1
        self.t = float(m["t"])
        rtf, wall = float(m["rtf"]), float(m["wall"])
        if math.isfinite(rtf) and wall > 0:
            self.sim_s += rtf * wall
            self.wall_s += wall
        b = self._base.search(line)
        if b is not None:
            z = float(b["z"])
            self.z0 = z if self.z0 is None else self.z0
            self.zmin = z if self.zmin is None else min(self.zmin, z)
            self.zmax = z if self.zmax is None else max(self.zmax, z)
        e = EFFORTS.search(line)
        if e is not None:
            self.limited = True
            steps = int(e["steps"])
            self.steps += steps
            self.steps_at_limit += int(e["n"])
            self.flips += int(e["flips"])
            for w in _WORST.finditer(e["worst"] or ""):
                n = round(float(w["pct"]) / 100.0 * steps)
                self.joint_steps[w["joint"]] = self.joint_steps.get(w["joint"], 0) + n
        else:
            n = NO_LIMITS.search(line)
            if n is not None:
                self.limited = bool(self.limited)
                self.steps += int(n["steps"])
        d = DEVIATION.search(line)
        if d is not None and (self.deviation is None or float(d["dev"]) > self.deviation[0]):
            self.deviation = (float(d["dev"]), d["unit"], d["joint"])
        return True

    @property
    def real_time_factor(self) -> float:
        """The run's: its simulated time over its wall time, as the periods reported them
        (their factors weighted by their wall time); nan without any."""
        return self.sim_s / self.wall_s if self.wall_s > 0 else float("nan")

    def verdict(self) -> tuple[str, bool]:
        """(the verdict line, whether the run failed: exit code 1)."""
        failed, parts = [], []
        if self.floating_base:
            if self.z0 is None:
                parts.append("base height not reported")
            else:
                max_drop, max_rise = (MAX_DROP_FRACTION * max(self.z0, 0.0),
                                      MAX_RISE_FRACTION * max(self.z0, 0.0))
                fell = self.zmin < self.z0 - max_drop
                rose = self.zmax > self.z0 + max_rise
                failed += ["FELL"] * fell + ["UNSTEADY"] * rose
                parts.append(f"base height first {self.z0:.4f} m, lowest {self.zmin:.4f} m, "
                             f"highest {self.zmax:.4f} m"
                             + (f" (dropped more than {max_drop:.3g} m, "
                                f"{100 * MAX_DROP_FRACTION:g} % of its first height)"
                                if fell else "")
                             + (f" (rose more than {max_rise:.3g} m, "
                                f"{100 * MAX_RISE_FRACTION:g} % of its first height)"
                                if rose else ""))
        if self.deviation is None:
            parts.append("joint deviation not reported")
        else:
            dev, unit, joint = self.deviation
            drifted = not self.floating_base and dev > MAX_DEVIATION
            failed += ["DRIFTED"] * drifted
            parts.append(f"largest joint deviation from the initial posture {dev:.4f} {unit} "
                         f"({joint})" + (f", more than {MAX_DEVIATION:g}" if drifted else ""))
        if self.limited is None:
            parts.append("efforts not reported")
        elif not self.limited:
            parts.append("no effort limits")
        else:
            share = self.steps_at_limit / self.steps if self.steps else 0.0
            per_s = self.flips / self.t if self.t > 0 else (math.inf if self.flips else 0.0)
            long_ = share > MAX_AT_LIMIT_SHARE
            chatter = per_s > MAX_FLIPS_PER_S
            failed += ["SATURATED"] * (long_ or chatter)
            worst = sorted(self.joint_steps.items(), key=lambda kv: -kv[1])[:WORST_JOINTS]
            worst = ", ".join(f"{j} {100 * n / self.steps:.1f} %" for j, n in worst if n > 0)
            parts.append(f"efforts at limits in {100 * share:.1f} % of {self.steps} steps"
                         + (f" ({worst})" if worst else "")
                         + (f", more than {100 * MAX_AT_LIMIT_SHARE:g} %" if long_ else "")
                         + f", {self.flips} sign flips between limits ({per_s:.1f} per s"
                         + (f", more than {MAX_FLIPS_PER_S:g} per s" if chatter else "") + ")")
        rtf = self.real_time_factor
        parts.append(f"real-time factor {rtf:.3f}" if math.isfinite(rtf)
                     else "real-time factor not reported")
        judged = self.z0 is not None if self.floating_base else self.deviation is not None
        word = ", ".join(failed) or ("not judged" if not judged else
                                     "stands" if self.floating_base else "holds")
        return f"verdict: {word}: {'; '.join(parts)}", bool(failed)
