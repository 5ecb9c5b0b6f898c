"""Each robot of several in one physics has its own force-torque and contact sensors
(wb_sim/multirobot.py: ``ft_sensors.*`` and ``contact_sensors.*`` per robot).

Checked against numbers: two humanoids 1.5 m apart (separate contact islands), each with a
force-torque sensor on both ankles and its contact sensors: robot b's readings equal those of
the same humanoid simulated alone (its ankles' wrenches to 1e-9 N / N*m, its feet's normal
forces to 1e-9 N; measured 2.4e-12 and 1.4e-12 after 0.3 s: rounding), its ankles carry its
weight less its feet's and its feet its whole weight (2.3e-4 relative after 0.3 s of settling,
1e-3 asserted), its feet touch; each robot's contact sensors use its own threshold; robot b's URDF's Gazebo sensor
(``ft_sensors.from_urdf``) is read from its own URDF; its noise is its own seed's and a
snapshot restores it; a joint, frame or surface frame that robot b's model lacks is refused
with ConfigError naming the robot and the key (and, from a world file, the key path in it),
with the closest names of its own model.
"""

from __future__ import annotations

import numpy as np
import pytest

from core.test_multirobot import Z0, _humanoid, _run
from wb_sim import Simulator
from wb_sim.errors import ConfigError

ANKLES = {"ft_sensors.names": ["left_ankle", "right_ankle"],
          "ft_sensors.joints": ["l_ankle_roll", "r_ankle_roll"]}
SENSED = {**ANKLES, "contact_sensors.active": True}
G = 9.81


def _feet_mass(sim, prefix: str = "") -> float:
    """The mass beyond the ankle roll joints (the feet and soles), kg."""
    m = sim.model
    return sum(m.inertias[m.getJointId(f"{prefix}{j}")].mass
               for j in ("l_ankle_roll", "r_ankle_roll"))


@pytest.fixture(scope="module")
def standing():
    """Robots a and b 1.5 m apart with sensors, and b alone, after 0.3 s of standing."""
    sim = Simulator.from_robots([("a", _humanoid(0.0, **SENSED)), ("b", _humanoid(1.5, **SENSED))])
    alone = Simulator.from_params(_humanoid(1.5, **SENSED))
    _run(sim, 300)
    _run(alone, 300)
    return sim, alone


def test_each_robot_reads_its_own_ft_sensors(standing):
    sim, alone = standing
    mine, ref = sim.robot_ft_wrenches("b"), alone.ft_wrenches
    assert list(mine) == ["left_ankle", "right_ankle"]
    for name in mine:
        np.testing.assert_allclose(mine[name].force, ref[name].force, rtol=0, atol=1e-9)
        np.testing.assert_allclose(mine[name].torque, ref[name].torque, rtol=0, atol=1e-9)
    assert (mine["left_ankle"].joint, mine["left_ankle"].link) == ("b/l_ankle_roll", "b/l_foot")
    np.testing.assert_array_equal(sim.robot_ft_wrench_array("b"),
                                  np.array([np.r_[w.force, w.torque] for w in mine.values()]))
    # the ankles (parent_to_child, the child link's frame, nearly level) hold the robot
    # up: the vertical forces sum to its weight less its feet's
    weight = sim.mass / 2 * G  # two of the same humanoid
    fz = sum(w.force[2] for w in mine.values())
    held = weight - _feet_mass(sim, "b/") * G
    assert 250.0 < -fz < 400.0
    assert -fz == pytest.approx(held, rel=1e-3)  # measured 2.3e-4: still settling
    # robot a's (the first robot's API) as ever: its own sensors, not b's
    assert list(sim.ft_wrenches) == ["left_ankle", "right_ankle"]
    np.testing.assert_array_equal(sim.robot_ft_wrench_array("a"), sim.ft_wrench_array())
    assert sim.ft_wrenches["left_ankle"].joint == "l_ankle_roll"


def test_each_robot_reads_its_own_contact_sensors(standing):
    sim, alone = standing
    mine, ref = sim.robot_contact_states("b"), alone.contact_states
    assert list(mine) == list(ref)  # its own names: its surfaces, then its links
    assert mine["left_foot"].in_contact and mine["right_foot"].in_contact
    assert mine["left_foot"].debounced and mine["right_foot"].debounced
    assert not mine["head"].in_contact
    for name in mine:
        assert mine[name].normal_force == pytest.approx(ref[name].normal_force, abs=1e-9)
    feet = mine["left_foot"].normal_force + mine["right_foot"].normal_force
    assert feet == pytest.approx(sim.mass / 2 * G, rel=1e-3)  # measured 2.3e-4
    np.testing.assert_array_equal(sim.robot_contact_sensor_array("b")[:, 0],
                                  [s.normal_force for s in mine.values()])
    # the first robot's contact_states are its own sensors only (b's are b's)
    assert list(sim.contact_states) == list(ref)
    assert sim.contact_states["left_foot"].in_contact
    np.testing.assert_array_equal(sim.contact_sensor_array(), sim.robot_contact_sensor_array("a"))


def test_each_robot_its_own_contact_sensor_parameters():
    """Robot b's threshold above its feet's load (175 N each) reads no contact while a's
    does; a without contact_sensors.active reads none, b does."""
    sim = Simulator.from_robots([
        ("a", _humanoid(0.0, **{"contact_sensors.active": True})),
        ("b", _humanoid(1.5, **{"contact_sensors.active": True,
                                "contact_sensors.threshold": 400.0}))])
    _run(sim, 20)
    a, b = sim.robot_contact_states("a"), sim.robot_contact_states("b")
    assert a["left_foot"].in_contact and not b["left_foot"].in_contact
    assert 100.0 < b["left_foot"].normal_force < 400.0
    sim = Simulator.from_robots([("a", _humanoid(0.0)),
                                 ("b", _humanoid(1.5, **{"contact_sensors.active": True}))])
    _run(sim, 20)
    assert sim.contact_states == {} and sim.robot_contact_states("a") == {}
    assert sim.contact_sensor_array().shape == (0, 3)
    assert sim.robot_contact_states("b")["right_foot"].in_contact


def test_second_robots_urdf_sensor_noise_and_snapshot(tmp_path):
    """Robot b's URDF declares a Gazebo force-torque sensor (ft_sensors.from_urdf reads its
    own URDF, not the first robot's); its noise is drawn from its own seed, and a snapshot
    restores it (the same readings after the same step)."""
    text = Simulator.from_params(_humanoid(1.5)).robot.urdf_xml.replace(
        "</robot>", '<gazebo reference="l_ankle_roll"><sensor type="force_torque" '
        'name="lft"><force_torque><frame>child</frame><measure_direction>parent_to_child'
        '</measure_direction></force_torque></sensor></gazebo></robot>')
    urdf = tmp_path / "h.urdf"
    urdf.write_text(text)
    b = _humanoid(1.5, **{"urdf_path": str(urdf), "ft_sensors.force_noise_std": 2.0,
                          "ft_sensors.seed": 7})
    sim = Simulator.from_robots([("a", _humanoid(0.0)), ("b", b)])
    alone = Simulator.from_params(b)
    assert sim.ft_wrenches == {}
    _run(sim, 50)
    _run(alone, 50)
    mine, ref = sim.robot_ft_wrenches("b")["lft"], alone.ft_wrenches["lft"]
    np.testing.assert_allclose(mine.force, ref.force, rtol=0, atol=1e-9)  # the same draws
    assert np.abs(mine.force - sim.robot_ft_wrenches("b")["lft"].force).max() == 0.0
    snap = sim.get_state()
    sim.step(np.zeros(sim.nj))
    after = sim.robot_ft_wrench_array("b")
    sim.set_state(snap)
    sim.step(np.zeros(sim.nj))
    np.testing.assert_array_equal(sim.robot_ft_wrench_array("b"), after)


WORLD = """
world:
  physics_rate_hz: 1000.0
  robots:
    - name: alpha
      robot: humanoid
    - name: beta
      robot: humanoid
      initial: {{base_position: [1.5, 0.0, %r]}}
      parameters: {{{params}}}
""" % Z0


def test_a_sensor_the_robot_lacks_is_refused_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"robot 'b' \(robots\[1\]\): parameter "
                                          r"'ft_sensors.joints' \(left_ankle\): joint "
                                          r"'l_ankle_rol' is not in its model; did you mean "
                                          r"'l_ankle_roll'"):
        Simulator.from_robots([("a", _humanoid(0.0)), ("b", _humanoid(1.5, **{
            "ft_sensors.names": ["left_ankle"], "ft_sensors.joints": ["l_ankle_rol"]}))])
    with pytest.raises(ConfigError, match=r"robot 'b' \(robots\[1\]\): parameter "
                                          r"'left_foot.frame': frame 'l_sol' is not in the "
                                          r"model; did you mean 'l_sole'"):
        Simulator.from_robots([("a", _humanoid(0.0)),
                               ("b", _humanoid(1.5, **{"left_foot.frame": "l_sol"}))])
    path = tmp_path / "two.yaml"
    path.write_text(WORLD.format(params="ft_sensors: {names: [ankle], joints: [l_ankle_rol]}"))
    with pytest.raises(ConfigError, match=r"world file .*robot 'beta' \(robots\[1\]\): "
                                          r"parameter 'ft_sensors.joints' \(ankle\).*did you "
                                          r"mean 'l_ankle_roll'.*\(set at 'world.robots\[1\]"
                                          r"\.parameters\.ft_sensors\.joints'\)"):
        Simulator.from_world(path)
    path.write_text(WORLD.format(params="imu: {frame: imu_lnk}"))
    with pytest.raises(ConfigError, match=r"robot 'beta' \(robots\[1\]\): parameter "
                                          r"'imu.frame': frame 'imu_lnk'.*did you mean "
                                          r"'imu_link'.*\(set at 'world.robots\[1\]\.parameters"
                                          r"\.imu\.frame'\)"):
        Simulator.from_world(path)
    # a world file's robot b with its own sensors builds
    path.write_text(WORLD.format(params="ft_sensors: {names: [ankle], joints: [l_ankle_roll]}, "
                                        "contact_sensors: {active: true}"))
    sim = Simulator.from_world(path)
    assert list(sim.robot_ft_wrenches("beta")) == ["ankle"] and sim.ft_wrenches == {}
    assert "left_foot" in sim.robot_contact_states("beta") and sim.contact_states == {}
