"""An honest "stands" verdict for a standing run.

A robot stands only if, over the whole run,

* its base never dropped more than ``max_drop`` below where it started (a floating base;
  a fixed base cannot fall): by default :data:`MAX_DROP_FRACTION` (15 %) of its start
  height above the ground, so that the threshold scales with the robot (0.104 m for the
  humanoid's 0.694 m, 0.036 m for Solo12's 0.24 m, where an absolute 0.1 m was 40 % of it);
* no contact surface's frame slid more than ``max_slide`` (5 mm) horizontally
  from where it was once the first ``settle_s`` (0.5 s) had passed (feet that
  creep away are not standing, whatever the base height says);
* no joint spent more than ``max_saturated`` (5 %) of the steps at its effort
  limit (a controller chattering between its limits is not holding a posture).

:class:`StandMonitor` works on plain arrays, so the headless run, the benchmark
and the ROS launcher (from its topics) judge alike; :meth:`StandMonitor.watch`
reads them from a :class:`~wb_sim.Simulator`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

#: a floating base fell when it dropped more than this fraction of its start height above
#: the ground (the world z = 0 plane); the ROS verdict (wb_sim/ros/verdict.py) uses it too
MAX_DROP_FRACTION = 0.15


def max_drop_for(start_height: float) -> float:
    """The largest drop of a base starting ``start_height`` m above the ground that is not a
    fall, m: :data:`MAX_DROP_FRACTION` of it."""
    return MAX_DROP_FRACTION * max(float(start_height), 0.0)


@dataclass(frozen=True)
class StandVerdict:
    stands: bool
    reasons: tuple[str, ...]  #: why not (empty when it stands)
    base_drop: float  #: m, largest drop of the base below its start (0 for a fixed base)
    foot_slide: float  #: m, largest horizontal slide of a contact surface after settling
    saturated: dict[str, float] = field(default_factory=dict)  #: joint -> fraction of steps
    #: m, the drop judged a fall (``max_drop``, or the fraction of the start height); inf
    #: for a fixed base or before any sample
    max_drop: float = float("inf")

    @property
    def fell(self) -> bool:
        """The base dropped more than :attr:`max_drop`."""
        return self.base_drop > self.max_drop

    def summary(self) -> str:
        """One line for a terminal: 'stands (...)' or 'FELL: reasons (...)'."""
        worst = max(self.saturated.values(), default=0.0)
        figures = (f"base drop {self.base_drop * 1e3:.1f} mm, feet slid "
                   f"{self.foot_slide * 1e3:.2f} mm, most saturated joint "
                   f"{100 * worst:.1f} % of steps")
        if self.stands:
            return f"stands ({figures})"
        return f"DID NOT STAND: {'; '.join(self.reasons)} ({figures})"


class StandMonitor:
    """Accumulates what the verdict needs, one sample per step (see the module docstring).

    Args:
        joint_names: names of the actuated joints, for the report.
        effort_limits: (nj,) N*m or N (inf where unlimited).
        floating_base: whether the base can fall.
        max_drop: m, the largest drop that is not a fall; None (the default):
            :data:`MAX_DROP_FRACTION` of the first sample's base height (:func:`max_drop_for`).
    """

    def __init__(self, joint_names, effort_limits, floating_base: bool = True, *,
                 max_drop: float | None = None, max_slide: float = 0.005,
                 max_saturated: float = 0.05, settle_s: float = 0.5):
        self.joint_names = tuple(joint_names)
        self.limits = np.asarray(effort_limits, dtype=float)
        self.floating = floating_base
        self._given_drop = max_drop
        #: m, the drop judged a fall: ``max_drop``, or set by the first sample (None until then)
        self.max_drop = max_drop
        self.max_slide, self.max_saturated = max_slide, max_saturated
        self.settle_s = settle_s
        self._z0 = None
        self._drop = 0.0
        self._feet0 = None
        self._slide = 0.0
        self._saturated = np.zeros(len(self.joint_names))
        self._samples = 0

    def update(self, t: float, base_z: float, applied_efforts, foot_positions=None) -> None:
        """One sample: time (s), base height (m), the efforts applied at the last step
        ((nj,), after saturation) and, when known, the world positions (S, 3) of the
        contact surfaces' frames (sampling them every few steps is enough)."""
        if self._z0 is None:
            self._z0 = base_z
            if self._given_drop is None:
                self.max_drop = max_drop_for(base_z)
        if self.floating:
            self._drop = max(self._drop, self._z0 - base_z)
        tau = np.abs(np.asarray(applied_efforts, dtype=float))
        self._saturated += tau >= self.limits * (1.0 - 1e-9)
        self._samples += 1
        if foot_positions is not None and t >= self.settle_s:
            feet = np.asarray(foot_positions, dtype=float)
            if self._feet0 is None:
                self._feet0 = feet.copy()
            slide = np.hypot(*(feet - self._feet0)[:, :2].T)
            self._slide = max(self._slide, float(slide.max(initial=0.0)))

    def update_run(self, t, base_z, applied_efforts, feet_t=None, feet=None) -> None:
        """:meth:`update` for a whole run at once, vectorized (a campaign's metrics after its
        loop): ``t`` (n,), ``base_z`` (n,), ``applied_efforts`` (n, nj), and the surfaces'
        positions ``feet`` (m, S, 3) at the times ``feet_t`` (m,) they were sampled. Gives the
        state :meth:`update` gives sample by sample, bit for bit (tested)."""
        t = np.asarray(t, dtype=float)
        if not len(t):
            return
        z = np.asarray(base_z, dtype=float)
        if self._z0 is None:
            self._z0 = float(z[0])
            if self._given_drop is None:
                self.max_drop = max_drop_for(self._z0)
        if self.floating:
            self._drop = max(self._drop, float((self._z0 - z).max()))
        tau = np.abs(np.asarray(applied_efforts, dtype=float))
        self._saturated += (tau >= self.limits * (1.0 - 1e-9)).sum(axis=0)
        self._samples += len(t)
        if feet is not None and len(feet_t):
            keep = np.asarray(feet_t, dtype=float) >= self.settle_s
            feet = np.asarray(feet, dtype=float)[keep]
            if len(feet):
                if self._feet0 is None:
                    self._feet0 = feet[0].copy()
                d = feet - self._feet0
                slide = np.hypot(d[..., 0], d[..., 1])
                self._slide = max(self._slide, float(slide.max(initial=0.0)))

    def watch(self, sim, feet_every: int = 10) -> None:
        """:meth:`update` from a Simulator after its step (the feet every ``feet_every`` steps)."""
        feet = None
        if sim.contact_points.n and sim.step_count % feet_every == 0:
            model, data = sim.model, sim._data
            pin.forwardKinematics(model, data, sim.q)
            feet = [pin.updateFramePlacement(model, data, sim.robot.frame_id(f)).translation
                    for f in sim.contact_points.surface_frames]
        self.update(sim.t, float(sim.q[2]) if sim.robot.floating_base else 0.0,
                    sim.applied_torques, feet)

    def verdict(self) -> StandVerdict:
        fractions = self._saturated / max(self._samples, 1)
        saturated = {n: float(f) for n, f in zip(self.joint_names, fractions) if f > 0.0}
        reasons = []
        max_drop = self.max_drop if self.floating and self.max_drop is not None else np.inf
        if self._drop > max_drop:
            scaled = (f", {100 * MAX_DROP_FRACTION:g} % of its start height {self._z0:.3f} m"
                      if self._given_drop is None else "")
            reasons.append(f"the base dropped {self._drop:.3f} m (more than {max_drop:.3g} m"
                           f"{scaled})")
        if self._slide > self.max_slide:
            reasons.append(f"a foot slid {self._slide * 1e3:.1f} mm (more than "
                           f"{self.max_slide * 1e3:g} mm)")
        over = [f"{n} {100 * f:.0f} %" for n, f in saturated.items() if f > self.max_saturated]
        if over:
            reasons.append(f"joints at their effort limit more than "
                           f"{100 * self.max_saturated:g} % of the time: {', '.join(over)}")
        return StandVerdict(stands=not reasons, reasons=tuple(reasons), base_drop=self._drop,
                            foot_slide=self._slide, saturated=saturated,
                            max_drop=float(max_drop))
