"""A tiny external controller for the ROS tests: joint PD + gravity compensation
(``wb_sim.controllers.PDGravityController``) holding the simulator's initial
posture, publishing ``effort_commands`` (std_msgs/Float64MultiArray, all joints
in ``joint_states`` order) instead of ``joint_commands``.

It knows the robot only through ROS: the URDF from ``robot_description``, the
posture and gravity from ``/wb_sim/get_parameters``, the state from
``joint_states`` and ``odom/ground_truth``. Gains: parameters ``kp``, ``kd``.

    python test/helpers/ros_effort_controller.py --ros-args -p kp:=1000.0 -p kd:=20.0
"""

from __future__ import annotations

import signal
import sys
import threading

import numpy as np
import pinocchio as pin
import rclpy
from nav_msgs.msg import Odometry
from rcl_interfaces.srv import GetParameters
from rclpy.parameter import parameter_value_to_python
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String

from wb_sim.controllers import PDGravityController
from wb_sim.robot import RobotModel

LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: depth 1, best effort: the controller always answers the newest state. A backlog of older
#: ones would only add latency to a stiff loop (kp 1000 N*m/rad), and a reliable reader
#: delivers in order, so on a loaded machine one lost sample held the later ones back until
#: the writer's next heartbeat (up to 3 s in Fast DDS)
STATE = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
COMMAND = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
KEYS = ("gravity", "initial.joint_names", "initial.joint_positions")


def main() -> int:
    rclpy.init(args=sys.argv, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    node = rclpy.create_node("wb_sim_effort_controller")
    log = node.get_logger()
    try:
        from rclpy.experimental import EventsExecutor
        executor = EventsExecutor()
    except ImportError:  # Humble
        from rclpy.executors import SingleThreadedExecutor
        executor = SingleThreadedExecutor()
    executor.add_node(node)
    kp = node.declare_parameter("kp", 1000.0).value
    kd = node.declare_parameter("kd", 20.0).value

    urdf: list[str] = []
    node.create_subscription(String, "robot_description", lambda m: urdf.append(m.data), LATCHED)
    client = node.create_client(GetParameters, "/wb_sim/get_parameters")
    while not stop.is_set() and not client.wait_for_service(timeout_sec=0.5):
        pass
    future = client.call_async(GetParameters.Request(names=list(KEYS)))
    while not stop.is_set() and not (future.done() and urdf):
        executor.spin_once(timeout_sec=0.05)
    if stop.is_set():
        return 0
    p = {k: parameter_value_to_python(v) for k, v in zip(KEYS, future.result().values)}
    robot = RobotModel.from_urdf(robot_description=urdf[-1], floating_base=True)
    q_ref = np.zeros(robot.nj)
    for name, x in zip(p["initial.joint_names"], p["initial.joint_positions"]):
        q_ref[robot.joint_index(name)] = x
    ctrl = PDGravityController(robot, q_ref, kp, kd, gravity=list(p["gravity"]))
    pub = node.create_publisher(Float64MultiArray, "effort_commands", COMMAND)
    q = pin.neutral(robot.model)
    state = {"base": None, "order": None, "names": None, "sent": 0}
    msg = Float64MultiArray()

    def on_odom(m: Odometry) -> None:
        pp, o = m.pose.pose.position, m.pose.pose.orientation
        state["base"] = (pp.x, pp.y, pp.z, o.x, o.y, o.z, o.w)

    def on_joint_states(m: JointState) -> None:
        if state["base"] is None:
            return
        if state["names"] != list(m.name):
            state["order"] = np.array([robot.joint_index(n) for n in m.name])
            state["names"] = list(m.name)
        order = state["order"]
        qj, vj = np.empty(robot.nj), np.empty(robot.nj)
        qj[order] = m.position
        vj[order] = m.velocity
        q[:7] = state["base"]
        robot.set_joint_positions(q, qj)
        tau = ctrl(q, qj, vj)
        msg.data = tau[order].tolist()  # joint_states order = the node's default command order
        pub.publish(msg)
        state["sent"] += 1
        if state["sent"] == 1:
            log.info(f"effort controller running: {robot.nj} joints on 'effort_commands'")

    node.create_subscription(Odometry, "odom/ground_truth", on_odom, STATE)
    node.create_subscription(JointState, "joint_states", on_joint_states, STATE)
    log.info(f"effort controller ready (kp {kp}, kd {kd})")
    while not stop.is_set() and rclpy.ok():
        executor.spin_once(timeout_sec=0.1)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
