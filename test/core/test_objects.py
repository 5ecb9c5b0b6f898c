"""Free objects (wb_sim/objects.py): boxes, spheres, cylinders and capsules appended to the
simulator's models as free joints, touching the ground, the terrain, each other and the
robot's links in the step's one contact solve.

Checked against numbers: a box pushed by a constant force and released slides with the
deceleration mu g (both models, within 1 %); a stack of three boxes stands still (drift
< 0.5 mm over 10 s); a sphere rolling off a box's top edge at v0 (v0^2 > g r: it leaves
the edge at once) lands at the ballistic point (both models); a box thrown at a floating
robot's link in zero gravity pushes it, the total linear and angular momentum of robot
and box conserved (both models); the solid inertias against pinocchio's; snapshots
continue bit-identically; spawn and delete carry the robot's state over; the refusals
name the parameter or the call and say how to fix it.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.errors import CommandError, ConfigError
from wb_sim.objects import solid_inertia

G0 = 9.81
#: a host robot out of the way: one link on a vertical revolute joint, fixed far off, no
#: collision geometry (the objects meet the ground and each other only)
POST = ('<robot name="post"><link name="world_link"/><link name="arm"><inertial>'
        '<mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>'
        '</inertial></link><joint name="turn" type="revolute"><parent link="world_link"/>'
        '<child link="arm"/><origin xyz="50 50 1"/><axis xyz="0 0 1"/>'
        '<limit lower="-3" upper="3" effort="10" velocity="10"/></joint></robot>')


def _objects(*objs, **extra):
    """Parameters of the POST robot with the free objects ``objs`` (dicts: name, shape,
    size, mass, position, optional rpy, linear/angular velocity)."""
    p = {"robot_description": POST, "floating_base": False, "contact_surfaces": [],
         "objects.names": [o["name"] for o in objs],
         "objects.shapes": [o["shape"] for o in objs],
         "objects.sizes": [x for o in objs for x in o["size"]],
         "objects.mass": [o["mass"] for o in objs],
         "objects.positions": [x for o in objs for x in o["position"]]}
    for key, param in (("rpy", "rpy"), ("linear_velocity", "linear_velocities"),
                       ("angular_velocity", "angular_velocities")):
        if any(key in o for o in objs):
            p[f"objects.{param}"] = [x for o in objs for x in o.get(key, (0.0, 0.0, 0.0))]
    p.update(extra)
    return p


def _run(sim, steps):
    zero = np.zeros(sim.nj)
    for _ in range(steps):
        sim.step(zero)


# ----------------------------------------------------------------------------- physics


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_pushed_box_slides_with_mu_g_deceleration_after_the_push(model):
    mu, m, force = 0.4, 2.0, 20.0
    sim = wb_sim.Simulator.from_params(_objects(
        dict(name="box", shape="box", size=(0.2, 0.2, 0.1), mass=m, position=(0.0, 0.0, 0.05)),
        **{"contact.model": model, "contact.friction_coefficient": mu}))
    _run(sim, 100)  # settle on the ground
    push = 0.25
    sim.apply_external_wrench("box", force=[force, 0.0, 0.0], duration_s=push)
    t, x, vx = [], [], []
    for _ in range(round(1.0 / sim.dt)):
        sim.step(np.zeros(sim.nj))
        lin, _ = sim.object_twist("box")
        t.append(sim.t)
        vx.append(lin[0])
        x.append(sim.object_pose("box").translation[0])
    t, vx = np.array(t), np.array(vx)
    # during the push: (F - mu m g) / m; after it: -mu g until it stops
    t0 = t[0] - sim.dt
    pushing = (t > t0 + 0.05) & (t < t0 + push - 0.01)
    a_push = np.polyfit(t[pushing], vx[pushing], 1)[0]
    assert a_push == pytest.approx(force / m - mu * G0, rel=0.01)
    sliding = (t > t0 + push + 0.02) & (vx > 0.05)
    assert sliding.sum() > 100
    a_slide = np.polyfit(t[sliding], vx[sliding], 1)[0]
    assert a_slide == pytest.approx(-mu * G0, rel=0.01)
    assert abs(vx[-1]) < 1e-3  # stopped, and stays
    # it slid straight: no drift sideways, no turn
    pose = sim.object_pose("box")
    assert abs(pose.translation[1]) < 1e-6
    assert pose.rotation[2, 2] > 1.0 - 1e-6


def test_a_stack_of_three_boxes_stands_still_for_10_s():
    size, m = 0.2, 1.0
    boxes = [dict(name=f"box{i}", shape="box", size=(size, size, size), mass=m,
                  position=(0.0, 0.0, size / 2 + i * size)) for i in range(3)]
    sim = wb_sim.Simulator.from_params(_objects(*boxes, physics_rate_hz=500.0))
    _run(sim, round(0.5 / sim.dt))  # the contacts load (the compliant ground's sink)
    start = np.array([sim.object_pose(b["name"]).translation for b in boxes])
    worst = 0.0
    for _ in range(20):
        _run(sim, round(0.5 / sim.dt))
        now = np.array([sim.object_pose(b["name"]).translation for b in boxes])
        worst = max(worst, float(np.linalg.norm(now - start, axis=1).max()))
    assert sim.t == pytest.approx(10.5)
    assert worst < 0.5e-3
    for b in boxes:  # upright, at rest
        assert sim.object_pose(b["name"]).rotation[2, 2] > 1.0 - 1e-6
        assert np.linalg.norm(sim.object_twist(b["name"])[0]) < 1e-3


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_ball_rolling_off_a_box_lands_at_the_ballistic_point(model):
    r, v0, height, half = 0.05, 1.5, 0.3, 0.2
    assert v0 ** 2 > G0 * r  # it leaves the edge at once (no pivot about it)
    sim = wb_sim.Simulator.from_params(_objects(
        dict(name="table", shape="box", size=(2 * half, 2 * half, height), mass=50.0,
             position=(0.0, 0.0, height / 2)),
        dict(name="ball", shape="sphere", size=(r, 0.0, 0.0), mass=0.5,
             position=(0.0, 0.0, height + r), linear_velocity=(v0, 0.0, 0.0),
             angular_velocity=(0.0, v0 / r, 0.0)),
        **{"contact.model": model, "contact.friction_coefficient": 0.8}))
    on_top, top, edge, landed, prev = [], None, None, None, None
    for _ in range(round(0.6 / sim.dt)):
        sim.step(np.zeros(sim.nj))
        c = sim.object_pose("ball").translation.copy()
        lin, ang = sim.object_twist("ball")
        if 0.05 < c[0] < half - 0.02:  # rolling on the top, after the first contact's settling
            on_top.append((lin[0], ang[1] * r))
            top = c[2]
        if edge is None and c[0] >= half:
            edge = lin[0]  # its speed as its centre passes the edge
        if c[2] <= r:  # it reaches the ground: the crossing, interpolated in the step
            s = (prev[2] - r) / (prev[2] - c[2])
            landed = prev + s * (c - prev)
            break
        prev = c
    on_top = np.array(on_top)
    # it rolled on the top at v0, v = w r (the compliant contact's point is at the middle of
    # its overlap, a fraction of a millimetre inside the ball: 0.3 % there)
    np.testing.assert_allclose(on_top[:, 0], v0, rtol=2e-3)
    np.testing.assert_allclose(on_top[:, 1], on_top[:, 0], rtol=4e-3)
    assert landed is not None
    # ballistic from the edge at the top's height it rolled at (the compliant ground lets
    # the 50 kg box sink 2 mm): the compliant contact holds it 1-2 ms longer at the edge
    x_ballistic = half + edge * math.sqrt(2.0 * (top - r) / G0)
    assert landed[0] == pytest.approx(x_ballistic, abs=3e-3)
    assert abs(landed[1]) < 1e-6


BLOCK = ('<robot name="block"><link name="block"><inertial><mass value="3"/>'
         '<inertia ixx="0.02" iyy="0.03" izz="0.04" ixy="0" ixz="0" iyz="0"/></inertial>'
         '<collision><geometry><box size="0.2 0.3 0.4"/></geometry></collision></link></robot>')
BODY_ARM = ('<robot name="flier"><link name="body"><inertial><mass value="3"/>'
            '<inertia ixx="0.02" iyy="0.03" izz="0.04" ixy="0" ixz="0" iyz="0"/></inertial>'
            '</link><link name="arm"><inertial><origin xyz="0 0 -0.2"/><mass value="1"/>'
            '<inertia ixx="0.01" iyy="0.01" izz="0.002" ixy="0" ixz="0" iyz="0"/></inertial>'
            '<collision><origin xyz="0 0 -0.2"/><geometry><box size="0.06 0.06 0.4"/>'
            '</geometry></collision></link><joint name="shoulder" type="revolute">'
            '<parent link="body"/><child link="arm"/><axis xyz="0 1 0"/>'
            '<limit lower="-3" upper="3" effort="10" velocity="10"/></joint></robot>')


def _momentum(sim):
    """(total linear momentum, angular momentum about the centre of mass) of the robot and
    the objects: pinocchio's centroidal momentum of the whole model."""
    h = pin.computeCentroidalMomentum(sim.model, pin.Data(sim.model), sim.q, sim.v)
    return np.array(h.linear), np.array(h.angular)


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_box_thrown_at_a_robot_link_pushes_it_and_conserves_momentum(model):
    """In zero gravity (no ground contact) the contact of a spinning brick with a floating
    robot's link is internal: the total linear momentum stays to rounding (the robot's and
    the brick's centres of mass are at their joints' origins, so the step's impulses change
    it by exactly their sum, zero). The angular momentum about the centre of mass drifts
    only by the semi-implicit step's explicit gyroscopic terms (< 0.1 %)."""
    sim = wb_sim.Simulator.from_params(_objects(
        dict(name="brick", shape="box", size=(0.1, 0.1, 0.1), mass=0.8,
             position=(-0.4, 0.05, 2.1), linear_velocity=(3.0, 0.0, -0.5),
             angular_velocity=(0.0, 1.0, 4.0)),
        robot_description=BLOCK, floating_base=True, gravity=[0.0, 0.0, 0.0],
        **{"initial.base_position": [0.0, 0.0, 2.0], "contact.model": model,
           "contact.friction_coefficient": 0.5}))
    p0, l0 = _momentum(sim)
    np.testing.assert_allclose(p0, [0.8 * 3.0, 0.0, -0.8 * 0.5], atol=1e-12)
    touched = 0
    for _ in range(round(0.4 / sim.dt)):
        sim.step(np.zeros(sim.nj))
        touched += len(sim.self_collision_contacts().force) > 0
    assert touched > 5
    p1, l1 = _momentum(sim)
    np.testing.assert_allclose(p1, p0, rtol=0.0, atol=1e-12 * np.linalg.norm(p0))
    np.testing.assert_allclose(l1, l0, rtol=0.0, atol=1e-3 * np.linalg.norm(l0))
    # the robot was pushed: it took a good part of the brick's momentum along x, and turned
    robot_p = p1 - 0.8 * sim.object_twist("brick")[0]
    assert robot_p[0] > 0.3 * p0[0]
    assert np.linalg.norm(sim.state.base_angular_velocity) > 0.01


def test_a_box_thrown_at_the_humanoid_pushes_it_on_a_frictionless_ground():
    """The default humanoid (its links' URDF geometry) hit at the hip by a 2 kg box at 4 m/s:
    with no friction anywhere (contact.friction_coefficient 0) nothing outside pushes
    horizontally, so the horizontal momentum of robot + box stays (to the articulated
    semi-implicit step's drift: 0.17 % in 0.3 s) while the box hands most of it to the
    robot."""
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), {
        "contact.friction_coefficient": 0.0, "objects.names": ["box"],
        "objects.shapes": ["box"], "objects.sizes": [0.15, 0.15, 0.15], "objects.mass": [2.0],
        "objects.positions": [-0.6, 0.0, 0.9], "objects.linear_velocities": [4.0, 0.0, 0.0]})
    p0, _ = _momentum(sim)
    np.testing.assert_allclose(p0, [8.0, 0.0, 0.0], atol=1e-12)
    touched = 0
    for _ in range(300):
        sim.step(np.zeros(sim.nj))
        touched += len(sim.self_collision_contacts().force) > 0
    assert touched > 5
    p1, _ = _momentum(sim)
    np.testing.assert_allclose(p1[:2], p0[:2], rtol=0.0, atol=5e-3 * p0[0])
    box = sim.object_twist("box")[0]
    assert box[0] < 0.0  # stopped and thrown back
    assert p1[0] - 2.0 * box[0] > 0.9 * p0[0]  # the robot took it


def test_a_far_object_leaves_the_standing_humanoids_trajectory(make_humanoid,
                                                               shipped_controller):
    """The humanoid standing under the example controller, with a box resting 5 m away and
    without it: the robot's coordinates agree to rounding (1.1e-16 measured: the contact
    products run over the object's zero columns in another order) over 0.2 s, and the
    controller ignores the object's coordinates after the robot's."""
    runs = []
    for extra in ({}, {"objects.names": ["far"], "objects.shapes": ["box"],
                       "objects.sizes": [0.3, 0.3, 0.3], "objects.mass": [5.0],
                       "objects.positions": [5.0, 0.0, 0.15]}):
        sim = make_humanoid(**extra)
        ctrl = shipped_controller(sim)
        qs = []
        for _ in range(200):
            sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
            qs.append(sim.q[:sim.robot.model.nq].copy())
        runs.append(np.array(qs))
    assert sim.object_pose("far").translation[2] == pytest.approx(0.15, abs=1e-3)
    np.testing.assert_allclose(runs[1], runs[0], rtol=0.0, atol=1e-12)


def test_solid_inertias_match_pinocchios():
    m = 2.5
    cases = {"box": ((0.3, 0.2, 0.1), pin.Inertia.FromBox(m, 0.3, 0.2, 0.1)),
             "sphere": ((0.07, 0, 0), pin.Inertia.FromSphere(m, 0.07)),
             "cylinder": ((0.05, 0.3, 0), pin.Inertia.FromCylinder(m, 0.05, 0.3)),
             "capsule": ((0.05, 0.3, 0), pin.Inertia.FromCapsule(m, 0.05, 0.3))}
    for shape, (size, ref) in cases.items():
        np.testing.assert_allclose(solid_inertia(shape, size, m), ref.inertia, rtol=1e-12,
                                   err_msg=shape)


# ----------------------------------------------------------------------------- robots


def test_the_panda_pushes_a_box_with_position_commands():
    """Issue 31: the fixed-base Panda, every joint on a position target (the derived drive
    gains, as the node's joint_commands), sweeps its low hand through a box resting on the
    ground (helpers/panda_push.py): the box is pushed along the sweep (+y, the hand's
    direction where it meets the box) by 0.35 m in 0.8 s (measured 0.350 m), stays upright
    within 10 degrees (measured: 4 degrees at most while pushed) and ends resting on the
    ground at half its height; nothing is NaN. Without the sweep (the arm held) it stays."""
    from helpers.extras import require_robot_data
    from helpers.panda_push import BOX, run_core
    require_robot_data("panda")
    sim, rows, touched = run_core(800)
    assert np.isfinite(sim.q).all() and np.isfinite(rows).all()
    start = np.array(BOX["positions"])
    moved = rows[-1, :3] - start
    print(f"Panda push: the box moved {moved.round(4).tolist()} m, touched {touched} steps")
    assert touched > 100
    assert moved[1] > 0.2  # along the sweep
    assert abs(moved[0]) < 0.5 * moved[1]
    tilt = [math.degrees(math.acos(min(1.0, pin.Quaternion(r[3:]).matrix()[2, 2])))
            for r in rows]
    assert max(tilt) < 10.0
    assert tilt[-1] < 0.1 and rows[-1, 2] == pytest.approx(0.06, abs=1e-3)  # resting
    # the same arm held at its initial pose: the box is never touched
    held, rows, touched = run_core(200, sweep=False)
    assert touched == 0
    np.testing.assert_allclose(rows[-1, :2], start[:2], atol=1e-9)


#: a fixed-base arm: a shoulder on a pitch joint 0.5 m up, its link a horizontal plate
#: (0.5 x 0.2 x 0.02 m, from the joint along +x)
PLATE_ARM = ('<robot name="plate_arm"><link name="world_link"/><link name="plate"><inertial>'
             '<origin xyz="0.25 0 0"/><mass value="2"/><inertia ixx="0.007" iyy="0.042" '
             'izz="0.048" ixy="0" ixz="0" iyz="0"/></inertial><collision><origin xyz="0.25 0 0"/>'
             '<geometry><box size="0.5 0.2 0.02"/></geometry></collision></link>'
             '<joint name="shoulder" type="revolute"><parent link="world_link"/>'
             '<child link="plate"/><origin xyz="0 0 0.5"/><axis xyz="0 1 0"/>'
             '<limit lower="-3" upper="3" effort="200" velocity="10"/></joint></robot>')


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_box_dropped_on_a_fixed_base_arms_link_rests_on_it(model):
    """A 1.5 kg box dropped from 5 cm onto a held arm's plate (PLATE_ARM): it comes to rest
    on the plate (its bottom on the plate's top face within 1 mm), the plate's contact force
    on it is its weight (within 0.5 %), and the shoulder's torque holding the arm is the
    arm's gravity plus the box's weight times its lever arm (within 1 %); no NaN."""
    m, x_box, half = 1.5, 0.3, 0.05
    sim = wb_sim.Simulator.from_params(_objects(
        dict(name="box", shape="box", size=(2 * half,) * 3, mass=m,
             position=(x_box, 0.0, 0.51 + half + 0.05)),
        robot_description=PLATE_ARM, floating_base=False,
        **{"contact.model": model, "initial.base_position": [0.0, 0.0, 0.0]}))
    kp, kd = 5000.0, 100.0
    ff = sim.generalized_gravity()[0]  # the arm's own weight, held
    for _ in range(round(1.5 / sim.dt)):
        tau = ff - kp * sim.joint_positions[0] - kd * sim.joint_velocities[0]
        sim.step(np.array([tau]))
    assert np.isfinite(sim.q).all() and np.isfinite(sim.v).all()
    c = sim.self_collision_contacts()
    pairs = [i for i, (a, b) in enumerate(zip(c.link_a, c.link_b))
             if {a, b} == {"plate", "box"}]
    assert pairs
    on_box = sum(c.force[i] * (1.0 if c.link_b[i] == "plate" else -1.0) for i in pairs)
    np.testing.assert_allclose(on_box, [0.0, 0.0, m * G0], rtol=0.0, atol=5e-3 * m * G0)
    pose = sim.object_pose("box")
    q_arm = sim.joint_positions[0]  # small: the plate sags under the load by tau / kp
    top = 0.5 + 0.01 - math.sin(q_arm) * pose.translation[0]
    assert pose.translation[2] - half == pytest.approx(top, abs=1e-3)
    assert np.linalg.norm(sim.object_twist("box")[0]) < 1e-3
    held = ff - kp * q_arm  # what the shoulder gives at rest (v ~ 0)
    lever = pose.translation[0]
    arm_gravity = sim.generalized_gravity()[0]
    # a weight at x ahead of a y-axis joint has the torque +x m g about it (pitching the
    # plate down, +q); holding it takes -x m g, as g(q) holds the arm's own weight
    assert arm_gravity == pytest.approx(-2.0 * G0 * 0.25 * math.cos(q_arm), rel=1e-9)
    assert held == pytest.approx(arm_gravity - m * G0 * lever, rel=1e-2)


#: a fixed-base arm as MJCF (a pitch joint 0.5 m up, a plate link with a box geom)
PLATE_ARM_MJCF = """<mujoco model="plate_arm"><compiler angle="radian"/><worldbody>
  <body name="plate" pos="0 0 0.5"><joint name="shoulder" type="hinge" axis="0 1 0"
    range="-3 3"/><inertial pos="0.25 0 0" mass="2" diaginertia="0.007 0.042 0.048"/>
    <geom type="box" size="0.25 0.1 0.01" pos="0.25 0 0"/></body></worldbody></mujoco>"""


def test_objects_beside_an_mjcf_robot_meet_the_ground_and_each_other(tmp_path):
    """An MJCF robot takes free objects; its geometry is not read (URDF only), so they meet
    the ground and each other but not its links, and the build says so. Two boxes dropped
    as a stack beside the MJCF arm come to rest on the ground, the lower at its half height
    (within 1 mm), the upper on it with the pair's contact force equal to its weight (within
    0.5 %); a ball dropped onto the arm's plate passes through it to the ground; no NaN."""
    path = tmp_path / "plate_arm.xml"
    path.write_text(PLATE_ARM_MJCF)
    m_top = 0.7
    p = _objects(dict(name="low", shape="box", size=(0.2, 0.2, 0.2), mass=2.0,
                      position=(0.0, 1.0, 0.12)),
                 dict(name="top", shape="box", size=(0.1, 0.1, 0.1), mass=m_top,
                      position=(0.0, 1.0, 0.3)),
                 dict(name="ball", shape="sphere", size=(0.05, 0.0, 0.0), mass=0.2,
                      position=(0.3, 0.0, 0.7)))
    del p["robot_description"]
    p["urdf_path"] = str(path)
    sim = wb_sim.Simulator.from_params(p)
    assert sim.robot.mjcf_file is not None
    assert any("the objects do not touch its links" in n for n in sim.notes), sim.notes
    kp, kd = 5000.0, 100.0
    ff = sim.generalized_gravity()[0]
    for _ in range(round(1.0 / sim.dt)):
        sim.step(np.array([ff - kp * sim.joint_positions[0] - kd * sim.joint_velocities[0]]))
    assert np.isfinite(sim.q).all() and np.isfinite(sim.v).all()
    assert sim.object_pose("low").translation[2] == pytest.approx(0.1, abs=1e-3)
    assert sim.object_pose("top").translation[2] == pytest.approx(0.25, abs=2e-3)
    assert sim.object_pose("ball").translation[2] == pytest.approx(0.05, abs=1e-3)
    c = sim.self_collision_contacts()
    pairs = [i for i, (a, b) in enumerate(zip(c.link_a, c.link_b)) if {a, b} == {"low", "top"}]
    on_top = sum(c.force[i] * (1.0 if c.link_b[i] == "low" else -1.0) for i in pairs)
    np.testing.assert_allclose(on_top, [0.0, 0.0, m_top * G0], rtol=0.0, atol=5e-3 * m_top * G0)
    assert not any("plate" in (a, b) for a, b in zip(c.link_a, c.link_b))


@pytest.mark.parametrize("mu", [1.0, 0.0])
def test_the_compliant_solve_by_islands_equals_the_one_solve(monkeypatch, mu):
    """With objects the compliant law solves each island of the contact problem alone (the
    robot with what touches it, each object resting apart: M^-1 couples none of them). The
    humanoid (unactuated: it sinks; the comparison is what counts) with 6 boxes beside it,
    one of them carrying a 7th, and 6 boxes 10 m away follows, over 300 steps, the
    trajectory of the one dense solve to 1e-13 (measured 2.7e-15: each island's products
    over its own velocities, h M^-1 J^T from a free object's 6 x 6 block of M^-1, sum in
    another order than the nv-wide product; 5.6e-16 when only the solve was split);
    IslandFinder finds 1 + 12 islands (the stack is one). With friction the active-set
    loop (impacts) takes the islands' whole block-diagonal matrix 26 times in the 300 steps;
    without friction it always does."""
    import wb_sim.contact.compliant as compliant
    from wb_sim.contact.islands import IslandFinder
    boxes = [dict(name=f"b{i}", shape="box", size=(0.1, 0.1, 0.1), mass=1.0,
                  position=(0.6 + 0.2 * (i // 4) + dx, -0.3 + 0.2 * (i % 4), 0.05))
             for i, dx in zip(range(12), [0.0] * 6 + [10.0] * 6)]
    boxes.append(dict(name="top", shape="box", size=(0.1, 0.1, 0.1), mass=0.5,
                      position=(0.6, -0.3, 0.15)))
    runs, found = [], []
    real = IslandFinder.find

    def spy(self, *a):
        out = real(self, *a)
        found.append(0 if out is None else out.count)
        return out
    monkeypatch.setattr(IslandFinder, "find", spy)
    for rows in (compliant.ISLAND_MIN_ROWS, 10 ** 9):
        monkeypatch.setattr(compliant, "ISLAND_MIN_ROWS", rows)
        p = _objects(*boxes, **{"contact.friction_coefficient": mu})
        for key in ("robot_description", "floating_base", "contact_surfaces"):
            del p[key]
        sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), p)
        q = []
        for _ in range(300):
            sim.step(np.zeros(sim.nj))
            q.append(sim.q.copy())
        runs.append(np.array(q))
    # the robot and 12 islands of 13 boxes (two of them the stack)
    assert max(set(found), key=found.count) == 1 + 12, sorted(set(found))
    print(f"islands vs one solve: largest difference {np.abs(runs[0] - runs[1]).max():.2e}")
    np.testing.assert_allclose(runs[0], runs[1], rtol=0.0, atol=1e-13)


@pytest.mark.parametrize("TOL", [1e-5, 1e-9])
def test_the_rigid_solve_by_islands_equals_the_one_solve(monkeypatch, TOL):
    """The rigid law, too, solves each island alone, each with pinocchio's solver to
    ``contact.tolerance`` (ADMM's absolute feasibility and complementarity tolerance). The
    scene of the compliant test above, from the same state every step (the law's snapshot,
    solved both ways, 300 steps): the islands' end-of-step velocities equal the one
    solve's to the solver's tolerance: at 1e-5, the points' velocities within 2.7e-4 m/s
    and the generalized ones within 1.5e-3 (the light boxes' angular velocities, rad/s);
    at 1e-9, 2.4e-8 and 1.7e-7: the difference follows the tolerance (asserted: within 50
    and 500 tolerances), the two are one problem. The impulses are not compared: four
    points under a rigid box share its weight in many ways (the one solve and the islands
    stop at different ones, 0.03 lambda_ref apart). 13 islands found."""
    import wb_sim.contact.rigid as rigid
    from wb_sim.contact.islands import IslandFinder
    boxes = [dict(name=f"b{i}", shape="box", size=(0.1, 0.1, 0.1), mass=1.0,
                  position=(0.6 + 0.2 * (i // 4) + dx, -0.3 + 0.2 * (i % 4), 0.05))
             for i, dx in zip(range(12), [0.0] * 6 + [10.0] * 6)]
    boxes.append(dict(name="top", shape="box", size=(0.1, 0.1, 0.1), mass=0.5,
                      position=(0.6, -0.3, 0.15)))
    p = _objects(*boxes, **{"contact.model": "rigid", "contact.tolerance": TOL,
                            "contact.max_iterations": 5000})
    for key in ("robot_description", "floating_base", "contact_surfaces"):
        del p[key]
    real, real_find = rigid.RigidContact.solve, IslandFinder.find
    found, worst = [], {"impulse": 0.0, "velocity": 0.0, "solves": 0}

    def find(self, *a, **kw):
        out = real_find(self, *a, **kw)
        found.append(0 if out is None else out.count)
        return out

    def both(self, Minv_upper, v_free, u, dt):
        snap = self.snapshot()
        monkeypatch.setattr(rigid, "ISLAND_MIN_ROWS", 10 ** 9)
        v1, f1, _ = real(self, Minv_upper, v_free, u, dt)
        J1 = self._generalized[0]
        self.restore(snap)
        monkeypatch.setattr(rigid, "ISLAND_MIN_ROWS", 0)
        v2, f2, u2 = real(self, Minv_upper, v_free, u, dt)
        unit = self._weight_per_point * dt
        worst["impulse"] = max(worst["impulse"], float(np.abs(f1 - f2).max()) * dt / unit)
        worst["velocity"] = max(worst["velocity"], float(np.abs(J1.dot(v1 - v2)).max()))
        worst["dv"] = max(worst.get("dv", 0.0), float(np.abs(v1 - v2).max()))
        worst["solves"] += 1
        return v2, f2, u2
    monkeypatch.setattr(IslandFinder, "find", find)
    monkeypatch.setattr(rigid.RigidContact, "solve", both)
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), p)
    for _ in range(300):
        sim.step(np.zeros(sim.nj))
    print(f"rigid islands vs one solve over {worst['solves']} solves: impulses "
          f"{worst['impulse']:.2e} lambda_ref, point velocities {worst['velocity']:.2e} m/s "
          f"(tolerance {TOL:g}), generalized {worst['dv']:.2e}")
    assert max(set(found), key=found.count) == 1 + 12, sorted(set(found))
    assert worst["solves"] >= 300
    assert worst["velocity"] <= 50 * TOL
    assert worst["dv"] <= 500 * TOL


# ----------------------------------------------------------------------------- meshes

#: a box's 12 triangles over its corners (index = 4 ix + 2 iy + iz), outward
BOX_FACES = [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7],
             [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]]


def _box_vertices(edges, offset=(0.0, 0.0, 0.0)) -> np.ndarray:
    h = np.asarray(edges, dtype=float) / 2.0
    return np.array([[sx * h[0], sy * h[1], sz * h[2]] for sx in (-1, 1) for sy in (-1, 1)
                     for sz in (-1, 1)]) + offset


def _write_mesh(path, V, F) -> str:
    """An OBJ or ASCII STL file of vertices V and triangles F at ``path``."""
    with open(path, "w") as f:
        if str(path).endswith(".obj"):
            f.writelines("v %r %r %r\n" % tuple(float(x) for x in v) for v in V)
            f.writelines("f %d %d %d\n" % tuple(int(k) + 1 for k in t) for t in F)
        else:
            f.write("solid mesh\n")
            for t in F:
                f.write("facet normal 0 0 0\nouter loop\n")
                f.writelines("vertex %r %r %r\n" % tuple(float(x) for x in V[k]) for k in t)
                f.write("endloop\nendfacet\n")
            f.write("endsolid mesh\n")
    return str(path)


@pytest.mark.parametrize("suffix", [".obj", ".stl"])
def test_a_mesh_objects_inertia_is_its_solids(tmp_path, suffix):
    """A box-shaped mesh (edges 0.5, 0.25, 0.125 m, off the file's origin by (1, 2, 3)),
    scaled (2, 1, 0.5): its inertia (coal's hull volume and moment about the centre of
    mass) equals the analytic box's of the scaled edges within 1e-9 relative (the edges are
    exact in the 32-bit floats the loader reads), its centre of mass at its frame's origin
    (the hull's vertices at +-half the scaled edges). A regular tetrahedron (vertices
    (+-s, +-s, +-s) with an even count of minus signs, off the origin): I = 0.4 m s^2."""
    from wb_sim.objects import make_object
    m, scale = 3.0, (2.0, 1.0, 0.5)
    edges = np.array([0.5, 0.25, 0.125])
    path = _write_mesh(tmp_path / f"box{suffix}", _box_vertices(edges, (1.0, 2.0, 3.0)),
                       BOX_FACES)
    obj = make_object("crate", "mesh", scale, m, (0.0, 0.0, 1.0), mesh=path)
    ref = solid_inertia("box", edges * scale, m)
    np.testing.assert_allclose(obj.inertia, ref, rtol=0.0, atol=1e-9 * ref.max())
    assert obj.hull.volume == pytest.approx(float(np.prod(edges * scale)), rel=1e-12)
    np.testing.assert_allclose(obj.hull.com, np.array([1.0, 2.0, 3.0]) * scale, atol=1e-12)
    np.testing.assert_allclose(np.abs(obj.hull.vertices), np.tile(edges * scale / 2, (8, 1)),
                               atol=1e-12)
    assert obj.lowest(np.array([0.0, 0.0, 1.0])) == pytest.approx(edges[2] * scale[2] / 2)
    sv = 0.125
    T = sv * np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) + [0.5, 0.0, 0.0]
    path = _write_mesh(tmp_path / f"tetra{suffix}", T, [[0, 1, 2], [0, 3, 1], [0, 2, 3],
                                                        [1, 3, 2]])
    tet = make_object("tet", "mesh", (1, 1, 1), m, (0.0, 0.0, 1.0), mesh=path)
    np.testing.assert_allclose(tet.inertia, 0.4 * m * sv * sv * np.eye(3), rtol=0.0,
                               atol=1e-12 * m * sv * sv)
    np.testing.assert_allclose(tet.hull.com, [0.5, 0.0, 0.0], atol=1e-15)


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_mesh_cube_falls_and_rests_as_the_box_of_its_size(tmp_path, model):
    """A cube mesh (STL, 0.25 m) and the primitive box of its size, both dropped tilted from
    0.4 m side by side: they rest at the same height within 1e-6 m (measured: equal to
    rounding), upright, at rest; a mesh spawned later falls onto the ground too."""
    a = 0.25
    path = _write_mesh(tmp_path / "cube.stl", _box_vertices((a, a, a)), BOX_FACES)
    tilt = (0.2, 0.1, 0.3)
    p = _objects(dict(name="mesh", shape="mesh", size=(1.0, 1.0, 1.0), mass=2.0,
                      position=(0.0, 0.0, 0.4), rpy=tilt),
                 dict(name="box", shape="box", size=(a, a, a), mass=2.0,
                      position=(1.0, 0.0, 0.4), rpy=tilt), **{"contact.model": model})
    p["objects.meshes"] = [path, ""]
    sim = wb_sim.Simulator.from_params(p)
    np.testing.assert_allclose(sim.objects[0].inertia, sim.objects[1].inertia, rtol=0.0,
                               atol=1e-12 * sim.objects[1].inertia[0][0])
    _run(sim, round(1.5 / sim.dt))
    assert np.isfinite(sim.q).all()
    mesh, box = sim.object_pose("mesh"), sim.object_pose("box")
    print(f"mesh cube at {mesh.translation[2]!r} m, box at {box.translation[2]!r} m ({model})")
    assert mesh.translation[2] == pytest.approx(box.translation[2], abs=1e-6)
    assert box.translation[2] == pytest.approx(a / 2, abs=1e-3)  # it came down
    assert abs(mesh.rotation[2]).max() == pytest.approx(1.0, abs=1e-6)  # a face down
    assert np.linalg.norm(sim.object_twist("mesh")[0]) < 1e-3
    sim.spawn_object("late", "mesh", (0.5, 0.5, 0.5), 1.0, (-1.0, 0.0, 0.3), mesh=path)
    _run(sim, 500)
    assert sim.object_pose("late").translation[2] == pytest.approx(a / 4, abs=1e-3)


def test_mesh_refusals_name_the_file_and_the_fix(tmp_path):
    cube = _write_mesh(tmp_path / "cube.obj", _box_vertices((0.2, 0.2, 0.2)), BOX_FACES)
    flat = _write_mesh(tmp_path / "flat.obj", _box_vertices((0.2, 0.2, 0.0)), BOX_FACES)
    junk = tmp_path / "junk.stl"
    junk.write_bytes(b"\x00\x01 not a mesh" * 3)
    other = tmp_path / "part.ply"
    other.write_text("ply\n")

    def params(mesh, size=(1.0, 1.0, 1.0), shape="mesh", **extra):
        p = _objects(dict(name="part", shape=shape, size=size, mass=1.0,
                          position=(0.0, 0.0, 0.5)), **extra)
        p["objects.meshes"] = [mesh]
        return p

    for p, fragment in (
            (params(str(tmp_path / "none.stl")), r"mesh file '.*none.stl' does not exist"),
            (params(str(tmp_path)), r"mesh file .* is not a regular file"),
            (params(str(junk)), r"cannot read mesh file '.*junk.stl'"),
            (params(str(other)), r"mesh file .*: its format .\.ply. is not read; the formats "
                                 r"are .stl, .obj, .dae"),
            (params(cube, size=(1.0, 0.0, 1.0)), r"a mesh.s size is its scale along x, y, z: "
                                                 r"each must be > 0"),
            (params(cube, size=(1.0, -2.0, 1.0)), r"a mesh.s size .* each must be > 0"),
            (params(flat), r"mesh file .* is flat: its convex hull has no volume"),
            (params(cube, **{"objects.max_mesh_vertices": 7}),
             r"mesh file .* has 8 vertices, more than objects.max_mesh_vertices = 7"),
            (params("", shape="mesh"), r"a mesh object needs its file"),
            (params(cube, shape="box", size=(0.2, 0.2, 0.2)), r"a box takes no mesh file")):
        with pytest.raises(ConfigError, match=r"parameter 'objects.names' \(part\): object "
                                              r"'part': " + fragment):
            wb_sim.Simulator.from_params(p)
    sim = wb_sim.Simulator.from_params(params(cube))
    q = sim.q.copy()
    with pytest.raises(CommandError, match=r"spawn_object: object 'x': mesh file .* does not "
                                           r"exist"):
        sim.spawn_object("x", "mesh", (1, 1, 1), 1.0, (1.0, 0.0, 0.5), mesh="/no/such.stl")
    with pytest.raises(CommandError, match=r"under the ground"):
        sim.spawn_object("x", "mesh", (1, 1, 1), 1.0, (1.0, 0.0, 0.05), mesh=cube)
    np.testing.assert_array_equal(sim.q, q)


def test_a_relative_mesh_path_is_the_parameter_files(tmp_path):
    import yaml
    _write_mesh(tmp_path / "cube.obj", _box_vertices((0.2, 0.2, 0.2)), BOX_FACES)
    doc = {"wb_sim": {"ros__parameters": {
        "robot_description": POST, "floating_base": False, "contact_surfaces": [],
        "objects": {"names": ["part"], "shapes": ["mesh"], "sizes": [1.0, 1.0, 1.0],
                    "mass": [1.0], "positions": [0.0, 0.0, 0.5], "meshes": ["cube.obj"]}}}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    sim = wb_sim.Simulator.from_yaml(tmp_path / "p.yaml")
    assert sim.objects[0].mesh == str((tmp_path / "cube.obj").resolve())


# ----------------------------------------------------------------------------- state


def _ball_on_box(**extra):
    return wb_sim.Simulator.from_params(_objects(
        dict(name="crate", shape="box", size=(0.3, 0.3, 0.2), mass=4.0,
             position=(0.0, 0.0, 0.1)),
        dict(name="ball", shape="sphere", size=(0.06, 0.0, 0.0), mass=0.3,
             position=(0.05, 0.0, 0.4), linear_velocity=(0.3, 0.1, 0.0)),
        dict(name="can", shape="cylinder", size=(0.04, 0.12, 0.0), mass=0.4,
             position=(0.6, 0.0, 0.2), rpy=(0.3, 0.0, 0.0)),
        dict(name="pill", shape="capsule", size=(0.03, 0.1, 0.0), mass=0.2,
             position=(-0.6, 0.0, 0.2), rpy=(1.2, 0.0, 0.0)), **extra))


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_snapshots_with_objects_continue_bit_identically(model):
    sim = _ball_on_box(**{"contact.model": model})
    _run(sim, 250)  # the ball lands on the crate, the can and the pill on the ground
    snap = sim.get_state()
    _run(sim, 150)
    q, v = sim.q.copy(), sim.v.copy()
    sim.set_state(snap)
    _run(sim, 150)
    np.testing.assert_array_equal(sim.q, q)
    np.testing.assert_array_equal(sim.v, v)
    for name in ("ball", "can", "pill"):  # each came to touch something and rests above ground
        assert sim.object_pose(name).translation[2] > 0.0


def test_spawn_and_delete_carry_the_robots_state_and_the_others():
    sim = _ball_on_box()
    _run(sim, 100)
    joints, crate = sim.joint_positions.copy(), sim.object_pose("crate").translation.copy()
    t = sim.t
    obj = sim.spawn_object("cube", "box", (0.1, 0.1, 0.1), 1.0, (1.0, 1.0, 0.3),
                           linear_velocity=(0.0, 0.0, -1.0))
    assert obj.inertia[0][0] == pytest.approx(1.0 * 0.02 / 12)
    assert sim.t == t
    np.testing.assert_array_equal(sim.joint_positions, joints)
    np.testing.assert_array_equal(sim.object_pose("crate").translation, crate)
    np.testing.assert_allclose(sim.object_twist("cube")[0], [0.0, 0.0, -1.0])
    assert [o.name for o in sim.objects] == ["crate", "ball", "can", "pill", "cube"]
    _run(sim, 300)
    assert sim.object_pose("cube").translation[2] == pytest.approx(0.05, abs=1e-3)  # landed
    ball = sim.object_pose("ball").translation.copy()
    sim.delete_object("crate")
    np.testing.assert_array_equal(sim.object_pose("ball").translation, ball)
    assert [o.name for o in sim.objects] == ["ball", "can", "pill", "cube"]
    assert sim.model.nq == 1 + 7 * 4
    sim.reset()  # every object back at its initial (spawn) pose
    np.testing.assert_allclose(sim.object_pose("cube").translation, [1.0, 1.0, 0.3])


def test_the_robots_layout_is_unchanged_by_objects():
    plain = wb_sim.Simulator.from_params({"robot_description": BODY_ARM, "floating_base": True})
    sim = wb_sim.Simulator.from_params(_objects(
        dict(name="brick", shape="box", size=(0.1, 0.1, 0.1), mass=1.0,
             position=(2.0, 0.0, 0.05)),
        robot_description=BODY_ARM, floating_base=True))
    assert list(sim.joint_names) == list(plain.joint_names) == ["shoulder"]
    assert sim.model.nq == plain.model.nq + 7 and sim.model.nv == plain.model.nv + 6
    assert sim.mass == pytest.approx(plain.mass)  # the objects are not the robot's mass
    np.testing.assert_array_equal(sim.q[:plain.model.nq], plain.q)


# ----------------------------------------------------------------------------- refusals


def _one(**o):
    base = dict(name="box", shape="box", size=(0.2, 0.2, 0.2), mass=1.0,
                position=(0.0, 0.0, 0.1))
    base.update(o)
    return _objects(base)


def test_refusals_name_the_parameter_and_the_fix():
    with pytest.raises(ConfigError, match=r"unknown shape 'boxx'; did you mean 'box'"):
        wb_sim.Simulator.from_params(_one(shape="boxx"))
    with pytest.raises(ConfigError, match=r"objects.names.*mass -1 kg.*must be > 0"):
        wb_sim.Simulator.from_params(_one(mass=-1.0))
    with pytest.raises(ConfigError, match=r"objects.positions.*'box' starts 50.0 mm under the "
                                          r"ground.*raise its position"):
        wb_sim.Simulator.from_params(_one(position=(0.0, 0.0, 0.05)))
    with pytest.raises(ConfigError, match=r"a sphere's size is radius"):
        wb_sim.Simulator.from_params(_one(shape="sphere", size=(0.0, 0.0, 0.0)))
    p = _one()
    p["objects.positions"] = [0.0, 0.0]
    with pytest.raises(ConfigError, match=r"'objects.positions' has 2 entries.*give 3"):
        wb_sim.Simulator.from_params(p)
    sim = wb_sim.Simulator.from_params(_one())
    with pytest.raises(CommandError, match=r"no object named 'bx'; did you mean 'box'"):
        sim.object_pose("bx")
    with pytest.raises(CommandError, match=r"delete_object: no object named 'boks'"):
        sim.delete_object("boks")
    with pytest.raises(CommandError, match=r"exists already"):
        sim.spawn_object("box", "sphere", (0.1, 0, 0), 1.0, (1.0, 0.0, 0.5))
    q = sim.q.copy()
    with pytest.raises(CommandError, match=r"under the ground.*the state is untouched"):
        sim.spawn_object("deep", "sphere", (0.1, 0, 0), 1.0, (1.0, 0.0, 0.0))
    with pytest.raises(CommandError, match=r"frame of the robot"):
        sim.spawn_object("arm", "sphere", (0.1, 0, 0), 1.0, (1.0, 0.0, 0.5))
    with pytest.raises(CommandError, match=r"negative|must be > 0"):
        sim.spawn_object("neg", "sphere", (0.1, 0, 0), -2.0, (1.0, 0.0, 0.5))
    np.testing.assert_array_equal(sim.q, q)
    assert [o.name for o in sim.objects] == ["box"]


def test_surface_points_lie_on_each_shapes_surface():
    """The points the heightfield check queries (FreeObject.surface_points) are on the
    surface, by each shape's own formula, and spread over all of it."""
    from wb_sim.objects import make_object
    cases = {"box": (0.3, 0.2, 0.1), "sphere": (0.07, 0, 0), "cylinder": (0.05, 0.3, 0),
             "capsule": (0.05, 0.3, 0)}
    for shape, size in cases.items():
        P = make_object("o", shape, size, 1.0, (0, 0, 1)).surface_points(500)
        a, b, c = size
        if shape == "box":
            gap = np.max(np.abs(P) / (np.array(size) / 2), axis=1) - 1.0
        elif shape == "sphere":
            gap = np.linalg.norm(P, axis=1) / a - 1.0
        elif shape == "cylinder":
            gap = np.maximum(np.hypot(P[:, 0], P[:, 1]) / a, np.abs(P[:, 2]) / (b / 2)) - 1.0
        else:  # the distance to the axis segment is the radius
            z = np.clip(P[:, 2], -b / 2, b / 2)
            gap = np.linalg.norm(P - np.stack([0 * z, 0 * z, z], axis=1), axis=1) / a - 1.0
        np.testing.assert_allclose(gap, 0.0, atol=1e-12, err_msg=shape)
        # every side reached: the extent along each axis is the shape's
        extent = P.max(axis=0) - P.min(axis=0)
        full = {"box": size, "sphere": (2 * a,) * 3, "cylinder": (2 * a, 2 * a, b),
                "capsule": (2 * a, 2 * a, b + 2 * a)}[shape]
        np.testing.assert_allclose(extent, full, rtol=0.05, err_msg=shape)


def test_an_object_inside_the_terrain_is_refused_and_one_on_it_rests():
    """A box placed 5 cm into a terrain box, a step of stairs or the heightfield is refused
    (ConfigError naming objects.positions, the item and the fix; spawn_object's
    CommandError, the state untouched); one placed on a terrain box's top rests there (its
    centre at the top + its half height within 1 mm after 0.5 s)."""
    terrain = {"terrain.boxes": [1.0, 0.0, 0.1, 0.6, 0.6, 0.2, 0.3],
               "terrain.stairs": [-2.0, 0.0, 0.0, 0.3, 0.15, 1.0, 3, 0.0]}

    def box_at(position, **extra):
        return _objects(dict(name="crate", shape="box", size=(0.2, 0.2, 0.2), mass=1.0,
                             position=position), **terrain, **extra)

    with pytest.raises(ConfigError, match=r"objects.positions' \(crate\): object 'crate' starts "
                                          r"50.0 mm inside terrain box 0 \(terrain.boxes\).*"
                                          r"place it on or above the terrain"):
        wb_sim.Simulator.from_params(box_at((1.0, 0.0, 0.25)))
    # the second step of the flight: x in [-1.7, -1.4], top at 0.3 m
    with pytest.raises(ConfigError, match=r"starts 50.0 mm inside step 1 of the stairs "
                                          r"\(terrain.stairs\)"):
        wb_sim.Simulator.from_params(box_at((-1.55, 0.0, 0.35)))
    sim = wb_sim.Simulator.from_params(box_at((1.0, 0.0, 0.3)))  # on the box's top
    q = sim.q.copy()
    for where, fragment in (((1.2, 0.1, 0.2), "inside terrain box 0"),
                            ((-1.3, 0.3, 0.45), "inside step 2 of the stairs")):
        with pytest.raises(CommandError, match=rf"spawn_object: object 'ball' starts .* mm "
                                               rf"{fragment}.*; the state is untouched"):
            sim.spawn_object("ball", "sphere", (0.1, 0, 0), 1.0, where)
    np.testing.assert_array_equal(sim.q, q)
    assert [o.name for o in sim.objects] == ["crate"]
    sim.spawn_object("ball", "sphere", (0.1, 0, 0), 1.0, (-1.3, 0.3, 0.55))  # on step 2
    _run(sim, 500)
    assert sim.object_pose("crate").translation[2] == pytest.approx(0.3, abs=1e-3)
    assert sim.object_pose("ball").translation[2] == pytest.approx(0.55, abs=1e-3)


def test_an_object_inside_the_heightfield_is_refused(tmp_path):
    """A plateau of the heightfield (0.3 m high for |x| < 0.5 m) reaches 5 cm into a box
    placed on it: refused, naming terrain.heightfield; 1 cm over it, accepted; a ball
    spawned into it: refused."""
    grid = np.zeros((5, 5))
    grid[:, 1:4] = 0.3  # cells 0.5 m: x in -1..1, flat at 0.3 m for |x| <= 0.5
    path = tmp_path / "ridge.npy"
    np.save(path, grid)
    field = {"terrain.heightfield": str(path), "terrain.heightfield_size": [2.0, 2.0],
             "terrain.heightfield_origin": [-1.0, -1.0, 0.0]}

    def box_at(z):
        return _objects(dict(name="crate", shape="box", size=(0.2, 0.2, 0.2), mass=1.0,
                             position=(0.0, 0.0, z)), **field)

    with pytest.raises(ConfigError, match=r"starts 50.0 mm inside the heightfield "
                                          r"\(terrain.heightfield\)"):
        wb_sim.Simulator.from_params(box_at(0.35))
    sim = wb_sim.Simulator.from_params(box_at(0.41))
    with pytest.raises(CommandError, match=r"inside the heightfield"):
        sim.spawn_object("ball", "sphere", (0.1, 0, 0), 1.0, (0.0, 0.5, 0.3))


def test_set_object_state_moves_one_object_and_refuses_it_under_the_ground():
    """set_object_state (the node's SetEntityState): a box set 1 m up with a twist reads
    back that pose and twist and then flies as semi-implicit Euler's free fall
    (x_N = x_0 + v_0 N dt - g dt^2 N (N + 1) / 2) spinning at the set rate; the other
    object does not move; under the ground, an unknown name and a zero quaternion are
    refused with the state untouched."""
    sim = wb_sim.Simulator.from_params(_objects(
        dict(name="box", shape="box", size=(0.2, 0.2, 0.1), mass=2.0, position=(0.0, 0.0, 0.05)),
        dict(name="ball", shape="sphere", size=(0.1, 0, 0), mass=1.0, position=(3.0, 0.0, 0.1))))
    ball = sim.object_poses()[1].copy()
    yaw = 0.4
    quat = [0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)]
    sim.set_object_state("box", position=[1.0, 2.0, 1.0], quaternion=quat,
                         linear_velocity=[0.5, 0.0, 2.0], angular_velocity=[0.0, 0.0, 3.0])
    assert np.array_equal(sim.object_poses()[0], [1.0, 2.0, 1.0, *quat])
    lin, ang = sim.object_twist("box")
    assert np.array_equal(lin, [0.5, 0.0, 2.0]) and np.allclose(ang, [0.0, 0.0, 3.0],
                                                                  atol=1e-15)
    n, dt = 200, sim.dt
    _run(sim, n)
    expected = np.array([1.0, 2.0, 1.0]) + np.array([0.5, 0.0, 2.0]) * n * dt \
        - np.array([0.0, 0.0, G0]) * dt * dt * n * (n + 1) / 2
    pose = sim.object_pose("box")
    assert np.allclose(pose.translation, expected, atol=1e-12, rtol=0.0), \
        pose.translation - expected
    turned = math.atan2(pose.rotation[1, 0], pose.rotation[0, 0])
    assert turned == pytest.approx(yaw + 3.0 * n * dt, abs=1e-9)
    assert np.array_equal(sim.object_poses()[1][:2], ball[:2])  # the ball rests
    q0, v0 = sim.q.copy(), sim.v.copy()
    for kwargs, fragment in ((dict(position=[0.0, 0.0, 0.02]), "under the ground"),
                             (dict(quaternion=[0, 0, 0, 0]), "quaternion is zero")):
        with pytest.raises(CommandError, match=fragment):
            sim.set_object_state("box", **kwargs)
    with pytest.raises(CommandError, match="did you mean 'ball'"):
        sim.set_object_state("bal", position=[0.0, 0.0, 1.0])
    assert np.array_equal(sim.q, q0) and np.array_equal(sim.v, v0)
