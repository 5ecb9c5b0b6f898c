"""The shipped world config/worlds/humanoid_pushes_box.yaml (docs/world.md) and its controller,
wb_sim/keyframes.py (PD + gravity compensation tracking keyframed postures on a clamped cubic
spline).

Checked against numbers: the controller's reference passes through its keys with the cubic's
closed form (half way and 1.5 times the mean speed at mid time), a null skips a key, and its law
is the example PD's; in the world, on both contact laws, the humanoid slides the 5 kg box 0.15 m
or more with the box flat on the floor, the box then slides on alone decelerating at mu g (to 2
%) and comes to rest, while the robot stands (base above 0.6 m, back within 5 mm of its start
height, soles moved < 1 mm); the world runs through ``python -m wb_sim --world`` (exit 0: the
stand verdict) and its parameter file for the node carries the controller's keyframes.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import yaml

import wb_sim
from wb_sim.control import ControllerLoop, Observation
from wb_sim.controllers import PDGravityController
from wb_sim.errors import ConfigError
from wb_sim.world import load_world, params_document

from helpers.worlds import WORLDS, pushes_box

KF = "wb_sim.keyframes:keyframe_pd"
WORLD = WORLDS / "humanoid_pushes_box.yaml"


@pytest.fixture
def sim():
    return wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))


def _obs(sim, t):
    return Observation(t, sim.q, sim.v, sim.joint_positions, sim.joint_velocities, None)


def test_keyframe_reference_is_the_clamped_cubic_and_the_law_the_example_pd(sim):
    kp, kd, T, key = 1000.0, 20.0, 1.0, -1.3
    elbow = sim.joint_names.index("l_elbow")
    start = sim.joint_positions[elbow]
    ctrl = ControllerLoop(sim, KF, {"kp": kp, "kd": kd, "times": [T],
                                    "postures": {"l_elbow": [key]}}).controller
    pd = PDGravityController(sim.robot, sim.joint_positions.copy(), kp, kd,
                             gravity=sim.config.gravity)
    g = pd.gravity(sim.q)
    qj, vj = sim.joint_positions, sim.joint_velocities
    # t = 0: the start posture, at rest: the example PD's torques exactly
    np.testing.assert_allclose(ctrl(_obs(sim, 0.0)), pd(sim.q, qj, vj), rtol=0, atol=1e-12)
    # mid time: x = a + (b - a)(3 s^2 - 2 s^3) is half way, at 1.5 (b - a) / T
    mid = ctrl(_obs(sim, 0.5 * T))
    q_ref, v_ref = start + 0.5 * (key - start), 1.5 * (key - start) / T
    assert mid[elbow] == pytest.approx(g[elbow] + kp * (q_ref - qj[elbow])
                                       + kd * (v_ref - vj[elbow]), abs=1e-9)
    others = np.arange(sim.nj) != elbow  # the joints left out hold their start angle
    np.testing.assert_allclose(mid[others], pd(sim.q, qj, vj)[others], rtol=0, atol=1e-12)
    for t in (T, 3.0):  # the key, then held
        assert ctrl(_obs(sim, t))[elbow] == pytest.approx(g[elbow] + kp * (key - qj[elbow]),
                                                          abs=1e-9)


def test_keyframe_null_leaves_a_joint_unkeyed_at_that_time(sim):
    kp, key = 1000.0, -1.3
    elbow, knee = sim.joint_names.index("l_elbow"), sim.joint_names.index("l_knee")
    start = sim.joint_positions.copy()
    ctrl = ControllerLoop(sim, KF, {"kp": kp, "kd": 0.0, "times": [1.0, 2.0],
                                    "postures": {"l_elbow": [None, key],
                                                 "l_knee": [start[knee] + 0.2, None]}}).controller
    g = PDGravityController(sim.robot, start, kp, 0.0, gravity=sim.config.gravity).gravity(sim.q)
    tau = ctrl(_obs(sim, 1.0))  # the elbow's one key is at 2 s: half way at 1 s
    assert tau[elbow] == pytest.approx(g[elbow] + kp * 0.5 * (key - start[elbow]), abs=1e-9)
    assert tau[knee] == pytest.approx(g[knee] + kp * 0.2, abs=1e-9)  # its key, then held
    assert ctrl(_obs(sim, 2.0))[knee] == pytest.approx(g[knee] + kp * 0.2, abs=1e-9)


@pytest.mark.parametrize("params, says", [
    ({"times": [1.0], "postures": {"l_elbo": [0.0]}}, "the joint 'l_elbo'"),
    ({"times": [1.0, 2.0], "postures": {"l_elbow": [0.0]}}, "gives 1 angles for 2 times"),
    ({"times": [0.0], "postures": {}}, "increasing times after 0"),
    ({"times": [2.0, 1.0], "postures": {}}, "increasing times after 0"),
])
def test_keyframe_refusals_name_the_joint_or_the_times(sim, params, says):
    with pytest.raises(ConfigError, match="controller") as e:
        ControllerLoop(sim, KF, {"kp": 1.0, "kd": 0.1, **params})
    assert says in str(e.value)


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_humanoid_pushes_the_box_which_then_slides_at_mu_g(model):
    got = pushes_box(model)
    assert got["info"].controller == KF
    assert got["mu"] == 0.4 and got["x0"] == 0.75
    assert np.isfinite(got["x"]).all()
    # the reach brushes the box (< 1 mm) before the push, after 2 s, slides it 0.15 m or
    # more (0.16 m), flat on the floor
    assert np.ptp(got["x"][got["t"] < 2.0]) < 1e-3
    assert got["moved"] >= 0.15, got["moved"]
    assert got["pitch"].max() < 0.01, got["pitch"].max()  # never tipping over its front edge
    assert got["peak_v"] > 0.3
    # then alone (at 0.33 m/s): from 1 mm off the hands to 0.03 m/s, mu g to 2 %
    assert got["slide_steps"] >= 50 and got["release_v"] > 0.25, (got["slide_steps"],
                                                                  got["release_v"])
    assert got["decel"] == pytest.approx(got["mu"] * got["g"], rel=0.02), got["decel"]
    assert abs(got["final_v"]) < 1e-3  # at rest at the end
    # the robot stands on both feet: crouched, then back up; the soles stay put
    assert got["base_z"].min() > 0.6
    assert abs(got["base_z"][-1] - got["z0"]) < 0.005
    assert got["feet"].max() < 1e-3, got["feet"].max()
    assert got["tilt"].max() < 0.02, got["tilt"].max()  # rocked, never rolled onto an edge


def test_pushes_box_world_runs_through_python_m_wb_sim(tmp_path):
    out = subprocess.run([sys.executable, "-m", "wb_sim", "--world", str(WORLD),
                          "--duration", "3.0"], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "result: stands" in out.stdout


def test_pushes_box_world_hands_its_keyframes_to_the_node():
    params, info = load_world(WORLD)
    node = params_document(params, info)["wb_sim"]["ros__parameters"]
    assert node["objects"]["mass"] == [5.0]
    assert yaml.safe_load(node["controller"]["params"]) == dict(info.controller_params)
