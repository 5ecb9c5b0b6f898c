"""``python -m wb_sim.ros.bench``: the ROS node's performance benchmark (issue 3, section 7).

Starts ``wb_sim_node`` (every output at its default rate) and, unless
``--controller none``, the example controller as separate processes, waits
for the first command, then measures over ``--duration`` wall seconds:

* the achieved real-time factor and the deadline misses per 1000 steps (a
  step finishing more than 1 ms after its deadline), from the node's report;
* the CPU share of one core of the node process (and of the controller), from
  ``/proc/<pid>/stat``;
* the p50/p99 latency from a ``joint_states`` message to the command it
  triggered being applied (the controller echoes the stamp).

With ``--real-time-factor 0`` it reports how many times faster than real
time the node runs with all outputs on. With ``--sync lockstep`` (issue 5) it
measures the closed loop's throughput instead: steps per second when every
step waits for the controller's answer over DDS, and the round trip from a
joint state being published to its command being taken, p50/p99. With
``--observer HZ --observer-windows S`` (issue 27) it measures what a process polling
``get_simulation_state`` costs the node's headroom: the observer polls in every other S
seconds, and each of its windows is compared with the windows on either side in the same run
(:func:`window_costs`), so that the machine's drift cancels.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

from ... import config_path
from .processes import stop

REPORT = re.compile(r"real-time factor (?P<rtf>[\d.]+) over (?P<wall>[\d.]+) s \(t = (?P<t>[\d.]+) s\), "
                    r"deadline misses (?P<miss>[\d.]+) per 1000 steps"
                    r"(?:, joint_states -> command applied p50 (?P<p50>[\d.]+) ms p99 (?P<p99>[\d.]+) ms)?")
LOCKSTEP_REPORT = re.compile(
    r"lockstep: (?P<sps>\d+) steps/s, real-time factor (?P<rtf>[\d.]+) over (?P<wall>[\d.]+) s "
    r"\(t = (?P<t>[\d.]+) s\), command timeouts (?P<miss>\d+), stale commands ignored \d+"
    r"(?:, joint_states -> command applied p50 (?P<p50>[\d.]+) ms p99 (?P<p99>[\d.]+) ms)?")


#: a plain rclpy listener of the 1 kHz streams, as RViz or a recorder would be (``--listener``,
#: and the tests' busy machine)
LISTENER_CODE = """
import rclpy
from nav_msgs.msg import Odometry
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Imu, JointState
from tf2_msgs.msg import TFMessage
rclpy.init()
node = rclpy.create_node('bench_listener')
qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
count = [0]
for topic, kind in (('/joint_states', JointState), ('/imu/data', Imu),
                    ('/odom/ground_truth', Odometry), ('/tf', TFMessage)):
    node.create_subscription(kind, topic, lambda m: count.__setitem__(0, count[0] + 1), qos)
try:
    while rclpy.ok():
        rclpy.spin_once(node, timeout_sec=0.1)
except KeyboardInterrupt:
    pass
"""
#: an observer polling the node's ``get_simulation_state`` (simulation_interfaces) at
#: ``HZ`` calls a second, as a dashboard would (``--observer HZ``); with a window ``W`` > 0
#: and a start ``T0`` (``time.monotonic()``, shared by the processes of one machine) it polls
#: only in every other window of ``W`` seconds from ``T0`` (on, off, on, ...:
#: ``--observer-windows``)
OBSERVER_CODE = """
import sys, time
import rclpy
from simulation_interfaces.srv import GetSimulationState
rclpy.init()
node = rclpy.create_node('bench_observer')
client = node.create_client(GetSimulationState, '/wb_sim/get_simulation_state')
period, answered, sent = 1.0 / float(sys.argv[1]), [0], 0
window, t0 = float(sys.argv[2]), float(sys.argv[3])
nxt = time.monotonic()
try:
    while rclpy.ok():
        now = time.monotonic()
        if window > 0 and int((now - t0) // window) % 2:  # an off window: skip its calls
            nxt = now + period
        elif now >= nxt and client.service_is_ready():
            f = client.call_async(GetSimulationState.Request())
            f.add_done_callback(lambda _f: answered.__setitem__(0, answered[0] + 1))
            sent += 1
            nxt += period
        rclpy.spin_once(node, timeout_sec=max(0.0, min(0.01, nxt - now)))
except KeyboardInterrupt:
    pass
"""

#: a process that burns one core
BURNER_CODE = "while True: pass"


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def window_costs(lines: list[tuple[float, float, float]], t0: float, window: float,
                 margin: float = 0.2) -> dict:
    """The observer's cost from the node's stats lines ``(end, period, real-time factor)``
    (``time.monotonic()`` at a line's arrival, the wall seconds it covers) of a run whose
    observer polled in every other ``window`` s from ``t0`` (on first): the lines wholly
    inside one window (``margin`` s after its switch left out) are its, and each on window
    is compared with the mean of the off windows on either side of it, so that a drift of
    the machine over the run (linear over three windows) cancels. Returns ``on`` and ``off``
    (the windows' mean factors), ``pairs`` (each on window's cost, 1 - on / off) and
    ``cost`` (their median), or {} without an on window between two off ones."""
    per: dict[int, list[float]] = {}
    for end, period, rtf in lines:
        k = int((end - t0) // window)
        if end - period >= t0 + k * window + margin:
            per.setdefault(k, []).append(rtf)
    means = {k: statistics.fmean(v) for k, v in per.items()}
    pairs = [1.0 - 2.0 * means[k] / (means[k - 1] + means[k + 1]) for k in sorted(means)
             if k % 2 == 0 and k - 1 in means and k + 1 in means
             and means[k - 1] + means[k + 1] > 0]
    if not pairs:
        return {}
    on = [m for k, m in means.items() if k % 2 == 0]
    off = [m for k, m in means.items() if k % 2 == 1]
    return {"on": statistics.fmean(on), "off": statistics.fmean(off), "pairs": pairs,
            "cost": statistics.median(pairs)}


def run(robot: str, duration: float, rtf: float, controller: bool,
        sync: str = "realtime", node_params: tuple[str, ...] = (), burners: int = 0,
        listener: bool = False, in_process: str = "", observer_hz: float = 0.0,
        observer_windows: float = 0.0) -> dict:
    """One measurement; ``burners`` CPU-burning processes and (``listener``) a plain
    rclpy listener of the 1 kHz streams run beside it; ``in_process``: a controller
    ``module:factory`` run inside the node instead of the external one; with
    ``observer_windows`` W > 0 the observer polls in every other W s, the node reports
    every W / 4 s, and the result holds the observer's cost (:func:`window_costs`)."""
    files = ["--params-file", str(config_path(robot))]
    env = dict(os.environ)
    env.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
    load = [subprocess.Popen([sys.executable, "-c", BURNER_CODE]) for _ in range(burners)]
    if listener:
        load.append(subprocess.Popen([sys.executable, "-c", LISTENER_CODE], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    t0 = time.monotonic()
    if observer_hz > 0:
        load.append(subprocess.Popen([sys.executable, "-c", OBSERVER_CODE, str(observer_hz),
                                      repr(observer_windows), repr(t0)],
                                     env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL))
    windowed = observer_hz > 0 and observer_windows > 0
    period = observer_windows / 4 if windowed else duration
    if in_process:
        from ..parameters import launcher_layers
        defaults, explicit = launcher_layers(in_process, config_path(robot))
        node_params = (f"controller.callable:={in_process}",
                       f'controller.params:="{defaults.get("controller.params", "{}")}"',
                       *node_params)
    node = subprocess.Popen(
        [sys.executable, "-m", "wb_sim.ros.process", "--ros-args", *files,
         "-p", f"real_time_factor:={rtf}", "-p", f"publish.stats_period_s:={period}",
         "-p", f"command.wait_for_first:={'true' if controller else 'false'}",
         "-p", f"sync.mode:={sync}", *(a for kv in node_params for a in ("-p", kv))],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env)
    ctrl = subprocess.Popen([sys.executable, "-m", "wb_sim.ros.pd_controller", "--ros-args", *files],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env) \
        if controller else None
    out: dict = {"robot": robot, "real_time_factor_requested": rtf, "sync": sync}
    report = LOCKSTEP_REPORT if sync == "lockstep" else REPORT
    windows: list[tuple[float, float, float]] = []
    try:
        started = None
        for line in node.stdout:
            if started is None and ("first command received" in line or
                                    (not controller and "simulating" in line)):
                started = time.monotonic()
                cpu0 = _cpu_seconds(node.pid)
                cpu0_ctrl = _cpu_seconds(ctrl.pid) if ctrl else 0.0
            m = report.search(line)
            if m and started is not None and windowed:
                now = time.monotonic()
                windows.append((now, float(m["wall"]), float(m["rtf"])))
                if now - started < duration:
                    continue
                out.update(window_costs(windows, t0, observer_windows))
                wall = now - started
                out["node_cpu_percent"] = 100 * (_cpu_seconds(node.pid) - cpu0) / wall
                out.update(real_time_factor=sum(w[2] * w[1] for w in windows)
                           / sum(w[1] for w in windows), wall_s=wall, sim_t=0.0)
                break
            if m and started is not None:
                wall = time.monotonic() - started
                out["node_cpu_percent"] = 100 * (_cpu_seconds(node.pid) - cpu0) / wall
                if ctrl:
                    out["controller_cpu_percent"] = 100 * (_cpu_seconds(ctrl.pid) - cpu0_ctrl) / wall
                out.update(real_time_factor=float(m["rtf"]), wall_s=float(m["wall"]),
                           sim_t=float(m["t"]))
                pacing = re.search(r"pacing: ((?:[^,(]|\([^)]*\))+)", line)  # (a, b) kept
                if pacing:
                    out["pacing"] = pacing[1].strip()
                answered = re.search(r"requests answered (\d+) in all", line)
                if answered:
                    out["requests_answered"] = int(answered[1])
                if sync == "lockstep":
                    out.update(steps_per_s=float(m["sps"]), command_timeouts=int(m["miss"]))
                else:
                    out.update(misses_per_1000=float(m["miss"]))
                if m["p50"]:
                    out.update(latency_p50_ms=float(m["p50"]), latency_p99_ms=float(m["p99"]))
                break
    finally:
        for p in load:
            p.kill()
            p.wait()
        stop(node, ctrl)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m wb_sim.ros.bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="humanoid")
    ap.add_argument("--duration", type=float, default=60.0, help="measured wall seconds (60)")
    ap.add_argument("--real-time-factor", type=float, default=1.0)
    ap.add_argument("--controller", default="pd", metavar="pd|none|MODULE:FACTORY",
                    help="pd: the example controller as its own process; none; or an "
                         "in-process controller, e.g. wb_sim.controllers:pd_gravity")
    ap.add_argument("--burners", type=int, default=0,
                    help="CPU-burning processes beside the run (a loaded machine)")
    ap.add_argument("--listener", action="store_true",
                    help="a plain rclpy listener of joint_states, imu, odom and tf beside it")
    ap.add_argument("--observer", type=float, default=0.0, metavar="HZ",
                    help="a process polling the node's get_simulation_state HZ times a "
                         "second beside it (issue 27: an observer's cost)")
    ap.add_argument("--observer-windows", type=float, default=0.0, metavar="S",
                    help="the observer polls in every other S seconds only, and the cost is "
                         "the real-time factor of each of its windows against the windows "
                         "on either side (so that the machine's drift cancels; issue 27)")
    ap.add_argument("--sync", choices=("realtime", "lockstep"), default="realtime",
                    help="the node's sync.mode (lockstep: use --real-time-factor 0 for throughput)")
    ap.add_argument("--realtime-priority", type=int,
                    help="the node's realtime_priority (0: the normal scheduler and the "
                         "sleep + spin wait); default: the node's (50)")
    ap.add_argument("--spin-margin", type=float,
                    help="the node's realtime_spin_margin_s, s (default: the node's, 0.0002)")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="KEY:=VALUE",
                    help="any other parameter of the node, as ros2 run's -p (repeatable), "
                         "e.g. -p collision.enabled:=false")
    args = ap.parse_args(argv)
    bad = [kv for kv in args.param if ":=" not in kv or not kv.partition(":=")[0]]
    if bad:
        ap.error(f"--param {bad[0]!r}: expected KEY:=VALUE")
    if args.sync == "lockstep" and args.controller == "none":
        ap.error("--sync lockstep needs a controller to answer")
    params = tuple([f"realtime_priority:={args.realtime_priority}"] * (args.realtime_priority is not None)
                   + [f"realtime_spin_margin_s:={args.spin_margin}"] * (args.spin_margin is not None)
                   + args.param)
    if not 0 <= args.observer <= 10_000:
        ap.error("--observer must be in 0..10000 Hz")
    if args.observer_windows and not (args.observer and 0.5 <= args.observer_windows <= 600
                                      and args.duration >= 4 * args.observer_windows):
        ap.error("--observer-windows needs --observer, 0.5..600 s, and a --duration of at "
                 "least 4 windows")
    if not 0 <= args.burners <= 64:
        ap.error("--burners must be in 0..64")
    in_process = args.controller if ":" in args.controller else ""
    if args.controller not in ("pd", "none") and not in_process:
        ap.error("--controller: pd, none or MODULE:FACTORY")
    r = run(args.robot, args.duration, args.real_time_factor, args.controller == "pd", args.sync,
            params, args.burners, args.listener, in_process, args.observer,
            args.observer_windows)
    if "real_time_factor" not in r:
        print("bench: the node produced no report", file=sys.stderr)
        return 2
    print(f"robot {r['robot']}, sync {args.sync}, requested real-time factor "
          f"{args.real_time_factor:g}, controller {args.controller}, beside it: "
          f"{args.burners} CPU burner(s)" + (" and a 1 kHz listener" if args.listener else "")
          + (f" and a {args.observer:g} Hz get_simulation_state observer" if args.observer else ""))
    print(f"  achieved real-time factor {r['real_time_factor']:.3f} over {r['wall_s']:.1f} s "
          f"(t = {r['sim_t']:.1f} s)" if not args.observer_windows else
          f"  achieved real-time factor {r['real_time_factor']:.3f} over {r['wall_s']:.1f} s")
    if args.observer_windows:
        if "cost" not in r:
            print("bench: no pair of observer windows was measured", file=sys.stderr)
            return 2
        print(f"  observer windows of {args.observer_windows:g} s: real-time factor "
              f"{r['off']:.3f} without, {r['on']:.3f} with; cost to the headroom, median of "
              f"{len(r['pairs'])} windows: {100 * r['cost']:.1f} % (each: "
              + " ".join(f"{100 * c:.1f}" for c in r["pairs"]) + ")")
    if args.sync == "lockstep":
        print(f"  lockstep throughput       {r['steps_per_s']:.0f} steps/s "
              f"({r['command_timeouts']} command timeouts)")
    elif "misses_per_1000" in r:
        print(f"  deadline misses           {r['misses_per_1000']:.2f} per 1000 steps"
              f" (pacing: {r.get('pacing', '?')})")
    print(f"  node CPU                  {r['node_cpu_percent']:.0f} % of one core")
    if "requests_answered" in r:
        print(f"  requests answered         {r['requests_answered']} since the node started")
    if "controller_cpu_percent" in r:
        print(f"  controller CPU            {r['controller_cpu_percent']:.0f} % of one core")
    if "latency_p50_ms" in r:
        print(f"  joint_states -> applied   p50 {r['latency_p50_ms']:.2f} ms, "
              f"p99 {r['latency_p99_ms']:.2f} ms")
    return 0

