"""PNG plots of a run (wb_sim.tools.plot, ``wb_sim_plot``) and the demo's --record / --plot.

Checked: the five figures are written as real PNG images of a legible size
(at least 800 x 400 pixels, tens of kB), the contact figure is left out
without contact surfaces, the joint subsets are the joints with the largest
tracking error / torque-to-limit ratio, the command line plots a saved .npz
and exits with 2 and a one-line message on a missing or corrupt input.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from helpers.extras import require_modules

require_modules("matplotlib", why="pip install wb_sim[plot] (the plot extra)")

import wb_sim  # noqa: E402
from wb_sim.tools import demo  # noqa: E402
from wb_sim.controllers import PDGravityController  # noqa: E402
from wb_sim.tools.plot import main, plot_history, torque_selection, tracking_selection  # noqa: E402
from wb_sim.tools.recording import History, Recorder  # noqa: E402

#: a headless recording's figures (contact_state.png: the Recorder records the contact truth)
FIGURES = ["base_com.png", "contact_forces.png", "joint_tracking.png", "torques.png",
           "real_time_factor.png", "contact_state.png"]


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG file; fails if it is not one."""
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def history():
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    q0 = sim.state.joint_positions
    ctrl = PDGravityController(sim.robot, q0, 1000.0, 20.0, gravity=sim.config.gravity)
    rec = Recorder(sim)
    for _ in range(300):
        sim.step(ctrl(sim.q, sim.q[7:], sim.v[6:]))
        rec.record(sim, q0)
    return rec.history()


def _synthetic(nj: int, ns: int, n: int = 200) -> History:
    rng = np.random.default_rng(1)
    t = np.arange(n) * 1e-3
    q = 0.01 * rng.standard_normal((n, nj))
    return History(
        t=t, wall=2 * t, base_position=np.zeros((n, 3)), com=np.zeros((n, 3)),
        contact_force=np.zeros((ns, n, 3)), joint_positions=q,
        reference_positions=np.zeros((n, nj)), applied_torques=rng.standard_normal((n, nj)),
        torque_limits=np.full(nj, 10.0), joint_names=tuple(f"j{i}" for i in range(nj)),
        surface_names=tuple(f"s{i}" for i in range(ns)), mass=1.0)


def test_plot_history_writes_legible_pngs(history, tmp_path):
    paths = plot_history(history, tmp_path / "plots")
    assert [p.name for p in paths] == FIGURES
    for p in paths:
        assert p.is_file() and p.stat().st_size > 20_000, (p, p.stat().st_size)
        w, h = png_size(p)
        assert w >= 800 and h >= 400, (p.name, w, h)
    # the joint grid: 12 of 23 joints in 3 rows of 4 small plots
    w, h = png_size(tmp_path / "plots" / "joint_tracking.png")
    assert w > h


def test_no_contact_figure_without_surfaces(tmp_path):
    paths = plot_history(_synthetic(nj=3, ns=0), tmp_path / "none")
    assert [p.name for p in paths] == ["base_com.png", "joint_tracking.png", "torques.png",
                                       "real_time_factor.png"]
    # an unknown friction coefficient (a bag of ros2 bag record): no cone drawn
    h = _synthetic(nj=2, ns=1)
    assert np.isnan(h.friction_coefficient)
    paths = plot_history(h, tmp_path / "one")
    assert len(paths) == 5 and paths[1].name == "contact_forces.png"


def test_joint_subsets_are_the_worst_joints():
    h = _synthetic(nj=30, ns=1)
    h.joint_positions[:, 17] += 0.5  # by far the largest tracking error
    h.joint_positions[:, 4] += 0.2  # second
    idx, how, rms, has_ref = tracking_selection(h)
    assert len(idx) == 12 and idx[:2] == [17, 4] and "tracking error" in how
    assert rms[17] == pytest.approx(np.sqrt(np.mean((h.joint_positions[:, 17]) ** 2)))
    assert rms[idx[2]] == max(rms[i] for i in range(30) if i not in (17, 4))
    h.applied_torques[50, 9] = 9.5  # 95 % of its 10 N*m limit
    h.torque_limits[22] = 1.0  # a weak joint: its peak is several times its limit
    idx, how, peak, limited = torque_selection(h)
    assert idx[:2] == [22, 9] and "limit" in how and limited.all()
    # no reference: the joints that moved most
    h.reference_positions[:] = np.nan
    h.joint_positions[:, 8] += np.linspace(0.0, 1.0, h.n)  # a 1 rad sweep
    idx, how, _, _ = tracking_selection(h, limit=3)
    assert idx[0] == 8 and len(idx) == 3 and "no reference" in how


def test_cli_plots_a_saved_history(history, tmp_path, capsys):
    npz = history.save(tmp_path / "run.npz")
    assert main([str(npz)]) == 0  # default output: run_plots next to the input
    out = tmp_path / "run_plots"
    assert sorted(p.name for p in out.iterdir()) == sorted(FIGURES)
    assert "wb_sim_plot: 300 samples" in capsys.readouterr().out


@pytest.mark.parametrize("content", [None, b"not a zip file", b"PK\x03\x04 broken zip"])
def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys, content):
    path = tmp_path / "run.npz"
    if content is not None:
        path.write_bytes(content)
    assert main([str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wb_sim_plot: ") and err.count("\n") == 1, err
    assert ("no such file" in err) if content is None else ("not a wb_sim history" in err)
    assert not (tmp_path / "out").exists()


def test_demo_records_and_plots(tmp_path, capsys):
    npz, plots = tmp_path / "demo.npz", tmp_path / "demo_plots"
    assert demo.main(["--duration", "0.2", "--record", str(npz), "--plot", str(plots)]) == 0
    h = History.load(npz)
    assert h.n == 201 and h.t[-1] == pytest.approx(0.2)
    q0 = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid")).state.joint_positions
    assert np.array_equal(h.reference_positions[-1], q0)  # the PD reference
    assert sorted(p.name for p in plots.iterdir()) == sorted(FIGURES)
    captured = capsys.readouterr()
    assert "(100 %)" in captured.err  # the progress line's last state
    assert "result: stands" in captured.out
