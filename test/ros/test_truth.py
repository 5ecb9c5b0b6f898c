"""The simulator's own truth on ROS: ``~/get_dynamics`` (M, h, the contact Jacobian at
the state now, with that state), against pinocchio at the returned state, over real DDS.

Skipped without rclpy unless ``WB_SIM_REQUIRE_ROS=1``."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from helpers.extras import require_ros

require_ros("sensor_msgs.msg", "rcl_interfaces.srv")

from rcl_interfaces.msg import ParameterType  # noqa: E402
from rcl_interfaces.srv import GetParameters  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

import wb_sim  # noqa: E402
from helpers.ros import LockstepController, SimSetup, stamp_ns  # noqa: E402
from wb_sim.ros.dynamics import DEFAULT_NAMES  # noqa: E402

STATE_QOS = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope="module")
def s(tmp_path_factory):
    setup = SimSetup(tmp_path_factory.mktemp("truth"), "sync.mode:=lockstep",
                     "real_time_factor:=0.0", "sync.timeout_s:=0.0")
    yield setup
    setup.close()


@pytest.fixture(scope="module")
def ref():
    return wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))


EFFORTS = np.random.default_rng(11).normal(0.0, 5.0, (200, 64))


def _law(i, qj, vj, q):
    return {"effort": -80.0 * qj - 3.0 * vj + EFFORTS[i, :len(qj)]}


def _dynamics(s, *names):
    res = s.ros.call(GetParameters, "/wb_sim/get_dynamics", GetParameters.Request(names=names))
    return res.values


def test_dynamics_equal_pinocchio_at_the_returned_state(s, ref):
    """After 120 lockstep cycles the node waits at a moving state: get_dynamics answers
    that state (q equal to the odometry + joint states of the last published stamp, its
    stamp), and M and h equal pinocchio's crba and nonLinearEffects there within 1e-12;
    the contact Jacobian is the core's at that q, bit for bit."""
    js = s.ros.record(JointState, "joint_states", STATE_QOS)
    states = LockstepController(s, _law, 120).run(s)
    s.ros.spin_for(0.2)
    values = _dynamics(s)
    assert len(values) == len(DEFAULT_NAMES)
    got = dict(zip(DEFAULT_NAMES, values))
    assert got["stamp_ns"].type == ParameterType.PARAMETER_INTEGER
    assert got["stamp_ns"].integer_value == max(stamp_ns(m) for m in js.msgs)
    s.ros.stop_recording(js)
    model, data = ref.model, ref.model.createData()
    nv = model.nv
    q = np.array(got["q"].double_array_value)
    v = np.array(got["v"].double_array_value)
    qj, vj, _, _, q_seen, _ = states[-1]
    assert np.array_equal(q, q_seen) and np.array_equal(v[6:], vj)
    assert np.abs(v).max() > 1e-3  # a moving state: h has its velocity terms
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    M_ros = np.array(got["mass_matrix"].double_array_value).reshape(nv, nv)
    np.testing.assert_allclose(M_ros, M, rtol=0, atol=1e-12)
    h = pin.nonLinearEffects(model, data, q, v)
    np.testing.assert_allclose(np.array(got["nonlinear_effects"].double_array_value), h,
                               rtol=0, atol=1e-12)
    assert np.abs(h - pin.computeGeneralizedGravity(model, data, q)).max() > 1e-6
    P, J = ref.contact_jacobian(q)
    n = ref.contact_points.n
    J_ros = np.array(got["contact_jacobian"].double_array_value).reshape(3 * n, nv)
    assert np.array_equal(J_ros, J)
    P_ros = np.array(got["contact_positions"].double_array_value).reshape(n, 3)
    assert np.array_equal(P_ros, P)
    assert list(got["contact_points"].string_array_value)[:2] == ["left_foot/0", "left_foot/1"]


def test_shapes_and_an_unknown_name(s, ref):
    nv, n = ref.model.nv, ref.contact_points.n
    shape_m, shape_j, shape_names, bad = _dynamics(s, "shape.mass_matrix",
                                                   "shape.contact_jacobian",
                                                   "shape.contact_points", "inertia")
    assert list(shape_m.integer_array_value) == [nv, nv]
    assert list(shape_j.integer_array_value) == [3 * n, nv]
    assert list(shape_names.integer_array_value) == [n]
    assert bad.type == ParameterType.PARAMETER_STRING
    assert "unknown quantity 'inertia'" in bad.string_value and "mass_matrix" in bad.string_value


def _hand_cop(P, F, N, rows):
    """The centre of pressure of the points ``rows``, written out point by point."""
    num, den = np.zeros(3), 0.0
    for i in rows:
        fn = F[i, 0] * N[i, 0] + F[i, 1] * N[i, 1] + F[i, 2] * N[i, 2]
        num += fn * P[i]
        den += fn
    return num / den


def test_contact_state_is_the_cores_and_its_cop_and_zmp_the_hand_computation(s, ref):
    """From a reset, 150 paused steps without commands (zero torques): each contact_state
    equals the core's contact_points_state (positions, normals, penetrations, forces,
    stick/slip) and centroidal momentum after the same steps bit for bit; once the humanoid
    stands on both feet (most of them), each foot's CoP and the ZMP equal the hand
    computation within 1e-9 (NaN for a foot not touching yet); the momentum equals pinocchio's computeCentroidalMomentum."""
    from std_msgs.msg import Float64MultiArray

    from wb_sim.ros.conversions import read_contact_state
    steps = 150
    cs = s.ros.record(Float64MultiArray, "contact_state", STATE_QOS)
    s.reset()
    s.pause(True)
    try:
        s.ros.spin_for(0.5)  # the node sees the subscriber (it looks every 50 ms)
        cs.clear()
        for _ in range(steps):
            assert s.step().success
        assert s.ros.spin_until(lambda: len(cs.msgs) >= steps, 10.0), len(cs.msgs)
    finally:
        s.pause(False)
    s.ros.stop_recording(cs)
    got = sorted((read_contact_state(m) for m in cs.msgs),
                 key=lambda x: (x["stamp"][0, 0], x["stamp"][0, 1]))
    stamps = [int(x["stamp"][0, 0]) * 10**9 + int(x["stamp"][0, 1]) for x in got]
    assert set(np.diff(stamps)) == {1_000_000}
    core = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    core.reset()
    codes = {"none": 0.0, "stick": 1.0, "slip": 2.0}
    model, data = core.model, core.model.createData()
    names = np.array(core.contact_points_state().surface)
    standing = 0
    for k, x in enumerate(got):
        core.step(np.zeros(core.nj))
        r = core.contact_points_state()
        pts = x["points"]
        assert np.array_equal(pts[:, 0:3], r.position), k
        assert np.array_equal(pts[:, 3:6], r.normal), k
        assert np.array_equal(pts[:, 6], r.depth), k
        assert np.array_equal(pts[:, 7:10], r.force), k
        assert np.array_equal(pts[:, 10], [codes[c] for c in r.status]), k
        com, h = core.centroidal_momentum()
        assert np.array_equal(x["robot"][0, 3:6], com) and np.array_equal(x["robot"][0, 6:], h)
        hg = pin.computeCentroidalMomentum(model, data, core.q, core.v)
        np.testing.assert_allclose(x["robot"][0, 6:9], hg.linear, rtol=0, atol=1e-12)
        np.testing.assert_allclose(x["robot"][0, 9:], hg.angular, rtol=0, atol=1e-12)
        P, F, N = r.position, r.force, r.normal
        fn = np.einsum("ij,ij->i", F, N)
        for j, name in enumerate(core.surface_names):
            rows = np.flatnonzero(names == name)
            np.testing.assert_allclose(x["surfaces"][j, 3:], F[rows].sum(axis=0),
                                       rtol=0, atol=1e-9)
            if fn[rows].sum() > 0.0:
                np.testing.assert_allclose(x["surfaces"][j, :3], _hand_cop(P, F, N, rows),
                                           rtol=0, atol=1e-9)
            else:  # dropped from its start pose: not yet touching
                assert np.isnan(x["surfaces"][j, :3]).all()
        if all(fn[names == name].sum() > 50.0 for name in core.surface_names):
            standing += 1  # on both feet
        if fn.sum() > 0.0:
            zmp = _hand_cop(P, F, N, range(len(P)))
            np.testing.assert_allclose(x["robot"][0, :3], zmp, rtol=0, atol=1e-9)
    assert standing >= steps // 2
    # the ZMP between the feet, on the ground
    cops = got[-1]["surfaces"][:, :3]
    zmp = got[-1]["robot"][0, :3]
    assert min(cops[:, 1]) < zmp[1] < max(cops[:, 1]) and abs(zmp[2]) < 1e-3


def test_linearization_is_the_cores_and_leaves_the_state(s):
    """From a reset, 60 paused steps without commands; get_dynamics' A, B and tau equal the
    core's linearize_step after the same steps bit for bit (the state they were taken at: the
    same request's q and v), the state asked again right after is the same, and one more
    paused step lands where the core's does: the linearisation stepped the simulator and
    left nothing behind."""
    from wb_sim.ros.dynamics import ON_REQUEST
    assert set(ON_REQUEST) == {"A", "B", "tau"} and not set(ON_REQUEST) & set(DEFAULT_NAMES)
    s.reset()
    s.pause(True)
    try:
        for _ in range(60):
            assert s.step().success
        names = ("stamp_ns", "q", "v", "A", "B", "tau", "shape.A", "shape.B")
        got = dict(zip(names, _dynamics(s, *names)))
        again = dict(zip(("stamp_ns", "q", "v"), _dynamics(s, "stamp_ns", "q", "v")))
        assert s.step().success
        after = dict(zip(("q", "v"), _dynamics(s, "q", "v")))
    finally:
        s.pause(False)
    core = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    for _ in range(60):
        core.step(np.zeros(core.nj))
    nv, nj = core.model.nv, core.nj
    assert list(got["shape.A"].integer_array_value) == [2 * nv, 2 * nv]
    assert list(got["shape.B"].integer_array_value) == [2 * nv, nj]
    assert np.array_equal(got["q"].double_array_value, core.q)
    assert np.array_equal(got["v"].double_array_value, core.v)
    A, B = core.linearize_step()
    assert np.array_equal(np.reshape(got["A"].double_array_value, (2 * nv, 2 * nv)), A)
    assert np.array_equal(np.reshape(got["B"].double_array_value, (2 * nv, nj)), B)
    assert np.array_equal(got["tau"].double_array_value, core.applied_torques)
    assert np.abs(B[nv:]).max() > 1e-3  # torques move the velocities
    assert again["stamp_ns"].integer_value == got["stamp_ns"].integer_value
    assert np.array_equal(again["q"].double_array_value, got["q"].double_array_value)
    assert np.array_equal(again["v"].double_array_value, got["v"].double_array_value)
    core.step(np.zeros(nj))
    assert np.array_equal(after["q"].double_array_value, core.q)
    assert np.array_equal(after["v"].double_array_value, core.v)
