"""The A/B switch (issue 32, wb_sim.tools.ab): the same controller on two contact settings
and where the runs part. The divergence against a plain loop over hand-made trajectories and
over two real runs; a campaign's run B with A's own settings is A, bit for bit; errors name
the key."""

import math
import subprocess
import sys

import numpy as np
import pytest

from wb_sim import ConfigError
from wb_sim.tools.ab import divergence, parse_overrides
from wb_sim.tools.campaign import load_campaign, run_campaign
from wb_sim.tools.campaign.case import _run, ab_case

from helpers import ROOT


def _first_over(t, ja, jb, ba, bb, base_m, joint_rad, wrap=None):
    """The divergence time as a plain loop (the reference of divergence())."""
    for k in range(len(t)):
        if ba is not None and math.dist(ba[k], bb[k]) > base_m:
            return t[k], "base position"
        for j in range(ja.shape[1]):
            d = ja[k, j] - jb[k, j]
            if wrap is not None and wrap[j]:
                d = math.remainder(d, 2 * math.pi)
            if abs(d) > joint_rad:
                return t[k], f"joint j{j}"
    return math.nan, ""


def test_divergence_is_the_first_sample_over_a_tolerance():
    rng = np.random.default_rng(3)
    t = np.arange(1001) * 1e-3
    ja = np.cumsum(rng.normal(0, 1e-3, (1001, 4)), axis=0)
    jb = ja.copy()
    jb[500:, 2] += np.linspace(0, 0.2, 501)  # joint 2 parts from t = 0.5 s at 0.4 rad/s
    jb[:, 3] += 2 * np.pi - 0.01  # a continuous joint one turn on: 0.01 rad apart
    ba = np.zeros((1001, 3))
    bb = ba.copy()
    bb[900:, 0] = 0.02  # the base 2 cm apart from 0.9 s
    names = [f"j{i}" for i in range(4)]
    wrap = np.array([False, False, False, True])
    d = divergence(t, ja, t, jb, names, base_a=ba, base_b=bb, wrap=wrap)
    ref_t, ref_cause = _first_over(t, ja, jb, ba, bb, 0.01, 0.05, wrap)
    assert d.time_s == ref_t and d.cause == ref_cause == "joint j2"
    assert d.time_s == pytest.approx(0.5 + 0.05 / 0.4, abs=1.5e-3)
    assert d.max_joint_rad == pytest.approx(0.2, abs=1e-12) and d.worst_joint == "j2"
    assert d.max_base_m == pytest.approx(0.02, abs=1e-15) and d.samples == 1001
    assert "diverge at t = 0.626 s (joint j2 apart by more than 0.05 rad)" in d.summary()
    # without the wrap the continuous joint is 2 pi - 0.01 apart from the start
    assert divergence(t, ja, t, jb, names).time_s == 0.0
    # B sampled every 2 ms: compared at the times both hold
    d2 = divergence(t, ja, t[::2], jb[::2], names, wrap=wrap)
    assert d2.samples == 501 and d2.time_s == pytest.approx(ref_t, abs=1e-3)
    # never apart: NaN, no cause
    same = divergence(t, ja, t, ja, names, base_a=ba, base_b=ba)
    assert math.isnan(same.time_s) and same.cause == "" and same.max_joint_rad == 0.0
    assert "stay within 0.01 m / 0.05 rad" in same.summary()


def test_overrides_are_parsed_as_yaml_and_bad_ones_name_the_item():
    assert parse_overrides(["contact.model:=rigid", "contact.stiffness:=2e4",
                            "joints.kp:=[1, 2]"]) == {
        "contact.model": "rigid", "contact.stiffness": 2e4, "joints.kp": [1, 2]}
    for bad, why in (("contact.model=rigid", "expected KEY:=VALUE"),
                     (":=3", "expected KEY:=VALUE"), ("a:=[1,", "not YAML"),
                     ("a:=&x [1]", "anchors")):
        with pytest.raises(ConfigError, match=why):
            parse_overrides([bad])


BASE = {"robot": "humanoid", "duration_s": 0.6, "plots": False,
        "pushes": [{"time_s": 0.2, "link": "torso", "magnitude": 150.0, "direction_deg": 0.0,
                    "duration_s": 0.1}]}


def test_run_b_with_the_settings_of_a_is_a_bit_for_bit(tmp_path):
    res = run_campaign({**BASE, "ab": {"contact.model": "compliant"}}, workers=1,
                       out=tmp_path, progress=False)
    (row,) = res.rows
    assert row["status"] == row["b.status"] == "ok"
    assert row["ab.max_base_difference_m"] == 0.0 and row["ab.max_joint_difference_rad"] == 0.0
    assert math.isnan(row["ab.divergence_time_s"])
    for m in ("stands", "base_drop_m", "max_tilt_deg", "peak_torque_ratio", "foot_slip_m"):
        assert row[f"b.{m}"] == row[m], m


def test_compliant_against_rigid_parts_where_a_plain_loop_says(tmp_path):
    """The humanoid pushed at 0.2 s on compliant (A) and rigid contact (B): the campaign's
    ab.* columns equal the plain loop over the two runs' trajectories."""
    camp = load_campaign({**BASE, "ab": {"contact.model": "rigid"},
                          "ab_tolerances": {"base_m": 0.002, "joint_rad": 0.01}})
    res = run_campaign(camp, workers=1, out=tmp_path, progress=False)
    (row,) = res.rows
    ka, kb = {}, {}
    _run(camp.spec, camp.cases[0], None, ka)
    _run(camp.spec, ab_case(camp.spec, camp.cases[0]), None, kb)
    ref_t, _ = _first_over(ka["t"], ka["joints"], kb["joints"], ka["base"], kb["base"],
                           0.002, 0.01)
    assert not math.isnan(ref_t)
    assert row["ab.divergence_time_s"] == ref_t
    assert row["ab.max_joint_difference_rad"] == np.abs(ka["joints"] - kb["joints"]).max()
    assert row["ab.max_base_difference_m"] == np.linalg.norm(ka["base"] - kb["base"], axis=1).max()
    # the two contact models hold the same robot: close, not equal
    assert 0 < row["ab.max_joint_difference_rad"] < 0.1
    assert row["stands"] and row["b.stands"]


def test_ab_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"'contact\.modle'.*did you mean 'contact\.model'"):
        load_campaign({**BASE, "ab": {"contact.modle": "rigid"}})
    with pytest.raises(ConfigError, match="'ab_tolerances': given without 'ab'"):
        load_campaign({**BASE, "ab_tolerances": {"base_m": 0.1}})
    with pytest.raises(ConfigError, match=r"'ab_tolerances\.base': unknown key.*'base_m'"):
        load_campaign({**BASE, "ab": {"contact.model": "rigid"}, "ab_tolerances": {"base": 1}})
    with pytest.raises(ConfigError, match="'ab_tolerances.joint_rad': must be > 0"):
        load_campaign({**BASE, "ab": {"contact.model": "rigid"},
                       "ab_tolerances": {"joint_rad": 0}})
    # the campaign's hash changes with the switch, and not without it
    plain = load_campaign(BASE).cases[0]["hash"]
    assert load_campaign({**BASE, "ab": {"contact.model": "rigid"}}).cases[0]["hash"] != plain
    assert load_campaign(BASE).cases[0]["hash"] == plain


def test_wb_sim_batch_ab_option(tmp_path):
    camp = tmp_path / "c.yaml"
    camp.write_text("robot: humanoid\nduration_s: 0.05\nplots: false\n")
    out = subprocess.run([sys.executable, "-m", "wb_sim.tools.campaign", str(camp), "-o",
                          str(tmp_path / "r"), "--workers", "1", "-q", "--ab",
                          "contact.model:=rigid"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "A/B (contact.model=rigid): B stands: 1/1; the runs diverge (base 0.01 m, joint " \
           "0.05 rad) in 0/1 cases" in out.stdout, out.stdout
    header = (tmp_path / "r" / "results.csv").read_text().splitlines()[0].split(",")
    assert {"b.stands", "ab.divergence_time_s", "ab.max_joint_difference_rad"} <= set(header)
    bad = subprocess.run([sys.executable, "-m", "wb_sim.tools.campaign", str(camp), "-o",
                          str(tmp_path / "r2"), "--ab", "contact.model=rigid"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "--ab 'contact.model=rigid': expected KEY:=VALUE" in bad.stderr
