"""A run is reproducible bit for bit whatever its process computed before (lockstep, A/B
runs, replay in CI, campaign workers running several cases in one process).

coal 3.0's support function of a ``coal.Box`` keeps a function-local static set by the first
box query of the process (``getShapeSupport(const Box*, ...)``: ``static const inflate =
(dir.array() == 0).any() ? 1 + 1e-10 : 1.``), so one unrelated box query made before a
simulation changed the rounding of its contact queries: the Panda's push (2e-17 at its first
contact, step 44; 6 mm after 0.25 s). wb_sim hands coal its boxes as ``coal.Convex`` shapes
(wb_sim/contact/manifold.py, ``box_shape``). Each case runs in a process of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

from helpers import TEST_DIR

#: steps of the Panda's push: its hand meets the box at step 44 (0.044 s)
STEPS = 70

_PRELUDES = {
    "fresh": "",
    # unrelated coal queries: a box-box collision and a box-cylinder distance, axis-aligned
    # (the first direction coal asks a box for has zeros: the static's other value)
    "coal queries": """
        import coal
        I, far = np.eye(3), np.array([0.3, 0.2, 0.9])
        coal.collide(coal.Box(1, 1, 1), coal.Transform3s(I, np.zeros(3)), coal.Box(1, 1, 1),
                     coal.Transform3s(I, far), coal.CollisionRequest(), coal.CollisionResult())
        coal.distance(coal.Box(1, 1, 1), coal.Transform3s(I, np.zeros(3)),
                      coal.Cylinder(0.2, 0.5), coal.Transform3s(I, 3 * far),
                      coal.DistanceRequest(), coal.DistanceResult())
        """,
    # another simulation first: a box dropped onto the terrain's box, out of the arm's reach
    "another simulation": """
        from helpers.panda_push import OVERRIDES, panda_sim
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            other = wb_sim.Simulator.from_yaml(wb_sim.config_path("panda"), {
                **OVERRIDES, "objects.positions": [1.5, -1.5, 0.3]})
        for _ in range(150):
            other.step(np.zeros(other.nj))
        assert abs(other.object_poses()[0][2] - 0.26) < 1e-3  # resting on the terrain box
        """,
}

_RUN = """
import sys
sys.path.insert(0, {test!r})
import numpy as np
import wb_sim
{prelude}
from helpers.panda_push import run_core
sim, rows, touched = run_core({steps})
np.save({out!r}, rows)
print("touched", touched)
"""


def _run(name: str, out: str) -> subprocess.Popen:
    code = _RUN.format(test=str(TEST_DIR), prelude=textwrap.dedent(_PRELUDES[name]),
                       steps=STEPS, out=out)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_run_does_not_depend_on_what_its_process_computed_before(tmp_path):
    """The Panda's push (the box's pose after each step, 70 steps, the hand touching it
    from step 44 on) in a fresh process equals, to the bit, the same run in a process that
    first made unrelated coal queries (box-box, box-cylinder), and in one that first ran
    another simulation (a box dropped on a terrain box). Before the fix the first two
    parted at step 44 (2e-17 m)."""
    procs = {name: _run(name, str(tmp_path / f"{k}.npy")) for k, name in enumerate(_PRELUDES)}
    rows = {}
    for k, (name, p) in enumerate(procs.items()):
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, f"{name}: {err}"
        assert "touched" in out and int(out.split("touched")[1].split()[0]) > 0, out
        rows[name] = np.load(tmp_path / f"{k}.npy")
    fresh = rows["fresh"]
    assert fresh.shape == (STEPS, 7)
    moved = np.abs(fresh[-1, :3] - fresh[0, :3]).max()
    assert moved > 1e-4, moved  # the hand pushed the box
    parted = {}  # name: (the first step where it parts from the fresh run, by how much)
    for name, r in rows.items():
        differ = np.flatnonzero((r != fresh).any(axis=1))
        if differ.size:
            parted[name] = (int(differ[0]), float(np.abs(r - fresh).max()))
    assert parted == {}, parted


def test_boxes_reach_coal_as_convex_shapes_with_the_exact_contact():
    """A box's coal shape is a ``coal.Convex`` of its corners (no ``coal.Box``, whose
    support static outlives the query), and coal's answer on it is the analytic one: a
    0.1 m cube turned 0.3 rad about z, its bottom face 0.01 m into the top face of a box of
    half sides (0.1, 0.2, 0.3), then 0.01 m and 0.1 mm above it: the normal +z, the signed
    distance the gap, the witness points on the two faces."""
    import coal
    import pinocchio as pin

    from wb_sim.contact.manifold import box_shape, collide, convex_shape

    a, b = box_shape([0.05] * 3), convex_shape(coal.Box(0.2, 0.4, 0.6))
    for shape in (a, b):
        assert isinstance(shape.geometry, coal.Convex) and shape.geometry.num_points == 8
    R = pin.rpy.rpyToMatrix(0.0, 0.0, 0.3)
    for gap in (-0.01, 0.01, 1e-4):
        t = np.array([0.01, 0.02, 0.3 + 0.05 + gap])
        n, distance, pa, pb = collide(a, R, t, b, np.eye(3), np.zeros(3), 0.02)
        assert np.allclose(n, [0.0, 0.0, 1.0], rtol=0.0, atol=1e-12), n
        assert abs(distance - gap) < 1e-12, (gap, distance)
        assert abs(pa[2] - (0.3 + gap)) < 1e-12 and abs(pb[2] - 0.3) < 1e-12, (pa, pb)
