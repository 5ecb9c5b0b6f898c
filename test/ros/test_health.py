"""The solver health's windows (wb_sim/ros/health.py, plain Python, no ROS): the figures and
levels /diagnostics carries, on the core's humanoid.

Numbers checked: standing on the compliant ground every group is OK; the same state judged
against a penetration threshold below its depth is WARN, and ERROR below the error bound,
the measured depth (the core's max_depth over the window) in the message; deadline misses
and the largest command latency come from the pacer's counters, per window."""

from __future__ import annotations

import numpy as np

from helpers.robots import make_humanoid, shipped_controller
from wb_sim.ros.health import CHECKS, ERROR, OK, WARN, HealthMonitor
from wb_sim.ros.pacer import PacerStats

DEFAULTS = {c.key: c.default for c in CHECKS}


def _standing():
    sim = make_humanoid()
    ctrl = shipped_controller(sim)
    for _ in range(300):
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
    return sim, ctrl


def test_levels_and_values():
    sim, ctrl = _standing()
    stats = PacerStats()
    health = HealthMonitor(sim, stats, DEFAULTS)
    health.watching = True
    depths = []
    for _ in range(100):
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
        stats.count_step()
        health.after_step()
        depths.append(sim.contact.max_depth)
    ok = {s.name: s for s in health.sample()}
    assert all(s.level == OK and s.message == "OK" for s in ok.values()), ok
    assert float(ok["wb_sim: contact"].values["penetration_m"]) == float(f"{max(depths):.4g}")
    assert ok["wb_sim: contact"].values["impact_energy_j"] == "not measured"  # compliant
    assert ok["wb_sim: timing"].values["steps"] == "100"
    depth = max(depths)
    assert depth > 1e-5
    for bounds, level in (((depth / 2, 1.0), WARN), ((depth / 4, depth / 2), ERROR)):
        health.thresholds = {**DEFAULTS, "penetration_m": bounds}
        for _ in range(20):
            sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
            health.after_step()
        st = {s.name: s for s in health.sample()}["wb_sim: contact"]
        d = float(st.values["penetration_m"])
        assert st.level == level, st
        name = "WARN" if level == WARN else "ERROR"
        assert f"penetration_m {d:.4g} m > {name} threshold" in st.message, st.message
    # timing: 3 misses in 1000 steps (WARN at 0.001), a 30 ms latency (WARN at 5 ms)
    for k in range(1000):
        stats.count_step()
        if k % 300 == 0:
            stats.count_miss()
    stats.add_latency(0.03)
    stats.add_latency(0.002)
    timing = {s.name: s for s in health.sample()}["wb_sim: timing"]
    assert timing.level == WARN, timing
    assert timing.values["deadline_misses"] == "0.004" and timing.values["steps"] == "1000"
    assert timing.values["command_latency_s"] == "0.03"
    assert "deadline_misses 0.004 > WARN" in timing.message
    assert "command_latency_s 0.03 s > WARN" in timing.message
    again = {s.name: s for s in health.sample()}["wb_sim: timing"]  # a new window
    assert again.level == OK and again.values["command_latency_s"] == "0"
    assert np.isfinite(depths).all()
