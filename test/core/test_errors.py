"""Every deliberate error of wb_sim: its type (a WbSimError subclass) and a
message that names the offending key, file, joint or frame."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import wb_sim
from wb_sim.config import read_yaml_params

# ---------------------------------------------------------------------------
# tiny URDFs
# ---------------------------------------------------------------------------


def inertial(m=1.0, i=0.01):
    return (f'<inertial><origin xyz="0 0 0" rpy="0 0 0"/><mass value="{m}"/>'
            f'<inertia ixx="{i}" ixy="0" ixz="0" iyy="{i}" iyz="0" izz="{i}"/></inertial>')


def arm_urdf(joint_type="revolute", child_inertial=True, limits=(-1.0, 1.0)):
    """Fixed-base candidate: link ``base`` -> joint ``elbow`` -> link ``forearm``."""
    lim = (f'<limit lower="{limits[0]}" upper="{limits[1]}" effort="10" velocity="10"/>'
           if joint_type in ("revolute", "prismatic") else "")
    child = inertial() if child_inertial else ""
    return ('<robot name="arm">'
            f'<link name="base">{inertial()}</link>'
            f'<link name="forearm">{child}</link>'
            f'<joint name="elbow" type="{joint_type}"><parent link="base"/>'
            '<child link="forearm"/><origin xyz="0 0 0.1" rpy="0 0 0"/>'
            f'<axis xyz="0 1 0"/>{lim}</joint></robot>')


def body_urdf(m=1.0):
    """A single link ``body`` (no joints) with a fixed child frame ``sole`` below it."""
    return (f'<robot name="body"><link name="body">{inertial(m, 0.1 * m)}</link>'
            '<link name="sole"/><joint name="sole_joint" type="fixed"><parent link="body"/>'
            '<child link="sole"/><origin xyz="0 0 -0.05" rpy="0 0 0"/></joint></robot>')


ARM = {"robot_description": arm_urdf(), "floating_base": False}


def arm_params(**extra):
    p = dict(ARM)
    p.update(extra)
    return p


def box_on_ground(**extra):
    """A 1 kg body on a 0.2 m x 0.1 m box contact, its sole 1 mm above the ground."""
    p = {"robot_description": body_urdf(), "contact_surfaces": ["foot"],
         "foot.frame": "sole", "foot.shape": "box", "foot.size": [0.2, 0.1],
         "contact.damping": 50.0, "contact.tangential_damping": 50.0,
         "initial.base_position": [0.0, 0.0, 0.051]}
    p.update(extra)
    return p


def raises(exc, *fragments):
    """pytest.raises(exc) whose message must contain every fragment."""
    class _Check:
        def __enter__(self):
            self.ctx = pytest.raises(exc)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *a):
            suppressed = self.ctx.__exit__(*a)
            if not suppressed:  # another exception type: let it propagate
                return False
            msg = str(self.info.value)
            assert isinstance(self.info.value, wb_sim.WbSimError), type(self.info.value)
            for f in fragments:
                assert f in msg, f"{f!r} not in {msg!r}"
            return suppressed
    return _Check()


def test_error_hierarchy():
    for exc in (wb_sim.ConfigError, wb_sim.ModelError, wb_sim.CommandError,
                wb_sim.DivergenceError, wb_sim.UnsupportedError):
        assert issubclass(exc, wb_sim.WbSimError)
    assert not issubclass(wb_sim.ConfigError, wb_sim.ModelError)


# ---------------------------------------------------------------------------
# the robot description
# ---------------------------------------------------------------------------


def test_missing_urdf_file(tmp_path):
    path = tmp_path / "no_such_robot.urdf"
    with raises(wb_sim.ModelError, "URDF file not found", str(path), "parameter 'urdf_path'",
                "example-robot-data:"):
        wb_sim.Simulator.from_params({"urdf_path": str(path)})


def test_malformed_xml():
    with raises(wb_sim.ModelError, "malformed URDF XML", "robot_description"):
        wb_sim.Simulator.from_params({"robot_description": '<robot name="x"><link name="a">'})


def test_not_a_urdf():
    with raises(wb_sim.ModelError, "root element is <sdf>", "expected <robot>"):
        wb_sim.Simulator.from_params({"robot_description": '<sdf version="1.6"/>'})


def test_fixed_base_without_actuated_joints():
    with raises(wb_sim.ModelError, "robot_description",
                "a fixed-base robot needs at least one actuated joint"):
        wb_sim.Simulator.from_params({"robot_description": body_urdf(), "floating_base": False})


def test_floating_base_without_joints_is_a_free_body():
    sim = wb_sim.Simulator.from_params({"robot_description": body_urdf(2.0),
                                        "initial.base_position": [0.0, 0.0, 1.0]})
    assert sim.nj == 0 and sim.joint_names == ()
    assert sim.mass == pytest.approx(2.0)
    assert sim.model.nq == 7 and sim.model.nv == 6
    n = 100
    for _ in range(n):
        sim.step([])
    # symplectic Euler free fall: z_n = z0 - g h^2 n (n + 1) / 2
    assert sim.state.base_position[2] == pytest.approx(1.0 - 9.81 * 1e-6 * n * (n + 1) / 2,
                                                       abs=1e-12)


def test_unknown_surface_frame():
    with raises(wb_sim.ModelError, "'foot.frame'", "frame 'left_sole' is not in the model"):
        wb_sim.Simulator.from_params(box_on_ground(**{"foot.frame": "left_sole"}))


def test_a_frame_or_joint_typo_gets_a_did_you_mean_as_parameters_do():
    """Issue 28: 'FL_fot' for 'FL_foot' named the bad frame and a Python method only."""
    with raises(wb_sim.ModelError, "'foot.frame'", "frame 'sol' is not in the model",
                "did you mean 'sole'"):
        wb_sim.Simulator.from_params(box_on_ground(**{"foot.frame": "sol"}))
    with raises(wb_sim.ModelError, "'initial.joint_names'", "unknown joint 'elbw'",
                "did you mean 'elbow'?"):
        wb_sim.Simulator.from_params(arm_params(**{"initial.joint_names": ["elbw"],
                                                   "initial.joint_positions": [0.1]}))
    sim = wb_sim.Simulator.from_params(ARM)
    with raises(wb_sim.ModelError, "unknown joint 'elbo'", "did you mean 'elbow'?"):
        sim.robot.joint_index("elbo")
    with pytest.raises(wb_sim.ModelError) as info:  # nothing close: no suggestion
        sim.robot.frame_id("zzzzzzzz")
    assert "did you mean" not in str(info.value)


def test_unknown_imu_frame():
    with raises(wb_sim.ModelError, "'imu.frame'", "frame 'imu_link' is not in the model"):
        wb_sim.Simulator.from_params(arm_params(**{"imu.frame": "imu_link"}))


def test_no_imu_configured():
    sim = wb_sim.Simulator.from_params(ARM)
    with raises(wb_sim.ModelError, "no IMU configured", "imu.frame"):
        sim.imu()


def test_unknown_initial_joint():
    with raises(wb_sim.ModelError, "'initial.joint_names'", "unknown joint 'wrist'", "elbow"):
        wb_sim.Simulator.from_params(arm_params(**{"initial.joint_names": ["wrist"],
                                                   "initial.joint_positions": [0.1]}))


@pytest.mark.parametrize("jtype", ["planar", "floating"])
def test_unsupported_joint_type(jtype):
    with raises(wb_sim.ModelError, "joint 'elbow'", f"unsupported type '{jtype}'"):
        wb_sim.Simulator.from_params({"robot_description": arm_urdf(jtype),
                                      "floating_base": False})


def test_joint_that_moves_no_mass():
    with raises(wb_sim.ModelError, "joint 'elbow' moves no mass"):
        wb_sim.Simulator.from_params({"robot_description": arm_urdf(child_inertial=False),
                                      "floating_base": False})


# ---------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------


def test_unknown_parameter_with_suggestion():
    with raises(wb_sim.ConfigError, "unknown parameter 'contact.stifness'",
                "did you mean 'contact.stiffness'"):
        wb_sim.Simulator.from_params(arm_params(**{"contact.stifness": 1e4}))


def test_unknown_parameter_without_close_match():
    with raises(wb_sim.ConfigError, "unknown parameter 'zzzzzz'") as info:
        wb_sim.load_config(arm_params(zzzzzz=1))
    assert "did you mean" not in str(info.value)


def test_wrong_type():
    with raises(wb_sim.ConfigError, "parameter 'contact.stiffness'", "expected a number",
                "'stiff'"):
        wb_sim.load_config(arm_params(**{"contact.stiffness": "stiff"}))
    with raises(wb_sim.ConfigError, "parameter 'floating_base'", "expected a bool"):
        wb_sim.load_config(arm_params(floating_base="false"))


@pytest.mark.parametrize("key, value, why", [
    ("contact.stiffness", -1.0, "must be >= 0"),
    ("ground.normal", [0.0, 0.0, 2.0], "must be a unit vector (its norm is 2)"),
    ("physics_rate_hz", 0.0, "must be in [1, 1e+06]"),
    ("ground.normal", [0.0, 1.0], "expected 3 entries"),
    ("contact.damping", float("nan"), "must be finite"),
])
def test_out_of_range(key, value, why):
    with raises(wb_sim.ConfigError, f"parameter '{key}'", why):
        wb_sim.load_config(arm_params(**{key: value}))


def test_both_or_neither_robot_source(tmp_path):
    both = arm_params(urdf_path=str(tmp_path / "arm.urdf"))
    for params in (both, {"floating_base": False}):
        with raises(wb_sim.ConfigError, "exactly one of parameters 'urdf_path' and "
                    "'robot_description' must be set"):
            wb_sim.load_config(params)


def test_initial_positions_length_mismatch():
    with raises(wb_sim.ConfigError, "'initial.joint_positions' has 2 entries",
                "'initial.joint_names' has 1"):
        wb_sim.load_config(arm_params(**{"initial.joint_names": ["elbow"],
                                         "initial.joint_positions": [0.1, 0.2]}))


def test_unknown_contact_model():
    with raises(wb_sim.ConfigError, "parameter 'contact.model'", "'soft'",
                "valid choices: compliant, rigid"):
        wb_sim.Simulator.from_params(box_on_ground(**{"contact.model": "soft"}))


def test_unknown_urdf_scheme():
    with raises(wb_sim.ConfigError, "parameter 'urdf_path'", "unknown scheme 'ros-pkg:'",
                "example-robot-data", "icub-models"):
        wb_sim.Simulator.from_params({"urdf_path": "ros-pkg:arm.urdf"})


def test_initial_position_outside_joint_limits():
    params = arm_params(**{"initial.joint_names": ["elbow"], "initial.joint_positions": [1.5]})
    with raises(wb_sim.ConfigError, "'initial.joint_positions'", "joint 'elbow' starts at 1.5",
                "outside its limits [-1, 1]"):
        wb_sim.Simulator.from_params(params)
    # accepted when the limits are not enforced
    sim = wb_sim.Simulator.from_params(dict(params, **{"joints.position_limits": False}))
    assert sim.state.joint_positions[0] == 1.5


def test_contact_damping_beyond_the_rate_is_accepted_stable_and_noted():
    """No stiffness or damping is refused for stability any more (the contact is
    implicit): a damping the rate cannot resolve builds, steps finitely, and the
    simulator notes once what it does; a resolvable one adds no note."""
    for key in ("contact.damping", "contact.tangential_damping"):
        sim = wb_sim.Simulator.from_params(box_on_ground(**{key: 1e6}))
        assert any("numerically damped" in n and "physics_rate_hz" in n for n in sim.notes)
        for _ in range(300):
            sim.step(np.zeros(sim.nj))
        assert np.isfinite(sim.q).all() and abs(sim.v).max() < 1.0
    assert wb_sim.Simulator.from_params(box_on_ground(**{"contact.damping": 50.0,
                                                         "contact.tangential_damping": 50.0,
                                                         "contact.stiffness": 1e4,
                                                         "contact.tangential_stiffness": 1e4})
                                        ).notes == []


# ---------------------------------------------------------------------------
# commands and divergence: the state is left untouched
# ---------------------------------------------------------------------------


def snapshot(sim):
    st = sim.state
    return st.q.copy(), st.v.copy(), st.t, st.applied_torques.copy()


def assert_unchanged(sim, snap):
    q, v, t, tau = snap
    st = sim.state
    assert np.array_equal(st.q, q) and np.array_equal(st.v, v) and st.t == t
    assert np.array_equal(st.applied_torques, tau)


@pytest.fixture
def arm():
    sim = wb_sim.Simulator.from_params(ARM)
    for _ in range(5):
        sim.step([0.3])  # a state that is not the initial one
    return sim


@pytest.mark.parametrize("tau, fragments", [
    ([0.1, 0.2], ("torques must have shape (1,)", "got shape (2,)")),
    ([], ("torques must have shape (1,)", "got shape (0,)")),
    ([[0.1]], ("torques must have shape (1,)", "got shape (1, 1)")),
    ([float("nan")], ("non-finite torque", "elbow")),
    ([float("inf")], ("non-finite torque", "elbow")),
    ([-float("inf")], ("non-finite torque", "elbow")),
    (["x"], ("torques must be a vector of 1 numbers",)),
])
def test_bad_torques(arm, tau, fragments):
    before = snapshot(arm)
    assert before[2] == pytest.approx(0.005) and before[1][0] != 0.0
    with raises(wb_sim.CommandError, *fragments):
        arm.step(tau)
    assert_unchanged(arm, before)
    arm.step([0.3])  # still usable
    assert arm.t == pytest.approx(0.006)


def test_divergence_on_deep_penetration():
    # 200 kg on a very soft ground: it sinks past max_penetration = 5 mm
    params = box_on_ground(**{"robot_description": body_urdf(200.0),
                              "contact.stiffness": 2000.0, "contact.damping": 50.0,
                              "contact.max_penetration": 0.005})
    sim = wb_sim.Simulator.from_params(params)
    snap = None
    with raises(wb_sim.DivergenceError, "contact surface 'foot'", "contact.max_penetration = 5.0 mm",
                "the last valid state is kept"):
        for _ in range(2000):
            snap = snapshot(sim)
            sim.step([])
    assert snap is not None and snap[2] > 0.0
    assert_unchanged(sim, snap)
    # the state kept is a valid one: finite and not deeper than the limit
    assert np.isfinite(sim.state.q).all()
    assert sim.contact_points_state().position[:, 2].min() > -0.005 - 1e-3
    sim.reset()
    assert sim.t == 0.0 and sim.state.base_position[2] == pytest.approx(0.051)


# ---------------------------------------------------------------------------
# YAML files
# ---------------------------------------------------------------------------


def test_yaml_without_wb_sim_block(tmp_path):
    path = tmp_path / "other.yaml"
    path.write_text("other_node:\n  ros__parameters:\n    urdf_path: x.urdf\n")
    with raises(wb_sim.ConfigError, str(path), "has no 'wb_sim: ros__parameters:' block"):
        wb_sim.Simulator.from_yaml(path)


def test_yaml_missing_file(tmp_path):
    path = tmp_path / "absent.yaml"
    with raises(wb_sim.ConfigError, "cannot read parameter file", str(path)):
        read_yaml_params(path)


def test_read_yaml_params_resolves_relative_urdf_path(tmp_path, monkeypatch):
    (tmp_path / "urdf").mkdir()
    (tmp_path / "config").mkdir()
    (tmp_path / "urdf" / "arm.urdf").write_text(arm_urdf())
    cfg = tmp_path / "config" / "arm.yaml"
    cfg.write_text(textwrap.dedent("""\
        wb_sim:
          ros__parameters:
            urdf_path: ../urdf/arm.urdf
            floating_base: false
            joints:
              armature: [0.01]
        """))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # relative to the YAML file, not to the cwd
    flat = read_yaml_params(cfg)
    assert flat["urdf_path"] == str((tmp_path / "urdf" / "arm.urdf").resolve())
    assert flat["joints.armature"] == [0.01] and flat["floating_base"] is False
    sim = wb_sim.Simulator.from_yaml(cfg)
    assert sim.joint_names == ("elbow",)
    # absolute paths and schemes are left alone
    cfg.write_text("wb_sim:\n  ros__parameters:\n    urdf_path: icub-models:iCubGazeboV2_5\n")
    assert read_yaml_params(cfg)["urdf_path"] == "icub-models:iCubGazeboV2_5"


# ---------------------------------------------------------------------------
# no ROS in the physics core
# ---------------------------------------------------------------------------

CORE_MODULES = ["wb_sim", "wb_sim.errors", "wb_sim.parameters", "wb_sim.config", "wb_sim.robot",
                "wb_sim.actuation", "wb_sim.contact", "wb_sim.contact.compliant",
                "wb_sim.contact.rigid", "wb_sim.contact.shared", "wb_sim.contact.points",
                "wb_sim.contact.geometry", "wb_sim.contact.ground_collision",
                "wb_sim.contact.self_collision", "wb_sim.contact.whole_body", "wb_sim.pin_views",
                "wb_sim.state",
                "wb_sim.ros.parameters", "wb_sim.sensors", "wb_sim.simulator", "wb_sim.controllers",
                "wb_sim.tools.bench", "wb_sim.tools.demo"]

NO_RCLPY = textwrap.dedent("""
    import importlib, importlib.util, sys

    tried = []

    class Spy:  # records any attempt to import rclpy, even one caught by try/except
        def find_spec(self, name, path=None, target=None):
            if name == "rclpy" or name.startswith("rclpy."):
                tried.append(name)
            return None

    sys.meta_path.insert(0, Spy())
    imported = []
    for name in sys.argv[1:]:
        if name != "wb_sim" and importlib.util.find_spec(name) is None:
            continue  # optional module not in this version
        importlib.import_module(name)
        imported.append(name)
    loaded = [m for m in sys.modules if m == "rclpy" or m.startswith("rclpy.")]
    assert not loaded and not tried, (loaded, tried)
    print(",".join(imported))
""")


def test_physics_core_never_imports_rclpy():
    out = subprocess.run([sys.executable, "-c", NO_RCLPY, *CORE_MODULES], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    imported = out.stdout.strip().split(",")
    for must in ("wb_sim", "wb_sim.config", "wb_sim.simulator", "wb_sim.contact",
                 "wb_sim.controllers"):
        assert must in imported


def test_rclpy_check_can_fail():
    """The check above is not vacuous: an rclpy import (even a failed, caught one)
    made after the spy is installed is reported."""
    script = NO_RCLPY.replace("imported = []", "try:\n    import rclpy\nexcept ImportError:\n"
                              "    pass\nimported = []")
    assert script != NO_RCLPY
    out = subprocess.run([sys.executable, "-c", script, "wb_sim"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and "AssertionError" in out.stderr and "rclpy" in out.stderr


def test_a_link_and_a_joint_of_the_same_name_resolve_to_the_link():
    """ANYmal C and SO-100 name a joint as its child link: pinocchio's getFrameId then
    refused with a plain ValueError (the IMU could not be built). The link is meant."""
    import pinocchio as pin
    urdf = ("""<robot name="r">
      <link name="base"><inertial><mass value="1"/>
        <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <link name="arm"><inertial><origin xyz="0.1 0 0"/><mass value="1"/>
        <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="arm" type="revolute"><parent link="base"/><child link="arm"/>
        <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="10" velocity="1"/></joint>
    </robot>""")
    sim = wb_sim.Simulator.from_params({"robot_description": urdf, "imu.frame": "arm",
                                        "gravity": [0.0, 0.0, 0.0]})
    fid = sim.robot.frame_id("arm")
    assert sim.robot.model.frames[fid].type == pin.FrameType.BODY
    sim.set_base_state(angular_velocity=[0.0, 0.0, 1.0])
    sim.step(np.zeros(1))
    np.testing.assert_allclose(sim.imu().angular_velocity, [0.0, 0.0, 1.0], atol=1e-12)
