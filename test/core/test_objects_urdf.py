"""URDF objects (wb_sim/objects.py, shape ``urdf``): a rigid URDF (every joint fixed) as one
free body, its links' inertias combined at their centre of mass, every <collision>
geometry its shape.

Checked against numbers: a two-box URDF's mass and inertia equal the hand-computed
parallel-axis composite (1e-12); it rests on the ground at the height its geometry gives
and the ground's force on it is its weight (0.5 %, both models), as does a box object's
force when it rests on one, and snapshots continue bit for bit; a one-box URDF falls
exactly as the equal box object (1e-12, both models); a URDF mesh part (package://) is its
hull as a mesh object's; a link away from the centre is refused inside the terrain; the
refusals name the file and the joint, the bounds (bytes, links, geometries, mesh bytes)
are checked before anything is read; world and parameter files resolve relative URDFs.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.errors import CommandError, ConfigError
from wb_sim.objects import MAX_URDF_GEOMETRIES, MAX_URDF_LINKS, make_object, solid_inertia

from .test_objects import BOX_FACES, G0, _box_vertices, _objects, _run, _write_mesh


def _inertia_xml(inertia) -> str:
    I = np.asarray(inertia, dtype=float).tolist()  # Python floats: repr round-trips
    return (f'<inertia ixx="{I[0][0]!r}" ixy="{I[0][1]!r}" ixz="{I[0][2]!r}" '
            f'iyy="{I[1][1]!r}" iyz="{I[1][2]!r}" izz="{I[2][2]!r}"/>')


def _box_link(name, edges, mass, xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0)) -> str:
    """A link: a homogeneous box of ``edges`` (m) and ``mass`` (kg), its centre at ``xyz``
    turned by ``rpy`` in the link's frame (inertial and collision alike)."""
    origin = f'<origin xyz="{" ".join(map(repr, xyz))}" rpy="{" ".join(map(repr, rpy))}"/>'
    return (f'<link name="{name}"><inertial>{origin}<mass value="{mass!r}"/>'
            f'{_inertia_xml(solid_inertia("box", edges, mass))}</inertial>'
            f'<collision>{origin}<geometry><box size="{" ".join(map(repr, edges))}"/>'
            f'</geometry></collision></link>')


def _fixed(name, parent, child, xyz, rpy=(0.0, 0.0, 0.0), kind="fixed") -> str:
    axis = '' if kind == "fixed" else ('<axis xyz="0 0 1"/><limit lower="-1" upper="1" '
                                       'effort="1" velocity="1"/>')
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{" ".join(map(repr, xyz))}" rpy="{" ".join(map(repr, rpy))}"/>'
            f'{axis}</joint>')


#: the two-box object: a 0.4 x 0.3 x 0.1 m, 3 kg slab (its centre 0.01 m off its link's
#: origin) and on it, by a fixed joint 0.16 m up and 0.1 m ahead and turned 0.4 rad about z,
#: a 0.2 x 0.1 x 0.2 m, 1 kg block; the slab's bottom is the lowest point
A_EDGES, A_MASS, A_XYZ = (0.4, 0.3, 0.1), 3.0, (0.01, 0.0, 0.0)
B_EDGES, B_MASS, B_XYZ, B_YAW = (0.2, 0.1, 0.2), 1.0, (0.1, 0.0, 0.16), 0.4
TWO_BOXES = ('<robot name="two_boxes">' + _box_link("slab", A_EDGES, A_MASS, A_XYZ)
             + _box_link("block", B_EDGES, B_MASS)
             + _fixed("weld", "slab", "block", B_XYZ, (0.0, 0.0, B_YAW)) + '</robot>')


def _urdf_objects(*objs, **extra):
    """``_objects`` with urdf objects: dicts with name, urdf, position (rpy, velocities)."""
    full = [dict(o, shape=o.get("shape", "urdf"), size=o.get("size", (0.0, 0.0, 0.0)),
                 mass=o.get("mass", 0.0)) for o in objs]
    p = _objects(*full, **extra)
    p["objects.urdfs"] = [o.get("urdf", "") for o in objs]
    return p


def _parallel_axis(parts):
    """(mass, centre of mass, inertia about it) of point-placed solids by hand: each part
    (m, centre c, rotation R, inertia I about c in its axes) summed with Steiner's term."""
    M = sum(m for m, _, _, _ in parts)
    com = sum(m * np.asarray(c) for m, c, _, _ in parts) / M
    total = np.zeros((3, 3))
    for m, c, R, I in parts:
        d = np.asarray(c) - com
        total += R @ I @ R.T + m * (d @ d * np.eye(3) - np.outer(d, d))
    return M, com, total


def test_a_two_box_urdfs_mass_and_inertia_are_the_parallel_axis_composite(tmp_path):
    """Mass 4 kg; inertia about the combined centre of mass equal to the hand-computed
    parallel-axis sum of the two boxes' (the block's turned by its joint's yaw) within
    1e-12 kg*m^2; the solids placed about that centre (slab and block centres minus it)."""
    path = tmp_path / "two_boxes.urdf"
    path.write_text(TWO_BOXES)
    obj = make_object("pair", "urdf", None, None, (0.0, 0.0, 1.0), urdf=str(path))
    Rb = pin.rpy.rpyToMatrix(0.0, 0.0, B_YAW)
    M, com, I = _parallel_axis([
        (A_MASS, A_XYZ, np.eye(3), solid_inertia("box", A_EDGES, A_MASS)),
        (B_MASS, B_XYZ, Rb, solid_inertia("box", B_EDGES, B_MASS))])
    assert obj.mass == pytest.approx(M, abs=1e-15)
    np.testing.assert_allclose(obj.inertia, I, rtol=0.0, atol=1e-12)
    assert abs(I[0, 2]) > 1e-3  # the offsets couple x and z: the test sees the cross terms
    assert obj.urdf == str(path.resolve())
    slab, block = obj.parts
    np.testing.assert_allclose(slab.position, np.array(A_XYZ) - com, rtol=0.0, atol=1e-15)
    np.testing.assert_allclose(block.position, np.array(B_XYZ) - com, rtol=0.0, atol=1e-15)
    np.testing.assert_allclose(block.placement().rotation, Rb, rtol=0.0, atol=1e-15)
    # the object's lowest point: the slab's bottom, 0.05 m under its centre
    assert obj.lowest(np.array([0.0, 0.0, 1.0])) == pytest.approx(0.05 + com[2] - A_XYZ[2],
                                                                  abs=1e-15)
    # pinocchio's own merge of the fixed links (its URDF parser) agrees
    merged = pin.buildModelFromXML(TWO_BOXES, pin.JointModelFreeFlyer()).inertias[1]
    np.testing.assert_allclose(merged.lever, com, rtol=0.0, atol=1e-15)
    np.testing.assert_allclose(merged.inertia, I, rtol=0.0, atol=1e-12)


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_the_two_box_urdf_rests_at_its_height_carrying_its_weight(model):
    """Dropped from 2 cm (its XML spawned as a string), it comes to rest with the slab's
    bottom on the ground: its centre of mass at 0.05 m + its height above the slab's centre
    (within 1 mm: the compliant ground's sink), level, at rest; the ground's force on it
    sums to its weight within 0.5 %."""
    M, com, _ = _parallel_axis([(A_MASS, A_XYZ, np.eye(3), np.eye(3)),
                                (B_MASS, B_XYZ, np.eye(3), np.eye(3))])
    rest = A_EDGES[2] / 2.0 + com[2] - A_XYZ[2]
    sim = wb_sim.Simulator.from_params(_urdf_objects(
        dict(name="pair", urdf=TWO_BOXES, position=(0.0, 0.0, rest + 0.02)),
        **{"contact.model": model}))
    _run(sim, round(1.0 / sim.dt))
    assert np.isfinite(sim.q).all()
    pose = sim.object_pose("pair")
    c = sim.collision_points_state()
    on = [i for i, s in enumerate(c.surface) if s == "pair"]
    force = c.force[on].sum(axis=0)
    print(f"{model}: centre of mass at {pose.translation[2]!r} m (geometry: {rest!r}), "
          f"ground force {force.tolist()} N on weight {M * G0!r} N")
    assert pose.translation[2] == pytest.approx(rest, abs=1e-3)
    assert pose.rotation[2, 2] > 1.0 - 1e-6
    assert np.linalg.norm(sim.object_twist("pair")[0]) < 1e-3
    np.testing.assert_allclose(force, [0.0, 0.0, M * G0], rtol=0.0, atol=5e-3 * M * G0)


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_a_one_box_urdf_falls_exactly_as_the_box_object(model):
    """A URDF of one box link (its inertial at the link's origin) and the box object of the
    same edges and mass, each alone, dropped tilted and spinning from 0.3 m: their states
    agree within 1e-12 at every step over 0.6 s (the fall, the impact, the tumble)."""
    edges, m = (0.3, 0.2, 0.1), 2.5
    xml = f'<robot name="crate">{_box_link("body", edges, m)}</robot>'
    start = dict(position=(0.0, 0.0, 0.3), rpy=(0.3, -0.2, 0.5),
                 angular_velocity=(1.0, -2.0, 0.5), linear_velocity=(0.4, 0.0, 0.0))
    sims = [wb_sim.Simulator.from_params(_urdf_objects(dict(name="crate", urdf=xml, **start),
                                                       **{"contact.model": model})),
            wb_sim.Simulator.from_params(_objects(dict(name="crate", shape="box", size=edges,
                                                       mass=m, **start),
                                                  **{"contact.model": model}))]
    assert sims[0].objects[0].shape == "urdf" and sims[1].objects[0].shape == "box"
    worst, touched = 0.0, False
    for _ in range(round(0.6 / sims[0].dt)):
        for sim in sims:
            _run(sim, 1)
        worst = max(worst, float(np.abs(sims[0].q - sims[1].q).max()),
                    float(np.abs(sims[0].v - sims[1].v).max()))
        touched |= bool(len(sims[1].collision_points_state().surface))
    print(f"{model}: largest difference {worst!r}")
    assert touched  # it reached the ground
    assert worst <= 1e-12


def test_a_urdf_mesh_part_is_its_convex_hull_found_through_package_uri(tmp_path):
    """A URDF in <pkg>/urdf/ whose link's collision is package://<pkg>/meshes/cube.stl
    (0.2 m cube, off the mesh's origin, scaled 0.5 along z) and a sphere: the mesh part is
    its hull about its centre, placed at the link's collision origin plus the cube's
    centre; spawned through the Python API it falls to rest on the cube's face."""
    pkg = tmp_path / "my_objects"
    (pkg / "urdf").mkdir(parents=True)
    (pkg / "meshes").mkdir()
    _write_mesh(pkg / "meshes" / "cube.stl", _box_vertices((0.2, 0.2, 0.2), (0.0, 0.0, 0.1)),
                BOX_FACES)
    m = 1.0
    I = solid_inertia("box", (0.2, 0.2, 0.1), m)
    (pkg / "urdf" / "cube.urdf").write_text(
        f'<robot name="cube"><link name="body"><inertial><origin xyz="0 0 0.05"/>'
        f'<mass value="{m}"/>{_inertia_xml(I)}</inertial>'
        f'<collision><geometry><mesh filename="package://my_objects/meshes/cube.stl" '
        f'scale="1 1 0.5"/></geometry></collision>'
        f'<collision><origin xyz="0 0 0.15"/><geometry><sphere radius="0.05"/></geometry>'
        f'</collision></link></robot>')
    sim = wb_sim.Simulator.from_params(_objects())
    obj = sim.spawn_object("cube", "urdf", None, None, (0.0, 0.0, 0.2),
                           urdf=str(pkg / "urdf" / "cube.urdf"))
    mesh, ball = obj.parts
    assert mesh.shape == "mesh" and mesh.mesh == str((pkg / "meshes" / "cube.stl").resolve())
    np.testing.assert_allclose(mesh.position, [0.0, 0.0, 0.0], atol=1e-7)  # float32 file
    np.testing.assert_allclose(np.abs(mesh.hull.vertices), np.tile([0.1, 0.1, 0.05], (8, 1)),
                               atol=1e-7)
    np.testing.assert_allclose(ball.position, [0.0, 0.0, 0.1], atol=1e-15)
    np.testing.assert_allclose(obj.inertia, I, rtol=0.0, atol=1e-15)
    _run(sim, round(0.8 / sim.dt))
    assert sim.object_pose("cube").translation[2] == pytest.approx(0.05, abs=1e-3)


def test_refusals_name_the_file_the_joint_and_the_fix(tmp_path, monkeypatch):
    hinge = tmp_path / "door.urdf"
    hinge.write_text('<robot name="door">' + _box_link("frame", (0.1, 0.1, 0.1), 1.0)
                     + _box_link("leaf", (0.1, 0.1, 0.1), 1.0)
                     + _fixed("hinge", "frame", "leaf", (0.2, 0.0, 0.0), kind="revolute")
                     + '</robot>')
    with pytest.raises(ConfigError, match=rf"objects.names.*'{hinge.resolve()}'.*joint "
                                          rf"'hinge' is 'revolute'.*under 'robots:' in a world"):
        wb_sim.Simulator.from_params(_urdf_objects(dict(name="door", urdf=str(hinge),
                                                        position=(0.0, 0.0, 0.5))))
    bare = tmp_path / "bare.urdf"
    bare.write_text('<robot name="bare"><link name="a"><collision><geometry><box size="1 1 1"/>'
                    '</geometry></collision></link></robot>')
    with pytest.raises(ConfigError, match=rf"'{bare.resolve()}' has no <inertial> in any link"):
        wb_sim.Simulator.from_params(_urdf_objects(dict(name="bare", urdf=str(bare),
                                                        position=(0.0, 0.0, 1.0))))
    sim = wb_sim.Simulator.from_params(_objects())
    with pytest.raises(CommandError, match=r"links' <inertial> masses summed: give 0"):
        sim.spawn_object("pair", "urdf", None, 4.0, (0.0, 0.0, 1.0), urdf=TWO_BOXES)
    with pytest.raises(CommandError, match=r"URDF file '.*nowhere.urdf' does not exist"):
        sim.spawn_object("pair", "urdf", None, None, (0.0, 0.0, 1.0), urdf="/nowhere.urdf")
    with pytest.raises(CommandError, match=r"a box takes no URDF"):
        sim.spawn_object("pair", "box", (0.1, 0.1, 0.1), 1.0, (0.0, 0.0, 1.0), urdf=TWO_BOXES)
    with pytest.raises(CommandError, match=r"starts .* mm under the ground"):
        sim.spawn_object("pair", "urdf", None, None, (0.0, 0.0, 0.05), urdf=TWO_BOXES)
    # the bounds, before pinocchio reads anything
    many = ('<robot name="chain">' + "".join(_box_link(f"l{i}", (0.1,) * 3, 1.0)
                                             for i in range(MAX_URDF_LINKS + 1))
            + "".join(_fixed(f"j{i}", f"l{i}", f"l{i + 1}", (0.1, 0.0, 0.0))
                      for i in range(MAX_URDF_LINKS)) + '</robot>')
    with pytest.raises(CommandError, match=rf"{MAX_URDF_LINKS + 1} links, more than "
                                           rf"{MAX_URDF_LINKS}"):
        sim.spawn_object("chain", "urdf", None, None, (0.0, 0.0, 1.0), urdf=many)
    shapes = "".join('<collision><geometry><sphere radius="0.1"/></geometry></collision>'
                     for _ in range(MAX_URDF_GEOMETRIES + 1))
    lumpy = (f'<robot name="lumpy"><link name="a"><inertial><mass value="1"/>'
             f'{_inertia_xml(np.eye(3) * 0.01)}</inertial>{shapes}</link></robot>')
    with pytest.raises(CommandError, match=rf"{MAX_URDF_GEOMETRIES + 1} <collision> "
                                           rf"geometries, more than {MAX_URDF_GEOMETRIES}"):
        sim.spawn_object("lumpy", "urdf", None, None, (0.0, 0.0, 1.0), urdf=lumpy)
    import wb_sim.objects as objects
    path = tmp_path / "pair.urdf"
    path.write_text(TWO_BOXES)
    monkeypatch.setattr(objects, "MAX_URDF_BYTES", len(TWO_BOXES) - 1)
    for urdf, what in ((str(path), f"URDF file '{path}'"), (TWO_BOXES, "the URDF string")):
        with pytest.raises(CommandError, match=rf"{what} has {len(TWO_BOXES)} bytes, more "
                                               rf"than {len(TWO_BOXES) - 1}"):
            sim.spawn_object("pair", "urdf", None, None, (0.0, 0.0, 1.0), urdf=urdf)
    monkeypatch.undo()
    cube = _write_mesh(tmp_path / "cube.stl", _box_vertices((0.2, 0.2, 0.2)), BOX_FACES)
    two = (f'<robot name="two"><link name="a"><inertial><mass value="1"/>'
           f'{_inertia_xml(np.eye(3) * 0.01)}</inertial>'
           + 2 * f'<collision><geometry><mesh filename="{cube}"/></geometry></collision>'
           + '</link></robot>')
    monkeypatch.setattr(objects, "MAX_MESH_BYTES", int(1.5 * (tmp_path / "cube.stl").stat()
                                                       .st_size))
    sim.spawn_object("two", "urdf", None, None, (0.0, 0.0, 1.0), urdf=two)  # one file, once
    sim.delete_object("two")
    monkeypatch.setattr(objects, "MAX_MESH_BYTES", (tmp_path / "cube.stl").stat().st_size - 1)
    with pytest.raises(CommandError, match=r"its collision meshes have \d+ bytes together"):
        sim.spawn_object("two", "urdf", None, None, (0.0, 0.0, 1.0), urdf=two)
    assert sim.objects == ()


def test_a_urdf_object_in_the_terrain_is_refused_by_any_of_its_links():
    """The two-box object placed with its block (not its slab, the part nearest its centre)
    5 cm into a terrain box: refused naming the box; lifted clear, accepted."""
    M, com, _ = _parallel_axis([(A_MASS, A_XYZ, np.eye(3), np.eye(3)),
                                (B_MASS, B_XYZ, np.eye(3), np.eye(3))])
    top = B_XYZ[2] + B_EDGES[2] / 2.0 - com[2]  # the block's top above the centre of mass
    # a terrain box hanging 1 m up whose bottom face is at z = 1: the block's top reaches it
    terrain = {"terrain.boxes": [0.0, 0.0, 1.5, 2.0, 2.0, 1.0, 0.0]}
    with pytest.raises(ConfigError, match=r"'pair' starts 50.0 mm inside terrain box 0"):
        wb_sim.Simulator.from_params(_urdf_objects(
            dict(name="pair", urdf=TWO_BOXES, position=(0.0, 0.0, 1.05 - top)), **terrain))
    sim = wb_sim.Simulator.from_params(_urdf_objects(
        dict(name="pair", urdf=TWO_BOXES, position=(0.0, 0.0, 0.99 - top)), **terrain))
    assert sim.objects[0].mass == M


def test_a_world_file_and_a_parameter_file_take_a_urdf_object_beside_them(tmp_path):
    """``world.objects`` with ``shape: urdf`` and a relative ``urdf:`` (resolved beside the
    world file) becomes ``objects.urdfs``; a parameter file's relative ``objects.urdfs``
    entry is resolved beside it; both build the two-box object (4 kg)."""
    import yaml

    from wb_sim.world import load_world
    (tmp_path / "things").mkdir()
    (tmp_path / "things" / "pair.urdf").write_text(TWO_BOXES)
    world = tmp_path / "world.yaml"
    world.write_text("world:\n  objects:\n    - name: pair\n      shape: urdf\n"
                     "      urdf: things/pair.urdf\n      pose: {position: [1.0, 0.0, 0.5]}\n"
                     "  robots:\n    - {name: humanoid, robot: humanoid}\n")
    params, _ = load_world(world)
    assert params["objects.urdfs"] == [str(tmp_path / "things" / "pair.urdf")]
    assert params["objects.mass"] == [0.0] and params["objects.sizes"] == [0.0] * 3
    from wb_sim.config import read_yaml_params
    p = _urdf_objects(dict(name="pair", urdf="things/pair.urdf", position=(0.0, 0.0, 0.5)))
    nested: dict = {}
    for key, value in p.items():
        *groups, leaf = key.split(".")
        d = nested
        for g in groups:
            d = d.setdefault(g, {})
        d[leaf] = value
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"wb_sim": {"ros__parameters": nested}}))
    flat = read_yaml_params(path)
    assert flat["objects.urdfs"] == [str(tmp_path / "things" / "pair.urdf")]
    sim = wb_sim.Simulator.from_params(flat)
    assert sim.objects[0].shape == "urdf" and sim.objects[0].mass == A_MASS + B_MASS


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_the_two_box_urdf_rests_on_a_box_object_and_snapshots_continue(model):
    """The two-box object dropped onto a 0.6 x 0.6 x 0.2 m crate: it rests with its slab on
    the crate's top (its centre of mass at 0.2 m + its rest height, within 2 mm), the
    crate's force on it (the pair contacts) is its weight within 0.5 %; a snapshot taken
    in the fall continues bit for bit."""
    M, com, _ = _parallel_axis([(A_MASS, A_XYZ, np.eye(3), np.eye(3)),
                                (B_MASS, B_XYZ, np.eye(3), np.eye(3))])
    rest = 0.2 + A_EDGES[2] / 2.0 + com[2] - A_XYZ[2]
    sim = wb_sim.Simulator.from_params(_urdf_objects(
        dict(name="crate", shape="box", size=(0.6, 0.6, 0.2), mass=10.0,
             position=(0.0, 0.0, 0.1)),
        dict(name="pair", urdf=TWO_BOXES, position=(0.0, 0.0, rest + 0.03)),
        **{"contact.model": model}))
    _run(sim, 20)
    snap = sim.get_state()
    _run(sim, 100)
    q, v = sim.q.copy(), sim.v.copy()
    sim.set_state(snap)
    _run(sim, 100)
    np.testing.assert_array_equal(sim.q, q)
    np.testing.assert_array_equal(sim.v, v)
    _run(sim, round(1.0 / sim.dt))
    c = sim.self_collision_contacts()
    pairs = [i for i, (a, b) in enumerate(zip(c.link_a, c.link_b)) if {a, b} == {"crate", "pair"}]
    on_pair = sum(c.force[i] * (1.0 if c.link_b[i] == "crate" else -1.0) for i in pairs)
    pose = sim.object_pose("pair")
    print(f"{model}: on the crate at {pose.translation[2]!r} m (geometry {rest!r}), force "
          f"{np.asarray(on_pair).tolist()} N on weight {M * G0!r} N")
    assert pose.translation[2] == pytest.approx(rest, abs=2e-3)
    np.testing.assert_allclose(on_pair, [0.0, 0.0, M * G0], rtol=0.0, atol=5e-3 * M * G0)
