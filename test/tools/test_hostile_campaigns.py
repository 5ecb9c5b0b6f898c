"""Hostile campaign files (issue 27, round 3): every size bounded before work starts, each
a ConfigError naming the key, the bound and how to raise it; a bad -o is exit 2."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from wb_sim import ConfigError
from wb_sim.config import read_yaml
from wb_sim.tools.campaign import load_campaign

BASE = {"robot": "humanoid", "duration_s": 0.02, "plots": False}

#: nine levels of nine aliases: 9^9 (387 million) strings from 342 bytes
ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([('*' + prev) if prev else 'lol'] * 9)}]\n"
    for prev, name in zip([""] + list("abcdefgh"), "abcdefghi"))


def test_an_8_million_case_grid_is_refused_before_expansion():
    grid = {"contact.stiffness": [1.0e4 + i for i in range(200)],
            "contact.damping": [100.0 + i for i in range(200)],
            "contact.friction_coefficient": [0.5 + i / 1000 for i in range(200)]}
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"'grid': .*8000000 cases, more than max_cases = "
                                          r"10000; raise .*'max_cases'"):
        load_campaign(dict(BASE, grid=grid))
    assert time.perf_counter() - t0 < 30


def test_1e8_random_samples_are_refused_before_drawing():
    rnd = {"samples": 100_000_000, "params": {"contact.damping": {"uniform": [100, 200]}}}
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"'random.samples': .*100000000 cases, more than "
                                          r"max_cases"):
        load_campaign(dict(BASE, random=rnd))
    assert time.perf_counter() - t0 < 30


def test_max_cases_raises_the_bound_up_to_its_ceiling():
    grid = {"contact.stiffness": [1.0e4, 2.0e4, 3.0e4]}
    with pytest.raises(ConfigError, match=r"3 cases, more than max_cases = 2"):
        load_campaign(dict(BASE, grid=grid, max_cases=2))
    assert len(load_campaign(dict(BASE, grid=grid, max_cases=3)).cases) == 3
    with pytest.raises(ConfigError, match=r"'max_cases': at most 1000000"):
        load_campaign(dict(BASE, max_cases=10**9))


def test_a_yaml_alias_bomb_is_refused(tmp_path):
    assert len(ALIAS_BOMB) < 1024
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("robot: humanoid\n" + ALIAS_BOMB)  # unknown keys too: the size comes first
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"campaign file .*more than 1000000 values once its "
                                          r"aliases .* are expanded"):
        load_campaign(bomb)
    assert time.perf_counter() - t0 < 10
    plain = tmp_path / "plain.yaml"
    plain.write_text(ALIAS_BOMB)
    with pytest.raises(ConfigError, match="aliases"):
        read_yaml(plain)


def test_small_aliases_still_read(tmp_path):
    f = tmp_path / "ok.yaml"
    f.write_text("a: &a [1, 2, 3]\nb: [*a, *a]\n")
    assert read_yaml(f) == {"a": [1, 2, 3], "b": [[1, 2, 3], [1, 2, 3]]}


def test_an_absurd_duration_is_refused():
    with pytest.raises(ConfigError, match=r"'duration_s': 1e\+12 s per case is more than 86400"):
        load_campaign(dict(BASE, duration_s=1e12))


def test_a_case_whose_trajectory_would_not_fit_in_memory_is_refused():
    """A case keeps every step's configuration and torques for its metrics: an hour of the
    humanoid at 1 kHz (2.7 GiB) is refused before anything runs, naming the size; ten
    minutes (0.45 GiB) is a case."""
    from wb_sim.tools.campaign.spec import MAX_TRACE_BYTES
    with pytest.raises(ConfigError, match=r"'duration_s': 3600 s at 1000 Hz keeps 2\.\d GiB of "
                                          r"trajectory per case .* more than 2 GiB; split"):
        load_campaign(dict(BASE, duration_s=3600.0))
    assert MAX_TRACE_BYTES == 2 * 1024**3
    load_campaign(dict(BASE, duration_s=600.0))


def test_a_push_after_the_end_is_refused():
    push = {"time_s": 0.01, "link": "pelvis", "magnitude": 10.0, "direction_deg": 0.0,
            "duration_s": 0.01}
    with pytest.raises(ConfigError, match=r"'pushes.0.time_s': 5 s is not before the end"):
        load_campaign(dict(BASE, pushes=[dict(push, time_s=5.0)]))
    with pytest.raises(ConfigError, match=r"'pushes.0.time_s': 1 s is not before the end"):
        load_campaign(dict(BASE, pushes=[push], grid={"pushes.0.time_s": [0.01, 1.0]}))


def test_a_bad_output_directory_is_exit_2(tmp_path):
    exe = Path(sys.executable).parent / "wb_sim_batch"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "wb_sim.tools.campaign"]
    good = tmp_path / "ok.yaml"
    good.write_text("robot: humanoid\nduration_s: 0.02\nplots: false\n")
    a_file = tmp_path / "file"
    a_file.write_text("")
    r = subprocess.run(cmd + [str(good), "-o", str(a_file / "out")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "cannot use output directory" in r.stderr and "Traceback" not in r.stderr


def test_one_killed_worker_does_not_abort_the_run(tmp_path, monkeypatch):
    from wb_sim.tools.campaign import run_campaign
    monkeypatch.setenv("WB_SIM_TEST_KILL_CASE", "1")  # spawned workers inherit it
    camp = dict(BASE, controller="helpers.campaign:pd_killing_worker",
                grid={"contact.stiffness": [2.0e4, 3.0e4, 4.0e4, 5.0e4]})
    res = run_campaign(camp, workers=2, out=tmp_path / "o", progress=False)
    status = {r["case_id"]: r["status"] for r in res.rows}
    assert status == {0: "ok", 1: "error", 2: "ok", 3: "ok"}
    assert "worker process died" in res.rows[1]["error"]
    assert res.failed == 1


@pytest.mark.parametrize("content", ["null", "[1, 2]", '{"case_hash": "HASH", "status": "ok", '
                                                       '"fell": {"nested": 1}}',
                                     '{"case_hash": "HASH", "status": "hacked"}', "{torn"])
def test_bad_cache_files_are_run_again_not_trusted(tmp_path, content):
    from wb_sim.tools.campaign import run_campaign
    camp = load_campaign(dict(BASE, grid={"contact.stiffness": [2.0e4]}))
    out = tmp_path / "o"
    first = run_campaign(camp, workers=1, out=out, progress=False)
    h = camp.cases[0]["hash"]
    (out / "cases" / f"{h}.json").write_text(content.replace("HASH", h))
    with pytest.warns(UserWarning, match="not a row of this case"):
        again = run_campaign(camp, workers=1, out=out, progress=False)
    assert again.ran == 1 and again.rows[0]["status"] == "ok"
    assert again.rows[0] == first.rows[0]


def test_an_unreachable_ray_address_is_a_clear_error_not_a_hang():
    import socket

    from wb_sim.tools.campaign.backends import check_reachable
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=rf"cannot reach the Ray cluster at '127.0.0.1:{port}'"):
        check_reachable(f"127.0.0.1:{port}", timeout=5.0)
    assert time.perf_counter() - t0 < 10
    check_reachable("auto")  # left to Ray
