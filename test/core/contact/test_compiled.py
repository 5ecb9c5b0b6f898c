"""The compiled all-sticking solve (wb_sim/_compiled.c) against the Python code it replaces
(CompliantContact.solve's all-sticking branch, run with WB_SIM_PLAIN=1 or the kernel taken
away): the same forces, velocities and deformations to 1e-12 at every step, the same
trajectories over 10 s of icub_stand, the Python path wherever a point pulls or slips, and the
switch that forces the plain path."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import wb_sim
from wb_sim import compiled
from wb_sim.controllers import PDGravityController
from helpers import lying
from helpers.extras import require_robot_data

#: the tests' bound on compiled against plain: relative to the largest entry (rounding: the
#: kernel sums in another order than BLAS; measured 1e-15 per solve, 4e-14 over 10 s)
RTOL = 1e-12


@pytest.fixture(autouse=True)
def _compiled_path(monkeypatch):
    """These tests choose the path themselves (a whole run may have WB_SIM_PLAIN=1)."""
    monkeypatch.setenv(compiled.PLAIN_ENV, "0")


def _kernel():
    k = compiled.kernels()
    assert k is not None, ("wb_sim's compiled kernels are not built: `pip install ./wb_sim` (or "
                           "`pip install -e ./wb_sim` in a source tree) builds them")
    return k


def _standing_humanoid(**overrides):
    """The shipped humanoid, feet only, under the example PD (kp 1000, kd 20)."""
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"),
                                     overrides={"collision.enabled": False, **overrides})
    ctrl = PDGravityController(sim.robot, sim.joint_positions.copy(), kp=1000.0, kd=20.0)
    return sim, ctrl


def _close(a, b, scale=None) -> float:
    """max |a - b| relative to ``scale`` (default: the largest |b|)."""
    if not np.size(b):
        return 0.0
    scale = float(np.abs(b).max()) if scale is None else scale
    return float(np.abs(np.asarray(a) - np.asarray(b)).max()) / max(scale, 1e-300)


class _BothPaths:
    """Wraps a contact model's solve: each call runs the Python path and then, from the same
    state, the compiled one, and records the largest difference and how often the kernel
    solved (returned 0)."""

    def __init__(self, contact):
        self.c, self.kernel, self.solve = contact, contact._stick_solve, contact.solve
        self.compiled = self.declined = self.partial = 0  # partial: solved, some points out
        self.worst = 0.0
        assert self.kernel is not None
        contact._stick_solve = self._counting
        contact.solve = self

    def _counting(self, *args):
        status = self.kernel(*args)
        if status == 0:
            self.compiled += 1
            self.partial += len(args[4]) < self.c.points.n  # (args[4]: the points' depths)
        else:
            self.declined += 1
        return status

    def __call__(self, Minv, v_free, u, dt):
        c = self.c
        snap = c.snapshot()
        c._stick_solve = None
        try:
            ref = [np.array(x) for x in self.solve(Minv, v_free, u, dt)]
            ref_after = (c.twist, c.status, None if c._generalized is None else
                         np.array(c._generalized[1]))
        finally:
            c._stick_solve = self._counting
        c.restore(snap)
        out = self.solve(Minv, v_free, u, dt)
        after = (c.twist, c.status, None if c._generalized is None else c._generalized[1])
        # v' = v_free + the contacts' change: at rest they cancel, so against |v_free|
        self.worst = max(self.worst, _close(out[0], ref[0], max(float(np.abs(v_free).max()),
                                                                float(np.abs(ref[0]).max()))))
        # u' = u + h w'_t: against |u| and how far the step's velocities move it (a landing's
        # u is micrometres: v's rounding, times h, is 1e-13 of it)
        moved = dt * float(np.abs(v_free).max())
        self.worst = max(self.worst, _close(out[1], ref[1]),
                         _close(out[2], ref[2], max(float(np.abs(u).max()),
                                                    float(np.abs(ref[2]).max()), moved)))
        # the twist, m, against the deformations' scale (a standing foot's twist is ~1e-22 m:
        # rounding, relative to itself)
        deformation = max(float(np.abs(ref[2]).max()), float(np.abs(ref_after[0]).max()), moved)
        self.worst = max(self.worst, _close(after[0], ref_after[0], deformation))
        assert np.array_equal(after[1], ref_after[1])  # the points' states: stick / slip / none
        if ref_after[2] is not None:
            self.worst = max(self.worst, _close(after[2], ref_after[2]))
        return out


@pytest.mark.parametrize("torsion", [0.0, 0.02])
def test_each_compiled_solve_equals_the_python_one_on_a_standing_humanoid(torsion):
    _kernel()
    sim, ctrl = _standing_humanoid(**{"contact.torsional_friction": torsion})
    both = _BothPaths(sim.contact)
    for _ in range(1500):
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
    # the kernel took almost every step (a landing's first steps need the active set)
    assert both.compiled >= 1400, (both.compiled, both.declined)
    assert both.worst < RTOL, both.worst
    assert sim.q[2] > 0.6  # it stood


def _icub_stand_run(plain: bool, monkeypatch, torsion: float) -> tuple[np.ndarray, wb_sim.Simulator]:
    from wb_sim.tools.bench import icub_stand_setup
    monkeypatch.setenv(compiled.PLAIN_ENV, "1" if plain else "0")
    sim, ctrl = icub_stand_setup(**{"contact.torsional_friction": torsion})
    assert (sim.contact._stick_solve is None) == plain
    states = np.empty((10_000, sim.model.nq + sim.model.nv))
    for i in range(10_000):
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
        states[i, :sim.model.nq], states[i, sim.model.nq:] = sim.q, sim.v
    return states, sim


@pytest.mark.parametrize("torsion", [0.0, 0.02])
def test_icub_stand_compiled_follows_the_plain_trajectory_for_10_s(monkeypatch, torsion):
    """The issue's check: the benchmark's 10 s, compiled and plain, the same trajectory to
    1e-12 (measured: 4e-14)."""
    _kernel()
    require_robot_data("icub")
    plain, _ = _icub_stand_run(True, monkeypatch, torsion)
    fast, sim = _icub_stand_run(False, monkeypatch, torsion)
    assert sim.contact.solves > 9900 and sim.contact.active_set_solves == 0
    assert np.abs(fast - plain).max() < RTOL * np.abs(plain).max()


def test_where_a_point_pulls_or_slips_the_python_path_runs():
    """A humanoid dropped from 1 cm and pushed sideways: impacts, take-offs and slips, where
    the kernel declines and the Python active-set loop solves; every solve still equals the
    plain one."""
    _kernel()
    sim, ctrl = _standing_humanoid(**{"initial.base_position": [0.0, 0.0, 0.72]})
    both = _BothPaths(sim.contact)
    for i in range(1200):
        if i == 400:
            sim.apply_external_wrench("pelvis", force=[0.0, 400.0, 0.0], duration_s=0.1)
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
    assert both.declined > 0 and sim.contact.active_set_solves > 0, \
        (both.declined, sim.contact.active_set_solves)
    # solved compiled: standing, and with only some points touching (landing, pushed)
    assert both.compiled > 0 and both.partial > 0, (both.compiled, both.partial)
    assert both.worst < RTOL, both.worst


@pytest.mark.parametrize("rate", [500, 4000])
@pytest.mark.parametrize("mass", [0.05, 0.5, 200.0])
def test_a_light_or_heavy_box_at_any_rate_gets_the_same_solves(mass, rate):
    """Beyond the robots: a box of 50 g to 200 kg on its 4 corners, default contact
    parameters, 500 Hz and 4 kHz, dropped from 1 mm: the landing's solves (some points in the
    air, impacts) and the resting ones, compiled where they stick, equal the Python ones."""
    from core.test_physics import BOX_LZ, box_urdf
    _kernel()
    sim = wb_sim.Simulator.from_params({
        "robot_description": box_urdf(m=mass), "contact_surfaces": ["foot"],
        "foot.frame": "sole", "foot.shape": "box", "foot.size": [0.2, 0.1],
        "initial.base_position": [0.0, 0.0, BOX_LZ / 2 + 1e-3], "physics_rate_hz": float(rate)})
    both = _BothPaths(sim.contact)
    for _ in range(rate // 2):  # 0.5 s
        sim.step(np.zeros(sim.nj))
    assert both.compiled > rate // 4, (both.compiled, both.declined)
    assert both.worst < RTOL, both.worst
    assert np.abs(sim.v).max() < 1e-2  # settled (the 200 kg box at 4 kHz still sinks 1.4 mm/s)


def test_wb_sim_plain_forces_the_plain_path(monkeypatch):
    monkeypatch.setenv(compiled.PLAIN_ENV, "1")
    assert compiled.kernels() is None and compiled.path() == "plain"
    sim, _ = _standing_humanoid()
    assert sim.contact._stick_solve is None
    monkeypatch.setenv(compiled.PLAIN_ENV, "0")
    assert compiled.path() == "compiled", "the compiled kernels are not built"
    sim, _ = _standing_humanoid()
    assert sim.contact._stick_solve is _kernel().stick_solve


def test_a_value_of_wb_sim_plain_other_than_0_or_1_is_a_config_error(monkeypatch):
    monkeypatch.setenv(compiled.PLAIN_ENV, "yes")
    with pytest.raises(wb_sim.ConfigError, match="WB_SIM_PLAIN='yes': 1 runs the plain"):
        _standing_humanoid()


def test_a_missing_extension_is_said_once_and_the_plain_path_runs(monkeypatch):
    monkeypatch.delenv(compiled.PLAIN_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "wb_sim._compiled", None)  # `from . import` raises
    monkeypatch.setattr(compiled, "_missing_said", False)
    with pytest.warns(RuntimeWarning, match="not built.*plain Python step"):
        assert compiled.kernels() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compiled.kernels() is None  # said once


def test_the_kernel_refuses_arrays_of_the_wrong_type_or_shape():
    stick = _kernel().stick_solve
    nv, k = 8, 2
    M, J, v = np.eye(nv), np.zeros((3 * k, nv)), np.zeros(nv)
    u, d = np.zeros((2, k)), np.full(k, 1e-3)
    out = (np.empty(nv), np.empty((3, k)), np.empty((2, k)))
    coefs = (1.0, 1.0, -1.0, 1.0, 1.0, 1e-3)
    J[:, 0] = 1.0
    assert stick(M, J, v, u, d, d, None, *coefs, *out) in (0, 1, 2)
    with pytest.raises(TypeError, match="float64"):
        stick(M.astype(np.float32), J, v, u, d, d, None, *coefs, *out)
    with pytest.raises(ValueError, match="shapes"):
        stick(M, J[:-1], v, u, d, d, None, *coefs, *out)
    with pytest.raises(ValueError, match="shapes"):
        stick(M, J, v, u, d, d[:1], None, *coefs, *out)
    with pytest.raises(ValueError, match="shapes"):  # r = 4 with a twist: F must be (4, k)
        stick(M, np.zeros((4 * k, nv)), v, u, d, d, np.zeros(k), *coefs, *out)
    frozen = np.empty(nv)
    frozen.setflags(write=False)
    with pytest.raises((BufferError, ValueError, TypeError)):
        stick(M, J, v, u, d, d, None, *coefs, frozen, *out[1:])
    assert stick(M, J, v, u, d, -d, None, *coefs, *out) == 3  # a depth <= 0: declined


# ----------------------------------------------------------------------------- contact points


def _points_pair(monkeypatch, overrides):
    """The same simulator twice: its contact points updated by the kernel and by the plain
    Python code."""
    sims = []
    for plain in ("0", "1"):
        monkeypatch.setenv(compiled.PLAIN_ENV, plain)
        sims.append(_standing_humanoid(**overrides)[0])
    monkeypatch.setenv(compiled.PLAIN_ENV, "0")
    fast, ref = sims
    assert fast.contact_points._points_plane is not None
    assert ref.contact_points._points_plane is None
    return fast, ref


@pytest.mark.parametrize("overrides", [
    {},  # boxes on the level plane
    {"left_foot.shape": "sphere", "left_foot.radius": 0.03, "ground.height": -0.02},
    {"ground.normal": [0.6, -0.0, 0.8], "ground.height": 0.05},  # the ground tilted
], ids=["boxes", "sphere", "tilted"])
def test_compiled_contact_points_equal_the_python_update(monkeypatch, overrides):
    """ContactPoints.update against a plane in one compiled call (points_plane): at 40 random
    configurations (the base anywhere, turned anyhow, the joints within their limits), the
    points' world and ground positions, depths, Jacobian rows and joint placements equal the
    Python update's to rounding."""
    import pinocchio as pin
    fast, ref = _points_pair(monkeypatch, overrides)
    rng = np.random.default_rng(11)
    model = fast.robot.model
    lo, hi = model.lowerPositionLimit, model.upperPositionLimit
    lo, hi = np.where(np.abs(lo) < 10, lo, -3.0), np.where(np.abs(hi) < 10, hi, 3.0)
    worst = 0.0
    for _ in range(40):
        q = rng.uniform(lo, hi)
        q[:3] = rng.normal(scale=0.5, size=3)
        q[3:7] = rng.normal(size=4)
        q[3:7] /= np.linalg.norm(q[3:7])
        out = []
        for sim in (fast, ref):
            m, d, pts = sim._model_step, sim._data_step, sim.contact_points
            pin.computeJointJacobians(m, d, q)
            pts.update(m, d, None)
            out.append((pts.position_T.copy(), pts.position_gT.copy(), pts.depth.copy(),
                        pts.jacobian_component_major().copy(), pts._HT_now.copy(),
                        pts.jacobian_g().copy()))
        for a, b in zip(*out):
            assert a.shape == b.shape
            worst = max(worst, _close(a, b))
    assert worst < RTOL, worst
    assert worst > 0 or overrides == {}  # (a test of a copy would read 0 everywhere)


def test_the_points_kernel_refuses_arrays_of_the_wrong_type_or_shape():
    sim = _standing_humanoid()[0]
    pts = sim.contact_points
    kernels = _kernel()
    assert pts._plan is not None  # bound at the simulator's first update
    args = [pts._placement_rows, pts.joint_ids, pts.slot, pts.r_local, None, pts.basis,
            pts.ground.origin, pts.plane_z, pts._rotated, pts._row_support, pts._HT,
            pts.position_T, pts.position_gT, pts._Jp]
    plan = kernels.points_plane_bind(*args)
    J, depth = sim._data_step.J, np.empty(pts.n)
    assert kernels.points_plane(plan, J, depth) is None
    for k, value, error, text in [
            (3, pts.r_local[:-1], ValueError, "shapes"),
            (1, pts.joint_ids.astype(np.int32), TypeError, "int64"),
            (1, pts.joint_ids + 10_000, ValueError, "out of range"),
            (2, pts.slot + 100, ValueError, "out of range"),
            (10, pts._HT.astype(np.float32), TypeError, "float64")]:
        bad = list(args)
        bad[k] = value
        with pytest.raises(error, match=text):
            kernels.points_plane_bind(*bad)
    frozen = pts._Jp.copy()
    frozen.setflags(write=False)
    with pytest.raises((BufferError, ValueError, TypeError)):
        kernels.points_plane_bind(*args[:-1], frozen)
    with pytest.raises(ValueError, match="shapes"):
        kernels.points_plane(plan, J[:, :-1], depth)
    with pytest.raises(ValueError, match="shapes"):
        kernels.points_plane(plan, J, depth[:-1])
    with pytest.raises(ValueError):
        kernels.points_plane(object(), J, depth)  # not a plan


def test_the_candidates_kernel_selects_declines_and_refuses_as_documented():
    """stick_solve_candidates (the compliant solve over MergedPoints.candidates): no point
    selected is code 4 with the depths' maximum; more rows than max_rows is code 3 with the
    selection written; wrong types, shapes and candidate indices are errors."""
    kernel = _kernel().stick_solve_candidates
    nv, n = 8, 6
    cand = np.array([1, 3, 4], dtype=np.int64)
    c = len(cand)
    rows = np.zeros((3, c, nv))
    rows[:, :, 0] = 1.0
    M, v, u = np.eye(nv), np.zeros(nv), np.zeros((2, n))
    coefs = (1.0, 1.0, -1.0, 1.0, 1.0, 1e-3)

    def call(dd, w, max_rows=48, **bad):
        d = np.full(n, np.nan)  # every point's depth: the kernel reads the candidates' alone
        d[cand] = dd
        args = dict(M=M, rows=rows, v=v, d=d, w=w, u=u, cand=cand)
        args.update({k: x for k, x in bad.items() if k in args})
        out = dict(vn=np.empty(nv), F=np.empty(3 * c), sel=np.full(c, -1, dtype=np.int64),
                   ds=np.full(c, np.nan), force=np.full((n, 3), np.nan),
                   x=np.full((2, n), np.nan), status=np.full(n, 7, dtype=np.int8))
        out.update({k: x for k, x in bad.items() if k in out})
        res = kernel(*args.values(), *coefs, max_rows, *out.values())
        return res, out

    # nothing touches now or after the free motion (w_n > 0: moving away)
    (code, k, top), _ = call(np.array([-0.01, -0.003, -0.02]), np.full(c, 1.0))
    assert (code, k, top) == (4, 0, -0.003)
    (code, k, top), _ = call(np.full(c, -np.inf), np.zeros(c))
    assert (code, k, top) == (4, 0, -np.inf)
    # two touch (one now, one after the free motion at 2 m/s into the ground): too many rows
    dd, w = np.array([0.002, -0.001, -0.5]), np.array([0.0, -2.0, 0.0])
    (code, k, top), out = call(dd, w, max_rows=5)
    assert (code, k, top) == (3, 2, 0.002)
    np.testing.assert_array_equal(out["sel"][:2], [0, 1])
    np.testing.assert_array_equal(out["ds"][:2], [0.002, -0.001 - 1e-3 * -2.0])
    # written only when solved: untouched
    assert np.isnan(out["force"]).all() and np.isnan(out["x"]).all() and (out["status"] == 7).all()
    # solved: both touch, the tangential rows on their own columns (no force along them)
    rows[:] = 0.0
    rows[0, :, 1] = rows[1, :, 2] = rows[2, :, 0] = 1.0
    dd = np.array([0.002, 0.0005, -0.5])
    (code, k, top), out = call(dd, w)
    assert (code, k, top) == (0, 2, 0.002)
    assert list(out["status"]) == [0, 1, 0, 1, 0, 0]
    J = rows[:, :2].reshape(6, nv)  # the reference: the system, solved by numpy
    h, (ct, cn, tt, tn) = coefs[-1], coefs[:4]
    A = h * J @ J.T + np.diag(np.repeat([ct, ct, cn], 2) / np.sqrt(np.tile(dd[:2], 3)))
    f = np.linalg.solve(A, np.concatenate([tt * u[:, [1, 3]].ravel(), tn * dd[:2]]))
    np.testing.assert_allclose(out["F"][:6], f, rtol=1e-12)
    np.testing.assert_allclose(out["force"][[1, 3]], f.reshape(3, 2).T, rtol=1e-12)
    assert not out["force"][[0, 2, 4, 5]].any() and f[4:].min() > 0.0  # zeroed by the call
    assert not out["x"][:, [0, 2, 4, 5]].any()
    np.testing.assert_allclose(out["vn"], h * J.T @ f, rtol=1e-12)
    with pytest.raises(TypeError, match="int64"):
        call(dd, w, cand=cand.astype(np.int32))
    with pytest.raises(TypeError, match="int8"):
        call(dd, w, status=np.zeros(n, dtype=np.int64))
    with pytest.raises(TypeError, match="1-d float64"):
        call(dd, w, F=np.empty((3, c)))
    with pytest.raises(ValueError, match="shapes"):
        call(dd, w, F=np.empty(3 * c - 1))
    with pytest.raises(ValueError, match="shapes"):
        call(dd, w, d=np.zeros(n - 1))
    with pytest.raises(ValueError, match="shapes"):
        call(dd, w, sel=np.zeros(c - 1, dtype=np.int64))
    with pytest.raises(IndexError, match="beyond u"):
        call(dd, w, cand=np.array([1, 3, n], dtype=np.int64))


def test_the_feet_placed_first_by_the_narrow_phase_are_the_merged_joins_bit_for_bit():
    """Without pair blocks, WholeBodyContact's narrow phase places the feet's depths and rows
    before the collision slots' (collision_plane_near and collision_plane_rows with a lead),
    and MergedPoints.refresh takes those arrays instead of joining: the same arrays, dtypes
    and values as its three np.concatenate calls, on the lying humanoid's steps. The rows
    call refuses a lead without an index and rows of the wrong size."""
    sim = lying.humanoid("compliant")
    pts, coll = sim.contact.points, sim.contact.collision
    assert coll._plan is not None and not pts.blocks
    zero, joined_steps = np.zeros(sim.nj), 0
    for _ in range(300):
        sim.step(zero)
        if coll.joined is None:
            continue
        joined_steps += 1
        joined = (pts.depth, pts.candidate_rows, pts.candidates)
        assert all(a is b for a, b in zip(joined, coll.joined))
        np.testing.assert_array_equal(coll.depth, joined[0][pts.nf:])
        coll.joined = None
        pts.refresh()  # numpy's joins
        for got, want in zip(joined, (pts.depth, pts.candidate_rows, pts.candidates)):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
    assert joined_steps > 200
    data, kc, nv = sim.contact._data, len(coll.candidates), pts.nv
    lead = np.zeros((3 * pts.nf, nv))
    good = [coll._plan, data.J, np.empty(kc, dtype=np.int64), np.empty((kc, 3)),
            np.empty((3, pts.nf + kc, nv)), lead, np.empty(pts.nf + kc, dtype=np.int64)]
    _kernel().collision_plane_rows(*good)
    np.testing.assert_array_equal(good[6], np.concatenate([np.arange(pts.nf), good[2] + pts.nf]))
    for at, bad, error in [(6, None, ValueError), (4, np.empty((3, kc, nv)), ValueError),
                           (5, np.zeros((3 * pts.nf, nv + 1)), ValueError),
                           (6, np.empty(pts.nf + kc, dtype=np.int32), TypeError)]:
        args = list(good)
        args[at] = bad
        with pytest.raises(error):
            _kernel().collision_plane_rows(*args)


def test_the_velocity_kernel_is_rotate_inverse_bit_for_bit():
    """sim.v's base rows (rotate_inverse_into, wb_sim/_compiled.c) against its reference
    robot.rotate_inverse, on random unit quaternions and vectors at offsets; then the
    simulator's public velocity with the kernel and without it, on a humanoid pushing a free
    box (two free roots), at every step: bit for bit."""
    from wb_sim.robot import rotate_inverse
    k, rng = _kernel(), np.random.default_rng(7)
    for _ in range(500):
        q = rng.normal(size=12)
        q[4:8] /= np.linalg.norm(q[4:8])
        out = rng.normal(size=9) * 10.0
        want = out.copy()
        want[5:8] = rotate_inverse(q[4:8], out[5:8])
        k.rotate_inverse_into(q, 1, out, 5)
        assert np.array_equal(out, want)
    for args, error in [((np.zeros(7), 1, np.zeros(3), 0), IndexError),
                        ((np.zeros(7), 0, np.zeros(3), 1), IndexError),
                        ((np.zeros(7), -1, np.zeros(3), 0), IndexError),
                        ((np.zeros(7, dtype=np.float32), 0, np.zeros(3), 0), TypeError),
                        ((np.zeros(7), 0, np.zeros(3).view(np.int64), 0), TypeError)]:
        with pytest.raises(error):
            k.rotate_inverse_into(*args)
    with pytest.raises(ValueError, match="read-only"):  # the simulator's frozen arrays
        k.rotate_inverse_into(np.zeros(7), 0, np.frombuffer(bytes(24)), 0)
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
        "objects.names": ["box"], "objects.shapes": ["box"], "objects.sizes": [0.2, 0.2, 0.2],
        "objects.mass": [3.0], "objects.positions": [0.35, 0.0, 0.6],
        "objects.angular_velocities": [2.0, -1.0, 3.0]})
    assert sim._rotate_into is not None and len(sim._free_roots) == 2  # base, box
    ctrl = PDGravityController(sim.robot, sim.joint_positions.copy(), kp=1000.0, kd=20.0)
    for _ in range(400):
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
        s = sim._s
        compiled_v = sim._public_velocity(s.q, s.v)
        sim._rotate_into = None
        try:
            assert np.array_equal(compiled_v, sim._public_velocity(s.q, s.v))
        finally:
            sim._rotate_into = _kernel().rotate_inverse_into
    assert np.abs(sim.v[-6:-3]).max() > 1e-3  # the box moves: its rows were converted
