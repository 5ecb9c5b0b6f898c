"""Pacing of the physics loop against the wall clock: deadlines, scheduling policy, statistics.

Plain Python, no rclpy: the node calls :meth:`Pacer.after_step` once per step and
:meth:`Pacer.wait` with what it returns; the tests drive it with a fake clock.

Step ``k`` after the anchor is due at ``anchor + k * dt / r`` (real-time factor
``r``): absolute deadlines, so that early and late steps do not add up. How the
loop waits for a deadline is the *policy*:

* ``SCHED_FIFO <prio>``: the physics thread runs at real-time priority
  (parameter ``realtime_priority``, where permitted) and sleeps until the
  deadline; the kernel wakes it on time.
* ``sleep + spin <margin> ms``: with the normal scheduler (``realtime_priority: 0``
  or no permission) a sleeping thread wakes more than 1 ms late about once in
  1000 sleeps on a virtual machine. The loop sleeps until ``margin`` before the
  deadline, then waits actively (``time.sleep(0)``: it yields the GIL and naps for the
  thread's timer slack, 50 us by default) for the rest, so a late wake-up of up to
  ``margin`` costs nothing.
  The price is CPU: up to ``margin / (dt / r)`` of a core (0.2 ms at 1 kHz:
  up to 20 %).
* ``sleep``: the normal scheduler with ``margin`` 0.

Under the normal scheduler the physics thread also asks the kernel, without any
privilege, for a short time slice (:func:`tune_normal`: ``sched_setattr``'s
``sched_runtime``, :data:`NORMAL_SLICE_S`; Linux 6.12 and later, EEVDF): when it wakes
it then preempts a busy neighbour on its core instead of waiting out the neighbour's
slice (1.4 ms by default here, as sched_getattr reports it). On the 2-core machine this took the misses of the
normal scheduler from 0.85-0.98 to 0.03-0.29 per 1000 steps, SCHED_FIFO's range
(docs/performance.md). The stats line reports what was granted.

Long waits are cut into slices of ``sleep_slice_s`` that end early when the
node's ``wake`` event is set (a new real-time factor, a reset, a pause, stop),
so that a tiny real-time factor does not make the node deaf.
"""

from __future__ import annotations

import collections
import math
import os
import time
from typing import Callable

#: a step finishing more than this after its deadline counts as a deadline miss, s
MISS_THRESHOLD_S = 1.0e-3
#: when the loop falls this far behind (e.g. the process was stopped), it re-anchors, s
REANCHOR_S = 0.5
#: longest single sleep, s: a tiny real_time_factor (1e-9 asks for 1e6 s per step)
#: must not make the node deaf to a new value, a reset or SIGINT
SLEEP_SLICE_S = 0.05
#: default active-wait margin before a deadline with the normal scheduler, s
SPIN_MARGIN_S = 2.0e-4
#: the time slice the physics thread asks for under the normal scheduler, s (the kernel
#: accepts 0.1-100 ms; Linux < 6.12 ignores it, and the pacer then reports none)
NORMAL_SLICE_S = 1.0e-4


class SystemClock:
    """The wall clock and the waits of the real node (``perf_counter`` seconds)."""

    now = staticmethod(time.perf_counter)
    sleep = staticmethod(time.sleep)

    @staticmethod
    def yield_() -> None:
        time.sleep(0)  # releases the GIL and lets another runnable thread have the core

    @staticmethod
    def wait_event(event, seconds: float) -> bool:
        return event.wait(seconds)


def set_fifo(priority: int) -> None:
    """SCHED_FIFO ``priority`` for the calling thread (0: back to SCHED_OTHER);
    OSError or AttributeError where not permitted or not Linux."""
    if priority:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    else:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def tune_normal(slice_s: float = NORMAL_SLICE_S) -> list[str]:
    """For the calling thread under the normal scheduler: ask for a time slice of
    ``slice_s`` (``sched_setattr``'s ``sched_runtime``; no privilege needed; Linux 6.12+
    honours it). Returns what was granted, as text (empty where it is not: not Linux,
    an older kernel, a policy other than SCHED_OTHER)."""
    import ctypes
    import platform

    nr = {"x86_64": (314, 315), "aarch64": (274, 275)}.get(platform.machine())
    if nr is None:
        return []
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return []
    if getattr(libc, "syscall", None) is None:
        return []
    attr, back = _SchedAttr(), _SchedAttr()
    attr.size = back.size = ctypes.sizeof(_SchedAttr)
    if libc.syscall(nr[1], 0, ctypes.byref(attr), attr.size, 0) != 0 or attr.sched_policy != 0:
        return []  # no sched_getattr, or not SCHED_OTHER: leave it
    attr.sched_runtime = int(slice_s * 1e9)
    if libc.syscall(nr[0], 0, ctypes.byref(attr), 0) == 0 and \
            libc.syscall(nr[1], 0, ctypes.byref(back), back.size, 0) == 0 and \
            back.sched_runtime == attr.sched_runtime:
        return [f"slice {slice_s * 1e3:g} ms"]
    return []


def _sched_attr_type():
    import ctypes

    class SchedAttr(ctypes.Structure):  # struct sched_attr (linux/sched/types.h)
        _fields_ = [("size", ctypes.c_uint32), ("sched_policy", ctypes.c_uint32),
                    ("sched_flags", ctypes.c_uint64), ("sched_nice", ctypes.c_int32),
                    ("sched_priority", ctypes.c_uint32), ("sched_runtime", ctypes.c_uint64),
                    ("sched_deadline", ctypes.c_uint64), ("sched_period", ctypes.c_uint64),
                    ("util_min", ctypes.c_uint32), ("util_max", ctypes.c_uint32)]
    return SchedAttr


_SchedAttr = _sched_attr_type()


class PacerStats:
    """Steps, deadline misses and command figures since the last report."""

    def __init__(self, wall: float = 0.0, sim: float = 0.0):
        self.latencies: collections.deque[float] = collections.deque(maxlen=100_000)
        #: never reset: the diagnostics' windows (.health) take differences of them
        self.steps_total = self.misses_total = 0
        self.latency_peak = 0.0  # the largest latency since take_latency_peak
        self.reset(wall, sim)

    def count_step(self) -> None:
        self.steps += 1
        self.steps_total += 1

    def count_miss(self) -> None:
        self.misses += 1
        self.misses_total += 1

    def add_latency(self, s: float) -> None:
        self.latencies.append(s)
        if s > self.latency_peak:
            self.latency_peak = s

    def take_latency_peak(self) -> float:
        """The largest command latency (s) since the last call, and forget it (0: none)."""
        peak, self.latency_peak = self.latency_peak, 0.0
        return peak

    def reset(self, wall: float, sim: float) -> None:
        self.wall0, self.sim0, self.steps, self.misses, self.stale = wall, sim, 0, 0, 0
        self.applied = 0  # steps that applied a command newer than the previous step's
        self.accepted = 0  # valid commands taken

    def real_time_factor(self, wall: float, sim: float) -> float:
        dt = wall - self.wall0
        return (sim - self.sim0) / dt if dt > 0 else float("nan")

    def misses_per_1000(self) -> float:
        return 1000.0 * self.misses / self.steps if self.steps else 0.0

    def latency_percentiles(self) -> tuple[float, float] | None:
        """(p50, p99) of the command latencies in s, and forget them; None if none."""
        if not self.latencies:
            return None
        x = sorted(self.latencies)
        self.latencies.clear()
        return x[len(x) // 2], x[min(len(x) - 1, int(0.99 * len(x)))]


class Pacer:
    """Deadlines, scheduling policy and statistics of the physics loop.

    ``clock``: :class:`SystemClock` or a fake with ``now()``, ``sleep(s)``,
    ``yield_()`` and ``wait_event(event, s)``; ``set_priority``: :func:`set_fifo`
    or a fake. ``spin_margin_s``: the active wait before a deadline under the
    normal scheduler (0: plain sleeps).
    """

    def __init__(self, dt: float, clock=SystemClock, set_priority: Callable[[int], None] = set_fifo,
                 tune: Callable[[], list[str]] = tune_normal, spin_margin_s: float = SPIN_MARGIN_S, miss_threshold_s: float = MISS_THRESHOLD_S,
                 reanchor_s: float = REANCHOR_S, sleep_slice_s: float = SLEEP_SLICE_S):
        if not (spin_margin_s >= 0 and math.isfinite(spin_margin_s)):
            raise ValueError(f"spin margin must be finite and >= 0 s, got {spin_margin_s!r}")
        self.dt = dt
        self.clock = clock
        self._set_priority = set_priority
        self._tune = tune
        self.tuned: list[str] | None = None  # what tune_normal granted (None: not asked yet)
        self.spin_margin_s = spin_margin_s
        self.miss_threshold_s = miss_threshold_s
        self.reanchor_s = reanchor_s
        self.sleep_slice_s = sleep_slice_s
        self.priority = 0  # SCHED_FIFO priority in force (0: the normal scheduler)
        self.suspended = False  # the loop fell behind at real-time priority
        self.refused: str | None = None  # why real-time priority was refused (once)
        self.stats = PacerStats(clock.now(), 0.0)
        self.anchor(clock.now())

    # ---------------------------------------------------------------- policy

    def schedule(self, priority: int, pacing: bool) -> str | None:
        """Apply the scheduling policy: SCHED_FIFO ``priority`` while ``pacing`` (realtime
        mode, real-time factor > 0), unless suspended; the normal scheduler otherwise.
        Returns the reason the first time real-time priority is refused, else None."""
        want = priority if pacing and priority > 0 and not self.suspended else 0
        if self.tuned is None:  # once: kept under SCHED_FIFO too, in force when back
            self.tuned = list(self._tune())
        if want == self.priority:
            return None
        try:
            self._set_priority(want)
        except (AttributeError, OSError) as e:  # no permission, or not Linux
            if want:
                first = self.refused is None
                self.refused = str(e)
                return self.refused if first else None
        self.priority = want
        return None

    def unsuspend(self) -> None:
        """A new real-time factor: real-time priority may be tried again."""
        self.suspended = False

    @property
    def policy(self) -> str:
        """The waiting policy in force, as the stats line reports it."""
        if self.priority:
            return f"SCHED_FIFO {self.priority}"
        tuned = f" ({', '.join(self.tuned)})" if self.tuned else ""
        if self.spin_margin_s > 0:
            return f"sleep + spin {self.spin_margin_s * 1e3:g} ms{tuned}"
        return f"sleep{tuned}"

    # ---------------------------------------------------------------- deadlines

    def anchor(self, now: float) -> None:
        """Deadlines start afresh at ``now`` (start, resume, new real-time factor)."""
        self.anchor_wall, self.anchor_k = now, 0

    def after_step(self, now: float, rtf: float, lockstep: bool) -> tuple[float, float]:
        """Count the step that just ended at ``now``; returns ``(wait_s, behind_s)``:
        how long to wait for the next deadline (0: none), and how far behind the
        loop was when it re-anchored (0: it did not)."""
        self.anchor_k += 1
        self.stats.count_step()
        if rtf <= 0:
            return 0.0, 0.0
        deadline = self.anchor_wall + self.anchor_k * self.dt / rtf
        late = now - deadline
        if lockstep:  # the pace is a cap: waiting for commands is no miss
            if late > 0:
                self.anchor(now)
                return 0.0, 0.0
            return -late, 0.0
        if late > self.miss_threshold_s:
            self.stats.count_miss()
            if late > self.reanchor_s:
                self.anchor(now)
                return 0.0, late
            return 0.0, 0.0
        return max(0.0, -late), 0.0

    def fell_behind(self) -> bool:
        """After a re-anchoring: True if the loop leaves real-time priority (a loop that
        cannot keep up never sleeps: at real-time priority it would hold its core)."""
        if not self.priority:
            return False
        self.suspended = True
        return True

    def wait(self, seconds: float, wake=None, running: Callable[[], bool] = lambda: True,
             spin: bool = True) -> None:
        """Wait ``seconds`` of wall time by the policy in force (``spin`` False: plain
        sleeps, e.g. for lockstep's pace cap, where waiting is no miss); a long wait
        in slices that end early when ``wake`` (a threading.Event) is set or
        ``running()`` is False."""
        clock = self.clock
        end = clock.now() + seconds
        margin = 0.0 if self.priority or not spin else self.spin_margin_s
        sleep_s = seconds - margin
        if sleep_s > self.sleep_slice_s and wake is not None:
            while running() and not wake.is_set():
                left = end - margin - clock.now()
                if left <= 0:
                    break
                clock.wait_event(wake, min(left, self.sleep_slice_s))
            if wake.is_set() or not running():
                return
        elif sleep_s > 0:
            clock.sleep(sleep_s)
        if margin > 0:
            while clock.now() < end:
                clock.yield_()

    # ---------------------------------------------------------------- statistics

    def report_due(self, now: float, period_s: float) -> bool:
        return period_s > 0 and now - self.stats.wall0 >= period_s

    def pace_text(self, now: float, sim_t: float) -> str:
        """The pace part of the realtime stats line (the benchmarks of wb_sim/ros/bench/ parse it)."""
        s = self.stats
        return (f"real-time factor {s.real_time_factor(now, sim_t):.3f} over "
                f"{now - s.wall0:.1f} s (t = {sim_t:.3f} s), deadline misses "
                f"{s.misses_per_1000():.2f} per 1000 steps")

    def lockstep_text(self, now: float, sim_t: float) -> str:
        s = self.stats
        wall = now - s.wall0
        return (f"lockstep: {s.steps / wall if wall > 0 else float('nan'):.0f} steps/s, "
                f"real-time factor {s.real_time_factor(now, sim_t):.3f} over {wall:.1f} s "
                f"(t = {sim_t:.3f} s), command timeouts {s.misses}, stale commands ignored "
                f"{s.stale}")


def stats_line(pacer: Pacer, gate, sim, now: float, sim_t: float, lockstep: bool,
               rcl_failures: int = 0, efforts=None, in_process=None, requests: str = "") -> str:
    """The node's periodic stats line (``publish.stats_period_s``): pace and misses (or
    lockstep's throughput), command latency, base position (each robot's, named, with
    several), effort saturation and
    joint drift (``efforts``, a :class:`~wb_sim.ros.verdict.EffortWatch`: its period's
    figures, then a new period), contact solver, commands applied (or the calls of
    ``in_process``, a :class:`wb_sim.control.ControllerLoop`), middleware
    failures, the pacing policy, ``requests`` (the services' text, as is), rejected messages
    by topic and reason (``gate.rejected``: counted, not logged one by one; last)."""
    s = pacer.stats
    lat = ""
    p = s.latency_percentiles()
    if p is not None:
        lat = f", joint_states -> command applied p50 {p[0] * 1e3:.2f} ms p99 {p[1] * 1e3:.2f} ms"
    pace = pacer.lockstep_text(now, sim_t) if lockstep else pacer.pace_text(now, sim_t)
    base = ""
    parts = getattr(sim, "robots", ())
    if len(parts) > 1:  # several robots: each one's base, named (wb_sim_run judges each)
        for part in parts:
            if part.floating_base:
                x, y, z = sim.q[part.q_slice][:3].tolist()
                base += f", robot '{part.name}' base at ({x:.3f}, {y:.3f}, {z:.4f}) m"
    elif sim.robot.floating_base:
        x, y, z = sim.q[:3].tolist()
        base = f", base at ({x:.3f}, {y:.3f}, {z:.4f}) m"
    if efforts is not None:
        base += f", {efforts.period_text()}"
    solver = ""
    st = sim.contact.statistics()
    if "nonconverged" in st:
        solver = f", contact solver: {st['nonconverged']} of {st['solves']} solves not converged"
    rejected = ""
    if gate.rejected:
        rejected = ", rejected messages: " + ", ".join(
            f"{topic} {kind} {n}" for (topic, kind), n in sorted(gate.rejected.items()))
    if in_process is not None:  # a wb_sim.control.ControllerLoop: no commands over topics
        applied = f", in-process controller called {in_process.calls} times in all"
    else:
        applied = (f", valid commands {s.accepted}, new commands applied at {s.applied} of "
                   f"{s.steps} steps")
    if gate.dropped:
        applied += (f", commands lost (command.drop_probability) {gate.dropped} since the "
                    f"start or reset")
    if rcl_failures:
        applied += f", middleware call failures {rcl_failures} in all"
    if gate.lost:
        who = getattr(gate, "lost_robots", ())  # several robots: whose
        applied += ((f", the controller of robot {', '.join(who)} is lost" if who else
                     ", the controller is lost")
                    + " (no answer for sync.timeout_s): stepping without waiting")
    policy = "" if lockstep else f", pacing: {pacer.policy}"
    return f"{pace}{lat}{base}{solver}{applied}{policy}{requests}{rejected}"
