"""The RViz configuration of a world of several robots (wb_sim/ros/rviz_config.py), generated
by ``sim.launch.py world:= rviz:=true`` from the shipped ``rviz/wb_sim.rviz``: for
``config/worlds/two_humanoids.yaml`` it parses as YAML and has exactly one RobotModel display
per robot, with TF prefix ``<name>`` and description topic ``/<name>/robot_description``, one
Wrench display per contact surface of each robot on ``/<name>/contact_wrench/<surface>``, and
the template's other displays unchanged. No RViz (nor rclpy) needed."""

from __future__ import annotations

import pytest
import yaml

from helpers import PKG
from wb_sim.errors import ConfigError
from wb_sim.ros.rviz_config import ROBOT_MODEL, WRENCH, fleet_rviz_config
from wb_sim.world import load_world_robots

TEMPLATE = PKG / "rviz" / "wb_sim.rviz"


def test_one_robot_model_per_robot_of_the_two_humanoids(tmp_path):
    robots = load_world_robots(PKG / "config" / "worlds" / "two_humanoids.yaml")
    fleet = [(info.name, list(p["contact_surfaces"])) for p, info in robots]
    out = fleet_rviz_config(TEMPLATE, fleet, tmp_path / "logs" / "wb_sim_world.rviz")
    assert out == tmp_path / "logs" / "wb_sim_world.rviz"
    config = yaml.safe_load(out.read_text())
    displays = config["Visualization Manager"]["Displays"]
    models = [d for d in displays if d["Class"] == ROBOT_MODEL]
    assert [(m["TF Prefix"], m["Description Topic"]["Value"], m["Name"]) for m in models] == [
        ("alice", "/alice/robot_description", "alice RobotModel"),
        ("bob", "/bob/robot_description", "bob RobotModel")]
    # the template's QoS kept (a latched description needs Transient Local)
    assert all(m["Description Topic"]["Durability Policy"] == "Transient Local" for m in models)
    assert all(m["Description Source"] == "Topic" and m["Enabled"] for m in models)
    wrenches = [d["Topic"]["Value"] for d in displays if d["Class"] == WRENCH]
    assert wrenches == ["/alice/contact_wrench/left_foot", "/alice/contact_wrench/right_foot",
                        "/bob/contact_wrench/left_foot", "/bob/contact_wrench/right_foot"]
    # every other display and the global options as shipped
    shipped = yaml.safe_load(TEMPLATE.read_text())
    others = [d for d in shipped["Visualization Manager"]["Displays"]
              if d["Class"] not in (ROBOT_MODEL, WRENCH)]
    assert [d for d in displays if d["Class"] not in (ROBOT_MODEL, WRENCH)] == others
    assert len(others) >= 3  # grid, TF, terrain, ...: a test that compares something
    assert config["Visualization Manager"]["Global Options"] == \
        shipped["Visualization Manager"]["Global Options"]
    assert config["Visualization Manager"]["Global Options"]["Fixed Frame"] == "world"


def test_a_template_without_a_robot_model_is_refused(tmp_path):
    bad = tmp_path / "bad.rviz"
    bad.write_text("Visualization Manager:\n  Displays:\n    - Class: rviz_default_plugins/Grid\n"
                   "      Name: Grid\n")
    with pytest.raises(ConfigError, match="has no rviz_default_plugins/RobotModel display"):
        fleet_rviz_config(bad, [("a", [])], tmp_path / "out.rviz")
    bad.write_text("Panels: []\n")
    with pytest.raises(ConfigError, match="no 'Visualization Manager: Displays:' list"):
        fleet_rviz_config(bad, [("a", [])], tmp_path / "out.rviz")
