"""Compliant ground contact (the default contact model), integrated implicitly.

The law, per point, is Featherstone's Spatial_v2 ground model (Azad &
Featherstone, "Modelling the contact between a rolling sphere and a compliant
ground plane", ACRA 2010), with the stiffnesses normalised to a reference
depth ``d_ref`` so they read in N/m:

* penetration ``d = -n . (p - o)`` (positive below the ground), ``s = sqrt(d / d_ref)``;
* normal force ``f_n = max(0, s (k d + c d_dot))``: zero above the ground, never
  pulling. The ``s`` factor makes the force grow as ``d^1.5`` (Hertz-like) and
  the damping vanish at first touch (Hunt-Crossley type);
* a tangential ground deformation ``u`` (a state, per point) with the
  spring-damper force ``f_t = -s (k_t u + c_t v_t)`` while the point sticks
  (``u_dot = v_t``); where that force would leave the Coulomb cone the point
  slips with ``|f_t| = mu f_n``, and ``u`` relaxes at the rate that makes the
  spring-damper give exactly that force (backward Euler: stable for every
  ``c_t``). Out of contact ``u = 0``.

Static sink: a load ``W`` shared by ``N`` points sinks ``d = (W sqrt(d_ref) / (N k))^(2/3)``.

**Stable by construction.** The springs and dampers are integrated with
backward Euler, all penetrating points together, with ``s`` frozen over the
step (linearly implicit). With ``h = dt``, point velocities ``w = J_c v`` and
the Delassus matrix ``G = J_c M^-1 J_c^T`` of the penetrating points, the
end-of-step velocity is ``w' = w_free + G p`` for impulses ``p = h f``, and
the law at the end of the step reads ``f = f0 - B w'`` with, per point
(rows t1, t2, n)::

    f0 = s [-k_t u_1, -k_t u_2, k d]       B = s [k_t h + c_t, k_t h + c_t, k h + c]

so the impulses solve one symmetric positive definite system::

    (G + (h B)^-1) p = B^-1 f0 - w_free

(the same form as a regularized rigid contact: ``(h B)^-1`` is the compliance,
``B^-1 f0`` a target velocity). The code solves it for the forces ``f = p / h``,
``(h G + B^-1) f = B^-1 f0 - w_free``, so that no step rescales its result. A point whose normal impulse comes out
negative leaves the system (the law never pulls); a point whose tangential
impulse leaves the cone gets ``mu p_n`` along it, and the rest is solved again
(a few passes of this active-set loop, only at impacts, take-offs and slips).
Backward Euler is stable for every stiffness, damping and mass: no parameter
is refused for stability. Where the rate does not resolve the contact
(natural period below ``pi dt``) it behaves as the stiffest contact the step
resolves, with numerical damping; :meth:`CompliantContact.resolution_note`
says so once.

A plain per-point implementation of the same step, :func:`reference_solve`,
serves as the tests' reference for the vectorized one.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg.lapack import dposv as _posv  # Cholesky solve of an SPD system

from ..linalg import upper_sym_mm
from ..parameters import Param
from .base import SurfaceContact
from .points import ContactPoints
from .shared import FRICTION_COEFFICIENT, MAX_PENETRATION, checked_live_values, live_names

#: the compliant model's parameter group (``contact.model: compliant``); every finite
#: value >= 0 of a live one is stable (the law is integrated implicitly)
PARAMETERS: tuple[Param, ...] = (
    Param("contact.stiffness", "float", 4.0e4, "N/m",
          "Normal stiffness per point at the reference depth: "
          "f_n = sqrt(d/d_ref) (k d + c d_dot), d = penetration.", lo=0.0, live=True),
    Param("contact.damping", "float", 400.0, "N*s/m",
          "Normal damping per point at the reference depth (c above).", lo=0.0, live=True),
    Param("contact.tangential_stiffness", "float", 2.0e5, "N/m",
          "Tangential stiffness per point at the reference depth (ground deformation spring). "
          "A slide that stops springs back by its elastic deformation mu f_n / (s k_t): 0.05 mm "
          "for a 2 kg box at the default (0.27 mm at 4e4; 1e6 halves it again but leaves "
          "delayed controllers less margin).", lo=0.0, live=True),
    Param("contact.tangential_damping", "float", 400.0, "N*s/m",
          "Tangential damping per point at the reference depth.", lo=0.0, live=True),
    FRICTION_COEFFICIENT,
    Param("contact.reference_depth", "float", 1.0e-3, "m",
          "Penetration at which the nonlinear normal law has the secant stiffness "
          "contact.stiffness (Azad & Featherstone's sqrt(d) factor is sqrt(d/d_ref)).",
          lo=0.0, lo_open=True),
    MAX_PENETRATION,
)

#: names of the per-point contact states, indexed by the state code
STATUS_NAMES = ("none", "stick", "slip")

#: passes of the active-set loop (separation and slip); 2-3 suffice at an impact
MAX_PASSES = 12
#: changes of a point's stick/slip state within one step, after which it keeps it (a
#: point whose slip reverses its motion and whose stick leaves the cone would cycle)
MAX_FLIPS = 2


def solve_spd(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x = A^-1 b for a symmetric positive definite A (Cholesky); falls back to a
    least-squares solve where A is numerically singular (an immense stiffness)."""
    _, x, info = _posv(A, b)
    if info == 0:
        return x
    return np.linalg.lstsq(A, b, rcond=None)[0]


class CompliantContact(SurfaceContact):
    """Nonlinear compliant ground contact, linearly implicit; see the module docstring."""

    name = "compliant"
    PARAMETERS = PARAMETERS
    #: parameters that may change while running (the ROS node's `ros2 param set`)
    LIVE_PARAMETERS = live_names(PARAMETERS)
    #: m: a point enters the solve once it touches, now or after the step's free motion
    activation_margin = 0.0

    def __init__(self, params, points: ContactPoints):
        """``params``: the validated ``contact`` group (``config.contact``)."""
        self.points = points
        self.reference_depth = params.reference_depth
        self.max_penetration = params.max_penetration
        n = points.n
        self.depth = np.full(n, -np.inf)  #: (n,) penetration at the last solve, m (> 0 below)
        self._status = np.zeros(n, dtype=np.int8)
        self._all = np.arange(n)
        #: (n, 2) friction direction of each point that slipped at the last step, else 0:
        #: the next step's active set starts from it
        self._slip_dir = np.zeros((n, 2))
        self._any_slip = False
        self._all_stick = np.ones(n, dtype=np.int8)
        self._max_depth = -math.inf if n else 0.0
        #: steps with points in the solve, and those that needed the active-set loop
        self.solves = 0
        self.active_set_solves = 0
        self._coef_dt = None
        # buffers of the common step (every point in the solve): the system matrix and
        # B^-1 per row; rewritten each step, never handed out
        self._A_all = np.zeros((3 * n, 3 * n))
        self._diag_all = np.zeros((3, n))
        self._diag_all_flat = self._diag_all.reshape(-1)
        self._apply({k: params[k] for k in self.LIVE_PARAMETERS})

    # ------------------------------------------------------------------ parameters

    def parameters(self) -> dict[str, float]:
        """The live parameters, by their ``contact.`` names."""
        return {"stiffness": self.k, "damping": self.c, "tangential_stiffness": self.kt,
                "tangential_damping": self.ct, "friction_coefficient": self.mu}

    def set_parameters(self, **values: float) -> None:
        """Change live contact constants (the others keep their values): all checked
        by their declarations first, then applied together (on a :class:`ConfigError`
        nothing changes). Any finite value >= 0 is stable; the next step uses them."""
        self._apply(checked_live_values(PARAMETERS, self.parameters(), values))

    def _apply(self, v) -> None:
        self.k, self.c = float(v["stiffness"]), float(v["damping"])
        self.kt, self.ct = float(v["tangential_stiffness"]), float(v["tangential_damping"])
        self.mu = float(v["friction_coefficient"])
        self._cone = np.array([1.0, 1.0, -self.mu**2])  # . p^2 = |p_t|^2 - mu^2 p_n^2
        self._coef_dt = None  # the per-row constants are rebuilt at the next step

    def initial_state(self) -> np.ndarray:
        """Tangential ground deformation of every point at rest, (2, n) m, rows
        along the plane's tangents t1, t2. Clears the slip warm start."""
        self._slip_dir = np.zeros((self.points.n, 2))
        self._any_slip = False
        return np.zeros((2, self.points.n))

    # ------------------------------------------------------------------ state

    def snapshot(self) -> tuple:
        """What the next solve and the readings depend on besides (q, v, u): the slip
        warm start and the last depths and states. Cheap (references: the model never
        changes these arrays in place, it replaces them)."""
        return (self._slip_dir, self._any_slip, self.depth, self._max_depth, self._status)

    def restore(self, snap: tuple) -> None:
        """Back to a :meth:`snapshot`."""
        self._slip_dir, self._any_slip, self.depth, self._max_depth, self._status = snap

    def warm_start(self) -> np.ndarray:
        """(n, 2) friction directions of the points that slipped at the last step (else
        0): the next step's active set starts from them."""
        return self._slip_dir

    def set_warm_start(self, rows: np.ndarray) -> None:
        """Start the next step's active set from ``rows`` for the first points (the
        others: sticking); the whole-body contact hands the feet's over between its two
        instances."""
        slip = np.zeros((self.points.n, 2))
        slip[:len(rows)] = rows
        self._slip_dir = slip
        self._any_slip = bool(slip.any())

    # ------------------------------------------------------------------ readings

    @property
    def max_depth(self) -> float:
        """Largest penetration at the last :meth:`solve`, m."""
        return self._max_depth

    @property
    def status(self) -> np.ndarray:
        """(n,) state code of each point at the last :meth:`solve`:
        0 no contact, 1 sticking, 2 slipping (see ``STATUS_NAMES``)."""
        return self._status.copy()

    # ------------------------------------------------------------------ the step

    def solve(self, Minv_upper: np.ndarray, v_free: np.ndarray, u: np.ndarray,
              dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The step's contact forces and end-of-step velocity, after
        ``points.update(model, data, None)`` at the step's configuration.

        Args:
            Minv_upper: (nv, nv) upper triangle of the symmetric M^-1 (the lower
                one is not read), stepping model.
            v_free: (nv,) end-of-step velocity without contact forces.
            u: (2, n) tangential deformation state.
            dt: the step, s.
        Returns:
            ``(v_next, force, u_next)``: the end-of-step velocity (nv,), a new
            array (``v_free`` itself when nothing touches), the point forces
            (n, 3) in ground coordinates (t1, t2, n; the impulses over dt), N,
            and the next deformation state (2, n).

        Layout: the contact rows are component-major, as the points' Jacobian is
        (all t1 rows, all t2 rows, all normal rows), so the law is a few whole-row
        operations; the active-set loop (impacts, take-offs, slips) works
        point-major on a permuted copy.
        """
        pts = self.points
        n, h = pts.n, dt
        self.depth = d = pts.depth  # a new array each update: snapshots keep the old
        depths = d.tolist()
        self._max_depth = max(depths)
        if h != self._coef_dt:
            self._coefficients(h)
        if not self._normal_on:  # stiffness and damping both zero: the ground pushes nothing
            return self._nothing(n, v_free)
        if min(depths) > 0.0:  # every point touches: the common case of standing
            idx, k, Jg, dk, uk = None, n, pts.jacobian_component_major(), d, u
            ds = dk
        else:
            # a point above the ground whose free motion takes it below during the step takes
            # part too, at the depth it would reach (ds, for s): the solve then closes its gap
            # instead of finding it deep in the ground a step later, with a spring loaded by
            # the late detection (a stiff contact then launched the body back up)
            d_free = d - h * pts.normal_velocity(v_free)
            idx = np.flatnonzero((d > 0.0) | (d_free > 0.0))
            k = len(idx)
            if k == 0:
                return self._nothing(n, v_free)
            Jg = pts.jacobian_component_major(idx)
            dk, uk = d[idx], u[:, idx]
            ds = np.where(dk > 0.0, dk, d_free[idx])
        self.solves += 1
        # unknowns: the forces f = p / h (N), so the system is h (G + (h B)^-1) f = rhs,
        # i.e. (J h M^-1 J^T + B^-1) f = B^-1 f0 - w_free: h rides on BLAS's scale factor
        MinvJt = upper_sym_mm(Minv_upper, Jg.T, h)  # (nv, 3k): h M^-1 J^T
        # B^-1 per row: B = s (k h + c) with s = sqrt(d / d_ref), so B^-1 = coef d^-1/2
        if idx is None:
            diag = self._diag_all_flat
            np.divide(self._diag_coef, np.sqrt(ds), self._diag_all)
        else:
            diag = np.divide(self._diag_coef, np.sqrt(ds)).reshape(-1)  # (3, k) -> 3k
        A = Jg.dot(MinvJt, self._A_all) if idx is None else Jg.dot(MinvJt)
        A.reshape(-1)[::3 * k + 1] += diag
        target = np.empty((3, k))  # B^-1 f0, m/s
        np.multiply(uk, self._target_t, out=target[:2])
        np.multiply(dk, self._target_n, out=target[2])
        rhs = target.reshape(-1) - Jg.dot(v_free)  # B^-1 f0 - w_free, component-major rows
        f = None
        if self._frictional and not self._any_slip:
            _, f, info = _posv(A, rhs)
            F = f.reshape(3, k)
            if info != 0 or min(F[2].tolist()) <= 0.0 or max(self._cone.dot(F * F).tolist()) > 0.0:
                f = None  # outside the cone, pulling, or numerically singular: the loop
        if f is None:
            self.active_set_solves += 1
            f, slipping = self._general(A, rhs, diag, target, k, idx)
            F = f.reshape(3, k)
            loaded = F[2] > 0.0
            codes = (loaded * (1 + (loaded & slipping))).astype(np.int8)
        else:
            codes = None  # all sticking
        v_next = MinvJt.dot(f)
        v_next += v_free
        if codes is None and idx is None:
            self._status = self._all_stick
            force = F.T
        else:
            self._status = status = np.zeros(n, dtype=np.int8)
            status[self._all if idx is None else idx] = 1 if codes is None else codes
            force = np.zeros((n, 3))
            force[self._all if idx is None else idx] = F.T
        if not self._springy:
            return v_next, force, np.zeros((2, n))
        # sticking: u' = u + h w'_t (the spring followed the point)
        un = Jg[:2 * k].dot(v_next).reshape(2, k)
        un *= h
        un += uk
        if codes is not None:
            # slipping: the ground relaxes towards the deformation whose spring-damper gives
            # the slip force, backward Euler of -f_t / s = k_t u' + c_t (u' - u) / h (stable
            # for every c_t: explicit Euler of it diverged below c_t = k_t h / 2); out of
            # contact: 0
            slip = codes == 2
            if slip.any():
                inv_s = np.sqrt(self.reference_depth / ds)
                relaxed = (uk * (self.ct / h) - F[:2] * inv_s) / (self.kt + self.ct / h)
                un[:, slip] = relaxed[:, slip]
            un[:, codes == 0] = 0.0
        if idx is None:
            return v_next, force, un
        u_next = np.zeros((2, n))
        u_next[:, idx] = un
        return v_next, force, u_next

    def _nothing(self, n: int, v_free: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._status = np.zeros(n, dtype=np.int8)
        if self._any_slip:
            self._slip_dir = np.zeros((n, 2))
            self._any_slip = False
        return v_free, np.zeros((n, 3)), np.zeros((2, n))

    def _coefficients(self, h: float) -> None:
        """Per-row constants of the law at step h: B^-1 d^1/2 and B^-1 f0 / (u or d)."""
        bn, bt = self.k * h + self.c, self.kt * h + self.ct
        self._normal_on = bn > 0.0
        self._frictional = bt > 0.0 and self.mu > 0.0
        self._springy = self._frictional and self.kt > 0.0
        root = math.sqrt(self.reference_depth)
        self._diag_coef = np.array([[root / bt if bt > 0 else 0.0]] * 2
                                   + [[root / bn if bn > 0 else 0.0]])
        self._target_t = -self.kt / bt if self._frictional else 0.0
        self._target_n = self.k / bn if bn > 0 else 0.0
        self._coef_dt = h

    def _general(self, A, rhs, diag, target, k, idx) -> tuple[np.ndarray, np.ndarray]:
        """Forces (3k,) component-major and the (k,) slipping mask, through the
        point-major active-set loop (A f = rhs, A = h G + B^-1 and ``diag`` its
        B^-1 part); keeps the slip warm start for the next step."""
        perm = (np.arange(3)[None, :] * k + np.arange(k)[:, None]).reshape(-1)
        A_pm, rhs_pm = A[np.ix_(perm, perm)], rhs[perm]
        if self._frictional:
            was = (self._slip_dir if idx is None else self._slip_dir[idx]) \
                if self._any_slip else None
            p_pm = None if was is not None else solve_spd(A_pm, rhs_pm)
            p_pm, slipping = self._active_set(A_pm, rhs_pm, diag[perm], target[:2].T.copy(), k,
                                              was, p_pm)
            where = self._all if idx is None else idx
            self._slip_dir = np.zeros((self.points.n, 2))  # a new array: snapshots keep the old
            self._slip_dir[where[slipping]] = self._last_direction[slipping]
            self._any_slip = bool(slipping.any())
        else:  # frictionless: only the normal rows; a loaded point slides freely
            An = A[2 * k:, 2 * k:].copy()
            p_pm = np.zeros(3 * k)
            p_pm[2::3] = self._normal_only(An, rhs[2 * k:])
            slipping = np.ones(k, dtype=bool)
        p = np.empty(3 * k)
        p[perm] = p_pm
        return p, slipping

    def _normal_only(self, A: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        """Normal forces of a frictionless contact: points that would pull leave."""
        m = len(rhs)
        keep = np.ones(m, dtype=bool)
        p = np.zeros(m)
        for _ in range(MAX_PASSES):
            sub = np.flatnonzero(keep)
            p[:] = 0.0
            if len(sub):
                p[sub] = solve_spd(A[np.ix_(sub, sub)], rhs[sub])
            pulling = keep & (p < 0.0)
            if not pulling.any():
                break
            keep &= ~pulling
        return np.maximum(p, 0.0)

    def _active_set(self, A: np.ndarray, rhs: np.ndarray, diag: np.ndarray,
                    target_t: np.ndarray, k: int, was: np.ndarray | None,
                    p: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Forces ``p`` (the same up to the factor h as the impulses; and the (k,)
        slipping mask) with the unilateral and Coulomb conditions, by an
        active-set loop. A slipping point has ``p_t = mu p_n d``
        along its friction direction ``d``, so ``p_n`` is its only unknown (its
        column gains ``mu d`` times the tangential ones, its tangential rows drop).
        Each pass first settles friction: a sticking point whose impulse leaves
        the cone slips (``d`` its trial direction); a slipping point whose
        end-of-step tangential velocity no longer opposes ``d`` (friction would
        push it along its motion, doing positive work) sticks again. Then a point
        whose normal impulse is negative leaves the system.
        ``target_t``: (k, 2) the tangential rows of B^-1 f0.
        ``was``: (k, 2) directions of the points that slipped at the last step
        (the starting set), or None with ``p`` the all-sticking solution."""
        removed = np.zeros(k, dtype=bool)
        flips = np.zeros(k, dtype=int)
        if was is None:
            slipping = np.zeros(k, dtype=bool)
            direction = np.zeros((k, 2))
            if p is None:
                p = solve_spd(A, rhs)
        else:
            slipping = np.hypot(was[:, 0], was[:, 1]) > 0.0
            direction = was.copy()
            p = _substituted_solve(A, rhs, removed, slipping, self.mu * direction)
        mu = self.mu
        for _ in range(MAX_PASSES):
            p3 = p.reshape(k, 3)
            pt = np.hypot(p3[:, 0], p3[:, 1])
            free = flips < MAX_FLIPS  # a point that flipped twice keeps its state: no cycling
            new = free & ~removed & ~slipping & (p3[:, 2] >= 0.0) & (pt > mu * p3[:, 2])
            # end-of-step tangential velocity of the slipping points, w' = w_free + h G p
            # = target - rhs + A p - diag p; friction must oppose it
            w_t = (A.dot(p) - diag * p - rhs).reshape(k, 3)[:, :2] + target_t
            back = free & slipping & ((w_t * direction).sum(axis=1) > 0.0)
            if new.any() or back.any():
                direction[new] = p3[new, :2] / pt[new, None]
                slipping = (slipping | new) & ~back
                flips += new | back
            else:
                pulling = ~removed & (p3[:, 2] < 0.0)
                if not pulling.any():
                    break
                removed |= pulling
                slipping &= ~removed
            p = _substituted_solve(A, rhs, removed, slipping, mu * direction)
        # whatever the passes left: no pulling, nothing outside the cone
        p3 = p.reshape(k, 3)
        p3[removed] = 0.0
        np.maximum(p3[:, 2], 0.0, out=p3[:, 2])
        pt = np.hypot(p3[:, 0], p3[:, 1])
        over = pt > mu * p3[:, 2]
        if over.any():
            direction[over] = p3[over, :2] / pt[over, None]
            p3[over, :2] *= (mu * p3[over, 2] / pt[over])[:, None]
            slipping |= over
        self._last_direction = direction
        return p, slipping

    def statistics(self) -> dict:
        """Counts since construction: steps with touching points, and how many of
        them needed the active-set loop (impacts, take-offs, slips)."""
        return {"solves": self.solves, "active_set_solves": self.active_set_solves}

    # ------------------------------------------------------------------ resolution

    def load_depth(self, weight: float) -> float:
        """Penetration (m) when ``weight`` (N) rests equally on all points."""
        n = max(self.points.n, 1)
        if self.k == 0:
            return self.max_penetration
        return (weight * math.sqrt(self.reference_depth) / (n * self.k)) ** (2.0 / 3.0)

    def resolution_ratio(self, delassus: np.ndarray, weight: float, dt: float) -> float:
        """Largest ``lambda(G^1/2 (K h^2 + 2 C h) G^1/2) / 4`` over the contact modes at
        the sink the weight produces: below 1 the rate resolves every contact mode
        (explicit integration would be stable too); above 1 the stiffest modes are
        faster than the step and the implicit step damps them numerically.
        ``delassus``: (3n, 3n) Delassus matrix, ground coordinates per point."""
        s = math.sqrt(max(self.load_depth(weight), self.reference_depth) / self.reference_depth)
        per_point = np.array([self.kt * s * dt**2 + 2 * self.ct * s * dt] * 2
                             + [1.5 * self.k * s * dt**2 + 2 * self.c * s * dt])
        a = np.sqrt(np.tile(per_point, self.points.n))
        return float(np.linalg.eigvalsh(a[:, None] * delassus * a[None, :])[-1] / 4.0)

    def resolution_note(self, delassus: np.ndarray, weight: float, dt: float) -> str | None:
        """A sentence for the log when the rate does not resolve the contact, else None."""
        ratio = self.resolution_ratio(delassus, weight, dt)
        if ratio < 1.0:
            return None
        return (f"contact: stiffness {self.k:g} N/m and damping {self.c:g} N*s/m (tangential "
                f"{self.kt:g}, {self.ct:g}) make the stiffest contact mode about "
                f"{math.sqrt(ratio):.2g}x faster than dt = {dt:g} s resolves; the step integrates "
                f"the contact implicitly, so it stays stable, and behaves as the stiffest contact "
                f"this rate resolves (numerically damped). Raise physics_rate_hz to resolve it.")


def _substituted_solve(A: np.ndarray, rhs: np.ndarray, removed: np.ndarray,
                       slipping: np.ndarray, mu_direction: np.ndarray) -> np.ndarray:
    """Impulses (3k,) solving ``A p = rhs`` on the rows of the points in contact,
    with ``p = 0`` for the removed points and ``p_t = mu d p_n`` for the slipping
    ones (their normal rows only). ``p = T z``: T maps the unknowns z (3 per
    sticking point, 1 per slipping one) to the impulses."""
    k = len(removed)
    T = np.zeros((3 * k, 3 * k))
    keep_rows = np.zeros(3 * k, dtype=bool)
    cols = []
    for i in np.flatnonzero(~removed):
        if slipping[i]:
            T[3 * i:3 * i + 2, 3 * i + 2] = mu_direction[i]
            T[3 * i + 2, 3 * i + 2] = 1.0
            keep_rows[3 * i + 2] = True
            cols.append(3 * i + 2)
        else:
            T[3 * i:3 * i + 3, 3 * i:3 * i + 3] = np.eye(3)
            keep_rows[3 * i:3 * i + 3] = True
            cols += [3 * i, 3 * i + 1, 3 * i + 2]
    T = T[:, cols]
    if not cols:
        return np.zeros(3 * k)
    z = np.linalg.solve(A[keep_rows].dot(T), rhs[keep_rows])
    return T.dot(z)


def reference_solve(points: ContactPoints, Minv: np.ndarray, v_free: np.ndarray,
                    u: np.ndarray, dt: float, params: dict[str, float],
                    reference_depth: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plain reference of :meth:`CompliantContact.solve`: per-point loops, the full
    symmetric ``Minv``, dense ``np.linalg.solve`` and the same active-set rule,
    written for reading, not speed. Same arguments and results."""
    k_n, c_n = params["stiffness"], params["damping"]
    k_t, c_t, mu = params["tangential_stiffness"], params["tangential_damping"], \
        params["friction_coefficient"]
    h, n = dt, points.n
    depth = points.depth
    force, u_next = np.zeros((n, 3)), np.zeros((2, n))
    J_n = points.jacobian_g()[2::3]  # normal rows
    reach = {i: depth[i] if depth[i] > 0.0 else depth[i] - h * float(J_n[i] @ v_free)
             for i in range(n)}
    touching = [i for i in range(n) if reach[i] > 0.0]
    if not touching or k_n * h + c_n <= 0.0:
        return v_free.copy(), force, u_next
    J = points.jacobian_g(np.array(touching))
    G = J @ Minv @ J.T
    diag, target = [], []
    for i in touching:
        s = math.sqrt(reach[i] / reference_depth)
        bt, bn = s * (k_t * h + c_t), s * (k_n * h + c_n)
        diag += [1 / (h * bt), 1 / (h * bt), 1 / (h * bn)]
        target += [-k_t * u[0, i] / (k_t * h + c_t), -k_t * u[1, i] / (k_t * h + c_t),
                   k_n * depth[i] / (k_n * h + c_n)]
    A = G + np.diag(diag)
    b = np.array(target) - J @ v_free
    m = len(touching)
    state = ["stick"] * m  # or "slip" (p_t = mu p_n dir[j]) or "off" (p = 0)
    direction = [None] * m
    flips = [0] * m
    p = np.zeros(3 * m)
    for _ in range(MAX_PASSES):
        # unknowns: 3 per sticking point, p_n per slipping one; equations: their rows
        columns, rows = [], []
        for j in range(m):
            if state[j] == "stick":
                for c in range(3):
                    col = np.zeros(3 * m)
                    col[3 * j + c] = 1.0
                    columns.append(col)
                    rows.append(3 * j + c)
            elif state[j] == "slip":
                col = np.zeros(3 * m)
                col[3 * j:3 * j + 2] = mu * direction[j]
                col[3 * j + 2] = 1.0
                columns.append(col)
                rows.append(3 * j + 2)
        p = np.zeros(3 * m)
        if columns:
            T = np.column_stack(columns)
            p = T @ np.linalg.solve(A[rows] @ T, b[rows])
        # friction first: sticking points leaving the cone slip, slipping points whose
        # end-of-step tangential velocity goes along their friction stick again
        w_next = J @ v_free + G @ p
        slips = [j for j in range(m) if state[j] == "stick" and flips[j] < MAX_FLIPS
                 and p[3 * j + 2] >= 0.0
                 and math.hypot(p[3 * j], p[3 * j + 1]) > mu * p[3 * j + 2]]
        backs = [j for j in range(m) if state[j] == "slip" and flips[j] < MAX_FLIPS
                 and float(w_next[3 * j:3 * j + 2] @ direction[j]) > 0.0]
        if slips or backs:
            for j in slips:
                state[j] = "slip"
                direction[j] = p[3 * j:3 * j + 2] / math.hypot(p[3 * j], p[3 * j + 1])
            for j in backs:
                state[j] = "stick"
            for j in slips + backs:
                flips[j] += 1
            continue
        pulling = [j for j in range(m) if state[j] != "off" and p[3 * j + 2] < 0.0]
        if not pulling:
            break
        for j in pulling:
            state[j] = "off"
    # what the passes left: no pulling, nothing outside the cone
    for j in range(m):
        if state[j] == "off":
            p[3 * j:3 * j + 3] = 0.0
        p[3 * j + 2] = max(p[3 * j + 2], 0.0)
        pt = math.hypot(p[3 * j], p[3 * j + 1])
        if pt > mu * p[3 * j + 2]:
            direction[j] = p[3 * j:3 * j + 2] / pt
            p[3 * j:3 * j + 2] *= mu * p[3 * j + 2] / pt
            state[j] = "slip"
    dv = Minv @ J.T @ p
    for j, i in enumerate(touching):
        force[i] = p[3 * j:3 * j + 3] / h
        if k_t <= 0.0 or state[j] == "off":
            continue
        if state[j] == "slip":
            s = math.sqrt(reach[i] / reference_depth)
            u_next[:, i] = (c_t / h * u[:, i] - force[i, :2] / s) / (k_t + c_t / h)
        else:
            u_next[:, i] = u[:, i] + h * (J[3 * j:3 * j + 3] @ (v_free + dv))[:2]
    return v_free + dv, force, u_next
