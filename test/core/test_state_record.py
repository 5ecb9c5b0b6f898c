"""One state record (wb_sim/state.py): everything that evolves lives in one Record that
reset builds, step replaces, get_state copies and set_state restores; the components
with state of their own (contact model, IMU) offer snapshot()/restore(). And the one
place that reads pinocchio's memory (wb_sim/pin_views.py) gives the same physics
through its copying fallback."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import wb_sim
from wb_sim.state import Record, SimState, copy_record


@dataclasses.dataclass(eq=False, slots=True)
class _RecordWithDummy(Record):
    dummy: np.ndarray | None = None  #: a field the core does not know


class _SimWithDummy(wb_sim.Simulator):
    """A simulator whose record has one more field, written by its step: nothing
    else (get_state, set_state, copies) is told about it."""

    def step(self, tau):
        super().step(tau)
        self._s = _RecordWithDummy(**{f.name: getattr(self._s, f.name)
                                      for f in dataclasses.fields(Record)},
                                   dummy=np.full(3, float(self.step_count)))


def test_a_new_record_field_is_snapshotted_and_restored_without_touching_anything_else():
    sim = _SimWithDummy.from_yaml(wb_sim.config_path("humanoid"))
    zero = np.zeros(sim.nj)
    for _ in range(20):
        sim.step(zero)
    snap = sim.get_state()
    assert isinstance(snap, SimState) and type(snap.record) is _RecordWithDummy
    np.testing.assert_array_equal(snap.dummy, [20.0, 20.0, 20.0])  # fields read through
    q20 = sim.q.copy()
    for _ in range(5):
        sim.step(zero)
    assert sim._s.dummy[0] == 25.0
    np.testing.assert_array_equal(snap.dummy, [20.0] * 3)  # the snapshot is a copy
    sim.set_state(snap)
    assert type(sim._s) is _RecordWithDummy
    np.testing.assert_array_equal(sim._s.dummy, [20.0] * 3)
    np.testing.assert_array_equal(sim.q, q20)
    assert sim._s.dummy is not snap.dummy  # restored as a copy: the snapshot stays usable


def test_copy_record_copies_every_field_and_freezes_the_arrays():
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
        "joints.command_delay_steps": 2, "sensors.delay_steps": 1})
    sim.apply_external_wrench("pelvis", force=[10.0, 0.0, 0.0], duration_s=0.01)
    for _ in range(3):
        sim.step(np.ones(sim.nj))
    rec = sim._s
    out = copy_record(rec)
    for f in dataclasses.fields(Record):
        a, b = getattr(rec, f.name), getattr(out, f.name)
        if isinstance(a, np.ndarray):
            assert b is not a and not b.flags.writeable
            np.testing.assert_array_equal(a, b)
        elif isinstance(a, tuple) and a:
            assert b is not a and len(a) == len(b), f.name
    assert len(out.commands) == 2 and len(out.sensed) == 2 and len(out.pushes) == 1


def test_step_builds_a_new_record_and_leaves_the_old_one_untouched():
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    before = sim._s
    q, v = before.q.copy(), before.v.copy()
    sim.step(np.zeros(sim.nj))
    assert sim._s is not before and sim._s.k == before.k + 1
    np.testing.assert_array_equal(before.q, q)
    np.testing.assert_array_equal(before.v, v)
    assert sim._s.q_prev is before.q and sim._s.v_prev is before.v


def test_the_imu_snapshot_restores_its_noise_sequence():
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
        "imu.angular_velocity_noise_std": 0.05, "imu.linear_acceleration_noise_std": 0.5})
    imu = sim.imu_sensor
    imu.draw_noise()
    snap = imu.snapshot()
    first = [imu._noise.copy() for _ in range(3) if imu.draw_noise() is None]
    imu.restore(snap)
    again = [imu._noise.copy() for _ in range(3) if imu.draw_noise() is None]
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first[0], first[1])  # the noise does change draw to draw
    imu.restore(snap)  # the snapshot stays usable
    np.testing.assert_array_equal([imu._noise.copy() for _ in range(3)
                                   if imu.draw_noise() is None], first)


def test_a_snapshot_of_another_configuration_names_what_differs():
    a = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"),
                                   overrides={"collision.enabled": False})
    b = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"),
                                   overrides={"collision.enabled": True})
    with pytest.raises(wb_sim.CommandError, match=r"collision points \(collision\.\*\): None in "
                                                  r"the snapshot, \d+ here"):
        b.set_state(a.get_state())
    c = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"),
                                   overrides={"collision.enabled": False, "sensors.delay_steps": 2})
    with pytest.raises(wb_sim.CommandError, match=r"sensor delay \(sensors.delay_steps\): 0 in "
                                                  r"the snapshot, 2 here"):
        c.set_state(a.get_state())


# the lying humanoid with ground and self-collision: every reader of pinocchio's placements
# (contact surfaces, ground collision, self-collision with its quiet test) runs
_RUN = textwrap.dedent("""
    import sys
    import numpy as np
    import wb_sim
    from wb_sim import pin_views
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
        "collision.enabled": True, "collision.self_collision": True})
    sim.apply_external_wrench("pelvis", force=[300.0, 0.0, 0.0], duration_s=0.2)
    for _ in range(1200):
        sim.step(np.zeros(sim.nj))
    touched = len(sim.collision_points_state().surface)
    sys.stdout.write(f"{pin_views.AVAILABLE} {touched} " + sim.q.tobytes().hex() + "\\n")
""")


def test_the_copying_fallback_of_pinocchio_views_gives_the_same_physics():
    def start(force_copy: bool) -> subprocess.Popen:
        env = dict(os.environ)
        env.pop("WB_SIM_PIN_COPY", None)
        # bit for bit on the plain path: the compiled contact points read the views, and
        # without them the Python update runs, equal to rounding (test_compiled.py)
        env["WB_SIM_PLAIN"] = "1"
        if force_copy:
            env["WB_SIM_PIN_COPY"] = "1"
        return subprocess.Popen([sys.executable, "-c", _RUN], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def result(p: subprocess.Popen) -> list[str]:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        return out.split()

    procs = start(False), start(True)  # side by side: half the suite's wall time
    views, copies = result(procs[0]), result(procs[1])
    assert views[0] == "True" and copies[0] == "False"  # each path ran
    assert int(views[1]) > 10  # lying: the links touch the ground
    assert views[1:] == copies[1:]  # to the bit
