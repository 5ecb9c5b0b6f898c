"""The humanoid lying on the ground, against MuJoCo: the shipped humanoid (``config/humanoid.yaml``,
whole-body collision on), limp (no torque; the URDF's 0.1 N*m*s/rad joint damping), dropped
face down from 2 cm above the ground at the shipped initial joint pose, settles 3 s at 1 kHz;
MuJoCo simulates the same URDF (``helpers/mujoco_twin.py``: the same inertias, collision
primitives, armature, damping, joint limits, friction coefficient; its default soft contact,
condim 3). Both contact models (compliant, rigid) must come to rest in MuJoCo's pose: the
base height, the base orientation, every link origin's height and every joint.

Face down, not on the back: on its back the humanoid's feet stand on their heel edges, held by
friction; MuJoCo's soft friction lets them creep (the ankles turn from 0.36 to 0.04 rad over
6 s, still turning at 10 s; with ``noslip_iterations`` MuJoCo holds them at 0.38 rad, wb_sim
at 0.37), so that rest pose measures the friction model, not the body. Face down the fall
ends in the same pose in both within 3 s, no joint moving faster than 1e-3 rad/s.

The comparison can fail: a twin with one shape moved by 5 mm or removed (what a shape lost or
misplaced by wb_sim's geometry would do) is out of the bounds (measured figures in
docs/physics.md).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest

from helpers.extras import require_mujoco

require_mujoco()

import mujoco  # noqa: E402

from helpers.lying import (REST, compare, humanoid as _humanoid, links,  # noqa: E402
                           mujoco_rest as _mujoco_rest, outside, settle_mujoco,
                           wb_sim_rest as _wb_sim_rest)
from helpers.mujoco_twin import (joint_mass_matrix, link_positions,  # noqa: E402
                                 set_twin_state, twin_model)


@pytest.fixture(scope="module")
def humanoid():
    """The humanoid at its start (MuJoCo's twin starts from it)."""
    return _humanoid("compliant")


@pytest.fixture(scope="module")
def mujoco_rest():
    return _mujoco_rest()


@pytest.fixture(scope="module", params=["compliant", "rigid"])
def wb_sim_rest(request):
    return _wb_sim_rest(request.param)


def test_the_twin_has_the_humanoids_masses_inertias_and_links(humanoid):
    """The same URDF read by MuJoCo: the mass, the joint-space mass matrix (armature
    included) at the initial posture and every link's placement are wb_sim's."""
    model = twin_model(humanoid)
    data = mujoco.MjData(model)
    set_twin_state(model, data, humanoid)
    assert model.body(humanoid.robot.root_link).subtreemass[0] == pytest.approx(humanoid.mass,
                                                                               rel=1e-12)
    dofs = humanoid.robot.idx_v  # the joints' velocities, joint_names order
    np.testing.assert_allclose(joint_mass_matrix(model, data, humanoid.joint_names),
                               humanoid.mass_matrix()[np.ix_(dofs, dofs)], rtol=0, atol=1e-12)
    links_ = links(model)
    assert len(links_) == len([f for f in humanoid.model.frames if f.type == pin.FrameType.BODY])
    np.testing.assert_allclose(link_positions(data, links_),
                               [humanoid.frame_pose(link).translation for link in links_],
                               atol=1e-12)
    assert model.ngeom - 1 == humanoid.robot.urdf_xml.count("<collision")  # the ground besides


def test_the_humanoid_lying_face_down_rests_in_mujocos_pose(wb_sim_rest, mujoco_rest):
    """Both at rest after 3 s, and wb_sim's pose is MuJoCo's: the base's and every link
    origin's height within the deeper sink and POSTURE, the base orientation within that
    over SPAN, every joint within JOINT_TOLERANCE."""
    sim = wb_sim_rest
    model, data = mujoco_rest
    assert np.abs(sim.v).max() < REST
    assert np.abs(data.qvel).max() < REST
    d = compare(sim, model, data)
    assert not outside(d), d
    # lying: on the pelvis' and torso's fronts (7-8 cm deep), not on a limb
    assert 0.065 < sim.q[2] < 0.075


MOVED_MM = 5.0


def _edited(xml: str, link: str, index: int, move_mm: float | None) -> str:
    """The URDF with ``link``'s ``index``-th collision shape moved by ``move_mm`` along its
    link's x axis (the front, which faces the ground) or, with None, removed."""
    root = ET.fromstring(xml)
    node = root.find(f"link[@name='{link}']")
    collision = node.findall("collision")[index]
    if move_mm is None:
        node.remove(collision)
    else:
        origin = collision.find("origin")
        xyz = np.array(origin.get("xyz").split(), dtype=float) + [move_mm * 1e-3, 0.0, 0.0]
        origin.set("xyz", " ".join(f"{x:.17g}" for x in xyz))
    return ET.tostring(root, encoding="unicode")


@pytest.mark.parametrize("link, index, move_mm", [
    ("torso", 1, MOVED_MM),      # the torso's box, 5 mm towards the ground
    ("pelvis", 0, MOVED_MM),     # the pelvis' box
    ("l_thigh", 1, MOVED_MM),    # the left thigh's cylinder
    ("l_forearm", 2, MOVED_MM),  # the left hand's sphere
    ("l_foot", 0, MOVED_MM),     # the left foot's box (wb_sim: its sole, a contact surface)
    ("l_forearm", 2, None),      # the left hand's sphere gone: the forearm lies lower
    ("head", 1, None),           # the head's visor box gone: the head rests on its sphere
], ids=["torso-moved", "pelvis-moved", "thigh-moved", "hand-moved", "foot-moved", "hand-gone",
        "visor-gone"])
def test_a_shape_moved_or_missing_is_out_of_the_bounds(humanoid, wb_sim_rest, link, index,
                                                      move_mm):
    """The comparison can fail: wb_sim's rest against a twin that has one shape 5 mm off
    or missing (what wb_sim would show with that shape misplaced or lost)."""
    model, data = settle_mujoco(humanoid, _edited(humanoid.robot.urdf_xml, link, index, move_mm))
    d = compare(wb_sim_rest, model, data)
    assert outside(d), d
