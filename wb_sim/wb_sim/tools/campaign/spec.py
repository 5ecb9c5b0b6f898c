"""A campaign file (or dict) -> a validated :class:`Campaign`: its fixed spec (plain data, sent
to the workers) and its cases (the grid and the seeded random draws), each with the hash the
cache keys on. The file format is in the package's docstring (:mod:`wb_sim.tools.campaign`).
Every error is a :class:`~wb_sim.ConfigError` naming the key, with close names."""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ...config import (PARAMETER_BY_KEY, SURFACE_PARAMETER_BY_FIELD, load_config, read_yaml,
                       read_yaml_params)
from ...control import import_callable
from ...errors import ConfigError
from ...paths import robot_config_file
from ..ab import BASE_TOLERANCE_M, JOINT_TOLERANCE_RAD
from .case import METRICS, ab_case, case_config

TOP_KEYS = ("robot", "duration_s", "seed", "controller", "pushes", "set", "grid", "random",
            "metrics", "custom_metrics", "record", "plots", "max_cases", "ab", "ab_tolerances")
AB_TOLERANCE_KEYS = ("base_m", "joint_rad")
PUSH_FIELDS = ("time_s", "link", "force", "torque", "magnitude", "direction_deg", "duration_s")
SPECIAL_KEYS = ("command_delay_steps", "sensor_delay_steps")
#: the default of max_cases (the grid's combinations times random.samples), checked before any
#: case is expanded: an 8-million-case grid or 1e8 samples hung the load; and its ceiling
MAX_CASES = 10_000
MAX_CASES_CEILING = 1_000_000
#: the longest duration_s of a case (a day of simulated time: 86.4 million steps at 1 kHz)
MAX_DURATION_S = 86_400.0
#: the most memory a case's kept trajectory may take (the configuration, the applied and the
#: commanded torques, the surfaces' forces of every step, for its metrics and custom metrics):
#: about 45 min of the humanoid at 1 kHz; a longer run is split into cases
MAX_TRACE_BYTES = 2 * 1024**3


def _version() -> str:
    from ... import __version__
    return __version__


@dataclass
class Campaign:
    """A validated campaign: the fixed spec and its cases (see :func:`load_campaign`)."""
    spec: dict  #: plain data, sent to the workers
    cases: list  #: [{"index", "seed", "params", "hash"}]
    swept: list  #: keys varied by grid or random, in column order
    source: str  #: where it came from (file path or '<dict>')


def _err(where: str, key: str, why: str) -> ConfigError:
    return ConfigError(f"campaign {where}: '{key}': {why}")


def _did_you_mean(key: str, known) -> str:
    close = difflib.get_close_matches(key, list(known), n=3)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def _number(where, key, x, *, integer=False, positive=False, nonneg=False):
    ok = isinstance(x, (int, float)) and not isinstance(x, bool)
    if integer:
        ok = ok and float(x) == int(x)
    if not ok or not math.isfinite(float(x)):
        raise _err(where, key, f"expected {'an integer' if integer else 'a number'}, got {x!r}")
    if positive and not x > 0:
        raise _err(where, key, f"must be > 0, got {x!r}")
    if nonneg and not x >= 0:
        raise _err(where, key, f"must be >= 0, got {x!r}")
    return int(x) if integer else float(x)


def _vector3(where, key, x):
    if (not isinstance(x, (list, tuple)) or len(x) != 3
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x)):
        raise _err(where, key, f"expected a list of 3 numbers, got {x!r}")
    return [float(v) for v in x]


def _import_callable(where: str, key: str, ref: str) -> Callable:
    try:
        return import_callable(ref, key)
    except ConfigError as e:  # said again with the campaign's place
        raise _err(where, key, str(e).split(": ", 1)[1]) from None


def _robot_params(where: str, robot: Any) -> tuple[dict, dict, str]:
    """(flat simulator parameters, PD gains, config path) of the campaign's robot."""
    from ... import config_path
    if not isinstance(robot, str) or not robot:
        raise _err(where, "robot", f"expected a ready robot name or a YAML path, got {robot!r}")
    if robot.endswith((".yaml", ".yml")) or os.sep in robot:
        path = Path(robot)
        if not path.is_absolute() and where.startswith("'"):
            path = Path(where.strip("'")).parent / path
    else:
        path = config_path(robot)
    params = read_yaml_params(path)
    try:
        gains = read_yaml_params(path, node_name="wb_sim_pd_controller")
    except ConfigError:
        gains = {}
    return params, gains, str(path)


def _link_names(params: Mapping[str, Any]) -> list[str]:
    return [e.get("name") for e in ET.fromstring(_urdf_text(params)).iter("link")]


def _urdf_text(params: Mapping[str, Any]) -> str:
    """The URDF the simulator will build (a .xacro expanded with xacro.args)."""
    from ...robot import expand_xacro, resolve_urdf_path
    if params.get("robot_description"):
        return params["robot_description"]
    path = resolve_urdf_path(params["urdf_path"])
    if path.suffix == ".xacro":
        return expand_xacro(path, load_config(params).xacro.mappings())
    return path.read_text()


def _check_value(where: str, key: str, value: Any, ctx: dict) -> Any:
    """Validate one campaign parameter value (a key of set / grid / random); returns it as
    plain data (floats, ints, lists of floats, strings)."""
    head, _, rest = key.partition(".")
    if key in SPECIAL_KEYS:
        return _number(where, key, value, integer=True, nonneg=True)
    if head in ("mass_scale", "com_offset") and rest:
        if rest not in ctx["links"]:
            raise _err(where, key, f"unknown link '{rest}'" + _did_you_mean(rest, ctx["links"]))
        if head == "mass_scale":
            return _number(where, key, value, positive=True)
        return _vector3(where, key, value)
    if head == "pushes":
        idx, _, field = rest.partition(".")
        if not idx.isdigit() or int(idx) >= len(ctx["pushes"]):
            raise _err(where, key, f"no push number '{idx}' (the campaign has "
                                   f"{len(ctx['pushes'])} pushes, numbered from 0)")
        if field not in PUSH_FIELDS:
            raise _err(where, key, f"unknown push field '{field}'" +
                       _did_you_mean(field, PUSH_FIELDS))
        return _push_field(where, key, field, value, ctx)
    if head == "controller" and rest:
        if isinstance(value, bool) or not isinstance(value, (int, float, str, list)):
            raise _err(where, key, f"expected a number, string or list, got {value!r}")
        return value
    surfaces = ctx["surfaces"]
    if key in PARAMETER_BY_KEY or (head in surfaces and rest in SURFACE_PARAMETER_BY_FIELD):
        if key in ("urdf_path", "robot_description", "contact_surfaces", "floating_base"):
            raise _err(where, key, "the robot's structure cannot vary within a campaign "
                                   "(use mass_scale.<link> / com_offset.<link>)")
        if isinstance(value, (list, tuple)):
            return [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                    for v in value]
        return value  # load_config checks type and range, per case
    known = (list(PARAMETER_BY_KEY) + [f"{s}.{f}" for s in surfaces for f in SURFACE_PARAMETER_BY_FIELD]
             + list(SPECIAL_KEYS) + [f"mass_scale.{n}" for n in ctx["links"]]
             + [f"com_offset.{n}" for n in ctx["links"]]
             + [f"pushes.{i}.{f}" for i in range(len(ctx["pushes"])) for f in PUSH_FIELDS])
    raise _err(where, key, "unknown parameter" + _did_you_mean(key, known))


def _push_field(where, key, field, value, ctx):
    if field == "link":
        if not isinstance(value, str) or value not in ctx["frames"]:
            raise _err(where, key, f"unknown link {value!r}" +
                       _did_you_mean(str(value), ctx["frames"]))
        return value
    if field in ("force", "torque"):
        return _vector3(where, key, value)
    if field in ("duration_s",):
        return _number(where, key, value, positive=True)
    if field == "time_s":
        return _number(where, key, value, nonneg=True)
    if field == "magnitude":
        return _number(where, key, value, nonneg=True)
    return _number(where, key, value)  # direction_deg


def _distribution(where: str, key: str, d: Any):
    """{'uniform': [lo, hi]} or {'normal': [mean, std]}; bounds may be lists (vectors)."""
    if not isinstance(d, Mapping) or len(d) != 1:
        raise _err(where, key, f"expected {{uniform: [low, high]}} or {{normal: [mean, std]}}, "
                               f"got {d!r}")
    (kind, args), = d.items()
    if kind not in ("uniform", "normal"):
        raise _err(where, key, f"unknown distribution '{kind}'" +
                   _did_you_mean(str(kind), ("uniform", "normal")))
    if not isinstance(args, (list, tuple)) or len(args) != 2:
        raise _err(where, key, f"{kind}: expected two values [{'low, high' if kind == 'uniform' else 'mean, std'}], got {args!r}")
    try:
        a, b = (np.asarray(x, dtype=float) for x in args)
    except (TypeError, ValueError):
        raise _err(where, key, f"{kind}: expected numbers or lists of numbers, got {args!r}") from None
    if a.shape != b.shape or a.ndim > 1 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise _err(where, key, f"{kind}: both values must be finite and of the same length")
    if kind == "uniform" and np.any(b < a):
        raise _err(where, key, "uniform: low must be <= high")
    if kind == "normal" and np.any(b < 0):
        raise _err(where, key, "normal: std must be >= 0")
    return kind, a, b


def load_campaign(source: str | Path | Mapping, *, robot: str | None = None,
                  config: str | Path | None = None, ab: Mapping | None = None) -> Campaign:
    """Read and validate a campaign (a YAML path or a dict) and expand its cases.

    ``robot`` (``wb_sim_batch --robot``): a ready configuration's name or the path of a
    robot's YAML file (:func:`wb_sim.paths.robot_config_file`, the meaning of ``--robot`` in
    ``python -m wb_sim`` and ``wb_sim_run``), in place of the file's ``robot``; ``config``
    (``--config``): a YAML parameter file loaded over the robot's, its keys win (its
    ``wb_sim_pd_controller`` gains too), as in those two; the campaign's ``set``, ``grid``
    and ``random`` apply over both. ``ab`` (``--ab KEY:=VALUE``): the A/B switch's values,
    over the file's ``ab``: every case runs twice, as given (A) and with them over it (B).

    Raises :class:`~wb_sim.ConfigError` naming the bad key (with close names)."""
    if isinstance(source, Mapping):
        doc, where, base_dir = dict(source), "<dict>", None
    else:
        path = Path(source)
        doc = read_yaml(path, "campaign file")  # the parameter files' reader and errors
        where, base_dir = f"'{path}'", path.parent
        if not isinstance(doc, Mapping):
            raise ConfigError(f"campaign file '{path}': expected a mapping of keys "
                              f"({', '.join(TOP_KEYS)})")
    for k in doc:
        if k not in TOP_KEYS:
            raise _err(where, str(k), "unknown campaign key" + _did_you_mean(str(k), TOP_KEYS))
    if robot is not None:  # --robot: relative to the working directory, as everywhere
        robot = str(robot_config_file(robot))
    else:
        if "robot" not in doc:
            raise _err(where, "robot", "required (a ready robot name such as 'humanoid', or a "
                                       "YAML parameter file; or wb_sim_batch --robot)")
        robot = doc["robot"]
        if base_dir is not None and isinstance(robot, str) and \
                robot.endswith((".yaml", ".yml")) and not Path(robot).is_absolute():
            robot = str(base_dir / robot)
    params, gains, robot_path = _robot_params(where, robot)
    if config is not None:  # --config: an overlay, its keys win
        params.update(read_yaml_params(config))
        try:
            gains.update(read_yaml_params(config, node_name="wb_sim_pd_controller"))
        except ConfigError as e:
            if "has no 'wb_sim_pd_controller: ros__parameters:' block" not in str(e):
                raise
    duration = _number(where, "duration_s", doc.get("duration_s", 5.0), positive=True)
    if duration > MAX_DURATION_S:
        raise _err(where, "duration_s", f"{duration:g} s per case is more than {MAX_DURATION_S:g} s "
                                        f"(a day of simulated time); split the run")
    max_cases = _number(where, "max_cases", doc.get("max_cases", MAX_CASES), integer=True,
                        positive=True)
    if max_cases > MAX_CASES_CEILING:
        raise _err(where, "max_cases", f"at most {MAX_CASES_CEILING}, got {max_cases}")
    seed = _number(where, "seed", doc.get("seed", 0), integer=True, nonneg=True)

    # controller
    ctrl = doc.get("controller", "pd")
    if isinstance(ctrl, str):
        ctrl = {"callable": ctrl}
    if not isinstance(ctrl, Mapping):
        raise _err(where, "controller", f"expected 'pd', 'module:callable' or a mapping, "
                                        f"got {ctrl!r}")
    for k in ctrl:
        if k not in ("callable", "rate_hz", "params"):
            raise _err(where, f"controller.{k}", "unknown key" +
                       _did_you_mean(str(k), ("callable", "rate_hz", "params")))
    cref = ctrl.get("callable", "pd")
    if cref != "pd":
        _import_callable(where, "controller.callable", cref)
    rate = _number(where, "controller.rate_hz", ctrl.get("rate_hz", 0.0), nonneg=True)
    cparams = ctrl.get("params", {}) or {}
    if not isinstance(cparams, Mapping):
        raise _err(where, "controller.params", f"expected a mapping, got {cparams!r}")
    if cref == "pd":
        for k in cparams:
            if k not in ("kp", "kd"):
                raise _err(where, f"controller.params.{k}", "the built-in PD takes kp and kd")
        cparams = {"kp": gains.get("kp", 100.0), "kd": gains.get("kd", 5.0), **cparams}

    # structure the value checks need
    try:
        cfg = load_config(params)
    except ConfigError as e:
        raise ConfigError(f"campaign {where}: robot '{robot_path}': {e}") from None
    links = _link_names(params)
    from ...robot import RobotModel
    import warnings
    with warnings.catch_warnings():  # what the model says, each case's simulator says again
        warnings.simplefilter("ignore")
        model = RobotModel.from_urdf(cfg.urdf_path, cfg.robot_description, cfg.floating_base,
                                     mimic=cfg.joints.mimic, max_joints=cfg.max_joints)
    steps = int(round(duration * cfg.physics_rate_hz))
    nq = model.model.nq + 7 * len(cfg.objects.names)
    trace = steps * (8 * (nq + 3 * len(model.joint_names) + len(cfg.surfaces) + 1) + 1)
    if trace > MAX_TRACE_BYTES:
        raise _err(where, "duration_s", f"{duration:g} s at {cfg.physics_rate_hz:g} Hz keeps "
                                        f"{trace / 2**30:.1f} GiB of trajectory per case (its "
                                        f"metrics'), more than {MAX_TRACE_BYTES / 2**30:g} GiB; "
                                        f"split the run into shorter cases")
    pushes_in = doc.get("pushes", []) or []
    if not isinstance(pushes_in, list):
        raise _err(where, "pushes", f"expected a list of pushes, got {pushes_in!r}")
    ctx = {"links": links, "frames": model.frame_names(),
           "surfaces": tuple(s.name for s in cfg.surfaces), "pushes": pushes_in}
    pushes = []
    for i, p in enumerate(pushes_in):
        if not isinstance(p, Mapping):
            raise _err(where, f"pushes.{i}", f"expected a mapping, got {p!r}")
        out = {}
        for k, v in p.items():
            out[k] = _check_value(where, f"pushes.{i}.{k}", v, ctx)
        pushes.append(out)

    def section(name):
        s = doc.get(name, {}) or {}
        if not isinstance(s, Mapping):
            raise _err(where, name, f"expected a mapping of parameter: value, got {s!r}")
        return s

    fixed = {k: _check_value(where, k, v, ctx)
             for k, v in section("set").items()}
    ab_values = {**section("ab"), **dict(ab or {})}
    ab_fixed = {k: _check_value(where, k, v, ctx) for k, v in ab_values.items()}
    tol = section("ab_tolerances")
    for k in tol:
        if k not in AB_TOLERANCE_KEYS:
            raise _err(where, f"ab_tolerances.{k}", "unknown key" +
                       _did_you_mean(str(k), AB_TOLERANCE_KEYS))
    if tol and not ab_fixed:
        raise _err(where, "ab_tolerances", "given without 'ab' (the values of run B)")
    ab_tol = {"base_m": _number(where, "ab_tolerances.base_m",
                                tol.get("base_m", BASE_TOLERANCE_M), positive=True),
              "joint_rad": _number(where, "ab_tolerances.joint_rad",
                                   tol.get("joint_rad", JOINT_TOLERANCE_RAD), positive=True)}
    grid = {}
    for k, values in section("grid").items():
        if not isinstance(values, list) or not values:
            raise _err(where, f"grid.{k}", f"expected a non-empty list of values, got {values!r}")
        grid[k] = [_check_value(where, k, v, ctx) for v in values]
    rnd = section("random")
    n_grid = math.prod(len(v) for v in section("grid").values()
                       if isinstance(v, list)) if section("grid") else 1
    n_samples = rnd.get("samples", 1) if isinstance(rnd, Mapping) and rnd else 1
    if isinstance(n_samples, (int, float)) and not isinstance(n_samples, bool) \
            and math.isfinite(n_samples) and n_grid * max(n_samples, 1) > max_cases:
        raise _err(where, "random.samples" if n_grid <= max_cases else "grid",
                   f"{n_grid} grid point(s) x {int(n_samples)} random sample(s) = "
                   f"{int(n_grid * n_samples)} cases, more than max_cases = {max_cases}; "
                   f"raise the campaign's top-level key 'max_cases' (at most "
                   f"{MAX_CASES_CEILING}) if you mean it")
    draws: list[dict] = [{}]
    rkeys = []
    if rnd:
        for k in rnd:
            if k not in ("samples", "seed", "params"):
                raise _err(where, f"random.{k}", "unknown key" +
                           _did_you_mean(str(k), ("samples", "seed", "params")))
        n = _number(where, "random.samples", rnd.get("samples", 1), integer=True, positive=True)
        rseed = _number(where, "random.seed", rnd.get("seed", seed), integer=True, nonneg=True)
        dists = rnd.get("params", {}) or {}
        if not isinstance(dists, Mapping) or not dists:
            raise _err(where, "random.params", "expected a mapping of parameter: distribution")
        parsed = {k: _distribution(where, f"random.params.{k}", d) for k, d in dists.items()}
        rng = np.random.default_rng(rseed)
        draws = []
        for _ in range(n):
            d = {}
            for k, (kind, a, b) in parsed.items():
                x = np.asarray(rng.uniform(a, b) if kind == "uniform" else rng.normal(a, b))
                x = x.tolist() if x.ndim else float(x)
                if k in SPECIAL_KEYS:
                    x = int(round(x[0] if isinstance(x, list) else x))
                d[k] = _check_value(where, k, x, ctx)
            draws.append(d)
        rkeys = list(parsed)
    both = set(grid) & set(rkeys)
    if both:
        raise _err(where, sorted(both)[0], "is in both grid and random")

    metrics = doc.get("metrics", list(METRICS))
    if not isinstance(metrics, list):
        raise _err(where, "metrics", f"expected a list of metric names, got {metrics!r}")
    for m in metrics:
        if m not in METRICS:
            raise _err(where, "metrics", f"unknown metric {m!r}" + _did_you_mean(str(m), METRICS))
    custom = doc.get("custom_metrics", {}) or {}
    if not isinstance(custom, Mapping):
        raise _err(where, "custom_metrics", "expected a mapping of name: 'module:callable'")
    for name, ref in custom.items():
        _import_callable(where, f"custom_metrics.{name}", ref)
    for k in ("record", "plots"):
        if not isinstance(doc.get(k, k == "plots"), bool):
            raise _err(where, k, f"expected true or false, got {doc[k]!r}")

    urdf_sha = hashlib.sha256(_urdf_text(params).encode()).hexdigest()
    spec = {"robot": robot_path, "params": params, "duration_s": duration,
            "controller": {"callable": cref, "rate_hz": rate, "params": dict(cparams)},
            "pushes": pushes, "set": fixed, "metrics": list(metrics),
            "custom_metrics": dict(custom), "record": bool(doc.get("record", False)),
            "plots": bool(doc.get("plots", True)), "urdf_sha256": urdf_sha}
    if ab_fixed:  # only then: the hashes of campaigns without it stay as they were
        spec["ab"] = {"set": ab_fixed, **ab_tol}
    fixed_part = {k: v for k, v in spec.items() if k not in ("record", "plots", "robot")}
    base_hash = json.dumps(fixed_part, sort_keys=True, default=repr)

    cases = []
    gkeys = list(grid)
    for gvals in itertools.product(*(grid[k] for k in gkeys)):
        for d in draws:
            idx = len(cases)
            cp = dict(zip(gkeys, gvals))
            cp.update(d)
            case = {"index": idx, "seed": seed + idx, "params": cp}
            case_config(spec, case, where)  # validates the simulator parameters of the case
            if ab_fixed:  # and those of its run B
                case_config(spec, ab_case(spec, case), where)
            for i, p in enumerate(pushes):
                t0 = cp.get(f"pushes.{i}.time_s", p.get("time_s", 0.0))
                if t0 >= duration:
                    raise _err(where, f"pushes.{i}.time_s", f"{t0:g} s is not before the end of "
                                                            f"the case (duration_s {duration:g})")
            case["hash"] = hashlib.sha256(json.dumps(
                [_version(), base_hash, cp, case["seed"]], sort_keys=True,
                default=repr).encode()).hexdigest()[:20]
            cases.append(case)
    return Campaign(spec=spec, cases=cases, swept=gkeys + rkeys, source=where)
