"""wb_sim.robot.RobotCache: a simulator built on a cached robot (a campaign's worker, case
after case) is a fresh build, bit for bit; only the structural parameters share a robot."""

from __future__ import annotations

import os

import numpy as np

import wb_sim
from wb_sim.config import read_yaml_params
from wb_sim.robot import RobotCache
from helpers.robots import shipped_controller

PARAMS = read_yaml_params(wb_sim.config_path("humanoid"))


def _build(cache, **overrides):
    return wb_sim.Simulator.from_params({**PARAMS, **overrides}, robots=cache)


def _run(sim, steps, push=False):
    ctrl = shipped_controller(sim)
    qs = []
    for k in range(steps):
        if push and k == 10:
            sim.apply_external_wrench("pelvis", [120.0, 40.0, 0.0], duration_s=0.05)
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
        qs.append(sim.q.copy())
    return np.array(qs), sim.v.copy(), sim.point_forces.copy()


def test_a_simulator_on_a_cached_robot_is_a_fresh_build_bit_for_bit():
    """A case that changed the simulator it was given (a payload attached, a push, 300 steps
    with whole-body collision) leaves nothing to the next one built on the same robot: the
    next case's trajectory, velocity and contact forces equal those of a simulator built from
    scratch, bit for bit."""
    cache = RobotCache()
    first = _build(cache, **{"contact.friction_coefficient": 0.9})
    bare_mass = first.mass
    first.attach_payload("torso", 4.0, com=(0.05, 0.0, 0.1))
    _run(first, 300, push=True)
    assert abs(first.mass - (bare_mass + 4.0)) < 1e-12
    overrides = {"contact.friction_coefficient": 0.7, "initial.joint_positions":
                 [-0.35, 0.7, -0.35, -0.35, 0.7, -0.35, -0.2, -0.2]}
    cached = _build(cache, **overrides)
    fresh = _build(None, **overrides)
    assert cached.robot is first.robot and fresh.robot is not first.robot
    assert (cache.built, cache.reused) == (1, 1)
    assert cached.mass == fresh.mass == bare_mass  # the first case's payload stayed there
    assert cached.model is not first.model
    a, b = _run(cached, 400, push=True), _run(fresh, 400, push=True)
    assert a[0][-1, 2] < fresh.q0[2] - 1e-4  # it moved (pushed, settling)
    for x, y in zip(a, b):
        assert np.array_equal(x, y)


def test_only_the_structural_parameters_build_a_new_robot():
    """Friction, the initial pose of a floating base, collision on/off: the same robot (the
    contact and the state are built per simulator). The URDF's inertial edits, the base fixed
    or floating, a fixed base's placement: another robot."""
    cache = RobotCache(size=8)
    humanoid = _build(cache)
    for same in ({"contact.friction_coefficient": 0.5}, {"initial.base_rpy": [0.0, 0.0, 0.3]},
                 {"collision.enabled": False}):
        sim = _build(cache, **same)
        assert sim.robot is humanoid.robot, same
    assert sim.collision is None and humanoid.collision is not None
    assert (cache.built, cache.reused) == (1, 3)
    heavy = _build(cache, **{"perturbation.mass_scale_links": ["torso"],
                             "perturbation.mass_scale": [1.5]})
    assert heavy.robot is not humanoid.robot and heavy.mass > humanoid.mass + 1.0
    fixed = _build(cache, floating_base=False)
    higher = _build(cache, floating_base=False, **{"initial.base_position": [0.0, 0.0, 0.9]})
    assert len({id(s.robot) for s in (humanoid, heavy, fixed, higher)}) == 4
    assert cache.built == 4
    # the fixed base's placement is in its model: the joints on the root link are higher
    m_fixed, m_higher = fixed.robot.model, higher.robot.model
    first = [j for j in range(1, m_fixed.njoints) if m_fixed.parents[j] == 0]
    assert first and all(np.isclose(m_higher.jointPlacements[j].translation[2]
                                    - m_fixed.jointPlacements[j].translation[2],
                                    0.9 - PARAMS["initial.base_position"][2]) for j in first)
    assert _build(cache, floating_base=False).robot is fixed.robot


def test_the_cache_keeps_the_last_ones_and_sees_an_edited_urdf(tmp_path):
    """``size`` robots are kept (the least recently used leaves first), and a URDF file
    written again (size, modification time) is parsed again."""
    cache = RobotCache(size=2)
    urdf = tmp_path / "robot.urdf"
    source = wb_sim.Simulator.from_params(PARAMS).robot.urdf_file
    urdf.write_text(source.read_text())
    first = _build(cache, urdf_path=str(urdf))
    assert _build(cache, urdf_path=str(urdf)).robot is first.robot
    urdf.write_text(source.read_text() + "\n<!-- edited -->\n")
    os.utime(urdf, ns=(0, 10**9))
    edited = _build(cache, urdf_path=str(urdf))
    assert edited.robot is not first.robot and cache.built == 2
    other = _build(cache, **{"perturbation.mass_scale_links": ["torso"],
                             "perturbation.mass_scale": [1.2]})
    assert _build(cache, urdf_path=str(urdf)).robot is edited.robot  # still kept
    _build(cache, **{"perturbation.mass_scale_links": ["torso"],
                     "perturbation.mass_scale": [0.8]})  # a third: the oldest leaves
    assert _build(cache, **{"perturbation.mass_scale_links": ["torso"],
                            "perturbation.mass_scale": [1.2]}).robot is not other.robot
