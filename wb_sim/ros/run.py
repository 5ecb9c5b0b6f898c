"""``wb_sim_run`` / ``python -m wb_sim.ros.run``: the simulator node and the example
controller as two processes, for machines without ``ros2 launch`` (pip-only).

It starts ``wb_sim_node`` with the robot's configuration and, unless
``--controller none``, ``wb_sim_pd_controller``; relays their logs; stops both
with SIGINT once the node reports ``--duration`` seconds of simulated time;
and exits with 0 if the floating base stayed up (its height never dropped by
more than 0.1 m), 1 if it fell, 2 if a process failed. In a ROS install use
``ros2 launch wb_sim sim.launch.py`` instead.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import threading
import time

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
    args = ap.parse_args(argv)
    robot_yaml = str(config_path(args.robot))
    files = ["--params-file", robot_yaml] + (["--params-file", args.config] if args.config else [])
    node_cmd = [sys.executable, "-m", "wb_sim.ros.node", "--ros-args", *files,
                "-p", "publish.stats_period_s:=1.0", "-p", f"command.wait_for_first:={str(args.controller == 'pd').lower()}",
                "-p", f"real_time_factor:={args.real_time_factor}"]
    procs = {"wb_sim": subprocess.Popen(node_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, bufsize=1)}
    if args.controller == "pd":
        procs["controller"] = subprocess.Popen(
            [sys.executable, "-m", "wb_sim.ros.pd_controller", "--ros-args", *files],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    state = {"t": 0.0, "z0": None, "zmin": None, "last": ""}
    done = threading.Event()

    def relay(name: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            print(f"[{name}] {line}", end="", flush=True)
            m = STATS.search(line) if "real-time factor" in line else None
            if m and name == "wb_sim":
                state["t"], state["last"] = float(m["t"]), line.strip()
                b = BASE.search(line)
                if b is not None:
                    z = float(b["z"])
                    state["z0"] = z if state["z0"] is None else state["z0"]
                    state["zmin"] = z if state["zmin"] is None else min(state["zmin"], z)
                if state["t"] >= args.duration:
                    done.set()
        done.set()  # the process ended

    threads = [threading.Thread(target=relay, args=kv, daemon=True) for kv in procs.items()]
    for t in threads:
        t.start()
    try:
        while not done.wait(0.2):
            if any(p.poll() is not None for p in procs.values()):
                break
    except KeyboardInterrupt:
        pass
    failed = [n for n, p in procs.items() if p.poll() not in (None, 0)]
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 10
    for p in procs.values():
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
    for t in threads:
        t.join(1.0)
    if failed:
        print(f"wb_sim_run: {', '.join(failed)} exited with an error", file=sys.stderr)
        return 2
    print(f"wb_sim_run: {state['t']:.1f} s simulated; last report: {state['last']}")
    if state["z0"] is not None:
        fell = state["zmin"] < state["z0"] - 0.1
        print(f"wb_sim_run: base height first {state['z0']:.4f} m, lowest {state['zmin']:.4f} m: "
              f"{'FELL' if fell else 'stands'}")
        return 1 if fell else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
