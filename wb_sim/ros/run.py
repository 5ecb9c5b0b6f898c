"""``wb_sim_run`` / ``python -m wb_sim.ros.run``: the simulator node and the example
controller as two processes, for machines without ``ros2 launch`` (pip-only).

It starts ``wb_sim_node`` with the robot's configuration and, unless
``--controller none``, ``wb_sim_pd_controller``; relays their logs; stops both
with SIGINT once the node reports ``--duration`` seconds of simulated time;
and exits with 0 if the floating base stayed up (its height never dropped by
more than 0.1 m nor rose by more than 5 cm), 1 if not, 2 if a process failed. In a ROS install use
``ros2 launch wb_sim sim.launch.py`` instead.

``--record BAG`` runs ``wb_sim_record`` beside them (the controller, which
starts the physics, waits until the recorder is subscribed) and stops it first
at the end; ``--plot DIR`` then writes the plots of that bag (``wb_sim_plot``)
into DIR (without ``--record`` the bag goes to DIR/bag).
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .. import config_path

STATS = re.compile(r"\(t = (?P<t>[\d.]+) s\)")
BASE = re.compile(r"base at \((?P<x>[-\d.]+), (?P<y>[-\d.]+), (?P<z>[-\d.]+)\) m")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="wb_sim_run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="humanoid", help="config/<robot>.yaml (default humanoid)")
    ap.add_argument("--config", help="a YAML parameter file loaded after the robot's")
    ap.add_argument("--controller", choices=("pd", "none"), default="pd")
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds (default 10)")
    ap.add_argument("--real-time-factor", type=float, default=1.0,
                    help="1 = real time (default), 0 = as fast as possible")
    ap.add_argument("--sync", choices=("realtime", "lockstep"), default="realtime",
                    help="the node's sync.mode: lockstep = one step per controller command")
    ap.add_argument("--viewer", choices=("none", "meshcat"), default="none",
                    help="meshcat: serve a browser view of the robot (URL in the log)")
    ap.add_argument("--record", metavar="BAG",
                    help="record the topics into this rosbag2 (MCAP) directory (wb_sim_record)")
    ap.add_argument("--plot", metavar="DIR",
                    help="after the run, write the plots of the recording into DIR")
    args = ap.parse_args(argv)
    bag = Path(args.record) if args.record else (Path(args.plot) / "bag" if args.plot else None)
    if bag is not None and bag.exists():
        print(f"wb_sim_run: '{bag}' exists; not overwriting it (choose another --record path)",
              file=sys.stderr)
        return 2
    robot_yaml = str(config_path(args.robot))
    files = ["--params-file", robot_yaml] + (["--params-file", args.config] if args.config else [])
    node_cmd = [sys.executable, "-m", "wb_sim.ros.node", "--ros-args", *files,
                "-p", "publish.stats_period_s:=1.0", "-p", f"command.wait_for_first:={str(args.controller == 'pd').lower()}",
                "-p", f"real_time_factor:={args.real_time_factor}", "-p", f"sync.mode:={args.sync}",
                "-p", f"viewer:={args.viewer}"]

    def start(argv: list[str]) -> subprocess.Popen:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1)

    procs = {"wb_sim": start(node_cmd)}
    recording = threading.Event()  # the recorder has subscribed (or ended)
    if bag is not None:
        procs["record"] = start([sys.executable, "-m", "wb_sim.ros.record", "-o", str(bag)])
    else:
        recording.set()
    state = {"t": 0.0, "z0": None, "zmin": None, "zmax": None, "last": ""}
    done = threading.Event()

    def relay(name: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            print(f"[{name}] {line}", end="", flush=True)
            if name == "record" and "recording " in line:
                recording.set()
            m = STATS.search(line) if "real-time factor" in line else None
            if m and name == "wb_sim":
                state["t"], state["last"] = float(m["t"]), line.strip()
                b = BASE.search(line)
                if b is not None:
                    z = float(b["z"])
                    state["z0"] = z if state["z0"] is None else state["z0"]
                    state["zmin"] = z if state["zmin"] is None else min(state["zmin"], z)
                    state["zmax"] = z if state["zmax"] is None else max(state["zmax"], z)
                if state["t"] >= args.duration:
                    done.set()
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
    try:
        # the controller starts the physics (command.wait_for_first): not before the
        # recorder listens, so that the bag begins at t = 0
        while not recording.wait(0.2):
            if any(p.poll() is not None for p in procs.values()):
                break
        if args.controller == "pd" and not any(p.poll() is not None for p in procs.values()):
            procs["controller"] = start(
                [sys.executable, "-m", "wb_sim.ros.pd_controller", "--ros-args", *files])
            threads.append(threading.Thread(target=relay, args=("controller",
                                                                 procs["controller"]),
                                            daemon=True))
            threads[-1].start()
        while not done.wait(0.2):
            if any(p.poll() is not None for p in procs.values()):
                break
    except KeyboardInterrupt:
        pass
    failed = [n for n, p in procs.items() if p.poll() not in (None, 0)]
    if "record" in procs:  # first, so that the bag ends while the simulation still runs
        stop(["record"])
        if procs["record"].returncode != 0 and "record" not in failed:
            failed.append("record")
    stop([n for n in procs if n != "record"])
    for t in threads:
        t.join(1.0)
    if failed:
        print(f"wb_sim_run: {', '.join(failed)} exited with an error", file=sys.stderr)
        return 2
    if args.plot:
        from ..plot import main as plot_main  # matplotlib, rosbags: only now
        if plot_main([str(bag), "-o", args.plot]) != 0:
            return 2
    print(f"wb_sim_run: {state['t']:.1f} s simulated; last report: {state['last']}")
    if state["z0"] is not None:
        fell = state["zmin"] < state["z0"] - 0.1
        jumped = state["zmax"] > state["z0"] + 0.05
        verdict = "FELL" if fell else "UNSTEADY (the base rose by more than 5 cm)" if jumped \
            else "stands"
        print(f"wb_sim_run: base height first {state['z0']:.4f} m, lowest {state['zmin']:.4f} m, "
              f"highest {state['zmax']:.4f} m: {verdict}")
        return 1 if fell or jumped else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
