"""Helpers of the ROS tests: node processes, DDS domains, and an rclpy client living in
its own context and DDS domain.

Only the standard library and numpy are imported at the top: tests without ROS
(test/repo/test_packaging.py) use it too, and a ROS test module touches rclpy only
after :func:`helpers.extras.require_ros` let it.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from helpers import PKG, ROOT

HUMANOID_YAML = PKG / "config" / "humanoid.yaml"
#: a clone of the repository as a user puts it into a colcon workspace's src/: the two
#: packages (wb_sim: setup.py, package.xml, the module and its data files; wb_sim_interfaces)
#: and what the tests read (docs/, examples/, the README)
REPO_SOURCES = ("README.md", "wb_sim", "wb_sim_interfaces", "test", ".ci", "tools", "docs",
                "examples", "ruff.toml", "pytest.ini")


def copy_package_sources(dest: Path, with_tests: bool = False) -> Path:
    """Copy the repository (without build products, venvs or test artifacts) into ``dest``,
    as a clone: ``dest/wb_sim`` is the wb_sim package (``pip install dest/wb_sim``),
    ``dest/wb_sim_interfaces`` the interface package. ``with_tests``: test/, .ci/ and tools/
    too."""
    import shutil
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "artifacts",
                                    "venv", "venv-jazzy", "*.so")  # (an editable build's)
    for name in REPO_SOURCES:
        if name in ("test", ".ci", "tools") and not with_tests:
            continue
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        elif src.is_file():
            shutil.copy2(src, dest / name)
    return dest


# ----------------------------------------------------------------------------- domains

_used_domains: set[int] = set()


#: the lock files that keep this session's domains its own (held open until it ends)
_domain_locks: list = []
atexit.register(lambda: [f.close() for f in _domain_locks])  # no ResourceWarning at the end
DOMAIN_LOCK_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "wb_sim_test_domains"


def fresh_domain_id() -> int:
    """A random ROS_DOMAIN_ID in 1..200 not used before by this test session, nor by
    another test session on this machine now (an exclusive lock on a file per domain,
    held until this session ends): two suites run side by side (a developer's and CI's,
    or two checkouts) once drew the same domain, and their nodes and controllers talked
    to each other."""
    rng = random.SystemRandom()
    DOMAIN_LOCK_DIR.mkdir(parents=True, exist_ok=True)
    for _ in range(1000):
        d = rng.randint(1, 200)
        if d in _used_domains:
            continue
        _used_domains.add(d)
        f = open(DOMAIN_LOCK_DIR / f"{d}.lock", "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another session holds it
            f.close()
            continue
        _domain_locks.append(f)
        return d
    raise RuntimeError(f"no free ROS domain id among 1..200 (locks in {DOMAIN_LOCK_DIR})")


#: working directory of the processes the tests start: outside the source tree, so that
#: ``python -m wb_sim...`` runs the installed package (CI installs it non-editable)
RUN_DIR = Path(os.environ.get("TMPDIR", "/tmp"))


def ros_env(domain_id: int) -> dict[str, str]:
    """Environment of a node process: its own domain, DDS discovery on this host only.
    The source tree is not on its path: it runs wb_sim as installed."""
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(domain_id)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.pop("ROS_LOCALHOST_ONLY", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                        if p and Path(p).resolve() != ROOT)
    if not env["PYTHONPATH"]:
        del env["PYTHONPATH"]
    env["PYTHONUNBUFFERED"] = "1"
    env["RCUTILS_LOGGING_BUFFERED_STREAM"] = "0"
    env["RCUTILS_COLORIZED_OUTPUT"] = "0"
    # the tests read the wall-clock time of the node's log lines
    env["RCUTILS_CONSOLE_OUTPUT_FORMAT"] = "[{severity}] [{time}] [{name}]: {message}"
    return env


# ----------------------------------------------------------------------------- processes


class Proc:
    """A child process (a node or a controller) logging stdout + stderr to a file."""

    def __init__(self, name: str, argv: list[str], domain_id: int, log_dir: Path,
                 cwd: Path | None = None, env: dict[str, str] | None = None):
        self.name = name
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        self.log_path = Path(log_dir) / f"{name}.log"
        self._log = open(self.log_path, "wb")
        self.started = time.time()
        self.popen = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL,
                                      env=env or ros_env(domain_id), cwd=cwd or log_dir,
                                      start_new_session=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float, count: int = 1,
                     spin: Callable[[float], Any] | None = None) -> bool:
        """Wait until ``text`` appears ``count`` times in the log (spinning ``spin``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log().count(text) >= count:
                return True
            if not self.alive():
                return self.log().count(text) >= count
            spin(0.05) if spin else time.sleep(0.05)
        return self.log().count(text) >= count

    def interrupt(self, timeout: float = 10.0) -> int | None:
        """SIGINT (Ctrl-C); the exit code, or None if it did not end within ``timeout``."""
        if self.alive():
            os.kill(self.pid, signal.SIGINT)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL (an abrupt death, e.g. a crashed controller)."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.popen.wait(10)

    def close(self) -> None:
        """Stop the process (SIGINT, then SIGKILL) and close its log."""
        if self.alive():
            if self.interrupt(5.0) is None:
                self.kill()
        self._log.close()

    def describe(self) -> str:
        tail = "\n".join(self.log().splitlines()[-30:])
        return f"--- {self.name} (pid {self.pid}, exit {self.popen.poll()}) log tail:\n{tail}"


def cli_answered(out: subprocess.CompletedProcess) -> bool:
    """Whether a ``ros2 service call`` ran: exit 0, or the CLI itself died of SIGSEGV while
    exiting after it printed the node's whole response (seen in CI on these wheels after
    ``service call`` and ``topic echo``; the node had answered). Any other failure is one."""
    text = out.stdout + (out.stderr or "")
    answered = "_Response(" in text.partition("response:")[2]
    return out.returncode == 0 or (out.returncode == -signal.SIGSEGV and answered)


def pd_gains_param(params_file: Path = HUMANOID_YAML) -> str:
    """``controller.params:=...`` with the example controller's gains from ``params_file``
    (its ``wb_sim_pd_controller`` section): an in-process controller holding the robot as
    the external one would."""
    from wb_sim.config import read_yaml_params
    g = read_yaml_params(params_file, node_name="wb_sim_pd_controller")
    return f'controller.params:="{{kp: {g["kp"]!r}, kd: {g["kd"]!r}}}"'


def sim_node_argv(*overrides: str, params_file: Path = HUMANOID_YAML) -> list[str]:
    """``python -m wb_sim.ros.process --ros-args --params-file ... -p k:=v ...``."""
    argv = [sys.executable, "-m", "wb_sim.ros.process", "--ros-args", "--params-file", str(params_file)]
    for o in overrides:
        argv += ["-p", o]
    return argv


def pd_controller_argv(params_file: Path = HUMANOID_YAML) -> list[str]:
    return [sys.executable, "-m", "wb_sim.ros.pd_controller", "--ros-args",
            "--params-file", str(params_file)]


def effort_controller_argv(params_file: Path = HUMANOID_YAML) -> list[str]:
    script = Path(__file__).with_name("ros_effort_controller.py")
    return [sys.executable, str(script), "--ros-args", "--params-file", str(params_file)]


# ----------------------------------------------------------------------------- rclpy side

#: s: URDF loading and DDS discovery on a loaded 2-core machine
STARTUP_TIMEOUT = 30.0


class SimSetup:
    """A ``wb_sim`` node process in a fresh DDS domain, the processes started
    next to it, and this test's rclpy client on the same domain."""

    def __init__(self, log_dir, *overrides: str, env: dict[str, str] | None = None,
                 params_file: Path = HUMANOID_YAML):
        """``env``: extra environment variables of the processes it starts; ``params_file``:
        the node's robot configuration."""
        self.domain = fresh_domain_id()
        self.dir = log_dir
        self.env = env or {}
        self.procs: dict[str, Proc] = {}
        self.ros = RosClient(self.domain)
        try:
            self.node = self.start("wb_sim", sim_node_argv(*overrides, params_file=params_file))
            from rclpy.qos import QoSProfile, ReliabilityPolicy
            from sensor_msgs.msg import JointState
            js = self.ros.record(JointState, "joint_states",
                                 QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
            ok = self.ros.spin_until(lambda: bool(js.msgs) or not self.node.alive(),
                                     STARTUP_TIMEOUT)
            self.first_js, self.first_js_wall = (js.msgs[0], time.time()) if js.msgs else (None, 0)
            self.ros.stop_recording(js)
            assert ok and self.node.alive(), \
                f"no joint_states within {STARTUP_TIMEOUT} s\n{self.describe()}"
        except BaseException:
            self.close()
            raise

    def start(self, name: str, argv: list[str]) -> Proc:
        p = Proc(name, argv, self.domain, self.dir,
                 env={**ros_env(self.domain), **self.env} if self.env else None)
        self.procs[name] = p
        return p

    def describe(self) -> str:
        return "\n".join(p.describe() for p in self.procs.values())

    def close(self) -> None:
        for p in self.procs.values():
            p.close()
        self.ros.close()

    # --- services of the node

    def reset(self):
        from std_srvs.srv import Trigger
        res = self.ros.call(Trigger, "/wb_sim/reset", Trigger.Request())
        assert res.success, res.message
        return res

    def pause(self, on: bool):
        from std_srvs.srv import SetBool
        res = self.ros.call(SetBool, "/wb_sim/pause", SetBool.Request(data=on))
        assert res.success, res.message
        return res

    def step(self):
        from std_srvs.srv import Trigger
        return self.ros.call(Trigger, "/wb_sim/step", Trigger.Request())

    def start_pd_controller(self, name: str = "pd_controller", *overrides: str) -> Proc:
        """The example controller; ``overrides``: its parameters (``key:=value``)."""
        p = self.start(name, pd_controller_argv() + [a for o in overrides for a in ("-p", o)])
        assert p.wait_for_log("holding the initial posture", STARTUP_TIMEOUT,
                              spin=self.ros.spin_for), self.describe()
        return p




class Recorder:
    """Messages of one subscription with their wall-clock arrival times."""

    def __init__(self, client: "RosClient", msg_type, topic: str, qos):
        self.msgs: list = []
        self.wall: list[float] = []
        self.topic = topic
        self._client = client
        self.sub = client.node.create_subscription(msg_type, topic, self._on_msg, qos)

    def _on_msg(self, msg) -> None:
        self.msgs.append(msg)
        self.wall.append(time.monotonic())

    def clear(self) -> None:
        self.msgs.clear()
        self.wall.clear()

    @property
    def last(self):
        return self.msgs[-1] if self.msgs else None

    def close(self) -> None:
        self._client.node.destroy_subscription(self.sub)


class RosClient:
    """An rclpy node of the test process in its own context on ``domain_id``,
    spun explicitly with an EventsExecutor (no background thread)."""

    def __init__(self, domain_id: int, name: str = "wb_sim_test"):
        import rclpy
        from rclpy.signals import SignalHandlerOptions
        try:
            from rclpy.experimental import EventsExecutor
            make_executor = EventsExecutor
        except ImportError:  # Humble
            from rclpy.executors import SingleThreadedExecutor as make_executor

        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        os.environ.pop("ROS_LOCALHOST_ONLY", None)
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id,
                   signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = make_executor(context=self.context)
        self.executor.add_node(self.node)
        self.domain_id = domain_id
        self._recorders: list[Recorder] = []
        self._clients: dict[tuple, Any] = {}

    # --- spinning

    def spin_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.executor.spin_once(timeout_sec=min(left, 0.05))

    def spin_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() >= deadline:
                return bool(predicate())
            self.executor.spin_once(timeout_sec=0.02)
        return True

    # --- topics

    def record(self, msg_type, topic: str, qos=None) -> Recorder:
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        qos = qos or QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        r = Recorder(self, msg_type, topic, qos)
        self._recorders.append(r)
        return r

    def stop_recording(self, *recs: Recorder) -> None:
        for r in recs:
            if r in self._recorders:
                self._recorders.remove(r)
                r.close()

    def publisher(self, msg_type, topic: str, wait_for_subscribers: int = 1, timeout=10.0):
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        # depth 10: messages published back to back all reach the node; with 1 the second
        # replaced the first in the writer's history before the node's reader had matched
        # it (its match is not ours), and the first was lost (CI at f597724)
        pub = self.node.create_publisher(msg_type, topic, QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE))
        ok = self.spin_until(lambda: pub.get_subscription_count() >= wait_for_subscribers,
                             timeout)
        assert ok, f"no subscriber on '{topic}' within {timeout} s"
        return pub

    # --- services

    def call(self, srv_type, name: str, request, timeout: float = 10.0,
             idempotent: bool = False):
        """Call a service through one client per (type, name), made once. A fresh
        client's first request can be answered before the server has matched the
        client's reply reader (DDS discovery), and that answer is lost: a new client
        is warmed up (ready, then 0.5 s of spinning) before its first request, and an
        ``idempotent`` request (parameter gets and sets) is also sent again once,
        after half the timeout. Non-idempotent requests (step, reset) are never resent."""
        client = self._clients.get((srv_type, name))
        if client is None:
            client = self.node.create_client(srv_type, name)
            assert self.spin_until(client.service_is_ready, timeout), \
                f"service '{name}' not available within {timeout} s"
            self.spin_for(0.5)
            self._clients[(srv_type, name)] = client
        assert self.spin_until(client.service_is_ready, timeout), \
            f"service '{name}' not available within {timeout} s"
        future = client.call_async(request)
        if idempotent and not self.spin_until(future.done, timeout / 2):
            future = client.call_async(request)
        assert self.spin_until(future.done, timeout), f"no answer from '{name}'"
        return future.result()

    def set_parameter(self, name: str, value, node_name: str = "wb_sim"):
        """``/<node>/set_parameters`` (rcl_interfaces/srv/SetParameters) with one
        parameter; returns its SetParametersResult."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter
        req = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        return self.call(SetParameters, f"/{node_name}/set_parameters", req,
                         idempotent=True).results[0]

    def get_parameters(self, *names: str, node_name: str = "wb_sim") -> dict[str, Any]:
        from rcl_interfaces.srv import GetParameters
        from rclpy.parameter import parameter_value_to_python
        res = self.call(GetParameters, f"/{node_name}/get_parameters",
                        GetParameters.Request(names=list(names)), idempotent=True)
        return {n: parameter_value_to_python(v) for n, v in zip(names, res.values)}

    def close(self) -> None:
        for r in list(self._recorders):
            self.stop_recording(r)
        try:
            self.executor.shutdown()
        except Exception:  # noqa: BLE001 - best effort at teardown
            pass
        self.node.destroy_node()
        self.context.try_shutdown()


# ----------------------------------------------------------------------------- numbers


def stamp_ns(msg) -> int:
    """Stamp of a stamped message, a Clock or a TFMessage (its first transform), ns."""
    if hasattr(msg, "header"):
        s = msg.header.stamp
    elif hasattr(msg, "transforms"):
        s = msg.transforms[0].header.stamp
    else:
        s = msg.clock
    return s.sec * 1_000_000_000 + s.nanosec


def quat_matrix(x: float, y: float, z: float, w: float):
    import numpy as np
    n = x * x + y * y + z * z + w * w
    s = 2.0 / n
    return np.array([
        [1 - s * (y * y + z * z), s * (x * y - z * w), s * (x * z + y * w)],
        [s * (x * y + z * w), 1 - s * (x * x + z * z), s * (y * z - x * w)],
        [s * (x * z - y * w), s * (y * z + x * w), 1 - s * (x * x + y * y)],
    ])


def transform_matrix(tf) -> "Any":
    """4x4 homogeneous matrix of a geometry_msgs/Transform."""
    import numpy as np
    t, r = tf.translation, tf.rotation
    T = np.eye(4)
    T[:3, :3] = quat_matrix(r.x, r.y, r.z, r.w)
    T[:3, 3] = (t.x, t.y, t.z)
    return T


def world_transforms(edges: dict[str, tuple[str, "Any"]], world: str = "world") -> dict:
    """world <- link for every link of a TF tree given as ``{child: (parent, T)}``."""
    import numpy as np
    out: dict[str, Any] = {world: np.eye(4)}

    def resolve(link: str, depth: int = 0):
        if link in out:
            return out[link]
        if depth > 200 or link not in edges:
            raise KeyError(f"frame '{link}' is not connected to '{world}'")
        parent, T = edges[link]
        out[link] = resolve(parent, depth + 1) @ T
        return out[link]

    for child in edges:
        resolve(child)
    return out


class LockstepController:
    """Answers each joint state of the node (with the odometry of the same step)
    with one ``joint_commands`` message stamped with that state's stamp, whose
    fields are ``law(i, qj, vj, q)`` (i: the cycle, q: pinocchio's configuration);
    keeps what it saw: ``states`` (positions, velocities, efforts, base height, and
    the whole configuration q with the base's twist from the odometry). A fixed-base
    robot (``fixed_base``: the node publishes no odometry) is answered on its joint states
    alone, its base pose zero."""

    def __init__(self, s: SimSetup, law, cycles: int, reset: bool = True,
                 fixed_base: bool = False):
        """Resets the node first (unless ``reset`` is false): the states it then sees
        start from the initial state (the node sends the reset's state again every
        0.5 s until it is answered)."""
        from nav_msgs.msg import Odometry
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        if reset:
            s.reset()
        ros = s.ros
        self._JointState = JointState
        state_qos = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)
        command_qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.ros, self.law, self.left = ros, law, cycles
        self.js: dict[int, Any] = {}
        self.odom: dict[int, Any] = {}
        self.answered: set[int] = set()
        self._fixed = Odometry() if fixed_base else None
        self.states: list[tuple] = []
        self.stamps: list[int] = []  #: each state's stamp, ns
        node = ros.node
        self.pub = node.create_publisher(JointState, "joint_commands", command_qos)
        self.subs = [node.create_subscription(JointState, "joint_states", self._on_js, state_qos),
                     node.create_subscription(Odometry, "odom/ground_truth", self._on_odom,
                                              state_qos)]

    def _on_js(self, msg) -> None:
        self.js[stamp_ns(msg)] = msg
        if self._fixed is not None:
            self.odom[stamp_ns(msg)] = self._fixed
        self._answer(stamp_ns(msg))

    def _on_odom(self, msg) -> None:
        self.odom[stamp_ns(msg)] = msg
        self._answer(stamp_ns(msg))

    def _answer(self, t: int) -> None:
        if t in self.answered or t not in self.js or t not in self.odom:
            return
        js, od = self.js.pop(t), self.odom.pop(t)
        p, o = od.pose.pose.position, od.pose.pose.orientation
        qj, vj = np.array(js.position), np.array(js.velocity)
        q = np.concatenate([[p.x, p.y, p.z, o.x, o.y, o.z, o.w], qj])
        t_ = od.twist.twist
        twist = np.array([t_.linear.x, t_.linear.y, t_.linear.z,
                          t_.angular.x, t_.angular.y, t_.angular.z])
        self.states.append((qj, vj, np.array(js.effort), p.z, q, twist))
        self.stamps.append(t)
        if self.left <= 0:
            return
        self.answered.add(t)
        fields = self.law(len(self.states) - 1, qj, vj, q)
        cmd = self._JointState(name=list(js.name),
                         **{k: [float(x) for x in v] for k, v in fields.items()})
        cmd.header.stamp = js.header.stamp
        self.pub.publish(cmd)
        self.left -= 1

    def run(self, s: SimSetup, timeout: float = 60.0) -> list:
        """Answer ``cycles`` states; the states seen (one more)."""
        cycles = self.left
        ok = s.ros.spin_until(lambda: len(self.states) > cycles, timeout)
        for sub in self.subs:
            s.ros.node.destroy_subscription(sub)
        s.ros.node.destroy_publisher(self.pub)
        assert ok, f"{len(self.states)} of {cycles + 1} states\n{s.describe()}"
        return self.states[:cycles + 1]


# ----------------------------------------------------------------------------- a busy machine

class BusyMachine:
    """The machine of the closed-loop issue (``../shared/repro/overloaded_main_job.py``):
    ``others`` other simulations, each a ``wb_sim_run`` (node + example controller) in a
    ROS domain of its own, running until :meth:`close`, and a plain rclpy listener of the
    1 kHz streams in ``listen_domain`` (the main job's). ``extra``: arguments of the other
    runs (e.g. ``--config`` of a realtime_priority)."""

    def __init__(self, log_dir: Path, listen_domain: int, others: int = 2,
                 extra: tuple[str, ...] = ()):
        self.procs = [Proc(f"other{k}", [sys.executable, "-m", "wb_sim.ros.run", "--duration",
                                          "120", *extra], fresh_domain_id(), log_dir,
                           cwd=RUN_DIR)
                      for k in range(others)]
        from wb_sim.ros.bench import LISTENER_CODE
        self.procs.append(Proc("listener", [sys.executable, "-c", LISTENER_CODE], listen_domain,
                               log_dir, cwd=RUN_DIR))

    def wait_until_busy(self, timeout: float = 60.0) -> None:
        """Until every other simulation steps (its first stats line)."""
        for p in self.procs[:-1]:
            assert p.wait_for_log("real-time factor", timeout), p.describe()

    def close(self) -> None:
        for p in self.procs:
            if p.alive():
                p.popen.send_signal(signal.SIGINT)
        for p in self.procs:
            try:
                p.popen.wait(15)
            except subprocess.TimeoutExpired:
                pass
            try:  # a run's node and controller are in its session
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.close()
