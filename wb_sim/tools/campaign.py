"""Campaigns: many runs of one scenario over perturbed parameters, into one table.

A campaign file (YAML) says::

    robot: humanoid                # a ready configuration (config/<name>.yaml) or a YAML path
    duration_s: 3.0                # simulated seconds per case
    seed: 0                        # case k gets seed + k (the IMU noise, your controller)
    controller: pd                 # the built-in PD + gravity (gains: the wb_sim_pd_controller
                                   # block of the robot's YAML), or:
    # controller: {callable: "my_pkg.ctrl:make", rate_hz: 200, params: {gain: 3.0}}
    pushes:                        # applied at time_s, in the link's frame, for duration_s
      - {time_s: 1.0, link: pelvis, magnitude: 100.0, direction_deg: 0.0, duration_s: 0.1}
      # or force: [fx, fy, fz] (N), torque: [tx, ty, tz] (N*m)
    set:                           # fixed values, same keys as grid / random
      contact.friction_coefficient: 0.8
    grid:                          # every combination
      pushes.0.magnitude: [50.0, 100.0, 150.0]
      contact.stiffness: [2.0e4, 4.0e4]
    random:                        # seeded draws, for each grid point
      samples: 10
      seed: 1
      params:
        mass_scale.torso: {uniform: [0.8, 1.2]}
        imu.angular_velocity_bias: {normal: [[0, 0, 0], [0.01, 0.01, 0.01]]}
    metrics: [stands, fell, max_tilt_deg]      # default: all built-in metrics
    custom_metrics: {energy: "my_pkg.metrics:energy"}
    record: false                  # per-case recordings (wb_sim.tools.recording, .npz)
    plots: true                    # summary plots (needs matplotlib)

The keys of ``set``, ``grid`` and ``random`` are

* any simulator parameter (``wb_sim.config.PARAMETERS`` and ``<surface>.<field>``);
* ``mass_scale.<link>`` (> 0): the link's mass and rotational inertia times this factor, and
  ``com_offset.<link>`` ([dx, dy, dz], m): its centre of mass moved in the link's frame (the
  simulator's ``perturbation.*`` parameters, which edit the URDF's ``<inertial>`` before the
  build);
* ``command_delay_steps``: the torques computed at step k are applied at step k + n (the
  simulator's ``joints.command_delay_steps``: until then the first command acts);
  ``sensor_delay_steps``: the controller sees the state of step k - n (the simulator's
  ``sensors.delay_steps``: its ``sensed_state`` / ``sensed_imu()``, the initial ones at first);
* ``pushes.<i>.<field>``: a field of the i-th push (``time_s``, ``link``, ``force``, ``torque``,
  ``magnitude``, ``direction_deg``, ``duration_s``); magnitude and direction give a horizontal
  force in the link's frame, ``magnitude * [cos(dir), sin(dir), 0]``;
* ``controller.<name>``: a keyword argument of the controller (``kp``, ``kd`` for the PD).

IMU bias, the delays and the mass / CoM changes are all the simulator's own parameters
(``imu.*_bias``, ``joints.command_delay_steps``, ``sensors.delay_steps``, ``perturbation.*``):
the shorthand keys above only name them per link, and any simulator (the ROS node's too) takes
them.

A controller ``module:callable`` is a factory ``make(sim, case, **params)`` returning a callable
``ctrl(obs) -> torques`` (nj,), called every step, or every ``round(1 / (rate_hz dt))`` steps with
the torques held in between (``rate_hz`` 0: every step). ``obs`` is an :class:`Observation`
(t, q, v, joint positions and velocities, the IMU reading or None), ``case`` a :class:`CaseInfo`.
The modules named must be importable where the cases run (the local pool's workers inherit
``sys.path``; on a Ray cluster, install them on every node). A custom metric
``module:callable`` is called as ``fn(sim, trace)`` after the run and returns a
number or a dict of numbers (columns ``<name>`` or ``<name>.<key>``); ``trace`` holds ``t``
(n+1,), ``q`` (n+1, nq) and ``applied_torques`` (n, nj) of the run.

Every case is a pure function of its parameters, so the table is the same, bit for bit, whatever
the backend (a local process pool, or Ray) and the number of workers. Results are cached in the
output directory by a hash of (wb_sim version, the campaign's fixed parts, the case's parameters
and seed): a campaign run again, or after an interruption, only runs the missing cases.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import hashlib
import itertools
import json
import math
import os
import sys
import time
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..control import CaseInfo, ControllerLoop, Observation, import_callable  # noqa: F401
from ..config import (_PARAM_BY_KEY, _SURFACE_BY_FIELD, load_config, read_yaml,
                      read_yaml_params)
from ..errors import ConfigError, DivergenceError, WbSimError

#: built-in metrics, in table order, with their meaning (README)
METRICS: dict[str, str] = {
    "stands": "wb_sim.tools.stand.StandMonitor's verdict (base drop <= 0.1 m, feet slid <= 5 mm after "
              "0.5 s, no joint saturated > 5 % of the steps) and the run completed",
    "fell": "the base dropped more than 0.1 m below its start, or the run diverged",
    "base_drop_m": "largest drop of the base below its start, m",
    "max_tilt_deg": "largest angle between the base's z axis and the world's vertical, deg",
    "com_deviation_m": "largest horizontal distance of the centre of mass from its start, m",
    "foot_slip_m": "largest horizontal slide of a contact surface's frame after 0.5 s, m",
    "peak_torque_ratio": "largest |commanded torque| / effort limit over joints and steps (the "
                         "commands as the controller gives them, before any delay)",
    "time_saturated_s": "simulated time during which some joint was at its effort limit, s",
    "contact_losses": "times a surface that carried load (contact force > 0.1 % of the weight) "
                      "lost it",
}

TOP_KEYS = ("robot", "duration_s", "seed", "controller", "pushes", "set", "grid", "random",
            "metrics", "custom_metrics", "record", "plots")
PUSH_FIELDS = ("time_s", "link", "force", "torque", "magnitude", "direction_deg", "duration_s")
SPECIAL_KEYS = ("command_delay_steps", "sensor_delay_steps")


def _version() -> str:
    from .. import __version__
    return __version__


# ----------------------------------------------------------------------------
# Campaign file -> cases
# ----------------------------------------------------------------------------


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
    from .. import config_path
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
    from ..config import load_config
    from ..robot import expand_xacro, resolve_urdf_path
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
    if key in _PARAM_BY_KEY or (head in surfaces and rest in _SURFACE_BY_FIELD):
        if key in ("urdf_path", "robot_description", "contact_surfaces", "floating_base"):
            raise _err(where, key, "the robot's structure cannot vary within a campaign "
                                   "(use mass_scale.<link> / com_offset.<link>)")
        if isinstance(value, (list, tuple)):
            return [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                    for v in value]
        return value  # load_config checks type and range, per case
    known = (list(_PARAM_BY_KEY) + [f"{s}.{f}" for s in surfaces for f in _SURFACE_BY_FIELD]
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


def load_campaign(source: str | Path | Mapping) -> Campaign:
    """Read and validate a campaign (a YAML path or a dict) and expand its cases.

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
    if "robot" not in doc:
        raise _err(where, "robot", "required (a ready robot name such as 'humanoid', or a YAML "
                                   "parameter file)")
    robot = doc["robot"]
    if base_dir is not None and isinstance(robot, str) and robot.endswith((".yaml", ".yml")) \
            and not Path(robot).is_absolute():
        robot = str(base_dir / robot)
    params, gains, robot_path = _robot_params(where, robot)
    duration = _number(where, "duration_s", doc.get("duration_s", 5.0), positive=True)
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
    from ..robot import RobotModel
    import warnings
    with warnings.catch_warnings():  # what the model says, each case's simulator says again
        warnings.simplefilter("ignore")
        model = RobotModel.from_urdf(cfg.urdf_path, cfg.robot_description, cfg.floating_base,
                                     mimic=cfg.joints.mimic)
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
    grid = {}
    for k, values in section("grid").items():
        if not isinstance(values, list) or not values:
            raise _err(where, f"grid.{k}", f"expected a non-empty list of values, got {values!r}")
        grid[k] = [_check_value(where, k, v, ctx) for v in values]
    rnd = section("random")
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
            _case_config(spec, case, where)  # validates the simulator parameters of the case
            case["hash"] = hashlib.sha256(json.dumps(
                [_version(), base_hash, cp, case["seed"]], sort_keys=True,
                default=repr).encode()).hexdigest()[:20]
            cases.append(case)
    return Campaign(spec=spec, cases=cases, swept=gkeys + rkeys, source=where)


# ----------------------------------------------------------------------------
# One case
# ----------------------------------------------------------------------------


def _case_values(spec: dict, case: dict) -> dict:
    values = dict(spec["set"])
    values.update(case["params"])
    return values


def _case_config(spec: dict, case: dict, where: str = "") -> tuple[dict, dict, list, dict]:
    """(simulator parameters, special values, pushes, controller params) of a case."""
    values = _case_values(spec, case)
    params = dict(spec["params"])
    special: dict[str, Any] = {"mass_scale": {}, "com_offset": {}}
    pushes = [dict(p) for p in spec["pushes"]]
    cparams = dict(spec["controller"]["params"])
    imu_seed_set = False
    for key, v in values.items():
        head, _, rest = key.partition(".")
        if key == "command_delay_steps":  # the simulator's own (joints.command_delay_steps)
            params["joints.command_delay_steps"] = v
        elif key == "sensor_delay_steps":  # the simulator's own (sensors.delay_steps)
            params["sensors.delay_steps"] = v
        elif head in ("mass_scale", "com_offset"):
            special[head][rest] = v
        elif head == "pushes":
            i, _, field = rest.partition(".")
            pushes[int(i)][field] = v
        elif head == "controller":
            cparams[rest] = v
        else:
            params[key] = v
            imu_seed_set |= key == "imu.seed"
    if not imu_seed_set:
        params["imu.seed"] = case["seed"]
    for head, per in (("mass_scale", 1), ("com_offset", 3)):
        if special[head]:  # the simulator's perturbation.* parameters
            params[f"perturbation.{head}_links"] = list(special[head])
            params[f"perturbation.{head}"] = [float(x) for v in special[head].values()
                                              for x in np.atleast_1d(v)]
    for i, p in enumerate(pushes):
        if "link" not in p:
            raise ConfigError(f"campaign {where}: 'pushes.{i}.link': required")
        if "force" in p and "magnitude" in p:
            raise ConfigError(f"campaign {where}: 'pushes.{i}': give either force or "
                              f"magnitude + direction_deg, not both")
        if "time_s" not in p:
            raise ConfigError(f"campaign {where}: 'pushes.{i}.time_s': required")
    try:
        load_config(params)
    except ConfigError as e:
        raise ConfigError(f"campaign {where}: case {case['index']}: {e}") from None
    return params, special, pushes, cparams


def _make_controller(sim, spec: dict, case: dict, cparams: dict) -> ControllerLoop:
    """The case's controller closing the loop on ``sim`` (:class:`wb_sim.control.ControllerLoop`)."""
    ref = spec["controller"]["callable"]
    if ref == "pd":
        ref = "wb_sim.controllers:pd_gravity"
    info = CaseInfo(index=case["index"], seed=case["seed"], params=_case_values(spec, case))
    return ControllerLoop(sim, ref, cparams, spec["controller"]["rate_hz"], info)


def run_case(task: dict) -> dict:
    """Run one case; returns its table row (a dict). Never raises: a case that cannot
    run has status 'error' and the error text."""
    spec, case = task["spec"], task["case"]
    row = {"case_id": case["index"], "case_hash": case["hash"], "status": "ok", "error": ""}
    t0 = time.perf_counter()
    try:
        row.update(_run(spec, case, task.get("out")))
    except DivergenceError as e:
        row.update(getattr(e, "_partial", {}))
        row["status"], row["error"] = "diverged", str(e)
    except Exception as e:  # a user controller or metric: the campaign goes on
        tb = traceback.extract_tb(e.__traceback__)
        where = f" ({tb[-1].filename}:{tb[-1].lineno})" if tb else ""
        row["status"], row["error"] = "error", f"{type(e).__name__}: {e}{where}"
    row["_wall_s"] = time.perf_counter() - t0
    return row


def _run(spec: dict, case: dict, out: str | None) -> dict:
    import pinocchio as pin

    from .recording import Recorder
    from ..simulator import Simulator
    from .stand import StandMonitor

    params, special, pushes, cparams = _case_config(spec, case)
    sim = Simulator.from_params(params)
    loop = _make_controller(sim, spec, case, cparams)
    dt = sim.dt
    n = int(round(spec["duration_s"] / dt))
    schedule: dict[int, list] = {}
    for p in pushes:
        if "magnitude" in p:
            a = math.radians(p.get("direction_deg", 0.0))
            force = [p["magnitude"] * math.cos(a), p["magnitude"] * math.sin(a), 0.0]
        else:
            force = p.get("force", [0.0, 0.0, 0.0])
        schedule.setdefault(int(round(p["time_s"] / dt)), []).append(
            (p["link"], force, p.get("torque", [0.0, 0.0, 0.0]), p.get("duration_s", dt)))

    rec = Recorder(sim) if spec["record"] and out else None
    monitor = StandMonitor(sim.joint_names, sim.actuation.effort_limit, sim.robot.floating_base)
    limits = np.asarray(sim.actuation.effort_limit, dtype=float)
    inv_limits = np.where(np.isfinite(limits) & (limits > 0), 1.0 / limits, 0.0)
    sat_level = 1.0 - 1e-9 if sim.config.joints.effort_limits else np.inf
    floating = sim.robot.floating_base
    model, data = sim.model, pin.Data(sim.model)
    com0 = pin.centerOfMass(model, data, sim.q)[:2].copy()
    # a surface is loaded while its points' normal forces sum above 0.1 % of the weight
    threshold = 1e-3 * sim.mass * float(np.linalg.norm(sim.config.gravity))
    pts = sim.contact_points
    ns = len(sim.surface_names)
    per_surface = np.zeros((ns, pts.n))
    per_surface[pts.surface_of_point, np.arange(pts.n)] = 1.0
    trace_q = np.empty((n + 1, sim.model.nq))
    trace_tau = np.empty((n, sim.nj))
    trace_q[0] = sim.q

    min_cos_tilt = 1.0
    com_dev = peak = 0.0
    saturated_steps = losses = 0
    loaded = np.zeros(ns, dtype=bool)
    nj = sim.nj
    ratio = np.empty(nj)
    normal = np.empty(ns)

    def metrics(diverged: bool) -> dict:
        verdict = monitor.verdict()
        values = {
            "stands": bool(verdict.stands and not diverged),
            "fell": bool(diverged or (floating and verdict.base_drop > monitor.max_drop)),
            "base_drop_m": float(verdict.base_drop),
            "max_tilt_deg": math.degrees(math.acos(max(-1.0, min(1.0, min_cos_tilt)))),
            "com_deviation_m": float(com_dev),
            "foot_slip_m": float(verdict.foot_slide),
            "peak_torque_ratio": float(peak),
            "time_saturated_s": saturated_steps * dt,
            "contact_losses": int(losses),
        }
        return {m: values[m] for m in spec["metrics"]}

    try:
        for k in range(n):
            for link, force, torque, dur in schedule.get(k, ()):
                sim.apply_external_wrench(link, force, torque, dur)
            tau = loop.torques()  # the controller's, called when due (rate_hz); checked
            sim.step(tau)  # the simulator delays it by joints.command_delay_steps
            trace_tau[k] = sim.applied_torques
            q = sim.q
            trace_q[k + 1] = q
            monitor.watch(sim)
            if rec is not None:
                rec.record(sim)
            if loop.fresh:  # the commands as given (they can exceed the limits)
                np.abs(tau, out=ratio)
                ratio *= inv_limits
                r = float(ratio.max()) if nj else 0.0
                if r > peak:
                    peak = r
            # saturation of what acted in this step (after joints.command_delay_steps)
            np.abs(trace_tau[k], out=ratio)
            ratio *= inv_limits
            if nj and ratio.max() >= sat_level:
                saturated_steps += 1
            if floating:
                qx, qy = q[3], q[4]
                c = 1.0 - 2.0 * (qx * qx + qy * qy)
                if c < min_cos_tilt:
                    min_cos_tilt = c
                com = pin.centerOfMass(model, data, q)
                d = math.hypot(com[0] - com0[0], com[1] - com0[1])
                if d > com_dev:
                    com_dev = d
            if ns:
                # sim._force: the points' forces of the last step, ground coordinates
                # (tangential 1, 2, normal); what contact_wrench_array() maps, 10x cheaper
                f = np.greater(per_surface.dot(sim._force[:, 2], out=normal), threshold)
                if (loaded > f).any():  # loaded before, not now
                    losses += int(np.count_nonzero(loaded > f))
                loaded = f
    except DivergenceError as e:
        e._partial = metrics(True)
        _save_recording(rec, out, case)
        raise
    result = metrics(False)
    trace = {"t": np.arange(n + 1) * dt, "q": trace_q, "applied_torques": trace_tau}
    for name, ref in spec["custom_metrics"].items():
        value = _import_callable("", f"custom_metrics.{name}", ref)(sim, trace)
        if isinstance(value, Mapping):
            result.update({f"{name}.{k}": _plain(v) for k, v in value.items()})
        else:
            result[name] = _plain(value)
    _save_recording(rec, out, case)
    return result


def _plain(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    return float(v)


def _save_recording(rec, out, case) -> None:
    if rec is not None:
        d = Path(out) / "recordings"
        d.mkdir(parents=True, exist_ok=True)
        rec.history().save(d / f"case_{case['index']:05d}_{case['hash']}.npz")


# ----------------------------------------------------------------------------
# The campaign: cache, backends, table, plots
# ----------------------------------------------------------------------------


@dataclass
class CampaignResult:
    """What :func:`run_campaign` did."""
    rows: list  #: one dict per case, sorted by case id (the table)
    table: Path  #: results.csv
    parquet: Path | None  #: results.parquet (when pyarrow is importable)
    plots: list  #: PNG paths
    ran: int  #: cases run now
    cached: int  #: cases taken from the cache
    failed: int  #: cases with status 'error' or 'diverged'
    wall_s: float

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


def _cell(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return json.dumps(list(v))
    return str(v)


def _columns(campaign: Campaign, rows: list) -> list:
    cols = ["case_id", "case_hash", "status", "seed"] + list(campaign.swept)
    extra = []
    for r in rows:
        for k in r:
            if k not in cols and k not in extra and not k.startswith("_") and k != "error":
                extra.append(k)
    metric_cols = [m for m in campaign.spec["metrics"] if m in extra]
    others = [k for k in extra if k not in metric_cols]
    return cols + metric_cols + others + ["error"]


def _write_table(campaign: Campaign, rows: list, out: Path) -> tuple[Path, Path | None]:
    cols = _columns(campaign, rows)
    path = out / "results.csv"
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([_cell(r.get(c, "")) for c in cols])
    os.replace(tmp, path)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return path, None
    data = {c: [r.get(c) if not isinstance(r.get(c), (list, tuple)) else json.dumps(r.get(c))
                for r in rows] for c in cols}
    pq.write_table(pa.table(data), out / "results.parquet")
    return path, out / "results.parquet"


def _tasks(campaign: Campaign, out: Path) -> tuple[list, dict]:
    """(tasks still to run, {case index: cached row})."""
    cache = out / "cases"
    cache.mkdir(parents=True, exist_ok=True)
    todo, done = [], {}
    for case in campaign.cases:
        f = cache / f"{case['hash']}.json"
        if f.is_file():
            try:
                row = json.loads(f.read_text())
                if row.get("case_hash") == case["hash"]:
                    row["case_id"] = case["index"]
                    done[case["index"]] = row
                    continue
            except (OSError, ValueError):
                pass  # a torn file: run the case again
        todo.append({"spec": campaign.spec, "case": case, "out": str(out)})
    return todo, done


def _store(out: Path, case: dict, row: dict) -> None:
    if row["status"] == "error":
        return  # not a result of the physics: run it again next time
    f = out / "cases" / f"{case['hash']}.json"
    tmp = f.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: v for k, v in row.items() if not k.startswith("_")}))
    os.replace(tmp, f)


def _local(tasks: list, workers: int):
    """Yield (task, row) as the cases finish, on a local process pool."""
    import concurrent.futures as cf
    import multiprocessing as mp
    if workers == 1 and os.environ.get("WB_SIM_CAMPAIGN_INLINE") == "1":
        for t in tasks:  # no pool (debugging)
            yield t, run_case(t)
        return
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
        futures = {ex.submit(run_case, t): t for t in tasks}
        try:
            for fut in cf.as_completed(futures):
                yield futures[fut], fut.result()
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise


def _ray(tasks: list, workers: int | None, address: str | None):
    """Yield (task, row) as the cases finish, on Ray (an existing cluster at ``address``,
    else a local instance with ``workers`` CPUs)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("the Ray backend needs Ray: pip install ray") from None
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = workers or os.cpu_count()
        ray.init(**kwargs)
        started = True
    try:
        remote = ray.remote(num_cpus=1)(run_case)
        pending = {remote.remote(t): t for t in tasks}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                yield pending.pop(ref), ray.get(ref)
    finally:
        if started:
            ray.shutdown()


def run_campaign(campaign: str | Path | Mapping | Campaign, backend: str = "local",
                 workers: int | None = None, out: str | Path | None = None,
                 address: str | None = None, progress: bool = True,
                 plots: bool | None = None) -> CampaignResult:
    """Run every case of a campaign (a YAML path, a dict or a :class:`Campaign`) and write
    ``out``/results.csv (and .parquet with pyarrow), ``out``/cases/ (the cache),
    ``out``/recordings/ (``record: true``) and ``out``/plots/ (``plots: true``, matplotlib).

    ``backend``: 'local' (a process pool of ``workers``, default all cores) or 'ray'
    (``address`` of an existing cluster, else a local instance). Raises
    :class:`~wb_sim.ConfigError` for a bad campaign, before running anything."""
    from .progress import Progress
    if not isinstance(campaign, Campaign):
        if out is None and not isinstance(campaign, Mapping):
            out = Path(f"{Path(campaign).stem}_results")
        campaign = load_campaign(campaign)
    if out is None:
        raise ConfigError("run_campaign: give 'out', the output directory")
    if backend not in ("local", "ray"):
        raise ConfigError(f"unknown backend '{backend}'; choose 'local' or 'ray'")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ConfigError(f"workers must be a positive integer, got {workers!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    todo, rows = _tasks(campaign, out)
    cached = len(rows)
    n = len(campaign.cases)
    dur = campaign.spec["duration_s"]
    failed_now = 0
    bar = Progress(n * dur, label=f"campaign ({n} cases)", enabled=progress)
    bar.update(cached * dur, f"{cached}/{n} cases ({cached} cached)")
    if todo:
        workers = workers or os.cpu_count() or 1
        stream = _local(todo, min(workers, len(todo))) if backend == "local" \
            else _ray(todo, workers, address)
        try:
            for task, row in stream:
                case = task["case"]
                rows[case["index"]] = row
                _store(out, case, row)
                failed_now += row["status"] != "ok"
                bar.update(len(rows) * dur, f"{len(rows)}/{n} cases, {failed_now} failed")
        finally:
            bar.close()
    else:
        bar.close()
    for case in campaign.cases:
        row = rows[case["index"]]
        row["seed"] = case["seed"]
        for k in campaign.swept:
            row[k] = case["params"].get(k, "")
    table_rows = [rows[i] for i in sorted(rows)]
    wall = {r["case_id"]: r.get("_wall_s") for r in table_rows if "_wall_s" in r}
    for r in table_rows:
        r.pop("_wall_s", None)
    table, parquet = _write_table(campaign, table_rows, out)
    if wall:
        with open(out / "timings.csv", "w") as f:  # wall times: not part of the results
            f.write("case_id,wall_s\n" + "".join(f"{i},{w!r}\n" for i, w in sorted(wall.items())))
    made = []
    if campaign.spec["plots"] if plots is None else plots:
        made = plot_campaign(campaign, table_rows, out / "plots")
    failed = sum(r["status"] != "ok" for r in table_rows)
    return CampaignResult(rows=table_rows, table=table, parquet=parquet, plots=made,
                          ran=len(todo), cached=cached, failed=failed,
                          wall_s=time.perf_counter() - t0)


def plot_campaign(campaign: Campaign, rows: list, directory: Path) -> list:
    """Success rate ('stands') against each swept scalar parameter, and a histogram of each
    numeric metric; PNGs in ``directory``. Needs matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ConfigError(f"plots need matplotlib (pip install wb_sim[plot]), or set "
                          f"'plots: false': {e}") from None
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    made = []
    ok = [r for r in rows if "stands" in r]
    for key in campaign.swept:
        vals = [r.get(key) for r in ok]
        if not vals or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                               for v in vals):
            continue  # vectors and strings: no axis
        x = np.array(vals, dtype=float)
        series = {"stands": np.array([bool(r["stands"]) for r in ok], dtype=float)}
        if all("fell" in r for r in ok):
            series["fell"] = np.array([bool(r["fell"]) for r in ok], dtype=float)
        uniq = np.unique(x)
        if len(uniq) <= 12:
            groups = [x == u for u in uniq]
            centres = uniq
        else:
            edges = np.linspace(x.min(), x.max(), 11)
            idx = np.clip(np.digitize(x, edges) - 1, 0, 9)
            keep = [i for i in range(10) if np.any(idx == i)]
            groups = [idx == i for i in keep]
            centres = np.array([(edges[i] + edges[i + 1]) / 2 for i in keep])
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, s in series.items():
            rate = np.array([s[g].mean() for g in groups])
            ax.plot(centres, 100 * rate, "o-" if name == "stands" else "s--", label=name)
        for c, g in zip(centres, groups):
            ax.annotate(f"n={int(g.sum())}", (c, 0), textcoords="offset points", xytext=(0, -14),
                        ha="center", fontsize=7)
        ax.legend()
        ax.set_xlabel(key)
        ax.set_ylabel("% of the cases")
        ax.set_ylim(-12, 105)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"stands / fell against {key}")
        made.append(_save(plt, fig, directory / f"success_vs_{key.replace('/', '_')}.png"))
    numeric = [c for c in _columns(campaign, rows) if c not in ("case_id", "seed", "stands",
                                                                "fell") and c not in
               campaign.swept and all(isinstance(r.get(c), (int, float)) and
                                      not isinstance(r.get(c), bool) for r in rows if c in r)
               and any(c in r for r in rows)]
    for c in numeric:
        v = np.array([r[c] for r in rows if c in r], dtype=float)
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.hist(v[np.isfinite(v)], bins=min(30, max(5, len(v) // 3)))
        ax.set_xlabel(c)
        ax.set_ylabel("cases")
        ax.set_title(f"{c} over {len(v)} cases")
        made.append(_save(plt, fig, directory / f"hist_{c}.png"))
    return made


def _save(plt, fig, path: Path) -> Path:
    """Write a figure as PNG (90 dpi) and close it."""
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    """``wb_sim_batch CAMPAIGN.yaml``: exit 0 when every case ran to its end, 1 when some
    did not (diverged or raised; the table says which and why), 2 for a bad campaign file
    or options."""
    parser = argparse.ArgumentParser(
        prog="wb_sim_batch", description="Run a wb_sim campaign: every case of a YAML "
        "campaign file into one results table (see wb_sim.tools.campaign).")
    parser.add_argument("campaign", help="campaign file (YAML)")
    parser.add_argument("--out", "-o", help="output directory (default: <campaign>_results); "
                        "cases already in its cache are not run again")
    parser.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="local process pool (default) or Ray")
    parser.add_argument("--workers", type=int, help="processes / Ray CPUs (default: all cores)")
    parser.add_argument("--address", help="Ray: address of an existing cluster "
                        "(default: start a local Ray instance)")
    parser.add_argument("--no-plots", action="store_true", help="skip the summary plots")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress line")
    args = parser.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        print("wb_sim_batch: --workers must be >= 1", file=sys.stderr)
        return 2
    if args.address and args.backend != "ray":
        print("wb_sim_batch: --address is for --backend ray", file=sys.stderr)
        return 2
    try:
        campaign = load_campaign(args.campaign)
        out = args.out or f"{Path(args.campaign).stem}_results"
        result = run_campaign(campaign, backend=args.backend, workers=args.workers, out=out,
                              address=args.address, progress=not args.quiet,
                              plots=False if args.no_plots else None)
    except ConfigError as e:
        print(f"wb_sim_batch: {e}", file=sys.stderr)
        return 2
    except WbSimError as e:
        print(f"wb_sim_batch: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"wb_sim_batch: interrupted; finished cases are cached in {args.out or out}, "
              f"run the same command again to resume", file=sys.stderr)
        return 130
    rows = result.rows
    stands = sum(1 for r in rows if r.get("stands") is True)
    print(f"wb_sim_batch: {len(rows)} cases ({result.ran} run, {result.cached} cached) in "
          f"{result.wall_s:.1f} s; stands: {stands}/{len(rows)}; table: {result.table}"
          + (f", {result.parquet}" if result.parquet else "")
          + (f"; {len(result.plots)} plots in {result.plots[0].parent}" if result.plots else ""))
    if result.failed:
        bad = [r for r in rows if r["status"] != "ok"]
        print(f"wb_sim_batch: {len(bad)} cases did not run to their end:", file=sys.stderr)
        for r in bad[:10]:
            print(f"  case {r['case_id']}: {r['status']}: {r['error']}", file=sys.stderr)
        if len(bad) > 10:
            print(f"  ... {len(bad) - 10} more (status column of {result.table})", file=sys.stderr)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
