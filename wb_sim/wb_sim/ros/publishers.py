"""The node's outputs: the per-step state streams, the latched topics and the browser viewer.

:class:`StatePublishers` makes one publisher per stream that is on (the stream table,
:mod:`.streams`, says which and at what rate) and publishes serialized templates
(:mod:`.conversions`: names and frames fixed once, numbers patched each step) through
:func:`.rclpy_shim.raw_publisher`. The latched topics (``robot_description``,
``/tf_static``, the terrain markers) are published once at start. The caller holds the
node's lock around :meth:`StatePublishers.publish`.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import pinocchio as pin
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray, String
from visualization_msgs.msg import MarkerArray
from wb_sim_interfaces.msg import ContactState

from ..errors import ConfigError
from . import conversions as cv
from . import rclpy_shim
from .frames import FrameTree, ft_sensor_frames
from .parameters import TOPIC_TOKEN
from .streams import STREAMS, StreamTable
from .urdf import urdf_for_ros

try:
    from tf2_msgs.msg import TFMessage
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "wb_sim_node needs tf2_msgs: in a ROS install 'rosdep install --from-paths src' "
        "provides it; on a pip-only machine run tools/build_tf2_msgs.sh") from e

#: state streams: reliable, keep the last second at 1 kHz, so that a reader starved for a
#: moment (a recorder on a loaded machine, the node stepping faster than real time in
#: lockstep) catches up instead of losing messages
STATE_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                       history=HistoryPolicy.KEEP_LAST)
#: /tf as tf2's TransformBroadcaster publishes it
TF_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
#: robot_description and /tf_static: late joiners get the last message
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: the contact markers, for RViz: a display needs the newest, not a backlog
MARKERS_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
#: frame rate of the browser viewer, 1/s
VIEWER_RATE_HZ = 30.0
#: how often (wall, s) the streams look again whether anyone subscribes: a stream nobody
#: listens to costs nothing (its readings, serialization and publish, ~35 us a step for the
#: humanoid's IMU, odometry, clock, wrenches and TF); a new subscriber gets its first
#: message within this long of being matched
LISTENERS_REFRESH_S = 0.05
#: streams published whether or not anyone listens: the joint states are the simulator's
#: answer in lockstep, and what tells a controller that starts late that it runs
ALWAYS_PUBLISHED = frozenset({"joint_states"})

#: the topics of the node's outputs (parameter ``topics.<name>``)
OUTPUT_TOPICS = ("joint_states", "imu", "contact_wrench", "ft", "contact_sensors",
                 "loop_closures", "actuators", "odom", "object_odom", "tf", "tf_static", "clock",
                 "robot_description", "contact_markers", "contact_state")


def check_ft_topics(names, prefix: str) -> None:
    """ConfigError for a force-torque sensor whose topic ``<prefix>/<name>`` is not a valid
    ROS topic name."""
    for name in names:
        if not TOPIC_TOKEN.match(name):
            raise ConfigError(
                f"force-torque sensor '{name}' (ft_sensors.names or the URDF's "
                f"<sensor name=...>): its topic {prefix}/{name} is not a valid "
                f"ROS topic name (letters, digits and '_', not starting with a digit); "
                f"rename it or set topics.ft: '' to publish none")


class StatePublishers:
    """The node's publishers. ``gate.state_published(t_ns, wall)`` is told of every joint
    state (lockstep waits for its command; the latency statistics start there)."""

    def __init__(self, node, sim, cfg, gate):
        self.sim, self.gate = sim, gate
        topics = {k: cfg[f"topics.{k}"] for k in OUTPUT_TOPICS}
        if sim.imu_sensor is None:
            topics["imu"] = ""
        if not sim.robot.floating_base:
            topics["odom"] = ""  # the base does not move
        if not sim.actuators.active:
            topics["actuators"] = ""  # ideal drives report nothing
        if sim.ft_sensors is None:
            topics["ft"] = ""
        if sim.contact_sensors is None:
            topics["contact_sensors"] = ""  # contact_sensors.active false
        if sim.loop_closures is None:
            topics["loop_closures"] = ""  # an open chain
        self.topics = topics
        self.streams = StreamTable.from_config(cfg, 1.0 / sim.dt,
                                               {s: bool(topics[s]) for s, _ in STREAMS})
        #: stream -> its publishers (whether anyone listens is asked of them)
        self._publishers: dict[str, list] = {}

        def pub(stream, msg_type, topic, qos):
            p = node.create_publisher(msg_type, topic, qos)
            self._publishers.setdefault(stream, []).append(p)
            return p
        raw = rclpy_shim.raw_publisher  # the per-step streams publish serialized bytes
        self._stream: dict[str, Callable[[int], None]] = {}  # stream -> function(t_ns)
        self._delayed = bool(sim.config.sensors.delay_steps)

        if "joint_states" in self.streams:
            self._js_raw = raw(pub("joint_states", JointState, topics["joint_states"], STATE_QOS))
            self._js_cdr = cv.joint_state_template(sim.joint_names)
            self._stream["joint_states"] = self._joint_states
        if "odom" in self.streams:
            self._odom_raw = raw(pub("odom", Odometry, topics["odom"], STATE_QOS))
            self._odom_cdr = cv.odometry_template(cfg["world_frame"], sim.robot.root_link)
            self._stream["odom"] = self._odom
        self._node, self._world_frame_odom = node, cfg["world_frame"]
        #: object name -> (its Odometry publisher, its raw publish, its template)
        self._object_odom: dict[str, tuple] = {}
        self._odom_objects = None  # the object set the publishers were made for
        if "object_odom" in self.streams:
            self._object_odom_prefix = topics["object_odom"].rstrip("/")
            self._publishers["object_odom"] = []
            self._object_odom_sync()
            self._stream["object_odom"] = self._objects_odom
        if "clock" in self.streams:
            clock_raw = raw(pub("clock", Clock, topics["clock"], STATE_QOS))
            clock_cdr = cv.clock_template()
            self._stream["clock"] = lambda t_ns: clock_raw(clock_cdr.serialize(t_ns))
        if "imu" in self.streams:
            c = sim.config.imu
            self._imu_raw = raw(pub("imu", Imu, topics["imu"], STATE_QOS))
            self._imu_cdr = cv.imu_template(sim.imu_sensor.frame, cv.imu_covariances(
                c.angular_velocity_noise_std, c.linear_acceleration_noise_std))
            self._stream["imu"] = self._imu
        if "contact_wrench" in self.streams:
            self._wrench_raw = [
                (raw(pub("contact_wrench", WrenchStamped, f"{topics['contact_wrench']}/{name}",
                         STATE_QOS)),
                 cv.wrench_template(frame))
                for name, frame in zip(sim.surface_names, sim.contact_points.surface_frames)]
            self._stream["contact_wrench"] = self._wrenches
            # collision.enabled: the other links' total wrench on <prefix>/collision (no
            # surface can take that name: it is a parameter group), world axes and origin
            self._collision_raw = (
                raw(pub("contact_wrench", WrenchStamped, f"{topics['contact_wrench']}/collision",
                        STATE_QOS)),
                cv.wrench_template(cfg["world_frame"])) if sim.collision is not None else None
        #: the notes to log once (an F/T sensor's frame renamed to avoid a clash)
        self.notes: list[str] = []
        #: per force-torque sensor its TF frame; the static transforms of the new ones
        self.ft_frames, self._ft_static = [], []
        # (several robots: both topics off here, each robot's are wb_sim.ros.robots')
        if sim.ft_sensors is not None and (topics["ft"] or topics["tf_static"]):
            self.ft_frames, self._ft_static, self.notes = ft_sensor_frames(
                sim.ft_sensors, sim.robot.description_urdf, {cfg["world_frame"]})
        if "ft" in self.streams:
            check_ft_topics(sim.ft_sensors.names, topics["ft"])
            # one WrenchStamped per sensor; the reading (an RNEA pass over the step) is
            # computed once for all of them, only while one of them has a listener
            self._ft_raw = [(raw(pub("ft", WrenchStamped, f"{topics['ft']}/{name}", STATE_QOS)),
                             cv.wrench_template(frame))
                            for name, frame in zip(sim.ft_sensors.names, self.ft_frames)]
            self._stream["ft"] = self._ft
        if "contact_sensors" in self.streams:
            self._contact_sensors_pub = pub("contact_sensors", Float64MultiArray,
                                            topics["contact_sensors"], STATE_QOS)
            self._contact_sensors_msg = cv.ContactSensorsMessage(sim.contact_sensors.names)
            self._stream["contact_sensors"] = self._contact_sensors
        if "loop_closures" in self.streams:
            self._closures_pub = pub("loop_closures", Float64MultiArray, topics["loop_closures"],
                                     STATE_QOS)
            self._closures_msg = cv.LoopClosuresMessage(sim.loop_closures.names)
            self._stream["loop_closures"] = self._loop_closures
        if "actuators" in self.streams:
            # a few Float64MultiArray through rclpy's own conversion (no template: a small
            # stream, 100 Hz by default, and only while someone listens)
            self._actuator_pubs = [pub("actuators", Float64MultiArray,
                                       f"{topics['actuators']}/{name}", STATE_QOS)
                                   for name, _ in cv.ACTUATOR_READINGS]
            self._actuator_msgs = cv.actuator_arrays(sim.joint_names)
            self._stream["actuators"] = self._actuators
        base = pin.SE3(pin.rpy.rpyToMatrix(*sim.config.initial.base_rpy),
                       np.array(sim.config.initial.base_position))
        self.frames = FrameTree(sim.robot, cfg["world_frame"], base)
        self._world_frame_tf = cfg["world_frame"]
        if "tf" in self.streams:
            floating = sim.robot.floating_base
            parents = [cfg["world_frame"]] * floating + [p for p, _ in self.frames.moving]
            children = [sim.robot.root_link] * floating + [c for _, c in self.frames.moving]
            self._tf_raw = raw(pub("tf", TFMessage, topics["tf"], TF_QOS))
            self._tf_robot = (parents, children)
            self._tf_objects = None  # the object set the template was made for
            self._tf_template()
            self._stream["tf"] = self._tf
        if "contact_markers" in self.streams:
            from .markers import ContactMarkers
            self._markers_pub = pub("contact_markers", MarkerArray, topics["contact_markers"],
                                    MARKERS_QOS)
            self._markers = ContactMarkers(sim, cfg["world_frame"])
            self._stream["contact_markers"] = self._contact_markers
        if "contact_state" in self.streams:
            self._contact_state_pub = pub("contact_state", ContactState,
                                          topics["contact_state"], STATE_QOS)
            pts = sim.contact_points
            self._contact_state_msg = cv.ContactStateMessage(
                pts.surface_of_point, pts.surface_names, pts.surface_frames, cfg["world_frame"])
            self._stream["contact_state"] = self._contact_state
        self._heard = set(self._stream)  # streams with a listener, refreshed while publishing
        self._refresh_at = 0.0
        self._world_frame = cfg["world_frame"]
        self._tf_static_pub = node.create_publisher(TFMessage, topics["tf_static"], LATCHED_QOS) \
            if topics["tf_static"] else None
        self._desc_pub = node.create_publisher(String, topics["robot_description"], LATCHED_QOS) \
            if topics["robot_description"] else None
        self._terrain_pub = None
        #: the free objects' markers (latched; again at each spawn or delete)
        self._objects_pub = node.create_publisher(
            MarkerArray, cfg["topics.objects"], LATCHED_QOS) if cfg["topics.objects"] else None
        if cfg["topics.terrain"] and sim.terrain is not None:
            self._terrain_pub = node.create_publisher(MarkerArray, cfg["topics.terrain"],
                                                      LATCHED_QOS)

    def publish(self, t_ns: int, every: bool = False) -> None:
        """Publish the streams due at the simulator's step (all of them with ``every``),
        stamped ``t_ns``; a stream nobody subscribes to is skipped (but
        :data:`ALWAYS_PUBLISHED`)."""
        now = time.perf_counter()
        if now >= self._refresh_at:
            self._refresh_at = now + LISTENERS_REFRESH_S
            self._heard = ALWAYS_PUBLISHED | {
                name for name, pubs in self._publishers.items()
                if any(p.get_subscription_count() for p in pubs)}
        stream, heard = self._stream, self._heard
        for name in self.streams.due(self.sim.step_count, every):
            if name in heard:
                stream[name](t_ns)

    def publish_latched(self, t_ns: int) -> None:
        """``/tf_static``, ``robot_description`` and the terrain markers (once, at start)."""
        stamp = cv.time_msg(t_ns)
        if self._tf_static_pub is not None:
            tfs = [cv.transform_msg(stamp, t)
                   for t in self.frames.static_transforms() + self._ft_static]
            self._tf_static_pub.publish(TFMessage(transforms=tfs))
        if self._desc_pub is not None:
            robot = self.sim.robot
            self._desc_pub.publish(String(data=urdf_for_ros(robot.description_urdf, robot.urdf_file)))
        if self._terrain_pub is not None:
            from .markers import terrain_markers
            self._terrain_pub.publish(terrain_markers(self.sim.terrain, self._world_frame, stamp))
        if self.sim.objects:
            self.objects_changed(t_ns)

    def objects_changed(self, t_ns: int) -> None:
        """The free objects were spawned or deleted (the caller holds the lock): their
        markers again (a DELETEALL first: a deleted one's goes), an odometry publisher made
        for a new object and a deleted one's removed; /tf takes the new set at its next
        message."""
        if "object_odom" in self.streams:
            self._object_odom_sync()
        if self._objects_pub is not None:
            from .markers import object_markers
            self._objects_pub.publish(object_markers(self.sim.objects, self._world_frame,
                                                     cv.time_msg(t_ns)))

    # sensors.delay_steps: the sensor streams (joint states, IMU, wrenches) carry the
    # readings of n steps ago, stamped now, as a transport delay the controller does not
    # know of (lockstep still pairs each command with the step it answers); ground truth
    # (odometry, TF) and the clock are of now

    def _joint_states(self, t_ns: int) -> None:
        sim = self.sim
        s = sim.sensed_state if self._delayed else sim
        self._js_raw(self._js_cdr.serialize(t_ns, s.joint_positions, s.joint_velocities,
                                            s.applied_torques))
        self.gate.state_published(t_ns, time.perf_counter())

    def _odom(self, t_ns: int) -> None:
        q, v = self.sim.q, self.sim.v  # the base twist in base axes, as nav_msgs/Odometry has it
        self._odom_raw(self._odom_cdr.serialize(t_ns, q[:3], q[3:7], v[:3], v[3:6]))

    def _object_odom_sync(self) -> None:
        """One nav_msgs/Odometry publisher per free object, ``<prefix>/<name>/odom``: made for
        the objects without one, destroyed for those gone."""
        objects = self.sim.objects
        names = [o.name for o in objects]
        node, pubs = self._node, self._publishers["object_odom"]
        for name in [n for n in self._object_odom if n not in names]:
            p = self._object_odom.pop(name)[0]
            pubs.remove(p)
            node.destroy_publisher(p)
        for name in names:
            if name in self._object_odom:
                continue
            topic = f"{self._object_odom_prefix}/{name}/odom"
            try:
                p = node.create_publisher(Odometry, topic, STATE_QOS)
            except Exception as e:  # noqa: BLE001 - rclpy's InvalidTopicNameException and kin
                node.get_logger().warning(f"no odometry for object '{name}': '{topic}' is not a "
                                          f"valid topic name ({e})")
                continue
            pubs.append(p)
            self._object_odom[name] = (p, rclpy_shim.raw_publisher(p),
                                       cv.odometry_template(self._world_frame_odom, name))
        self._odom_objects = objects
        self._refresh_at = 0.0

    def _objects_odom(self, t_ns: int) -> None:
        # each object's pose (the state's row, as /tf) and its twist in its own frame (as
        # odom/ground_truth's base twist), from the core's object_pose / object_twist
        sim = self.sim
        if sim.objects is not self._odom_objects:
            self._object_odom_sync()
        poses = sim.object_poses()
        for k, obj in enumerate(sim.objects):
            entry = self._object_odom.get(obj.name)
            if entry is None:
                continue
            R = sim.object_pose(obj.name).rotation
            lin, ang = sim.object_twist(obj.name)
            row = poses[k]
            entry[1](entry[2].serialize(t_ns, row[:3], row[3:], R.T @ lin, R.T @ ang))

    def _imu(self, t_ns: int) -> None:
        sim = self.sim
        r = sim.sensed_imu() if self._delayed else sim.imu()
        self._imu_raw(self._imu_cdr.serialize(t_ns, r.orientation, r.angular_velocity,
                                              r.linear_acceleration))

    def _wrenches(self, t_ns: int) -> None:
        sim = self.sim
        wrenches = sim.sensed_contact_wrench_array() if self._delayed \
            else sim.contact_wrench_array()
        for (publish, cdr), w in zip(self._wrench_raw, wrenches):
            publish(cdr.serialize(t_ns, w[:3], w[3:]))
        if self._collision_raw is not None:
            publish, cdr = self._collision_raw
            w = sim.sensed_collision_wrench_array()
            publish(cdr.serialize(t_ns, w[:3], w[3:]))

    def _ft(self, t_ns: int) -> None:
        # the readings now (the core keeps no delayed copy: sensors.delay_steps does not
        # delay them), with their noise and bias
        for (publish, cdr), w in zip(self._ft_raw, self.sim.ft_wrench_array()):
            publish(cdr.serialize(t_ns, w[:3], w[3:]))

    def _contact_sensors(self, t_ns: int) -> None:
        # the readings of the last step, never delayed; built only for a listener
        self._contact_sensors_pub.publish(
            self._contact_sensors_msg(t_ns, self.sim.contact_sensor_array()))

    def _loop_closures(self, t_ns: int) -> None:
        # the closures' wrenches of the last step (ground truth, never delayed); built only
        # for a listener
        self._closures_pub.publish(self._closures_msg(t_ns, self.sim.loop_closure_wrenches))

    def _actuators(self, t_ns: int) -> None:
        # the drives' readings now (sensors.delay_steps does not delay them); no stamp in a
        # Float64MultiArray: they are those of the joint states published at the same step
        msgs = cv.fill_actuator_arrays(self._actuator_msgs, self.sim.actuator_readings)
        for p, msg in zip(self._actuator_pubs, msgs):
            p.publish(msg)

    def _contact_markers(self, t_ns: int) -> None:
        # built only for a listener (RViz open, see publish): a MarkerArray goes through
        # rclpy's per-field conversion, ~0.2 ms for a few points, on the physics thread
        self._markers_pub.publish(self._markers.message(cv.time_msg(t_ns)))

    def _contact_state(self, t_ns: int) -> None:
        # ground truth, never delayed; built only for a listener (see publish): the
        # readings, the momentum and rclpy's conversion of the message, on the physics thread
        sim = self.sim
        com, momentum = sim.centroidal_momentum()
        self._contact_state_pub.publish(self._contact_state_msg(
            t_ns, sim.contact_points_state(), com, momentum))

    def _tf_template(self) -> None:
        """The /tf template of the robot's moving frames and world -> each free object's
        frame (its name), made again when the set of objects changes."""
        parents, children = self._tf_robot
        objects = self.sim.objects
        names = [o.name for o in objects]
        self._tf_cdr = cv.tf_template(parents + [self._world_frame_tf] * len(names),
                                      children + names)
        self._tf_rows = np.empty((len(parents) + len(names), 7))
        self._tf_n_robot = len(parents)
        self._tf_objects = objects

    def _tf(self, t_ns: int) -> None:
        sim = self.sim
        if sim.objects is not self._tf_objects:  # spawned or deleted since
            self._tf_template()
        rows, n = self._tf_rows, self._tf_n_robot
        k0 = 1 if sim.robot.floating_base else 0
        if k0:
            rows[0] = sim.q[:7]
        rows[k0:n, :3], rows[k0:n, 3:] = self.frames.moving_arrays(sim.joint_positions)
        if n < len(rows):  # the free objects' poses as the state holds them
            rows[n:] = sim.object_poses()
        self._tf_raw(self._tf_cdr.serialize(t_ns, *rows))


def start_viewer(name: str, sim, lock, logger):
    """The browser viewer of parameter ``viewer`` (None for 'none'), fed at VIEWER_RATE_HZ
    from its own thread with snapshots taken under ``lock``."""
    if name == "none":
        return None
    from ..tools.viewer import contact_arrows, make_viewer  # meshcat only when asked for
    ground = sim.config.ground
    viewer = make_viewer(name, sim.robot, rate_hz=VIEWER_RATE_HZ, ground_height=ground.height,
                         ground_normal=ground.normal, terrain=sim.terrain)

    nq = sim.robot.model.nq  # the robot's configuration (the free objects' come after it)

    def snapshot():
        with lock:  # the feet's and (collision.enabled) the links' contacts; the objects
            return (sim.q[:nq].copy(), *contact_arrows(sim), sim.objects, sim.object_poses())

    viewer.start(snapshot)
    logger.info(f"viewer: open {viewer.url} in a browser")
    return viewer


#: /diagnostics: the aggregators' QoS (rclcpp's diagnostic_updater publishes with depth 1)
DIAGNOSTICS_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


class DiagnosticsPublisher:
    """The solver health (:class:`.health.HealthMonitor`) as diagnostic_msgs/DiagnosticArray
    on ``topics.diagnostics`` every ``1 / publish.diagnostics_rate_hz`` s (wall), each
    status named ``wb_sim: <check group>``, ``hardware_id`` the robot's name. Off
    (:attr:`active` False, :attr:`note` says why) when the rate is 0, the topic empty, or
    diagnostic_msgs does not import."""

    def __init__(self, node, sim, cfg, stats):
        from .health import CHECKS, HealthMonitor
        self.cfg_keys = tuple(f"diagnostics.{c.key}" for c in CHECKS)
        self.note: str | None = None
        self.health = None
        rate, topic = cfg["publish.diagnostics_rate_hz"], cfg["topics.diagnostics"]
        if not (rate > 0 and topic):
            return
        try:
            from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
        except ImportError as e:
            self.note = (f"diagnostic_msgs is not installed ({e}): the solver health on "
                         f"'{topic}' is off. A ROS 2 install has it (rosdep key "
                         f"diagnostic_msgs); pip: 'pip install ros-diagnostic-msgs' (Kilted) or "
                         f"'ros-jazzy-diagnostic-msgs' (Jazzy), as tools/setup_venv.sh does")
            return
        self._types = DiagnosticArray, DiagnosticStatus, KeyValue
        self.period = 1.0 / rate
        self.health = HealthMonitor(sim, stats, {c.key: cfg[f"diagnostics.{c.key}"]
                                                 for c in CHECKS})
        self._pub = node.create_publisher(DiagnosticArray, topic, DIAGNOSTICS_QOS)
        self._hardware_id = sim.robot.model.name
        self._next = time.perf_counter() + self.period

    @property
    def active(self) -> bool:
        return self.health is not None

    def after_step(self, now: float, stamp, cfg) -> None:
        """After each step (the caller holds the node's lock): the window's per-step
        figures while someone subscribes; at ``now`` >= the next sample, publish
        (``stamp()``: the builtin_interfaces Time of the state, ``cfg``: the thresholds,
        live)."""
        health = self.health
        if health.watching:
            health.after_step()
        if now < self._next:
            return
        self._next = max(self._next + self.period, now)
        health.thresholds = {k.removeprefix("diagnostics."): cfg[k] for k in self.cfg_keys}
        statuses = health.sample()
        health.watching = self._pub.get_subscription_count() > 0
        Array, Status, KeyValue = self._types
        msg = Array()
        msg.header.stamp = stamp()
        msg.status = [Status(level=bytes([s.level]), name=s.name, message=s.message,
                             hardware_id=self._hardware_id,
                             values=[KeyValue(key=k, value=v) for k, v in s.values.items()])
                      for s in statuses]
        self._pub.publish(msg)
