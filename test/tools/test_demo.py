"""The headless demo's printed figures (python -m wb_sim / wb_sim_demo) say what they
claim: the vertical force is the world's z, whatever the surface frames' tilt."""

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
