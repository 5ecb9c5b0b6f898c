"""Exact 1-D solutions of the compliant contact law, independent of wb_sim.

A flat body of mass ``m`` resting on ``n`` identical contact points that share
the load equally moves vertically as::

    m z'' = -m g + n f(d, d'),   d = -z (penetration of the points),
    f = max(0, sqrt(d / d_ref) (k d + c d'))   for d > 0, else 0

(the law documented for ``contact.model: compliant``). :func:`drop` integrates
this ODE finely (scipy's LSODA, stiff-switching, tight tolerances, events at the
bottom of the impact and at lift-off) from first touch with a downward speed;
:func:`state_at` gives the state at a later time (bounces included);
:func:`static_sink` gives the depth at rest in closed form and
:func:`rk4_drop` is a second, independent integrator (classic RK4 at 1 us)
for cross-checking. The tests compare the simulator, which integrates the same
law with one step of dt, against these numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.integrate import solve_ivp

G = 9.81


def static_sink(m: float, k: float, d_ref: float = 1e-3, n: int = 4, g: float = G) -> float:
    """Depth (m) at which n points carry the weight m g: n sqrt(d/d_ref) k d = m g."""
    return (m * g * math.sqrt(d_ref) / (n * k)) ** (2.0 / 3.0)


def _law(m, k, c, d_ref, n, g):
    """Right-hand side and Jacobian of the ODE in y = (z, z')."""
    kn, cn = n * k / m, n * c / m
    inv_ref = 1.0 / d_ref

    def rhs(t, y):
        z, v = y
        d = -z
        if d <= 0.0:
            return [v, -g]
        f = math.sqrt(d * inv_ref) * (kn * d - cn * v)  # d' = -v
        return [v, -g + max(f, 0.0)]

    def jac(t, y):
        z, v = y
        d = -z
        if d <= 0.0:
            return [[0.0, 1.0], [0.0, 0.0]]
        s = math.sqrt(d * inv_ref)
        if kn * d - cn * v <= 0.0:
            return [[0.0, 1.0], [0.0, 0.0]]
        dfdd = s / (2.0 * d) * (kn * d - cn * v) + s * kn  # ds/dd = s / (2 d)
        return [[0.0, 1.0], [-dfdd, -s * cn]]

    return rhs, jac


_OPTS = dict(method="LSODA", rtol=1e-9, atol=[1e-13, 1e-10], max_step=1e-2)


@dataclass(frozen=True)
class Impact:
    rebound: float  #: highest point of the contact points after the impact's bottom, m
    max_depth: float  #: deepest penetration during the impact, m
    exit_speed: float  #: upward speed at lift-off, m/s (0 if it never left the ground)
    left_ground: bool


@lru_cache(maxsize=None)
def drop(m: float, v0: float, k: float = 4.0e4, c: float = 400.0, d_ref: float = 1e-3,
         n: int = 4, g: float = G, t_max: float = 2.0) -> Impact:
    """The impact of a body arriving at the ground (z = 0) with downward speed ``v0``.

    Integrates the contact phase until the points leave the ground (z = 0
    crossed upwards: the rebound is then the free-flight apex v_out^2 / 2g),
    or until, after the bottom of the impact, the body rises slower than
    1 um/s while still in the ground (it stays in contact: the rebound is the
    highest point reached, <= 0), or ``t_max`` (a body that creeps into a very
    damped ground without ever reaching a bottom: rebound = the touch-down
    height, 0).
    """
    rhs, jac = _law(m, k, c, d_ref, n, g)

    def lift_off(t, y):
        return y[0]

    lift_off.terminal, lift_off.direction = True, 1

    def bottom(t, y):
        return y[1]

    bottom.terminal, bottom.direction = False, 1

    def settled(t, y):  # after the bottom, the rise slows below 1 um/s in the ground
        return y[1] - 1e-6

    settled.terminal, settled.direction = True, -1

    # start a hair below z = 0 so that the lift-off event does not fire at t = 0
    sol = solve_ivp(rhs, (0.0, t_max), [-1e-15, -v0], jac=jac,
                    events=(lift_off, bottom, settled), **_OPTS)
    if sol.status < 0:
        raise RuntimeError(f"reference integration failed: {sol.message}")
    z = sol.y[0]
    # the deepest point: the state at the bottom event (not only the solver's steps)
    max_depth = float(-sol.y_events[1][0][0]) if sol.t_events[1].size else float(-z.min())
    if sol.t_events[0].size:
        v_out = float(sol.y_events[0][0][1])
        return Impact(v_out**2 / (2 * g), max_depth, v_out, True)
    t_bottom = sol.t_events[1][0] if sol.t_events[1].size else 0.0
    return Impact(float(z[sol.t >= t_bottom].max()), max_depth, 0.0, False)


@lru_cache(maxsize=None)
def state_at(m: float, v0: float, t: float, k: float = 4.0e4, c: float = 400.0,
             d_ref: float = 1e-3, n: int = 4, g: float = G) -> tuple[float, float]:
    """(z, z') at time ``t`` after touch-down with downward speed ``v0``, flights
    and later bounces included."""
    rhs, jac = _law(m, k, c, d_ref, n, g)
    sol = solve_ivp(rhs, (0.0, t), [-1e-15, -v0], jac=jac, **_OPTS)
    if sol.status < 0:
        raise RuntimeError(f"reference integration failed: {sol.message}")
    return float(sol.y[0, -1]), float(sol.y[1, -1])


def rk4_drop(m: float, v0: float, k: float, c: float, d_ref: float = 1e-3, n: int = 4,
             g: float = G, h: float = 1e-6, t_end: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Classic RK4 at step ``h`` of the same ODE, from touch-down with downward
    speed ``v0``; returns (t, z) at every step."""
    kn, cn = n * k / m, n * c / m

    def acc(z, v):
        d = -z
        if d <= 0.0:
            return -g
        return -g + max(math.sqrt(d / d_ref) * (kn * d - cn * v), 0.0)

    steps = int(round(t_end / h))
    z, v = -1e-15, -v0
    zs = np.empty(steps + 1)
    zs[0] = z
    for i in range(steps):
        a1 = acc(z, v)
        z2, v2 = z + 0.5 * h * v, v + 0.5 * h * a1
        a2 = acc(z2, v2)
        z3, v3 = z + 0.5 * h * v2, v + 0.5 * h * a2
        a3 = acc(z3, v3)
        z4, v4 = z + h * v3, v + h * a3
        a4 = acc(z4, v4)
        z += h / 6 * (v + 2 * v2 + 2 * v3 + v4)
        v += h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        zs[i + 1] = z
    return np.arange(steps + 1) * h, zs
