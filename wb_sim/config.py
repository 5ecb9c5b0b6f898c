"""The parameter set of wb_sim: one table, typed and validated once.

The same dotted names are used by the YAML files in ``config/`` (inside a
``wb_sim: ros__parameters:`` block, nested or dotted), by the ROS node and by
the Python API (:meth:`wb_sim.Simulator.from_params`). :data:`PARAMETERS`
lists every fixed key with its type, default, unit and meaning; the keys of a
contact surface ``S`` are ``S.<field>`` with the fields of
:data:`SURFACE_PARAMETERS`.

:func:`load_config` turns a flat ``{key: value}`` dict into a frozen
:class:`SimConfig`, rejecting unknown keys, wrong types and values out of range
with a :class:`~wb_sim.errors.ConfigError` that names the key.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .errors import ConfigError

# ----------------------------------------------------------------------------
# The parameter table
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One entry of the parameter table.

    ``kind`` is one of ``float``, ``int``, ``bool``, ``str``, ``floats``
    (list of floats), ``strs`` (list of strings). ``length`` fixes the length
    of a list (``None``: any). ``check`` returns an error text or ``None``.
    ``live`` parameters can be changed on a running simulator; every other
    one is structural (read-only once the simulator is built).
    """

    key: str
    kind: str
    default: Any
    unit: str
    doc: str
    length: int | None = None
    check: Callable[[Any], str | None] | None = None
    live: bool = False  #: may change while the simulation runs (ROS: ``ros2 param set``)


def _positive(x):
    return None if x > 0 else "must be > 0"


def _nonneg(x):
    return None if x >= 0 else "must be >= 0"


def _nonneg_all(xs):
    return None if all(x >= 0 for x in xs) else "every entry must be >= 0"


def _positive_all(xs):
    return None if all(x > 0 for x in xs) else "every entry must be > 0"


def _unit_vector(xs):
    n = math.sqrt(sum(x * x for x in xs))
    if not 0.999 < n < 1.001:
        return f"must be a unit vector (its norm is {n:.6g})"
    return None


def _between(lo, hi):
    """An integer range check; the bounds are kept for ROS parameter descriptors."""
    def check(x):
        return None if lo <= x <= hi else f"must be in [{lo}, {hi}]"

    check.bounds = (lo, hi)
    return check


def _range(lo, hi):
    """A float range check [lo, hi] (sanity bounds: beyond them a value is a typo,
    and products such as mu**2 or 1 / rate could overflow or vanish)."""
    def check(x):
        return None if lo <= x <= hi else f"must be in [{lo:g}, {hi:g}]"

    check.float_bounds = (lo, hi)
    return check


#: largest friction coefficient: mu**2 stays far from overflow, and a cone this
#: wide already never lets a foot slip (real materials: 0.1-2)
MAX_FRICTION_COEFFICIENT = 1.0e3
#: contact points per surface and in all: the Delassus matrix is (3n)^2 doubles, and
#: a 45 x 45 grid per foot took 195 s and 3.6 GB before failing
MAX_SURFACE_POINTS = 400
MAX_CONTACT_POINTS = 1000
#: sensors.delay_steps: the delayed readings are kept in memory (10 s at 1 kHz)
MAX_SENSOR_DELAY_STEPS = 10000


def _one_of(*choices):
    def check(x):
        return None if x in choices else f"must be one of {', '.join(map(repr, choices))}"

    return check


#: Every fixed parameter key. Surface keys are in :data:`SURFACE_PARAMETERS`.
PARAMETERS: tuple[Param, ...] = (
    # --- robot and integration
    Param("urdf_path", "str", "", "",
          "URDF file: absolute path, path relative to the YAML file, or "
          "'icub-models:<model>' / 'example-robot-data:<path under robots/>' for "
          "robots installed from PyPI. Exactly one of urdf_path, robot_description."),
    Param("robot_description", "str", "", "", "URDF XML string (alternative to urdf_path)."),
    Param("floating_base", "bool", True, "",
          "true: free-flyer root joint on the URDF root link; false: root link fixed "
          "to the world at initial.base_position / initial.base_rpy."),
    Param("physics_rate_hz", "float", 1000.0, "Hz",
          "Physics rate; the step is dt = 1 / physics_rate_hz, in [1, 1e6] Hz.",
          check=_range(1.0, 1.0e6)),
    Param("gravity", "floats", [0.0, 0.0, -9.81], "m/s^2", "Gravity in the world frame.",
          length=3),
    # --- ground
    Param("ground.height", "float", 0.0, "m",
          "The ground plane passes through the world point (0, 0, height)."),
    Param("ground.normal", "floats", [0.0, 0.0, 1.0], "", "Unit normal of the ground plane "
          "(world frame), pointing out of the ground.", length=3, check=_unit_vector),
    # --- terrain on the ground (wb_sim/terrain.py)
    Param("terrain.boxes", "floats", [], "m, rad",
          "Boxes on the ground (steps, platforms): 7 numbers each, centre x, y, z, size x, y, "
          "z, yaw (about the world z axis). Every contact point meets them."),
    Param("terrain.stairs", "floats", [], "m, rad",
          "Stair flights: 8 numbers each, x0, y0 (start of the first step), yaw (heading), "
          "step depth, step height, width, count, z0 (the floor they rise from); write "
          "every number as a float (3.0): a ROS parameter array has one type."),
    Param("terrain.heightfield", "str", "", "",
          "A .npy file of heights (rows along y, columns along x; '' = none); a relative path "
          "is relative to the YAML file that sets it."),
    Param("terrain.heightfield_size", "floats", [1.0, 1.0], "m",
          "Extent of the heightfield along x and y.", length=2),
    Param("terrain.heightfield_origin", "floats", [0.0, 0.0, 0.0], "m",
          "World position of the heightfield's first sample (row 0, column 0).", length=3),
    Param("terrain.heightfield_scale", "float", 1.0, "",
          "Factor applied to the file's heights (to metres).", check=_positive),
    # --- contact
    Param("contact.model", "str", "compliant", "",
          "Contact model: 'compliant' (spring-damper ground, the contact.stiffness ... keys) or "
          "'rigid' (impulses with a friction cone, the keys marked rigid)."),
    Param("contact.stiffness", "float", 4.0e4, "N/m",
          "Normal stiffness per point at the reference depth: "
          "f_n = sqrt(d/d_ref) (k d + c d_dot), d = penetration.", check=_nonneg, live=True),
    Param("contact.damping", "float", 400.0, "N*s/m",
          "Normal damping per point at the reference depth (c above).", check=_nonneg, live=True),
    Param("contact.tangential_stiffness", "float", 2.0e5, "N/m",
          "Tangential stiffness per point at the reference depth (ground deformation spring). "
          "A slide that stops springs back by its elastic deformation mu f_n / (s k_t): 0.05 mm "
          "for a 2 kg box at the default (0.27 mm at 4e4; 1e6 halves it again but leaves "
          "delayed controllers less margin).",
          check=_nonneg, live=True),
    Param("contact.tangential_damping", "float", 400.0, "N*s/m",
          "Tangential damping per point at the reference depth.", check=_nonneg, live=True),
    Param("contact.friction_coefficient", "float", 1.0, "",
          "Coulomb friction coefficient mu (the tangential force is at most mu f_n), "
          "in [0, 1000].", check=_range(0.0, MAX_FRICTION_COEFFICIENT), live=True),
    Param("contact.reference_depth", "float", 1.0e-3, "m",
          "Penetration at which the nonlinear normal law has the secant stiffness "
          "contact.stiffness (Azad & Featherstone's sqrt(d) factor is sqrt(d/d_ref)).",
          check=_positive),
    Param("contact.max_penetration", "float", 0.2, "m",
          "A contact point deeper than this raises DivergenceError (a guard against a lost "
          "robot, not a contact parameter: a 200 kg box dropped 2 m sinks ~7 cm into the "
          "default compliant ground).", check=_positive),
    Param("contact.solver", "str", "admm", "",
          "rigid: constraint solver of pinocchio >= 4, 'admm' or 'pgs' (projected Gauss-Seidel).",
          check=_one_of("pgs", "admm")),
    Param("contact.max_iterations", "int", 500, "",
          "rigid: solver iteration limit per step; a step that reaches it completes with the "
          "last iterate and is counted as not converged.", check=_positive),
    Param("contact.tolerance", "float", 1.0e-5, "m/s",
          "rigid: solver tolerance on the contact velocities (m/s) and, relatively, on the "
          "impulses, measured in units of one point's share of the robot's weight, "
          "m g dt / n (so one value fits a light box and a heavy humanoid).",
          check=_positive),
    Param("contact.baumgarte_gain", "float", 0.2, "",
          "rigid: fraction of a penetration removed per step (0 = none, 1 = all at once).",
          check=lambda x: None if 0.0 <= x <= 1.0 else "must be in [0, 1]"),
    Param("contact.regularization", "float", 1.0e-3, "",
          "rigid: regularization of each normal contact row relative to its Delassus diagonal "
          "(R = eps G_ii): makes the problem of coplanar foot corners definite; a point at rest "
          "sinks eps G f dt^2 / baumgarte_gain (vanishes as dt -> 0) and an impact keeps a "
          "fraction ~eps of its speed (no bounce at any rate).",
          check=lambda x: None if 0.0 <= x <= 1.0 else "must be in [0, 1]"),
    Param("contact.activation_margin", "float", 0.005, "m",
          "rigid: points closer to the ground than this enter the contact problem (their gap "
          "term keeps them from touching early).", check=_nonneg),
    Param("contact_surfaces", "strs", [], "",
          "Names of the contact surfaces; each name S has keys S.frame, S.shape, ..."),
    # --- initial state
    Param("initial.joint_names", "strs", [], "",
          "Joints given an initial position (others start at 0)."),
    Param("initial.joint_positions", "floats", [], "rad or m",
          "Initial positions, in the order of initial.joint_names."),
    Param("initial.base_position", "floats", [0.0, 0.0, 0.0], "m",
          "Initial world position of the base (root link) origin.", length=3),
    Param("initial.base_rpy", "floats", [0.0, 0.0, 0.0], "rad",
          "Initial base orientation, roll-pitch-yaw (R = Rz(yaw) Ry(pitch) Rx(roll)).",
          length=3),
    Param("initial.pose", "str", "", "",
          "A named pose (of 'poses') to start from instead of the initial.* fields ('' = "
          "those fields)."),
    Param("poses", "strs", [], "",
          "Names of named poses; each pose P has keys poses.P.joint_names, "
          "poses.P.joint_positions, poses.P.base_position, poses.P.base_rpy (the fields of "
          "initial.*). A pose can be the initial state (initial.pose) and a reset target "
          "(Simulator.reset(pose=P))."),
    Param("xacro.args", "strs", [], "",
          "Arguments of a .xacro urdf_path, 'name:=value' each, as the xacro command line "
          "takes them (needs the xacro package)."),
    # --- IMU
    Param("imu.frame", "str", "", "", "Frame of the IMU ('' = no IMU)."),
    Param("imu.angular_velocity_noise_std", "float", 0.0, "rad/s",
          "Standard deviation of the white Gaussian gyroscope noise.", check=_nonneg),
    Param("imu.linear_acceleration_noise_std", "float", 0.0, "m/s^2",
          "Standard deviation of the white Gaussian accelerometer noise.", check=_nonneg),
    Param("imu.angular_velocity_bias", "floats", [0.0, 0.0, 0.0], "rad/s",
          "Constant gyroscope bias, IMU frame.", length=3),
    Param("imu.linear_acceleration_bias", "floats", [0.0, 0.0, 0.0], "m/s^2",
          "Constant accelerometer bias, IMU frame.", length=3),
    Param("imu.seed", "int", 0, "", "Seed of the IMU noise generator (reset() re-seeds).",
          check=_between(0, 2**63 - 1)),
    # --- joints / actuation
    Param("joints.position_limits", "bool", True, "",
          "Enforce URDF position limits with a unilateral spring-damper."),
    Param("joints.limit_time_constant", "float", 0.002, "s",
          "Time constant of the limit spring-damper: k = I/tau^2, c = 2 zeta I/tau per joint, "
          "I = the joint's effective inertia at the current configuration; integrated "
          "implicitly (stable at any rate; below ~2 dt it acts as the stiffest limit dt "
          "resolves).",
          check=_positive),
    Param("joints.limit_damping_ratio", "float", 1.0, "",
          "Damping ratio of the limit spring-damper, in [0, 100].", check=_range(0.0, 100.0)),
    Param("joints.effort_limits", "bool", True, "",
          "Saturate torques at the effort limits (URDF or joints.effort_limit)."),
    Param("joints.effort_limit", "floats", [], "N*m or N",
          "Override of the URDF effort limits: [] = URDF, one value = all joints, "
          "or one per joint.", check=_nonneg_all),
    Param("joints.urdf_dynamics", "bool", True, "",
          "Apply joint viscous damping and Coulomb friction (URDF or overrides)."),
    Param("joints.damping", "floats", [], "N*m*s/rad",
          "Override of URDF <dynamics damping>: [] = URDF, one value, or one per joint. "
          "Integrated implicitly (stable for any value).", check=_nonneg_all),
    Param("joints.friction", "floats", [], "N*m",
          "Override of URDF <dynamics friction> (Coulomb): [] = URDF, one value, or one "
          "per joint.", check=_nonneg_all),
    Param("joints.friction_velocity", "float", 0.01, "rad/s",
          "Velocity scale of the smoothed Coulomb friction f tanh(qdot/v_s); raised per joint "
          "to at least f dt / I where needed for explicit stability.", check=_positive),
    Param("joints.mimic", "str", "refuse", "",
          "A moving URDF mimic joint: 'refuse' (ModelError: pinocchio's forward dynamics has no "
          "mimic coupling) | 'independent' (simulate it as an independent actuated joint; the "
          "coupling is not enforced, a warning says so).",
          check=_one_of("refuse", "independent")),
    Param("joints.armature", "floats", [0.0], "kg*m^2",
          "Motor reflected inertia added to the mass matrix diagonal: one value or one per "
          "joint.", check=_nonneg_all),
    Param("joints.command_delay_steps", "int", 0, "steps",
          "Transport delay of the torque commands: the torques given to step k act at step "
          "k + n (until then, the first command given). 0 = none.", check=_between(0, 100000)),
    # --- sensing and model perturbations (robustness studies of a controller)
    Param("sensors.delay_steps", "int", 0, "steps",
          "Transport delay of the sensed readings: Simulator.sensed_state, sensed_imu() and "
          "sensed_contact_wrench_array() at step k are those of step k - n (the initial ones "
          "until n steps have passed); Simulator.state stays the true state. 0 = none.",
          check=_between(0, MAX_SENSOR_DELAY_STEPS)),
    Param("perturbation.mass_scale_links", "strs", [], "",
          "Links whose mass and rotational inertia are scaled (a payload, a model error), "
          "one factor each in perturbation.mass_scale."),
    Param("perturbation.mass_scale", "floats", [], "",
          "One factor > 0 per link of perturbation.mass_scale_links: the link's mass and "
          "inertia times it (same shape, same centre of mass).", check=_positive_all),
    Param("perturbation.com_offset_links", "strs", [], "",
          "Links whose centre of mass is moved by perturbation.com_offset."),
    Param("perturbation.com_offset", "floats", [], "m",
          "[dx, dy, dz] per link of perturbation.com_offset_links (flat: 3 numbers per link), "
          "in the link's frame."),
)

#: Fields of a named pose P, given as ``poses.P.<field>``.
POSE_PARAMETERS: tuple[Param, ...] = (
    Param("joint_names", "strs", [], "", "Joints given a position in the pose (others: 0)."),
    Param("joint_positions", "floats", [], "rad or m", "Positions, in the order of joint_names."),
    Param("base_position", "floats", [], "m",
          "Floating base: position of the root link ([] = initial.base_position)."),
    Param("base_rpy", "floats", [], "rad",
          "Floating base: roll-pitch-yaw of the root link ([] = initial.base_rpy)."),
)

#: Fields of a contact surface S, given as ``S.<field>``.
SURFACE_PARAMETERS: tuple[Param, ...] = (
    Param("frame", "str", "", "", "Frame the surface is attached to (required)."),
    Param("shape", "str", "box", "", "'box' | 'sphere' | 'points'.",
          check=_one_of("box", "sphere", "points")),
    Param("size", "floats", [0.0, 0.0], "m", "box: [length along x, width along y].",
          length=2, check=_nonneg_all),
    Param("offset", "floats", [0.0, 0.0], "m",
          "box: [x, y] of the rectangle's centre in the frame (the rectangle lies in the "
          "frame's z = 0 plane).", length=2),
    Param("grid", "floats", [2, 2], "",
          "box: [n, m] points along length and width (2, 2 = the 4 corners).", length=2),
    Param("radius", "float", 0.0, "m", "sphere: radius.", check=_nonneg),
    Param("center", "floats", [0.0, 0.0, 0.0], "m", "sphere: centre in the frame.", length=3),
    Param("points", "floats", [], "m", "points: flat [x1, y1, z1, x2, ...] in the frame."),
)

_TOPIC_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _topic(x):
    """A ROS 2 topic name (the rules of rcl's topic name validation, without
    substitutions): tokens of letters, digits and '_' not starting with a digit,
    separated by single '/', optionally absolute ('/') or private ('~/')."""
    if not x:
        return None
    body = x[2:] if x.startswith("~/") else x[1:] if x.startswith("/") else x
    if not body or any(not _TOPIC_TOKEN.match(t) for t in body.split("/")):
        return ("must be a valid ROS topic name: letters, digits and '_' in tokens that do not "
                "start with a digit, separated by single '/', optionally starting with '/' or "
                "'~/' ('' disables the stream)")
    return None


_RATE_DOC = "Publishing rate; 0 = every physics step. Rounded to a whole number of steps."

#: Parameters of the ROS 2 node (``wb_sim_node``) only. They share the node's
#: ``wb_sim: ros__parameters:`` block with :data:`PARAMETERS`; the core ignores them.
NODE_PARAMETERS: tuple[Param, ...] = (
    Param("real_time_factor", "float", 1.0, "",
          "Pace of the physics loop against the wall clock: 1 = real time, 2 = twice as "
          "fast, 0 = as fast as possible.", check=_nonneg, live=True),
    Param("realtime_priority", "int", 50, "",
          "SCHED_FIFO priority (1-99) of the physics thread while it paces itself against "
          "the wall clock (sync.mode realtime, real_time_factor > 0), so that it wakes on time "
          "for its deadlines (as ros2_control's controller manager does); 0 = the normal "
          "scheduler. Needs the right to real-time priorities (root, CAP_SYS_NICE or an "
          "rtprio limit); without it the node logs a warning and keeps the normal scheduler. "
          "A loop that falls 0.5 s behind goes back to the normal scheduler (logged) until "
          "real_time_factor changes.",
          check=_between(0, 99)),
    Param("realtime_spin_margin_s", "float", 2.0e-4, "s",
          "With the normal scheduler (realtime_priority 0, or no right to real-time "
          "priorities) the physics loop sleeps until this long before each deadline and "
          "waits actively for the rest, so that a late wake-up of up to this much misses no "
          "deadline; it costs up to this share of each step's period in CPU (0.2 ms at "
          "1 kHz: up to 20 % of a core). 0 = plain sleeps.", check=_nonneg),
    Param("world_frame", "str", "world", "", "TF frame of the world (the ground's frame)."),
    Param("publish.joint_states_rate_hz", "float", 0.0, "Hz", _RATE_DOC, check=_nonneg),
    Param("publish.imu_rate_hz", "float", 0.0, "Hz", _RATE_DOC, check=_nonneg),
    Param("publish.contact_wrench_rate_hz", "float", 0.0, "Hz", _RATE_DOC, check=_nonneg),
    Param("publish.odom_rate_hz", "float", 0.0, "Hz", _RATE_DOC, check=_nonneg),
    Param("publish.clock_rate_hz", "float", 0.0, "Hz", _RATE_DOC, check=_nonneg),
    Param("publish.tf_rate_hz", "float", 100.0, "Hz", _RATE_DOC, check=_nonneg),
    Param("publish.stats_period_s", "float", 10.0, "s",
          "Wall-clock period of the log line with the achieved real-time factor, deadline "
          "misses and command latency; 0 = never.", check=_nonneg, live=True),
    Param("topics.joint_states", "str", "joint_states", "",
          "sensor_msgs/JointState out ('' = off).", check=_topic),
    Param("topics.imu", "str", "imu/data", "", "sensor_msgs/Imu out ('' = off).", check=_topic),
    Param("topics.contact_wrench", "str", "contact_wrench", "",
          "Prefix of the geometry_msgs/WrenchStamped topics <prefix>/<surface> ('' = off).",
          check=_topic),
    Param("topics.odom", "str", "odom/ground_truth", "",
          "nav_msgs/Odometry of the floating base ('' = off).", check=_topic),
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
    Param("topics.joint_commands", "str", "joint_commands", "",
          "sensor_msgs/JointState in: name + effort, any subset of joints ('' = off).",
          check=_topic),
    Param("topics.effort_commands", "str", "effort_commands", "",
          "std_msgs/Float64MultiArray in: efforts in command.joint_names order ('' = off).",
          check=_topic),
    Param("command.joint_names", "strs", [], "",
          "Order of the effort_commands entries ([] = every actuated joint, in the order of "
          "joint_states)."),
    Param("command.wait_for_first", "bool", False, "",
          "Hold the physics at t = 0 until the first valid command arrives (for a controller "
          "that starts after the simulator; the launch file sets it with controller:=pd)."),
    Param("command.timeout_s", "float", 0.1, "s",
          "Watchdog: the last valid command is held this long (simulated time); with no new "
          "one by then, command.timeout_action applies until commands return; 0 = never.",
          check=_nonneg, live=True),
    Param("command.timeout_action", "str", "damp", "",
          "After command.timeout_s without a valid command: 'damp': joint damping "
          "tau = -command.timeout_damping qdot (what a real robot's drives do on a lost "
          "link: the robot sinks slowly instead of dropping) | 'hold': keep the last valid "
          "torques | 'zero': zero torques.",
          check=_one_of("damp", "hold", "zero"), live=True),
    Param("command.timeout_damping", "float", 20.0, "N*m*s/rad",
          "Joint damping of command.timeout_action 'damp' (N*s/m for prismatic joints), "
          "within the effort limits.", check=_nonneg, live=True),
    Param("sync.mode", "str", "realtime", "",
          "'realtime': paced by real_time_factor | 'lockstep': after publishing a joint state "
          "the physics waits for one valid command before the next step (deterministic "
          "closed loop).", check=_one_of("realtime", "lockstep")),
    Param("sync.match_stamp", "bool", True, "",
          "Lockstep: a joint_commands message counts only if its header.stamp equals the "
          "stamp of the last joint state; other (stale) ones are ignored. effort_commands "
          "carry no stamp and are then refused; false: the first command after each state "
          "counts."),
    Param("sync.timeout_s", "float", 0.0, "s",
          "Lockstep, wall time: with no valid command this long, step with the last valid "
          "one and count a miss; 0 = wait forever.", check=_nonneg, live=True),
    Param("topics.external_wrench", "str", "external_wrench", "",
          "geometry_msgs/WrenchStamped in: a push on the link header.frame_id (force, torque "
          "in that link's frame, about its origin) ('' = off).", check=_topic),
    Param("external_wrench.duration_s", "float", 0.1, "s",
          "How long a wrench on topics.external_wrench acts, from the step it arrives.",
          check=_positive, live=True),
    Param("stop_after_s", "float", 0.0, "s",
          "Simulated time at which the node stops and exits with code 0, after a last stats "
          "line (wb_sim_run --duration); 0 = run until stopped.", check=_nonneg),
    Param("viewer", "str", "none", "",
          "Browser view of the robot and contact forces: 'none' | 'meshcat' (the URL is "
          "logged, 30 frames/s; needs pip install wb_sim[viewer]).",
          check=_one_of("none", "meshcat")),
)

_PARAM_BY_KEY = {p.key: p for p in PARAMETERS}
PARAMETER_BY_KEY = _PARAM_BY_KEY  #: the table by key (the simulator's live checks)
_NODE_PARAM_BY_KEY = {p.key: p for p in NODE_PARAMETERS}
_SURFACE_BY_FIELD = {p.key: p for p in SURFACE_PARAMETERS}
_POSE_BY_FIELD = {p.key: p for p in POSE_PARAMETERS}


# ----------------------------------------------------------------------------
# Typed configuration
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class GroundConfig:
    height: float  #: m
    normal: tuple[float, float, float]  #: unit vector, world frame


@dataclass(frozen=True)
class ContactConfig:
    model: str
    stiffness: float  #: N/m at the reference depth
    damping: float  #: N*s/m at the reference depth
    tangential_stiffness: float  #: N/m
    tangential_damping: float  #: N*s/m
    friction_coefficient: float
    reference_depth: float  #: m
    max_penetration: float  #: m
    solver: str  #: rigid: 'pgs' | 'admm'
    max_iterations: int  #: rigid
    tolerance: float  #: rigid, m/s (impulses: relative, see contact.rigid)
    baumgarte_gain: float  #: rigid
    regularization: float  #: rigid, relative to the Delassus diagonal
    activation_margin: float  #: rigid, m


@dataclass(frozen=True)
class SurfaceConfig:
    name: str
    frame: str
    shape: str
    size: tuple[float, float]
    offset: tuple[float, float]
    grid: tuple[int, int]
    radius: float
    center: tuple[float, float, float]
    points: tuple[tuple[float, float, float], ...]

    def local_points(self) -> np.ndarray:
        """Contact points in the surface frame, (n, 3) metres.

        For a sphere this is its centre; the contact point is the centre minus
        radius times the ground normal, found each step.
        """
        if self.shape == "box":
            (lx, wy), (ox, oy), (n, m) = self.size, self.offset, self.grid
            xs = ox + np.linspace(-lx / 2, lx / 2, n)
            ys = oy + np.linspace(-wy / 2, wy / 2, m)
            X, Y = np.meshgrid(xs, ys, indexing="ij")
            return np.column_stack([X.ravel(), Y.ravel(), np.zeros(n * m)])
        if self.shape == "sphere":
            return np.array([self.center], dtype=float)
        return np.array(self.points, dtype=float).reshape(-1, 3)


@dataclass(frozen=True)
class InitialConfig:
    joint_names: tuple[str, ...]
    joint_positions: tuple[float, ...]
    base_position: tuple[float, float, float]
    base_rpy: tuple[float, float, float]
    pose: str


@dataclass(frozen=True)
class PoseConfig:
    """A named pose (``poses.<name>.*``); its base fields are filled from initial.*."""
    name: str
    joint_names: tuple[str, ...]
    joint_positions: tuple[float, ...]
    base_position: tuple[float, float, float]
    base_rpy: tuple[float, float, float]


@dataclass(frozen=True)
class XacroConfig:
    args: tuple[str, ...]

    def mappings(self) -> dict[str, str]:
        """{name: value} of the 'name:=value' arguments."""
        return dict(a.split(":=", 1) for a in self.args)


@dataclass(frozen=True)
class ImuConfig:
    frame: str
    angular_velocity_noise_std: float
    linear_acceleration_noise_std: float
    angular_velocity_bias: tuple[float, float, float]
    linear_acceleration_bias: tuple[float, float, float]
    seed: int


@dataclass(frozen=True)
class JointsConfig:
    mimic: str
    position_limits: bool
    limit_time_constant: float
    limit_damping_ratio: float
    effort_limits: bool
    effort_limit: tuple[float, ...]
    urdf_dynamics: bool
    damping: tuple[float, ...]
    friction: tuple[float, ...]
    friction_velocity: float
    armature: tuple[float, ...]
    command_delay_steps: int


@dataclass(frozen=True)
class TerrainConfig:
    boxes: tuple[float, ...]
    stairs: tuple[float, ...]
    heightfield: str
    heightfield_size: tuple[float, float]
    heightfield_origin: tuple[float, float, float]
    heightfield_scale: float


@dataclass(frozen=True)
class SensorsConfig:
    delay_steps: int


@dataclass(frozen=True)
class PerturbationConfig:
    mass_scale_links: tuple[str, ...]
    mass_scale: tuple[float, ...]
    com_offset_links: tuple[str, ...]
    com_offset: tuple[float, ...]

    def inertial_edits(self) -> tuple[dict[str, float], dict[str, tuple[float, float, float]]]:
        """({link: mass factor}, {link: centre-of-mass offset, m})."""
        offsets = {name: tuple(self.com_offset[3 * i:3 * i + 3])
                   for i, name in enumerate(self.com_offset_links)}
        return dict(zip(self.mass_scale_links, self.mass_scale)), offsets


@dataclass(frozen=True)
class SimConfig:
    """The validated parameter set. Build it with :func:`load_config`."""

    urdf_path: str
    robot_description: str
    floating_base: bool
    physics_rate_hz: float
    gravity: tuple[float, float, float]
    ground: GroundConfig
    contact: ContactConfig
    surfaces: tuple[SurfaceConfig, ...]
    initial: InitialConfig
    imu: ImuConfig
    joints: JointsConfig
    sensors: SensorsConfig
    perturbation: PerturbationConfig
    poses: tuple[PoseConfig, ...]
    xacro: XacroConfig
    terrain: TerrainConfig

    @property
    def dt(self) -> float:
        """Physics step in seconds."""
        return 1.0 / self.physics_rate_hz


# ----------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------


def _coerce(key: str, p: Param, value: Any) -> Any:
    """Convert ``value`` to the parameter's kind, or raise ConfigError naming ``key``."""

    def bad(why: str) -> ConfigError:
        return ConfigError(f"parameter '{key}': {why} (got {value!r})")

    kind = p.kind
    if kind == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise bad("expected a bool")
        out: Any = bool(value)
    elif kind == "int":
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise bad("expected an integer")
        out = int(value)
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise bad("expected a number")
        out = float(value)
        if not math.isfinite(out):
            raise bad("must be finite")
    elif kind == "str":
        if not isinstance(value, str):
            raise bad("expected a string")
        out = value
    elif kind in ("floats", "strs"):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and kind == "floats":
            value = [value]
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if not isinstance(value, (list, tuple)):
            raise bad("expected a list")
        if kind == "strs":
            if not all(isinstance(v, str) for v in value):
                raise bad("expected a list of strings")
            out = tuple(value)
        else:
            if not all(isinstance(v, (int, float, np.integer, np.floating))
                       and not isinstance(v, bool) for v in value):
                raise bad("expected a list of numbers")
            out = tuple(float(v) for v in value)
            if not all(math.isfinite(v) for v in out):
                raise bad("every entry must be finite")
        if p.length is not None and len(out) != p.length:
            raise bad(f"expected {p.length} entries")
    else:  # pragma: no cover - table error
        raise AssertionError(kind)
    if p.check is not None:
        why = p.check(out)
        if why:
            raise bad(why)
    return out


def coerce_parameter(key: str, p: Param, value: Any) -> Any:
    """``value`` checked and converted as parameter ``p`` (ConfigError naming ``key``)."""
    return _coerce(key, p, value)


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts into dotted keys (``{'a': {'b': 1}}`` -> ``{'a.b': 1}``)."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


_LOADER = None


def _loader():
    """PyYAML's safe loader, reading floats as YAML 1.2 and ROS's parameter parser do:
    ``1.0e6`` and ``1e6`` are numbers (YAML 1.1, PyYAML's default, makes them strings)."""
    global _LOADER
    if _LOADER is None:
        import re

        import yaml

        class Loader(yaml.SafeLoader):
            pass

        Loader.add_implicit_resolver(
            "tag:yaml.org,2002:float",
            re.compile(r"^[-+]?(?:\d[\d_]*)?(?:\.\d*)?[eE][-+]?\d+$"),
            list("-+0123456789."))
        _LOADER = Loader
    return _LOADER


def read_yaml_params(path: str | Path, node_name: str = "wb_sim") -> dict[str, Any]:
    """Read the ``<node_name>: ros__parameters:`` block of a ROS 2 parameter file.

    Returns flat dotted keys. A relative ``urdf_path`` is resolved against the
    YAML file's directory, so ``config/x.yaml`` can say ``../urdf/x.urdf`` both
    in the source tree and in an installed ``share/wb_sim``.
    """
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read parameter file '{path}': {e.strerror}") from e
    try:
        doc = yaml.load(text, Loader=_loader())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        why = getattr(e, "problem", None) or " ".join(str(e).split())
        raise ConfigError(f"parameter file '{path}' is not valid YAML: {why}{where}") from e
    block = None
    if isinstance(doc, Mapping):
        for name in (node_name, f"/{node_name}", "/**"):
            node = doc.get(name)
            if isinstance(node, Mapping) and isinstance(node.get("ros__parameters"), Mapping):
                block = node["ros__parameters"]
                break
    if block is None:
        raise ConfigError(
            f"parameter file '{path}' has no '{node_name}: ros__parameters:' block")
    flat = flatten(block)
    up = flat.get("urdf_path")
    if isinstance(up, str) and up and ":" not in up and not Path(up).is_absolute():
        flat["urdf_path"] = str((path.parent / up).resolve())
    hf = flat.get("terrain.heightfield")
    if isinstance(hf, str) and hf and not Path(hf).is_absolute():
        flat["terrain.heightfield"] = str((path.parent / hf).resolve())
    return flat


#: parameters rclpy declares itself on every node
ROS_OWN_PARAMETERS = ("use_sim_time", "start_type_description_service")


def is_node_key(key: str) -> bool:
    """Whether ``key`` belongs to the ROS node rather than the physics core
    (:data:`NODE_PARAMETERS`, and the parameters rclpy itself owns)."""
    return key in _NODE_PARAM_BY_KEY or key in ROS_OWN_PARAMETERS or key.startswith("qos_overrides.")


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
    values = {p.key: _coerce(p.key, p, flat[p.key]) if p.key in flat else
              (tuple(p.default) if isinstance(p.default, list) else p.default)
              for p in NODE_PARAMETERS}
    return NodeConfig(values)


def _unknown_key_error(key: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return ConfigError(f"unknown parameter '{key}'{hint}")


def load_config(params: Mapping[str, Any]) -> SimConfig:
    """Validate a flat parameter dict (dotted keys) into a :class:`SimConfig`.

    Nested dicts are accepted too and flattened. Missing keys take their
    defaults; unknown keys, wrong types and out-of-range values raise
    :class:`ConfigError` naming the key.
    """
    flat = flatten(params)
    values: dict[str, Any] = {}
    for p in PARAMETERS:
        values[p.key] = _coerce(p.key, p, flat[p.key]) if p.key in flat else (
            tuple(p.default) if isinstance(p.default, list) else p.default)

    surface_names = values["contact_surfaces"]
    if len(set(surface_names)) != len(surface_names):
        raise ConfigError("parameter 'contact_surfaces': names must be unique")
    for s in surface_names:
        if not s or "." in s:
            raise ConfigError(f"parameter 'contact_surfaces': invalid surface name {s!r}")
        if any(s == p.key.split(".")[0] for p in PARAMETERS):
            raise ConfigError(
                f"parameter 'contact_surfaces': surface name {s!r} clashes with a parameter group")

    pose_names = values["poses"]
    for name in pose_names:
        if not name or "." in name:
            raise ConfigError(f"parameter 'poses': invalid pose name {name!r}")
    if len(set(pose_names)) != len(pose_names):
        raise ConfigError("parameter 'poses': names must be unique")

    known = (list(_PARAM_BY_KEY) + [f"{s}.{f}" for s in surface_names for f in _SURFACE_BY_FIELD]
             + [f"poses.{n}.{f}" for n in pose_names for f in _POSE_BY_FIELD])
    for key in flat:
        if key in _PARAM_BY_KEY or is_node_key(key):
            continue
        head, _, field = key.partition(".")
        if head in surface_names and field in _SURFACE_BY_FIELD:
            continue
        if head == "poses" and field.partition(".")[0] in pose_names \
                and field.partition(".")[2] in _POSE_BY_FIELD:
            continue
        raise _unknown_key_error(key, known)
    if values["initial.pose"] and values["initial.pose"] not in pose_names:
        raise ConfigError(f"parameter 'initial.pose': no pose {values['initial.pose']!r} in "
                          f"'poses' ({', '.join(pose_names) or 'none'})")
    for a in values["xacro.args"]:
        name, sep, _ = a.partition(":=")
        if not sep or not name.strip():
            raise ConfigError(f"parameter 'xacro.args': {a!r} is not of the form 'name:=value'")
    if values["xacro.args"] and not values["urdf_path"].endswith(".xacro"):
        raise ConfigError("parameter 'xacro.args' is given but 'urdf_path' is not a .xacro "
                          "file; remove xacro.args or point urdf_path at the .xacro")

    surfaces = tuple(_surface(name, flat) for name in surface_names)
    n_points = sum(s.grid[0] * s.grid[1] if s.shape == "box" else
                   len(s.points) if s.shape == "points" else 1 for s in surfaces)
    if n_points > MAX_CONTACT_POINTS:
        raise ConfigError(f"parameter 'contact_surfaces': {n_points} contact points in all is "
                          f"more than {MAX_CONTACT_POINTS}; use coarser grids")

    if bool(values["urdf_path"]) == bool(values["robot_description"]):
        raise ConfigError(
            "exactly one of parameters 'urdf_path' and 'robot_description' must be set")
    _check_joint_list("initial", values["initial.joint_names"], values["initial.joint_positions"])

    def group(prefix: str, cls):
        fields = cls.__dataclass_fields__
        return cls(**{f: values[f"{prefix}.{f}"] for f in fields})

    ground = GroundConfig(height=values["ground.height"],
                          normal=tuple(np.asarray(values["ground.normal"]) /
                                       np.linalg.norm(values["ground.normal"])))
    return SimConfig(
        urdf_path=values["urdf_path"],
        robot_description=values["robot_description"],
        floating_base=values["floating_base"],
        physics_rate_hz=values["physics_rate_hz"],
        gravity=values["gravity"],
        ground=ground,
        contact=group("contact", ContactConfig),
        surfaces=surfaces,
        initial=group("initial", InitialConfig),
        imu=group("imu", ImuConfig),
        joints=group("joints", JointsConfig),
        sensors=group("sensors", SensorsConfig),
        perturbation=_perturbation(group("perturbation", PerturbationConfig)),
        poses=tuple(_pose(name, flat, values) for name in pose_names),
        xacro=group("xacro", XacroConfig),
        terrain=_terrain(group("terrain", TerrainConfig)),
    )


def _terrain(t: TerrainConfig) -> TerrainConfig:
    from .terrain import boxes_from_flat, stairs_boxes
    boxes_from_flat(t.boxes)  # the ConfigErrors of their layout, at load
    stairs_boxes(t.stairs)
    return t


def _check_joint_list(prefix: str, names, positions) -> None:
    if len(names) != len(positions):
        raise ConfigError(
            f"parameter '{prefix}.joint_positions' has {len(positions)} entries but "
            f"'{prefix}.joint_names' has {len(names)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"parameter '{prefix}.joint_names': names must be unique")


def _pose(name: str, flat: Mapping[str, Any], values: Mapping[str, Any]) -> PoseConfig:
    """The named pose ``poses.<name>.*``; empty base fields take initial.*'s."""
    v = {}
    for f, p in _POSE_BY_FIELD.items():
        key = f"poses.{name}.{f}"
        v[f] = _coerce(key, p, flat[key]) if key in flat else tuple(p.default)
    _check_joint_list(f"poses.{name}", v["joint_names"], v["joint_positions"])
    for f in ("base_position", "base_rpy"):
        if not v[f]:
            v[f] = values[f"initial.{f}"]
        elif len(v[f]) != 3:
            raise ConfigError(f"parameter 'poses.{name}.{f}' needs 3 numbers, got {len(v[f])}")
        elif not values["floating_base"]:
            raise ConfigError(f"parameter 'poses.{name}.{f}': a fixed base does not move; "
                              f"place it with initial.base_position / initial.base_rpy")
    return PoseConfig(name=name, **v)


def _perturbation(p: PerturbationConfig) -> PerturbationConfig:
    """The cross-checks of the perturbation group (the links themselves are checked
    against the URDF when the robot is built)."""
    for names, values, per, key in ((p.mass_scale_links, p.mass_scale, 1, "mass_scale"),
                                    (p.com_offset_links, p.com_offset, 3, "com_offset")):
        if len(values) != per * len(names):
            raise ConfigError(
                f"parameter 'perturbation.{key}' has {len(values)} numbers but "
                f"'perturbation.{key}_links' names {len(names)} link(s): give "
                f"{'one factor' if per == 1 else '3 numbers (dx, dy, dz)'} per link")
        if len(set(names)) != len(names):
            raise ConfigError(f"parameter 'perturbation.{key}_links': names must be unique")
    return p


def _surface(name: str, flat: Mapping[str, Any]) -> SurfaceConfig:
    v = {}
    for f, p in _SURFACE_BY_FIELD.items():
        key = f"{name}.{f}"
        v[f] = _coerce(key, p, flat[key]) if key in flat else (
            tuple(p.default) if isinstance(p.default, list) else p.default)
    if not v["frame"]:
        raise ConfigError(f"parameter '{name}.frame' is required for contact surface '{name}'")
    shape = v["shape"]
    if shape == "box":
        if min(v["size"]) <= 0:
            raise ConfigError(f"parameter '{name}.size': a box needs length and width > 0")
        grid = v["grid"]
        if any(g != int(g) or g < 1 for g in grid) or grid == (1.0, 1.0):
            raise ConfigError(
                f"parameter '{name}.grid': expected two whole numbers >= 1 (not both 1), "
                f"got {list(grid)}")
        v["grid"] = (int(grid[0]), int(grid[1]))
        if v["grid"][0] * v["grid"][1] > MAX_SURFACE_POINTS:
            raise ConfigError(
                f"parameter '{name}.grid': {v['grid'][0]} x {v['grid'][1]} points is more than "
                f"{MAX_SURFACE_POINTS} per surface; a few points per edge are enough for a "
                f"flat foot (2 x 2 = the corners)")
    elif shape == "sphere":
        if v["radius"] <= 0:
            raise ConfigError(f"parameter '{name}.radius': a sphere needs a radius > 0")
    elif shape == "points":
        pts = v["points"]
        if not pts or len(pts) % 3:
            raise ConfigError(
                f"parameter '{name}.points': expected a non-empty flat list of x, y, z "
                f"triples, got {len(pts)} numbers")
        if len(pts) // 3 > MAX_SURFACE_POINTS:
            raise ConfigError(f"parameter '{name}.points': {len(pts) // 3} points is more than "
                              f"{MAX_SURFACE_POINTS} per surface")
    else:  # pragma: no cover - check() covers it
        raise AssertionError(shape)
    v["points"] = tuple(tuple(v["points"][i:i + 3]) for i in range(0, len(v["points"]), 3))
    v["grid"] = tuple(int(g) for g in v["grid"])
    return SurfaceConfig(name=name, **v)


def parameter_table_markdown() -> str:
    """The parameter table of docs/parameters.md, generated from :data:`PARAMETERS`."""
    return _table([(p.key, p) for p in PARAMETERS] + [(f"S.{p.key}", p) for p in SURFACE_PARAMETERS]
                  + [(f"poses.P.{p.key}", p) for p in POSE_PARAMETERS])


def node_parameter_table_markdown() -> str:
    """The table of the ROS node's own parameters in docs/ros.md."""
    return _table([(p.key, p) for p in NODE_PARAMETERS])


def _table(rows_in) -> str:
    rows = ["| parameter | type | default | unit | live | meaning |", "|---|---|---|---|---|---|"]
    for key, p in rows_in:  # defaults in their YAML spelling
        rows.append(f"| `{key}` | {p.kind} | `{json.dumps(p.default)}` | {p.unit} | "
                    f"{'yes' if p.live else ''} | {p.doc.replace('|', chr(92) + '|')} |")
    return "\n".join(rows)
