"""``python -m wb_sim`` / ``wb_sim_demo``: the default robot standing under a joint
PD + gravity-compensation controller, headless, with progress and final figures.

``--robot`` picks another ready configuration (config/<robot>.yaml), ``--config``
any YAML file; the controller gains come from its ``wb_sim_pd_controller`` block.
``--world FILE`` runs a world file instead (docs/world.md: ground, terrain, free
objects, the robot and its controller); with several robots, each under its own
controller in one physics, one verdict per robot (exit 1 if any falls).
``--record FILE.npz`` saves the run's history (:mod:`wb_sim.tools.recording`, with the
PD reference as reference positions), ``--plot DIR`` writes its plots
(:mod:`wb_sim.tools.plot`, needs matplotlib) after the run. ``--viewer meshcat``
shows the run in a browser (the URL is printed), paced to real time.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

import numpy as np

from ..paths import robot_config_file
from ..config import read_yaml_params
from ..controllers import PDGravityController
from ..errors import ConfigError, WbSimError
from .progress import Progress
from .recording import Recorder
from ..simulator import Simulator
from ..world import controller_loop, controller_loops, load_world, load_world_robots
from .stand import StandMonitor


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wb_sim", description=__doc__.split("\n\n")[0])
    parser.add_argument("--robot", default=None,
                        help="a ready configuration's name (config/<robot>.yaml; default "
                             "humanoid) or the path of your robot's YAML file")
    parser.add_argument("--world", metavar="FILE",
                        help="a world file (docs/world.md) in place of --robot: its ground, "
                             "terrain, objects, robot and controller")
    parser.add_argument("--config", help="a YAML parameter file loaded after the robot's (its "
                                         "keys win), as wb_sim_run's")
    parser.add_argument("--duration", type=float, default=10.0, help="simulated seconds (default 10)")
    parser.add_argument("--record", metavar="FILE.npz",
                        help="save the recorded signals (wb_sim_plot FILE.npz plots them)")
    parser.add_argument("--plot", metavar="DIR", help="write PNG plots of the run into DIR")
    parser.add_argument("--viewer", choices=("none", "meshcat"), default="none",
                        help="meshcat: watch the run in a browser, in real time")
    args = parser.parse_args(argv)
    if args.world and args.robot:
        print("wb_sim: --world declares the robot (world.robots); leave --robot out",
              file=sys.stderr)
        return 2
    try:
        if args.world:
            path = args.world
            robots = load_world_robots(path)
            if len(robots) > 1:
                return _run_robots(args, robots)
            flat, info = load_world(path)
        else:
            path = robot_config_file(args.robot or "humanoid")
            flat = read_yaml_params(path)
            gains = _controller_gains(path)
        if args.config:  # an overlay, as wb_sim_run's --config: its keys win
            flat.update(read_yaml_params(args.config))
            if not args.world:
                gains.update(_controller_gains(args.config))
        sim = Simulator.from_params(flat)
        q0 = sim.state.joint_positions
        if args.world:
            loop = controller_loop(sim, info)
            torques = loop.torques if loop is not None else (lambda: np.zeros(sim.nj))
        else:
            ctrl = PDGravityController(sim.robot, q0, gains.get("kp", 100.0),
                                       gains.get("kd", 5.0), gravity=sim.config.gravity)

            def torques():
                st = sim.state
                return ctrl(st.q, st.joint_positions, st.joint_velocities)
    except WbSimError as e:
        print(f"wb_sim: {e}", file=sys.stderr)
        return 2
    steps = int(round(args.duration / sim.dt))
    per_second = int(round(1.0 / sim.dt))
    print(f"wb_sim: {path}: {sim.robot.model.name}, {sim.nj} joints, {sim.mass:.2f} kg, "
          f"contact '{sim.config.contact.model}', dt = {sim.dt * 1e3:g} ms, {args.duration:g} s")
    z0 = sim.state.base_position[2]
    heights = collections.deque(maxlen=per_second)  # the last second: memory bounded
    monitor = StandMonitor(sim.joint_names, sim.actuation.effort_limit, sim.robot.floating_base)
    rec = Recorder(sim) if args.record or args.plot else None
    if rec is not None:
        rec.record(sim, q0)
    floating = sim.robot.floating_base
    bar = Progress(steps * sim.dt, label=sim.robot.model.name)
    base_z = (lambda: f"base z = {sim.q[2]:.4f} m") if floating else ""
    viewer = None
    if args.viewer != "none":
        from .viewer import make_viewer  # meshcat only when asked for
        try:
            viewer = make_viewer(args.viewer, sim.robot, ground_height=sim.config.ground.height,
                                 ground_normal=sim.config.ground.normal,
                                 terrain=sim.terrain)
        except WbSimError as e:
            print(f"wb_sim: {e}", file=sys.stderr)
            return 2
        print(f"viewer: open {viewer.url} in a browser; starting in 3 s", flush=True)
        time.sleep(3.0)
    t0 = time.perf_counter()
    try:
        for _ in range(steps):
            sim.step(torques())
            if viewer is not None:
                _view(viewer, sim, t0)
            heights.append(sim.q[2] if floating else 0.0)
            monitor.watch(sim)
            if rec is not None:
                rec.record(sim, q0)
            bar.update(sim.t, base_z)
    except WbSimError as e:
        bar.close()
        if viewer is not None:
            viewer.close()
        print(f"wb_sim: simulation stopped: {e}", file=sys.stderr)
        if rec is not None:  # what led there is worth a look
            _save_outputs(rec.history(), args.record, args.plot)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: a clean stop, what was recorded is kept
        bar.close()
        if viewer is not None:
            viewer.close()
        print(f"wb_sim: interrupted at t = {sim.t:.3f} s", file=sys.stderr)
        if rec is not None:
            _save_outputs(rec.history(), args.record, args.plot)
        return 130
    bar.close()
    wall = time.perf_counter() - t0
    if viewer is not None:
        viewer.close()
    st = sim.state
    print(f"done: {steps} steps in {wall:.2f} s ({wall / steps * 1e6:.1f} us/step, "
          f"real-time factor {sim.t / wall:.1f})")
    if sim.robot.floating_base:
        last = np.array(heights)
        print(f"base height {st.base_position[2]:.4f} m (start {z0:.4f} m), "
              f"drift over the last second {np.ptp(last) * 1e3:.3f} mm")
    wrenches = sim.contact_wrenches()
    if wrenches:
        # world z, summed over the points (a surface's wrench is in its own frame, which
        # may be tilted: Go2's foot frames are)
        fz = float(sim.contact_points_state().force[:, 2].sum())
        weight = sim.mass * float(np.linalg.norm(sim.config.gravity))
        print(f"vertical contact force (world z) / weight: {fz / weight:.4f}")
        for name, w in wrenches.items():
            print(f"  {name:12s} force [N] {np.array2string(w.force, precision=2)}  "
                  f"torque [N*m] {np.array2string(w.torque, precision=3)}")
        pts = sim.contact_points_state()
        print(f"max sink {max(pts.depth.max(), 0) * 1e3:.2f} mm, point states: "
              f"{', '.join(f'{s} x{pts.status.count(s)}' for s in sorted(set(pts.status)))}")
    verdict = monitor.verdict()
    print(f"result: {verdict.summary()}")
    if rec is not None and not _save_outputs(rec.history(), args.record, args.plot):
        return 2
    return 0 if verdict.stands else 1


def _run_robots(args, robots) -> int:
    """Several robots of one world file in one physics, each under its own controller
    (its ``controller``: ``pd``, ``module:factory`` or ``none``, built on its own model:
    :func:`wb_sim.world.controller_loops`); one verdict per robot, exit 1 if any falls."""
    if args.config or args.record or args.plot or args.viewer != "none":
        print("wb_sim: --config, --record, --plot and --viewer take one robot; a world of "
              f"{len(robots)} robots runs without them (or serve it on the node: wb_sim_run "
              "--world FILE, wb_sim_record)", file=sys.stderr)
        return 2
    try:
        sim = Simulator.from_robots([(info.name, p) for p, info in robots])
        loop = controller_loops(sim, [info for _, info in robots])
    except WbSimError as e:
        print(f"wb_sim: {e}", file=sys.stderr)
        return 2
    steps = int(round(args.duration / sim.dt))
    names = ", ".join(f"{p.name} ({p.robot.model.name}, {p.nj} joints, "
                      f"controller {info.controller})" for p, (_, info) in zip(sim.robots, robots))
    print(f"wb_sim: {args.world}: {len(sim.robots)} robots: {names}; contact "
          f"'{sim.config.contact.model}', dt = {sim.dt * 1e3:g} ms, {args.duration:g} s")
    limits = sim.actuation.effort_limit
    monitors = [StandMonitor(p.joint_names, limits[p.joints], p.floating_base)
                for p in sim.robots]
    surfaces = list(sim.contact_points.surface_names)
    mine = [[surfaces.index(s) for s in p.surfaces] for p in sim.robots]
    bar = Progress(steps * sim.dt, label=f"{len(sim.robots)} robots")
    t0 = time.perf_counter()
    try:
        for _ in range(steps):
            sim.step(loop.torques())
            feet = _surface_positions(sim) if sim.step_count % 10 == 0 else None
            q, tau = sim.q, sim.applied_torques
            for p, m, idx in zip(sim.robots, monitors, mine):
                m.update(sim.t, float(q[p.q_slice][2]) if p.floating_base else 0.0,
                         tau[p.joints], None if feet is None or not idx else feet[idx])
            bar.update(sim.t, "")
    except WbSimError as e:
        bar.close()
        print(f"wb_sim: simulation stopped: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        bar.close()
        print(f"wb_sim: interrupted at t = {sim.t:.3f} s", file=sys.stderr)
        return 130
    bar.close()
    wall = time.perf_counter() - t0
    print(f"done: {steps} steps in {wall:.2f} s ({wall / steps * 1e6:.1f} us/step, "
          f"real-time factor {sim.t / wall:.1f})")
    stands = True
    for p, m in zip(sim.robots, monitors):
        verdict = m.verdict()
        stands &= verdict.stands
        base = sim.robot_base_pose(p.name).translation
        print(f"robot '{p.name}': base at ({base[0]:.4f}, {base[1]:.4f}, {base[2]:.4f}) m; "
              f"result: {verdict.summary()}")
    return 0 if stands else 1


def _surface_positions(sim) -> np.ndarray:
    """The world positions (S, 3) of every contact surface's frame now."""
    import pinocchio as pin
    model, data = sim.model, sim._data
    pin.forwardKinematics(model, data, sim.q)
    return np.array([pin.updateFramePlacement(model, data, sim.robot.frame_id(f)).translation
                     for f in sim.contact_points.surface_frames])


def _controller_gains(path) -> dict:
    """The ``wb_sim_pd_controller`` block of a parameter file ({} where it has none)."""
    try:
        return read_yaml_params(path, node_name="wb_sim_pd_controller")
    except ConfigError as e:
        if "has no 'wb_sim_pd_controller: ros__parameters:' block" in str(e):
            return {}
        raise


def _view(viewer, sim: Simulator, t0: float) -> None:
    """Draw every 1/30 s of simulated time, and keep to real time."""
    k = sim.step_count
    if k % max(1, round(1.0 / (30.0 * sim.dt))) == 0:
        from .viewer import contact_arrows
        viewer.show(sim.q[:sim.robot.model.nq], *contact_arrows(sim), sim.objects,
                    sim.object_poses())
        ahead = sim.t - (time.perf_counter() - t0)
        if ahead > 0:
            time.sleep(ahead)


def _save_outputs(history, record: str | None, plot_dir: str | None) -> bool:
    """Save the history and/or plot it; False (with a message) on an error."""
    try:
        if record:
            print(f"history saved to {history.save(record)}")
        if plot_dir:
            from .plot import plot_history  # matplotlib: only when asked for
            paths = plot_history(history, plot_dir)
            print(f"plots: {', '.join(str(p) for p in paths)}")
    except (WbSimError, ImportError) as e:
        print(f"wb_sim: {e}", file=sys.stderr)
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
