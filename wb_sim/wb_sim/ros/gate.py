"""The command gate: what the node does with incoming commands, in plain Python (no rclpy).

* validation: ``joint_commands`` by joint name (its ``position``, ``velocity``
  and ``effort`` fields select each joint's mode), ``effort_commands`` in
  ``command.joint_names`` order, pushes on ``external_wrench``; a rejected
  message is counted per topic and reason, its reason logged at most once per
  ``REJECT_LOG_PERIOD_S`` per topic and reason;
* the newest valid command is applied, as a drive runs it, at every physics step
  from the current state: ``tau = kp (q_ref - q) + kd (v_ref - v) + tau_ff``
  (:class:`wb_sim.controllers.JointTargets`; gains ``command.kp``, ``command.kd``);
  the watchdog (``command.timeout_s``, ``command.timeout_action``) takes over when
  no command has become active for that long;
* command timing (:mod:`.timing`, ``command.latency_steps``, ``command.jitter_steps``,
  ``command.drop_probability``, ``command.timing_seed``): a valid command becomes the
  active one after its modelled delay, or is lost; all 0 (the default): at once, the
  path without a delay line;
* lockstep: a joint state waits for its command (with ``sync.match_stamp``, one
  stamped with that state's stamp); :meth:`CommandGate.lockstep_step` says what
  the waiting loop does next (poll, block, send the state again, give up).

Times: simulated time in ns (``now_ns``), wall time in s (``wall``), both passed
in, so the tests drive the gate with a fake clock. The caller holds the node's
lock around every call. ``log(level, text, topic)`` receives what the node logs
(``topic`` names the child logger of a rejection, else None).
"""

from __future__ import annotations

import collections
import copy
import math
from typing import Callable, Mapping, Sequence

import numpy as np

from ..controllers import JointTargets
from ..errors import ConfigError
from .pacer import PacerStats
from .timing import CommandTiming

NS_PER_S = 1_000_000_000

#: a rejected message's reason is logged at most this often per topic and kind, s; the
#: others are only counted (the stats line reports the counts)
REJECT_LOG_PERIOD_S = 1.0
#: at most this many pushes act at once; more are refused (each costs a Jacobian a step)
MAX_PUSHES = 100
#: lockstep: while no command comes, the state is published again this often (wall), s
RESEND_S = 0.5
#: states: while the controller is lost (lockstep), an answer to any of the last this many
#: published joint states is taken (0.2 s at 1 kHz and real time); an older one counts as stale
LOST_ANSWER_WINDOW = 200
#: lockstep: poll for the command this long before blocking in a wait set, s
BUSY_POLL_S = 2.0e-3
#: lockstep: longest single wait, so that stop, pause and reset are noticed, s
WAIT_SLICE_S = 0.05

TOPICS = ("joint_commands", "effort_commands", "external_wrench")
#: the command fields of a sensor_msgs/JointState, in the order of its message
FIELDS = ("position", "velocity", "effort")
_PLURAL = {"position": "positions", "velocity": "velocities", "effort": "efforts"}


class CommandRejected(ValueError):
    """An incoming command that is not applied; the message says why, ``kind``
    is a short reason for counting rejections (e.g. 'non-finite')."""

    def __init__(self, message: str, kind: str = "invalid"):
        super().__init__(message)
        self.kind = kind


def parse_joint_command_arrays(names: Sequence[str], effort, index: Mapping[str, int]
                               ) -> tuple[np.ndarray, np.ndarray]:
    """Validate the names and efforts of a joint command: the joint indices (in the
    simulator's order) and their efforts. Any subset of joints is allowed; an
    empty, inconsistent, duplicated, unknown-name or non-finite command raises
    :class:`CommandRejected`."""
    if len(names) == 0:
        raise CommandRejected("no joint names", "no names")
    if len(effort) != len(names):
        raise CommandRejected(f"{len(names)} names but {len(effort)} efforts", "length mismatch")
    try:
        idx = np.fromiter((index[n] for n in names), dtype=np.intp, count=len(names))
    except KeyError as e:
        raise CommandRejected(f"unknown joint {e.args[0]!r}", "unknown joint") from None
    if len(set(names)) != len(names):
        raise CommandRejected("duplicated joint names", "duplicated names")
    values = np.asarray(effort, dtype=float)
    check_finite(values, names)
    return idx, values


def parse_effort_array(data, names: Sequence[str]) -> np.ndarray:
    """Validate efforts given in ``names`` order (``effort_commands``)."""
    values = np.asarray(data, dtype=float)
    if values.shape != (len(names),):
        raise CommandRejected(f"expected {len(names)} efforts (command.joint_names), "
                              f"got {values.size}", "wrong length")
    check_finite(values, names)
    return values


def check_finite(values: np.ndarray, names: Sequence[str], what: str = "effort") -> None:
    """CommandRejected naming the joints of non-finite ``values`` (or too large ones)."""
    with np.errstate(over="ignore"):  # 1e300 from the network: refused, not a warning on stderr
        square = float(values.dot(values))
    if not math.isfinite(square):
        bad = [names[i] for i in np.flatnonzero(~np.isfinite(values))]
        raise CommandRejected(f"non-finite {what} for {', '.join(bad)}" if bad
                              else f"{_PLURAL[what]} too large", "non-finite")


def write_command(t: JointTargets, idx: np.ndarray, fields: list) -> np.ndarray:
    """Write a parsed ``joint_commands`` message (:func:`parse_joint_command`) into the
    targets ``t``: the named joints take the fields given (those not given: 0, and that
    interface off), each joint's whole target, so that commands written one after the
    other are each joint's last; with NaN entries (``command.nan_is_unset``) a joint
    takes the fields it was given, one with NaN only is left as it was. Returns the
    joints written."""
    if all(f is None or f[1] is _ALL_GIVEN.get(len(f[1])) or f[1].all() for f in fields):
        t.set(idx, *(None if f is None else f[0] for f in fields))
        return idx
    masks = [np.zeros(len(idx), dtype=bool) if f is None else f[1] for f in fields]
    named = masks[0] | masks[1] | masks[2]  # a joint with NaN only keeps its command
    j = idx[named]
    for f, m, ref, has in zip(fields, masks, (t.q_ref, t.v_ref, t.tau_ff),
                              (t.has_position, t.has_velocity, t.has_effort)):
        m = m[named]
        ref[j] = 0.0 if f is None else np.where(m, f[0][named], 0.0)
        has[j] = m
    t.modes_changed()
    return j


def joint_indices(names: Sequence[str], index: Mapping[str, int]) -> np.ndarray:
    """The simulator's indices of the joints ``names``; CommandRejected for an empty
    list, an unknown or a duplicated name."""
    n = len(names)
    if n == 0:
        raise CommandRejected("no joint names", "no names")
    try:
        idx = np.fromiter((index[x] for x in names), dtype=np.intp, count=n)
    except KeyError as e:
        raise CommandRejected(f"unknown joint {e.args[0]!r}", "unknown joint") from None
    if len(set(names)) != n:
        raise CommandRejected("duplicated joint names", "duplicated names")
    idx.flags.writeable = False  # the same joints for as long as it is reused (JointTargets.set)
    return idx


def parse_joint_command(names: Sequence[str], position, velocity, effort,
                        index: Mapping[str, int], nan_is_unset: bool = False,
                        idx: np.ndarray | None = None) -> tuple[np.ndarray, list]:
    """Validate a ``joint_commands`` message (ros2_control's convention: a field
    given for the joints = that command interface): the joint indices (simulator
    order) and, per field of :data:`FIELDS`, ``None`` (not given) or
    ``(values, given)``, ``given`` a boolean mask over the joints (all True unless
    ``nan_is_unset``, where a NaN entry means that interface of that joint is not
    commanded). Each field must be empty or as long as ``name``, at least one
    given; an empty, duplicated, unknown-name or non-finite (+-inf always; NaN
    unless ``nan_is_unset``) command raises :class:`CommandRejected`, as does one
    whose every entry is NaN. ``idx``: ``joint_indices(names, index)`` when the
    caller already has it (the same names as its last command)."""
    n = len(names)
    if n == 0:
        raise CommandRejected("no joint names", "no names")
    arrays = []
    for what, data in zip(FIELDS, (position, velocity, effort)):
        k = len(data)
        if k == 0:
            arrays.append(None)
        elif k != n:
            raise CommandRejected(f"{n} names but {k} {_PLURAL[what]}", "length mismatch")
        else:
            arrays.append(np.asarray(data, dtype=float))
    if all(a is None for a in arrays):
        raise CommandRejected(f"{n} names but no position, velocity or effort", "no values")
    if idx is None:
        idx = joint_indices(names, index)
    fields: list = []
    if not nan_is_unset:  # the common case, per command: one finiteness test per field
        with np.errstate(over="ignore"):
            for what, a in zip(FIELDS, arrays):
                if a is None:
                    fields.append(None)
                    continue
                if not math.isfinite(float(a.dot(a))):
                    check_finite(a, names, what)  # raises, naming the joints
                fields.append((a, _all_given(n)))
        return idx, fields
    any_given = False
    for what, a in zip(FIELDS, arrays):
        if a is None:
            fields.append(None)
            continue
        given = ~np.isnan(a)
        check_finite(np.where(given, a, 0.0), names, what)
        any_given = any_given or bool(given.any())
        fields.append((a, given))
    if not any_given:
        raise CommandRejected("every entry is NaN: no interface of any joint is commanded "
                              "(command.nan_is_unset)", "no command")
    return idx, fields


_ALL_GIVEN: dict[int, np.ndarray] = {}


def _all_given(n: int) -> np.ndarray:
    """A read-only mask of ``n`` Trues (one per size, shared: masks are only read)."""
    mask = _ALL_GIVEN.get(n)
    if mask is None:
        mask = np.ones(n, dtype=bool)
        mask.flags.writeable = False
        _ALL_GIVEN[n] = mask
    return mask


Log = Callable[[str, str, "str | None"], None]


def _short(values: np.ndarray) -> str:
    """Numbers to 3 significant digits, comma-separated, for the log."""
    return ", ".join(f"{x:.3g}" for x in values)


class CommandGate:
    """Validation, rejection counting, watchdog, stamp matching and lockstep of the commands.

    ``joint_names``: the simulator's joints (its order); ``command_joint_names``:
    the order of ``effort_commands`` and of per-joint gains; ``cfg``: the node's
    parameters (read live: ``command.timeout_s``, ``command.timeout_action``,
    ``command.timeout_damping``, ``command.kp``, ``command.kd``,
    ``command.nan_is_unset``, ``sync.timeout_s``, ``topics.*``; a new one is
    assigned whole to :attr:`cfg`; the command timing's ``command.latency_steps``,
    ``command.jitter_steps``, ``command.jitter_distribution``,
    ``command.drop_probability`` and ``command.timing_seed`` are read once, here);
    ``stats``: where accepted / applied / stale commands, latencies and lockstep
    timeouts are counted; ``dt_ns``: the physics step, ns (needed by command timing);
    ``derived_gains``: ``(kp, kd)`` per joint (simulator order) used where ``command.kp`` /
    ``command.kd`` are not given (``[]``), on the joints whose command carries no effort
    (:func:`wb_sim.controllers.simulator_drive_gains`, the node's); None: 0 there.
    """

    def __init__(self, joint_names: Sequence[str], command_joint_names: Sequence[str],
                 cfg: Mapping, stats: PacerStats, log: Log, lockstep: bool = False,
                 match_stamp: bool = False, wait_for_first: bool = False,
                 frame_names: Sequence[str] = (), dt_ns: int | None = None,
                 derived_gains: tuple[np.ndarray, np.ndarray] | None = None):
        self.joint_index = {n: i for i, n in enumerate(joint_names)}
        self._names: Sequence[str] | None = None  # the last command's names, their indices
        self._names_idx: np.ndarray | None = None
        self.derived_gains = None if derived_gains is None else tuple(
            np.broadcast_to(np.asarray(g, dtype=float), (len(joint_names),)).copy()
            for g in derived_gains)
        self._derived_told = False  # the derived gains in use: said once
        self.command_joint_names = list(command_joint_names)
        self.command_idx = np.array([self.joint_index[n] for n in command_joint_names],
                                    dtype=np.intp)
        self.command_idx.flags.writeable = False
        self.cfg = cfg  # checks the gains against the joints (ConfigError)
        self.stats = stats
        self.log = log
        self.lockstep = lockstep
        self.match_stamp = lockstep and match_stamp
        self.waiting_for_first = wait_for_first and not lockstep  # lockstep always waits
        self.frame_names = frozenset(frame_names)
        #: rejected messages since the last stats line: (topic, kind) -> count
        self.rejected: collections.Counter = collections.Counter()
        self.rejected_total = 0
        self._reject_logged: dict[tuple[str, str], float] = {}  # -> wall time last logged
        self.pub_wall: dict[int, float] = {}  # joint_states stamp (ns) -> wall time published
        self.state_stamp_ns = 0  # stamp of the last published joint state
        self.need_command = False  # lockstep: the last joint state has no answer yet
        self.losses = 0  # how often the controller was lost since the start (lockstep)
        self._idle_told = False  # position / velocity targets without gains: said once
        self._servo_gains = None  # the gains self._servo was found with
        self._servo_modes = (None, -1)  # ... and the targets and their modes (JointTargets.modes)
        self._drive_gains = None  # ... and the (kp, kd) the drives then apply
        #: the delay line of the command timing; None: commands act on arrival
        self.timing = CommandTiming.from_cfg(cfg, self.nj, dt_ns)
        if self.timing is not None:
            self.log("info", self.timing.describe(), None)
        self.clear()

    @property
    def nj(self) -> int:
        """Joints of the simulator."""
        return len(self.joint_index)

    @property
    def have_cmd(self) -> bool:
        """A valid command was received (since the last :meth:`clear`)."""
        return self.cmd_seq > 0

    @property
    def cfg(self):
        return self._cfg

    @cfg.setter
    def cfg(self, value) -> None:
        """A new configuration (the node's live parameters), taken whole: its gains
        are checked against the joints first (ConfigError, nothing changed)."""
        gains = self.gains(value)
        self._cfg = value
        #: command.kp / command.kd not given: the derived gains, on joints without an effort
        self._unset = (np.size(value["command.kp"]) == 0, np.size(value["command.kd"]) == 0)
        self._gains_zero = not (gains[0].any() or gains[1].any())
        # one tuple: a step reads the kp and kd of one configuration, and sees by its
        # identity that the servoed joints must be found again (_drive)
        self._gains = gains

    def gains(self, cfg) -> tuple[np.ndarray, np.ndarray]:
        """The per-joint ``(kp, kd)`` of configuration ``cfg``: ``command.kp`` and
        ``command.kd`` are one value (every joint) or one per joint of
        ``command.joint_names`` (the others: 0), or not given (``[]``: the derived gains,
        0 without them); ConfigError otherwise."""
        out = []
        m = len(self.command_joint_names)
        for k, key in enumerate(("command.kp", "command.kd")):
            g = np.asarray(cfg[key], dtype=float).reshape(-1)
            if g.size == 0:
                vec = (np.zeros(self.nj) if self.derived_gains is None
                       else self.derived_gains[k].copy())
            elif g.size == 1:
                vec = np.full(self.nj, g[0])
            elif g.size == m:
                vec = np.zeros(self.nj)
                vec[self.command_idx] = g
            else:
                raise ConfigError(
                    f"parameter '{key}': expected one value (for every joint) or {m} (one per "
                    f"joint of command.joint_names, in its order: "
                    f"{', '.join(self.command_joint_names)}), got {g.size} (or [] for the "
                    f"gains derived from the robot)")
            out.append(vec)
        return out[0], out[1]

    @property
    def tau(self) -> np.ndarray:
        """The commanded efforts (feed-forward torques), simulator order."""
        return self.targets.tau_ff

    def clear(self) -> None:
        """Forget the commands (a reset); the command timing's pending ones too, and its
        generator is seeded again, so that a run after a reset repeats."""
        self.targets = JointTargets(self.nj, 0.0, 0.0)  # gains: self._gains, at each step
        self._servo = False  # no joint has a position or velocity target
        self.tripped = False
        self.last_cmd_ns = 0  # when the last command became active (the watchdog's origin)
        self.cmd_stamp_ns: int | None = None  # stamp of the active command, for the latency
        self.cmd_seq = 0  # valid commands received
        self.active_seq = 0  # commands that became active (without timing: = cmd_seq)
        self.applied_seq = 0  # active_seq at the last step
        #: lockstep: the controller gave no answer for sync.timeout_s: the physics steps on
        #: without waiting until it answers a published state again (a reset waits anew)
        self.lost = False
        if self.timing is not None:
            self.timing.clear()

    #: what :meth:`snapshot` keeps: the command acting and the watchdog's state
    _SNAPSHOT_FIELDS = ("targets", "_servo", "tripped", "last_cmd_ns", "cmd_stamp_ns",
                        "cmd_seq", "active_seq", "applied_seq", "lost", "timing")
    #: of those, the times on the node's clock, shifted by :meth:`restore`
    _SNAPSHOT_TIMES = ("last_cmd_ns", "cmd_stamp_ns")

    def snapshot(self) -> dict:
        """A copy of what decides the torques of the coming steps: the command acting
        (its targets and modes), the watchdog's origin and state, the command timing's
        delay line and generator (a node snapshot, ``~/save_snapshot``)."""
        return {k: copy.deepcopy(getattr(self, k)) for k in self._SNAPSHOT_FIELDS}

    def restore(self, snap: dict, shift_ns: int) -> None:
        """Back to :meth:`snapshot`'s ``snap`` (which stays usable), its node-clock times
        moved on by ``shift_ns`` (the clock never goes back: a restored command is as old,
        in simulated time, as it was when saved, so the watchdog trips at the same step)."""
        for k in self._SNAPSHOT_FIELDS:
            value = copy.deepcopy(snap[k])
            if k in self._SNAPSHOT_TIMES and value is not None:
                value += shift_ns
            setattr(self, k, value)
        if self.timing is not None:
            self.timing.shift(shift_ns)
        self._servo_gains = None  # found again at the next step

    @property
    def dropped(self) -> int:
        """Commands lost by ``command.drop_probability`` since the last :meth:`clear`."""
        return 0 if self.timing is None else self.timing.dropped

    # ---------------------------------------------------------------- state out

    def state_published(self, t_ns: int, wall: float) -> None:
        """A joint state stamped ``t_ns`` went out at ``wall``: in lockstep it waits
        for its command; its wall time is kept for the latency figure."""
        self.pub_wall[t_ns] = wall
        if len(self.pub_wall) > LOST_ANSWER_WINDOW:  # the newest (dicts keep insertion order)
            del self.pub_wall[next(iter(self.pub_wall))]
        self.state_stamp_ns = t_ns
        self.need_command = self.lockstep and not self.lost

    # ---------------------------------------------------------------- commands in

    def joint_command(self, stamp_ns: int, names: Sequence[str], effort, now_ns: int,
                      wall: float, position=(), velocity=()) -> bool:
        """A ``joint_commands`` message (stamp, names and its ``effort``, ``position``
        and ``velocity`` fields, each empty or one entry per name); True if applied.
        The named joints take the fields given as their command (efforts alone:
        those torques, as before modes existed); the others keep theirs."""
        if self.match_stamp and stamp_ns != self.state_stamp_ns and \
                not (self.lost and stamp_ns in self.pub_wall):
            self.stats.stale += 1  # an answer to an older state (or no stamp at all)
            return False
        try:
            # the names of the last command again (a reader that decodes them only when
            # they change hands the same list): their indices are known
            idx = self._names_idx if names is self._names else None
            idx, fields = parse_joint_command(names, position, velocity, effort,
                                              self.joint_index, self._cfg["command.nan_is_unset"],
                                              idx)
            self._names, self._names_idx = names, idx
        except CommandRejected as e:
            self.reject("joint_commands", e, wall)
            return False
        if self.timing is not None:
            self._accept(stamp_ns, now_ns, timed=True)
            self._delay(stamp_ns, now_ns, write_command, idx, fields)
            return True
        write_command(self.targets, idx, fields)  # a change of modes: targets.modes
        self._accept(stamp_ns, now_ns)
        return True

    def _write_efforts(self, t: JointTargets, idx: np.ndarray, values: np.ndarray
                       ) -> np.ndarray:
        """Efforts of ``effort_commands`` into ``t`` (their joints leave position and
        velocity mode); the joints written."""
        t.set(idx, effort=values)
        return idx

    def effort_command(self, data, now_ns: int, wall: float) -> bool:
        """An ``effort_commands`` message's data; True if applied."""
        if self.match_stamp:
            self.reject("effort_commands", CommandRejected(
                "effort_commands carry no stamp, and sync.match_stamp is true: send "
                "joint_commands stamped with the joint state's stamp, or set sync.match_stamp "
                "false", "no stamp"), wall)
            return False
        try:
            values = parse_effort_array(data, self.command_joint_names)
        except CommandRejected as e:
            self.reject("effort_commands", e, wall)
            return False
        if self.timing is not None:
            self._accept(None, now_ns, timed=True)
            self._delay(None, now_ns, self._write_efforts, self.command_idx, values)
            return True
        self.targets.set(self.command_idx, effort=values)  # a change of modes: targets.modes
        self._accept(None, now_ns)
        return True

    def _delay(self, stamp_ns: int | None, now_ns: int, write, idx: np.ndarray, data) -> None:
        """Command timing: a valid command (``write(targets, idx, data)`` writes it) into
        the delay line, or lost. The first one also acts at once, until it is released
        (the core's joints.command_delay_steps fills its pipe with the first torques);
        that is no release: the watchdog starts counting at the first one."""
        timing = self.timing
        release = timing.admit(now_ns)
        if release is None:
            return  # lost (command.drop_probability): counted in timing.dropped
        if not timing.started:
            timing.started = True
            write(self.targets, idx, data)
        targets, written = timing.entry(release, stamp_ns)
        written[write(targets, idx, data)] = True

    def _release(self, now_ns: int) -> None:
        """Command timing: the commands due at ``now_ns`` become the active ones, in order."""
        timing, t = self.timing, self.targets
        while timing.count and timing.next_release_ns <= now_ns:
            src, written, stamp_ns = timing.pop()
            for a, b in ((t.q_ref, src.q_ref), (t.v_ref, src.v_ref), (t.tau_ff, src.tau_ff),
                         (t.has_position, src.has_position),
                         (t.has_velocity, src.has_velocity),
                         (t.has_effort, src.has_effort)):
                np.copyto(a, b, where=written)
            t.modes_changed()  # the servoed joints may have changed
            self._activate(stamp_ns, now_ns)

    def check_push(self, link: str, n_acting: int, model_name: str) -> None:
        """CommandRejected unless a push on ``link`` may act (``n_acting`` act already)."""
        if link not in self.frame_names:  # the simulator's ModelError would cost more
            raise CommandRejected(f"frame '{link}' is not in the model (a link or frame "
                                  f"of {model_name})", "unknown link")
        if n_acting >= MAX_PUSHES:
            raise CommandRejected(f"{MAX_PUSHES} pushes already act", "too many pushes")

    def reject(self, topic: str, why: Exception, wall: float) -> None:
        """Count a rejected message by topic and reason; log the reason at most once
        per REJECT_LOG_PERIOD_S per topic and reason (rclpy's throttled logger
        cost ~0.3 ms a call even when throttled: a flood of rejects stalled the
        loop). The stats line reports the counts."""
        key = (topic, getattr(why, "kind", "invalid"))
        self.rejected[key] += 1
        self.rejected_total += 1
        if wall - self._reject_logged.get(key, -math.inf) < REJECT_LOG_PERIOD_S:
            return
        self._reject_logged[key] = wall
        if topic == "external_wrench":
            text = f"rejected a wrench on '{self.cfg['topics.external_wrench']}': {why}"
        else:
            text = (f"rejected a command on '{self.cfg['topics.' + topic]}': {why}; keeping the "
                    f"last valid torques")
        self.log("warning", text, topic)

    def _accept(self, stamp_ns: int | None, now_ns: int, timed: bool = False) -> None:
        """A valid command was received (it answers the joint state, counts, starts) and,
        unless ``timed`` (command timing: its release will), becomes the active one."""
        self.cmd_seq += 1
        self.stats.accepted += 1
        self.need_command = False
        if self.lost:  # it answers a published state again: wait for it from the next one
            self.lost = False
            self.log("info", "the controller answers again: lockstep resumes", None)
        if self.lockstep and self.cmd_seq == 1:
            self.log("info", "first command received: the simulation starts", None)
        if self.waiting_for_first:
            self.waiting_for_first = False
            self.log("info", "first command received: the simulation starts", None)
        if not timed:  # _activate's, inline: the path without command timing, per command
            self.last_cmd_ns = now_ns
            self.cmd_stamp_ns = stamp_ns
            self.active_seq += 1
            if self.tripped:
                self._untrip()

    def _activate(self, stamp_ns: int | None, now_ns: int) -> None:
        """A command became the active one at ``now_ns``: the watchdog counts from here."""
        self.last_cmd_ns = now_ns
        self.cmd_stamp_ns = stamp_ns
        self.active_seq += 1
        if self.tripped:
            self._untrip()

    def _untrip(self) -> None:
        self.tripped = False
        self.log("info", "commands are back; applying them", None)

    # ---------------------------------------------------------------- torques

    def torques(self, now_ns: int, joint_velocities: np.ndarray, wall: float,
                joint_positions: np.ndarray | None = None) -> np.ndarray:
        """The torques of the step at ``now_ns`` (a new array): the last valid command
        evaluated at the current joint positions and velocities (needed when a joint
        has a position target), or the watchdog's. With command timing, the commands due
        at ``now_ns`` become active first."""
        timing = self.timing
        if timing is not None and timing.count and timing.next_release_ns <= now_ns:
            self._release(now_ns)
        cfg = self.cfg
        timeout = cfg["command.timeout_s"]
        action = cfg["command.timeout_action"]
        if self.active_seq and timeout > 0 and not self.tripped and \
                now_ns - self.last_cmd_ns > timeout * NS_PER_S:
            self.tripped = True
            what = {"hold": "holding the last command", "zero": "torques set to zero",
                    "damp": f"joint damping ({cfg['command.timeout_damping']:g} N*m*s/rad)"}
            self.log("warning", f"no valid command for {timeout:g} s of simulated time: "
                                f"{what[action]} (command.timeout_action: {action})", None)
        if self.tripped and action != "hold":
            # forget them too: a later command for some joints must not bring back the others
            if self._servo is not False or self.targets.tau_ff.any():
                self.clear_targets()
            if action == "damp":
                return -cfg["command.timeout_damping"] * joint_velocities
            return np.zeros(self.nj)
        if self.active_seq != self.applied_seq:
            self.applied_seq = self.active_seq
            self.stats.applied += 1
            sent = self.pub_wall.get(self.cmd_stamp_ns) if self.cmd_stamp_ns else None
            if sent is not None:
                self.stats.add_latency(wall - sent)
        return self._drive(joint_positions, joint_velocities)

    def clear_targets(self) -> None:
        """Every joint back to no command (zero torque)."""
        self.targets = JointTargets(self.nj, 0.0, 0.0)
        self._servo = False

    def _drive(self, qj: np.ndarray | None, vj: np.ndarray) -> np.ndarray:
        """``tau = kp (q_ref - q) + kd (v_ref - v) + tau_ff`` of the latest command
        (efforts alone, or zero gains: the efforts as they are, bit for bit)."""
        t = self.targets
        gains = self._gains
        modes = self._servo_modes
        if self._servo_gains is not gains or modes[0] is not t \
                or modes[1] != t.modes:  # new gains, targets or modes
            self._servo_modes = (t, t.modes)
            kp, kd = gains
            if self._gains_zero:  # explicit zeros: nothing to find
                self._servo = False
            else:
                if self._unset[0] or self._unset[1]:
                    # derived gains drive a position or velocity interface; a joint commanded
                    # with an effort too is torque-controlled, its targets a reference (the
                    # example controller's drive_gains:=false commands): its efforts as given
                    kp = np.where(t.has_effort, 0.0, kp) if self._unset[0] else kp
                    kd = np.where(t.has_effort, 0.0, kd) if self._unset[1] else kd
                servo_p = t.has_position & (kp != 0)
                servo_v = (t.has_position | t.has_velocity) & (kd != 0)
                self._servo = bool(servo_p.any() or servo_v.any())
                if self._servo and not self._derived_told and self.derived_gains is not None \
                        and (self._unset[0] and servo_p.any() or self._unset[1] and servo_v.any()):
                    self._tell_derived()
            self._servo_gains = gains
            self._drive_gains = (kp, kd)
            if not self._idle_told:
                self._tell_idle(kp, kd)
        if not self._servo:
            return t.tau_ff.copy()
        if qj is None:
            raise ValueError("CommandGate.torques needs the joint positions: a joint has a "
                             "position target")
        t.kp, t.kd = self._drive_gains
        return t.torques(qj, vj)

    def _tell_derived(self) -> None:
        """Say once which gains drive position and velocity commands where the configuration
        gives none."""
        self._derived_told = True
        unset = " / ".join(k for k, u in zip(("command.kp", "command.kd"), self._unset) if u)
        kp, kd = self.gains(self._cfg)
        self.log("info", f"position commands use derived gains kp=[{_short(kp)}] N*m/rad, "
                         f"kd=[{_short(kd)}] N*m*s/rad (joints {', '.join(self.joint_index)}; "
                         f"each joint's reflected inertia at the initial pose, critically "
                         f"damped, 2 pi x physics rate / 20 rad/s, lower where coupled joints "
                         f"need it) ({unset} unset); set them to "
                         f"override (a joint whose command carries an effort takes that "
                         f"effort alone)", None)

    def _tell_idle(self, kp: np.ndarray, kd: np.ndarray) -> None:
        """Say once that position or velocity targets act on no joint without gains: at
        INFO where an effort comes with them (the example controller sends its reference
        beside its efforts), as a WARNING where a joint then gets no torque at all (a
        position controller with the default gains 0: the robot goes limp)."""
        t = self.targets
        idle = (t.has_position & (kp == 0)) | (t.has_velocity & ~t.has_position & (kd == 0))
        if idle.any():
            self._idle_told = True
            names = [n for n, i in self.joint_index.items() if idle[i]]
            # an effort of 0.0 is an effort (the example controller's gravity feed-forward is
            # exactly 0 on some joints at the start): limp means no effort was given
            limp = [n for n, i in self.joint_index.items() if idle[i] and not t.has_effort[i]]
            listed = f"{', '.join(names[:5])}{', ...' if len(names) > 5 else ''}"
            text = (f"joint_commands give position or velocity targets to {len(names)} "
                    f"joint(s) without gains (command.kp 0 for positions, command.kd 0 for "
                    f"velocities): {listed}; on those joints only the efforts act (set "
                    f"command.kp / command.kd for position or velocity control)")
            if limp:
                self.log("warning", f"{text}; {len(limp)} of them get no torque at all: "
                                    f"{', '.join(limp[:5])}{', ...' if len(limp) > 5 else ''}",
                         None)
            else:
                self.log("info", text, None)

    # ---------------------------------------------------------------- lockstep

    def lockstep_step(self, start: float, last_sent: float, now: float) -> tuple[str, float]:
        """What a lockstep wait that began at ``start`` (last state sent at
        ``last_sent``) does at ``now``: ``("timeout", 0)`` (a miss: counted, the last
        valid command is kept, the step goes on), ``("resend", 0)`` (publish the
        state again, for a controller that started late), ``("poll", 0)`` (the
        answer is due within a moment: take without blocking) or ``("block", s)``
        (block in a wait for at most ``s``)."""
        timeout = self.cfg["sync.timeout_s"] if self.have_cmd else 0.0  # a start takes long
        if timeout > 0 and now - start >= timeout:
            self.need_command = False
            self.stats.count_miss()
            self.lost = True
            self.losses += 1
            self.log("warning", f"lockstep: no answer from the controller for {timeout:g} s "
                                f"(sync.timeout_s, wall time): it counts as lost; the physics "
                                f"steps on without waiting, paced by real_time_factor, the "
                                f"watchdog acts in simulated time (command.timeout_s), and "
                                f"lockstep resumes with its next answer", None)
            return "timeout", 0.0
        if now - last_sent >= RESEND_S:
            return "resend", 0.0
        if now - start < BUSY_POLL_S:
            return "poll", 0.0
        left = [WAIT_SLICE_S, RESEND_S - (now - last_sent)]
        if timeout > 0:
            left.append(timeout - (now - start))
        return "block", min(left)

    def clear_rejected(self) -> None:
        """Forget the rejections counted since the last stats line."""
        self.rejected.clear()

    def resend_wanted(self) -> bool:
        """Resend the state? With stamp matching always; without it only until the first
        command, as a second answer to the same state would count for the next one."""
        return self.match_stamp or not self.have_cmd


class GateSet:
    """Several robots' command gates (one :class:`CommandGate` each, over its own joints,
    ``parts``: their :class:`wb_sim.multirobot.RobotPart`) seen by the node as one gate:
    lockstep waits until every robot's last joint state has its command (a robot whose
    controller is lost stops being waited for, alone, and its own watchdog acts on its
    own joints), the torques are each robot's, joined in the simulator's joint order."""

    def __init__(self, gates: Sequence[CommandGate], parts: Sequence, nj: int):
        self.gates = list(gates)
        self.parts = list(parts)
        self.nj = nj
        self.match_stamp = self.gates[0].match_stamp

    @property
    def need_command(self) -> bool:
        return any(g.need_command for g in self.gates)

    @property
    def waiting_for_first(self) -> bool:
        return any(g.waiting_for_first for g in self.gates)

    @waiting_for_first.setter
    def waiting_for_first(self, value: bool) -> None:
        for g in self.gates:
            g.waiting_for_first = value

    @property
    def have_cmd(self) -> bool:
        return all(g.have_cmd for g in self.gates)

    @property
    def state_stamp_ns(self) -> int:
        return self.gates[0].state_stamp_ns

    @property
    def lost(self) -> bool:
        return any(g.lost for g in self.gates)

    @property
    def losses(self) -> int:
        return sum(g.losses for g in self.gates)

    @property
    def lost_robots(self) -> list[str]:
        """The robots whose controller is lost (named in the stats line)."""
        return [f"'{p.name}'" for p, g in zip(self.parts, self.gates) if g.lost]

    @property
    def dropped(self) -> int:
        return sum(g.dropped for g in self.gates)

    @property
    def rejected(self) -> collections.Counter:
        """The rejections since the last stats line, each topic prefixed with its robot."""
        out: collections.Counter = collections.Counter()
        for p, g in zip(self.parts, self.gates):
            for (topic, kind), n in g.rejected.items():
                out[(f"{p.name}/{topic}", kind)] += n
        return out

    def clear_rejected(self) -> None:
        for g in self.gates:
            g.rejected.clear()

    def lockstep_step(self, start: float, last_sent: float, now: float) -> tuple[str, float]:
        """:meth:`CommandGate.lockstep_step` over the robots still waiting: a robot that
        times out is lost alone; the others are waited for on. The most urgent action of
        those still waiting (resend, poll, block for the shortest time); ``("timeout", 0)``
        when none waits any more."""
        actions = []
        for g in self.gates:
            if g.need_command:
                action = g.lockstep_step(start, last_sent, now)
                if action[0] != "timeout":
                    actions.append(action)
        if not actions:
            return "timeout", 0.0
        for kind in ("resend", "poll"):
            if any(a == kind for a, _ in actions):
                return kind, 0.0
        return "block", min(s for _, s in actions)

    def resend_wanted(self) -> bool:
        return any(g.need_command and g.resend_wanted() for g in self.gates)

    def clear(self) -> None:
        for g in self.gates:
            g.clear()

    def snapshot(self) -> dict:
        return {"gates": [g.snapshot() for g in self.gates]}

    def restore(self, snap: dict, shift_ns: int) -> None:
        for g, s in zip(self.gates, snap["gates"]):
            g.restore(s, shift_ns)

    def torques(self, now_ns: int, joint_velocities: np.ndarray, wall: float,
                joint_positions: np.ndarray | None = None) -> np.ndarray:
        """Each robot's gate's torques at its own joints' state, joined (a new array). The
        stats count a step with a new command (of any robot) once."""
        out = np.empty(self.nj)
        stats = self.gates[0].stats
        applied = stats.applied
        for p, g in zip(self.parts, self.gates):
            j = p.joints
            out[j] = g.torques(now_ns, joint_velocities[j], wall,
                               None if joint_positions is None else joint_positions[j])
        stats.applied = applied + (stats.applied > applied)
        return out
