"""The floating base's velocity-product (gyroscopic and centripetal) terms, taken
implicitly: the step's last correction of its velocity increment.

ABA evaluates the bias forces ``b(q, v) = C(q, v) v`` at the start of the step, so
semi-implicit Euler is explicit in them. For a spinning body that is explicit Euler on
its precession, whose amplitude grows by ``sqrt(1 + (h W)^2)`` per step (``W`` the
body-frame precession rate): a free disc spinning at 30 rad/s, 0.05 rad off its axle,
gained 10 % of its energy in 5 s at 1 kHz; at 100 rad/s it diverged at 1.55 s, and a
top spinning at 300 rad/s on its tip at 0.17 s.

The step's increment ``dv = v' - v`` instead solves::

    (M + h/2 D) dv = h (tau - b(q, v)) + J^T p       D = d b_root / d v

the linearly implicit midpoint rule in the root body's velocity-product terms ``b_root``
(``J^T p``: the joint-limit and contact impulses). ``b`` is quadratic in ``v`` (``q``
fixed), and for a quadratic vector field this is Kahan's method: it equals
``M dv / h = tau - B(v, v + dv)`` with ``B`` the symmetric bilinear form of ``b``. For a
free rigid body (Euler's equations) Kahan's method is the Hirota-Kimura discretization,
which keeps two modified invariants: the energy and the norm of the angular momentum do
not drift (an axisymmetric body keeps both to rounding, an asymmetric one within 2e-4
over 20 s at 100 rad/s; the world angular momentum's direction stays within 2.5e-3 at 100 rad/s). It is A-stable and, unlike
backward Euler (MuJoCo's ``implicit``, ``h D`` instead of ``h/2 D``), it does not damp the
precession: backward Euler took 4.5 % of the energy of a disc spinning 0.3 rad off its
axle in 5 s (0.12 % at 0.05 rad).

The impulses are solved first, with ``M^-1`` (their Delassus matrices stay symmetric
positive definite), and the correction is applied to the whole increment, impulses
included, as MuJoCo's implicit integrators apply ``(M - h D)^-1`` to the constraint forces
too. Correcting only the free increment before the contact solve leaves the contact's
impulse explicit in the gyroscopic terms: a top spinning at 300 rad/s on its tip then
fell by 0.026 rad in 5 s (twice the explicit step's drift) and a taller one rose to the
vertical; corrected as a whole it precesses at the closed-form rate (0.5 %) and keeps its
tilt. The price: the contact points' velocities move by the correction, O(h |D| |dv|)
(the top's tip slid 0.15 mm in 5 s).

``D`` is the block of the root body's own velocity-product terms, with respect to its
angular velocity (in the stepping model's coordinates, the base origin's velocity in
world axes and the angular velocity ``w`` in base axes, they do not depend on the linear
velocity). With the root body's mass ``m``, first moment ``s = m c`` and rotational
inertia ``I_o`` about the base origin (base axes), and ``R`` the base orientation::

    b_lin = R (w x (w x s))         d b_lin / d w = R (w s^T + (w.s) 1 - 2 s w^T)
    b_ang = w x I_o w               d b_ang / d w = [w]x I_o - [I_o w]x

both linear in ``w``: ``w`` times a constant (3, 18) table gives them. ``D`` has rank 3
(its three ``w`` columns), so the system is solved with the step's ``M^-1`` (Woodbury)::

    G   = M^-1 E B             (E: the base's 6 rows, B = h/2 [d b_lin/dw; d b_ang/dw])
    y   = (1 + G_w)^-1 dv_w    (3 x 3; G_w: G's angular rows; dv_w: the increment of w)
    dv' = dv - G y

For a robot of one body (a free object, a wheel, a top) this is the whole ``D``, and
the simulator applies it to such robots only. For an articulated robot the root body's
share is a small part of the velocity-product terms: implicit, it changed nothing
measurable (iCub tumbling at 10 rad/s in the air, its joints held by undamped springs,
gains 15 % of its energy in 5 s at 1 kHz either way; ANYmal 1.5 %, 1.1 % with its root
body implicit) and it cost
15-19 % of icub_stand's step (ten numpy calls on small arrays), so their step stays
explicit in these terms. The whole ``D`` does keep them (iCub: 0.06 %) but costs more
than the rest of the step: pinocchio's RNEA derivatives alone take 23 us for iCub (and
are wrong for the stepping model's composite root joint), then a dense 38 x 38 solve.
The correction itself holds for any number of joints (a test holds it to a dense solve
on the humanoid).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
from scipy.linalg.blas import dgemv as _gemv
from scipy.linalg.lapack import dgesv as _gesv

from .errors import DivergenceError
from .pin_views import placement_view

#: the weight of the end-of-step velocity in the velocity-product terms (1/2: the midpoint)
THETA = 0.5
_EYE3 = np.eye(3)


def _skew(a: np.ndarray) -> np.ndarray:
    """``[a]x``: ``[a]x b = a x b``."""
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


class RootGyroscopic:
    """The implicit velocity-product terms of the floating base's root body (see the
    module docstring), for the stepping model ``model`` (root joint 1: translation in
    world axes, then rotation with body-axes angular velocity), its data ``data`` (where
    ABA leaves the base's orientation) and the step ``h``."""

    def __init__(self, model: pin.Model, data: pin.Data, h: float):
        inertia = model.inertias[1]  # the root body (fixed children merged), base axes
        m, c = float(inertia.mass), np.array(inertia.lever)
        s = m * c
        eye = np.eye(3)
        I_o = np.array(inertia.inertia) + m * ((c @ c) * eye - np.outer(c, c))
        th = THETA * h
        # row k: h/2 times the derivatives at w = e_k, flattened (d b/dw is linear in w)
        lin = [(np.outer(e, s) + (e @ s) * eye - 2.0 * np.outer(s, e)).ravel() for e in eye]
        ang = [(_skew(e) @ I_o - _skew(I_o @ e)).ravel() for e in eye]
        self._table = np.hstack([np.array(lin), np.array(ang)]) * th  # (3, 18)
        #: whether the root body's centre of mass is off the base origin (b_lin != 0)
        self._lin = bool(np.any(s))
        nv = model.nv
        r, k = np.meshgrid(np.arange(6), np.arange(nv), indexing="ij")
        # flat indices, into the upper triangle, of M^-1's first six rows (the base's)
        self._rows = np.arange(nv * nv).reshape(nv, nv)[np.minimum(r, k), np.maximum(r, k)]
        self._data = data
        # the base's orientation as a view of data.oMi's storage (its rotation is stored
        # column-major), or None: read through the API each step
        rows = placement_view(data, [1])
        self._R = None if rows is None else rows[1, :9].reshape(3, 3).T

    def correct(self, w: np.ndarray, Minv_upper: np.ndarray, v_next: np.ndarray) -> np.ndarray:
        """The end-of-step velocity with the root body's velocity-product terms implicit,
        from ``v_next`` (nv,) where they were explicit, the base's angular velocity ``w``
        at the start of the step (base axes) and ``M^-1`` (its upper triangle, C-ordered,
        as ``computeMinverse`` leaves it); the base's orientation is read from the data
        (ABA's, at the start of the step). A new array."""
        B = w.dot(self._table).reshape(6, 3)  # h/2 [d b_lin/dw; d b_ang/dw], R not yet applied
        if self._lin:
            R = self._R if self._R is not None else self._data.oMi[1].rotation
            B[:3] = R.dot(B[:3])
        Gt = B.T.dot(Minv_upper.take(self._rows))  # (M^-1 E B)^T, (3, nv)
        K = Gt[:, 3:6] + _EYE3  # (1 + G_w)^T, so K.T (Fortran-ordered) is 1 + G_w
        _, _, y, info = _gesv(K.T, v_next[3:6] - w, overwrite_a=1)
        if info:
            raise DivergenceError(
                f"the floating base spins too fast for the rate (|w| = "
                f"{float(np.linalg.norm(w)):.3g} rad/s): its implicit gyroscopic step is "
                f"singular; the last valid state is kept (raise physics_rate_hz)")
        return _gemv(-1.0, Gt.T, y, 1.0, v_next)  # v_next - G y
