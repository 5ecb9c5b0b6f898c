"""Command timing: the modelled latency, jitter and loss of the commands at the node's
boundary, seeded, in plain Python (no rclpy).

Host timing (when a message happens to arrive) is an accident of the machine; this makes
it a parameter of the model, as ``joints.command_delay_steps`` is in the core:

* ``command.latency_steps`` n: a command accepted while the node is at step k becomes
  the active command at step k + n;
* ``command.jitter_steps`` J, ``command.jitter_distribution``: an extra delay j in
  0 .. J drawn per command (:data:`JITTER_DISTRIBUTIONS`); commands never overtake:
  a command's release step is ``max(k + n + j, the previous command's)``;
* ``command.drop_probability`` p: each accepted command is lost with probability p;
* ``command.timing_seed``: one numpy ``Generator`` (PCG64) draws, per accepted command
  and in this order, the drop's uniform number, then the jitter's, both always (so the
  jitter of the i-th command does not depend on p, nor on which commands were lost).

The first command that is not lost acts at once, from the step it arrives until it is
released, as the core's ``joints.command_delay_steps`` fills its pipe with the first
torques given (:class:`wb_sim.Simulator`): a run of the node with ``command.latency_steps``
n and a controller sending efforts is the core's run with ``joints.command_delay_steps``
n, step for step.

The delay line is bounded by construction: pending commands have release steps in
``(now, now + n + J]``, and the commands of one release step are merged into one entry
(each command overwrites the whole target of the joints it names, so the merged entry is
the commands applied in order), hence at most ``n + J + 1`` entries, allocated once.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ..controllers import JointTargets
from .parameters import NODE_PARAMETER_BY_KEY

#: the laws of ``command.jitter_distribution``: a uniform number u in [0, 1) -> the extra
#: delay in 0 .. J steps (inverse distribution functions, so one draw per command)
JITTER_DISTRIBUTIONS = {
    # 0 .. J, each with probability 1 / (J + 1)
    "uniform": lambda u, J: int(u * (J + 1)),
    # P(j) = 2^-(j + 1) for j < J, 2^-J for j = J: P(floor(-log2(1 - u)) >= j) = 2^-j
    "geometric": lambda u, J: min(J, int(-math.log2(1.0 - u))),
}

#: the node's parameters this module reads, in the order of :class:`CommandTiming`'s arguments
KEYS = ("command.latency_steps", "command.jitter_steps", "command.jitter_distribution",
        "command.drop_probability", "command.timing_seed")


class CommandTiming:
    """The delay line of the node's command boundary (see the module's text).

    ``nj``: joints; ``dt_ns``: the physics step, ns. The other arguments are the
    parameters of :data:`KEYS`, each checked by its declaration (:class:`ConfigError`
    naming the key and its bound). The gate asks :meth:`admit` when a valid command
    arrives, writes it into the entry :meth:`entry` gives, and :meth:`pop` s the entries
    due (:attr:`next_release_ns` <= now) at each step, in order.
    """

    def __init__(self, nj: int, dt_ns: int, latency_steps: int = 0, jitter_steps: int = 0,
                 jitter_distribution: str = "uniform", drop_probability: float = 0.0,
                 timing_seed: int = 0):
        values = [NODE_PARAMETER_BY_KEY[k].coerce(v) for k, v in zip(
            KEYS, (latency_steps, jitter_steps, jitter_distribution, drop_probability,
                   timing_seed))]
        self.latency_steps, self.jitter_steps, distribution, self.drop_probability, \
            self.seed = values
        self.jitter_distribution = distribution
        self._jitter = JITTER_DISTRIBUTIONS[distribution]
        self.random = self.jitter_steps > 0 or self.drop_probability > 0  # draws at all
        self.dt_ns = int(dt_ns)
        self.capacity = self.latency_steps + self.jitter_steps + 1
        # the entries, allocated once: each a command (joint targets) and the joints it sets
        self._targets = [JointTargets(nj, 0.0, 0.0) for _ in range(self.capacity)]
        self._written = np.zeros((self.capacity, nj), dtype=bool)
        self._release_ns = [0] * self.capacity
        self._stamp_ns: list = [None] * self.capacity
        self.clear()

    @classmethod
    def from_cfg(cls, cfg: Mapping, nj: int, dt_ns: int | None) -> "CommandTiming | None":
        """The delay line of the node's parameters ``cfg`` (a key it lacks: its default),
        or None when latency, jitter and drops are all 0: commands then act on arrival,
        the gate's path without a delay line, as before it existed."""
        values = []
        for k in KEYS:
            try:
                values.append(cfg[k])
            except KeyError:
                values.append(NODE_PARAMETER_BY_KEY[k].default_value)
        for k, v in zip(KEYS, values):
            NODE_PARAMETER_BY_KEY[k].coerce(v)  # a bad value: its ConfigError, even if unused
        latency, jitter, _, drop, _ = values
        if latency == 0 and jitter == 0 and drop == 0:
            return None
        if dt_ns is None or dt_ns <= 0:
            raise ValueError("command timing needs the physics step: CommandGate(dt_ns=...)")
        return cls(nj, dt_ns, *values)

    def describe(self) -> str:
        """One line for the log: the modelled timing."""
        jitter = (f" + {self.jitter_distribution} jitter 0..{self.jitter_steps}"
                  if self.jitter_steps else "")
        drops = f", lost with probability {self.drop_probability:g}" if \
            self.drop_probability else ""
        seed = f" (command.timing_seed {self.seed})" if self.random else ""
        return (f"command timing: commands become active {self.latency_steps}{jitter} "
                f"steps after they arrive, in order{drops}{seed}")

    def clear(self) -> None:
        """Empty the line and re-seed the generator (a reset: the run repeats)."""
        self.rng = np.random.Generator(np.random.PCG64(self.seed))
        self._head = 0
        self.count = 0  #: pending entries
        self.next_release_ns = 0  #: release time of the oldest pending entry (if any)
        self._last_release_ns = -1  # of the newest command admitted: none overtakes it
        self.started = False  #: a command has acted (the first one acts at once)
        self.dropped = 0  #: commands lost since the last clear

    def shift(self, shift_ns: int) -> None:
        """Move every time of the line on by ``shift_ns`` (a node snapshot restored later
        on the node's clock, which never goes back: each pending command keeps its delay)."""
        self._release_ns = [r + shift_ns for r in self._release_ns]
        self._stamp_ns = [None if s is None else s + shift_ns for s in self._stamp_ns]
        if self.count:
            self.next_release_ns += shift_ns
        if self._last_release_ns >= 0:
            self._last_release_ns += shift_ns

    def admit(self, now_ns: int) -> int | None:
        """A valid command arrives at ``now_ns``: the time (ns) at which it becomes the
        active command, or None if it is lost. Draws two numbers whenever jitter or
        drops are on (the drop's, then the jitter's), none otherwise."""
        delay = self.latency_steps
        if self.random:
            rng = self.rng
            lost = rng.random() < self.drop_probability
            u = rng.random()
            if lost:
                self.dropped += 1
                return None
            if self.jitter_steps:
                delay += self._jitter(u, self.jitter_steps)
        release = now_ns + delay * self.dt_ns
        if release < self._last_release_ns:
            release = self._last_release_ns  # no overtaking: in the order they came
        self._last_release_ns = release
        return release

    def entry(self, release_ns: int, stamp_ns: int | None) -> tuple[JointTargets, np.ndarray]:
        """The entry released at ``release_ns`` to write a command into: its targets and
        its mask of joints set (the command writes both). A command released at the same
        step as the newest pending one joins it (written after it)."""
        cap = self.capacity
        if self.count and (release_ns == self._release_ns[(self._head + self.count - 1) % cap]
                           or self.count == cap):
            # count == cap cannot happen while torques are asked at every step (see the
            # module's text); were steps skipped, a command would join the newest entry
            i = (self._head + self.count - 1) % cap
        else:
            i = (self._head + self.count) % cap
            self._written[i] = False
            self._release_ns[i] = release_ns
            if self.count == 0:
                self.next_release_ns = release_ns
            self.count += 1
        self._stamp_ns[i] = stamp_ns
        return self._targets[i], self._written[i]

    def pop(self) -> tuple[JointTargets, np.ndarray, int | None]:
        """The oldest pending entry (targets, joints set, stamp of its newest command),
        taken off the line; call only while :attr:`count` > 0."""
        i = self._head
        self._head = (i + 1) % self.capacity
        self.count -= 1
        if self.count:
            self.next_release_ns = self._release_ns[self._head]
        return self._targets[i], self._written[i], self._stamp_ns[i]
