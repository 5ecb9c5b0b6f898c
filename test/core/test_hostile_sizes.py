"""Hostile sizes (issue 27, round 3): every size a user controls is bounded before work
starts, with a typed error naming the key, the bound and how to raise it."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import wb_sim
from wb_sim import ConfigError, ModelError
from wb_sim.terrain import Heightfield, Terrain, heightfield_mesh

from core.contact.test_contact_robustness import cube_params

STAIRS = [0.0, 0.0, 0.0, 0.3, 0.05, 1.0]  # x0, y0, yaw, depth, height, width (count, z0 follow)


def _refused_fast(exc, match, params):
    t0 = time.perf_counter()
    with pytest.raises(exc, match=match):
        wb_sim.Simulator.from_params(params)
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize("count", [1e9, 1e5])
def test_a_huge_stair_count_is_refused_before_building(count):
    _refused_fast(ConfigError, rf"parameter 'terrain.stairs': the terrain would hold {int(count)} "
                               r"boxes .* more than terrain.max_boxes = 200; .*raise parameter "
                               r"'terrain.max_boxes'",
                  cube_params(1.0, **{"terrain.stairs": STAIRS + [count, 0.0]}))


def test_2000_boxes_are_refused_and_max_boxes_raises_the_bound():
    boxes = [5.0, 5.0, 0.05, 0.1, 0.1, 0.1, 0.0] * 2000
    _refused_fast(ConfigError, r"'terrain.boxes': the terrain would hold 2000 boxes",
                  cube_params(1.0, **{"terrain.boxes": boxes}))
    sim = wb_sim.Simulator.from_params(cube_params(1.0, **{"terrain.boxes": boxes[:7 * 300],
                                                         "terrain.max_boxes": 300}))
    assert sim is not None
    with pytest.raises(ConfigError, match=r"'terrain.max_boxes': must be in \[0, 100000\]"):
        wb_sim.Simulator.from_params(cube_params(1.0, **{"terrain.max_boxes": 10**9}))


def _heightfield(tmp_path, grid, name="hf.npy", **extra):
    path = tmp_path / name
    np.save(path, grid)
    return cube_params(1.0, **{"terrain.heightfield": str(path), **extra})


def test_a_heightfield_over_the_cell_bound_is_refused_from_its_header(tmp_path):
    path = tmp_path / "big.npy"
    # a 3000 x 3000 header over a file that holds no data: only the header is read
    header = {"descr": "<f8", "fortran_order": False, "shape": (3000, 3000)}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
    _refused_fast(ModelError, r"'terrain.heightfield': .* 3000 x 3000 = 9000000 cells, more than "
                              r"terrain.max_heightfield_cells = 4000000; .*raise parameter "
                              r"'terrain.max_heightfield_cells'",
                  cube_params(1.0, **{"terrain.heightfield": str(path)}))


def test_a_1000_x_1000_heightfield_loads_and_draws_bounded(tmp_path):
    params = _heightfield(tmp_path, np.zeros((1000, 1000)), **{"terrain.heightfield_size":
                                                               [10.0, 10.0]})
    t0 = time.perf_counter()
    wb_sim.Simulator.from_params(params)
    assert time.perf_counter() - t0 < 30
    field = Heightfield.load(params["terrain.heightfield"], [10.0, 10.0], [0.0, 0.0, 0.0], 1.0)
    vertices, faces = heightfield_mesh(Terrain(0.0, [0.0, 0.0, 1.0], [], field))
    assert len(faces) <= 2 * 40_000
    # the decimated drawing keeps the grid's extent
    assert vertices[:, 0].min() == 0.0 and vertices[:, 0].max() == pytest.approx(10.0)
    assert vertices[:, 1].max() == pytest.approx(10.0)


def test_a_small_heightfield_is_drawn_whole(tmp_path):
    grid = np.arange(12.0).reshape(3, 4)
    field = Heightfield(grid, np.zeros(3), np.array([3.0, 2.0]))
    vertices, faces = heightfield_mesh(Terrain(0.0, [0.0, 0.0, 1.0], [], field))
    assert len(vertices) == 12 and len(faces) == 2 * 2 * 3
    assert np.array_equal(vertices[:, 2], grid.ravel())


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_heightfield_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "hf.npy"
    os.mkfifo(fifo)
    _refused_fast(ModelError, r"'terrain.heightfield': .* is not a regular file",
                  cube_params(1.0, **{"terrain.heightfield": str(fifo)}))


@pytest.mark.parametrize("grid, match", [
    (np.zeros((3, 3), complex), r"must hold real numbers .* got dtype complex128"),
    (np.array([["a", "b"], ["c", "d"]]), r"must hold real numbers .* got dtype <U1"),
    (np.array([[0.0, np.inf], [0.0, 0.0]]), r"finite heights within \+-100000 m"),
    (np.array([[0.0, 1e300], [-1e300, 0.0]]), r"finite heights within \+-100000 m"),
    (np.zeros(5), r"must hold a 2-D grid"),
])
def test_bad_heightfield_grids_are_typed_errors(tmp_path, grid, match):
    _refused_fast(ModelError, match, _heightfield(tmp_path, grid))


def test_an_npz_heightfield_is_a_typed_error(tmp_path):
    path = tmp_path / "hf.npz"
    np.savez(path, h=np.zeros((3, 3)))
    _refused_fast(ModelError, r"cannot read .* as a .npy array .*\.npz",
                  cube_params(1.0, **{"terrain.heightfield": str(path)}))


def chain_urdf(n: int) -> str:
    """A serial chain of n links (n - 1 revolute joints)."""
    inertial = ('<inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" '
                'ixz="0" iyz="0"/></inertial>')
    parts = ['<robot name="chain">', f'<link name="l0">{inertial}</link>']
    for i in range(1, n):
        parts.append(f'<link name="l{i}">{inertial}</link>')
        parts.append(f'<joint name="j{i}" type="revolute"><parent link="l{i - 1}"/>'
                     f'<child link="l{i}"/><origin xyz="0 0 0.1"/><axis xyz="0 1 0"/>'
                     f'<limit lower="-1" upper="1" effort="10" velocity="10"/></joint>')
    parts.append("</robot>")
    return "".join(parts)


@pytest.mark.parametrize("links", [200, 1000])
def test_a_long_chain_is_refused_before_pinocchio_builds_it(links):
    _refused_fast(ModelError, rf"parameter 'robot_description': robot_description has "
                              rf"{links - 1} moving joints, more than max_joints = 100; .*raise "
                              r"parameter 'max_joints'",
                  {"robot_description": chain_urdf(links)})


def test_max_joints_raises_the_bound():
    sim = wb_sim.Simulator.from_params({"robot_description": chain_urdf(120), "max_joints": 119})
    assert sim.nj == 119


ONE_JOINT = ('<robot name="r"><link name="a"><inertial><origin xyz="{o}"/><mass value="{m}"/>'
             '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>'
             '<collision><geometry>{g}</geometry></collision></link><link name="b"><inertial>'
             '<mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>'
             '</inertial></link><joint name="j" type="revolute"><parent link="a"/>'
             '<child link="b"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" '
             'velocity="1"/></joint></robot>')


def _one_joint(o="0 0 0", m="1", g='<box size="0.1 0.1 0.1"/>', **extra):
    return {"robot_description": ONE_JOINT.format(o=o, m=m, g=g), "collision.enabled": True,
            **extra}


@pytest.mark.parametrize("urdf, match", [
    (dict(g='<box size="1e300 1 1"/>'), r"link 'a': <collision>: <box size> '1e300 1 1' must be "
                                        r"> 0 and at most 100 m"),
    (dict(g='<sphere radius="-1"/>'), r"<sphere radius> '-1' must be > 0"),
    (dict(g='<mesh filename="/x.stl" scale="0 0 0"/>'), r"<mesh scale> '0 0 0' must be non-zero"),
    (dict(o="nan 0 0"), r"link 'a': <inertial>: <origin xyz> must be 3 finite numbers"),
    (dict(o="1e300 0 0"), r"<origin xyz> '1e300 0 0' is more than 1000 m"),
    (dict(m="abc", **{"perturbation.mass_scale_links": ["a"], "perturbation.mass_scale": [2.0]}),
     r"link 'a': <mass value> must be 1 finite number, got 'abc'"),
])
def test_hostile_urdf_numbers_are_model_errors(urdf, match):
    _refused_fast(ModelError, match, _one_joint(**urdf))


def test_a_1e300_centre_of_mass_offset_is_refused_by_its_declaration():
    _refused_fast(ConfigError, r"parameter 'perturbation.com_offset': every entry must be in "
                               r"\[-10, 10\] m",
                  _one_joint(**{"perturbation.com_offset_links": ["a"],
                                "perturbation.com_offset": [1e300, 0.0, 0.0]}))
    sim = wb_sim.Simulator.from_params(_one_joint(**{"perturbation.com_offset_links": ["a"],
                                                     "perturbation.com_offset": [0.1, 0.0, 0.0]}))
    assert sim is not None


def test_a_big_collision_box_is_built_at_once_as_nothing_is_sampled():
    """A tiny collision.point_spacing on a 100 m box hung the start (83 s, then out of
    memory); the exact geometry samples nothing (the key is gone: refused as unknown),
    so the box is its 8 corners whatever its size."""
    # above the ground: a body 50 m into it is refused at the start (initial.base_position)
    params = _one_joint(g='<box size="100 100 100"/>', **{"collision.enabled": True,
                                                          "initial.base_position": [0, 0, 51.0]})
    sim = wb_sim.Simulator.from_params(params)
    assert sim.collision.m == 8
    with pytest.raises(ConfigError, match="unknown parameter 'collision.point_spacing'"):
        wb_sim.Simulator.from_params(dict(params, **{"collision.point_spacing": 1e-9}))


@pytest.mark.parametrize("text, match", [
    ("<html><body>hello</body></html>", r"is not an SRDF: its root element is <html>, "
                                        r"expected <robot>"),
    ("<robot", r"is not valid XML"),
])
def test_a_file_that_is_not_an_srdf_is_refused(tmp_path, text, match):
    srdf = tmp_path / "x.srdf"
    srdf.write_text(text)
    _refused_fast(ConfigError, rf"parameter 'collision.srdf_path': .*{match}",
                  _one_joint(**{"collision.self_collision": True,
                                "collision.srdf_path": str(srdf)}))
