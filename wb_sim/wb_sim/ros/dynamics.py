"""``~/get_dynamics``: the simulator's own dynamics at its current state, by name (plain
Python, no rclpy; :mod:`.services` serves it as ``wb_sim_interfaces/srv/GetDynamics``).

The state (its stamp, ``q``, ``v``, the contact points' names) is always answered; each
named quantity of :data:`MATRICES` is one matrix (a vector is a column), all taken at one
state, under the simulator's lock. The linearisation of the step (``A``, ``B``, ``tau``:
:meth:`wb_sim.Simulator.linearize_step`, 2 (2 nv + nj) + 1 steps of the simulator, ~70 ms
for the humanoid, the physics waiting) is given only when named (:data:`ON_REQUEST`), never
by an empty request.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import WbSimError

#: the state, always answered in its own fields; naming them is allowed (it adds nothing):
#: a request naming only them asks for the state alone
STATE = {
    "stamp_ns": "the node's simulated time of the state, ns: the header.stamp of its "
                "joint_states and odometry",
    "q": "(nq,) configuration, pinocchio's layout (floating base: x, y, z, qx, qy, qz, qw, "
         "joints)",
    "v": "(nv,) velocity, pinocchio's convention (floating base: linear and angular velocity "
         "in base axes, then joints)",
    "contact_points": "(n,) the contact surfaces' points, 'surface/k'",
}
#: name -> meaning of the quantities answered as matrices (row-major; vectors as columns)
MATRICES: dict[str, str] = {
    "mass_matrix": "(nv, nv) M(q), armature included",
    "nonlinear_effects": "(nv, 1) h(q, v): Coriolis, centrifugal and gravity terms, "
                         "M dv/dt + h = tau + J^T f",
    "contact_positions": "(n, 3) the contact points' world positions, m",
    "contact_jacobian": "(3n, nv) their Jacobian, world axes: rows x, y, z of point 0, then "
                        "point 1, ... (Simulator.contact_jacobian)",
    "A": "(2 nv, 2 nv) the step's Jacobian in the state, dx' = A dx + B dtau with "
         "dx = (pin.difference(q_ref, q), v - v_ref), by central differences of the "
         "simulator's own step (Simulator.linearize_step, eps 1e-6)",
    "B": "(2 nv, nj) the step's Jacobian in the joint torques (joint_states order)",
    "tau": "(nj, 1) the torques A and B are taken about: the last step's applied torques, "
           "N*m or N, joint_states order",
}
#: given only when named: they step the simulator (and restore it)
ON_REQUEST = ("A", "B", "tau")
#: what an empty request gives, in this order
DEFAULT_NAMES = tuple(n for n in MATRICES if n not in ON_REQUEST)


@dataclass
class Dynamics:
    """One ``~/get_dynamics`` answer (:func:`query`)."""

    stamp_ns: int
    q: np.ndarray
    v: np.ndarray
    contact_points: list[str]
    #: (name, 2-D array) per quantity asked for, in order
    matrices: list[tuple[str, np.ndarray]] = field(default_factory=list)
    #: why not everything was answered ('' when it was)
    error: str = ""


def contact_point_names(sim) -> list[str]:
    """'surface/k' of each contact point, the points' order."""
    pts = sim.contact_points
    counts: dict[int, int] = {}
    out = []
    for s in pts.surface_of_point:
        k = counts[int(s)] = counts.get(int(s), -1) + 1
        out.append(f"{pts.surface_names[int(s)]}/{k}")
    return out


def query(sim, stamp_ns: int, names) -> Dynamics:
    """The state of ``sim`` now and the quantities ``names`` (empty: :data:`DEFAULT_NAMES`)
    there (the caller holds its lock). An unknown name: nothing computed, ``error`` names
    it; a linearisation whose perturbed step diverged: the other quantities, ``error``."""
    names = list(names) or list(DEFAULT_NAMES)
    out = Dynamics(int(stamp_ns), np.array(sim.q), np.array(sim.v), contact_point_names(sim))
    unknown = [n for n in names if n not in MATRICES and n not in STATE]
    if unknown:
        out.error = (f"unknown quantit{'y' if len(unknown) == 1 else 'ies'} "
                     f"{', '.join(map(repr, unknown))}; known: {', '.join(MATRICES)} (and the "
                     f"state's {', '.join(STATE)}, always answered)")
        return out
    cache: dict[str, np.ndarray] = {}
    for name in names:
        if name in STATE or (name in ON_REQUEST and out.error):
            continue
        if name not in cache:
            if name == "mass_matrix":
                cache[name] = sim.mass_matrix()
            elif name == "nonlinear_effects":
                cache[name] = sim.bias_forces()
            elif name in ON_REQUEST:
                tau = np.array(sim.applied_torques)
                try:
                    A, B = sim.linearize_step(tau)
                except WbSimError as e:  # a perturbed step of the linearisation diverged
                    out.error = f"{name}: {e}"
                    continue
                cache.update(A=A, B=B, tau=tau)
            else:  # contact_positions, contact_jacobian
                P, J = sim.contact_jacobian()
                cache["contact_positions"], cache["contact_jacobian"] = P, J
        x = np.ascontiguousarray(cache[name], dtype=float)
        out.matrices.append((name, x.reshape(-1, 1) if x.ndim == 1 else x))
    return out
