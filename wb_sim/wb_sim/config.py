"""The parameter set of wb_sim: one table, typed and validated once.

The same dotted names are used by the YAML files in ``config/`` (inside a
``wb_sim: ros__parameters:`` block, nested or dotted), by the ROS node and by
the Python API (:meth:`wb_sim.Simulator.from_params`). :data:`PARAMETERS`
lists every fixed key with its type, default, unit, range and meaning (each
a :class:`~wb_sim.parameters.Param`, the only place a value is checked); the
``contact.*`` group comes from the contact models (:data:`wb_sim.contact.PARAMETERS`),
each declaring its own; the keys of a contact surface ``S`` are ``S.<field>``
with the fields of :data:`SURFACE_PARAMETERS`. The ROS node's own keys are
declared in :mod:`wb_sim.ros.parameters`.

:func:`load_config` turns a flat ``{key: value}`` dict into a frozen
:class:`SimConfig`, rejecting unknown keys, wrong types and values out of range
with a :class:`~wb_sim.errors.ConfigError` that names the key.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .actuators import PARAMETERS as ACTUATOR_PARAMETERS
from .contact import PARAMETERS as CONTACT_PARAMETERS
from .errors import ConfigError
from .objects import MAX_MESH_VERTICES, check_object_group
from .robot import did_you_mean
from .parameters import Group, Param, by_key, table_markdown, unknown_key_error

# ----------------------------------------------------------------------------
# The parameter table
# ----------------------------------------------------------------------------


def _unit_vector(xs):
    n = math.sqrt(sum(x * x for x in xs))
    if not 0.999 < n < 1.001:
        return f"must be a unit vector (its norm is {n:.6g})"
    return None


#: contact points per surface and in all: the Delassus matrix is (3n)^2 doubles, and
#: a 45 x 45 grid per foot took 195 s and 3.6 GB before failing
MAX_SURFACE_POINTS = 400
MAX_CONTACT_POINTS = 1000
#: sensors.delay_steps: the delayed readings are kept in memory (10 s at 1 kHz)
MAX_SENSOR_DELAY_STEPS = 10000


#: Every fixed parameter key. Surface keys are in :data:`SURFACE_PARAMETERS`.
PARAMETERS: tuple[Param, ...] = (
    # --- robot and integration
    Param("urdf_path", "str", "", "",
          "URDF file: absolute path, path relative to the YAML file, or "
          "'icub-models:<model>' / 'example-robot-data:<path under robots/>' for "
          "robots installed from PyPI; an MJCF file (.xml, <mujoco>) with its <equality> "
          "connect / weld as loop closures. Exactly one of urdf_path, robot_description."),
    Param("robot_description", "str", "", "", "URDF XML string (alternative to urdf_path)."),
    Param("floating_base", "bool", True, "",
          "true: free-flyer root joint on the URDF root link; false: root link fixed "
          "to the world at initial.base_position / initial.base_rpy."),
    Param("max_joints", "int", 100, "",
          "Most moving joints the URDF may have, checked before the model is built: "
          "pinocchio zeroes four nv^3 tensors in each Data it builds (200 joints: 254 MB, "
          "1000: 32 GB) before wb_sim hands their pages back (memory then grows with the "
          "square of the joints); in [1, 1000].", lo=1, hi=1000),
    Param("physics_rate_hz", "float", 1000.0, "Hz",
          "Physics rate; the step is dt = 1 / physics_rate_hz, in [1, 1e6] Hz.",
          lo=1.0, hi=1.0e6),
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
          "Factor applied to the file's heights (to metres).", lo=0.0, lo_open=True),
    Param("terrain.max_boxes", "int", 200, "",
          "Most boxes the terrain may hold (terrain.boxes + every step of terrain.stairs), "
          "checked before any is built: each box is tested against every contact point at "
          "every step (2000 boxes: about 0.4 s a step); in [0, 100000].", lo=0, hi=100000),
    Param("terrain.max_heightfield_cells", "int", 4000000, "",
          "Most cells (rows x columns) of terrain.heightfield, checked from the file's header "
          "before its data is read (8 bytes each, in memory); in [4, 1e8]. Heights must be "
          "finite and within +-1e5 m; RViz and meshcat draw at most 40000 cells (decimated).",
          lo=4, hi=100000000),
    Param("contact_surfaces", "strs", [], "",
          "Names of the contact surfaces; each name S has keys S.frame, S.shape, ..."),
    # --- contact: the laws' groups (contact.*) and the links' collision (collision.*),
    # declared in the contact wing (wb_sim/contact/)
    *CONTACT_PARAMETERS,
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
          "Standard deviation of the white Gaussian gyroscope noise.", lo=0.0),
    Param("imu.linear_acceleration_noise_std", "float", 0.0, "m/s^2",
          "Standard deviation of the white Gaussian accelerometer noise.", lo=0.0),
    Param("imu.angular_velocity_bias", "floats", [0.0, 0.0, 0.0], "rad/s",
          "Constant gyroscope bias, IMU frame.", length=3),
    Param("imu.linear_acceleration_bias", "floats", [0.0, 0.0, 0.0], "m/s^2",
          "Constant accelerometer bias, IMU frame.", length=3),
    Param("imu.seed", "int", 0, "", "Seed of the IMU noise generator (reset() re-seeds).",
          lo=0, hi=2**63 - 1),
    # --- joints / actuation
    Param("joints.position_limits", "bool", True, "",
          "Enforce URDF position limits with a unilateral spring-damper."),
    Param("joints.limit_time_constant", "float", 0.002, "s",
          "Time constant of the limit spring-damper: k = I/tau^2, c = 2 zeta I/tau per joint, "
          "I = the joint's effective inertia at the current configuration; integrated "
          "implicitly (stable at any rate; below ~2 dt it acts as the stiffest limit dt "
          "resolves).",
          lo=0.0, lo_open=True),
    Param("joints.limit_damping_ratio", "float", 1.0, "",
          "Damping ratio of the limit spring-damper, in [0, 100].", lo=0.0, hi=100.0),
    Param("joints.effort_limits", "bool", True, "",
          "Saturate torques at the effort limits (URDF or joints.effort_limit)."),
    Param("joints.effort_limit", "floats", [], "N*m or N",
          "Override of the URDF effort limits: [] = URDF, one value = all joints, "
          "or one per joint.", lo=0.0),
    Param("joints.urdf_dynamics", "bool", True, "",
          "Apply joint viscous damping and Coulomb friction (URDF or overrides)."),
    Param("joints.damping", "floats", [], "N*m*s/rad",
          "Override of URDF <dynamics damping>: [] = URDF, one value, or one per joint. "
          "Integrated implicitly (stable for any value).", lo=0.0),
    Param("joints.friction", "floats", [], "N*m",
          "Override of URDF <dynamics friction> (Coulomb): [] = URDF, one value, or one "
          "per joint.", lo=0.0),
    Param("joints.friction_velocity", "float", 0.01, "rad/s",
          "Velocity scale of the smoothed Coulomb friction f tanh(qdot/v_s); raised per joint "
          "to at least f dt / I where needed for explicit stability.", lo=0.0, lo_open=True),
    Param("joints.mimic", "str", "refuse", "",
          "A moving URDF mimic joint: 'refuse' (ModelError: pinocchio's forward dynamics has no "
          "mimic coupling) | 'independent' (simulate it as an independent actuated joint; the "
          "coupling is not enforced, a warning says so).",
          choices=("refuse", "independent")),
    Param("joints.armature", "floats", [0.0], "kg*m^2",
          "Motor reflected inertia added to the mass matrix diagonal: one value or one per "
          "joint.", lo=0.0),
    Param("joints.command_delay_steps", "int", 0, "steps",
          "Transport delay of the torque commands: the torques given to step k act at step "
          "k + n (until then, the first command given). 0 = none.", lo=0, hi=100000),
    # --- the joints' drives (wb_sim/actuators.py)
    *ACTUATOR_PARAMETERS,
    # --- sensing and model perturbations (robustness studies of a controller)
    Param("sensors.delay_steps", "int", 0, "steps",
          "Transport delay of the sensed readings: Simulator.sensed_state, sensed_imu() and "
          "sensed_contact_wrench_array() at step k are those of step k - n (the initial ones "
          "until n steps have passed); Simulator.state stays the true state. 0 = none.",
          lo=0, hi=MAX_SENSOR_DELAY_STEPS),
    # --- contact sensors (wb_sim/sensors.py)
    Param("contact_sensors.active", "bool", False, "",
          "Contact sensors on every contact surface and, with collision.enabled, every link "
          "meeting the ground: Simulator.contact_states (opt-in: their debounce is updated at "
          "every step, about 10 us a step on iCub, 9 % of its step)."),
    Param("contact_sensors.threshold", "float", 1.0, "N",
          "A body is in contact (raw) when the sum of its contacts' normal forces exceeds it.",
          lo=0.0),
    Param("contact_sensors.t_on", "float", 0.0, "s",
          "Debounce: the debounced state turns on once the raw one has been on this long "
          "(rounded to whole steps; 0 = at once).", lo=0.0, hi=3600.0),
    Param("contact_sensors.t_off", "float", 0.0, "s",
          "Debounce: the debounced state turns off once the raw one has been off this long "
          "(rounded to whole steps; 0 = at once).", lo=0.0, hi=3600.0),
    # --- force-torque sensors (wb_sim/ft_sensors.py)
    Param("ft_sensors.names", "strs", [], "",
          "Six-axis force-torque sensors declared here (the URDF's Gazebo ones join them, "
          "ft_sensors.from_urdf); the other ft_sensors.* lists give one entry per name, in "
          "order. Each reads the wrench transmitted through its joint (docs/physics.md)."),
    Param("ft_sensors.joints", "strs", [], "",
          "The joint each sensor cuts: a moving joint or a URDF fixed joint."),
    Param("ft_sensors.frames", "strs", [], "",
          "Per sensor, the frame its wrench is expressed in: 'child' (the joint's frame on "
          "the child link) or 'parent' (the joint's frame on the parent link); [] = child."),
    Param("ft_sensors.directions", "strs", [], "",
          "Per sensor: 'parent_to_child' (the wrench the parent side exerts on the child "
          "side) or 'child_to_parent' (its opposite, Gazebo's default); [] = parent_to_child."),
    Param("ft_sensors.from_urdf", "bool", True, "",
          "Also read the URDF's <gazebo reference=JOINT><sensor type=\"force_torque\"> "
          "(frame child | parent | sensor with its <pose>, measure_direction)."),
    Param("ft_sensors.force_noise_std", "float", 0.0, "N",
          "Standard deviation of the white Gaussian noise on each force axis.", lo=0.0),
    Param("ft_sensors.torque_noise_std", "float", 0.0, "N*m",
          "Standard deviation of the white Gaussian noise on each torque axis.", lo=0.0),
    Param("ft_sensors.force_bias", "floats", [], "N",
          "Constant force bias, 3 numbers per sensor of ft_sensors.names (flat); [] = none."),
    Param("ft_sensors.torque_bias", "floats", [], "N*m",
          "Constant torque bias, 3 numbers per sensor of ft_sensors.names (flat); [] = none."),
    Param("ft_sensors.seed", "int", 0, "",
          "Seed of the force-torque noise generator (reset() re-seeds).", lo=0, hi=2**63 - 1),
    # --- payloads at the start (Simulator.attach_payload / detach_payload at run time)
    Param("payloads.names", "strs", [], "",
          "Rigid payloads attached at the start (and at every reset), one name each; the "
          "other payloads.* lists give one entry (or one group of numbers) per name, in order."),
    Param("payloads.links", "strs", [], "",
          "The link (any frame) each payload is welded to."),
    Param("payloads.mass", "floats", [], "kg", "The mass of each payload, >= 0.", lo=0.0),
    Param("payloads.com", "floats", [], "m",
          "Each payload's centre of mass in its link's frame: 3 numbers per payload (flat)."),
    Param("payloads.inertia", "floats", [], "kg*m^2",
          "Each payload's inertia about its centre of mass, link axes: 6 numbers per payload "
          "(flat), ixx, ixy, ixz, iyy, iyz, izz as in a URDF <inertia>; [] = point masses. "
          "Positive semi-definite, triangle inequality."),
    # --- free objects (wb_sim/objects.py; Simulator.spawn_object / delete_object at run time)
    Param("objects.names", "strs", [], "",
          "Free rigid objects (passive bodies in the robot's physics: the ground, the terrain, "
          "each other and every link with collision geometry touch them), one name each; the "
          "other objects.* lists give one entry (or one group of numbers) per name, in order."),
    Param("objects.shapes", "strs", [], "",
          "Each object's shape: box, sphere, cylinder, capsule, mesh (objects.meshes) or urdf "
          "(objects.urdfs)."),
    Param("objects.sizes", "floats", [], "m",
          "3 numbers per object (flat): box: its x, y, z edge lengths; sphere: radius, 0, 0; "
          "cylinder: radius, length (along its z axis), 0; capsule: radius, length of its "
          "cylindrical part, 0; mesh: the scale of its file's x, y, z coordinates (> 0, no "
          "unit; 1, 1, 1: the file in m); urdf: 0, 0, 0."),
    Param("objects.meshes", "strs", [], "",
          "Per object, its mesh file (STL, OBJ or DAE; a relative path: to the parameter file) "
          "for shape mesh, '' for the other shapes; [] = no mesh objects. A mesh object is "
          "its file's convex hull (contact, inertia: the homogeneous hull's, centre of mass "
          "at the object's position), as a link's collision mesh is."),
    Param("objects.urdfs", "strs", [], "",
          "Per object, its URDF (a file: a path relative to the parameter file, absolute, "
          "file:// or package://; or the XML itself) for shape urdf, '' for the other shapes; "
          "[] = no urdf objects. A rigid URDF (every joint fixed; at most 100 links, 64 "
          "<collision> geometries, 4 MiB) is one free body: its links' masses summed, their "
          "inertias combined at their centre of mass (which the object's position places; "
          "its axes: the root link's), its shape every <collision> geometry (a mesh: its "
          "convex hull). Its objects.mass entry is 0 and its size 0, 0, 0."),
    Param("objects.max_mesh_vertices", "int", MAX_MESH_VERTICES, "",
          "Most vertices a mesh object's file may have (files over 64 MiB are refused "
          "before reading): the load and the hull's cost it bounds.", lo=4, hi=10_000_000),
    Param("objects.mass", "floats", [], "kg",
          "Each object's mass, > 0 (a urdf object's: 0, its links' masses summed)."),
    Param("objects.inertia", "floats", [], "kg*m^2",
          "Each object's inertia about its centre, its axes: 6 numbers per object (flat), "
          "ixx, ixy, ixz, iyy, iyz, izz; [] = the homogeneous solid's."),
    Param("objects.positions", "floats", [], "m",
          "Each object's initial centre, world frame: 3 numbers per object (flat)."),
    Param("objects.rpy", "floats", [], "rad",
          "Each object's initial roll, pitch, yaw: 3 numbers per object (flat); [] = upright."),
    Param("objects.linear_velocities", "floats", [], "m/s",
          "Each object's initial velocity, world frame: 3 numbers per object; [] = at rest."),
    Param("objects.angular_velocities", "floats", [], "rad/s",
          "Each object's initial angular velocity, world frame: 3 numbers per object; "
          "[] = at rest."),
    Param("objects.sleep", "bool", False, "",
          "Sleeping islands (MuJoCo's sleep, Bullet's deactivation): an island of free "
          "objects (linked by contact, no robot link among them) whose every body stays "
          "slower than objects.sleep_speed for objects.sleep_time sleeps: its velocities "
          "exactly 0, its pose held, skipped by the collision phases and the contact solve "
          "(its contact forces are not reported), with every object asleep the robot "
          "stepped on its own model (if it has joints and no loop closures); an awake body within collision.margin of it, a push, "
          "set_object_state, a live contact parameter or a spawn / delete wakes the island. "
          "false: every object simulated every step (the plain reference)."),
    Param("objects.sleep_speed", "float", 0.01, "m/s, rad/s",
          "Below this linear speed (of the centre) and angular speed, an object is quiet.",
          lo=0.0),
    Param("objects.sleep_time", "float", 0.5, "s",
          "How long every object of an island must stay quiet before it sleeps.", lo=0.0),
    # --- closed kinematic chains (wb_sim/loop_closures.py)
    Param("loop_closures.frames_a", "strs", [], "",
          "Loop closures, one per entry: the frame whose origin is held to the anchor on "
          "loop_closures.frames_b (the other loop_closures.* lists give one entry per closure, "
          "in order). Solved with the contacts as bilateral rows (docs/physics.md)."),
    Param("loop_closures.frames_b", "strs", [], "",
          "Per closure, the frame carrying the anchor (a link or a URDF fixed joint)."),
    Param("loop_closures.types", "strs", [], "",
          "Per closure: 'point' (3 rows: the two points coincide, a revolute or spherical "
          "joint of the loop) or 'frame' (6 rows: also the orientations, a weld); [] = point."),
    Param("loop_closures.offsets", "floats", [], "m, rad",
          "Per closure, the anchor's placement in frame_b: 6 numbers x, y, z, roll, pitch, "
          "yaw (flat); [] = frame_b's origin and axes."),
    Param("loop_closures.time_constant", "float", 0.01, "s",
          "Drift stabilisation: each step asks the closures' velocity to cancel their error "
          "over this time (the error decays as exp(-t / T)); at least dt.",
          lo=0.0, lo_open=True, hi=10.0),
    Param("loop_closures.passive_joints", "strs", [], "",
          "Joints of the closed chains that are not actuated: they take no torque (their "
          "commands are ignored), named in a warning at construction."),
    Param("perturbation.mass_scale_links", "strs", [], "",
          "Links whose mass and rotational inertia are scaled (a payload, a model error), "
          "one factor each in perturbation.mass_scale."),
    Param("perturbation.mass_scale", "floats", [], "",
          "One factor > 0 per link of perturbation.mass_scale_links: the link's mass and "
          "inertia times it (same shape, same centre of mass).", lo=0.0, lo_open=True),
    Param("perturbation.com_offset_links", "strs", [], "",
          "Links whose centre of mass is moved by perturbation.com_offset."),
    Param("perturbation.com_offset", "floats", [], "m",
          "[dx, dy, dz] per link of perturbation.com_offset_links (flat: 3 numbers per link), "
          "in the link's frame; each in [-10, 10] m.", lo=-10.0, hi=10.0),
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
          choices=("box", "sphere", "points")),
    Param("size", "floats", [0.0, 0.0], "m", "box: [length along x, width along y].",
          length=2, lo=0.0),
    Param("offset", "floats", [0.0, 0.0], "m",
          "box: [x, y] of the rectangle's centre in the frame (the rectangle lies in the "
          "frame's z = 0 plane).", length=2),
    Param("grid", "floats", [2, 2], "",
          "box: [n, m] points along length and width (2, 2 = the 4 corners).", length=2),
    Param("radius", "float", 0.0, "m", "sphere: radius.", lo=0.0),
    Param("center", "floats", [0.0, 0.0, 0.0], "m", "sphere: centre in the frame.", length=3),
    Param("points", "floats", [], "m", "points: flat [x1, y1, z1, x2, ...] in the frame."),
)

_PARAM_BY_KEY = by_key(PARAMETERS)
PARAMETER_BY_KEY = _PARAM_BY_KEY  #: the table by key
_SURFACE_BY_FIELD = by_key(SURFACE_PARAMETERS)
SURFACE_PARAMETER_BY_FIELD = _SURFACE_BY_FIELD  #: a surface's fields by name
_POSE_BY_FIELD = by_key(POSE_PARAMETERS)
#: the first part of a dotted key: a group (``contact``, ``imu``, ...); no surface takes its name
_GROUPS = tuple(dict.fromkeys(k.partition(".")[0] for k in _PARAM_BY_KEY if "." in k))


# ----------------------------------------------------------------------------
# Typed configuration: the groups of the table, read as attributes
# ----------------------------------------------------------------------------


class SurfaceConfig(Group):
    """A contact surface: ``name`` and the fields of :data:`SURFACE_PARAMETERS`
    (``grid`` as integers, ``points`` as (x, y, z) triples)."""

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


class PoseConfig(Group):
    """A named pose (``poses.<name>.*``): ``name`` and the fields of
    :data:`POSE_PARAMETERS`; its empty base fields are filled from initial.*."""


class XacroConfig(Group):
    """The ``xacro`` group."""

    def mappings(self) -> dict[str, str]:
        """{name: value} of the 'name:=value' arguments."""
        return dict(a.split(":=", 1) for a in self.args)


class PerturbationConfig(Group):
    """The ``perturbation`` group."""

    def inertial_edits(self) -> tuple[dict[str, float], dict[str, tuple[float, float, float]]]:
        """({link: mass factor}, {link: centre-of-mass offset, m})."""
        offsets = {name: tuple(self.com_offset[3 * i:3 * i + 3])
                   for i, name in enumerate(self.com_offset_links)}
        return dict(zip(self.mass_scale_links, self.mass_scale)), offsets


#: groups read through a class of their own (the others: Group)
_GROUP_CLASSES = {"xacro": XacroConfig, "perturbation": PerturbationConfig}


class SimConfig(Group):
    """The validated parameter set (build it with :func:`load_config`): the keys
    without a dot as attributes (``config.gravity``), each group as a
    :class:`~wb_sim.parameters.Group` (``config.contact.stiffness``,
    ``config.ground.normal``, normalized), ``surfaces``, a tuple of
    :class:`SurfaceConfig`, and ``poses``, a tuple of :class:`PoseConfig`."""

    @property
    def dt(self) -> float:
        """Physics step in seconds."""
        return 1.0 / self.physics_rate_hz


# ----------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------


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
#: a float with an exponent, the decimal point optional, the exponent's sign optional: ``1e6``,
#: ``1.0e6``, ``-.5e3``; YAML 1.2 and ROS's parameter parser read these as numbers, PyYAML's
#: YAML 1.1 resolver as strings. A digit before the exponent is required (``-e5``, ``.e5``
#: stay strings).
_EXPONENT_FLOAT = r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$"


def _loader():
    """PyYAML's safe loader, reading floats as YAML 1.2 and ROS's parameter parser do
    (:data:`_EXPONENT_FLOAT`); every YAML file wb_sim reads goes through it (:func:`read_yaml`)."""
    global _LOADER
    if _LOADER is None:
        import re

        import yaml

        class Loader(yaml.SafeLoader):
            pass

        Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(_EXPONENT_FLOAT),
                                     list("-+0123456789."))
        _LOADER = Loader
    return _LOADER


def yaml_value(text: str):
    """A YAML value given on a command line (``KEY:=VALUE``), read with wb_sim's loader
    (:func:`_loader`: ``2e4`` is a number, as in ROS's ``-p``). Raises ``yaml.YAMLError``."""
    import yaml
    return yaml.load(text, Loader=_loader())


#: most nodes a YAML document may hold once its aliases are expanded: an alias repeats a node
#: without copying it, and a 1 kB file of nested aliases (a "billion laughs") expands to
#: 1e9 nodes that every reader of the document then walks
MAX_YAML_NODES = 1_000_000


def _check_expanded_size(root, what: str, path: Path) -> None:
    """ConfigError where the document ``root`` (a composed PyYAML node) holds more than
    :data:`MAX_YAML_NODES` nodes with its aliases expanded (counted once per node, no
    expansion)."""
    import yaml

    size: dict[int, int] = {}
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in size:
            continue
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [x for pair in node.value for x in pair]
        else:
            size[id(node)] = 1
            continue
        if done:
            size[id(node)] = 1 + sum(size.get(id(c), 0) for c in children)
            if size[id(node)] > MAX_YAML_NODES:
                raise ConfigError(
                    f"{what} '{path}': more than {MAX_YAML_NODES} values once its aliases (*name) "
                    f"are expanded; write the values out, or split the file (the bound is "
                    f"wb_sim.config.MAX_YAML_NODES)")
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in size)


def read_yaml(path: str | Path, what: str = "parameter file") -> Any:
    """The document of the YAML file ``path`` (UTF-8), read with the one loader of wb_sim
    (:func:`_loader`), for parameter files (:func:`read_yaml_params`) and campaign files
    alike. A file that cannot be read or is not YAML raises :class:`~wb_sim.errors.ConfigError`
    naming ``what`` and the path, and where PyYAML says, the line and column."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {what} '{path}': {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what} '{path}' is not valid YAML: not UTF-8 text (byte {e.start} "
                          f"is {e.object[e.start:e.start + 1]!r})") from e
    try:
        loader = _loader()(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_expanded_size(node, what, path)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        said = [getattr(e, "context", None), getattr(e, "problem", None)]  # what, then why
        why = ", ".join(x for x in said if x) or " ".join(str(e).split())
        raise ConfigError(f"{what} '{path}' is not valid YAML: {why}{where}") from e
    except ConfigError:
        raise
    except ValueError as e:  # a value its tag cannot hold: !!int abc, 2001-13-45
        raise ConfigError(f"{what} '{path}' is not valid YAML: {e}") from e


def read_yaml_params(path: str | Path, node_name: str = "wb_sim") -> dict[str, Any]:
    """Read the ``<node_name>: ros__parameters:`` block of a ROS 2 parameter file.

    Returns flat dotted keys. A relative ``urdf_path`` (and ``collision.srdf_path``)
    is resolved against the YAML file's directory, so ``config/x.yaml`` can say ``../urdf/x.urdf`` both
    in the source tree and in an installed ``share/wb_sim``.
    """
    path = Path(path)
    doc = read_yaml(path, "parameter file")
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
    for key in ("urdf_path", "collision.srdf_path"):  # robot files: schemes as urdf_path's
        up = flat.get(key)
        if isinstance(up, str) and up and ":" not in up and not Path(up).is_absolute():
            flat[key] = str((path.parent / up).resolve())
    hf = flat.get("terrain.heightfield")
    if isinstance(hf, str) and hf and not Path(hf).is_absolute():
        flat["terrain.heightfield"] = str((path.parent / hf).resolve())
    meshes = flat.get("objects.meshes")
    if isinstance(meshes, list):
        flat["objects.meshes"] = [str((path.parent / m).resolve()) if isinstance(m, str) and m
                                  and not Path(m).is_absolute() else m for m in meshes]
    urdfs = flat.get("objects.urdfs")  # files (schemes and XML kept)
    if isinstance(urdfs, list):
        flat["objects.urdfs"] = [str((path.parent / u).resolve()) if isinstance(u, str) and u
                                 and ":" not in u and not u.lstrip().startswith("<")
                                 and not Path(u).is_absolute() else u for u in urdfs]
    return flat


#: The keys the ROS node owns in the shared ``wb_sim: ros__parameters:`` block, by name
#: only (their declarations are in wb_sim/ros/parameters.py, which the core does not
#: import): its groups and top-level names, the parameters rclpy declares on every
#: node, and rclpy's QoS overrides. The core leaves these keys to the node, so that a
#: parameter file serves both; test_config_single_source holds this list to the node's
#: declarations.
NODE_GROUPS = ("publish", "topics", "command", "sync", "external_wrench", "qos_overrides",
               "controller", "snapshots", "diagnostics")
NODE_NAMES = ("real_time_factor", "realtime_priority", "realtime_spin_margin_s", "world_frame",
              "stop_after_s", "viewer", "world_file",
              "use_sim_time", "start_type_description_service")


def is_node_key(key: str) -> bool:
    """Whether ``key`` is left to the ROS node (:data:`NODE_GROUPS`, :data:`NODE_NAMES`)."""
    return key in NODE_NAMES or key.partition(".")[0] in NODE_GROUPS and "." in key


def load_config(params: Mapping[str, Any]) -> SimConfig:
    """Validate a flat parameter dict (dotted keys) into a :class:`SimConfig`.

    Nested dicts are accepted too and flattened. Missing keys take their
    defaults; unknown keys, wrong types and out-of-range values raise
    :class:`ConfigError` naming the key. The ROS node's keys are left to it.
    """
    flat = flatten(params)
    values = {p.key: p.coerce(flat[p.key]) if p.key in flat else p.default_value
              for p in PARAMETERS}

    surface_names = values["contact_surfaces"]
    if len(set(surface_names)) != len(surface_names):
        raise ConfigError("parameter 'contact_surfaces': names must be unique")
    for s in surface_names:
        if not s or "." in s:
            raise ConfigError(f"parameter 'contact_surfaces': invalid surface name {s!r}")
        if s in _GROUPS or s in _PARAM_BY_KEY:
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
        if key in _PARAM_BY_KEY:
            continue
        head, _, field = key.partition(".")
        if head in surface_names and field in _SURFACE_BY_FIELD:
            continue
        if head == "poses" and field.partition(".")[0] in pose_names \
                and field.partition(".")[2] in _POSE_BY_FIELD:
            continue
        if not is_node_key(key):
            raise unknown_key_error(key, known)
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

    normal = np.asarray(values["ground.normal"])
    values["ground.normal"] = tuple((normal / np.linalg.norm(normal)).tolist())
    top: dict[str, Any] = {g: {} for g in _GROUPS}
    for key, v in values.items():
        head, _, field = key.partition(".")
        if field:
            top[head][field] = v
        else:
            top[key] = v
    groups = {g: _GROUP_CLASSES.get(g, Group)(top[g]) for g in _GROUPS}
    _check_perturbation(groups["perturbation"])
    _check_payloads(groups["payloads"])
    check_object_group(groups["objects"])
    _check_ft_sensors(groups["ft_sensors"])
    _check_loop_closures(groups["loop_closures"])
    _check_terrain(groups["terrain"])
    return SimConfig({**top, **groups, "surfaces": surfaces,
                      "poses": tuple(_pose(name, flat, values) for name in pose_names)})


def _check_terrain(t: Group) -> None:
    from .terrain import boxes_from_flat, check_box_count, stairs_boxes
    check_box_count(t.boxes, t.stairs, t.max_boxes)  # before a box is built
    boxes_from_flat(t.boxes)  # the ConfigErrors of their layout, at load
    stairs_boxes(t.stairs)


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
        v[f] = p.coerce(flat[key], key) if key in flat else p.default_value
    _check_joint_list(f"poses.{name}", v["joint_names"], v["joint_positions"])
    for f in ("base_position", "base_rpy"):
        if not v[f]:
            v[f] = values[f"initial.{f}"]
        elif len(v[f]) != 3:
            raise ConfigError(f"parameter 'poses.{name}.{f}' needs 3 numbers, got {len(v[f])}")
        elif not values["floating_base"]:
            raise ConfigError(f"parameter 'poses.{name}.{f}': a fixed base does not move; "
                              f"place it with initial.base_position / initial.base_rpy")
    return PoseConfig({"name": name, **v})


def _check_ft_sensors(p: Group) -> None:
    """The force-torque sensors' lists agree in length and hold known words (the joints are
    checked against the robot by the simulator)."""
    n = len(p.names)
    if len(set(p.names)) != n or not all(p.names):
        raise ConfigError("parameter 'ft_sensors.names': names must be non-empty and unique")
    for key, values, per, optional in (("joints", p.joints, 1, False),
                                       ("frames", p.frames, 1, True),
                                       ("directions", p.directions, 1, True),
                                       ("force_bias", p.force_bias, 3, True),
                                       ("torque_bias", p.torque_bias, 3, True)):
        if optional and not values:
            continue
        if len(values) != per * n:
            raise ConfigError(
                f"parameter 'ft_sensors.{key}' has {len(values)} entries but 'ft_sensors.names' "
                f"names {n} sensor(s): give {per} per sensor" + (" (or [])" if optional else ""))
    for key, values, allowed in (("frames", p.frames, ("child", "parent")),
                                 ("directions", p.directions,
                                  ("parent_to_child", "child_to_parent"))):
        for v in values:
            if v not in allowed:
                raise ConfigError(f"parameter 'ft_sensors.{key}': {v!r} is not one of "
                                  f"{', '.join(allowed)}")


def _check_loop_closures(p: Group) -> None:
    """The closures' lists agree in length and their types are known (the frames are
    checked against the robot by wb_sim.loop_closures)."""
    n = len(p.frames_a)
    for key, values, per in (("frames_b", p.frames_b, 1), ("types", p.types, 1),
                             ("offsets", p.offsets, 6)):
        if key != "frames_b" and not values:
            continue
        if len(values) != per * n:
            raise ConfigError(
                f"parameter 'loop_closures.{key}' has {len(values)} entries but "
                f"'loop_closures.frames_a' gives {n} closure(s): give {per} per closure"
                + ("" if key == "frames_b" else " (or [] for the default)"))
    for t in p.types:
        if t not in ("point", "frame"):
            raise ConfigError(f"parameter 'loop_closures.types': unknown type {t!r}"
                              f"{did_you_mean(t, ('point', 'frame'))}; give 'point' or 'frame'")
    for a, b in zip(p.frames_a, p.frames_b):
        if a == b:
            raise ConfigError(f"parameter 'loop_closures.frames_b': closure {a!r}-{b!r} ties a "
                              f"frame to itself: give two frames on different links")


def _check_payloads(p: Group) -> None:
    """The payloads' lists agree in length (their values are checked against the robot when
    the simulator attaches them: wb_sim.payloads.make_payload)."""
    n = len(p.names)
    if len(set(p.names)) != n or not all(p.names):
        raise ConfigError("parameter 'payloads.names': names must be non-empty and unique")
    for key, values, per in (("links", p.links, 1), ("mass", p.mass, 1), ("com", p.com, 3),
                             ("inertia", p.inertia, 6)):
        if key == "inertia" and not values:
            continue
        if len(values) != per * n:
            raise ConfigError(
                f"parameter 'payloads.{key}' has {len(values)} entries but 'payloads.names' "
                f"names {n} payload(s): give {per} per payload"
                + (" (or [] for point masses)" if key == "inertia" else ""))


def _check_perturbation(p: PerturbationConfig) -> None:
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


def _surface(name: str, flat: Mapping[str, Any]) -> SurfaceConfig:
    v = {}
    for f, p in _SURFACE_BY_FIELD.items():
        key = f"{name}.{f}"
        v[f] = p.coerce(flat[key], key) if key in flat else p.default_value
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
    return SurfaceConfig({"name": name, **v})


def parameter_table_markdown() -> str:
    """The parameter table of docs/parameters.md, generated from :data:`PARAMETERS`."""
    return table_markdown([(p.key, p) for p in PARAMETERS]
                          + [(f"S.{p.key}", p) for p in SURFACE_PARAMETERS]
                          + [(f"poses.P.{p.key}", p) for p in POSE_PARAMETERS])
