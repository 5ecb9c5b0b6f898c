"""``~/get_dynamics``: the simulator's own dynamics at its current state, by name (plain
Python, no rclpy; :mod:`.services` serves it as ``rcl_interfaces/srv/GetParameters``).

Each quantity is one value: an integer, a flat array of doubles (matrices row-major), or
a list of strings; ``shape.<name>`` gives an array quantity's shape. All of one request are
taken at one state, under the simulator's lock (:data:`QUANTITIES` says what each is).
The linearisation of the step (``A``, ``B``, ``tau``: :meth:`wb_sim.Simulator.linearize_step`,
2 (2 nv + nj) + 1 steps of the simulator, ~70 ms for the humanoid, the physics waiting) is
given only when named (:data:`ON_REQUEST`), never by an empty request.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import WbSimError

#: name -> (kind, meaning): kind "int", "doubles" (flat, row-major) or "strings"
QUANTITIES: dict[str, tuple[str, str]] = {
    "stamp_ns": ("int", "the node's simulated time of the state, ns: the header.stamp of "
                        "its joint_states and odometry"),
    "q": ("doubles", "(nq,) configuration, pinocchio's layout (floating base: x, y, z, "
                     "qx, qy, qz, qw, joints)"),
    "v": ("doubles", "(nv,) velocity, pinocchio's convention (floating base: linear and "
                     "angular velocity in base axes, then joints)"),
    "mass_matrix": ("doubles", "(nv, nv) M(q), armature included, row-major"),
    "nonlinear_effects": ("doubles", "(nv,) h(q, v): Coriolis, centrifugal and gravity "
                                     "terms, M dv/dt + h = tau + J^T f"),
    "contact_points": ("strings", "(n,) the contact surfaces' points, 'surface/k'"),
    "contact_positions": ("doubles", "(n, 3) their world positions, m, row-major"),
    "contact_jacobian": ("doubles", "(3n, nv) their Jacobian, world axes, row-major: rows "
                                    "x, y, z of point 0, then point 1, ... "
                                    "(Simulator.contact_jacobian)"),
    "A": ("doubles", "(2 nv, 2 nv) the step's Jacobian in the state, dx' = A dx + B dtau with "
                     "dx = (pin.difference(q_ref, q), v - v_ref), by central differences of the "
                     "simulator's own step (Simulator.linearize_step, eps 1e-6), row-major"),
    "B": ("doubles", "(2 nv, nj) the step's Jacobian in the joint torques (joint_states order), "
                     "row-major"),
    "tau": ("doubles", "(nj,) the torques A and B are taken about: the last step's applied "
                       "torques, N*m or N, joint_states order"),
}
#: given only when named: they step the simulator (and restore it)
ON_REQUEST = ("A", "B", "tau")
#: what an empty request gives, in this order
DEFAULT_NAMES = tuple(n for n in QUANTITIES if n not in ON_REQUEST)


def query(sim, stamp_ns: int, names) -> list[tuple[str, Any]]:
    """``(kind, value)`` per name of ``names`` (empty: :data:`DEFAULT_NAMES`), at ``sim``'s
    current state (the caller holds its lock); kind "error" for an unknown name (or a
    linearisation whose perturbed step diverged), its value the message. Shapes: ``shape.<name>`` -> ("ints", shape)."""
    names = list(names) or list(DEFAULT_NAMES)
    cache: dict[str, Any] = {}

    def value(name: str):
        if name not in cache:
            if name == "stamp_ns":
                cache[name] = int(stamp_ns)
            elif name == "q":
                cache[name] = np.array(sim.q)
            elif name == "v":
                cache[name] = np.array(sim.v)
            elif name == "mass_matrix":
                cache[name] = sim.mass_matrix()
            elif name == "nonlinear_effects":
                cache[name] = sim.bias_forces()
            elif name in ON_REQUEST:
                cache["tau"] = np.array(sim.applied_torques)
                cache["A"], cache["B"] = sim.linearize_step(cache["tau"])
            elif name == "contact_points":
                pts = sim.contact_points
                counts: dict[int, int] = {}
                out = []
                for s in pts.surface_of_point:
                    k = counts[int(s)] = counts.get(int(s), -1) + 1
                    out.append(f"{pts.surface_names[int(s)]}/{k}")
                cache[name] = out
            else:  # contact_positions, contact_jacobian
                P, J = sim.contact_jacobian()
                cache["contact_positions"], cache["contact_jacobian"] = P, J
        return cache[name]

    out: list[tuple[str, Any]] = []
    for name in names:
        base = name.removeprefix("shape.")
        if base not in QUANTITIES:
            out.append(("error", f"unknown quantity {name!r}; known: "
                                 f"{', '.join(QUANTITIES)} (and shape.<name>)"))
            continue
        kind = QUANTITIES[base][0]
        try:
            x = value(base)
        except WbSimError as e:  # a perturbed step of the linearisation diverged
            out.append(("error", f"{name}: {e}"))
            continue
        if name != base:
            out.append(("ints", [] if kind == "int" else
                        [len(x)] if kind == "strings" else list(np.shape(x))))
        elif kind == "doubles":
            out.append((kind, np.ascontiguousarray(x, dtype=float).ravel()))
        else:
            out.append((kind, x))
    return out
