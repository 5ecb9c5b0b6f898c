"""The robots most tests start from, built the way users build them.

``make_humanoid(**overrides)`` builds the default humanoid (``config/humanoid.yaml``) with
dotted-key overrides; ``shipped_controller(sim, robot)`` is the PD + gravity-compensation
controller with the gains the robot's YAML ships for ``wb_sim_pd_controller`` (what
``wb_sim_run`` starts), holding the simulator's current posture. test/core/conftest.py
serves them as fixtures.
"""

from __future__ import annotations

import wb_sim
from wb_sim.config import read_yaml_params
from wb_sim.controllers import PDGravityController


def make_humanoid(**overrides) -> wb_sim.Simulator:
    return wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides=overrides or None)


def shipped_controller(sim: wb_sim.Simulator, robot: str = "humanoid") -> PDGravityController:
    gains = read_yaml_params(wb_sim.config_path(robot), node_name="wb_sim_pd_controller")
    return PDGravityController(sim.robot, sim.state.joint_positions, gains["kp"], gains["kd"],
                               gravity=sim.config.gravity)
