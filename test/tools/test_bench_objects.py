"""The objects benchmark (python -m wb_sim.tools.bench objects): its cases run, the boxes
rest beside the standing humanoid without touching it, the far ones 10 m away. Its figures
are measured by hand (docs/performance.md); no timing is asserted here. With objects.sleep
the boxes fall asleep during the untimed settling steps."""

from __future__ import annotations

import numpy as np

from wb_sim.tools.bench.physics import OBJECT_CASES, object_boxes, objects_cost


def test_the_boxes_rest_beside_the_robot_and_far_away():
    near, far = object_boxes(50, 0.0), object_boxes(50, 10.0)
    P, Q = (np.reshape(b["objects.positions"], (-1, 3)) for b in (near, far))
    assert len(P) == 50 and P[:, 0].min() >= 0.6 and np.all(P[:, 2] == 0.05)
    np.testing.assert_allclose(Q - P, np.tile([10.0, 0.0, 0.0], (50, 1)), rtol=0.0, atol=1e-12)
    gaps = np.linalg.norm(P[:, None, :2] - P[None, :, :2], axis=2) + 10 * np.eye(50)
    assert gaps.min() >= 0.2 - 1e-12  # 0.1 m boxes 0.1 m apart: none touches another
    assert object_boxes(0, 0.0) == {}


def test_objects_cost_runs_every_case_and_the_resting_boxes_fall_asleep():
    rep = objects_cost(runs=1, progress=False, steps=20, sleep=(False, True), settle=700)
    assert rep["cases"] == [c[0] for c in OBJECT_CASES]
    assert len(rep["us_per_step"]) == len(OBJECT_CASES) and rep["over_no_boxes"][0] == 1.0
    assert rep["robot_stands"] and rep["boxes_moved_m"] < 1e-3
    # objects.sleep: every box at rest beside the standing robot or far from it sleeps
    # within 0.7 s (objects.sleep_time 0.5 s after they settle); off: none
    assert rep["by_sleep"][True]["asleep"] == [0, 10, 50, 50]
    assert rep["by_sleep"][False]["asleep"] == [0, 0, 0, 0]
    assert rep["us_per_step"] == rep["by_sleep"][False]["us_per_step"]
