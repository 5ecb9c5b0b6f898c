"""The headless Recorder's contact truth (issue 32): each surface's centre of pressure and the
ZMP at every sample, as a bag of the node's ``contact_state`` gives them.

The standing humanoid under its shipped controller, pushed sideways on its base for 0.15 s
(one foot unloads: its centre of pressure becomes NaN, then comes back), 600 steps on each
contact model. At each step the Recorder's ``cop`` / ``zmp`` equal bit for bit what the node
publishes for that state (its :class:`~wb_sim.ros.conversions.ContactStateMessage` built on
``Simulator.contact_points_state()``, where std_msgs is installed), and, within 1e-12 m, a
hand computation of ``sum f_n p / sum f_n`` over each surface's points (a loop, not the
shared implementation); the ZMP lies between the feet while both stand; ``truth_t`` is the
samples' time; the fields survive the ``.npz``.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from helpers.robots import make_humanoid, shipped_controller
from wb_sim.tools.recording import History, Recorder

STEPS, PUSH_AT = 600, 200
PUSH = [0.0, 250.0, 0.0]


def _hand(reading, names):
    """(S, 3) centres of pressure, (3,) ZMP: sum f_n p / sum f_n by a plain loop."""
    num, den = {n: np.zeros(3) for n in names}, dict.fromkeys(names, 0.0)
    for s, p, f, nrm in zip(reading.surface, reading.position, reading.force, reading.normal):
        fn = float(f @ nrm)
        num[s] += fn * p
        den[s] += fn
    cop = np.array([num[n] / den[n] if den[n] > 0 else np.full(3, np.nan) for n in names])
    total = sum(den.values())
    zmp = sum(num.values()) / total if total > 0 else np.full(3, np.nan)
    return cop, zmp


@pytest.mark.parametrize("law", ["rigid", "compliant"])
def test_the_recorders_cop_and_zmp_are_the_nodes(law, tmp_path):
    node_msg = None
    if importlib.util.find_spec("wb_sim_interfaces") is not None:
        from wb_sim.ros.conversions import ContactStateMessage
        from wb_sim.tools.bag import read_contact_state
    sim = make_humanoid(**{"contact.model": law})
    ctrl = shipped_controller(sim)
    if importlib.util.find_spec("wb_sim_interfaces") is not None:
        pts = sim.contact_points
        node_msg = ContactStateMessage(pts.surface_of_point, pts.surface_names,
                                       pts.surface_frames, "world")
    rec = Recorder(sim, capacity=16)  # grows: the buffers' copy is exercised
    names = sim.surface_names
    node_cop, node_zmp, hand_cop, hand_zmp = [], [], [], []
    for k in range(STEPS):
        if k == PUSH_AT:
            sim.apply_external_wrench(sim.robot.root_link, PUSH, [0.0, 0.0, 0.0],
                                      duration_s=0.15)
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
        rec.record(sim)
        reading = sim.contact_points_state()
        cop, zmp = _hand(reading, names)
        hand_cop.append(cop)
        hand_zmp.append(zmp)
        if node_msg is not None:
            com, momentum = sim.centroidal_momentum()
            x = read_contact_state(node_msg(round(sim.t * 1e9), reading, com, momentum))
            node_cop.append(x["cop"])
            node_zmp.append(x["zmp"])
    h = History.load(rec.history().save(tmp_path / "run.npz"))
    assert h.cop_names == tuple(names) and h.cop.shape == (len(names), STEPS, 3)
    assert np.array_equal(h.truth_t, h.t)
    hand_cop, hand_zmp = np.stack(hand_cop, axis=1), np.array(hand_zmp)
    assert np.array_equal(np.isnan(h.cop), np.isnan(hand_cop))
    assert np.array_equal(np.isnan(h.zmp), np.isnan(hand_zmp))
    # a foot unloaded by the push (NaN), not only before the first touch down
    assert np.isnan(hand_cop[:, PUSH_AT:]).any(), "the push never lifted a foot"
    assert np.nanmax(np.abs(h.cop - hand_cop)) < 1e-12
    assert np.nanmax(np.abs(h.zmp - hand_zmp)) < 1e-12
    if node_msg is not None:
        assert np.array_equal(h.cop, np.stack(node_cop, axis=1), equal_nan=True)
        assert np.array_equal(h.zmp, np.array(node_zmp), equal_nan=True)
    # standing before the push: the ZMP between the feet's centres of pressure (in y)
    y = h.cop[:, PUSH_AT - 1, 1]
    assert min(y) < h.zmp[PUSH_AT - 1, 1] < max(y)
