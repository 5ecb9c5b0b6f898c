"""The headless demo's printed figures (python -m wb_sim / wb_sim_demo) say what they
claim: the vertical force is the world's z, whatever the surface frames' tilt. A world of two
humanoids runs one controller per robot headless: each robot's trajectory is that of its own
single simulator under the same controller, one verdict per robot, exit 1 when one falls."""

from __future__ import annotations

import re

import pytest

from wb_sim.tools import demo

URDF = """<robot name="tilted_feet">
  <link name="base"><inertial><mass value="2.0"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="sole"/>
  <joint name="sole_joint" type="fixed"><parent link="base"/><child link="sole"/>
    <origin xyz="0 0 -0.05" rpy="1.5707963267948966 0 0"/></joint>
</robot>
"""

# the sole frame is turned 90 deg about x: its y axis is the world's z, its z the world's -y;
# the four points lie at the world corners (+-0.05, +-0.05) below the base
YAML = """wb_sim:
  ros__parameters:
    urdf_path: tilted.urdf
    floating_base: true
    contact_surfaces: [sole]
    sole:
      frame: sole
      shape: points
      points: [0.05, 0.0, 0.05, -0.05, 0.0, 0.05, 0.05, 0.0, -0.05, -0.05, 0.0, -0.05]
    initial:
      base_position: [0.0, 0.0, 0.0505]
wb_sim_pd_controller:
  ros__parameters:
    kp: 100.0
    kd: 5.0
"""


def test_the_demo_prints_the_world_vertical_force_over_the_weight(tmp_path, capsys):
    (tmp_path / "tilted.urdf").write_text(URDF)
    (tmp_path / "tilted.yaml").write_text(YAML)
    assert demo.main(["--robot", str(tmp_path / "tilted.yaml"), "--duration", "1.0"]) == 0
    out = capsys.readouterr().out
    ratio = float(re.search(r"vertical contact force \(world z\) / weight: ([-\d.]+)", out)[1])
    # at rest on its four points: the ground carries the weight (the surface frame's own z
    # component of that force is 0: what the demo printed before)
    assert ratio == pytest.approx(1.0, abs=0.01)


def test_ctrl_c_stops_the_demo_cleanly_with_exit_130(tmp_path):
    """Ctrl-C (SIGINT) during ``python -m wb_sim``: a one-line message, exit 130 (128 +
    SIGINT, as shells report it), the recording so far saved, no traceback."""
    import os
    import signal
    import subprocess
    import sys
    import time

    npz = tmp_path / "run.npz"
    proc = subprocess.Popen([sys.executable, "-m", "wb_sim", "--duration", "600", "--record",
                             str(npz)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout.readline().startswith("wb_sim: ")  # printed as the steps begin
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted at t = " in err
    assert npz.is_file()


def test_robot_and_config_mean_what_they_mean_in_wb_sim_run(tmp_path, capsys):
    """One vocabulary (issue 28): ``--robot`` a ready name or your robot's file, ``--config``
    a file whose keys win over the robot's (it was a replacement here, an overlay in
    wb_sim_run)."""
    (tmp_path / "tilted.urdf").write_text(URDF)
    (tmp_path / "tilted.yaml").write_text(YAML)
    overlay = tmp_path / "rigid.yaml"
    overlay.write_text("wb_sim:\n  ros__parameters:\n    contact:\n      model: rigid\n")
    assert demo.main(["--robot", str(tmp_path / "tilted.yaml"), "--config", str(overlay),
                      "--duration", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "tilted_feet, 0 joints" in out and "contact 'rigid'" in out
    assert demo.main(["--robot", "no_such_robot", "--duration", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "no configuration for robot 'no_such_robot'" in err and "--robot my_robot.yaml" in err


WORLD = """world:
  objects:
    - {name: ball, shape: sphere, size: [0.1], mass: 1.0, pose: {position: [1.0, 0.0, 0.1]}}
  robots:
    - name: tilted
      urdf: tilted.urdf
      controller: none
      initial: {base_position: [0.0, 0.0, 0.0505]}
      parameters:
        contact_surfaces: [sole]
        sole:
          frame: sole
          shape: points
          points: [0.05, 0.0, 0.05, -0.05, 0.0, 0.05, 0.05, 0.0, -0.05, -0.05, 0.0, -0.05]
"""


def test_the_demo_runs_a_world_file(tmp_path, capsys):
    """python -m wb_sim --world FILE: the world's robot (its URDF beside the world file), its
    object and its controller ('none': no torques); --robot beside it is refused."""
    (tmp_path / "tilted.urdf").write_text(URDF)
    (tmp_path / "w.yaml").write_text(WORLD)
    assert demo.main(["--world", str(tmp_path / "w.yaml"), "--duration", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "tilted" in out and "result: stands" in out, out
    ratio = float(re.search(r"vertical contact force \(world z\) / weight: ([-\d.]+)", out)[1])
    assert ratio == pytest.approx(1.0, abs=0.01)  # the ball's weight is not the robot's
    assert demo.main(["--world", str(tmp_path / "w.yaml"), "--robot", "humanoid"]) == 2
    assert "leave --robot out" in capsys.readouterr().err


def test_two_humanoids_headless_one_controller_each(tmp_path, capsys):
    """config/worlds/two_humanoids.yaml headless: each robot's 'pd' built on its own model
    reading its own slices (wb_sim.world.controller_loops). Apart (1 m), the two are
    independent systems: 5 s of the pair equal each humanoid alone under its own
    ControllerLoop (measured 2.0e-15, asserted 1e-12), both bases within 5 mm of the start
    height (0.6938 m at 5 s). The demo prints one verdict per robot; bob without a controller
    falls: exit 1."""
    import numpy as np

    from helpers import PKG
    from wb_sim import Simulator
    from wb_sim.control import ControllerLoop
    from wb_sim.world import PD_FACTORY, controller_loops, load_world_robots

    world = PKG / "config" / "worlds" / "two_humanoids.yaml"
    robots = load_world_robots(world)
    sim = Simulator.from_robots([(info.name, p) for p, info in robots])
    loop = controller_loops(sim, [info for _, info in robots])
    alone = [Simulator.from_params(p) for p, _ in robots]
    loops = [ControllerLoop(s, PD_FACTORY, dict(info.controller_params))
             for s, (_, info) in zip(alone, robots)]
    z0 = [s.q[2] for s in alone]
    err = 0.0
    for _ in range(5000):
        sim.step(loop.torques())
        for s, lp in zip(alone, loops):
            s.step(lp.torques())
        for s, part in zip(alone, sim.robots):
            err = max(err, float(np.abs(sim.q[part.q_slice] - s.q).max()))
    assert err < 1e-12
    for s, part, z in zip(alone, sim.robots, z0):
        assert abs(sim.q[part.q_slice][2] - z) < 0.005
    assert sim.t == pytest.approx(5.0)

    assert demo.main(["--world", str(world), "--duration", "2"]) == 0
    out = capsys.readouterr().out
    for name in ("alice", "bob"):
        line = re.search(rf"robot '{name}': base at \(([-\d.]+), ([-\d.]+), ([-\d.]+)\) m; "
                         rf"result: (\w+)", out)
        assert line and line[4] == "stands", out
        assert float(line[3]) == pytest.approx(0.6969, abs=0.005)
    head, sep, tail = world.read_text().rpartition("controller: pd")  # bob's, the last
    assert sep
    path = tmp_path / "bob_limp.yaml"
    path.write_text(head + "controller: none" + tail)
    assert demo.main(["--world", str(path), "--duration", "2"]) == 1
    out = capsys.readouterr().out
    assert re.search(r"robot 'alice': .*result: stands", out), out
    assert re.search(r"robot 'bob': .*result: DID NOT STAND: the base dropped", out), out
    assert demo.main(["--world", str(world), "--record", str(tmp_path / "r.npz")]) == 2
    assert "take one robot" in capsys.readouterr().err
