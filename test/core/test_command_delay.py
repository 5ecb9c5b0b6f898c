"""joints.command_delay_steps: the torques given to step k act at step k + n (the first command
until then), in the core, so the ROS node and campaigns have the same delay; snapshots carry the
commands in flight; a refused command does not enter the pipe."""

import numpy as np
import pytest

import wb_sim
from wb_sim import CommandError, ConfigError


def _sim(delay):
    return wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"),
                                      overrides={"joints.command_delay_steps": delay})


def _commands(sim, n):
    rng = np.random.default_rng(3)
    g = sim.gravity_torques()
    return [g + rng.normal(0.0, 2.0, sim.nj) for _ in range(n)]


def test_delayed_torques_are_the_shifted_sequence_bit_for_bit():
    d, n = 3, 40
    delayed, plain = _sim(d), _sim(0)
    taus = _commands(plain, n)
    shifted = [taus[0]] * d + taus[:n - d]
    for k in range(n):
        delayed.step(taus[k])
        plain.step(shifted[k])
        assert np.array_equal(delayed.applied_torques, plain.applied_torques), k
    assert np.array_equal(delayed.q, plain.q) and np.array_equal(delayed.v, plain.v)
    # and it is a delay: without it the trajectory differs
    ref = _sim(0)
    for k in range(n):
        ref.step(taus[k])
    assert not np.array_equal(ref.q, delayed.q)


def test_snapshot_carries_the_commands_in_flight():
    sim = _sim(5)
    taus = _commands(sim, 30)
    for t in taus[:12]:
        sim.step(t)
    snap = sim.get_state()
    assert len(snap.commands) == 5
    for t in taus[12:]:
        sim.step(t)
    end = sim.q.copy()
    sim.reset()
    sim.set_state(snap)
    for t in taus[12:]:
        sim.step(t)
    assert np.array_equal(sim.q, end)
    with pytest.raises(CommandError, match="command delay"):
        _sim(0).set_state(snap)


def test_a_refused_command_does_not_enter_the_pipe():
    a, b = _sim(2), _sim(2)
    taus = _commands(a, 10)
    for k, t in enumerate(taus):
        if k == 4:
            bad = t.copy()
            bad[3] = np.nan
            with pytest.raises(CommandError):
                a.step(bad)
        a.step(t)
        b.step(t)
    assert np.array_equal(a.q, b.q)


def test_reset_empties_the_pipe_and_bad_values_are_refused():
    sim = _sim(2)
    taus = _commands(sim, 3)
    for t in taus:
        sim.step(t)
    sim.reset()
    sim.step(taus[2])
    assert np.array_equal(sim.applied_torques, sim.actuation.saturate(taus[2]))
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="joints.command_delay_steps"):
            _sim(bad)


def test_the_example_law_as_drive_targets_survives_delays_that_topple_it_as_torques():
    """The example controller's law (PD + gravity, kp 1000, kd 20 on the humanoid) sent as
    torques that act 3 steps late makes the humanoid shuffle (its feet slide), as a 2-step
    delay already did on a busy machine; the same law sent as drive targets (posture,
    zero velocity, gravity feed-forward) that act 20 steps late stands as with none: the
    drive closes the stiff loop at every step (wb_sim.tools.delay_margin)."""
    from wb_sim.tools.delay_margin import run
    stands, summary = run("humanoid", "torque", 3, 3.0)
    assert not stands, summary
    stands, summary = run("humanoid", "drive", 20, 3.0)
    assert stands, summary
    stands0, summary0 = run("humanoid", "drive", 0, 3.0)
    assert stands0 and summary == summary0  # 20 steps late changes nothing a monitor sees
