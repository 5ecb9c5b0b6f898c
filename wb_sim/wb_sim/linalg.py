"""Small dense linear algebra on the step's matrices, through BLAS/LAPACK without
the copies scipy's wrappers make for C-ordered arrays.

LAPACK and BLAS read Fortran (column-major) arrays; scipy's wrappers copy a
C-ordered matrix into Fortran order first (for the 38 x 38 M^-1 of a humanoid
that copy costs as much as the product). The transpose of a C-ordered array is
a Fortran-ordered view of the same memory, and for a symmetric matrix it is the
same matrix, so these helpers pass ``A.T`` and say which triangle to read.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.blas import dsymm as _symm, dsymv as _symv


def upper_sym_mm(upper: np.ndarray, B: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """``alpha S @ B`` for the symmetric ``S`` whose upper triangle the C-ordered
    ``upper`` holds (its lower triangle is not read); a new Fortran-ordered array.
    ``B``: (n, m), fastest as the transpose of a C-ordered (m, n) array."""
    # upper.T is Fortran-ordered, and its lower triangle is upper's upper one
    return _symm(alpha, upper.T, B, lower=1)


def upper_sym_mv(upper: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``S @ x`` for the symmetric ``S`` whose upper triangle ``upper`` holds."""
    return _symv(1.0, upper.T, x, lower=1)
