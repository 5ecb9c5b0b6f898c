"""``wb_sim_node``: the ROS 2 simulator node, a thin adapter over :class:`wb_sim.Simulator`.

Parameters -> the core's validated config; core state -> messages (stamped
with simulated time); messages -> torques. The physics runs on its own
thread; an executor thread serves the services and parameter updates. One
lock guards the simulator.

This module only wires plain parts to rclpy: the command gate (:mod:`.gate`:
validation, watchdog, stamp matching, lockstep), the pacer (:mod:`.pacer`:
deadlines, scheduling policy, statistics), the stream table (:mod:`.streams`:
rates and what is due at a step); rclpy's private internals are used only
through :mod:`.rclpy_shim`.

Two ways to advance time (``sync.mode``):

* ``realtime``: paced against the wall clock with absolute deadlines
  (``real_time_factor``); a step applies the newest valid command.
* ``lockstep``: after publishing a joint state the physics waits for one
  valid command (with ``sync.match_stamp``, one whose stamp is that state's)
  before the next step, so the closed loop is the same whatever the CPU load
  and DDS latency. ``real_time_factor`` > 0 still caps the pace.
"""

from __future__ import annotations

import gc
import math
import os
import signal
import sys
import threading
import time
import warnings
from typing import Any

import numpy as np
import pinocchio as pin
import rclpy
from rcl_interfaces.msg import SetParametersResult
from rclpy.exceptions import NameValidationException, ParameterException
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger

from ..config import PARAMETERS, POSE_PARAMETERS, SURFACE_PARAMETERS, load_config, read_yaml_params
from ..errors import ConfigError, DivergenceError, WbSimError
from ..parameters import unknown_key_error
from ..simulator import Simulator
from . import conversions as cv
from . import rclpy_shim
from .frames import FrameTree
from .gate import REJECT_LOG_PERIOD_S, TOPICS, CommandGate
from .pacer import Pacer
from .parameters import (NODE_PARAMETERS, core_keys, descriptor, is_node_key,
                         load_node_config)
from .rclpy_shim import PolledNodeMixin, RCLError
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
#: commands: the physics loop takes every waiting message at each step and validates it on
#: take, so the newest VALID command wins: with a depth of 1 a flood of invalid messages
#: would push the controller's commands out of the queue before they are taken (at 5 kHz
#: of rejects only 38 % of them were applied); 100 holds 5 ms of a 20 kHz flood
COMMAND_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
#: services: a burst of calls (scripts resetting in a loop) is queued, not dropped
SERVICE_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)

#: Python's GIL switch interval in the node, s (see main)
GIL_SWITCH_INTERVAL_S = 2.0e-4
#: frame rate of the browser viewer, 1/s
VIEWER_RATE_HZ = 30.0
#: how long after its creation the node looks for another node of its name, s: DDS
#: discovery of a running node's name took 0.4-2.6 s on the loaded 2-core machine, and
#: more than 4 s once at a load average of 15
DUPLICATE_CHECK_S = 10.0  # two nodes started closer than this may both refuse
#: live parameters of the node (the core's live ones are its contact parameters)
_LIVE_CORE = tuple(p.key for p in PARAMETERS if p.live)




class SimNode(PolledNodeMixin, Node):
    """The simulator node (name ``wb_sim``): wiring of the physics, the command gate,
    the pacer and the stream table to rclpy."""

    def __init__(self, params_files: tuple[str, ...] = (), **kwargs: Any):
        """``params_files``: the ``--params-file`` arguments, in order (a relative
        ``urdf_path`` is relative to the file that sets it)."""
        super().__init__("wb_sim", **kwargs)
        self._params_files = tuple(params_files)
        created = time.monotonic()
        flat = self._declare_parameters()
        self.cfg = load_node_config(flat)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.sim = Simulator(load_config(core_keys(flat)))
        for w in caught:  # e.g. a robot starting inside the ground: into the node's log
            self.get_logger().warning(str(w.message))
        self._notes_logged: set[str] = set()
        self._log_notes()
        self._duplicate_check_until = created + DUPLICATE_CHECK_S
        self._refuse_duplicate_name(0.0)  # one already discovered: refused before publishing
        self.exit_code = 0
        self._rcl_failures = 0  # failed publishes or takes (the loop goes on)
        self._rcl_failure_logged = -math.inf
        self._lock = threading.RLock()
        self._running = False
        self._diverged = False  # paused by a divergence (~/reset resumes)
        self._stop_requested = False
        self._paused = threading.Event()  # set = paused
        self._wake = threading.Event()
        sim = self.sim
        self.dt = sim.dt
        self._dt_ns = round(self.dt * cv.NS_PER_S)
        #: simulated time of the node: never goes back, also across resets
        self._offset_ns = 0
        self.joint_index = {n: i for i, n in enumerate(sim.joint_names)}
        cmd_names = list(self.cfg["command.joint_names"]) or list(sim.joint_names)
        unknown = [n for n in cmd_names if n not in self.joint_index]
        if unknown:
            raise ConfigError(f"parameter 'command.joint_names': unknown joint(s) "
                              f"{', '.join(unknown)}; joints: {', '.join(sim.joint_names)}")
        self.command_joint_names = cmd_names
        self._lockstep = self.cfg["sync.mode"] == "lockstep"
        if self._lockstep and not self.cfg["topics.joint_states"]:
            raise ConfigError("parameter 'sync.mode' = 'lockstep' needs joint states to answer: "
                              "'topics.joint_states' must not be empty")
        self.pacer = Pacer(self.dt, spin_margin_s=self.cfg["realtime_spin_margin_s"])
        self._reject_loggers = {t: self.get_logger().get_child(t) for t in TOPICS}
        self.gate = CommandGate(
            sim.joint_names, cmd_names, self.cfg, self.pacer.stats, self._gate_log,
            lockstep=self._lockstep, match_stamp=self.cfg["sync.match_stamp"],
            wait_for_first=self.cfg["command.wait_for_first"],
            frame_names=sim.robot.frame_names())
        self._match_stamp = self.gate.match_stamp
        if self.gate.waiting_for_first:
            self._paused.set()
        self._make_publishers()
        self._make_subscriptions()
        self._make_services()
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._publish_latched()
        self._publish(every=True)
        self.viewer = self._make_viewer()
        if sim.robot.floating_base and sim.contact_points.n == 0:
            self.get_logger().warning(
                "no contact surfaces (parameter 'contact_surfaces' is empty): the floating "
                "base will fall through the ground; give the feet surfaces as in "
                "config/humanoid.yaml, or set floating_base: false for a fixed robot")
        self.get_logger().info(
            f"simulating {sim.robot.model.name} ({sim.nj} joints, {sim.mass:.1f} kg, "
            f"{sim.contact_points.n} contact points) at {1 / self.dt:g} Hz, real-time factor "
            f"{self.cfg['real_time_factor']:g}"
            + (", lockstep (one command per joint state"
               + (", stamps matched)" if self._match_stamp else ")") if self._lockstep else "")
            + f"; commands on '{self.cfg['topics.joint_commands']}' / "
            f"'{self.cfg['topics.effort_commands']}'"
            + ("; waiting for the first command" if self.gate.waiting_for_first else ""))
        self.get_logger().info(rclpy_shim.describe())

    # the parameter callback replaces the configuration: the gate reads the new one
    @property
    def cfg(self):
        return self._cfg

    @cfg.setter
    def cfg(self, value) -> None:
        self._cfg = value
        if getattr(self, "gate", None) is not None:
            self.gate.cfg = value

    @property
    def _sched_suspended(self) -> bool:
        return self.pacer.suspended

    @_sched_suspended.setter
    def _sched_suspended(self, value: bool) -> None:
        self.pacer.suspended = value

    def _gate_log(self, level: str, text: str, topic: str | None) -> None:
        # one call site per severity: rclpy refuses two severities from one site
        # ("Logger severity cannot be changed between calls")
        logger = self._reject_loggers[topic] if topic else self.get_logger()
        if level == "warning":
            logger.warning(text)
        elif level == "info":
            logger.info(text)
        else:
            logger.error(text)

    def watch_for_duplicate_name(self) -> None:
        """Thread body: until DUPLICATE_CHECK_S after the node's creation, look for
        another node of this name on the graph; if one shows up, log FATAL and stop
        with exit code 2 (the node that was there first keeps running)."""
        try:
            self._refuse_duplicate_name(self._duplicate_check_until)
        except ConfigError as e:
            self.get_logger().fatal(f"cannot start: {e}")
            self.exit_code = 2
            self.stop()
        except Exception:  # noqa: BLE001 - the context went down under us
            pass

    def _refuse_duplicate_name(self, until: float) -> None:
        """ConfigError if another node of this name and namespace runs on the graph
        (two simulators named /wb_sim would interleave their /clock); looks until
        ``until`` (monotonic), as DDS discovers a running node within a moment."""
        me = (self.get_name(), self.get_namespace())
        while self.context.ok():
            n = sum(1 for x in self.get_node_names_and_namespaces() if tuple(x) == me)
            if n > 1:
                fq = self.get_fully_qualified_name()
                raise ConfigError(
                    f"another node named '{fq}' is already running on this ROS domain; stop it, "
                    f"or give this one another name or namespace (--ros-args -r __node:=NAME "
                    f"or -r __ns:=/NS)")
            if time.monotonic() >= until:
                return
            time.sleep(0.1)

    # ------------------------------------------------------------------ parameters

    def _declare_parameters(self) -> dict[str, Any]:
        given = dict(self._parameter_overrides)  # from --params-file, -p, launch
        defaults: dict[str, Any] = {}
        if not given.keys() & {"urdf_path", "robot_description"}:
            # `ros2 run wb_sim wb_sim_node` alone: the default robot, as turtlesim does
            from .. import default_config_path
            defaults = read_yaml_params(default_config_path())
            self.get_logger().info(
                f"no robot given (urdf_path / robot_description): simulating the default "
                f"humanoid of {default_config_path()}; `ros2 launch wb_sim sim.launch.py "
                f"robot:=...` or --params-file <robot>.yaml simulates another")
        flat: dict[str, Any] = {}

        def declare(key: str, p) -> None:
            value = self.declare_parameter(key, defaults.get(key, p.default),
                                           descriptor(key, p)).value
            if value is None and p.kind in ("floats", "strs"):
                value = []  # `key: []` in a YAML file: rclpy has no type for an empty list
            flat[key] = value

        for p in PARAMETERS + NODE_PARAMETERS:
            declare(p.key, p)
        for s in flat["contact_surfaces"]:
            for p in SURFACE_PARAMETERS:
                declare(f"{s}.{p.key}", p)
        for pose in flat["poses"]:
            for p in POSE_PARAMETERS:
                declare(f"poses.{pose}.{p.key}", p)
        # a key the node does not know is refused, as the Python API refuses it (rclpy
        # would ignore it: a misspelt `contact: stifness:` silently kept the default)
        unknown = sorted(k for k in given if k not in flat and not is_node_key(k))
        if unknown:
            raise unknown_key_error(unknown[0], sorted(flat))
        flat["urdf_path"] = self._urdf_relative_to_its_file(flat["urdf_path"])
        return flat

    def _urdf_relative_to_its_file(self, urdf_path: str) -> str:
        """A relative ``urdf_path`` is relative to the parameter file that sets it (the
        last one of ``--params-file`` that does), as in the Python API; one given with
        ``-p`` stays relative to the working directory."""
        if not urdf_path or ":" in urdf_path or os.path.isabs(urdf_path):
            return urdf_path
        for f in reversed(self._params_files):
            try:
                set_here = read_yaml_params(f, self.get_name()).get("urdf_path")
            except ConfigError:
                continue
            if set_here == os.path.realpath(os.path.join(os.path.dirname(f), urdf_path)):
                return set_here
        return urdf_path

    def _log_notes(self) -> None:
        """Log, once each, what the simulator adjusted (e.g. a contact stiffer than the
        rate resolves: it stays stable and acts as the stiffest one dt resolves)."""
        for note in self.sim.notes:
            if note not in self._notes_logged:
                self.get_logger().info(note)
                self._notes_logged.add(note)

    def _on_set_parameters(self, params) -> SetParametersResult:
        core, node = {}, {}
        for prm in params:
            if prm.name in _LIVE_CORE:
                core[prm.name] = prm.value
            elif prm.name in _LIVE_NODE:
                node[prm.name] = prm.value
            elif prm.name != "use_sim_time":  # read-only ones never get here
                return SetParametersResult(successful=False,
                                           reason=f"parameter '{prm.name}' cannot be changed")
        try:  # validated whole before anything changes; the core applies whole or nothing
            new_node = load_node_config({**self.cfg.values, **node}) if node else None
            if core:
                with self._lock:
                    self.sim.set_contact_parameters(**core)
                self._log_notes()
        except Exception as e:  # noqa: BLE001 - an escaping exception kills the executor
            why = str(e) if isinstance(e, WbSimError) else f"{type(e).__name__}: {e}"
            self.get_logger().warning(f"parameter update refused: {why}")
            return SetParametersResult(successful=False, reason=why)
        if new_node is not None:
            if new_node["real_time_factor"] != self.cfg["real_time_factor"]:
                self._sched_suspended = False  # real-time priority may be tried again
            self.cfg = new_node
            self._wake.set()  # a new real-time factor re-anchors the pacing
        for k, v in {**core, **node}.items():
            self.get_logger().info(f"parameter '{k}' set to {v!r}")
        return SetParametersResult(successful=True)

    # ------------------------------------------------------------------ viewer

    def _make_viewer(self):
        """The browser viewer of parameter ``viewer`` (None for 'none'), fed at
        VIEWER_RATE_HZ from its own thread with snapshots taken under the lock."""
        name = self.cfg["viewer"]
        if name == "none":
            return None
        from ..tools.viewer import contact_arrows, make_viewer  # meshcat only when asked for
        ground = self.sim.config.ground
        viewer = make_viewer(name, self.sim.robot, rate_hz=VIEWER_RATE_HZ,
                             ground_height=ground.height, ground_normal=ground.normal,
                             terrain=self.sim.terrain)

        def snapshot():
            with self._lock:  # the feet's and (collision.enabled) the links' contacts
                return (self.sim.q.copy(), *contact_arrows(self.sim))

        viewer.start(snapshot)
        self.get_logger().info(f"viewer: open {viewer.url} in a browser")
        return viewer

    def destroy_node(self):
        if getattr(self, "viewer", None) is not None:
            self.viewer.close()
            self.viewer = None
        return super().destroy_node()


    # ------------------------------------------------------------------ publishers

    def _make_publishers(self) -> None:
        cfg, sim = self.cfg, self.sim
        topics = {k: cfg[f"topics.{k}"] for k in ("joint_states", "imu", "contact_wrench", "odom",
                                                  "tf", "tf_static", "clock",
                                                  "robot_description")}
        if sim.imu_sensor is None:
            topics["imu"] = ""
        if not sim.robot.floating_base:
            topics["odom"] = ""  # the base does not move
        self.topics = topics
        self.streams = StreamTable.from_config(cfg, 1.0 / self.dt,
                                               {s: bool(topics[s]) for s, _ in STREAMS})
        pub = self.create_publisher
        raw = rclpy_shim.raw_publisher  # the per-step streams publish serialized bytes
        self._publish_stream = {}  # stream -> function(t_ns)

        # one serialized template per stream (names and frames fixed, numbers patched)
        if "joint_states" in self.streams:
            self._js_pub = pub(JointState, topics["joint_states"], STATE_QOS)
            self._js_raw, self._js_cdr = raw(self._js_pub), cv.joint_state_template(sim.joint_names)
            self._publish_stream["joint_states"] = self._publish_joint_states
        if "odom" in self.streams:
            self._odom_raw = raw(pub(Odometry, topics["odom"], STATE_QOS))
            self._odom_cdr = cv.odometry_template(cfg["world_frame"], sim.robot.root_link)
            self._publish_stream["odom"] = self._publish_odom
        if "clock" in self.streams:
            self._clock_raw = raw(pub(Clock, topics["clock"], STATE_QOS))
            self._clock_cdr = cv.clock_template()
            self._publish_stream["clock"] = lambda t_ns: self._clock_raw(
                self._clock_cdr.serialize(t_ns))
        if "imu" in self.streams:
            c = sim.config.imu
            self._imu_raw = raw(pub(Imu, topics["imu"], STATE_QOS))
            self._imu_cdr = cv.imu_template(sim.imu_sensor.frame, cv.imu_covariances(
                c.angular_velocity_noise_std, c.linear_acceleration_noise_std))
            self._publish_stream["imu"] = self._publish_imu
        if "contact_wrench" in self.streams:
            self._wrench_raw = [
                (raw(pub(WrenchStamped, f"{topics['contact_wrench']}/{name}", STATE_QOS)),
                 cv.wrench_template(frame))
                for name, frame in zip(sim.surface_names, sim.contact_points.surface_frames)]
            self._publish_stream["contact_wrench"] = self._publish_wrenches
            # collision.enabled: the other links' total wrench on <prefix>/collision (no
            # surface can take that name: it is a parameter group), world axes and origin
            self._collision_wrench_raw = (
                raw(pub(WrenchStamped, f"{topics['contact_wrench']}/collision", STATE_QOS)),
                cv.wrench_template(cfg["world_frame"])) if sim.collision is not None else None
        base = pin.SE3(pin.rpy.rpyToMatrix(*sim.config.initial.base_rpy),
                       np.array(sim.config.initial.base_position))
        self.frames = FrameTree(sim.robot, cfg["world_frame"], base)
        if "tf" in self.streams:
            floating = sim.robot.floating_base
            parents = [cfg["world_frame"]] * floating + [p for p, _ in self.frames.moving]
            children = [sim.robot.root_link] * floating + [c for _, c in self.frames.moving]
            self._tf_raw = raw(pub(TFMessage, topics["tf"], TF_QOS))
            self._tf_cdr = cv.tf_template(parents, children)
            self._tf_rows = np.empty((len(parents), 7))
            self._publish_stream["tf"] = self._publish_tf
        self._tf_static_pub = pub(TFMessage, topics["tf_static"], LATCHED_QOS) \
            if topics["tf_static"] else None
        self._desc_pub = pub(String, topics["robot_description"], LATCHED_QOS) \
            if topics["robot_description"] else None
        self._terrain_pub = None
        if cfg["topics.terrain"] and sim.terrain is not None:
            from visualization_msgs.msg import MarkerArray
            self._terrain_pub = pub(MarkerArray, cfg["topics.terrain"], LATCHED_QOS)

    def _publish_latched(self) -> None:
        stamp = cv.time_msg(self._now_ns())
        if self._tf_static_pub is not None:
            tfs = [cv.transform_msg(stamp, t) for t in self.frames.static_transforms()]
            self._tf_static_pub.publish(TFMessage(transforms=tfs))
        if self._desc_pub is not None:
            robot = self.sim.robot
            self._desc_pub.publish(String(data=urdf_for_ros(robot.urdf_xml, robot.urdf_file)))
        if self._terrain_pub is not None:
            from .markers import terrain_markers
            self._terrain_pub.publish(terrain_markers(self.sim.terrain, self.cfg["world_frame"],
                                                      stamp))

    def _now_ns(self) -> int:
        return self._offset_ns + self.sim.step_count * self._dt_ns

    def _publish(self, every: bool = False) -> None:
        """Publish the streams due at this step (all of them with ``every``)."""
        t_ns = self._now_ns()
        publish = self._publish_stream
        for stream in self.streams.due(self.sim.step_count, every):
            publish[stream](t_ns)

    # sensors.delay_steps: the sensor streams (joint states, IMU, wrenches) carry the
    # readings of n steps ago, stamped now, as a transport delay the controller does not
    # know of (lockstep still pairs each command with the step it answers); ground truth
    # (odometry, TF) and the clock are of now

    def _publish_joint_states(self, t_ns: int) -> None:
        sim = self.sim
        s = sim.sensed_state if sim.config.sensors.delay_steps else sim
        self._js_raw(self._js_cdr.serialize(t_ns, s.joint_positions, s.joint_velocities,
                                            s.applied_torques))
        self.gate.state_published(t_ns, time.perf_counter())

    def _publish_odom(self, t_ns: int) -> None:
        q, v = self.sim.q, self.sim.v  # the base twist in base axes, as nav_msgs/Odometry has it
        self._odom_raw(self._odom_cdr.serialize(t_ns, q[:3], q[3:7], v[:3], v[3:6]))

    def _publish_imu(self, t_ns: int) -> None:
        sim = self.sim
        r = sim.sensed_imu() if sim.config.sensors.delay_steps else sim.imu()
        self._imu_raw(self._imu_cdr.serialize(t_ns, r.orientation, r.angular_velocity,
                                              r.linear_acceleration))

    def _publish_wrenches(self, t_ns: int) -> None:
        sim = self.sim
        wrenches = sim.sensed_contact_wrench_array() if sim.config.sensors.delay_steps \
            else sim.contact_wrench_array()
        for (publish, cdr), w in zip(self._wrench_raw, wrenches):
            publish(cdr.serialize(t_ns, w[:3], w[3:]))
        if self._collision_wrench_raw is not None:
            publish, cdr = self._collision_wrench_raw
            w = sim.sensed_collision_wrench_array()
            publish(cdr.serialize(t_ns, w[:3], w[3:]))

    def _publish_tf(self, t_ns: int) -> None:
        sim, rows = self.sim, self._tf_rows
        k0 = 1 if sim.robot.floating_base else 0
        if k0:
            rows[0] = sim.q[:7]
        rows[k0:, :3], rows[k0:, 3:] = self.frames.moving_arrays(sim.joint_positions)
        self._tf_raw(self._tf_cdr.serialize(t_ns, *rows))

    # ------------------------------------------------------------------ commands

    def _make_subscriptions(self) -> None:
        """Command subscriptions, through :class:`rclpy_shim.CommandIntake`: taken by the
        physics loop at the start of each step, or (public API) delivered by the executor."""
        cfg = self.cfg
        self.intake = rclpy_shim.CommandIntake(self)
        if cfg["topics.joint_commands"]:
            self._jc_reader = cv.JointStateReader()
            self.intake.subscribe(JointState, cfg["topics.joint_commands"],
                                  self._guarded("joint_commands", self._on_joint_commands_raw),
                                  COMMAND_QOS, raw=True)
        if cfg["topics.effort_commands"]:
            self.intake.subscribe(Float64MultiArray, cfg["topics.effort_commands"],
                                  self._guarded("effort_commands", self._on_effort_commands),
                                  COMMAND_QOS)
        if cfg["topics.external_wrench"]:  # polled too: a push acts from the very next step
            self.intake.subscribe(WrenchStamped, cfg["topics.external_wrench"],
                                  self._guarded("external_wrench", self._on_external_wrench),
                                  COMMAND_QOS)

    def _guarded(self, topic: str, handle):
        """A subscription callback: ``handle(msg)`` under the lock; an exception rejects
        the message (no message may end the physics loop or the executor); the first
        command un-pauses the simulation."""
        gate, lock = self.gate, self._lock

        def callback(msg) -> None:
            with lock:
                waiting = gate.waiting_for_first
                try:
                    handle(msg)
                except Exception as e:  # noqa: BLE001
                    gate.reject(topic, cv.CommandRejected(f"{type(e).__name__}: {e}", "error"),
                                time.monotonic())
                if waiting and not gate.waiting_for_first:
                    self._paused.clear()
                    self._wake.set()
        return callback

    def _poll_commands(self, subs=None) -> None:
        """Take every waiting command message (physics thread, polled intake)."""
        self.intake.poll(subs)

    def _wait_for_command(self) -> None:
        """Lockstep: wait until the last joint state has its command (or the
        timeout: a miss, the last valid command is kept), then return; also
        returns on stop, pause or reset (``gate.need_command`` tells)."""
        gate = self.gate
        start = last_sent = time.perf_counter()
        told = False
        while gate.need_command and self._running and not self._paused.is_set():
            now = time.perf_counter()
            with self._lock:
                action, wait_s = gate.lockstep_step(start, last_sent, now)
            if action == "timeout":
                return
            if action == "resend":
                # a controller that started late (or restarted) missed the state: send it again
                if gate.resend_wanted():
                    with self._lock:
                        self._publish(every=True)
                last_sent = now
                if not told:
                    told = True
                    self.get_logger().info(
                        f"lockstep: waiting for a command for the state at t = "
                        f"{gate.state_stamp_ns / 1e9:.3f} s on "
                        f"'{self.cfg['topics.joint_commands']}'"
                        + (" with that header.stamp" if self._match_stamp else ""),
                        throttle_duration_sec=10.0)
            elif action == "poll":
                # an answer is due within a millisecond: poll (1.5 us a subscription)
                # rather than block in rcl_wait, whose set-up alone costs ~85 us
                with self._lock:
                    self._poll_commands()
                time.sleep(0)
            else:
                ready = self.intake.wait(wait_s)
                if ready:
                    with self._lock:
                        self._poll_commands(ready)

    def _on_joint_commands_raw(self, data: bytes) -> None:
        """A joint_commands message read from its serialized form: the stamp, names
        and efforts straight from the bytes (the names decoded again only when
        they change), ~10x cheaper than rclpy's deserialization of a JointState,
        which cost a flood of malformed or wrongly stamped commands most of the
        loop's time (at 20 kHz of stale stamps the lockstep loop fell from 512 to
        3 steps/s, its answers lost from the overflowing queue)."""
        reader = self._jc_reader
        try:
            stamp, _, _, effort = reader(data)
        except ValueError as e:
            return self.gate.reject("joint_commands", cv.CommandRejected(
                f"not a valid serialized sensor_msgs/JointState ({e})", "malformed"),
                time.monotonic())
        self.gate.joint_command(stamp, reader.names, effort, self._now_ns(), time.monotonic())

    def _on_effort_commands(self, msg: Float64MultiArray) -> None:
        self.gate.effort_command(msg.data, self._now_ns(), time.monotonic())

    def _on_external_wrench(self, msg: WrenchStamped) -> None:
        duration = self.cfg["external_wrench.duration_s"]
        try:
            link, force, torque = cv.parse_external_wrench(msg)
            self.gate.check_push(link, len(self.sim.external_wrenches), self.sim.robot.model.name)
            self.sim.apply_external_wrench(link, force, torque, duration)
            t = (self._now_ns() + self._dt_ns) / 1e9
        except (cv.CommandRejected, WbSimError) as e:
            return self.gate.reject("external_wrench", e, time.monotonic())
        self.get_logger().info(
            f"push on '{link}': force {np.round(force, 3).tolist()} N, torque "
            f"{np.round(torque, 3).tolist()} N*m (link frame) for {duration:g} s from t = {t:.3f} s")

    def _torques(self) -> np.ndarray:
        """The torques of this step: the last valid command, or the watchdog's choice."""
        return self.gate.torques(self._now_ns(), self.sim.joint_velocities, time.perf_counter())

    # ------------------------------------------------------------------ services

    def _make_services(self) -> None:
        self.create_service(Trigger, "~/reset", self._on_reset, qos_profile=SERVICE_QOS)
        self.create_service(SetBool, "~/pause", self._on_pause, qos_profile=SERVICE_QOS)
        self.create_service(Trigger, "~/step", self._on_step, qos_profile=SERVICE_QOS)
        from .sim_interfaces import SimulationInterfaces, interfaces
        if interfaces() is None:
            self.get_logger().info(
                "simulation_interfaces is not installed: its services (~/reset_simulation, "
                "...) are off (a ROS 2 install has it; on a pip-only machine "
                "tools/setup_venv.sh generates it)")
        else:
            self.sim_interfaces = SimulationInterfaces(self, self, SERVICE_QOS)

    # the simulation control shared by ~/reset, ~/pause, ~/step and simulation_interfaces
    # (wb_sim.ros.sim_interfaces.Control)

    @property
    def lock(self):
        return self._lock

    @property
    def world_frame(self) -> str:
        return self.cfg["world_frame"]

    def now_msg(self):
        return cv.time_msg(self._now_ns())

    def reset_simulation(self) -> str:
        """Back to the initial state; the clock goes on; after a divergence (which
        paused it) stepping resumes. Returns what happened."""
        with self._lock:
            self._offset_ns = self._now_ns() + self._dt_ns  # the clock goes on
            self.sim.reset()
            self.gate.clear()
            self._publish(every=True)
            t_reset = self._now_ns() / 1e9
            resumed = self._diverged  # the divergence paused it: the reset undoes that
            if resumed:
                self._diverged = False
                self._paused.clear()
        self._wake.set()
        message = f"reset to the initial state at t = {t_reset:.3f} s" + (
            "; the simulation resumes after the divergence" if resumed else "")
        self.get_logger().info(message)
        return message

    def set_paused(self, paused: bool) -> None:
        if paused:
            self._paused.set()
        else:
            self._paused.clear()
        self._wake.set()
        self.get_logger().info(f"simulation {'paused' if paused else 'running'} at "
                               f"t = {self._now_ns() / 1e9:.3f} s")

    def is_paused(self) -> bool:
        return self._paused.is_set()

    def step_paused(self, steps: int) -> tuple[bool, str]:
        """``steps`` physics steps while paused, publishing after each."""
        for _ in range(steps):
            with self._lock:
                ok, why = self._step_once()
                self._publish(every=True)
            if not ok:
                return False, why
        return True, ""

    def _on_reset(self, request, response):
        response.success = True
        response.message = self.reset_simulation()
        return response

    def _on_pause(self, request, response):
        self.set_paused(request.data)
        response.success = True
        response.message = "paused" if request.data else "running"
        return response

    def _on_step(self, request, response):
        if not self.is_paused():
            response.success = False
            response.message = "not paused: call ~/pause with data: true first"
            return response
        ok, why = self.step_paused(1)
        response.success = ok
        response.message = f"t = {self._now_ns() / 1e9:.6f} s" if ok else why
        return response

    # ------------------------------------------------------------------ physics loop

    def _step_once(self, poll: bool = True) -> tuple[bool, str]:
        if poll:
            self._poll_commands()
        try:
            self.sim.step(self._torques())
        except DivergenceError as e:
            self._paused.set()
            self._diverged = True
            msg = f"simulation diverged and is paused (call ~/reset): {e}"
            self.get_logger().error(msg)
            return False, msg
        return True, ""

    def _schedule(self, running: bool = True) -> None:
        """Give the physics thread (the caller) real-time priority
        ``realtime_priority`` while it paces itself against the wall clock, the
        normal scheduler otherwise: as fast as possible or in lockstep it never
        sleeps or spins for commands, and must not starve the other processes.
        On a virtual machine a sleeping normal thread wakes more than 1 ms late
        about once in 1000 sleeps; a SCHED_FIFO one about once in 10 000; the
        pacer's active wait before each deadline covers the normal scheduler."""
        prio = self.cfg["realtime_priority"]
        pacing = running and self.cfg["real_time_factor"] > 0 and not self._lockstep
        why = self.pacer.schedule(prio, pacing)
        if why is not None:
            self.get_logger().warning(
                f"cannot give the physics thread real-time priority {prio} ({why}); it runs "
                f"with the normal scheduler and waits actively for the last "
                f"{self.pacer.spin_margin_s * 1e3:g} ms before each deadline "
                f"(realtime_spin_margin_s; allow rtprio, e.g. in /etc/security/limits.conf, "
                f"or set realtime_priority: 0)")

    def run(self) -> None:
        """The physics loop (blocks until :meth:`stop`)."""
        try:
            self._run()
        finally:
            self._schedule(running=False)  # back to the normal scheduler for the shutdown

    def _run(self) -> None:
        self._running = not self._stop_requested  # a stop() before the loop is not lost
        self._schedule()
        # What exists now (models, rclpy, messages) lives as long as the node: out of
        # the collector's sight, a full collection no longer scans it (on iCub it
        # stalled the loop 30-50 ms about once a minute: a dozen deadline misses)
        gc.freeze()
        log = self.get_logger()
        pacer, gate = self.pacer, self.gate
        pacer.anchor(time.perf_counter())
        running = lambda: self._running  # noqa: E731
        while self._running:
            if self._paused.is_set():
                if gate.waiting_for_first:
                    try:
                        with self._lock:
                            self._poll_commands()  # the first command un-pauses
                    except (RCLError, RuntimeError) as e:
                        if self._rcl_failed(e):
                            break
                    self._wake.wait(0.001)
                else:
                    self._wake.wait(0.1)
                self._wake.clear()
                now = time.perf_counter()
                pacer.anchor(now)
                pacer.stats.reset(now, self._now_ns() / 1e9)
                continue
            if self._wake.is_set():  # new real-time factor, reset or resume
                self._wake.clear()
                self._schedule()
                pacer.anchor(time.perf_counter())
            if gate.need_command:  # lockstep: the last joint state waits for its command
                try:
                    self._wait_for_command()
                except (RCLError, RuntimeError) as e:
                    if self._rcl_failed(e):
                        break
                    time.sleep(0.01)  # a middleware that keeps failing must not spin the loop
                if gate.need_command:  # stopped, paused or reset meanwhile
                    continue
                polled = True  # the wait took the commands: none to take before the step
            else:
                polled = False
            try:
                with self._lock:
                    ok, _ = self._step_once(poll=not polled)
                    if ok:
                        self._publish()
            except (RCLError, RuntimeError) as e:
                if self._rcl_failed(e):
                    break  # shut down under us (Ctrl-C, SIGTERM): rcl calls fail
            now = time.perf_counter()
            wait_s, behind = pacer.after_step(now, self.cfg["real_time_factor"], self._lockstep)
            stop_after = self.cfg["stop_after_s"]
            if stop_after > 0 and self._now_ns() >= round(stop_after * cv.NS_PER_S):
                self._report(now)
                log.info(f"stop_after_s = {stop_after:g} s of simulated time reached")
                break
            if behind:
                log.warning(f"physics loop {behind:.2f} s behind its deadlines; "
                            f"re-anchoring the pacing")
                if pacer.fell_behind():  # a loop that cannot keep up never sleeps: at
                    self._schedule()  # real-time priority it would hold its core
                    log.warning("the physics thread is back on the normal scheduler "
                                "until real_time_factor changes")
            elif wait_s > 0:
                pacer.wait(wait_s, self._wake, running, spin=not self._lockstep)
            if pacer.report_due(now, self.cfg["publish.stats_period_s"]):  # live: every step
                self._report(now)

    def _rcl_failed(self, e: Exception) -> bool:
        """An rcl call of the physics loop failed: True if the context is down (the
        loop ends); otherwise (e.g. Fast DDS refusing a publish on a saturated
        machine: 'cannot publish data') the failure is counted and logged at most
        once a second, and the loop goes on: one failed publish or take must not
        end the simulation (it ended a one-hour soak with exit code 1 after
        24 min). A non-rcl RuntimeError is a bug and propagates."""
        if not self.context.ok():
            return True
        if not isinstance(e, RCLError):
            raise e
        self._rcl_failures += 1
        now = time.monotonic()
        if now - self._rcl_failure_logged >= REJECT_LOG_PERIOD_S:
            self._rcl_failure_logged = now
            self.get_logger().error(f"middleware call failed ({self._rcl_failures} so far), "
                                    f"going on: {e}")
        return False

    def _report(self, now: float) -> None:
        pacer, gate = self.pacer, self.gate
        s = pacer.stats
        sim_t = self._now_ns() / 1e9
        lat = ""
        p = s.latency_percentiles()
        if p is not None:
            lat = f", joint_states -> command applied p50 {p[0] * 1e3:.2f} ms p99 {p[1] * 1e3:.2f} ms"
        pace = pacer.lockstep_text(now, sim_t) if self._lockstep else pacer.pace_text(now, sim_t)
        base = ""
        if self.sim.robot.floating_base:
            x, y, z = self.sim.q[:3].tolist()
            base = f", base at ({x:.3f}, {y:.3f}, {z:.4f}) m"
        solver = ""
        st = self.sim.contact.statistics()
        if "nonconverged" in st:
            solver = (f", contact solver: {st['nonconverged']} of {st['solves']} solves not "
                      f"converged")
        rejected = ""
        if gate.rejected:  # counted, not logged one by one
            rejected = ", rejected messages: " + ", ".join(
                f"{topic} {kind} {n}" for (topic, kind), n in sorted(gate.rejected.items()))
            gate.rejected.clear()
        applied = (f", valid commands {s.accepted}, new commands applied at {s.applied} of "
                   f"{s.steps} steps")
        if self._rcl_failures:
            applied += f", middleware call failures {self._rcl_failures} in all"
        policy = "" if self._lockstep else f", pacing: {pacer.policy}"
        self.get_logger().info(f"{pace}{lat}{base}{solver}{applied}{policy}{rejected}")
        s.reset(now, sim_t)

    def stop(self) -> None:
        self._stop_requested = True
        self._running = False
        self._wake.set()


_LIVE_NODE = tuple(p.key for p in NODE_PARAMETERS if p.live)


def main(args=None) -> int:
    """Entry point of ``wb_sim_node``; SIGINT (Ctrl-C), SIGTERM and an external
    shutdown end it cleanly with exit code 0."""
    # The physics thread and the executor thread share the GIL: hand it over
    # every 0.2 ms instead of Python's default 5 ms, so the physics loop keeps
    # its 1 ms deadlines while callbacks run.
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    # our own signal handlers stop the loop; rclpy's would raise KeyboardInterrupt
    # anywhere, e.g. in the middle of destroying the node
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node = None
    # installed before the node exists: a Ctrl-C during the start-up (URDF, discovery)
    # is not lost; the node stops before its first step
    stop_requested = threading.Event()

    def on_signal(*_):
        stop_requested.set()
        if node is not None:
            node.stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    try:
        try:
            node = SimNode(params_files=_params_files(sys.argv if args is None else args))
        except (WbSimError, ParameterException, NameValidationException) as e:
            # ours, and rclpy's own refusals of a parameter (a value outside its
            # descriptor's range) or of a name
            rclpy.logging.get_logger("wb_sim").fatal(f"cannot start: {e}")
            return 2
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        stop_spinning = threading.Event()
        spinner = threading.Thread(target=_spin, args=(executor, node, stop_spinning),
                                   daemon=True)
        spinner.start()
        threading.Thread(target=node.watch_for_duplicate_name, daemon=True).start()
        if not stop_requested.is_set():
            node.run()
        node.get_logger().info(f"stopped at t = {node._now_ns() / 1e9:.3f} s")
        # the executor thread must be out of rclpy before the node and context go
        stop_spinning.set()
        spinner.join()
        executor.shutdown(timeout_sec=1.0)
    finally:
        if node is not None:
            node.stop()
            node.destroy_node()
        rclpy.try_shutdown()
    return node.exit_code


def _params_files(argv) -> tuple[str, ...]:
    """The ``--params-file`` arguments of a command line, in order."""
    return tuple(argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--params-file")


def _spin(executor, node: SimNode, stop: threading.Event) -> None:
    """The executor thread: services, parameters (commands are polled by the physics loop)."""
    try:
        while not stop.is_set() and node.context.ok():
            try:
                executor.spin_once(timeout_sec=0.1)
            except (KeyboardInterrupt, ExternalShutdownException):
                break
            except Exception as e:  # noqa: BLE001 - one failed callback must not end the node
                if not node.context.ok():
                    break
                node.get_logger().error(f"a service or parameter callback failed: "
                                        f"{type(e).__name__}: {e}")
    finally:
        node.stop()


if __name__ == "__main__":
    sys.exit(main())
