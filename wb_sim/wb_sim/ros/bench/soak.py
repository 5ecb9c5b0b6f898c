"""``python -m wb_sim.ros.bench.soak``: a long run of the node and the example controller (issue 13).

Starts ``wb_sim_node`` (``--robot``, real-time factor 1, a stats line every
``--period`` s) and the example PD controller as separate processes, and
optionally a process sending malformed messages at ``--flood-hz`` on every
input topic at once (the node must count and drop them for the whole run).
Every ``--period`` s it samples the resident memory (VmRSS) of the node and
the controller and reads the node's stats line: achieved real-time factor,
deadline misses and the base height. At the end (``--duration`` s, or
Ctrl-C) it prints:

* memory: the node's and the controller's RSS first / last / max and the
  slope of a least-squares line over the second half of the run (MB/h);
* misses: deadline misses per 1000 steps over the run, and the worst period;
* stands: the base height's range over the run and whether it stayed within
  ``--band`` m of its first reading (the humanoid stands under the controller);
* the rejections the node counted, and whether both processes are alive.

Exit code 0 when both processes lived to the end and the robot stood.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time

from ... import config_path
from .processes import APPLIED, REJECTED, NodeProcess, bench_env, stop

REPORT = re.compile(r"real-time factor (?P<rtf>[\d.]+) over (?P<wall>[\d.]+) s \(t = (?P<t>[\d.]+) s\), "
                    r"deadline misses (?P<miss>[\d.]+) per 1000 steps")
BASE = re.compile(r"base at \((?P<x>[-\d.]+), (?P<y>[-\d.]+), (?P<z>[-\d.]+)\) m")


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _realtime(pid: int, priority: int) -> None:
    """SCHED_FIFO ``priority`` for every thread of process ``pid``."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setscheduler(int(tid), os.SCHED_FIFO, os.sched_param(priority))
        except OSError as e:
            print(f"soak: cannot give the controller real-time priority: {e}", file=sys.stderr)
            return


_written = {"n": 0}


def _write_log(path: str, node: NodeProcess) -> None:
    lines = node.lines[_written["n"]:]
    if lines:
        with open(path, "a") as f:
            f.writelines(f"{t:.3f} {text}\n" for t, text in lines)
        _written["n"] += len(lines)


def _slope_per_hour(ts: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over ts (s), per hour; over the second half."""
    n = len(ts)
    ts, ys = ts[n // 2:], ys[n // 2:]
    if len(ts) < 2:
        return float("nan")
    mt, my = sum(ts) / len(ts), sum(ys) / len(ys)
    den = sum((t - mt) ** 2 for t in ts)
    return 3600.0 * sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / den if den else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m wb_sim.ros.bench.soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="humanoid")
    ap.add_argument("--duration", type=float, default=3600.0, help="wall seconds (3600)")
    ap.add_argument("--period", type=float, default=60.0, help="stats and memory period, s (60)")
    ap.add_argument("--flood-hz", type=float, default=0.0,
                    help="malformed messages per second on each input topic (0: none)")
    ap.add_argument("--band", type=float, default=0.02, help="standing band of the base height, m")
    ap.add_argument("--controller-priority", type=int, default=0,
                    help="SCHED_FIFO priority for the controller's threads (0: normal scheduler); "
                         "on a machine loaded by other work a normal-priority controller answers "
                         "late and the humanoid falls")
    ap.add_argument("--hold-last", action="store_true",
                    help="command.timeout_action: hold (a controller starved for more than "
                         "command.timeout_s keeps its last torques instead of zero)")
    ap.add_argument("--log", help="write the node's log lines to this file as they come "
                                  "(the controller's to FILE.controller)")
    args = ap.parse_args(argv)

    files = ["--params-file", str(config_path(args.robot))]
    env = bench_env()
    flooders: list[subprocess.Popen] = []
    if args.flood_hz > 0:  # started first: their start-up load must not meet the robot's first steps
        import wb_sim
        names = ",".join(wb_sim.Simulator.from_yaml(config_path(args.robot)).joint_names)
        for topic in ("joint_commands", "effort_commands", "external_wrench"):
            flooders.append(subprocess.Popen(
                [sys.executable, "-m", "wb_sim.ros.bench.flood", "--flooder", topic,
                 str(args.flood_hz), str(args.duration + 60.0), names, "0", "0"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        time.sleep(5.0)
    node = NodeProcess([sys.executable, "-m", "wb_sim.ros.process", "--ros-args", *files,
                  "-p", f"publish.stats_period_s:={args.period}",
                  "-p", "command.wait_for_first:=true",
                  *(["-p", "command.timeout_action:=hold"] if args.hold_last else [])], env)
    ctrl_out = open(f"{args.log}.controller", "w") if args.log else subprocess.DEVNULL
    ctrl = subprocess.Popen([sys.executable, "-m", "wb_sim.ros.pd_controller", "--ros-args", *files],
                            stdout=ctrl_out, stderr=subprocess.STDOUT, env=env)
    interrupted = {"now": False}
    signal.signal(signal.SIGINT, lambda *_: interrupted.update(now=True))
    signal.signal(signal.SIGTERM, lambda *_: interrupted.update(now=True))
    samples: list[tuple[float, float, float]] = []  # (t, node MB, controller MB)
    t0 = time.monotonic()
    try:
        if not node.wait_for("first command received", 60):
            print("soak: the node got no command:\n" + "\n".join(t for _, t in node.lines[-20:]),
                  file=sys.stderr)
            return 2
        if args.controller_priority > 0:
            _realtime(ctrl.pid, args.controller_priority)
        print(f"soak: {args.robot}, {args.duration:g} s, flood {args.flood_hz:g} Hz per topic; "
              f"node pid {node.proc.pid}, controller pid {ctrl.pid}", flush=True)
        t0 = time.monotonic()
        next_sample = t0
        while not interrupted["now"] and time.monotonic() - t0 < args.duration:
            if args.log:
                _write_log(args.log, node)
            if node.proc.poll() is not None or ctrl.poll() is not None:
                break
            if time.monotonic() >= next_sample:
                t = time.monotonic() - t0
                samples.append((t, _rss_mb(node.proc.pid), _rss_mb(ctrl.pid)))
                print(f"soak: t = {t:7.0f} s  RSS node {samples[-1][1]:6.1f} MB, controller "
                      f"{samples[-1][2]:6.1f} MB", flush=True)
                next_sample += args.period
            time.sleep(0.5)
        samples.append((time.monotonic() - t0, _rss_mb(node.proc.pid), _rss_mb(ctrl.pid)))
        alive = node.proc.poll() is None and ctrl.poll() is None
    finally:
        stop(*flooders, ctrl, node.proc)
        node.join()  # every line the node wrote
    elapsed = time.monotonic() - t0

    steps = misses = 0.0
    worst = 0.0
    zs: list[float] = []
    rtfs: list[float] = []
    rejected: dict[str, int] = {}
    for _, text in node.lines:
        m = REPORT.search(text)
        if not m:
            continue
        n = float(m["wall"]) * float(m["rtf"]) * 1000.0  # steps at 1 kHz
        steps += n
        misses += float(m["miss"]) * n / 1000.0
        worst = max(worst, float(m["miss"]))
        rtfs.append(float(m["rtf"]))
        b = BASE.search(text)
        if b:
            zs.append(float(b["z"]))
        a = APPLIED.search(text)
        r = REJECTED.search(text)
        if r:
            for item in r["list"].split(", "):
                key, _, k = item.rpartition(" ")
                rejected[key] = rejected.get(key, 0) + int(k)
        del a
    ts = [s[0] for s in samples]
    if args.log:
        _write_log(args.log, node)
    exit_node = node.proc.poll()
    if exit_node not in (None, 0):
        print(f"soak: the node exited with code {exit_node}; its last lines:\n" +
              "\n".join(t for _, t in node.lines[-15:]))
    print(f"soak: {elapsed:.0f} s wall, both processes alive to the end: {alive}")
    for label, col in (("node", 1), ("controller", 2)):
        ys = [s[col] for s in samples]
        print(f"  memory {label:10s} RSS first {ys[0]:.1f} MB, last {ys[-1]:.1f} MB, max "
              f"{max(ys):.1f} MB, slope over the second half {_slope_per_hour(ts, ys):+.2f} MB/h")
    if rtfs:
        print(f"  real-time factor per period: min {min(rtfs):.3f}, max {max(rtfs):.3f} "
              f"({len(rtfs)} periods)")
        print(f"  deadline misses {1000.0 * misses / steps:.2f} per 1000 steps over the run "
              f"({misses:.0f} of {steps:.0f}), worst period {worst:.2f}")
    import wb_sim
    z0 = wb_sim.Simulator.from_yaml(config_path(args.robot)).q0[2]  # the initial base height
    stood = bool(zs) and all(abs(z - z0) < args.band for z in zs)
    if zs:
        print(f"  base height: initial {z0:.4f} m, in the stats lines {min(zs):.4f} .. "
              f"{max(zs):.4f} m; stood (within {args.band:g} m of the initial): {stood}")
    if rejected:
        print("  rejected messages counted: " +
              ", ".join(f"{k} {v}" for k, v in sorted(rejected.items())))
    return 0 if alive and stood else 1


if __name__ == "__main__":
    sys.exit(main())
