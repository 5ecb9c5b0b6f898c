"""World files (wb_sim/world.py, docs/world.md): one YAML of ground, terrain, contact, free
objects and one robot, read into the simulator's existing parameters.

Checked against numbers: the two shipped worlds run 2 s under their controller without a
non-finite value; in humanoid_box the 5 kg box sent at 2.5 m/s along the floor is stopped by
the robot's legs (it rebounds, ends at rest 0.17 m short of where friction alone, mu g,
would have stopped it, and the robot's base is pushed back 5 mm further than without it) while the robot stands; in
objects_playground the stack, the pedestal on the terrain step and the ball on it stay
where they were put (to the compliant sink); a world file and the same configuration as a
parameter file (and as the parameter file the ROS tools get) give the same trajectory bit
for bit over 1 s; the refusals name the key path and the fix.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import wb_sim
from wb_sim.config import read_yaml_params
from wb_sim.control import ControllerLoop
from wb_sim.errors import ConfigError
from wb_sim.paths import config_path, share_dir
from wb_sim.world import controller_loop, load_world, write_params_file

from helpers.worlds import WORLDS, humanoid_box, playground
from helpers.worlds import run as _run


def test_humanoid_box_world_box_is_stopped_by_the_standing_robot():
    got = humanoid_box()
    assert np.isfinite(got["qs"]).all()
    info = got["info"]
    assert info.name == "humanoid" and info.controller == "pd"
    assert dict(info.controller_params) == {"kp": 1000.0, "kd": 20.0}  # the robot file's
    assert (got["x0"], got["v0"], got["mu"]) == (0.45, -2.5, 1.0)
    # friction alone (mu g, test_objects checks it to 1 %) would stop the box with its rear
    # face (x - 0.15) at -0.02 m, inside the feet (toes at x = 0.11 m)
    assert got["x_friction"] == pytest.approx(0.1314, abs=1e-3)
    assert got["vx"].max() > 0.1, "the box never rebounded off the robot"
    assert abs(got["vx"][-1]) < 1e-3, got["vx"][-1]  # at rest at the end
    assert got["x"][-1] > got["x_friction"] + 0.15, (got["x"][-1], got["x_friction"])
    # the impact pushed the robot back: against the same robot without the box (it settles
    # 5.8 mm back on its own), 5.1 mm more at t = 0.36 s
    assert got["x_alone"].min() > -0.007
    assert got["pushed"] < -0.004
    assert got["base_z"].min() > 0.5  # and it stands
    assert got["base_z"][-1] > 0.68


def test_objects_playground_world_stays_put_and_the_robot_stands():
    got = playground()
    assert got["has_terrain"]
    start, end = got["start"], got["end"]
    assert set(start) == {"stack_0", "stack_1", "stack_2", "pedestal", "ball"}
    assert np.isfinite(got["qs"]).all()
    assert got["qs"][:, 2].min() > 0.5
    for name in start:
        assert np.linalg.norm(end[name][:2] - start[name][:2]) < 2e-3, name
        # each rests on what is below it: it sank by the compliant contacts under it only
        assert -3e-3 < end[name][2] - start[name][2] <= 1e-4, (name, end[name], start[name])
        assert got["speed"][name] < 1e-3, name
    # the pedestal stands on the terrain's 0.1 m step, the ball on the pedestal
    assert end["pedestal"][2] == pytest.approx(0.1 + 0.1, abs=3e-3)
    assert end["ball"][2] - end["pedestal"][2] == pytest.approx(0.1 + 0.08, abs=3e-3)


#: humanoid_box.yaml written as a parameter file over config/humanoid.yaml
BOX_PARAMS = """
wb_sim:
  ros__parameters:
    ground: {height: 0.0, normal: [0.0, 0.0, 1.0]}
    contact: {model: compliant, friction_coefficient: 1.0}
    initial: {base_position: [0.0, 0.0, 0.696882], base_rpy: [0.0, 0.0, 0.0]}
    objects:
      names: [box]
      shapes: [box]
      sizes: [0.3, 0.3, 0.3]
      mass: [5.0]
      positions: [0.45, 0.0, 0.15]
      rpy: [0.0, 0.0, 0.0]
      linear_velocities: [-2.5, 0.0, 0.0]
"""


def test_a_world_file_equals_the_same_parameter_file_bit_for_bit(tmp_path):
    overlay = tmp_path / "box.yaml"
    overlay.write_text(BOX_PARAMS)
    ref = wb_sim.Simulator.from_yaml(config_path("humanoid"), read_yaml_params(overlay))
    q_ref = _run(ref, ControllerLoop(ref, "wb_sim.controllers:pd_gravity",
                                     {"kp": 1000.0, "kd": 20.0}), 1.0)
    sim = wb_sim.Simulator.from_world(WORLDS / "humanoid_box.yaml")
    info = load_world(WORLDS / "humanoid_box.yaml")[1]
    q_world = _run(sim, controller_loop(sim, info), 1.0)
    assert np.array_equal(q_world, q_ref)
    # the parameter file wb_sim_run --world and world:= hand to the node
    params, info = load_world(WORLDS / "humanoid_box.yaml")
    out = write_params_file(params, info, tmp_path / "node.yaml")
    node = wb_sim.Simulator.from_yaml(out)
    gains = read_yaml_params(out, node_name="wb_sim_pd_controller")
    q_node = _run(node, ControllerLoop(node, "wb_sim.controllers:pd_gravity", gains), 1.0)
    assert np.array_equal(q_node, q_ref)
    # the box met the robot within that second (a trajectory that did not test contact
    # would compare nothing of it)
    assert q_ref[:, 0].min() < -0.005


ROBOT = "    - {name: humanoid, robot: humanoid}\n"


@pytest.mark.parametrize("body, says", [
    ("  robots:\n" + ROBOT + ROBOT,
     "'world.robots' lists 2 robots; this reads one (load_world, the headless demo): read "
     "them all with wb_sim.world.load_world_robots"),
    ("  objets: []\n  robots:\n" + ROBOT, "unknown key 'world.objets'; did you mean 'objects'"),
    ("  contact: {stifness: 1.0}\n  robots:\n" + ROBOT,
     "unknown key 'world.contact.stifness'; did you mean 'stiffness'"),
    ("  robots:\n    - {name: humanoid, robot: humanoid, controler: pd}\n",
     "unknown key 'world.robots[0].controler'; did you mean 'controller'"),
    ("  robots:\n    - {name: humanoid}\n",
     "'world.robots[0]' needs exactly one of 'urdf'"),
    ("  robots:\n    - {name: humanoid, urdf: nowhere/robot.urdf}\n",
     "'world.robots[0].urdf': no file"),
    ("  robots:\n    - {name: humanoid, robot: nobody}\n",
     "'world.robots[0].robot': no configuration for robot 'nobody'"),
    ("  robots: []\n", "'world.robots' must list one robot"),
    ("  objects:\n    - {name: b, shape: box, size: [0.3, 0.3, 0.3], mass: -1.0, "
     "pose: {position: [1.0, 0.0, 0.15]}}\n  robots:\n" + ROBOT,
     "'world.objects[0]': object 'b' has mass -1 kg; a free object's mass must be > 0"),
    ("  objects:\n    - {name: b, shape: boxx, size: [0.3, 0.3, 0.3], mass: 1.0, "
     "pose: {position: [1.0, 0.0, 0.15]}}\n  robots:\n" + ROBOT,
     "unknown shape 'boxx'; did you mean 'box'"),
    ("  objects:\n    - {name: b, shape: box, size: [0.3, 0.3, 0.3], mass: 1.0}\n"
     "  robots:\n" + ROBOT, "'world.objects[0].pose' has no 'position'"),
    ("  objects:\n    - {name: b, shape: box, size: [0.3, 0.3, 0.3], mass: 1.0, urdf: b.urdf, "
     "pose: {position: [1.0, 0.0, 0.15]}}\n  robots:\n" + ROBOT,
     "'world.objects[0].urdf' is for shape urdf only (got shape 'box')"),
    ("  objects:\n    - {name: u, shape: urdf, pose: {position: [1.0, 0.0, 0.5]}}\n"
     "  robots:\n" + ROBOT, "'world.objects[0]' has no 'urdf'"),
    ("  objects:\n    - {name: b, shape: box, size: [0.3, 0.3], mass: 1.0, "
     "pose: {position: [1.0, 0.0, 0.15]}}\n  robots:\n" + ROBOT,
     "a box's size is x, y, z edge lengths (m): the first 3 must be > 0"),
    ("  robots:\n    - {name: humanoid, robot: humanoid, parameters: {contact: {model: rigid}}}\n",
     "'world.robots[0].parameters.contact.model' belongs to the world"),
    ("  robots:\n    - {name: humanoid, robot: humanoid, parameters: {imu: {fram: x}}}\n",
     "unknown parameter 'imu.fram'; did you mean 'imu.frame'"),
    ("  robots:\n    - {name: humanoid, robot: humanoid, controller: none, "
     "controller_params: {kp: 1.0}}\n", "the controller is 'none'"),
    (f"  robots:\n    - {{name: r, urdf: '{share_dir() / 'urdf' / 'humanoid.urdf'}'}}\n",
     "'world.robots[0].controller' 'pd' needs the gains kp (N*m/rad) and kd"),
    ("  robots:\n    - {name: humanoid, robot: humanoid, initial: {base_position: [0.0]}}\n",
     "(set at 'world.robots[0].initial.base_position')"),
    ("  ground: {normal: [0.0, 0.0, 0.0]}\n  robots:\n" + ROBOT, "(set at 'world.ground.normal')"),
    ("  robots:\n    - {name: humanoid, robot: humanoid, controller: pdd}\n",
     "'world.robots[0].controller' must be 'pd'"),
])
def test_world_refusals_name_the_key_path_and_the_fix(tmp_path, body, says):
    path = tmp_path / "world.yaml"
    path.write_text("world:\n" + body)
    with pytest.raises(ConfigError) as e:
        load_world(path)
    assert says in str(e.value), str(e.value)
    assert str(path) in str(e.value)


def test_relative_paths_resolve_beside_the_world_file(tmp_path):
    (tmp_path / "robots").mkdir()
    shutil.copy(share_dir() / "urdf" / "humanoid.urdf", tmp_path / "robots" / "r.urdf")
    path = tmp_path / "worlds" / "w.yaml"
    path.parent.mkdir()
    path.write_text("world:\n  robots:\n    - name: r\n      urdf: ../robots/r.urdf\n"
                    "      controller: none\n"
                    "      parameters: {collision: {srdf_path: ../robots/r.srdf}}\n")
    params, info = load_world(path)
    assert params["urdf_path"] == str(tmp_path / "robots" / "r.urdf")
    assert params["collision.srdf_path"] == str(tmp_path / "robots" / "r.srdf")
    assert info.controller == "none" and info.robot_file is None
    assert controller_loop(wb_sim.Simulator.from_params(params), info) is None
