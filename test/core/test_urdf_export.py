"""MJCF robots as URDF for RViz (wb_sim.urdf_export, RobotModel.description_urdf): the URDF
written from the pinocchio model, read back by pinocchio, has the MJCF model's mass matrix,
bias forces and frame placements (the closures' anchors included) to 1e-12 at random
configurations; its visuals are the MJCF's geoms (box, sphere, cylinder, capsule as a
cylinder and two spheres, mesh by absolute path with its scale)."""

from __future__ import annotations

import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest

from helpers.mjcf_robots import ankle_leg_params
from wb_sim import Simulator
from wb_sim.robot import RobotModel

STL = """solid t
facet normal 0 0 1
 outer loop
  vertex 0 0 0
  vertex 0.1 0 0
  vertex 0 0.1 0
 endloop
endfacet
endsolid t
"""

#: a base body (pinocchio's parser puts a fixed base's first body at the world's origin,
#: whatever its pos), a tilted hinge about an unaligned axis with a
#: full inertia, a slider; one geom of every kind
MJCF = """<mujoco model="shapes"><compiler angle="radian" meshdir="."/>
<asset><mesh name="tri" file="tri.stl" scale="1 2 3"/></asset>
<worldbody>
 <body name="base" pos="0.1 0.2 0.3" euler="0.1 0 0.2">
  <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/>
  <geom type="box" size="0.1 0.2 0.3" rgba="1 0 0 1" contype="0" conaffinity="0"/>
  <body name="l1" pos="0 0 0.5" euler="0.3 0.2 0.1">
   <joint name="j1" type="hinge" axis="0 1 1" range="-2 2"/>
   <inertial pos="0.1 0 0" mass="2" fullinertia="0.2 0.3 0.4 0.01 0.02 0.03"/>
   <geom type="capsule" size="0.05 0.2" pos="0.1 0 0" contype="0" conaffinity="0"/>
   <geom type="sphere" size="0.07" contype="0" conaffinity="0"/>
   <body name="l2" pos="0.4 0 0">
    <joint name="j2" type="slide" axis="1 0 0" range="-0.1 0.1"/>
    <inertial pos="0 0.1 0" mass="0.5" diaginertia="0.01 0.02 0.03"/>
    <geom type="cylinder" size="0.03 0.1" contype="0" conaffinity="0"/>
    <geom type="mesh" mesh="tri" contype="0" conaffinity="0"/>
    <body name="l3" pos="0 0 0.2">
     <joint name="j3" type="hinge" axis="0 0 1"/>
     <inertial pos="0 0 0.05" mass="0.3" diaginertia="0.001 0.002 0.003"/>
    </body>
   </body>
  </body>
 </body>
</worldbody></mujoco>"""


def _read_back(robot: RobotModel) -> pin.Model:
    xml = robot.description_urdf
    return (pin.buildModelFromXML(xml, pin.JointModelFreeFlyer()) if robot.floating_base
            else pin.buildModelFromXML(xml))


def _compare(robot: RobotModel, seed: int) -> float:
    """Largest difference of M, the bias forces and the shared frames' placements between
    the robot's model and its URDF read back, over random configurations."""
    m1 = robot.model
    m2 = _read_back(robot)
    assert [m2.names[j] for j in range(m2.njoints)] == [m1.names[j] for j in range(m1.njoints)]
    d1, d2 = m1.createData(), m2.createData()
    body = pin.FrameType.BODY  # the URDF's links: the bodies and the frames (anchors)
    frames = [(m1.getFrameId(f.name, f.type), m2.getFrameId(f.name, body)) for f in m1.frames
              if f.type in (body, pin.FrameType.OP_FRAME) and m2.existFrame(f.name, body)]
    rng = np.random.default_rng(seed)
    worst = 0.0
    lo = np.maximum(m1.lowerPositionLimit, -3.0)
    hi = np.minimum(m1.upperPositionLimit, 3.0)
    for _ in range(5):
        q = pin.randomConfiguration(m1, lo, hi)
        v = rng.normal(size=m1.nv)
        M1, M2 = pin.crba(m1, d1, q), pin.crba(m2, d2, q)
        worst = max(worst, np.abs(np.triu(M1) - np.triu(M2)).max())
        worst = max(worst, np.abs(pin.rnea(m1, d1, q, v, 0 * v)
                                  - pin.rnea(m2, d2, q, v, 0 * v)).max())
        pin.framesForwardKinematics(m1, d1, q)
        pin.framesForwardKinematics(m2, d2, q)
        for i1, i2 in frames:
            worst = max(worst, np.abs(d1.oMf[i1].homogeneous - d2.oMf[i2].homogeneous).max())
    assert len(frames) >= 3
    return worst


@pytest.fixture
def shapes(tmp_path):
    (tmp_path / "tri.stl").write_text(STL)
    path = tmp_path / "shapes.xml"
    path.write_text(MJCF)
    return path


@pytest.mark.parametrize("floating", [False, True])
def test_urdf_of_an_mjcf_has_its_dynamics_and_kinematics(shapes, floating):
    robot = RobotModel.from_urdf(urdf_path=str(shapes), floating_base=floating)
    worst = _compare(robot, 1)
    print(f"shapes MJCF (floating {floating}) vs its URDF: max difference {worst:.1e}")
    assert worst < 1e-12
    # a wb_sim robot too (robot_description), with the same joints
    again = RobotModel.from_urdf(robot_description=robot.description_urdf, floating_base=floating)
    assert again.joint_names == robot.joint_names


def test_visuals_are_the_mjcf_geoms(shapes):
    robot = RobotModel.from_urdf(urdf_path=str(shapes), floating_base=False)
    doc = ET.fromstring(robot.description_urdf)
    kinds = {link.get("name"): [v.find("geometry")[0] for v in link.findall("visual")]
             for link in doc.findall("link")}
    tags = {name: sorted(g.tag for g in gs) for name, gs in kinds.items()}
    assert tags["base"] == ["box"]
    assert tags["l1"] == ["cylinder", "sphere", "sphere", "sphere"]  # capsule + sphere
    assert tags["l2"] == ["cylinder", "mesh"]
    assert tags["l3"] == []
    box = kinds["base"][0]
    assert [float(x) for x in box.get("size").split()] == [0.2, 0.4, 0.6]
    cyl = next(g for g in kinds["l1"] if g.tag == "cylinder")
    assert (float(cyl.get("radius")), float(cyl.get("length"))) == (0.05, 0.4)
    # the capsule's end spheres at +-halfLength along its axis, from its centre (0.1, 0, 0)
    ends = sorted(tuple(float(x) for x in v.find("origin").get("xyz").split())
                  for v in doc.find("link[@name='l1']").findall("visual")
                  if v.find("geometry")[0].tag == "sphere"
                  and float(v.find("geometry")[0].get("radius")) == 0.05)
    assert np.allclose(ends, [(0.1, 0.0, -0.2), (0.1, 0.0, 0.2)], rtol=0, atol=1e-15)
    mesh = next(g for g in kinds["l2"] if g.tag == "mesh")
    assert mesh.get("filename") == (shapes.parent / "tri.stl").resolve().as_uri()
    assert [float(x) for x in mesh.get("scale").split()] == [1.0, 2.0, 3.0]
    joints = {j.get("name"): j for j in doc.findall("joint")}
    assert joints["j2"].get("type") == "prismatic"
    lim = joints["j1"].find("limit")
    assert (float(lim.get("lower")), float(lim.get("upper"))) == (-2.0, 2.0)
    axis = [float(x) for x in joints["j1"].find("axis").get("xyz").split()]
    assert np.allclose(axis, np.array([0, 1, 1]) / np.sqrt(2), rtol=0, atol=1e-15)


def test_closed_chain_leg_urdf_keeps_the_closure_anchors(tmp_path):
    """The parallel-ankle leg (MJCF, two <connect>s, drawn geoms): its URDF has its mass
    matrix and kinematics, the anchors of both closures as links where pinocchio has them;
    the drawn geoms leave the mass alone."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = Simulator.from_params(ankle_leg_params(tmp_path / "leg.xml"))
    robot = sim.robot
    worst = _compare(robot, 2)
    print(f"ankle leg MJCF vs its URDF: max difference {worst:.1e}")
    assert worst < 1e-12
    m2 = _read_back(robot)
    for kind, a, b in robot.closures:
        assert m2.existFrame(a) and m2.existFrame(b), (a, b)
    from core.test_parallel_ankle import MASS
    assert abs(sim.mass - MASS) < 1e-12
    doc = ET.fromstring(robot.description_urdf)
    assert {v.find("geometry")[0].tag for v in doc.iter("visual")} == \
        {"box", "cylinder", "sphere"}
