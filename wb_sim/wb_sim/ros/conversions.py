"""Conversions between the core's state and ROS 2 messages: pure functions.

``fill_*`` write into an existing message (the node reuses one message per
stream, so nothing is allocated per step but the float lists); ``parse_*``
validate an incoming command and return torques, or raise
:class:`CommandRejected` with the reason. Stamps are simulated time.
"""

from __future__ import annotations

import array
import struct
from typing import Mapping, Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped, WrenchStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from wb_sim_interfaces.msg import ContactPoint, ContactState, SurfaceContact

from .. import compiled
from ..actuators import ActuatorReading
from ..sensors import (ContactWrench, ImuReading, pressure_centre,  # noqa: F401 - re-exported
                       surface_pressure_centres)
from .frames import Transform
from .gate import (CommandRejected, check_finite, parse_effort_array,  # noqa: F401 - re-exported
                   parse_joint_command_arrays)

NS_PER_S = 1_000_000_000


# ----------------------------------------------------------------------------- contact_state

#: a contact point's status (the core's 'none' / 'stick' / 'slip') -> ContactPoint.mode
CONTACT_MODES = {"none": ContactPoint.MODE_NONE, "stick": ContactPoint.MODE_STICK,
                 "slip": ContactPoint.MODE_SLIP}


def _xyz(vec, x) -> None:
    """Set a geometry_msgs Point / Vector3 from three floats."""
    vec.x, vec.y, vec.z = x


class ContactStateMessage:
    """``contact_state`` messages of one robot (wb_sim_interfaces/msg/ContactState): the
    surfaces' contact points of a :class:`~wb_sim.sensors.ContactPointsReading` (with
    normals), each surface's centre of pressure, force and normal force, the ZMP, the
    centre of mass and the centroidal momentum. The message, its points and surfaces (their
    names, frames and indices) are made once (``surface_of_point``: each point's surface
    index into ``surface_names`` / ``surface_frames``) and refilled by each call."""

    def __init__(self, surface_of_point: Sequence[int], surface_names: Sequence[str],
                 surface_frames: Sequence[str], frame_id: str):
        self.surface = np.asarray(surface_of_point, dtype=np.intp)
        self.n_surfaces = len(surface_names)
        self.msg = msg = ContactState()
        msg.header.frame_id = frame_id
        counts: dict[int, int] = {}
        points = []
        for s in self.surface.tolist():
            counts[s] = counts.get(s, -1) + 1
            points.append(ContactPoint(surface=surface_names[s], frame=surface_frames[s],
                                       index=counts[s]))
        msg.points = points
        msg.surfaces = [SurfaceContact(name=n, frame=f)
                        for n, f in zip(surface_names, surface_frames)]

    def __call__(self, t_ns: int, reading, com: np.ndarray, momentum: np.ndarray
                 ) -> ContactState:
        P, F, N = reading.position, reading.force, reading.normal
        idx, S, msg = self.surface, self.n_surfaces, self.msg
        cop = surface_pressure_centres(P, F, N, idx, S)
        total = np.stack([np.bincount(idx, weights=F[:, a], minlength=S) for a in range(3)],
                         axis=1)
        normal = np.bincount(idx, weights=np.einsum("ij,ij->i", F, N), minlength=S)
        for p, x, n, d, f, status in zip(msg.points, P.tolist(), N.tolist(),
                                         reading.depth.tolist(), F.tolist(), reading.status):
            _xyz(p.position, x)
            _xyz(p.normal, n)
            p.penetration = d
            _xyz(p.force, f)
            p.mode = CONTACT_MODES[status]
        for sf, c, f, fn in zip(msg.surfaces, cop.tolist(), total.tolist(), normal.tolist()):
            _xyz(sf.centre_of_pressure, c)
            _xyz(sf.force, f)
            sf.normal_force = fn
        _xyz(msg.zmp, pressure_centre(P, F, N).tolist())
        _xyz(msg.com, np.asarray(com, dtype=float).tolist())
        h = np.asarray(momentum, dtype=float).tolist()
        _xyz(msg.linear_momentum, h[:3])
        _xyz(msg.angular_momentum, h[3:])
        msg.header.stamp.sec, msg.header.stamp.nanosec = t_ns // NS_PER_S, t_ns % NS_PER_S
        return msg


def contact_state_msg(t_ns: int, reading, surface_names: Sequence[str],
                      surface_frames: Sequence[str], com: np.ndarray, momentum: np.ndarray,
                      frame_id: str = "world") -> ContactState:
    """One ``contact_state`` message (:class:`ContactStateMessage`, made for it)."""
    index = {name: k for k, name in enumerate(surface_names)}
    return ContactStateMessage([index[x] for x in reading.surface], surface_names,
                               surface_frames, frame_id)(t_ns, reading, com, momentum)


# ----------------------------------------------------------------------------- contact_sensors

#: the columns of a contact sensor's row in a ``contact_sensors`` message
CONTACT_SENSOR_COLUMNS = ("normal force (N)", "raw contact (0/1)", "debounced contact (0/1)")


class LabelledRowsMessage:
    """A Float64MultiArray holding the stamp (sec, nanosec) then one row of ``width``
    numbers per name; ``layout.dim[0]`` = ('stamp', 1, 2), ``layout.dim[1 + i]`` = (name i,
    1, width): labelled sections, read back by name. Made once,
    refilled by each call (:func:`read_labelled_rows` reads it back)."""

    width = 0

    def __init__(self, names: Sequence[str], width: int | None = None):
        self.names = tuple(names)
        w = self.width if width is None else width
        n = len(self.names)
        self.buffer = np.zeros(2 + w * n)
        self.rows = self.buffer[2:].reshape(n, w)
        self.msg = Float64MultiArray()
        self.msg.layout.dim = [MultiArrayDimension(label="stamp", size=1, stride=2)] + [
            MultiArrayDimension(label=name, size=1, stride=w) for name in self.names]

    def __call__(self, t_ns: int, rows: np.ndarray) -> Float64MultiArray:
        """``rows``: (n, width)."""
        self.buffer[0], self.buffer[1] = t_ns // NS_PER_S, t_ns % NS_PER_S
        self.rows[:] = rows
        self.msg.data = array.array("d", self.buffer.tobytes())
        return self.msg


class ContactSensorsMessage(LabelledRowsMessage):
    """``contact_sensors`` messages: one row [normal force N, raw 0/1, debounced 0/1] per
    sensor, labelled with its name (``names``: the simulator's ``contact_sensors.names``
    order; ``readings`` the simulator's ``contact_sensor_array()``)."""

    width = 3


class LoopClosuresMessage(LabelledRowsMessage):
    """``loop_closures`` messages: one row [fx, fy, fz, tx, ty, tz] per closure, labelled
    with its name (frame_a-frame_b): the wrench the closure exerted on frame_a during the
    step, at frame_a's origin, world axes, N and N*m (the simulator's
    ``loop_closure_wrenches``)."""

    width = 6


def read_labelled_rows(msg, what: str = "labelled rows") -> tuple[int, dict[str, np.ndarray]]:
    """A :class:`LabelledRowsMessage` back: (stamp ns, name -> its row)."""
    data = np.asarray(msg.data, dtype=float)
    dims = list(msg.layout.dim)
    if not dims or dims[0].label != "stamp":
        raise ValueError(f"not a {what} message: its first dimension is not 'stamp'")
    t_ns = int(data[0]) * NS_PER_S + int(data[1])
    out, at = {}, 2
    for dim in dims[1:]:
        out[dim.label] = data[at:at + dim.stride].copy()
        at += dim.stride
    return t_ns, out


def read_contact_sensors(msg) -> tuple[int, dict[str, np.ndarray]]:
    """A ``contact_sensors`` message back: (stamp ns, sensor name -> [normal force, raw,
    debounced])."""
    return read_labelled_rows(msg, "contact_sensors")


def read_loop_closures(msg) -> tuple[int, dict[str, np.ndarray]]:
    """A ``loop_closures`` message back: (stamp ns, closure name -> [force, torque])."""
    return read_labelled_rows(msg, "loop_closures")


# ----------------------------------------------------------------------------- time


def time_msg(t_ns: int) -> Time:
    """builtin_interfaces/Time of ``t_ns`` nanoseconds."""
    return Time(sec=t_ns // NS_PER_S, nanosec=t_ns % NS_PER_S)


def time_ns(stamp: Time) -> int:
    """Nanoseconds of a builtin_interfaces/Time."""
    return stamp.sec * NS_PER_S + stamp.nanosec


# ----------------------------------------------------------------------------- state out


def fill_joint_state(msg: JointState, stamp: Time, q: np.ndarray, v: np.ndarray,
                     effort: np.ndarray) -> JointState:
    """Joint positions (rad or m), velocities and the applied efforts; the
    names are set once by the caller (``msg.name``)."""
    msg.header.stamp = stamp
    msg.position = q.tolist()
    msg.velocity = v.tolist()
    msg.effort = effort.tolist()
    return msg


def imu_covariances(angular_velocity_std: float, linear_acceleration_std: float):
    """(orientation, angular velocity, linear acceleration) covariances, row-major 3x3.

    The orientation is the exact simulated one (covariance 0); the others are
    the configured white noise variances on the diagonal.
    """
    def diag(s):
        return [s * s if i % 4 == 0 else 0.0 for i in range(9)]

    return [0.0] * 9, diag(angular_velocity_std), diag(linear_acceleration_std)


def fill_imu(msg: Imu, stamp: Time, reading: ImuReading) -> Imu:
    """sensor_msgs/Imu from a reading (REP 145); frame_id and covariances are
    set once by the caller."""
    msg.header.stamp = stamp
    o, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
    o.x, o.y, o.z, o.w = reading.orientation.tolist()
    w.x, w.y, w.z = reading.angular_velocity.tolist()
    a.x, a.y, a.z = reading.linear_acceleration.tolist()
    return msg


def fill_wrench(msg: WrenchStamped, stamp: Time, wrench: ContactWrench) -> WrenchStamped:
    """Force (N) and torque (N*m) about the surface frame's origin, in that frame."""
    msg.header.stamp = stamp
    msg.header.frame_id = wrench.frame
    f, t = msg.wrench.force, msg.wrench.torque
    f.x, f.y, f.z = wrench.force.tolist()
    t.x, t.y, t.z = wrench.torque.tolist()
    return msg


def fill_odometry(msg: Odometry, stamp: Time, position: np.ndarray, quaternion: np.ndarray,
                  B_v: np.ndarray, B_omega: np.ndarray) -> Odometry:
    """nav_msgs/Odometry of the base: pose world <- base, twist in the base
    frame (``child_frame_id``), as nav_msgs specifies. ``B_v`` is the base
    origin's velocity and ``B_omega`` its angular velocity, both in base axes."""
    msg.header.stamp = stamp
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    p.x, p.y, p.z = position.tolist()
    o.x, o.y, o.z, o.w = quaternion.tolist()
    lin, ang = msg.twist.twist.linear, msg.twist.twist.angular
    lin.x, lin.y, lin.z = B_v.tolist()
    ang.x, ang.y, ang.z = B_omega.tolist()
    return msg


def transform_msg(stamp: Time, tf: Transform) -> TransformStamped:
    msg = TransformStamped()
    fill_transform(msg, stamp, tf)
    return msg


def fill_transform(msg: TransformStamped, stamp: Time, tf: Transform) -> TransformStamped:
    msg.header.stamp = stamp
    msg.header.frame_id = tf.parent
    msg.child_frame_id = tf.child
    t, r = msg.transform.translation, msg.transform.rotation
    t.x, t.y, t.z = tf.translation.tolist()
    r.x, r.y, r.z, r.w = tf.rotation.tolist()
    return msg


def transform_msgs(parents: Sequence[str], children: Sequence[str]) -> list[TransformStamped]:
    """TransformStamped messages with their frame ids set, for :func:`fill_transforms`."""
    out = []
    for p, c in zip(parents, children):
        m = TransformStamped()
        m.header.frame_id, m.child_frame_id = p, c
        out.append(m)
    return out


def fill_transforms(msgs: Sequence[TransformStamped], stamp: Time, translation: np.ndarray,
                    rotation: np.ndarray) -> Sequence[TransformStamped]:
    """Stamp and fill messages from (m, 3) translations and (m, 4) quaternions (x, y, z, w)."""
    for m, t, r in zip(msgs, translation.tolist(), rotation.tolist()):
        m.header.stamp = stamp
        tr, ro = m.transform.translation, m.transform.rotation
        tr.x, tr.y, tr.z = t
        ro.x, ro.y, ro.z, ro.w = r
    return msgs


# ----------------------------------------------------------------------------- serialized templates

_SENTINEL_SEC, _SENTINEL_NSEC = 0x5A3C1D2E, 0x1B2C3D4E
#: builtin_interfaces/Time as the serializer writes it (native byte order, like the
#: float fields; the sentinel search finds it only if so): sec (int32 in the message;
#: simulated time is never negative), nanosec
_STAMP = struct.Struct("=II")


class CdrTemplate:
    """A message serialized once; each :meth:`serialize` patches its numbers in place.

    Only the stamp(s) and float64 fields change from one message of a stream to
    the next (joint names and frame ids are fixed), so instead of converting
    the whole Python message to C at every publish, the node copies a byte
    buffer whose numbers it has overwritten, and publishes it serialized
    (``Publisher.publish`` accepts ``bytes``). For a 23-joint JointState that
    is 4 us instead of 11 us.

    ``fill(msg, stamp, *arrays)`` writes a stamp and float arrays of the given
    ``sizes`` into ``msg``; it is called once with sentinel values, whose byte
    patterns locate the fields in the serialized buffer. Raises ``ValueError``
    if a pattern is not found exactly once (then publish messages instead).
    """

    def __init__(self, msg, fill, sizes: Sequence[int]):
        from rclpy.serialization import serialize_message

        rng = np.random.default_rng(0x5EED)
        sentinels = [rng.uniform(1.0e5, 2.0e5, n) for n in sizes]  # high-entropy doubles
        fill(msg, Time(sec=_SENTINEL_SEC, nanosec=_SENTINEL_NSEC), *sentinels)
        data = serialize_message(msg)
        self._buf = bytearray(data)
        self._stamps = _find_all(data, _STAMP.pack(_SENTINEL_SEC, _SENTINEL_NSEC))  # offsets
        if not self._stamps:
            raise ValueError("stamp not found in the serialized message")
        self._arrays = []
        for x in sentinels:
            offsets = _find_all(data, x.tobytes()) if x.size else [0]
            if len(offsets) != 1:
                raise ValueError(f"a float field was found {len(offsets)} times")
            self._arrays.append(np.ndarray(x.size, dtype=np.float64, buffer=self._buf,
                                           offset=offsets[0]))

    def serialize(self, t_ns: int, *arrays: np.ndarray) -> bytes:
        """The serialized message stamped ``t_ns`` with ``arrays`` in its float fields."""
        sec, nsec = divmod(t_ns, NS_PER_S)
        buf = self._buf
        for offset in self._stamps:
            _STAMP.pack_into(buf, offset, sec, nsec)
        for dst, src in zip(self._arrays, arrays):
            dst[...] = src
        return bytes(buf)


def _find_all(data: bytes, pattern: bytes) -> list[int]:
    out, i = [], data.find(pattern)
    while i >= 0:
        out.append(i)
        i = data.find(pattern, i + 1)
    return out


def joint_state_template(names: Sequence[str]) -> CdrTemplate:
    """JointState: (positions, velocities, efforts)."""
    n = len(names)
    return CdrTemplate(JointState(name=list(names)), fill_joint_state, (n, n, n))


def imu_template(frame: str, covariances) -> CdrTemplate:
    """Imu: (orientation x y z w, angular velocity, proper linear acceleration)."""
    msg = Imu()
    msg.header.frame_id = frame
    (msg.orientation_covariance, msg.angular_velocity_covariance,
     msg.linear_acceleration_covariance) = covariances

    def fill(m, stamp, o, w, a):
        fill_imu(m, stamp, ImuReading(frame, o, w, a))
    return CdrTemplate(msg, fill, (4, 3, 3))


def wrench_template(frame: str) -> CdrTemplate:
    """WrenchStamped: (force, torque)."""
    def fill(m, stamp, f, t):
        fill_wrench(m, stamp, ContactWrench(frame, f, t))
    return CdrTemplate(WrenchStamped(), fill, (3, 3))


def odometry_template(world_frame: str, base_frame: str) -> CdrTemplate:
    """Odometry: (position, quaternion x y z w, base-frame linear velocity, angular velocity)."""
    msg = Odometry()
    msg.header.frame_id, msg.child_frame_id = world_frame, base_frame
    return CdrTemplate(msg, fill_odometry, (3, 4, 3, 3))


def clock_template() -> CdrTemplate:
    from rosgraph_msgs.msg import Clock

    def fill(m, stamp):
        m.clock = stamp
    return CdrTemplate(Clock(), fill, ())


def tf_template(parents: Sequence[str], children: Sequence[str]) -> CdrTemplate:
    """TFMessage of len(parents) transforms, one stamp: (translation + quaternion) per transform."""
    from tf2_msgs.msg import TFMessage

    def fill(m, stamp, *rows):
        m.transforms = transform_msgs(parents, children)
        fill_transforms(m.transforms, stamp, np.array([r[:3] for r in rows]).reshape(-1, 3),
                        np.array([r[3:] for r in rows]).reshape(-1, 4))
    return CdrTemplate(TFMessage(), fill, (7,) * len(parents))


# ----------------------------------------------------------------------------- commands in


def parse_joint_commands(msg: JointState, index: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Validate the efforts of a sensor_msgs/JointState command (``name`` + ``effort``;
    the node reads every field, and so the command modes, through
    :func:`wb_sim.ros.gate.parse_joint_command`).

    Returns the joint indices (in the simulator's order) and their efforts.
    Any subset of joints is allowed; an empty, inconsistent, duplicated,
    unknown-name or non-finite message raises :class:`CommandRejected`.
    """
    return parse_joint_command_arrays(msg.name, msg.effort, index)


#: the drives' readings, each a Float64MultiArray on <topics.actuators>/<name>: (name, field)
ACTUATOR_READINGS = (("current", "current"), ("voltage", "voltage"),
                     ("temperature", "temperature"))


def actuator_arrays(names: Sequence[str]) -> tuple[Float64MultiArray, ...]:
    """One std_msgs/Float64MultiArray per reading of :data:`ACTUATOR_READINGS`, its layout
    one dimension labelled ``joints`` of ``len(names)`` entries (joint_states' order)."""
    from std_msgs.msg import MultiArrayDimension
    out = []
    for _ in ACTUATOR_READINGS:
        msg = Float64MultiArray()
        msg.layout.dim = [MultiArrayDimension(label="joints", size=len(names),
                                              stride=len(names))]
        out.append(msg)
    return tuple(out)


def fill_actuator_arrays(msgs: Sequence[Float64MultiArray],
                         reading: ActuatorReading) -> Sequence[Float64MultiArray]:
    """The reading's current (A), voltage (V) and temperature (C) into ``msgs``
    (:func:`actuator_arrays`); NaN stays NaN (a joint without a motor model)."""
    for msg, (_, field) in zip(msgs, ACTUATOR_READINGS):
        msg.data = getattr(reading, field).tolist()
    return msgs


def parse_effort_commands(msg: Float64MultiArray, names: Sequence[str]) -> np.ndarray:
    """Validate a std_msgs/Float64MultiArray of efforts in ``names`` order."""
    return parse_effort_array(msg.data, names)


def parse_external_wrench(msg: WrenchStamped) -> tuple[str, np.ndarray, np.ndarray]:
    """Validate a geometry_msgs/WrenchStamped push: (link = ``header.frame_id``,
    force N, torque N*m), both in the link's frame. The link's existence is the
    simulator's to check."""
    link = msg.header.frame_id
    if not link:
        raise CommandRejected("header.frame_id is empty: it must name the pushed link", "empty frame")
    f, t = msg.wrench.force, msg.wrench.torque
    force = np.array([f.x, f.y, f.z])
    torque = np.array([t.x, t.y, t.z])
    if not (np.isfinite(force).all() and np.isfinite(torque).all()):
        raise CommandRejected(f"non-finite wrench on '{link}'", "non-finite")
    return link, force, torque


def joint_commands_msg(names: Sequence[str], efforts: Sequence[float],
                       stamp: Time | None = None) -> JointState:
    """A sensor_msgs/JointState command (for controllers and tests)."""
    msg = JointState(name=list(names), effort=[float(e) for e in efforts])
    if stamp is not None:
        msg.header.stamp = stamp
    return msg


# ----------------------------------------------------------------------------- CDR in
# Reading the two state messages a controller needs straight from their serialized
# form (``raw=True`` subscriptions): rclpy's deserialization builds a Python object
# per nested message (an Odometry is ~20 of them, ~75 us), where a controller needs a
# stamp and a few arrays. XCDR1 little endian, as every ROS 2 RMW sends them.


class _CdrReader:
    """Sequential reader of a serialized ROS 2 message (alignment relative to the
    payload after the 4-byte encapsulation header)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        if len(data) < 4 or data[1] != 1:  # 0x0001: CDR little endian
            raise ValueError("not a little-endian CDR message")
        self.data = data
        self.pos = 4

    def _align(self, n: int) -> None:
        self.pos += -(self.pos - 4) % n

    def _need(self, n: int) -> None:
        if self.pos + n > len(self.data):
            raise ValueError("message too short")

    def u32(self) -> int:
        self._align(4)
        self._need(4)
        v = int.from_bytes(self.data[self.pos:self.pos + 4], "little")
        self.pos += 4
        return v

    def stamp_ns(self) -> int:
        sec = self.u32()
        sec -= (sec >> 31) << 32  # int32
        return sec * NS_PER_S + self.u32()

    def skip_string(self) -> None:
        n = self.u32()
        self._need(n)
        self.pos += n

    def string(self) -> str:
        n = self.u32()
        self._need(n)
        s = self.data[self.pos:self.pos + n - 1].decode()
        self.pos += n
        return s

    def doubles(self, n: int) -> np.ndarray:
        if n == 0:  # no elements, no padding
            return np.empty(0)
        self._align(8)
        self._need(8 * n)
        a = np.frombuffer(self.data, dtype="<f8", count=n, offset=self.pos)
        self.pos += 8 * n
        return a

    def double_sequence(self) -> np.ndarray:
        return self.doubles(self.u32())


class JointStateReader:
    """Reads serialized sensor_msgs/JointState messages of one stream:
    ``reader(data) -> (stamp_ns, position, velocity, effort)``, the arrays
    read-only views into ``data``; :attr:`names` holds the joint names of the
    last message, decoded again only when their serialized bytes change
    (:attr:`names_changed`), which for a sender that reuses its buffer (the
    simulator node) is never.
    Raises ``ValueError`` for a malformed message.

    Where the compiled kernels run (:mod:`wb_sim.compiled`; not with ``WB_SIM_PLAIN=1`` when
    the reader is made) one compiled call finds the fields (``_compiled.cdr_joint_state``:
    6 -> ~1.5 us a message); :meth:`read_plain` is its reference. A message the compiled call
    finds malformed is read again by :meth:`read_plain`, so that its error (and the names it
    leaves) are the reference's."""

    def __init__(self):
        self.names: list[str] = []
        self.names_changed = False
        self._key = b""
        k = compiled.kernels()
        self._kernel = None if k is None else k.cdr_joint_state

    def __call__(self, data: bytes) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        kernel = self._kernel
        if kernel is None:
            return self.read_plain(data)
        try:
            stamp, start, end, same, po, pn, vo, vn, eo, en = kernel(data, self._key)
        except ValueError:  # malformed: the reference's own error, and names as it leaves them
            return self.read_plain(data)
        if not same:
            r = _CdrReader(data)
            r.pos = start
            self.names = [r.string() for _ in range(r.u32())]
            self._key = bytes(data[start:end])
        self.names_changed = not same
        f = np.frombuffer
        return (stamp, f(data, "<f8", pn, po) if pn else np.empty(0),
                f(data, "<f8", vn, vo) if vn else np.empty(0),
                f(data, "<f8", en, eo) if en else np.empty(0))

    def read_plain(self, data: bytes) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """The reader in Python: the reference of the compiled path."""
        r = _CdrReader(data)
        stamp = r.stamp_ns()
        r.skip_string()  # frame_id
        r._align(4)
        start = r.pos
        key = self._key  # (padding bytes are part of it: a sender whose padding varies
        # only costs a decode, never a wrong name list)
        if key and data.startswith(key, start):
            r.pos = start + len(key)
            self.names_changed = False
        else:
            self.names = [r.string() for _ in range(r.u32())]
            self._key = bytes(data[start:r.pos])
            self.names_changed = True
        return stamp, r.double_sequence(), r.double_sequence(), r.double_sequence()


class OdometryPoseReader:
    """``reader(data) -> (stamp_ns, [x, y, z, qx, qy, qz, qw])`` (a new array) of serialized
    nav_msgs/Odometry messages: one compiled call (``_compiled.cdr_odometry_pose``, 3 -> ~1
    us) where the kernels run (:mod:`wb_sim.compiled`, chosen when the reader is made),
    :func:`read_odometry_pose` otherwise, its reference. ``ValueError`` for a malformed
    message."""

    def __init__(self):
        k = compiled.kernels()
        self._kernel = None if k is None else k.cdr_odometry_pose

    def __call__(self, data: bytes) -> tuple[int, np.ndarray]:
        if self._kernel is None:
            return read_odometry_pose(data)
        stamp, offset = self._kernel(data)
        return stamp, np.frombuffer(data, "<f8", 7, offset).copy()


def read_odometry_pose(data: bytes) -> tuple[int, np.ndarray]:
    """A serialized nav_msgs/Odometry: ``(stamp_ns, [x, y, z, qx, qy, qz, qw])``."""
    r = _CdrReader(data)
    stamp = r.stamp_ns()
    r.skip_string()  # frame_id
    r.skip_string()  # child_frame_id
    return stamp, r.doubles(7).copy()
