"""The ROS 2 node's own parameters, and how the node declares every parameter.

This module imports no rclpy (only :func:`descriptor` needs ``rcl_interfaces``,
imported when called). The core, which does not import ros/, knows the node's keys
of the shared ``wb_sim: ros__parameters:`` block by name only
(:data:`wb_sim.config.NODE_GROUPS`, :data:`~wb_sim.config.NODE_NAMES`), to leave them
to the node; a test holds those names to the declarations here.

The node declares the core's parameters (:data:`wb_sim.config.PARAMETERS`, the
contact models' groups included, and the keys of each contact surface) and its own
(:data:`NODE_PARAMETERS`), each with the ``ParameterDescriptor`` made from its one
declaration (:func:`descriptor`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..config import (PARAMETERS, POSE_PARAMETERS, SURFACE_PARAMETERS, flatten,
                      read_yaml_params)
from ..errors import ConfigError
from ..parameters import Param, by_key, table_markdown, unknown_key_error
from .health import CHECKS

#: one token of a ROS 2 topic name
TOPIC_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _topic(x):
    """A ROS 2 topic name (the rules of rcl's topic name validation, without
    substitutions): tokens of letters, digits and '_' not starting with a digit,
    separated by single '/', optionally absolute ('/') or private ('~/')."""
    if not x:
        return None
    body = x[2:] if x.startswith("~/") else x[1:] if x.startswith("/") else x
    if not body or any(not TOPIC_TOKEN.match(t) for t in body.split("/")):
        return ("must be a valid ROS topic name: letters, digits and '_' in tokens that do not "
                "start with a digit, separated by single '/', optionally starting with '/' or "
                "'~/' ('' disables the stream)")
    return None


def _thresholds(x):
    """[warn, error]: 0 <= warn <= error."""
    warn, error = x
    if not 0.0 <= warn <= error:
        return "must be [warn, error] with 0 <= warn <= error"
    return None


#: the longest ``controller.params`` text, characters (a YAML mapping of a few gains)
MAX_CONTROLLER_PARAMS_CHARS = 65536


def controller_params(text: str) -> dict:
    """``controller.params``: a YAML mapping (flow style, e.g. ``{kp: 1000, kd: 20}``) of
    the in-process controller factory's keyword arguments; ConfigError naming the key."""
    import yaml

    from ..errors import ConfigError
    why = _controller_params_error(text)
    if why:
        raise ConfigError(f"parameter 'controller.params': {why}")
    return dict(yaml.safe_load(text) or {})


def _controller_params_error(text):
    import yaml
    if len(text) > MAX_CONTROLLER_PARAMS_CHARS:
        return (f"{len(text)} characters, at most {MAX_CONTROLLER_PARAMS_CHARS}: give the "
                f"controller a file name instead")
    if "&" in text or "*" in text:  # anchors and aliases: a 1 kB alias bomb hangs a loader
        return "YAML anchors and aliases ('&', '*') are not accepted"
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as e:
        return f"not YAML: {str(e).splitlines()[0]}"
    if value is not None and not (isinstance(value, dict) and
                                  all(isinstance(k, str) for k in value)):
        return "expected a YAML mapping of keyword arguments, e.g. '{kp: 1000, kd: 20}'"
    return None


def _below_one(p):
    """``command.drop_probability`` < 1 (1 would lose every command)."""
    return "must be < 1 (1 would lose every command)" if p >= 1.0 else None


#: the longest modelled command delay, command.latency_steps and command.jitter_steps each
#: (the delay line holds at most their sum + 1 entries)
MAX_COMMAND_DELAY_STEPS = 1000

_RATE_DOC = "Publishing rate; 0 = every physics step. Rounded to a whole number of steps."

#: Parameters of the ROS 2 node (``wb_sim_node``) only. They share the node's
#: ``wb_sim: ros__parameters:`` block with :data:`wb_sim.config.PARAMETERS`; the core
#: ignores them (:func:`is_node_key`).
NODE_PARAMETERS: tuple[Param, ...] = (
    Param("real_time_factor", "float", 1.0, "",
          "Pace of the physics loop against the wall clock: 1 = real time, 2 = twice as "
          "fast, 0 = as fast as possible.", lo=0.0, live=True),
    Param("realtime_priority", "int", 50, "",
          "SCHED_FIFO priority (1-99) of the physics thread while it paces itself against "
          "the wall clock (sync.mode realtime, real_time_factor > 0), so that it wakes on time "
          "for its deadlines (as ros2_control's controller manager does); 0 = the normal "
          "scheduler, with the 0.1 ms time slice it grants without privileges (Linux 6.12+; "
          "the stats line says whether it was granted). Needs the right to real-time priorities (root, CAP_SYS_NICE or an "
          "rtprio limit); without it the node logs a warning and keeps the normal scheduler. "
          "A loop that falls 0.5 s behind goes back to the normal scheduler (logged) until "
          "real_time_factor changes.",
          lo=0, hi=99),
    Param("realtime_spin_margin_s", "float", 2.0e-4, "s",
          "With the normal scheduler (realtime_priority 0, or no right to real-time "
          "priorities) the physics loop sleeps until this long before each deadline and "
          "waits actively for the rest, so that a late wake-up of up to this much misses no "
          "deadline; it costs up to this share of each step's period in CPU (0.2 ms at "
          "1 kHz: up to 20 % of a core). 0 = plain sleeps.", lo=0.0),
    Param("world_frame", "str", "world", "", "TF frame of the world (the ground's frame)."),
    Param("publish.joint_states_rate_hz", "float", 0.0, "Hz", _RATE_DOC, lo=0.0),
    Param("publish.imu_rate_hz", "float", 0.0, "Hz", _RATE_DOC, lo=0.0),
    Param("publish.contact_wrench_rate_hz", "float", 0.0, "Hz", _RATE_DOC, lo=0.0),
    Param("publish.ft_rate_hz", "float", 0.0, "Hz",
          _RATE_DOC + " The force-torque sensors' reading (an RNEA pass, 60-120 us a step on "
          "the humanoid) is paid only while someone subscribes to one of them.", lo=0.0),
    Param("publish.contact_sensors_rate_hz", "float", 0.0, "Hz",
          _RATE_DOC + " Built only while someone subscribes.", lo=0.0),
    Param("publish.loop_closures_rate_hz", "float", 0.0, "Hz",
          _RATE_DOC + " Built only while someone subscribes.", lo=0.0),
    Param("publish.odom_rate_hz", "float", 0.0, "Hz", _RATE_DOC, lo=0.0),
    Param("publish.object_odom_rate_hz", "float", 0.0, "Hz",
          _RATE_DOC + " Built only while someone subscribes to one of the objects' odometry.",
          lo=0.0),
    Param("publish.actuators_rate_hz", "float", 100.0, "Hz", _RATE_DOC, lo=0.0),
    Param("publish.clock_rate_hz", "float", 0.0, "Hz", _RATE_DOC, lo=0.0),
    Param("publish.tf_rate_hz", "float", 100.0, "Hz", _RATE_DOC, lo=0.0),
    Param("publish.contact_markers_rate_hz", "float", 30.0, "Hz", _RATE_DOC, lo=0.0),
    Param("publish.contact_state_rate_hz", "float", 100.0, "Hz", _RATE_DOC, lo=0.0),
    Param("publish.diagnostics_rate_hz", "float", 1.0, "Hz",
          "Rate of the solver health on topics.diagnostics (wall clock, while the physics "
          "runs); each message judges the window since the last (docs/ros.md, 'Solver "
          "health'); 0 = off.", lo=0.0),
    Param("publish.stats_period_s", "float", 10.0, "s",
          "Wall-clock period of the log line with the achieved real-time factor, deadline "
          "misses, command latency, effort saturation and joint drift; 0 = never.", lo=0.0,
          live=True),
    Param("topics.joint_states", "str", "joint_states", "",
          "sensor_msgs/JointState out ('' = off).", check=_topic),
    Param("topics.imu", "str", "imu/data", "", "sensor_msgs/Imu out ('' = off).", check=_topic),
    Param("topics.contact_wrench", "str", "contact_wrench", "",
          "Prefix of the geometry_msgs/WrenchStamped topics <prefix>/<surface> ('' = off).",
          check=_topic),
    Param("topics.ft", "str", "ft", "",
          "Prefix of the force-torque sensors' geometry_msgs/WrenchStamped <prefix>/<sensor> "
          "(ft_sensors.*, the URDF's Gazebo sensors), header.frame_id the sensor's frame in TF "
          "(docs/ros.md, 'Force-torque sensors'); only with sensors ('' = off).", check=_topic),
    Param("topics.contact_sensors", "str", "contact_sensors", "",
          "std_msgs/Float64MultiArray of the contact sensors (docs/ros.md, 'contact_sensors'): "
          "per sensor normal force (N), raw and debounced contact (0/1); only with "
          "contact_sensors.active ('' = off).", check=_topic),
    Param("topics.loop_closures", "str", "loop_closures", "",
          "std_msgs/Float64MultiArray of the loop closures' wrenches (docs/ros.md, "
          "'loop_closures'): per closure [force (N), torque (N*m)] on frame_a at its origin, "
          "world axes; only with closures (loop_closures.*, an MJCF's <equality>) ('' = off).",
          check=_topic),
    Param("topics.actuators", "str", "actuators", "",
          "Prefix of the drives' readings, std_msgs/Float64MultiArray <prefix>/current (A), "
          "<prefix>/voltage (V), <prefix>/temperature (C), one entry per joint in joint_states "
          "order (NaN: a joint without a motor model); only where actuators.model is not "
          "'ideal' ('' = off).", check=_topic),
    Param("topics.odom", "str", "odom/ground_truth", "",
          "nav_msgs/Odometry of the floating base ('' = off).", check=_topic),
    Param("topics.object_odom", "str", "objects", "",
          "Prefix of each free object's nav_msgs/Odometry <prefix>/<name>/odom (objects.*, "
          "SpawnEntity; made and removed with the object): pose world -> the object's frame "
          "(its name), twist in the object's frame, as odom/ground_truth ('' = off).",
          check=_topic),
    Param("topics.tf", "str", "/tf", "", "tf2_msgs/TFMessage of the moving frames ('' = off).",
          check=_topic),
    Param("topics.tf_static", "str", "/tf_static", "",
          "tf2_msgs/TFMessage of the fixed frames, once, transient-local ('' = off).",
          check=_topic),
    Param("topics.clock", "str", "/clock", "", "rosgraph_msgs/Clock, simulated time ('' = off).",
          check=_topic),
    Param("topics.robot_description", "str", "robot_description", "",
          "std_msgs/String with the URDF, transient-local ('' = off).", check=_topic),
    Param("topics.terrain", "str", "terrain", "",
          "visualization_msgs/MarkerArray of the terrain (terrain.*), transient-local, for "
          "RViz; published only when there is terrain ('' = off).", check=_topic),
    Param("topics.objects", "str", "objects", "",
          "visualization_msgs/MarkerArray of the free objects (objects.*, SpawnEntity), "
          "transient-local, for RViz: each object's shape in its TF frame (its name); "
          "published again at each spawn or delete ('' = off).", check=_topic),
    Param("topics.contact_markers", "str", "contact_markers", "",
          "visualization_msgs/MarkerArray of the loaded contact points (namespace "
          "contact_points) and the ground's force on each (contact_forces, 0.5 m per robot "
          "weight), the contact surfaces' and the other links', in the world frame, for RViz "
          "('' = off).", check=_topic),
    Param("topics.contact_state", "str", "contact_state", "",
          "wb_sim_interfaces/ContactState of the contact truth (docs/ros.md, "
          "'contact_state'): per contact point position, normal, penetration, force, "
          "stick/slip; per surface the centre of pressure, force and normal force; the ZMP, "
          "centre of mass and centroidal "
          "momentum; built only while subscribed ('' = off).", check=_topic),
    Param("topics.diagnostics", "str", "/diagnostics", "",
          "diagnostic_msgs/DiagnosticArray of the solver health (publish.diagnostics_rate_hz, "
          "thresholds diagnostics.*); needs the diagnostic_msgs package (logged if missing) "
          "('' = off).", check=_topic),
    Param("topics.joint_commands", "str", "joint_commands", "",
          "sensor_msgs/JointState in: name and position / velocity / effort (each empty or one "
          "per name: the fields given select the joint's mode, tau = command.kp (q_ref - q) + "
          "command.kd (v_ref - v) + effort), any subset of joints ('' = off).",
          check=_topic),
    Param("topics.effort_commands", "str", "effort_commands", "",
          "std_msgs/Float64MultiArray in: efforts in command.joint_names order ('' = off).",
          check=_topic),
    Param("command.joint_names", "strs", [], "",
          "Order of the effort_commands entries and of per-joint command.kp / command.kd ([] = "
          "every actuated joint, in the order of joint_states)."),
    Param("command.wait_for_first", "bool", False, "",
          "Hold the physics at t = 0 until the first valid command arrives (for a controller "
          "that starts after the simulator; the launch file sets it with controller:=pd)."),
    Param("command.timeout_s", "float", 0.1, "s",
          "Watchdog, a real drive's: the last valid command is held this long (simulated "
          "time) from the step it became active (with command.latency_steps, jitter or "
          "drops: the step it was released, not the one it was received); with no new one by "
          "then, command.timeout_action applies until a command becomes active again; "
          "0 = never.",
          lo=0.0, live=True),
    Param("command.timeout_action", "str", "damp", "",
          "After command.timeout_s without a valid command: 'damp': joint damping "
          "tau = -command.timeout_damping qdot (what a real robot's drives do on a lost "
          "link: the robot sinks slowly instead of dropping) | 'hold': keep the last valid "
          "command (efforts as they were, position and velocity targets still servoed) | "
          "'zero': zero torques.",
          choices=("damp", "hold", "zero"), live=True),
    Param("command.timeout_damping", "float", 20.0, "N*m*s/rad",
          "Joint damping of command.timeout_action 'damp' (N*s/m for prismatic joints), "
          "within the effort limits.", lo=0.0, live=True),
    Param("command.kp", "floats", [], "N*m/rad",
          "Position gain of joint_commands' position targets, tau = kp (q_ref - q) + kd (v_ref "
          "- v) + effort, evaluated at every physics step: one value for every joint, or one "
          "per joint of command.joint_names in its order (the other joints: 0). [] (not given) "
          "= derived from the robot, as wb_sim_robot writes them: kp = I w^2 with I the "
          "joint's reflected inertia at the initial pose, w = 2 pi x physics rate / 20 (lower "
          "where coupled joints need it), logged at the first position command; those act on "
          "joints whose command carries no effort (with an effort, the targets are a "
          "reference). 0 = positions are not servoed (a reference only). N*m/rad; N/m for "
          "prismatic joints.",
          lo=0.0, live=True),
    Param("command.kd", "floats", [], "N*m*s/rad",
          "Damping gain of joint_commands' targets (with a position or a velocity target; v_ref "
          "= 0 when only a position is given), one value or one per joint of "
          "command.joint_names as command.kp. [] (not given) = derived: kd = 2 I w (critically "
          "damped), as command.kp. N*s/m for prismatic joints.", lo=0.0, live=True),
    Param("command.nan_is_unset", "bool", False, "",
          "true: a NaN entry of joint_commands means that interface of that joint is not "
          "commanded (ros2_control's value of a command interface no controller has written, "
          "which joint_state_topic_hardware_interface publishes); a joint with only NaN keeps "
          "its command. false: a NaN rejects the message. An infinity always does."),
    Param("command.latency_steps", "int", 0, "steps",
          "Modelled transport delay at the node's command boundary: a command accepted "
          "while the node is at step k becomes the active command at step k + n (the drive "
          "law then evaluates it at every step from the current state). As "
          "joints.command_delay_steps, the first command acts from the step it arrives until "
          "it is released (no zero torques while the pipe fills; the watchdog starts at its "
          f"release). At most {MAX_COMMAND_DELAY_STEPS}; 0 = applied at once.",
          lo=0, hi=MAX_COMMAND_DELAY_STEPS),
    Param("command.jitter_steps", "int", 0, "steps",
          "Extra delay of each accepted command, drawn from command.jitter_distribution "
          "(seeded: command.timing_seed), on top of command.latency_steps. Commands never "
          "overtake each other: a command's release step is the later of its own and the "
          "previous command's (a link that delivers in order, as a reliable DDS topic does). "
          f"At most {MAX_COMMAND_DELAY_STEPS}; 0 = none.",
          lo=0, hi=MAX_COMMAND_DELAY_STEPS),
    Param("command.jitter_distribution", "str", "uniform", "",
          "Law of command.jitter_steps' extra delay j: 'uniform': j = 0 .. jitter_steps, each "
          "equally likely | 'geometric': one step more with probability 1/2 at a time, "
          "P(j) = 2^-(j+1), truncated at jitter_steps (which takes the rest of the tail, "
          "2^-jitter_steps).",
          choices=("uniform", "geometric")),
    Param("command.drop_probability", "float", 0.0, "",
          "Probability that an accepted command is lost at the boundary, each independently "
          "(seeded: command.timing_seed): it never becomes active, the last active one stays "
          "and the watchdog counts on. 0 <= p < 1.",
          lo=0.0, hi=1.0, check=_below_one),
    Param("command.timing_seed", "int", 0, "",
          "Seed of the one numpy Generator (PCG64) of the jitter and the drops: for each "
          "accepted command it draws two uniform numbers, the drop's then the jitter's, "
          "whether or not the command is lost, so a run with the same seed repeats exactly; "
          "~/reset re-seeds it.",
          lo=0),
    Param("sync.mode", "str", "realtime", "",
          "How the physics meets an external controller (docs/ros.md, 'Synchronisation'): "
          "'lockstep': after publishing a joint state the physics waits for its command "
          "before the next step, never faster than real_time_factor (0: as fast as the "
          "controller answers); a slow controller slows the simulation, never the reverse "
          "(the stats line reports the real-time factor reached) | 'realtime': free-running "
          "against the wall clock at real_time_factor, each step applying the newest valid "
          "command (for controllers that publish at their own rate or go quiet on purpose: "
          "host load then becomes part of the experiment).", choices=("realtime", "lockstep")),
    Param("sync.match_stamp", "bool", True, "",
          "Lockstep: a joint_commands message counts only if its header.stamp equals the "
          "stamp of the last joint state; other (stale) ones are ignored. effort_commands "
          "carry no stamp and are then refused; false: the first command after each state "
          "counts."),
    Param("sync.timeout_s", "float", 1.0, "s",
          "Lockstep, wall time: a controller that has answered once and then gives no answer "
          "for this long counts as lost: the physics steps on without waiting, paced by "
          "real_time_factor, the watchdog (command.timeout_s, simulated time) takes over, and "
          "lockstep resumes with its next answer to a published state; each loss is logged "
          "and counted. 0 = wait forever (a controller that died then holds the simulation, "
          "and the watchdog never trips).", lo=0.0, live=True),
    Param("topics.external_wrench", "str", "external_wrench", "",
          "geometry_msgs/WrenchStamped in: a push on the link header.frame_id (force, torque "
          "in that link's frame, about its origin) ('' = off).", check=_topic),
    Param("external_wrench.duration_s", "float", 0.1, "s",
          "How long a wrench on topics.external_wrench acts, from the step it arrives.",
          lo=0.0, lo_open=True, live=True),
    Param("world_file", "str", "", "",
          "A world file listing several robots (docs/world.md): they are simulated in one "
          "physics, each under its world-file name as namespace (<name>/joint_states, "
          "<name>/joint_commands, ..., frames <name>/<link>, parameters <name>.command.kp, "
          "...). The first robot's parameters are the node's own (wb_sim_run --world and "
          "sim.launch.py world:= write them from the file), the others' come from the "
          "file. '' or a world of one robot: the node's parameters are its one robot, "
          "topics un-namespaced."),
    Param("stop_after_s", "float", 0.0, "s",
          "Simulated time at which the node stops and exits with code 0, after a last stats "
          "line (wb_sim_run --duration), once its reliable subscribers have acknowledged the "
          "last samples (at most 2 s; a warning names the topics of one that had not); 0 = "
          "run until stopped.", lo=0.0),
    Param("controller.callable", "str", "", "",
          "An in-process controller 'module:factory' (wb_sim.control: make(sim, case, "
          "**controller.params) returns ctrl(obs) -> torques), called by the physics loop "
          "before each step (every step, or at controller.rate_hz): no message hop, "
          "deterministic, the headless run's trajectory; joint_commands and effort_commands "
          "are then refused. e.g. 'wb_sim.controllers:pd_gravity', the example PD. "
          "'' = none (an external controller over topics)."),
    Param("controller.params", "str", "{}", "",
          "The in-process controller factory's keyword arguments, a YAML mapping, e.g. "
          "'{kp: 1000.0, kd: 20.0}' (no anchors or aliases, at most 64 kB).",
          check=_controller_params_error),
    Param("controller.rate_hz", "float", 0.0, "Hz",
          "Rate of the in-process controller; its torques are held in between. 0 = every "
          "physics step.", lo=0.0),
    Param("snapshots.max_count", "int", 32, "",
          "Most snapshots ~/save_snapshot keeps at once; one more is refused (delete one "
          "with ~/delete_snapshot; saving under a kept name replaces it).", lo=1, hi=100000,
          live=True),
    Param("snapshots.max_mb", "float", 256.0, "MB",
          "Most memory the kept snapshots may hold together (a humanoid's is ~0.1 MB); a "
          "snapshot above it is refused.", lo=0.0, lo_open=True, live=True),
    *(Param(f"diagnostics.{c.key}", "floats", list(c.default), c.unit,
            f"[warn, error] thresholds of the {c.status!r} diagnostics: {c.what}; above "
            f"warn the status is WARN, above error ERROR.", length=2,
            check=_thresholds, live=True) for c in CHECKS),
    Param("viewer", "str", "none", "",
          "Browser view of the robot and contact forces: 'none' | 'meshcat' (the URL is "
          "logged, 30 frames/s; needs pip install wb_sim[viewer]).",
          choices=("none", "meshcat")),
)


#: ``{key: Param}`` of :data:`NODE_PARAMETERS`
NODE_PARAMETER_BY_KEY = by_key(NODE_PARAMETERS)

#: parameters rclpy declares itself on every node
ROS_OWN_PARAMETERS = ("use_sim_time", "start_type_description_service")
#: prefix of the QoS override parameters rclpy reads (``qos_overrides./topic.publisher.depth``)
QOS_OVERRIDES_PREFIX = "qos_overrides."
#: the node's default topic names, by stream (its ``topics.*`` defaults)
DEFAULT_TOPICS = {p.key.removeprefix("topics."): p.default for p in NODE_PARAMETERS
                  if p.key.startswith("topics.")}


def is_node_key(key: str) -> bool:
    """Whether ``key`` belongs to the ROS node rather than the physics core
    (:data:`NODE_PARAMETERS`, the parameters rclpy itself owns, QoS overrides)."""
    return key in NODE_PARAMETER_BY_KEY or key in ROS_OWN_PARAMETERS or \
        key.startswith(QOS_OVERRIDES_PREFIX)


def core_keys(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a flat parameter dict that are not the node's (for
    :func:`wb_sim.config.load_config`, which then needs no registration)."""
    return {k: v for k, v in flat.items() if not is_node_key(k)}


@dataclass(frozen=True)
class NodeConfig:
    """The validated :data:`NODE_PARAMETERS` (build with :func:`load_node_config`);
    ``cfg["publish.tf_rate_hz"]`` gives a typed value."""

    values: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def decimation(self, key: str, physics_rate_hz: float) -> int:
        """Physics steps between two messages of the stream whose rate is ``key``."""
        rate = self.values[key]
        if rate == 0:
            return 1
        if rate > physics_rate_hz * (1 + 1e-9):
            raise ConfigError(f"parameter '{key}' = {rate:g} Hz is above physics_rate_hz = "
                              f"{physics_rate_hz:g} Hz (0 = every physics step)")
        return max(1, round(physics_rate_hz / rate))


def load_node_config(params: Mapping[str, Any]) -> NodeConfig:
    """Validate the node's own keys of a flat parameter dict (others are ignored)."""
    flat = flatten(params)
    return NodeConfig({p.key: p.coerce(flat[p.key]) if p.key in flat else p.default_value
                       for p in NODE_PARAMETERS})


def descriptor(key: str, p: Param):
    """The ``rcl_interfaces/ParameterDescriptor`` of parameter ``p`` declared as
    ``key``: its meaning with the unit, read-only unless live, the range of a
    number and the choices of a string. Dynamic typing: a YAML ``[]`` or an
    integer for a float is accepted and checked by :meth:`Param.coerce`."""
    import math

    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    unit = f" [{p.unit}]" if p.unit else ""
    d = ParameterDescriptor(name=key, description=f"{p.doc}{unit}", read_only=not p.live,
                            dynamic_typing=True)
    if p.kind == "float" and (p.lo is not None or p.hi is not None):
        d.floating_point_range = [FloatingPointRange(
            from_value=-math.inf if p.lo is None else float(p.lo),
            to_value=math.inf if p.hi is None else float(p.hi))]
    elif p.kind == "int" and (p.lo is not None or p.hi is not None):
        lo = -2**63 if p.lo is None else int(p.lo) + (1 if p.lo_open else 0)
        d.integer_range = [IntegerRange(from_value=lo, to_value=2**63 - 1 if p.hi is None
                                        else int(p.hi), step=1)]
    if p.lo_open or p.choices:
        d.additional_constraints = (f"> {p.lo:g}" if p.lo_open else
                                    f"one of {', '.join(map(repr, p.choices))}")
    return d


def node_parameter_table_markdown() -> str:
    """The README's table of the ROS node's own parameters."""
    return table_markdown((p.key, p) for p in NODE_PARAMETERS)


#: the parameters that can change while the node runs: the core's (its contact
#: parameters, applied by ``Simulator.set_contact_parameters``) and the node's own
LIVE_CORE = tuple(p.key for p in PARAMETERS if p.live)
LIVE_NODE = tuple(p.key for p in NODE_PARAMETERS if p.live)


def declare_all(node, params_files: tuple[str, ...] = ()) -> dict[str, Any]:
    """Declare every parameter on ``node`` (an rclpy Node), each with its descriptor, and
    return their values as a flat dict: the core's, the keys of each contact surface and
    named pose, the node's own. Without a robot (no ``urdf_path`` / ``robot_description``
    given) the defaults are those of the default humanoid, as ``ros2 run turtlesim``
    needs no argument. A key the node does not know is refused (rclpy would ignore it: a
    misspelt ``contact: stifness:`` silently kept the default). A relative ``urdf_path``
    is made relative to the ``--params-file`` (``params_files``, in order) that sets it."""
    from .rclpy_shim import parameter_overrides  # rclpy is imported only here

    given = parameter_overrides(node)  # from --params-file, -p, launch
    defaults: dict[str, Any] = {}
    if not given & {"urdf_path", "robot_description"}:
        from .. import default_config_path
        defaults = read_yaml_params(default_config_path())
        node.get_logger().info(
            f"no robot given (urdf_path / robot_description): simulating the default "
            f"humanoid of {default_config_path()}; `ros2 launch wb_sim sim.launch.py "
            f"robot:=...` or --params-file <robot>.yaml simulates another")
    flat: dict[str, Any] = {}

    def declare(key: str, p: Param) -> None:
        value = node.declare_parameter(key, defaults.get(key, p.default), descriptor(key, p)).value
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
    robots = _world_robot_names(flat.get("world_file", ""))  # <robot>.<key>: theirs
    unknown = sorted(k for k in given if k not in flat and not is_node_key(k)
                     and k.partition(".")[0] not in robots)
    if unknown:
        raise unknown_key_error(unknown[0], sorted(flat))
    for key in FILE_KEYS:
        flat[key] = path_relative_to_its_file(key, flat[key], params_files, node.get_name())
    return flat


def _world_robot_names(path: str) -> set[str]:
    """The robot names of world file ``path`` when it lists several (their parameters
    ``<name>.<key>`` are declared by the node, wb_sim.ros.robots); else none."""
    if not path:
        return set()
    from ..config import read_yaml
    try:
        robots = read_yaml(path, "world file")["world"]["robots"]
        names = {str(r["name"]) for r in robots}
    except (ConfigError, KeyError, TypeError):
        return set()  # the node's world check says what is wrong
    return names if len(robots) > 1 else set()


#: the parameters naming a file, relative to the parameter file that sets them (as
#: wb_sim.config.read_yaml_params resolves them in the Python API)
FILE_KEYS = ("urdf_path", "collision.srdf_path", "terrain.heightfield")


def path_relative_to_its_file(key: str, value: str, params_files: tuple[str, ...],
                              node_name: str) -> str:
    """A relative file path (``key``: one of :data:`FILE_KEYS`) is relative to the parameter
    file that sets it (the last of ``params_files`` that does), as in the Python API; one
    given with ``-p`` stays relative to the working directory."""
    import os

    if not value or os.path.isabs(value) or (key != "terrain.heightfield" and ":" in value):
        return value
    for f in reversed(params_files):
        try:
            set_here = read_yaml_params(f, node_name).get(key)
        except ConfigError:
            continue
        if set_here == os.path.realpath(os.path.join(os.path.dirname(f), value)):
            return set_here
    return value


def urdf_relative_to_its_file(urdf_path: str, params_files: tuple[str, ...],
                              node_name: str) -> str:
    """:func:`path_relative_to_its_file` of ``urdf_path``."""
    return path_relative_to_its_file("urdf_path", urdf_path, params_files, node_name)


def split_live_update(params) -> tuple[dict[str, Any], dict[str, Any]]:
    """A live parameter change (``params``: objects with ``name`` and ``value``) split into
    the core's keys and the node's; ConfigError naming a parameter that cannot change
    while the node runs."""
    core, node = {}, {}
    for prm in params:
        if prm.name in LIVE_CORE:
            core[prm.name] = prm.value
        elif prm.name in LIVE_NODE:
            node[prm.name] = prm.value
        elif prm.name != "use_sim_time":  # read-only ones never get here
            raise ConfigError(f"parameter '{prm.name}' cannot be changed")
    return core, node


#: the example PD as an in-process controller (wb_sim.control)
PD_IN_PROCESS = "wb_sim.controllers:pd_gravity"


def launcher_layers(controller: str, robot_yaml, sync: str | None = None
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``wb_sim_run`` and ``sim.launch.py`` set for ``controller`` (``'pd'``: the
    example controller as its own process, ``'none'``: the user's, or ``'module:factory'``:
    an in-process controller), as ``(defaults, explicit)``: the defaults lie under the
    user's ``--config`` / ``config:=`` file, the explicit values over it.

    * ``pd``: paced lockstep (``sync.mode: lockstep``): one step per answer, never faster
      than ``real_time_factor``; host load slows the simulation and never drops the robot;
    * ``none``: the physics waits for the first command (``command.wait_for_first``);
    * ``module:factory``: the controller inside the node (``controller.callable``, with
      ``sync.mode: realtime``, as lockstep waits for answers over topics); the example PD
      (:data:`PD_IN_PROCESS`) gets the gains of the robot file's ``wb_sim_pd_controller``
      block (``controller.params``) unless the user's file gives its own.

    ``sync``: the mode the user asked for explicitly (``--sync``, ``sync:=``), if any.
    ConfigError for another ``controller``, a factory that cannot be imported, or an
    in-process controller with ``sync`` lockstep (there is no answer to wait for)."""
    import yaml

    from ..control import import_callable

    defaults: dict[str, Any] = {"command.wait_for_first": True}
    explicit: dict[str, Any] = {}
    if controller == "pd":
        defaults["sync.mode"] = "lockstep"
    elif controller != "none":
        if ":" not in controller:
            raise ConfigError(f"controller '{controller}': choose 'pd' (the example controller, "
                              f"its own process), 'none' (yours) or an in-process "
                              f"'module:factory' such as '{PD_IN_PROCESS}'")
        import_callable(controller, "controller")
        if sync == "lockstep":
            raise ConfigError(f"sync mode 'lockstep' waits for a controller's answers over "
                              f"topics; the controller '{controller}' runs inside the node, in "
                              f"step by construction (use sync mode 'realtime' or leave it out)")
        defaults["command.wait_for_first"] = False
        explicit.update({"controller.callable": controller, "sync.mode": "realtime"})
        if controller == PD_IN_PROCESS:
            gains = read_yaml_params(robot_yaml, node_name="wb_sim_pd_controller")
            gains = {k: gains[k] for k in ("kp", "kd") if k in gains}
            if len(gains) < 2:
                raise ConfigError(f"{robot_yaml} has no wb_sim_pd_controller kp and kd for "
                                  f"'{PD_IN_PROCESS}': add them, or give controller.params "
                                  f"in your --config")
            defaults["controller.params"] = yaml.safe_dump(gains, default_flow_style=True,
                                                          width=10**6).strip()
    return defaults, explicit


def sync_description(cfg, in_process: str = "") -> str:
    """The synchronisation mode in words, as the log names it (docs/ros.md's table)."""
    rtf = cfg["real_time_factor"]
    pace = f"never faster than real-time factor {rtf:g}" if rtf > 0 else "as fast as possible"
    if in_process:
        return (f"in-process controller '{in_process}': called before each physics step, "
                f"{pace}")
    if cfg["sync.mode"] == "lockstep":
        timeout = cfg["sync.timeout_s"]
        lost = (f"a controller silent for {timeout:g} s (sync.timeout_s) counts as lost and the "
                f"physics steps on" if timeout > 0 else "waiting forever for each answer")
        return ("lockstep: one step per answer to each joint state"
                + (" (stamps matched)" if cfg["sync.match_stamp"] else "")
                + f", {pace}; a slow controller slows the simulation; {lost}")
    return (f"realtime: free-running, {pace}, each step applying the newest valid command "
            f"(host load becomes part of the experiment; sync.mode lockstep keeps the loop "
            f"in step)")
