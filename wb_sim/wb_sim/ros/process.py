"""The node's process: ``wb_sim_node``'s entry point (:func:`main`; also ``python -m
wb_sim.ros.process``), its threads and signals, and the watch for a second node of the same
name (the check itself is :func:`wb_sim.ros.node.refuse_duplicate_name`, which the node also
runs before it publishes). This module imports :mod:`.node`, never the reverse.

Threads: the physics loop runs on the main thread (:meth:`SimNode.run`); an executor
thread (:func:`_spin`) waits for the node's services, parameters and (public-API path)
command messages and hands each ready callback to one of :data:`EXECUTOR_WORKERS` workers
of a MultiThreadedExecutor, by callback group: the commands in the node's default
(mutually exclusive) group, the short services (the parameters' included) one at a time
in a group of their own (:attr:`.services.NodeServices.group`, paced; with rclpy's
internals served instead by a requests' thread of their own,
:class:`.rclpy_shim.RequestServer`, bounded by a CPU budget), the stepping service and the
SimulateSteps action in a reentrant one (:attr:`.services.NodeServices.long_group`), so
a long request never holds up the parameters or the commands, nor a cancel or another
service; a third thread looks for another node of the same name for
:data:`DUPLICATE_CHECK_S` after the start. SIGINT and SIGTERM stop the loop cleanly (exit
code 0) within :data:`STOP_DEADLINE_S` whatever a request is doing (a stepping request
ends at its next step; past the deadline the process exits without the clean shutdown); a
refused start exits with 2 after one FATAL line, a command line rcl cannot parse (``-p
joints.kp:=[1,a]``) included (:func:`init_ros`).
"""

from __future__ import annotations

import re
import sys
import threading
import time

import rclpy
from rclpy.exceptions import NameValidationException, ParameterException
from rclpy.logging import LoggingSeverity
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from ..errors import ConfigError, WbSimError
from .node import SimNode, refuse_duplicate_name
from .parent import die_with_parent, exit_after, on_stop_signals

#: Python's GIL switch interval in the node, s (see main)
GIL_SWITCH_INTERVAL_S = 2.0e-4
#: how long after its creation the node looks for another node of its name, s: DDS
#: discovery of a running node's name took 0.4-2.6 s on the loaded 2-core machine, and
#: more than 4 s once at a load average of 15
DUPLICATE_CHECK_S = 10.0  # of two started closer than this the later refuses (StartTimes)
#: worker threads of the executor: the parameters / commands (default group), the short
#: requests (one at a time), a stepping service, a SimulateSteps goal and its cancel at once
EXECUTOR_WORKERS = 6
#: after SIGINT or SIGTERM the process ends within this, s: past it (a callback that does
#: not return), it exits at once with the node's exit code, without the clean shutdown
STOP_DEADLINE_S = 0.9
#: how long the node waits, once stopped at stop_after_s (or by a failure), for its reliable
#: subscribers to acknowledge the last samples (SimNode.flush_publishers), s. Not after a
#: signal: Ctrl-C on ros2 launch stops the readers too, and a test's reader destroyed as soon
#: as it had the last state left the wait to run its whole 2 s on CI (past STOP_DEADLINE_S)
FLUSH_S = 2.0


#: hidden topic (``~/_started``, transient local) on which each node gives its start time
#: (wall clock, s), so that of two nodes of one name seen within DUPLICATE_CHECK_S of each
#: other only the later one refuses (both stopped, the one already running included)
STARTED_TOPIC = "~/_started"
#: how long a node that sees a namesake waits for its start time, s
STARTED_WAIT_S = 2.0


class StartTimes:
    """This node's start time on :data:`STARTED_TOPIC`, and the others' seen there."""

    def __init__(self, node, mine: float):
        """``mine``: when this process started (``time.time()``)."""
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Float64
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.mine = mine
        self.others: list[float] = []
        self._pub = node.create_publisher(Float64, STARTED_TOPIC, qos)
        self._sub = node.create_subscription(Float64, STARTED_TOPIC, self._on_started, qos)
        self._pub.publish(Float64(data=self.mine))

    def _on_started(self, msg) -> None:
        if msg.data != self.mine:
            self.others.append(msg.data)

    def started_after_me(self) -> bool | None:
        """True if a namesake started after this node, False if one started before it,
        None if none has said (yet)."""
        if not self.others:
            return None
        return min(self.others) > self.mine


def watch_for_duplicate_name(node, until: float, started: StartTimes | None = None) -> None:
    """Thread body: until ``until`` (monotonic), look for another node of this name; if
    one shows up, log FATAL and stop the node with exit code 2, unless ``started`` tells
    that the other one started later (it refuses itself: the node that was there first
    keeps running)."""
    try:
        while True:
            try:
                refuse_duplicate_name(node, until)
                return
            except ConfigError as e:
                error = e
            # a namesake: wait for its start time, or for it to go (a later one refuses
            # itself at once, and its start time may leave the graph with it)
            deadline = time.monotonic() + STARTED_WAIT_S
            while started is not None and started.started_after_me() is None and \
                    _namesakes(node) and time.monotonic() < deadline and node.context.ok():
                time.sleep(0.05)
            if started is not None and started.started_after_me():
                node.get_logger().warning(
                    f"{error}; that one started after this one and refuses to run: this one "
                    f"goes on")
                return
            if started is not None and started.started_after_me() is None and \
                    not _namesakes(node):
                node.get_logger().warning(f"{error}; it has gone again: this one goes on")
                continue  # and keeps watching until `until`
            node.get_logger().fatal(f"cannot start: {error}")
            node.exit_code = 2
            node.stop()
            return
    except Exception:  # noqa: BLE001 - the context went down under us
        pass


def _namesakes(node) -> bool:
    """Whether another node of this one's name and namespace is on the graph now."""
    me = (node.get_name(), node.get_namespace())
    return sum(1 for x in node.get_node_names_and_namespaces() if tuple(x) == me) > 1


def main(args=None) -> int:
    """Entry point of ``wb_sim_node``; SIGINT (Ctrl-C), SIGTERM and an external
    shutdown end it cleanly with exit code 0; a refused start with 2."""
    # The physics thread and the executor thread share the GIL: hand it over
    # every 0.2 ms instead of Python's default 5 ms, so the physics loop keeps
    # its 1 ms deadlines while callbacks run.
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    die_with_parent()  # ros2 launch leaves its processes running on SIGTERM: not us
    # our own signal handlers stop the loop; rclpy's would raise KeyboardInterrupt
    # anywhere, e.g. in the middle of destroying the node
    refused = init_ros(sys.argv if args is None else args)
    if refused:
        rclpy.logging.get_logger("wb_sim").fatal(f"cannot start: {refused}")
        return 2
    node = None
    # installed before the node exists: a Ctrl-C during the start-up (URDF, discovery)
    # is not lost; the node stops before its first step
    stop_requested = threading.Event()

    def on_stop():  # once, on a thread of its own (on_stop_signals)
        stop_requested.set()
        exit_after(STOP_DEADLINE_S, "wb_sim",
                   lambda: getattr(node, "exit_code", 0) if node is not None else 0)
        if node is not None:
            node.stop()

    on_stop_signals(on_stop, "wb_sim")  # SIGINT, SIGTERM, the parent's end
    try:
        created, created_wall = time.monotonic(), time.time()
        try:  # a node of the same name already discovered: refused before publishing
            node = SimNode(params_files=params_files(sys.argv if args is None else args))
        except (WbSimError, ParameterException, NameValidationException) as e:
            # ours, and rclpy's own refusals of a parameter (a value outside its
            # descriptor's range) or of a name
            rclpy.logging.get_logger("wb_sim").fatal(f"cannot start: {e}")
            return 2
        executor = MultiThreadedExecutor(num_threads=EXECUTOR_WORKERS)
        executor.add_node(node)
        stop_spinning = threading.Event()
        spinner = threading.Thread(target=_spin, args=(executor, node, stop_spinning),
                                   daemon=True)
        spinner.start()
        started = StartTimes(node, created_wall)
        threading.Thread(target=watch_for_duplicate_name,
                         args=(node, created + DUPLICATE_CHECK_S, started), daemon=True).start()
        if not stop_requested.is_set():
            node.run()
        node.get_logger().info(f"stopped at t = {node.now_s():.3f} s")
        unflushed = None if stop_requested.is_set() else node.flush_publishers(FLUSH_S)
        if unflushed:
            node.get_logger().warning(unflushed)
        # the executor thread must be out of rclpy before the node and context go
        stop_spinning.set()
        spinner.join()
        # the workers finish their callbacks: a stepping request ends at its next step
        executor.shutdown(timeout_sec=0.5)
    finally:
        if node is not None:
            node.stop()
            node.destroy_node()
        rclpy.try_shutdown()
    return node.exit_code


def init_ros(argv) -> str | None:
    """``rclpy.init`` with our signal handling; where rcl refuses the command line (a
    badly formed ``-p`` value, a params file it cannot read: its RCLError, not public),
    what to say, on one line naming the parameter (rcl's own "Failed to parse global
    arguments" line silenced, unless the command line sets the rcl logger's level), else
    None."""
    quiet = not any(a.startswith("rcl:") for a in argv)
    if quiet:
        before = rclpy.logging.get_logger_level("rcl")
        rclpy.logging.set_logger_level("rcl", LoggingSeverity.FATAL)
    try:
        rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    except Exception as e:  # noqa: BLE001 - rcl's RCLError
        return ros_args_error(str(e))
    finally:
        if quiet:
            rclpy.logging.set_logger_level("rcl", before)
    return None


def ros_args_error(message: str) -> str:
    """rcl's refusal of a command line said in our words: the parameter, the value as
    given and rcl's reason without its source locations."""
    message = re.sub(r",? at [^,]*\.c:\d+", "", message).removeprefix(
        "failed to initialize rcl: ")
    override = re.match(r"Couldn't parse parameter override rule: '-p ([^:=]*):=(.*)'\. "
                        r"Error: (.*)", message, re.S)
    if override:
        name, value, why = override.groups()
        return (f"parameter '{name}': the value {value!r} given with -p cannot be parsed "
                f"({why.strip()}); a list is brackets around values of one type, e.g. "
                f"-p {name}:=[1.0, 2.0], a string with brackets or commas is quoted")
    params = re.match(r"Couldn't parse params file: '--params-file (.*)'\. Error: (.*)",
                      message, re.S)
    if params:
        return f"--params-file {params.group(1)}: cannot be read ({params.group(2).strip()})"
    return f"the ROS arguments of the command line: {message.strip()}"


def params_files(argv) -> tuple[str, ...]:
    """The ``--params-file`` arguments of a command line, in order."""
    return tuple(argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--params-file")


def _spin(executor, node, stop: threading.Event) -> None:
    """The executor thread: services, parameters (commands are polled by the physics loop)."""
    try:
        while not stop.is_set() and node.context.ok():
            try:
                executor.spin_once(timeout_sec=0.1)
            except (KeyboardInterrupt, ExternalShutdownException):
                break
            except Exception as e:  # noqa: BLE001 - one failed callback must not end the node
                if not node.context.ok():
                    break
                node.get_logger().error(f"a service or parameter callback failed: "
                                        f"{type(e).__name__}: {e}")
    finally:
        node.stop()


if __name__ == "__main__":
    sys.exit(main())
