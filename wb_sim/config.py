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

from .contact import PARAMETERS as CONTACT_PARAMETERS
from .errors import ConfigError
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
          lo=1.0, hi=1.0e6),
    Param("gravity", "floats", [0.0, 0.0, -9.81], "m/s^2", "Gravity in the world frame.",
          length=3),
    # --- ground
    Param("ground.height", "float", 0.0, "m",
          "The ground plane passes through the world point (0, 0, height)."),
    Param("ground.normal", "floats", [0.0, 0.0, 1.0], "", "Unit normal of the ground plane "
          "(world frame), pointing out of the ground.", length=3, check=_unit_vector),
    # --- contact: the models' groups
    *CONTACT_PARAMETERS,
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


class SimConfig(Group):
    """The validated parameter set (build it with :func:`load_config`): the keys
    without a dot as attributes (``config.gravity``), each group as a
    :class:`~wb_sim.parameters.Group` (``config.contact.stiffness``,
    ``config.ground.normal``, normalized), and ``surfaces``, a tuple of
    :class:`SurfaceConfig`."""

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
    return flat


def _foreign_key(key: str) -> bool:
    """A key of the ROS node that shares the ``wb_sim: ros__parameters:`` block (its
    declarations, :mod:`wb_sim.ros.parameters`, import no rclpy)."""
    from .ros.parameters import is_node_key
    return is_node_key(key)


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

    known = list(_PARAM_BY_KEY) + [f"{s}.{f}" for s in surface_names for f in _SURFACE_BY_FIELD]
    for key in flat:
        if key in _PARAM_BY_KEY:
            continue
        head, _, field = key.partition(".")
        if head in surface_names and field in _SURFACE_BY_FIELD:
            continue
        if not _foreign_key(key):
            raise unknown_key_error(key, known)

    surfaces = tuple(_surface(name, flat) for name in surface_names)
    n_points = sum(s.grid[0] * s.grid[1] if s.shape == "box" else
                   len(s.points) if s.shape == "points" else 1 for s in surfaces)
    if n_points > MAX_CONTACT_POINTS:
        raise ConfigError(f"parameter 'contact_surfaces': {n_points} contact points in all is "
                          f"more than {MAX_CONTACT_POINTS}; use coarser grids")

    if bool(values["urdf_path"]) == bool(values["robot_description"]):
        raise ConfigError(
            "exactly one of parameters 'urdf_path' and 'robot_description' must be set")
    jn, jp = values["initial.joint_names"], values["initial.joint_positions"]
    if len(jn) != len(jp):
        raise ConfigError(
            f"parameter 'initial.joint_positions' has {len(jp)} entries but "
            f"'initial.joint_names' has {len(jn)}")
    if len(set(jn)) != len(jn):
        raise ConfigError("parameter 'initial.joint_names': names must be unique")

    normal = np.asarray(values["ground.normal"])
    values["ground.normal"] = tuple((normal / np.linalg.norm(normal)).tolist())
    top: dict[str, Any] = {g: {} for g in _GROUPS}
    for key, v in values.items():
        head, _, field = key.partition(".")
        if field:
            top[head][field] = v
        else:
            top[key] = v
    return SimConfig({**{k: Group(v) if k in _GROUPS else v for k, v in top.items()},
                      "surfaces": surfaces})


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
    """The README's parameter table, generated from :data:`PARAMETERS`."""
    return table_markdown([(p.key, p) for p in PARAMETERS]
                          + [(f"S.{p.key}", p) for p in SURFACE_PARAMETERS])
