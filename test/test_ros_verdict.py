"""The effort saturation, chattering and drift figures of the node's stats line
(wb_sim.ros.verdict.EffortWatch) counted exactly on synthetic torques and positions:
no rclpy, no processes."""

from __future__ import annotations

import math
import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

from wb_sim.ros.pacer import Pacer, stats_line
from wb_sim.ros.verdict import EffortWatch

INF = math.inf


def _feed(watch: EffortWatch, taus, qs=None) -> EffortWatch:
    for k, tau in enumerate(taus):
        q = watch.q0 if qs is None else qs[k]
        watch.after_step(np.asarray(tau, dtype=float), np.asarray(q, dtype=float))
    return watch


# ----------------------------------------------------------------------------- EffortWatch


def test_steps_at_limits_and_the_joints_most_at_them():
    w = EffortWatch(["a", "b", "c", "d"], [10.0, 5.0, 2.0, 1.0], np.zeros(4))
    _feed(w, [[10, 0, 0, 0],      # a
              [10, 5, 0, 0],      # a, b: one step at limits
              [9.9, 0, 2, 0],     # c (a is 1 % under: not at its limit)
              [0, 0, 0, 0],
              [-10, -5, 0, 0.5],  # a, b
              [0, 0, 0, 0]])
    assert (w.steps, w.steps_at_limit) == (6, 4)
    assert w.worst() == [("a", 3 / 6), ("b", 2 / 6), ("c", 1 / 6)]  # up to 3, the most first
    assert w.worst(5) == [("a", 0.5), ("b", 2 / 6), ("c", 1 / 6)]  # d never: not listed
    assert w.text().startswith("efforts at limits in 4 of 6 steps (66.7 %: a 50.0 %, b 33.3 %, "
                               "c 16.7 %), ")


def test_at_the_limit_means_within_1e_9_of_it():
    w = EffortWatch(["a"], [10.0], [0.0])
    _feed(w, [[10 * (1 - 1e-10)], [-10 * (1 - 1e-10)], [10 * (1 - 1e-8)], [-10 * (1 - 1e-8)]])
    assert (w.steps_at_limit, w.flips) == (2, 1)


def test_infinite_and_zero_limits_are_never_at_a_limit():
    """inf: unlimited (any torque); 0: a passive joint (its torque is always 0)."""
    w = EffortWatch(["free", "passive", "limited"], [INF, 0.0, 3.0], np.zeros(3))
    _feed(w, [[1e12, 0, 0], [-1e12, 0, 0], [0, 0, 0]])
    assert (w.steps_at_limit, w.flips) == (0, 0) and w.worst() == []
    assert w.limited
    none = _feed(EffortWatch(["a", "b"], [INF, INF], np.zeros(2)), [[1e9, -1e9]] * 3)
    assert not none.limited
    assert none.text() == "no effort limits (3 steps), largest joint deviation 0.0000 rad (a)"


def test_a_sign_flip_is_an_at_limit_step_opposite_to_the_joints_previous_one():
    """+L -L +L: two flips; +L, unsaturated, -L: one (the steps between do not matter);
    +L +L: none; the first at-limit step: none; joints are counted apart and summed."""
    L = 2.0
    w = EffortWatch(["a", "b", "c"], [L, L, L], np.zeros(3))
    _feed(w, [[+L, +L, 0],
              [-L, 0, 0],
              [+L, 1.0, -L],   # c: first at-limit step, no flip
              [0, -L, -L],     # b: +L ... -L with a step between: a flip
              [0, +L, -L],     # b again
              [+L, 0, 0]])     # a: its previous at-limit step was +L: no flip
    assert w.flips == 2 + 2 + 0
    assert w.steps_at_limit == 6


def test_the_last_sign_outlives_the_period():
    w = EffortWatch(["a"], [1.0], [0.0])
    _feed(w, [[1.0], [0.0]])
    assert w.period_text().startswith("efforts at limits in 1 of 2 steps (50.0 %: a 50.0 %), "
                                      "0 sign flips")
    _feed(w, [[-1.0]])
    assert (w.steps, w.steps_at_limit, w.flips) == (1, 1, 1)  # counted in the new period


def test_a_chattering_joint_flips_at_every_step():
    w = EffortWatch(["knee", "hip"], [50.0, 80.0], np.zeros(2))
    _feed(w, [[50.0 * (-1) ** k, 10.0] for k in range(300)])  # 0.3 s at 1 kHz
    assert (w.steps_at_limit, w.flips) == (300, 299)
    assert w.worst() == [("knee", 1.0)]


def test_largest_deviation_from_the_initial_posture_over_the_period():
    q0 = np.array([0.5, -1.0, 0.02])
    w = EffortWatch(["shoulder", "elbow", "slider"], [INF] * 3, q0,
                    prismatic=[False, False, True])
    _feed(w, [[0, 0, 0]] * 3, qs=[[0.5, -1.0, 0.02], [0.53, -1.0, 0.02], [0.5, -1.0, 0.0]])
    assert w.deviation() == (pytest.approx(0.03), 0)
    assert w.text().endswith("largest joint deviation 0.0300 rad (shoulder)")
    w.start_period()
    assert w.text().endswith("largest joint deviation 0.0000 rad (none)")  # no steps yet
    _feed(w, [[0, 0, 0]] * 2, qs=[[0.5, -0.99, 0.02], [0.5, -1.0, 0.06]])
    assert w.deviation() == (pytest.approx(0.04), 2)
    assert w.text().endswith("largest joint deviation 0.0400 m (slider)")  # its unit


def test_wrong_sizes_are_refused():
    with pytest.raises(ValueError, match="one value per joint"):
        EffortWatch(["a", "b"], [1.0], [0.0, 0.0])


def test_after_step_allocates_no_arrays():
    """Preallocated buffers: no numpy array is made per step, saturated or not (only
    Python's counters grow: a few dozen bytes; one array of 100 joints is 800)."""
    nj = 100
    limits = np.full(nj, 10.0)
    limits[5] = INF
    w = EffortWatch([f"j{i}" for i in range(nj)], limits, np.zeros(nj))
    q = np.full(nj, 0.1)
    taus = [np.zeros(nj), np.full(nj, 10.0), np.full(nj, -10.0), np.full(nj, 3.0)]
    _feed(w, taus, qs=[q] * 4)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        for k in range(2000):
            w.after_step(taus[k % 4], q)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak < nj * 8, f"{peak} bytes at the peak: an array per step"
    assert w.flips == 99 + 2 * 99 * 500  # 99 limited joints, +L then -L in each cycle of 4


def test_from_simulator_reads_its_limits_posture_and_units():
    import wb_sim
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    w = EffortWatch.from_simulator(sim)
    assert w.joint_names == sim.joint_names
    np.testing.assert_array_equal(w.q0, sim.joint_positions)  # at t = 0: the initial posture
    big = np.full(sim.nj, 1e6)
    sim.step(big)  # clipped to the limits: exactly at them
    w.after_step(sim.applied_torques, sim.joint_positions)
    sim.step(-big)
    w.after_step(sim.applied_torques, sim.joint_positions)
    limited = int(np.isfinite(sim.actuation.effort_limit).sum())
    assert limited > 0
    assert (w.steps_at_limit, w.flips) == (2, limited)
    assert w.deviation()[0] > 0


# ----------------------------------------------------------------------------- the stats line


def test_the_stats_line_carries_the_period_and_starts_a_new_one():
    """The effort part sits after the base position; rejected messages stay last (the
    flood benchmark reads them to the end of the line)."""
    w = _feed(EffortWatch(["a"], [1.0], [0.0]), [[1.0], [-1.0]])
    sim = SimpleNamespace(robot=SimpleNamespace(floating_base=True), q=np.array([0, 0, 0.7]),
                          contact=SimpleNamespace(statistics=dict))
    gate = SimpleNamespace(rejected={("joint_commands", "malformed"): 2})
    pacer = Pacer(1e-3, tune=lambda: [])
    line = stats_line(pacer, gate, sim, pacer.stats.wall0 + 1.0, 0.002, False, efforts=w)
    assert ("base at (0.000, 0.000, 0.7000) m, efforts at limits in 2 of 2 steps (100.0 %: "
            "a 100.0 %), 1 sign flips between limits, largest joint deviation 0.0000 rad (a), "
            "valid commands") in line
    assert line.endswith("rejected messages: joint_commands malformed 2")
    assert w.steps == 0  # a new period
