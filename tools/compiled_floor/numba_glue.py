"""The other option of issue 33, measured: the compliant contact's all-sticking solve (the numpy
glue between pinocchio's calls in a standing step) as one numba function, against wb_sim's own
``CompliantContact.solve`` on the same inputs.

    .venv/bin/python -m pip install numba      # not a dependency of wb_sim
    .venv/bin/python tools/compiled_floor/numba_glue.py

The inputs are the state after icub_stand's step 2000 (standing, all 8 points sticking), with
zero joint torques for the free velocity; the outputs are checked against the Python solve's
(v', forces, deformation) before anything is timed.
A measurement, not part of wb_sim: docs/performance.md has its figures.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pinocchio as pin

try:
    import numba
except ImportError:
    sys.exit("numba_glue: numba is not installed (`python -m pip install numba`)")

from wb_sim.controllers import PDGravityController
from wb_sim.simulator import Simulator
from wb_sim.tools.bench.physics import ICUB_STAND, KD, KP

from run import _best  # this directory's run.py: the same timing as the C++ floor's


@numba.njit(cache=False)
def all_stick(Minv_upper, Jg, v_free, u, d, coef, target_t, target_n, mu2, h, Minv, MinvJt, A):
    """wb_sim.contact.compliant's all-sticking solve, every point in contact (k = n, r = 3):
    (v', forces (3, n) rows t1 t2 n, u' (2, n)), or ok = False where the loop is needed.
    ``Minv``, ``MinvJt``, ``A``: preallocated work arrays."""
    nv = Minv_upper.shape[0]
    for i in range(nv):  # the symmetric M^-1 from its upper triangle
        for j in range(i, nv):
            Minv[i, j] = Minv_upper[i, j]
            Minv[j, i] = Minv_upper[i, j]
    n = d.shape[0]
    MinvJt[:, :] = np.dot(Minv, Jg.T)
    MinvJt *= h
    A[:, :] = np.dot(Jg, MinvJt)
    rhs = -np.dot(Jg, v_free)
    for c in range(3):
        for i in range(n):
            A[c * n + i, c * n + i] += coef[c] / np.sqrt(d[i])
    for i in range(n):
        rhs[i] += u[0, i] * target_t
        rhs[n + i] += u[1, i] * target_t
        rhs[2 * n + i] += d[i] * target_n
    L = np.linalg.cholesky(A)
    m = rhs.shape[0]
    f = rhs.copy()  # L L^T f = rhs by two triangular sweeps (numba has no triangular solve)
    for i in range(m):
        s = f[i]
        for j in range(i):
            s -= L[i, j] * f[j]
        f[i] = s / L[i, i]
    for i in range(m - 1, -1, -1):
        s = f[i]
        for j in range(i + 1, m):
            s -= L[j, i] * f[j]
        f[i] = s / L[i, i]
    ok = True
    for i in range(n):
        fn = f[2 * n + i]
        if fn <= 0.0 or f[i] * f[i] + f[n + i] * f[n + i] - mu2 * fn * fn > 0.0:
            ok = False
    v_next = v_free + np.dot(MinvJt, f)
    wt = np.dot(Jg[:2 * n], v_next)
    un = np.empty((2, n))
    for i in range(n):
        un[0, i] = u[0, i] + h * wt[i]
        un[1, i] = u[1, i] + h * wt[n + i]
    return ok, v_next, f.reshape(3, n), un


def main() -> int:
    sim = Simulator.from_params(dict(ICUB_STAND, **{"contact.model": "compliant"}))
    ctrl = PDGravityController(sim.robot, np.zeros(sim.nj), KP, KD, gravity=ICUB_STAND["gravity"])
    for _ in range(2000):
        sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
    m, data, pts, contact = sim._model_step, sim._data_step, sim.contact_points, sim.contact
    q, v, u = sim._s.q, sim._s.v, sim._s.u
    h = sim._dt0
    tau = np.zeros(m.nv)
    v_free = pin.aba(m, data, q, v, tau, pin.Convention.WORLD) * h + v
    Minv_upper = pin.computeMinverse(m, data).copy()
    pts.update(m, data, None)
    assert min(pts.depth) > 0.0, "not every point touches"
    v_py, force_py, u_py = contact.solve(Minv_upper, v_free, u, h)
    assert contact.status.min() == 1, "not every point sticks"

    Jg = np.ascontiguousarray(pts.jacobian_component_major())
    d = pts.depth.copy()
    coef = contact._diag_coef[3][:, 0].copy()
    work = (np.empty((m.nv, m.nv)), np.empty((m.nv, 3 * pts.n)), np.empty((3 * pts.n, 3 * pts.n)))
    args = (Minv_upper, Jg, v_free, u, d, coef, contact._target_t, contact._target_n,
            contact.mu ** 2, h, *work)
    t0 = time.perf_counter()
    ok, v_nb, f_nb, u_nb = all_stick(*args)
    compile_s = time.perf_counter() - t0
    assert ok
    err = max(np.abs(v_nb - v_py).max() / np.abs(v_py).max(),
              np.abs(f_nb.T - force_py).max() / np.abs(force_py).max(),
              np.abs(u_nb - u_py).max() / np.abs(u_py).max())
    assert err < 1e-9, f"numba's solve differs from wb_sim's: {err:.3g}"

    py = _best(lambda: contact.solve(Minv_upper, v_free, u, h), 20000)
    nb = _best(lambda: all_stick(*args), 20000)
    print(f"icub_stand, {pts.n} points all sticking, nv {m.nv}; numba {numba.__version__}")
    print(f"wb_sim's CompliantContact.solve (numpy + BLAS):  {py:6.2f} us")
    print(f"the same solve as one numba function:            {nb:6.2f} us "
          f"(compiled in {compile_s:.1f} s; largest relative difference {err:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
