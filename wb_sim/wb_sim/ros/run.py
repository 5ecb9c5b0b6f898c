"""``wb_sim_run`` / ``python -m wb_sim.ros.run``: the simulator node and the example
controller as two processes, for machines without ``ros2 launch`` (pip-only).

It starts ``wb_sim_node`` with the robot's configuration and, with ``--controller pd``
(the default), ``wb_sim_pd_controller`` in paced lockstep (one physics step per answer,
never faster than real time: a busy machine slows the run and never drops the robot);
``--controller module:factory`` runs that controller inside the node instead
(``wb_sim.controllers:pd_gravity``: the example one), ``--controller none`` leaves the
commands to yours (the physics waits for the first). It relays their logs; the node
stops itself at ``--duration`` seconds of simulated time (``stop_after_s``),
then the others get SIGINT. At the end it prints the verdict, one line from the
node's stats lines over the whole run (:class:`~wb_sim.ros.verdict.RunJudge`):

* a floating base ``stands``, or ``FELL`` (its height dropped below the first
  reading by more than 15 % of it: the threshold scales with the robot, 0.104 m for
  the humanoid, 0.035 m for Solo12) or is ``UNSTEADY`` (it rose more than 7.5 % of it);
* a fixed base ``holds``, or ``DRIFTED``: a joint left the initial posture by
  more than 0.05 rad (or m, prismatic);
* either is ``SATURATED`` besides when a joint was at its effort limit in
  more than 5 % of the steps, or the joints' torques flipped between their +limit
  and -limit more than once per simulated second (all together: chattering);
* with the figures: base height, time at the effort limits with the joints most
  at them, sign flips, largest joint deviation, and the run's real-time factor.

Exit codes: 0 if it stands or holds and is not saturated; 1 if it FELL, is
UNSTEADY, DRIFTED or SATURATED, or the simulation diverged; 2 if the input was
bad (robot, ``--config``) or a process failed or made no progress for
``STALL_S`` seconds; 130 on Ctrl-C. Every failure ends the run within seconds.
In a ROS install use ``ros2 launch wb_sim sim.launch.py`` instead.

Parameters, each layer winning over the one before: the robot's file
(``config/<robot>.yaml``, or ``--robot FILE.yaml`` for your own robot), this
launcher's defaults (``publish.stats_period_s: 1.0`` and those of
:func:`~wb_sim.ros.parameters.launcher_layers`, shared with the launch file:
``command.wait_for_first: true``, ``sync.mode: lockstep`` with the example
controller), the ``--config`` file, then the in-process controller's, and
``--real-time-factor``, ``--sync`` and ``--viewer`` when given.

``--world FILE`` takes a world file (docs/world.md) in place of ``--robot``: its
ground, terrain, free objects and its first robot, written into a parameter file that
stands for the robot's file; its robot's ``controller`` is the default of
``--controller``. A world of several robots also goes to the node as ``world_file`` (each
robot under its name as namespace, :mod:`wb_sim.ros.robots`); each robot whose
``controller`` is ``pd`` gets its own ``wb_sim_pd_controller`` in the namespace
``/<name>`` (``robot:=<name>``, the world's gains), ``none`` leaves that robot to yours
(``--controller none``: every robot); the verdict is one line per robot (its base
height; the efforts and joint deviation of all of them together), and the exit code 1
if any robot fails.

``--record BAG`` runs ``wb_sim_record`` beside them (the controller, which
starts the physics, waits until the recorder is subscribed; an in-process
controller starts with the node, so its recording begins once the recorder has
found the node, some tenths of a second in) and stops it first at the end;
``--plot DIR`` then writes the plots of that bag (``wb_sim_plot``)
into DIR (without ``--record`` the bag goes to DIR/bag).
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import yaml

from ..paths import robot_config_file
from ..config import load_config, read_yaml_params
from ..errors import ConfigError
from ..tools.ab import parse_overrides
from ..world import load_world_robots, pd_controller_document, write_params_file
from .parameters import (PD_IN_PROCESS, core_keys, launcher_layers, load_node_config,
                         sync_description)
from .verdict import RunJudge

#: wall seconds without progress of the simulated time (or, at the start, without a
#: first stats line) after which the run is declared stuck
STALL_S = 20.0
START_S = 90.0
#: what the node logs when it diverged (it pauses and waits for ~/reset)
DIVERGED = "simulation diverged and is paused"
#: the launcher's defaults: under the user's --config (with those of
#: :func:`~wb_sim.ros.parameters.launcher_layers` for the controller)
LAUNCHER_DEFAULTS = {"publish.stats_period_s": 1.0}

STATS = re.compile(r"\(t = (?P<t>[\d.]+) s\)")


def _fail(msg: str) -> int:
    print(f"wb_sim_run: {msg}", file=sys.stderr)
    return 2


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="wb_sim_run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default=None,
                    help="a ready configuration (humanoid, icub, talos, anymal, panda; default "
                         "humanoid) or the path of your robot's YAML file")
    ap.add_argument("--world", metavar="FILE",
                    help="a world file (docs/world.md): the ground, terrain, objects and the "
                         "robot with its controller, in place of --robot")
    ap.add_argument("--config", help="a YAML parameter file loaded after the robot's")
    ap.add_argument("--controller", default=None, metavar="pd|none|MODULE:FACTORY",
                    help="pd: the example PD + gravity controller as its own process, in paced "
                         "lockstep (default); none: yours (the physics waits for its first "
                         f"command); MODULE:FACTORY: an in-process controller, e.g. "
                         f"{PD_IN_PROCESS} (wb_sim.control)")
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds (default 10)")
    ap.add_argument("--real-time-factor", type=float, default=None,
                    help="1 = real time (the default), 0 = as fast as possible")
    ap.add_argument("--sync", choices=("realtime", "lockstep"), default=None,
                    help="the node's sync.mode: lockstep = one step per controller answer, "
                         "realtime = free-running (default: lockstep with --controller pd, "
                         "else the configuration's)")
    ap.add_argument("--viewer", choices=("none", "meshcat"), default=None,
                    help="meshcat: serve a browser view of the robot (URL in the log)")
    ap.add_argument("--record", metavar="BAG",
                    help="record the topics into this rosbag2 (MCAP) directory (wb_sim_record)")
    ap.add_argument("--plot", metavar="DIR",
                    help="after the run, write the plots of the recording into DIR")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="KEY:=VALUE",
                    help="a parameter of the node over every file (repeatable), as ros2 run's "
                         "-p, e.g. -p contact.model:=rigid")
    ap.add_argument("--ab", action="append", default=[], metavar="KEY:=VALUE",
                    help="the A/B switch (repeatable): run the closed loop twice in lockstep, "
                         "as configured (A) and with these values over it (B), e.g. --ab "
                         "contact.model:=rigid; record both (into --record DIR/a and DIR/b, or "
                         "a temporary directory) and report where they diverge")
    args = ap.parse_args(argv)
    if not args.duration > 0:
        return _fail(f"--duration must be > 0 (got {args.duration:g})")
    args.world_loaded = None
    args.world_robots = None  # several robots: [(params, RobotInfo)], the first first
    if args.world:
        if args.robot:
            return _fail("--world declares the robot (world.robots); leave --robot out")
        try:
            robots = load_world_robots(args.world)
        except ConfigError as e:
            return _fail(str(e))
        args.world_loaded = robots[0]
        if len(robots) > 1:
            args.world_robots = robots
            #: --controller pd / none given: every robot's, over each one's world entry
            args.controller_for_all = args.controller
            for _, info in robots:
                if (args.controller or info.controller) not in ("pd", "none"):
                    return _fail(f"robot '{info.name}': controller "
                                 f"{args.controller or info.controller!r}: with several "
                                 f"robots each robot's controller is 'pd' (the example "
                                 f"controller, its own process in the namespace /<name>) or "
                                 f"'none' (yours, on <name>/joint_commands); headless, "
                                 f"python -m wb_sim --world FILE runs a 'module:factory' "
                                 f"per robot in process")
            # the node's mode: lockstep with an example controller among them
            args.controller = args.controller or (
                "pd" if any(i.controller == "pd" for _, i in robots) else "none")
        args.controller = args.controller or args.world_loaded[1].controller
    args.robot = args.robot or "humanoid"
    args.controller = args.controller or "pd"
    try:
        params = parse_overrides(args.param, "-p")
        ab = parse_overrides(args.ab, "--ab")
    except ConfigError as e:
        return _fail(str(e))
    if ab:
        return _ab(args, params, ab)
    bag = Path(args.record) if args.record else (Path(args.plot) / "bag" if args.plot else None)
    if bag is not None and bag.exists():
        print(f"wb_sim_run: '{bag}' exists; not overwriting it (choose another --record path)",
              file=sys.stderr)
        return 2
    return _run(args, params, bag)


def _ab(args, params: dict, ab: dict) -> int:
    """``--ab``: the same closed loop twice in lockstep, A then B, compared from their bags."""
    from ..tools.ab import divergence
    if args.plot:
        return _fail("--plot does not go with --ab; plot each run's bag (--record DIR: DIR/a "
                     "and DIR/b) with wb_sim_plot")
    if args.controller == "none":
        return _fail("--ab runs the closed loop twice and needs a controller it can start: "
                     "--controller pd")
    if ":" in args.controller:  # its recording starts once the recorder finds the node
        return _fail("--ab runs the example controller as its own process, in lockstep; for "
                     "an in-process controller, wb_sim_batch --ab runs the same closed loop "
                     "headless (a campaign with 'controller: module:factory')")
    if args.sync == "realtime":
        return _fail("--ab compares lockstep runs (one step per answer, reproducible); a "
                     "free-running run depends on the host: leave --sync out")
    if args.record and Path(args.record).exists():
        return _fail(f"'{args.record}' exists; not overwriting it (choose another --record path)")
    tmp = None if args.record else tempfile.TemporaryDirectory(prefix="wb_sim_ab_")
    root = Path(args.record) if args.record else Path(tmp.name)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return _fail(f"cannot create '{root}' (--record): {e.strerror or e}")
    label = ", ".join(f"{k}={v}" for k, v in ab.items())
    args.sync = "lockstep"
    codes, info = {}, {}
    for name, over in (("A", params), ("B", {**params, **ab})):
        print(f"wb_sim_run: run {name}" + (f" ({label})" if name == "B" else " (as configured)"),
              flush=True)
        codes[name] = _run(args, over, root / name.lower(), info)
        if codes[name] not in (0, 1):
            return codes[name]
    from ..tools.bag import history_from_bag
    try:
        ha, hb = history_from_bag(root / "a"), history_from_bag(root / "b")
    except Exception as e:  # a bag the recorder could not finish: said, exit 2
        return _fail(f"cannot read the runs' recordings in '{root}': {e}")
    floating = info["floating_base"]
    rad = np.array([u != "m" for u in (ha.joint_units or ("rad",) * len(ha.joint_names))])
    d = divergence(ha.t, ha.joint_positions, hb.t, hb.joint_positions, ha.joint_names,
                   base_a=ha.base_position if floating else None,
                   base_b=hb.base_position if floating else None, wrap=rad)
    print(f"wb_sim_run: A/B ({label}): {d.summary()}" + ("" if args.record else
          " (recordings removed; keep them with --record DIR)"), flush=True)
    if tmp is not None:
        tmp.cleanup()
    return max(codes.values())


def _run(args, params: dict, bag: Path | None, info: dict | None = None) -> int:
    """One run of the node (and the example controller) as ``args`` say, with the ``-p``
    values ``params`` over every file, recorded into ``bag`` when given; ``info`` gets
    ``floating_base``."""
    workdir = tempfile.TemporaryDirectory(prefix="wb_sim_run_")
    # everything the node will read, checked before anything starts (one line, no traceback)
    try:
        if args.world_loaded is not None:  # the world as the robot's file
            robot_yaml = write_params_file(*args.world_loaded, Path(workdir.name) / "world.yaml")
        else:
            robot_yaml = robot_config_file(args.robot)
        flat = read_yaml_params(robot_yaml)
        defaults, explicit = launcher_layers(args.controller, robot_yaml, args.sync)
        defaults = {**LAUNCHER_DEFAULTS, **defaults}
        flat.update(defaults)
        if args.config:
            flat.update(read_yaml_params(args.config))
        if args.real_time_factor is not None:
            explicit["real_time_factor"] = args.real_time_factor
        if args.sync is not None:
            explicit["sync.mode"] = args.sync
        if args.viewer is not None:
            explicit["viewer"] = args.viewer
        if args.world_robots is not None:  # the others from the world file (wb_sim.ros.robots)
            explicit["world_file"] = str(Path(args.world).resolve())
        explicit.update(params)
        flat.update(explicit)
        floating_base = load_config(core_keys(flat)).floating_base
        if info is not None:
            info["floating_base"] = floating_base
        node_cfg = load_node_config(flat)
    except ConfigError as e:
        return _fail(str(e))
    if node_cfg["publish.stats_period_s"] == 0:  # the progress lines are how we follow the run
        explicit["publish.stats_period_s"] = LAUNCHER_DEFAULTS["publish.stats_period_s"]
    print(f"wb_sim_run: {args.controller!r} controller; "
          f"{sync_description(node_cfg, node_cfg['controller.callable'])}", flush=True)
    stats_period = explicit.get("publish.stats_period_s", node_cfg["publish.stats_period_s"])
    defaults_yaml = Path(workdir.name) / "launcher_defaults.yaml"
    defaults_yaml.write_text(yaml.safe_dump({"wb_sim": {"ros__parameters": defaults}}))
    explicit_yaml = Path(workdir.name) / "launcher_explicit.yaml"  # over the user's file
    explicit_yaml.write_text(yaml.safe_dump(
        {"wb_sim": {"ros__parameters": {**explicit, "stop_after_s": float(args.duration)}}}))
    files = ["--params-file", str(robot_yaml), "--params-file", str(defaults_yaml)] \
        + (["--params-file", str(Path(args.config).resolve())] if args.config else []) \
        + ["--params-file", str(explicit_yaml)]
    node_cmd = [sys.executable, "-m", "wb_sim.ros.process", "--ros-args", *files]
    controller_files = ["--params-file", str(robot_yaml)] \
        + (["--params-file", str(Path(args.config).resolve())] if args.config else [])

    def start(argv: list[str]) -> subprocess.Popen:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1)

    procs = {"wb_sim": start(node_cmd)}
    recording = threading.Event()  # the recorder has subscribed (or ended)
    if bag is not None:
        procs["record"] = start([sys.executable, "-m", "wb_sim.ros.record", "-o", str(bag)])
    else:
        recording.set()
    state = {"t": 0.0, "last": "", "diverged": "", "progress": time.monotonic(),
             "started": False}
    #: the controllers to start: (process name, argv); several robots: one per 'pd' robot
    controllers: list[tuple[str, list[str]]] = []
    if args.world_robots is not None:
        judges = {}
        for params_k, info in args.world_robots:
            judges[info.name] = RunJudge(load_config(params_k).floating_base
                                         if info.name != args.world_robots[0][1].name else
                                         floating_base, robot=info.name)
            if (args.controller_for_all or info.controller) != "pd":
                continue
            gains = Path(workdir.name) / f"controller_{info.name}.yaml"
            gains.write_text(yaml.safe_dump(pd_controller_document(info, f"/{info.name}")))
            controllers.append((f"controller {info.name}", [
                sys.executable, "-m", "wb_sim.ros.pd_controller", "--ros-args",
                "-r", f"__ns:=/{info.name}", "-p", f"robot:={info.name}",
                "--params-file", str(gains)]
                + (["--params-file", str(Path(args.config).resolve())] if args.config else [])))
    else:
        judges = {None: RunJudge(floating_base)}
        if args.controller == "pd":
            controllers.append(("controller", [sys.executable, "-m", "wb_sim.ros.pd_controller",
                                               "--ros-args", *controller_files]))
    done = threading.Event()

    def relay(name: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            print(f"[{name}] {line}", end="", flush=True)
            if name == "record" and "recording " in line:
                recording.set()
            if name == "wb_sim" and DIVERGED in line:
                state["diverged"] = line.strip()
                done.set()
            m = STATS.search(line) if "real-time factor" in line else None
            if m and name == "wb_sim":
                if float(m["t"]) > state["t"] or not state["started"]:
                    state["progress"], state["started"] = time.monotonic(), True
                state["t"], state["last"] = float(m["t"]), line.strip()
                for judge in judges.values():
                    judge.feed(line)
        if name == "record":
            recording.set()
        else:
            done.set()  # the process ended

    def stop(names) -> None:
        for n in names:
            if procs[n].poll() is None:
                procs[n].send_signal(signal.SIGINT)
        deadline = time.monotonic() + 10
        for n in names:
            try:
                procs[n].wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                procs[n].kill()

    threads = [threading.Thread(target=relay, args=kv, daemon=True) for kv in procs.items()]
    for t in threads:
        t.start()
    stalled, interrupted = "", False
    try:
        # the controller starts the physics (command.wait_for_first): not before the
        # recorder listens, so that the bag begins at t = 0
        while not recording.wait(0.2):
            if any(p.poll() is not None for p in procs.values()):
                break
        for name, argv in controllers:
            if any(p.poll() is not None for p in procs.values()):
                break
            procs[name] = start(argv)
            threads.append(threading.Thread(target=relay, args=(name, procs[name]),
                                            daemon=True))
            threads[-1].start()
        state["progress"] = time.monotonic()
        waiting_note = False
        while not done.wait(0.2):
            if any(p.poll() is not None for p in procs.values()):
                break
            idle = time.monotonic() - state["progress"]
            if args.controller == "none":  # the user's controller drives (and may pause) it
                if not state["started"] and not waiting_note and idle > 5.0:
                    waiting_note = True
                    print("wb_sim_run: the physics waits for your first command on "
                          "'joint_commands' or 'effort_commands' (command.wait_for_first)",
                          flush=True)
                continue
            limit = max(STALL_S, 3 * stats_period) if state["started"] else START_S
            if idle > limit:
                stalled = (f"the simulation made no progress for {idle:.0f} s (stuck at t = "
                           f"{state['t']:.3f} s)" if state["started"] else
                           f"the simulation did not start within {limit:.0f} s")
                break
    except KeyboardInterrupt:
        interrupted = True
    failed = [n for n, p in procs.items() if p.poll() not in (None, 0)]
    if "record" in procs:  # first, so that the bag ends while the simulation still runs
        stop(["record"])
        if procs["record"].returncode != 0 and "record" not in failed:
            failed.append("record")
    stop([n for n in procs if n != "record"])
    for t in threads:
        t.join(1.0)
    if interrupted:
        print(f"wb_sim_run: interrupted at t = {state['t']:.3f} s", file=sys.stderr)
        return 130
    if state["diverged"]:
        print(f"wb_sim_run: the simulation diverged: {state['diverged']}", file=sys.stderr)
        return 1
    if failed:
        print(f"wb_sim_run: {', '.join(failed)} exited with an error", file=sys.stderr)
        return 2
    if stalled:
        return _fail(stalled)
    if state["t"] < args.duration - 1e-9:
        return _fail(f"the node ended at t = {state['t']:.3f} s, before --duration "
                     f"{args.duration:g} s")
    if args.plot:
        from ..tools.plot import main as plot_main  # matplotlib, rosbags: only now
        if plot_main([str(bag), "-o", args.plot]) != 0:
            return 2
    print(f"wb_sim_run: {state['t']:.1f} s simulated; last report: {state['last']}")
    if not any(j.lines for j in judges.values()):
        return 0
    code = 0
    for name, judge in judges.items():  # several robots: one verdict each
        verdict, failed = judge.verdict()
        print("wb_sim_run: " + (f"robot '{name}': " if name is not None else "") + verdict)
        code = 1 if failed else code
    return code


if __name__ == "__main__":
    sys.exit(main())
