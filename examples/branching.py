"""Branching over ROS: save the simulation once, try pushes from that state, restore
between them, and print a table of the outcomes (docs/ros.md, "Snapshots").

Start the node with a controller that runs inside it (deterministic), e.g. the example PD::

    wb_sim_node --ros-args --params-file config/humanoid.yaml \\
        -p controller.callable:=wb_sim.controllers:pd_gravity \\
        -p 'controller.params:="{kp: 1000.0, kd: 20.0}"'

then ``python examples/branching.py --reset --forces 0 100 200 300 400``. The script
pauses the node (with ``--reset``, back to the initial state), saves the snapshot
``branch_root``, and for each force restores it,
pushes the root link along x for ``external_wrench.duration_s`` (0.1 s by default) and
steps ``--seconds`` while paused (``step_simulation``); it deletes the snapshot at the end.
The same node gives the same table every time: each branch starts from the same state,
bit for bit, and stepping while paused takes no wall-clock decision.
"""

from __future__ import annotations

import argparse
import sys

import rclpy
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.duration import Duration
from rclpy.qos import QoSProfile, ReliabilityPolicy
from simulation_interfaces.msg import Result
from simulation_interfaces.srv import StepSimulation
from std_srvs.srv import SetBool, Trigger
from wb_sim_interfaces.srv import DeleteSnapshot, GetDynamics, RestoreSnapshot, SaveSnapshot

ROOT = "branch_root"


def stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


class Brancher:
    def __init__(self, node, sim_name: str = "/wb_sim"):
        self.node = node
        self.odom: list = []
        node.create_subscription(Odometry, "odom/ground_truth", self.odom.append,
                                 QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE))
        self.push = node.create_publisher(WrenchStamped, "external_wrench",
                                          QoSProfile(depth=10,
                                                     reliability=ReliabilityPolicy.RELIABLE))
        self.clients = {name: node.create_client(kind, f"{sim_name}/{name}") for name, kind in (
            ("pause", SetBool), ("reset", Trigger), ("save_snapshot", SaveSnapshot),
            ("restore_snapshot", RestoreSnapshot), ("delete_snapshot", DeleteSnapshot),
            ("step_simulation", StepSimulation), ("get_dynamics", GetDynamics))}

    def call(self, name: str, request, timeout: float = 120.0):
        client = self.clients[name]
        if not client.wait_for_service(timeout_sec=30.0):
            sys.exit(f"branching: no service {client.srv_name} (is wb_sim_node running, with "
                     f"simulation_interfaces?)")
        future = client.call_async(request)
        rclpy.spin_until_future_complete(self.node, future, timeout_sec=timeout)
        if not future.done():
            sys.exit(f"branching: {client.srv_name} gave no answer within {timeout:g} s")
        res = future.result()
        result = getattr(res, "result", None)
        if isinstance(result, Result) and result.result != Result.RESULT_OK:
            sys.exit(f"branching: {client.srv_name}: {result.error_message}")
        if isinstance(result, int) and result != res.RESULT_OK:  # wb_sim_interfaces' codes
            sys.exit(f"branching: {client.srv_name}: {res.message}")
        return res

    def settle(self, seconds: float) -> None:
        end = self.node.get_clock().now().nanoseconds + int(seconds * 1e9)
        while self.node.get_clock().now().nanoseconds < end:
            rclpy.spin_once(self.node, timeout_sec=0.01)

    def branch(self, force: float, steps: int, dt_ns: int, root_link: str
               ) -> tuple[float, float, float]:
        """Restore the root, push with ``force`` N along x, step: (lowest base height,
        final base height, final base x), m."""
        self.odom.clear()
        self.call("restore_snapshot", RestoreSnapshot.Request(name=ROOT))
        if force:
            msg = WrenchStamped()
            msg.header.frame_id = root_link
            msg.wrench.force.x = float(force)
            self.push.publish(msg)
            # in the node's queue before the first step (a reliable reader acknowledges
            # what it holds): the push then acts from the first step, every time
            if not self.push.wait_for_all_acked(Duration(seconds=30)):
                sys.exit("branching: the node did not take the push within 30 s")
        self.call("step_simulation", StepSimulation.Request(steps=steps))
        # the state the branch ended at, exactly, and its stamp: the node's own answer
        end = self.call("get_dynamics", GetDynamics.Request(names=["q"]))
        end_ns, q = end.stamp.sec * 1_000_000_000 + end.stamp.nanosec, end.q
        start_ns = end_ns - steps * dt_ns
        mine = {}  # stamp -> base height, the states of this branch (one per step)

        def complete():
            mine.update((stamp_ns(m), m.pose.pose.position.z) for m in self.odom
                        if start_ns < stamp_ns(m) <= end_ns)
            return len(mine) >= steps
        self.wait(complete, f"the {steps} states of the branch")
        return min(mine.values()), q[2], q[0]

    def wait(self, done, what: str, timeout: float = 60.0) -> None:
        end = self.node.get_clock().now().nanoseconds + int(timeout * 1e9)
        while not done():
            if self.node.get_clock().now().nanoseconds > end:
                sys.exit(f"branching: {what} did not come within {timeout:g} s")
            rclpy.spin_once(self.node, timeout_sec=0.01)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forces", type=float, nargs="+", default=[0.0, 100.0, 200.0, 300.0],
                    help="push forces along x, N (one branch each)")
    ap.add_argument("--seconds", type=float, default=1.0, help="simulated time per branch")
    ap.add_argument("--dt", type=float, default=0.001, help="the node's physics step, s")
    ap.add_argument("--reset", action="store_true",
                    help="branch from the initial state (~/reset first) instead of the "
                         "present one: the table is then the same from any such node")
    args = ap.parse_args(argv)
    rclpy.init()
    node = rclpy.create_node("wb_sim_branching")
    try:
        b = Brancher(node)
        b.call("pause", SetBool.Request(data=True))
        if args.reset:  # the initial state: the same table from any node of this setup
            res = b.call("reset", Trigger.Request())
            if not res.success:
                sys.exit(f"branching: ~/reset: {res.message}")
        b.call("save_snapshot", SaveSnapshot.Request(name=ROOT))
        b.odom.clear()
        # a restore publishes the root; one published before discovery matched this reader
        # is not sent again: restore until it arrives (and the node hears the pushes)
        def ready():
            return bool(b.odom) and b.push.get_subscription_count() > 0
        for _ in range(10):
            b.call("restore_snapshot", RestoreSnapshot.Request(name=ROOT))
            for _ in range(100):
                if ready():
                    break
                b.settle(0.01)
            if ready():
                break
        if not b.odom:
            sys.exit("branching: no odometry on odom/ground_truth (a floating base is needed)")
        root_link = b.odom[-1].child_frame_id
        z0 = b.odom[-1].pose.pose.position.z
        steps = round(args.seconds / args.dt)
        print(f"| push along x on {root_link} (N) | lowest base (m) | final base (m) | "
              f"final base x (m) | fell |")
        print("|---|---|---|---|---|")
        for f in args.forces:
            low, z, x = b.branch(f, steps, round(args.dt * 1e9), root_link)
            print(f"| {f:g} | {low:.6f} | {z:.6f} | {x:.6f} | "
                  f"{'yes' if z < 0.6 * z0 else 'no'} |", flush=True)
        b.call("restore_snapshot", RestoreSnapshot.Request(name=ROOT))
        b.call("delete_snapshot", DeleteSnapshot.Request(name=ROOT))
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
