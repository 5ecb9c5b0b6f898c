"""Recording headless runs (wb_sim.tools.recording) and the progress line (wb_sim.tools.progress).

Numbers checked: every recorded value equals the simulator's own query at the
same step (centre of mass, base position, joint positions, applied torques,
per-surface contact forces rotated from the surface frame into the world), the
standing humanoid's recorded vertical force is its weight within 1 %, the
decimation and buffer growth keep the right samples, a save/load round trip is
bit-exact, and bad files give a RecordingError.
"""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest

import wb_sim
from wb_sim.controllers import PDGravityController
from wb_sim.tools.progress import Progress
from wb_sim.tools.recording import History, Recorder, RecordingError

STEPS = 400  # 0.4 s: the 1 mm drop has settled after about 0.2 s


def _controlled(sim):
    q0 = sim.state.joint_positions
    ctrl = PDGravityController(sim.robot, q0, 1000.0, 20.0, gravity=sim.config.gravity)
    return q0, lambda: ctrl(sim.q, sim.robot.joint_positions(sim.q), sim.v[sim.robot.idx_v])


@pytest.fixture(scope="module")
def standing():
    """400 steps of the standing humanoid, recorded every step, with the
    simulator's own readings at each step for comparison."""
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    q0, tau = _controlled(sim)
    rec = Recorder(sim, capacity=16)  # grows 16 -> 512
    direct = {"com": [], "base": [], "qj": [], "tau": [], "force": [], "t": []}
    rec.record(sim, q0)
    for _ in range(STEPS):
        q_before = sim.q
        sim.step(tau())
        assert rec.record(sim, q0)
        st = sim.state
        direct["t"].append(st.t)
        direct["com"].append(sim.center_of_mass())
        direct["base"].append(st.base_position)
        direct["qj"].append(st.joint_positions)
        direct["tau"].append(st.applied_torques.copy())
        # the step's contact forces act at the configuration it started from
        direct["force"].append([sim.frame_pose(w.frame, q_before).rotation @ w.force
                                for w in sim.contact_wrenches().values()])
    return sim, q0, rec.history(), {k: np.array(v) for k, v in direct.items()}


def test_recorded_values_are_the_simulators(standing):
    sim, q0, h, d = standing
    assert h.n == STEPS + 1
    assert h.t[0] == 0.0 and np.allclose(h.t[1:], d["t"], rtol=0, atol=1e-12)
    assert np.all(np.diff(h.wall) >= 0) and h.wall[0] == 0.0
    assert np.array_equal(h.com[1:], d["com"])
    assert np.array_equal(h.base_position[1:], d["base"])
    assert np.array_equal(h.joint_positions[1:], d["qj"])
    assert np.array_equal(h.applied_torques[1:], d["tau"])
    # the sum of the points' world forces per surface = the surface wrench rotated to world
    assert h.contact_force.shape == (2, STEPS + 1, 3)
    assert np.abs(h.contact_force[:, 1:] - d["force"].transpose(1, 0, 2)).max() < 1e-9
    assert np.array_equal(h.reference_positions, np.tile(q0, (STEPS + 1, 1)))
    assert h.joint_names == sim.joint_names and h.surface_names == ("left_foot", "right_foot")
    assert np.array_equal(h.torque_limits, sim.actuation.effort_limit)
    assert np.all(np.isfinite(h.torque_limits)) and h.torque_limits.max() == 200.0
    assert h.friction_coefficient == 1.0 and h.dt == 0.001 and h.robot == "wb_humanoid"
    assert h.mass == pytest.approx(35.7, abs=0.01)
    assert np.array_equal(h.ground_normal, [0.0, 0.0, 1.0])


def test_standing_humanoid_carries_its_weight(standing):
    sim, _, h, _ = standing
    weight = sim.mass * 9.81
    fz = h.normal_force.sum(axis=0)  # along the ground normal (world z)
    assert np.array_equal(fz, h.contact_force[:, :, 2].sum(axis=0))
    assert fz[0] == 0.0  # starts 1 mm above the ground
    settled = fz[-100:]
    assert abs(settled.mean() / weight - 1.0) < 0.01, settled.mean() / weight
    # symmetric posture: the feet share the load
    assert abs(h.normal_force[0, -1] - h.normal_force[1, -1]) < 0.01 * weight
    # tangential force well inside the friction cone
    assert np.all(h.tangential_force[:, -100:] < 0.1 * h.normal_force[:, -100:])
    # base height: the sink under the weight, a few mm
    assert 0.690 < h.base_position[-1, 2] < 0.6969


def test_every_and_growth():
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    _, tau = _controlled(sim)
    rec = Recorder(sim, every=7, capacity=16)
    taken = 0
    for _ in range(250):
        sim.step(tau())
        taken += rec.record()  # the recorder's own simulator by default
    h = rec.history()
    assert taken == h.n == len(rec) == 250 // 7
    assert np.allclose(h.t, 0.007 * np.arange(1, h.n + 1), rtol=0, atol=1e-12)
    assert np.all(np.isnan(h.reference_positions))  # no reference given
    rec.clear()
    assert len(rec) == 0 and rec.history().n == 0
    with pytest.raises(ValueError, match="every"):
        Recorder(sim, every=0)


def test_fixed_base_records_the_fixed_base_position():
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"),
                                     overrides={"floating_base": False})
    rec = Recorder(sim)
    for _ in range(20):
        sim.step(sim.gravity_torques())
        rec.record(sim)
    h = rec.history()
    assert np.array_equal(h.base_position, np.tile([0.0, 0.0, 0.696882], (20, 1)))
    assert np.array_equal(h.com[-1], sim.center_of_mass())


def test_save_load_round_trip_is_exact(standing, tmp_path):
    _, _, h, _ = standing
    path = h.save(tmp_path / "sub" / "run")  # suffix added, directory created
    assert path == tmp_path / "sub" / "run.npz" and path.stat().st_size > 100_000
    back = History.load(path)
    for name in History.__dataclass_fields__:
        a, b = getattr(h, name), getattr(back, name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), name
        else:
            assert a == b and type(a) is type(b), name


def test_contact_truth_round_trip_and_a_version_2_file(standing, tmp_path):
    """The contact truth's fields (a bag's contact_state) survive save / load exactly; a
    version 2 history, written before them, loads with none."""
    import dataclasses
    _, _, h, _ = standing
    k = 7
    rng = np.random.default_rng(1)
    cop = rng.normal(size=(2, k, 3))
    cop[1, :3] = np.nan  # a foot not touching yet
    truth = dataclasses.replace(h, truth_t=np.arange(k) * 0.01, cop=cop,
                                zmp=rng.normal(size=(k, 3)), cop_names=("left", "right"))
    back = History.load(truth.save(tmp_path / "truth"))
    assert back.cop_names == ("left", "right")
    for name in ("truth_t", "cop", "zmp"):
        assert np.array_equal(getattr(back, name), getattr(truth, name), equal_nan=True)
    with pytest.raises(RecordingError, match="'cop'"):
        dataclasses.replace(h, truth_t=np.zeros(k), cop=cop[:, :3], cop_names=("a", "b"))
    path = h.save(tmp_path / "v2")
    with np.load(path) as z:
        old = {key: z[key] for key in z.files if key not in ("truth_t", "cop", "zmp",
                                                               "cop_names")}
    old["format_version"] = np.array(2)
    np.savez(tmp_path / "v2.npz", **old)
    v2 = History.load(tmp_path / "v2.npz")
    assert v2.truth_t.size == 0 and v2.cop.shape == (0, 0, 3) and v2.cop_names == ()


def test_bad_files_raise_recording_error(tmp_path):
    with pytest.raises(RecordingError, match="no such file"):
        History.load(tmp_path / "missing.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(RecordingError, match="not a wb_sim history"):
        History.load(junk)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.arange(3))
    with pytest.raises(RecordingError, match="not a wb_sim history"):
        History.load(other)
    assert issubclass(RecordingError, wb_sim.WbSimError)
    with pytest.raises(RecordingError, match="'com' has shape"):
        History(t=np.zeros(3), wall=np.zeros(3), base_position=np.zeros((3, 3)),
                com=np.zeros((2, 3)), contact_force=np.zeros((0, 3, 3)),
                joint_positions=np.zeros((3, 1)), reference_positions=np.zeros((3, 1)),
                applied_torques=np.zeros((3, 1)), torque_limits=np.ones(1),
                joint_names=("j",), surface_names=())


def test_core_imports_no_plotting_or_bag_library():
    code = ("import sys, wb_sim, wb_sim.tools.recording, wb_sim.tools.progress, wb_sim.tools.demo, wb_sim.tools.bench\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('matplotlib', 'rosbags', 'rclpy')]\n"
            "assert not bad, bad\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


# ----------------------------------------------------------------------------- progress


def test_progress_plain_lines_when_not_a_terminal():
    out = io.StringIO()
    bar = Progress(2.0, label="run", stream=out, interval=0.0)
    for k in range(1, 5):
        bar.update(0.5 * k, extra=lambda: "base z = 0.7 m")
    bar.close()
    bar.close()  # once only
    lines = out.getvalue().splitlines()
    assert len(lines) == 5 and "\r" not in out.getvalue()
    assert lines[0].startswith("run: t =    0.50 / 2 s ( 25 %), real-time factor")
    assert "left" in lines[0] and lines[0].endswith("base z = 0.7 m")
    assert "(100 %)" in lines[-1] and "wall" in lines[-1]


def test_progress_rewrites_one_line_on_a_terminal():
    out = io.StringIO()
    bar = Progress(1.0, stream=out, tty=True, interval=0.0)
    bar.update(0.25)
    bar.update(0.5)
    bar.close(1.0)
    text = out.getvalue()
    assert text.count("\r") == 3 and text.count("\n") == 1 and text.endswith("\n")
    assert "[######..................]" in text and "[########################]" in text
    silent = io.StringIO()
    Progress(1.0, stream=silent, enabled=False, interval=0.0).close(1.0)
    assert silent.getvalue() == ""
