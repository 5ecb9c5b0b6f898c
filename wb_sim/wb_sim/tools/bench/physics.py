"""The physics benchmark. ``python -m wb_sim.tools.bench icub_stand`` runs the shared
``icub_stand`` scenario (``shared/benchmarks/icub_stand.md``) exactly:

* iCub ``iCubGazeboV2_5`` from icub-models, free-flyer on ``root_link``;
  URDF damping and friction ignored, no armature, no position limits, no
  torque clipping; gravity (0, 0, -9.81); ground z = 0; friction 1.0;
* one 160 mm x 72 mm rectangle per foot in the sole frames (4 corners each);
* all joints at 0, base at (0, 0, 0.620438), identity, at rest;
* every 1 ms: tau = g_j(q) + 200 (0 - q) - 5 qdot (zero-order hold);
* 10 000 steps, timed as a whole loop (read state, controller, write torques,
  step), median of 3 runs whose end states must be bit-identical. The physical
  figures come from one more, untimed, run with logging (same trajectory).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ... import compiled
from ...contact import CONTACT_MODELS
from ...controllers import PDGravityController
from ...simulator import Simulator
from ..progress import Progress
from ..stand import StandMonitor

ICUB_STAND = {
    "urdf_path": "icub-models:iCubGazeboV2_5",
    "floating_base": True,
    "physics_rate_hz": 1000.0,
    "gravity": [0.0, 0.0, -9.81],
    "ground.height": 0.0,
    "ground.normal": [0.0, 0.0, 1.0],
    "contact.friction_coefficient": 1.0,
    "contact_surfaces": ["left_foot", "right_foot"],
    "left_foot.frame": "l_sole", "left_foot.shape": "box",
    "left_foot.size": [0.16, 0.072], "left_foot.offset": [0.0265, 0.005],
    "right_foot.frame": "r_sole", "right_foot.shape": "box",
    "right_foot.size": [0.16, 0.072], "right_foot.offset": [0.0265, -0.005],
    "initial.base_position": [0.0, 0.0, 0.620438],
    "joints.position_limits": False,
    "joints.effort_limits": False,
    "joints.urdf_dynamics": False,
    "joints.armature": [0.0],
}
STEPS = 10_000
KP, KD = 200.0, 5.0
#: steps between two progress updates (outside the inner loop: no cost per step)
CHUNK = 250


def _run(sim: Simulator, ctrl: PDGravityController, steps: int, log=None,
         progress: Progress | None = None) -> float:
    """Reset and run ``steps`` steps; returns the wall time of the loop, s."""
    sim.reset()
    step = sim.step
    t0 = time.perf_counter()
    for start in range(0, steps, CHUNK):
        for _ in range(min(CHUNK, steps - start)):
            step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
            if log is not None:
                log(sim)
        if progress is not None:
            progress.update(sim.t)
    wall = time.perf_counter() - t0
    if progress is not None:
        progress.close(sim.t, f"{wall / steps * 1e6:.1f} us/step")
    return wall


def icub_stand_setup(**overrides) -> tuple[Simulator, PDGravityController]:
    """The scenario's simulator (ICUB_STAND with ``overrides``, e.g. ``"contact.model":
    "rigid"``) and its controller (joint PD at KP, KD to zero + gravity compensation)."""
    params = dict(ICUB_STAND, **overrides)
    sim = Simulator.from_params(params)
    return sim, PDGravityController(sim.robot, np.zeros(sim.nj), KP, KD, gravity=params["gravity"])


def icub_stand(contact: str = "compliant", runs: int = 3, progress: bool = True,
               collision: bool = False) -> dict:
    """Run the scenario; returns the report as a dict (also printed by main).
    ``collision``: with whole-body collision on (collision.enabled)."""
    sim, ctrl = icub_stand_setup(**{"contact.model": contact, "collision.enabled": collision})
    times, ends = [], []
    for r in range(runs):
        bar = Progress(STEPS * sim.dt, label=f"  run {r + 1}/{runs}", enabled=progress)
        times.append(_run(sim, ctrl, STEPS, progress=bar))
        ends.append((sim.q.copy(), sim.v.copy()))
    identical = all(np.array_equal(e[0], ends[0][0]) and np.array_equal(e[1], ends[0][1])
                    for e in ends)

    # untimed run with logging for the physical figures
    z, fz, soles = [], [], []
    l_sole, r_sole = "l_sole", "r_sole"

    monitor = StandMonitor(sim.joint_names, sim.actuation.effort_limit, True)

    def log(s: Simulator) -> None:
        monitor.watch(s)
        z.append(s.q[2])
        fz.append(sum(w.force[2] for w in s.contact_wrenches().values()))
        soles.append(np.concatenate([s.frame_pose(l_sole).translation[:2],
                                     s.frame_pose(r_sole).translation[:2]]))

    solver_stats = sim.contact.statistics()
    sim.reset()
    sole0 = np.concatenate([sim.frame_pose(l_sole).translation[:2],
                            sim.frame_pose(r_sole).translation[:2]])
    _run(sim, ctrl, STEPS, log, Progress(STEPS * sim.dt, label="  logged run (untimed)",
                                         enabled=progress))
    z, fz, soles = np.array(z), np.array(fz), np.array(soles)
    slip = np.max(np.hypot(*(soles - sole0).reshape(-1, 2, 2).transpose(2, 0, 1)))
    weight = sim.mass * 9.81
    wall = statistics.median(times)
    return {
        "contact_model": contact,
        "us_per_step": wall / STEPS * 1e6,
        "real_time_factor": STEPS * sim.dt / wall,
        "final_base_height_m": float(z[-1]),
        "base_height_drift_last_5s_m": float(np.ptp(z[-5000:])),
        "vertical_reaction_over_weight_last_1s": float(np.mean(fz[-1000:]) / weight),
        "max_sole_slip_m": float(slip),
        "fell": bool(z.min() < 0.620438 - 0.1),
        "stand_verdict": monitor.verdict().summary(),
        "stands": monitor.verdict().stands,
        "bit_identical_runs": identical,
        "runs_us_per_step": [t / STEPS * 1e6 for t in times],
        "solver": solver_stats,
    }


def _off_on(sims: list, ctrls: list, runs: int, what: str, progress: bool) -> dict:
    """Time two simulators (off, on) interleaved run by run so that both see the same
    machine: the median us/step of each, their ratio, each run's figures and whether
    the two trajectories are bit-identical."""
    times: list[list[float]] = [[], []]
    for r in range(runs):
        for i, label in enumerate(("off", "on")):
            bar = Progress(STEPS * sims[i].dt, label=f"  run {r + 1}/{runs}, {what} {label}",
                           enabled=progress)
            times[i].append(_run(sims[i], ctrls[i], STEPS, progress=bar))
    off, on = (statistics.median(t) / STEPS * 1e6 for t in times)
    return {"us_per_step_off": off, "us_per_step_on": on, "on_over_off": on / off,
            "runs_us_per_step_off": [t / STEPS * 1e6 for t in times[0]],
            "runs_us_per_step_on": [t / STEPS * 1e6 for t in times[1]],
            "identical_trajectories": bool(np.array_equal(sims[0].q, sims[1].q)
                                           and np.array_equal(sims[0].v, sims[1].v))}


def collision_cost(contact: str = "compliant", runs: int = 3, progress: bool = True) -> dict:
    """icub_stand with whole-body collision off and on, the timed runs interleaved
    (off, on, off, on, ...) so that both see the same machine; the median us/step of
    each, their ratio, and whether the two trajectories are bit-identical (nothing
    but the feet touches, so they must be)."""
    sims, ctrls = [], []
    for on in (False, True):
        params = dict(ICUB_STAND, **{"contact.model": contact, "collision.enabled": on})
        sims.append(Simulator.from_params(params))
        ctrls.append(PDGravityController(sims[-1].robot, np.zeros(sims[-1].nj), KP, KD,
                                         gravity=params["gravity"]))
    return {"contact_model": contact, **_off_on(sims, ctrls, runs, "collision", progress),
            "collision_points": sims[1].collision.m}


#: the drives of actuators_cost: the defaults (the AK80-9's numbers) with a 200 Hz torque loop
DC_MOTOR = {"actuators.model": "dc_motor", "actuators.bandwidth": [200.0],
            "actuators.damping_ratio": [0.7]}


def actuators_cost(contact: str = "compliant", runs: int = 3, progress: bool = True) -> dict:
    """icub_stand with ideal drives and with every joint on ``dc_motor`` (:data:`DC_MOTOR`),
    the timed runs interleaved as in :func:`collision_cost`; the base height at the end of
    each (the drives change the trajectory: they are not bit-identical)."""
    sims, ctrls = [], []
    for drives in ({}, DC_MOTOR):
        params = dict(ICUB_STAND, **{"contact.model": contact}, **drives)
        sims.append(Simulator.from_params(params))
        ctrls.append(PDGravityController(sims[-1].robot, np.zeros(sims[-1].nj), KP, KD,
                                         gravity=params["gravity"]))
    result = _off_on(sims, ctrls, runs, "dc_motor", progress)
    return {"contact_model": contact, **result,
            "base_height_ideal": float(sims[0].q[2]), "base_height_dc_motor": float(sims[1].q[2]),
            "hottest_winding_c": float(np.nanmax(sims[1].actuator_readings.temperature))}


def self_collision_cost(contact: str = "compliant", runs: int = 3, progress: bool = True) -> dict:
    """icub_stand with self-collision (collision.self_collision) off and on, the timed runs
    interleaved as in :func:`collision_cost`. iCub's models ship no SRDF: the one used
    disables the link pairs whose spheres overlap at the scenario's posture (as
    ``python -m wb_sim.tools.srdf`` writes them). Nothing but the feet touches, so the two
    trajectories must be bit-identical."""
    import tempfile

    from ...contact import srdf_text
    from ..srdf import default_pairs

    probe = Simulator.from_params(dict(ICUB_STAND, **{"collision.self_collision": True}))
    pairs = default_pairs(probe)
    with tempfile.TemporaryDirectory() as tmp:
        srdf = Path(tmp) / "icub_stand.srdf"
        srdf.write_text(srdf_text(probe.robot.model.name, pairs))
        sims, ctrls = [], []
        for on in (False, True):
            params = dict(ICUB_STAND, **{"contact.model": contact, "collision.self_collision": on,
                                         "collision.srdf_path": str(srdf)})
            sims.append(Simulator.from_params(params))
            ctrls.append(PDGravityController(sims[-1].robot, np.zeros(sims[-1].nj), KP, KD,
                                             gravity=params["gravity"]))
    result = _off_on(sims, ctrls, runs, "self-collision", progress)
    sc = sims[1].self_collision
    stats = sims[1].contact.statistics()
    return {"contact_model": contact, **result,
            "geometries": len(sc.geometries), "spheres": sc.s, "pairs": len(sc.pa),
            "srdf_pairs": len(pairs),
            "checked_steps_last_run": stats["self_collision_checks"] // (runs + 1),
            "self_contact_solves": stats["collision_solves"]}


def humanoid_lying(contact: str = "compliant", steps: int = 2000, settle_s: float = 3.0,
                   progress: bool = True) -> dict:
    """The default humanoid with whole-body collision, no controller, pushed over: the
    cost per step once it lies on the ground (after ``settle_s``), with the number of
    its collision points and contact-surface points that carry a load."""
    from ... import config_path
    sim = Simulator.from_yaml(config_path("humanoid"), overrides={
        "collision.enabled": True, "contact.model": contact})
    zero = np.zeros(sim.nj)
    sim.apply_external_wrench("pelvis", force=[300.0, 0.0, 0.0], duration_s=0.2)  # flat
    for _ in range(round(settle_s / sim.dt)):
        sim.step(zero)
    bar = Progress(steps * sim.dt, label="  lying, timed", enabled=progress)
    t_settled = sim.t  # the bar and its real-time factor count the timed steps only
    t0 = time.perf_counter()
    for start in range(0, steps, CHUNK):
        for _ in range(min(CHUNK, steps - start)):
            sim.step(zero)
        bar.update(sim.t - t_settled)
    wall = time.perf_counter() - t0
    bar.close(sim.t - t_settled, f"{wall / steps * 1e6:.1f} us/step")
    pts = sim.collision_points_state()
    loaded = int(np.count_nonzero(pts.force[:, 2] > 0.0))
    feet = int(np.count_nonzero(sim.contact_points_state().force[:, 2] > 0.0))
    return {"contact_model": contact, "us_per_step": wall / steps * 1e6,
            "loaded_collision_points": loaded, "loaded_surface_points": feet,
            "points_within_margin": len(pts.surface),
            "base_height_m": float(sim.q[2]),
            "collision_force_z_over_weight": float(sim.collision_wrench().force[2]
                                                   / (sim.mass * 9.81))}


#: the objects benchmark's cases: (label, boxes, their grid's offset along x, m)
OBJECT_CASES = (("0 boxes", 0, 0.0), ("10 boxes beside", 10, 0.0),
                ("50 boxes beside", 50, 0.0), ("50 boxes 10 m away", 50, 10.0))
#: timed steps per run of the objects benchmark (the 50-box cases take tens of ms a step)
OBJECT_STEPS = 500


def object_boxes(count: int, dx: float) -> dict:
    """``count`` 0.1 m, 1 kg boxes resting on the ground in a grid of 5 rows 0.2 m apart
    (x from 0.6 + dx, y from -0.4: beside the humanoid standing at the origin, or ``dx``
    farther), as objects.* parameters."""
    if not count:
        return {}
    xy = [(0.6 + dx + 0.2 * (k // 5), -0.4 + 0.2 * (k % 5)) for k in range(count)]
    return {"objects.names": [f"box{k}" for k in range(count)],
            "objects.shapes": ["box"] * count, "objects.sizes": [0.1] * (3 * count),
            "objects.mass": [1.0] * count,
            "objects.positions": [v for x, y in xy for v in (x, y, 0.05)]}


#: untimed steps from the reset before each timed run of the objects benchmark: the boxes
#: settle and (objects.sleep) fall asleep (objects.sleep_time 0.5 s by default)
OBJECT_SETTLE = 800


def _run_settled(sim: Simulator, ctrl: PDGravityController, settle: int, steps: int,
                 progress: Progress | None = None) -> float:
    """Reset, ``settle`` steps untimed, then ``steps`` timed; the wall time of those, s."""
    sim.reset()
    for _ in range(settle):
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
    step = sim.step
    t0 = time.perf_counter()
    for start in range(0, steps, CHUNK):
        for _ in range(min(CHUNK, steps - start)):
            step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
        if progress is not None:
            progress.update(sim.t)
    wall = time.perf_counter() - t0
    if progress is not None:
        progress.close(sim.t, f"{wall / steps * 1e6:.1f} us/step")
    return wall


def objects_cost(contact: str = "compliant", runs: int = 3, progress: bool = True,
                 steps: int = OBJECT_STEPS, sleep=(True,), settle: int = OBJECT_SETTLE) -> dict:
    """The default humanoid standing under its example controller (config/humanoid.yaml's
    wb_sim_pd_controller gains) with 0, 10 and 50 boxes resting on the ground beside it and
    50 boxes 10 m away (:data:`OBJECT_CASES`), with each ``sleep`` setting (objects.sleep;
    (False, True): before and after); each timed run (``steps`` steps after ``settle``
    untimed ones from the reset) interleaved case by case and setting by setting so that
    every one sees the same machine: the median us/step of each and its ratio to the case
    without boxes (the first setting's as ``us_per_step``; all in ``by_sleep``)."""
    from ... import config_path
    from ...config import read_yaml_params
    gains = read_yaml_params(config_path("humanoid"), node_name="wb_sim_pd_controller")
    sleep = tuple(sleep)
    sims, ctrls, labels = [], [], []
    for mode in sleep:
        for label, count, dx in OBJECT_CASES:
            sims.append(Simulator.from_yaml(config_path("humanoid"), overrides={
                "contact.model": contact, "objects.sleep": bool(mode),
                **object_boxes(count, dx)}))
            ctrls.append(PDGravityController(sims[-1].robot, sims[-1].joint_positions.copy(),
                                             gains["kp"], gains["kd"],
                                             gravity=sims[-1].config.gravity))
            labels.append(f"{label}, sleep {'on' if mode else 'off'}")
    times: list[list[float]] = [[] for _ in sims]
    asleep = [0] * len(sims)
    for r in range(runs):
        for i, label in enumerate(labels):
            bar = Progress((settle + steps) * sims[i].dt, label=f"  run {r + 1}/{runs}, {label}",
                           enabled=progress)
            times[i].append(_run_settled(sims[i], ctrls[i], settle, steps, progress=bar))
            asleep[i] = len(sims[i].sleeping_objects())
    us = [statistics.median(t) / steps * 1e6 for t in times]
    moved = max((float(np.abs(s.object_poses()[:, :3] - [o.position for o in s.objects]).max())
                 for s in sims if s.objects), default=0.0)
    n = len(OBJECT_CASES)
    by_sleep = {mode: {"us_per_step": us[k * n:(k + 1) * n],
                       "over_no_boxes": [u / us[k * n] for u in us[k * n:(k + 1) * n]],
                       "runs_us_per_step": [[t / steps * 1e6 for t in ts]
                                            for ts in times[k * n:(k + 1) * n]],
                       "asleep": asleep[k * n:(k + 1) * n]}
                for k, mode in enumerate(sleep)}
    first = by_sleep[sleep[0]]
    return {"contact_model": contact, "cases": [c[0] for c in OBJECT_CASES],
            "us_per_step": first["us_per_step"], "over_no_boxes": first["over_no_boxes"],
            "runs_us_per_step": first["runs_us_per_step"], "by_sleep": by_sleep,
            "boxes_moved_m": moved, "robot_stands": all(s.q[2] > 0.5 for s in sims)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wb_sim.tools.bench",
                                     description="wb_sim benchmarks (see shared/benchmarks/).")
    parser.add_argument("scenario", choices=["icub_stand", "humanoid_lying", "objects"],
                        help="icub_stand: shared/benchmarks/icub_stand.md; humanoid_lying: the "
                             "default humanoid with collision.enabled lying on the ground; "
                             "objects: the humanoid standing with 0, 10, 50 boxes beside it "
                             "and 50 boxes 10 m away")
    parser.add_argument("--contact", default="compliant", choices=sorted(CONTACT_MODELS),
                        help="contact model (default: compliant)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs (median reported)")
    parser.add_argument("--sleep", choices=["on", "off", "both"], default="both",
                        help="objects: with objects.sleep on, off, or both (interleaved; "
                             "default)")
    parser.add_argument("--steps", type=int, default=OBJECT_STEPS,
                        help=f"objects: timed steps per run and case (default {OBJECT_STEPS})")
    parser.add_argument("--peer", metavar="SCRIPT",
                        help="also run this peer harness back to back (e.g. "
                             "../shared/benchmarks/peers/mujoco_icub_stand.py, which needs "
                             "pip install mujoco) and print the ratio of the two us/step")
    parser.add_argument("--collision", choices=["off", "on", "both"], default="off",
                        help="icub_stand with whole-body collision off (default), on, or both "
                             "(timed runs interleaved; prints the cost of collision)")
    parser.add_argument("--self-collision", action="store_true",
                        help="icub_stand with self-collision off and on (timed runs "
                             "interleaved; prints its cost while nothing but the feet touches)")
    parser.add_argument("--actuators", action="store_true",
                        help="icub_stand with ideal drives and with every joint on dc_motor "
                             "(timed runs interleaved; prints the cost of the drives' model)")
    args = parser.parse_args(argv)
    # which step the figures are of: the compiled kernels, or the plain Python path
    print(f"step path:                       {compiled.path()} "
          f"({compiled.PLAIN_ENV}=1 forces the plain Python path)")
    if args.actuators:
        rep = actuators_cost(args.contact, args.runs)
        print(f"us per step, ideal:              {rep['us_per_step_off']:.1f}")
        print(f"us per step, dc_motor:           {rep['us_per_step_on']:.1f}")
        print(f"dc_motor / ideal:                {rep['on_over_off']:.3f}")
        print(f"runs ideal / dc_motor (us):      "
              f"{', '.join(f'{t:.1f}' for t in rep['runs_us_per_step_off'])} / "
              f"{', '.join(f'{t:.1f}' for t in rep['runs_us_per_step_on'])}")
        print(f"base height ideal / dc_motor:    {rep['base_height_ideal']:.6f} / "
              f"{rep['base_height_dc_motor']:.6f} m")
        print(f"hottest winding:                 {rep['hottest_winding_c']:.2f} C")
        return 0
    if args.self_collision:
        rep = self_collision_cost(args.contact, args.runs)
        print(f"us per step, self-collision off: {rep['us_per_step_off']:.1f}")
        print(f"us per step, self-collision on:  {rep['us_per_step_on']:.1f}")
        print(f"on / off:                        {rep['on_over_off']:.3f}")
        print(f"runs off / on (us):              "
              f"{', '.join(f'{t:.1f}' for t in rep['runs_us_per_step_off'])} / "
              f"{', '.join(f'{t:.1f}' for t in rep['runs_us_per_step_on'])}")
        print(f"geometries, spheres, pairs:      {rep['geometries']}, {rep['spheres']}, "
              f"{rep['pairs']} ({rep['srdf_pairs']} touching at the posture: disabled)")
        print(f"steps that ran the phases:       {rep['checked_steps_last_run']} of {STEPS} "
              f"per run (the others: the quiet test)")
        print(f"trajectories bit-identical:      "
              f"{'yes' if rep['identical_trajectories'] else 'NO'}")
        return 0 if rep["identical_trajectories"] and not rep["self_contact_solves"] else 1
    if args.scenario == "objects":
        modes = {"on": (True,), "off": (False,), "both": (False, True)}[args.sleep]
        rep = objects_cost(args.contact, args.runs, steps=args.steps, sleep=modes)
        import os
        blas = os.environ.get("OPENBLAS_NUM_THREADS", "unset")
        print(f"humanoid standing, contact model '{args.contact}', {args.steps} steps of "
              f"1 ms after {OBJECT_SETTLE} untimed from the reset, median of {args.runs} "
              f"interleaved runs (OPENBLAS_NUM_THREADS {blas}; load average "
              f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} before)")
        for mode, part in rep["by_sleep"].items():
            print(f"objects.sleep {'on' if mode else 'off'}:")
            for label, u, ratio, ts, n in zip(rep["cases"], part["us_per_step"],
                                              part["over_no_boxes"], part["runs_us_per_step"],
                                              part["asleep"]):
                print(f"  {label + ':':30} {u:8.1f} us/step  x{ratio:7.3f}  {n:2d} asleep  "
                      f"(runs {', '.join(f'{t:.1f}' for t in ts)})")
        print(f"{'boxes moved at most:':32} {rep['boxes_moved_m'] * 1e3:.3f} mm")
        print(f"{'the robot stands:':32} {'yes' if rep['robot_stands'] else 'NO'}")
        return 0 if rep["robot_stands"] else 1
    if args.scenario == "humanoid_lying":
        rep = humanoid_lying(args.contact)
        for key, value in rep.items():
            print(f"{key + ':':32} {value:.4g}" if isinstance(value, float) else
                  f"{key + ':':32} {value}")
        return 0 if rep["loaded_collision_points"] >= 1 else 1
    if args.collision == "both":
        rep = collision_cost(args.contact, args.runs)
        print(f"us per step, collision off:      {rep['us_per_step_off']:.1f}")
        print(f"us per step, collision on:       {rep['us_per_step_on']:.1f}")
        print(f"on / off:                        {rep['on_over_off']:.3f}")
        print(f"runs off / on (us):              "
              f"{', '.join(f'{t:.1f}' for t in rep['runs_us_per_step_off'])} / "
              f"{', '.join(f'{t:.1f}' for t in rep['runs_us_per_step_on'])}")
        print(f"collision points:                {rep['collision_points']}")
        print(f"trajectories bit-identical:      "
              f"{'yes' if rep['identical_trajectories'] else 'NO'}")
        ok = rep["identical_trajectories"]
        if args.peer:
            peer = _run_peer(args.peer, args.runs)
            if peer is None:
                return 2
            print(f"peer ({Path(args.peer).name}):  {peer:.1f} us/step; wb_sim / peer = "
                  f"{rep['us_per_step_off'] / peer:.2f} (off), "
                  f"{rep['us_per_step_on'] / peer:.2f} (on)")
        return 0 if ok else 1
    print(f"icub_stand, contact model '{args.contact}', {STEPS} steps of 1 ms, "
          f"median of {args.runs} runs", file=sys.stderr)
    rep = icub_stand(args.contact, args.runs, collision=args.collision == "on")
    print(f"us per step:                     {rep['us_per_step']:.1f}")
    print(f"real-time factor:                {rep['real_time_factor']:.1f}")
    print(f"final base height:               {rep['final_base_height_m']:.6f} m")
    print(f"base height drift, last 5 s:     {rep['base_height_drift_last_5s_m'] * 1e3:.4f} mm")
    print(f"vertical reaction / weight, 1 s: {rep['vertical_reaction_over_weight_last_1s']:.5f}")
    print(f"max horizontal sole slip:        {rep['max_sole_slip_m'] * 1e3:.4f} mm")
    print(f"fell:                            {'yes' if rep['fell'] else 'no'}")
    print(f"verdict:                         {rep['stand_verdict']}")
    print(f"timed runs bit-identical:        {'yes' if rep['bit_identical_runs'] else 'NO'}")
    st = rep["solver"]
    if "iterations_mean" in st:
        print(f"solver iterations per step:      mean {st['iterations_mean']:.2f}, "
              f"p99 {st['iterations_p99']:.0f}")
    if "nonconverged" in st:
        print(f"solves not converged:            {st['nonconverged']} of {st['solves']}")
    if "active_set_solves" in st:
        print(f"steps needing the active set:    {st['active_set_solves']} of {st['solves']}")
    ok = rep["bit_identical_runs"] and rep["stands"]
    if args.peer:
        peer = _run_peer(args.peer, args.runs)
        if peer is None:
            return 2
        ratio = rep["us_per_step"] / peer
        print(f"peer ({Path(args.peer).name}):  {peer:.1f} us/step; wb_sim / peer = {ratio:.2f}")
    return 0 if ok else 1


def _run_peer(script: str, runs: int) -> float | None:
    """us/step of a peer harness that prints one JSON line with 'us_per_step_median'."""
    try:
        out = subprocess.run([sys.executable, script, "--runs", str(runs)], capture_output=True,
                             text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"wb_sim.tools.bench: peer {script} did not run: {e}", file=sys.stderr)
        return None
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            return float(json.loads(line)["us_per_step_median"])
    print(f"wb_sim.tools.bench: peer {script} printed no result (exit {out.returncode}):\n"
          f"{out.stderr[-2000:]}", file=sys.stderr)
    return None

