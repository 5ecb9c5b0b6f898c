"""The step's implicit velocity-product terms computed densely, independently of
wb_sim's code, to hold the simulator to: the floating base in MuJoCo-like free-joint
coordinates (the base origin's velocity in world axes, the angular velocity in base
axes) and the root body's velocity-product terms taken with the linearly implicit
midpoint rule::

    (M + dt/2 D) dv = M dv_explicit,      D = d b_root / d v  (the root body's own terms)

(docs/physics.md, "Integration"). ``D`` comes from pinocchio's bias forces of a model of
the root body alone, by polarization: ``b`` is quadratic in ``v`` (``q`` fixed), so
``(b(v + e) - b(v - e)) / 2 = D e`` exactly.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin


def _root_joint() -> pin.JointModelComposite:
    """Translation (world axes), then rotation (body axes): MuJoCo's free joint."""
    root = pin.JointModelComposite(2)
    root.addJoint(pin.JointModelTranslation())
    root.addJoint(pin.JointModelSpherical())
    return root


def stepping_model(sim) -> pin.Model:
    """``sim``'s robot in free-joint coordinates, with its armature and its implicit joint
    damping (armature + dt D, as the step makes viscous damping implicit)."""
    model = pin.buildModelFromXML(sim.robot.urdf_xml, _root_joint())
    model.gravity = sim.model.gravity
    model.armature[:] = sim.model.armature
    model.armature[sim.robot.idx_v] += sim.dt * sim.actuation.damping
    return model


def root_bias_jacobian(model: pin.Model, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(6, 6) derivative of the root body's own velocity-product terms with respect to the
    base velocity (free-joint coordinates), at ``q``, ``v``."""
    one = pin.Model()
    jid = one.addJoint(0, _root_joint(), pin.SE3.Identity(), "root")
    one.appendBodyToJoint(jid, model.inertias[1], pin.SE3.Identity())
    one.gravity = pin.Motion.Zero()
    data = one.createData()
    return np.column_stack([(pin.nonLinearEffects(one, data, q[:7], v[:6] + e)
                             - pin.nonLinearEffects(one, data, q[:7], v[:6] - e)) / 2.0
                            for e in np.eye(6)])


def implicit_increment(model: pin.Model, q: np.ndarray, v: np.ndarray, dv: np.ndarray,
                       dt: float) -> np.ndarray:
    """The increment ``dv'`` with ``(M + dt/2 D) dv' = M dv``: the explicit increment
    ``dv`` of a step of ``model`` (free-joint coordinates) from ``q``, ``v`` made implicit
    in the root body's velocity-product terms (a dense solve)."""
    data = model.createData()
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    D = np.zeros((model.nv, model.nv))
    D[:6, :6] = root_bias_jacobian(model, q, v)
    return np.linalg.solve(M + 0.5 * dt * D, M @ dv)


def implicit_acceleration(sim, q: np.ndarray, v: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """The mean acceleration of one contact-free step of ``sim`` from ``q``, ``v`` under the
    generalized force ``tau`` (nv), all in the API's free-flyer convention (base twist and
    base wrench in base axes)."""
    model = stepping_model(sim)
    R = pin.Quaternion(q[3:7]).matrix()
    v_step = np.array(v, dtype=float)
    v_step[:3] = R @ v[:3]  # the base origin's velocity in world axes
    tau_step = np.array(tau, dtype=float)
    tau_step[:3] = R @ tau[:3]  # the force on the base in world axes
    a_explicit = pin.aba(model, model.createData(), q, v_step, tau_step)
    a = implicit_increment(model, q, v_step, a_explicit * sim.dt, sim.dt) / sim.dt
    out = a.copy()
    out[:3] = R.T @ a[:3] - np.cross(v[3:6], v[:3])  # d/dt (R^T v_world)
    return out
