"""Sleeping free objects (objects.sleep, wb_sim/simulator.py's sleeping objects): an island of
objects that stays slower than objects.sleep_speed for objects.sleep_time sleeps (velocity
exactly 0, pose held to the bit, skipped by the phases and the solve) and wakes when an
awake body comes within collision.margin, a push or set_object_state touches it.

Checked against numbers: a dropped box falls asleep at the step its quiet run reaches
objects.sleep_time (no earlier, no later), then its pose is constant to the bit and its
velocity exactly 0; a robot's link swung into a sleeping box and a ball rolled at one
wake it and move it; a push and set_object_state wake it at once; snapshots taken before
and during sleep continue bit-identically, the sleep state included; until the first
object sleeps, objects.sleep on and off step the same trajectory bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import wb_sim
from wb_sim.config import load_config

from .test_objects import _objects, _run

BOX = dict(name="box", shape="box", size=(0.1, 0.1, 0.1), mass=1.0,
           position=(0.0, 0.0, 0.25), rpy=(0.3, 0.2, 0.0))
#: a fixed-base arm whose one link (a 0.6 m bar, 2 cm .. 10 cm above the ground) turns
#: about the vertical through the origin: swung, it sweeps through (0.5, 0.3)
SWEEPER = ('<robot name="sweeper"><link name="world_link"/><link name="arm"><inertial>'
           '<origin xyz="0.5 0 0"/><mass value="2"/>'
           '<inertia ixx="0.01" iyy="0.06" izz="0.06" ixy="0" ixz="0" iyz="0"/></inertial>'
           '<collision><origin xyz="0.5 0 0"/><geometry><box size="0.6 0.05 0.08"/>'
           '</geometry></collision></link><joint name="turn" type="revolute">'
           '<parent link="world_link"/><child link="arm"/><origin xyz="0 0 0.06"/>'
           '<axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="100" velocity="10"/>'
           '</joint></robot>')


def _sleepy(*objs, **extra):
    return _objects(*objs, **{"objects.sleep": True, **extra})


def _speeds(sim, name):
    lin, ang = sim.object_twist(name)
    return float(np.linalg.norm(lin)), float(np.linalg.norm(ang))


def test_the_sleep_parameters_are_declared_with_units():
    base = {"robot_description": "<robot name='r'><link name='a'/></robot>"}
    cfg = load_config(base)
    assert cfg.objects.sleep is False  # opt-in: the plain reference by default
    assert cfg.objects.sleep_speed == 0.01 and cfg.objects.sleep_time == 0.5
    with pytest.raises(wb_sim.ConfigError, match="objects.sleep_time"):
        load_config({**base, "objects.sleep_time": -1.0})


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_dropped_box_falls_asleep_after_sleep_time_quiet_and_then_holds(model):
    sim = wb_sim.Simulator.from_params(_sleepy(BOX, **{"contact.model": model}))
    N = round(0.5 / sim.dt)
    speed = sim.config.objects.sleep_speed
    quiet, k_sleep = [], None
    for k in range(3000):
        sim.step(np.zeros(sim.nj))
        if sim.object_asleep("box"):
            k_sleep = k
            break
        lin, ang = _speeds(sim, "box")
        quiet.append(lin < speed and ang < speed)
    assert k_sleep is not None and 0.3 < sim.t < 2.0, sim.t  # it landed, then slept
    # the N - 1 steps before the one it fell asleep at were quiet, the one before them not
    assert all(quiet[-(N - 1):]) and not quiet[-N]
    assert sim.sleeping_objects() == ("box",)
    pose = sim.object_poses().copy()
    assert pose[0, 2] == pytest.approx(0.05, abs=2e-3)  # on a face, on the ground
    iv = sim.model.idx_vs[sim.model.getJointId("box")]
    for _ in range(300):
        sim.step(np.zeros(sim.nj))
        np.testing.assert_array_equal(sim.object_poses(), pose)
        assert not sim.v[iv:iv + 6].any()  # exactly 0
    lin, ang = sim.object_twist("box")
    assert not lin.any() and not ang.any()
    assert sim.object_asleep("box")


def _asleep(sim, name, limit=3.0):
    while not sim.object_asleep(name):
        assert sim.t < limit, f"{name} did not fall asleep by {limit} s"
        sim.step(np.zeros(sim.nj))


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_robot_link_swung_into_a_sleeping_box_wakes_and_moves_it(model):
    box = dict(name="box", shape="box", size=(0.1, 0.1, 0.1), mass=0.5,
               position=(0.5, 0.3, 0.05))
    p = _sleepy(box, **{"contact.model": model})
    p.update(robot_description=SWEEPER, floating_base=False)
    sim = wb_sim.Simulator.from_params(p)
    kp, kd = 200.0, 20.0

    def hold(target):
        return np.array([kp * (target - sim.joint_positions[0]) - kd * sim.joint_velocities[0]])

    while not sim.object_asleep("box"):
        assert sim.t < 2.0
        sim.step(hold(0.0))
    rest = sim.object_pose("box").translation.copy()

    def gap(theta):  # from the bar's leading face to the box's nearest corner (0.55, 0.25)
        return 0.25 * np.cos(theta) - 0.55 * np.sin(theta) - 0.025

    angles = []
    for _ in range(1500):  # swing the bar through the box's place
        angles.append(sim.joint_positions[0])  # where the step's phases see it
        sim.step(hold(1.2))
        if not sim.object_asleep("box"):
            break
    # it woke at the first step that saw the bar within collision.margin (0.02 m) of the
    # box, before touching it
    assert 0.0 < gap(angles[-1]) <= 0.02 < gap(angles[-2]), (angles[-2:], gap(angles[-1]))
    for _ in range(1000):
        sim.step(hold(1.2))
    moved = np.linalg.norm(sim.object_pose("box").translation[:2] - rest[:2])
    assert moved > 0.05, moved


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_ball_rolled_at_a_sleeping_box_wakes_and_pushes_it(model):
    box = dict(name="box", shape="box", size=(0.2, 0.2, 0.2), mass=0.5,
               position=(0.0, 0.0, 0.1))
    ball = dict(name="ball", shape="sphere", size=(0.05, 0.0, 0.0), mass=1.0,
                position=(-0.6, 0.0, 0.05))
    sim = wb_sim.Simulator.from_params(_sleepy(box, ball, **{"contact.model": model}))
    _asleep(sim, "box")
    _asleep(sim, "ball")
    rest = sim.object_pose("box").translation.copy()
    sim.set_object_state("ball", linear_velocity=(2.0, 0.0, 0.0))
    assert not sim.object_asleep("ball") and sim.object_asleep("box")
    _run(sim, 500)
    assert not sim.object_asleep("box")
    assert sim.object_pose("box").translation[0] - rest[0] > 0.02


@pytest.mark.parametrize("how", ["push", "set_object_state"])
def test_a_push_or_set_object_state_wakes_the_box_at_once(how):
    sim = wb_sim.Simulator.from_params(_sleepy(BOX))
    _asleep(sim, "box")
    x0 = sim.object_pose("box").translation[0]
    if how == "push":
        sim.apply_external_wrench("box", force=(20.0, 0.0, 0.0), duration_s=0.2)
    else:
        sim.set_object_state("box", linear_velocity=(1.0, 0.0, 0.0))
    assert not sim.object_asleep("box") and sim.sleeping_objects() == ()
    _run(sim, 300)
    assert sim.object_pose("box").translation[0] - x0 > 0.02


def test_a_stack_sleeps_as_one_island_and_wakes_as_one():
    low = dict(name="low", shape="box", size=(0.2, 0.2, 0.2), mass=1.0, position=(0, 0, 0.1))
    top = dict(name="top", shape="box", size=(0.1, 0.1, 0.1), mass=0.5,
               position=(0, 0, 0.25))
    far = dict(name="far", shape="box", size=(0.1, 0.1, 0.1), mass=0.5,
               position=(2.0, 0, 0.05))
    sim = wb_sim.Simulator.from_params(_sleepy(low, top, far))
    for name in ("low", "top", "far"):
        _asleep(sim, name)
    sim.apply_external_wrench("low", force=(0.0, 0.0, 0.0), duration_s=0.01)
    assert sim.sleeping_objects() == ("far",)  # the island of the pushed box woke whole
    sim.set_object_state("far", position=(2.0, 0.0, 0.06))
    assert sim.sleeping_objects() == ()


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_snapshots_across_sleep_continue_bit_identically(model):
    ball = dict(name="ball", shape="sphere", size=(0.05, 0.0, 0.0), mass=1.0,
                position=(-0.6, 0.0, 0.3))
    sim = wb_sim.Simulator.from_params(_sleepy(BOX, ball, **{"contact.model": model}))
    _run(sim, 200)
    before = sim.get_state()  # both awake, falling
    _asleep(sim, "box")
    _asleep(sim, "ball")
    during = sim.get_state()
    k = sim.step_count

    def finish():
        _run(sim, 100)
        sim.set_object_state("ball", linear_velocity=(1.5, 0.0, 0.0))  # it rolls to the box
        _run(sim, 400)
        return sim.q.copy(), sim.v.copy(), sim.sleeping_objects()

    q, v, asleep = finish()
    for snap in (during, before):
        sim.set_state(snap)
        if snap is before:
            _asleep(sim, "box")
            _asleep(sim, "ball")
            assert sim.step_count == k
        assert sim.sleeping_objects() == ("box", "ball")
        q2, v2, asleep2 = finish()
        np.testing.assert_array_equal(q2, q)
        np.testing.assert_array_equal(v2, v)
        assert asleep2 == asleep


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_sleep_on_and_off_step_alike_until_the_first_object_sleeps(model):
    runs = []
    for sleep in (False, True):
        sim = wb_sim.Simulator.from_params(_objects(BOX, **{"contact.model": model,
                                                            "objects.sleep": sleep}))
        qs = []
        while len(qs) < 3000 and not sim.sleeping_objects():
            sim.step(np.zeros(sim.nj))
            qs.append((sim.q.copy(), sim.v.copy()))
        runs.append((qs, sim))
    (off, sim_off), (on, sim_on) = runs
    assert sim_on.sleeping_objects() == ("box",) and len(on) < len(off)
    for (q0, v0), (q1, v1) in zip(off[:len(on) - 1], on[:-1]):
        np.testing.assert_array_equal(q1, q0)
        np.testing.assert_array_equal(v1, v0)
    assert sim_off.v.any()  # never asleep, the box never exactly at rest


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_the_humanoid_beside_a_sleeping_box_steps_as_it_does_alone(make_humanoid,
                                                                    shipped_controller, model):
    """The humanoid standing under the example controller, with a box resting 3 m away and
    without it: once the box sleeps, the robot steps on its own model (every object asleep)
    and its coordinates follow the box-free run's to rounding over 0.8 s, the box's pose
    held to the bit. Rigid: to 1e-5 m, as with objects.sleep off: its ADMM stops at
    contact.tolerance, and its impulse unit is the weight share of the model's whole mass,
    which counts the box (6.4e-7 m measured), so its iterations differ from the first step."""
    box = {"objects.names": ["far"], "objects.shapes": ["box"], "objects.sizes": [0.3] * 3,
           "objects.mass": [5.0], "objects.positions": [3.0, 0.0, 0.15],
           "objects.sleep": True}
    runs = []
    for extra in ({}, box):
        sim = make_humanoid(**{"contact.model": model, **extra})
        ctrl = shipped_controller(sim)
        qs, asleep_at = [], None
        for k in range(800):
            sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
            qs.append(sim.q[:sim.robot.model.nq].copy())
            if extra and asleep_at is None and sim.object_asleep("far"):
                asleep_at, pose = k, sim.object_poses().copy()
        runs.append(np.array(qs))
    assert asleep_at is not None and asleep_at < 700
    np.testing.assert_array_equal(sim.object_poses(), pose)
    assert sim._rmodel is not None  # the robot's own model stepped it (white box)
    np.testing.assert_allclose(runs[1], runs[0], rtol=0.0,
                               atol=1e-12 if model == "compliant" else 1e-5)



@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_urdf_object_of_two_solids_sleeps_as_one_body_and_a_box_slid_into_it_wakes_it(model):
    """A rigid URDF object (test_objects_urdf's slab with a block on it: one body of two
    solids) sleeps like a box: held to the bit, its velocity exactly zero; a box slid along
    the ground into it wakes it whole (the proximity wake goes through each of its solids),
    and it is pushed away."""
    from .test_objects_urdf import (A_EDGES, A_MASS, A_XYZ, B_MASS, B_XYZ, TWO_BOXES,
                                    _parallel_axis, _urdf_objects)

    _, com, _ = _parallel_axis([(A_MASS, A_XYZ, np.eye(3), np.eye(3)),
                                (B_MASS, B_XYZ, np.eye(3), np.eye(3))])
    rest = A_EDGES[2] / 2.0 + com[2] - A_XYZ[2]  # its centre of mass at rest, m
    box = dict(name="box", shape="box", size=(0.1, 0.1, 0.1), mass=2.0,
               position=(-0.6, 0.0, 0.05))
    p = _urdf_objects(dict(name="pair", urdf=TWO_BOXES, position=(0.0, 0.0, rest + 0.01)),
                      box, **{"contact.model": model, "objects.sleep": True})
    sim = wb_sim.Simulator.from_params(p)
    _asleep(sim, "pair")
    _asleep(sim, "box")
    x0 = sim.object_pose("pair").translation.copy()
    for _ in range(200):
        sim.step(np.zeros(sim.nj))
    assert np.array_equal(sim.object_pose("pair").translation, x0)
    assert not np.any(np.concatenate(sim.object_twist("pair")))
    sim.set_object_state("box", linear_velocity=(3.0, 0.0, 0.0))
    assert sim.object_asleep("pair")  # the box's own island woke, not the pair's
    _run(sim, 600)
    assert sim.object_pose("pair").translation[0] - x0[0] > 0.01, \
        sim.object_pose("pair").translation


def test_a_world_file_sets_sleep_and_names_its_bad_keys(tmp_path):
    """``world.sleep``: ``true``, or a mapping of enabled / speed / time, sets objects.sleep*
    (the crate then sleeps after 0.2 s of rest); an unknown key is named."""
    from wb_sim.errors import ConfigError
    from wb_sim.world import load_world_robots

    src = (tmp_path / "w.yaml")
    body = ("world:\n  sleep: {sleep}\n  objects:\n    - {{name: crate, shape: box, size: [0.2, "
            "0.2, 0.2], mass: 1.0, pose: {{position: [1.0, 0.0, 0.1]}}}}\n  robots:\n"
            "    - {{name: h, robot: humanoid}}\n")
    src.write_text(body.format(sleep="true"))
    (params, _), = load_world_robots(src)
    assert params["objects.sleep"] is True
    src.write_text(body.format(sleep="{enabled: true, speed: 0.02, time: 0.2}"))
    (params, _), = load_world_robots(src)
    assert (params["objects.sleep"], params["objects.sleep_speed"],
            params["objects.sleep_time"]) == (True, 0.02, 0.2)
    sim = wb_sim.Simulator.from_world(src)
    while not sim.object_asleep("crate"):
        assert sim.t < 1.0, "the crate did not sleep by 1 s with sleep_time 0.2 s"
        sim.step(np.zeros(sim.nj))
    src.write_text(body.format(sleep="{time: 0.3}"))  # a mapping asks for sleeping
    (params, _), = load_world_robots(src)
    assert (params["objects.sleep"], params["objects.sleep_time"]) == (True, 0.3)
    src.write_text(body.format(sleep="{enabled: true, sped: 0.02}"))
    with pytest.raises(ConfigError, match=r"world.sleep.sped.*did you mean 'speed'"):
        load_world_robots(src)
