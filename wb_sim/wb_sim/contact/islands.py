"""The islands of a contact problem: groups of contact rows that no inertia couples.

``M^-1`` has exact zeros between the velocities of separate kinematic trees under the
fixed world (the robot's, each free object's: pinocchio's algorithms never touch them), so
the velocities split into groups, and ``J M^-1 J^T`` is block-diagonal over the islands of
groups that contact points link (a point whose Jacobian reaches two groups joins them).
Each island's block, ``h M^-1 J^T`` restricted to its velocities, its solve and its
velocity change can be computed alone: a free object resting apart costs its own 6 x 6
block of ``M^-1`` and its few rows, not products over every velocity.

:class:`IslandFinder` finds them (the groups from ``M^-1``'s zero pattern, kept while a
cheap check of the zeros holds); :class:`Islands` holds the result: the islands with more
than one group or a group other than 6 velocities one by one (``general``), the islands
of one free object batched by their point count (``batches``: stacked arrays, one
``matmul`` / ``solve`` for all of them).
"""

from __future__ import annotations

import numpy as np

#: rows of the contact problem from which the laws look for islands (fewer: one solve)
ISLAND_MIN_ROWS = 120


def components(coupled: np.ndarray) -> np.ndarray:
    """Each node's component (its smallest member) of the symmetric boolean adjacency
    ``coupled`` (n, n) with a true diagonal: the smallest label among the neighbours,
    spread until it no longer changes (a few whole-matrix passes; dense blocks: one)."""
    n = len(coupled)
    label = np.arange(n)
    while True:
        new = np.where(coupled, label[None, :], n).min(axis=1)
        if np.array_equal(new, label):
            return label
        label = new


def symmetric_blocks(Minv_upper: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The symmetric blocks ``M^-1[c, c]`` (m, g, g) of the index sets ``cols`` (m, g),
    each ascending, from the upper triangle alone."""
    B = Minv_upper[cols[:, :, None], cols[:, None, :]]
    g = cols.shape[1]
    return np.where(np.triu(np.ones((g, g), dtype=bool)), B, B.transpose(0, 2, 1))


class Islands:
    """The islands of one contact problem (rows component-major: ``r`` groups of ``k``
    point rows).

    ``general``: (rows, cols) per island solved alone, its contact rows and its
    velocities (ascending). ``batches``: (rows (m, q), cols (m, 6)) per point count, the
    one-object islands stacked. ``count``: the number of islands."""

    __slots__ = ("general", "batches", "count")

    def __init__(self, general: list, batches: list):
        self.general, self.batches = general, batches
        self.count = len(general) + sum(len(b[0]) for b in batches)

    def blocks(self, Minv_upper: np.ndarray, J: np.ndarray, h: float):
        """Per island (general ones first, then the batches): ``(rows, cols, J_b, W_b,
        A_b)`` with ``W_b = h M^-1[c, c] J[rows, c]^T`` (the island's part of
        ``h M^-1 J^T``: its other entries are exact zeros) and ``A_b = J_b W_b``
        (stacked for a batch)."""
        out = []
        for rows, cols in self.general:
            B = Minv_upper[np.ix_(cols, cols)]
            Msym = np.triu(B) + np.triu(B, 1).T
            Jb = J[np.ix_(rows, cols)]
            W = Msym.dot(Jb.T)
            W *= h
            out.append((rows, cols, Jb, W, Jb.dot(W)))
        for rows, cols in self.batches:
            Jb = J[rows[:, :, None], cols[:, None, :]]  # (m, q, 6)
            W = np.matmul(symmetric_blocks(Minv_upper, cols), Jb.transpose(0, 2, 1))
            W *= h
            out.append((rows, cols, Jb, W, np.matmul(Jb, W)))
        return out

    @staticmethod
    def assemble(blocks, n: int, diag: np.ndarray | None = None,
                 out: np.ndarray | None = None) -> np.ndarray:
        """The block-diagonal ``J M^-1 J^T`` (n, n) (plus ``diag``) from :meth:`blocks`."""
        A = np.zeros((n, n)) if out is None else out
        if out is not None:
            A.fill(0.0)
        for rows, _, _, _, Ab in blocks:
            if rows.ndim == 1:
                A[np.ix_(rows, rows)] = Ab
            else:
                A[rows[:, :, None], rows[:, None, :]] = Ab
        if diag is not None:
            A.reshape(-1)[::n + 1] += diag
        return A

    @staticmethod
    def velocity_change(blocks, f: np.ndarray, nv: int) -> np.ndarray:
        """``h M^-1 J^T f`` (nv,) from :meth:`blocks`, island by island."""
        dv = np.zeros(nv)
        for rows, cols, _, W, _ in blocks:
            if rows.ndim == 1:
                dv[cols] += W.dot(f[rows])
            else:
                dv[cols] += np.matmul(W, f[rows][:, :, None])[:, :, 0]
        return dv


class IslandFinder:
    """Finds the islands of a contact problem; keeps the velocity groups of the last
    ``M^-1`` (they follow from the model's trees) while its off-group entries stay zero
    (a check of those entries a step; a new size nv is grouped anew)."""

    def __init__(self):
        self._nv = -1
        self._off = np.empty(0, dtype=np.intp)

    def _groups(self, Minv_upper: np.ndarray) -> None:
        nv = Minv_upper.shape[0]
        if nv == self._nv and not Minv_upper.ravel().take(self._off).any():
            return  # the same zeros: the same groups
        coupled = Minv_upper != 0.0
        coupled |= coupled.T
        label = components(coupled)
        names, first, size = np.unique(label, return_index=True, return_counts=True)
        self._nv, self._ngroups = nv, len(names)
        self._group_of = np.searchsorted(names, label)  # velocity -> group 0..G-1
        self._cols = [np.flatnonzero(label == g) for g in names.tolist()]
        self._start = first
        self._contiguous = np.array([c[-1] - c[0] + 1 == len(c) for c in self._cols])
        self._size = size
        # a contiguous group's velocities first: reduceat over sorted columns
        self._perm = np.argsort(self._group_of, kind="stable")
        self._bounds = np.concatenate([[0], np.cumsum(size)[:-1]])
        same = self._group_of[:, None] == self._group_of[None, :]
        self._off = np.flatnonzero(np.triu(~same).reshape(-1))

    def find(self, Minv_upper: np.ndarray, J: np.ndarray, r: int, k: int,
             point_major: bool = False) -> Islands | None:
        """The islands of the rows of ``J`` (r k, nv), component-major (r groups of k
        point rows: the compliant law's) or ``point_major`` (k groups of r rows: the
        rigid law's), or None for one island."""
        self._groups(Minv_upper)
        if self._ngroups == 1:
            return None
        nv = self._nv
        # (k, nv): the velocities each point moves
        reach = ((J.reshape(k, r, nv) != 0.0).any(axis=1) if point_major
                 else (J.reshape(r, k, nv) != 0.0).any(axis=0))
        if not np.array_equal(self._perm, np.arange(nv)):
            reach = reach[:, self._perm]
        touch = np.logical_or.reduceat(reach, self._bounds, axis=1)  # (k, G)
        G = self._ngroups
        parent = np.arange(G)

        def root(a):
            while parent[a] != a:
                a = parent[a]
            return a
        multi = np.flatnonzero(touch.sum(axis=1) > 1)
        for p in multi.tolist():  # the few points linking groups (a foot on a box, a stack)
            gs = np.flatnonzero(touch[p]).tolist()
            a = root(gs[0])
            for g in gs[1:]:
                b = root(g)
                if a != b:
                    parent[max(a, b)] = min(a, b)
                    a = min(a, b)
        island = np.array([root(g) for g in range(G)]) if len(multi) else parent
        point_island = island[np.argmax(touch, axis=1)]  # a point reaching nothing: group 0
        names, counts = np.unique(point_island, return_counts=True)
        if len(names) == 1:
            return None
        order = np.argsort(point_island, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        # a point's rows: p + k c (component-major) or r p + c (point-major)
        step, comp = (r, np.arange(r)) if point_major else (1, k * np.arange(r))
        alone = np.bincount(island, minlength=G)[names] == 1  # an island of one group
        batchable = alone & (self._size[names] == 6) & self._contiguous[names]
        general, batches = [], []
        for i in np.flatnonzero(~batchable).tolist():
            pts = order[starts[i]:starts[i] + counts[i]]
            rows = ((step * pts[:, None] + comp[None, :]) if point_major
                    else (pts[None, :] + comp[:, None])).reshape(-1)
            cols = np.flatnonzero(island[self._group_of] == names[i])
            general.append((rows, cols))
        bi = np.flatnonzero(batchable)
        for p in np.unique(counts[bi]).tolist():
            sel = bi[counts[bi] == p]
            pts = order[starts[sel][:, None] + np.arange(p)[None, :]]  # (m, p)
            rows = ((step * pts[:, :, None] + comp[None, None, :]) if point_major
                    else (pts[:, None, :] + comp[None, :, None])).reshape(len(sel), r * p)
            cols = self._start[names[sel]][:, None] + np.arange(6)[None, :]
            batches.append((rows, cols))
        return Islands(general, batches)


class BlockDiagonal:
    """A block-diagonal (n, n) matrix kept as :meth:`Islands.blocks` (what the rigid law's
    readings ask of its Delassus matrix: ``dot``, ``diagonal``, all rows); ``toarray``."""

    def __init__(self, blocks, n: int, scale: float = 1.0):
        self.blocks, self.n, self.scale = blocks, n, scale
        self.shape = (n, n)

    def dot(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n)
        for rows, _, _, _, Ab in self.blocks:
            if rows.ndim == 1:
                out[rows] = Ab.dot(x[rows])
            else:
                out[rows] = np.matmul(Ab, x[rows][:, :, None])[:, :, 0]
        return out * self.scale

    def diagonal(self) -> np.ndarray:
        out = np.zeros(self.n)
        for rows, _, _, _, Ab in self.blocks:
            out[rows] = np.diagonal(Ab, axis1=-2, axis2=-1)
        return out * self.scale

    def __getitem__(self, key):
        if key == slice(None, self.n) or key == slice(None):
            return self
        return self.toarray()[key]

    def toarray(self) -> np.ndarray:
        return Islands.assemble(self.blocks, self.n) * self.scale
