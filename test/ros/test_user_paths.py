"""The user's paths through the node and the launcher, as processes:

* the example controller answers Ctrl-C / SIGTERM at once, also while it waits
  for the simulator;
* ``wb_sim_run`` exits non-zero within seconds after a failure (never rc 0,
  never a hang), refuses bad input in one line, stops at ``--duration``, a
  key in the user's ``--config`` wins over its defaults, and a fixed-base arm
  gets a verdict (``holds``);
* the node refuses an unknown parameter with the Python API's did-you-mean,
  reads ``urdf_path`` relative to the YAML file that sets it, and alone
  (``wb_sim_node`` without parameters) simulates the default humanoid.

Skipped without rclpy / tf2_msgs unless ``WB_SIM_REQUIRE_ROS=1`` (CI).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.extras import require_robot_data, require_ros
from helpers.ros import PKG, Proc, fresh_domain_id, pd_controller_argv, ros_env, sim_node_argv

require_ros()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_pd_controller_waiting_for_the_simulator_ends_at_once_on_a_signal(tmp_path, sig):
    p = Proc("pd_controller", pd_controller_argv(), fresh_domain_id(), tmp_path)
    try:
        assert p.wait_for_log("waiting for 'robot_description'", 60), p.describe()
        time.sleep(0.5)  # well inside its wait (30 s before it gives up)
        t0 = time.monotonic()
        p.popen.send_signal(sig)
        rc = p.popen.wait(10)
        took = time.monotonic() - t0
    finally:
        p.close()
    assert rc == 0, p.describe()
    # well under the 30 s it would wait for the simulator without the signal handling
    assert took < 5.0, f"{took:.2f} s to end after {sig.name}"


# ----------------------------------------------------------------------------- wb_sim_run


def _run(tmp_path, *args: str, timeout: float = 120.0) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "wb_sim.ros.run", *args], capture_output=True,
                         text=True, timeout=timeout, cwd=tmp_path,
                         env=ros_env(fresh_domain_id()))
    return out, time.monotonic() - t0


def _yaml(tmp_path, name: str, body: str):
    path = Path(tmp_path) / name
    path.write_text("wb_sim:\n  ros__parameters:\n" + body)
    return path


@pytest.mark.parametrize("case", ["robot", "missing", "invalid", "unknown_key"])
def test_run_refuses_bad_input_in_one_line_before_starting_anything(tmp_path, case):
    args = {"robot": ["--robot", "humanod"],
            "missing": ["--config", "nonexistent.yaml"],
            "invalid": ["--config", str(tmp_path / "invalid.yaml")],
            "unknown_key": ["--config", str(tmp_path / "typo.yaml")]}[case]
    (tmp_path / "invalid.yaml").write_text("wb_sim:\n  ros__parameters:\n    contact: [1,\n")
    _yaml(tmp_path, "typo.yaml", "    contact:\n      stifness: 60000.0\n")
    out, took = _run(tmp_path, *args, "--duration", "1")
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stdout == ""  # nothing started
    expect = {"robot": "available: anymal, humanoid, icub, panda, talos",
              "missing": "cannot read parameter file 'nonexistent.yaml'",
              "invalid": "is not valid YAML",
              "unknown_key": "unknown parameter 'contact.stifness'; did you mean "
                             "'contact.stiffness'"}[case]
    assert expect in out.stderr, out.stderr
    assert took < 15.0, f"{took:.1f} s"


def test_run_after_a_divergence_exits_1_within_seconds(tmp_path):
    # a 0.5 mm penetration limit: the humanoid's landing (1-2 mm of sink) diverges at once
    cfg = _yaml(tmp_path, "div.yaml", "    contact:\n      max_penetration: 0.0005\n")
    out, took = _run(tmp_path, "--config", str(cfg), "--sync", "lockstep", "--duration", "5")
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert "wb_sim_run: the simulation diverged" in out.stderr, out.stderr
    m = re.search(r"\[wb_sim\] \[ERROR\] \[(\d+\.\d+)\]", out.stdout)
    assert m, out.stdout[-2000:]
    after = time.time() - float(m[1])  # from the node's divergence to now (run has ended)
    assert after < 8.0, f"wb_sim_run ended {after:.1f} s after the divergence"


def test_run_after_a_failed_start_exits_2_within_seconds(tmp_path):
    cfg = _yaml(tmp_path, "bad.yaml", "    urdf_path: /nonexistent/robot.urdf\n")
    out, took = _run(tmp_path, "--config", str(cfg), "--duration", "2")
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert "cannot start: URDF file not found" in out.stdout, out.stdout[-2000:]
    m = re.search(r"\[wb_sim\] \[FATAL\] \[(\d+\.\d+)\]", out.stdout)
    after = time.time() - float(m[1])
    assert after < 5.0, f"wb_sim_run ended {after:.1f} s after the node failed"


def test_run_with_the_example_controller_in_process_stands(tmp_path):
    """wb_sim_run --controller wb_sim.controllers:pd_gravity: no controller process, the
    gains of config/humanoid.yaml's wb_sim_pd_controller block, the mode named."""
    out, took = _run(tmp_path, "--controller", "wb_sim.controllers:pd_gravity", "--duration", "2")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "in-process controller 'wb_sim.controllers:pd_gravity'" in out.stdout
    assert "[controller]" not in out.stdout  # no process of it
    assert "verdict: stands:" in out.stdout, out.stdout[-2000:]
    bad, _ = _run(tmp_path, "--controller", "wb_sim.controllers:pd_gravity", "--sync",
                  "lockstep", "--duration", "1")
    assert bad.returncode == 2 and "runs inside the node" in bad.stderr, bad.stderr
    bad, _ = _run(tmp_path, "--controller", "pdx", "--duration", "1")
    assert bad.returncode == 2 and "choose 'pd'" in bad.stderr, bad.stderr


def test_run_of_a_world_file_the_box_pushes_the_standing_robot(tmp_path):
    """wb_sim_run --world config/worlds/humanoid_box.yaml (the example law in the node: the
    trajectory of test_world's headless run): the 5 kg box sent into the shins pushes the
    base back (10.7 mm at t = 0.4 s headless, 5.7 mm without the box) and the humanoid stands; bad worlds are refused
    in one line before anything starts."""
    world = PKG / "config" / "worlds" / "humanoid_box.yaml"
    mine = tmp_path / "box_in_process.yaml"  # the world's controller is --controller's default
    mine.write_text(world.read_text().replace("controller: pd ",
                                              "controller: wb_sim.controllers:pd_gravity "))
    # the stats lines sample the base at wall-clock periods: often enough (20 ms) that the
    # push's 0.3 s around its peak is seen whatever the machine's speed
    out, took = _run(tmp_path, "--world", str(mine), "--real-time-factor", "0", "-p",
                     "publish.stats_period_s:=0.02", "--duration", "1")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "in-process controller 'wb_sim.controllers:pd_gravity'" in out.stdout
    assert "verdict: stands:" in out.stdout, out.stdout[-2000:]
    xs = [float(x) for x in re.findall(r"base at \((-?[\d.]+),", out.stdout)]
    assert len(xs) >= 10 and min(xs) < -0.008, xs  # without the box: -5.8 mm at the most
    two = tmp_path / "two.yaml"
    two.write_text("world:\n  robots:\n    - {name: a, robot: humanoid}\n"
                   "    - {name: b, robot: humanoid, initial: {base_position: [2, 0, 0.7]}, "
                   "controller: 'wb_sim.controllers:pd_gravity'}\n")
    for args, says in ((["--world", str(two)], "robot 'b': controller "
                        "'wb_sim.controllers:pd_gravity': with several robots each robot's "
                        "controller is 'pd'"),
                       (["--world", str(world), "--robot", "icub"], "leave --robot out")):
        bad, _ = _run(tmp_path, *args, "--duration", "1")
        assert bad.returncode == 2 and says in bad.stderr, bad.stderr
        assert bad.stderr.count("\n") == 1 and bad.stdout == "", bad.stderr


def test_run_of_the_push_world_runs_its_keyframe_controller_in_the_node(tmp_path):
    """wb_sim_run --world config/worlds/humanoid_pushes_box.yaml: the world's in-process
    controller (wb_sim.keyframes:keyframe_pd, its keyframes through controller.params) runs
    in the node; the robot crouches to push (headless: the base down to 0.610 m) and stands."""
    world = PKG / "config" / "worlds" / "humanoid_pushes_box.yaml"
    out, took = _run(tmp_path, "--world", str(world), "--real-time-factor", "0", "-p",
                     "publish.stats_period_s:=0.05", "--duration", "3.2")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "in-process controller 'wb_sim.keyframes:keyframe_pd'" in out.stdout
    m = re.search(r"verdict: stands: base height first [\d.]+ m, lowest (?P<low>[\d.]+) m",
                  out.stdout)
    assert m, out.stdout[-2000:]
    assert 0.6 < float(m["low"]) < 0.63, m["low"]  # the stats' samples of the crouch


def test_run_of_two_humanoids_starts_a_controller_each_and_judges_each(tmp_path):
    """wb_sim_run --world two_humanoids.yaml: one node serving both, one example controller
    per robot in its namespace, a verdict per robot from its own base (exit 0: both
    stand, each base within 5 mm of its first height)."""
    world = PKG / "config" / "worlds" / "two_humanoids.yaml"
    out, took = _run(tmp_path, "--world", str(world), "--real-time-factor", "0",
                     "--duration", "2", timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    for name in ("alice", "bob"):
        assert f"[{name}.wb_sim_pd_controller]: holding the initial posture" in out.stdout
        m = re.search(rf"wb_sim_run: robot '{name}': verdict: stands: base height first "
                      rf"(?P<z0>[\d.]+) m, lowest (?P<lo>[\d.]+) m", out.stdout)
        assert m, out.stdout[-3000:]
        assert float(m["z0"]) - float(m["lo"]) < 0.005, m.group(0)
    assert "robot 'alice' base at (-0.50" in out.stdout and "robot 'bob' base at (0.50" \
        in out.stdout


def test_run_stops_at_the_duration_and_the_users_config_wins(tmp_path):
    # the user's YAML sets what the launcher would otherwise default
    cfg = _yaml(tmp_path, "mine.yaml", "    real_time_factor: 0.0\n    sync:\n      mode: lockstep\n"
                                       "    publish:\n      stats_period_s: 0.5\n")
    out, took = _run(tmp_path, "--config", str(cfg), "--duration", "1.5")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "lockstep: one step per answer to each joint state (stamps matched), as fast as " \
           "possible" in out.stdout, out.stdout[:3000]
    assert "stop_after_s = 1.5 s of simulated time reached" in out.stdout
    assert "stopped at t = 1.500 s" in out.stdout
    assert "wb_sim_run: 1.5 s simulated" in out.stdout


def test_run_of_a_fixed_base_arm_holds(tmp_path):
    """The panda under the example controller: the verdict of a fixed base is its joint
    drift (and its saturation), with the run's real-time factor."""
    require_robot_data("panda")
    out, took = _run(tmp_path, "--robot", "panda", "--duration", "2")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    m = re.search(r"wb_sim_run: verdict: holds: largest joint deviation from the initial "
                  r"posture (?P<dev>[\d.]+) rad \((?P<joint>\w+)\); efforts at limits in "
                  r"(?P<share>[\d.]+) % of (?P<steps>\d+) steps, (?P<flips>\d+) sign flips "
                  r"between limits \([\d.]+ per s\); real-time factor (?P<rtf>[\d.]+)$",
                  out.stdout, re.M)
    assert m, out.stdout[-3000:]
    assert float(m["dev"]) < 0.05 and m["joint"].startswith("panda_")
    assert int(m["steps"]) == 2000 and float(m["share"]) == 0.0 and m["flips"] == "0"
    assert float(m["rtf"]) > 0
    assert "base height" not in out.stdout


# ----------------------------------------------------------------------------- the node


def _node(tmp_path, argv, wait_for: str, timeout: float = 60.0,
          env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run the node until ``wait_for`` is logged; ``env``: extra environment variables."""
    domain = fresh_domain_id()
    p = Proc("wb_sim", argv, domain, tmp_path, env={**ros_env(domain), **env} if env else None)
    try:
        p.wait_for_log(wait_for, timeout)
        if "cannot start" in wait_for:
            rc = p.popen.wait(10)
        else:
            rc = p.interrupt(10)
        return rc, p.log()
    finally:
        p.close()


#: rclpy's public API only: the given parameter names come from the command line, read again
PUBLIC_API = {"WB_SIM_RCLPY_PUBLIC_API": "1"}


@pytest.mark.parametrize("env", [None, PUBLIC_API], ids=["internals", "public_api"])
def test_node_refuses_an_unknown_parameter_with_did_you_mean(tmp_path, env):
    cfg = _yaml(tmp_path, "typo.yaml", "    contact:\n      stifness: 60000.0\n")
    argv = sim_node_argv() + ["--params-file", str(cfg)]
    rc, log = _node(tmp_path, argv, "cannot start", env=env)
    assert rc == 2, log
    assert "unknown parameter 'contact.stifness'; did you mean 'contact.stiffness'" in log, log


def test_node_refuses_an_unknown_dash_p_parameter_on_the_public_api(tmp_path):
    argv = sim_node_argv("contact.stifness:=6.0e4")
    rc, log = _node(tmp_path, argv, "cannot start", env=PUBLIC_API)
    assert rc == 2, log
    assert "unknown parameter 'contact.stifness'" in log, log


def test_node_reads_urdf_path_relative_to_its_yaml_and_1e6_floats(tmp_path):
    robot = tmp_path / "robots"
    robot.mkdir()
    (robot / "me.urdf").write_text((PKG / "urdf" / "humanoid.urdf").read_text())
    cfg = _yaml(tmp_path / "robots", "me.yaml", "    urdf_path: me.urdf\n"
                "    contact:\n      stiffness: 5.0e4\n")
    elsewhere = tmp_path / "elsewhere"  # the node's working directory: not the YAML's
    elsewhere.mkdir()
    argv = sim_node_argv() + ["--params-file", str(cfg)]
    p = Proc("wb_sim", argv, fresh_domain_id(), elsewhere)
    try:
        assert p.wait_for_log("simulating", 60), p.describe()
        assert p.interrupt(10) == 0, p.describe()
    finally:
        p.close()
    import wb_sim
    sim = wb_sim.Simulator.from_yaml(cfg)  # the Python API reads the same file alike
    assert sim.config.contact.stiffness == 5.0e4
    assert sim.config.urdf_path == str(robot / "me.urdf")


@pytest.mark.parametrize("env", [None, PUBLIC_API], ids=["internals", "public_api"])
def test_node_alone_simulates_the_default_humanoid(tmp_path, env):
    argv = [sys.executable, "-m", "wb_sim.ros.process"]
    rc, log = _node(tmp_path, argv, "simulating wb_humanoid", env=env)
    assert rc == 0, log
    assert "no robot given" in log and "simulating wb_humanoid (23 joints" in log, log


def test_reset_after_a_divergence_resumes_stepping(tmp_path):
    """A 0.5 mm penetration limit: the humanoid, left without torques, diverges on
    landing (1-2 mm of sink) and the node pauses; ~/reset brings it back and the
    clock runs on without ~/pause false (until it lands and diverges again)."""
    from rosgraph_msgs.msg import Clock

    from std_srvs.srv import Trigger

    from helpers.ros import RosClient, stamp_ns
    domain = fresh_domain_id()
    node = Proc("wb_sim", sim_node_argv("contact.max_penetration:=0.0005",
                                        "publish.stats_period_s:=0.0"), domain, tmp_path)
    ros = RosClient(domain)
    try:
        assert node.wait_for_log("simulation diverged and is paused", 60), node.describe()
        clock = ros.record(Clock, "/clock")
        res = ros.call(Trigger, "/wb_sim/reset", Trigger.Request())
        assert res.success and "the simulation resumes after the divergence" in res.message, \
            res.message
        t_reset = float(res.message.split("t = ")[1].split(" s")[0])
        assert ros.spin_until(
            lambda: sum(stamp_ns(m) > t_reset * 1e9 + 1e6 for m in clock.msgs) >= 5, 10), \
            f"no simulated time after the reset at {t_reset} s\n{node.describe()}"
        assert node.wait_for_log("simulation diverged and is paused", 10, count=2)
    finally:
        ros.close()
        node.close()


def test_no_contact_surfaces_warns_that_the_robot_will_fall(tmp_path):
    cfg = _yaml(tmp_path, "bare.yaml", f"    urdf_path: {PKG / 'urdf' / 'humanoid.urdf'}\n"
                                       "    contact_surfaces: []\n")
    rc, log = _node(tmp_path, sim_node_argv(params_file=cfg), "simulating wb_humanoid")
    assert rc == 0, log
    assert "no contact surfaces" in log and "will fall through the ground" in log, log
