"""A controller's fast I/O over public rclpy: the robot's state in, joint commands out.

A closed loop in lockstep (``sync.mode: lockstep``) is a round trip per physics step:
the node publishes the state, the controller answers, the node steps. At 1 kHz and
beyond, what the controller spends on messages bounds the loop: rclpy converts every
incoming message into Python objects (a nav_msgs/Odometry is about 20 of them, ~75 us;
a 23-joint JointState ~18 us) and every outgoing one from them (~11 us). A controller
needs a stamp and a few arrays, so these helpers subscribe to the serialized messages
(``raw=True``, public rclpy), read the numbers straight from their CDR bytes
(:class:`~.conversions.JointStateReader`, :class:`~.conversions.OdometryPoseReader`:
one compiled call each where wb_sim's kernels are built, ~2 and ~1 us; 6 and 3 us on the
plain path) and publish a serialized template whose numbers are patched
(:class:`~.conversions.CdrTemplate`, 4 us).

* :class:`RobotStateIntake`: ``joint_states`` and, for a floating base, the base pose
  of ``odom/ground_truth``, paired by stamp (the joint state and the pose of one step),
  handed to ``on_state(stamp_ns, positions, velocities, base_pose)`` once per step.
* :class:`JointCommandWriter`: ``joint_commands`` (sensor_msgs/JointState: ``name``
  and ``position`` / ``velocity`` / ``effort``) stamped with the state it answers.

The example controller (:mod:`.pd_controller`) uses them; copy it, not them. Both
work on any ROS 2 distribution (``raw=True`` subscriptions and ``publish(bytes)`` are
public rclpy since Foxy).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState

from . import conversions as cv

#: ``on_state(stamp_ns, positions, velocities, base_pose)``: joint arrays in the order of
#: :attr:`RobotStateIntake.names` (read-only views), the base pose ``[x, y, z, qx, qy,
#: qz, qw]`` in the world frame (None for a fixed base)
OnState = Callable[[int, np.ndarray, np.ndarray, "np.ndarray | None"], None]


class RobotStateIntake:
    """The robot's state, one call per simulator step.

    ``node``: the controller's rclpy node; ``joint_states`` / ``odom``: the topics
    (``odom`` None or '' for a fixed base); ``qos``: the subscriptions' QoS. With
    ``pair_by_stamp`` (both streams at the same rate: the simulator's default) a
    joint state waits for the base pose of the same stamp, whichever arrives first,
    so that the controller sees one step's state (deterministic in lockstep);
    otherwise the newest pose goes with each joint state. Joint states before the
    first pose are held back (one, the newest). A malformed message is counted in
    :attr:`malformed` and skipped.
    """

    def __init__(self, node, joint_states: str, odom: str | None, on_state: OnState, qos,
                 pair_by_stamp: bool = True):
        self._on_state = on_state
        self._reader = cv.JointStateReader()
        self._read_pose = cv.OdometryPoseReader()
        self.names: list[str] = []  #: joint names of the joint states, in their order
        self.names_changed = False  #: the last joint state's names differ from the one before
        self.malformed = 0
        self._floating = bool(odom)
        self._pair = pair_by_stamp and self._floating
        self._pose: np.ndarray | None = None
        self._pose_stamp: int | None = None
        self._pending: tuple | None = None  # (stamp, positions, velocities) awaiting its pose
        self.subscriptions = [node.create_subscription(JointState, joint_states,
                                                       self._on_joint_states, qos, raw=True)]
        if self._floating:
            self.subscriptions.append(node.create_subscription(Odometry, odom, self._on_odom,
                                                               qos, raw=True))

    def _on_odom(self, data: bytes) -> None:
        try:
            stamp, pose = self._read_pose(data)
        except ValueError:
            self.malformed += 1
            return
        self._pose, self._pose_stamp = pose, stamp
        pending = self._pending
        if pending is not None and (pending[0] == stamp or not self._pair):
            self._pending = None
            self._on_state(*pending, pose)

    def _on_joint_states(self, data: bytes) -> None:
        reader = self._reader
        try:
            stamp, position, velocity, _ = reader(data)
        except ValueError:
            self.malformed += 1
            return
        if reader.names_changed:
            self.names = reader.names
        self.names_changed = reader.names_changed
        if len(position) != len(reader.names) or len(velocity) != len(reader.names):
            self.malformed += 1
            return
        if not self._floating:
            self._on_state(stamp, position, velocity, None)
        elif self._pose is None or (self._pair and self._pose_stamp != stamp):
            self._pending = (stamp, position, velocity)  # its pose is still on the way
        else:
            self._on_state(stamp, position, velocity, self._pose)


class JointCommandWriter:
    """Publishes ``joint_commands`` for the joints ``names`` (in that order), with the
    fields ``fields`` (a subset of ``("position", "velocity", "effort")``: the fields
    given select each joint's mode in the simulator), from a serialized template."""

    FIELDS = ("position", "velocity", "effort")

    def __init__(self, node, topic: str, names: Sequence[str], qos,
                 fields: Sequence[str] = ("position", "velocity", "effort")):
        unknown = set(fields) - set(self.FIELDS)
        if unknown or not fields:
            raise ValueError(f"fields must be a non-empty subset of {self.FIELDS}, got "
                             f"{tuple(fields)}")
        self.names = list(names)
        self.fields = tuple(f for f in self.FIELDS if f in fields)
        n = len(self.names)
        self._template = cv.CdrTemplate(JointState(name=self.names), cv.fill_joint_state,
                                        tuple(n if f in self.fields else 0 for f in self.FIELDS))
        self._empty = np.empty(0)
        self._given = tuple(f in self.fields for f in self.FIELDS)
        self._all = all(self._given)
        self._publisher = node.create_publisher(JointState, topic, qos)

    @property
    def publisher(self):
        return self._publisher

    def publish(self, stamp_ns: int, position=None, velocity=None, effort=None) -> None:
        """One command stamped ``stamp_ns`` (the stamp of the state it answers); each
        field given at construction must be given here, as an array over :attr:`names`."""
        arrays = (position, velocity, effort)
        for f, given, a in zip(self.FIELDS, self._given, arrays):
            if given and a is None:
                raise ValueError(f"the command's '{f}' field is missing")
        if not self._all:  # the fields not given: empty in the template
            arrays = tuple(a if given else self._empty for given, a in zip(self._given, arrays))
        self._publisher.publish(self._template.serialize(stamp_ns, *arrays))
