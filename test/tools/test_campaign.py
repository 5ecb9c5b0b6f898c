"""Campaigns (wb_sim.tools.campaign, wb_sim_batch): the same table bit for bit on a local pool of 1
and 2 workers and on a local Ray instance; resume after an interruption; validation errors
naming the key; metrics, delays and mass scaling against numbers computed here independently.

Ray, pyarrow (the test extra) and matplotlib (the plot extra) are optional: without them their
tests are skipped, unless WB_SIM_REQUIRE_EXTRAS=1 (CI), where they must run.
"""

import math
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim import ConfigError
from wb_sim.tools.campaign import load_campaign, run_campaign
from wb_sim.config import read_yaml_params
from wb_sim.controllers import PDGravityController

from helpers.extras import require_modules

# helpers.campaign: importable in the workers too (test/ is on sys.path, see test/conftest.py;
# spawned workers get the parent's sys.path)

#: 3 magnitudes x 2 directions x 2 stiffnesses x 2 random draws = 24 short humanoid runs,
#: with every kind of perturbation in play
SMALL = {
    "robot": "humanoid",
    "duration_s": 0.06,
    "seed": 5,
    "controller": "pd",
    "pushes": [{"time_s": 0.01, "link": "pelvis", "magnitude": 100.0, "direction_deg": 0.0,
                "duration_s": 0.03}],
    "set": {"command_delay_steps": 1, "sensor_delay_steps": 1},
    "grid": {"pushes.0.magnitude": [0.0, 300.0, 900.0], "pushes.0.direction_deg": [0.0, 90.0],
             "contact.stiffness": [2.0e4, 8.0e4]},
    "random": {"samples": 2, "seed": 11,
               "params": {"mass_scale.torso": {"uniform": [0.7, 1.3]},
                          "contact.friction_coefficient": {"normal": [0.8, 0.1]},
                          "imu.angular_velocity_bias": {"normal": [[0, 0, 0], [0.01, 0.01, 0]]}}},
    "plots": False,
}


def _table(out: Path) -> bytes:
    return (out / "results.csv").read_bytes()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The small campaign on a pool of 1 worker: the reference table."""
    out = tmp_path_factory.mktemp("campaign") / "w1"
    res = run_campaign(SMALL, workers=1, out=out, progress=False)
    return out, res


def test_small_campaign_table(reference):
    out, res = reference
    rows = res.rows
    assert len(rows) == 24 and res.ran == 24 and res.cached == 0 and res.exit_code == 0
    assert [r["case_id"] for r in rows] == list(range(24))
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    header = _table(out).decode().splitlines()[0].split(",")
    assert header[:8] == ["case_id", "case_hash", "status", "seed", "pushes.0.magnitude",
                          "pushes.0.direction_deg", "contact.stiffness", "mass_scale.torso"]
    for m in ("stands", "fell", "max_tilt_deg", "com_deviation_m", "foot_slip_m",
              "peak_torque_ratio", "time_saturated_s", "contact_losses"):
        assert m in header
    # the perturbations act: a harder push moves the CoM further (same other parameters)
    by = {(r["pushes.0.magnitude"], r["pushes.0.direction_deg"], r["contact.stiffness"],
           r["mass_scale.torso"]): r for r in rows}
    for (mag, d, k, m), r in by.items():
        if mag == 900.0:
            assert r["com_deviation_m"] > by[(0.0, d, k, m)]["com_deviation_m"] + 1e-3
    # two different random draws, the same for every grid point, drawn once from the seed
    draws = sorted({r["mass_scale.torso"] for r in rows})
    assert len(draws) == 2 and all(0.7 <= x <= 1.3 for x in draws)
    assert [r["seed"] for r in rows] == list(range(5, 29))
    assert len({r["case_hash"] for r in rows}) == 24


def test_two_workers_bit_identical(reference, tmp_path):
    out1, _ = reference
    res = run_campaign(SMALL, workers=2, out=tmp_path / "w2", progress=False)
    assert res.ran == 24
    assert _table(tmp_path / "w2") == _table(out1)


def test_ray_bit_identical(reference, tmp_path):
    require_modules("ray", why="pip install ray (the test extra)")
    out1, _ = reference
    res = run_campaign(SMALL, backend="ray", workers=2, out=tmp_path / "ray", progress=False)
    assert res.ran == 24 and res.exit_code == 0
    assert _table(tmp_path / "ray") == _table(out1)


def test_resume_after_interruption(reference, tmp_path, monkeypatch):
    """The cases that finished are cached and not run again; the resumed table is the
    uninterrupted one, bit for bit. The 'interruption' is a controller that raises from case
    5 on (those cases are not cached: exit code 1), then is fixed."""
    camp = dict(SMALL, random={}, controller={"callable": "helpers.campaign:pd_failing",
                                              "params": {"kp": 400.0}})
    clean = run_campaign(camp, workers=2, out=tmp_path / "clean", progress=False)
    assert clean.exit_code == 0 and clean.ran == 12
    monkeypatch.setenv("WB_SIM_TEST_FAIL_FROM", "5")
    out = tmp_path / "resumed"
    first = run_campaign(camp, workers=2, out=out, progress=False)
    assert first.exit_code == 1 and first.failed == 7
    bad = [r for r in first.rows if r["status"] != "ok"]
    assert [r["case_id"] for r in bad] == list(range(5, 12))
    assert "RuntimeError: controller bug in case 5" in bad[0]["error"]
    cached = sorted((out / "cases").glob("*.json"))
    assert len(cached) == 5
    stamps = {p: p.stat().st_mtime_ns for p in cached}
    monkeypatch.delenv("WB_SIM_TEST_FAIL_FROM")
    second = run_campaign(camp, workers=2, out=out, progress=False)
    assert (second.ran, second.cached, second.exit_code) == (7, 5, 0)
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())  # not rewritten
    assert _table(out) == _table(tmp_path / "clean")
    third = run_campaign(camp, workers=2, out=out, progress=False)
    assert (third.ran, third.cached) == (0, 12)
    # a changed fixed part (the gains) is a different campaign: nothing cached applies
    camp2 = dict(camp, controller={"callable": "helpers.campaign:pd_failing",
                                   "params": {"kp": 401.0}})
    assert not {c["hash"] for c in load_campaign(camp2).cases} & \
        {c["hash"] for c in load_campaign(camp).cases}


@pytest.mark.parametrize("change, match", [
    ({"durations_s": 1.0}, r"'durations_s': unknown campaign key; did you mean 'duration_s'"),
    ({"grid": {"contact.stifness": [1e4]}},
     r"'contact.stifness': unknown parameter; did you mean 'contact.stiffness'"),
    ({"grid": {"contact.stiffness": [-1.0]}}, r"case 0: parameter 'contact.stiffness'"),
    ({"grid": {"mass_scale.torsoo": [1.1]}}, r"unknown link 'torsoo'; did you mean 'torso'"),
    ({"grid": {"mass_scale.torso": [0.0]}}, r"'mass_scale.torso': must be > 0"),
    ({"grid": {"pushes.1.magnitude": [1.0]}}, r"no push number '1'"),
    ({"grid": {"pushes.0.magnitud": [1.0]}}, r"unknown push field 'magnitud'; did you mean"),
    ({"grid": {"command_delay_steps": [1.5]}}, r"'command_delay_steps': expected an integer"),
    ({"grid": {"contact.stiffness": []}}, r"'grid.contact.stiffness': expected a non-empty"),
    ({"random": {"samples": 2, "params": {"contact.damping": {"gauss": [1, 2]}}}},
     r"unknown distribution 'gauss'"),
    ({"random": {"samples": 2, "params": {"contact.damping": {"uniform": [2, 1]}}}},
     r"low must be <= high"),
    ({"metrics": ["stand"]}, r"unknown metric 'stand'; did you mean 'stands'"),
    ({"controller": "no_such_module:make"}, r"cannot import module 'no_such_module'"),
    ({"controller": {"callable": "pd", "params": {"kq": 1.0}}}, r"takes kp and kd"),
    ({"pushes": [{"time_s": 0.1, "link": "pelvsi", "force": [1, 0, 0]}]},
     r"unknown link 'pelvsi'; did you mean 'pelvis'"),
    ({"robot": "humanoidd"}, r"no configuration for robot 'humanoidd'"),
    ({"grid": {"urdf_path": ["x.urdf"]}}, r"structure cannot vary"),
])
def test_validation_errors(change, match):
    bad = dict(SMALL, **change)
    with pytest.raises(ConfigError, match=match):
        load_campaign(bad)


def test_cli_exit_codes(tmp_path):
    exe = Path(sys.executable).parent / "wb_sim_batch"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "wb_sim.tools.campaign"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("robot: humanoid\ngrid: {contact.stifness: [1.0e4]}\n")
    r = subprocess.run(cmd + [str(bad)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "did you mean 'contact.stiffness'" in r.stderr and "Traceback" not in r.stderr
    good = tmp_path / "ok.yaml"
    good.write_text("robot: humanoid\nduration_s: 0.02\nplots: false\n"
                    "grid: {contact.stiffness: [2.0e4, 4.0e4]}\n")
    r = subprocess.run(cmd + [str(good), "-o", str(tmp_path / "o"), "--workers", "1", "-q"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "2 cases (2 run, 0 cached)" in r.stdout
    r = subprocess.run(cmd + [str(good), "--backend", "local", "--address", "x:1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2


def test_cli_interrupted_by_ctrl_c_resumes(tmp_path):
    """SIGINT (Ctrl-C) mid-campaign: exit code 130, the finished cases stay cached, and the
    same command again runs only the others, into the table of an uninterrupted run."""
    import signal
    import time
    exe = Path(sys.executable).parent / "wb_sim_batch"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "wb_sim.tools.campaign"]
    camp = tmp_path / "c.yaml"
    camp.write_text("robot: humanoid\nduration_s: 0.25\nplots: false\ngrid:\n"
                    "  contact.stiffness: [" + ", ".join(f"{k}.0e4" for k in range(1, 9)) + "]\n")
    out = tmp_path / "o"
    p = subprocess.Popen(cmd + [str(camp), "-o", str(out), "--workers", "2", "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while len(list((out / "cases").glob("*.json"))) < 2 and p.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    done = len(list((out / "cases").glob("*.json")))
    if p.returncode == 0:  # the machine was fast: everything finished before the signal
        pytest.skip("the campaign finished before SIGINT arrived")
    assert p.returncode == 130, err
    assert "run the same command again to resume" in err
    assert 2 <= done < 8
    r = subprocess.run(cmd + [str(camp), "-o", str(out), "--workers", "2", "-q"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"8 cases ({8 - done} run, {done} cached)" in r.stdout
    clean = run_campaign(camp, workers=2, out=tmp_path / "clean", progress=False)
    assert clean.ran == 8
    assert _table(out) == _table(tmp_path / "clean")


def test_a_diverging_case_is_reported_not_fatal(tmp_path):
    """A case whose run diverges (the guard contact.max_penetration trips when the robot falls
    through a soft ground) is a row with status 'diverged', fell = true and the metrics so far;
    the others run; exit code 1."""
    camp = {"robot": "humanoid", "duration_s": 0.5, "plots": False,
            "set": {"contact.max_penetration": 0.01},
            "grid": {"contact.stiffness": [4.0e4, 50.0]}}
    res = run_campaign(camp, workers=2, out=tmp_path, progress=False)
    ok, bad = res.rows
    assert ok["status"] == "ok" and ok["stands"] is True
    assert bad["status"] == "diverged" and bad["fell"] is True and bad["stands"] is False
    assert "contact.max_penetration" in bad["error"] or "deeper" in bad["error"], bad["error"]
    assert res.exit_code == 1 and res.failed == 1
    assert len(list((tmp_path / "cases").glob("*.json"))) == 2  # a physical result: cached


def _plain_run(params, push, duration, gains=None):
    """The same closed loop as a campaign case, written out here: the PD of the robot's YAML,
    one push, and the metrics computed from pinocchio directly."""
    path = wb_sim.config_path("humanoid")
    p = read_yaml_params(path)
    p.update(params)
    sim = wb_sim.Simulator.from_params(p)
    g = gains or read_yaml_params(path, node_name="wb_sim_pd_controller")
    pd = PDGravityController(sim.robot, sim.state.joint_positions, g["kp"], g["kd"],
                             gravity=sim.config.gravity)
    com0 = sim.center_of_mass()
    tilt = dev = peak = 0.0
    saturated = 0
    lim = np.asarray(sim.actuation.effort_limit)
    for k in range(int(round(duration / sim.dt))):
        if k == int(round(push["time_s"] / sim.dt)):
            sim.apply_external_wrench(push["link"], push["force"], duration_s=push["duration_s"])
        tau = pd(sim.q, sim.joint_positions, sim.joint_velocities)
        sim.step(tau)
        R = pin.Quaternion(sim.q[6], *sim.q[3:6]).toRotationMatrix()
        tilt = max(tilt, math.degrees(math.acos(min(1.0, R[2, 2]))))
        dev = max(dev, float(np.linalg.norm((sim.center_of_mass() - com0)[:2])))
        peak = max(peak, float(np.max(np.abs(tau) / lim)))
        saturated += bool(np.any(np.abs(sim.applied_torques) >= lim))
    return sim, tilt, dev, peak, saturated * sim.dt


def test_metrics_against_a_plain_loop(tmp_path):
    push = {"time_s": 0.05, "link": "pelvis", "force": [0.0, 250.0, 0.0], "duration_s": 0.1}
    camp = {"robot": "humanoid", "duration_s": 0.4, "controller": "pd", "pushes": [push],
            "set": {"contact.stiffness": 6.0e4, "joints.effort_limit": [12.0]}, "plots": False,
            "custom_metrics": {"top": "helpers.campaign:highest_base"}}
    res = run_campaign(camp, workers=1, out=tmp_path, progress=False)
    row = res.rows[0]
    sim, tilt, dev, peak, saturated = _plain_run({"contact.stiffness": 6.0e4,
                                                     "joints.effort_limit": [12.0]}, push, 0.4)
    assert tilt > 1.0 and dev > 0.01 and saturated > 0  # the push does something to measure
    assert row["max_tilt_deg"] == pytest.approx(tilt, rel=1e-9, abs=1e-9)
    assert row["com_deviation_m"] == pytest.approx(dev, rel=1e-9)
    assert row["peak_torque_ratio"] == pytest.approx(peak, rel=1e-12)
    assert row["time_saturated_s"] == pytest.approx(saturated, abs=1e-12)
    assert row["top.samples"] == 401
    assert row["top.z_max"] >= float(sim.q[2])


def test_delays_seen_by_the_controller(tmp_path):
    """The torque applied at step k was computed at step k - command delay from the state of
    step k - command delay - sensor delay (clamped at the start)."""
    camp = {"robot": "humanoid", "duration_s": 0.02, "plots": False,
            "controller": "helpers.campaign:time_echo",
            "grid": {"command_delay_steps": [0, 2], "sensor_delay_steps": [0, 3]},
            "custom_metrics": {"seen": "helpers.campaign:echoed_times"}}
    res = run_campaign(camp, workers=1, out=tmp_path, progress=False)
    dt = 1e-3
    for r in res.rows:
        c, s = r["command_delay_steps"], r["sensor_delay_steps"]
        assert r["seen.step0"] == 0.0 and r["seen.step1"] == pytest.approx(
            max(0, 1 - c - s) * dt, abs=1e-12)
        assert r["seen.step10"] == pytest.approx((10 - c - s) * dt, abs=1e-12), (c, s)


def test_controller_rate_zero_order_hold(tmp_path):
    """rate_hz 250 at 1 kHz: the controller runs at steps 0, 4, 8, ... and its torques are held
    in between."""
    camp = {"robot": "humanoid", "duration_s": 0.02, "plots": False,
            "controller": {"callable": "helpers.campaign:time_echo", "rate_hz": 250.0},
            "custom_metrics": {"seen": "helpers.campaign:echoed_times"}}
    row = run_campaign(camp, workers=1, out=tmp_path, progress=False).rows[0]
    assert (row["seen.step0"], row["seen.step1"]) == (0.0, 0.0)
    assert row["seen.step10"] == pytest.approx(0.008, abs=1e-12)


def test_imu_bias_reaches_a_custom_controller(tmp_path):
    camp = {"robot": "humanoid", "duration_s": 0.02, "plots": False,
            "controller": "helpers.campaign:gyro_echo",
            "grid": {"imu.angular_velocity_bias": [[0.0, 0.0, 0.0], [0.005, 0.0, 0.0]]},
            "custom_metrics": {"seen": "helpers.campaign:echoed_times"}}
    a, b = run_campaign(camp, workers=1, out=tmp_path, progress=False).rows
    # before the first step the robot is at rest: the gyro reads its bias alone
    assert a["seen.step0"] == 0.0 and b["seen.step0"] == pytest.approx(0.005, abs=1e-12)


def test_robot_yaml_relative_to_the_campaign_file(tmp_path):
    shutil.copy(wb_sim.config_path("humanoid"), tmp_path / "my_robot.yaml")
    (tmp_path / "c.yaml").write_text("robot: my_robot.yaml\nduration_s: 0.01\n")
    camp = load_campaign(tmp_path / "c.yaml")
    assert camp.spec["robot"] == str(tmp_path / "my_robot.yaml")
    assert len(camp.cases) == 1
    with pytest.raises(ConfigError, match="cannot read parameter file"):
        (tmp_path / "d.yaml").write_text("robot: missing.yaml\n")
        load_campaign(tmp_path / "d.yaml")


def test_mass_scaling_edits_the_urdf():
    """Torso mass x 1.5 and its CoM moved by [0.01, 0, -0.02] m in its frame: the robot's
    mass and centre of mass move by what the URDF's numbers say."""
    from wb_sim.tools.campaign import case_config
    s, off = 1.5, np.array([0.01, 0.0, -0.02])
    camp = load_campaign({"robot": "humanoid", "duration_s": 0.01, "plots": False,
                          "grid": {"mass_scale.torso": [s]},
                          "set": {"com_offset.torso": off.tolist()}})
    params, *_ = case_config(camp.spec, camp.cases[0])
    sim = wb_sim.Simulator.from_params(params)
    ref = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    urdf = ET.parse(wb_sim.share_dir() / "urdf" / "humanoid.urdf").getroot()
    torso = next(e for e in urdf.iter("link") if e.get("name") == "torso")
    m = float(torso.find("inertial/mass").get("value"))
    c = np.array([float(x) for x in torso.find("inertial/origin").get("xyz").split()])
    oMf = ref.frame_pose("torso")
    assert sim.mass == pytest.approx(ref.mass + (s - 1.0) * m, rel=1e-12)
    expected = (ref.mass * ref.center_of_mass() - m * oMf.act(c)
                + s * m * oMf.act(c + off)) / sim.mass
    assert np.allclose(sim.center_of_mass(), expected, atol=1e-12)
    assert np.linalg.norm(expected - ref.center_of_mass()) > 1e-3


def test_import_wb_sim_campaign_loads_neither_ray_nor_rclpy():
    code = ("import sys, wb_sim, wb_sim.tools.campaign; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('ray', 'rclpy')]; "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_ray_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ConfigError, match="pip install ray"):
        run_campaign(dict(SMALL, grid={}, random={}), backend="ray", out=tmp_path,
                     progress=False)


def test_plots_and_recordings(tmp_path):
    require_modules("matplotlib", why="pip install wb_sim[plot] (the plot extra)")
    from wb_sim.tools.recording import History
    camp = dict(SMALL, plots=True, record=True, random={})
    res = run_campaign(camp, workers=2, out=tmp_path, progress=False)
    names = sorted(p.name for p in res.plots)
    assert "success_vs_pushes.0.magnitude.png" in names
    assert "hist_max_tilt_deg.png" in names
    assert all(p.stat().st_size > 5000 for p in res.plots)
    recs = sorted((tmp_path / "recordings").glob("case_*.npz"))
    assert len(recs) == 12
    h = History.load(recs[-1])
    assert h.n == 60 and h.t[-1] == pytest.approx(0.06)
    # the recording is the run of the table: its base height ends where the trace did
    row = res.rows[-1]
    assert row["case_hash"] in recs[-1].name


def test_parquet_table(reference):
    require_modules("pyarrow.parquet", why="pip install pyarrow (the test extra); without it "
                    "the table is CSV only")
    import pyarrow.parquet as pq
    out, res = reference
    t = pq.read_table(out / "results.parquet").to_pydict()
    assert t["case_id"] == list(range(24))
    assert t["max_tilt_deg"] == [r["max_tilt_deg"] for r in res.rows]


def test_robot_and_config_mean_what_they_mean_in_the_other_command_lines(tmp_path):
    """wb_sim_batch --robot NAME|FILE stands for the campaign file's robot and --config is a
    parameter file over the robot's (its keys win, its PD gains too), as in python -m wb_sim
    and wb_sim_run (wb_sim.paths.robot_config_file); the campaign's set applies over both."""
    camp_file = tmp_path / "c.yaml"
    camp_file.write_text("robot: humanoid\nduration_s: 0.01\nplots: false\n"
                         "set: {contact.stiffness: 3.0e4}\n")
    camp = load_campaign(camp_file, robot="panda")
    assert camp.spec["robot"] == str(wb_sim.config_path("panda"))
    assert "panda" in camp.spec["params"]["urdf_path"]
    assert camp.spec["controller"]["params"]["kp"] == 100.0  # panda.yaml's PD gains
    own = tmp_path / "robots" / "my_robot.yaml"
    own.parent.mkdir()
    shutil.copy(wb_sim.config_path("humanoid"), own)
    assert load_campaign(camp_file, robot=str(own)).spec["robot"] == str(own)
    with pytest.raises(ConfigError, match=r"or give the path of your robot's YAML file"):
        load_campaign(camp_file, robot="pandaa")
    over = tmp_path / "over.yaml"
    over.write_text("wb_sim:\n  ros__parameters:\n    contact:\n      stiffness: 9.0e4\n"
                    "      damping: 123.0\nwb_sim_pd_controller:\n  ros__parameters:\n"
                    "    kp: 77.0\n")
    base = load_campaign(camp_file)
    camp = load_campaign(camp_file, config=over)
    assert base.spec["params"].get("contact.damping") != 123.0
    assert camp.spec["params"]["contact.damping"] == 123.0  # the overlay's key wins
    assert camp.spec["controller"]["params"]["kp"] == 77.0
    assert camp.spec["controller"]["params"]["kd"] == base.spec["controller"]["params"]["kd"]
    assert camp.spec["set"] == {"contact.stiffness": 3.0e4}  # the campaign's, over both
    assert camp.cases[0]["hash"] != base.cases[0]["hash"]  # its own cache entries

    exe = Path(sys.executable).parent / "wb_sim_batch"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "wb_sim.tools.campaign"]
    no_robot = tmp_path / "no_robot.yaml"
    no_robot.write_text("duration_s: 0.01\nplots: false\n")
    r = subprocess.run(cmd + [str(no_robot), "--robot", str(own), "--config", str(over),
                              "-o", str(tmp_path / "o"), "--workers", "1", "-q"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "1 cases (1 run, 0 cached)" in r.stdout
    r = subprocess.run(cmd + [str(no_robot), "-o", str(tmp_path / "o2")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "or wb_sim_batch --robot" in r.stderr, r.stderr
    r = subprocess.run(cmd + [str(camp_file), "--robot", "pandaa", "-o", str(tmp_path / "o3")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "pandaa" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_the_vectorized_stand_monitor_is_the_per_sample_one_bit_for_bit():
    """StandMonitor.update_run (a campaign's metrics, after its loop) against update (the
    plain reference, one sample at a time): a pushed humanoid that sinks, slides and
    saturates, sampled as a campaign samples it."""
    from wb_sim.tools.stand import StandMonitor
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"),
                                     overrides={"contact.friction_coefficient": 0.3})
    limits = np.asarray(sim.actuation.effort_limit, dtype=float)
    n, rows = 1200, []
    sim.apply_external_wrench("torso", [250.0, 80.0, 0.0], duration_s=0.3)
    ctrl = PDGravityController(sim.robot, sim.state.joint_positions, 1000.0, 20.0,
                               gravity=sim.config.gravity)
    feet_t, feet = [], []
    for k in range(n):
        sim.step(np.clip(3 * ctrl(sim.q, sim.joint_positions, sim.joint_velocities), -limits,
                         limits))
        rows.append((sim.t, float(sim.q[2]), sim.applied_torques.copy()))
        if (k + 1) % 10 == 0:
            data = sim.model.createData()
            pin.forwardKinematics(sim.model, data, sim.q)
            feet_t.append(sim.t)
            feet.append([pin.updateFramePlacement(sim.model, data, sim.robot.frame_id(f))
                         .translation.copy() for f in sim.contact_points.surface_frames])
    plain = StandMonitor(sim.joint_names, limits, True)
    fi = 0
    for k, (t, z, tau) in enumerate(rows):
        f = None
        if (k + 1) % 10 == 0:
            f, fi = feet[fi], fi + 1
        plain.update(t, z, tau, f)
    fast = StandMonitor(sim.joint_names, limits, True)
    fast.update_run([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                    feet_t, np.array(feet))
    a, b = plain.verdict(), fast.verdict()
    assert a == b, (a, b)
    assert a.base_drop > 0 and a.foot_slide > 1e-4 and a.saturated  # every figure in play


def test_workers_run_one_blas_thread_each(tmp_path, monkeypatch):
    """A worker's matrices are small: n workers must not each start one BLAS thread per core
    (backends.WORKER_ENV); the user's own setting wins."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    camp = {"robot": "humanoid", "duration_s": 0.01, "plots": False,
            "grid": {"contact.stiffness": [2e4, 4e4]},
            "custom_metrics": {"blas": "helpers.campaign:blas_threads"}}
    res = run_campaign(camp, workers=2, out=tmp_path / "a", progress=False)
    assert [r["blas"] for r in res.rows] == [1.0, 1.0]
    import os
    assert "OPENBLAS_NUM_THREADS" not in os.environ  # this process's environment is left as it was
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    res = run_campaign(camp, workers=2, out=tmp_path / "b", progress=False)
    assert [r["blas"] for r in res.rows] == [3.0, 3.0]


def test_an_objects_mass_is_a_campaign_parameter(tmp_path):
    """objects.* are the simulator's parameters, so a campaign sweeps them like any other
    (issue 31): each case's crate ends where the same simulator run by hand puts it, bit for
    bit, and the heavier crate sinks deeper into the compliant ground."""
    objects = {"objects.names": ["crate"], "objects.shapes": ["box"],
               "objects.sizes": [0.3, 0.3, 0.3], "objects.positions": [0.6, 0.0, 0.2]}
    camp = {"robot": "humanoid", "duration_s": 0.3, "plots": False, "set": objects,
            "grid": {"objects.mass": [[2.0], [8.0]]},
            "custom_metrics": {"crate_z": "helpers.campaign:crate_height"}}
    rows = run_campaign(camp, workers=1, out=tmp_path, progress=False).rows
    gains = read_yaml_params(wb_sim.config_path("humanoid"), node_name="wb_sim_pd_controller")
    for row, mass in zip(rows, (2.0, 8.0)):
        assert row["status"] == "ok" and row["stands"], row
        sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
            **objects, "objects.mass": [mass], "imu.seed": row["seed"]})
        pd = PDGravityController(sim.robot, sim.state.joint_positions, gains["kp"], gains["kd"],
                                 gravity=sim.config.gravity)
        for _ in range(300):
            sim.step(pd(sim.q, sim.joint_positions, sim.joint_velocities))
        assert row["crate_z"] == sim.object_pose("crate").translation[2]
    assert 0.13 < rows[1]["crate_z"] < rows[0]["crate_z"] < 0.15  # resting, the heavier lower


#: 16 short cases: a structural parameter (the torso's mass, an edit of the URDF), the
#: friction, a gain of the controller and whole-body collision on / off
CACHED = {"robot": "humanoid", "duration_s": 0.05, "plots": False,
          "pushes": [{"time_s": 0.01, "link": "pelvis", "magnitude": 300.0, "duration_s": 0.02}],
          "grid": {"mass_scale.torso": [1.0, 1.3], "contact.friction_coefficient": [0.6, 1.0],
                   "controller.kp": [600.0, 1000.0], "collision.enabled": [True, False]}}


def test_the_workers_robot_cache_gives_the_rebuilt_table_bit_for_bit(tmp_path, monkeypatch):
    """A worker builds each case on the robot it parsed for an earlier case of the same
    structural parameters (case.WORKER_ROBOTS): the table equals, bit for bit, the one where
    every case is built from scratch (WB_SIM_CAMPAIGN_REBUILD=1), on 1 and on 2 workers."""
    monkeypatch.delenv("WB_SIM_CAMPAIGN_REBUILD", raising=False)
    for w in (1, 2):
        res = run_campaign(CACHED, workers=w, out=tmp_path / f"cached{w}", progress=False)
        assert res.ran == 16 and res.exit_code == 0, [r["error"] for r in res.rows]
    monkeypatch.setenv("WB_SIM_CAMPAIGN_REBUILD", "1")
    run_campaign(CACHED, workers=1, out=tmp_path / "rebuilt", progress=False)
    table = _table(tmp_path / "rebuilt")
    assert _table(tmp_path / "cached1") == table and _table(tmp_path / "cached2") == table
    # the torso's mass and the gain act (the pushed robot's centre of mass moves differently)
    by = {(r["mass_scale.torso"], r["controller.kp"]): r["com_deviation_m"] for r in res.rows}
    assert len(set(by.values())) == 4


def test_a_worker_parses_a_robot_once_per_structural_parameters(tmp_path, monkeypatch):
    """On one worker, cases in order: the torso's mass (a URDF edit) changes every second
    case, the friction in between: two robots parsed, two reused; none with
    WB_SIM_CAMPAIGN_REBUILD=1."""
    monkeypatch.delenv("WB_SIM_CAMPAIGN_REBUILD", raising=False)
    camp = {"robot": "humanoid", "duration_s": 0.01, "plots": False,
            "grid": {"mass_scale.torso": [1.0, 1.3], "contact.friction_coefficient": [0.6, 1.0]},
            "custom_metrics": {"robots": "helpers.campaign:robot_builds"}}
    rows = run_campaign(camp, workers=1, out=tmp_path / "a", progress=False).rows
    assert [(r["robots.built"], r["robots.reused"]) for r in rows] == \
        [(1, 0), (1, 1), (2, 1), (2, 2)]
    monkeypatch.setenv("WB_SIM_CAMPAIGN_REBUILD", "1")
    rows = run_campaign(camp, workers=1, out=tmp_path / "b", progress=False).rows
    assert [(r["robots.built"], r["robots.reused"]) for r in rows] == [(0, 0)] * 4


def test_local_workers_are_pinned_to_one_cpu_each(tmp_path, monkeypatch):
    """Linux, 2 workers on a machine of >= 2 CPUs this process may all use: each worker runs
    on one CPU (backends.pinned_cpus); WB_SIM_CAMPAIGN_PIN=0 leaves them free."""
    import os
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no sched_getaffinity (not Linux)")
    allowed = len(os.sched_getaffinity(0))
    if allowed < 2 or allowed < (os.cpu_count() or 0):
        pytest.skip(f"{allowed} CPU(s) allowed of {os.cpu_count()}: the pool is not pinned")
    monkeypatch.delenv("WB_SIM_CAMPAIGN_PIN", raising=False)
    camp = {"robot": "humanoid", "duration_s": 0.01, "plots": False,
            "grid": {"contact.stiffness": [2e4, 3e4, 4e4, 5e4]},
            "custom_metrics": {"cpus": "helpers.campaign:worker_affinity"}}
    res = run_campaign(camp, workers=2, out=tmp_path / "a", progress=False)
    assert [r["cpus"] for r in res.rows] == [1.0] * 4
    assert len(os.sched_getaffinity(0)) == allowed  # this process is left as it was
    monkeypatch.setenv("WB_SIM_CAMPAIGN_PIN", "0")
    res = run_campaign(camp, workers=2, out=tmp_path / "b", progress=False)
    assert [r["cpus"] for r in res.rows] == [float(allowed)] * 4


def test_which_cpus_the_pool_is_pinned_to(monkeypatch):
    """One CPU per worker where the workers fit the CPUs; none where there are more workers
    than CPUs or the user restricted this process's affinity (taskset)."""
    import os

    from wb_sim.tools.campaign.backends import pinned_cpus
    monkeypatch.delenv("WB_SIM_CAMPAIGN_PIN", raising=False)
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: None, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert pinned_cpus(1) == [0] and pinned_cpus(3) == [0, 1, 2] and pinned_cpus(4) == [0, 1, 2, 3]
    assert pinned_cpus(5) is None
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {2, 3})  # taskset -c 2,3
    assert pinned_cpus(2) is None
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setenv("WB_SIM_CAMPAIGN_PIN", "0")
    assert pinned_cpus(2) is None


def test_the_campaign_bench_times_each_case_right_after_a_plain_run(monkeypatch):
    """``python -m wb_sim.tools.bench.campaign``'s pairs (issue 33's per-case overhead): a case
    run by the runner's own function, after a plain run of the same friction, in this
    process; a ratio of CPU times per pair, and a case that fails is an error, not a figure."""
    from wb_sim.tools.bench import campaign as bench
    camp = {"robot": "humanoid", "duration_s": 0.03, "controller": "pd", "plots": False,
            "grid": {"contact.friction_coefficient": [0.9, 1.0]}}
    ratios = bench.paired(camp, 3, 0.03)
    assert len(ratios) == 3 and all(0.0 < r < 100.0 for r in ratios)
    monkeypatch.setenv("WB_SIM_TEST_FAIL_FROM", "0")  # the controller raises in every case
    bad = dict(camp, controller={"callable": "helpers.campaign:pd_failing"})
    with pytest.raises(RuntimeError, match="case 0: RuntimeError: controller bug"):
        bench.paired(bad, 1, 0.03)
