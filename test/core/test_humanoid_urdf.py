"""Sanity checks for urdf/humanoid.urdf (wb_humanoid)."""

import numpy as np
import pinocchio as pin
import pytest

from helpers import PKG

URDF = PKG / "urdf" / "humanoid.urdf"

LEG = ["hip_yaw", "hip_roll", "hip_pitch", "knee", "ankle_pitch", "ankle_roll"]
ARM = ["shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow"]
JOINTS = (
    [f"{s}_{j}" for s in "lr" for j in LEG]
    + ["torso_yaw"]
    + [f"{s}_{j}" for s in "lr" for j in ARM]
    + ["neck_yaw", "neck_pitch"]
)
CROUCH = {"hip_pitch": -0.3, "knee": 0.6, "ankle_pitch": -0.3}
FOOT_X = (-0.11, 0.11)  # foot box extent in the sole frame [m]
FOOT_Y = (-0.06, 0.06)


@pytest.fixture(scope="module")
def model():
    return pin.buildModelFromUrdf(str(URDF), pin.JointModelFreeFlyer())


def crouch_q(model):
    q = pin.neutral(model)
    for s in "lr":
        for j, v in CROUCH.items():
            q[model.joints[model.getJointId(f"{s}_{j}")].idx_q] = v
    return q


def sole_placements(model, q):
    data = model.createData()
    pin.framesForwardKinematics(model, data, q)
    return [data.oMf[model.getFrameId(f"{s}_sole")] for s in "lr"]


def test_loads_and_joint_names(model):
    assert model.nq == 7 + len(JOINTS)
    assert model.nv == 6 + len(JOINTS)
    names = list(model.names)
    for j in JOINTS:
        assert j in names, j
    for f in ["l_sole", "r_sole", "imu_link", "pelvis"]:
        assert model.existFrame(f), f
    # root body is the pelvis (free flyer + pelvis inertia)
    assert model.frames[model.getFrameId("pelvis")].parentJoint == 1


def test_masses_and_inertias(model):
    masses = np.array([model.inertias[i].mass for i in range(1, model.njoints)])
    assert np.all(masses > 0.0)
    total = masses.sum()
    assert 30.0 <= total <= 40.0, total
    for i in range(1, model.njoints):
        I = model.inertias[i].inertia
        assert np.allclose(I, I.T, atol=1e-12), model.names[i]
        ev = np.linalg.eigvalsh(I)
        assert ev.min() > 0.0, (model.names[i], ev)
        a, b, c = np.sort(ev)
        assert a + b >= c - 1e-12, (model.names[i], ev)
        d = np.diag(I)
        assert d[0] + d[1] >= d[2] - 1e-12
        assert d[1] + d[2] >= d[0] - 1e-12
        assert d[0] + d[2] >= d[1] - 1e-12
    # feet are not too light
    for s in "lr":
        assert model.inertias[model.getJointId(f"{s}_ankle_roll")].mass >= 0.8


def test_crouch_feet_flat_and_symmetric(model):
    q = crouch_q(model)
    l, r = sole_placements(model, q)
    for M in (l, r):
        assert np.allclose(M.rotation, np.eye(3), atol=1e-9)
    assert abs(l.translation[2] - r.translation[2]) < 1e-9
    assert abs(l.translation[1] + r.translation[1]) < 1e-9
    assert abs(l.translation[0] - r.translation[0]) < 1e-9
    assert l.translation[1] > 0.05  # left foot on the left, feet apart
    # leg length hip pitch joint -> sole at zero configuration is ~0.6 m
    data = model.createData()
    q0 = pin.neutral(model)
    pin.framesForwardKinematics(model, data, q0)
    hip = data.oMi[model.getJointId("l_hip_pitch")].translation
    sole = data.oMf[model.getFrameId("l_sole")].translation
    assert 0.55 <= hip[2] - sole[2] <= 0.65


def _hull(pts):
    pts = sorted(map(tuple, pts))

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower, upper = [], []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])  # counter-clockwise


def test_crouch_com_in_support_polygon(model):
    q = crouch_q(model)
    data = model.createData()
    com = pin.centerOfMass(model, data, q)[:2]
    corners = []
    for M in sole_placements(model, q):
        for x in FOOT_X:
            for y in FOOT_Y:
                corners.append((M.act(np.array([x, y, 0.0])))[:2])
    hull = _hull(corners)
    margins = []
    for a, b in zip(hull, np.roll(hull, -1, axis=0)):
        e = b - a
        n = np.array([-e[1], e[0]]) / np.linalg.norm(e)  # inward normal (CCW)
        margins.append(n @ (com - a))
    assert min(margins) >= 0.02, (com, min(margins))


def test_limits_contain_zero_and_crouch(model):
    lo, hi = model.lowerPositionLimit, model.upperPositionLimit
    for q in (pin.neutral(model), crouch_q(model)):
        for j in JOINTS:
            iq = model.joints[model.getJointId(j)].idx_q
            assert lo[iq] <= q[iq] <= hi[iq], (j, lo[iq], q[iq], hi[iq])
    for j in JOINTS:
        jid = model.getJointId(j)
        iv = model.joints[jid].idx_v
        assert model.effortLimit[iv] > 0.0
        assert model.velocityLimit[iv] > 0.0
        assert model.damping[iv] > 0.0
