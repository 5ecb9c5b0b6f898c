"""The launch file and RViz config: checked by reading them here (launch and rviz2
are not on PyPI), and by running generate_launch_description where launch_ros exists."""

import ast
import importlib.util
from pathlib import Path

import pytest
import yaml

import wb_sim

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "launch" / "sim.launch.py"
RVIZ = ROOT / "rviz" / "wb_sim.rviz"


def _declared_arguments():
    tree = ast.parse(LAUNCH.read_text())
    args = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "DeclareLaunchArgument":
            name = node.args[0].value
            kw = {k.arg: k.value for k in node.keywords}
            args[name] = (kw["default_value"].value, kw.get("description"))
    return args, tree


def test_launch_arguments_are_declared_with_defaults_and_descriptions():
    args, _ = _declared_arguments()
    assert set(args) == {"robot", "config", "controller", "rviz", "use_sim_time", "sync",
                         "viewer"}
    assert args["sync"][0] == "realtime"
    assert args["viewer"][0] == "none"
    assert args["robot"][0] == "humanoid"
    assert args["controller"][0] == "pd"
    assert args["rviz"][0] == "false"
    assert all(desc is not None for _, desc in args.values())


def test_launch_robots_have_configs_and_nodes_match_entry_points():
    _, tree = _declared_arguments()
    robots = next(ast.literal_eval(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                  and getattr(n.targets[0], "id", "") == "ROBOTS")
    for r in robots:
        assert wb_sim.config_path(r).is_file()
    executables = {kw.value.value for n in ast.walk(tree) if isinstance(n, ast.Call)
                   for kw in n.keywords if kw.arg == "executable"}
    setup = (ROOT / "setup.py").read_text()
    for exe in executables - {"rviz2"}:
        assert f'"{exe} = ' in setup, exe
    assert "wb_sim.rviz" in LAUNCH.read_text()


def test_rviz_config_shows_model_tf_and_a_wrench_per_default_surface():
    cfg = yaml.safe_load(RVIZ.read_text())
    vm = cfg["Visualization Manager"]
    assert vm["Global Options"]["Fixed Frame"] == "world"
    displays = {d["Class"]: d for d in vm["Displays"]}
    model = displays["rviz_default_plugins/RobotModel"]
    assert model["Description Source"] == "Topic"
    assert model["Description Topic"]["Value"] == "/robot_description"
    assert model["Description Topic"]["Durability Policy"] == "Transient Local"
    assert "rviz_default_plugins/TF" in displays
    wrench_topics = {d["Topic"]["Value"] for d in vm["Displays"]
                     if d["Class"] == "rviz_default_plugins/Wrench"}
    sim = wb_sim.config.read_yaml_params(wb_sim.default_config_path())
    assert wrench_topics == {f"/contact_wrench/{s}" for s in sim["contact_surfaces"]}


@pytest.mark.skipif(importlib.util.find_spec("launch_ros") is None,
                    reason="launch_ros is not on PyPI; runs in a ROS install")
def test_generate_launch_description():  # pragma: no cover - ROS installs only
    spec = importlib.util.spec_from_file_location("sim_launch", LAUNCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ld = mod.generate_launch_description()
    names = {a.name for a in ld.entities if hasattr(a, "name") and hasattr(a, "default_value")}
    assert {"robot", "config", "controller", "rviz", "use_sim_time"} <= names
