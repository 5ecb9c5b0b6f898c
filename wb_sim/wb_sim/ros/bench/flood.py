"""``python -m wb_sim.ros.bench.flood``: the node under a flood of malformed messages (issue 13).

Starts ``wb_sim_node`` (humanoid, real-time factor 1, a stats line every
``--period`` s, no watchdog) and a flooding process, which floods one input
topic at a time with malformed messages at each ``--rates`` (Hz), for
``--duration`` s each; it reads from the node's stats lines that fall wholly
inside each flood:

* the achieved real-time factor;
* the fraction of valid commands applied: the flooder also sends valid
  joint torques (gravity compensation at the initial posture) at 1 kHz,
  interleaved with the malformed ones on the same topic (on joint_commands
  while external_wrench is flooded); the node counts the valid commands it
  takes, and a valid command taken is applied at the next step;
* the rejections the node counted, by reason (nothing is logged per message).

The malformed messages rotate over the kinds of each topic: ``joint_commands``
NaN effort / unknown joint / mismatched lengths; ``effort_commands`` NaN
entry / wrong length; ``external_wrench`` unknown link / NaN force / empty
frame. With ``--sync lockstep`` (real-time factor 0) the example controller
answers every joint state and the flood is of wrongly stamped
``joint_commands``; the figure is the lockstep throughput (steps/s).

The flooder publishes pre-serialized messages; the rate it achieved is
reported next to the one asked for (on a loaded machine it may fall short).
"""

from __future__ import annotations

import argparse
import math
import re
import subprocess
import sys
import time

from ... import config_path
from .processes import APPLIED, REJECTED, NodeProcess, bench_env, stop

RTF = re.compile(r"real-time factor (?P<rtf>[\d.]+) over (?P<wall>[\d.]+) s")
SPS = re.compile(r"lockstep: (?P<sps>\d+) steps/s.*stale commands ignored (?P<stale>\d+)")
TOPICS = ("joint_commands", "effort_commands", "external_wrench")


def _malformed(topic: str, joint_names: list[str]) -> list[bytes]:
    """Serialized malformed messages for ``topic`` (rotated by the flooder)."""
    from rclpy.serialization import serialize_message
    from geometry_msgs.msg import WrenchStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    n = len(joint_names)
    if topic == "joint_commands":
        msgs = [JointState(name=list(joint_names), effort=[math.nan] + [0.0] * (n - 1)),
                JointState(name=["no_such_joint"], effort=[1.0]),
                JointState(name=list(joint_names[:2]), effort=[1.0])]
    elif topic == "effort_commands":
        msgs = [Float64MultiArray(data=[math.nan] * n), Float64MultiArray(data=[0.0] * (n + 3))]
    elif topic == "stale_joint_commands":  # valid efforts, a stamp no state has
        m = JointState(name=list(joint_names), effort=[0.0] * n)
        m.header.stamp.sec = 999_999
        msgs = [m]
    else:
        msgs = []
        for frame, fx in (("no_such_link", 1.0), ("base_link", math.nan), ("", 1.0)):
            w = WrenchStamped()
            w.header.frame_id = frame
            w.wrench.force.x = fx
            msgs.append(w)
    return [serialize_message(m) for m in msgs]


def flooder(topic: str, rate_hz: float, duration: float, joint_names: list[str],
            valid_hz: float, efforts: list[float]) -> int:
    """The flooding process: publish malformed messages on ``topic`` at
    ``rate_hz`` and valid commands (``efforts``) at ``valid_hz`` on the same
    topic (on joint_commands when ``topic`` is external_wrench), interleaved,
    for ``duration`` s; prints 'flood start <wall>' and
    'flood end <wall> <malformed sent> <their rate> <valid sent> <their rate>'."""
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from geometry_msgs.msg import WrenchStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    rclpy.init()
    node = rclpy.create_node("wb_sim_flooder")
    msg_type = {"joint_commands": JointState, "stale_joint_commands": JointState,
                "effort_commands": Float64MultiArray, "external_wrench": WrenchStamped}[topic]
    name = "joint_commands" if topic == "stale_joint_commands" else topic
    pub = node.create_publisher(msg_type, name, QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE))
    from rclpy.serialization import serialize_message
    data = _malformed(topic, joint_names)
    # the valid commands from their own writer, as a controller's would be (one writer of
    # depth 1 for both would overwrite a valid message not yet delivered)
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
    if topic == "effort_commands":
        valid_pub = node.create_publisher(Float64MultiArray, "effort_commands", qos)
        valid = serialize_message(Float64MultiArray(data=efforts))
    else:
        valid_pub = node.create_publisher(JointState, "joint_commands", qos)
        valid = serialize_message(JointState(name=joint_names, effort=efforts))

    from ..rclpy_shim import raw_publisher
    publish, publish_valid = raw_publisher(pub), raw_publisher(valid_pub)
    deadline = time.monotonic() + 60.0
    while (pub.get_subscription_count() < 1 or valid_pub.get_subscription_count() < 1) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    print(f"flood start {time.time():.6f}", flush=True)
    t0 = time.perf_counter()
    sent = sent_valid = 0
    while True:
        now = time.perf_counter() - t0
        if now >= duration:
            break
        due, due_valid = int(now * rate_hz), int(now * valid_hz)
        while sent < due or sent_valid < due_valid:
            # valid ones spread among the malformed ones, each followed by its share
            if sent_valid < due_valid and (sent_valid * rate_hz <= sent * valid_hz or sent >= due):
                publish_valid(valid)
                sent_valid += 1
            else:
                publish(data[sent % len(data)])
                sent += 1
        time.sleep(0.0005)
    wall = time.perf_counter() - t0
    print(f"flood end {time.time():.6f} {sent} {sent / wall:.0f} {sent_valid} "
          f"{sent_valid / wall:.1f}", flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def _window(node: NodeProcess, start: float, end: float) -> dict:
    """Aggregate the node's stats lines whose period lies inside [start, end]."""
    rtf_num = rtf_den = 0.0
    applied = steps = accepted = 0
    sps = []
    rejected: dict[str, int] = {}
    for t, text in list(node.lines):
        m = RTF.search(text)
        if not m:
            continue
        wall = float(m["wall"])
        if t - wall < start - 0.05 or t > end + 0.05:
            continue
        rtf_num += float(m["rtf"]) * wall
        rtf_den += wall
        a = APPLIED.search(text)
        if a:
            applied += int(a["applied"])
            accepted += int(a["accepted"])
            steps += int(a["steps"])
        s = SPS.search(text)
        if s:
            sps.append(float(s["sps"]))
            rejected["joint_commands stale stamp"] = (rejected.get("joint_commands stale stamp", 0)
                                                      + int(s["stale"]))
        r = REJECTED.search(text)
        if r:
            for item in r["list"].split(", "):
                key, _, n = item.rpartition(" ")
                rejected[key] = rejected.get(key, 0) + int(n)
    return {"rtf": rtf_num / rtf_den if rtf_den else float("nan"), "wall": rtf_den,
            "applied": applied, "steps": steps, "accepted": accepted,
            "accepted_per_step": accepted / steps if steps else float("nan"),
            "fraction": applied / steps if steps else float("nan"),
            "steps_per_s": sum(sps) / len(sps) if sps else float("nan"), "rejected": rejected}


def run(topics, rates, duration: float, period: float, sync: str, robot: str = "humanoid"):
    files = ["--params-file", str(config_path(robot))]
    env = bench_env()
    lockstep = sync == "lockstep"
    # realtime: the valid commands come from the flooder itself (1 kHz, counted), so
    # that the fraction applied is exact; lockstep: the example controller answers
    node = NodeProcess([sys.executable, "-m", "wb_sim.ros.process", "--ros-args", *files,
                  "-p", f"real_time_factor:={0.0 if lockstep else 1.0}",
                  "-p", f"publish.stats_period_s:={period}", "-p", f"sync.mode:={sync}",
                  "-p", "command.timeout_s:=0.0"], env)
    ctrl = subprocess.Popen([sys.executable, "-m", "wb_sim.ros.pd_controller", "--ros-args", *files],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env) \
        if lockstep else None
    try:
        if not node.wait_for("first command received" if lockstep else "simulating", 60):
            raise RuntimeError("the node did not start:\n" +
                               "\n".join(t for _, t in node.lines[-20:]))
        import wb_sim
        sim = wb_sim.Simulator.from_yaml(config_path(robot))
        names = list(sim.joint_names)
        efforts = [float(x) for x in sim.gravity_torques()]
        time.sleep(2 * period)  # settle
        cases = [("none", 0.0)] + [(t, r) for t in topics for r in rates]
        for topic, rate in cases:
            flood_topic = topic
            if topic == "none":  # only the valid commands
                flood_topic = "stale_joint_commands" if lockstep else "joint_commands"
            fl = subprocess.Popen(
                [sys.executable, "-m", "wb_sim.ros.bench.flood", "--flooder", flood_topic,
                 str(rate), str(duration), ",".join(names), "0" if lockstep else "1000",
                 ",".join(map(repr, efforts))],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
            out = fl.communicate(timeout=duration + 60)[0]
            start = float(re.search(r"flood start ([\d.]+)", out)[1])
            m = re.search(r"flood end ([\d.]+) (\d+) (\d+) (\d+) ([\d.]+)", out)
            end, sent, achieved, valid_hz = float(m[1]), int(m[2]), float(m[3]), float(m[5])
            time.sleep(period + 0.5)  # the stats line closing the flood's last period
            r = _window(node, start, end)
            r.update(topic=topic, rate_hz=rate, sent=sent, achieved_hz=achieved,
                     valid_hz=valid_hz, alive=node.proc.poll() is None)
            # valid commands taken per second of the windows over those sent per second
            r["valid_fraction"] = (r["accepted"] / r["wall"] / valid_hz
                                   if valid_hz and r["wall"] else float("nan"))
            yield r
    finally:
        stop(ctrl, node.proc)


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "--flooder":
        return flooder(argv[1], float(argv[2]), float(argv[3]), argv[4].split(","),
                       float(argv[5]), [float(x) for x in argv[6].split(",")])
    ap = argparse.ArgumentParser(prog="python -m wb_sim.ros.bench.flood",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", default=",".join(TOPICS),
                    help="flooded topics, comma-separated (default: all three)")
    ap.add_argument("--rates", default="1000,5000,20000", help="flood rates, Hz")
    ap.add_argument("--duration", type=float, default=8.0, help="s of flood per case")
    ap.add_argument("--period", type=float, default=2.0, help="the node's stats period, s")
    ap.add_argument("--sync", choices=("realtime", "lockstep"), default="realtime")
    args = ap.parse_args(argv)
    topics = args.topics.split(",")
    if args.sync == "lockstep":
        topics = ["stale_joint_commands"]
    rates = [float(r) for r in args.rates.split(",")]
    print(f"{'flooded topic':22s} {'asked Hz':>9s} {'sent Hz':>8s} {'RTF':>6s} "
          f"{'steps/s' if args.sync == 'lockstep' else 'applied':>8s}"
          f"  rejected (counted by the node)",
          flush=True)
    ok = True
    for r in run(topics, rates, args.duration, args.period, args.sync):
        col = (f"{r['steps_per_s']:8.0f}" if args.sync == "lockstep" else
               f"{r['valid_fraction']:8.3f}")
        rej = ", ".join(f"{k} {v}" for k, v in sorted(r["rejected"].items())) or "-"
        print(f"{r['topic']:22s} {r['rate_hz']:9.0f} {r['achieved_hz']:8.0f} {r['rtf']:6.3f} "
              f"{col}  {rej}{'' if r['alive'] else '  NODE DIED'}", flush=True)
        ok = ok and r["alive"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
