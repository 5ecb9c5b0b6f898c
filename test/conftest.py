"""Shared fixtures: the robots most tests start from, built the way users build them.

``humanoid`` is a fresh default humanoid (``config/humanoid.yaml``) per test;
``make_humanoid(**overrides)`` builds one with dotted-key overrides;
``shipped_controller(sim, robot)`` is the PD + gravity-compensation controller
with the gains the robot's YAML ships for ``wb_sim_pd_controller`` (what
``wb_sim_run`` starts), holding the simulator's current posture.
"""

from __future__ import annotations

import pytest

import wb_sim
from wb_sim.config import read_yaml_params
from wb_sim.controllers import PDGravityController


def make_humanoid(**overrides) -> wb_sim.Simulator:
    return wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides=overrides or None)


def shipped_controller(sim: wb_sim.Simulator, robot: str = "humanoid") -> PDGravityController:
    gains = read_yaml_params(wb_sim.config_path(robot), node_name="wb_sim_pd_controller")
    return PDGravityController(sim.robot, sim.state.joint_positions, gains["kp"], gains["kd"],
                               gravity=sim.config.gravity)


@pytest.fixture
def humanoid() -> wb_sim.Simulator:
    return make_humanoid()


@pytest.fixture(name="make_humanoid")
def _make_humanoid_fixture():
    return make_humanoid


@pytest.fixture(name="shipped_controller")
def _shipped_controller_fixture():
    return shipped_controller
