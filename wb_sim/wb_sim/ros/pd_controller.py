"""``wb_sim_pd_controller``: an example external controller, and a template for yours.

Joint PD + gravity compensation holding the simulator's initial posture::

    tau = kp (q_ref - q_j) - kd qdot_j + g_j(q)

It runs in its own process and knows the robot only through ROS:

* the URDF from ``robot_description`` (transient-local, so start order does not matter);
* ``floating_base``, ``gravity`` and the initial posture from the simulator
  node's parameters (``/<sim_node>/get_parameters``);
* joint positions and velocities from ``joint_states`` and, for a floating base,
  the base pose from ``odom/ground_truth`` (gravity compensation needs the base
  orientation), paired by stamp: the joint state and the pose of one step
  (:class:`~.controller_io.RobotStateIntake`).

As on a real legged robot, the stiff joint loop closes in the drives
(``drive_gains: true``, the default): at start the controller sets the simulator's
drive gains (its parameters ``command.kp``, ``command.kd``) to ``kp`` and ``kd``, and
each command carries the posture as position targets, zero velocity targets and
gravity as feed-forward effort; the simulator evaluates ``kp (q_ref - q) + kd (0 - v)
+ tau_ff`` at every physics step from the current state. A command that arrives late
then only delays the feed-forward, where a late torque would close the stiff loop late
(with kp 1000 a 2-step delay made the humanoid creep, 5 made it fall; with the drives
it stands with 40). ``drive_gains: false`` sends the whole law as torques.

Each joint state gets one ``joint_commands`` message whose ``header.stamp`` is that
state's stamp (:class:`~.controller_io.JointCommandWriter`), so the simulator can match
it in lockstep (``sync.mode: lockstep``, one step per answer) and measure the loop's
latency. Parameters: ``kp`` (N*m/rad), ``kd`` (N*m*s/rad), ``drive_gains``,
``sim_node``, ``robot`` and the topic names.

Several robots on one simulator (its ``world_file``): one controller per robot, started in
the namespace ``/<name>`` with ``robot:=<name>`` (``wb_sim_run --world`` does): its topics
(relative) are then the robot's, ``/<name>/joint_states`` and so on, and it reads and sets
that robot's parameters (``<name>.initial.*``, ``<name>.command.kp``).

To write yours, copy this file and replace :meth:`PDController._control`'s law.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import warnings

import numpy as np
import pinocchio as pin
import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rcl_interfaces.srv import GetParameters, SetParameters
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter, parameter_value_to_python
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rclpy.task import Future
from std_msgs.msg import String

from ..controllers import PDGravityController
from ..errors import WbSimError
from ..robot import RobotModel
from .controller_io import JointCommandWriter, RobotStateIntake
from .parent import die_with_parent, exit_after, on_stop_signals

LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
STATE_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
COMMAND_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
#: after SIGINT / SIGTERM the controller exits within this many seconds, cleanly or not [s]
STOP_DEADLINE_S = 2.0

#: the simulator parameters the controller reads
SIM_KEYS = ("floating_base", "gravity", "initial.joint_names", "initial.joint_positions",
            "initial.base_position", "initial.base_rpy", "publish.joint_states_rate_hz",
            "publish.odom_rate_hz", "command.joint_names")
#: those a simulator of several robots has per robot, as '<robot>.<key>' (wb_sim.ros.robots)
ROBOT_KEYS = ("floating_base", "initial.joint_names", "initial.joint_positions",
              "initial.base_position", "initial.base_rpy", "command.kp", "command.kd")


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
        self.drive_gains = bool(declare(
            "drive_gains", True, "true: kp and kd become the simulator's drive gains "
            "(command.kp, command.kd) and commands carry position targets, zero velocity "
            "targets and gravity as effort; false: commands carry the law's torques"))
        self.sim_node = declare("sim_node", "wb_sim", "Name of the simulator node")
        self.robot_name = str(declare(
            "robot", "", "With several robots on the simulator (its world_file): this "
            "robot's name; the controller then reads the simulator's '<robot>.floating_base' "
            "and '<robot>.initial.*' and sets '<robot>.command.kp' / '<robot>.command.kd'. "
            "Start it in the namespace /<robot> (its topics are relative). '' = the one robot"))
        self.topics = {k: declare(f"topics.{k}", d, f"Topic of {k}") for k, d in (
            ("joint_states", "joint_states"), ("odom", "odom/ground_truth"),
            ("joint_commands", "joint_commands"), ("robot_description", "robot_description"))}
        self._order: np.ndarray | None = None  # joint_states' joints in the robot model

    # ------------------------------------------------------------------ setup

    def wait_for_simulator(self, executor, timeout_s: float = 30.0,
                           stop: threading.Event | None = None) -> None:
        """Get the URDF and the simulator's parameters (blocking, spinning ``executor``
        in slices of 0.1 s, so that ``stop`` (set by SIGINT / SIGTERM) ends the wait at
        once with :class:`Interrupted`), set the drive gains, then start controlling."""
        stop = stop or threading.Event()
        log = self.get_logger()
        log.info(f"waiting for '{self.topics['robot_description']}' and the parameters of "
                 f"'{self.sim_node}'")
        urdf: list[str] = []
        sub = self.create_subscription(String, self.topics["robot_description"],
                                       lambda m: urdf.append(m.data), LATCHED_QOS)
        sim = f"/{self.sim_node.lstrip('/')}"
        client = self.create_client(GetParameters, f"{sim}/get_parameters")
        deadline = time.monotonic() + timeout_s

        def wait(done, what: str) -> None:
            while not done():
                if stop.is_set():
                    raise Interrupted(what)
                if time.monotonic() > deadline:
                    raise SetupError(f"{what} within {timeout_s:g} s")
                executor.spin_once(timeout_sec=0.1)

        wait(client.service_is_ready, f"simulator node '{self.sim_node}' not found")
        names = [self._sim_key(k) for k in SIM_KEYS]
        future = client.call_async(GetParameters.Request(names=names))
        wait(future.done, f"no answer from '{sim}/get_parameters'")
        values = future.result().values
        if len(values) != len(names):
            raise SetupError(f"'{sim}' has no parameters {', '.join(names)}"
                             + (f": does it simulate a robot named '{self.robot_name}' "
                                f"(its world_file)?" if self.robot_name else ""))
        p = {k: parameter_value_to_python(v) for k, v in zip(SIM_KEYS, values)}
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
        if self.drive_gains:
            self._set_drive_gains(sim, p["command.joint_names"] or [], wait)
        self.q = pin.neutral(self.robot.model)
        if self.robot.floating_base:  # the simulator's initial state
            R = pin.rpy.rpyToMatrix(*p["initial.base_rpy"])
            self.q[:3] = p["initial.base_position"]
            self.q[3:7] = pin.Quaternion(R).coeffs()
        self.robot.set_joint_positions(self.q, q_ref)
        self._qj = np.empty(self.robot.nj)
        self._vj = np.empty(self.robot.nj)
        fields = ("position", "velocity", "effort") if self.drive_gains else ("position", "effort")
        self.commands = JointCommandWriter(self, self.topics["joint_commands"],
                                           self.robot.joint_names, COMMAND_QOS, fields)
        # subscribed before the first command starts the physics: on a loaded machine the
        # set-up took longer than the simulator's command timeout (0.1 s); both streams at
        # the same rate: a joint state and the base pose of one step go together
        self.state = RobotStateIntake(
            self, self.topics["joint_states"],
            self.topics["odom"] if self.robot.floating_base else None, self._control,
            STATE_QOS, pair_by_stamp=p["publish.joint_states_rate_hz"] == p["publish.odom_rate_hz"])
        # and matched with the simulator's publishers (DDS discovery), so that the first
        # states reach us; at most a few seconds, then the watchdog tells
        subs, pub = self.state.subscriptions, self.commands.publisher
        matched = time.monotonic() + 5.0
        while time.monotonic() < matched and not stop.is_set() and \
                not (all(s.get_publisher_count() for s in subs) and pub.get_subscription_count()):
            executor.spin_once(timeout_sec=0.01)
        # the first command, at the simulator's initial state (a simulator started with
        # command.wait_for_first waits for it before it steps)
        self._command(0, q_ref, np.zeros(self.robot.nj))
        log.info(f"holding the initial posture of {self.robot.nj} joints (kp {self.kp}, kd "
                 f"{self.kd}, " + ("in the simulator's drives, gravity as feed-forward)"
                                   if self.drive_gains else "as torques)"))

    def _sim_key(self, key: str) -> str:
        """The simulator's parameter of ``key`` for this controller's robot: its own
        (``<robot>.<key>``) where the simulator has one per robot."""
        if self.robot_name and key in ROBOT_KEYS:
            return f"{self.robot_name}.{key}"
        return key

    def _set_drive_gains(self, sim: str, command_joints: list, wait) -> None:
        """The simulator's drives get kp and kd (its ``command.kp``, ``command.kd``, in the
        order of its ``command.joint_names``); SetupError if it refuses them."""
        names = self.robot.joint_names
        if command_joints and sorted(command_joints) != sorted(names):
            raise SetupError(f"the simulator drives only the joints of command.joint_names "
                             f"({len(command_joints)} of {len(names)}): run this controller "
                             f"with drive_gains:=false")
        order = [self.robot.joint_index(n) for n in (command_joints or names)]
        values = {k: np.broadcast_to(np.asarray(g, dtype=float), (len(names),))[order].tolist()
                  for k, g in ((self._sim_key("command.kp"), self.kp),
                               (self._sim_key("command.kd"), self.kd))}
        client = self.create_client(SetParameters, f"{sim}/set_parameters")
        wait(client.service_is_ready, f"no service '{sim}/set_parameters'")
        future = client.call_async(SetParameters.Request(parameters=[
            Parameter(k, Parameter.Type.DOUBLE_ARRAY, v).to_parameter_msg()
            for k, v in values.items()]))
        wait(future.done, f"no answer from '{sim}/set_parameters'")
        self.destroy_client(client)
        refused = [r.reason for r in future.result().results if not r.successful]
        if refused:
            raise SetupError(f"the simulator refused the drive gains: {'; '.join(refused)} "
                             f"(or run this controller with drive_gains:=false)")

    # ------------------------------------------------------------------ control

    def _control(self, stamp: int, position: np.ndarray, velocity: np.ndarray,
                 base_pose: np.ndarray | None) -> None:
        """Answer the state stamped ``stamp`` (joints in the order of the joint states)."""
        robot = self.robot
        if self.state.names_changed or self._order is None:  # map the message's order once
            try:
                self._order = np.array([robot.joint_index(n) for n in self.state.names],
                                       dtype=np.intp)
            except WbSimError as e:
                self.get_logger().error(f"joint_states: {e}", throttle_duration_sec=5.0)
                self._order = None
                return
        qj, vj = self._qj, self._vj
        qj[self._order] = position
        vj[self._order] = velocity
        if base_pose is not None:
            self.q[:7] = base_pose
        robot.set_joint_positions(self.q, qj)
        self._command(stamp, qj, vj)

    def _command(self, stamp: int, qj: np.ndarray, vj: np.ndarray) -> None:
        """Publish the law at the state ``(self.q, qj, vj)`` (arrays in the model's joint
        order, the command's), stamped ``stamp``."""
        if self.drive_gains:
            self.commands.publish(stamp, *self.ctrl.drive_targets(self.q))
        else:  # the reference in `position` (plots show it), the law's torques in `effort`
            self.commands.publish(stamp, self.ctrl.q_ref, effort=self.ctrl(self.q, qj, vj))


def main(args=None) -> int:
    """Entry point of ``wb_sim_pd_controller``; SIGINT, SIGTERM and an external
    shutdown end it cleanly with exit code 0."""
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    die_with_parent()  # end with the launch that started us, whatever signal ended it
    stop = threading.Event()
    never = Future()  # the executor spins in slices of 0.1 s, looking at `stop` between

    def on_stop():  # once, on a thread of its own (on_stop_signals): nothing of rclpy here
        stop.set()
        exit_after(STOP_DEADLINE_S, "wb_sim_pd_controller")

    on_stop_signals(on_stop, "wb_sim_pd_controller")  # SIGINT, SIGTERM, the parent's end
    node = None
    try:
        node = PDController()
        executor = make_executor()
        executor.add_node(node)
        node.wait_for_simulator(executor, stop=stop)
        gc.freeze()  # what exists now lives as long as the node: no full-collection stalls
        # events taken in the executor's own loop (the EventsExecutor's is C++: no return
        # to Python between messages), back here every 0.1 s to look at rclpy.ok()
        while not stop.is_set() and rclpy.ok():
            executor.spin_until_future_complete(never, timeout_sec=0.1)
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
