"""The simulator: an immutable robot, a validated configuration, and a state
that :meth:`Simulator.step` advances by one fixed step.

One step (``h = dt``), semi-implicit Euler on the manifold::

    tau    = sat(tau_cmd) + passive(q, v) + J_link^T w   (w: pushes, see
                                                apply_external_wrench)
    v_free = v + h ABA(q, v, tau)   (armature + h*D: implicit joint damping)
    M^-1   (from ABA's factorization) if a contact point, a limit or a one-body
           floating base needs it
    v_free += M^-1 p_limits        (joints beyond a limit: implicit spring-dampers)
    v'     = v_free + M^-1 J_c^T p  (contact impulses p: the contact model's
                                    solve, implicit in the contact forces)
    (with loop closures, wb_sim.loop_closures, their rows are eliminated right after ABA:
    the limits and the contacts then act with M_c^-1 on the loops' free velocity)
    v'     = v + (M + h/2 D)^-1 M (v' - v)   (a floating base that is the whole
             robot: its gyroscopic and centripetal terms implicit, wb_sim.gyroscopic)
    q'     = integrate(q, h v')     (pinocchio: quaternion stays unit)
    floating base: its origin moves with its world velocity (see _stepping_model)

:meth:`Simulator.step` only sequences named stages: ``_checked_torques`` (the
command), ``_command_pipe`` (``joints.command_delay_steps``), saturation,
the drives (``actuators.model``: :mod:`wb_sim.actuators`, skipped when ideal),
``_advance`` (the dynamics above, the one contact object's solve, the integration
and the divergence check), the next :class:`~wb_sim.state.Record` (everything that
evolves, in one place) and ``_sense`` (IMU noise, delayed readings).

The state is never left non-finite: a bad torque vector raises
:class:`CommandError` before anything changes, and a step whose result is
non-finite or whose contacts penetrate deeper than ``contact.max_penetration``
raises :class:`DivergenceError` and keeps the previous state.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings
import weakref
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pinocchio as pin

from . import compiled
from .actuation import Actuation, combine_actuation
from .actuators import ActuatorReading, combine_actuators, make_actuators
from .config import SimConfig, load_config, read_yaml_params
from .contact import STATUS_NAMES, Ground, make_contact
from .errors import CommandError, ConfigError, DivergenceError, ModelError
from .ft_sensors import FTSensors, FTSpec, WrenchReading, check_ft_joints, gazebo_ft_sensors
from .gyroscopic import RootGyroscopic
from .linalg import upper_sym_mv
from .loop_closures import LoopClosures
from .multirobot import CombinedRobot, RobotPart, combine, unknown_robot
from .objects import (FreeObject, append_objects, configured_objects, make_object,
                      object_geometries, terrain_penetration, unknown_object)
from .payloads import Payload, apply_payloads, make_payload
from .parameters import Group
from .pin_views import new_data
from .robot import RobotCache, RobotModel, did_you_mean, rotate_inverse
from .sensors import (ContactPointsReading, ContactSensors, ContactState, ContactWrench, Imu,
                      ImuReading, SelfContactsReading)
from .state import Record, SimState, State, copy_record
from .terrain import BOX_FIELDS, load_terrain


#: a generalized velocity norm above this (rad/s, m/s) is taken as divergence
MAX_SPEED = 1.0e4
#: a contact point deeper than this in the initial state gets a warning, m
INITIAL_PENETRATION_WARNING = 2.0e-3
#: linearize_step's default perturbation of each coordinate (rad, m, rad/s, m/s, N*m)
LINEARIZATION_EPS = 1.0e-6


class InitialPenetrationWarning(UserWarning):
    """The initial state puts a contact point into the ground."""

_MAX_SPEED2 = MAX_SPEED**2


def _frozen(x: np.ndarray) -> np.ndarray:
    """``x`` made read-only (and returned)."""
    x.setflags(write=False)
    return x


def _pushes_left(pushes: tuple) -> tuple:
    """The pushes after one more step of them: each one step shorter, the spent ones gone."""
    return tuple((f, w, n - 1) for f, w, n in pushes if n > 1)


def _real(x, name: str):
    """``x`` unchanged, or CommandError if it is complex (numpy would drop the
    imaginary part with only a warning)."""
    if np.iscomplexobj(x):
        raise CommandError(f"{name} must be real, got a complex value")
    return x


def _vector(x, name: str, n: int, what: str = "") -> np.ndarray:
    """``x`` as a finite real float vector of length ``n``, or CommandError naming ``name``."""
    try:
        out = np.asarray(_real(x, name), dtype=float)
    except (TypeError, ValueError) as e:
        raise CommandError(f"{name} must be a vector of {n} real numbers: {e}") from None
    if out.shape != (n,):
        raise CommandError(f"{name} must have shape ({n},){' (' + what + ')' if what else ''}, "
                           f"got shape {out.shape}")
    if not np.isfinite(out).all():
        bad = np.flatnonzero(~np.isfinite(out)).tolist()
        raise CommandError(f"{name} has non-finite entries at indices {bad}")
    return out


def _symmetric(upper: np.ndarray) -> np.ndarray:
    """The symmetric matrix whose upper triangle ``upper`` holds (a new array)."""
    return np.triu(upper) + np.triu(upper, 1).T


def _symmetric_block(upper: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The symmetric block on rows and columns ``cols`` (ascending) of the matrix whose
    upper triangle ``upper`` holds: ``_symmetric(upper[np.ix_(cols, cols)])`` in one
    gather from the upper triangle (entry (i, j) read at (min, max))."""
    if len(cols) == 1:
        c = int(cols[0])
        return upper[c:c + 1, c:c + 1]
    r = cols[:, None]
    return upper[np.minimum(r, cols), np.maximum(r, cols)]


def _rpy_quaternion(rpy) -> np.ndarray:
    return pin.Quaternion(pin.rpy.rpyToMatrix(*rpy)).coeffs()


#: a floating-base robot's model parsed again with the stepping root (see
#: Simulator._stepping_model), once per RobotModel (immutable), never changed: copied
_STEPPING_ROOTS: "weakref.WeakKeyDictionary[RobotModel, pin.Model]" = weakref.WeakKeyDictionary()

#: a robot's force-torque sensors of its URDF's Gazebo extensions (specs, notes), once per robot
_URDF_FT_SENSORS: "weakref.WeakKeyDictionary[RobotModel, tuple]" = weakref.WeakKeyDictionary()


def robot_arguments(config: SimConfig) -> dict[str, Any]:
    """The arguments of :meth:`RobotModel.from_urdf` a configuration builds its robot with
    (what makes the robot: the structural parameters; :class:`~wb_sim.robot.RobotCache`
    keys on them)."""
    mass_scale, com_offset = config.perturbation.inertial_edits()
    base_placement = None
    if not config.floating_base:
        base_placement = pin.SE3(pin.rpy.rpyToMatrix(*config.initial.base_rpy),
                                 np.array(config.initial.base_position))
    return dict(urdf_path=config.urdf_path, robot_description=config.robot_description,
                floating_base=config.floating_base, base_placement=base_placement,
                mimic=config.joints.mimic, mass_scale=mass_scale, com_offset=com_offset,
                xacro_args=config.xacro.mappings(), max_joints=config.max_joints)


def _stepping_tree(robot: RobotModel) -> pin.Model:
    """The robot's stepping model without objects (a copy): for a floating base the root
    as translation + spherical (parsed once per robot), else the physical model."""
    if not robot.floating_base:
        return pin.Model(robot.model)
    parsed = _STEPPING_ROOTS.get(robot)
    if parsed is None:
        root = pin.JointModelComposite(2)
        root.addJoint(pin.JointModelTranslation())
        root.addJoint(pin.JointModelSpherical())
        if robot.mjcf_file is not None:
            parsed = pin.buildModelAndConstraintsFromMJCF(str(robot.mjcf_file), root)[0]
            robot.add_extra_frames(parsed)
        else:
            parsed = pin.buildModelFromXML(robot.urdf_xml, root)
        _STEPPING_ROOTS[robot] = parsed
    return pin.Model(parsed)


class Simulator:
    """Whole-body rigid-body simulator with ground contact.

    Build it with :meth:`from_params` (a dict of dotted parameter names, see
    ``wb_sim.config.PARAMETERS``) or :meth:`from_yaml`. Joint vectors (torques,
    positions, velocities) are in :attr:`joint_names` order.
    """

    def __init__(self, config: SimConfig, objects: tuple | None = None,
                 robots: RobotCache | None = None, fleet: tuple | None = None):
        """``objects``: the free objects (:class:`~wb_sim.objects.FreeObject`) instead of
        those of the parameters ``objects.*`` (spawn_object and delete_object rebuild with
        them). ``robots``: a :class:`~wb_sim.robot.RobotCache` to take the robot from where
        it holds one built from the same structural parameters (else the URDF is parsed).
        ``fleet``: several robots in this one physics (wb_sim.multirobot): ``(name of the
        first robot, ((name, SimConfig), ...) of the others)``; ``config`` is the first's."""
        self.config = config
        self._fleet = fleet
        self._fleet_q0: tuple = ()
        self._robots = robots
        #: the free objects (wb_sim.objects.FreeObject), in the order of their joints
        self.objects: tuple[FreeObject, ...] = \
            configured_objects(config.objects) if objects is None else tuple(objects)
        self.dt = config.dt
        self._dt0 = np.array(self.dt)  # 0-d: cheaper in numpy products than a float
        self._inv_dt = np.array(1.0 / self.dt)
        base_placement = pin.SE3(pin.rpy.rpyToMatrix(*config.initial.base_rpy),
                                 np.array(config.initial.base_position))
        arguments = robot_arguments(config)
        self.robot = robots.robot(arguments) if robots is not None else \
            RobotModel.from_urdf(**arguments)
        surfaces = config.surfaces
        if fleet and fleet[1]:
            self.robot, surfaces = self._combine(fleet)
        robot = self.robot
        #: the robots of this physics (wb_sim.multirobot.RobotPart: name, joint_names, the
        #: slices of q, v and the joint vectors each owns), the first robot first
        self.robots = robot.parts if isinstance(robot, CombinedRobot) else (
            RobotPart(fleet[0] if fleet else "robot", 0, robot, "", slice(0, robot.model.nq),
                      slice(0, robot.model.nv), slice(0, robot.nj), 1,
                      tuple(s.name for s in surfaces)),)
        #: physical model (armature only), for the dynamics queries: the simulator's own
        #: copy of the robot's, with the attached payloads in its body inertias
        self.model = pin.Model(robot.model)
        self.model.gravity = pin.Motion(np.array(config.gravity), np.zeros(3))
        #: the joints' drives (wb_sim.actuators, actuators.model); inactive: ideal
        if isinstance(robot, CombinedRobot):  # each robot's own joints.* and actuators.*
            self.actuators, self.actuation = self._fleet_actuation(robot, fleet)
        else:
            self.actuators = make_actuators(robot, config.actuators, self.dt)
            self.actuation = Actuation(robot, config.joints, self.dt,
                                       self.actuators.reflected_friction())
        self._drives = self.actuators if self.actuators.active else None
        self._command_delay = config.joints.command_delay_steps
        self._sensor_delay = config.sensors.delay_steps
        self.model.armature[robot.idx_v] = self.actuation.armature
        # the robot's own extent in the models; the free objects' joints come after it
        self._robot_njoints = self.model.njoints
        self._nq_robot, self._nv_robot = self.model.nq, self.model.nv
        self._robot_only = pin.Model(self.model) if self.objects else None
        self._object_joints = self._append_objects(self.model, stepping=False)
        self._data = new_data(self.model)
        self._model_step = self._stepping_model()
        self._data_step = new_data(self._model_step)
        # the models' body inertias without payloads (the payloads are rebuilt from them)
        self._inertias0 = [pin.Inertia(Y) for Y in self.model.inertias]
        self._payloads: tuple = ()  # the payloads the models' inertias hold now
        self._start_payloads = self._configured_payloads()
        self._set_payloads(self._start_payloads)
        free_joints = tuple(getattr(robot, "free_roots", ())) + tuple(self._object_joints)
        #: (iq, iv): where each free root's coordinates start, the floating base's (0, 0)
        #: first, then the free objects' (other robots') roots: the public velocity has
        #: their linear velocities in their own axes, the stepping one in the world's
        self._free_roots = (((0, 0),) if robot.floating_base else ()) + tuple(
            (self.model.idx_qs[j], self.model.idx_vs[j]) for j in free_joints)
        #: a floating base that is the whole robot (one rigid body: an object, a wheel, a
        #: top): its velocity-product terms taken implicitly (wb_sim.gyroscopic). For an
        #: articulated robot the root body's share is a small part of them: implicit, it
        #: cost 15-19 % of icub_stand's step and changed nothing measurable (explicit then)
        self._gyroscopic = RootGyroscopic(self._model_step, self._data_step, self.dt) \
            if robot.floating_base and self._model_step.nv == 6 else None

        self.joint_names = robot.joint_names
        self.nj = robot.nj
        self.q0 = self._initial_configuration()
        self._base_placement = base_placement
        self._effective_inertias()

        self.ground = Ground(config.ground.height, np.array(config.ground.normal))
        self.terrain = load_terrain(config)  #: wb_sim.terrain.Terrain, or None: the plane only
        #: what the simulator adjusted or wants said once (the node logs these)
        self.notes: list[str] = []
        #: the one contact object (wb_sim.contact.ContactModel): the contact surfaces, and
        #: the links against the ground and each other where collision.* asks
        self._check_objects()
        self.contact = make_contact(
            robot, surfaces=surfaces, contact=config.contact, collision=config.collision,
            ground=self.ground, terrain=self.terrain, model_step=self._model_step,
            data_step=self._data_step, notes=self.notes,
            objects=object_geometries(self._model_step, self.objects, self._object_joints))
        #: the contact surfaces' points (wb_sim.contact.points.ContactPoints)
        self.contact_points = self.contact.surfaces
        #: the links' points against the ground (collision.enabled), or None
        self.collision = self.contact.collision
        #: the links against each other (collision.self_collision), or None
        self.self_collision = self.contact.self_collision
        self._no_points = not self.contact.active
        self._max_penetration = self.contact.max_penetration
        self.surface_names = self.contact_points.surface_names
        #: the closed chains' constraints (wb_sim.loop_closures.LoopClosures), or None
        self.loop_closures = LoopClosures(robot, self._model_step, config.loop_closures,
                                          self.dt) \
            if config.loop_closures.frames_a or robot.closures else None
        self._passive = self.loop_closures.passive if self.loop_closures is not None else ()
        self._closure_impulse = None  # the closures' impulses of the last step
        self._weight = self.mass * float(np.linalg.norm(config.gravity))
        self._note_contact_resolution()

        self.imu_sensor = Imu(robot, config.imu, np.array(config.gravity), self._model_step) \
            if config.imu.frame else None
        #: the other robots' IMUs (wb_sim.multirobot: imu.* is per robot), by robot name
        self.robot_imus: dict[str, Imu] = {}
        for (name, cfg_k), part in zip(fleet[1] if fleet else (), self.robots[1:]):
            if cfg_k.imu.frame:
                imu_cfg = Group({**dict(cfg_k.imu), "frame": part.prefix + cfg_k.imu.frame})
                self.robot_imus[name] = Imu(robot, imu_cfg, np.array(config.gravity),
                                            self._model_step)
        #: the contact sensors (wb_sim.sensors.ContactSensors), or None (contact_sensors.active);
        #: with several robots one set over every robot's surfaces and links, each sensor
        #: with its robot's contact_sensors.* (a robot reads its own rows:
        #: :meth:`robot_contact_states`), None when no robot's is active
        self.contact_sensors = None
        #: several robots: each robot's rows of the contact sensors, by robot name (absent:
        #: its contact_sensors.active is false); None with one robot
        self._contact_rows: dict[str, np.ndarray] | None = None
        configs = (config,) + tuple(c for _, c in fleet[1]) if fleet and fleet[1] else None
        if config.contact_sensors.active or (
                configs is not None and any(c.contact_sensors.active for c in configs)):
            # a link named as a contact surface reads as "<link> (link)"
            raw_links = tuple(self.contact.collision_links())
            links = tuple(f"{n} (link)" if n in self.surface_names else n for n in raw_links)
            self.contact_sensors = ContactSensors(
                tuple(self.surface_names) + links,
                ("surface",) * len(self.surface_names) + ("link",) * len(links),
                config.contact_sensors, self.dt)
            self._surface_of_point = np.asarray(self.contact_points.surface_of_point, dtype=int)
            if configs is not None:
                self._contact_rows = self._fleet_contact_sensors(configs, raw_links)
        #: the force-torque sensors (wb_sim.ft_sensors.FTSensors), or None: none declared
        #: (the first robot's with several robots: the others' are :attr:`robot_ft_sensors`)
        self.ft_sensors = self._build_ft_sensors()
        #: the other robots' force-torque sensors (wb_sim.multirobot: ft_sensors.* is per
        #: robot), by robot name: those of a robot that declares any
        self.robot_ft_sensors: dict[str, FTSensors] = {}
        for (name, cfg_k), part in zip(fleet[1] if fleet else (), self.robots[1:]):
            ft = self._robot_ft_sensors(part, cfg_k)
            if ft is not None:
                self.robot_ft_sensors[name] = ft
        #: the components with evolving state of their own, each with snapshot()/restore():
        #: a snapshot holds theirs beside the record
        self._components = {name: c for name, c in (("contact", self.contact),
                                                   ("imu", self.imu_sensor),
                                                   ("ft", self.ft_sensors)) if c is not None}
        self._components.update({f"imu:{n}": c for n, c in self.robot_imus.items()})
        self._components.update({f"ft:{n}": c for n, c in self.robot_ft_sensors.items()})
        self._init_sleep()

        floating = robot.floating_base
        # the robot's joints (the free objects' coordinates come after them)
        self._jq = slice(7 if floating else 0, self._nq_robot)
        self._jv = slice(6 if floating else 0, self._nv_robot)
        contiguous = (np.all(robot.nq_joint == 1)
                      and np.array_equal(robot.idx_q, np.arange(self.model.nq)[self._jq])
                      and np.array_equal(robot.idx_v, np.arange(self.model.nv)[self._jv]))
        self._contiguous = bool(contiguous)
        self._bind_limit_kernel()
        kernels = compiled.kernels()
        #: the free roots' velocity into their axes, compiled (None: robot.rotate_inverse)
        self._rotate_into = None if kernels is None else kernels.rotate_inverse_into
        self._tau_shape = (self.nj,)
        self._no_forces = _frozen(np.zeros((self.contact_points.n, 3)))  # nothing touches
        self._tau_gen = np.zeros(self.model.nv)
        #: the record of everything that evolves (wb_sim.state.Record); reset builds it,
        #: step replaces it
        self._s: Record
        self._v_public = None  # the public velocity of _s, converted when first read
        self.reset()
        too_deep = self._too_deep()
        if too_deep:
            name = config.initial.pose
            key = f"poses.{name}.base_position" if name else "initial.base_position"
            raise ConfigError(
                f"parameter '{'initial.pose' if name else key}': the initial "
                f"{f'named pose {name!r}' if name else 'configuration'} {too_deep}: raise "
                f"parameter '{key}'")
        self._warn_initial_penetration()

    def _too_deep(self) -> str | None:
        """Where the contact evaluated last is deeper than contact.max_penetration (the
        next step would refuse it), what is and how deep; else None."""
        if self._no_points or not self.contact.max_depth > self._max_penetration:
            return None
        what, deepest = self.contact.deepest()
        return (f"puts {what} {deepest * 1e3:.1f} mm into the ground, deeper than "
                f"contact.max_penetration = {self._max_penetration * 1e3:.1f} mm (the next step "
                f"would refuse it)")

    def _warn_initial_penetration(self) -> None:
        """Warn when the initial state puts a contact point deep into the ground:
        the contact pushes it out in the first steps (37 mm launched the humanoid
        23 cm up), which is seldom what a user meant."""
        if not self.contact_points.n:
            return
        depth = np.asarray(self.contact.depth, dtype=float)
        worst = int(np.argmax(depth))
        if depth[worst] > INITIAL_PENETRATION_WARNING:
            surface = self.surface_names[self.contact_points.surface_of_point[worst]]
            warnings.warn(
                f"contact surface '{surface}' starts {depth[worst] * 1e3:.1f} mm inside the "
                f"ground: the contact will push it out in the first steps; raise "
                f"initial.base_position (or lower ground.height) so that the feet start on or "
                f"just above the ground", InitialPenetrationWarning, stacklevel=3)

    # ------------------------------------------------------------------ building

    @classmethod
    def from_params(cls, params: Mapping[str, Any],
                    robots: RobotCache | None = None) -> "Simulator":
        """Build from a dict of parameters (dotted keys, or nested dicts). ``robots``: a
        :class:`~wb_sim.robot.RobotCache` (a campaign's worker keeps one): the robot is
        taken from it when one of the same structural parameters was built before (the
        URDF, the stepping model and the collision geometry are not parsed again; the
        simulator and its state are new)."""
        return cls(load_config(params), robots=robots)

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: Mapping[str, Any] | None = None,
                  node_name: str = "wb_sim") -> "Simulator":
        """Build from the ``wb_sim: ros__parameters:`` block of a YAML file,
        with ``overrides`` (dotted keys) applied on top."""
        params = read_yaml_params(path, node_name)
        params.update(overrides or {})
        return cls.from_params(params)

    @classmethod
    def from_world(cls, path: str | Path) -> "Simulator":
        """Build from a world file (docs/world.md, :func:`wb_sim.world.load_world`): its
        ground, terrain, objects and its one robot. Its controller:
        ``wb_sim.world.controller_loop(sim, load_world(path)[1])``."""
        from .world import load_world_robots, locate_robot_error
        robots = load_world_robots(path)
        try:
            return cls.from_robots([(info.name, params) for params, info in robots])
        except (ConfigError, ModelError) as e:  # a robot's: say where the file set it
            located = locate_robot_error(e, robots)
            if located is None:
                raise
            raise located from None

    @classmethod
    def from_robots(cls, robots, robot_cache: RobotCache | None = None) -> "Simulator":
        """Several robots in one physics (wb_sim.multirobot): ``robots``, a list of
        ``(name, parameters)`` (the dotted parameters of :meth:`from_params`), the first
        robot first; the world-wide parameters (rate, gravity, ground, terrain, contact,
        objects) are the first robot's and the others must agree. One robot: the same
        simulator as :meth:`from_params` (bit-identical)."""
        from .multirobot import check_first_config, check_part_config
        robots = [(name, dict(p)) for name, p in robots]
        if not robots:
            raise ConfigError("from_robots: give at least one robot (name, parameters)")
        names = [n for n, _ in robots]
        for i, n in enumerate(names):
            if not isinstance(n, str) or not n or "/" in n or " " in n:
                raise ConfigError(f"robots[{i}]: the name must be a non-empty name without '/' "
                                  f"or spaces, got {n!r}")
            if n in names[:i]:
                raise ConfigError(f"robots[{i}]: two robots named {n!r}: each robot of one "
                                  f"physics needs a name of its own (its joints are prefixed "
                                  f"'{n}/')")
        if len(robots) == 1:
            return cls(load_config(robots[0][1]), robots=robot_cache, fleet=(names[0], ()))

        def config_of(i, name, params):  # a bad value names the robot
            try:
                return load_config(params)
            except ConfigError as e:
                raise type(e)(f"robot '{name}' (robots[{i}]): {e}") from None

        config0 = config_of(0, *robots[0])
        others = []
        for i, (name, params) in enumerate(robots[1:], start=1):
            config = config_of(i, name, params)
            check_part_config(name, i, config, config0)
            others.append((name, config))
        check_first_config(config0)
        return cls(config0, robots=robot_cache, fleet=(names[0], tuple(others)))

    def _combine(self, fleet) -> tuple:
        """(the combined robot, every robot's contact surfaces) of the first robot and the
        others of ``fleet`` (wb_sim.multirobot); sets each other robot's initial
        coordinates (``_fleet_q0``)."""
        from .config import SurfaceConfig
        name0, others = fleet
        parts = [(name0, self.robot, _stepping_tree(self.robot))]
        surfaces = list(self.config.surfaces)
        q0s = []
        for name, cfg in others:
            r = self._robots.robot(robot_arguments(cfg)) if self._robots is not None else \
                RobotModel.from_urdf(**robot_arguments(cfg))
            parts.append((name, r, _stepping_tree(r)))
            try:  # its frames named as in its own model, checked there (the names it knows)
                for s in cfg.surfaces:
                    r.frame_id(s.frame, key=f"{s.name}.frame")
                if cfg.imu.frame:
                    r.frame_id(cfg.imu.frame, key="imu.frame")
            except ModelError as e:
                raise ConfigError(f"robot '{name}' (robots[{len(parts) - 1}]): {e}") from None
            surfaces += [SurfaceConfig({**dict(s), "name": f"{name}/{s.name}",
                                        "frame": f"{name}/{s.frame}"}) for s in cfg.surfaces]
            q = pin.neutral(r.model)
            if r.floating_base:
                q[:3] = cfg.initial.base_position
                q[3:7] = _rpy_quaternion(cfg.initial.base_rpy)
            positions = np.zeros(r.nj)
            for jn, x in zip(cfg.initial.joint_names, cfg.initial.joint_positions):
                if jn not in r.joint_names:
                    raise ModelError(
                        f"robot '{name}': parameter 'initial.joint_names': unknown joint "
                        f"'{jn}'{did_you_mean(jn, r.joint_names)}")
                positions[r.joint_names.index(jn)] = x
            r.set_joint_positions(q, positions)
            q0s.append(q)
        combined = combine(parts)
        self._fleet_q0 = tuple(q0s)
        by_part = {}
        for s in surfaces:
            head, sep, _ = s.name.partition("/")
            by_part.setdefault(head if sep else name0, []).append(s.name)
        parts = tuple(dataclasses.replace(p, surfaces=tuple(by_part.get(p.name, ())))
                      for p in combined.parts)
        object.__setattr__(combined, "parts", parts)
        return combined, tuple(surfaces)

    def _fleet_actuation(self, robot: CombinedRobot, fleet) -> tuple:
        """(the drives, the actuation) of several robots (wb_sim.multirobot): each robot's
        built alone from its own ``actuators.*`` and ``joints.*`` on its own model, then
        joined in the combined joint order (:func:`~wb_sim.actuators.combine_actuators`,
        :func:`~wb_sim.actuation.combine_actuation`); an error names the robot."""
        configs = [self.config] + [cfg for _, cfg in fleet[1]]
        drives, actuations = [], []
        for part, cfg in zip(robot.parts, configs):
            try:
                d = make_actuators(part.robot, cfg.actuators, self.dt)
                actuations.append(Actuation(part.robot, cfg.joints, self.dt,
                                            d.reflected_friction()))
            except (ConfigError, ModelError) as e:
                raise type(e)(f"robot '{part.name}' (robots[{part.index}]): {e}") from None
            drives.append(d)
        return (combine_actuators(robot, drives, [p.joints for p in robot.parts]),
                combine_actuation(actuations))

    def robot_part(self, name: str) -> RobotPart:
        """The robot ``name`` of :attr:`robots` (ConfigError naming the known ones)."""
        for p in self.robots:
            if p.name == name:
                return p
        raise unknown_robot(name, self.robots)

    def split_joints(self, x) -> list[np.ndarray]:
        """A joint vector (nj,: torques, positions) split per robot, :attr:`robots` order."""
        x = np.asarray(x)
        return [x[p.joints] for p in self.robots]

    def join_joints(self, parts) -> np.ndarray:
        """The joint vector (nj,) of per-robot vectors (:attr:`robots` order): what
        :meth:`step` takes."""
        parts = list(parts)
        if len(parts) != len(self.robots):
            raise CommandError(f"join_joints: {len(parts)} vectors for {len(self.robots)} "
                               f"robots ({', '.join(p.name for p in self.robots)})")
        return np.concatenate([_vector(x, f"robot '{p.name}'", p.nj) for x, p in
                               zip(parts, self.robots)])

    def robot_base_pose(self, name: str) -> pin.SE3:
        """The base placement of robot ``name`` in the world (a floating base's free
        joint; a fixed base's root link)."""
        p = self.robot_part(name)
        if p.floating_base:
            return pin.XYZQUATToSE3(self._s.q[p.q_slice][:7])
        return self.frame_pose(p.prefix + p.robot.root_link)  # fixed: its root link's

    def _initial_configuration(self) -> np.ndarray:
        """q0: the configured initial state, or the named pose initial.pose."""
        cfg = self.config.initial
        self.named_poses = {p.name: self._configuration(f"poses.{p.name}", p)
                            for p in self.config.poses}
        if cfg.pose:
            return self.named_poses[cfg.pose]
        return self._configuration("initial", cfg)

    def _configuration(self, prefix: str, pose) -> np.ndarray:
        """The configuration (read-only) of ``pose`` (initial.* or a named pose's
        fields: joint_names, joint_positions, base_position, base_rpy)."""
        robot = self.robot
        q = pin.neutral(self.model)
        if robot.floating_base:
            q[:3] = pose.base_position
            q[3:7] = _rpy_quaternion(pose.base_rpy)
        positions = np.zeros(robot.nj)
        for name, x in zip(pose.joint_names, pose.joint_positions):
            if name not in robot.joint_names:
                raise ModelError(
                    f"parameter '{prefix}.joint_names': unknown joint '{name}'"
                    f"{did_you_mean(name, robot.joint_names)}; the model's actuated joints "
                    f"are: {', '.join(robot.joint_names)}")
            positions[robot.joint_names.index(name)] = x
        for part, q_part in zip(self.robots[1:], self._fleet_q0):  # the others' own pose
            positions[part.joints] = part.robot.joint_positions(q_part)
        self.actuation.check_initial_positions(robot, positions, f"{prefix}.joint_positions")
        robot.set_joint_positions(q, positions)
        for part, q_part in zip(self.robots[1:], self._fleet_q0):  # the others' own
            q[part.q_slice] = q_part
        for obj, jid in zip(self.objects, self._object_joints):  # each at its initial pose
            i = self.model.idx_qs[jid]
            q[i:i + 3] = obj.position
            q[i + 3:i + 7] = obj.quaternion
        q.setflags(write=False)
        return q

    def _stepping_model(self) -> pin.Model:
        """The model the step integrates: the physical one with armature + h D
        (joint damping made implicit) and, for a floating base, MuJoCo's
        free-joint coordinates.

        pinocchio's free-flyer velocity is the body-frame twist, and
        ``pin.integrate`` then updates the base's linear velocity with
        ``-h w x v`` explicitly, which rotates it with an explicit Euler step
        and pumps energy into fast-spinning bases (a rolling ball gains ~25 %
        of its kinetic energy in 2 s). The stepping model's root is instead a
        translation joint followed by a spherical one (a composite joint): its
        velocity is the base origin's velocity in world axes and the angular
        velocity in base axes, so semi-implicit Euler gives ``p' = p + h v'``
        and ``R' = R exp(h w')``, as MuJoCo's free joint does. ``q`` has the
        same layout in both models; :attr:`v` converts the linear part back to
        pinocchio's convention.
        """
        robot = self.robot
        if isinstance(robot, CombinedRobot):
            model = pin.Model(robot.stepping)
            self._append_objects(model, stepping=True)
        elif robot.floating_base:
            root = pin.JointModelComposite(2)
            root.addJoint(pin.JointModelTranslation())
            root.addJoint(pin.JointModelSpherical())
            parsed = _STEPPING_ROOTS.get(robot)
            if parsed is None:  # parsed once per robot, copied per simulator
                if robot.mjcf_file is not None:
                    parsed = pin.buildModelAndConstraintsFromMJCF(str(robot.mjcf_file),
                                                                  root)[0]
                    robot.add_extra_frames(parsed)
                else:
                    parsed = pin.buildModelFromXML(robot.urdf_xml, root)
                _STEPPING_ROOTS[robot] = parsed
            model = pin.Model(parsed)
            self._append_objects(model, stepping=True)
            if (model.nq, model.nv, model.nframes) != (self.model.nq, self.model.nv,
                                                       self.model.nframes):
                raise ModelError("internal: the stepping model does not match the robot model")
        elif self.objects:  # the robot's (the fixed base's placement) and the objects' joints
            model = pin.Model(self._robot_only)
            self._append_objects(model, stepping=True)
        else:
            model = pin.Model(self.model)  # keeps the fixed base's placement
        model.gravity = self.model.gravity
        model.armature[:] = self.model.armature
        model.armature[robot.idx_v] = self.actuation.step_armature()
        return model

    def _minverse(self, q: np.ndarray) -> np.ndarray:
        """Symmetric M(q)^-1 of the stepping model. ``computeMinverse`` writes the
        upper triangle only; it also fills the stepping data's kinematics (oMi)
        and joint Jacobians (J) at ``q``."""
        return _symmetric(pin.computeMinverse(self._model_step, self._data_step, q))

    def _effective_inertias(self) -> None:
        Minv = pin.computeMinverse(self._model_step, self._data_step, self.q0)
        self.actuation.set_effective_inertia(1.0 / np.diag(Minv)[self.robot.idx_v])

    def _note_contact_resolution(self) -> None:
        """Add a note if the rate does not resolve the contact at the initial posture."""
        if self.contact_points.n:
            note = self.contact.resolution_note(self._delassus(), self._weight, self.dt)
            if note:
                self.notes = [n for n in self.notes if not n.startswith("contact:")] + [note]

    def _delassus(self) -> np.ndarray:
        """Delassus matrix ``G = J_c M^-1 J_c^T`` (3n, 3n) of all contact points at
        the initial configuration, ground coordinates (t1, t2, n per point), with
        the stepping model (armature and implicit damping included)."""
        model, data, pts = self._model_step, self._data_step, self.contact_points
        pin.computeJointJacobians(model, data, self.q0)
        pts.update(model, data, None)
        Jc = pts.jacobian_g()  # (3n, nv)
        G = Jc @ self._minverse(self.q0) @ Jc.T
        return 0.5 * (G + G.T)

    def set_contact_parameters(self, **values: float) -> None:
        """Change live contact parameters; the next step uses them.

        Keys are the contact model's live parameters, with or without the
        ``contact.`` prefix (``stiffness=5e4`` or ``**{"contact.stiffness": 5e4}``);
        the others keep their values. The whole set is validated before any
        of it is applied: on a :class:`ConfigError` nothing changes. Every
        finite value >= 0 is stable (the contact is integrated implicitly);
        :attr:`notes` says if the rate no longer resolves it.
        """
        # the model checks every value against its own declarations (type, finite, range)
        # before anything changes: the change is whole or not at all
        self.contact.set_parameters(**values)
        self._note_contact_resolution()
        self._wake()  # the sleeping islands rest on the old law

    def apply_external_wrench(self, link: str, force, torque=(0.0, 0.0, 0.0),
                              duration_s: float | None = None) -> None:
        """Push a link: apply ``force`` (N) and ``torque`` (N*m), both expressed in
        the link's frame, the torque about the link frame's origin, for
        ``duration_s`` (default one step) from the next step on.

        Pushes add up: each lasts ``round(duration_s / dt)`` steps (at least one)
        whatever else is applied. :meth:`reset` removes them. Raises
        :class:`ModelError` for an unknown link or frame, :class:`CommandError`
        for a non-finite value or a non-positive duration.
        """
        if self.objects and any(link == o.name for o in self.objects):  # a free object's frame
            fid = self.model.getFrameId(link, pin.FrameType.BODY)
        else:
            fid = self.robot.frame_id(link)
        try:
            wrench = np.concatenate([np.asarray(_real(force, "force"), dtype=float).reshape(3),
                                     np.asarray(_real(torque, "torque"), dtype=float).reshape(3)])
        except (TypeError, ValueError) as e:
            raise CommandError(f"external wrench on '{link}': force and torque must be "
                               f"3-vectors: {e}") from None
        if not np.isfinite(wrench).all():
            raise CommandError(f"external wrench on '{link}': non-finite value {wrench.tolist()}")
        try:
            duration = self.dt if duration_s is None else float(_real(duration_s, "duration_s"))
        except (TypeError, ValueError):
            raise CommandError(f"external wrench on '{link}': duration_s must be a number of "
                               f"seconds > 0, got {duration_s!r}") from None
        if not (math.isfinite(duration) and duration > 0):
            raise CommandError(f"external wrench on '{link}': duration must be > 0 s, "
                               f"got {duration_s!r}")
        wrench.setflags(write=False)
        self._s.pushes += ((fid, wrench, max(1, round(duration / self.dt))),)
        if self._s.sleep and fid in self._frame_object:  # a pushed object's island wakes
            self._wake([self._frame_object[fid]])

    @property
    def external_wrenches(self) -> list[tuple[str, np.ndarray, float]]:
        """Pushes still to come: (frame, wrench [fx, fy, fz, tx, ty, tz] in the
        frame, N and N*m, remaining duration in s)."""
        return [(self.model.frames[f].name, w.copy(), n * self.dt) for f, w, n in self._s.pushes]

    # ------------------------------------------------------------------ stepping

    def reset(self, pose: str | None = None) -> None:
        """Back to the configured initial state (t = 0, at rest), or to the named
        pose ``pose`` (parameter ``poses``; :attr:`named_poses`) at rest."""
        if pose is None:
            q = self.q0
        else:
            if not isinstance(pose, str) or pose not in self.named_poses:
                raise CommandError(f"reset: no named pose {pose!r}; the configuration has: "
                                   f"{', '.join(self.named_poses) or 'none (parameter poses)'}")
            q = self.named_poses[pose]
        before = self.get_state() if pose is not None else None
        self._set_payloads(self._start_payloads)
        self.contact.set_sleeping(None)
        v = np.zeros(self.model.nv)
        for obj, jid in zip(self.objects, self._object_joints):  # their initial twists
            i = self.model.idx_vs[jid]
            v[i:i + 3] = obj.linear_velocity  # world axes (the stepping coordinates)
            v[i + 3:i + 6] = pin.Quaternion(np.array(obj.quaternion)).matrix().T @ \
                np.array(obj.angular_velocity)
        v = _frozen(v)
        u = self.contact.initial_state()
        tau = _frozen(np.zeros(self.nj))
        # the acceleration of the initial state under zero torque, for the IMU: a trial
        # step whose deformation is dropped (the surfaces' here, the links' by the model)
        v1, _, force = self._dynamics(q, v, u, tau)
        if self.loop_closures is not None:
            self._closure_impulse = self.loop_closures.impulse
        too_deep = self._too_deep() if pose is not None else None
        if too_deep:
            self.set_state(before)
            raise CommandError(f"reset: named pose {pose!r} {too_deep}; the state is untouched: "
                               f"raise parameter 'poses.{pose}.base_position'")
        if self.imu_sensor is not None:
            self.imu_sensor.reset()
        for imu in self.robot_imus.values():
            imu.reset()
        if self.ft_sensors is not None:
            self.ft_sensors.reset()
        for ft in self.robot_ft_sensors.values():
            ft.reset()
        self.contact.clear_deformation()
        touch = () if self.contact_sensors is None else \
            self.contact_sensors.initial(self._normal_forces(force))
        self._s = Record(k=0, q=q, v=v, u=u, q_prev=q, v_prev=v, u_prev=u,
                         a=(v1 - v) * self._inv_dt, force=force, tau_applied=tau,
                         payloads=self._start_payloads, touch=touch,
                         actuator=self.actuators.initial_state(), sleep=self._awake)
        self._v_public = v
        if self._sensor_delay:  # the readings of the last n + 1 steps, the oldest first
            self._s.sensed = (self._readings(),) * (self._sensor_delay + 1)

    @property
    def t(self) -> float:
        """Simulated time, s."""
        return self._s.k * self.dt

    @property
    def q(self) -> np.ndarray:
        """Current configuration, pinocchio layout (read-only array, no copy)."""
        return self._s.q

    @property
    def v(self) -> np.ndarray:
        """Current generalized velocity, pinocchio layout (read-only array): for a
        floating base ``[base linear velocity, base angular velocity, joint
        velocities]``, the base twist in base axes."""
        v = self._v_public
        if v is None:  # converted from the stepping coordinates once per step
            v = self._v_public = self._public_velocity(self._s.q, self._s.v)
            v.setflags(write=False)
        return v

    @property
    def joint_positions(self) -> np.ndarray:
        """Current actuated joint positions, rad or m, :attr:`joint_names` order
        (read-only)."""
        if self._contiguous:
            return self._s.q[self._jq]
        out = self.robot.joint_positions(self._s.q)
        out.setflags(write=False)
        return out

    @property
    def joint_velocities(self) -> np.ndarray:
        """Current actuated joint velocities, rad/s or m/s, :attr:`joint_names`
        order (read-only)."""
        return self._s.v[self._jv] if self._contiguous else self._s.v[self.robot.idx_v]

    @property
    def point_forces(self) -> np.ndarray:
        """(n, 3) the contact surfaces' point forces of the last step, ground
        coordinates (t1, t2, n), N (read-only, no copy)."""
        return self._s.force

    @property
    def loop_closure_wrenches(self) -> np.ndarray:
        """(n, 6) per loop closure (``loop_closures.*``, in order) the wrench [force,
        torque] the closure exerted on frame_a during the last step, at frame_a's origin,
        world axes, N and N*m (frame_b's anchor takes the opposite); (0, 6) without
        closures. The joint limits' and the contacts' share (every row of the contact
        solve: surfaces, links' collision, self-contacts) is accounted for."""
        lc = self.loop_closures
        if lc is None:
            return np.zeros((0, 6))
        lc.impulse = self._closure_impulse
        return lc.wrenches(self.dt)

    def loop_closure_errors(self, q=None) -> np.ndarray:
        """Per closure its position error |p_a - p_anchor| (m) at ``q`` (default: now)."""
        lc = self.loop_closures
        if lc is None:
            return np.zeros(0)
        q = self._s.q if q is None else q
        e = lc.errors(self._model_step, new_data(self._model_step), q)
        out, r0 = [], 0
        for k in lc.rows:
            out.append(float(np.linalg.norm(e[r0:r0 + 3])))
            r0 += k
        return np.array(out)

    def _public_velocity(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Stepping-model velocity (base linear velocity in world axes) ->
        pinocchio's free-flyer velocity (in base axes); a new array."""
        out = v.copy()
        into = self._rotate_into  # the compiled rotate_inverse: the same sums, bit for bit
        for iq, iv in self._free_roots:  # R^T v_world
            if into is None:
                out[iv:iv + 3] = rotate_inverse(q[iq + 3:iq + 7], v[iv:iv + 3])
            else:
                into(q, iq, out, iv)
        return out

    def _stepping_velocity(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`_public_velocity`; a new array."""
        out = np.array(v, dtype=float)
        for iq, iv in self._free_roots:
            out[iv:iv + 3] = pin.Quaternion(q[iq + 3:iq + 7]).matrix() @ v[iv:iv + 3]
        return out

    @property
    def step_count(self) -> int:
        """Steps taken since the last reset."""
        return self._s.k

    def _bind_limit_kernel(self) -> None:
        """The joint limits' compiled kernel (wb_sim/_compiled.c: limits_*), where it applies:
        compiled path, limits on, the joints' coordinates contiguous, no loop closures (their
        limits act with the closed chain's inertia, :meth:`_closed_dynamics`, in Python).
        ``self._limit_plan`` is None where the reference (Actuation.limit_violations and
        .limit_impulses) runs."""
        self._limit_plan = None
        act, k = self.actuation, compiled.kernels()
        if k is None or not act.limits_enabled or not self._contiguous \
                or self.loop_closures is not None:
            return
        tau, zeta = act.limit_constants()
        self._limit_plan = k.limits_bind(act.lower, act.upper, tau, zeta,
                                         np.asarray(self.robot.idx_v, dtype=np.int64))
        self._limits_find, self._limits_apply = k.limits_find, k.limits_apply

    def _apply_limits(self, limits, q, Minv_upper, v_free) -> None:
        """``v_free += M^-1 p`` in place, ``p`` the impulses of the joint limits ``limits``
        (:meth:`_generalized_torques`' second value: the compiled kernel's plan, which holds
        the violations, or the reference's (indices, distances))."""
        act = self.actuation
        if limits is self._limit_plan:
            if not self._limits_apply(limits, Minv_upper, v_free, self.dt):
                return
            # the kernel declined (more joints at a limit than it takes, or a singular
            # system): the reference, on the same violations
            limits = act.limit_violations(q[self._jq])
        idx, d = limits
        cols = self.robot.idx_v[idx]
        block = _symmetric_block(Minv_upper, cols)
        impulse = np.zeros(len(v_free))
        impulse[cols] = act.limit_impulses(d, v_free[cols], block, self.dt, idx)
        v_free += upper_sym_mv(Minv_upper, impulse)

    def _joint_qv(self, q, v):
        if self._contiguous:
            return q[self._jq], v[self._jv]
        return self.robot.joint_positions(q), v[self.robot.idx_v]

    def _generalized_torques(self, q, v, tau_joints):
        """(tau, limits): the joint torques plus the passive ones (damping, friction) in the
        step's generalized-force buffer (its base rows stay zero), and the joint-limit
        violations (None without limits); both dynamics paths start here."""
        act = self.actuation
        if act.has_passive or act.limits_enabled:
            qj, vj = self._joint_qv(q, v)
            if act.has_passive:
                tau_joints = tau_joints + act.passive_torques(qj, vj)
            plan = self._limit_plan
            if plan is None:
                limits = act.limit_violations(qj)
            else:  # the kernel keeps the violations for _apply_limits
                limits = plan if self._limits_find(plan, qj) else None
        else:
            limits = None
        tau = self._tau_gen
        if self._contiguous:
            tau[self._jv] = tau_joints
        else:
            tau[self.robot.idx_v] = tau_joints
        return tau, limits

    def _dynamics(self, q, v, u, tau_joints, pushes=()):
        """End-of-step velocity (stepping coordinates), next contact state and contact
        forces from (q, v) and the surfaces' deformation ``u``, with the external
        wrenches ``pushes`` ((frame id, wrench) pairs); see the module docstring for
        the sequence."""
        model, data, pts = self._model_step, self._data_step, self.contact_points
        tau, limits = self._generalized_torques(q, v, tau_joints)
        h = self._dt0
        if pushes:
            pin.computeJointJacobians(model, data, q)
            tau = tau.copy()  # the buffer's base rows stay zero for the next step
            self._add_pushes(tau, pushes)
        # ABA (WORLD convention) also leaves the kinematics and the joint Jacobians at q in
        # data, and the factorization computeMinverse(model, data) reuses: M^-1 for the
        # limits, the contact solve and the gyroscopic step costs 4 us more, not a second pass
        v_free = pin.aba(model, data, q, v, tau, pin.Convention.WORLD) * h
        v_free += v
        gyro = self._gyroscopic
        closures = self.loop_closures
        if gyro is None and self._no_points and limits is None and closures is None:
            return v_free, u, self._no_forces
        Minv_upper = pin.computeMinverse(model, data)  # the upper triangle only
        if closures is not None:
            # the closures' rows eliminated first: the limits and the contacts see M_c^-1,
            # so their impulses keep the loops closed (J M_c^-1 = 0), and the closures'
            # impulse answers for theirs (impulse_after)
            Minv_upper, v_free = closures.eliminate(data, Minv_upper, q, v, v_free, self.dt)
            return self._closed_dynamics(q, v, u, v_free, Minv_upper, limits)
        if limits is not None:
            self._apply_limits(limits, q, Minv_upper, v_free)
        if self._no_points:
            v_next, u_next, force = v_free, u, self._no_forces
        else:
            pts.update(model, data, None)
            v_next, force, u_next = self.contact.solve(Minv_upper, v_free, u, self.dt)
        if gyro is not None:
            # the base's velocity-product terms implicit on the whole increment, the limit
            # and contact impulses included (as MuJoCo's implicit integrators do); the
            # impulses themselves were solved with M^-1 (symmetric Delassus matrices)
            v_next = gyro.correct(v[3:6], Minv_upper, v_next)
        return v_next, u_next, force

    def _closed_dynamics(self, q, v, u, v_free, Minv_c, limits):
        """The rest of :meth:`_dynamics` with loop closures, after their elimination:
        ``v_free`` keeps the loops and ``Minv_c`` (symmetric) is M_c^-1. The limits'
        spring-dampers act with the closed chain's inertia (a joint the loops lock, whose
        M_c^-1 diagonal is zero, takes no limit impulse), then the contacts; the closures'
        impulse is that of the whole step (its limit and contact impulses included)."""
        model, data, act, closures = self._model_step, self._data_step, self.actuation, \
            self.loop_closures
        after = None  # the generalized impulses besides the closures', N*s
        if limits is not None:
            idx, d = limits
            cols = self.robot.idx_v[idx]
            block = Minv_c[np.ix_(cols, cols)]
            diag = np.diag(block)
            free = diag > 1e-12 * max(float(np.abs(np.diag(Minv_c)).max()), 1e-300)
            if free.any():
                if not free.all():
                    cols, d, block = cols[free], d[free], block[np.ix_(free, free)]
                    idx = idx[free]
                after = np.zeros(model.nv)
                after[cols] = act.limit_impulses(d, v_free[cols], block, self.dt, idx)
                v_free = v_free + Minv_c @ after
        if self._no_points:
            v_next, u_next, force = v_free, u, self._no_forces
        else:
            self.contact_points.update(model, data, None)
            v_next, force, u_next = self.contact.solve(Minv_c, v_free, u, self.dt)
            contact = self.contact.generalized_impulse()
            if contact is not None:
                after = contact if after is None else after + contact
        closures.impulse_after(after)
        if self._gyroscopic is not None:
            v_next = self._gyroscopic.correct(v[3:6], Minv_c, v_next)
        return v_next, u_next, force

    def _add_pushes(self, tau: np.ndarray, pushes) -> None:
        """tau += J^T w for each push (the frame Jacobian in the frame's axes), with
        the joint Jacobians of the current configuration in the stepping data."""
        for fid, wrench in pushes:
            tau += pin.getFrameJacobian(self._model_step, self._data_step, fid,
                                        pin.LOCAL).T @ wrench

    def step(self, tau) -> None:
        """Advance one step of ``dt`` with joint torques ``tau`` (N*m or N, in
        :attr:`joint_names` order), held constant over the step.

        Raises :class:`CommandError` (state untouched) for a wrong length or a
        non-finite value, :class:`DivergenceError` (state untouched) if the step
        would leave the domain of validity.
        """
        s = self._s
        tau = self._checked_torques(tau)
        acting, commands = self._command_pipe(s, tau)
        if len(self._passive):  # a closed chain's passive joints take no torque
            acting = acting.copy()
            acting[self._passive] = 0.0
        applied = self.actuation.saturate(acting)
        drive = s.actuator
        if self._drives is not None:  # the drives' torque loop, envelope and heat
            applied, drive = self._drives.drive(drive, applied, self._joint_qv(s.q, s.v)[1])
        pushes = tuple((f, w) for f, w, _ in s.pushes) if s.pushes else ()
        q_next, v_next, u_next, force, sleep = self._advance(s, applied, pushes)
        if self.loop_closures is not None:
            self._closure_impulse = self.loop_closures.impulse
        touch = () if self.contact_sensors is None else \
            self.contact_sensors.next(s.touch, self._normal_forces(force))
        self._s = Record(s.k + 1, q_next, v_next, u_next, s.q, s.v, s.u, None, force, applied,
                         _pushes_left(s.pushes) if pushes else (), pushes, commands, s.sensed,
                         s.payloads, touch, drive, sleep)
        self._v_public = None
        self._sense()

    def _checked_torques(self, tau) -> np.ndarray:
        """``tau`` as a finite float vector of nj, or CommandError."""
        try:
            if tau.__class__ is not np.ndarray or tau.dtype.kind != "f":
                tau = _real(tau, "torques")  # no silent loss of an imaginary part
            tau = np.asarray(tau, dtype=float)
        except (TypeError, ValueError) as e:
            raise CommandError(f"torques must be a vector of {self.nj} numbers (real): {e}") from None
        if tau.shape != self._tau_shape:
            raise CommandError(f"torques must have shape ({self.nj},) in joint_names order, "
                               f"got shape {tau.shape}")
        if not math.isfinite(tau.dot(tau)):  # cheaper than isfinite().all(); catches inf, nan
            bad = [self.joint_names[i] for i in np.flatnonzero(~np.isfinite(tau))]
            raise CommandError(f"non-finite torque for joint(s) {', '.join(bad)}" if bad else
                               "torques too large (their squared norm overflows)")
        return tau

    def _command_pipe(self, s: Record, tau: np.ndarray) -> tuple[np.ndarray, tuple]:
        """(the torques acting this step, the commands still in the pipe):
        ``joints.command_delay_steps`` d > 0 lets the torques given now act d steps
        later (the first fill the pipe)."""
        delay = self._command_delay
        if not delay:
            return tau, ()
        tau = tau.copy()
        pending = s.commands or (tau,) * delay
        return pending[0], pending[1:] + (tau,)

    def _advance(self, s: Record, applied: np.ndarray, pushes: tuple) -> tuple:
        """(q', v', u', surface forces) of one step from the record ``s``, read-only; on
        DivergenceError the contact model is back where it was."""
        saved = self.contact.snapshot()
        sleep = s.sleep
        try:
            if sleep:
                labels = sleep[0]
                if pushes:  # a push on a sleeping object wakes its island
                    labels = self._woken_by_pushes(labels, pushes)
                self.contact.set_sleeping(labels)
            out = None
            if sleep and self._reducible and (labels >= 0).all():
                out = self._asleep_dynamics(s.q, s.v, s.u, applied, pushes)
            v_next, u_next, force = out or self._dynamics(s.q, s.v, s.u, applied, pushes)
            if sleep:
                woken = self.contact.woken
                if woken is not None:
                    labels = np.where(woken, -1, labels)
                sleep = self._sleep_step(s, labels, v_next)
            if out is not None and (sleep[0] >= 0).all():  # the objects' poses held
                q_next = s.q.copy()
                nq, nv = self._nq_robot, self._nv_robot
                q_next[:nq] = pin.integrate(self._rmodel, s.q[:nq], v_next[:nv] * self._dt0)
            else:
                q_next = pin.integrate(self._model_step, s.q, v_next * self._dt0)
                if sleep:
                    self._hold_poses(sleep[0], s.q, q_next)
            # q_next = integrate(q, h v_next) is finite whenever q and v_next are
            if not (v_next.dot(v_next) < _MAX_SPEED2  # also catches nan
                    and (self._no_points or self.contact.max_depth <= self._max_penetration)):
                self._raise_divergence(v_next)
        except DivergenceError:
            self._restore_readings(saved)  # readings stay those of the last valid step
            raise
        q_next.setflags(write=False)
        v_next.setflags(write=False)
        applied.setflags(write=False)
        return q_next, v_next, u_next, force, sleep

    def _sense(self) -> None:
        """After a step: the IMU's next noise, and the readings a delayed sensor hands out
        later."""
        if self.imu_sensor is not None and self.imu_sensor.noisy:
            self.imu_sensor.draw_noise()
        for imu in self.robot_imus.values():
            if imu.noisy:
                imu.draw_noise()
        if self.ft_sensors is not None and self.ft_sensors.noisy:
            self.ft_sensors.draw_noise()
        for ft in self.robot_ft_sensors.values():
            if ft.noisy:
                ft.draw_noise()
        if self._sensor_delay:
            self._s.sensed = self._s.sensed[1:] + (self._readings(),)

    def _readings(self) -> tuple:
        """(state, IMU reading or None, contact wrench array, collision wrench array) now:
        what a delayed sensor hands out ``sensors.delay_steps`` steps later."""
        return (self.state, None if self.imu_sensor is None else self.imu(),
                self.contact_wrench_array(), self.collision_wrench_array())

    @property
    def sensed_state(self) -> State:
        """The state as the sensors report it: that of ``sensors.delay_steps`` steps
        ago (the initial state until then); :attr:`state` when there is no delay."""
        return self._s.sensed[0][0] if self._sensor_delay else self.state

    def sensed_imu(self) -> ImuReading:
        """The IMU reading of ``sensors.delay_steps`` steps ago (see :attr:`sensed_state`)."""
        if self.imu_sensor is None:
            raise ModelError("no IMU configured: set parameter 'imu.frame'")
        return self._s.sensed[0][1] if self._sensor_delay else self.imu()

    def sensed_contact_wrench_array(self) -> np.ndarray:
        """:meth:`contact_wrench_array` of ``sensors.delay_steps`` steps ago."""
        return self._s.sensed[0][2].copy() if self._sensor_delay else self.contact_wrench_array()

    def sensed_collision_wrench_array(self) -> np.ndarray:
        """:meth:`collision_wrench_array` of ``sensors.delay_steps`` steps ago."""
        if self._sensor_delay:
            return self._s.sensed[0][3].copy()
        return self.collision_wrench_array()

    def _raise_divergence(self, v_next: np.ndarray) -> None:
        speed2 = v_next @ v_next
        if not speed2 < _MAX_SPEED2:
            raise DivergenceError(
                f"the state became non-finite or absurd (|v| = {math.sqrt(speed2):.3g} > "
                f"{MAX_SPEED:g}) at t = {self.t + self.dt:.6f} s; the last valid state is kept "
                f"(check contact stiffness, gains and time step)")
        if not self._no_points and self.contact.max_depth > self._max_penetration:
            # the deepest may be a surface's point, a link's collision point or a self-contact
            what, deepest = self.contact.deepest()
            raise DivergenceError(
                f"{what} penetrates {deepest * 1e3:.1f} mm into "
                f"the ground at t = {self.t:.6f} s (contact.max_penetration = "
                f"{self.contact.max_penetration * 1e3:.1f} mm); the last valid state is kept")
        raise DivergenceError(f"the contact depths became non-finite at t = {self.t:.6f} s; "
                              f"the last valid state is kept")

    # ------------------------------------------------------------------ outputs

    @property
    def state(self) -> State:
        """The current state (a read-only snapshot)."""
        s = self._s
        base = pin.XYZQUATToSE3(s.q[:7]) if self.robot.floating_base else self._base_placement
        applied = s.tau_applied.copy()
        u = s.u.T.copy()
        applied.setflags(write=False)
        u.setflags(write=False)
        return State(t=self.t, q=s.q, v=self.v, applied_torques=applied,
                     contact_deformation=u, robot=self.robot, base_pose=base)

    @property
    def actuator_readings(self) -> ActuatorReading:
        """What the drives report now (``actuators.model``): per joint the last step's
        winding current (A) and terminal voltage (V), the winding temperature (C); NaN
        for the joints without a motor model."""
        return self.actuators.readings(self._s.actuator)

    @property
    def applied_torques(self) -> np.ndarray:
        """Torques applied at the last step (after saturation), joint order; read-only, no copy."""
        return self._s.tau_applied

    def imu(self) -> ImuReading:
        """The IMU reading now; see :mod:`wb_sim.sensors` for conventions."""
        if self.imu_sensor is None:
            raise ModelError("no IMU configured: set parameter 'imu.frame'")
        s = self._s
        return self.imu_sensor.read(s.q, s.v, s.q_prev, s.v_prev, self._acceleration())

    def robot_imu(self, name: str) -> ImuReading:
        """The IMU reading now of robot ``name`` (several robots in one physics; the first
        robot's is :meth:`imu`): its own ``imu.*`` (frame, noise, bias), read as the first
        robot's (no sensors.delay_steps for it yet)."""
        part = self.robot_part(name)
        if part.index == 0:
            return self.imu()
        imu = self.robot_imus.get(name)
        if imu is None:
            raise ModelError(f"robot '{name}' has no IMU configured: set its parameter "
                             f"'imu.frame'")
        s = self._s
        return imu.read(s.q, s.v, s.q_prev, s.v_prev, self._acceleration())

    def _acceleration(self) -> np.ndarray:
        """The last step's mean acceleration (v' - v) / dt (stepping coordinates);
        at reset, that of the first step under zero torque."""
        s = self._s
        if s.a is None:  # computed once, when first read
            s.a = (s.v - s.v_prev) * self._inv_dt
        return s.a

    def _normal_forces(self, force: np.ndarray) -> np.ndarray:
        """Per contact sensor: the sum of its contacts' normal forces, N (the surfaces' from
        the step's point forces ``force``, the links' from the contact model's last solve)."""
        S = len(self.surface_names)
        surfaces = np.bincount(self._surface_of_point, weights=force[:, 2], minlength=S) \
            if len(force) else np.zeros(S)
        if self.collision is None:
            return surfaces
        return np.concatenate([surfaces, self.contact.link_normal_forces()])

    @property
    def contact_states(self) -> dict[str, ContactState]:
        """Per contact sensor (each contact surface, then with ``collision.enabled`` each link
        meeting the ground): its normal force (N) at the last step, raw contact (above
        ``contact_sensors.threshold``) and debounced contact (``contact_sensors.t_on`` /
        ``t_off``). Empty with ``contact_sensors.active: false``."""
        if self.contact_sensors is None:
            return {}
        if self._contact_rows is not None:  # several robots: the first robot's own
            return self.robot_contact_states(self.robots[0].name)
        return self.contact_sensors.readings(self._s.touch)

    def contact_sensor_array(self) -> np.ndarray:
        """The contact sensors' readings as one (n, 3) array, rows [normal force (N), raw
        (0/1), debounced (0/1)], in ``contact_sensors.names`` order (a new array; see
        :attr:`contact_states`); (0, 3) with ``contact_sensors.active: false``."""
        if self.contact_sensors is None:
            return np.zeros((0, 3))
        if self._contact_rows is not None:  # several robots: the first robot's own
            return self.robot_contact_sensor_array(self.robots[0].name)
        raw, debounced, _, normal = self._s.touch
        return np.column_stack([normal, raw, debounced]).astype(float)

    def _fleet_contact_sensors(self, configs, links: tuple[str, ...]) -> dict[str, np.ndarray]:
        """Several robots: each contact sensor takes its robot's ``contact_sensors.*``
        (threshold, t_on, t_off); returns each robot's rows (robots whose
        ``contact_sensors.active`` is true)."""
        robot_of = {s: p.index for p in self.robots for s in p.surfaces}
        owner = np.array([robot_of.get(s, 0) for s in self.surface_names]
                         + [self.robot.link_robot.get(n, 0) for n in links], dtype=int)
        self.contact_sensors.per_sensor([configs[k].contact_sensors for k in owner], self.dt)
        return {p.name: np.flatnonzero(owner == p.index) for p in self.robots
                if configs[p.index].contact_sensors.active}

    def robot_contact_states(self, name: str) -> dict[str, ContactState]:
        """:attr:`contact_states` of robot ``name`` (several robots in one physics): its own
        contact surfaces, then with ``collision.enabled`` its links meeting the ground, named
        as in its own configuration (unprefixed), read with its own ``contact_sensors.*``.
        Empty when its ``contact_sensors.active`` is false."""
        part = self.robot_part(name)
        if self._contact_rows is None:  # one robot
            return self.contact_states
        rows = self._contact_rows.get(name)
        if rows is None:
            return {}
        return self.contact_sensors.readings(self._s.touch, rows, part.prefix)

    def robot_contact_sensor_array(self, name: str) -> np.ndarray:
        """:meth:`contact_sensor_array` of robot ``name``: its rows, in
        :meth:`robot_contact_states` order (a new array); (0, 3) when its
        ``contact_sensors.active`` is false."""
        self.robot_part(name)
        if self._contact_rows is None:  # one robot
            return self.contact_sensor_array()
        rows = self._contact_rows.get(name)
        if rows is None:
            return np.zeros((0, 3))
        raw, debounced, _, normal = self._s.touch
        return np.column_stack([normal[rows], raw[rows], debounced[rows]]).astype(float)

    def _build_ft_sensors(self) -> FTSensors | None:
        """The sensors of ft_sensors.* and, with ft_sensors.from_urdf, the URDF's."""
        cfg = self.config.ft_sensors
        specs = [FTSpec(name, cfg.joints[i], cfg.frames[i] if cfg.frames else "child",
                        cfg.directions[i] if cfg.directions else "parent_to_child")
                 for i, name in enumerate(cfg.names)]
        if cfg.from_urdf:
            if self.robot not in _URDF_FT_SENSORS:  # read once per robot
                _URDF_FT_SENSORS[self.robot] = tuple(map(tuple, gazebo_ft_sensors(
                    self.robot.urdf_xml)))
            found, notes = _URDF_FT_SENSORS[self.robot]
            self.notes.extend(notes)
            for spec in found:
                if any(s.name == spec.name for s in specs):
                    raise ConfigError(f"parameter 'ft_sensors.names': '{spec.name}' is the name "
                                      f"of a force-torque sensor of the URDF too; rename it or "
                                      f"set ft_sensors.from_urdf: false")
                specs.append(spec)
        if not specs:
            return None
        return FTSensors(self._model_step, self.robot, specs, cfg)

    def _robot_ft_sensors(self, part: RobotPart, config) -> FTSensors | None:
        """Robot ``part``'s (k >= 1) force-torque sensors: its ``ft_sensors.*`` (and with
        ``ft_sensors.from_urdf`` its URDF's), joints named as in its own URDF, checked on its
        own model (ConfigError naming the robot and the key), cutting the combined model at
        its prefixed joints."""
        cfg = config.ft_sensors
        at = f"robot '{part.name}' (robots[{part.index}])"
        specs = [FTSpec(name, cfg.joints[i], cfg.frames[i] if cfg.frames else "child",
                        cfg.directions[i] if cfg.directions else "parent_to_child",
                        origin=f"{at}: parameter 'ft_sensors.joints'")
                 for i, name in enumerate(cfg.names)]
        if cfg.from_urdf:
            own = part.robot
            if own not in _URDF_FT_SENSORS:  # read once per robot
                _URDF_FT_SENSORS[own] = tuple(map(tuple, gazebo_ft_sensors(own.urdf_xml)))
            found, notes = _URDF_FT_SENSORS[own]
            self.notes.extend(f"{at}: {n}" for n in notes)
            for spec in found:
                if any(s.name == spec.name for s in specs):
                    raise ConfigError(f"{at}: parameter 'ft_sensors.names': '{spec.name}' is "
                                      f"the name of a force-torque sensor of its URDF too; "
                                      f"rename it or set its ft_sensors.from_urdf: false")
                specs.append(dataclasses.replace(spec, origin=f"{at}: {spec.origin}"))
        if not specs:
            return None
        try:
            check_ft_joints(part.robot.model, specs)
        except ModelError as e:
            raise ConfigError(str(e)) from None
        specs = [dataclasses.replace(s, joint=part.prefix + s.joint) for s in specs]
        return FTSensors(self._model_step, self.robot, specs, cfg)

    def _external_wrenches(self) -> tuple[np.ndarray, np.ndarray, tuple]:
        """The last step's external wrenches, for the force-torque sensors: (frames (k,),
        wrenches (k, 6) in world axes about the world origin: the contact forces of the
        surfaces, of the links against the ground and against each other; the pushes as
        ((frame, wrench in the frame), ...))."""
        frames, positions, forces = [], [], []
        pts = self.contact_points
        if pts.n:
            fid = self._surface_frame_ids()
            frames.append(fid[np.asarray(pts.surface_of_point, dtype=int)])
            positions.append(np.asarray(pts.position))
            forces.append(pts.world_forces(self._s.force))
        if self.collision is not None:
            r = self.contact.collision_points_state()
            frames.append(np.array([self._link_frame(n) for n in r.surface], dtype=int))
            positions.append(r.position)
            forces.append(r.force)
        if self.self_collision is not None:
            r = self.contact.self_contacts_state()
            for links, sign in ((r.link_a, 1.0), (r.link_b, -1.0)):
                frames.append(np.array([self._link_frame(n) for n in links], dtype=int))
                positions.append(r.position)
                forces.append(sign * r.force)
        if frames:
            f = np.concatenate(frames)
            p = np.concatenate([np.reshape(x, (-1, 3)) for x in positions])
            F = np.concatenate([np.reshape(x, (-1, 3)) for x in forces])
            W = np.hstack([F, np.cross(p, F)])
        else:
            f, W = np.zeros(0, dtype=int), np.zeros((0, 6))
        return f, W, self._s.pushes_applied

    def _surface_frame_ids(self) -> np.ndarray:
        ids = getattr(self, "_surface_fids", None)
        if ids is None:
            ids = self._surface_fids = np.array(
                [self.robot.frame_id(f) for f in self.contact_points.surface_frames], dtype=int)
        return ids

    def _link_frame(self, link: str) -> int:
        cache = self.__dict__.setdefault("_link_frames", {})
        if link not in cache:
            cache[link] = self.robot.frame_id(link)
        return cache[link]

    def ft_wrench_array(self) -> np.ndarray:
        """The force-torque sensors' readings as one (S, 6) array, rows [force (N), torque
        (N*m)], in :attr:`ft_sensors`' ``names`` order (a new array; see :attr:`ft_wrenches`)."""
        ft = self.ft_sensors
        if ft is None:
            return np.zeros((0, 6))
        return self._ft_read(ft)

    def _ft_read(self, ft: FTSensors) -> np.ndarray:
        """The readings of the force-torque sensors ``ft`` (the first robot's or another's)
        of the last step, with their noise and bias."""
        s = self._s
        frames, W, pushes = self._external_wrenches()
        payloads = [(self.robot.frame_id(p.link), p.spatial_inertia()) for p in s.payloads]
        true = ft.true_wrenches(s.q_prev, s.v_prev, self._acceleration(), frames, W, pushes,
                                payloads)
        return ft.read(true)

    @property
    def ft_wrenches(self) -> dict[str, WrenchReading]:
        """Per force-torque sensor (parameters ft_sensors.*, the URDF's Gazebo ones): the
        wrench its joint transmitted during the last step, with its noise and bias: force (N)
        and torque (N*m, about the frame's origin) in its frame ('child' or 'parent' side of
        the joint, or its 'sensor' pose), direction 'parent_to_child' (the parent side's
        wrench on the child side) or 'child_to_parent'; see :mod:`wb_sim.ft_sensors`.
        Empty without sensors."""
        if self.ft_sensors is None:
            return {}
        return self.ft_sensors.readings(self.ft_wrench_array())

    def robot_ft_wrench_array(self, name: str) -> np.ndarray:
        """:meth:`ft_wrench_array` of robot ``name`` (several robots in one physics; the
        first robot's is :meth:`ft_wrench_array`): its own ``ft_sensors.*`` (and its URDF's
        with ``ft_sensors.from_urdf``), in its sensors' order; (0, 6) without sensors."""
        part = self.robot_part(name)
        if part.index == 0:
            return self.ft_wrench_array()
        ft = self.robot_ft_sensors.get(name)
        if ft is None:
            return np.zeros((0, 6))
        return self._ft_read(ft)

    def robot_ft_wrenches(self, name: str) -> dict[str, WrenchReading]:
        """:attr:`ft_wrenches` of robot ``name``: by its sensors' names (as it declares
        them), each reading's joint and link the combined model's (prefixed ``<name>/``, as
        its IMU's frame); empty without sensors."""
        part = self.robot_part(name)
        if part.index == 0:
            return self.ft_wrenches
        ft = self.robot_ft_sensors.get(name)
        if ft is None:
            return {}
        return ft.readings(self._ft_read(ft))

    def contact_wrenches(self) -> dict[str, ContactWrench]:
        """Per surface: the ground's force (N) and torque (N*m) about the surface
        frame origin, expressed in the surface frame, from the last step."""
        pts = self.contact_points
        W = pts.surface_wrenches(self._s.force)
        return {name: ContactWrench(frame, w[:3], w[3:]) for name, frame, w in
                zip(pts.surface_names, pts.surface_frames, W)}

    def contact_wrench_array(self) -> np.ndarray:
        """The same wrenches as :meth:`contact_wrenches` as one (S, 6) array, rows
        ``[force (N), torque (N*m)]`` in :attr:`surface_names` order (a new array;
        cheaper when all that is wanted is the numbers)."""
        return self.contact_points.surface_wrenches(self._s.force)

    def contact_points_state(self) -> ContactPointsReading:
        """Per-point positions, forces, depths, stick/slip states and ground normals of
        the last step."""
        pts = self.contact_points
        normal = pts.bases[:, :, 2].copy() if pts.bases is not None else \
            np.tile(pts.basis[:, 2], (pts.n, 1))
        return ContactPointsReading(
            surface=tuple(pts.surface_names[k] for k in pts.surface_of_point),
            position=pts.position.copy(), force=pts.world_forces(self._s.force),
            depth=self.contact.depth.copy(),
            status=tuple(STATUS_NAMES[s] for s in self.contact.status), normal=normal)

    def centroidal_momentum(self, q=None, v=None) -> tuple[np.ndarray, np.ndarray]:
        """The centre of mass (3,), m, and the centroidal momentum (6,) at ``(q, v)``
        (default: now): linear (kg*m/s) and angular about the centre of mass (kg*m^2/s),
        world axes (pinocchio's computeCentroidalMomentum)."""
        q, v = self._qv(q, self.v if v is None else v)
        hg = pin.computeCentroidalMomentum(self.model, self._data, q, v)
        return self._data.com[0].copy(), np.concatenate([hg.linear, hg.angular])

    def collision_wrench(self) -> ContactWrench:
        """The ground's total force (N) and torque (N*m) on every link other than the
        contact surfaces (``collision.enabled``), from the last step, in world axes
        with the torque about the world origin (frame ``'world'``); zero while none
        touches or without collision."""
        w = self.collision_wrench_array()
        return ContactWrench("world", w[:3], w[3:])

    def collision_wrench_array(self) -> np.ndarray:
        """:meth:`collision_wrench` as a new (6,) array ``[force (N), torque (N*m)]``."""
        return self.contact.collision_wrench()

    def collision_points_state(self) -> ContactPointsReading:
        """The collision points within ``collision.margin`` of the terrain at the last
        step (none without collision): link name (in ``surface``), world contact point,
        world force, depth and stick/slip state, as :meth:`contact_points_state`."""
        return self.contact.collision_points_state()

    def self_collision_contacts(self) -> SelfContactsReading:
        """The self-collision sphere pairs within ``collision.margin`` of touching at the
        last step (none without ``collision.self_collision``): the two links, the world
        contact point (the middle of the overlap), the world force on the first link (the
        second gets the opposite: the forces are internal, they sum to zero), the depth
        (overlap, m; negative: apart) and the stick/slip state."""
        return self.contact.self_contacts_state()

    # ------------------------------------------------------------------ dynamics queries

    def _qv(self, q, v=None):
        q = self._s.q if q is None else _vector(q, "q", self.model.nq)
        if v is None:
            return q, None
        return q, _vector(v, "v", self.model.nv)

    def mass_matrix(self, q=None) -> np.ndarray:
        """Joint-space mass matrix M(q) (nv, nv), armature included (pinocchio conventions)."""
        q, _ = self._qv(q)
        M = pin.crba(self.model, self._data, q)
        return np.triu(M) + np.triu(M, 1).T

    def bias_forces(self, q=None, v=None) -> np.ndarray:
        """Coriolis, centrifugal and gravity forces h(q, v) (nv,): M a + h = tau."""
        q, v = self._qv(q, self.v if v is None else v)
        return pin.nonLinearEffects(self.model, self._data, q, v).copy()

    def generalized_gravity(self, q=None) -> np.ndarray:
        """Generalized gravity g(q) (nv,)."""
        q, _ = self._qv(q)
        return pin.computeGeneralizedGravity(self.model, self._data, q).copy()

    def gravity_torques(self, q=None) -> np.ndarray:
        """Joint rows of g(q) (nj,): the torques that hold the joints against gravity."""
        return self.generalized_gravity(q)[self.robot.idx_v]

    def frame_jacobian(self, frame: str, q=None) -> np.ndarray:
        """(6, nv) Jacobian of a frame: linear velocity of its origin and angular
        velocity, both in world axes (pinocchio LOCAL_WORLD_ALIGNED)."""
        q, _ = self._qv(q)
        fid = self.robot.frame_id(frame)
        return pin.computeFrameJacobian(self.model, self._data, q, fid, pin.LOCAL_WORLD_ALIGNED)

    def contact_jacobian(self, q=None) -> tuple[np.ndarray, np.ndarray]:
        """The contact surfaces' points at ``q`` (default: now), in :attr:`contact_points`
        order: their world positions (n, 3), m (a sphere's: its lowest point, the centre
        minus its radius along the ground plane's normal), and their Jacobian (3n, nv),
        rows (x, y, z) of point 0, then of point 1, ...: ``J @ v`` is the world-frame
        velocity of the body's material point there (for a sphere, not the rate of its
        lowest point, which rolls), ``v`` in pinocchio's convention (:attr:`v`); ``J.T @ f``
        the generalized force of point forces ``f`` (3n,), world axes.
        Built point by point from pinocchio's joint Jacobians (not the step's fast path)."""
        q, _ = self._qv(q)
        pts = self.contact_points
        model, data = self.model, self._data
        pin.computeJointJacobians(model, data, q)
        P, J = np.zeros((pts.n, 3)), np.zeros((3 * pts.n, model.nv))
        offset = self.ground.normal
        for k in range(pts.n):
            jid = int(pts.joint_ids[pts.slot[k]])
            oMi = data.oMi[jid]
            p = oMi.act(pts.r_local[k]) - pts.radius[k] * offset
            Jj = pin.getJointJacobian(model, data, jid, pin.LOCAL_WORLD_ALIGNED)
            P[k] = p
            J[3 * k:3 * k + 3] = Jj[:3] - pin.skew(p - oMi.translation) @ Jj[3:]
        return P, J

    def frame_pose(self, frame: str, q=None) -> pin.SE3:
        """World pose (world <- frame) of a frame."""
        q, _ = self._qv(q)
        fid = self.robot.frame_id(frame)
        pin.framesForwardKinematics(self.model, self._data, q)
        return pin.SE3(self._data.oMf[fid])

    def center_of_mass(self, q=None) -> np.ndarray:
        """World position of the centre of mass, m."""
        q, _ = self._qv(q)
        return pin.centerOfMass(self.model, self._data, q).copy()

    def forward_dynamics(self, tau, q=None, v=None) -> np.ndarray:
        """Generalized acceleration (nv,) at (q, v) under joint torques ``tau``: the
        mean acceleration of one step from there, ``(v' - v) / dt``, with the
        contact and limit impulses the step produces (the contact's deformation
        state taken as the current one); without contact and limits, ABA's
        acceleration (for a one-body floating base, with its velocity-product terms
        implicit: :mod:`wb_sim.gyroscopic`). Neither the state nor the contact readings
        change."""
        q, v = self._qv(q, self.v if v is None else v)
        tau = self.actuation.saturate(_vector(tau, "tau", self.nj, "joint torques in joint_names "
                                                                   "order"))
        saved = self.contact.snapshot()
        try:
            v_step = self._stepping_velocity(q, v)
            pushes = tuple((f, w) for f, w, _ in self._s.pushes)
            v_next, _, _ = self._dynamics(q, v_step, self._s.u, tau, pushes)
            a = (v_next - v_step) * self._inv_dt
            out = a.copy()
            for iq, iv in self._free_roots:  # d/dt (R^T v_world) = R^T a_world - w x v_base
                out[iv:iv + 3] = a[iv:iv + 3] @ pin.Quaternion(q[iq + 3:iq + 7]).matrix() \
                    - np.cross(v[iv + 3:iv + 6], v[iv:iv + 3])
            return out
        finally:
            self._restore_readings(saved)

    def linearize_step(self, tau=None, eps: float = LINEARIZATION_EPS
                       ) -> tuple[np.ndarray, np.ndarray]:
        """(A, B): the Jacobians of this simulator's own :meth:`step` at the current state,
        ``dx' = A dx + B dtau``, by central finite differences of the step itself (its
        contact solve, limits, drives, everything it does), the state restored exactly
        afterwards (:meth:`get_state` / :meth:`set_state`: bit-identical, the contact's
        warm starts and the noise generators included).

        ``x = (q, v)`` on the manifold: ``dx = (pin.difference(q_ref, q), v - v_ref)``
        (2 nv), ``v`` in pinocchio's convention (:attr:`v`: a floating base's linear and
        angular velocity in base axes); ``q`` is perturbed as ``pin.integrate(q, e_i eps)``,
        so A is (2 nv, 2 nv) and B (2 nv, nj), columns in :attr:`joint_names` order.
        ``tau``: the torques of the step linearised about (default: :attr:`applied_torques`,
        the last step's). ``eps`` (rad, m, rad/s, m/s, N*m): the perturbation of each
        coordinate; central differences make the truncation error O(eps^2) on smooth
        dynamics, the rounding error ~1e-16 |x| / eps (the default 1e-6 balances them
        near 1e-10 on the free pendulum of the tests). Where the step is not smooth (a
        contact that opens or closes, a torque at its saturation, a joint at its limit,
        stick turning to slip within +-eps) the columns are the mean of the two one-sided
        slopes. Held fixed: the contact's deformation state (compliant ``u``), the
        warm starts, the pushes still to act, the delayed commands (with
        ``joints.command_delay_steps`` > 0 the torques given now act later: B = 0). Costs
        2 (2 nv + nj) + 1 steps."""
        eps = float(eps)
        if not (math.isfinite(eps) and eps > 0.0):
            raise CommandError(f"linearize_step: eps must be a positive number, got {eps!r}")
        tau0 = np.array(self.applied_torques if tau is None else self._checked_torques(tau),
                        dtype=float)
        saved = self.get_state()
        model, nv, nj = self.model, self.model.nv, self.nj
        q0, v0 = np.array(self.q), np.array(self.v)

        def next_state(dq, dv, dtau):
            q = pin.integrate(model, q0, dq)
            record = copy_record(saved.record)
            record.q = _frozen(q)
            record.v = _frozen(self._stepping_velocity(q, v0 + dv))
            self.set_state(dataclasses.replace(saved, record=record))
            self.step(tau0 + dtau)
            return np.array(self.q), np.array(self.v)

        zq, zt = np.zeros(nv), np.zeros(nj)
        try:
            q_ref, v_ref = next_state(zq, zq, zt)

            def delta(qv):
                return np.concatenate([pin.difference(model, q_ref, qv[0]), qv[1] - v_ref])

            A = np.empty((2 * nv, 2 * nv))
            for i in range(2 * nv):
                e = np.zeros(2 * nv)
                e[i] = eps
                A[:, i] = (delta(next_state(e[:nv], e[nv:], zt))
                           - delta(next_state(-e[:nv], -e[nv:], zt))) / (2.0 * eps)
            B = np.empty((2 * nv, nj))
            for j in range(nj):
                e = np.zeros(nj)
                e[j] = eps
                B[:, j] = (delta(next_state(zq, zq, e))
                           - delta(next_state(zq, zq, -e))) / (2.0 * eps)
        finally:
            self.set_state(saved)
        return A, B

    def _restore_readings(self, saved: tuple) -> None:
        """After an evaluation that was not kept (a diverging step, a dynamics query):
        the contact model back to its snapshot, the points' kinematics back at the
        configuration the last step started from (where its readings were computed)."""
        self.contact.restore(saved)
        if self.contact_points.n:
            pin.computeJointJacobians(self._model_step, self._data_step, self._s.q_prev)
            self.contact_points.update(self._model_step, self._data_step, None)

    # ------------------------------------------------------------------ snapshots

    def get_state(self) -> SimState:
        """Everything that determines the future of this simulation, as a snapshot:
        the record (time, q and v, the contact's deformation, the pushes still to
        come, delayed commands and readings, the last step's readings) and the
        snapshots of the components with state of their own: the contact model (warm
        starts, the links' contacts) and the IMU (its noise generator). :meth:`set_state` with it continues bit-identically
        (the snapshot holds copies; it can be kept, restored many times, or restored
        after a reset)."""
        self._acceleration()  # the record's lazily computed field, filled in
        return SimState(record=copy_record(self._s),
                        components={name: copy.deepcopy(c.snapshot())
                                    for name, c in self._components.items()},
                        signature=self._signature(), dt=self.dt)

    def set_state(self, state: SimState) -> None:
        """Restore a snapshot of :meth:`get_state` (of this simulator, or of one built
        from the same configuration). Raises :class:`CommandError` for a snapshot of
        another model; the state is then untouched."""
        if not isinstance(state, SimState):
            raise CommandError(f"set_state takes a SimState from get_state(), got "
                               f"{type(state).__name__}")
        mine = self._signature()
        if state.signature != mine:
            theirs, ours = dict(state.signature), dict(mine)
            differ = [f"{name}: {theirs.get(name)!r} in the snapshot, {ours.get(name)!r} here"
                      for name in dict.fromkeys([*ours, *theirs])
                      if theirs.get(name) != ours.get(name)]
            raise CommandError("set_state: the snapshot is of another robot or configuration ("
                               + "; ".join(differ) + ")")
        self._s = copy_record(state.record)
        self._set_payloads(self._s.payloads)
        self._v_public = None
        for name, c in self._components.items():
            if name != "contact":
                c.restore(copy.deepcopy(state.components[name]))
        self._restore_readings(copy.deepcopy(state.components["contact"]))

    def set_base_state(self, position=None, quaternion=None, linear_velocity=None,
                       angular_velocity=None) -> None:
        """Move a floating base now: its world position (m), orientation quaternion
        (x, y, z, w; normalized here), world-frame linear velocity of its origin
        (m/s) and angular velocity (rad/s), each left as it is when None. Joints,
        time and the contact state (deformations, warm starts) stay; the readings
        are those of the new configuration at the next step. Raises
        :class:`CommandError` (state untouched) for a fixed base or a bad value
        (wrong length, non-finite, a zero quaternion), and for a state the next step
        would refuse: a speed above MAX_SPEED, a contact deeper than
        contact.max_penetration."""
        if not self.robot.floating_base:
            raise CommandError("set_base_state: the robot has a fixed base (floating_base: "
                               "false); it cannot be moved")
        s = self._s
        q, v = s.q.copy(), s.v.copy()
        if position is not None:
            q[:3] = _vector(position, "position", 3, "m, world frame")
        if quaternion is not None:
            quat = _vector(quaternion, "quaternion", 4, "x, y, z, w")
            big = float(np.max(np.abs(quat)))
            if big > 1.0:  # scaled first: the norm of a 1e200 quaternion overflows to inf
                quat = quat / big
            norm = float(np.linalg.norm(quat))
            if not norm > 1e-9:
                raise CommandError("set_base_state: the quaternion is zero (x, y, z, w)")
            q[3:7] = quat / norm
        R = pin.Quaternion(q[3:7]).matrix()
        if linear_velocity is not None:  # in world axes in the stepping coordinates (a turn
            v[:3] = _vector(linear_velocity, "linear_velocity", 3, "m/s, world frame")  # keeps it)
        if angular_velocity is not None:  # in base axes in the stepping coordinates
            v[3:6] = R.T @ _vector(angular_velocity, "angular_velocity", 3, "rad/s, world frame")
        elif quaternion is not None:  # keep the world-frame angular velocity
            v[3:6] = R.T @ (pin.Quaternion(s.q[3:7]).matrix() @ s.v[3:6])
        if not v @ v < _MAX_SPEED2:
            given = [f"|{name}| = {float(np.linalg.norm(x)):.3g} {unit}"
                     for name, x, unit in (("linear_velocity", linear_velocity, "m/s"),
                                           ("angular_velocity", angular_velocity, "rad/s"))
                     if x is not None]
            raise CommandError(
                f"set_base_state: {', '.join(given) or 'the velocity'} makes the speed "
                f"|v| = {math.sqrt(float(v @ v)):.3g} (base and joints, m/s and rad/s), above "
                f"{MAX_SPEED:g}, which the next step would refuse; the state is untouched")
        if position is not None or quaternion is not None:
            too_deep = self._trial(q, v, s.u)
            if too_deep:
                moved = " and ".join(f"{name} [{', '.join(f'{c:.6g}' for c in x)}]" for name, x in
                                     (("position", q[:3] if position is not None else None),
                                      ("quaternion", q[3:7] if quaternion is not None else None))
                                     if x is not None)
                raise CommandError(f"set_base_state: {moved} {too_deep}; the state is "
                                   f"untouched: give a base position higher above the ground")
        self._set_qv(q, v)

    def _set_qv(self, q: np.ndarray, v: np.ndarray) -> None:
        """The state now with configuration ``q`` and velocity ``v`` (checked by the caller),
        at rest (no acceleration), the rest of the record as it is."""
        snap = self.get_state()
        record = copy_record(snap.record)
        record.q = record.q_prev = _frozen(q)
        record.v = record.v_prev = _frozen(v)
        record.a = _frozen(np.zeros_like(v))
        self.set_state(dataclasses.replace(snap, record=record))

    def _trial(self, q: np.ndarray, v: np.ndarray, u: np.ndarray) -> str | None:
        """:meth:`_too_deep` of the contact at (q, v) (a trial step, not kept: the contact
        and the readings are back where they were)."""
        saved = self.contact.snapshot()
        try:
            self._dynamics(q, v, u, np.zeros(self.nj))
            return self._too_deep()
        finally:
            self._restore_readings(saved)

    def _signature(self) -> tuple:
        """((label, value), ...): what a snapshot must fit to be restored here."""
        return (("nq", self.model.nq), ("nv", self.model.nv), ("dt", self.dt),
                *self.contact.signature(), ("IMU", self.imu_sensor is not None),
                ("force-torque sensors", () if self.ft_sensors is None else self.ft_sensors.names),
                ("contact sensors", None if self.contact_sensors is None else
                 self.contact_sensors.names),
                *((("the other robots' force-torque sensors",
                    tuple((n, ft.names) for n, ft in self.robot_ft_sensors.items())),)
                  if self.robot_ft_sensors else ()),
                ("command delay (joints.command_delay_steps)", self._command_delay),
                *self.actuators.signature(),
                ("sensor delay (sensors.delay_steps)", self._sensor_delay),
                *((("free objects (objects.*, spawn_object)",
                    tuple(o.name for o in self.objects)),) if self.objects else ()))

    @property
    def mass(self) -> float:
        """Mass moved by the joints, kg, the attached payloads included (see
        :attr:`RobotModel.mass`: links welded to a fixed base are left out)."""
        return float(sum(inertia.mass for inertia in
                         self.model.inertias[1:self._robot_njoints]))

    # ------------------------------------------------------------------ free objects

    def _append_objects(self, model: pin.Model, stepping: bool) -> list[int]:
        """The free objects appended to ``model`` (wb_sim.objects: why the design), their
        joints' ids (the same in the physical and the stepping model)."""
        return append_objects(model, self.objects, stepping) if self.objects else []

    def _object_problem(self, obj: FreeObject) -> str | None:
        """Why ``obj`` cannot be placed: its name taken by a frame of the robot, or its
        surface deeper than 2 mm below the ground plane or into the terrain (a box, a step,
        the heightfield); else None."""
        if self.robot.model.existFrame(obj.name):
            return (f"object name {obj.name!r} is a frame of the robot; give the object "
                    f"another name")
        n = self.ground.normal
        depth = obj.lowest(n) - (float(np.asarray(obj.position) @ n) - self.ground.height)
        if depth > INITIAL_PENETRATION_WARNING:  # the contact would throw it out
            return (f"object {obj.name!r} starts {depth * 1e3:.1f} mm under the ground (its "
                    f"centre {list(obj.position)}, its surface reaches {obj.lowest(n):.4g} m "
                    f"below it; at most {INITIAL_PENETRATION_WARNING * 1e3:g} mm is allowed): "
                    f"raise its position")
        depth, item = terrain_penetration(obj, self.terrain)
        if depth > INITIAL_PENETRATION_WARNING:
            n_boxes = len(self.config.terrain.boxes) // BOX_FIELDS
            if item == 0:
                what = "the heightfield (terrain.heightfield)"
            elif item - 1 < n_boxes:
                what = f"terrain box {item - 1} (terrain.boxes)"
            else:
                what = f"step {item - 1 - n_boxes} of the stairs (terrain.stairs)"
            return (f"object {obj.name!r} starts {depth * 1e3:.1f} mm inside {what} (its "
                    f"centre {list(obj.position)}; at most {INITIAL_PENETRATION_WARNING * 1e3:g}"
                    f" mm is allowed): place it on or above the terrain")
        return None

    def _check_objects(self) -> None:
        for obj in self.objects:
            problem = self._object_problem(obj)
            if problem:
                raise ConfigError(f"parameter 'objects.positions' ({obj.name}): {problem}")

    def _object_index(self, call: str, name) -> int:
        names = [o.name for o in self.objects]
        if name not in names:
            raise unknown_object(call, name, self.objects)
        return names.index(name)

    def object_pose(self, name: str) -> pin.SE3:
        """World pose (world <- object) of the free object ``name``: its centre and its
        axes. CommandError (with the closest names) for an unknown name."""
        i = self.model.idx_qs[self._object_joints[self._object_index("object_pose", name)]]
        q = self._s.q
        return pin.SE3(pin.Quaternion(q[i + 3:i + 7]).matrix(), q[i:i + 3].copy())

    def object_twist(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(linear velocity of its centre, angular velocity), both world axes, m/s and
        rad/s, of the free object ``name`` (CommandError for an unknown name)."""
        jid = self._object_joints[self._object_index("object_twist", name)]
        iq, iv = self.model.idx_qs[jid], self.model.idx_vs[jid]
        s = self._s
        R = pin.Quaternion(s.q[iq + 3:iq + 7]).matrix()
        return s.v[iv:iv + 3].copy(), R @ s.v[iv + 3:iv + 6]

    def object_poses(self) -> np.ndarray:
        """(n, 7) rows [x, y, z, qx, qy, qz, qw] of the free objects (:attr:`objects`
        order): each centre (m, world) and orientation quaternion as the state holds them
        (a copy; what TF publishes)."""
        q = self._s.q
        out = np.empty((len(self.objects), 7))
        for k, jid in enumerate(self._object_joints):
            i = self.model.idx_qs[jid]
            out[k] = q[i:i + 7]
        return out

    def set_object_state(self, name: str, position=None, quaternion=None,
                         linear_velocity=None, angular_velocity=None) -> None:
        """Move the free object ``name`` now: its centre (m, world), orientation
        quaternion (x, y, z, w; normalized here), linear velocity of its centre and
        angular velocity (world axes, m/s, rad/s), each left as it is when None (a new
        orientation keeps the world-frame angular velocity). The robot, the other
        objects, the time and the contact state stay, as in :meth:`set_base_state`.
        Raises :class:`CommandError` (state untouched) for an unknown name (with the
        closest), a bad value, a speed the next step would refuse, or a pose putting it
        (or anything it then touches) deeper than contact.max_penetration: "raise it"."""
        call = "set_object_state"
        jid = self._object_joints[self._object_index(call, name)]
        iq, iv = self.model.idx_qs[jid], self.model.idx_vs[jid]
        s = self._s
        q, v = s.q.copy(), s.v.copy()
        R_old = pin.Quaternion(s.q[iq + 3:iq + 7]).matrix()
        if position is not None:
            q[iq:iq + 3] = _vector(position, "position", 3, "m, world frame")
        if quaternion is not None:
            quat = _vector(quaternion, "quaternion", 4, "x, y, z, w")
            big = float(np.max(np.abs(quat)))
            if big > 1.0:
                quat = quat / big
            norm = float(np.linalg.norm(quat))
            if not norm > 1e-9:
                raise CommandError(f"{call}: the quaternion is zero (x, y, z, w)")
            q[iq + 3:iq + 7] = quat / norm
        R = pin.Quaternion(q[iq + 3:iq + 7]).matrix()
        if linear_velocity is not None:  # world axes in the stepping coordinates
            v[iv:iv + 3] = _vector(linear_velocity, "linear_velocity", 3, "m/s, world frame")
        if angular_velocity is not None:  # body axes in the stepping coordinates
            v[iv + 3:iv + 6] = R.T @ _vector(angular_velocity, "angular_velocity", 3,
                                             "rad/s, world frame")
        elif quaternion is not None:
            v[iv + 3:iv + 6] = R.T @ (R_old @ s.v[iv + 3:iv + 6])
        if not v @ v < _MAX_SPEED2:
            raise CommandError(f"{call}: the speed |v| = {math.sqrt(float(v @ v)):.3g} would be "
                               f"above {MAX_SPEED:g}, which the next step would refuse; the "
                               f"state is untouched")
        if position is not None or quaternion is not None:
            obj = self.objects[self._object_index(call, name)]
            if s.sleep:  # the trial meets its island awake, as the next step will
                self.contact.set_sleeping(self._woken(s.sleep[0],
                                                      [self._object_index(call, name)]))
            n = self.ground.normal
            depth = obj.lowest(n, R) - (float(q[iq:iq + 3] @ n) - self.ground.height)
            too_deep = (f"puts object {name!r} {depth * 1e3:.1f} mm under the ground"
                        if depth > INITIAL_PENETRATION_WARNING else self._trial(q, v, s.u))
            if too_deep:
                raise CommandError(f"{call}: position {q[iq:iq + 3].tolist()} {too_deep}; "
                                   f"the state is untouched: raise it")
        self._set_qv(q, v)
        self._wake([self._object_index(call, name)])  # its island wakes

    def spawn_object(self, name: str, shape: str, size, mass: float, position, *,
                     rpy=None, quaternion=None, inertia=None,
                     linear_velocity=(0.0, 0.0, 0.0),
                     angular_velocity=(0.0, 0.0, 0.0), mesh: str = "",
                     urdf: str = "") -> FreeObject:
        """Add a free rigid object from the next step on: ``shape`` box / sphere /
        cylinder / capsule of ``size`` (3 numbers, :data:`wb_sim.objects.SHAPES`), mesh
        (the file ``mesh``, STL / OBJ / DAE, scaled by ``size``: its convex hull), or urdf
        (``urdf``: a rigid URDF's file or XML, every joint fixed; ``size`` and ``mass``
        None: its links' geometry and masses, :func:`wb_sim.objects.load_urdf_body`), ``mass``
        (kg, > 0), its centre (of mass) at ``position`` (m, world), oriented by ``rpy``
        (rad) or ``quaternion`` (x, y, z, w), moving with ``linear_velocity`` /
        ``angular_velocity`` (world, m/s, rad/s); ``inertia`` (3 x 3 about its centre,
        kg*m^2) defaults to the homogeneous solid's. Raises :class:`CommandError` (state
        untouched) for a bad value, a missing, unreadable or too large mesh file
        (objects.max_mesh_vertices), a name in use, or an object under the ground or
        inside the terrain.

        It rebuilds the simulator with the new object (the models gain a joint, the contact
        model its geometry: the honest way, as the state vector and every contact block
        change size; about the cost of building the simulator again, tens to hundreds of ms
        for the humanoid). The robot's state, the time, the other objects' states, the
        payloads, pushes and commands in the pipe carry over; the contact model's warm starts
        and the links' contact deformations start afresh (a continuation is not
        bit-identical to one where the object was there from the start). :meth:`reset`
        puts every object back at its initial (spawn) pose."""
        if any(o.name == name for o in self.objects):
            raise CommandError(f"spawn_object: an object named {name!r} exists already; give "
                               f"another name or delete_object({name!r}) first")
        obj = make_object(name, shape, size, mass, position, rpy=rpy, quaternion=quaternion,
                          inertia=inertia, linear_velocity=linear_velocity,
                          angular_velocity=angular_velocity, mesh=mesh, urdf=urdf,
                          max_mesh_vertices=self.config.objects.max_mesh_vertices)
        problem = self._object_problem(obj)
        if problem:
            raise CommandError(f"spawn_object: {problem}; the state is untouched")
        self._rebuild(self.objects + (obj,), new=obj)
        return obj

    def delete_object(self, name: str) -> FreeObject:
        """Remove the free object ``name`` from the next step on (CommandError with the
        closest names if there is none). Rebuilds the simulator as :meth:`spawn_object`
        does. Returns the object (as it was spawned or configured)."""
        gone = self.objects[self._object_index("delete_object", name)]
        self._rebuild(tuple(o for o in self.objects if o.name != name))
        return gone

    def _rebuild(self, objects: tuple, new: FreeObject | None = None) -> None:
        """This simulator built again with ``objects``, the state carried over: the robot's
        and each remaining object's coordinates, the record's other fields, the IMU's and
        the force-torque sensors' state; ``new`` starts at its initial pose and twist."""
        old_s, old_objects = self._s, self.objects
        old_model, old_joints = self.model, self._object_joints
        components = {k: c.snapshot() for k, c in self._components.items() if k != "contact"}
        config = self.config
        notes = list(self.notes)
        try:
            # warnings of the build (an initial penetration of the robot) were said already
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                Simulator.__init__(self, config, objects, self._robots, self._fleet)
        except Exception:
            Simulator.__init__(self, config, old_objects, self._robots, self._fleet)
            self._s = old_s
            raise
        fresh = self._s  # the initial state of the new set: the new object's pose and twist
        q, v = fresh.q.copy(), fresh.v.copy()
        q[:self._nq_robot], v[:self._nv_robot] = old_s.q[:self._nq_robot], \
            old_s.v[:self._nv_robot]
        for obj, jid in zip(self.objects, self._object_joints):
            if obj is new or obj not in old_objects:
                continue
            oj = old_joints[old_objects.index(obj)]
            iq, iv = self.model.idx_qs[jid], self.model.idx_vs[jid]
            oq, ov = old_model.idx_qs[oj], old_model.idx_vs[oj]
            q[iq:iq + 7], v[iv:iv + 6] = old_s.q[oq:oq + 7], old_s.v[ov:ov + 6]
        q, v = _frozen(q), _frozen(v)
        # the pushes by their frames' names (an object's frame id moves with the set)
        pushes = tuple((self.model.getFrameId(old_model.frames[f].name), w, n)
                       for f, w, n in old_s.pushes
                       if self.model.existFrame(old_model.frames[f].name))
        self._s = dataclasses.replace(
            old_s, q=q, v=v, q_prev=q, v_prev=v, a=_frozen(np.zeros(self.model.nv)),
            pushes=pushes, pushes_applied=(), sleep=self._awake)
        self._v_public = None
        self.notes = notes
        for name, snap in components.items():
            if name in self._components:
                self._components[name].restore(snap)
        self._restore_readings(self.contact.snapshot())

    # ------------------------------------------------------------------ sleeping objects

    def _init_sleep(self) -> None:
        """objects.sleep: the record's initial sleep state (every object awake) and the
        objects' rows in q and v."""
        o = self.config.objects
        n = len(self.objects)
        if not (n and o.sleep):
            self._awake, self._obj_qv, self._reducible = (), None, False
            return
        self._awake = (_frozen(np.full(n, -1, dtype=np.int64)), _frozen(np.zeros(n, dtype=np.int64)))
        self._sleep_steps = max(1, math.ceil(o.sleep_time / self.dt - 1e-9))
        self._sleep_speed2 = float(o.sleep_speed) ** 2
        iq = np.array([self.model.idx_qs[j] for j in self._object_joints])
        iv = np.array([self.model.idx_vs[j] for j in self._object_joints])
        self._obj_qv = (iq[:, None] + np.arange(7), iv[:, None] + np.arange(6))
        self._frame_object = {self.model.getFrameId(ob.name, pin.FrameType.BODY): k
                              for k, ob in enumerate(self.objects)}
        #: every object asleep: the robot stepped on its own model (_asleep_dynamics)
        self._reducible = (self.loop_closures is None and self._gyroscopic is None
                           and self._robot_njoints > 1)
        self._rmodel = self._rdata = None

    def _asleep_dynamics(self, q, v, u, tau_joints, pushes):
        """:meth:`_dynamics` while every free object sleeps: the robot's ABA and M^-1 on
        the robot's own stepping model (the objects' joints locked: bitwise the robot's
        rows of the whole model's), the contact phases at every placement (one
        kinematics pass of the whole model) and the laws over the robot's columns; the
        objects' velocities 0. None when an awake body came within the margin of a
        sleeping island (it woke: the whole step then)."""
        model, data = self._model_step, self._data_step
        if self._rmodel is None:
            r = pin.buildReducedModel(model, list(range(self._robot_njoints, model.njoints)),
                                      self.q0)
            r.armature[:] = model.armature[:r.nv]
            r.gravity = model.gravity
            self._rmodel, self._rdata = r, new_data(r)
        rm, rd = self._rmodel, self._rdata
        nq, nv = self._nq_robot, self._nv_robot
        tau, limits = self._generalized_torques(q, v, tau_joints)
        pin.computeJointJacobians(model, data, q)  # every placement: the contact's phases
        if pushes:
            tau = tau.copy()
            self._add_pushes(tau, pushes)
        v_free = pin.aba(rm, rd, q[:nq], v[:nv], tau[:nv], pin.Convention.WORLD) * self._dt0
        v_free += v[:nv]
        v_all = np.zeros(model.nv)
        v_all[:nv] = v_free
        if self.contact.wake_near(v_all, self.dt) is not None:
            return None
        Minv_upper = pin.computeMinverse(rm, rd)
        if limits is not None:
            self._apply_limits(limits, q, Minv_upper, v_free)
        self.contact_points.update(model, data, None)
        v_next, force, u_next = self.contact.solve(Minv_upper, v_free, u, self.dt)
        v_all = np.zeros(model.nv)
        v_all[:nv] = v_next
        return v_all, u_next, force

    def _woken_by_pushes(self, labels: np.ndarray, pushes: tuple) -> np.ndarray:
        """``labels`` with the islands of the sleeping objects a push acts on awake."""
        hit = [self._frame_object[f] for f, _ in pushes if f in self._frame_object]
        return self._woken(labels, hit) if hit else labels

    @staticmethod
    def _woken(labels: np.ndarray, objects) -> np.ndarray:
        """``labels`` with the islands of ``objects`` (indices; None: all) awake."""
        if objects is None:
            return np.full(len(labels), -1, dtype=np.int64)
        mine = labels[list(objects)]
        mine = mine[mine >= 0]
        if not len(mine):
            return labels
        return np.where(np.isin(labels, mine), -1, labels)

    def _sleep_step(self, s: Record, labels: np.ndarray, v_next: np.ndarray) -> tuple:
        """After the step's dynamics: the sleeping objects' velocities made exactly 0 (in
        ``v_next``, in place), each awake object's count of quiet steps, and the islands of
        objects (linked by pair contacts, none touching a robot's link) whose every object
        has been quiet for objects.sleep_time put to sleep; the next (labels, counts)."""
        iq, iv = self._obj_qv
        asleep = labels >= 0
        if asleep.all():  # every object sleeps on: velocities 0, the state as it was
            v_next[iv] = 0.0
            return s.sleep if labels is s.sleep[0] else \
                (_frozen(np.asarray(labels, dtype=np.int64)), s.sleep[1])
        if asleep.any():
            v_next[iv[asleep]] = 0.0
        V = v_next[iv]
        lin2 = np.einsum("ij,ij->i", V[:, :3], V[:, :3])
        ang2 = np.einsum("ij,ij->i", V[:, 3:], V[:, 3:])
        count = np.where((s.sleep[0] >= 0) & ~asleep, 0, s.sleep[1])  # the woken start again
        quiet = (lin2 < self._sleep_speed2) & (ang2 < self._sleep_speed2)
        count = np.where(asleep, count, np.where(quiet, count + 1, 0))
        ready = ~asleep & (count >= self._sleep_steps)
        if ready.any():
            labels = self._fall_asleep(labels, ready)
            now = (labels >= 0) & ~asleep
            if now.any():
                v_next[iv[now]] = 0.0
        return _frozen(np.asarray(labels, dtype=np.int64)), _frozen(count)

    def _fall_asleep(self, labels: np.ndarray, ready: np.ndarray) -> np.ndarray:
        """``labels`` with every island of awake objects that are all ``ready`` asleep,
        labelled by its first object; an island touching a robot's link stays awake."""
        n = len(labels)
        parent = list(range(n + 1))  # n: the robots' links

        def root(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for a, b in zip(*self.contact.object_contacts()):
            ra, rb = root(int(a) if a >= 0 else n), root(int(b) if b >= 0 else n)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
        groups: dict[int, list[int]] = {}
        for i in range(n):
            if labels[i] < 0:
                groups.setdefault(root(i), []).append(i)
        out = np.array(labels, dtype=np.int64)
        robot = root(n)
        for r, members in groups.items():
            if r != robot and all(ready[m] for m in members):
                out[members] = min(members)
        return out

    def _hold_poses(self, labels: np.ndarray, q: np.ndarray, q_next: np.ndarray) -> None:
        """The sleeping objects' coordinates in ``q_next`` (in place) those of ``q`` to
        the bit (integrating a zero twist may round a quaternion)."""
        asleep = labels >= 0
        if asleep.any():
            rows = self._obj_qv[0][asleep]
            q_next[rows] = q[rows]

    def _wake(self, objects=None) -> None:
        """Wake the islands of the free objects ``objects`` (indices; None: all) now."""
        sleep = self._s.sleep
        if not sleep or not (sleep[0] >= 0).any():
            return
        labels = self._woken(sleep[0], objects)
        if labels is not sleep[0]:
            count = np.where((sleep[0] >= 0) & (labels < 0), 0, sleep[1])
            self._s.sleep = (_frozen(labels), _frozen(count))

    def sleeping_objects(self) -> tuple[str, ...]:
        """The free objects asleep now (objects.sleep), in :attr:`objects` order."""
        sleep = self._s.sleep
        if not sleep:
            return ()
        return tuple(o.name for o, label in zip(self.objects, sleep[0]) if label >= 0)

    def object_asleep(self, name: str) -> bool:
        """Whether the free object ``name`` sleeps now (its velocity exactly 0, its pose
        held; CommandError for an unknown name)."""
        k = self._object_index("object_asleep", name)
        return bool(self._s.sleep and self._s.sleep[0][k] >= 0)

    def wake_objects(self, names=None) -> None:
        """Wake the islands of the free objects ``names`` (default: every object) now."""
        self._wake(None if names is None else
                   [self._object_index("wake_objects", n) for n in names])

    # ------------------------------------------------------------------ payloads

    def _configured_payloads(self) -> tuple:
        """The payloads of the parameters payloads.* (attached at the start and by reset)."""
        p = self.config.payloads
        out = []
        for i, name in enumerate(p.names):
            inertia = np.zeros((3, 3))
            if p.inertia:
                ixx, ixy, ixz, iyy, iyz, izz = p.inertia[6 * i:6 * i + 6]
                inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
            out.append(make_payload(self.robot, name, p.links[i], p.mass[i],
                                    p.com[3 * i:3 * i + 3], inertia,
                                    where=f"parameter 'payloads.names' ({name})"))
        return tuple(out)

    def _set_payloads(self, payloads: tuple) -> None:
        """The models' body inertias made those of the robot with ``payloads`` (from the
        originals: no rounding left behind), and what is derived from them."""
        if payloads == self._payloads:
            return
        apply_payloads((self.model, self._model_step), self._inertias0, self.robot,
                       self._payloads, payloads)
        self._payloads = payloads
        self._rmodel = None  # the robot's own stepping model is built again with them
        if getattr(self, "_gyroscopic", None) is not None:  # it holds the root body's inertia
            self._gyroscopic = RootGyroscopic(self._model_step, self._data_step, self.dt)
        if hasattr(self, "_weight"):
            self._weight = self.mass * float(np.linalg.norm(self.config.gravity))

    @property
    def payloads(self) -> tuple[Payload, ...]:
        """The payloads attached now, in the order they were attached (read-only)."""
        return self._s.payloads

    def attach_payload(self, link: str, mass: float, com=(0.0, 0.0, 0.0),
                       inertia=((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
                       name: str | None = None) -> Payload:
        """Weld a rigid payload to ``link`` (any frame) from the next step on: ``mass`` (kg),
        its centre of mass ``com`` (m, in the link's frame) and its ``inertia`` about the
        centre of mass (3 x 3, link axes, kg*m^2). ``name`` (default: the link's name)
        detaches it. M(q), gravity, the contact forces and the IMU follow exactly (its
        inertia is added to the link's body in the simulator's models); it is part of the
        state (snapshots carry it; :meth:`reset` goes back to the configured payloads,
        parameter ``payloads.*``). Raises :class:`ModelError` for an unknown link,
        :class:`CommandError` for a name in use, a negative mass or an inertia that is not
        positive semi-definite (the state is then untouched). Returns the payload."""
        name = link if name is None else name
        if any(p.name == name for p in self._s.payloads):
            raise CommandError(f"attach_payload: a payload named {name!r} is attached already; "
                               f"give another name= or detach_payload({name!r}) first")
        payload = make_payload(self.robot, name, link, mass, com, inertia)
        payloads = self._s.payloads + (payload,)
        self._set_payloads(payloads)
        self._s.payloads = payloads
        return payload

    def detach_payload(self, name: str) -> Payload:
        """Remove the payload ``name`` from the next step on (:class:`CommandError` with the
        names attached if there is none); the model is then bit for bit what it was without
        it. Returns the payload."""
        names = [p.name for p in self._s.payloads]
        if name not in names:
            raise CommandError(f"detach_payload: no payload named {name!r}"
                               f"{did_you_mean(str(name), names)}; attached: "
                               f"{', '.join(names) or 'none'}")
        gone = self._s.payloads[names.index(name)]
        payloads = tuple(p for p in self._s.payloads if p.name != name)
        self._set_payloads(payloads)
        self._s.payloads = payloads
        return gone
