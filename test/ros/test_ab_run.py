"""``wb_sim_run --ab`` (issue 32): the README's closed loop twice in lockstep, on compliant (A)
and rigid contact (B), recorded and compared. Each run through ROS (node and example controller
as two processes) equals, bit for bit, the headless campaign run of the same case, so the
divergence reported is the simulator's, not the host's."""

import re
import subprocess
import sys

import numpy as np

from wb_sim.tools.ab import divergence
from wb_sim.tools.campaign import load_campaign
from wb_sim.tools.campaign.case import _run, ab_case

from helpers.extras import require_modules, require_ros
from helpers.ros import fresh_domain_id, ros_env

require_ros()


def _wb_sim_run(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "wb_sim.ros.run", *args], capture_output=True,
                          text=True, timeout=240, cwd=tmp_path, env=ros_env(fresh_domain_id()))


def test_ab_runs_are_the_headless_runs_and_their_divergence_is_reported(tmp_path):
    require_modules("rosbags", why="pip install rosbags (the plot extra)")
    from wb_sim.tools.bag import history_from_bag
    out = _wb_sim_run(tmp_path, "--duration", "0.5", "--real-time-factor", "0", "--ab",
                      "contact.model:=rigid", "--record", str(tmp_path / "bags"))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "wb_sim_run: run A (as configured)" in out.stdout
    assert "wb_sim_run: run B (contact.model=rigid)" in out.stdout
    line = re.search(r"^wb_sim_run: A/B \(contact\.model=rigid\): A and B (?P<what>.*)$",
                     out.stdout, re.M)
    assert line, out.stdout[-3000:]
    # the headless twins: the same case as a campaign runs it (the in-process example PD)
    camp = load_campaign({"robot": "humanoid", "duration_s": 0.5, "plots": False,
                          "ab": {"contact.model": "rigid"}})
    runs = {}
    for name, case in (("a", camp.cases[0]), ("b", ab_case(camp.spec, camp.cases[0]))):
        keep: dict = {}
        _run(camp.spec, case, None, keep)
        h = history_from_bag(tmp_path / "bags" / name)
        assert len(h.t) == len(keep["t"]) == 501
        assert np.array_equal(np.round(h.t * 1e9), np.round(keep["t"] * 1e9))
        assert np.array_equal(h.joint_positions, keep["joints"]), name
        assert np.array_equal(h.base_position, keep["base"]), name
        runs[name] = keep
    a, b = runs["a"], runs["b"]
    d = divergence(a["t"], a["joints"], b["t"], b["joints"], a["names"], base_a=a["base"],
                   base_b=b["base"])
    assert line["what"] == d.summary("A", "B")[len("A and B "):], (line["what"], d.summary())
    assert 0 < d.max_joint_rad < 0.05  # both models hold the humanoid, a little differently


def test_ab_refuses_what_it_cannot_compare(tmp_path):
    for args, why in ((["--controller", "none"], "needs a controller it can start"),
                      (["--sync", "realtime"], "compares lockstep runs"),
                      (["--controller", "wb_sim.controllers:pd_gravity"],
                       "wb_sim_batch --ab runs the same closed loop"),
                      (["--plot", str(tmp_path / "p")], "--plot does not go with --ab"),
                      (["--ab", "contact.model"], "expected KEY:=VALUE")):
        out = _wb_sim_run(tmp_path, "--duration", "0.1", "--ab", "contact.model:=rigid", *args)
        assert out.returncode == 2 and why in out.stderr, (args, out.stderr)
