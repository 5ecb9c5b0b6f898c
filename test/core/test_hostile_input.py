"""Hostile input to the physics core (issue 13): URDF files, parameter files and
dicts, and Python API arguments that make no sense are refused with a typed
error (a WbSimError subclass) naming the input; the refusal leaves the
simulator as it was, and absurd sizes are refused at once, before any model is
built. The node's side is test/ros/test_hostile_input.py."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pytest

import wb_sim
from wb_sim.ros.parameters import load_node_config
from wb_sim.simulator import InitialPenetrationWarning

from core.test_errors import ARM, arm_urdf, box_on_ground, raises


def _link(name, mass="1.0", ixx="0.01", ixy="0", ixz="0", iyy="0.01", iyz="0", izz="0.01"):
    return (f'<link name="{name}"><inertial><mass value="{mass}"/>'
            f'<inertia ixx="{ixx}" ixy="{ixy}" ixz="{ixz}" iyy="{iyy}" iyz="{iyz}" '
            f'izz="{izz}"/></inertial></link>')


def _arm(forearm: str = "", axis: str = "0 1 0", extra_joint: str = "") -> str:
    """base -> elbow (revolute, ``axis``) -> forearm (``forearm``: its link XML)."""
    forearm = forearm or _link("forearm")
    return ('<robot name="arm">' + _link("base") + forearm +
            '<joint name="elbow" type="revolute"><parent link="base"/><child link="forearm"/>'
            f'<origin xyz="0 0 0.1"/><axis xyz="{axis}"/>'
            '<limit lower="-1" upper="1" effort="10" velocity="10"/></joint>'
            + extra_joint + '</robot>')


def _build(urdf: str, **extra):
    return wb_sim.Simulator.from_params({"robot_description": urdf, "floating_base": False,
                                         **extra})


# ----------------------------------------------------------------------------- URDF files

@pytest.mark.parametrize("forearm, fragments", [
    (_link("forearm", mass="-2.0"), ("link 'forearm'", "negative mass")),
    (_link("forearm", mass="nan"), ("link 'forearm'", "<mass value>", "finite")),
    (_link("forearm", mass="abc"), ("link 'forearm'", "<mass value>", "'abc'")),
    (_link("forearm", mass="inf"), ("link 'forearm'", "<mass value>")),
    (_link("forearm", mass="1 2"), ("link 'forearm'", "<mass value>")),
    ('<link name="forearm"><inertial><mass/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" '
     'izz="1"/></inertial></link>', ("link 'forearm'", "<mass value>", "None")),
    (_link("forearm", ixx="-0.01"), ("link 'forearm'", "not positive semi-definite")),
    (_link("forearm", ixy="0.5"), ("link 'forearm'", "not positive semi-definite")),
    (_link("forearm", ixx="-1", iyy="-1", izz="-1"), ("link 'forearm'", "semi-definite")),
    (_link("forearm", iyz="x"), ("link 'forearm'", "<inertia iyz>")),
    (_link("forearm", izz="nan"), ("link 'forearm'", "<inertia izz>")),
])
def test_unphysical_inertials_are_model_errors_naming_the_link(forearm, fragments):
    t0 = time.perf_counter()
    with raises(wb_sim.ModelError, *fragments):
        _build(_arm(forearm))
    assert time.perf_counter() - t0 < 2.0


@pytest.mark.parametrize("axis, fragments", [
    ("0 0 0", ("joint 'elbow'", "zero axis")),
    ("1e-12 0 0", ("joint 'elbow'", "zero axis")),
    ("0 1", ("joint 'elbow'", "<axis xyz>", "3 finite numbers")),
    ("0 nan 1", ("joint 'elbow'", "<axis xyz>")),
    ("a b c", ("joint 'elbow'", "<axis xyz>")),
])
def test_bad_joint_axes_are_model_errors_naming_the_joint(axis, fragments):
    with raises(wb_sim.ModelError, *fragments):
        _build(_arm(axis=axis))


MIMIC = ('<link name="finger"><inertial><mass value="0.1"/><inertia ixx="1e-4" ixy="0" ixz="0" '
         'iyy="1e-4" iyz="0" izz="1e-4"/></inertial></link>'
         '<joint name="finger_joint" type="prismatic"><parent link="forearm"/>'
         '<child link="finger"/><axis xyz="1 0 0"/>'
         '<limit lower="0" upper="0.04" effort="10" velocity="1"/>'
         '<mimic joint="elbow" multiplier="0.02" offset="0"/></joint>')


def test_a_moving_mimic_joint_is_refused_by_default_naming_it():
    with raises(wb_sim.ModelError, "joint 'finger_joint' mimics 'elbow'", "joints.mimic"):
        _build(_arm(extra_joint=MIMIC))


def test_a_mimic_joint_made_independent_on_request_says_so():
    with pytest.warns(UserWarning, match="finger_joint.*independent"):
        sim = _build(_arm(extra_joint=MIMIC), **{"joints.mimic": "independent"})
    assert sim.joint_names == ("elbow", "finger_joint")
    with raises(wb_sim.ConfigError, "'joints.mimic'", "must be one of"):
        _build(_arm(extra_joint=MIMIC), **{"joints.mimic": "couple"})


def test_a_mimic_on_a_fixed_joint_couples_nothing_and_is_accepted():
    fixed = MIMIC.replace('type="prismatic"', 'type="fixed"')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim = _build(_arm(extra_joint=fixed))
    assert sim.joint_names == ("elbow",)


# ----------------------------------------------------------------------------- parameters

@pytest.mark.parametrize("key, value, fragments", [
    ("physics_rate_hz", 1e300, ("'physics_rate_hz'", "[1, 1e+06]")),
    ("physics_rate_hz", 0.5, ("'physics_rate_hz'", "[1, 1e+06]")),
    ("physics_rate_hz", "fast", ("'physics_rate_hz'", "expected a number")),
    ("joints.limit_damping_ratio", 1e6, ("'joints.limit_damping_ratio'", "[0, 100]")),
    ("contact.friction_coefficient", 1e300, ("'contact.friction_coefficient'", "[0, 1000]")),
    ("contact.friction_coefficient", math.inf, ("'contact.friction_coefficient'", "finite")),
    ("imu.seed", -1, ("'imu.seed'", "must be in [0")),
    ("imu.seed", 2**70, ("'imu.seed'", "must be in [0")),
    ("imu.seed", 1.5, ("'imu.seed'", "expected an integer")),
    ("gravity", [0, 0, "down"], ("'gravity'", "list of numbers")),
    ("gravity", [0, 0, math.nan], ("'gravity'", "finite")),
    ("initial.base_position", [0, 0], ("'initial.base_position'", "3 entries")),
])
def test_out_of_range_and_mistyped_parameters_are_config_errors(key, value, fragments):
    with raises(wb_sim.ConfigError, *fragments):
        wb_sim.Simulator.from_params({**box_on_ground(), key: value})


@pytest.mark.parametrize("grid", [[45, 45], [60, 60], [401, 1], [1e9, 2]])
def test_absurd_contact_grids_are_refused_at_once(grid):
    t0 = time.perf_counter()
    with raises(wb_sim.ConfigError, "'foot.grid'", "400 per surface"):
        wb_sim.Simulator.from_params({**box_on_ground(), "foot.grid": grid})
    assert time.perf_counter() - t0 < 1.0  # was 195 s and 3.6 GB for 45 x 45


def test_too_many_contact_points_in_all_are_refused_at_once():
    p = box_on_ground()
    p["contact_surfaces"] = ["a", "b", "c"]
    for s in "abc":
        p.update({f"{s}.frame": "sole", f"{s}.shape": "box", f"{s}.size": [0.2, 0.1],
                  f"{s}.grid": [20, 20]})
    del p["foot.frame"], p["foot.shape"], p["foot.size"]
    t0 = time.perf_counter()
    with raises(wb_sim.ConfigError, "'contact_surfaces'", "1200 contact points", "1000"):
        wb_sim.Simulator.from_params(p)
    assert time.perf_counter() - t0 < 1.0


def test_too_many_listed_points_are_refused():
    p = box_on_ground()
    p.update({"foot.shape": "points", "foot.points": [0.0, 0.0, 0.0] * 401})
    with raises(wb_sim.ConfigError, "'foot.points'", "401 points"):
        wb_sim.Simulator.from_params(p)


@pytest.mark.parametrize("name", ["joint states", "1abc", "a//b", "a/", "~x", "/", "a/1b",
                                  "a-b", "a.b", "{node}/x"])
def test_invalid_topic_names_are_refused(name):
    with raises(wb_sim.ConfigError, "'topics.joint_states'", "valid ROS topic name"):
        load_node_config({"topics.joint_states": name})


@pytest.mark.parametrize("name", ["joint_states", "/clock", "~/cmd", "robot1/joint_states",
                                  "_a/b_2", ""])
def test_valid_topic_names_are_accepted(name):
    assert load_node_config({"topics.joint_states": name})["topics.joint_states"] == name


def test_a_yaml_file_with_a_bad_value_names_the_file_key(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("wb_sim:\n  ros__parameters:\n    contact:\n      friction_coefficient: 1.0e+300\n")
    with raises(wb_sim.ConfigError, "'contact.friction_coefficient'"):
        wb_sim.Simulator.from_yaml(f, overrides={"robot_description": arm_urdf(),
                                                 "floating_base": False})


def test_a_robot_starting_inside_the_ground_gets_a_warning():
    p = box_on_ground(**{"initial.base_position": [0.0, 0.0, 0.05 - 0.037]})
    with pytest.warns(InitialPenetrationWarning, match=r"'foot' starts 37\.0 mm inside"):
        wb_sim.Simulator.from_params(p)
    with warnings.catch_warnings():  # 1 mm above: no warning
        warnings.simplefilter("error")
        wb_sim.Simulator.from_params(box_on_ground())


# ----------------------------------------------------------------------------- Python API

@pytest.fixture
def box():
    sim = wb_sim.Simulator.from_params(box_on_ground())
    for _ in range(20):
        sim.step([])
    return sim


def _contact(sim):
    c = sim.contact
    return (c.k, c.c, c.kt, c.ct, c.mu)


@pytest.mark.parametrize("values, fragments", [
    ({"friction_coefficient": 1e300}, ("'contact.friction_coefficient'", "[0, 1000]")),
    ({"friction_coefficient": math.nan}, ("'contact.friction_coefficient'", "finite")),
    ({"stiffness": "abc"}, ("'contact.stiffness'", "expected a number")),
    ({"stiffness": -1.0}, ("'contact.stiffness'", ">= 0")),
    ({"stiffness": 1j}, ("'contact.stiffness'", "expected a number")),
    ({"contact.damping": True}, ("'contact.damping'", "expected a number")),
    ({"reference_depth": 0.002}, ("'contact.reference_depth'", "cannot be changed")),
    ({"no_such": 1.0}, ("'contact.no_such'", "cannot be changed")),
    # a good value with a bad one: neither is applied
    ({"stiffness": 5e4, "friction_coefficient": 1e300}, ("'contact.friction_coefficient'",)),
    ({"friction_coefficient": 0.5, "tangential_damping": -1.0}, ("'contact.tangential_damping'",)),
])
def test_set_contact_parameters_is_whole_or_nothing(box, values, fragments):
    before = _contact(box)
    with raises(wb_sim.ConfigError, *fragments):
        box.set_contact_parameters(**values)
    assert _contact(box) == before
    box.step([])  # and the simulator goes on
    assert np.isfinite(box.q).all()


def test_set_contact_parameters_accepts_a_good_set(box):
    box.set_contact_parameters(friction_coefficient=0.5, stiffness=5e4)
    assert box.contact.mu == 0.5 and box.contact.k == 5e4


@pytest.fixture(scope="module")
def arm():
    return wb_sim.Simulator.from_params(ARM)


@pytest.mark.parametrize("call, fragments", [
    (lambda s: s.forward_dynamics([0.0, 0.0]), ("tau", "shape (1,)", "got shape (2,)")),
    (lambda s: s.forward_dynamics([]), ("tau", "shape (1,)")),
    (lambda s: s.forward_dynamics([math.nan]), ("tau", "non-finite")),
    (lambda s: s.forward_dynamics([1.0 + 1.0j]), ("tau", "must be real")),
    (lambda s: s.forward_dynamics(["x"]), ("tau", "real numbers")),
    (lambda s: s.forward_dynamics([0.0], q=[math.nan]), ("q", "non-finite")),
    (lambda s: s.forward_dynamics([0.0], v=[math.inf]), ("v", "non-finite")),
    (lambda s: s.mass_matrix([math.nan]), ("q", "non-finite")),
    (lambda s: s.mass_matrix([0.0, 0.0]), ("q", "shape (1,)")),
    (lambda s: s.mass_matrix(np.array([0.1 + 0.5j])), ("q", "must be real")),
    (lambda s: s.bias_forces(v=[math.nan]), ("v", "non-finite")),
    (lambda s: s.generalized_gravity([math.inf]), ("q", "non-finite")),
    (lambda s: s.frame_jacobian("forearm", q=[math.nan]), ("q", "non-finite")),
    (lambda s: s.center_of_mass(q="abc"), ("q", "real numbers")),
    (lambda s: s.step(np.array([1.0 + 2.0j])), ("torques", "real")),
    (lambda s: s.step([1.0 + 2.0j]), ("torques",)),
    (lambda s: s.step(np.array([1.0, 2.0])), ("torques", "shape (1,)")),
    (lambda s: s.step([1e200]), ("torques too large",)),
    (lambda s: s.apply_external_wrench("forearm", [1, 0, 0], duration_s="abc"),
     ("duration_s", "'abc'")),
    (lambda s: s.apply_external_wrench("forearm", [1, 0, 0], duration_s=-1.0), ("duration",)),
    (lambda s: s.apply_external_wrench("forearm", [1, 0, 0], duration_s=math.nan), ("duration",)),
    (lambda s: s.apply_external_wrench("forearm", [1, 0, 0], duration_s=1j), ("duration_s",)),
    (lambda s: s.apply_external_wrench("forearm", np.array([1j, 0, 0])), ("force", "real")),
    (lambda s: s.apply_external_wrench("forearm", [1, 0]), ("3-vectors",)),
    (lambda s: s.apply_external_wrench("forearm", [1, 0, 0], [0, math.inf, 0]), ("non-finite",)),
    (lambda s: s.reset(pose=["a"]), ("reset: no named pose ['a']",)),
    (lambda s: s.reset(pose=1), ("reset: no named pose 1",)),
])
def test_bad_api_arguments_are_command_errors_and_change_nothing(arm, call, fragments):
    q, v, t = arm.q.copy(), arm.v.copy(), arm.t
    pushes = len(arm.external_wrenches)
    with raises(wb_sim.CommandError, *fragments):
        call(arm)
    assert np.array_equal(arm.q, q) and np.array_equal(arm.v, v) and arm.t == t
    assert len(arm.external_wrenches) == pushes


@pytest.mark.parametrize("call, exc, fragments", [
    (lambda s: s.apply_external_wrench("no_such_link", [1, 0, 0]), wb_sim.ModelError,
     ("'no_such_link'",)),
    (lambda s: s.frame_jacobian("nowhere"), wb_sim.ModelError, ("'nowhere'",)),
    (lambda s: s.frame_pose(""), wb_sim.ModelError, ("''",)),
    (lambda s: s.imu(), wb_sim.ModelError, ("no IMU",)),
])
def test_unknown_names_are_model_errors(arm, call, exc, fragments):
    with raises(exc, *fragments):
        call(arm)


def test_the_demo_keeps_memory_flat_for_any_duration(monkeypatch, capsys):
    """`python -m wb_sim --duration 1000` kept every step's base height (35 MB per
    million steps); it now keeps one second of them."""
    import wb_sim.tools.demo as demo
    seen = []
    real_deque = demo.collections.deque

    def spy(*a, **k):
        d = real_deque(*a, **k)
        seen.append(d)
        return d

    monkeypatch.setattr(demo.collections, "deque", spy)
    assert demo.main(["--duration", "1.5"]) == 0
    assert seen and all(d.maxlen is not None and d.maxlen <= 1000 for d in seen)
    assert "done: 1500 steps" in capsys.readouterr().out


def test_a_huge_finite_quaternion_is_normalised_not_zeroed():
    """A 1e200 quaternion (issue 27): its norm overflows to inf, and it was stored as
    zeros (base_quaternion then said identity while odometry and the IMU said zeros)."""
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    sim.set_base_state(quaternion=[0.0, 0.0, 1e200, 1e200])
    expected = np.array([0.0, 0.0, 1.0, 1.0]) / math.sqrt(2.0)
    np.testing.assert_allclose(sim.q[3:7], expected, atol=1e-15)
    np.testing.assert_allclose(sim.state.base_quaternion, expected, atol=1e-15)
    sim.step(np.zeros(sim.nj))
    assert np.isfinite(sim.q).all() and abs(np.linalg.norm(sim.q[3:7]) - 1.0) < 1e-12


def test_a_named_pose_beyond_the_joint_limits_is_reported_under_its_own_key():
    params = dict(ARM, **{"poses": ["up"], "poses.up.joint_names": ["elbow"],
                          "poses.up.joint_positions": [50.0]})
    with raises(wb_sim.ConfigError, "parameter 'poses.up.joint_positions'", "joint 'elbow'",
                "outside its limits"):
        wb_sim.Simulator.from_params(params)


# a named pose or a base state under the ground, a base velocity of 1e5 (issue 27): refused
# where they are set, naming them, not at the next step

SUNK = {"poses": ["sunk", "low"], "poses.sunk.joint_names": [], "poses.sunk.joint_positions": [],
        "poses.sunk.base_position": [0.0, 0.0, -0.5], "poses.low.joint_names": [],
        "poses.low.joint_positions": [], "poses.low.base_position": [0.0, 0.0, 0.6]}


def _humanoid(**extra) -> wb_sim.Simulator:
    from wb_sim.config import read_yaml_params
    return wb_sim.Simulator.from_params({**read_yaml_params(wb_sim.config_path("humanoid")),
                                         **SUNK, **extra})


def _refused_changes_nothing(call, *fragments):
    """``call(sim)`` is a CommandError with ``fragments``, and the simulation then goes on
    to the bit as a twin's that was never asked."""
    sim, twin = _humanoid(), _humanoid()
    tau = np.full(sim.nj, 0.5)
    for s in (sim, twin):
        for _ in range(20):
            s.step(tau)
    with raises(wb_sim.CommandError, *fragments):
        call(sim)
    for s in (sim, twin):
        for _ in range(20):
            s.step(tau)
    assert sim.t == twin.t and np.array_equal(sim.q, twin.q) and np.array_equal(sim.v, twin.v)
    assert np.array_equal(sim.contact_wrench_array(), twin.contact_wrench_array())


def test_a_reset_to_a_named_pose_under_the_ground_is_refused_naming_the_pose():
    _refused_changes_nothing(lambda s: s.reset(pose="sunk"), "reset: named pose 'sunk'",
                             "mm into the ground", "contact.max_penetration = 200.0 mm",
                             "'poses.sunk.base_position'")
    sim = _humanoid()
    sim.reset(pose="low")  # 0.6 m: the feet deep in the ground but within the bound: taken
    assert sim.q[2] == 0.6 and 0.1 < sim.contact.max_depth < 0.2


@pytest.mark.parametrize("extra, fragments", [
    ({"initial.pose": "sunk"}, ("parameter 'initial.pose'", "named pose 'sunk'",
                                "mm into the ground", "'poses.sunk.base_position'")),
    ({"initial.base_position": [0.0, 0.0, -0.5]},
     ("parameter 'initial.base_position'", "initial configuration puts contact surface",
      "mm into the ground")),
])
def test_an_initial_state_under_the_ground_is_a_config_error(extra, fragments):
    with raises(wb_sim.ConfigError, *fragments):
        _humanoid(**extra)


@pytest.mark.parametrize("kwargs, fragments", [
    ({"linear_velocity": [1e5, 0.0, 0.0]}, ("|linear_velocity| = 1e+05 m/s", "above 10000")),
    ({"angular_velocity": [0.0, 0.0, -1e5]}, ("|angular_velocity| = 1e+05 rad/s",)),
    ({"position": [0.0, 0.0, -0.5]}, ("position [0, 0, -0.5] puts contact surface",
                                      "mm into the ground", "contact.max_penetration")),
    ({"position": [0.0, 0.0, 0.3], "quaternion": [1.0, 0.0, 0.0, 0.0]},
     ("position [0, 0, 0.3] and quaternion [1, 0, 0, 0] puts", "into the ground")),
])
def test_a_base_state_the_next_step_would_refuse_is_refused_when_set(kwargs, fragments):
    _refused_changes_nothing(lambda s: s.set_base_state(**kwargs), "set_base_state: ",
                             *fragments, "the state is untouched")


def test_a_fast_or_low_base_within_the_bounds_is_taken():
    sim = _humanoid()
    sim.set_base_state(position=[0.0, 0.0, 0.6], linear_velocity=[9000.0, 0.0, 0.0])
    assert sim.q[2] == 0.6 and sim.v[0] == 9000.0
