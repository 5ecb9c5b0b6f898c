"""Position and velocity commands move the joints of every shipped configuration where it
gives no drive gains (issue 28): the command gate (wb_sim.ros.gate) then drives with the
gains of ``wb_sim_robot``'s rule (wb_sim.controllers.derived_gains: each joint's reflected
inertia at the initial pose, critically damped at the physics rate / 20), says so once, and
leaves the joints commanded with an effort to their effort. The core driven through the
node's own gate and parameters, no rclpy (the same step through the topic:
test/ros/test_command_modes.py)."""

from __future__ import annotations


import numpy as np
import pytest

import wb_sim
from wb_sim.paths import share_dir
from helpers.extras import require_robot_data
from wb_sim.controllers import derived_gains, simulator_drive_gains
from wb_sim.ros.gate import CommandGate
from wb_sim.ros.pacer import PacerStats
from wb_sim.ros.parameters import load_node_config

from .test_parts import JOINTS, Log, make_gate

# the ready configurations where the installed package has them (share/wb_sim/config; the
# source tree's wb_sim/config/ in an editable install)
CONFIGS = sorted(p.stem for p in (share_dir() / "config").glob("*.yaml"))
assert CONFIGS, "no ready configurations found"


def _drive(name: str, first, later=None, seconds: float = 0.5, node_cfg=None):
    """The configuration ``name`` through the node's gate with its default parameters
    (``node_cfg`` over them): ``first(gate, names, q0, now_ns)`` sends the first command,
    ``later`` (default: ``first``) sends it again every 50 ms (a controller at 20 Hz, within
    the watchdog's 0.1 s); the simulator after ``seconds``, the initial joint positions and
    the gate's log."""
    require_robot_data(name)
    with pytest.warns(UserWarning) if name == "panda" else _nothing():  # its mimic finger
        sim = wb_sim.Simulator.from_yaml(wb_sim.config_path(name))
    names = list(sim.joint_names)
    g = simulator_drive_gains(sim)
    log = Log()
    gate = CommandGate(names, names, load_node_config(node_cfg or {}), PacerStats(), log,
                       derived_gains=(g.kp, g.kd))
    q0 = sim.joint_positions.copy()
    dt_ns = round(sim.dt * 1e9)
    first(gate, names, q0, 0)
    for k in range(round(seconds / sim.dt)):
        now = k * dt_ns
        if k and k % 50 == 0:
            (later or first)(gate, names, q0, now)
        sim.step(gate.torques(now, sim.joint_velocities, 0.0, sim.joint_positions))
    return sim, q0, log


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _toward_the_middle(sim, j: int, step: float) -> float:
    """``step`` signed toward the middle of joint ``j``'s range (never out of it)."""
    lo, hi = sim.robot.model.lowerPositionLimit, sim.robot.model.upperPositionLimit
    iq = sim.robot.idx_q[j]
    mid = 0.5 * (lo[iq] + hi[iq]) if np.isfinite(lo[iq]) and np.isfinite(hi[iq]) else np.inf
    return step if mid > sim.joint_positions[j] else -step


# ----------------------------------------------------------------------------- the Panda


PANDA_STEP = ("panda_joint2", 0.3)  # rad: the shoulder, the joint gravity loads most


def _panda_step(node_cfg=None, seconds=3.0):
    joint, step = PANDA_STEP

    def command(gate, names, q0, now):
        target = q0.copy()
        target[names.index(joint)] += step
        assert gate.joint_command(0, names, [], now, 0.0, position=target)

    sim, q0, log = _drive("panda", command, seconds=seconds, node_cfg=node_cfg)
    target = q0.copy()
    target[sim.joint_names.index(joint)] += step
    return sim, target, log


def test_the_panda_tracks_a_step_on_position_targets_alone():
    """config/panda.yaml gives no command.kp: a 0.3 rad step of the shoulder, every joint
    given its position only (a JointTrajectoryController's position interface), is tracked
    within 0.05 rad in 3 s, every joint (measured: 0.0016 rad; before the derived gains
    the arm fell, joint 1 off by 0.56-1.1 rad). The log says once which gains act."""
    sim, target, log = _panda_step()
    err = np.abs(sim.joint_positions - target)
    print(f"Panda, 0.3 rad step of {PANDA_STEP[0]}: largest error after 3 s {err.max():.4f} rad")
    assert err.max() < 0.05, dict(zip(sim.joint_names, err.round(4)))
    said = [t for t in log.texts("info") if t.startswith("position commands use derived gains")]
    assert len(said) == 1 and "(command.kp / command.kd unset); set them to override" in said[0]
    assert not log.texts("warning")


def test_the_panda_is_limp_with_gains_set_to_zero():
    """The same step with command.kp and kd given as 0 (positions a reference only, as the
    default was): the arm falls, the log warns; the test above can fail."""
    sim, target, log = _panda_step({"command.kp": [0.0], "command.kd": [0.0]}, seconds=1.0)
    assert np.abs(sim.joint_positions - target).max() > 0.3
    assert any("get no torque at all" in t for t in log.texts("warning"))


# ----------------------------------------------------------------------------- every config


#: per shipped configuration, a joint a position command moves and the step, rad (within its
#: range): one of the arm where it has one; ANYmal's knee stretching (the stance resists its
#: folding: -0.1 rad gets -0.067 in 0.5 s)
MOVED = {"anymal": ("RH_KFE", 0.1), "humanoid": ("r_elbow", 0.1),
         "icub": ("l_shoulder_roll", 0.1), "panda": ("panda_joint1", 0.1),
         "talos": ("arm_left_3_joint", 0.1)}
#: a joint free to move on a velocity target alone (a leg in contact is not: the velocity
#: servo tau = kd (v_ref - v) stalls against the other joints' stiff posture)
VELOCITY = {"humanoid": "r_elbow", "icub": "r_wrist_yaw", "panda": "panda_joint1",
            "talos": "head_2_joint"}


def test_every_shipped_config_is_listed():
    assert set(MOVED) == set(CONFIGS), CONFIGS


@pytest.mark.parametrize("name", CONFIGS)
def test_a_position_command_moves_a_joint_of_every_shipped_config(name):
    """Every joint held at its initial position, one stepped 0.1 rad: in 0.5 s it is within
    0.02 rad of its target (measured: 0.0000 to 0.0022 rad; 0 rad moved with the old
    default gains of 0) and a legged robot still stands."""
    joint, step = MOVED[name]

    def command(gate, names, q0, now):
        target = q0.copy()
        target[names.index(joint)] += step
        assert gate.joint_command(0, names, [], now, 0.0, position=target)

    sim, q0, log = _drive(name, command)
    j = sim.joint_names.index(joint)
    iq = sim.robot.idx_q[j]
    assert sim.robot.model.lowerPositionLimit[iq] < q0[j] + step < \
        sim.robot.model.upperPositionLimit[iq]
    moved = sim.joint_positions[j] - q0[j]
    print(f"{name}: {joint} moved {moved:+.4f} rad of {step:+.1f}; base z {sim.q[2]:.4f}")
    assert abs(moved - step) < 0.02, moved
    said = [t for t in log.texts("info") if t.startswith("position commands use derived gains")]
    assert len(said) == 1
    if sim.robot.floating_base:  # still standing
        assert sim.q[2] > 0.9 * sim.q0[2], (sim.q[2], sim.q0[2])


@pytest.mark.parametrize("name", sorted(VELOCITY))
def test_a_velocity_command_moves_a_joint(name):
    """The other joints held at their positions, one given a velocity of 0.2 rad/s alone:
    in 0.5 s it moves at least a third of the 0.1 rad (the velocity servo's error is the
    load over kd; measured 0.042 to 0.100 rad), in the commanded direction."""
    joint = VELOCITY[name]
    require_robot_data(name)
    with pytest.warns(UserWarning) if name == "panda" else _nothing():
        probe = wb_sim.Simulator.from_yaml(wb_sim.config_path(name))
    v = _toward_the_middle(probe, probe.joint_names.index(joint), 0.2)

    def command(gate, names, q0, now):
        j = names.index(joint)
        others = [n for n in names if n != joint]
        assert gate.joint_command(0, others, [], now, 0.0, position=np.delete(q0, j))
        assert gate.joint_command(0, [joint], [], now, 0.0, velocity=[v])

    sim, q0, _ = _drive(name, command)
    j = sim.joint_names.index(joint)
    moved = sim.joint_positions[j] - q0[j]
    print(f"{name}: {joint} moved {moved:+.4f} rad at {v:+.1f} rad/s for 0.5 s")
    assert moved * np.sign(v) > 0.1 / 3, moved


# ----------------------------------------------------------------------------- the gate's rule


def _derived_gate(**cfg):
    return make_gate(cfg={"command.kp": [], "command.kd": [], **cfg},
                     derived_gains=([100.0, 200.0, 300.0], [1.0, 2.0, 3.0]))


def _tau(gate, q, v, t_ms=1):
    return gate.torques(t_ms * 1_000_000, np.asarray(v, float), t_ms * 1e-3,
                        joint_positions=np.asarray(q, float))


def test_unset_gains_drive_joints_without_an_effort_and_say_so_once():
    gate, log, _ = _derived_gate()
    gate.joint_command(0, ["a", "b"], [], 0, 0.0, position=[1.0, 1.0])
    gate.joint_command(0, ["c"], [5.0], 0, 0.0, position=[1.0])  # a torque controller's ref
    for k in (1, 2):
        tau = _tau(gate, [0.5, 0.0, 0.0], [0.1, 0.0, 0.0], k)
        np.testing.assert_allclose(tau, [100 * 0.5 - 1 * 0.1, 200.0, 5.0], rtol=0, atol=1e-12)
    said = [t for t in log.texts("info") if "derived gains" in t]
    assert len(said) == 1 and "kp=[100, 200, 300]" in said[0] and "kd=[1, 2, 3]" in said[0]
    assert not log.texts("warning")


def test_given_gains_override_the_derived_ones_each_alone():
    gate, log, _ = _derived_gate(**{"command.kp": [7.0]})
    gate.joint_command(0, JOINTS, [], 0, 0.0, position=[1.0, 1.0, 1.0])
    tau = _tau(gate, [0.0] * 3, [1.0] * 3)
    np.testing.assert_allclose(tau, [7 - 1, 7 - 2, 7 - 3], rtol=0, atol=1e-12)  # kd derived
    assert "(command.kd unset)" in log.texts("info")[0]
    gate.cfg = dict(gate.cfg, **{"command.kd": [0.5]})  # live: nothing derived any more
    np.testing.assert_allclose(_tau(gate, [0.0] * 3, [1.0] * 3, 2), [6.5] * 3, rtol=0, atol=0)


def test_efforts_alone_stay_bit_for_bit_with_derived_gains():
    efforts = [0.1 + 0.2, -1e-300, 123.456789]
    gate, log, _ = _derived_gate()
    gate.joint_command(0, JOINTS, efforts, 0, 0.0)
    assert _tau(gate, [3.0, 2.0, 1.0], [5.0, 6.0, 7.0]).tobytes() == np.array(efforts).tobytes()
    assert not [t for t in log.texts() if "derived" in t]


def test_derived_gains_are_wb_sim_robots_rule_on_one_joint():
    """One joint of inertia I alone: kp = I w^2, kd = 2 I w, w = 2 pi rate / 20 (the step
    matrix's eigenvalue I^-1 (kp dt^2 + 2 kd dt) = 1.36 < 3: not lowered)."""
    g = derived_gains(np.array([[2.0]]), [0], 1000.0)
    w = 2 * np.pi * 50.0
    np.testing.assert_allclose([g.kp[0], g.kd[0]], [2.0 * w * w, 4.0 * w], rtol=1e-12)
    assert g.load == pytest.approx((w * w * 1e-6 + 4 * w * 1e-3))
