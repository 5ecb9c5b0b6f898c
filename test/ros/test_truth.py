"""The simulator's own truth on ROS: ``~/get_dynamics`` (wb_sim_interfaces/srv/GetDynamics:
M, h, the contact Jacobian at the state now, with that state), against pinocchio at the
returned state, and ``contact_state`` (wb_sim_interfaces/msg/ContactState) against the
core, over real DDS.

Skipped without rclpy unless ``WB_SIM_REQUIRE_ROS=1``."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from helpers.extras import require_ros

require_ros("sensor_msgs.msg", "wb_sim_interfaces.srv")

from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from wb_sim_interfaces.srv import GetDynamics  # noqa: E402

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
    """The answer: its state (stamp_ns, q, v, contact_points) and name -> matrix."""
    res = s.ros.call(GetDynamics, "/wb_sim/get_dynamics", GetDynamics.Request(names=names))
    assert res.success, res.message
    out = {"stamp_ns": res.stamp.sec * 10**9 + res.stamp.nanosec, "q": np.array(res.q),
           "v": np.array(res.v), "contact_points": list(res.contact_points)}
    for m in res.quantities:
        assert len(m.data) == m.rows * m.cols, m.name
        out[m.name] = np.array(m.data).reshape(m.rows, m.cols)
    return out, [m.name for m in res.quantities]


def test_dynamics_equal_pinocchio_at_the_returned_state(s, ref):
    """After 120 lockstep cycles the node waits at a moving state: get_dynamics answers
    that state (q equal to the odometry + joint states of the last published stamp, its
    stamp), and M and h equal pinocchio's crba and nonLinearEffects there within 1e-12;
    the contact Jacobian is the core's at that q, bit for bit."""
    js = s.ros.record(JointState, "joint_states", STATE_QOS)
    states = LockstepController(s, _law, 120).run(s)
    s.ros.spin_for(0.2)
    got, order = _dynamics(s)
    assert order == list(DEFAULT_NAMES)
    assert got["stamp_ns"] == max(stamp_ns(m) for m in js.msgs)
    s.ros.stop_recording(js)
    model, data = ref.model, ref.model.createData()
    nv = model.nv
    q, v = got["q"], got["v"]
    qj, vj, _, _, q_seen, _ = states[-1]
    assert np.array_equal(q, q_seen) and np.array_equal(v[6:], vj)
    assert np.abs(v).max() > 1e-3  # a moving state: h has its velocity terms
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    assert got["mass_matrix"].shape == (nv, nv)
    np.testing.assert_allclose(got["mass_matrix"], M, rtol=0, atol=1e-12)
    h = pin.nonLinearEffects(model, data, q, v)
    assert got["nonlinear_effects"].shape == (nv, 1)
    np.testing.assert_allclose(got["nonlinear_effects"][:, 0], h, rtol=0, atol=1e-12)
    assert np.abs(h - pin.computeGeneralizedGravity(model, data, q)).max() > 1e-6
    P, J = ref.contact_jacobian(q)
    n = ref.contact_points.n
    assert got["contact_jacobian"].shape == (3 * n, nv)
    assert np.array_equal(got["contact_jacobian"], J)
    assert got["contact_positions"].shape == (n, 3)
    assert np.array_equal(got["contact_positions"], P)
    assert len(got["contact_points"]) == n
    assert got["contact_points"][:2] == ["left_foot/0", "left_foot/1"]


def test_the_order_asked_the_state_alone_and_an_unknown_name(s, ref):
    """The quantities come in the order named; naming only the state's fields answers the
    state alone; an unknown name computes nothing and says which (and what is known)."""
    nv, n = ref.model.nv, ref.contact_points.n
    got, order = _dynamics(s, "contact_jacobian", "q", "mass_matrix")
    assert order == ["contact_jacobian", "mass_matrix"]
    assert got["contact_jacobian"].shape == (3 * n, nv) and got["mass_matrix"].shape == (nv, nv)
    state, order = _dynamics(s, "stamp_ns", "q")
    assert order == [] and state["q"].shape == (ref.model.nq,) and state["v"].shape == (nv,)
    res = s.ros.call(GetDynamics, "/wb_sim/get_dynamics",
                     GetDynamics.Request(names=["mass_matrix", "inertia"]))
    assert not res.success and list(res.quantities) == []
    assert "unknown quantity 'inertia'" in res.message and "mass_matrix" in res.message


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
    from wb_sim_interfaces.msg import ContactState

    from wb_sim.tools.bag import read_contact_state
    steps = 150
    cs = s.ros.record(ContactState, "contact_state", STATE_QOS)
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
    got = sorted((read_contact_state(m) for m in cs.msgs), key=lambda x: x["stamp_ns"])
    stamps = [x["stamp_ns"] for x in got]
    assert set(np.diff(stamps)) == {1_000_000}
    core = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    core.reset()
    from wb_sim_interfaces.msg import ContactPoint
    codes = {"none": ContactPoint.MODE_NONE, "stick": ContactPoint.MODE_STICK,
             "slip": ContactPoint.MODE_SLIP}
    assert sorted(codes.values()) == [0, 1, 2]
    model, data = core.model, core.model.createData()
    names = np.array(core.contact_points_state().surface)
    pts_ = core.contact_points
    frames = [pts_.surface_frames[k] for k in pts_.surface_of_point]
    index = [int(np.sum(pts_.surface_of_point[:i] == k))
             for i, k in enumerate(pts_.surface_of_point)]
    standing = 0
    for k, x in enumerate(got):
        core.step(np.zeros(core.nj))
        r = core.contact_points_state()
        assert x["surface"] == list(r.surface) and x["frame"] == frames, k
        assert list(x["index"]) == index, k
        assert np.array_equal(x["position"], r.position), k
        assert np.array_equal(x["normal"], r.normal), k
        assert np.array_equal(x["penetration"], r.depth), k
        assert np.array_equal(x["force"], r.force), k
        assert list(x["mode"]) == [codes[c] for c in r.status], k
        assert x["surface_names"] == list(core.surface_names) and x["frame_id"] == "world"
        com, h = core.centroidal_momentum()
        assert np.array_equal(x["com"], com) and np.array_equal(x["momentum"], h)
        hg = pin.computeCentroidalMomentum(model, data, core.q, core.v)
        np.testing.assert_allclose(x["momentum"][:3], hg.linear, rtol=0, atol=1e-12)
        np.testing.assert_allclose(x["momentum"][3:], hg.angular, rtol=0, atol=1e-12)
        P, F, N = r.position, r.force, r.normal
        fn = np.einsum("ij,ij->i", F, N)
        for j, name in enumerate(core.surface_names):
            rows = np.flatnonzero(names == name)
            np.testing.assert_allclose(x["surface_force"][j], F[rows].sum(axis=0),
                                       rtol=0, atol=1e-9)
            np.testing.assert_allclose(x["normal_force"][j], sum(fn[i] for i in rows),
                                       rtol=0, atol=1e-9)
            if fn[rows].sum() > 0.0:
                np.testing.assert_allclose(x["cop"][j], _hand_cop(P, F, N, rows),
                                           rtol=0, atol=1e-9)
            else:  # dropped from its start pose: not yet touching
                assert np.isnan(x["cop"][j]).all()
        if all(fn[names == name].sum() > 50.0 for name in core.surface_names):
            standing += 1  # on both feet
        if fn.sum() > 0.0:
            zmp = _hand_cop(P, F, N, range(len(P)))
            np.testing.assert_allclose(x["zmp"], zmp, rtol=0, atol=1e-9)
    assert standing >= steps // 2
    # the ZMP between the feet, on the ground
    cops = got[-1]["cop"]
    zmp = got[-1]["zmp"]
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
        got, order = _dynamics(s, "stamp_ns", "q", "v", "A", "B", "tau")
        assert order == ["A", "B", "tau"]
        again, _ = _dynamics(s, "stamp_ns", "q", "v")
        assert s.step().success
        after, _ = _dynamics(s, "q", "v")
    finally:
        s.pause(False)
    core = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    for _ in range(60):
        core.step(np.zeros(core.nj))
    nv, nj = core.model.nv, core.nj
    assert got["A"].shape == (2 * nv, 2 * nv) and got["B"].shape == (2 * nv, nj)
    assert np.array_equal(got["q"], core.q)
    assert np.array_equal(got["v"], core.v)
    A, B = core.linearize_step()
    assert np.array_equal(got["A"], A)
    assert np.array_equal(got["B"], B)
    assert np.array_equal(got["tau"][:, 0], core.applied_torques)
    assert np.abs(B[nv:]).max() > 1e-3  # torques move the velocities
    assert again["stamp_ns"] == got["stamp_ns"]
    assert np.array_equal(again["q"], got["q"])
    assert np.array_equal(again["v"], got["v"])
    core.step(np.zeros(nj))
    assert np.array_equal(after["q"], core.q)
    assert np.array_equal(after["v"], core.v)
