"""Terrain beyond the ground plane (wb_sim/terrain.py): boxes, stairs and a
heightfield, met by every contact point with the local height and normal.

Checked against numbers: the signed distance's normal is its numerical gradient
(also at a box's edges and corners); a heightfield's normal is the analytic
surface normal within 1 deg; a cube resting on a step carries its weight and
sinks the law's static sink (compliant) or nothing (rigid); a cube pushed off a
step lands on the next one down; a ball rolling down stairs ends lower and never
gains energy; the plane alone keeps its fast path (no terrain object)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import wb_sim
from wb_sim.terrain import (Box, Heightfield, Terrain, box_query, stairs_boxes, tangent_bases,
                            tangent_bases_reference)

from helpers.contact_reference import G, static_sink
from core.contact.test_contact_robustness import K_DEFAULT, SIDE, cube_params

STEP_H, STEP_D = 0.05, 0.3


def _numeric_gradient(f, P, eps=1e-7):
    out = np.zeros_like(P)
    for a in range(3):
        d = np.zeros(3)
        d[a] = eps
        out[:, a] = (f(P + d) - f(P - d)) / (2 * eps)
    return out


@pytest.mark.parametrize("yaw", [0.0, 0.7])
def test_box_distance_and_normal_are_the_exact_sdf_and_its_gradient(yaw):
    box = Box(np.array([0.3, -0.2, 0.1]), np.array([0.2, 0.1, 0.1]), yaw)
    rng = np.random.default_rng(3)
    P = box.centre + rng.uniform(-0.4, 0.4, (400, 3))
    sdf, normal = box_query(box, P)
    np.testing.assert_allclose(np.linalg.norm(normal, axis=1), 1.0, atol=1e-12)
    grad = _numeric_gradient(lambda X: box_query(box, X)[0], P)
    # away from the medial surfaces inside (where the nearest face switches) the
    # gradient is the normal, outside everywhere, edges and corners included
    ok = sdf > 1e-4
    assert ok.sum() > 200
    np.testing.assert_allclose(normal[ok], grad[ok], atol=1e-5)
    # a point 1 cm out along the diagonal of a top edge: the edge's normal, 45 deg
    c, s = math.cos(yaw), math.sin(yaw)
    edge = box.centre + np.array([c * 0.2, s * 0.2, 0.1])
    out = edge + 0.01 * np.array([c, s, 1.0]) / math.sqrt(2)
    d, n = box_query(box, out[None])
    assert d[0] == pytest.approx(0.01, abs=1e-12)
    np.testing.assert_allclose(n[0], np.array([c, s, 1.0]) / math.sqrt(2), atol=1e-12)


def test_heightfield_normal_is_the_surface_normal_within_one_degree(tmp_path):
    A, L, N = 0.05, 2.0, 201
    x = np.linspace(0.0, L, N)
    X, Y = np.meshgrid(x, x)  # rows along y, columns along x
    H = A * np.sin(2 * np.pi * X / L) * np.cos(2 * np.pi * Y / L)
    np.save(tmp_path / "h.npy", H)
    field = Heightfield.load(str(tmp_path / "h.npy"), [L, L], [0.0, 0.0, 0.0], 1.0)
    rng = np.random.default_rng(1)
    P = np.column_stack([rng.uniform(0.1, 1.9, 300), rng.uniform(0.1, 1.9, 300),
                         np.zeros(300)])
    h = A * np.sin(2 * np.pi * P[:, 0] / L) * np.cos(2 * np.pi * P[:, 1] / L)
    P[:, 2] = h + 0.002
    sdf, normal = field.query(P)
    hx = A * 2 * np.pi / L * np.cos(2 * np.pi * P[:, 0] / L) * np.cos(2 * np.pi * P[:, 1] / L)
    hy = -A * 2 * np.pi / L * np.sin(2 * np.pi * P[:, 0] / L) * np.sin(2 * np.pi * P[:, 1] / L)
    exact = np.column_stack([-hx, -hy, np.ones_like(hx)])
    exact /= np.linalg.norm(exact, axis=1)[:, None]
    angle = np.degrees(np.arccos(np.clip(np.sum(normal * exact, axis=1), -1, 1)))
    assert angle.max() < 1.0, angle.max()
    np.testing.assert_allclose(sdf, 0.002 * exact[:, 2], atol=2e-4)
    off = field.query(np.array([[3.0, 0.5, 0.0]]))[0]
    assert off[0] == np.inf


def _on_step(model, **extra):
    """A 2 kg cube resting on a 5 cm step (a box of the terrain), its sink applied."""
    sink = static_sink(2.0, K_DEFAULT) if model == "compliant" else 0.0
    return wb_sim.Simulator.from_params(cube_params(2.0, **{
        "contact.model": model, "terrain.boxes": [0.0, 0.0, STEP_H / 2, 0.6, 0.6, STEP_H, 0.3],
        "initial.base_position": [0.0, 0.0, STEP_H - sink], **extra}))


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_cube_rests_on_a_step(model):
    sim = _on_step(model)
    assert sim.terrain is not None
    fz = []
    for _ in range(1000):
        sim.step(np.zeros(0))
        fz.append(sim.contact_wrench_array()[0, 2])
    ratio = np.array(fz[-200:]) / (2.0 * G)
    assert np.abs(ratio - 1.0).max() < 1e-2
    z = sim.q[2]
    if model == "compliant":
        assert STEP_H - z == pytest.approx(static_sink(2.0, K_DEFAULT), rel=0.03)
    else:
        assert abs(STEP_H - z) < 1e-5
    np.testing.assert_allclose(sim.q[:2], 0.0, atol=1e-6)  # no creep on a level top


def test_a_cube_pushed_off_a_step_lands_on_the_next_one_down():
    """Stairs rising along +x from x = 0: steps 1..3, tops at 5, 10, 15 cm. A cube
    with contact points on its 8 corners, pushed at 0.8 m/s off step 3's lower
    edge (friction 0.2), tips over the edge and comes to rest on step 2, on a face:
    its centre one half side above that step's top, and its footprint on it."""
    h = SIDE / 2
    corners = [c for x in (-h, h) for y in (-h, h) for z in (0.0, SIDE) for c in (x, y, z)]
    stairs = [0.0, 0.0, 0.0, STEP_D, STEP_H, 1.0, 3, 0.0]
    sim = wb_sim.Simulator.from_params(cube_params(2.0, **{
        "bottom.shape": "points", "bottom.points": corners, "terrain.stairs": stairs,
        "contact.friction_coefficient": 0.2, "initial.base_position": [0.66, 0.0, 0.151]}))
    assert len(stairs_boxes(stairs)) == 3
    for _ in range(200):
        sim.step(np.zeros(0))
    f = 2.0 * 0.8 / sim.dt  # 0.8 m/s in one step, at the centre of mass
    sim.apply_external_wrench("cube", force=[-f, 0.0, 0.0], torque=[0.0, -f * h, 0.0],
                              duration_s=sim.dt)
    for _ in range(3000):
        sim.step(np.zeros(0))
    com = sim.center_of_mass()
    assert STEP_D + h < com[0] < 2 * STEP_D - h, com  # on step 2, whole
    assert com[2] == pytest.approx(2 * STEP_H + h, abs=1e-3), com  # lying on a face on its top
    assert np.linalg.norm(sim.v) < 1e-3


BALL = ('<robot name="ball"><link name="ball"><inertial><origin xyz="0 0 0" rpy="0 0 0"/>'
        '<mass value="1.0"/><inertia ixx="0.0016" iyy="0.0016" izz="0.0016" ixy="0" ixz="0" '
        'iyz="0"/></inertial></link></robot>')


def test_a_ball_rolls_down_stairs_and_never_gains_energy():
    r = 0.04
    stairs = [0.0, 0.0, 0.0, STEP_D, STEP_H, 1.0, 3, 0.0]
    sim = wb_sim.Simulator.from_params({
        "robot_description": BALL, "contact_surfaces": ["s"], "s.frame": "ball",
        "s.shape": "sphere", "s.radius": r, "terrain.stairs": stairs,
        "initial.base_position": [2.8 * STEP_D, 0.0, 3 * STEP_H + r + 0.002]})
    sim.apply_external_wrench("ball", force=[-0.8 / sim.dt, 0.0, 0.0], duration_s=sim.dt)

    def energy():
        v = sim.v
        return 0.5 * 1.0 * v[:3] @ v[:3] + 0.5 * 0.0016 * v[3:6] @ v[3:6] + 1.0 * G * sim.q[2]

    sim.step(np.zeros(0))
    e0 = energy()
    worst = 0.0
    for _ in range(4000):
        sim.step(np.zeros(0))
        worst = max(worst, energy() - e0)
    assert sim.q[0] < 0.0 and sim.q[2] < r + 0.01  # down all three steps, on the floor
    assert worst < 0.01 * e0, worst  # dissipative contact: never more than it had


def test_the_plane_alone_keeps_the_fast_path():
    sim = wb_sim.Simulator.from_params(cube_params(2.0))
    assert sim.terrain is None and sim.contact_points.bases is None
    with pytest.raises(wb_sim.ConfigError, match="terrain.boxes"):
        wb_sim.Simulator.from_params(cube_params(2.0, **{"terrain.boxes": [0.0, 0.0, 0.1]}))
    with pytest.raises(wb_sim.ConfigError, match="terrain.stairs"):
        wb_sim.Simulator.from_params(cube_params(2.0, **{"terrain.stairs": [0.0] * 8}))


def test_tangent_bases_equal_their_plain_reference_and_are_right_handed():
    """The component-wise bases (the collision and self-collision narrow phases', the
    terrain contacts') against the plain projection and np.cross, on random normals and
    on both sides of the switch from the x to the y reference axis (|n_x| = 0.9)."""
    rng = np.random.default_rng(11)
    n = rng.normal(size=(200, 3))
    a = np.arccos(0.9)
    n = np.vstack([n, [[1, 0, 0], [-1, 0, 0], [0, 0, 1], [0, 1, 0],
                       [0.9, np.sin(a), 0.0], [0.9 - 1e-9, np.sqrt(1 - (0.9 - 1e-9) ** 2), 0.0]]])
    n /= np.linalg.norm(n, axis=1)[:, None]
    B = tangent_bases(n)
    np.testing.assert_allclose(B, tangent_bases_reference(n), rtol=0, atol=1e-15)
    np.testing.assert_allclose(B.transpose(0, 2, 1) @ B, np.broadcast_to(np.eye(3), B.shape),
                               atol=1e-14)
    np.testing.assert_allclose(np.linalg.det(B), 1.0, atol=1e-14)
    np.testing.assert_array_equal(B[:, :, 2], n)


def test_terrain_union_takes_the_nearest_surface():
    t = Terrain(0.0, [0.0, 0.0, 1.0], [Box(np.array([0.0, 0.0, 0.05]),
                                           np.array([0.1, 0.1, 0.05]), 0.0)])
    d, n = t.query(np.array([[0.0, 0.0, 0.12], [0.5, 0.0, 0.01], [0.11, 0.0, 0.05]]))
    np.testing.assert_allclose(d, [0.02, 0.01, 0.01], atol=1e-12)
    np.testing.assert_allclose(n, [[0, 0, 1], [0, 0, 1], [1, 0, 0]], atol=1e-12)


def test_solo12_stands_with_its_front_feet_on_a_5_cm_step():
    """Solo12 (sphere feet, default contact) under joint PD + gravity compensation,
    its front feet on a 5 cm step (a terrain box) and its hind feet on the floor:
    the front feet rest on the step's top, the hind ones on the floor, and the
    vertical reaction equals the weight within 1 % over the last second."""
    from wb_sim.controllers import PDGravityController
    from core.contact.test_robots_default_contact import solo12
    params, feet, kp, kd = solo12()
    params = dict(params)
    x, y, z = params["initial.base_position"]
    # a step from x = 0.05 on (the front feet are at x ~ +0.19, the hind ones at -0.19)
    params.update({"terrain.boxes": [0.55, 0.0, STEP_H / 2, 1.0, 1.0, STEP_H, 0.0],
                   "initial.base_position": [x, y, z + STEP_H]})
    sim = wb_sim.Simulator.from_params(params)
    ctrl = PDGravityController(sim.robot, sim.state.joint_positions, kp, kd,
                               gravity=sim.config.gravity)
    weight = sim.mass * G
    ratio = []
    for i in range(3000):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        if i >= 2000:
            ratio.append(sim.contact_points_state().force[:, 2].sum() / weight)
    heights = {f: sim.frame_pose(f).translation[2] - 0.016 for f in feet}
    for f in ("FL_FOOT", "FR_FOOT"):
        assert heights[f] == pytest.approx(STEP_H, abs=2e-3), heights
    for f in ("HL_FOOT", "HR_FOOT"):
        assert heights[f] == pytest.approx(0.0, abs=2e-3), heights
    assert np.abs(np.array(ratio) - 1.0).max() < 1e-2, (min(ratio), max(ratio))


def _rolling_ball_energy(tmp_path, heightfield: bool) -> tuple[float, float]:
    """(largest energy gain, final energy change), J, of a ball pushed to 1 m/s and
    rolling 2 s, on the plane or across a 1 cm, 1 m-period sinusoidal heightfield."""
    r, A, L = 0.04, 0.01, 4.0
    p = {"robot_description": BALL, "contact_surfaces": ["s"], "s.frame": "ball",
         "s.shape": "sphere", "s.radius": r, "initial.base_position": [0.5, 2.0, r + A]}
    if heightfield:
        x = np.linspace(0.0, L, 401)
        X, _ = np.meshgrid(x, x)
        np.save(tmp_path / "waves.npy", A * np.sin(2 * np.pi * X))
        p.update({"terrain.heightfield": str(tmp_path / "waves.npy"),
                  "terrain.heightfield_size": [L, L], "ground.height": -0.5})
    sim = wb_sim.Simulator.from_params(p)
    for _ in range(300):
        sim.step(np.zeros(0))
    sim.apply_external_wrench("ball", force=[1.0 / sim.dt, 0.0, 0.0], duration_s=sim.dt)

    def energy():
        v = sim.v
        return 0.5 * v[:3] @ v[:3] + 0.5 * 0.0016 * v[3:6] @ v[3:6] + G * sim.q[2]

    sim.step(np.zeros(0))
    e0, gain = energy(), -np.inf
    for _ in range(2000):
        sim.step(np.zeros(0))
        gain = max(gain, energy() - e0)
    assert sim.q[0] > 1.5  # it rolled over at least one wave
    return gain, energy() - e0


def test_a_ball_rolling_over_a_heightfield_loses_energy_as_on_the_plane(tmp_path):
    """The contact law dissipates (the slide to rolling, then rolling resistance): on
    the waves as on the plane the energy never rises above its start, and the loss
    over 2 s is the plane's within 30 %."""
    plane_gain, plane_loss = _rolling_ball_energy(tmp_path, False)
    wave_gain, wave_loss = _rolling_ball_energy(tmp_path, True)
    assert plane_gain <= 1e-9 and wave_gain <= 1e-9, (plane_gain, wave_gain)
    assert wave_loss == pytest.approx(plane_loss, rel=0.3), (wave_loss, plane_loss)


def test_the_drawn_terrain_is_where_the_contact_meets_it(tmp_path):
    """What the meshcat viewer and RViz draw comes from the same Terrain: each box's
    transform maps its local corners to the points where the box's distance is 0,
    and the heightfield mesh's vertices lie on the queried surface (pure data: no
    browser needed)."""
    from wb_sim.terrain import heightfield_mesh, terrain_boxes
    np.save(tmp_path / "h.npy", np.array([[0.0, 0.1], [0.2, 0.3], [0.1, 0.0]]))
    sim = wb_sim.Simulator.from_params(cube_params(2.0, **{
        "terrain.stairs": [0.0, 0.0, 0.4, STEP_D, STEP_H, 1.0, 2, 0.0],
        "terrain.heightfield": str(tmp_path / "h.npy"), "terrain.heightfield_size": [2.0, 1.0],
        "terrain.heightfield_origin": [3.0, 0.0, 0.0], "initial.base_position": [-1, 0, 0.01]}))
    boxes = terrain_boxes(sim.terrain)
    assert len(boxes) == 2
    for (size, T), box in zip(boxes, sim.terrain.boxes):
        corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * size / 2
        world = corners @ T[:3, :3].T + T[:3, 3]
        np.testing.assert_allclose(box_query(box, world)[0], 0.0, atol=1e-12)
    vertices, faces = heightfield_mesh(sim.terrain)
    assert vertices.shape == (6, 3) and faces.shape == (4, 3) and faces.max() == 5
    d, _ = sim.terrain.heightfield.query(vertices)
    np.testing.assert_allclose(d, 0.0, atol=1e-12)
    assert heightfield_mesh(None) is None and terrain_boxes(None) == []
