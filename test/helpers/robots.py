"""The robots most tests start from, built the way users build them.

``make_humanoid(**overrides)`` builds the default humanoid (``config/humanoid.yaml``) with
dotted-key overrides; ``shipped_controller(sim, robot)`` is the PD + gravity-compensation
controller with the gains the robot's YAML ships for ``wb_sim_pd_controller`` (what
``wb_sim_run`` starts), holding the simulator's current posture. test/core/conftest.py
serves them as fixtures. ``crate_stand()``: the humanoid standing with a payload it was not
told of (a cached run).
"""

from __future__ import annotations

import functools
import math

import wb_sim
from wb_sim.config import read_yaml_params
from wb_sim.controllers import PDGravityController


def make_humanoid(**overrides) -> wb_sim.Simulator:
    return wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides=overrides or None)


def shipped_controller(sim: wb_sim.Simulator, robot: str = "humanoid") -> PDGravityController:
    gains = read_yaml_params(wb_sim.config_path(robot), node_name="wb_sim_pd_controller")
    return PDGravityController(sim.robot, sim.state.joint_positions, gains["kp"], gains["kd"],
                               gravity=sim.config.gravity)


CRATE = 5.0  # kg on the torso, not in the controller's model


@functools.lru_cache(maxsize=None)
def crate_stand() -> dict:
    """The humanoid with a CRATE kg payload on its torso, 5 s under the shipped controller
    built for the bare robot (test/core/test_payloads.py asserts on it, docs/physics.md quotes
    it): ``mass``, ``bare_mass`` (kg), ``drop`` (the base's start - end height, m),
    ``tilt_deg``, ``carried`` (the feet's mean vertical force over the last 0.5 s / (mass g),
    - 1). Cached per process (deterministic)."""
    sim = make_humanoid(**{"payloads.names": ["crate"], "payloads.links": ["torso"],
                           "payloads.mass": [CRATE], "payloads.com": [0.05, 0.0, 0.15],
                           "payloads.inertia": [0.05, 0.0, 0.0, 0.04, 0.0, 0.03]})
    bare = make_humanoid()
    ctrl = shipped_controller(bare)  # its model does not know the crate
    z0 = sim.state.base_position[2]
    fz = []
    for k in range(5000):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        if k >= 4500:
            fz.append(sim.contact_wrench_array()[:, 2].sum())
    st = sim.state
    tilt = math.degrees(math.acos(min(1.0, st.base_pose.rotation[2, 2])))
    return {"mass": sim.mass, "bare_mass": bare.mass, "drop": float(z0 - st.base_position[2]),
            "tilt_deg": tilt, "carried": float(sum(fz) / len(fz) / (sim.mass * 9.81) - 1.0)}
