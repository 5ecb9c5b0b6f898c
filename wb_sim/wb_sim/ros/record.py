"""``wb_sim_record``: the simulator's topics into a rosbag2 (MCAP), for machines
without ``ros2 bag``. The bag is readable by ``ros2 bag`` (Jazzy and later),
Foxglove, rosbags and ``wb_sim_plot``.

It asks the simulator node (``--sim-node``, default ``wb_sim``) for all its
parameters (``list_parameters`` + ``get_parameters``), writes them as JSON on
``/wb_sim_record/parameters`` (std_msgs/String; :mod:`wb_sim.tools.bag` reads the
friction coefficient, ground normal, effort limits and topic names there), and
records, under the names the parameters give them:

* the outputs: ``joint_states``, ``imu/data``, ``odom/ground_truth``,
  ``contact_wrench/<S>`` for each surface S of ``contact_surfaces`` (and
  ``contact_wrench/collision`` with ``collision.enabled``), ``/tf``,
  ``/tf_static``, ``/clock``, ``robot_description``, and the drives' readings
  ``actuators/current``, ``actuators/voltage``, ``actuators/temperature`` where
  ``actuators.model`` is not ``ideal`` (the node publishes them only then), the
  free objects' markers ``objects`` where ``objects.names`` names some (their frames
  are on ``/tf``), the contact truth ``contact_state`` and the solver health
  ``/diagnostics`` (diagnostic_msgs/DiagnosticArray; not recorded, with a warning, where
  diagnostic_msgs is not installed);
* the inputs: ``joint_commands``, ``effort_commands``, ``external_wrench``.

A node serving several robots (``world_file``): each robot's streams under its name
(``/<name>/joint_states``, ``/<name>/odom/ground_truth``, ``/<name>/imu/data``,
``/<name>/contact_wrench/<S>``, ``/<name>/robot_description``, its command topics), the
world's (``/tf``, ``/clock``, ...) as ever (:func:`fleet_robots`).

While it records, it asks every node that publishes on the recorded command
topics (the controllers, which usually start after the recorder) for all its
parameters, and writes them, one JSON message per node, on
``/wb_sim_record/controller_parameters``: with the simulator's parameters, what
``wb_sim_replay`` needs to run the same closed loop again.

Messages are taken serialized (CDR bytes, never converted to Python) and
written unchanged, stamped with their receive time. The subscriptions are
polled every 10 ms instead of being dispatched one by one by an executor:
at 1 kHz per stream, rclpy's per-message callback overhead would cost a core
(through :mod:`wb_sim.ros.rclpy_shim`; where only rclpy's public API is used,
the executor delivers them and no losses are counted).
``robot_description``, ``/tf_static`` and ``objects`` are subscribed transient-local, so
they are recorded whenever the recorder starts. SIGINT (Ctrl-C) and SIGTERM
close the bag cleanly (exit 0); the summary gives the message counts, the
messages lost (from the publishers' sequence numbers, where the middleware
reports them) and the recorder's CPU use.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .parameters import DEFAULT_TOPICS
from .parent import die_with_parent, on_stop_signals

#: stream key -> message type; the topic is the node's parameter topics.<stream>
#: (default: its declared default, DEFAULT_TOPICS)
STREAM_TYPES = {
    "joint_states": "sensor_msgs/msg/JointState",
    "imu": "sensor_msgs/msg/Imu",
    "odom": "nav_msgs/msg/Odometry",
    "tf": "tf2_msgs/msg/TFMessage",
    "tf_static": "tf2_msgs/msg/TFMessage",
    "clock": "rosgraph_msgs/msg/Clock",
    "robot_description": "std_msgs/msg/String",
    "joint_commands": "sensor_msgs/msg/JointState",
    "effort_commands": "std_msgs/msg/Float64MultiArray",
    "external_wrench": "geometry_msgs/msg/WrenchStamped",
    "contact_state": "wb_sim_interfaces/msg/ContactState",  # built by the node only while recorded
    "diagnostics": "diagnostic_msgs/msg/DiagnosticArray",  # the solver health (wall-clock rate)
}
WRENCH_TYPE = "geometry_msgs/msg/WrenchStamped"
ARRAY_TYPE = "std_msgs/msg/Float64MultiArray"
#: the drives' readings under the prefix topics.actuators (conversions.ACTUATOR_READINGS' names)
ACTUATOR_TOPICS = ("current", "voltage", "temperature")
#: streams published once, transient-local
LATCHED = ("robot_description", "tf_static", "objects")
PARAMETERS_TOPIC = "/wb_sim_record/parameters"
#: one message per controller node: its parameters (JSON)
CONTROLLERS_TOPIC = "/wb_sim_record/controller_parameters"
#: the streams whose publishers are the controllers
COMMAND_STREAMS = ("joint_commands", "effort_commands")
#: seconds between two looks at the command topics' publishers
LOOK_S = 0.5
#: seconds a controller has to answer for its parameters
CONTROLLER_WAIT_S = 10.0
#: seconds the recorder, told to stop, still waits for the parameters on the way (a 1 s
#: recording in CI ended before a controller discovered late had answered, with 2 s)
FINISH_S = 5.0
#: seconds between two polls of the subscriptions
POLL_S = 0.01
#: seconds between chunks on disk: a killed recorder (or a full disk) loses at most about this
#: much; the bag is read up to its last whole chunk (wb_sim.tools.bag.open_bag)
CHUNK_S = 1.0
#: subscriber queue depth of the streams: 1 s at 1 kHz (the queue covers a stalled write)
DEPTH = 1000


class RecordError(RuntimeError):
    """The recorder cannot start or write (the message says why)."""


def absolute(topic: str) -> str:
    return "/" + topic.lstrip("/")


def message_class(msgtype: str):
    """The rclpy message class of ``pkg/msg/Name``; :class:`RecordError` if not importable."""
    pkg, _, name = msgtype.split("/")
    try:
        return getattr(importlib.import_module(f"{pkg}.msg"), name)
    except (ImportError, AttributeError) as e:
        raise RecordError(f"message type '{msgtype}' is not importable: {e}") from None


#: the streams each robot of several has under its name (``<name>/joint_states``, ...;
#: contact_wrench handled apart: one topic per surface)
ROBOT_STREAMS = ("joint_states", "imu", "odom", "robot_description", "joint_commands",
                 "effort_commands", "external_wrench")


def fleet_robots(params: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The robots of a node serving several (parameter ``world_file``, docs/ros.md "Several
    robots"): ``[(name, its contact surfaces)]``, the first robot first; [] for one robot
    (:func:`wb_sim.tools.bag.fleet_names`). Each robot's surfaces are read from the world
    file where it can be read here, else taken to be the first robot's
    (``contact_surfaces``)."""
    return [(n, list(p.get("contact_surfaces") or [])) for n, p in _fleet_params(params)]


def _fleet_params(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``[(name, its parameters)]`` of a node serving several robots ([] for one): the first
    robot's the node's own, the others' from the world file where it can be read here, else
    the first robot's."""
    from ..tools.bag import fleet_names
    names = fleet_names(params)
    if not names:
        return []
    out = {n: params for n in names}
    try:
        from ..world import load_world_robots
        robots = load_world_robots(params["world_file"])
    except Exception:  # noqa: BLE001 - another machine's path: the first robot's surfaces
        robots = []
    for p, info in robots[1:]:
        if info.name in out:
            out[info.name] = p
    return [(n, out[n]) for n in names]


def plan_topics(params: dict[str, Any], only: list[str] | None = None) -> list[tuple[str, str, str]]:
    """``[(topic, type, stream)]`` to record, from the simulator's parameters; ``only``
    restricts them to these topic names (leading '/' optional). A node serving several
    robots: each robot's streams under its name (``/<name>/joint_states``,
    ``/<name>/contact_wrench/<surface>``, ...: :func:`fleet_robots`), the world's as ever."""
    from ..tools.bag import robot_topic
    out = []
    fleet = fleet_robots(params)
    for key, msgtype in STREAM_TYPES.items():
        name = params.get(f"topics.{key}", DEFAULT_TOPICS[key])
        if not name:  # '' = stream off in the simulator
            continue
        if fleet and key in ROBOT_STREAMS:
            out += [(robot_topic(n, name), msgtype, key) for n, _ in fleet]
        else:
            out.append((absolute(str(name)), msgtype, key))
    prefix = params.get("topics.contact_wrench", DEFAULT_TOPICS["contact_wrench"])
    if prefix and fleet:
        for n, surfaces in fleet:
            out += [(robot_topic(n, f"{prefix}/{s}"), WRENCH_TYPE, "contact_wrench")
                    for s in surfaces]
    elif prefix:
        for s in params.get("contact_surfaces") or []:
            out.append((absolute(f"{prefix}/{s}"), WRENCH_TYPE, "contact_wrench"))
        if params.get("collision.enabled"):  # the other links' total wrench
            out.append((absolute(f"{prefix}/collision"), WRENCH_TYPE, "contact_wrench"))
    prefix = params.get("topics.actuators", DEFAULT_TOPICS["actuators"])
    if prefix and params.get("actuators.model", "ideal") != "ideal":
        out += [(absolute(f"{prefix}/{r}"), ARRAY_TYPE, "actuators") for r in ACTUATOR_TOPICS]
    # the force-torque and contact sensors: each robot's own under its name with several
    robots = _fleet_params(params) if fleet else [("", params)]
    prefix = params.get("topics.ft", DEFAULT_TOPICS["ft"])
    if prefix:  # the parameters' force-torque sensors (not the URDF's: the URDF is not read)
        for n, p in robots:
            for s in p.get("ft_sensors.names") or []:
                out.append((robot_topic(n, f"{prefix}/{s}") if n else absolute(f"{prefix}/{s}"),
                            WRENCH_TYPE, "ft"))
    topic = params.get("topics.contact_sensors", DEFAULT_TOPICS["contact_sensors"])
    for n, p in robots if topic else ():
        if p.get("contact_sensors.active"):
            out.append((robot_topic(n, str(topic)) if n else absolute(str(topic)),
                        "std_msgs/msg/Float64MultiArray", "contact_sensors"))
    topic = params.get("topics.objects", DEFAULT_TOPICS["objects"])
    if topic and params.get("objects.names"):  # the free objects' markers (latched); their
        # frames are on /tf; objects spawned in a run without configured ones: /tf only
        out.append((absolute(str(topic)), "visualization_msgs/msg/MarkerArray", "objects"))
    topic = params.get("topics.loop_closures", DEFAULT_TOPICS["loop_closures"])
    if topic and (params.get("loop_closures.frames_a")
                  or str(params.get("urdf_path") or "").endswith(".xml")):
        # the parameters' closures, or an MJCF's <equality> (the model is not read here)
        out.append((absolute(str(topic)), ARRAY_TYPE, "loop_closures"))
    if only is not None:
        wanted = {absolute(t) for t in only}
        out = [o for o in out if o[0] in wanted]
    return out


def _qos(latched: bool):
    """(rclpy QoS of the subscription, rosbags Qos offered on playback)."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    from rosbags.interfaces import (Qos, QosDurability, QosHistory, QosLiveliness,
                                    QosReliability, QosTime)

    depth = 10 if latched else DEPTH
    sub = QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=(DurabilityPolicy.TRANSIENT_LOCAL if latched
                                 else DurabilityPolicy.VOLATILE))
    zero = QosTime(0, 0)
    offered = Qos(QosHistory.KEEP_LAST, 1 if latched else 10, QosReliability.RELIABLE,
                  QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE,
                  zero, zero, QosLiveliness.AUTOMATIC, zero, False)
    return sub, offered


def _python(value) -> Any:
    """JSON-able value of a parameter (arrays as lists)."""
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        return [_python(v) for v in value]
    return value


def parameter_values(names, values) -> dict[str, Any]:
    """``{name: JSON-able value}`` of a GetParameters answer."""
    from rclpy.parameter import parameter_value_to_python

    return {n: _python(parameter_value_to_python(v)) for n, v in zip(names, values)}


class _Ask:
    """One node's parameters, asked without blocking (list_parameters, then
    get_parameters); :meth:`advance` moves it on, ``doc`` holds the answer."""

    def __init__(self, node, fqn: str, topics: list[str], deadline: float):
        from rcl_interfaces.srv import GetParameters, ListParameters

        self.node, self.fqn, self.topics, self.deadline = node, fqn, topics, deadline
        self._get = GetParameters.Request
        self.lister = node.create_client(ListParameters, f"{fqn}/list_parameters")
        self.getter = node.create_client(GetParameters, f"{fqn}/get_parameters")
        self.request = ListParameters.Request()
        self.future = None
        self.names: list[str] | None = None
        self.doc: dict[str, Any] | None = None

    def advance(self) -> bool:
        """One step on; True once finished (``doc`` set, or not: no answer)."""
        if self.future is None:
            if self.lister.service_is_ready() and self.getter.service_is_ready():
                self.future = self.lister.call_async(self.request)
        elif self.future.done():
            answer = None if self.future.exception() is not None else self.future.result()
            if answer is None:
                return True
            if self.names is None:
                self.names = list(answer.result.names)
                self.future = self.getter.call_async(self._get(names=self.names))
            else:
                self.doc = {"node": self.fqn, "publishes": self.topics,
                            "recorded_by": "wb_sim_record",
                            "parameters": parameter_values(self.names, answer.values)}
                return True
        return False

    def close(self) -> None:
        self.node.destroy_client(self.lister)
        self.node.destroy_client(self.getter)


class ControllerWatch:
    """The parameters of the nodes publishing on ``topics`` (the command topics),
    asked for while the recording runs, from a node of its own spun by its own
    executor (the recorder's subscriptions are not touched)."""

    def __init__(self, node, topics: list[str], skip: set[str], wait_s: float = CONTROLLER_WAIT_S):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.topics = topics
        self.wait_s = wait_s
        self.node = rclpy.create_node(f"{node.get_name()}_parameters", context=node.context,
                                      start_parameter_services=False)
        self.skip = set(skip) | {node.get_fully_qualified_name(),
                                 self.node.get_fully_qualified_name()}
        self.executor = SingleThreadedExecutor(context=node.context)
        self.executor.add_node(self.node)
        self.asks: dict[str, _Ask] = {}
        self.seen: set[str] = set()
        self.given_up: list[str] = []
        self._next_look = 0.0

    def step(self, now: float, look: bool = True) -> list[dict[str, Any]]:
        """Look for new publishers (every ``LOOK_S``, with ``look``), move the questions
        on; the documents answered since the last call."""
        if look and now >= self._next_look:
            self._next_look = now + LOOK_S
            publishers: dict[str, list[str]] = {}
            for topic in self.topics:
                for info in self.node.get_publishers_info_by_topic(topic):
                    if info.node_name.startswith("_"):  # _NODE_NAME_UNKNOWN_: not a ROS node
                        continue
                    ns = info.node_namespace.rstrip("/")
                    publishers.setdefault(f"{ns}/{info.node_name}", []).append(topic)
            for fqn, topics in publishers.items():
                if fqn not in self.seen and fqn not in self.skip:
                    self.seen.add(fqn)
                    self.asks[fqn] = _Ask(self.node, fqn, topics, now + self.wait_s)
        if not self.asks:
            return []
        for _ in range(4):  # answers and graph events waiting now, without blocking
            self.executor.spin_once(timeout_sec=0.0)
        out = []
        for fqn, ask in list(self.asks.items()):
            done = ask.advance()
            if done or now > ask.deadline:
                ask.close()
                del self.asks[fqn]
                if ask.doc is not None:
                    out.append(ask.doc)
                else:
                    self.given_up.append(fqn)
        return out

    @property
    def pending(self) -> bool:
        return bool(self.asks)

    def close(self) -> None:
        for ask in self.asks.values():
            ask.close()
        self.asks.clear()
        self.executor.remove_node(self.node)
        self.node.destroy_node()


class BagRecorder:
    """Subscriptions polled into a rosbags MCAP writer (see the module docstring)."""

    def __init__(self, node, output: Path, sim_node: str, only: list[str] | None,
                 wait_s: float, stop: threading.Event | None = None):
        self.node = node
        self.log = node.get_logger()
        self.output = output
        self.sim_node = "/" + sim_node.strip("/")
        self.only = only
        self.wait_s = wait_s
        self.stop = stop or threading.Event()
        self.subs: list = []
        self._takers: list = []  # per subscription: rclpy_shim.take_raw, or None
        self._delivered_batch: list = []  # messages the executor delivered (public API)
        self.counts: dict[str, int] = {}
        self.lost: dict[str, int] = {}
        self._seq: dict[tuple, int] = {}
        self.writer = None
        self.controllers: ControllerWatch | None = None
        self._lockstep = False  # the simulator steps once per answer: a controller drives it
        self._chunk_due = time.monotonic() + CHUNK_S

    # ------------------------------------------------------------------ setup

    def fetch_parameters(self, executor) -> dict[str, Any]:
        """All parameters of the simulator node (blocking, spinning ``executor``)."""
        from rcl_interfaces.srv import GetParameters, ListParameters

        node = self.node
        lister = node.create_client(ListParameters, f"{self.sim_node}/list_parameters")
        getter = node.create_client(GetParameters, f"{self.sim_node}/get_parameters")
        try:
            self.log.info(f"waiting for the simulator node '{self.sim_node}'")
            deadline = time.monotonic() + self.wait_s
            while not (lister.service_is_ready() and getter.service_is_ready()):
                if self.stop.is_set():
                    return {}
                if time.monotonic() > deadline:
                    raise RecordError(f"simulator node '{self.sim_node}' not found within "
                                      f"{self.wait_s:g} s (is it running, in this "
                                      f"ROS_DOMAIN_ID? see --sim-node)")
                executor.spin_once(timeout_sec=0.1)

            def call(client, request):
                future = client.call_async(request)
                executor.spin_until_future_complete(future, timeout_sec=self.wait_s)
                if not future.done() or future.result() is None:
                    raise RecordError(f"no answer from '{client.srv_name}'")
                return future.result()

            names = list(call(lister, ListParameters.Request()).result.names)
            values = call(getter, GetParameters.Request(names=names)).values
        finally:
            node.destroy_client(lister)
            node.destroy_client(getter)
        return parameter_values(names, values)

    def open(self, params: dict[str, Any]) -> None:
        """Open the bag, write the parameters, subscribe."""
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.rosbag2.errors import WriterError

        from ..tools.bag import typestore

        self._lockstep = params.get("sync.mode") == "lockstep"
        plan = plan_topics(params, self.only)
        if self.only is not None:
            known = {t for t, _, _ in plan}
            plan += self._graph_topics([t for t in map(absolute, self.only) if t not in known])
        ts = typestore()
        try:
            # metadata version 8 (Jazzy's rosbag2; later distributions read it too)
            self.writer = Writer(self.output, version=8, storage_plugin=StoragePlugin.MCAP)
            self.writer.open()
        except WriterError as e:
            raise RecordError(str(e)) from None
        self._typestore = ts
        self._doc_conns: dict[str, Any] = {}
        self.write_doc(PARAMETERS_TOPIC, {
            "node": self.sim_node, "recorded_by": "wb_sim_record",
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "parameters": params})
        for topic, msgtype, stream in plan:
            try:
                cls = message_class(msgtype)
            except RecordError as e:
                self.log.warning(f"not recording '{topic}': {e}")
                continue
            if msgtype not in ts.fielddefs:
                self.log.warning(f"not recording '{topic}': rosbags does not know '{msgtype}'")
                continue
            sub_qos, offered = _qos(latched=stream in LATCHED)
            conn = self.writer.add_connection(topic, msgtype, typestore=ts,
                                              offered_qos_profiles=[offered])
            sub = self.node.create_subscription(cls, topic, self._delivered(conn, topic),
                                                sub_qos, raw=True)
            self.subs.append((sub, conn, topic))
            from .rclpy_shim import take_raw  # rclpy's internals, with the public fallback
            self._takers.append(take_raw(sub))
            self.counts[topic] = 0
            self.lost[topic] = 0
        self.log.info(f"recording {len(self.subs)} topics into '{self.output}': "
                      f"{', '.join(t for _, _, t in self.subs)}")
        commands = [t for t, _, stream in plan if stream in COMMAND_STREAMS]
        if commands:
            self.controllers = ControllerWatch(self.node, commands, {self.sim_node})

    def write_doc(self, topic: str, doc: dict[str, Any]) -> None:
        """One JSON document (std_msgs/String, transient-local) on ``topic`` of the bag."""
        ts, msgtype = self._typestore, "std_msgs/msg/String"
        conn = self._doc_conns.get(topic)
        if conn is None:
            conn = self._doc_conns[topic] = self.writer.add_connection(
                topic, msgtype, typestore=ts, offered_qos_profiles=[_qos(latched=True)[1]])
        msg = ts.types[msgtype](data=json.dumps(doc))
        self.writer.write(conn, time.time_ns(), bytes(ts.serialize_cdr(msg, msgtype)))
        self.counts[topic] = self.counts.get(topic, 0) + 1

    def watch_controllers(self, look: bool = True) -> None:
        """Write the parameters of the controllers that have answered (see the module
        docstring); ``look``: also look for new ones."""
        if self.controllers is None:
            return
        for doc in self.controllers.step(time.monotonic(), look):
            self.write_doc(CONTROLLERS_TOPIC, doc)
            self.log.info(f"recorded the parameters of the controller '{doc['node']}'")

    def finish_controllers(self, wait_s: float) -> None:
        """At the end: wait up to ``wait_s`` for the answers on the way, then stop asking
        (a controller without parameter services is named in a warning)."""
        if self.controllers is None:
            return
        end = time.monotonic() + wait_s
        self.watch_controllers()
        # in lockstep a controller drives the simulator: one not discovered yet (a short run
        # can end before DDS has told this recorder of the controller's publisher: CI saw a
        # 1 s run's bag without it) is still looked for while it runs, up to wait_s
        unseen = self._lockstep and not self.controllers.seen
        while (self.controllers.pending or unseen) and time.monotonic() < end:
            time.sleep(0.01)
            self.watch_controllers(look=unseen)
            unseen = unseen and not self.controllers.seen
        missed = self.controllers.given_up + list(self.controllers.asks)
        if missed:
            self.log.warning(f"no parameters recorded of {', '.join(missed)} (no answer from "
                             f"its parameter services)")

    def _graph_topics(self, topics: list[str]) -> list[tuple[str, str, str]]:
        """Types of topics outside the known streams, from the ROS graph."""
        out, deadline = [], time.monotonic() + min(self.wait_s, 5.0)
        pending = list(topics)
        while pending:
            graph = dict(self.node.get_topic_names_and_types())
            for t in list(pending):
                if graph.get(t):
                    out.append((t, graph[t][0], "other"))
                    pending.remove(t)
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        for t in pending:
            self.log.warning(f"not recording '{t}': no publisher found, its type is unknown")
        return out

    # ------------------------------------------------------------------ recording

    @property
    def executor_delivers(self) -> bool:
        """True where the messages come through the executor (rclpy_shim's public path):
        the main loop spins it instead of sleeping between polls."""
        return any(t is None for t in self._takers)

    def _delivered(self, conn, topic: str):
        """The subscription's callback: used only where the executor delivers (no
        sequence numbers there: losses are not counted)."""
        def on_message(data: bytes) -> None:
            self._delivered_batch.append((time.time_ns(), conn, data))
            self.counts[topic] += 1
        return on_message

    def poll(self) -> int:
        """Take every waiting message, write them in receive order; returns how many."""
        batch, self._delivered_batch = self._delivered_batch, []
        for (sub, conn, topic), take in zip(self.subs, self._takers):
            while take is not None:
                taken = take()
                if taken is None:
                    break
                data, info = taken
                stamp = info.get("received_timestamp") or time.time_ns()
                batch.append((stamp, conn, data))
                self.counts[topic] += 1
                seq, gid = info.get("publication_sequence_number"), info.get("publisher_gid")
                if seq and gid is not None:
                    key = (topic, bytes(gid.get("data", b"")) if isinstance(gid, dict)
                           else repr(gid))
                    last = self._seq.get(key)
                    if last is not None and seq > last + 1:
                        self.lost[topic] += seq - last - 1
                    self._seq[key] = seq
        batch.sort(key=lambda b: b[0])
        write = self.writer.write
        for stamp, conn, data in batch:
            write(conn, stamp, data)
        return len(batch)

    def sync(self, now: float | None = None) -> bool:
        """Every :data:`CHUNK_S`: the messages written so far closed into an MCAP chunk and
        handed to the file system, so that a recorder killed (or a disk filled) later leaves
        them readable. rosbags' MCAP writer closes a chunk only at 1 MB, kept in memory; its
        chunk is closed here through its storage object where that has the attributes of
        rosbags 0.11 (else rosbags' own chunking stands). Returns whether a chunk was written."""
        now = time.monotonic() if now is None else now
        if now < self._chunk_due or self.writer is None:
            return False
        self._chunk_due = now + CHUNK_S
        storage = getattr(self.writer, "storage", None)
        chunk = getattr(storage, "chunk", None)
        bio = getattr(chunk, "bio", None)
        if bio is None or not hasattr(storage, "close_chunk") or not bio.tell():
            return False
        storage.close_chunk()
        storage.bio.flush()
        return True

    def close(self) -> None:
        if self.controllers is not None:
            self.controllers.close()
            self.controllers = None
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _default_output() -> Path:
    return Path(datetime.datetime.now().strftime("wb_sim_%Y%m%d-%H%M%S"))


def main(argv=None) -> int:
    """Entry point of ``wb_sim_record``: 0 after a clean stop, 2 when it cannot start,
    1 when writing fails."""
    die_with_parent()  # end with wb_sim_run / the launch that started us (SIGTERM: a clean stop)
    argv = list(sys.argv[1:] if argv is None else argv)
    ros_args = argv[argv.index("--ros-args"):] if "--ros-args" in argv else []
    own = argv[:len(argv) - len(ros_args)]
    ap = argparse.ArgumentParser(prog="wb_sim_record", description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", type=Path,
                    help="bag directory to create (PATH/metadata.yaml + PATH/<name>.mcap; "
                         "default wb_sim_<date>-<time>); an existing path is refused")
    ap.add_argument("--duration", type=float, default=0.0,
                    help="stop after this many wall-clock seconds (default: until Ctrl-C)")
    ap.add_argument("--sim-node", default="wb_sim", help="simulator node name (default wb_sim)")
    ap.add_argument("--topics", nargs="+", metavar="TOPIC",
                    help="record only these topics (default: all the simulator's outputs and "
                         "inputs)")
    ap.add_argument("--wait", type=float, default=30.0,
                    help="seconds to wait for the simulator node (default 30)")
    args = ap.parse_args(own)
    output = args.output or _default_output()
    if output.exists():
        print(f"wb_sim_record: '{output}' exists; not overwriting it (choose another -o PATH)",
              file=sys.stderr)
        return 2
    parent = output.absolute().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        why = "is not a directory" if not parent.is_dir() else "is not writable"
        print(f"wb_sim_record: cannot create '{output}': '{parent}' {why} (choose another "
              f"-o PATH)", file=sys.stderr)
        return 2
    try:
        import rclpy
        import rosbags  # noqa: F401
        from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions
    except ImportError as e:
        print(f"wb_sim_record needs rclpy and rosbags (pip install 'wb_sim[plot]'): {e}",
              file=sys.stderr)
        return 2

    rclpy.init(args=["wb_sim_record", *ros_args], signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    on_stop_signals(stop.set, "wb_sim_record")  # SIGINT, SIGTERM, the parent's end
    node = rclpy.create_node("wb_sim_record")
    log = node.get_logger()
    rec = BagRecorder(node, output, args.sim_node, args.topics, args.wait, stop)
    code = 0
    cpu0, wall0 = time.process_time(), time.monotonic()
    try:
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        params = rec.fetch_parameters(executor)
        if stop.is_set():
            return 0
        rec.open(params)
        cpu0, wall0 = time.process_time(), time.monotonic()
        end = wall0 + args.duration if args.duration > 0 else float("inf")
        while not stop.is_set() and rclpy.ok() and time.monotonic() < end:
            rec.poll()
            rec.sync()
            rec.watch_controllers()
            if rec.executor_delivers:
                executor.spin_once(timeout_sec=POLL_S)
            else:
                stop.wait(POLL_S)
        rec.poll()
        rec.finish_controllers(FINISH_S)
    except RecordError as e:
        log.fatal(str(e))
        code = 2
    except ExternalShutdownException:
        pass
    except Exception as e:  # a write failed (disk full, ...): keep what was written
        log.fatal(f"recording failed: {type(e).__name__}: {e}")
        code = 1
    finally:
        wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
        try:
            rec.close()
        except Exception as e:  # noqa: BLE001
            log.error(f"closing the bag failed: {e}")
            code = code or 1
        if rec.subs:
            total = sum(rec.counts.values())
            lost = sum(rec.lost.values())
            counts = ", ".join(f"{t} {n}" for t, n in rec.counts.items())
            log.info(f"closed '{output}': {total} messages in {wall:.1f} s ({counts}); "
                     f"lost {lost}; recorder CPU {100 * cpu / max(wall, 1e-9):.0f} % of a core")
        node.destroy_node()
        rclpy.try_shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
