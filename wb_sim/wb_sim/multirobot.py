"""Several robots in one physics (issue 31): one combined pinocchio model, one step, one
contact solve.

**Design.** The robots are joined into one :class:`CombinedRobot` (a
:class:`~wb_sim.robot.RobotModel`) that the :class:`~wb_sim.Simulator` takes as it takes
one robot. Robot 0 is copied unchanged: its joints, ``idx_q`` / ``idx_v``, frames and
names are exactly those of the single-robot model (unprefixed), so every single-robot path
stays bit-identical and robot 0's parameters, IMU, force-torque sensors and named poses
keep meaning what they meant. Each further robot ``k`` is appended joint by joint under the
universe after robot 0's joints (and before the free objects', which come after all
robots), its joint, body and frame names prefixed ``<name>/``: its free-flyer (a free
joint like a free object's: in the stepping model the translation + spherical composite,
see :meth:`~wb_sim.Simulator._stepping_model`) or, for a fixed base, its root placed where
its ``initial.base_*`` says. Its coordinates are one contiguous block of ``q`` and ``v``
in its own model's layout (:attr:`RobotPart.q_slice`), so a per-robot controller built
on the robot's own :class:`~wb_sim.robot.RobotModel` reads ``q[part.q_slice]`` as it reads
a single simulator's ``q``.

Why one model and not several simulators exchanging forces: the contact between robots is
then one more pair of the pair collision (:mod:`~wb_sim.contact.self_collision`, as the
free objects' pairs), solved in the step's one contact problem with the ground's and
the objects' rows; a coupling loop between simulators would be explicit in the coupling
and need contact code of its own. The cost: ABA and ``M^-1`` run over the union (linear in
the bodies); the compliant law already solves each island of the contact problem alone
(robots that do not touch are separate islands), which is why two robots apart move as two
separate simulators do (test/core/test_multirobot.py gives the figure).

What is per robot and what is the world's. Per robot: its model (``urdf_path`` /
``robot_description``, ``floating_base``, ``xacro.*``, ``perturbation.*``), its initial
pose (``initial.*``: base and joints), its contact surfaces (``contact_surfaces`` and their
groups, frames prefixed), its joint limits and URDF dynamics (read from its model), its
actuation (``joints.*``: damping, friction and its smoothing velocity, armature, effort
limits, position limits and their time constant and damping ratio, ``urdf_dynamics``,
``mimic``) and its drives (``actuators.*``: a ``dc_motor`` robot beside an ``ideal`` one),
its IMU (``imu.*``, frame prefixed: :meth:`~wb_sim.Simulator.robot_imu`), its
force-torque sensors (``ft_sensors.*``, ``ft_sensors.from_urdf`` reading its own URDF: joints
named as in its own model, checked there, cutting the combined model at the prefixed joint:
:meth:`~wb_sim.Simulator.robot_ft_wrenches`), its contact sensors (``contact_sensors.*``: its
own surfaces and, with ``collision.enabled``, its own links, with its threshold and debounce:
:meth:`~wb_sim.Simulator.robot_contact_states`; the first robot's
:attr:`~wb_sim.Simulator.contact_states` are its own surfaces' and links' only), its controller
(outside the simulator, one per robot). Its actuation and drives are built alone on its
own model from its own configuration and joined in the combined joint order, robot 0's
first (:func:`~wb_sim.actuation.combine_actuation`,
:class:`~wb_sim.actuators.CombinedActuators`): each robot gets the per-joint numbers it has
alone, and a one-robot run takes the single-robot path unchanged.
The world's, one for all: ``physics_rate_hz``, ``gravity``, ``ground.*``, ``terrain.*``,
``contact.*``, ``objects.*``. One value for every robot (:data:`ONE_VALUE_KEYS`):
``joints.command_delay_steps`` (one delay line carries the combined torque vector). The
rest is robot 0's and applies to the whole set for now (``collision.*``, ``sensors.*``,
``sensors.delay_steps`` included): a robot ``k >= 1`` whose parameter differs from robot 0's
there is refused (:func:`check_part_config`), never silently overridden, as are the
features that are robot 0's only for now (``payloads``, ``loop_closures``, named ``poses``,
``collision.self_collision``).
``sensors.delay_steps`` must be 0 with several robots (:func:`check_first_config`): the
robots after the first read their IMU undelayed (force-torque and contact sensors are never
delayed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .errors import ConfigError
from .robot import RobotModel, did_you_mean

#: the parameters each robot has its own value of (its model, pose, surfaces)
PER_ROBOT_KEYS = ("urdf_path", "robot_description", "floating_base", "max_joints",
                  "contact_surfaces")
PER_ROBOT_GROUPS = ("initial", "xacro", "perturbation", "imu", "joints", "actuators",
                    "ft_sensors", "contact_sensors")
#: per-robot groups' keys that stay one value for the whole set, with the reason
ONE_VALUE_KEYS = {
    "joints.command_delay_steps": "one command delay line carries the combined joint "
                                  "vector (one pipe of whole-set torque vectors per step)",
}
#: the world's parameters: one value for every robot in one physics
WORLD_KEYS = ("physics_rate_hz", "gravity")
WORLD_GROUPS = ("ground", "terrain", "contact", "objects")
#: robot 0's only for now: a robot k >= 1 may not set them (they are refused, not dropped)
ROBOT0_ONLY_GROUPS = ("payloads", "loop_closures", "poses")


@dataclass(frozen=True)
class RobotPart:
    """One robot of a combined model: its name, its own model and where it sits in the
    combined ``q``, ``v`` and joint vectors."""

    name: str  #: its label ('' prefix for robot 0, '<name>/' for the others)
    index: int  #: 0 for the first robot
    robot: RobotModel  #: its own model (its controller's)
    prefix: str  #: what its joint, body and frame names carry in the combined model
    q_slice: slice  #: its coordinates in the combined q (its own model's layout)
    v_slice: slice  #: its velocities in the combined v
    joints: slice  #: its actuated joints in the combined joint vectors (torques)
    root_joint: int  #: its root joint's id in the combined model (its base)
    surfaces: tuple[str, ...] = ()  #: its contact surfaces' names (combined, prefixed)

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Its actuated joints, its own names (unprefixed), its own order."""
        return self.robot.joint_names

    @property
    def nj(self) -> int:
        return self.robot.nj

    @property
    def floating_base(self) -> bool:
        return self.robot.floating_base


@dataclass(frozen=True, eq=False)
class CombinedRobot(RobotModel):
    """Several robots as one :class:`~wb_sim.robot.RobotModel` (module docstring): robot 0
    as it is, the others appended with prefixed names."""

    parts: tuple = ()  #: the :class:`RobotPart` of each robot, robot 0 first
    stepping: pin.Model | None = None  #: the combined stepping model (composite roots)
    #: the roots of robots k >= 1 that are free joints (their linear velocity is converted
    #: as a free object's, wb_sim.Simulator._public_velocity)
    free_roots: tuple = ()
    #: {link (frame) name: robot index}: the pairs between two robots' links collide
    link_robot: dict | None = None

    def geometry_model(self, kind: str = "collision", key: str = "") -> pin.GeometryModel:
        """Each robot's own geometry (loaded once per robot) on the combined model's joints
        and frames, names prefixed; a copy per caller."""
        loaded = self.__dict__.setdefault("_geometry", {})
        if kind not in loaded:
            loaded[kind] = combined_geometry(self, kind, key)
        return loaded[kind].copy()


_VECTORS_V = ("armature", "damping", "friction", "effortLimit", "velocityLimit",
              "lowerEffortLimit", "upperEffortLimit", "lowerVelocityLimit",
              "upperVelocityLimit", "lowerDryFrictionLimit", "upperDryFrictionLimit",
              "rotorInertia", "rotorGearRatio")
_VECTORS_Q = ("lowerPositionLimit", "upperPositionLimit", "positionLimitMargin")


def append_tree(dst: pin.Model, src: pin.Model, prefix: str) -> tuple[dict, dict]:
    """Append every joint, body and frame of ``src`` to ``dst`` (in place) under the
    universe, names prefixed; their per-coordinate vectors (limits, armature, damping,
    friction) copied. Returns ({src joint: dst joint}, {src frame: dst frame})."""
    nq0, nv0 = dst.nq, dst.nv
    jmap = {0: 0}
    for j in range(1, src.njoints):
        jmap[j] = dst.addJoint(jmap[src.parents[j]], src.joints[j], src.jointPlacements[j],
                               prefix + src.names[j])
        dst.appendBodyToJoint(jmap[j], src.inertias[j], pin.SE3.Identity())
    for attrs, n0, n in ((_VECTORS_V, nv0, src.nv), (_VECTORS_Q, nq0, src.nq)):
        for attr in attrs:
            try:
                whole = np.array(getattr(dst, attr), dtype=float)
                part = np.asarray(getattr(src, attr), dtype=float)
            except AttributeError:
                continue
            if whole.shape[0] == n0 + n and part.shape[0] == n:
                whole[n0:n0 + n] = part
                setattr(dst, attr, whole)
    fmap = {0: 0}
    for i in range(1, len(src.frames)):
        f = src.frames[i]
        if f.name == "universe":
            fmap[i] = 0
            continue
        g = pin.Frame(prefix + f.name, jmap[f.parentJoint], fmap.get(f.parentFrame, 0),
                      f.placement, f.type, f.inertia)
        fmap[i] = dst.addFrame(g, False)  # the bodies' inertias are in already
    return jmap, fmap


def _geometry(robot: RobotModel, gmodel_of, model: pin.Model, parts_maps) -> pin.GeometryModel:
    """The combined collision geometry: each robot's geometry objects on the combined
    model's joints and frames, names prefixed."""
    out = pin.GeometryModel()
    for (part_robot, prefix, jmap, fmap) in parts_maps:
        g = gmodel_of(part_robot)
        for obj in g.geometryObjects:
            o = obj.copy()
            o.name = prefix + obj.name
            o.parentJoint = int(jmap[obj.parentJoint])
            o.parentFrame = int(fmap[obj.parentFrame])
            out.addGeometryObject(o)
    return out


def combine(parts: list[tuple[str, RobotModel, pin.Model]]) -> CombinedRobot:
    """One :class:`CombinedRobot` of ``parts``: (name, the robot, its stepping model) each,
    robot 0 first (its stepping model: the simulator's, composite root for a floating
    base). Names must be unique (the world file checks them)."""
    name0, robot0, step0 = parts[0]
    model = pin.Model(robot0.model)
    stepping = pin.Model(step0)
    out_parts = [RobotPart(name0, 0, robot0, "", slice(0, robot0.model.nq),
                           slice(0, robot0.model.nv), slice(0, robot0.nj), 1)]
    maps = [(robot0, "", {j: j for j in range(robot0.model.njoints)},
             {i: i for i in range(len(robot0.model.frames))})]
    link_robot = {f.name: 0 for f in robot0.model.frames if f.type == pin.FrameType.BODY}
    fields = {k: [getattr(robot0, k)] for k in ("joint_names", "joint_ids", "idx_q", "idx_v",
                                                 "nq_joint", "position_lower",
                                                 "position_upper", "velocity_limit",
                                                 "effort_limit", "damping", "friction")}
    free_roots = []
    nj = robot0.nj
    for k, (name, robot, step) in enumerate(parts[1:], start=1):
        prefix = f"{name}/"
        nq0, nv0 = model.nq, model.nv
        jmap, fmap = append_tree(model, robot.model, prefix)
        append_tree(stepping, step, prefix)
        if robot.floating_base:
            free_roots.append(jmap[1])
        ids = np.array([jmap[int(j)] for j in robot.joint_ids], dtype=int)
        fields["joint_names"].append(tuple(prefix + n for n in robot.joint_names))
        fields["joint_ids"].append(ids)
        fields["idx_q"].append(robot.idx_q + nq0)
        fields["idx_v"].append(robot.idx_v + nv0)
        for f in ("nq_joint", "position_lower", "position_upper", "velocity_limit",
                  "effort_limit", "damping", "friction"):
            fields[f].append(getattr(robot, f))
        out_parts.append(RobotPart(name, k, robot, prefix, slice(nq0, model.nq),
                                   slice(nv0, model.nv), slice(nj, nj + robot.nj),
                                   jmap[1]))
        nj += robot.nj
        maps.append((robot, prefix, jmap, fmap))
        link_robot.update({prefix + f.name: k for f in robot.model.frames
                           if f.type == pin.FrameType.BODY})
    if (stepping.nq, stepping.nv, stepping.nframes) != (model.nq, model.nv, model.nframes):
        raise ConfigError("internal: the combined stepping model does not match the model")
    vals = {k: (tuple(x for part in v for x in part) if k == "joint_names"
                else np.concatenate(v)) for k, v in fields.items()}
    for k, a in vals.items():
        if isinstance(a, np.ndarray):
            a.setflags(write=False)
    combined = CombinedRobot(
        model=model, urdf_xml=robot0.urdf_xml, urdf_file=robot0.urdf_file,
        floating_base=robot0.floating_base, root_link=robot0.root_link,
        mjcf_file=robot0.mjcf_file, closures=robot0.closures,
        extra_frames=robot0.extra_frames, parts=tuple(out_parts), stepping=stepping,
        free_roots=tuple(free_roots), link_robot=link_robot, **vals)
    # the collision geometry, built lazily (geometry_model's cache) from each robot's own
    combined.__dict__["_combined_geometry_maps"] = maps
    return combined


def combined_geometry(robot: CombinedRobot, kind: str, key: str) -> pin.GeometryModel:
    """The combined robot's ``kind`` geometry (each robot's own, loaded once per robot)."""
    return _geometry(robot, lambda r: r.geometry_model(kind, key=key), robot.model,
                     robot.__dict__["_combined_geometry_maps"])


def _differs(a, b) -> bool:
    try:
        return np.shape(a) != np.shape(b) or bool(np.any(np.asarray(a) != np.asarray(b)))
    except (TypeError, ValueError):
        return a != b


def _flat(config) -> dict:
    """A validated configuration's values by dotted key (the groups' included)."""
    from .parameters import Group
    out = {}
    for k, v in config.items():
        if isinstance(v, Group) and k not in ("surfaces", "poses"):
            out.update({f"{k}.{k2}": v2 for k2, v2 in v.items()})
        else:
            out[k] = v
    return out


_DEFAULTS: dict = {}


def check_part_config(name: str, index: int, config, config0, where: str = "") -> None:
    """Refuse, for robot ``index`` >= 1 (``config``: its validated configuration, beside
    robot 0's ``config0``), a world-wide parameter that differs (one physics), one of
    robot 0's for the whole set that differs, and a robot-0-only feature it sets
    (module docstring). ConfigError naming the robot, the key and the fix."""
    from .config import load_config
    if not _DEFAULTS:
        _DEFAULTS.update(_flat(load_config({"urdf_path": "robot.urdf"})))
    at = where or f"robot '{name}' (robots[{index}])"
    mine, first = _flat(config), _flat(config0)
    for k in mine:
        head = k.partition(".")[0]
        a, b = mine[k], first.get(k)
        if k in ONE_VALUE_KEYS:
            if _differs(a, b):
                raise ConfigError(
                    f"{at}: parameter '{k}' is {a!r} here but {b!r} for the first robot; it is "
                    f"one value for every robot: {ONE_VALUE_KEYS[k]}: give it the same value "
                    f"for every robot")
            continue
        if k in PER_ROBOT_KEYS or head in PER_ROBOT_GROUPS or k == "surfaces" \
                or k == "collision.srdf_path":  # srdf: read with self_collision only
            continue
        if head in ROBOT0_ONLY_GROUPS:
            if _differs(a, _DEFAULTS.get(k, () if k == "poses" else None)):
                raise ConfigError(
                    f"{at}: parameter '{k}': {head} is the first robot's only for now (several "
                    f"robots in one physics, wb_sim.multirobot): leave it at its default "
                    f"({_DEFAULTS.get(k, ())!r}) for this robot")
            continue
        if not _differs(a, b):
            continue
        kind = ("belongs to the world: one value for every robot in one physics"
                if k in WORLD_KEYS or head in WORLD_GROUPS else
                "is the first robot's for the whole set for now (one sensor and collision "
                "model over the combined joints)")
        raise ConfigError(
            f"{at}: parameter '{k}' is {a!r} here but {b!r} for the first robot; it {kind}: "
            f"give it the same value for every robot")


def check_first_config(config0) -> None:
    """Refuse what the first robot's configuration may not hold with several robots."""
    if config0.collision.self_collision:
        raise ConfigError("parameter 'collision.self_collision': not supported with several "
                          "robots in one physics yet (their links meet the other robots', the "
                          "objects' and the ground, not their own): set it false")
    if config0.sensors.delay_steps:
        raise ConfigError(f"parameter 'sensors.delay_steps' is {config0.sensors.delay_steps}: "
                          f"not supported with several robots in one physics yet (the joint "
                          f"states of all of them would be delayed but the IMU of the robots "
                          f"after the first not): set it 0")


def unknown_robot(name, parts) -> ConfigError:
    names = [p.name for p in parts]
    return ConfigError(f"no robot named {name!r}{did_you_mean(str(name), names)}; robots: "
                       f"{', '.join(names)}")
