"""wb_sim.control: the controller interface shared by campaigns, headless loops and the node.

Checked: a controller at rate_hz is called every round(1 / (rate dt)) steps and its torques
held in between (counted calls, identical torques); a loop after sim.reset() + loop.reset()
repeats bit for bit; the observation is the simulator's state (or its delayed reading);
factories that cannot be imported or refuse their parameters, and torques of the wrong
shape, are refused with errors naming the parameter.
"""

from __future__ import annotations

import numpy as np
import pytest

import wb_sim
from wb_sim.control import ControllerLoop, controller_decimation
from wb_sim.errors import ConfigError

PD = "wb_sim.controllers:pd_gravity"
GAINS = {"kp": 1000.0, "kd": 20.0}


@pytest.fixture
def sim():
    return wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))


def test_a_controller_at_250_hz_is_called_every_4_steps_and_held_between(sim):
    seen = []

    def make(sim, case, gain):
        def ctrl(obs):
            seen.append(obs.t)
            return np.full(sim.nj, gain * obs.t)
        return ctrl
    loop = ControllerLoop(sim, make, {"gain": 2.0}, rate_hz=250.0)
    taus = []
    for _ in range(12):
        taus.append(loop.torques().copy())
        sim.step(taus[-1])
    assert loop.calls == 3 and seen == pytest.approx([0.0, 0.004, 0.008])
    assert all(np.array_equal(taus[k], taus[4 * (k // 4)]) for k in range(12))
    assert controller_decimation(0.0, 0.001) == 1 and controller_decimation(300.0, 0.001) == 3


def test_after_a_reset_the_run_repeats_bit_for_bit(sim):
    loop = ControllerLoop(sim, PD, GAINS)
    for _ in range(200):
        sim.step(loop.torques())
    first = sim.q.copy()
    sim.reset()
    loop.reset()
    for _ in range(200):
        sim.step(loop.torques())
    assert np.array_equal(first, sim.q) and loop.calls == 400


def test_the_observation_is_the_state_or_its_delayed_reading():
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"),
                                     overrides={"sensors.delay_steps": 2})
    got = []

    def make(sim, case):
        return lambda obs: got.append(obs) or np.zeros(sim.nj)
    loop = ControllerLoop(sim, make)
    states = []
    for _ in range(6):
        states.append(sim.joint_positions.copy())
        sim.step(loop.torques() + 1.0)  # the robot moves: the readings differ step to step
    for k, obs in enumerate(got):
        np.testing.assert_array_equal(obs.joint_positions, states[max(0, k - 2)])
    assert got[0].imu is not None  # a factory without wants_imu = False gets the IMU
    assert got[0].v is not None  # and, without wants_velocity = False, the velocity


@pytest.mark.parametrize("delay", [0, 2])
def test_a_factory_that_wants_no_velocity_gets_none_and_the_same_run(delay):
    """wants_velocity = False (pd_gravity's): obs.v is None, the joints' readings are there,
    and the run is the same bit for bit as that of the same law given the velocity."""
    from wb_sim.controllers import pd_gravity
    assert pd_gravity.wants_velocity is False
    runs = []
    for wants in (False, True):
        sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"),
                                         overrides={"sensors.delay_steps": delay})
        seen = []

        def make(sim, case, **gains):
            law = pd_gravity(sim, case, **gains)
            return lambda obs: seen.append(obs) or law(obs)
        make.wants_velocity = wants
        loop = ControllerLoop(sim, make, GAINS)
        for _ in range(300):
            sim.step(loop.torques())
        assert all((obs.v is None) != wants for obs in seen)
        if wants:
            loop.torques()  # an observation of the state now
            np.testing.assert_array_equal(seen[-1].v, sim.sensed_state.v if delay else sim.v)
        assert seen[-1].joint_velocities is not None and seen[-1].q is not None
        runs.append(sim.q.copy())
    assert np.array_equal(*runs)


def test_bad_factories_and_torques_are_refused_naming_the_parameter(sim):
    with pytest.raises(ConfigError, match="'controller.callable'.*cannot import module"):
        ControllerLoop(sim, "no_such_module:make")
    with pytest.raises(ConfigError, match="'controller.callable'.*expected 'module:callable'"):
        ControllerLoop(sim, "wb_sim.controllers")
    with pytest.raises(ConfigError, match="cannot be made with parameters.*kq"):
        ControllerLoop(sim, PD, {"kq": 1.0})
    with pytest.raises(ConfigError, match="cannot be made"):
        ControllerLoop(sim, PD, {"kp": [1.0, 2.0], "kd": 1.0})  # 2 gains for 23 joints
    loop = ControllerLoop(sim, lambda sim, case: (lambda obs: np.zeros(3)))
    with pytest.raises(ValueError, match=r"shape \(3,\), expected \(23,\)"):
        loop.torques()
