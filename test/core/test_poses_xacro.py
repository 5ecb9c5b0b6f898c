"""Named poses (initial state and reset target) and .xacro robot descriptions."""

from __future__ import annotations

import numpy as np
import pytest

import wb_sim
from wb_sim.config import read_yaml_params
from wb_sim.errors import CommandError, ConfigError, ModelError

CROUCH = {"poses": ["crouch", "lean"],
          "poses.crouch.joint_names": ["l_knee", "r_knee", "l_hip_pitch", "r_hip_pitch"],
          "poses.crouch.joint_positions": [0.6, 0.6, -0.3, -0.3],
          "poses.crouch.base_position": [0.0, 0.0, 0.736],
          "poses.lean.joint_names": [],
          "poses.lean.joint_positions": [],
          "poses.lean.base_rpy": [0.0, 0.1, 0.0]}


def _humanoid(**extra):
    p = read_yaml_params(wb_sim.config_path("humanoid"))
    return wb_sim.Simulator.from_params({**p, **CROUCH, **extra})


def test_a_named_pose_is_a_start_and_a_reset_target():
    sim = _humanoid()
    crouch = sim.named_poses["crouch"]
    names = list(sim.joint_names)
    assert crouch[7 + names.index("l_knee")] == 0.6 and crouch[2] == 0.736
    np.testing.assert_array_equal(sim.q, sim.q0)  # initial.* unless initial.pose
    # a pose without base fields keeps initial.base_position; base_rpy 0.1 rad pitch
    lean = sim.named_poses["lean"]
    np.testing.assert_array_equal(lean[:3], sim.q0[:3])
    assert lean[4] == pytest.approx(np.sin(0.05))  # quaternion y of a 0.1 rad pitch
    for _ in range(50):
        sim.step(np.zeros(sim.nj))
    sim.reset(pose="crouch")
    assert sim.t == 0.0
    np.testing.assert_array_equal(sim.q, crouch)
    assert not sim.v.any()
    sim.reset()
    np.testing.assert_array_equal(sim.q, sim.q0)
    started = _humanoid(**{"initial.pose": "crouch"})
    np.testing.assert_array_equal(started.q, crouch)
    with pytest.raises(CommandError, match="no named pose 'squat'.*crouch, lean"):
        sim.reset(pose="squat")


@pytest.mark.parametrize("extra, error, fragment", [
    ({"initial.pose": "squat"}, ConfigError, "'initial.pose': no pose 'squat'"),
    ({"poses.crouch.joint_names": ["l_knee", "l_kne"],
      "poses.crouch.joint_positions": [0.1, 0.2]}, ModelError, "poses.crouch.joint_names"),
    ({"poses.crouch.joint_positions": [0.6]}, ConfigError, "poses.crouch.joint_positions"),
    ({"poses.crouch.base_position": [0.0, 0.66]}, ConfigError, "needs 3 numbers"),
    ({"poses.crouch.join_names": ["l_knee"]}, ConfigError, "did you mean"),
    ({"poses": ["a.b"]}, ConfigError, "invalid pose name"),
])
def test_bad_poses_are_refused_naming_the_key(extra, error, fragment):
    with pytest.raises(error, match=fragment.replace("(", r"\(")):
        _humanoid(**extra)


XACRO = """<?xml version="1.0"?>
<robot name="bar" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:arg name="mass" default="1.0"/>
  <xacro:arg name="links" default="2"/>
  <xacro:property name="m" value="$(arg mass)"/>
  <xacro:macro name="segment" params="name parent">
    <joint name="${name}_joint" type="revolute">
      <parent link="${parent}"/><child link="${name}"/>
      <origin xyz="0 0 0.5"/><axis xyz="0 1 0"/>
      <limit lower="-3" upper="3" effort="100" velocity="10"/>
    </joint>
    <link name="${name}">
      <inertial><origin xyz="0 0 0.25"/><mass value="${m}"/>
        <inertia ixx="0.01" iyy="0.01" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
    </link>
  </xacro:macro>
  <link name="base"/>
  <xacro:segment name="upper" parent="base"/>
  <xacro:segment name="lower" parent="upper"/>
</robot>
"""


def _arm(tmp_path, **extra):
    from helpers.extras import require_modules
    require_modules("xacro", why="pip install xacro (the test extra)")  # CI: a failure
    path = tmp_path / "bar.urdf.xacro"
    path.write_text(XACRO)
    return wb_sim.Simulator.from_params({"urdf_path": str(path), "floating_base": False,
                                         **extra})


def test_a_xacro_robot_is_expanded_with_its_arguments(tmp_path):
    default = _arm(tmp_path)
    heavy = _arm(tmp_path, **{"xacro.args": ["mass:=2.5"]})
    assert default.joint_names == ("upper_joint", "lower_joint")
    assert default.mass == pytest.approx(2.0)
    assert heavy.mass == pytest.approx(5.0)
    assert "xacro" not in heavy.robot.urdf_xml.split("?>", 1)[-1].split("-->")[-1]


def test_bad_xacro_input_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="not of the form 'name:=value'"):
        _arm(tmp_path, **{"xacro.args": ["mass=2"]})
    broken = tmp_path / "broken.urdf.xacro"
    broken.write_text(XACRO.replace('value="${m}"', 'value="${undefined_thing}"'))
    with pytest.raises(ModelError, match="cannot expand xacro file .*broken.urdf.xacro"):
        wb_sim.Simulator.from_params({"urdf_path": str(broken), "floating_base": False})


def test_xacro_args_need_a_xacro_file():
    p = read_yaml_params(wb_sim.config_path("humanoid"))
    with pytest.raises(ConfigError, match="not a .xacro"):
        wb_sim.Simulator.from_params({**p, "xacro.args": ["a:=1"]})
