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
  slips: ``|f_t| = mu f_n``, opposing the slip ``v_t - u_dot`` (the point's
  motion over the deformed ground), and ``u`` relaxes at the rate that makes the
  spring-damper give exactly that force. Out of contact ``u = 0``;
* with ``contact.torsional_friction`` ``l > 0``, a torsional twist ``psi`` (a state,
  per point, the twist angle times ``l``, m) resisted the same way at the lever arm
  ``l``: the spin torque is ``l f_psi`` with ``f_psi = -s (k_t psi + c_t l w_n)``
  (``w_n`` the link's angular velocity about the normal) while it sticks and
  ``|f_psi| = f_n`` (the torque ``l f_n``) opposing the twist slip beyond.

Static sink: a load ``W`` shared by ``N`` points sinks ``d = (W sqrt(d_ref) / (N k))^(2/3)``.

**Stable by construction.** The springs and dampers are integrated with
backward Euler, all penetrating points together, with ``s`` frozen over the
step (linearly implicit). With ``h = dt``, point velocities ``w = J_c v`` and
the Delassus matrix ``G = J_c M^-1 J_c^T`` of the penetrating points, the
end-of-step velocity is ``w' = w_free + G p`` for impulses ``p = h f``, and
the law at the end of the step reads ``f = f0 - B w'`` with, per point
(rows t1, t2, n, and the twist row ``l w_n`` with torsional friction)::

    f0 = s [-k_t u_1, -k_t u_2, k d, -k_t psi]       B = s [k_t h + c_t, k_t h + c_t, k h + c, k_t h + c_t]

so the impulses solve one symmetric positive definite system::

    (G + (h B)^-1) p = B^-1 f0 - w_free

(the same form as a regularized rigid contact: ``(h B)^-1`` is the compliance,
``B^-1 f0`` a target velocity). The code solves it for the forces ``f = p / h``,
``A f = (h G + B^-1) f = B^-1 f0 - w_free``, so that no step rescales its result.

**Friction opposes the slip of the step's end.** On a tangential row the
residual ``c = A f - (B^-1 f0 - w_free) = w' + B^-1 (f - f0)`` is exactly the
backward-Euler slip velocity ``w'_t - (u' - u) / h`` of a point whose ground
relaxes as the law says (0 while it sticks). Coulomb's law is then, per point and
friction group (the two tangential rows, cone ``mu f_n``; the twist row, ``f_n``):
sticking, ``c_g = 0`` inside the cone, or slipping, ``c_g = -sigma_g f_g`` with
``sigma_g > 0`` on the cone, the force opposing the end-of-step slip whatever
its direction. For given ``sigma`` the forces solve ``(A + Sigma) f = rhs``
(``Sigma``: ``sigma_g`` on the group's rows), still symmetric positive definite;
the slipping groups' ``sigma`` are found by Newton's method on
``mu f_n / |f_t| - 1 = 0`` (linear in ``sigma`` for an isotropic point; 2-3
iterations from the last step's sigmas, which a sliding body barely changes), the
direction comes out of the solve; where Newton goes astray (a lightly loaded point
slipping fast, its normal force moved by the others' friction) the directions are
iterated to a fixed point instead, which converges fastest there, and Newton polishes
from there. A point whose normal force comes out negative leaves the system (the law never pulls); a sticking group
outside its cone slips, a slipping one whose ``sigma`` falls to 0 sticks again:
a few passes of this active-set loop, only at impacts, take-offs and slips.
Backward Euler is stable for every stiffness, damping and mass: no parameter
is refused for stability. Where the rate does not resolve the contact
(natural period below ``pi dt``) it behaves as the stiffest contact the step
resolves, with numerical damping; :meth:`CompliantContact.resolution_note`
says so once.

A plain per-point implementation of the same step, :func:`reference_solve`,
serves as the tests' reference for the vectorized one, and :func:`law_residual`
measures how far any forces are from the law.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg.lapack import dposv as _posv  # Cholesky solve of an SPD system
from scipy.linalg.lapack import dgesv as _gesv, dpotrf as _potrf, dpotrs as _potrs

from .. import compiled
from ..linalg import upper_sym_mm

from ..parameters import Param
from .base import SurfaceContact
from .islands import ISLAND_MIN_ROWS, IslandFinder, Islands
from .points import ContactPoints
from .shared import (FRICTION_COEFFICIENT, MAX_PENETRATION, TORSIONAL_FRICTION,
                     checked_live_values, live_names)

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
    TORSIONAL_FRICTION,
    Param("contact.reference_depth", "float", 1.0e-3, "m",
          "Penetration at which the nonlinear normal law has the secant stiffness "
          "contact.stiffness (Azad & Featherstone's sqrt(d) factor is sqrt(d/d_ref)).",
          lo=0.0, lo_open=True),
    MAX_PENETRATION,
)

#: names of the per-point contact states, indexed by the state code
STATUS_NAMES = ("none", "stick", "slip")

#: passes of the active-set loop (separation, slip and stick again); 2-3 suffice at an impact
MAX_PASSES = 12
#: changes of a group's stick/slip state (or of a point's contact) within one step, after
#: which it keeps it (a group whose slip reverses its motion and whose stick leaves the
#: cone would cycle); 4, as a point next to the cone's edge may flip twice while a
#: neighbour that pulls leaves (a chattering humanoid's foot: 2 were too few)
MAX_FLIPS = 4
#: Newton iterations on the slipping groups' compliances sigma, and their tolerance on
#: mu f_n / |f_t| - 1 (Newton converges quadratically: 2-4 iterations reach it)
MAX_NEWTON = 30
NEWTON_TOL = 1e-13
#: a slipping group whose point pulls gets its sigma raised tenfold (its friction, which
#: pulled the point by a sticking force far outside the cone, shrinks) up to this many
#: times its row's own diagonal; a point that pulls even then leaves the system
SIGMA_MAX = 1e8
#: halvings of a Newton step after which the step is given up
MAX_HALVINGS = 6
#: rows of the contact system up to which the compiled all-sticking solve runs (16 points
#: with 3 rows: every robot's feet). Its Cholesky is a scalar loop (m^3 / 6 products), so its
#: gain shrinks with m: 12-14 us a step at 24 rows (icub_stand), none measurable at 48 (the
#: humanoid lying face down: 229-239 us a step either way); beyond, LAPACK's blocked one
COMPILED_MAX_ROWS = 48


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
        #: (n,) torsional twist of each point (angle times contact.torsional_friction), m:
        #: the model's own state (the tangential u is the simulator's), replaced each step
        self._twist = np.zeros(n)
        self._twisted = False  # whether _twist may be nonzero (saves a reduction a step)
        #: (n, 2) the slip compliance sigma of each point's tangential and twist friction
        #: at the last step (0: it stuck): the next step's Newton starts from it
        self._sigma = np.zeros((n, 2))
        self._slipped = False
        self._all_stick = np.ones(n, dtype=np.int8)
        self._max_depth = -math.inf if n else 0.0
        #: steps with points in the solve, and those that needed the active-set loop
        self.solves = 0
        self.active_set_solves = 0
        self._coef_dt = None
        # buffers of the common step (every point in the solve), per rows per point (3, or
        # 4 with torsion): the system matrix and B^-1 per row; rewritten each step, never
        # handed out
        # (those of 4 rows made at the first step with torsional friction)
        self._buffers = {3: (np.zeros((3 * n, 3 * n)), np.zeros((3, n)))}
        self._islands = IslandFinder()  # the problem's islands (free objects)
        kernels = compiled.kernels()  # None: the plain path (WB_SIM_PLAIN=1, or not built)
        #: the all-sticking solve in one compiled call (wb_sim/_compiled.c), or None
        self._stick_solve = None if kernels is None else kernels.stick_solve
        self._kernels = kernels
        # the compiled selection's (of the candidates, c <= n), never handed out
        self._sel_scratch, self._ds_scratch = np.empty(n, dtype=np.int64), np.empty(n)
        self._F_scratch = np.empty(3 * n)
        #: whether the solve over a point set's candidates runs compiled (set per law)
        self._candidates_fused = False
        self._apply({k: params[k] for k in self.LIVE_PARAMETERS})

    # ------------------------------------------------------------------ parameters

    def parameters(self) -> dict[str, float]:
        """The live parameters, by their ``contact.`` names."""
        return {"stiffness": self.k, "damping": self.c, "tangential_stiffness": self.kt,
                "tangential_damping": self.ct, "friction_coefficient": self.mu,
                "torsional_friction": self.mu_t}

    def set_parameters(self, **values: float) -> None:
        """Change live contact constants (the others keep their values): all checked
        by their declarations first, then applied together (on a :class:`ConfigError`
        nothing changes). Any finite value >= 0 is stable; the next step uses them."""
        self._apply(checked_live_values(PARAMETERS, self.parameters(), values))

    def _apply(self, v) -> None:
        self.k, self.c = float(v["stiffness"]), float(v["damping"])
        self.kt, self.ct = float(v["tangential_stiffness"]), float(v["tangential_damping"])
        self.mu = float(v["friction_coefficient"])
        self.mu_t = float(v["torsional_friction"])
        self._cone = np.array([1.0, 1.0, -self.mu**2])  # . p^2 = |p_t|^2 - mu^2 p_n^2
        self._mu2 = self.mu**2
        self._coef_dt = None  # the per-row constants are rebuilt at the next step

    def initial_state(self) -> np.ndarray:
        """Tangential ground deformation of every point at rest, (2, n) m, rows
        along the plane's tangents t1, t2. Clears the torsional twist (kept here)."""
        self._twist, self._twisted = np.zeros(self.points.n), False
        self._sigma, self._slipped = np.zeros((self.points.n, 2)), False
        return np.zeros((2, self.points.n))

    def clear_deformation(self) -> None:
        """The torsional twist back to zero (the tangential deformation is the
        simulator's ``u``): a reset's trial step must leave none."""
        self._twist, self._twisted = np.zeros(self.points.n), False

    # ------------------------------------------------------------------ state

    def snapshot(self) -> tuple:
        """What the next solve and the readings depend on besides (q, v, u): the
        torsional twist, the last step's slip compliances (Newton's start) and the
        last depths and states. Cheap (references: the model never changes these
        arrays in place, it replaces them)."""
        return (self._twist, self._twisted, self._sigma, self._slipped, self.depth,
                self._max_depth, self._status)

    def restore(self, snap: tuple) -> None:
        """Back to a :meth:`snapshot`."""
        (self._twist, self._twisted, self._sigma, self._slipped, self.depth, self._max_depth,
         self._status) = snap

    def warm_start(self) -> np.ndarray:
        """(n, 3) the state the next step starts from besides ``u``, in the rigid
        model's layout (t1, t2, n): columns t1, t2 are 0 (the friction law needs no
        warm start: friction opposes each step's own slip; the slip compliances that
        start its Newton stay with this instance), column n holds the torsional twist.
        The whole-body contact hands it over between its two instances by point."""
        out = np.zeros((self.points.n, 3))
        out[:, 2] = self._twist
        return out

    def set_warm_start(self, rows: np.ndarray) -> None:
        """Take the torsional twist of the first points from ``rows`` (a
        :meth:`warm_start`'s, column 2); the others start untwisted."""
        twist = np.zeros(self.points.n)
        rows = np.asarray(rows)
        if rows.ndim == 2 and rows.shape[1] > 2:
            twist[:len(rows)] = rows[:, 2]
        self._twist, self._twisted = twist, bool(twist.any())
        self._sigma, self._slipped = np.zeros((self.points.n, 2)), False  # (a guess only)

    # ------------------------------------------------------------------ readings

    @property
    def max_depth(self) -> float:
        """Largest penetration at the last :meth:`solve`, m."""
        return self._max_depth

    @property
    def status(self) -> np.ndarray:
        """(n,) state code of each point at the last :meth:`solve`:
        0 no contact, 1 sticking, 2 slipping (see ``STATUS_NAMES``; the tangential
        friction's state)."""
        return self._status.copy()

    def status_kept(self) -> np.ndarray:
        # every solve replaces _status (a new array, or the constant _all_stick): no copy
        return self._status

    @property
    def twist(self) -> np.ndarray:
        """(n,) torsional twist of each point after the last :meth:`solve`, m (the
        twist angle times ``contact.torsional_friction``; 0 without it)."""
        return self._twist.copy()

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
            and the next deformation state (2, n). The torsional torques act on
            ``v_next``; the twist is kept here (:attr:`twist`).

        Layout: the contact rows are component-major, as the points' Jacobian is
        (all t1 rows, all t2 rows, all normal rows, then with torsional friction all
        twist rows), so the law is a few whole-row operations; the active-set loop
        (impacts, take-offs, slips) works point-major on a permuted copy.
        """
        pts = self.points
        n, h = pts.n, dt
        self.depth = d = pts.depth  # a new array each update: snapshots keep the old
        if h != self._coef_dt:
            self._coefficients(h)
        # the points that can enter this solve (sorted), where the point set knows them: the
        # others are at depth -inf with no rows (MergedPoints: of the lying humanoid's 215,
        # the 8 feet and the 43 collision slots within the margin); None: any point can
        cand = pts.candidates
        if cand is not None and len(cand) < n:
            if self._candidates_fused:  # the lines below to the results, while all stick
                out = self._stick_candidates(Minv_upper, v_free, u, d, cand, h, n)
                if out is not None:
                    return out
            dc = d.take(cand)
            self._max_depth = max(dc.tolist(), default=-math.inf)  # the others': -inf
            shallowest = -math.inf
        elif n <= 32:  # Python's min and max over a list: cheaper than numpy's for a few points
            cand = None
            depths = d.tolist()
            self._max_depth, shallowest = max(depths), min(depths)
        else:
            cand = None
            self._max_depth, shallowest = float(d.max()), float(d.min())
        if not self._normal_on:  # stiffness and damping both zero: the ground pushes nothing
            return self._nothing(n, v_free)
        torsion = self._frictional and self.mu_t > 0.0
        if shallowest > 0.0:  # every point touches: the common case of standing
            idx, k, Jg, dk, uk = None, n, pts.jacobian_component_major(), d, u
            ds = dk
        else:
            # a point above the ground whose free motion takes it below during the step takes
            # part too, at the depth it would reach (ds, for s): the solve then closes its gap
            # instead of finding it deep in the ground a step later, with a spring loaded by
            # the late detection (a stiff contact then launched the body back up)
            # over the candidates alone where the point set names them (the others stay out:
            # d = -inf), else over all points
            if cand is None:
                dd, w_n = d, pts.normal_velocity(v_free)
            else:
                dd, w_n = dc, pts.candidate_normal_velocity(v_free)
            d_free = dd - h * w_n
            # (take: a gather in a fraction of fancy indexing's time on these small arrays)
            sel = ((dd > 0.0) | (d_free > 0.0)).nonzero()[0]
            k = len(sel)
            if k == 0:
                return self._nothing(n, v_free)
            if cand is None:
                idx, Jg = sel, pts.jacobian_component_major(sel)
            else:
                idx, Jg = cand.take(sel), pts.candidate_jacobian(sel)
            dk = dd.take(sel)
            ds = np.where(dk > 0.0, dk, d_free.take(sel))
            uk = u.take(idx, axis=1)
        r = 3
        if torsion:  # the twist rows l w_n after the normal rows
            r = 4
            Jg = np.concatenate([Jg, pts.torsion_jacobian(idx) * self.mu_t])
        self.solves += 1
        # unknowns: the forces f = p / h (N), so the system is h (G + (h B)^-1) f = rhs,
        # i.e. (J h M^-1 J^T + B^-1) f = B^-1 f0 - w_free: h rides on BLAS's scale factor
        # with free objects, the islands of the problem (docs/performance.md): each island's
        # block of h M^-1 J^T, J M^-1 J^T and its solve alone (the other entries: exact zeros)
        islands = self._islands.find(Minv_upper, Jg, r, k) if r * k >= ISLAND_MIN_ROWS else None
        if (islands is None and r * k <= COMPILED_MAX_ROWS and self._springy
                and self._stick_solve is not None):
            out = self._stick_compiled(Minv_upper, Jg, v_free, uk, dk, ds, h, torsion, n, idx)
            if out is not None:
                return out  # else a point pulls or slips: the plain path below, active set
        if islands is None:
            MinvJt = upper_sym_mm(Minv_upper, Jg.T, h)  # (nv, rk): h M^-1 J^T
        else:
            blocks = islands.blocks(Minv_upper, Jg, h)
        # B^-1 per row: B = s (k h + c) with s = sqrt(d / d_ref), so B^-1 = coef d^-1/2
        coef = self._diag_coef[r]
        if idx is None:
            buf = self._buffers.get(r)
            if buf is None:
                buf = self._buffers[r] = (np.zeros((r * n, r * n)), np.zeros((r, n)))
            A_buf, diag_rows = buf
            np.divide(coef, np.sqrt(ds), diag_rows)
            diag = diag_rows.reshape(-1)
        else:
            diag = np.divide(coef, np.sqrt(ds)).reshape(-1)  # (r, k) -> rk
        if islands is None:
            A = Jg.dot(MinvJt, A_buf) if idx is None else Jg.dot(MinvJt)
            A.reshape(-1)[::r * k + 1] += diag
        else:  # block-diagonal: formed only if the active-set loop needs it whole
            A = None
        target = np.empty((r, k))  # B^-1 f0, m/s
        np.multiply(uk, self._target_t, out=target[:2])
        np.multiply(dk, self._target_n, out=target[2])
        if torsion:
            twist_k = self._twist if idx is None else self._twist[idx]
            np.multiply(twist_k, self._target_t, out=target[3])
        rhs = target.reshape(-1) - Jg.dot(v_free)  # B^-1 f0 - w_free, component-major rows
        f = None
        if self._frictional:
            if islands is None:
                _, f, info = _posv(A, rhs)
            else:  # each island alone: the same system, its blocks factored apart
                f, info = np.empty(r * k), 0
                for rows, _, _, _, Ab in blocks:
                    if rows.ndim == 1:
                        Ab.reshape(-1)[::len(rows) + 1] += diag[rows]
                        _, f[rows], bad = _posv(Ab, rhs[rows])
                        info = info or bad
                    else:  # one-object islands stacked (SPD: an LU solve of each)
                        q = rows.shape[1]
                        Ab.reshape(len(rows), -1)[:, ::q + 1] += diag[rows]
                        try:
                            f[rows] = np.linalg.solve(Ab, rhs[rows][:, :, None])[:, :, 0]
                        except np.linalg.LinAlgError:
                            info = info or 1
            F = f.reshape(r, k)
            if (info != 0 or min(F[2].tolist()) <= 0.0
                    or max(self._cone.dot(F[:3] * F[:3]).tolist()) > 0.0
                    or (torsion and max((F[3] * F[3] - F[2] * F[2]).tolist()) > 0.0)):
                f = None  # outside a cone, pulling, or numerically singular: the loop
        if f is None:
            self.active_set_solves += 1
            if A is None:  # the islands' blocks (diagonal added above if frictional)
                A = Islands.assemble(blocks, r * k, None if self._frictional else diag,
                                     A_buf if idx is None else None)
            f, slipping = self._general(A, rhs, k, r, f, idx)
            F = f.reshape(r, k)
            loaded = F[2] > 0.0
            codes = (loaded * (1 + (loaded & slipping[0]))).astype(np.int8)
        else:
            codes, slipping = None, None  # all sticking
            if self._slipped:
                self._sigma, self._slipped = np.zeros((n, 2)), False
        v_next = MinvJt.dot(f) if islands is None else Islands.velocity_change(blocks, f, len(v_free))
        v_next += v_free
        self._generalized = (Jg, f, h)  # J_c^T p = h J^T f, computed when asked
        if codes is None and idx is None:
            self._status = self._all_stick
            force = F[:3].T
        else:
            self._status = status = np.zeros(n, dtype=np.int8)
            status[self._all if idx is None else idx] = 1 if codes is None else codes
            force = np.zeros((n, 3))
            force[self._all if idx is None else idx] = F[:3].T
        if torsion:
            self._twist = self._next_deformation(Jg[3 * k:], v_next, twist_k, F[3:], ds, codes,
                                                 None if slipping is None else slipping[1],
                                                 idx, n, h)[0]
            self._twisted = True
        elif self._twisted:
            self._twist, self._twisted = np.zeros(n), False  # torsion off: no twist is kept
        if not self._springy:
            return v_next, force, np.zeros((2, n))
        if codes is None and idx is None:  # all sticking: u' = u + h w'_t (the common case)
            un = Jg[:2 * k].dot(v_next).reshape(2, k)
            un *= h
            un += uk
            return v_next, force, un
        u_next = self._next_deformation(Jg[:2 * k], v_next, uk, F[:2], ds, codes,
                                        None if slipping is None else slipping[0], idx, n, h)
        return v_next, force, u_next

    def _stick_compiled(self, Minv_upper, Jg, v_free, uk, dk, ds, h, torsion, n, idx):
        """:meth:`solve`'s all-sticking branch in one compiled call (wb_sim/_compiled.c; that
        branch stays its reference), for the points ``idx`` (None: all n): ``(v_next, force,
        u_next)`` and the same state as the branch leaves, or None where a point pulls,
        leaves its cone or the system is singular (nothing changed then)."""
        r, k = (4 if torsion else 3), len(dk)
        twist_k = (self._twist if idx is None else self._twist[idx]) if torsion else None
        v_next, F, x_next = np.empty(len(v_free)), np.empty((r, k)), np.empty((r - 1, k))
        ct, cn, tt, tn = self._stick_coefficients
        if self._stick_solve(Minv_upper, Jg, v_free, uk, dk, ds, twist_k, ct, cn, tt, tn,
                             self._mu2, h, v_next, F, x_next):
            return None
        if self._slipped:
            self._sigma, self._slipped = np.zeros((n, 2)), False
        self._generalized = (Jg, F.reshape(-1), h)
        if idx is None:
            self._status, force, x_all = self._all_stick, F[:3].T, x_next
        else:  # the others: no contact, no force, no deformation
            self._status = status = np.zeros(n, dtype=np.int8)
            status[idx] = 1
            force = np.zeros((n, 3))
            force[idx] = F[:3].T
            x_all = np.zeros((r - 1, n))
            x_all[:, idx] = x_next
        if torsion:
            self._twist, self._twisted = x_all[2], True
            return v_next, force, x_all[:2]
        if self._twisted:
            self._twist, self._twisted = np.zeros(n), False
        return v_next, force, x_all

    def _stick_candidates(self, Minv_upper, v_free, u, d, cand, h, n):
        """:meth:`solve` over the point set's candidates ``cand`` (``d``: all depths) in one
        compiled call, from the selection of the points in the solve to the results
        (wb_sim/_compiled.c's ``stick_solve_candidates``; :meth:`solve`'s lines stay its
        reference): ``(v_next, force, u_next)`` and the same state as those lines leave, or
        None where a point pulls, slips or the system is singular or beyond the kernel's rows
        (nothing changed then: the lines run)."""
        pts = self.points
        sel = self._sel_scratch  # its first k entries rewritten each call (and ds's)
        rows = pts.candidate_rows
        v_next, F = np.empty(len(v_free)), self._F_scratch  # F: its first 3 k entries
        force, x, status = np.empty((n, 3)), np.empty((2, n)), np.empty(n, dtype=np.int8)
        ct, cn, tt, tn = self._stick_coefficients
        code, k, max_depth = self._kernels.stick_solve_candidates(
            Minv_upper, rows, v_free, d, pts.candidate_normal_velocity(v_free), u, cand, ct,
            cn, tt, tn, self._mu2, h, COMPILED_MAX_ROWS, v_next, F, sel, self._ds_scratch,
            force, x, status)
        if code == 4:  # no point touches, now or after the free motion
            self._max_depth = max_depth
            return self._nothing(n, v_free)
        if code:
            return None
        self._max_depth = max_depth
        self.solves += 1
        if self._slipped:
            self._sigma, self._slipped = np.zeros((n, 2)), False
        # J_c^T p's rows gathered when asked, as the lines gather them (the scratch arrays
        # stay as this call left them until the next solve: generalized_impulse's validity)
        self._generalized = ((rows, sel[:k]), F[:3 * k], h)
        self._status = status
        if self._twisted:
            self._twist, self._twisted = np.zeros(n), False
        return v_next, force, x

    def _next_deformation(self, J_rows, v_next, x, F_rows, ds, codes, slipping, idx, n, h):
        """The next deformation (m, rows like ``x``: (2, k) tangential or (1, k) twist)
        of the solved points, scattered over all n points: sticking, ``x' = x + h w'``
        (the spring followed the point); slipping, the deformation whose spring-damper
        gives the slip force, backward Euler of ``-f / s = k_t x' + c_t (x' - x) / h``
        (stable for every c_t: explicit Euler of it diverged below c_t = k_t h / 2);
        out of contact, 0."""
        rows = len(J_rows) // max(len(ds), 1)
        k = len(ds)
        xn = J_rows.dot(v_next).reshape(rows, k)
        xn *= h
        xn += x
        if codes is not None:
            slip = slipping & (codes > 0)
            if slip.any():
                inv_s = np.sqrt(self.reference_depth / ds)
                relaxed = (x * (self.ct / h) - F_rows * inv_s) / (self.kt + self.ct / h)
                xn[:, slip] = relaxed[:, slip]
            xn[:, codes == 0] = 0.0
        if not self._springy:
            xn[...] = 0.0
        if idx is None:
            return xn
        out = np.zeros((rows, n))
        out[:, idx] = xn
        return out

    def _nothing(self, n: int, v_free: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._status = np.zeros(n, dtype=np.int8)
        self._generalized = None
        if self._twisted:
            self._twist, self._twisted = np.zeros(n), False
        return v_free, np.zeros((n, 3)), np.zeros((2, n))

    def _coefficients(self, h: float) -> None:
        """Per-row constants of the law at step h: B^-1 d^1/2 and B^-1 f0 / (u or d)."""
        bn, bt = self.k * h + self.c, self.kt * h + self.ct
        self._normal_on = bn > 0.0
        self._frictional = bt > 0.0 and self.mu > 0.0
        self._springy = self._frictional and self.kt > 0.0
        root = math.sqrt(self.reference_depth)
        ct = root / bt if bt > 0 else 0.0
        # rows t1, t2, n and the twist row (the tangential law at the lever arm), by the
        # number of rows per point
        four = np.array([[ct], [ct], [root / bn if bn > 0 else 0.0], [ct]])
        self._diag_coef = {3: four[:3].copy(), 4: four}
        self._target_t = -self.kt / bt if self._frictional else 0.0
        self._target_n = self.k / bn if bn > 0 else 0.0
        self._stick_coefficients = (float(four[0, 0]), float(four[2, 0]), self._target_t,
                                    self._target_n)
        # the kernel solves the all-sticking system of a springy law without torsion
        self._candidates_fused = (self._kernels is not None and self._normal_on
                                  and self._springy and self.mu_t <= 0.0)
        self._coef_dt = h

    def _general(self, A, rhs, k, r, f_stick, idx
                 ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray | None]]:
        """Forces (rk,) component-major and the slipping masks ((k,) tangential, (k,)
        twist or None), through the point-major active-set loop (A f = rhs;
        ``f_stick``: its all-sticking solution, or None where it failed); keeps each
        slipping group's sigma for the next step's start."""
        perm = (np.arange(r)[None, :] * k + np.arange(k)[:, None]).reshape(-1)
        A_pm, rhs_pm = A[np.ix_(perm, perm)], rhs[perm]
        if self._frictional:
            warm = (self._sigma if idx is None else self._sigma[idx]) if self._slipped else None
            p_pm, slipping, sigma = self._active_set(
                A_pm, rhs_pm, k, r, None if f_stick is None else f_stick[perm], warm)
            slips = (slipping[:, 0], slipping[:, 1] if r == 4 else None)
            keep = np.zeros((self.points.n, 2))  # a new array: snapshots keep the old
            keep[self._all if idx is None else idx, :sigma.shape[1]] = sigma * slipping
            self._sigma, self._slipped = keep, bool(slipping.any())
        else:  # frictionless: only the normal rows; a loaded point slides freely
            An = A[2 * k:3 * k, 2 * k:3 * k].copy()
            p_pm = np.zeros(r * k)
            p_pm[2::r] = self._normal_only(An, rhs[2 * k:3 * k])
            slips = (np.ones(k, dtype=bool), None)
        p = np.empty(r * k)
        p[perm] = p_pm
        return p, slips

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

    def _active_set(self, A: np.ndarray, rhs: np.ndarray, k: int, r: int,
                    p: np.ndarray | None = None, warm: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Forces ``p`` (rk,) point-major (rows t1, t2, n[, twist] per point) and the
        (k, groups) slipping mask, with the unilateral and Coulomb conditions, by an
        active-set loop over the friction groups (the tangential rows, cone
        ``mu p_n``; the twist row, cone ``p_n``). A slipping group has the
        compliance ``sigma > 0`` on its rows (its end-of-step slip is ``-sigma``
        times its force: friction opposes it) and sits on its cone
        (:func:`_slip_solve` finds the sigmas). Each pass first settles friction: a
        sticking group outside its cone slips; a slipping group whose sigma fell
        to 0 (inside the cone without slipping) sticks again; a point that pulls with
        all its friction slipping leaves. Then a point whose normal force is negative
        leaves the system, and one left out that the ground would have to pull back
        out (normal slip below 0 without force) comes back; a point changes its
        stick/slip state or its contact at most ``MAX_FLIPS`` times a step.
        ``p``: the all-sticking solution if known; ``warm``: (k, groups) the sigmas of
        the last step (0 where it stuck), Newton's start for a group that slipped then
        (a sliding body's barely change). Returns (p, slipping, sigma)."""
        groups = _groups(r, self.mu)
        ng = len(groups)
        off = np.zeros(k, dtype=bool)
        slipping = np.zeros((k, ng), dtype=bool)
        sigma = np.zeros((k, ng))
        flips = np.zeros((k, ng), dtype=int)
        lifts = np.zeros(k, dtype=int)
        if p is None:
            p = solve_spd(A, rhs)
        coefs = np.array([c for _, c in groups])
        # each group's own diagonal (its compliance and mobility), for sigma's first guess
        own = A.diagonal().reshape(k, r)
        own = np.column_stack([own[:, rows].mean(axis=1) for rows, _ in groups])
        normal_rows = r * np.arange(k) + 2
        if warm is not None:  # the groups that slipped at the last step slip first
            slipping = warm[:, :ng] > 0.0
            if slipping.any():
                sigma = np.where(slipping, warm[:, :ng], 0.0)
                p = _slip_solve(A, rhs, off, slipping, sigma, groups, k, r)
        for _ in range(MAX_PASSES):
            P = p.reshape(k, r)
            fn = P[:, 2]
            mag = _group_magnitudes(P, groups)
            bound = fn[:, None] * coefs
            free = flips < MAX_FLIPS  # a group that flipped twice keeps its state: no cycling
            # outside the cone: beyond mu p_n, or any friction on a point that pulls (often
            # pulled by a sticking friction far outside its cone: slipping may let it push)
            new = free & ~slipping & ~off[:, None] & (mag > np.maximum(bound, 0.0)) & (mag > 0.0)
            back = free & slipping & (sigma <= 0.0)
            # a point that pulls while all its friction slips (made as small as it helps)
            # leaves at once: its pull would distort the others' friction
            drop = ~off & (fn < 0.0) & slipping.all(axis=1) & (lifts < MAX_FLIPS)
            if new.any() or back.any() or drop.any():
                # first guess: an isotropic point alone, |f| = |f_stick| w / (w + sigma); where
                # the group slipped at the last step, its sigma then
                start = own * np.abs(mag / np.maximum(np.abs(bound), 1e-300) - 1.0)
                if warm is not None:
                    start = np.where(warm[:, :ng] > 0.0, warm[:, :ng], start)
                sigma[new] = start[new]
                sigma[back] = 0.0
                slipping = (slipping | new) & ~back
                flips += new | back
                lifts += drop
                off |= drop
                slipping[off] = False
                sigma[off] = 0.0
            else:
                # a point that pulls leaves; one left out that the ground would have to pull
                # back out (its normal slip c_n < 0 without force: it left while a sticking
                # friction far outside its cone pulled it) comes back
                pulling = ~off & (fn < 0.0)
                back_in = off & (lifts < MAX_FLIPS)
                if back_in.any():
                    back_in &= A[normal_rows].dot(p) - rhs[normal_rows] < 0.0
                if not (pulling.any() or back_in.any()):
                    break
                lifts += pulling | back_in
                off = (off | pulling) & ~back_in
                slipping[off] = False
                sigma[off] = 0.0
            p = _slip_solve(A, rhs, off, slipping, sigma, groups, k, r)
        # whatever the passes left: no pulling, nothing outside a cone
        P = p.reshape(k, r)
        P[off] = 0.0
        np.maximum(P[:, 2], 0.0, out=P[:, 2])
        mag = _group_magnitudes(P, groups)
        for g, (rows, c) in enumerate(groups):
            over = mag[:, g] > c * P[:, 2]
            if over.any():
                scale = c * P[over, 2] / mag[over, g]
                P[np.ix_(np.flatnonzero(over), rows)] *= scale[:, None]
                slipping[over, g] = True
        slipping[off] = False
        return p, slipping, sigma

    def solver_health(self, residual: bool = True) -> dict[str, float]:
        """Nothing a window can judge but the count of solves: the implicit step has no
        iterative residual, and the ground stores and returns energy elastically
        (``residual``, ``impulse_work``: NaN, not measured; no ``nonconverged``)."""
        return {"residual": math.nan, "impulse_work": math.nan, "solves": self.solves}

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


def _groups(r: int, mu: float) -> list[tuple[list[int], float]]:
    """The friction groups of a point with r rows (t1, t2, n[, twist]): (rows, cone
    coefficient) for the tangential rows and, with torsional friction, the twist row
    (its row is scaled by the torsional length, so its cone is p_n)."""
    return [([0, 1], mu)] + ([([3], 1.0)] if r == 4 else [])


def _group_magnitudes(P: np.ndarray, groups) -> np.ndarray:
    """(k, groups) |f_g| of point-major forces P (k, r)."""
    tangential = np.hypot(P[:, 0], P[:, 1])
    if len(groups) == 1:
        return tangential[:, None]
    return np.column_stack([tangential, np.abs(P[:, 3])])


def _slip_solve(A: np.ndarray, rhs: np.ndarray, off: np.ndarray, slipping: np.ndarray,
                sigma: np.ndarray, groups, k: int, r: int) -> np.ndarray:
    """Forces (rk,) point-major solving ``(A + Sigma) p = rhs`` on the rows of the
    points in contact (``p = 0`` for the others), ``Sigma`` holding each slipping
    group's compliance ``sigma`` (updated in place) on its rows, with the sigmas
    found such that every slipping group sits on its cone:
    ``psi_g = b_g / |p_g| - 1 = 0`` with the bound ``b_g = c_g p_n`` (``c_g``: mu,
    or 1 for the twist row). The derivatives come from the same Cholesky factor:
    ``dp / dsigma_g = -(A + Sigma)^-1 E_g p``, ``E_g`` keeping the group's rows.

    Newton's method on the sigmas (2-4 iterations, the common case), a step that
    makes ``|psi|`` grow or a point pull halved. Where the start pulls a point (a
    sticking friction far outside its cone pulled it), its sigma grows tenfold until
    it pushes, up to ``SIGMA_MAX`` times its own diagonal (then it leaves: the active
    set). Where Newton goes astray (a lightly loaded point slipping fast, its normal
    force moved by the others' friction: sigma spans decades), the friction directions
    are found as a fixed point instead (:func:`_direction_solve`), which converges
    fastest there, and Newton polishes from its sigmas. A sigma that reaches 0 stays
    there (the group sticks again)."""
    keep = np.flatnonzero(np.repeat(~off, r))
    p = np.zeros(r * k)
    if not len(keep):
        return p
    pos = np.full(r * k, -1)
    pos[keep] = np.arange(len(keep))
    Ak, bk = A[np.ix_(keep, keep)], rhs[keep]
    # the slipping groups: (point, group) with their rows and normal row in the kept system
    active = [(i, g) for i in range(k) for g in range(len(groups)) if slipping[i, g]]
    if not active:
        p[keep] = solve_spd(Ak, bk)
        return p
    rows = [pos[r * i + np.array(groups[g][0])] for i, g in active]
    normal = np.array([pos[r * i + 2] for i, _ in active])
    coef = np.array([groups[g][1] for _, g in active])
    m = len(active)
    # each group's rows as two columns (a one-row group: its row twice, counted once)
    first = np.array([ra[0] for ra in rows])
    second = np.array([ra[-1] for ra in rows])
    two = (second != first).astype(float)
    w = 0.5 * (Ak[first, first] + Ak[second, second])  # each group's own diagonal
    M = np.empty_like(Ak)
    diag = M.reshape(-1)[::len(bk) + 1]  # a view of M's diagonal
    ones = np.arange(m)

    def solve_at(x):
        """(forces, Cholesky factor or None) at the sigmas x."""
        M[...] = Ak
        diag[first] += x
        diag[second] += x * two
        c, info = _potrf(M, lower=0)
        if info != 0:  # numerically singular: the plain solve
            return np.linalg.lstsq(M, bk, rcond=None)[0], None
        return _potrs(c, bk)[0], c

    def newton(x):
        """Sigmas with psi = 0 by Newton's method, a step that makes |psi| grow (or a
        point pull) halved: (sigmas, forces or None, converged)."""
        base, halvings = None, 0
        for _ in range(MAX_NEWTON):
            f, c = solve_at(x)
            f1, f2 = f[first], f[second] * two
            mag = np.maximum(np.sqrt(f1 * f1 + f2 * f2), 1e-300)
            fn = f[normal]
            b = coef * fn
            psi = b / mag - 1.0
            pulls = fn <= 0.0
            merit = math.inf if pulls.any() or c is None else float(psi.dot(psi))
            if base is not None and merit >= base[1]:  # the step made it worse: shorter
                if halvings == MAX_HALVINGS:
                    return base[0], None, False
                halvings += 1
                x = np.maximum(base[0] + base[2] * 0.5 ** halvings, 0.0)
                continue
            if merit <= NEWTON_TOL * NEWTON_TOL:
                return x, f, True
            if c is None:
                return x, f, False
            if pulls.any():  # the start pulls a point: less friction on it
                grow = pulls & (x < SIGMA_MAX * w)  # with next to none it leaves (active set)
                if not grow.any():
                    return x, f, False
                x = np.where(grow, 10.0 * x + w, x)
                continue
            E = np.zeros((len(f), m))
            E[first, ones] = f1
            E[second, ones] += f2
            D = _potrs(c, E)[0]  # dp / dsigma_a = -D[:, a]
            dmag = -(f1[:, None] * D[first] + f2[:, None] * D[second]) / mag[:, None]
            # d psi / d sigma through |p_g| and through p_n
            J = (-b[:, None] * dmag - coef[:, None] * D[normal] * mag[:, None]) \
                / (mag * mag)[:, None]
            _, _, step, info = _gesv(J, -psi)
            if info != 0:  # singular
                return x, f, False
            base, halvings = (x, merit, step), 0
            x = np.maximum(x + step, 0.0)
        return x, None, False

    x0 = np.array([sigma[i, g] for i, g in active])
    x, f, done = newton(x0)
    if not done:  # Newton went astray: the friction directions as a fixed point, ...
        f, x = _direction_solve(Ak, bk, rows, normal, coef, solve_at(x0)[0])
        if min(x.tolist()) > 0.0:  # ... and Newton again from there, to polish
            x_n, f_n, done = newton(x)
            if done:
                x, f = x_n, f_n
    if f is None:
        f = solve_at(x)[0]
    for a, (i, g) in enumerate(active):
        sigma[i, g] = x[a]
    p[keep] = f
    return p


def _direction_solve(Ak: np.ndarray, bk: np.ndarray, rows, normal: np.ndarray,
                     coef: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Forces and sigmas of the slipping groups (``rows``: their rows, ``normal``
    their points' normal rows, ``coef`` their cone coefficients, in the system
    ``Ak f = bk`` of the points in contact) with each slipping group's force on its
    cone along a direction ``d``, ``f_g = c_g p_n d_g`` (its rows' equations dropped,
    its point's normal force the unknown), and ``d`` the direction opposing its
    slip ``c_g = (Ak f - bk)_g``, by fixed-point iteration from the directions of
    ``f``. Contracts fast where the slip is fast (it barely turns with the forces).
    A group whose slip comes out along its friction gets sigma 0 (it sticks: the
    active set), a converged one ``sigma = |c_g| / |f_g|``."""
    m, n = len(rows), len(bk)
    dirs = []
    for ra in rows:
        norm = math.sqrt(float(f[ra].dot(f[ra])))
        dirs.append(f[ra] / norm if norm > 0.0 else np.eye(len(ra))[0])
    grouped = np.zeros(n, dtype=bool)
    for ra in rows:
        grouped[ra] = True
    eq = np.flatnonzero(~grouped)  # the equations kept: all but the slipping groups' rows
    sigma = np.zeros(m)
    for _ in range(MAX_NEWTON):
        T = np.eye(n)[:, eq]  # unknowns: every row but the slipping groups', ...
        col = {row: j for j, row in enumerate(eq)}
        for a, ra in enumerate(rows):  # ... whose forces follow their point's normal force
            T[ra, col[normal[a]]] = coef[a] * dirs[a]
        z = np.linalg.solve(Ak[eq].dot(T), bk[eq])
        f = T.dot(z)
        c = Ak.dot(f) - bk
        fn = f[normal]
        if min(fn.tolist()) <= 0.0:  # a slipping point pulls: the active set takes it out
            break
        turn, along = 0.0, False
        for a, ra in enumerate(rows):
            slip = c[ra]
            speed = math.sqrt(float(slip.dot(slip)))
            if speed == 0.0:
                continue
            new = -slip / speed
            along |= float(new.dot(dirs[a])) < 0.0  # the slip goes with the friction
            turn = max(turn, float(np.abs(new - dirs[a]).max()))
            dirs[a] = new
        if along or turn <= NEWTON_TOL:
            break
    for a, ra in enumerate(rows):
        speed = math.sqrt(float(c[ra].dot(c[ra])))
        if f[normal[a]] <= 0.0:  # (pulls: a sigma that keeps it slipping, the active set)
            sigma[a] = max(speed / max(abs(coef[a] * f[normal[a]]), 1e-300), 1e-300)
        elif float(c[ra].dot(f[ra])) > 0.0:  # slipping along its friction: it sticks
            sigma[a] = 0.0
        else:
            sigma[a] = speed / (coef[a] * f[normal[a]])
    return f, sigma


def law_residual(points: ContactPoints, Minv: np.ndarray, v_free: np.ndarray, u: np.ndarray,
                 dt: float, params: dict[str, float], reference_depth: float,
                 force: np.ndarray, twist: np.ndarray | None = None,
                 torque: np.ndarray | None = None) -> float:
    """How far point forces (n, 3) (and, with torsional friction, the spin torques
    (n,) N*m at the twist ``twist``) are from the compliant step's law, in m/s: per
    point, built plainly, the slip velocity ``c = w' + B^-1 (f - f0)`` of each
    friction group must vanish while it sticks inside its cone, and oppose the
    force on the cone while it slips; the normal row's ``c`` must vanish under a
    positive force, and a point without force must not be pulled into the ground
    (``c_n >= 0``). 0 exactly at the law's solution; a plain check independent of
    how the forces were found."""
    k_n, c_n = params["stiffness"], params["damping"]
    k_t, c_t, mu = params["tangential_stiffness"], params["tangential_damping"], \
        params["friction_coefficient"]
    ell = params.get("torsional_friction", 0.0)
    h, n = dt, points.n
    depth = points.depth
    J_all = points.jacobian_g()
    J_w = points.torsion_jacobian() if ell > 0.0 else np.zeros((n, len(v_free)))
    tau = np.zeros(n) if torque is None else torque
    gen = force.reshape(-1) @ J_all + tau @ J_w  # generalized impulse / h
    v_next = v_free + h * Minv @ gen
    worst = 0.0
    for i in range(n):
        reach = depth[i] if depth[i] > 0.0 else depth[i] - h * float(J_all[3 * i + 2] @ v_free)
        w = J_all[3 * i:3 * i + 3] @ v_next
        if reach <= 0.0:
            worst = max(worst, float(np.abs(force[i]).max()) * 1e3)  # no force off the ground
            continue
        s = math.sqrt(reach / reference_depth)
        bt, bn = s * (k_t * h + c_t), s * (k_n * h + c_n)
        f0 = [-s * k_t * u[0, i], -s * k_t * u[1, i], s * k_n * depth[i]]
        c = [w[a] + (force[i, a] - f0[a]) / b for a, b in ((0, bt), (1, bt), (2, bn))]
        if force[i, 2] > 0.0:
            worst = max(worst, abs(c[2]))
        else:
            worst = max(worst, max(0.0, -c[2]), abs(force[i]).max() / bn)
        groups = [(np.array(c[:2]), force[i, :2], mu * force[i, 2])]
        if ell > 0.0 and mu > 0.0:
            f_psi = tau[i] / ell
            c_psi = ell * float(J_w[i] @ v_next) + (f_psi + s * k_t * twist[i]) / bt
            groups.append((np.array([c_psi]), np.array([f_psi]), force[i, 2]))
        for cg, fg, bound in groups:
            mag = float(np.linalg.norm(fg))
            worst = max(worst, max(0.0, mag - bound) / bt)  # inside the cone
            if mag < bound * (1.0 - 1e-9):  # sticking: no slip
                worst = max(worst, float(np.linalg.norm(cg)))
            elif mag > 0.0:  # on the cone: the slip opposes the force (or is zero)
                # the part of c that does not oppose f: c + |c| f/|f| = 0 exactly then
                worst = max(worst, float(np.linalg.norm(cg + np.linalg.norm(cg) * fg / mag)))
    return worst


def reference_solve(points: ContactPoints, Minv: np.ndarray, v_free: np.ndarray,
                    u: np.ndarray, dt: float, params: dict[str, float],
                    reference_depth: float, twist: np.ndarray | None = None) -> tuple:
    """Plain reference of :meth:`CompliantContact.solve`: per-point loops, the full
    symmetric ``Minv``, dense ``np.linalg.solve`` and the same active-set rule
    (friction groups sticking, or slipping with a compliance sigma found by Newton's
    method so that they sit on their cone), written for reading, not speed. Same
    arguments and results; with ``twist`` (the (n,) twist state, for
    ``params["torsional_friction"] > 0``) the next twist (n,) follows them."""
    out = _reference_solve(points, Minv, v_free, u, dt, params, reference_depth, twist)
    return out if twist is not None else out[:3]


def _reference_solve(points, Minv, v_free, u, dt, params, reference_depth, twist):
    k_n, c_n = params["stiffness"], params["damping"]
    k_t, c_t, mu = params["tangential_stiffness"], params["tangential_damping"], \
        params["friction_coefficient"]
    ell = params.get("torsional_friction", 0.0)
    h, n = dt, points.n
    twist = np.zeros(n) if twist is None else twist
    depth = points.depth
    force, u_next, twist_next = np.zeros((n, 3)), np.zeros((2, n)), np.zeros(n)
    J_n = points.jacobian_g()[2::3]  # normal rows
    reach = {i: depth[i] if depth[i] > 0.0 else depth[i] - h * float(J_n[i] @ v_free)
             for i in range(n)}
    touching = [i for i in range(n) if reach[i] > 0.0]
    if not touching or k_n * h + c_n <= 0.0:
        return v_free.copy(), force, u_next, twist_next
    frictional = k_t * h + c_t > 0.0 and mu > 0.0
    torsion = frictional and ell > 0.0
    r = 4 if torsion else 3  # rows per point: t1, t2, n and the twist row ell w_n
    J3 = points.jacobian_g(np.array(touching))
    J_w = points.torsion_jacobian(np.array(touching))
    J = np.zeros((r * len(touching), len(v_free)))
    for j in range(len(touching)):
        J[r * j:r * j + 3] = J3[3 * j:3 * j + 3]
        if torsion:
            J[r * j + 3] = ell * J_w[j]
    G = J @ Minv @ J.T
    diag, target = [], []
    for i in touching:
        s = math.sqrt(reach[i] / reference_depth)
        bt, bn = s * (k_t * h + c_t), s * (k_n * h + c_n)
        inv_t = 1 / (h * bt) if bt > 0 else 0.0
        diag += [inv_t, inv_t, 1 / (h * bn)] + ([inv_t] if torsion else [])
        tt = -k_t / (k_t * h + c_t) if frictional else 0.0
        target += [tt * u[0, i], tt * u[1, i], k_n * depth[i] / (k_n * h + c_n)] \
            + ([tt * twist[i]] if torsion else [])
    A = G + np.diag(diag)
    b = np.array(target) - J @ v_free
    m = len(touching)
    # per point: "on" or "off" (p = 0); per friction group (rows, cone coefficient):
    # "stick", or "slip" with its compliance sigma on its rows
    groups = [([0, 1], mu)] + ([([3], 1.0)] if torsion else [])
    on = [True] * m
    slip = [[False] * len(groups) for _ in range(m)]
    sigma = [[0.0] * len(groups) for _ in range(m)]
    flips = [[0] * len(groups) for _ in range(m)]
    lifts = [0] * m

    def augmented(sig):
        """(the rows in the solve, A with each slipping group's sigma on its diagonal)."""
        rows = [r * j + c for j in range(m) if on[j] for c in range(r)]
        M = A.copy()
        for j in range(m):
            for g, (grows, _) in enumerate(groups):
                if slip[j][g]:
                    for c in grows:
                        M[r * j + c, r * j + c] += sig[j][g]
        return rows, M

    def solve_with(sig):
        rows, M = augmented(sig)
        p = np.zeros(r * m)
        if rows:
            p[rows] = np.linalg.solve(M[np.ix_(rows, rows)], b[rows])
        return p

    def own(j, g):
        """The mean diagonal of A on a group's rows (its own compliance and mobility)."""
        return sum(A[r * j + c, r * j + c] for c in groups[g][0]) / len(groups[g][0])

    def magnitude(p, j, g):
        return math.sqrt(sum(p[r * j + c] ** 2 for c in groups[g][0]))

    def newton(sig, polish=True):
        """The slipping groups' sigmas (written into ``sig``) such that each sits on its
        cone, and the forces: Newton's method, a step that makes a point pull or |psi|
        grow halved; where that fails, the friction directions as a fixed point, then
        Newton again from there (:func:`_slip_solve`'s ways, written plainly).
        Returns (forces, whether Newton converged)."""
        slipping = [(j, g) for j in range(m) for g in range(len(groups)) if slip[j][g]]
        if not slipping:
            return solve_with(sig), True

        def put(x):
            for a, (j, g) in enumerate(slipping):
                sig[j][g] = x[a]

        x0 = [sig[j][g] for j, g in slipping]
        x, base, halvings = x0, None, 0
        for _ in range(MAX_NEWTON):
            put(x)
            p = solve_with(sig)
            fn = [p[r * j + 2] for j, _ in slipping]
            psi = [groups[g][1] * p[r * j + 2] / max(magnitude(p, j, g), 1e-300) - 1.0
                   for j, g in slipping]
            pulls = [f <= 0.0 for f in fn]
            merit = math.inf if any(pulls) else sum(v * v for v in psi)
            if base is not None and merit >= base[1]:  # worse: a shorter step
                if halvings == MAX_HALVINGS:
                    break
                halvings += 1
                x = [max(b + d * 0.5 ** halvings, 0.0) for b, d in zip(base[0], base[2])]
                continue
            if merit <= NEWTON_TOL * NEWTON_TOL:
                return p, True
            if any(pulls):  # the start pulls: less friction on those, tenfold
                grow = [a for a, (j, g) in enumerate(slipping)
                        if pulls[a] and x[a] < SIGMA_MAX * own(j, g)]
                if not grow:
                    break
                x = [10.0 * x[a] + own(*slipping[a]) if a in grow else x[a]
                     for a in range(len(x))]
                continue
            # the derivatives: dp/dsigma_b = -M^-1 E_b p (E_b keeps group b's rows)
            rows, M = augmented(sig)
            Minv_k = np.linalg.inv(M[np.ix_(rows, rows)])
            jac = np.zeros((len(slipping), len(slipping)))
            for bcol, (jb, gb) in enumerate(slipping):
                e = np.zeros(r * m)
                for c in groups[gb][0]:
                    e[r * jb + c] = p[r * jb + c]
                dp = np.zeros(r * m)
                dp[rows] = -Minv_k @ e[rows]
                for a, (ja, ga) in enumerate(slipping):
                    mag = max(magnitude(p, ja, ga), 1e-300)
                    dmag = sum(p[r * ja + c] * dp[r * ja + c] for c in groups[ga][0]) / mag
                    jac[a, bcol] = groups[ga][1] * (dp[r * ja + 2] * mag
                                                    - p[r * ja + 2] * dmag) / mag ** 2
            try:
                step = list(np.linalg.solve(jac, -np.array(psi)))
            except np.linalg.LinAlgError:
                break
            base, halvings = (x, merit, step), 0
            x = [max(v + d, 0.0) for v, d in zip(x, step)]
        if not polish:
            return p, False
        # Newton went astray (or ran out of iterations): each slipping group's force on its cone along a direction,
        # f_g = c_g p_n d_g, the directions opposing the slips they give, iterated; the
        # directions start from the forces at the sigmas Newton started from
        put(x0)
        p = solve_with(sig)
        dirs = {}
        for j, g in slipping:
            mag = magnitude(p, j, g)
            dirs[j, g] = (np.array([p[r * j + c] for c in groups[g][0]]) / mag if mag > 0
                          else np.eye(len(groups[g][0]))[0])
        rows = [r * j + c for j in range(m) if on[j] for c in range(r)]
        slip_rows = {r * j + c for j, g in slipping for c in groups[g][0]}
        eq = [row for row in rows if row not in slip_rows]
        for _ in range(MAX_NEWTON):
            T = np.zeros((r * m, len(eq)))  # forces = T z; unknowns: the rows kept
            for col, row in enumerate(eq):
                T[row, col] = 1.0
            for j, g in slipping:  # a slipping group's force follows its normal force
                col = eq.index(r * j + 2)
                for q, c in enumerate(groups[g][0]):
                    T[r * j + c, col] = groups[g][1] * dirs[j, g][q]
            z = np.linalg.solve((A @ T)[eq], b[eq])
            p = T @ z
            cvec = A @ p - b
            if min(p[r * j + 2] for j, _ in slipping) <= 0.0:
                break  # a slipping point pulls: the active set takes it out
            turn, along = 0.0, False
            for j, g in slipping:
                slip_v = np.array([cvec[r * j + c] for c in groups[g][0]])
                speed = float(np.linalg.norm(slip_v))
                if speed == 0.0:
                    continue
                new = -slip_v / speed
                along |= float(new @ dirs[j, g]) < 0.0
                turn = max(turn, float(np.abs(new - dirs[j, g]).max()))
                dirs[j, g] = new
            if along or turn <= NEWTON_TOL:
                break
        cvec = A @ p - b
        for j, g in slipping:
            grows, coef = groups[g]
            slip_v = np.array([cvec[r * j + c] for c in grows])
            f_g = np.array([p[r * j + c] for c in grows])
            speed = float(np.linalg.norm(slip_v))
            if p[r * j + 2] <= 0.0:  # pulls: it stays slipping (the active set)
                sig[j][g] = max(speed / max(abs(coef * p[r * j + 2]), 1e-300), 1e-300)
            elif float(slip_v @ f_g) > 0.0:  # slips along its friction: it sticks
                sig[j][g] = 0.0
            else:
                sig[j][g] = speed / (coef * p[r * j + 2])
        if polish and min(sig[j][g] for j, g in slipping) > 0.0:  # Newton from there
            kept = [row[:] for row in sig]
            p_n, done = newton(sig, polish=False)
            if done:
                return p_n, True
            for j, g in slipping:
                sig[j][g] = kept[j][g]
        return p, False

    p = solve_with(sigma) if frictional else None
    if not frictional:  # normal rows only, every loaded point slides
        slip = [[True] for _ in range(m)]
        for _ in range(MAX_PASSES):
            rows = [r * j + 2 for j in range(m) if on[j]]
            p = np.zeros(r * m)
            if rows:
                p[rows] = np.linalg.solve(A[np.ix_(rows, rows)], b[rows])
            pulling = [j for j in range(m) if on[j] and p[r * j + 2] < 0.0]
            if not pulling:
                break
            for j in pulling:
                on[j] = False
    for _ in range(MAX_PASSES if frictional else 0):
        slips, backs = [], []
        for j in range(m):
            for g, (_, coef) in enumerate(groups):
                if flips[j][g] >= MAX_FLIPS:
                    continue
                mag = magnitude(p, j, g)
                if not slip[j][g] and on[j] and mag > max(coef * p[r * j + 2], 0.0) and mag > 0:
                    slips.append((j, g))
                elif slip[j][g] and sigma[j][g] <= 0.0:
                    backs.append((j, g))
        # a point that pulls while all its friction slips leaves at once
        drops = [j for j in range(m) if on[j] and p[r * j + 2] < 0.0 and all(slip[j])
                 and lifts[j] < MAX_FLIPS]
        if slips or backs or drops:
            for j in drops:
                on[j] = False
                lifts[j] += 1
                slip[j] = [False] * len(groups)
                sigma[j] = [0.0] * len(groups)
            for j, g in slips:
                coef = groups[g][1]
                w = own(j, g)
                sigma[j][g] = w * abs(magnitude(p, j, g)
                                      / max(abs(coef * p[r * j + 2]), 1e-300) - 1.0)
                slip[j][g] = True
            for j, g in backs:
                sigma[j][g] = 0.0
                slip[j][g] = False
            for j, g in slips + backs:
                flips[j][g] += 1
        else:
            # points that pull leave; points left out whose normal slip velocity (with no
            # force) is negative, the ground having to pull them back out, come back
            c = A @ p - b
            pulling = [j for j in range(m) if on[j] and p[r * j + 2] < 0.0]
            back_in = [j for j in range(m) if not on[j] and lifts[j] < MAX_FLIPS
                       and c[r * j + 2] < 0.0]
            if not (pulling or back_in):
                break
            for j in pulling + back_in:
                on[j] = j in back_in
                lifts[j] += 1
                slip[j] = [False] * len(groups)
                sigma[j] = [0.0] * len(groups)
        p = newton(sigma)[0]
    # what the passes left: no pulling, nothing outside a cone
    for j in range(m):
        if not on[j]:
            p[r * j:r * j + r] = 0.0
            slip[j] = [False] * len(slip[j])
        p[r * j + 2] = max(p[r * j + 2], 0.0)
        for g, (grows, coef) in enumerate(groups if frictional else []):
            mag = magnitude(p, j, g)
            if mag > coef * p[r * j + 2]:
                for c in grows:
                    p[r * j + c] *= coef * p[r * j + 2] / mag
                slip[j][g] = True
    dv = Minv @ J.T @ p
    v_next = v_free + dv
    for j, i in enumerate(touching):
        f = p[r * j:r * j + r] / h
        force[i] = f[:3]
        if not on[j] or k_t <= 0.0 or not frictional or f[2] <= 0.0:
            continue  # out of contact (or no spring): no deformation
        s = math.sqrt(reach[i] / reference_depth)
        w = J[r * j:r * j + r] @ v_next
        for g, (grows, _) in enumerate(groups):
            x = u[:, i] if g == 0 else np.array([twist[i]])
            if slip[j][g]:
                x_next = (c_t / h * x - f[grows] / s) / (k_t + c_t / h)
            else:
                x_next = x + h * w[grows]
            if g == 0:
                u_next[:, i] = x_next
            else:
                twist_next[i] = x_next[0]
    return v_next, force, u_next, twist_next
