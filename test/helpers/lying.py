"""The humanoid lying face down, against MuJoCo (test/core/contact/test_mujoco_lying.py
asserts on it, docs/physics.md's table quotes it through test/helpers/docs_rows.py): the
shipped humanoid with whole-body collision, limp, dropped face down from 2 cm above the ground
at the shipped initial joint pose, settled SECONDS at 1 kHz, and its MuJoCo twin
(helpers/mujoco_twin.py) settled from the same state. Importing this module needs MuJoCo
(call helpers.extras.require_mujoco() first). The rests are cached per process (they are
deterministic and only read)."""

from __future__ import annotations

import functools
import math

import mujoco
import numpy as np
import pinocchio as pin

import wb_sim
from helpers.mujoco_twin import (base_rotation, joint_positions, link_positions, set_twin_state,
                                 twin_model)

SECONDS = 3.0
#: face down (pitch +90 degrees: the pelvis' x axis, its front, points down), the lowest
#: shapes (the toes of the crouched legs) 2 cm above the ground
START = {"initial.base_position": [0.0, 0.0, 0.16], "initial.base_rpy": [0.0, math.pi / 2, 0.0]}
#: at rest: no joint or base speed above this, rad/s or m/s
REST = 1e-3
#: what the limp joints' rest may differ by besides the sinks: friction holds each limb where
#: its slide through the fall left it, and the two engines' impulses slide them differently
#: (measured: the ankles and the neck up to 0.9 degrees apart, 1 mm at a 10 cm lever)
POSTURE = 1.2e-3  # m
JOINT_TOLERANCE = math.radians(1.5)
#: the base (pelvis) lies on its own and the torso's front corners, this far apart: a height
#: difference of the bound between them tilts it by the bound / SPAN
SPAN = 0.25  # m


def humanoid(model: str) -> wb_sim.Simulator:
    """The humanoid at its start, face down, with contact model ``model``."""
    return wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
        "collision.enabled": True, "contact.model": model, **START})


def settle_mujoco(sim: wb_sim.Simulator, urdf_xml: str | None = None):
    """MuJoCo's twin of ``sim`` (at its initial state) after SECONDS: (model, data)."""
    model = twin_model(sim, urdf_xml)
    data = mujoco.MjData(model)
    set_twin_state(model, data, sim)
    for _ in range(round(SECONDS / sim.dt)):
        mujoco.mj_step(model, data)
    return model, data


@functools.lru_cache(maxsize=None)
def mujoco_rest():
    """MuJoCo's rest of the humanoid's twin (do not step it)."""
    return settle_mujoco(humanoid("compliant"))


@functools.lru_cache(maxsize=None)
def wb_sim_rest(model: str) -> wb_sim.Simulator:
    """wb_sim's rest with contact model ``model``, limp (do not step it)."""
    sim = humanoid(model)
    zero = np.zeros(sim.nj)
    for _ in range(round(SECONDS / sim.dt)):
        sim.step(zero)
    return sim


def links(model) -> list[str]:
    return [model.body(b).name for b in range(1, model.nbody)]


def compare(sim, model, data) -> dict:
    """wb_sim's rest against MuJoCo's: the differences and their bounds."""
    names = links(model)
    ours = np.array([sim.frame_pose(link).translation for link in names])
    theirs = link_positions(data, names)
    link_dz = np.abs(ours[:, 2] - theirs[:, 2])
    ours_r = pin.Quaternion(sim.q[3:7]).matrix()
    theirs_r = base_rotation(data, sim.robot.root_link)
    depths = np.concatenate([sim.collision_points_state().depth,
                             sim.contact_points_state().depth, [0.0]])
    # a link's height is lowered by its supports' sink in each engine (wb_sim: the compliant
    # law's, ~0 rigid; MuJoCo: its soft contact's penetration): the two differ by at most the
    # larger deepest sink, and by POSTURE
    mujoco_sink = max([-data.contact[i].dist for i in range(data.ncon)] + [0.0])
    height_bound = max(depths.max(), mujoco_sink) + POSTURE
    joints = np.abs(sim.joint_positions - joint_positions(model, data, sim.joint_names))
    return {
        "base_dz": float(abs(sim.q[2] - data.qpos[2])),
        "base_z": float(sim.q[2]), "mujoco_base_z": float(data.qpos[2]),
        "angle": float(np.linalg.norm(pin.log3(ours_r.T @ theirs_r))),  # between the frames
        "link_dz": float(link_dz.max()),
        "worst_link": names[int(link_dz.argmax())],
        "links": len(names),
        "joint": float(joints.max()),
        "worst_joint": sim.joint_names[int(joints.argmax())],
        "joints": len(joints),
        "height_bound": height_bound,
        "wb_sim_sink": float(depths.max()),
        "mujoco_sink": mujoco_sink,
    }


def outside(d: dict) -> list[str]:
    """The differences beyond their bounds."""
    bounds = {"base_dz": d["height_bound"], "link_dz": d["height_bound"],
              "angle": d["height_bound"] / SPAN, "joint": JOINT_TOLERANCE}
    return [name for name, bound in bounds.items() if d[name] > bound]
