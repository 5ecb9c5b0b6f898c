"""``wb_sim_node``: the ROS 2 simulator node, a thin adapter over :class:`wb_sim.Simulator`.

Parameters -> the core's validated config; core state -> messages (stamped
with simulated time); messages -> torques. The physics runs on its own
thread; an executor thread serves the services and parameter updates. One
lock guards the simulator.

This module only wires plain parts to rclpy: the command gate (:mod:`.gate`:
validation, watchdog, stamp matching, lockstep), the pacer (:mod:`.pacer`:
deadlines, scheduling policy, statistics), the publishers (:mod:`.publishers`, over
the stream table of :mod:`.streams`), the services (:mod:`.services`), the
parameters (:mod:`.parameters`); the process around it (threads, signals, exit
codes: ``wb_sim_node``, ``python -m wb_sim.ros.process``) is :mod:`.process`, which
imports this module and never the reverse. rclpy's private internals are used only through
:mod:`.rclpy_shim`.

How the physics meets the controller (docs/ros.md, "Synchronisation"; the log names
the mode, :func:`sync_description`):

* ``sync.mode: lockstep``: after publishing a joint state the physics waits for its
  command (with ``sync.match_stamp``, one whose stamp is that state's) before the next
  step, never faster than ``real_time_factor`` (0: as fast as the controller answers), so
  the closed loop is the same whatever the CPU load and DDS latency; a controller silent
  for ``sync.timeout_s`` counts as lost and the physics steps on (the watchdog acts);
* ``sync.mode: realtime``: free-running against the wall clock at ``real_time_factor``;
  a step applies the newest valid command;
* ``controller.callable``: an in-process controller (:mod:`wb_sim.control`) called before
  each step, no message hop.
"""

from __future__ import annotations

import array
import gc
import math
import threading
import time
import traceback
import warnings
from typing import Any

import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from .. import compiled
from ..config import load_config
from ..control import ControllerLoop
from ..controllers import simulator_drive_gains
from ..errors import ConfigError, DivergenceError, WbSimError
from ..parameters import unknown_key_error
from ..robot import did_you_mean
from ..simulator import Simulator
from . import conversions as cv
from . import rclpy_shim
from .gate import BUSY_POLL_S, REJECT_LOG_PERIOD_S, RESEND_S, TOPICS, CommandGate, GateSet
from .pacer import Pacer, stats_line
from .parameters import (controller_params, core_keys, declare_all, load_node_config,
                         split_live_update, sync_description)
from .publishers import DiagnosticsPublisher, StatePublishers, start_viewer
from .rclpy_shim import PolledNodeMixin, RCLError
from .robots import (ROBOT_LIVE_KEYS, FleetPublishers, RobotChannel, check_fleet_cfg,
                     fleet_params, node_cfg_for_world, ros_value)
from .streams import STREAMS, StreamTable
from .services import NodeServices
from .snapshots import NodeSnapshot, nbytes
from .verdict import EffortWatch

#: commands: the physics loop takes every waiting message at each step and validates it on
#: take, so the newest VALID command wins: with a depth of 1 a flood of invalid messages
#: would push the controller's commands out of the queue before they are taken (at 5 kHz
#: of rejects only 38 % of them were applied); 100 holds 5 ms of a 20 kHz flood
COMMAND_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
#: while the physics waits for the first command (command.wait_for_first), the initial
#: state is published this often (wall), s: a controller that waits for a joint state
#: before it sends anything gets one (it deadlocked silently when nothing came)
FIRST_STATE_PERIOD_S = 0.1


def refuse_duplicate_name(node, until: float) -> None:
    """ConfigError if another node of ``node``'s name and namespace runs on the graph (two
    simulators named /wb_sim would interleave their /clock); looks until ``until``
    (monotonic), as DDS discovers a running node within a moment."""
    me = (node.get_name(), node.get_namespace())
    while node.context.ok():
        n = sum(1 for x in node.get_node_names_and_namespaces() if tuple(x) == me)
        if n > 1:
            raise ConfigError(
                f"another node named '{node.get_fully_qualified_name()}' is already running on "
                f"this ROS domain; stop it, or give this one another name or namespace "
                f"(--ros-args -r __node:=NAME or -r __ns:=/NS)")
        if time.monotonic() >= until:
            return
        time.sleep(0.1)


class SimNode(PolledNodeMixin, Node):
    """The simulator node (name ``wb_sim``): wiring of the physics, the command gate,
    the pacer and the stream table to rclpy."""

    def __init__(self, params_files: tuple[str, ...] = (), **kwargs: Any):
        """``params_files``: the ``--params-file`` arguments, in order (a relative
        ``urdf_path`` is relative to the file that sets it)."""
        super().__init__("wb_sim", **kwargs)
        flat = declare_all(self, tuple(params_files))
        self.cfg = load_node_config(flat)
        #: several robots (parameter world_file): [(name, parameters)], the first robot's the
        #: node's own (wb_sim.ros.robots); None: one robot, as ever
        fleet = fleet_params(self.cfg["world_file"], core_keys(flat))
        if fleet is not None:
            check_fleet_cfg(self.cfg)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.sim = Simulator(load_config(core_keys(flat))) if fleet is None else \
                Simulator.from_robots(fleet)
        for w in caught:  # e.g. a robot starting inside the ground: into the node's log
            self.get_logger().warning(str(w.message))
        self._notes_logged: set[str] = set()
        self._log_notes()
        refuse_duplicate_name(self, 0.0)  # one already discovered: refused before publishing
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
                              f"{', '.join(unknown)}{did_you_mean(unknown[0], sim.joint_names)}; "
                              f"joints: {', '.join(sim.joint_names)}")
        self.command_joint_names = cmd_names
        self._lockstep = self.cfg["sync.mode"] == "lockstep"
        if self._lockstep and not self.cfg["topics.joint_states"]:
            raise ConfigError("parameter 'sync.mode' = 'lockstep' needs joint states to answer: "
                              "'topics.joint_states' must not be empty")
        self.pacer = Pacer(self.dt, spin_margin_s=self.cfg["realtime_spin_margin_s"])
        self.efforts = EffortWatch.from_simulator(sim)  # saturation and drift, for the stats line
        self._reject_loggers = {t: self.get_logger().get_child(t) for t in TOPICS}
        # where command.kp / command.kd are not given: the robot's (wb_sim_robot's rule)
        derived = simulator_drive_gains(sim)
        #: several robots: one RobotChannel each (its namespace, gate, parameters); None: one
        self.robots: list[RobotChannel] | None = None
        if fleet is None:
            self.gate = CommandGate(
                sim.joint_names, cmd_names, self.cfg, self.pacer.stats, self._gate_log,
                lockstep=self._lockstep, match_stamp=self.cfg["sync.match_stamp"],
                wait_for_first=self.cfg["command.wait_for_first"],
                frame_names=sim.robot.frame_names(), dt_ns=self._dt_ns,
                derived_gains=(derived.kp, derived.kd))
        else:
            self.robots = []
            for part, (_, params) in zip(sim.robots, fleet):
                r = RobotChannel(part, load_config(params), self.cfg)
                r.declare(self)
                r.cfg = r.overlay(self.cfg)
                r.gate = CommandGate(
                    part.joint_names, part.joint_names, r.cfg, self.pacer.stats,
                    self._robot_log(part.name), lockstep=self._lockstep,
                    match_stamp=self.cfg["sync.match_stamp"],
                    wait_for_first=self.cfg["command.wait_for_first"],
                    frame_names=part.robot.frame_names(), dt_ns=self._dt_ns,
                    derived_gains=(derived.kp[part.joints], derived.kd[part.joints]))
                self.robots.append(r)
            self.gate = GateSet([r.gate for r in self.robots], sim.robots, sim.nj)
        self._match_stamp = self.gate.match_stamp
        self.in_process = self._in_process_controller()
        if self.gate.waiting_for_first:
            self._paused.set()
        self.out = StatePublishers(self, sim, self.cfg if self.robots is None else
                                   node_cfg_for_world(self.cfg), self.gate)
        #: several robots: their own streams under their namespaces and the one TF tree
        self.fleet_out = None
        if self.robots is not None:
            on = {s: bool(self.cfg[f"topics.{s}"]) for s, _ in STREAMS}
            self.fleet_out = FleetPublishers(self, sim, self.cfg, self.robots,
                                             StreamTable.from_config(self.cfg, 1.0 / self.dt, on))
        for note in self.out.notes + (self.fleet_out.notes if self.fleet_out else []):
            self.get_logger().info(note)
        #: the solver health on /diagnostics (docs/ros.md, "Solver health")
        self.diagnostics = DiagnosticsPublisher(self, sim, self.cfg, self.pacer.stats)
        if self.diagnostics.note:
            self.get_logger().warning(self.diagnostics.note)
        self._make_subscriptions()
        self.node_services = NodeServices(self, self, self.now_s)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.out.publish_latched(self._now_ns())
        if self.fleet_out is not None:
            self.fleet_out.publish_latched(self._now_ns())
        self._publish(every=True)
        self.viewer = start_viewer(self.cfg["viewer"], sim, self._lock, self.get_logger())
        if sim.robot.floating_base and sim.contact_points.n == 0:
            self.get_logger().warning(
                "no contact surfaces (parameter 'contact_surfaces' is empty): the floating "
                "base will fall through the ground; give the feet surfaces as in "
                "config/humanoid.yaml, or set floating_base: false for a fixed robot")
        commands = (f"commands on '{self.cfg['topics.joint_commands']}' / "
                    f"'{self.cfg['topics.effort_commands']}'" if self.in_process is None else
                    "commands on topics refused")
        what = sim.robot.model.name if self.robots is None else \
            f"{len(self.robots)} robots (" + ", ".join(
                f"'{r.name}': {r.part.robot.model.name}, {r.part.nj} joints, topics under "
                f"'{r.name}/'" for r in self.robots) + ")"
        self.get_logger().info(
            f"simulating {what} ({sim.nj} joints, {sim.mass:.1f} kg, "
            f"{sim.contact_points.n} contact points) at {1 / self.dt:g} Hz; "
            f"{sync_description(self.cfg, self.cfg['controller.callable'])}; {commands}; "
            f"step: {compiled.path()} ({compiled.PLAIN_ENV}=1 forces the plain Python path)")
        if self.gate.waiting_for_first or self._lockstep:
            self.get_logger().info(
                f"waiting for the first command on '{self.cfg['topics.joint_commands']}' or "
                f"'{self.cfg['topics.effort_commands']}' before the first step"
                + (" (command.wait_for_first)" if not self._lockstep else " (lockstep)")
                + "; the initial state is published every "
                + f"{RESEND_S if self._lockstep else FIRST_STATE_PERIOD_S:g}"
                + f" s meanwhile on '{self.cfg['topics.joint_states']}'")
        self.get_logger().info(rclpy_shim.describe())
        self.node_services.start()  # the requests' thread: the node is whole

    # the parameter callback replaces the configuration: the gate reads the new one
    @property
    def cfg(self):
        return self._cfg

    @cfg.setter
    def cfg(self, value) -> None:
        self._cfg = value
        if getattr(self, "robots", None):
            for r in self.robots:
                r.cfg = r.overlay(value)
                r.gate.cfg = r.cfg
        elif getattr(self, "gate", None) is not None:
            self.gate.cfg = value

    def _robot_log(self, name: str):
        """The log of robot ``name``'s gate: its lines name the robot."""
        return lambda level, text, topic: self._gate_log(level, f"robot '{name}': {text}", topic)

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

    # ------------------------------------------------------------------ parameters

    def _in_process_controller(self) -> ControllerLoop | None:
        """The controller of ``controller.callable`` (None without one); ConfigError for a
        factory that cannot be made, or one with lockstep (which waits for answers over
        topics)."""
        cfg = self.cfg
        ref = cfg["controller.callable"]
        if not ref:
            return None
        if self._lockstep:
            raise ConfigError(
                "parameter 'sync.mode' = 'lockstep' waits for an external controller's answers, "
                "but 'controller.callable' runs the controller inside the node, in step by "
                "construction: set sync.mode to realtime (real_time_factor 0: as fast as "
                "possible)")
        if self.gate.waiting_for_first:  # nothing comes over topics: the controller starts it
            self.gate.waiting_for_first = False
            self.get_logger().info("command.wait_for_first does not apply: the in-process "
                                   "controller starts the physics")
        return ControllerLoop(self.sim, ref, controller_params(cfg["controller.params"]),
                              cfg["controller.rate_hz"])

    def _log_notes(self) -> None:
        """Log, once each, what the simulator adjusted (e.g. a contact stiffer than the
        rate resolves: it stays stable and acts as the stiffest one dt resolves)."""
        for note in self.sim.notes:
            if note not in self._notes_logged:
                self.get_logger().info(note)
                self._notes_logged.add(note)

    def _on_set_parameters(self, params) -> SetParametersResult:
        """A live change, validated whole before anything changes; the core applies its
        part whole or not at all; no exception escapes (it would end the executor)."""
        try:
            params, per_robot = self._robot_updates(params)
            core, node = split_live_update(params)
            new_node = load_node_config({**self.cfg.values, **node}) if node else None
            if new_node is not None and self.robots is None:
                self.gate.gains(new_node)  # command.kp / kd must fit the joints
            for r, upd in per_robot.items():
                r.gate.gains(load_node_config({**r.cfg.values, **upd}))  # its joints
            if core:
                with self._lock:
                    self.sim.set_contact_parameters(**core)
                self._log_notes()
        except Exception as e:  # noqa: BLE001
            why = str(e) if isinstance(e, WbSimError) else f"{type(e).__name__}: {e}"
            self.get_logger().warning(f"parameter update refused: {why}")
            return SetParametersResult(successful=False, reason=why)
        for r, upd in per_robot.items():
            with self._lock:
                r.gains.update(upd)
                r.cfg = r.overlay(self.cfg)
                r.gate.cfg = r.cfg
            for k, v in upd.items():
                self.get_logger().info(f"parameter '{r.name}.{k}' set to {ros_value(v)!r}")
        if new_node is not None:
            if new_node["real_time_factor"] != self.cfg["real_time_factor"]:
                self.pacer.unsuspend()  # real-time priority may be tried again
            with self._lock:  # between two steps: a step reads one configuration's gains
                self.cfg = new_node
            self._wake.set()  # a new real-time factor re-anchors the pacing
        for k, v in {**core, **node}.items():
            v = list(v) if isinstance(v, array.array) else v  # a ROS double array
            self.get_logger().info(f"parameter '{k}' set to {v!r}")
        return SetParametersResult(successful=True)

    def _robot_updates(self, params) -> tuple[list, dict]:
        """A live change split into the node's and the robots' own (``<name>.command.kp``,
        ``<name>.command.kd``, ``<name>.command.timeout_s``, ``<name>.command.timeout_action``:
        {RobotChannel: {key: value}}); ConfigError for the node-wide drive gains and watchdog
        with several robots (each robot has its own)."""
        if self.robots is None:
            return list(params), {}
        rest, per_robot = [], {}
        by_name = {r.name: r for r in self.robots}
        for prm in params:
            name, _, key = prm.name.partition(".")
            if name in by_name and key in ROBOT_LIVE_KEYS:
                value = ros_value(prm.value) if prm.value is not None else []
                per_robot.setdefault(by_name[name], {})[key] = \
                    load_node_config({key: value})[key]
            elif prm.name in ROBOT_LIVE_KEYS:
                what = "drive gains" if prm.name in ("command.kp", "command.kd") else "watchdog"
                raise ConfigError(f"parameter '{prm.name}': with several robots each has its "
                                  f"own {what}: set '<robot>.{prm.name}' ("
                                  + ", ".join(f"'{n}.{prm.name}'" for n in by_name) + ")")
            else:
                rest.append(prm)
        return rest, per_robot

    def set_parameters_atomically(self, parameter_list):
        """rclpy's, with a parameter the node does not have refused by its name and the
        closest ones (``ros2 param set /wb_sim contact.stifness 1e5``: "unknown parameter
        'contact.stifness'; did you mean 'contact.stiffness'?") where rclpy answers
        "Invalid access to undeclared parameter(s): []". rclpy's parameter service calls
        this public method for ``set_parameters`` and ``set_parameters_atomically``; the
        on-set callbacks never see an undeclared name."""
        unknown = [p.name for p in parameter_list if not self.has_parameter(p.name)]
        if unknown:
            known = self.list_parameters([], 0).names
            why = (f"{unknown_key_error(unknown[0], known)} (ros2 param list "
                   f"{self.get_fully_qualified_name()} "
                   f"lists them)")
            self.get_logger().warning(f"parameter update refused: {why}")
            return SetParametersResult(successful=False, reason=why)
        return super().set_parameters_atomically(parameter_list)

    def flush_publishers(self, timeout_s: float) -> str | None:
        """Wait, at most ``timeout_s`` in all, until every reliable subscriber has
        acknowledged what each publisher sent (``Publisher.wait_for_all_acked``). Called
        once the loop has ended, before the node goes: the last samples of a run (its
        final state at ``stop_after_s``) then reach a reader that was behind, a
        recording's included; a publisher destroyed with samples unacknowledged takes
        them with it. Returns what to warn about (the topics a subscriber had not
        acknowledged by then, or why the wait failed), or None."""
        from rclpy.duration import Duration
        deadline = time.monotonic() + timeout_s
        pending = []
        for pub in self.publishers:
            left = max(deadline - time.monotonic(), 0.0)  # past it: one look, no wait
            try:
                if not pub.wait_for_all_acked(Duration(nanoseconds=int(left * 1e9))):
                    pending.append(pub.topic_name)
            except (RCLError, RuntimeError) as e:
                if not self.context.ok():  # shut down under us (a signal): nothing to wait for
                    return None
                # e.g. a middleware without acknowledgements: said once, not per topic
                return (f"the node could not wait for its subscribers to acknowledge the last "
                        f"samples ({e}): a reader that was behind may miss them")
        if not pending:
            return None
        return (f"a subscriber of {', '.join(pending)} had not acknowledged the last samples "
                f"{timeout_s:g} s after the node stopped (it lags, or it left without "
                f"acknowledging): it may miss them")

    def destroy_node(self):
        if getattr(self, "viewer", None) is not None:
            self.viewer.close()
            self.viewer = None
        if getattr(self, "intake", None) is not None:
            self.intake.close()
        if getattr(self, "node_services", None) is not None:
            self.node_services.close()
        return super().destroy_node()

    # ------------------------------------------------------------------ publishers

    def _now_ns(self) -> int:
        return self._offset_ns + self.sim.step_count * self._dt_ns

    def now_ns(self) -> int:
        """The node's simulated time, ns (the stamp of the state now)."""
        return self._now_ns()

    def now_s(self) -> float:
        """The node's simulated time, s (it never goes back, also across resets)."""
        return self._now_ns() / 1e9

    def _publish(self, every: bool = False) -> None:
        """Publish the streams due at this step (all of them with ``every``)."""
        if self.fleet_out is not None:  # several robots: their joint states first
            self.fleet_out.publish(self._now_ns(), every)
        self.out.publish(self._now_ns(), every)

    # ------------------------------------------------------------------ commands

    def _make_subscriptions(self) -> None:
        """Command subscriptions, through :class:`rclpy_shim.CommandIntake`: taken by the
        physics loop at the start of each step, or (public API) delivered by the executor."""
        cfg = self.cfg
        self.intake = rclpy_shim.CommandIntake(self)
        if self.robots is not None:
            for r in self.robots:
                self._robot_subscriptions(r)
            return
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

    def _robot_subscriptions(self, r: RobotChannel) -> None:
        """Several robots: robot ``r``'s command topics under its namespace, into its gate."""
        cfg, gate = self.cfg, r.gate
        if cfg["topics.joint_commands"]:
            reader = cv.JointStateReader()
            self.intake.subscribe(
                JointState, r.topic("joint_commands", cfg),
                self._guarded("joint_commands", lambda data: self._on_joint_commands_raw(
                    data, gate, reader), gate), COMMAND_QOS, raw=True)
        if cfg["topics.effort_commands"]:
            self.intake.subscribe(
                Float64MultiArray, r.topic("effort_commands", cfg),
                self._guarded("effort_commands", lambda msg: gate.effort_command(
                    msg.data, self._now_ns(), time.monotonic()), gate), COMMAND_QOS)
        if cfg["topics.external_wrench"]:
            self.intake.subscribe(
                WrenchStamped, r.topic("external_wrench", cfg),
                self._guarded("external_wrench", lambda msg: self._on_external_wrench(
                    msg, gate, r.part), gate), COMMAND_QOS)

    def _guarded(self, topic: str, handle, robot_gate=None):
        """A subscription callback: ``handle(msg)`` under the lock; an exception rejects
        the message (no message may end the physics loop or the executor); the first
        command un-pauses the simulation (with several robots: every robot's first;
        ``robot_gate``: the robot's gate, which counts its rejections)."""
        gate, lock = self.gate, self._lock
        rgate = robot_gate or gate

        refused = cv.CommandRejected(
            f"the in-process controller '{self.cfg['controller.callable']}' drives the joints "
            f"(controller.callable)", "in-process controller") if self.in_process is not None \
            and topic != "external_wrench" else None

        def callback(msg) -> None:
            with lock:
                waiting = gate.waiting_for_first
                if refused is not None:
                    return gate.reject(topic, refused, time.monotonic())
                try:
                    handle(msg)
                except Exception as e:  # noqa: BLE001
                    rgate.reject(topic, cv.CommandRejected(f"{type(e).__name__}: {e}", "error"),
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
                        if self.fleet_out is not None:  # to the robots still awaited
                            self.fleet_out.resend(self._now_ns())
                        else:
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
            else:  # poll or block: wait for the answer; its callback runs here
                self.intake.wait_events(wait_s if action == "block" else BUSY_POLL_S)

    def _on_joint_commands_raw(self, data: bytes, gate=None, reader=None) -> None:
        """A joint_commands message read from its serialized form: the stamp, names
        and efforts straight from the bytes (the names decoded again only when
        they change), ~10x cheaper than rclpy's deserialization of a JointState,
        which cost a flood of malformed or wrongly stamped commands most of the
        loop's time (at 20 kHz of stale stamps the lockstep loop fell from 512 to
        3 steps/s, its answers lost from the overflowing queue)."""
        reader = reader or self._jc_reader
        gate = gate or self.gate
        try:
            stamp, position, velocity, effort = reader(data)
        except ValueError as e:
            return gate.reject("joint_commands", cv.CommandRejected(
                f"not a valid serialized sensor_msgs/JointState ({e})", "malformed"),
                time.monotonic())
        gate.joint_command(stamp, reader.names, effort, self._now_ns(), time.monotonic(),
                                position=position, velocity=velocity)

    def _on_effort_commands(self, msg: Float64MultiArray) -> None:
        self.gate.effort_command(msg.data, self._now_ns(), time.monotonic())

    def _on_external_wrench(self, msg: WrenchStamped, gate=None, part=None) -> None:
        """A push; with several robots on robot ``part``'s link (named as in its URDF)."""
        duration = self.cfg["external_wrench.duration_s"]
        gate = gate or self.gate
        robot = self.sim.robot if part is None else part.robot
        prefix = "" if part is None else part.prefix
        try:
            link, force, torque = cv.parse_external_wrench(msg)
            gate.check_push(link, len(self.sim.external_wrenches), robot.model.name)
            self.sim.apply_external_wrench(prefix + link, force, torque, duration)
            t = (self._now_ns() + self._dt_ns) / 1e9
        except (cv.CommandRejected, WbSimError) as e:
            return gate.reject("external_wrench", e, time.monotonic())
        who = "" if part is None else f"robot '{part.name}': "
        self.get_logger().info(
            f"{who}push on '{link}': force {np.round(force, 3).tolist()} N, torque "
            f"{np.round(torque, 3).tolist()} N*m (link frame) for {duration:g} s from t = {t:.3f} s")

    def _torques(self) -> np.ndarray:
        """The torques of this step: the in-process controller's, or the last valid command
        (its position and velocity targets at the current state), or the watchdog's."""
        sim = self.sim
        if self.in_process is not None:
            return self.in_process.torques()
        return self.gate.torques(self._now_ns(), sim.joint_velocities, time.perf_counter(),
                                 sim.joint_positions)

    # ------------------------------------------------------------------ services

    # ------------------------------------------------------------------ simulation control
    # shared by ~/reset, ~/pause, ~/step and simulation_interfaces (.sim_interfaces.Control)

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
            if self.in_process is not None:  # a controller of the initial state, as at start
                self.in_process.reset()
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

    def take_snapshot(self) -> NodeSnapshot:
        """A node snapshot of now (the lock held for the copies only; the size is
        measured after): the core's state, the gate's, the in-process controller's held
        torques and the clock (:mod:`.snapshots`)."""
        with self._lock:
            state = self.sim.get_state()
            gate = self.gate.snapshot()
            ctrl = None if self.in_process is None else self.in_process.snapshot()
            t_ns = self._now_ns()
        return NodeSnapshot(state, gate, ctrl, t_ns, nbytes((state, gate, ctrl)))

    def restore_snapshot(self, snap: NodeSnapshot) -> str:
        """Back to ``snap``, between two steps: the physics continues from it bit for
        bit. The clock goes on, as at a reset: the restored state is published stamped
        one step after the present time and the steps after it follow at dt; the
        command acting and the watchdog's origin come back as old (in simulated time) as
        they were when saved. In lockstep the restored state waits for its command.
        After a divergence (which paused it) stepping resumes. Returns what happened."""
        with self._lock:
            now_ns = self._now_ns()
            self.sim.set_state(snap.sim)
            self._offset_ns = now_ns + self._dt_ns - self.sim.step_count * self._dt_ns
            self.gate.restore(snap.gate, self._now_ns() - snap.t_ns)
            if self.in_process is not None and snap.controller is not None:
                self.in_process.restore(snap.controller)
            self._publish(every=True)
            t_restored = self._now_ns() / 1e9
            resumed = self._diverged
            if resumed:
                self._diverged = False
                self._paused.clear()
        self._wake.set()
        message = (f"restored the state of t = {snap.t_ns / 1e9:.6f} s at t = "
                   f"{t_restored:.6f} s (the simulated clock goes on)"
                   + ("; the simulation resumes after the divergence" if resumed else ""))
        self.get_logger().info(message)
        return message

    def change_objects(self, what: str, change) -> str:
        """Spawn or delete a free object: ``change(sim)`` (``sim.spawn_object(...)`` or
        ``sim.delete_object(...)``) under the lock, between two steps. Either rebuilds the
        simulator (its models, its contact model: ~0.9 s for the humanoid with its
        collision geometry), so the physics waits for it, holding the lock: the services
        that need the lock wait as long, never longer; a refused change (CommandError)
        leaves the simulator as it was (the core restores it). The markers and /tf take
        the new set; the pacing starts again from now (no catching up on the rebuild's
        time). Returns what happened; the CommandError propagates."""
        with self._lock:
            t0 = time.perf_counter()
            obj = change(self.sim)
            took = time.perf_counter() - t0
            self.out.objects_changed(self._now_ns())
            t = self._now_ns() / 1e9
            # the deadlines start again from now: the physics thread, waiting for the
            # lock, must not count the rebuild as missed deadlines and race to catch up
            # (nor leave real-time priority as a loop that fell behind)
            self.pacer.anchor(time.perf_counter())
        self._wake.set()
        shape = f"mesh '{obj.mesh}' scaled {list(obj.size)}" if obj.mesh else \
            f"urdf '{obj.urdf or '(XML)'}', {len(obj.parts)} geometries" if obj.parts else \
            f"{obj.shape} {list(obj.size)} m"
        message = (f"{what} object '{obj.name}' ({shape}, {obj.mass:g} kg) at t = {t:.3f} s; "
                   f"the physics paused {took:.2f} s for the simulator's rebuild")
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

    def physics_free_running(self) -> bool:
        """Whether the physics steps against the wall clock now (not paused, not lockstep):
        then requests are paced (:class:`.services.RequestLimiter`) or budgeted
        (:class:`.services.CpuBudget`), as their cost would change the run."""
        return not self._paused.is_set() and not self._lockstep

    def stepping_allowed(self) -> bool:
        """False once the node stops: a stepping request ends at its next step."""
        return not self._stop_requested and self.context.ok()

    def step_paused(self, steps: int) -> tuple[bool, str]:
        """``steps`` physics steps while paused, publishing after each (a requests thread;
        the lock is taken for one step at a time). Ends early, with the reason, when the
        node stops (SIGINT) or the simulation is resumed meanwhile."""
        for done in range(steps):
            if not self.stepping_allowed():
                return False, f"the node is stopping: {done} of {steps} steps done"
            if not self._paused.is_set():
                return False, f"the simulation was resumed: {done} of {steps} steps done"
            with self._lock:
                ok, why = self._step_once()
                self._publish(every=True)
            if not ok:
                return False, why
        return True, ""

    # ------------------------------------------------------------------ physics loop

    def _step_once(self, poll: bool = True) -> tuple[bool, str]:
        if poll:
            self._poll_commands()
        try:
            tau = self._torques()
        except Exception as e:  # noqa: BLE001 - the user's in-process controller failed
            if self.in_process is None:
                raise
            self.get_logger().fatal(
                f"the in-process controller '{self.cfg['controller.callable']}' failed at t = "
                f"{self.now_s():.3f} s: {type(e).__name__}: {e}\n{traceback.format_exc()}"
                f"the node stops (exit code 1)")
            self.exit_code = 1
            self.stop()
            return False, str(e)
        try:
            self.sim.step(tau)
        except DivergenceError as e:
            self._paused.set()
            self._diverged = True
            msg = f"simulation diverged and is paused (call ~/reset): {e}"
            self.get_logger().error(msg)
            return False, msg
        self.efforts.after_step(self.sim.applied_torques, self.sim.joint_positions)
        if self.diagnostics.active:
            self.diagnostics.after_step(time.perf_counter(), self.now_msg, self.cfg)
        return True, ""

    def _schedule(self, running: bool = True) -> None:
        """Give the physics thread (the caller) real-time priority
        ``realtime_priority`` while it paces itself against the wall clock, the
        normal scheduler otherwise: as fast as possible or in lockstep it never
        sleeps or spins for commands, and must not starve the other processes.
        On a virtual machine a sleeping normal thread wakes more than 1 ms late
        about once in 1000 sleeps; a SCHED_FIFO one about once in 10 000; under
        the normal scheduler the pacer asks for a short time slice and no timer
        slack, and waits actively before each deadline (:mod:`.pacer`)."""
        prio = self.cfg["realtime_priority"]
        pacing = running and self.cfg["real_time_factor"] > 0 and not self._lockstep
        why = self.pacer.schedule(prio, pacing)
        if why is not None:
            self.get_logger().warning(
                f"cannot give the physics thread real-time priority {prio} ({why}); it runs "
                f"with the normal scheduler ({', '.join(self.pacer.tuned or []) or 'as is'}) "
                f"and waits actively for the last "
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
        next_state = time.perf_counter() + FIRST_STATE_PERIOD_S  # waiting for a first command
        running = lambda: self._running  # noqa: E731
        while self._running:
            if self._paused.is_set():
                if gate.waiting_for_first:
                    try:
                        with self._lock:
                            self._poll_commands()  # the first command un-pauses
                            now = time.perf_counter()
                            if gate.waiting_for_first and now >= next_state:
                                # the state the first command will answer, for a controller
                                # that waits for it
                                next_state = now + FIRST_STATE_PERIOD_S
                                self._publish(every=True)
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
        sim_t = self._now_ns() / 1e9
        self.get_logger().info(stats_line(self.pacer, self.gate, self.sim, now, sim_t,
                                          self._lockstep, self._rcl_failures, self.efforts,
                                          self.in_process, self.node_services.stats_text()))
        self.gate.clear_rejected()
        self.pacer.stats.reset(now, sim_t)

    def stop(self) -> None:
        self._stop_requested = True
        self._running = False
        self._wake.set()

