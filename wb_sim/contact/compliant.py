"""Compliant ground contact (the default contact model).

Per point, following Featherstone's Spatial_v2 ground model (Azad &
Featherstone, "Modelling the contact between a rolling sphere and a compliant
ground plane", ACRA 2010), with the stiffnesses normalised to a reference
depth ``d_ref`` so they read in N/m:

* penetration ``d = -n . (p - o)`` (positive below the ground), ``s = sqrt(d / d_ref)``;
* normal force ``f_n = max(0, s (k d + c d_dot))``: zero above the ground, never
  pulling, and zero while the point separates faster than the ground
  recovers (``d_dot < -k d / c``). The ``s`` factor makes the force grow as
  ``d^1.5`` (Hertz-like) and the damping vanish at first touch, so there is
  no force jump at impact (Hunt-Crossley type);
* a tangential deformation ``u`` of the ground (a state, per point) with the
  spring-damper force ``f_t0 = -s (k_t u + c_t v_t)``; if ``|f_t0| <= mu f_n``
  the point sticks (``u_dot = v_t``), else it slips: ``f_t`` is ``f_t0`` scaled
  onto the Coulomb cone and ``u_dot`` is the rate at which the spring-damper
  produces exactly that force. Out of contact the ground relaxes (``u = 0``).

Static sink: a load ``W`` shared by ``N`` points sinks
``d = (W sqrt(d_ref) / (N k))^(2/3)``.

Stability (explicit integration of the contact force, step ``h``): for a
point of effective mass ``m`` the discrete spring-damper is stable iff
``(k' h^2 + 2 c' h) / m < 4`` (Jury criterion for symplectic Euler), with
``k' = 1.5 k s`` the tangent stiffness and ``c' = c s``. For the whole robot,
normal and tangential directions together, the condition is
``lambda_max(G^1/2 (K h^2 + 2 C h) G^1/2) < 4`` with ``G = J_c M^-1 J_c^T`` the
Delassus matrix of all contact points (3 rows each) and ``K``, ``C`` the
per-direction tangent stiffness and damping at the depth the robot's weight
produces. :meth:`CompliantContact.check_stability` evaluates it at the initial
configuration and refuses a parameter set that violates it, saying why.
"""

from __future__ import annotations

import numpy as np

from ..config import ContactConfig
from ..errors import ConfigError
from .points import ContactPoints

#: names of the per-point contact states, indexed by the state code
STATUS_NAMES = ("none", "stick", "slip")


class CompliantContact:
    """Nonlinear compliant ground contact; see the module docstring."""

    name = "compliant"
    #: forces are explicit functions of the state (not impulses)
    impulse_based = False
    #: parameters that may change while running (the ROS node's `ros2 param set`)
    LIVE_PARAMETERS = ("stiffness", "damping", "tangential_stiffness", "tangential_damping",
                       "friction_coefficient")

    def __init__(self, params: ContactConfig, points: ContactPoints):
        self.points = points
        self.reference_depth = params.reference_depth
        self.max_penetration = params.max_penetration
        points.reserve_state_rows(2)  # features rows 7, 8: the deformation u
        n = points.n
        # rows: f_t1, f_t2, f_n before the sqrt(depth) factor, u + dt v_t (2), depth / d_ref
        self._R = np.zeros((6, n))
        self._s = np.zeros(n)  # sqrt(depth / d_ref), zero where there is no force
        # row factors of _R[:5]: s (forces), 1 or 0 (u: out of contact the ground
        # relaxes); a broadcast copy is cheaper than a broadcasting product on 8 points
        self._scale = np.zeros((5, n))
        self._mask = np.zeros(n)
        self._zeros = np.zeros(n)
        self._no_slip = np.zeros(n, dtype=bool)
        self._slip = self._no_slip
        self.set_parameters(**{k: getattr(params, k) for k in self.LIVE_PARAMETERS})

    def set_parameters(self, *, stiffness: float, damping: float, tangential_stiffness: float,
                       tangential_damping: float, friction_coefficient: float) -> None:
        """Change the contact constants (validated; the next step uses them)."""
        for key, value in (("stiffness", stiffness), ("damping", damping),
                           ("tangential_stiffness", tangential_stiffness),
                           ("friction_coefficient", friction_coefficient)):
            if not np.isfinite(value) or value < 0:
                raise ConfigError(f"parameter 'contact.{key}' must be finite and >= 0, got {value!r}")
        if not np.isfinite(tangential_damping) or tangential_damping <= 0:
            raise ConfigError(
                f"parameter 'contact.tangential_damping' must be finite and > 0, got {tangential_damping!r}")
        self.k, self.c = float(stiffness), float(damping)
        self.kt, self.ct = float(tangential_stiffness), float(tangential_damping)
        self.mu = float(friction_coefficient)
        self._cone = np.array([1.0, 1.0, -self.mu**2])  # . f^2 = |f_t|^2 - mu^2 f_n^2
        self._law_dt = None  # the law matrix is rebuilt at the next step

    def _law_matrix(self, dt: float) -> np.ndarray:
        """(6, 9) map from the points' features [P (world), V (ground coordinates),
        1, u] to the rows of ``_R``: the spring-damper forces before the sqrt(depth)
        factor, the sticking update u + dt v_t and the depth over d_ref."""
        ground = self.points.ground
        normal, h = ground.normal, float(ground.normal @ ground.origin)
        A = np.zeros((6, 9))
        P, V, ONE, U = slice(0, 3), slice(3, 6), 6, slice(7, 9)
        A[0:2, V][:, 0:2] = -self.ct * np.eye(2)  # tangential: -(k_t u + c_t v_t)
        A[0:2, U] = -self.kt * np.eye(2)
        A[2, P] = -self.k * normal  # normal: k d - c v_n, d = h - n.P
        A[2, ONE] = self.k * h
        A[2, 5] = -self.c
        A[3:5, U] = np.eye(2)
        A[3:5, V][:, 0:2] = dt * np.eye(2)
        A[5, P] = -normal / self.reference_depth
        A[5, ONE] = h / self.reference_depth
        self._law_dt = dt
        return A

    def initial_state(self) -> np.ndarray:
        """Tangential ground deformation of every point at rest, (2, n) m, rows
        along the plane's tangents t1, t2."""
        return np.zeros((2, self.points.n))

    @property
    def depth(self) -> np.ndarray:
        """(n,) penetration of each point at the last :meth:`forces`, m (a new array)."""
        return self._R[5] * self.reference_depth

    @property
    def max_depth(self) -> float:
        """Largest penetration at the last :meth:`forces`, m."""
        return max(self._R[5].tolist()) * self.reference_depth

    @property
    def status(self) -> np.ndarray:
        """(n,) state code of each point at the last :meth:`forces`:
        0 no contact, 1 sticking, 2 slipping (see ``STATUS_NAMES``)."""
        return (self._s > 0.0).astype(np.int8) + self._slip

    def forces(self, u: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Forces on the points (3, n) in ground coordinates and the next
        deformation state (2, n), from the positions and velocities of the last
        ``points.update``. The spring-damper terms, the depth and the sticking
        update are affine in the points' features: one matmul; the rest works on
        whole rows (see :mod:`wb_sim.contact.points` for why)."""
        X = self.points.features
        X[7:9] = u
        if dt != self._law_dt:
            self._A = self._law_matrix(dt)
        R = self._A.dot(X, self._R)
        s = np.maximum(R[5], self._zeros, out=self._s)
        np.sqrt(s, out=s)  # sqrt(depth / d_ref) below the ground, 0 above
        # no force while the point separates faster than the ground recovers
        np.multiply(s, np.heaviside(R[2], self._zeros, out=self._mask), out=s)
        scale = self._scale
        scale[:3] = s
        scale[3:] = np.sign(s)  # out of contact the ground relaxes: u = 0
        fu = R[:5] * scale
        f, u_next = fu[:3], fu[3:]
        excess = self._cone.dot(f * f)
        if max(excess.tolist()) <= 0.0:  # every point inside the friction cone: sticking
            self._slip = self._no_slip
            return f, u_next
        slip = excess > 0.0
        ft = f[:2]
        norm_t = np.hypot(ft[0, slip], ft[1, slip])
        ft[:, slip] *= self.mu * f[2, slip] / norm_t  # onto the cone
        # slipping: u moves at the rate that makes the spring-damper give exactly f_t
        u_next[:, slip] = u[:, slip] - dt * (ft[:, slip] / s[slip] + self.kt * u[:, slip]) / self.ct
        self._slip = slip
        return f, u_next

    # ------------------------------------------------------------------ stability

    def load_depth(self, weight: float) -> float:
        """Penetration (m) when ``weight`` (N) rests equally on all points."""
        n = max(self.points.n, 1)
        if self.k == 0:
            return self.max_penetration
        return (weight * np.sqrt(self.reference_depth) / (n * self.k)) ** (2.0 / 3.0)

    def stability_ratio(self, delassus: np.ndarray, weight: float, dt: float) -> float:
        """Largest ``lambda(G^1/2 (K h^2 + 2 C h) G^1/2) / 4`` over the contact
        modes; must be < 1 for explicit integration to be stable.

        ``delassus`` is the (3n, 3n) Delassus matrix of all points in ground
        coordinates (t1, t2, n per point); K and C hold each direction's tangent
        stiffness and damping at the depth the robot's weight produces (never
        less than at the reference depth)."""
        s = np.sqrt(max(self.load_depth(weight), self.reference_depth) / self.reference_depth)
        per_point = np.array([self.kt * s * dt**2 + 2 * self.ct * s * dt] * 2
                             + [1.5 * self.k * s * dt**2 + 2 * self.c * s * dt])
        a = np.sqrt(np.tile(per_point, self.points.n))
        return float(np.linalg.eigvalsh(a[:, None] * delassus * a[None, :])[-1] / 4.0)

    def check_stability(self, delassus: np.ndarray, weight: float, dt: float) -> None:
        """Refuse parameters that explicit integration at ``dt`` cannot keep stable."""
        ratio = self.stability_ratio(delassus, weight, dt)
        if ratio >= 1.0:
            raise ConfigError(
                f"parameters 'contact.stiffness', 'contact.damping', 'contact.tangential_stiffness' "
                f"and 'contact.tangential_damping' are unstable at dt = {dt:g} s: the stiffest "
                f"contact mode needs lambda(G (K dt^2 + 2 C dt)) < 4 for explicit integration, "
                f"here it is {4 * ratio:.3g} (G: Delassus matrix of the contact points at the "
                f"initial configuration, lightest mode {1 / np.linalg.eigvalsh(delassus)[-1]:.3g} kg). "
                f"Lower the damping (it dominates at 1 kHz) by a factor of about {ratio:.2g} or "
                f"more, or raise physics_rate_hz.")
