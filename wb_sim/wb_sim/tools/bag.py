"""A :class:`~wb_sim.tools.recording.History` from a rosbag2 of the node's topics, read
with `rosbags <https://gitlab.com/ternaris/rosbags>`_ (no ROS installation needed).

The bag may come from ``wb_sim_record`` or from ``ros2 bag record`` (MCAP or
sqlite3 storage): a bag directory, or a single ``.mcap`` file. Topics read:

* ``joint_states`` (sensor_msgs/JointState): the time base (one sample per
  stamp), joint positions, velocities and the applied efforts;
* ``odom/ground_truth`` (nav_msgs/Odometry): the world pose of the floating base;
* ``contact_wrench/<surface>`` (geometry_msgs/WrenchStamped): force and torque
  in the surface frame ``header.frame_id``, rotated here into the world frame;
* ``ft/<sensor>`` (geometry_msgs/WrenchStamped): the force-torque sensors' readings, as
  published (force and torque in the sensor's frame), at the joint state of the same stamp;
* ``robot_description`` (std_msgs/String): the URDF, from which pinocchio
  gives the centre of mass and the surface frames' orientation;
* ``joint_commands`` (sensor_msgs/JointState): the reference positions, when
  the controller fills ``position`` (the example controller does);
* ``actuators/current``, ``actuators/voltage``, ``actuators/temperature``
  (std_msgs/Float64MultiArray, joint_states order): the drives' readings. The type has
  no stamp: each message is given the sample of the joint state received last before
  it (the node publishes both at the same step, joint states first); the drives'
  constants (torque-speed envelope) come from the recorded ``actuators.*`` parameters;
* ``contact_state`` (wb_sim_interfaces/msg/ContactState: its definition from the bag, MCAP
  carries it, or from the installed package): the contact truth, each surface's centre of
  pressure and the ZMP (:func:`contact_truth`), on its own time base;
* ``/diagnostics`` (diagnostic_msgs/DiagnosticArray): the simulator's solver health, the
  numeric values of its ``wb_sim: <group>`` statuses (:func:`solver_health`), on its own
  time base (the header stamps; published at a wall-clock rate);
* ``wb_sim_record/parameters`` (std_msgs/String, JSON written by
  ``wb_sim_record``): the simulator's parameters (friction coefficient, ground
  normal, gravity, floating base, effort limits, topic names, drives). Without it (a
  bag of ``ros2 bag record``) the friction coefficient is unknown (NaN) and
  the other values are the parameters' defaults, the floating base inferred
  from the presence of odometry.

Times: ``t`` is the messages' header stamps (simulated time), ``wall`` the
bag's log time (the recorder's receive time, system clock) of the joint states,
from 0: it follows ``t`` but a late delivery on a loaded machine can put a state
a few ms out of order. Streams at a
lower rate than ``joint_states`` (``publish.*_rate_hz``) are held: each sample
uses the newest message stamped at or before it.
"""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin

from ..errors import WbSimError
from .recording import DRIVE_COLUMNS, History, RecordingError, drive_parameters, joint_units

#: topic of the simulator's parameters (JSON) written by wb_sim_record
PARAMETERS_TOPIC = "/wb_sim_record/parameters"
NS = 1_000_000_000


#: the node's default topic names (its ``topics.*`` defaults, declared in
#: wb_sim/ros/parameters.py, which the tools do not import; test_config_single_source
#: holds them equal), for a bag without the recorder's parameters
DEFAULT_TOPICS = {"joint_states": "joint_states", "odom": "odom/ground_truth",
                  "contact_wrench": "contact_wrench", "robot_description": "robot_description",
                  "joint_commands": "joint_commands", "actuators": "actuators", "ft": "ft",
                  "contact_state": "contact_state", "diagnostics": "/diagnostics"}
#: the drives' readings under the prefix topics.actuators, and their History fields
ACTUATOR_READINGS = {"current": "motor_current", "voltage": "motor_voltage",
                     "temperature": "motor_temperature"}


#: the name under the contact_wrench prefix of the other links' total wrench
COLLISION_WRENCH = "collision"
WRENCH_TYPE = "geometry_msgs/msg/WrenchStamped"


#: wb_sim's own ROS 2 interface package (the contact truth's message)
INTERFACES_PACKAGE = "wb_sim_interfaces"


def interface_definitions() -> dict[str, str]:
    """``{type name: .msg text}`` of wb_sim_interfaces' messages where it is installed (its
    ``share/wb_sim_interfaces/msg`` under an AMENT_PREFIX_PATH entry or this interpreter's
    prefix, where tools/build_interfaces.sh installs it); {} where it is not."""
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for prefix in [*prefixes, sys.prefix]:
        folder = Path(prefix, "share", INTERFACES_PACKAGE, "msg")
        if folder.is_dir():
            return {f"{INTERFACES_PACKAGE}/msg/{f.stem}": f.read_text()
                    for f in sorted(folder.glob("*.msg"))}
    return {}


def typestore(reader=None):
    """The rosbags typestore of the newest ROS 2 distribution it knows (Kilted or later),
    with the types it lacks: those whose definitions ``reader``'s bag carries (MCAP's
    schemas, rosbag2's message definitions), else wb_sim_interfaces' where installed
    (:func:`interface_definitions`). A type known neither way stays unknown: its messages
    cannot be read."""
    from rosbags.typesys import Stores, get_typestore, get_types_from_idl, get_types_from_msg

    ts = None
    for name in ("ROS2_LYRICAL", "ROS2_KILTED", "LATEST"):
        store = getattr(Stores, name, None)
        if store is not None:
            try:
                ts = get_typestore(store)
                break
            except (ImportError, ModuleNotFoundError):  # pragma: no cover - old rosbags
                continue
    if ts is None:  # pragma: no cover
        raise RecordingError("rosbags has no ROS 2 typestore")
    types: dict = {}
    for name, text in interface_definitions().items():
        types.update(get_types_from_msg(text, name))
    for c in getattr(reader, "connections", ()):
        fmt, data = getattr(c.msgdef, "format", None), getattr(c.msgdef, "data", "")
        if c.msgtype in ts.fielddefs or not data:
            continue
        if getattr(fmt, "name", "") == "MSG":
            types.update(get_types_from_msg(data, c.msgtype))
        elif getattr(fmt, "name", "") == "IDL":
            types.update(get_types_from_idl(data))
    ts.register({k: v for k, v in types.items() if k not in ts.fielddefs})
    return ts


def absolute(topic: str) -> str:
    """A topic name as rosbag2 stores it (relative names resolved in the root namespace)."""
    return "/" + topic.lstrip("/")


MCAP_MAGIC = b"\x89MCAP0\r\n"


def _unfinished_mcap(path: Path) -> bool:
    """Whether the MCAP file ``path`` lacks its end (a footer and the closing magic): its
    writer was killed, or its disk filled, before it closed the file."""
    with open(path, "rb") as f:
        if f.read(8) != MCAP_MAGIC:
            return False  # not MCAP at all: the reader says so
        f.seek(0, 2)
        if f.tell() < 8 + 37:
            return True
        f.seek(-8, 2)
        return f.read(8) != MCAP_MAGIC


def salvage_mcap(path: Path, out: Path) -> tuple[int, int]:
    """Write to ``out`` the complete chunks of the unfinished MCAP file ``path`` (and the
    records between them), each with message indexes rebuilt from its messages, then a
    summary (chunk indexes, statistics) and a footer: an indexed file, which readers merge
    in time order. Everything up to the last chunk written whole is kept. Returns (bytes
    kept, bytes dropped) of ``path``."""
    import io
    import struct

    from rosbags.rosbag2.storage_mcap import decompress

    def record(op: int, body: bytes) -> bytes:
        return bytes([op]) + struct.pack("<Q", len(body)) + body

    with open(path, "rb") as f:
        data = f.read()
    dst = io.BytesIO()
    dst.write(data[:8])
    chunk_indexes: list[bytes] = []
    counts: dict[int, int] = {}
    first, last, nchunks = 2**63 - 1, 0, 0
    end = pos = 8
    while pos + 9 <= len(data):
        op = data[pos]
        (length,) = struct.unpack_from("<Q", data, pos + 1)
        if op in (0x00, 0x02, 0x0F) or pos + 9 + length > len(data):
            break  # invalid, a footer or a data end (a closed file's summary follows), cut
        body = data[pos + 9:pos + 9 + length]
        pos += 9 + length
        if op in (0x07, 0x08, 0x0A, 0x0B, 0x0D, 0x0E):
            continue  # the old indexes and summary: rebuilt below
        if op != 0x06:
            dst.write(record(op, body))
            end = pos
            continue
        start_t, end_t, usize, crc = struct.unpack_from("<QQQI", body, 0)
        (clen,) = struct.unpack_from("<I", body, 28)
        compression = body[32:32 + clen].decode()
        (csize,) = struct.unpack_from("<Q", body, 32 + clen)
        try:
            inner = decompress(body[40 + clen:40 + clen + csize], compression, usize, crc)
        except Exception:  # noqa: BLE001 - a corrupt chunk: stop before it
            break
        by_channel: dict[int, list[tuple[int, int]]] = {}
        i = 0
        while i + 9 <= len(inner):
            (rlen,) = struct.unpack_from("<Q", inner, i + 1)
            if inner[i] == 0x05:
                cid, _, log_time = struct.unpack_from("<HIQ", inner, i + 9)
                by_channel.setdefault(cid, []).append((log_time, i))
            i += 9 + rlen
        chunk_start = dst.tell()
        dst.write(record(0x06, body))
        chunk_end = dst.tell()
        offsets = []
        for cid, entries in by_channel.items():
            offsets.append((cid, dst.tell()))
            entries.sort()
            dst.write(record(0x07, struct.pack("<HI", cid, 16 * len(entries))
                             + b"".join(struct.pack("<QQ", t, o) for t, o in entries)))
            counts[cid] = counts.get(cid, 0) + len(entries)
        chunk_indexes.append(
            struct.pack("<QQQQI", start_t, end_t, chunk_start, chunk_end - chunk_start,
                        10 * len(offsets))
            + b"".join(struct.pack("<HQ", c, o) for c, o in offsets)
            + struct.pack("<QI", dst.tell() - chunk_end, clen) + compression.encode()
            + struct.pack("<QQ", csize, usize))
        if by_channel:
            first, last = min(first, start_t), max(last, end_t)
        nchunks += 1
        end = pos
    dst.write(record(0x0F, struct.pack("<I", 0)))  # data end
    summary_start = dst.tell()
    for index in chunk_indexes:
        dst.write(record(0x08, index))
    dst.write(record(0x0B, struct.pack("<QHIIIIQQI", sum(counts.values()), 0, 0, 0, 0,
                                       nchunks, first if counts else 0, last, 10 * len(counts))
                     + b"".join(struct.pack("<HQ", c, n) for c, n in sorted(counts.items()))))
    dst.write(record(0x02, struct.pack("<QQI", summary_start, 0, 0)))  # footer
    dst.write(MCAP_MAGIC)
    with open(out, "wb") as f:
        f.write(dst.getbuffer())
    return end, len(data) - end


@contextmanager
def open_bag(path: str | Path):
    """A rosbags reader of a bag directory (MCAP or sqlite3) or of a single
    ``.mcap`` file, open; :class:`RecordingError` if it cannot be read. The
    reader has ``connections`` and ``messages(connections)``.

    A recording its recorder did not close (killed, or its disk full: no metadata.yaml, an
    MCAP file without its end) is read up to its last complete record, with a warning
    saying how much was lost."""
    try:
        from rosbags.rosbag2 import Reader
        from rosbags.rosbag2.errors import ReaderError
        from rosbags.rosbag2.storage_mcap import McapReader
    except ImportError as e:
        raise ImportError("reading bags needs rosbags: pip install 'wb_sim[plot]' "
                          "(or pip install rosbags)") from e
    path = Path(path)
    if not path.exists():
        raise RecordingError(f"no such bag: '{path}'")
    if path.is_file() and (path.parent / "metadata.yaml").is_file():
        path = path.parent  # the directory knows about split files
    salvaged = None
    if path.is_dir() and not (path / "metadata.yaml").is_file():
        mcaps = sorted(path.glob("*.mcap"))
        if len(mcaps) != 1:
            raise RecordingError(f"'{path}' is not a rosbag2 directory (no metadata.yaml)")
        path = mcaps[0]  # a recording never closed: its one MCAP file
    if path.is_file() and path.suffix == ".mcap" and _unfinished_mcap(path):
        import tempfile
        salvaged = Path(tempfile.mkdtemp(prefix="wb_sim_bag_"))
        try:
            kept, lost = salvage_mcap(path, salvaged / path.name)
        except OSError as e:
            raise RecordingError(f"cannot read the bag '{path}': {e}") from None
        warnings.warn(f"'{path}' was not closed by its recorder (killed, or its disk full): "
                      f"read up to its last complete record ({kept} bytes; {lost} bytes at "
                      f"its end lost)", stacklevel=3)
        original, path = path, salvaged / path.name
    if path.is_dir():
        reader = Reader(path)
    else:
        reader = McapReader(path)
    try:
        try:
            reader.open()
        except (ReaderError, OSError, ValueError, KeyError, EOFError) as e:
            where = original if salvaged is not None else path
            raise RecordingError(f"cannot read the bag '{where}': {e}") from None
        try:
            yield reader
        finally:
            reader.close()
    finally:
        if salvaged is not None:
            import shutil
            shutil.rmtree(salvaged, ignore_errors=True)


def bag_topics(path: str | Path) -> dict[str, tuple[str, int]]:
    """``{topic: (message type, message count)}`` of a bag."""
    out: dict[str, tuple[str, int]] = {}
    with open_bag(path) as reader:  # counts: the metadata's, or the MCAP statistics'
        for c in reader.connections:
            n = out.get(c.topic, (c.msgtype, 0))[1]
            out[c.topic] = (c.msgtype, n + c.msgcount)
    return out


#: the streams each robot of several has under its name on the node (``<name>/joint_states``)
ROBOT_STREAMS = ("joint_states", "imu", "odom", "robot_description", "joint_commands",
                 "effort_commands", "external_wrench", "contact_wrench", "ft",
                 "contact_sensors")
#: each robot's own read-only parameters on the node (``<name>.floating_base``, ...)
ROBOT_KEYS = ("floating_base", "initial.joint_names", "initial.joint_positions",
              "initial.base_position", "initial.base_rpy")


def fleet_names(params: dict[str, Any]) -> list[str]:
    """The robots of a node serving several (its parameter ``world_file``; docs/ros.md
    "Several robots"), from its parameters ``<name>.initial.joint_names``: [] for one robot.
    The first robot is the one whose ``initial.joint_names`` are the node's own."""
    if not params.get("world_file"):
        return []
    names = [k.partition(".")[0] for k in params
             if k.endswith(".initial.joint_names") and k.count(".") == 2]
    if len(names) < 2:
        return []
    own = params.get("initial.joint_names")
    first = [n for n in names if params.get(f"{n}.initial.joint_names") == own
             and params.get(f"{n}.initial.base_position") == params.get("initial.base_position")]
    return first[:1] + [n for n in names if n not in first[:1]]


def robot_topic(name: str, topic: str) -> str:
    """``topic`` of robot ``name`` on a node serving several, absolute (the node's
    ``wb_sim.ros.robots.robot_topic``, relative to a node in the root namespace); '' stays ''."""
    if not topic:
        return ""
    return absolute(f"/{name}{topic}" if topic.startswith("/") else f"{name}/{topic}")


def robot_params(params: dict[str, Any], robot: str) -> dict[str, Any]:
    """The recorded node parameters as those of robot ``robot`` alone: its topics under its
    name (its force-torque sensors' too), its ``floating_base`` and ``initial.*``; its contact
    surfaces and force-torque sensors those found in the bag (the node's
    ``contact_surfaces`` and ``ft_sensors.names`` are the first robot's); the world's contact
    truth and the first robot's drives left out for the others."""
    names = fleet_names(params)
    if robot not in names:
        raise RecordingError(f"no robot named {robot!r} in the recording; its robots: "
                             f"{', '.join(names) or 'one, unnamed (leave robot out)'}")
    out = dict(params)
    for k in ROBOT_STREAMS:
        if f"topics.{k}" in params or k in DEFAULT_TOPICS:
            out[f"topics.{k}"] = robot_topic(robot, str(params.get(f"topics.{k}",
                                                                   DEFAULT_TOPICS.get(k))))
    for k in ROBOT_KEYS:
        if f"{robot}.{k}" in params:
            out[k] = params[f"{robot}.{k}"]
    out["topics.contact_state"] = ""
    if robot != names[0]:
        out.pop("contact_surfaces", None)
        out.pop("ft_sensors.names", None)  # its sensors: every WrenchStamped under its ft/
        out["topics.actuators"] = ""
        for k in [k for k in out if k.startswith("actuators.")]:  # the first robot's drives,
            del out[k]  # not this one's (its own are in the world file, not in the bag)
    out["robot_name"] = robot
    return out


def bag_robots(path: str | Path) -> list[str]:
    """The robots of a bag of a node serving several ([] for one robot: the bag is read as
    ever); :func:`history_from_bag` ``robot=`` reads each."""
    with open_bag(Path(path)) as reader:
        return fleet_names(_parameters(reader, typestore(reader), Path(path)))


def _parameters(reader, ts, path: Path) -> dict[str, Any]:
    """The recorded node parameters ({} where the bag has none)."""
    params: dict[str, Any] = {}
    pconns = [c for c in reader.connections if c.topic == PARAMETERS_TOPIC]
    # (rosbags reads every topic when given no connections)
    for c, _, raw in reader.messages(pconns) if pconns else ():
        try:
            doc = json.loads(ts.deserialize_cdr(raw, c.msgtype).data)
            params = dict(doc.get("parameters", doc))
        except (ValueError, AttributeError, TypeError) as e:
            raise RecordingError(f"'{path}': unreadable '{PARAMETERS_TOPIC}': {e}") from None
    return params


def _read(path: Path, robot: str | None = None
          ) -> tuple[dict[str, list], dict[str, str], dict[str, Any]]:
    """Deserialized messages of the topics we use: ``({topic: [(log_ns, msg)]},
    {topic: type}, parameters)``; ``robot``: that robot's of several (:func:`robot_params`)."""
    with open_bag(path) as reader:
        ts = typestore(reader)
        types = {c.topic: c.msgtype for c in reader.connections}
        params = _parameters(reader, ts, path)
        names = fleet_names(params)
        if robot is not None:
            params = robot_params(params, robot)
        elif names:
            raise RecordingError(f"'{path}' records {len(names)} robots ({', '.join(names)}): "
                                 f"read one with history_from_bag(path, robot=NAME) "
                                 f"(wb_sim_plot plots each)")
        topics = {k: absolute(str(params.get(f"topics.{k}", d)))
                  for k, d in DEFAULT_TOPICS.items()}
        wanted = {topics[k] for k in ("joint_states", "odom", "robot_description",
                                      "joint_commands", "contact_state", "diagnostics")}
        drives = {r: f"{topics['actuators'].rstrip('/')}/{r}" for r in ACTUATOR_READINGS}
        wanted |= set(drives.values())
        prefix = topics["contact_wrench"].rstrip("/") + "/"
        # <prefix>/collision is the other links' total wrench (whole-body collision), not a
        # contact surface (no surface can take that name: it is a parameter group)
        wanted |= {t for t in types if t.startswith(prefix) and t != prefix + COLLISION_WRENCH}
        ft_prefix = topics["ft"].rstrip("/") + "/"
        # the force-torque sensors' WrenchStamped <prefix>/<sensor>
        ft = {t[len(ft_prefix):]: t for t, m in types.items()
              if t.startswith(ft_prefix) and m == WRENCH_TYPE and "/" not in t[len(ft_prefix):]}
        wanted |= set(ft.values())
        conns = [c for c in reader.connections if c.topic in wanted]
        msgs: dict[str, list] = {t: [] for t in wanted}
        for c, log_ns, raw in reader.messages(conns) if conns else ():
            try:
                msgs[c.topic].append((log_ns, ts.deserialize_cdr(raw, c.msgtype)))
            except Exception as e:  # noqa: BLE001 - rosbags raises several types
                raise RecordingError(f"'{path}': cannot decode a '{c.msgtype}' message on "
                                     f"'{c.topic}': {e}") from None
    return {"topics": topics, "prefix": prefix, "drives": drives, "ft": ft, **msgs}, types, \
        params


def _stamp(msg) -> int:
    s = msg.header.stamp
    return int(s.sec) * NS + int(s.nanosec)


def _hold(src_t: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the newest ``src_t`` at or before each ``t`` (-1 when none)."""
    return np.searchsorted(src_t, t, side="right") - 1


def _effort_limits(robot, params: dict[str, Any]) -> np.ndarray:
    from ..actuation import per_joint

    if params.get("joints.effort_limits", True) is False:
        return np.full(robot.nj, np.inf)
    values = tuple(float(x) for x in (params.get("joints.effort_limit") or ()))
    try:
        return per_joint("joints.effort_limit", values, robot, default=robot.effort_limit)
    except WbSimError as e:
        raise RecordingError(f"recorded parameters: {e}") from None


def history_from_bag(path: str | Path, robot: str | None = None) -> History:
    """The :class:`~wb_sim.tools.recording.History` of a bag of the node's topics (see the
    module docstring); :class:`RecordingError` naming what is missing. A bag of a node
    serving several robots: ``robot``, the name of the one to read (:func:`bag_robots`)."""
    from ..pin_views import new_data
    from ..robot import RobotModel

    path = Path(path)
    robot_name = robot
    data, types, params = _read(path, robot_name)
    topics = data["topics"]

    def need(key: str) -> list:
        msgs = data[topics[key]]
        if not msgs:
            have = ", ".join(sorted(types)) or "none"
            raise RecordingError(f"'{path}' has no '{topics[key]}' messages (topics in the "
                                 f"bag: {have})")
        return msgs

    urdf = need("robot_description")[-1][1].data
    js_msgs = need("joint_states")
    odom_msgs = data[topics["odom"]]
    floating = bool(params.get("floating_base", bool(odom_msgs)))
    base_placement = None
    if not floating:
        base_placement = pin.SE3(pin.rpy.rpyToMatrix(*params.get("initial.base_rpy", [0, 0, 0])),
                                 np.array(params.get("initial.base_position", [0.0] * 3),
                                          dtype=float))
    try:
        with warnings.catch_warnings():  # the simulator said what it did with mimic joints
            warnings.simplefilter("ignore")
            robot = RobotModel.from_urdf(robot_description=urdf, floating_base=floating,
                                         base_placement=base_placement, mimic="independent")
    except WbSimError as e:
        raise RecordingError(f"'{path}': the recorded robot_description: {e}") from None
    model = robot.model
    nj = robot.nj
    index = {n: i for i, n in enumerate(robot.joint_names)}

    # joint states: the time base; a state sent again (lockstep resends it while it
    # waits for a command) is kept once, at its first arrival
    js_msgs.sort(key=lambda lm: (_stamp(lm[1]), lm[0]))
    js_msgs = [lm for i, lm in enumerate(js_msgs)
               if i == 0 or _stamp(lm[1]) != _stamp(js_msgs[i - 1][1])]
    t_ns = np.array([_stamp(m) for _, m in js_msgs], dtype=np.int64)
    wall_ns = np.array([log for log, _ in js_msgs], dtype=np.int64)
    qj = np.full((len(js_msgs), nj), np.nan)
    vj = np.full((len(js_msgs), nj), np.nan)
    tau = np.full((len(js_msgs), nj), np.nan)
    order_cache: dict[tuple, np.ndarray] = {}
    for i, (_, m) in enumerate(js_msgs):
        key = tuple(m.name)
        cols = order_cache.get(key)
        if cols is None:
            unknown = [n for n in key if n not in index]
            if unknown:
                raise RecordingError(f"'{path}': joint_states names joints the URDF does not "
                                     f"have: {', '.join(unknown)}")
            cols = order_cache[key] = np.array([index[n] for n in key], dtype=np.intp)
        if len(m.position) == len(cols):
            qj[i, cols] = m.position
        if len(m.velocity) == len(cols):
            vj[i, cols] = m.velocity
        if len(m.effort) == len(cols):
            tau[i, cols] = m.effort

    # streams held at the joint-state times
    start = t_ns[0]
    if floating:
        if not odom_msgs:
            raise RecordingError(f"'{path}' has no '{topics['odom']}' messages, needed for the "
                                 f"pose of the floating base")
        odom_msgs.sort(key=lambda lm: _stamp(lm[1]))
        odom_t = np.array([_stamp(m) for _, m in odom_msgs], dtype=np.int64)
        start = max(start, odom_t[0])
    surfaces = sorted((t[len(data["prefix"]):], t) for t in types
                      if t.startswith(data["prefix"]) and data.get(t))
    configured = list(params.get("contact_surfaces") or [])
    if configured:  # the simulator's order, and only its surfaces
        surfaces = sorted((s for s in surfaces if s[0] in configured),
                          key=lambda s: configured.index(s[0]))
    wrenches = []
    for name, topic in surfaces:
        msgs = sorted(data[topic], key=lambda lm: _stamp(lm[1]))
        wt = np.array([_stamp(m) for _, m in msgs], dtype=np.int64)
        f = np.array([[m.wrench.force.x, m.wrench.force.y, m.wrench.force.z] for _, m in msgs])
        frame = msgs[-1][1].header.frame_id
        if robot_name is not None:  # its TF frames are '<robot>/<link>'
            frame = frame.removeprefix(f"{robot_name}/")
        try:
            fid = robot.frame_id(frame)
        except WbSimError:
            raise RecordingError(f"'{path}': '{topic}' is in frame '{frame}', which the URDF "
                                 f"does not have") from None
        wrenches.append((name, wt, f, fid))
        start = max(start, wt[0])
    keep = t_ns >= start
    if not keep.any():
        raise RecordingError(f"'{path}': the joint states, odometry and contact wrenches do "
                             f"not overlap in time")
    t_ns, wall_ns, qj, vj, tau = t_ns[keep], wall_ns[keep], qj[keep], vj[keep], tau[keep]
    n = t_ns.size

    # configurations -> centre of mass and surface orientations
    Q = np.tile(pin.neutral(model), (n, 1))
    one = robot.nq_joint == 1
    Q[:, robot.idx_q[one]] = qj[:, one]
    if (~one).any():
        iq = robot.idx_q[~one]
        Q[:, iq], Q[:, iq + 1] = np.cos(qj[:, ~one]), np.sin(qj[:, ~one])
    if floating:
        k = _hold(odom_t, t_ns)
        pose = np.array([[p.position.x, p.position.y, p.position.z, p.orientation.x,
                          p.orientation.y, p.orientation.z, p.orientation.w]
                         for p in (m.pose.pose for _, m in odom_msgs)])
        Q[:, :7] = pose[k]
        base = pose[k, :3]
    else:
        base = np.tile(base_placement.translation, (n, 1))
    data_pin = new_data(model)
    com = np.empty((n, 3))
    rot = np.empty((len(wrenches), n, 3, 3))
    bad = ~np.isfinite(Q).all(axis=1)
    for i in range(n):
        if bad[i]:
            com[i] = np.nan
            rot[:, i] = np.nan
            continue
        com[i] = pin.centerOfMass(model, data_pin, Q[i])  # also the joint placements
        for s, (_, _, _, fid) in enumerate(wrenches):
            rot[s, i] = pin.updateFramePlacement(model, data_pin, fid).rotation
    # a step's contact forces act at the configuration the step started from, the
    # previous joint state's when the stream has every step
    rate = params.get("physics_rate_hz")
    dt_ns = round(NS / float(rate)) if rate else \
        (int(np.median(np.diff(t_ns))) if n > 1 else 0)
    prev = np.arange(n) - 1
    consecutive = (prev >= 0) & (np.diff(t_ns, prepend=t_ns[0]) <= 1.5 * dt_ns)
    at = np.where(consecutive, prev, np.arange(n))
    force = np.empty((len(wrenches), n, 3))
    for s, (_, wt, f, _) in enumerate(wrenches):
        force[s] = np.einsum("nij,nj->ni", rot[s][at], f[_hold(wt, t_ns)])

    # reference positions from joint_commands (stamped with the joint state they answer)
    ref = np.full((n, nj), np.nan)
    cmds = sorted(data[topics["joint_commands"]], key=lambda lm: _stamp(lm[1]))
    rows, stamps, held = [], [], np.full(nj, np.nan)
    for _, m in cmds:
        if len(m.position) and len(m.position) == len(m.name):
            cols = [index.get(nm, -1) for nm in m.name]
            for c, x in zip(cols, m.position):
                if c >= 0:
                    held[c] = x
            rows.append(held.copy())
            stamps.append(_stamp(m))
    if rows:
        k = _hold(np.array(stamps, dtype=np.int64), t_ns)
        ref = np.where((k >= 0)[:, None], np.array(rows)[np.maximum(k, 0)], np.nan)

    dt = dt_ns / NS if dt_ns else math.nan
    drives = _drives(path, data, params, robot, urdf, wall_ns, dt)
    ft_names, ft_wrench = _ft_sensors(data, params, t_ns)
    truth = contact_truth(data[topics["contact_state"]], configured)
    truth.update(solver_health(data[topics["diagnostics"]]))
    return History(
        t=t_ns / NS, wall=(wall_ns - wall_ns[0]) / NS, base_position=base, com=com,
        contact_force=force.reshape(len(wrenches), n, 3), joint_positions=qj,
        reference_positions=ref, applied_torques=tau,
        torque_limits=_effort_limits(robot, params), joint_names=robot.joint_names,
        surface_names=tuple(s[0] for s in wrenches),
        ground_normal=np.array(params.get("ground.normal", [0.0, 0.0, 1.0]), dtype=float),
        friction_coefficient=float(params.get("contact.friction_coefficient", math.nan)),
        mass=robot.mass, gravity=np.array(params.get("gravity", [0.0, 0.0, -9.81]), dtype=float),
        robot=str(model.name), dt=dt, joint_units=joint_units(robot), joint_velocities=vj,
        ft_names=ft_names, ft_wrench=ft_wrench, **drives, **truth)


def _ft_sensors(data: dict, params: dict[str, Any], t_ns: np.ndarray):
    """(names, (n, k, 6) readings held at the joint-state stamps, NaN before a sensor's
    first message): the sensors of ``ft_sensors.names`` in that order (with a message),
    else every WrenchStamped under the ``ft`` prefix, sorted by name. A reading is stamped
    with the state its step led to, as the joint states."""
    topics = data["ft"]
    configured = [str(n) for n in params.get("ft_sensors.names") or []]
    names = [n for n in configured if data.get(topics.get(n, ""))] if configured else \
        sorted(n for n, t in topics.items() if data.get(t))
    out = np.full((t_ns.size, len(names), 6), np.nan)
    for k, name in enumerate(names):
        msgs = sorted(data[topics[name]], key=lambda lm: _stamp(lm[1]))
        st = np.array([_stamp(m) for _, m in msgs], dtype=np.int64)
        w = np.array([[m.wrench.force.x, m.wrench.force.y, m.wrench.force.z,
                       m.wrench.torque.x, m.wrench.torque.y, m.wrench.torque.z]
                      for _, m in msgs])
        i = _hold(st, t_ns)
        out[i >= 0, k] = w[i[i >= 0]]
    return tuple(names), out


def read_contact_state(msg) -> dict[str, Any]:
    """A ``contact_state`` message (wb_sim_interfaces/msg/ContactState, rclpy's or rosbags')
    as arrays: ``stamp_ns``, ``frame_id``; per point (n): ``surface``, ``frame``, ``index``,
    ``position`` (n, 3) m, ``normal`` (n, 3), ``penetration`` (n,) m, ``force`` (n, 3) N,
    ``mode`` (n,) (0 none, 1 stick, 2 slip); per surface (S): ``surface_names``,
    ``surface_frames``, ``cop`` (S, 3) m, ``surface_force`` (S, 3) N, ``normal_force`` (S,) N;
    ``zmp`` (3,) m, ``com`` (3,) m, ``momentum`` (6,): linear kg*m/s, angular about the
    centre of mass kg*m^2/s. World frame."""
    def xyz(vectors) -> np.ndarray:
        return np.array([[v.x, v.y, v.z] for v in vectors], dtype=float).reshape(-1, 3)

    pts, sfs = list(msg.points), list(msg.surfaces)
    st = msg.header.stamp
    return {
        "stamp_ns": int(st.sec) * NS + int(st.nanosec), "frame_id": str(msg.header.frame_id),
        "surface": [str(p.surface) for p in pts], "frame": [str(p.frame) for p in pts],
        "index": np.array([p.index for p in pts], dtype=int),
        "position": xyz(p.position for p in pts), "normal": xyz(p.normal for p in pts),
        "penetration": np.array([p.penetration for p in pts], dtype=float),
        "force": xyz(p.force for p in pts), "mode": np.array([p.mode for p in pts], dtype=int),
        "surface_names": [str(f.name) for f in sfs], "surface_frames": [str(f.frame) for f in sfs],
        "cop": xyz(f.centre_of_pressure for f in sfs), "surface_force": xyz(f.force for f in sfs),
        "normal_force": np.array([f.normal_force for f in sfs], dtype=float),
        "zmp": xyz([msg.zmp])[0], "com": xyz([msg.com])[0],
        "momentum": np.concatenate([xyz([msg.linear_momentum])[0],
                                    xyz([msg.angular_momentum])[0]]),
    }


def contact_truth(msgs: list, surfaces: list[str]) -> dict[str, Any]:
    """The History fields of the contact truth from ``contact_state`` messages ((log_ns,
    msg) pairs): each sample's stamp, each surface's centre of pressure, the ZMP, in stamp
    order, a stamp once; the surfaces in the messages' order (their names; ``surfaces``,
    the simulator's, where the messages name none). Nothing recorded: {}."""
    rows = {}
    for _, m in msgs:
        x = read_contact_state(m)
        rows.setdefault(x["stamp_ns"], x)
    if not rows:
        return {}
    t = np.array(sorted(rows), dtype=np.int64)
    cop = np.stack([rows[k]["cop"] for k in t], axis=1)
    names = tuple(rows[t[0]]["surface_names"]) or tuple(surfaces)
    if len(names) != cop.shape[0]:
        names = tuple(f"surface {i}" for i in range(cop.shape[0]))
    return {"truth_t": t / NS, "cop": cop, "zmp": np.array([rows[k]["zmp"] for k in t]),
            "cop_names": names}


#: the simulator's diagnostic statuses are named ``wb_sim: <group>`` (wb_sim.ros.health)
HEALTH_PREFIX = "wb_sim: "
#: a figure the node did not measure in that window (wb_sim.ros.health)
NOT_MEASURED = "not measured"


def _number(text: str) -> float | None:
    """A KeyValue's value as the float it prints (``'not measured'``: NaN); None: not a number."""
    if text == NOT_MEASURED:
        return math.nan
    try:
        return float(text)
    except ValueError:
        return None


def solver_health(msgs: list) -> dict[str, Any]:
    """The History fields of the solver health from ``/diagnostics`` messages ((log_ns,
    DiagnosticArray) pairs): one sample per message of the simulator (a status named
    ``wb_sim: <group>``; other nodes' statuses are skipped), in (stamp, receive) order, its
    time the header stamp; one column ``<group>/<key>`` per figure whose every value is a
    number (``float`` of its text; ``'not measured'``: NaN), in the order first published;
    NaN where a sample lacks the figure. Nothing recorded: {}."""
    rows: list[tuple[int, int, dict[str, float]]] = []
    names: dict[str, bool] = {}  # name -> every value a number so far
    for log_ns, m in msgs:
        row = {}
        for st in m.status:
            if not st.name.startswith(HEALTH_PREFIX):
                continue
            group = st.name[len(HEALTH_PREFIX):]
            for kv in st.values:
                name = f"{group}/{kv.key}"
                x = _number(kv.value)
                names[name] = names.get(name, True) and x is not None
                if x is not None:
                    row[name] = x
        if row or any(st.name.startswith(HEALTH_PREFIX) for st in m.status):
            rows.append((_stamp(m), log_ns, row))
    if not rows:
        return {}
    rows.sort(key=lambda r: (r[0], r[1]))
    cols = [n for n, numeric in names.items() if numeric]
    values = np.array([[r.get(n, math.nan) for n in cols] for _, _, r in rows],
                      dtype=float).reshape(len(rows), len(cols))
    return {"health_t": np.array([r[0] for r in rows], dtype=np.int64) / NS, "health": values,
            "health_names": tuple(cols)}


def _drives(path: Path, data: dict, params: dict[str, Any], robot, urdf: str,
            wall_ns: np.ndarray, dt: float) -> dict[str, Any]:
    """The History fields of the drives (actuator model, driven joints, constants, readings
    at the joint-state samples; NaN at a sample without a reading), or {} without readings.
    Each reading message takes the sample of the joint state received last before it."""
    msgs = {r: data[topic] for r, topic in data["drives"].items()}
    if not any(msgs.values()):
        return {}
    nj, n = robot.nj, wall_ns.size
    model = str(params.get("actuators.model", ""))
    driven: tuple[str, ...] = ()
    constants = None
    if model and model != "ideal":
        from ..actuators import make_actuators
        from ..config import load_config

        try:
            cfg = load_config({"robot_description": urdf, **{
                k: v for k, v in params.items() if k.startswith("actuators.")}})
            model, driven, constants = drive_parameters(make_actuators(
                robot, cfg.actuators, dt if dt > 0 else 1e-3))  # (dt: not in the constants)
        except WbSimError as e:
            raise RecordingError(f"'{path}': the recorded actuators.* parameters: {e}") from None
    else:  # a bag without the recorder's parameters: the joints with readings, no constants
        seen = np.zeros(nj, dtype=bool)
        for _, m in (lm for ms in msgs.values() for lm in ms):
            if len(m.data) == nj:
                seen |= np.isfinite(np.asarray(m.data, dtype=float))
        driven = tuple(j for j, s in zip(robot.joint_names, seen) if s)
        model = ""
    cols = np.array([robot.joint_names.index(j) for j in driven], dtype=int)
    order = np.argsort(wall_ns, kind="stable")
    received = wall_ns[order]
    out: dict[str, Any] = {"actuator_model": model, "actuator_joints": driven,
                           "drive_parameters": constants if constants is not None
                           else np.full((len(driven), len(DRIVE_COLUMNS)), np.nan)}
    for reading, field in ACTUATOR_READINGS.items():
        values = np.full((n, len(driven)), np.nan)
        for log_ns, m in msgs[reading]:
            k = int(np.searchsorted(received, log_ns, side="right")) - 1
            if k < 0 or len(m.data) != nj:
                continue  # before the first joint state kept, or not this robot's
            values[order[k]] = np.asarray(m.data, dtype=float)[cols]
        out[field] = values
    return out
