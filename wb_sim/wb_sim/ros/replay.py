"""``wb_sim_replay BAG``: run a lockstep recording again, with the same controller
against a fresh simulator node, and check that the joint states are bit-identical.

The bag is one of ``wb_sim_record`` (or ``wb_sim_run --record``) of a run in
``sync.mode: lockstep``, where the closed loop is the same every run. It holds the
simulator's parameters (``/wb_sim_record/parameters``), the controllers'
(``/wb_sim_record/controller_parameters``) and the joint states. The replay starts
the simulator node with those parameters, stopping at the recording's last stamp
(``stop_after_s``), lets it run as fast as the loop closes (``real_time_factor``
0, ``sync.timeout_s`` 0, no viewer: none of them changes a step), starts the
controller, and compares each joint state of the fresh run with the recorded one
of the same stamp: name by name, position, velocity and effort, bit for bit.

The controller: by default the example controller (``wb_sim_pd_controller``) with
the parameters the bag recorded for it; or any command line after
``--controller`` (``--controller python my_ctrl.py --ros-args -p kp:=1001.0``),
which must publish on the recorded command topics, as the recorded one did.

Exit codes: 0 and ``replay identical: N joint states, bit for bit``; 1 when the
fresh run differs (the first differing stamp, joint, field and values, how many
states differ and the largest differences) or ends before the recording did;
2 when the replay cannot run: no bag, a bag without the simulator's parameters or
joint states, a recording not made in lockstep, a recording of a controller other
than the example one without ``--controller``, a node or controller that fails to
start; 130 on Ctrl-C.

The simulator and controller run on this process's ``ROS_DOMAIN_ID``: give the
replay a domain of its own (a second node named like the recorded one is refused).
From Python (pytest), :func:`replay` returns the verdict and
:func:`wb_sim.ros.testing.assert_replays` asserts it.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

#: what the recorder writes (wb_sim.ros.record; repeated here so that reading a bag
#: needs neither rclpy nor the recorder)
PARAMETERS_TOPIC = "/wb_sim_record/parameters"
CONTROLLERS_TOPIC = "/wb_sim_record/controller_parameters"
JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
#: the example controller's node name: the default controller replays it
EXAMPLE_CONTROLLER = "wb_sim_pd_controller"
#: the fields compared, in the message's order
FIELDS = ("position", "velocity", "effort")
#: their units, for the summary (revolute joints)
UNITS = {"position": "rad", "velocity": "rad/s", "effort": "N*m"}

# limits on what the user's bag may hold: a replay runs as long as the recording, in memory
#: joint states of a recording: 5 min at 1 kHz (about 0.3 GB in memory for 23 joints)
MAX_JOINT_STATES = 300_000
#: bytes of one parameter document (a URDF given inline as robot_description fits)
MAX_DOC_BYTES = 16 * 2**20
#: bytes of one joint state message (about 20,000 joints)
MAX_STATE_BYTES = 2**20
#: controller parameter documents of one recording
MAX_CONTROLLERS = 100

# wall-clock limits of the run
#: seconds for the node to publish its first joint state (URDF, discovery; loaded machine)
START_S = 90.0
#: seconds without a new joint state after which the replay is declared stuck
STALL_S = 30.0
#: seconds given to a node or controller to end after SIGINT, then SIGKILL
STOP_S = 10.0
#: seconds the states still on the way are waited for, once the node has ended
DRAIN_S = 2.0
#: default limit of the whole replay: START_S + this many wall seconds per simulated second
WALL_PER_SIM_S = 20.0
#: what the node logs when it diverged (then it pauses; wb_sim.ros.run waits for the same line)
DIVERGED = "simulation diverged and is paused"
#: lines of each process's log kept for the error messages
LOG_LINES = 20
#: parameters the replay sets on the fresh node: none of them changes a step in lockstep
#: (stop_after_s is the recording's end, added per run)
REPLAY_PARAMETERS = {"real_time_factor": 0.0, "sync.timeout_s": 0.0, "viewer": "none"}

_NODE_NAME = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")


class ReplayError(RuntimeError):
    """The replay cannot run: bad input, or a process that failed to start (exit 2)."""


# ----------------------------------------------------------------------------- the recording


class JointStates:
    """One joint state: joint names and the three fields (float64 arrays, each empty
    or one entry per name)."""

    __slots__ = ("names", "fields")

    def __init__(self, names: tuple[str, ...], fields: tuple[np.ndarray, ...]):
        self.names = names
        self.fields = fields

    @classmethod
    def from_message(cls, msg, names_cache: dict) -> "JointStates":
        names = tuple(msg.name)
        names = names_cache.setdefault(names, names)  # one tuple per distinct order
        return cls(names, tuple(np.asarray(getattr(msg, f), dtype=np.float64) for f in FIELDS))

    def same_bits(self, other: "JointStates") -> bool:
        return self.names == other.names and all(
            a.shape == b.shape and a.tobytes() == b.tobytes()
            for a, b in zip(self.fields, other.fields))


@dataclass
class Recording:
    """What a replay needs from a bag (:func:`read_recording`)."""

    path: Path
    #: the simulator node's fully qualified name, e.g. ``/wb_sim``
    node: str
    #: its parameters, as recorded
    parameters: dict[str, Any]
    #: the controllers' documents: ``{"node", "publishes", "parameters"}`` each
    controllers: list[dict[str, Any]]
    #: the joint states' topic
    topic: str
    #: joint states by stamp (ns); a state the node sent again is kept once
    states: dict[int, JointStates]
    #: messages of inputs a replay does not send (pushes), by topic
    other_inputs: dict[str, int] = field(default_factory=dict)

    @property
    def end_ns(self) -> int:
        return max(self.states)

    def example_controller(self) -> dict[str, Any]:
        """The example controller's document; :class:`ReplayError` if the recording had
        another controller (or none recorded)."""
        names = [c["node"] for c in self.controllers]
        if len(self.controllers) == 1 and names[0].rsplit("/", 1)[-1] == EXAMPLE_CONTROLLER:
            return self.controllers[0]
        if not names:
            why = (f"it names no controller (no '{CONTROLLERS_TOPIC}': recorded by a "
                   f"wb_sim_record that did not ask the controller's parameters, or the "
                   f"controller did not answer)")
        else:
            why = f"its controller was {', '.join(repr(n) for n in names)}"
        raise ReplayError(f"'{self.path}': {why}; give the controller's command line after "
                          f"--controller (e.g. --controller python -m wb_sim.ros.pd_controller "
                          f"--ros-args --params-file config/humanoid.yaml)")


def _stamp_ns(msg) -> int:
    return int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)


def _documents(reader, ts, topic: str, path: Path) -> list[dict[str, Any]]:
    """The JSON documents on ``topic`` (std_msgs/String) of an open bag."""
    conns = [c for c in reader.connections if c.topic == topic]
    if not conns:
        return []
    docs = []
    for c, _, raw in reader.messages(conns):
        if len(raw) > MAX_DOC_BYTES:
            raise ReplayError(f"'{path}': a message on '{topic}' has {len(raw)} bytes (at most "
                              f"{MAX_DOC_BYTES} read)")
        try:
            doc = json.loads(ts.deserialize_cdr(raw, c.msgtype).data)
        except Exception as e:  # noqa: BLE001 - rosbags and json raise several types
            raise ReplayError(f"'{path}': unreadable message on '{topic}': {e}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("parameters"), dict):
            raise ReplayError(f"'{path}': a message on '{topic}' is not a parameter "
                              f"document ({{\"node\": ..., \"parameters\": {{...}}}})")
        docs.append(doc)
        if len(docs) > MAX_CONTROLLERS:
            raise ReplayError(f"'{path}': more than {MAX_CONTROLLERS} messages on '{topic}'")
    return docs


def read_recording(path: str | Path) -> Recording:
    """The simulator's and controllers' parameters and the joint states of a bag of
    ``wb_sim_record``; :class:`ReplayError` saying what is missing or why the recording
    cannot be replayed (not lockstep, too long)."""
    try:
        from ..tools.bag import absolute, open_bag, typestore
        from ..tools.recording import RecordingError
    except ImportError as e:
        raise ReplayError(f"reading bags needs rosbags (pip install 'wb_sim[plot]'): {e}") \
            from None
    path = Path(path)
    try:
        ts = typestore()
        with open_bag(path) as reader:
            sims = _documents(reader, ts, PARAMETERS_TOPIC, path)
            if not sims:
                raise ReplayError(
                    f"'{path}' has no simulator parameters on '{PARAMETERS_TOPIC}' (a bag of "
                    f"'ros2 bag record' has none): record it with wb_sim_record or "
                    f"wb_sim_run --record")
            doc = sims[0]
            params = doc["parameters"]
            node = str(doc.get("node", "/wb_sim"))
            if not _NODE_NAME.match(node):
                raise ReplayError(f"'{path}': the recorded simulator node name '{node}' is not a "
                                  f"ROS node name")
            mode = params.get("sync.mode")
            if mode != "lockstep":
                raise ReplayError(
                    f"'{path}' was recorded with sync.mode '{mode}': only a lockstep run is "
                    f"reproducible (the node waits for the command answering each joint "
                    f"state); record with wb_sim_run --sync lockstep --record BAG, or "
                    f"sync.mode: lockstep")
            name = params.get("topics.joint_states", "joint_states")
            if not isinstance(name, str) or not name:
                raise ReplayError(f"'{path}': the recorded node published no joint states "
                                  f"(topics.joint_states '{name}')")
            topic = absolute(name)
            controllers = _documents(reader, ts, CONTROLLERS_TOPIC, path)
            for c in controllers:
                if not _NODE_NAME.match(str(c.get("node", ""))):
                    raise ReplayError(f"'{path}': a recorded controller node name "
                                      f"'{c.get('node')}' is not a ROS node name")
            conns = [c for c in reader.connections if c.topic == topic]
            count = sum(c.msgcount for c in conns)
            if count > MAX_JOINT_STATES:
                raise ReplayError(_too_long(path, count))
            states = _read_states(reader, ts, conns, topic, path) if conns else {}
            if not states:
                have = ", ".join(sorted({c.topic for c in reader.connections})) or "none"
                raise ReplayError(f"'{path}' has no joint states on '{topic}' (topics: {have})")
            # inputs the controller did not send: pushes, efforts of another publisher
            sent = {t for c in controllers for t in (c.get("publishes") or [])}
            other = {}
            for key in ("external_wrench", "effort_commands"):
                t = params.get(f"topics.{key}")
                if isinstance(t, str) and t and absolute(t) not in sent:
                    n = sum(c.msgcount for c in reader.connections if c.topic == absolute(t))
                    if n:
                        other[absolute(t)] = n
    except RecordingError as e:
        raise ReplayError(str(e)) from None
    return Recording(path, node, params, controllers, topic, states, other)


def _too_long(path: Path, count: int) -> str:
    return (f"'{path}' has {count} joint states; a replay compares at most "
            f"{MAX_JOINT_STATES} (5 min at 1 kHz): record a shorter run")


def _read_states(reader, ts, conns, topic: str, path: Path) -> dict[int, JointStates]:
    states: dict[int, JointStates] = {}
    names_cache: dict = {}
    n = 0
    for c, _, raw in reader.messages(conns):
        n += 1
        if n > MAX_JOINT_STATES:  # a file without counts in its metadata
            raise ReplayError(_too_long(path, n))
        if len(raw) > MAX_STATE_BYTES:
            raise ReplayError(f"'{path}': a joint state on '{topic}' has {len(raw)} bytes "
                              f"(at most {MAX_STATE_BYTES})")
        try:
            msg = ts.deserialize_cdr(raw, c.msgtype)
            stamp, js = _stamp_ns(msg), JointStates.from_message(msg, names_cache)
        except Exception as e:  # noqa: BLE001 - rosbags raises several types
            raise ReplayError(f"'{path}': cannot decode a joint state on '{topic}': {e}") \
                from None
        seen = states.get(stamp)
        if seen is None:
            states[stamp] = js
        elif not seen.same_bits(js):  # lockstep sends a waiting state again, unchanged
            raise ReplayError(f"'{path}': two different joint states are stamped "
                              f"t = {stamp / 1e9:.6f} s: not one lockstep run")
    return states


# ----------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class Difference:
    """One differing value: the stamp (ns), the joint, the field, both values."""

    stamp_ns: int
    joint: str
    field: str
    recorded: float
    replayed: float

    @property
    def size(self) -> float:
        """|replayed - recorded|; 0 between two NaNs, infinite between a NaN and a number."""
        nans = math.isnan(self.recorded) + math.isnan(self.replayed)
        return (0.0, float("inf"), 0.0)[nans] if nans else abs(self.replayed - self.recorded)

    def __str__(self) -> str:
        return (f"t = {self.stamp_ns / 1e9:.6f} s, joint '{self.joint}' {self.field}: recorded "
                f"{self.recorded!r}, replayed {self.replayed!r} (difference {self.size:.3g})")


class Comparison:
    """The recorded joint states against the replayed ones, stamp by stamp, bit for bit
    (plain Python: no rclpy)."""

    def __init__(self, recorded: dict[int, JointStates]):
        self.recorded = recorded
        self.end_ns = max(recorded)
        self.seen: set[int] = set()  # recorded stamps the replay sent
        self.last_ns: int | None = None  # the replay's newest stamp
        self.differing = 0
        self.first: Difference | None = None
        #: field -> the largest difference of that field
        self.largest: dict[str, Difference] = {}
        self.mismatch: str = ""  # joint names that do not match (first occurrence)

    def add(self, stamp_ns: int, js: JointStates) -> None:
        """One joint state of the replay (a state sent again, or one outside the
        recording, counts nothing)."""
        self.last_ns = stamp_ns if self.last_ns is None else max(self.last_ns, stamp_ns)
        rec = self.recorded.get(stamp_ns)
        if rec is None or stamp_ns in self.seen:
            return
        self.seen.add(stamp_ns)
        if rec.same_bits(js):
            return
        diffs, other_joints = self._differences(stamp_ns, rec, js)
        if not diffs and not other_joints:  # the same values, the names in another order
            return
        self.differing += 1
        if self.first is None and diffs:
            self.first = diffs[0]
        for d in diffs:
            best = self.largest.get(d.field)
            if best is None or d.size > best.size:
                self.largest[d.field] = d

    def _differences(self, stamp: int, rec: JointStates,
                     rep: JointStates) -> tuple[list[Difference], bool]:
        """Per field, its first differing joint and its largest difference, over the joints
        both name; and whether the replay names other joints than the recording."""
        index = {n: i for i, n in enumerate(rep.names)}
        missing = [n for n in rec.names if n not in index]
        other_joints = bool(missing) or len(rep.names) != len(rec.names)
        if other_joints:
            extra = [n for n in rep.names if n not in set(rec.names)]
            if not self.mismatch:
                self.mismatch = (f"at t = {stamp / 1e9:.6f} s the replay's joint states name "
                                 f"other joints (missing: {', '.join(missing) or 'none'}; "
                                 f"extra: {', '.join(extra) or 'none'})")
            rec_names = [n for n in rec.names if n in index]
        else:
            rec_names = list(rec.names)
        cols_rec = np.array([rec.names.index(n) for n in rec_names], dtype=np.intp)
        cols_rep = np.array([index[n] for n in rec_names], dtype=np.intp)
        out = []
        for name, a, b in zip(FIELDS, rec.fields, rep.fields):
            if a.size != len(rec.names) or b.size != len(rep.names):
                if a.size != b.size or a.tobytes() != b.tobytes():
                    out.append(Difference(stamp, "(all)", f"{name} length", float(a.size),
                                          float(b.size)))
                continue
            a, b = a[cols_rec], b[cols_rep]
            bits = a.view(np.uint64) != b.view(np.uint64)
            if not bits.any():
                continue
            first = int(np.argmax(bits))
            with np.errstate(invalid="ignore", over="ignore"):
                size = np.where(np.isnan(a) ^ np.isnan(b), np.inf, np.abs(b - a))
            size = np.where(bits, np.nan_to_num(size, nan=0.0, posinf=np.inf), -1.0)
            worst = int(np.argmax(size))
            out.append(Difference(stamp, rec_names[first], name, float(a[first]),
                                  float(b[first])))
            if worst != first:
                out.append(Difference(stamp, rec_names[worst], name, float(a[worst]),
                                      float(b[worst])))
        return out, other_joints

    @property
    def done(self) -> bool:
        """The replay has sent the recording's last stamp (states arrive in order)."""
        return self.last_ns is not None and self.last_ns >= self.end_ns

    @property
    def missing(self) -> list[int]:
        return sorted(set(self.recorded) - self.seen)


@dataclass
class ReplayResult:
    """The verdict of a replay (:func:`replay`)."""

    #: every recorded joint state came again, bit for bit
    identical: bool
    #: recorded joint states, and how many of them the replay sent / that differed
    recorded: int
    compared: int
    differing: int
    #: the first difference (None when none, or when states are only missing)
    first: Difference | None
    #: the largest difference of each field that differed
    largest: dict[str, Difference]
    #: recorded stamps the replay did not send
    missing: int
    #: the verdict in words (``replay identical: ...`` or ``replay differs: ...``)
    message: str


def verdict(comparison: Comparison, why_ended: str = "", hints: Sequence[str] = ()) -> ReplayResult:
    """The result of a comparison; ``why_ended``: why the replay stopped before the end
    (a divergence, a controller that exited, a stall), ``hints``: what may explain a
    difference."""
    c = comparison
    n = len(c.recorded)
    missing = c.missing
    identical = not c.differing and not missing
    if identical:
        message = f"replay identical: {n} joint states, bit for bit"
    else:
        parts = []
        if c.first is not None:
            parts.append(f"first difference at {c.first}")
            parts.append(f"{c.differing} of {len(c.seen)} joint states compared differ")
            parts.append("largest differences: " + ", ".join(
                f"{f} {d.size:.3g} {UNITS[f] if f in UNITS else ''}".rstrip()
                + f" (joint '{d.joint}', t = {d.stamp_ns / 1e9:.6f} s)"
                for f, d in c.largest.items()))
        if c.mismatch:
            parts.append(c.mismatch)
        if missing:
            last = "none" if c.last_ns is None else f"t = {c.last_ns / 1e9:.6f} s"
            parts.append(f"{len(missing)} of {n} recorded joint states did not come (first "
                         f"t = {missing[0] / 1e9:.6f} s; the replay's last: {last})")
        if why_ended:
            parts.append(why_ended)
        parts += list(hints)
        message = "replay differs: " + "; ".join(parts)
    return ReplayResult(identical, n, len(c.seen), c.differing, c.first, dict(c.largest),
                        len(missing), message)


# ----------------------------------------------------------------------------- processes


class _Process:
    """A child process (the node or the controller) whose output is kept (the last
    ``LOG_LINES`` lines) and, with ``echo``, relayed."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], cwd: str,
                 echo: Callable[[str], None] | None):
        self.name = name
        self.lines: collections.deque[str] = collections.deque(maxlen=LOG_LINES)
        self.diverged = ""
        try:
            self.popen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, text=True, bufsize=1,
                                          errors="replace", env=env, cwd=cwd)
        except OSError as e:
            raise ReplayError(f"cannot start the {name} ({shlex.join(argv)}): {e}") from None
        self._echo = echo
        self._thread = threading.Thread(target=self._relay, daemon=True)
        self._thread.start()

    def _relay(self) -> None:
        for line in self.popen.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if DIVERGED in line:
                self.diverged = line.strip()
            if self._echo is not None:
                self._echo(f"[{self.name}] {line}")

    def exited(self) -> int | None:
        return self.popen.poll()

    def stop(self) -> None:
        """SIGINT, then SIGKILL after ``STOP_S``."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)
            try:
                self.popen.wait(STOP_S)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(STOP_S)
        self._thread.join(1.0)

    def tail(self) -> str:
        lines = "\n".join(f"  [{self.name}] {x}" for x in self.lines)
        return f"\nlast lines of the {self.name}'s output:\n{lines}" if lines else ""


def _ros_args(fqn: str) -> list[str]:
    """``-r __node:=NAME`` (and ``-r __ns:=/NS``) of a fully qualified node name."""
    ns, _, name = fqn.rpartition("/")
    return ["-r", f"__node:={name}"] + (["-r", f"__ns:={ns}"] if ns else [])


def _params_file(path: Path, parameters: dict[str, Any]) -> Path:
    """A ``--params-file`` of ``parameters`` (those without a value left out: unset)."""
    import yaml

    parameters = {k: v for k, v in parameters.items() if v is not None}
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": parameters}},
                                   default_flow_style=None, sort_keys=True))
    return path


# ----------------------------------------------------------------------------- the replay


def _default_timeout(rec: Recording) -> float:
    return START_S + WALL_PER_SIM_S * (rec.end_ns - min(rec.states)) / 1e9


def replay(bag: str | Path, controller: Sequence[str] | str | None = None, *,
           timeout_s: float | None = None, domain_id: int | None = None,
           echo: Callable[[str], None] | None = None) -> ReplayResult:
    """Replay the lockstep recording ``bag`` (see the module docstring) and compare.

    ``controller``: the controller's command line (a list, or a string split as a
    shell would); None: the example controller with the recorded parameters.
    ``timeout_s``: wall seconds for the whole replay (default: 90 s + 20 s per recorded
    simulated second). ``domain_id``: the ROS_DOMAIN_ID of the node, the controller and
    the comparison (default: the environment's). ``echo``: called with each output
    line of the node and the controller (default: kept quiet; the last lines are in
    the error messages).

    Returns the :class:`ReplayResult` (``identical`` or not); raises
    :class:`ReplayError` when the replay cannot run (bad bag, a process that fails to
    start, rclpy missing)."""
    rec = read_recording(bag)
    if isinstance(controller, str):
        controller = shlex.split(controller)
    if controller is not None:
        controller = [str(a) for a in controller]
        if not controller:
            raise ReplayError("--controller needs a command line")
        if shutil.which(controller[0]) is None:
            raise ReplayError(f"cannot start the controller: '{controller[0]}' is not an "
                              f"executable file nor a command on PATH")
    if timeout_s is None:
        timeout_s = _default_timeout(rec)
    elif not (timeout_s > 0 and np.isfinite(timeout_s)):
        raise ReplayError(f"the timeout must be a positive number of seconds (got {timeout_s})")
    if domain_id is not None and not (0 <= int(domain_id) <= 232):
        raise ReplayError(f"ROS_DOMAIN_ID must be within 0..232 (got {domain_id})")
    try:
        import rclpy
        from rclpy.signals import SignalHandlerOptions
        from sensor_msgs.msg import JointState  # noqa: F401 - the subscription's type
    except ImportError as e:
        raise ReplayError(f"the replay needs rclpy and sensor_msgs: {e}") from None
    example = rec.example_controller() if controller is None else None

    env = dict(os.environ)
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(int(domain_id))
    env["PYTHONUNBUFFERED"] = "1"
    env["RCUTILS_LOGGING_BUFFERED_STREAM"] = "0"
    env["RCUTILS_COLORIZED_OUTPUT"] = "0"
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=None if domain_id is None else int(domain_id),
               signal_handler_options=SignalHandlerOptions.NO)
    procs: dict[str, _Process] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="wb_sim_replay_") as tmp:
            try:
                params = {**rec.parameters, **REPLAY_PARAMETERS,
                          "stop_after_s": rec.end_ns / 1e9}
                node_argv = [sys.executable, "-m", "wb_sim.ros.process", "--ros-args",
                             *_ros_args(rec.node), "--params-file",
                             str(_params_file(Path(tmp) / "wb_sim.yaml", params))]
                if example is not None:
                    controller = [sys.executable, "-m", "wb_sim.ros.pd_controller",
                                  "--ros-args", *_ros_args(example["node"]), "--params-file",
                                  str(_params_file(Path(tmp) / "controller.yaml",
                                                   example["parameters"]))]
                return _run(rec, node_argv, list(controller), env, tmp, context, timeout_s,
                            echo, procs)
            finally:  # the controller first: the node must not wait for it
                for name in ("controller", "simulator node"):
                    if name in procs:
                        procs[name].stop()
    finally:
        rclpy.try_shutdown(context=context)


def _run(rec: Recording, node_argv, controller_argv, env, cwd, context, timeout_s, echo,
         procs: dict[str, "_Process"]) -> ReplayResult:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from ..tools.bag import typestore
    from .rclpy_shim import take_raw

    ts = typestore()
    comparison = Comparison(rec.states)
    node = rclpy.create_node("wb_sim_replay", context=context, start_parameter_services=False)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    delivered: list[bytes] = []
    # the node's state streams are reliable, depth 1000 (1 s at 1 kHz): so is this reader
    sub = node.create_subscription(JointState, rec.topic, delivered.append,
                                   QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE),
                                   raw=True)
    take = take_raw(sub)  # polled without the executor's per-message cost, where possible
    names_cache: dict = {}

    def drain() -> None:
        """Compare every joint state waiting."""
        if take is None:
            executor.spin_once(timeout_sec=0.01)
        batch = delivered[:]
        delivered.clear()
        while take is not None and (taken := take()) is not None:
            batch.append(taken[0])
        for raw in batch:
            try:
                msg = ts.deserialize_cdr(raw, JOINT_STATE_TYPE)
            except Exception as e:  # noqa: BLE001 - rosbags raises several types
                raise ReplayError(f"cannot decode a joint state of the replay: {e}") from None
            comparison.add(_stamp_ns(msg), JointStates.from_message(msg, names_cache))

    start = time.monotonic()
    deadline = start + timeout_s
    procs["simulator node"] = sim = _Process("simulator node", node_argv, env, cwd, echo)
    # the controller starts the physics: not before this reader hears the node
    while node.count_publishers(rec.topic) == 0:
        if sim.exited() is not None:
            raise ReplayError(f"the simulator node exited with code {sim.exited()} before it "
                              f"published on '{rec.topic}'{sim.tail()}")
        if time.monotonic() > min(deadline, start + START_S):
            raise ReplayError(f"the simulator node did not publish on '{rec.topic}' within "
                              f"{min(timeout_s, START_S):g} s{sim.tail()}")
        time.sleep(0.1)  # the graph is DDS discovery's: nothing to spin
    procs["controller"] = ctrl = _Process("controller", controller_argv, env, cwd, echo)
    why_ended = ""
    progress = time.monotonic()
    ended_at: float | None = None
    first_ns: int | None = None  # the replay's first stamp: stepping started once it moved on

    def never_started(what: str) -> ReplayError:
        return ReplayError(f"{what} before the simulation made its first step (is the "
                           f"controller answering each joint state on the recorded command "
                           f"topic?){ctrl.tail()}{sim.tail()}")

    while not comparison.done:
        now = time.monotonic()
        before = comparison.last_ns
        drain()
        if first_ns is None:
            first_ns = comparison.last_ns
        if comparison.last_ns != before:
            progress = now
        if take is not None:
            time.sleep(0.01)
        started = comparison.last_ns is not None and comparison.last_ns != first_ns
        if sim.diverged:
            why_ended = f"the simulation diverged: {sim.diverged}"
            break
        if sim.exited() is not None:  # at stop_after_s, or it failed: the last states come
            ended_at = now if ended_at is None else ended_at
            if now - ended_at > DRAIN_S:
                code = sim.exited()
                if not started:
                    raise never_started(f"the simulator node exited with code {code}")
                why_ended = (f"the simulator node exited with code {code}"
                             + (sim.tail() if code else ""))
                break
        if ctrl.exited() is not None and now - progress > DRAIN_S:
            code = ctrl.exited()
            if not started:
                raise never_started(f"the controller exited with code {code}")
            why_ended = f"the controller exited with code {code}{ctrl.tail()}"
            break
        if now - progress > STALL_S:
            if not started:
                raise never_started(f"no command came within {STALL_S:g} s")
            why_ended = (f"no new joint state for {STALL_S:g} s (is the controller still "
                         f"answering?){ctrl.tail()}")
            break
        if now > deadline:
            why_ended = f"the replay took longer than its timeout of {timeout_s:g} s"
            break
    hints = []
    if not comparison.done or comparison.differing:
        hints = [f"the recording has {n} messages on '{t}', which the replay does not send"
                 for t, n in rec.other_inputs.items()]
        recorded_timeout = rec.parameters.get("sync.timeout_s") or 0
        if recorded_timeout:
            hints.append(f"the recording allowed lockstep misses (sync.timeout_s = "
                         f"{recorded_timeout:g} s); the replay waits for every command")
    node.destroy_node()
    return verdict(comparison, why_ended, hints)


# ----------------------------------------------------------------------------- CLI


def main(argv=None) -> int:
    """Entry point of ``wb_sim_replay``: 0 identical, 1 different, 2 cannot replay,
    130 on Ctrl-C."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # everything after --controller is the controller's command line, its own options too
    controller = None
    if "--controller" in argv:
        i = argv.index("--controller")
        argv, controller = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(
        prog="wb_sim_replay", description=__doc__.split("\n\n")[0],
        usage="wb_sim_replay [-h] [--timeout S] [--verbose] BAG [--controller CMD ...]",
        epilog="--controller CMD ...: the controller's command line, the rest of the line "
               "(default: the example controller with the recorded parameters)")
    ap.add_argument("bag", help="a bag of wb_sim_record (wb_sim_run --record) in lockstep")
    ap.add_argument("--timeout", type=float, default=None, metavar="S",
                    help="wall seconds for the whole replay (default: 90 + 20 per simulated "
                         "second)")
    ap.add_argument("--verbose", action="store_true",
                    help="show the output of the node and the controller")
    args = ap.parse_args(argv)
    if controller is not None and not controller:
        print("wb_sim_replay: --controller needs a command line after it", file=sys.stderr)
        return 2
    echo = (lambda line: print(line, flush=True)) if args.verbose else None
    try:
        result = replay(args.bag, controller, timeout_s=args.timeout, echo=echo)
    except ReplayError as e:
        print(f"wb_sim_replay: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("wb_sim_replay: interrupted", file=sys.stderr)
        return 130
    print(result.message, flush=True)
    return 0 if result.identical else 1


if __name__ == "__main__":
    sys.exit(main())
