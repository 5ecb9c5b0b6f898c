"""The ROS user's path, for real: ``colcon build`` (plain, not ``--symlink-install``)
of the package into a workspace over the venv, ``source install/setup.bash``, then
``ros2 launch wb_sim sim.launch.py`` with its variants, driven with ``ros2 topic``,
``ros2 param`` and ``ros2 service`` as a user would; and ``colcon test`` in that
workspace.

One workspace per test session (the build takes a few seconds); each launch runs
a few seconds in its own DDS domain. Needs the ROS 2 launch stack and colcon
(tools/setup_venv.sh installs them from ../shared/ros2-launch and PyPI): skipped
with the reason without them, failed instead when ``WB_SIM_REQUIRE_ROS=1`` (CI).

Numbers checked: the humanoid's base stays within 2 cm of its start height (and
ANYmal's within 3 cm), simulated time advances, a parameter set with
``ros2 param set`` reads back, ``~/pause`` stops the clock and ``~/step``
advances it by exactly 1 ms; a failing node ends the launch with a non-zero exit
code within seconds and leaves no process behind.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from helpers.extras import require_launch_stack, require_robot_data
from helpers.ros import PKG, Proc, cli_answered, copy_package_sources, fresh_domain_id, ros_env

require_launch_stack()

VENV = Path(sys.prefix)
#: s: a launch on a loaded 2-core machine (URDF, DDS discovery, the controller)
START_TIMEOUT = 60.0
#: what ros2cli says while discovery is still under way
NOT_DISCOVERED = ("Node not found", "does not appear to be published yet",
                  "Could not determine the type")
HUMANOID_Z0 = 0.696882  # m, config/humanoid.yaml initial.base_position


def _ws_env(domain: int) -> dict[str, str]:
    """The environment of a user's shell over the venv ("/opt/ros/<distro>/setup.bash")."""
    env = ros_env(domain)
    env["VIRTUAL_ENV"] = str(VENV)
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["AMENT_PREFIX_PATH"] = str(VENV)
    env["CMAKE_PREFIX_PATH"] = str(VENV)
    for k in ("WB_SIM_REQUIRE_EXTRAS", "COLCON_PREFIX_PATH"):
        env.pop(k, None)
    return env


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    """A colcon workspace with wb_sim built (plain colcon build) and installed."""
    ws = tmp_path_factory.mktemp("colcon_ws")
    copy_package_sources(ws / "src" / "wb_sim", with_tests=True)
    # the clone holds two packages side by side, and colcon finds both
    listed = subprocess.run([str(VENV / "bin" / "colcon"), "list", "--names-only"], cwd=ws,
                            env=_ws_env(0), capture_output=True, text=True, timeout=120)
    assert sorted(listed.stdout.split()) == ["wb_sim", "wb_sim_interfaces"], \
        listed.stdout + listed.stderr
    # wb_sim_interfaces comes from the venv here (tools/setup_venv.sh builds it with
    # tools/build_interfaces.sh): the PyPI ros-* wheels' CMake configurations name include
    # directories of the machine that built them (/opt/python/cp311-cp311/include/...), so its
    # own CMakeLists.txt cannot configure against them; inside a ROS 2 install colcon builds it
    out = subprocess.run([str(VENV / "bin" / "colcon"), "build", "--packages-ignore",
                          "wb_sim_interfaces"],
                         cwd=ws, env=_ws_env(0), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"colcon build failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    for exe in ("wb_sim_node", "wb_sim_pd_controller", "wb_sim_run", "wb_sim_record",
                "wb_sim_replay"):
        assert (ws / "install" / "wb_sim" / "lib" / "wb_sim" / exe).is_file(), exe
    # the processes import wb_sim from the workspace, not from the sources or the venv
    code = "import wb_sim.ros.node as n; print(n.__file__)"
    where = _shell(ws, f"python -c {shlex.quote(code)}", 0).stdout.strip()
    assert where.startswith(str(ws / "install")), where
    return ws


def _shell(ws: Path, command: str, domain: int, timeout: float = 60.0,
           check: bool = True) -> subprocess.CompletedProcess:
    """``command`` in a bash that sourced the workspace's install/setup.bash. A command
    that hangs past ``timeout`` (a ros2 CLI once hung 60 s in CI after discovery) comes
    back as exit 124 with what it printed, for the caller to try again or fail on."""
    try:
        out = subprocess.run(["bash", "-c", f"source install/setup.bash && {command}"], cwd=ws,
                             env=_ws_env(domain), capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired as e:
        def text(x):
            return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
        out = subprocess.CompletedProcess(e.cmd, 124, text(e.stdout),
                                          text(e.stderr) + f"\n(timed out after {timeout} s)")
    if check:
        assert out.returncode == 0, f"'{command}' failed ({out.returncode}):\n" \
                                    f"{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    return out


def _process_state(pid: int) -> str:
    """A process's command line, state (R, S, D, Z...), parent, threads and where its
    threads wait in the kernel, from /proc (what a left-behind process was doing)."""
    d = Path("/proc") / str(pid)
    try:
        cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        status = dict(line.split(":", 1) for line in (d / "status").read_text().splitlines()
                      if ":" in line)
        waits = sorted({(t / "wchan").read_text() for t in (d / "task").iterdir()})
    except OSError as e:
        return f"  {pid}: gone or unreadable ({e})"
    return (f"  {pid}: {cmd[:200]}\n    state {status.get('State', '?').strip()}, parent "
            f"{status.get('PPid', '?').strip()}, threads {status.get('Threads', '?').strip()}, "
            f"waiting in {waits}")


def _session_pids(sid: int) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.getsid(int(d.name)) == sid:
                    pids.append(int(d.name))
            except (ProcessLookupError, PermissionError):
                pass
    return pids


class Launch:
    """``ros2 launch wb_sim sim.launch.py ARGS`` in its own session and DDS domain."""

    def __init__(self, ws: Path, log_dir: Path, *args: str):
        self.ws = ws
        self.domain = fresh_domain_id()
        cmd = f"exec ros2 launch wb_sim sim.launch.py {' '.join(map(shlex.quote, args))}"
        self.proc = Proc("launch", ["bash", "-c", f"source install/setup.bash && {cmd}"],
                         self.domain, log_dir, cwd=ws, env=_ws_env(self.domain))

    def log(self) -> str:
        return self.proc.log()

    def wait_for(self, text: str, timeout: float = START_TIMEOUT) -> None:
        assert self.proc.wait_for_log(text, timeout), f"no '{text}' within {timeout} s\n" \
                                                      f"{self.proc.describe()}"

    def ros2(self, command: str, timeout: float = 60.0, check: bool = True) -> str:
        """``ros2 COMMAND``'s output; tried again while discovery has not yet found the
        node or service (a direct node without the daemon discovers from scratch)."""
        deadline = time.monotonic() + 30.0
        while True:
            # niced: the tools' start-up (a second of CPU each) must not take the core the
            # real-time controller needs on a loaded 2-core machine
            out = _shell(self.ws, f"nice -n 19 ros2 {command}", self.domain, timeout, check=False)
            text = out.stdout + out.stderr
            if not any(s in text for s in NOT_DISCOVERED) or time.monotonic() > deadline:
                break
        if check:
            # a service call counts once the node's whole answer is printed (helpers.ros)
            ok = cli_answered(out) if command.startswith("service call") \
                else out.returncode == 0
            assert ok, f"'ros2 {command}' failed ({out.returncode}):\n{text}"
        return text

    def names(self, what: str, expected: set[str], timeout: float = 30.0) -> set[str]:
        """``ros2 topic list`` / ``ros2 node list`` until ``expected`` are among them."""
        deadline = time.monotonic() + timeout
        while True:
            found = set(self.ros2(f"{what} list --no-daemon --spin-time 1").split())
            if expected <= found or time.monotonic() > deadline:
                return found

    def echo(self, topic: str, msg_type: str, field: str | None = None):
        """One message of ``topic`` (``ros2 topic echo --once``), parsed as YAML."""
        f = f" --field {field}" if field else ""
        for _ in range(3):
            out = self.ros2(f"topic echo --once --no-daemon{f} {topic} {msg_type}", check=False)
            # the message, whole; the CLI itself sometimes dies of SIGSEGV while exiting
            # after printing it (seen once in CI on these wheels): the message counts
            if "---" in out:
                return yaml.safe_load(out.split("---")[0])
        raise AssertionError(f"no message on {topic}:\n{out}\n{self.proc.describe()}")

    def stop(self, timeout: float = 15.0) -> int | None:
        """Ctrl-C; the exit code, and no process of the launch left."""
        rc = self.proc.interrupt(timeout)
        self.assert_no_orphans()
        return rc

    def assert_no_orphans(self) -> None:
        deadline = time.monotonic() + 5.0
        while _session_pids(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _session_pids(self.proc.pid)
        states = [_process_state(pid) for pid in left]  # before the kill: what each was doing
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, (f"processes left behind by the launch: {left}\n" + "\n".join(states)
                          + f"\n{self.proc.describe()}")

    def close(self) -> None:
        if self.proc.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.popen.wait(10)
        self.proc._log.close()
        # the ros2 daemon of this domain, if a verb started one
        _shell(self.ws, "ros2 daemon stop", self.domain, check=False)


@pytest.fixture
def launch(workspace, tmp_path):
    made = []

    def start(*args: str) -> Launch:
        ln = Launch(workspace, tmp_path / f"launch{len(made)}", *args)
        made.append(ln)
        return ln

    yield start
    for ln in made:
        ln.close()


def _base_z(ln: Launch) -> float:
    return float(ln.echo("/odom/ground_truth", "nav_msgs/msg/Odometry", "pose.pose.position.z"))


def _clock_s(ln: Launch) -> float:
    c = ln.echo("/clock", "rosgraph_msgs/msg/Clock")["clock"]
    return c["sec"] + c["nanosec"] * 1e-9


def _wait_clock(ln: Launch, t: float, timeout: float = 30.0) -> float:
    deadline = time.monotonic() + timeout
    while (now := _clock_s(ln)) < t:
        assert time.monotonic() < deadline, f"simulated time stuck at {now} s\n{ln.proc.describe()}"
        time.sleep(0.5)
    return now


# ----------------------------------------------------------------------------- the runs


def test_default_launch_stands_and_answers_the_ros2_tools(launch):
    ln = launch()
    ln.wait_for("first command received: the simulation starts")
    time.sleep(3.0)  # the landing, without the tools' load beside it
    z = _base_z(ln)
    starved = "no valid command for" in ln.log()
    if not starved:
        assert abs(z - HUMANOID_Z0) < 0.02, f"base at {z} m after 3 s: it does not stand"
    else:  # a machine loaded by other work starved the separate controller process (the
        # watchdog says so); the lockstep runs below check standing whatever the load
        print(f"note: the controller was starved (watchdog tripped); base at {z:.3f} m")
    expected = {"/joint_states", "/imu/data", "/contact_wrench/left_foot",
                "/contact_wrench/right_foot", "/odom/ground_truth", "/tf", "/tf_static", "/clock",
                "/robot_description", "/joint_commands", "/effort_commands", "/external_wrench"}
    topics = ln.names("topic", expected)
    assert expected <= topics, topics
    nodes = ln.names("node", {"/wb_sim", "/wb_sim_pd_controller"})
    assert {"/wb_sim", "/wb_sim_pd_controller"} <= nodes, nodes

    # a live parameter, as a user sets it: the node's stats line every second from now on
    out = ln.ros2("param set --no-daemon --spin-time 2 /wb_sim publish.stats_period_s 1.0")
    assert "Set parameter successful" in out, out
    assert "1.0" in ln.ros2("param get --no-daemon --spin-time 2 /wb_sim publish.stats_period_s")
    ln.wait_for("real-time factor", 30)
    refused = ln.ros2("param set --no-daemon --spin-time 2 /wb_sim contact.stiffness -5.0",
                      check=False)
    assert "parameter failed" in refused and "out of range" in refused, refused
    assert ln.stop() == 0, ln.proc.describe()
    assert "stopped at t = " in ln.log()


def test_controller_none_waits_for_the_users_first_command_and_takes_their_config(launch, tmp_path):
    user = tmp_path / "my.yaml"  # 1.0e6-style floats, as users write them
    user.write_text("wb_sim:\n  ros__parameters:\n    contact:\n      stiffness: 5.0e4\n"
                    "    publish:\n      stats_period_s: 1.0e0\n")
    ln = launch("controller:=none", f"config:={user}")
    ln.wait_for("waiting for the first command")
    assert "wb_sim_pd_controller" not in ln.log()
    assert "50000.0" in ln.ros2("param get --no-daemon --spin-time 2 /wb_sim contact.stiffness")
    # the physics waits: the initial state only (published while it waits), the clock at 0
    # (a generous timeout: the CLI discovers the node from scratch, slow on a loaded machine)
    silent = ln.ros2("topic echo --once --no-daemon --timeout 10 /clock rosgraph_msgs/msg/Clock",
                     check=False)
    assert "clock:" in silent and not re.search(r"sec: [1-9]", silent), silent
    # ten times in one second: a single message can be lost when the CLI's writer
    # quits before the node's reader has matched it
    ln.ros2("topic pub -r 10 --times 10 -w 1 /joint_commands sensor_msgs/msg/JointState "
            "'{name: [l_knee], effort: [0.0]}'")
    ln.wait_for("first command received: the simulation starts", 30)
    assert _wait_clock(ln, 0.5) >= 0.5
    ln.wait_for("real-time factor", 30)  # the user's stats_period_s: 1 s
    assert ln.stop() == 0, ln.proc.describe()


def test_lockstep_launch_stands_and_answers_the_services(launch):
    ln = launch("sync:=lockstep")
    ln.wait_for("lockstep: one step per answer to each joint state (stamps matched)")
    t = _wait_clock(ln, 2.0)
    z = _base_z(ln)
    assert abs(z - HUMANOID_Z0) < 0.02, f"base at {z} m after {t:.1f} s: it does not stand"

    out = ln.ros2('service call /wb_sim/pause std_srvs/srv/SetBool "{data: true}"')
    assert "success=True" in out, out
    steps = []
    for _ in range(2):  # paused: each ~/step advances the simulated time by one dt
        out = ln.ros2("service call /wb_sim/step std_srvs/srv/Trigger")
        m = re.search(r"t = ([\d.]+) s", out)
        assert m and "success=True" in out, out
        steps.append(float(m[1]))
    assert abs(steps[1] - steps[0] - 0.001) < 1e-9, steps
    out = ln.ros2("service call /wb_sim/reset std_srvs/srv/Trigger")
    assert "success=True" in out and "reset to the initial state" in out, out
    out = ln.ros2('service call /wb_sim/pause std_srvs/srv/SetBool "{data: false}"')
    assert "success=True" in out, out
    t = _wait_clock(ln, steps[1] + 1.0)  # the clock goes on after the reset
    z = _base_z(ln)
    assert abs(z - HUMANOID_Z0) < 0.02, f"base at {z} m at {t:.1f} s after the reset"
    assert ln.stop() == 0, ln.proc.describe()


@pytest.mark.parametrize("priority", ["default", "0"])
def test_the_default_launch_stands_on_a_busy_machine(launch, tmp_path, priority):
    """``ros2 launch wb_sim sim.launch.py`` as a new user runs it, beside two other
    simulations (each a wb_sim_run in its own domain) and a listener of its 1 kHz streams:
    in the default mode (paced lockstep with the example controller) it stands and ends
    with exit 0; the simulation slows instead (the stats lines report the real-time factor
    reached). Before, it fell 3 of 3 times at load 2-5.7."""
    from helpers.ros import BusyMachine

    from wb_sim.ros.verdict import RunJudge
    cfg = tmp_path / "stop.yaml"
    cfg.write_text("wb_sim:\n  ros__parameters:\n    stop_after_s: 4.0\n    publish:\n"
                   "      stats_period_s: 1.0\n"
                   + ("    realtime_priority: 0\n" if priority == "0" else ""))
    ln = launch(f"config:={cfg}")
    busy = BusyMachine(tmp_path / "busy", ln.domain, others=2,
                       extra=("--config", str(cfg)) if priority == "0" else ())
    try:
        ln.wait_for("stop_after_s = 4 s of simulated time reached", 240)
        rc = ln.proc.popen.wait(30)
    finally:
        busy.close()
    ln.assert_no_orphans()
    judge = RunJudge(floating_base=True)
    for line in ln.log().splitlines():
        judge.feed(line)
    verdict, failed = judge.verdict()
    print(verdict)
    assert "lockstep: one step per answer" in ln.log()
    assert rc == 0 and not failed and verdict.startswith("verdict: stands:"), \
        f"{verdict}\n{ln.proc.describe()}"
    assert 0.0 < judge.real_time_factor <= 1.05, verdict


def test_the_example_controller_in_process_through_the_launch(launch, tmp_path):
    """controller:=wb_sim.controllers:pd_gravity runs the example law inside the node: no
    controller process, the robot stands, the launch ends with exit 0 at stop_after_s."""
    cfg = tmp_path / "stop.yaml"
    cfg.write_text("wb_sim:\n  ros__parameters:\n    stop_after_s: 2.0\n")
    ln = launch("controller:=wb_sim.controllers:pd_gravity", f"config:={cfg}")
    ln.wait_for("stop_after_s = 2 s of simulated time reached", 120)
    assert ln.proc.popen.wait(30) == 0, ln.proc.describe()
    ln.assert_no_orphans()
    log = ln.log()
    assert "in-process controller 'wb_sim.controllers:pd_gravity'" in log, log[-2000:]
    assert "wb_sim_pd_controller" not in log
    z = [float(m) for m in re.findall(r"base at \([-\d.]+, [-\d.]+, ([-\d.]+)\) m", log)]
    assert z and abs(z[-1] - HUMANOID_Z0) < 0.02, (z, log[-2000:])


def test_a_world_file_through_the_launch(launch, tmp_path):
    """world:= a world file (here config/worlds/humanoid_box.yaml with its controller in the
    node): the world's controller is controller:='s default, the box sent into the shins pushes
    the base back (10.7 mm at t = 0.4 s headless, 5.8 mm at the most without the box), the
    robot stands, the launch ends with exit 0."""
    world = tmp_path / "box.yaml"
    world.write_text((PKG / "config" / "worlds" / "humanoid_box.yaml").read_text().replace(
        "controller: pd ", "controller: wb_sim.controllers:pd_gravity "))
    cfg = tmp_path / "stop.yaml"
    cfg.write_text("wb_sim:\n  ros__parameters:\n    stop_after_s: 1.0\n    publish:\n"
                   "      stats_period_s: 0.2\n")
    ln = launch(f"world:={world}", f"config:={cfg}")
    ln.wait_for("stop_after_s = 1 s of simulated time reached", 120)
    assert ln.proc.popen.wait(30) == 0, ln.proc.describe()
    ln.assert_no_orphans()
    log = ln.log()
    assert "in-process controller 'wb_sim.controllers:pd_gravity'" in log, log[-2000:]
    xz = [(float(x), float(z)) for x, z in
          re.findall(r"base at \(([-\d.]+), [-\d.]+, ([-\d.]+)\) m", log)]
    assert len(xz) >= 4 and min(x for x, _ in xz) < -0.008, (xz, log[-2000:])
    assert abs(xz[-1][1] - HUMANOID_Z0) < 0.02, xz


def test_two_humanoids_through_the_launch_each_under_its_controller(launch, tmp_path):
    """world:= config/worlds/two_humanoids.yaml: one node serving both robots, an example
    controller per robot in its namespace (/alice, /bob), lockstep; both stand (each base
    within 2 cm of its start height, at its place) and the launch ends with exit 0."""
    world = PKG / "config" / "worlds" / "two_humanoids.yaml"
    cfg = tmp_path / "stop.yaml"
    cfg.write_text("wb_sim:\n  ros__parameters:\n    stop_after_s: 2.0\n    real_time_factor: "
                   "0.0\n    publish:\n      stats_period_s: 0.5\n")
    ln = launch(f"world:={world}", f"config:={cfg}")
    ln.wait_for("stop_after_s = 2 s of simulated time reached", 180)
    assert ln.proc.popen.wait(30) == 0, ln.proc.describe()
    ln.assert_no_orphans()
    log = ln.log()
    for name, x0 in (("alice", -0.5), ("bob", 0.5)):
        assert f"[{name}.wb_sim_pd_controller]: holding the initial posture" in log, log[-3000:]
        xz = [(float(x), float(z)) for x, z in re.findall(
            rf"robot '{name}' base at \(([-\d.]+), [-\d.]+, ([-\d.]+)\) m", log)]
        assert len(xz) >= 3, log[-3000:]
        assert abs(xz[-1][1] - HUMANOID_Z0) < 0.02 and abs(xz[-1][0] - x0) < 0.02, (name, xz)


def test_anymal_launch_stands_in_lockstep(launch):
    require_robot_data("anymal")
    import wb_sim
    from wb_sim.config import read_yaml_params
    cfg = read_yaml_params(wb_sim.config_path("anymal"))
    # lockstep: the quadruped stands whatever the machine's load (in real time, a loaded
    # 2-core machine starves the separate controller process now and then)
    ln = launch("robot:=anymal", "sync:=lockstep")
    ln.wait_for("first command received: the simulation starts")
    _wait_clock(ln, 2.0)
    z0 = cfg["initial.base_position"][2]
    z = _base_z(ln)
    assert abs(z - z0) < 0.03, f"ANYmal's base at {z} m (start {z0} m): it does not stand"
    expected = {f"/contact_wrench/{s}" for s in cfg["contact_surfaces"]}
    topics = ln.names("topic", expected)
    assert expected <= topics, topics
    assert ln.stop() == 0, ln.proc.describe()


def test_ros2_run_of_each_executable(workspace, tmp_path):
    """``ros2 run wb_sim wb_sim_node`` alone simulates the default humanoid (as turtlesim
    starts its turtle), on the compiled step colcon built; ``ros2 run wb_sim wb_sim_run`` runs
    node + controller to the end."""
    domain = fresh_domain_id()
    node = Proc("ros2_run_node", ["bash", "-c", "source install/setup.bash && exec ros2 run "
                                  "wb_sim wb_sim_node"], domain, tmp_path, cwd=workspace,
                env=_ws_env(domain))
    try:
        assert node.wait_for_log("simulating wb_humanoid (23 joints", START_TIMEOUT), \
            node.describe()
        assert "no robot given" in node.log()
        # colcon built the compiled kernels too (wb_sim/_compiled.c), and the node says so
        assert "step: compiled (WB_SIM_PLAIN=1 forces" in node.log(), node.describe()
        os.killpg(node.pid, signal.SIGINT)  # Ctrl-C in a terminal: ros2 run and its child
        assert node.popen.wait(15) == 0, node.describe()
    finally:
        for pid in _session_pids(node.pid):  # nothing of it may outlive the test
            os.kill(pid, signal.SIGKILL)
        node.close()
    out = _shell(workspace, "ros2 run wb_sim wb_sim_run --duration 1 --sync lockstep "
                            "--real-time-factor 0", fresh_domain_id(), timeout=180, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "wb_sim_run: 1.0 s simulated" in out.stdout and "stands" in out.stdout, out.stdout[-2000:]
    # (wb_sim_pd_controller runs from the install in every launch test)
    for exe in ("wb_sim_record", "wb_sim_replay"):
        help_ = _shell(workspace, f"ros2 run wb_sim {exe} --help", 0, check=False)
        assert help_.returncode == 0 and f"usage: {exe}" in help_.stdout, help_.stderr[-2000:]


# ----------------------------------------------------------------------------- failures


def test_a_failing_node_ends_the_launch_non_zero_without_orphans(launch, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("wb_sim:\n  ros__parameters:\n    urdf_path: /nonexistent/robot.urdf\n")
    ln = launch(f"config:={bad}")
    t0 = time.monotonic()
    try:
        rc = ln.proc.popen.wait(30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the launch did not end within 30 s after the node failed\n"
                    f"{ln.proc.describe()}")
    took = time.monotonic() - t0
    ln.assert_no_orphans()
    assert rc != 0, ln.proc.describe()
    log = ln.log()
    assert "cannot start" in log and "/nonexistent/robot.urdf" in log, log[-3000:]
    assert "wb_sim_node" in log and "exited with code 2" in log, log[-3000:]
    assert took < 20.0, f"{took:.1f} s"


def test_sigterm_to_the_launch_ends_every_process_it_started(launch):
    """``ros2 launch`` cancels itself on SIGTERM and leaves its processes running (its log
    says "using SIGTERM can result in orphaned processes"); the node and the controller
    end with it (wb_sim/ros/parent.py), as they do on Ctrl-C (issue 28)."""
    ln = launch()
    ln.wait_for("first command received: the simulation starts")
    os.kill(ln.proc.pid, signal.SIGTERM)
    try:
        ln.proc.popen.wait(30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the launch did not end within 30 s of SIGTERM\n{ln.proc.describe()}")
    ln.assert_no_orphans()  # within 5 s, or the test fails naming them


def test_rviz_without_rviz2_fails_before_starting_anything(launch):
    ln = launch("rviz:=true")
    rc = ln.proc.popen.wait(30)
    ln.assert_no_orphans()
    assert rc != 0
    log = ln.log()
    assert "rviz2 is not installed" in log, log[-2000:]
    assert "process started" not in log, log[-2000:]


# ----------------------------------------------------------------------------- colcon test


def test_colcon_test_collects_everything_without_the_pypi_only_extras(workspace, tmp_path):
    """``colcon test`` in the workspace: every module collects where iDynTree, icub-models
    and example-robot-data are absent (a ROS install without them: hidden here), and the
    tests that run pass."""
    block = tmp_path / "block"
    for name in ("idyntree", "icub_models", "example_robot_data"):
        (block / name).mkdir(parents=True)
        (block / name / "__init__.py").write_text(f"raise ImportError('{name} hidden')\n")
    domain = fresh_domain_id()
    out = _shell(workspace, f"PYTHONPATH={block}:$PYTHONPATH colcon test "
                            f"--packages-ignore wb_sim_interfaces --packages-select "
                            f"wb_sim --pytest-args -q -k 'idyntree or parameter_table or every_python_package'",
                 domain, timeout=600, check=False)
    log = (workspace / "log" / "latest_test" / "wb_sim" / "stdout_stderr.log").read_text()
    assert out.returncode == 0 and "Failed" not in out.stdout, out.stdout + log[-3000:]
    assert "error" not in log.lower().split("short test summary")[-1] or "0 error" in log, log
    m = re.search(r"(\d+) passed(?:, (\d+) skipped)?, (\d+) deselected", log)
    assert m and int(m[1]) >= 2 and int(m[3]) > 200, log[-2000:]
    res = _shell(workspace, "colcon test-result --all", domain, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
