"""Contact sensors (Simulator.contact_states, parameters contact_sensors.*): raw contact against
the simulator's own contact forces step by step, debouncing against the rule written out here.

Figures when written: a 2 kg box dropped from 20 mm touches down in step 64 (the first whose
end its free fall puts below the ground), bounces off in step 75 and back in step 108, and lifts
off, pushed up by 3 m g from step 501, in step 503; with t_on = 5 ms and t_off = 3 ms the
debounced state follows 5 steps after each touch-down and 3 after each lift-off.
"""

from __future__ import annotations

import numpy as np
import pytest

import wb_sim
from wb_sim.errors import ConfigError

from core.test_physics import BOX_LZ, BOX_M, box_params
from helpers.robots import make_humanoid

DROP = 0.02  # m, the box's sole above the ground at the start


def debounce(raw, n_on, n_off):
    """The debounced sequence of ``raw``: it follows raw once raw has differed from it for
    more than n_on (turning on) or n_off (turning off) steps in a row; starts as raw[0]'s
    predecessor, off."""
    out, state, run = [], False, 0
    for r in raw:
        run = run + 1 if r != state else 0
        if run > (n_on if r else n_off):
            state, run = r, 0
        out.append(state)
    return np.array(out)


def drop_and_lift(threshold=1.0, t_on=0.005, t_off=0.003):
    sim = wb_sim.Simulator.from_params(box_params(**{
        "initial.base_position": [0.0, 0.0, BOX_LZ / 2 + DROP], "imu.frame": "",
        "contact_sensors.active": True, "contact_sensors.threshold": threshold,
        "contact_sensors.t_on": t_on,
        "contact_sensors.t_off": t_off}))
    fn, raw, deb = [], [], []
    for k in range(700):
        if k == 500:  # settled: lift it off with 3 m g for 0.1 s
            sim.apply_external_wrench("box", [0.0, 0.0, 3 * BOX_M * 9.81], duration_s=0.1)
        sim.step(np.zeros(0))
        state = sim.contact_states["foot"]
        fn.append(sim.point_forces[:, 2].sum())
        raw.append(state.in_contact)
        deb.append(state.debounced)
        assert state.normal_force == pytest.approx(fn[-1], abs=1e-12) and state.kind == "surface"
    return sim, np.array(fn), np.array(raw), np.array(deb)


@pytest.mark.parametrize("threshold", [0.0, 1.0])
def test_a_dropped_box_flips_raw_contact_at_touch_down_and_lift_off(threshold):
    sim, fn, raw, deb = drop_and_lift(threshold)
    assert np.array_equal(raw, fn > threshold)
    down = int(np.argmax(raw))
    up = 500 + int(np.argmax(~raw[500:]))
    assert fn[:down].max() <= threshold < fn[down] and fn[up] <= threshold < fn[up - 1]
    # touch-down: the first step whose end the free fall puts below the ground (semi-implicit
    # Euler: the sole falls g dt^2 n (n + 1) / 2 in n steps; the contact is implicit)
    n = next(n for n in range(1, 1000) if 9.81 * sim.dt**2 * n * (n + 1) / 2 > DROP)
    assert down == n - 1 == 63
    assert raw[300:500].all() and not raw[up:600].any()  # it landed (after bounces), it left
    assert 500 <= up < 505


def test_debounced_contact_lags_by_the_configured_times():
    sim, fn, raw, deb = drop_and_lift(1.0, t_on=0.005, t_off=0.003)
    assert np.array_equal(deb, debounce(raw, 5, 3))
    down, up = int(np.argmax(raw)), 500 + int(np.argmax(~raw[500:]))
    assert int(np.argmax(deb)) == down + 5
    assert 500 + int(np.argmax(~deb[500:])) == up + 3
    _, _, raw0, deb0 = drop_and_lift(1.0, t_on=0.0, t_off=0.0)
    assert np.array_equal(deb0, raw0)


def test_the_debounce_is_part_of_the_snapshot():
    sim = wb_sim.Simulator.from_params(box_params(**{
        "initial.base_position": [0.0, 0.0, BOX_LZ / 2 + DROP], "imu.frame": "",
        "contact_sensors.active": True, "contact_sensors.t_on": 0.01}))
    while not sim.contact_states["foot"].in_contact:
        sim.step(np.zeros(0))
    sim.step(np.zeros(0))
    snap = sim.get_state()  # raw on for 2 steps, debounced still off
    assert not sim.contact_states["foot"].debounced

    def run():
        out = []
        for _ in range(12):
            sim.step(np.zeros(0))
            out.append(sim.contact_states["foot"].debounced)
        return out

    first = run()
    sim.set_state(snap)
    assert run() == first and first.index(True) == 8


def test_links_with_whole_body_collision_have_contact_sensors():
    sim = make_humanoid(**{"contact_sensors.active": True, "contact_sensors.threshold": 0.5})  # zero torque: it falls
    names = sim.contact_sensors.names
    assert names[:2] == ("left_foot", "right_foot") and "pelvis" in names
    touched = set()
    for _ in range(1500):
        sim.step(np.zeros(sim.nj))
        col = sim.collision_points_state()  # a flat ground: the normal is world z
        per_link = {}
        for link, f in zip(col.surface, col.force):
            per_link[link] = per_link.get(link, 0.0) + f[2]
        states = sim.contact_states
        # the array the node publishes (contact_sensors) is the same readings, row by row
        assert np.array_equal(sim.contact_sensor_array(), np.array(
            [[st.normal_force, st.in_contact, st.debounced] for st in states.values()]))
        for name, st in states.items():
            if st.kind == "link":
                assert st.normal_force == pytest.approx(per_link.get(name, 0.0), abs=1e-9)
                assert st.in_contact == (st.normal_force > 0.5)
                if st.in_contact:
                    touched.add(name)
    assert {"pelvis", "head"} <= touched


def test_contact_sensor_parameters():
    with pytest.raises(ConfigError, match="contact_sensors.threshold"):
        wb_sim.Simulator.from_params(box_params(**{"contact_sensors.threshold": -1.0}))
    sim = wb_sim.Simulator.from_params(box_params(**{"contact_sensors.active": False}))
    sim.step(np.zeros(0))
    assert sim.contact_states == {}
    assert sim.contact_sensor_array().shape == (0, 3)
