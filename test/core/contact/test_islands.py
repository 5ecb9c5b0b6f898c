"""The islands of a contact problem (wb_sim/contact/islands.py) against the dense products:
a block-diagonal M^-1 (a robot's 8 velocities, five free objects' 6 each) and points on
each body, one point linking the robot to an object, one linking two objects."""

import numpy as np
import pytest

from wb_sim.contact.islands import BlockDiagonal, IslandFinder, Islands


def _problem(point_major: bool, seed: int = 3):
    rng = np.random.default_rng(seed)
    sizes = [8] + [6] * 5
    starts = np.cumsum([0] + sizes[:-1])
    nv = sum(sizes)
    Minv = np.zeros((nv, nv))
    for s, g in zip(starts, sizes):
        a = rng.standard_normal((g, g))
        Minv[s:s + g, s:s + g] = a @ a.T + g * np.eye(g)  # SPD per body
    # points: 3 on the robot, 4 on each object, one robot-object 1, one object 2-object 3
    bodies = [[0]] * 3 + [[b] for b in range(1, 6) for _ in range(4)] + [[0, 1], [2, 3]]
    k, r = len(bodies), 3
    Jp = np.zeros((k, r, nv))  # point-major rows
    for p, bs in enumerate(bodies):
        for b in bs:
            Jp[p, :, starts[b]:starts[b] + sizes[b]] = rng.standard_normal((r, sizes[b]))
    J = Jp.reshape(k * r, nv) if point_major else Jp.transpose(1, 0, 2).reshape(r * k, nv)
    return np.triu(Minv), Minv, J, r, k


@pytest.mark.parametrize("point_major", [False, True])
def test_the_islands_blocks_equal_the_dense_products(point_major):
    """4 islands (the robot with object 1; objects 2 and 3 linked; objects 4 and 5 alone,
    batched); the block-diagonal J M^-1 J^T, the velocity change M^-1 J^T f and the
    Delassus readings equal the dense products to rounding (1e-12 relative)."""
    Minv_upper, Minv, J, r, k = _problem(point_major)
    finder = IslandFinder()
    islands = finder.find(Minv_upper, J, r, k, point_major=point_major)
    assert islands.count == 4
    assert len(islands.general) == 2 and [len(b[0]) for b in islands.batches] == [2]
    rows = np.sort(np.concatenate([b[0].reshape(-1) for b in islands.general + islands.batches]))
    np.testing.assert_array_equal(rows, np.arange(r * k))  # every row in one island
    h = 0.002
    blocks = islands.blocks(Minv_upper, J, h)
    A = J @ Minv @ J.T * h
    scale = np.abs(A).max()
    np.testing.assert_allclose(Islands.assemble(blocks, r * k), A, rtol=0, atol=1e-12 * scale)
    f = np.random.default_rng(1).standard_normal(r * k)
    dv = h * Minv @ J.T @ f
    np.testing.assert_allclose(Islands.velocity_change(blocks, f, len(Minv)), dv, rtol=0,
                               atol=1e-12 * np.abs(dv).max())
    G = BlockDiagonal(blocks, r * k, 2.0)
    np.testing.assert_allclose(G.dot(f), 2.0 * A @ f, rtol=0, atol=1e-12 * scale * 50)
    np.testing.assert_allclose(G.diagonal(), 2.0 * np.diag(A), rtol=0, atol=1e-12 * scale)
    assert G[:r * k] is G


def test_one_body_or_one_island_is_no_islands_and_the_groups_follow_the_zeros():
    """A robot alone (one group) and a problem whose points link every body give None (the
    laws' one solve); an M^-1 whose zeros no longer hold (a coupling appears) is grouped
    again (the groups kept are the model's trees: their zeros do not come back, the finder
    does not look for new ones at the same nv; a new model, another nv, is grouped anew)."""
    Minv_upper, Minv, J, r, k = _problem(False)
    finder = IslandFinder()
    assert finder.find(Minv_upper[:8, :8], J[:, :8], r, k) is None
    assert finder.find(Minv_upper, J, r, k).count == 4
    coupled = Minv_upper.copy()
    coupled[:8, 8:] = 1e-3  # the robot now coupled to every object: one group
    assert finder.find(coupled, J, r, k) is None
    assert IslandFinder().find(Minv_upper, J, r, k).count == 4
