"""Cross-check wb_sim's rigid-body dynamics against iDynTree.

iDynTree is an independent rigid-body dynamics implementation. We load the
same URDF (iCubGazeboV2_5, floating base on ``root_link``) in both, evaluate
at random states, and compare the mass matrix, the bias forces
(Coriolis + centrifugal + gravity) and the generalized gravity.

Conventions (pinocchio free-flyer, which wb_sim follows):
    q = [p_base in world (3), quaternion x, y, z, w (4), joint angles (nj)]
    v = [base linear velocity in the base frame (3),
         base angular velocity in the base frame (3), joint velocities (nj)]
iDynTree is run with the BODY_FIXED frame-velocity representation, whose base
twist is [linear; angular] expressed in the base frame -- the same as the
pinocchio free-flyer velocity -- so the base blocks need no transformation;
only the joint ordering is remapped (by name).

Tolerance: ``np.testing.assert_allclose(actual, expected, rtol=RTOL,
atol=ATOL)`` with ATOL = 1e-8 absolute on every entry, plus RTOL = 1e-9
relative so that entries with large magnitude (bias forces at random
velocities reach a few hundred) are not held to an absolute 1e-8.
"""

import numpy as np
import pytest
from helpers.extras import require_modules

# the test extra (pip install wb_sim[test]); a ROS install's colcon test may not have it
require_modules("icub_models", "idyntree.bindings",
                why="pip install icub-models idyntree (the test extra); CI requires them")

import icub_models  # noqa: E402
import idyntree.bindings as idyn  # noqa: E402

import wb_sim  # noqa: E402

MODEL_NAME = "iCubGazeboV2_5"
BASE_LINK = "root_link"
GRAVITY = np.array([0.0, 0.0, -9.81])
NQ, NV, NJ = 39, 38, 32
ICUB_TOTAL_MASS = 33.0616727  # kg

ATOL = 1e-8
RTOL = 1e-9
N_SAMPLES = 5


def _urdf_path():
    return str(icub_models.get_model_file(MODEL_NAME))


# ---------------------------------------------------------------------------
# iDynTree reference, in pinocchio conventions
# ---------------------------------------------------------------------------

def _quat_xyzw_to_rotation(quat):
    """Rotation matrix of a (normalised) quaternion stored as x, y, z, w."""
    x, y, z, w = np.asarray(quat, dtype=float) / np.linalg.norm(quat)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


class IDynTreeReference:
    """iDynTree KinDynComputations on the same URDF, pinocchio conventions in/out.

    ``joint_names`` is the pinocchio (wb_sim) joint order; every joint-space
    quantity is permuted by name between that order and iDynTree's DOF order.
    """

    def __init__(self, urdf_path, joint_names, base_link=BASE_LINK):
        self.joint_names = list(joint_names)
        nj = len(self.joint_names)

        loader = idyn.ModelLoader()
        assert loader.loadReducedModelFromFile(urdf_path, self.joint_names), \
            "iDynTree failed to load the URDF"
        model = loader.model()
        assert model.getNrOfDOFs() == nj

        # perm[k] = iDynTree DOF index of the k-th joint in pinocchio order.
        self.perm = np.empty(nj, dtype=int)
        for k, name in enumerate(self.joint_names):
            jidx = model.getJointIndex(name)
            assert jidx >= 0, f"joint {name!r} missing in iDynTree model"
            joint = model.getJoint(jidx)
            assert joint.getNrOfDOFs() == 1
            self.perm[k] = joint.getDOFsOffset()
        assert sorted(self.perm.tolist()) == list(range(nj))
        # Index of the full (6 + nj) vector, in pinocchio order, into iDynTree's.
        self.full_perm = np.concatenate([np.arange(6), 6 + self.perm])

        self.kd = idyn.KinDynComputations()
        assert self.kd.loadRobotModel(model)
        assert self.kd.setFloatingBase(base_link)
        assert self.kd.getFloatingBase() == base_link
        assert self.kd.setFrameVelocityRepresentation(idyn.BODY_FIXED_REPRESENTATION)
        self.nj = nj

    def _set_state(self, q, v):
        q = np.asarray(q, dtype=float)
        v = np.asarray(v, dtype=float)
        nj = self.nj
        assert q.shape == (7 + nj,) and v.shape == (6 + nj,)

        world_T_base = idyn.Transform(
            idyn.Rotation(_quat_xyzw_to_rotation(q[3:7])), idyn.Position(q[0:3])
        )
        # BODY_FIXED twist: [linear; angular], both in the base frame == pinocchio v[:6].
        base_twist = idyn.Twist(idyn.GeomVector3(v[0:3]), idyn.GeomVector3(v[3:6]))
        s = idyn.VectorDynSize(nj)
        s_dot = idyn.VectorDynSize(nj)
        s_np = np.empty(nj)
        sdot_np = np.empty(nj)
        s_np[self.perm] = q[7:]
        sdot_np[self.perm] = v[6:]
        for i in range(nj):
            s.setVal(i, float(s_np[i]))
            s_dot.setVal(i, float(sdot_np[i]))
        gravity = idyn.Vector3(GRAVITY)
        assert self.kd.setRobotState(world_T_base, s, base_twist, s_dot, gravity)

    def _generalized_to_pin(self, gen):
        """FreeFloatingGeneralizedTorques -> (6 + nj,) array in pinocchio order."""
        base = gen.baseWrench().toNumPy()  # [force; torque] in the base frame
        joints = gen.jointTorques().toNumPy()
        return np.concatenate([base, joints[self.perm]])

    def compute(self, q, v=None):
        """Return dict with 'M', 'bias', 'gravity' in pinocchio conventions."""
        if v is None:
            v = np.zeros(6 + self.nj)
        self._set_state(q, v)

        M = idyn.MatrixDynSize(6 + self.nj, 6 + self.nj)
        assert self.kd.getFreeFloatingMassMatrix(M)
        M = M.toNumPy()[np.ix_(self.full_perm, self.full_perm)]

        model = self.kd.model()
        bias = idyn.FreeFloatingGeneralizedTorques(model)
        assert self.kd.generalizedBiasForces(bias)
        grav = idyn.FreeFloatingGeneralizedTorques(model)
        assert self.kd.generalizedGravityForces(grav)

        return {
            "M": M,
            "bias": self._generalized_to_pin(bias),
            "gravity": self._generalized_to_pin(grav),
        }


# ---------------------------------------------------------------------------
# Fixtures and random states
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sim():
    return wb_sim.Simulator.from_params({
        "urdf_path": _urdf_path(),
        "floating_base": True,
        "contact_surfaces": [],
        "joints.position_limits": False,
    })


@pytest.fixture(scope="module")
def ref(sim):
    assert len(sim.joint_names) == NJ
    return IDynTreeReference(_urdf_path(), sim.joint_names)


def _random_q(rng, nj=NJ):
    quat = rng.standard_normal(4)
    quat /= np.linalg.norm(quat)
    return np.concatenate([
        rng.uniform(-2.0, 2.0, 3),       # base position
        quat,                            # x, y, z, w
        rng.uniform(-1.0, 1.0, nj),      # joint angles
    ])


def _random_v(rng, nj=NJ):
    return rng.uniform(-1.0, 1.0, 6 + nj)


def _states(seed, with_velocity):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(N_SAMPLES):
        q = _random_q(rng)
        v = _random_v(rng) if with_velocity else None
        out.append((q, v))
    return out


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_total_mass(sim):
    q = _random_q(np.random.default_rng(0))
    M = np.asarray(sim.mass_matrix(q))
    assert M.shape == (NV, NV)
    assert abs(M[0, 0] - ICUB_TOTAL_MASS) < 1e-6
    np.testing.assert_allclose(M[:3, :3], ICUB_TOTAL_MASS * np.eye(3), atol=1e-6)


def test_mass_matrix_matches_idyntree(sim, ref):
    for q, _ in _states(1, with_velocity=False):
        M = np.asarray(sim.mass_matrix(q))
        assert M.shape == (NV, NV)
        np.testing.assert_allclose(M, M.T, rtol=0, atol=ATOL)
        np.testing.assert_allclose(M, ref.compute(q)["M"], rtol=RTOL, atol=ATOL)


def test_bias_forces_match_idyntree(sim, ref):
    for q, v in _states(2, with_velocity=True):
        h = np.asarray(sim.bias_forces(q, v))
        assert h.shape == (NV,)
        np.testing.assert_allclose(h, ref.compute(q, v)["bias"], rtol=RTOL, atol=ATOL)


def test_bias_forces_at_zero_velocity_equal_gravity(sim, ref):
    q, _ = _states(3, with_velocity=False)[0]
    np.testing.assert_allclose(
        np.asarray(sim.bias_forces(q, np.zeros(NV))),
        ref.compute(q)["gravity"], rtol=RTOL, atol=ATOL,
    )


def test_generalized_gravity_matches_idyntree(sim, ref):
    for q, _ in _states(4, with_velocity=False):
        g_ref = ref.compute(q)["gravity"]
        g = np.asarray(sim.generalized_gravity(q))
        assert g.shape == (NV,)
        np.testing.assert_allclose(g, g_ref, rtol=RTOL, atol=ATOL)

        tau_g = np.asarray(sim.gravity_torques(q))
        assert tau_g.shape == (NJ,)
        np.testing.assert_allclose(tau_g, g_ref[6:], rtol=RTOL, atol=ATOL)
