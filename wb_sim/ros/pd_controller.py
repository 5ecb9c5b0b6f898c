"""``wb_sim_pd_controller``: an example external controller, and a template for yours.

Joint PD + gravity compensation holding the simulator's initial posture::

    tau = g_j(q) + kp (q_ref - q_j) - kd qdot_j

It runs in its own process and knows the robot only through ROS:

* the URDF from ``robot_description`` (transient-local, so start order does not matter);
* ``floating_base``, ``gravity`` and the initial posture from the simulator
  node's parameters (``/<sim_node>/get_parameters``);
* joint positions and velocities from ``joint_states``; for a floating base
  the base pose from ``odom/ground_truth`` (gravity compensation needs the
  base orientation). When both streams have the same rate, the controller
  pairs them by stamp (the joint state and the pose of the same step), so
  the loop is deterministic in the simulator's lockstep mode; otherwise it
  uses the newest pose.

Each joint state triggers one ``joint_commands`` message (sensor_msgs/JointState,
``name`` + ``effort``, and the reference in ``position``, which the simulator
ignores and plots show) whose ``header.stamp`` is the joint state's stamp, so
the simulator can match it in lockstep and measure the loop latency. It works
unchanged in both of the simulator's ``sync.mode`` s.
Parameters: ``kp`` (N*m/rad), ``kd`` (N*m*s/rad), ``sim_node``, and the topic names.

Plain, public rclpy only (message objects in and out, no serialized bytes), so
that it reads as a template: copy it, replace :meth:`PDController._control`'s
control law with yours.
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
import time
import warnings

import numpy as np
import pinocchio as pin
import rclpy
from builtin_interfaces.msg import Time
from rcl_interfaces.msg import ParameterDescriptor
from rcl_interfaces.srv import GetParameters
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rclpy.parameter import parameter_value_to_python
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from ..controllers import PDGravityController
from ..errors import WbSimError
from ..robot import RobotModel

LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
STATE_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
COMMAND_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)

#: the simulator parameters the controller reads
SIM_KEYS = ("floating_base", "gravity", "initial.joint_names", "initial.joint_positions",
            "initial.base_position", "initial.base_rpy", "publish.joint_states_rate_hz",
            "publish.odom_rate_hz")


class SetupError(RuntimeError):
    """The controller cannot start (no simulator, no URDF, bad parameters)."""


class Interrupted(Exception):
    """SIGINT / SIGTERM while the controller waits for the simulator."""


def make_executor():
    """rclpy's EventsExecutor where it exists (Jazzy and later): a 1 kHz
    subscription costs about 15 % of a core there against about 40 % with the
    SingleThreadedExecutor, which is the choice on Humble."""
    try:
        from rclpy.experimental import EventsExecutor
    except ImportError:
        return SingleThreadedExecutor()
    return EventsExecutor()


class PDController(Node):
    """Joint PD + gravity compensation over topics; see the module docstring."""

    def __init__(self, **kwargs):
        super().__init__("wb_sim_pd_controller", **kwargs)

        def declare(name, default, doc):
            return self.declare_parameter(name, default, ParameterDescriptor(
                description=doc, dynamic_typing=True)).value

        self.kp = declare("kp", 100.0, "Proportional gain [N*m/rad], one value or one per joint")
        self.kd = declare("kd", 5.0, "Derivative gain [N*m*s/rad], one value or one per joint")
        self.sim_node = declare("sim_node", "wb_sim", "Name of the simulator node")
        self.topics = {k: declare(f"topics.{k}", d, f"Topic of {k}") for k, d in (
            ("joint_states", "joint_states"), ("odom", "odom/ground_truth"),
            ("joint_commands", "joint_commands"), ("robot_description", "robot_description"))}
        self.base_pose: np.ndarray | None = None  # [x, y, z, qx, qy, qz, qw]
        self._pose_stamp: int | None = None  # stamp of base_pose, ns
        #: a joint state waiting for its pose: (stamp, positions, velocities), message order
        self._pending: tuple[int, np.ndarray, np.ndarray] | None = None
        self._names: list[str] = []  # joint names of the joint states, in their order
        self._order: np.ndarray | None = None  # their indices in the robot model
        self._pub = self.create_publisher(JointState, self.topics["joint_commands"], COMMAND_QOS)
        self._cmd = JointState()

    # ------------------------------------------------------------------ setup

    def wait_for_simulator(self, executor, timeout_s: float = 30.0,
                           stop: threading.Event | None = None) -> None:
        """Get the URDF and the simulator's parameters (blocking, spinning ``executor``
        in slices of 0.1 s, so that ``stop`` (set by SIGINT / SIGTERM) ends the wait at
        once with :class:`Interrupted`), then start controlling."""
        stop = stop or threading.Event()
        log = self.get_logger()
        log.info(f"waiting for '{self.topics['robot_description']}' and the parameters of "
                 f"'{self.sim_node}'")
        urdf: list[str] = []
        sub = self.create_subscription(String, self.topics["robot_description"],
                                       lambda m: urdf.append(m.data), LATCHED_QOS)
        client = self.create_client(GetParameters, f"/{self.sim_node.lstrip('/')}/get_parameters")
        deadline = time.monotonic() + timeout_s

        def wait(done, what: str) -> None:
            while not done():
                if stop.is_set():
                    raise Interrupted(what)
                if time.monotonic() > deadline:
                    raise SetupError(f"{what} within {timeout_s:g} s")
                executor.spin_once(timeout_sec=0.1)

        wait(client.service_is_ready, f"simulator node '{self.sim_node}' not found")
        future = client.call_async(GetParameters.Request(names=list(SIM_KEYS)))
        wait(future.done, f"no answer from '{self.sim_node}/get_parameters'")
        p = {k: parameter_value_to_python(v) for k, v in zip(SIM_KEYS, future.result().values)}
        wait(lambda: bool(urdf), f"no URDF on '{self.topics['robot_description']}'")
        self.destroy_subscription(sub)
        self.destroy_client(client)
        try:
            with warnings.catch_warnings():  # the simulator has said what it does with mimics
                warnings.simplefilter("ignore")
                self.robot = RobotModel.from_urdf(robot_description=urdf[-1],
                                                  floating_base=bool(p["floating_base"]),
                                                  mimic="independent")
            q_ref = np.zeros(self.robot.nj)
            for name, x in zip(p["initial.joint_names"] or [], p["initial.joint_positions"] or []):
                q_ref[self.robot.joint_index(name)] = x
            self.ctrl = PDGravityController(self.robot, q_ref, self.kp, self.kd,
                                            gravity=list(p["gravity"]))
        except (WbSimError, ValueError) as e:
            raise SetupError(f"cannot build the controller: {e}") from None
        self.q = pin.neutral(self.robot.model)
        self._q_ref = q_ref
        # same rates: pair joint state and base pose of the same step (deterministic)
        self._pair_by_stamp = self.robot.floating_base and \
            p["publish.joint_states_rate_hz"] == p["publish.odom_rate_hz"]
        # the first command, at the simulator's initial state (a simulator started with
        # command.wait_for_first waits for it before it steps)
        if self.robot.floating_base:
            R = pin.rpy.rpyToMatrix(*p["initial.base_rpy"])
            self.q[:3] = p["initial.base_position"]
            self.q[3:7] = pin.Quaternion(R).coeffs()
        self.robot.set_joint_positions(self.q, q_ref)
        self._cmd.name = list(self.robot.joint_names)
        self._cmd.position = q_ref.tolist()
        self._cmd.effort = self.ctrl(self.q, q_ref, np.zeros(self.robot.nj)).tolist()
        # subscribed before the first command starts the physics: on a loaded machine the
        # set-up took longer than the simulator's command timeout (0.1 s)
        subs = [self.create_subscription(JointState, self.topics["joint_states"],
                                         self._on_joint_states, STATE_QOS)]
        if self.robot.floating_base:
            subs.append(self.create_subscription(Odometry, self.topics["odom"], self._on_odom,
                                                 STATE_QOS))
        # and matched with the simulator's publishers (DDS discovery), so that the first
        # states reach us; at most a few seconds, then the watchdog tells
        matched = time.monotonic() + 5.0
        while time.monotonic() < matched and not stop.is_set() and \
                not (all(getattr(s, "get_publisher_count", lambda: 1)() for s in subs)
                     and self._pub.get_subscription_count()):
            executor.spin_once(timeout_sec=0.01)
        self._pub.publish(self._cmd)
        log.info(f"holding the initial posture of {self.robot.nj} joints "
                 f"(kp {self.kp}, kd {self.kd})")

    # ------------------------------------------------------------------ control

    def _on_odom(self, msg: Odometry) -> None:
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        stamp = stamp_ns(msg.header.stamp)
        self.base_pose, self._pose_stamp = np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w]), stamp
        pending = self._pending
        if pending is not None and pending[0] == stamp:
            self._pending = None
            self._control(*pending)

    def _on_joint_states(self, msg: JointState) -> None:
        if list(msg.name) != self._names:  # map the message's order once
            self._names = list(msg.name)
            try:
                self._order = np.array([self.robot.joint_index(n) for n in self._names],
                                       dtype=np.intp)
            except WbSimError as e:
                self.get_logger().error(f"joint_states: {e}", throttle_duration_sec=5.0)
                self._order = None
            else:
                # the command in the same order: names fixed, the reference in `position`
                # (the simulator ignores it, plots show it)
                self._cmd.name = self._names
                self._cmd.position = self._q_ref[self._order].tolist()
        n = len(self._names)
        if self._order is None or len(msg.position) != n or len(msg.velocity) != n:
            return
        stamp = stamp_ns(msg.header.stamp)
        position, velocity = np.array(msg.position), np.array(msg.velocity)
        if self._pair_by_stamp and self._pose_stamp != stamp:
            self._pending = (stamp, position, velocity)  # its pose is still on the way
            return
        self._control(stamp, position, velocity)

    def _control(self, stamp: int, position: np.ndarray, velocity: np.ndarray) -> None:
        """Publish the command answering the joint state stamped ``stamp`` (message order)."""
        robot = self.robot
        if robot.floating_base:
            if self.base_pose is None:
                return
            self.q[:7] = self.base_pose
        qj = np.empty(robot.nj)
        vj = np.empty(robot.nj)
        qj[self._order] = position
        vj[self._order] = velocity
        robot.set_joint_positions(self.q, qj)
        tau = self.ctrl(self.q, qj, vj)
        cmd = self._cmd
        cmd.header.stamp = Time(sec=stamp // 1_000_000_000, nanosec=stamp % 1_000_000_000)
        cmd.effort = tau[self._order].tolist()
        self._pub.publish(cmd)


def stamp_ns(stamp: Time) -> int:
    """Nanoseconds of a builtin_interfaces/Time (how the controller pairs and echoes stamps)."""
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def main(args=None) -> int:
    """Entry point of ``wb_sim_pd_controller``; SIGINT, SIGTERM and an external
    shutdown end it cleanly with exit code 0."""
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    node = None
    try:
        node = PDController()
        executor = make_executor()
        executor.add_node(node)
        node.wait_for_simulator(executor, stop=stop)
        gc.freeze()  # what exists now lives as long as the node: no full-collection stalls
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    except SetupError as e:
        rclpy.logging.get_logger("wb_sim_pd_controller").fatal(str(e))
        return 2
    except (ExternalShutdownException, Interrupted):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
