"""Solver health for ``/diagnostics`` (plain Python, no rclpy): per-window figures of the
physics and of the loop, each judged OK / WARN / ERROR against its ``diagnostics.<check>``
thresholds [warn, error]; :mod:`.publishers` turns them into a
``diagnostic_msgs/DiagnosticArray``.

A window runs from one sample (``publish.diagnostics_rate_hz``) to the next. Figures of the
whole window: the contact solves that stopped before their tolerance and their iterations
(the contact model's counters, differences of two samples), the deepest contact point and
the largest kinetic energy the contact impulses added in one step (read after each step,
only while someone subscribes: :attr:`HealthMonitor.watching`), the steps over their
deadline and the largest command latency (the pacer's counters). Figures of the sample: the
last contact solve's residual, the loop closures' drift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: diagnostic_msgs/DiagnosticStatus's levels
OK, WARN, ERROR = 0, 1, 2
LEVEL_NAMES = ("OK", "WARN", "ERROR")


@dataclass(frozen=True)
class Check:
    """One figure and its thresholds (the node parameter ``diagnostics.<key>``:
    [warn, error], a figure above warn is WARN, above error ERROR)."""

    key: str  #: diagnostics.<key>; also the figure's KeyValue key
    status: str  #: the DiagnosticStatus it belongs to
    unit: str
    default: tuple[float, float]
    what: str


#: the checks, grouped by their DiagnosticStatus (``wb_sim: <status>``)
CHECKS = (
    Check("solver_nonconverged", "contact solver", "", (0.05, 0.25),
          "share of the window's contact solves that stopped at contact.max_iterations "
          "before contact.tolerance (rigid contact)"),
    Check("solver_residual_mps", "contact solver", "m/s", (0.01, 0.1),
          "the last contact solve's natural-map residual of Coulomb's law and Signorini's "
          "condition, m/s (rigid contact; a healthy standing humanoid: p99 1e-3)"),
    Check("penetration_m", "contact", "m", (0.02, 0.1),
          "deepest contact point over the window, m (contact.max_penetration stops the "
          "simulation)"),
    Check("impact_energy_j", "contact", "J", (0.01, 0.1),
          "largest kinetic energy the contact impulses added in one step over the window, J "
          "(rigid contact; a dissipative contact adds none: the standing humanoid's is 0)"),
    Check("closure_drift_m", "loop closures", "m", (1.0e-3, 1.0e-2),
          "largest loop-closure error at the sample, m (rad for an orientation row); only "
          "with closed chains"),
    Check("deadline_misses", "timing", "", (0.001, 0.01),
          "share of the window's steps over their deadline by more than 1 ms (real time) or "
          "whose command timed out (lockstep, sync.timeout_s)"),
    Check("command_latency_s", "timing", "s", (0.005, 0.05),
          "largest joint_states -> command applied latency over the window, s (wall)"),
)
STATUS_NAMES = tuple(dict.fromkeys(c.status for c in CHECKS))


def level_of(value: float, thresholds) -> int:
    """OK, WARN or ERROR of ``value`` against ``(warn, error)``; NaN (not measured): OK."""
    warn, error = thresholds
    if value > error:
        return ERROR
    if value > warn:
        return WARN
    return OK


@dataclass
class Status:
    """One DiagnosticStatus: its level, message and figures (key -> text)."""

    name: str
    level: int
    message: str
    values: dict[str, str]


def _fmt(x: float) -> str:
    return "not measured" if isinstance(x, float) and math.isnan(x) else f"{x:.4g}"


class HealthMonitor:
    """The windows' figures of one simulator. ``stats``: the pacer's
    :class:`~wb_sim.ros.pacer.PacerStats` (its ``steps_total``, ``misses_total`` and
    ``take_latency_peak``). ``thresholds``: key -> (warn, error)."""

    def __init__(self, sim, stats, thresholds: dict[str, tuple[float, float]]):
        self.sim, self.stats = sim, stats
        self.thresholds = dict(thresholds)
        #: whether :meth:`after_step` runs (someone subscribes to the diagnostics)
        self.watching = False
        self._closures = sim.loop_closures is not None
        #: whether the contact measures its impulses' energy (the rigid one; not the
        #: compliant one: NaN), read after each step only then
        self._energy = not math.isnan(sim.contact.solver_health(False)["impulse_work"])
        self._start_window()

    def _start_window(self) -> None:
        st = self.sim.contact.solver_health(False)  # counters (statistics() sorts: ms)
        self._solves0 = st.get("solves", 0)
        self._nonconverged0 = st.get("nonconverged", 0)
        self._iterations0 = st.get("iterations", 0)
        self._steps0, self._misses0 = self.stats.steps_total, self.stats.misses_total
        self.depth_max = -math.inf
        self.energy_max = -math.inf if self._energy else math.nan
        self.sampled_steps = 0  # steps read by after_step in this window

    def after_step(self) -> None:
        """After each step while :attr:`watching`: the deepest point and the energy the
        contact impulses added (the humanoid: ~1 us compliant, ~5 us rigid; a sample ~0.1-0.3 ms)."""
        c = self.sim.contact
        d = c.max_depth
        if d > self.depth_max:
            self.depth_max = d
        if self._energy:
            w = c.solver_health(False)["impulse_work"]
            if w > self.energy_max:
                self.energy_max = w
        self.sampled_steps += 1

    def sample(self) -> list[Status]:
        """The window's statuses (one per :data:`STATUS_NAMES` that applies), then a new
        window."""
        sim, stats = self.sim, self.stats
        health = st = sim.contact.solver_health(True)
        solves = st.get("solves", 0) - self._solves0
        rigid = "nonconverged" in st
        nonconverged = st.get("nonconverged", 0) - self._nonconverged0
        iterations = st.get("iterations", 0) - self._iterations0
        steps = stats.steps_total - self._steps0
        misses = stats.misses_total - self._misses0
        if self.sampled_steps:
            depth, energy = self.depth_max, self.energy_max
        else:  # nobody watched the steps (the first window): the last step's
            depth = sim.contact.max_depth
            energy = health["impulse_work"]
        figures = {
            "solver_nonconverged": nonconverged / solves if rigid and solves else math.nan,
            "solver_residual_mps": health["residual"],
            "penetration_m": max(depth, 0.0) if math.isfinite(depth) else 0.0,
            "impact_energy_j": energy,
            "closure_drift_m": (float(abs(sim.loop_closure_errors()).max())
                                if self._closures else math.nan),
            "deadline_misses": misses / steps if steps else 0.0,
            "command_latency_s": stats.take_latency_peak(),
        }
        extra = {"contact solver": {"solves": str(solves), "not converged": str(nonconverged),
                                    "iterations per solve": _fmt(iterations / solves)
                                    if rigid and solves else "not measured",
                                    "contact model": sim.config.contact.model},
                 "contact": {"steps read": str(self.sampled_steps)},
                 "timing": {"steps": str(steps), "steps over deadline": str(misses)}}
        out = []
        for name in STATUS_NAMES:
            if name == "loop closures" and not self._closures:
                continue
            checks = [c for c in CHECKS if c.status == name]
            level, said, values = OK, [], {}
            for c in checks:
                x = figures[c.key]
                lv = level_of(x, self.thresholds[c.key])
                values[c.key] = _fmt(x)
                if lv > OK:
                    warn, error = self.thresholds[c.key]
                    bound = error if lv == ERROR else warn
                    said.append(f"{c.key} {x:.4g} {c.unit} > {LEVEL_NAMES[lv]} threshold "
                                f"{bound:g} (diagnostics.{c.key})".replace("  ", " "))
                level = max(level, lv)
            values.update(extra.get(name, {}))
            out.append(Status(f"wb_sim: {name}", level, "; ".join(said) or "OK", values))
        self._start_window()
        return out
