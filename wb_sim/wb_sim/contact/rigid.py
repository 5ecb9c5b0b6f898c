"""Rigid (hard) ground contact with a Coulomb friction cone and inelastic impacts.

A velocity-level (impulse-based) step, as in the IIT whole-body simulator's
QP contact and in MuJoCo / Simple:

* free velocity ``v_free = v + h a_free`` from the dynamics without contact;
* for the points whose gap ``phi`` (signed distance to the ground, m) is
  below ``contact.activation_margin``, now or after the step's free motion: the contact problem in impulses
  ``lambda`` (N*s, ground coordinates t1, t2, n per point)::

      lambda_i in K_mu,   c = (G + R) lambda + g in K_mu^* (De Saxce),   <lambda, c> = 0
      G = J_c M^-1 J_c^T                        (Delassus matrix, 1/kg)
      R = eps diag(G) on the normal rows       (eps = contact.regularization)
      g = J_c v_free + e_n (phi / h                          if phi >= 0: may close the gap
                            -min(beta |phi| / h, sqrt(2 g0 |phi|))  if phi < 0: push out)

  solved by pinocchio's ``PGSConstraintSolver`` or ``ADMMConstraintSolver``
  (pinocchio >= 4), warm-started from the previous step's impulses;
* ``v' = v_free + M^-1 J_c^T lambda``.

Why it neither bounces nor sinks at any rate: the regularization is relative
to each row's own inverse effective mass, so it is the same fraction of the
impact impulse at every dt; a touchdown leaves a normal velocity of about
``eps`` times the impact speed (restitution ~ beta eps), and a point at rest
sinks ``|phi| = eps G f h^2 / beta`` (h^2: it vanishes as dt -> 0). An
absolute compliance (m/N) instead adds compliance/h^2 to G: the contact
softens as dt shrinks, penetrates more and is pushed out at beta |phi| / h,
which bounced 36 mm at 16 kHz. The push-out speed is also capped at the speed
of a fall through the penetration, sqrt(2 g0 |phi|): a deep penetration
(an initial posture in the ground) lifts the body at most that deep, not with
a jump of beta |phi| / h.

The solvers see the impulses in units of ``lambda_ref = m g0 h / n`` (the
share of one point in holding the robot's weight, standard gravity g0): the
problem is solved with ``G lambda_ref`` and ``lambda / lambda_ref``, so that
``contact.tolerance`` is a velocity residual in m/s and a relative impulse
residual, the same for a 1 kg box and an 80 kg humanoid.

The normal velocity of a touching point becomes zero at touchdown
(restitution 0) and its tangential velocity is what friction allows. The
force reported per point is ``lambda / h``. If the solver stops before its
tolerance, the step completes with its last iterate and
:attr:`RigidContact.nonconverged` counts it (it is reported, never hidden).
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from ..errors import UnsupportedError
from ..linalg import upper_sym_mm
from ..parameters import Param
from .base import SurfaceContact
from .islands import ISLAND_MIN_ROWS, BlockDiagonal, IslandFinder, Islands
from .points import ContactPoints
from .shared import (FRICTION_COEFFICIENT, MAX_PENETRATION, TORSIONAL_FRICTION,
                     checked_live_values, live_names)

#: m/s^2, the impulse unit's gravity (whatever the configured gravity)
STANDARD_GRAVITY = 9.80665
#: up to this many points the step's gap tests run on Python floats (the same operations as
#: numpy's, so the same bits: a numpy call on a few elements costs ~1 us, about as much as
#: the loop over all of them; tests hold both branches to each other)
SMALL_POINT_SETS = 32

SOLVERS = ("pgs", "admm")

#: the rigid model's parameter group (``contact.model: rigid``)
PARAMETERS: tuple[Param, ...] = (
    FRICTION_COEFFICIENT,
    TORSIONAL_FRICTION,
    MAX_PENETRATION,
    Param("contact.solver", "str", "admm", "",
          "rigid: constraint solver of pinocchio >= 4, 'admm' or 'pgs' (projected Gauss-Seidel).",
          choices=SOLVERS),
    Param("contact.max_iterations", "int", 500, "",
          "rigid: solver iteration limit per step; a step that reaches it completes with the "
          "last iterate and is counted as not converged.", lo=0, lo_open=True),
    Param("contact.tolerance", "float", 1.0e-5, "m/s",
          "rigid: solver tolerance on the contact velocities (m/s) and, relatively, on the "
          "impulses, measured in units of one point's share of the robot's weight, "
          "m g dt / n (so one value fits a light box and a heavy humanoid).",
          lo=0.0, lo_open=True),
    Param("contact.baumgarte_gain", "float", 0.2, "",
          "rigid: fraction of a penetration removed per step (0 = none, 1 = all at once).",
          lo=0.0, hi=1.0),
    Param("contact.regularization", "float", 1.0e-3, "",
          "rigid: regularization of each normal contact row relative to its Delassus diagonal "
          "(R = eps G_ii): makes the problem of coplanar foot corners definite; a point at rest "
          "sinks eps G f dt^2 / baumgarte_gain (vanishes as dt -> 0) and an impact keeps a "
          "fraction ~eps of its speed (no bounce at any rate).", lo=0.0, hi=1.0),
    Param("contact.activation_margin", "float", 0.005, "m",
          "rigid: points closer to the ground than this enter the contact problem (their gap "
          "term keeps them from touching early).", lo=0.0),
)

#: a loaded point slips when its tangential speed exceeds this many solver tolerances
SLIP_TOLERANCES = 10.0
#: solves of the torsional bounds' fixed point (|spin impulse| <= lambda_n, the normal
#: impulse of the last solve) per step; 2 where the normal impulses do not move
MAX_BOUND_PASSES = 20

_BOX_ROW_MODEL = None


def _box_row_model() -> pin.Model:
    """A one-joint model whose joint friction constraint is one row with a box set
    [lb, ub]: the solver's container for a torsional row (the Delassus matrix and
    the free velocity are ours, as for the points' cones)."""
    global _BOX_ROW_MODEL
    if _BOX_ROW_MODEL is None:
        model = pin.Model()
        joint = model.addJoint(0, pin.JointModelRZ(), pin.SE3.Identity(), "spin")
        model.appendBodyToJoint(joint, pin.Inertia.FromSphere(1.0, 0.1), pin.SE3.Identity())
        _BOX_ROW_MODEL = model
    return _BOX_ROW_MODEL


def _require_solvers() -> None:
    if not all(hasattr(pin, a) for a in ("PGSConstraintSolver", "ADMMConstraintSolver",
                                         "PointContactConstraintModel",
                                         "DelassusOperatorDense")):
        raise UnsupportedError(
            f"parameter 'contact.model': 'rigid' needs pinocchio >= 4.0 (its constraint solvers "
            f"PGSConstraintSolver / ADMMConstraintSolver); this is pinocchio {pin.__version__}. "
            f"Use contact.model: compliant, or pip install 'pin>=4'.")


class RigidContact(SurfaceContact):
    """Rigid frictional contact; see the module docstring."""

    name = "rigid"
    PARAMETERS = PARAMETERS
    LIVE_PARAMETERS = live_names(PARAMETERS)

    def __init__(self, params, points: ContactPoints):
        """``params``: the validated ``contact`` group (``config.contact``)."""
        _require_solvers()
        self.points = points
        self.solver_name = params.solver
        self.max_iterations = params.max_iterations
        self.tolerance = params.tolerance
        self.baumgarte_gain = params.baumgarte_gain
        self.regularization = params.regularization
        self.margin = params.activation_margin
        #: m: points farther than this from touching, now and after the step, stay out
        self.activation_margin = self.margin
        self.max_penetration = params.max_penetration
        self.mu = params.friction_coefficient
        self.mu_t = params.torsional_friction
        n = points.n
        self.depth = np.zeros(n)
        self._impulse = np.zeros((n, 3))  # of the last step, ground coordinates, N*s
        self._warm = np.zeros((n, 3))  # warm start of the next solve
        #: (n,) spin impulses of the last step (N*s along the rows l w_n; the torque impulse
        #: is l times it) and the next solve's warm start of them
        self._spin = np.zeros(n)
        self._spun = False  # whether _spin may be nonzero (saves a reduction a step)
        self._all = np.arange(n)
        self._last = None
        #: steps whose solve stopped before the tolerance / solves in all
        self.nonconverged = 0
        self.solves = 0
        #: iterations of each solve (the last 100 000)
        self.iterations: list[int] = []
        self.iterations_total = 0  #: of every solve, for the iterations per solve of a window
        #: active count k (or (k, True) with the spin rows) -> containers, solver, result,
        #: box rows; and the ADMM penalty (rho, power) of its last solve
        self._problems: dict = {}
        self._penalty: dict = {}
        self._model = points.model  # the constraint containers need one (they carry the cones)
        #: weight share of one point, N (standard gravity): lambda_ref = it * dt
        # (a point set that says otherwise, the feet with collision points, keeps the feet's)
        self._weight_per_point = pin.computeTotalMass(points.model) * STANDARD_GRAVITY / max(
            getattr(points, "reference_count", n), 1)
        self._normal_diag = {}  # problem key -> flat indices of the normal rows' diagonal
        self._islands = IslandFinder()  # the problem's islands (free objects)

    # ------------------------------------------------------------------ interface

    def initial_state(self) -> np.ndarray:
        """No deformation state: zeros (2, n) for the common interface. Clears the warm start."""
        self._impulse = np.zeros((self.points.n, 3))
        self._warm = self._impulse
        self._spin, self._spun = np.zeros(self.points.n), False
        self._last = None
        self._problems.clear()
        self._penalty.clear()  # ADMM's penalty too: reset is deterministic
        return np.zeros((2, self.points.n))

    def snapshot(self) -> tuple:
        """What the next solve and the readings depend on besides (q, v): the warm
        starts (impulses, spin impulses, ADMM penalties) and the last depths and impulses."""
        return (self._warm, self._impulse, self._spin, self._spun, dict(self._penalty),
                self.depth, self._last)

    def restore(self, snap: tuple) -> None:
        """Back to a :meth:`snapshot`."""
        self._warm, self._impulse, self._spin, self._spun, penalty, self.depth, self._last = snap
        self._penalty = dict(penalty)

    @property
    def max_depth(self) -> float:
        """Largest penetration at the last :meth:`solve`, m."""
        return max(self.depth.tolist()) if self.points.n else 0.0

    def warm_start(self) -> np.ndarray:
        """(n, 3) the impulses the next solve starts from (N*s, ground coordinates)."""
        return self._warm

    def set_warm_start(self, rows: np.ndarray) -> None:
        """Start the next solve from ``rows`` for the first points (the others: 0); the
        whole-body contact hands the feet's over between its two instances."""
        warm = np.zeros((self.points.n, 3))
        warm[:len(rows)] = rows
        self._warm = warm
        self._spin, self._spun = np.zeros(self.points.n), False  # (a warm start only)

    def parameters(self) -> dict[str, float]:
        """The live parameters, by their ``contact.`` names."""
        return {"friction_coefficient": self.mu, "torsional_friction": self.mu_t}

    def set_parameters(self, **values: float) -> None:
        """Change live contact constants, checked by their declarations (on a
        :class:`ConfigError` nothing changes)."""
        new = checked_live_values(PARAMETERS, self.parameters(), values)
        self.mu, self.mu_t = float(new["friction_coefficient"]), float(new["torsional_friction"])
        self._problems.clear()  # the cones carry mu

    def resolution_note(self, delassus, weight, dt) -> None:
        """Nothing to say: the impulse step resolves contact at any rate."""

    def statistics(self) -> dict:
        it = np.array(self.iterations[-100_000:] or [0])
        return {"solves": self.solves, "nonconverged": self.nonconverged,
                "iterations_mean": float(it.mean()), "iterations_p99": float(np.percentile(it, 99))}

    def solver_health(self, residual: bool = True) -> dict[str, float]:
        """The last solve, computed on demand from what it kept (nothing per step):
        ``residual`` (m/s; only if asked, else NaN) the natural-map residual of the De
        Saxce form of Coulomb's law and Signorini's condition, ``|lambda -
        proj_K(lambda - (c + mu |c_t| e_n) / W_nn)| W_nn`` per point (c: the constrained
        velocity after the impulses, with the gap and penetration terms; 0 exactly at a
        solution, as :func:`coulomb_residual`), the worst point's; ``impulse_work`` (J)
        the kinetic energy the contact impulses added, ``lambda . (J v_free + G lambda /
        2)``: <= 0 for a dissipative contact, > 0 where the penetration push-out or an
        unconverged solve put energy in. Both 0 where nothing touched. And the counters
        since construction (plain integers, no cost): ``solves``, ``nonconverged``,
        ``iterations`` (all solves' together)."""
        out = {"residual": 0.0 if residual else math.nan, "impulse_work": 0.0,
               "solves": self.solves, "nonconverged": self.nonconverged,
               "iterations": self.iterations_total}
        if self._last is None:
            return out
        idx, lam3, vel, G0, lam, g = self._last
        Gl = G0.dot(lam)
        out["residual"] = math.nan
        out["impulse_work"] = float(lam.dot(vel) + 0.5 * lam.dot(Gl))
        if residual:
            rows = 3 * len(idx)
            c = (g[:rows] + Gl[:rows]).reshape(-1, 3)
            w_nn = G0.diagonal()[2:rows:3]
            x = lam3.copy()
            x[:, 2] -= (c[:, 2] + self.mu * np.hypot(c[:, 0], c[:, 1])) / w_nn
            x[:, :2] -= c[:, :2] / w_nn[:, None]
            gap = np.abs(lam3 - cone_projections(x, self.mu)).max(axis=1)
            out["residual"] = float((gap * w_nn).max())
        return out

    # ------------------------------------------------------------------ the step

    def _problem(self, k: int, torsion: bool, key):
        """Constraint containers (they carry the friction cones and, with torsional
        friction, a box row per point after the k cones), solver, result and the box
        rows for ``k`` active points, built once per size (``key``)."""
        prob = self._problems.get(key)
        if prob is None:
            cms, cds = pin.StdVec_ConstraintModel(), pin.StdVec_ConstraintData()
            jid = int(self.points.joint_ids[0])
            for _ in range(k):
                cm = pin.PointContactConstraintModel(self._model, 0, pin.SE3.Identity(), jid,
                                                     pin.SE3.Identity())
                cm.setFriction(self.mu)
                cms.append(cm)
                cds.append(cm.createData())
            boxes = []
            for _ in range(k if torsion else 0):
                box = pin.JointFrictionConstraintModel(_box_row_model(), [1])
                boxes.append(box)
                cms.append(box)
                cds.append(box.createData())
            size = (4 if torsion else 3) * k
            if self.solver_name == "pgs":
                solver, settings, result = (pin.PGSConstraintSolver(size), pin.PGSSolverSettings(),
                                            pin.PGSSolverResult())
            else:
                solver, settings, result = (pin.ADMMConstraintSolver(size),
                                            pin.ADMMSolverSettings(), pin.ADMMSolverResult())
            settings.max_iterations = self.max_iterations
            settings.absolute_feasibility_tol = self.tolerance
            settings.absolute_complementarity_tol = self.tolerance
            # only the absolute tolerances decide (the relative "no progress" test stops PGS early)
            settings.relative_feasibility_tol = 1e-14
            settings.relative_complementarity_tol = 1e-14
            settings.solve_ncp = True  # the NCP (De Saxce), not its convex relaxation
            prob = self._problems[key] = (cms, cds, solver, settings, result, boxes)
        return prob

    @staticmethod
    def _set_spin_bounds(problem, bound: np.ndarray) -> None:
        """The torsional rows' boxes [-bound_i, bound_i] (the solver reads a box from
        the constraint's data, made from the model's limits: both are renewed)."""
        cms, cds, boxes = problem[0], problem[1], problem[5]
        k = len(boxes)
        for i, box in enumerate(boxes):
            b = float(bound[i])
            box.setFrictionLowerLimit(np.array([-b]))
            box.setFrictionUpperLimit(np.array([b]))
            cms[k + i] = box
            cds[k + i] = box.createData()

    def solve(self, Minv_upper: np.ndarray, v_free: np.ndarray, u: np.ndarray,
              dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Velocity change (nv,) from the contact impulses, the per-point forces
        ``lambda / dt`` (n, 3) in ground coordinates and the (zero) deformation
        state, after ``points.update(model, data, None)`` at the step's
        configuration; ``Minv_upper`` holds the upper triangle of the (symmetric)
        inverse mass matrix there (the lower one is not read). Also sets the
        depths; the states are computed on demand. ``u`` is unused (the rigid
        ground does not deform).

        With ``contact.torsional_friction`` l > 0 each active point also has a spin row
        ``l w_n`` (w_n: its link's angular velocity about the normal) whose impulse is
        boxed by the point's normal impulse, ``|rho| <= lambda_n`` (the torque is at most
        ``l f_n``): pinocchio's solvers take a box with fixed bounds, so the bounds
        are the normal impulses of the previous solve, and the step solves again until
        they agree within the tolerance (a fixed point, beside the solver: 2 solves
        where the normal impulses do not move)."""
        pts = self.points
        phi = -pts.depth
        self.depth = -phi
        # in the problem: points within the margin, and points whose free motion would
        # cross it during the step (at 250 Hz a 1 m drop moves 18 mm per step)
        if pts.n <= SMALL_POINT_SETS:  # the same operations on Python floats (exact)
            margin = self.margin
            near = [i for i, (p, w) in enumerate(zip(phi.tolist(),
                                                     pts.normal_velocity(v_free).tolist()))
                    if min(p, p + dt * w) < margin]
        else:
            near = np.flatnonzero(
                np.minimum(phi, phi + dt * pts.normal_velocity(v_free)) < self.margin)
        k = len(near)  # their indices
        # new arrays each step (never changed in place): a snapshot keeps references
        self._impulse = np.zeros((pts.n, 3))
        self._last = None
        torsion = self.mu_t > 0.0 and self.mu > 0.0
        if k == 0:
            if self._spun:
                self._spin, self._spun = np.zeros(pts.n), False
            self._generalized = None
            return v_free, np.zeros_like(self._impulse), u
        idx = self._all if k == pts.n else np.asarray(near, dtype=np.intp)
        Jc = pts.jacobian_g(idx)  # (3k, nv): rows t1, t2, n per point
        if torsion:  # the spin rows l w_n after the points' rows
            Jc = np.concatenate([Jc, pts.torsion_jacobian(idx) * self.mu_t])
        size = len(Jc)
        # with free objects (no spin rows), each island of the problem solved alone
        # (docs/performance.md): its block of M^-1 J^T and of the Delassus matrix
        islands = (self._islands.find(Minv_upper, Jc, 3, k, point_major=True)
                   if not torsion and size >= ISLAND_MIN_ROWS else None)
        if islands is not None:
            return self._solve_islands(islands, Minv_upper, Jc, v_free, phi, idx, k, dt, u)
        MinvJt = upper_sym_mm(Minv_upper, Jc.T)  # reads the upper triangle only
        G0 = Jc.dot(MinvJt)
        unit = self._weight_per_point * dt  # lambda_ref, N*s
        G = G0 * unit  # the Delassus matrix for impulses in units of lambda_ref
        key = (k, True) if torsion else k  # of the problem's containers and caches
        if self.regularization > 0:  # on the normal rows only: tangentially it would creep
            normal_diag = self._normal_diag.get(key)
            if normal_diag is None:
                normal_diag = self._normal_diag[key] = (size + 1) * (3 * np.arange(k) + 2)
            G.flat[normal_diag] *= 1.0 + self.regularization
        vel = Jc.dot(v_free)
        ph = phi[idx] if k < pts.n else phi
        g = self._free_velocity(vel, ph, k, dt)
        problem = self._problem(k, torsion, key)
        # (every point in: the warm start itself, not a gather of all its rows: the same values)
        guess = (self._warm if k == pts.n else self._warm[idx]).ravel() * (1.0 / unit)
        if not torsion:
            lam, iterations, converged = self._solve_problem(G, g, guess, problem, key, k, None)
        else:  # the spin rows' bounds: a fixed point of the normal impulses
            guess = np.concatenate([guess, self._spin[idx] * (1.0 / unit)])
            bound = np.maximum(guess[2:3 * k:3], 0.0)
            iterations = 0
            for _ in range(MAX_BOUND_PASSES):
                self._set_spin_bounds(problem, bound)
                lam, its, ok = self._solve_problem(G, g, guess, problem, key, k, bound)
                iterations += its
                lam_n = np.maximum(lam[2:3 * k:3], 0.0)
                converged = ok and np.abs(lam_n - bound).max() <= self.tolerance
                if converged:
                    break
                bound, guess = lam_n, lam
        lam = lam * unit  # N*s
        self.solves += 1
        self.nonconverged += not converged
        self.iterations.append(iterations)
        self.iterations_total += iterations
        if len(self.iterations) > 200_000:
            del self.iterations[:100_000]
        if torsion:
            lam3 = lam[:3 * k].reshape(k, 3)
            spin = np.zeros(pts.n)
            spin[idx] = lam[3 * k:]
            self._spin, self._spun = spin, True
            self._last = (idx, lam3, vel, G0, lam, g)
        else:
            lam3 = lam.reshape(k, 3)
            if self._spun:
                self._spin, self._spun = np.zeros(pts.n), False
            self._last = (idx, lam3, vel, G0, lam, g)
        self._impulse[idx] = lam3
        self._warm = self._impulse
        v_next = MinvJt.dot(lam)
        v_next += v_free
        self._generalized = (Jc, lam, 1.0)  # J_c^T lambda, computed when asked
        return v_next, self._impulse * (1.0 / dt), u

    def _free_velocity(self, vel: np.ndarray, ph: np.ndarray, k: int, dt: float) -> np.ndarray:
        """The problem's free velocity: ``vel`` with the normal gap velocity (a gap closes in
        one step; a penetration is pushed out at beta |phi| / h, but no faster than a fall
        through its depth)."""
        g = vel.copy()
        if k <= SMALL_POINT_SETS:  # the lines below on Python floats: the same operations
            inv, two_g = 1.0 / dt, 2.0 * STANDARD_GRAVITY
            gain = self.baumgarte_gain * inv
            g[2:3 * k:3] += [p * inv if p >= 0.0 else
                             -min(gain * -p, math.sqrt(two_g * max(-p, 0.0)))
                             for p in ph.tolist()]
            return g
        push = np.minimum(self.baumgarte_gain * (1.0 / dt) * -ph,
                          np.sqrt(2.0 * STANDARD_GRAVITY * np.maximum(-ph, 0.0)))
        g[2:3 * k:3] += np.where(ph >= 0.0, ph * (1.0 / dt), -push)
        return g

    def _solve_islands(self, islands, Minv_upper, Jc, v_free, phi, idx, k, dt, u):
        """:meth:`solve` without spin rows, each island of the problem its own solve (its
        containers and ADMM penalty those of its point count): the block-diagonal
        problem's solution, each island to the solver's tolerance. The step's iterations:
        the most any island took; converged: every island did."""
        pts = self.points
        blocks = islands.blocks(Minv_upper, Jc, 1.0)  # M^-1 J^T and J M^-1 J^T by island
        unit = self._weight_per_point * dt
        vel = Jc.dot(v_free)
        ph = phi[idx] if k < pts.n else phi
        g = self._free_velocity(vel, ph, k, dt)
        guess = self._warm[idx].ravel() * (1.0 / unit)
        lam = np.empty(3 * k)
        iterations, converged = 0, True
        for rows, _, _, _, Ab in blocks:
            for rw, G0i in ([(rows, Ab)] if rows.ndim == 1 else zip(rows, Ab)):
                ki = len(rw) // 3
                G = G0i * unit
                if self.regularization > 0:
                    G.flat[(3 * ki + 1) * (3 * np.arange(ki) + 2)] *= 1.0 + self.regularization
                problem = self._problem(ki, False, ki)
                lam[rw], its, ok = self._solve_problem(G, g[rw], guess[rw], problem, ki, ki, None)
                iterations, converged = max(iterations, its), converged and ok
        lam = lam * unit  # N*s
        self.solves += 1
        self.nonconverged += not converged
        self.iterations.append(iterations)
        self.iterations_total += iterations
        if len(self.iterations) > 200_000:
            del self.iterations[:100_000]
        lam3 = lam.reshape(k, 3)
        if self._spun:
            self._spin, self._spun = np.zeros(pts.n), False
        # the readings' Delassus matrix: the blocks, unregularized (as G0)
        self._last = (idx, lam3, vel, BlockDiagonal(blocks, 3 * k), lam, g)
        self._impulse[idx] = lam3
        self._warm = self._impulse
        v_next = Islands.velocity_change(blocks, lam, len(v_free))
        v_next += v_free
        self._generalized = (Jc, lam, 1.0)  # J_c^T lambda, computed when asked
        return v_next, self._impulse * (1.0 / dt), u

    def _solve_problem(self, G, g, guess, problem, key, k, bound):
        """One solve of the problem (``problem``: :meth:`_problem`'s, ``key`` its
        cache key; ``bound``: the spin rows' bounds, or None without them) with the
        solver (PGS: called again until the normal and box complementarity hold):
        (impulses in units of lambda_ref, iterations, converged)."""
        cms, cds, solver, settings, result, _ = problem
        admm = self.solver_name == "admm"
        if admm and key in self._penalty:
            # start from the last solve's penalty (11 -> 7 iterations per step on icub_stand);
            # kept here rather than in pinocchio's result object, so a state snapshot has it
            settings.rho_init, settings.spectral_rho_power_init = self._penalty[key]
        elif admm:
            # a problem cached after the snapshot a state was restored from holds the penalty
            # of that later run in its settings: start from the fresh settings' values, as
            # the run that took the snapshot did (it is only ever so after a restore)
            fresh = pin.ADMMSolverSettings()
            settings.rho_init, settings.spectral_rho_power_init = \
                fresh.rho_init, fresh.spectral_rho_power_init
        iterations = 0
        while True:
            result.setConstraintImpulseGuess(guess)
            converged = solver.solve(pin.DelassusOperatorDense(G), g, cms, cds, settings, result)
            lam = result.retrieveConstraintImpulses()  # in units of lambda_ref
            iterations += result.iterations + 1
            if admm:
                self._penalty[key] = (result.rho, result.spectral_rho_power)
                return lam, iterations, converged
            # Our own check of the normal complementarity (De Saxce-corrected velocity, in
            # units of lambda_ref): pinocchio 4.1's PGS stops after one sweep when no point has a
            # tangential velocity (a flat impact), so it is called again until it holds.
            c = G.dot(lam) + g
            c3 = c[:3 * k].reshape(k, 3)
            s_n = c3[:, 2] + self.mu * np.hypot(c3[:, 0], c3[:, 1])
            diag = G.diagonal()
            residual = np.abs(np.minimum(lam[2:3 * k:3], s_n / diag[2:3 * k:3])).max()
            if bound is not None:  # and the boxes': rho = clip(rho - c / G_ii, -bound, bound)
                rho, d = lam[3 * k:], diag[3 * k:]
                step = np.divide(c[3 * k:], d, out=np.zeros(k), where=d > 0.0)
                residual = max(residual, np.abs(rho - np.clip(rho - step, -bound, bound)).max())
            if residual <= self.tolerance or iterations >= self.max_iterations:
                return lam, iterations, converged and residual <= self.tolerance
            guess = lam

    @property
    def status(self) -> np.ndarray:
        """(n,) 0 no contact or separating, 1 sticking, 2 slipping (``STATUS_NAMES``),
        from the impulses and the post-step velocities of the last step."""
        st = np.zeros(self.points.n, dtype=np.int8)
        if self._last is not None:
            idx, lam3, vel, G0, lam, _ = self._last
            rows = 3 * len(idx)  # the points' rows (the spin rows follow them)
            v_after = (vel[:rows] + G0[:rows].dot(lam)).reshape(-1, 3)
            # sticking: a tangential velocity the solver cannot tell from zero (what ADMM
            # leaves at its tolerance reaches ~3x it on a standing Solo12: 10x is the margin)
            slipping = np.hypot(v_after[:, 0], v_after[:, 1]) > SLIP_TOLERANCES * self.tolerance
            st[idx] = np.where(lam3[:, 2] > 0.0, np.where(slipping, 2, 1), 0)
        return st


def reference_problem(points: ContactPoints, Minv: np.ndarray, v_free: np.ndarray, dt: float,
                      params: dict[str, float], total_mass: float):
    """The contact problem of :meth:`RigidContact.solve`, built plainly point by point:
    ``(active, J, G, g, unit)`` with the active point indices, their Jacobian (3k, nv)
    rows t1, t2, n per point, the regularized Delassus matrix and the free velocity
    with its gap terms in units of ``unit`` (N*s) as the solver sees them; None when
    no point is active. ``params``: friction_coefficient, regularization,
    baumgarte_gain, activation_margin."""
    eps = params["regularization"]
    beta, margin = params["baumgarte_gain"], params["activation_margin"]
    n = points.n
    phi = -points.depth
    J_all = points.jacobian_g()  # (3n, nv), rows t1, t2, n per point
    active = [i for i in range(n)
              if min(phi[i], phi[i] + dt * float(J_all[3 * i + 2] @ v_free)) < margin]
    if not active:
        return None
    J = np.vstack([J_all[3 * i:3 * i + 3] for i in active])
    unit = total_mass * STANDARD_GRAVITY / n * dt  # the fast path's impulse unit
    G = J @ Minv @ J.T * unit
    g = J @ v_free
    for j, i in enumerate(active):
        G[3 * j + 2, 3 * j + 2] *= 1.0 + eps
        if phi[i] >= 0.0:
            g[3 * j + 2] += phi[i] / dt
        else:
            g[3 * j + 2] -= min(beta * -phi[i] / dt, math.sqrt(2.0 * STANDARD_GRAVITY * -phi[i]))
    return active, J, G, g, unit


def coulomb_residual(problem, force: np.ndarray, dt: float, mu: float) -> float:
    """How far point forces (n, 3) are from solving ``problem`` (from
    :func:`reference_problem`), in m/s: per active point, the natural-map residual
    ``|lambda - proj_K(lambda - (c + mu |c_t| e_n) / W_nn)| W_nn`` of the De Saxce
    form of Coulomb's law and Signorini's condition (0 exactly at a solution)."""
    active, J, G, g, unit = problem
    lam = np.concatenate([force[i] for i in active]) * dt / unit
    c = G @ lam + g
    worst = 0.0
    for j in range(len(active)):
        lj, cj = lam[3 * j:3 * j + 3], c[3 * j:3 * j + 3]
        w_nn = G[3 * j + 2, 3 * j + 2]
        x = lj - (cj + np.array([0.0, 0.0, mu * math.hypot(cj[0], cj[1])])) / w_nn
        worst = max(worst, float(np.abs(lj - _cone_projection(x, mu)).max()) * w_nn)
    return worst


def cone_projections(x: np.ndarray, mu: float) -> np.ndarray:
    """Row by row (k, 3) the projections of :func:`_cone_projection`, vectorized."""
    t = np.hypot(x[:, 0], x[:, 1])
    n = np.maximum(mu * t + x[:, 2], 0.0) / (mu * mu + 1.0)
    scale = np.divide(mu * n, t, out=np.zeros_like(t), where=t > 0.0)
    out = np.column_stack([x[:, 0] * scale, x[:, 1] * scale, n])
    inside = t <= mu * x[:, 2]
    out[inside] = x[inside]
    return out


def _cone_projection(x: np.ndarray, mu: float) -> np.ndarray:
    """Euclidean projection on the cone {|x_t| <= mu x_n}."""
    t = math.hypot(x[0], x[1])
    if t <= mu * x[2]:
        return x.copy()
    if mu * t <= -x[2]:
        return np.zeros(3)
    n = (mu * t + x[2]) / (mu * mu + 1.0)
    return np.array([x[0] * mu * n / t, x[1] * mu * n / t, n])


def reference_solve(points: ContactPoints, Minv: np.ndarray, v_free: np.ndarray, dt: float,
                    params: dict[str, float], total_mass: float, sweeps: int = 2000,
                    tol: float = 1e-14) -> tuple[np.ndarray, np.ndarray]:
    """Plain reference of :meth:`RigidContact.solve`: the problem built point by
    point (:func:`reference_problem`, the full symmetric ``Minv``) and solved by
    its own solver (nonsmooth Gauss-Seidel: each point's Coulomb problem solved
    exactly with the others held, :func:`_one_point`, until the impulses stop
    changing), written for reading, not speed. Returns ``(v_next, force)``
    (force (n, 3) = lambda / dt).

    The impulses of points on one rigid foot are not unique (4 corners, 6 dofs),
    and with several sliding corners neither, in rare states, is the solution: the
    tests compare the end-of-step velocity and each body's total contact wrench,
    and hold both results to :func:`coulomb_residual`."""
    mu = params["friction_coefficient"]
    force = np.zeros((points.n, 3))
    problem = reference_problem(points, Minv, v_free, dt, params, total_mass)
    if problem is None:
        return v_free.copy(), force
    active, J, G, g, unit = problem
    k = len(active)
    lam = np.zeros(3 * k)
    for _ in range(sweeps):
        change = 0.0
        for j in range(k):
            rows = slice(3 * j, 3 * j + 3)
            W = G[rows, rows]
            c0 = G[rows] @ lam + g[rows] - W @ lam[rows]  # its velocity without its own impulse
            new = _one_point(W, c0, mu)
            change = max(change, float(np.abs(new - lam[rows]).max()))
            lam[rows] = new
        if change < tol:
            break
    lam = lam * unit
    for j, i in enumerate(active):
        force[i] = lam[3 * j:3 * j + 3] / dt
    return v_free + Minv @ J.T @ lam, force


def _one_point(W: np.ndarray, c0: np.ndarray, mu: float) -> np.ndarray:
    """The impulse (t1, t2, n) of one point whose velocity is ``w = c0 + W lambda``
    (W its 3 x 3 Delassus block), by Coulomb's law: apart (lambda = 0, w_n >= 0),
    sticking (w = 0, lambda in the cone) or sliding (w_n = 0, lambda on the cone
    against w_t: lambda_t = -mu lambda_n w_t / |w_t|)."""
    if c0[2] >= 0.0:
        return np.zeros(3)
    lam = -np.linalg.solve(W, c0)
    if math.hypot(lam[0], lam[1]) <= mu * lam[2]:
        return lam
    # sliding: the direction d = (cos a, sin a) of w_t is the unknown; for a given d,
    # w_n = 0 gives lambda_n, then w_t follows; a solution has w_t along +d (the cross
    # product d x w_t vanishes, their dot product is positive) and lambda_n > 0. Scan the
    # angle, then bisect the sign change.

    def at(angle: float):
        d = np.array([math.cos(angle), math.sin(angle)])
        lam_n = -c0[2] / (W[2, 2] - mu * (W[2, :2] @ d))
        lam = np.array([*(-mu * lam_n * d), lam_n])
        w_t = c0[:2] + W[:2] @ lam
        return lam, d[0] * w_t[1] - d[1] * w_t[0], d @ w_t

    angles = np.linspace(0.0, 2.0 * math.pi, 721)
    samples = [at(a) for a in angles]
    best = None
    for i in range(720):
        x0, x1 = samples[i][1], samples[i + 1][1]
        if x0 == 0.0 or x0 * x1 < 0.0:
            lo, hi = angles[i], angles[i + 1]
            for _ in range(80):
                mid = 0.5 * (lo + hi)
                lam, x, dot = at(mid)
                if (x < 0.0) == (x0 < 0.0) and x != 0.0:
                    lo = mid
                else:
                    hi = mid
            lam, x, dot = at(0.5 * (lo + hi))
            if dot > 0.0 and lam[2] > 0.0 and (best is None or lam[2] < best[2]):
                best = lam
    if best is None:
        raise RuntimeError("reference_solve: no sliding solution for one point")
    return best
