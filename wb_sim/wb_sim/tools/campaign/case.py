"""One case of a campaign: its simulator parameters (:func:`case_config`), its simulator and
controller, the pushes, the built-in metrics (:data:`METRICS`) and the custom ones; one table
row (:func:`run_case`, what every backend calls, in any process)."""

from __future__ import annotations

import math
import os
import time
import traceback
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ...config import load_config
from ...control import CaseInfo, ControllerLoop, import_callable
from ...errors import ConfigError, DivergenceError
from ...robot import RobotCache

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


#: the robots this process (a campaign's worker) built, by their structural parameters: the
#: next case of the same robot takes it instead of parsing the URDF again (a 5 s humanoid
#: case: 7 of its 20 ms of building); every case still gets a new simulator, controller and
#: state. ``WB_SIM_CAMPAIGN_REBUILD=1`` builds every case from scratch (debugging)
WORKER_ROBOTS = RobotCache()


def worker_robots() -> RobotCache | None:
    """:data:`WORKER_ROBOTS`, or None where ``WB_SIM_CAMPAIGN_REBUILD=1`` asks every case to
    be built from scratch."""
    return None if os.environ.get("WB_SIM_CAMPAIGN_REBUILD") == "1" else WORKER_ROBOTS


def _case_values(spec: dict, case: dict) -> dict:
    values = dict(spec["set"])
    values.update(case["params"])
    return values


def case_config(spec: dict, case: dict, where: str = "") -> tuple[dict, dict, list, dict]:
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


def ab_case(spec: dict, case: dict) -> dict:
    """The case's run B of the A/B switch: the campaign's ``ab`` values over its own."""
    return {**case, "params": {**case["params"], **spec["ab"]["set"]}}


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
    t0, c0 = time.perf_counter(), time.process_time()
    ab = spec.get("ab")
    trace_a: dict = {}
    _run_into(row, spec, case, task.get("out"), trace_a if ab else None)
    if ab:  # the A/B switch: the same case again with the ab values, compared with A
        from ..ab import divergence
        row_b: dict = {"status": "ok", "error": ""}
        trace_b: dict = {}
        _run_into(row_b, spec, ab_case(spec, case), None, trace_b)
        row.update({f"b.{k}": v for k, v in row_b.items()})
        if trace_a.get("t") is not None and trace_b.get("t") is not None:
            d = divergence(trace_a["t"], trace_a["joints"], trace_b["t"], trace_b["joints"],
                           trace_a["names"], base_a=trace_a["base"], base_b=trace_b["base"],
                           wrap=trace_a["wrap"], base_m=ab["base_m"], joint_rad=ab["joint_rad"])
            row.update(d.row())
    row["_wall_s"] = time.perf_counter() - t0
    row["_cpu_s"] = time.process_time() - c0  # the worker's CPU time (this process's)
    return row


def _run_into(row: dict, spec: dict, case: dict, out, trace) -> None:
    """Run the case into ``row`` (its metrics, status and error); never raises."""
    try:
        row.update(_run(spec, case, out, trace))
    except DivergenceError as e:
        row.update(getattr(e, "_partial", {}))
        row["status"], row["error"] = "diverged", str(e)
    except Exception as e:  # a user controller or metric: the campaign goes on
        tb = traceback.extract_tb(e.__traceback__)
        where = f" ({tb[-1].filename}:{tb[-1].lineno})" if tb else ""
        row["status"], row["error"] = "error", f"{type(e).__name__}: {e}{where}"


def _run(spec: dict, case: dict, out: str | None, keep: dict | None = None) -> dict:
    """The case's metrics. ``keep`` (a dict, for the A/B switch): filled with the run's
    trajectory as far as it got (``t``, ``joints``, ``base`` (None: fixed base), ``names``,
    ``wrap``: the continuous joints), also when it diverges."""
    import pinocchio as pin

    from ...pin_views import new_data
    from ...simulator import Simulator
    from ..recording import Recorder
    from ..stand import StandMonitor

    params, special, pushes, cparams = case_config(spec, case)
    sim = Simulator.from_params(params, robots=worker_robots())
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
    model, data = sim.model, new_data(sim.model)
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
    # what the metrics need, kept per step and judged once after the loop (vectorized): the
    # commands as given and whether the controller gave them this step, the time, each
    # surface's normal force. The plain per-step version of these metrics (the reference the
    # tests hold this to) is StandMonitor.update / watch and the git history of this loop.
    trace_cmd = np.empty((n, sim.nj))
    fresh = np.zeros(n, dtype=bool)
    trace_t = np.empty(n + 1)
    trace_t[0] = sim.t
    trace_normal = np.empty((n, ns))
    nj = sim.nj
    feet_every = 10  # StandMonitor.watch's sampling of the surfaces' positions

    def metrics(diverged: bool) -> dict:
        m = steps_done
        # the steps' times, sim.t's product (step count times dt), formed once
        trace_t[1:m + 1] = np.arange(sim_steps0 + 1, sim_steps0 + m + 1) * dt
        z = trace_q[1:m + 1, 2] if floating else np.zeros(m)
        feet_rows = [k for k in range(1, m + 1) if (sim_steps0 + k) % feet_every == 0] \
            if pts.n else []
        feet = None
        if feet_rows:  # the surfaces' frames at the sampled steps (StandMonitor.watch's)
            feet = np.empty((len(feet_rows), ns, 3))
            for i, k in enumerate(feet_rows):
                pin.forwardKinematics(model, data, trace_q[k])
                for j, f in enumerate(surface_frames):
                    feet[i, j] = pin.updateFramePlacement(model, data, f).translation
        monitor.update_run(trace_t[1:m + 1], z, trace_tau[:m],
                           trace_t[feet_rows] if feet_rows else None, feet)
        verdict = monitor.verdict()
        peak = 0.0
        if nj and fresh[:m].any():  # the commands as given (they can exceed the limits)
            peak = max(peak, float((np.abs(trace_cmd[:m][fresh[:m]]) * inv_limits).max()))
        # saturation of what acted in each step (after joints.command_delay_steps)
        saturated_steps = int(np.count_nonzero(
            (np.abs(trace_tau[:m]) * inv_limits).max(axis=1) >= sat_level)) if nj and m else 0
        min_cos_tilt, com_dev = 1.0, 0.0
        if floating and m:
            qx, qy = trace_q[1:m + 1, 3], trace_q[1:m + 1, 4]
            min_cos_tilt = min(min_cos_tilt, float((1.0 - 2.0 * (qx * qx + qy * qy)).min()))
            for k in range(1, m + 1):
                com = pin.centerOfMass(model, data, trace_q[k])
                d = math.hypot(com[0] - com0[0], com[1] - com0[1])
                if d > com_dev:
                    com_dev = d
        losses = 0
        if ns and m:  # a surface loaded at one step and not at the next
            loaded = np.greater(trace_normal[:m], threshold)
            before = np.vstack([np.zeros((1, ns), dtype=bool), loaded[:-1]])
            losses = int(np.count_nonzero(before > loaded))
        values = {
            "stands": bool(verdict.stands and not diverged),
            "fell": bool(diverged or verdict.fell),
            "base_drop_m": float(verdict.base_drop),
            "max_tilt_deg": math.degrees(math.acos(max(-1.0, min(1.0, min_cos_tilt)))),
            "com_deviation_m": float(com_dev),
            "foot_slip_m": float(verdict.foot_slide),
            "peak_torque_ratio": float(peak),
            "time_saturated_s": saturated_steps * dt,
            "contact_losses": int(losses),
        }
        return {m: values[m] for m in spec["metrics"]}

    steps_done = 0
    sim_steps0 = sim.step_count
    surface_frames = [sim.robot.frame_id(f) for f in pts.surface_frames] if pts.n else []

    def kept() -> None:
        if keep is None:
            return
        qs = trace_q[:steps_done + 1]
        keep.update(t=np.arange(steps_done + 1) * dt,
                    joints=np.array([sim.robot.joint_positions(q) for q in qs]).reshape(
                        len(qs), nj),
                    base=qs[:, :3].copy() if floating else None,
                    names=tuple(sim.joint_names), wrap=sim.robot.nq_joint == 2)  # continuous joints: cos, sin

    try:
        for k in range(n):
            for link, force, torque, dur in schedule.get(k, ()):
                sim.apply_external_wrench(link, force, torque, dur)
            tau = loop.torques()  # the controller's, called when due (rate_hz); checked
            sim.step(tau)  # the simulator delays it by joints.command_delay_steps
            trace_tau[k] = sim.applied_torques
            trace_q[k + 1] = sim.q
            trace_cmd[k] = tau
            fresh[k] = loop.fresh
            steps_done = k + 1
            if rec is not None:
                rec.record(sim)
            if ns:
                # sim.point_forces: the points' forces of the last step, ground coordinates
                # (tangential 1, 2, normal); what contact_wrench_array() maps, 10x cheaper
                per_surface.dot(sim.point_forces[:, 2], out=trace_normal[k])
    except DivergenceError as e:
        e._partial = metrics(True)
        _save_recording(rec, out, case)
        kept()
        raise
    kept()
    result = metrics(False)
    trace = {"t": np.arange(n + 1) * dt, "q": trace_q, "applied_torques": trace_tau}
    for name, ref in spec["custom_metrics"].items():
        value = import_callable(ref, f"custom_metrics.{name}")(sim, trace)
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
