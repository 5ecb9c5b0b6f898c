"""A world file: one YAML that declares the ground, the terrain, the free objects and the
robots of one physics (docs/world.md), read into the parameters the simulator already
takes (:func:`load_world`), checked once, every error a :class:`~wb_sim.errors.ConfigError`
naming the key path in the file (``world.robots[0].urdf``) and the fix.

The world maps onto the existing parameters, nothing new is simulated: ``world.ground``,
``world.terrain`` and ``world.contact`` are the ``ground.*``, ``terrain.*`` and
``contact.*`` keys as nested mappings, ``world.objects`` a list that becomes the
``objects.*`` lists, and each robot its configuration (a ready one or a YAML file,
``robot:``; or a URDF, ``urdf:``), its ``initial.*`` pose and any other parameter
(``parameters:``). The world's keys win over the robot file's. Several robots in one
physics (:func:`load_world_robots`, :meth:`wb_sim.Simulator.from_world`;
:mod:`wb_sim.multirobot`) run headless or on the node (its ``world_file``,
:mod:`wb_sim.ros.robots`: each robot under its name as namespace), as ``wb_sim_run --world``
and ``sim.launch.py world:=`` start them, a controller per robot; :func:`load_world` reads
a world of one robot. Relative file paths are resolved beside the world file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from .config import (PARAMETER_BY_KEY, POSE_PARAMETERS, SURFACE_PARAMETER_BY_FIELD, flatten,
                     load_config, read_yaml, read_yaml_params)
from .errors import ConfigError
from .objects import SHAPES, make_object
from .paths import robot_config_file
from .robot import did_you_mean

#: the keys of ``world:`` (the mappings are checked against the parameter table)
WORLD_KEYS = ("gravity", "physics_rate_hz", "ground", "terrain", "contact", "objects", "sleep",
              "robots")
#: ``world.sleep``'s keys -> the parameters they set (sleeping objects, docs/physics.md)
SLEEP_KEYS = {"enabled": "objects.sleep", "speed": "objects.sleep_speed",
              "time": "objects.sleep_time"}
#: the keys of one entry of ``world.objects``
OBJECT_KEYS = ("name", "shape", "size", "mass", "inertia", "pose", "velocity", "urdf")
#: the keys of one entry of ``world.robots``
ROBOT_KEYS = ("name", "robot", "urdf", "initial", "parameters", "controller",
              "controller_params")
#: the world's parameter groups and keys: set under ``world:``, never in a robot's
#: ``parameters`` (one ground, one terrain, one contact law, one physics for the world)
WORLD_GROUPS = ("ground", "terrain", "contact", "objects")
WORLD_NAMES = ("gravity", "physics_rate_hz")
#: the example controller as an in-process factory (``controller: pd`` headless)
PD_FACTORY = "wb_sim.controllers:pd_gravity"
#: parameters holding a file path, resolved beside the file that sets them
_PATH_KEYS = ("urdf_path", "collision.srdf_path", "terrain.heightfield")


@dataclass(frozen=True)
class RobotInfo:
    """What a world says about its robot beyond the simulator's parameters."""

    name: str  #: its label (not a ROS namespace yet: docs/world.md)
    #: ``pd`` (the example PD + gravity compensation), ``none`` (yours) or ``module:factory``
    controller: str
    #: the controller's parameters (``pd``: kp, kd; a factory: its keyword arguments)
    controller_params: Mapping[str, Any] = field(default_factory=dict)
    robot_file: Path | None = None  #: the robot's configuration file, if ``robot:`` named one
    world_file: Path | None = None  #: the world file it came from
    #: where in the files each of its parameters was set (key -> 'world.robots[1].parameters.
    #: imu.frame', 'the robot file ...'): an error found building the simulator says it
    origin: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)


def _where(path: Path) -> str:
    return f"world file '{path}'"


def _mapping(value, key: str, path: Path) -> Mapping:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{_where(path)}: '{key}' must be a mapping (key: value lines), got "
                          f"{type(value).__name__} {value!r}")
    return value


def _known(mapping: Mapping, allowed, key: str, path: Path) -> None:
    for k in mapping:
        if k not in allowed:
            raise ConfigError(f"{_where(path)}: unknown key '{key}.{k}'"
                              f"{did_you_mean(str(k), allowed)}; the keys of '{key}' are: "
                              f"{', '.join(allowed)}")


def _group(value, group: str, key: str, path: Path) -> dict[str, Any]:
    """``world.<group>``: a mapping of ``<group>.*`` parameters (nested or dotted), flat."""
    flat = flatten({group: dict(_mapping(value, key, path))})
    known = [k for k in PARAMETER_BY_KEY if k.startswith(group + ".")]
    for k in flat:
        if k not in PARAMETER_BY_KEY:
            raise ConfigError(f"{_where(path)}: unknown key '{key}.{k.partition('.')[2]}'"
                              f"{did_you_mean(k, known).replace(group + '.', '')}; the keys of "
                              f"'{key}' are the parameters {group}.* (docs/parameters.md)")
    return flat


def _resolve(value, key: str, base: Path) -> str:
    """A file path relative to ``base`` made absolute (schemes and absolute paths kept)."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key} must be a non-empty string (a file path), got {value!r}")
    if ":" in value or Path(value).is_absolute():
        return value
    return str((base / value).resolve())


def _objects(entries, path: Path) -> dict[str, Any]:
    """``world.objects`` -> the ``objects.*`` parameters, each entry checked as
    :func:`~wb_sim.objects.make_object` checks a spawned one."""
    if not isinstance(entries, list):
        raise ConfigError(f"{_where(path)}: 'world.objects' must be a list of objects "
                          f"('- name: box' entries), got {type(entries).__name__}")
    names, shapes, sizes, masses, inertia, pos, rpy, lin, ang, urdfs = ([] for _ in range(10))
    any_inertia = any(isinstance(e, Mapping) and "inertia" in e for e in entries)
    for i, e in enumerate(entries):
        key = f"world.objects[{i}]"
        e = _mapping(e, key, path)
        _known(e, OBJECT_KEYS, key, path)
        urdf = e.get("shape") == "urdf"
        for need in ("name", "shape") + (("urdf",) if urdf else ("size", "mass")):
            if need not in e:
                raise ConfigError(f"{_where(path)}: '{key}' has no '{need}'; an object needs "
                                  f"name, shape ({', '.join(SHAPES)}), size (m) and mass (kg); "
                                  f"a urdf object name, shape: urdf and urdf (its file)")
        if "urdf" in e and not urdf:
            raise ConfigError(f"{_where(path)}: '{key}.urdf' is for shape urdf only (got shape "
                              f"{e.get('shape')!r})")
        text = e.get("urdf", "")
        e = dict(e, urdf=text if not urdf or isinstance(text, str) and text.lstrip()
                 .startswith("<") else _resolve(text, f"{_where(path)}: '{key}.urdf'",
                                                path.parent))
        e.setdefault("size", [0.0, 0.0, 0.0])
        e.setdefault("mass", 0.0)
        size = e["size"] if isinstance(e["size"], list) else [e["size"]]
        if isinstance(size, list) and 0 < len(size) <= 3:
            size = list(size) + [0.0] * (3 - len(size))
        pose = _mapping(e.get("pose", {}), f"{key}.pose", path)
        _known(pose, ("position", "rpy"), f"{key}.pose", path)
        if "position" not in pose:
            raise ConfigError(f"{_where(path)}: '{key}.pose' has no 'position'; give the "
                              f"object's centre, e.g. pose: {{position: [1.0, 0.0, 0.15]}} (m, "
                              f"world)")
        vel = _mapping(e.get("velocity", {}), f"{key}.velocity", path)
        _known(vel, ("linear", "angular"), f"{key}.velocity", path)
        six = e.get("inertia")
        full = None
        if six is not None:
            if not isinstance(six, list) or len(six) != 6:
                raise ConfigError(f"{_where(path)}: '{key}.inertia' must be 6 numbers ixx, ixy, "
                                  f"ixz, iyy, iyz, izz (kg*m^2), got {six!r}")
            a, b, c, d, f, g = six
            full = [a, b, c, b, d, f, c, f, g]
        try:
            obj = make_object(e["name"], e["shape"], size, e["mass"], pose["position"],
                              rpy=pose.get("rpy"), inertia=full,
                              linear_velocity=vel.get("linear", (0.0, 0.0, 0.0)),
                              angular_velocity=vel.get("angular", (0.0, 0.0, 0.0)),
                              urdf=e["urdf"], where=f"{_where(path)}: '{key}'",
                              err=ConfigError)
        except ConfigError:
            raise
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{_where(path)}: '{key}': {err}") from None
        if obj.name in names:
            raise ConfigError(f"{_where(path)}: '{key}.name': a second object named "
                              f"{obj.name!r}; names must be unique")
        names.append(obj.name)
        shapes.append(obj.shape)
        sizes += list(obj.size)
        masses.append(0.0 if urdf else obj.mass)  # a urdf object's: its links'
        urdfs.append(e["urdf"])
        if any_inertia:
            (ixx, ixy, ixz), (_, iyy, iyz), (_, _, izz) = obj.inertia
            inertia += [ixx, ixy, ixz, iyy, iyz, izz]
        pos += list(obj.position)
        rpy += [float(x) for x in pose.get("rpy", (0.0, 0.0, 0.0))]
        lin += list(obj.linear_velocity)
        ang += list(obj.angular_velocity)
    if not names:
        return {}
    out = {"objects.names": names, "objects.shapes": shapes, "objects.sizes": sizes,
           "objects.mass": masses, "objects.inertia": inertia, "objects.positions": pos,
           "objects.rpy": rpy, "objects.linear_velocities": lin,
           "objects.angular_velocities": ang}
    if any(urdfs):
        out["objects.urdfs"] = urdfs
    return out


def _robot(entry, path: Path, origin: dict[str, str], index: int = 0
           ) -> tuple[dict[str, Any], RobotInfo]:
    """The robot's parameters and :class:`RobotInfo`; ``origin`` gets, per key, where in the
    files it was set."""
    key = f"world.robots[{index}]"
    entry = _mapping(entry, key, path)
    _known(entry, ROBOT_KEYS, key, path)
    name = entry.get("name")
    if not isinstance(name, str) or not name or "/" in name or " " in name:
        raise ConfigError(f"{_where(path)}: '{key}.name' must be a non-empty name without '/' "
                          f"or spaces (the robot's label), got {name!r}")
    if ("robot" in entry) == ("urdf" in entry):
        raise ConfigError(f"{_where(path)}: '{key}' needs exactly one of 'urdf' (the robot's "
                          f"URDF file; its contact_surfaces etc. under 'parameters') and "
                          f"'robot' (a ready configuration such as humanoid, or your robot's "
                          f"YAML file), got " + ("both" if "robot" in entry else "neither"))
    base = path.parent
    params: dict[str, Any] = {}
    robot_file = None
    gains: dict[str, Any] = {}
    if "robot" in entry:
        r = entry["robot"]
        if not isinstance(r, str) or not r:
            raise ConfigError(f"{_where(path)}: '{key}.robot' must be a ready configuration's "
                              f"name or a YAML file, got {r!r}")
        if r.endswith((".yaml", ".yml")) and not Path(r).is_absolute():
            r = str(base / r)
        try:
            robot_file = robot_config_file(r)
            params.update(read_yaml_params(robot_file))
            origin.update(dict.fromkeys(params, f"the robot file '{robot_file}'"))
        except ConfigError as e:
            raise ConfigError(f"{_where(path)}: '{key}.robot': {e}") from None
        gains = _pd_gains(robot_file)
    else:
        urdf = _resolve(entry["urdf"], f"{_where(path)}: '{key}.urdf'", base)
        if ":" not in urdf and not Path(urdf).is_file():
            raise ConfigError(f"{_where(path)}: '{key}.urdf': no file '{urdf}' (a relative path "
                              f"is relative to the world file's directory)")
        params["urdf_path"] = urdf
        origin["urdf_path"] = f"{key}.urdf"
        params.pop("robot_description", None)
    over = flatten(dict(_mapping(entry.get("parameters", {}), f"{key}.parameters", path)))
    for k, v in over.items():
        head = k.partition(".")[0]
        if (head in WORLD_GROUPS and "." in k) or k in WORLD_NAMES:
            raise ConfigError(f"{_where(path)}: '{key}.parameters.{k}' belongs to the world (one "
                              f"physics for every robot): set it under 'world.{head}'"
                              + (f" ('world.{k}')" if k in WORLD_NAMES else ""))
        if k in ("urdf_path", "robot_description"):
            raise ConfigError(f"{_where(path)}: '{key}.parameters.{k}': the robot's model is "
                              f"'{key}.urdf' (or '{key}.robot')")
        if k in _PATH_KEYS and isinstance(v, str) and v:
            v = _resolve(v, f"{_where(path)}: '{key}.parameters.{k}'", base)
        params[k] = v
        origin[k] = f"{key}.parameters.{k}"
    initial = _mapping(entry.get("initial", {}), f"{key}.initial", path)
    fields = [p.key for p in POSE_PARAMETERS] + ["pose"]
    _known(initial, fields, f"{key}.initial", path)
    params.update({f"initial.{k}": v for k, v in initial.items()})
    origin.update({f"initial.{k}": f"{key}.initial.{k}" for k in initial})
    controller = entry.get("controller", "pd")
    if not isinstance(controller, str) or not (controller in ("pd", "none")
                                               or controller.count(":") == 1):
        raise ConfigError(f"{_where(path)}: '{key}.controller' must be 'pd' (the example PD + "
                          f"gravity compensation), 'none' (yours) or an in-process "
                          f"'module:factory' such as '{PD_FACTORY}', got {controller!r}")
    cparams = dict(_mapping(entry.get("controller_params", {}), f"{key}.controller_params",
                            path))
    if controller == "none" and cparams:
        raise ConfigError(f"{_where(path)}: '{key}.controller_params' is given but the "
                          f"controller is 'none' (yours, outside the simulator): remove "
                          f"controller_params, or name the controller that takes them")
    if controller in ("pd", PD_FACTORY):
        cparams = {**gains, **cparams}
        missing = [k for k in ("kp", "kd") if k not in cparams]
        if missing:
            raise ConfigError(f"{_where(path)}: '{key}.controller' {controller!r} needs the gains "
                              f"kp (N*m/rad) and kd (N*m*s/rad): give {', '.join(missing)} in "
                              f"'{key}.controller_params'")
        _known(cparams, ("kp", "kd"), f"{key}.controller_params", path)
    return params, RobotInfo(name=name, controller=controller, controller_params=cparams,
                             robot_file=robot_file, world_file=path)


def _pd_gains(robot_file: Path) -> dict[str, Any]:
    """kp, kd of the ``wb_sim_pd_controller`` block of a robot file ({} where none)."""
    try:
        block = read_yaml_params(robot_file, node_name="wb_sim_pd_controller")
    except ConfigError:
        return {}
    return {k: block[k] for k in ("kp", "kd") if k in block}


def load_world(path: str | Path) -> tuple[dict[str, Any], RobotInfo]:
    """The world file ``path`` as ``(params, robot)``: the flat parameters of
    :meth:`~wb_sim.Simulator.from_params` (checked by :func:`~wb_sim.config.load_config`)
    and its one robot's :class:`RobotInfo`. ConfigError naming the key path for an
    unknown key (with the closest ones), a missing or bad value, or two or more robots
    (:func:`load_world_robots` reads several; the node serves them, wb_sim.ros.robots)."""
    robots = load_world_robots(path, one=True)
    return robots[0]


def load_world_robots(path: str | Path, one: bool = False
                      ) -> list[tuple[dict[str, Any], RobotInfo]]:
    """Every robot of the world file ``path``, ``(params, info)`` each (the world's
    ground, terrain, contact and objects in each one's parameters), the first robot first:
    what :meth:`wb_sim.Simulator.from_world` builds one physics of. ``one``: refuse two or
    more (:func:`load_world`)."""
    path = Path(path).resolve()
    doc = read_yaml(path, "world file")
    if not isinstance(doc, Mapping) or "world" not in doc:
        raise ConfigError(f"{_where(path)} has no top-level 'world:' mapping (docs/world.md)")
    extra = [k for k in doc if k != "world"]
    if extra:
        raise ConfigError(f"{_where(path)}: unknown top-level key '{extra[0]}'; everything "
                          f"goes under 'world:' (ground, terrain, contact, objects, robots)")
    world = _mapping(doc["world"], "world", path)
    _known(world, WORLD_KEYS, "world", path)
    robots = world.get("robots")
    if not isinstance(robots, list) or not robots:
        raise ConfigError(f"{_where(path)}: 'world.robots' must list one robot ('- name: ...' "
                          f"with 'robot: humanoid' or 'urdf: my_robot.urdf')")
    if one and len(robots) > 1:
        raise ConfigError(f"{_where(path)}: 'world.robots' lists {len(robots)} robots; this "
                          f"reads one (load_world, the headless demo): read them all with "
                          f"wb_sim.world.load_world_robots or wb_sim.Simulator.from_world, or "
                          f"serve them on ROS (wb_sim_run --world, sim.launch.py world:=; "
                          f"docs/world.md)")
    out = []
    names: list[str] = []
    for i, entry in enumerate(robots):
        params, info = _one_robot(world, entry, path, i)
        if info.name in names:
            raise ConfigError(f"{_where(path)}: 'world.robots[{i}].name': two robots named "
                              f"{info.name!r}: give each robot a name of its own (its joints "
                              f"and frames are prefixed '<name>/')")
        names.append(info.name)
        out.append((params, info))
    if len(out) > 1:
        from .multirobot import check_part_config
        for i, (params, info) in enumerate(out[1:], start=1):
            check_part_config(info.name, i, load_config(params), load_config(out[0][0]),
                              where=f"{_where(path)}: 'world.robots[{i}]' ({info.name!r})")
    return out


def _sleep(value, path: Path) -> dict[str, Any]:
    """``world.sleep``: ``true`` / ``false``, or a mapping of ``enabled`` (default true: a
    mapping asks for sleeping), ``speed`` (m/s and rad/s) and ``time`` (s) ->
    ``objects.sleep``, ``objects.sleep_speed``, ``objects.sleep_time``."""
    if isinstance(value, bool):
        return {"objects.sleep": value}
    _known(_mapping(value, "world.sleep", path), tuple(SLEEP_KEYS), "world.sleep", path)
    return {"objects.sleep": True, **{SLEEP_KEYS[k]: v for k, v in value.items()}}


def _one_robot(world: Mapping, entry, path: Path, index: int
               ) -> tuple[dict[str, Any], RobotInfo]:
    """One robot's parameters (the world's keys on top) and its :class:`RobotInfo`."""
    origin: dict[str, str] = {}
    params, info = _robot(entry, path, origin, index)
    for k in WORLD_NAMES:
        if k in world:
            params[k] = world[k]
            origin[k] = f"world.{k}"
    for group in ("ground", "terrain", "contact"):
        if group in world:
            flat = _group(world[group], group, f"world.{group}", path)
            if isinstance(flat.get("terrain.heightfield"), str) and flat["terrain.heightfield"]:
                flat["terrain.heightfield"] = _resolve(
                    flat["terrain.heightfield"], f"{_where(path)}: 'world.terrain.heightfield'",
                    path.parent)
            params.update(flat)
            origin.update({k: f"world.{k}" for k in flat})
    params = {k: v for k, v in params.items()
              if not k.startswith("objects.") or k.startswith("objects.sleep")}
    params.update(_objects(world.get("objects", []), path))
    if "sleep" in world:
        params.update(_sleep(world["sleep"], path))
        origin.update({k: f"world.sleep.{n}" for n, k in SLEEP_KEYS.items()})
    origin.update(dict.fromkeys((k for k in params if k.startswith("objects.")
                                 and not k.startswith("objects.sleep")), "world.objects"))
    try:
        load_config(params)
    except ConfigError as e:
        named = re.search(r"parameter '([^']+)'", str(e))
        where = origin.get(named[1]) if named else None
        raise ConfigError(f"{_where(path)}: {e}{_set_at(where)}") from None
    return params, replace(info, origin=dict(origin))


def _set_at(where: str | None) -> str:
    """' (set at KEY PATH)' (or the robot file's place) for an error message; '' if unknown."""
    if not where:
        return ""
    return f" (set at {where})" if where.startswith("the robot file") else f" (set at '{where}')"


def locate_robot_error(e: Exception, robots) -> Exception | None:
    """An error of :meth:`~wb_sim.Simulator.from_robots` that names a robot ("robot 'b'
    (robots[1]): ... parameter 'ft_sensors.joints' ...", found building the simulator: a
    sensor's joint or frame its model lacks) located in the world file of ``robots``
    (:func:`load_world_robots`'s): the same error with the file and the key path where the
    parameter was set; None for another error."""
    m = re.match(r"robot '[^']*' \(robots\[(\d+)\]\): ", str(e))
    if m is None or int(m[1]) >= len(robots):
        return None
    info = robots[int(m[1])][1]
    named = re.search(r"parameter '([^']+)'", str(e))
    where = info.origin.get(named[1]) if named else None
    return type(e)(f"{_where(info.world_file)}: {e}{_set_at(where)}")


def params_document(params: Mapping[str, Any], info: RobotInfo) -> dict[str, Any]:
    """A ROS 2 parameter file's document of a world (``wb_sim: ros__parameters:`` nested,
    each core value typed as its parameter declares it, the defaults left out; and the
    example controller's ``wb_sim_pd_controller`` gains): what ``wb_sim_run --world`` and
    ``sim.launch.py world:=`` hand to the node in place of a robot file."""
    pose_fields = {p.key: p for p in POSE_PARAMETERS}
    out: dict[str, Any] = {}
    surfaces = set(params.get("contact_surfaces", ()))
    for k, v in params.items():
        p = PARAMETER_BY_KEY.get(k)
        head, _, rest = k.partition(".")
        if p is None and head in surfaces:
            p = SURFACE_PARAMETER_BY_FIELD.get(rest)
        if p is None and head == "poses":
            p = pose_fields.get(rest.partition(".")[2])
        if p is not None:
            v = p.coerce(v, k)
            v = _plain(v)
            if p.key == k and v == _plain(p.default_value) and k != "urdf_path":
                continue
        node = out
        parts = k.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = v
    if info.controller not in ("pd", "none", PD_FACTORY) and info.controller_params:
        import yaml
        out.setdefault("controller", {})["params"] = yaml.safe_dump(
            dict(info.controller_params), default_flow_style=True, width=10**6).strip()
    doc: dict[str, Any] = {"wb_sim": {"ros__parameters": out}}
    if info.controller in ("pd", PD_FACTORY):
        doc["wb_sim_pd_controller"] = {"ros__parameters": {
            k: v if isinstance(v, (int, float)) else list(v)
            for k, v in info.controller_params.items()}}
    return doc


def pd_controller_document(info: RobotInfo, namespace: str = "") -> dict[str, Any]:
    """The example controller's parameter file document of a robot (its ``kp``, ``kd``),
    for the controller node ``<namespace>/wb_sim_pd_controller``."""
    key = f"{namespace.rstrip('/')}/wb_sim_pd_controller" if namespace else \
        "wb_sim_pd_controller"
    return {key: {"ros__parameters": {
        k: v if isinstance(v, (int, float)) else list(v)
        for k, v in info.controller_params.items() if k in ("kp", "kd")}}}


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def write_params_file(params: Mapping[str, Any], info: RobotInfo, out: str | Path) -> Path:
    """:func:`params_document` written to ``out`` (YAML); returns its path."""
    import yaml
    out = Path(out)
    out.write_text(f"# generated by wb_sim from the world file {info.world_file}\n"
                   + yaml.safe_dump(params_document(params, info), sort_keys=False))
    return out


def controller_loop(sim, info: RobotInfo):
    """The world's controller closing the loop headless (:class:`~wb_sim.control.ControllerLoop`),
    or None for ``controller: none`` (zero torques)."""
    from .control import ControllerLoop
    if info.controller == "none":
        return None
    ref = PD_FACTORY if info.controller == "pd" else info.controller
    return ControllerLoop(sim, ref, dict(info.controller_params),
                          key="world.robots[0].controller")


def controller_loops(sim, infos):
    """Several robots' controllers closing the loop headless in one physics
    (:class:`~wb_sim.control.RobotsLoop`): robot k's (``infos[k]``, ``pd`` or
    ``module:factory``) built on its own model and reading its slices
    (:class:`~wb_sim.control.RobotView` of ``sim.robots[k]``); ``none``: zero torques."""
    from .control import ControllerLoop, RobotView, RobotsLoop
    loops = []
    for k, (info, part) in enumerate(zip(infos, sim.robots)):
        if info.controller == "none":
            loops.append(None)
            continue
        ref = PD_FACTORY if info.controller == "pd" else info.controller
        loops.append(ControllerLoop(RobotView(sim, part), ref, dict(info.controller_params),
                                    key=f"world.robots[{k}].controller"))
    return RobotsLoop(sim, loops)
