"""MuJoCo's twin of a wb_sim Simulator: the robot's URDF imported by MuJoCo itself, an
independent implementation to hold wb_sim's physics to (MuJoCo is in the test extra).

What the twin takes from the simulator, so that only the two engines differ:

* the URDF text wb_sim built its model from (``sim.robot.urdf_xml``): the same masses,
  inertias, joint axes, limits, URDF damping and ``<collision>`` primitives, read by
  MuJoCo's URDF importer (or another text, e.g. one shape moved, to see a comparison fail);
* the root link floating: a free joint (MuJoCo's import welds it to the world), whose
  coordinates are wb_sim's stepping ones (position, world-axes linear velocity);
* every link its own body (``fusestatic`` off: the sole and IMU frames stay bodies);
* the step, gravity, ``joints.armature``, ``joints.damping``, and the joint limits' time
  constant and damping ratio (MuJoCo's ``solref`` of a limit: a spring-damper too);
* the ground: a plane at ``ground.height`` meeting every link with friction
  ``contact.friction_coefficient`` (condim 3, MuJoCo's default soft contact); the links do
  not meet each other (self-collision off, as the shipped configurations).

The integrator is MuJoCo's ``Euler``: semi-implicit, joint damping implicit, as wb_sim's step.
What the twin does not represent (terrain, a tilted ground, self-collision, torsional
friction, Coulomb joint friction: MuJoCo's is a hard constraint, wb_sim's a smoothed tanh) is
refused.
"""

from __future__ import annotations

import mujoco
import numpy as np


def twin_model(sim, urdf_xml: str | None = None) -> mujoco.MjModel:
    """MuJoCo's model of ``sim``'s robot (see the module docstring); ``urdf_xml``: another
    URDF text instead of the simulator's."""
    cfg = sim.config
    _refuse_what_the_twin_lacks(sim)
    spec = mujoco.MjSpec.from_string(urdf_xml or sim.robot.urdf_xml)
    spec.compiler.fusestatic = False
    root = spec.body(sim.robot.root_link)
    root.add_freejoint()
    spec.option.timestep = sim.dt
    spec.option.gravity = list(cfg.gravity)
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER

    names = list(sim.joint_names)
    armature = _per_joint(cfg.joints.armature, names)
    damping = _per_joint(cfg.joints.damping, names) if cfg.joints.damping else None
    for joint in spec.joints:
        if joint.type == mujoco.mjtJoint.mjJNT_FREE:
            continue
        i = names.index(joint.name)
        joint.armature = armature[i]
        if damping is not None:
            joint.damping = damping[i]
        if not cfg.joints.urdf_dynamics:
            joint.damping = 0.0
        joint.solref_limit = [cfg.joints.limit_time_constant, cfg.joints.limit_damping_ratio]
        joint.limited = (mujoco.mjtLimited.mjLIMITED_TRUE if cfg.joints.position_limits
                         else mujoco.mjtLimited.mjLIMITED_FALSE)

    mu = cfg.contact.friction_coefficient
    for geom in spec.geoms:  # the links' <collision> shapes: the ground only
        geom.contype, geom.conaffinity = 1, 0
        geom.friction = [mu, 0.0, 0.0]  # condim 3 uses the first (sliding) only
    spec.worldbody.add_geom(name="ground", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1],
                            pos=[0.0, 0.0, cfg.ground.height], contype=0, conaffinity=1,
                            friction=[mu, 0.0, 0.0])
    return spec.compile()


def set_twin_state(model: mujoco.MjModel, data: mujoco.MjData, sim) -> None:
    """``data`` at ``sim``'s configuration and velocity (joints matched by name)."""
    q, v = sim.q, sim.v  # pinocchio: quaternion (x, y, z, w), base velocity in base axes
    rotation = _matrix(q[3:7])
    data.qpos[:3] = q[:3]
    data.qpos[3:7] = [q[6], q[3], q[4], q[5]]
    data.qvel[:3] = rotation @ v[:3]  # MuJoCo's free joint: linear velocity in world axes
    data.qvel[3:6] = v[3:6]  # angular velocity in the body's axes in both
    for name, position, velocity in zip(sim.joint_names, sim.joint_positions,
                                        sim.joint_velocities):
        j = model.joint(name)
        data.qpos[j.qposadr[0]] = position
        data.qvel[j.dofadr[0]] = velocity
    mujoco.mj_forward(model, data)


def joint_positions(model: mujoco.MjModel, data: mujoco.MjData, names) -> np.ndarray:
    """The joints ``names``' positions, rad."""
    return np.array([data.qpos[model.joint(n).qposadr[0]] for n in names])


def joint_mass_matrix(model: mujoco.MjModel, data: mujoco.MjData, names) -> np.ndarray:
    """The joint-space block of the mass matrix (armature included), ``names`` order."""
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, full)
    dofs = [model.joint(n).dofadr[0] for n in names]
    return full[np.ix_(dofs, dofs)]


def link_positions(data: mujoco.MjData, links) -> np.ndarray:
    """(n, 3) world positions of the links' frames (URDF link origins), m."""
    return np.array([data.body(name).xpos for name in links])


def base_rotation(data: mujoco.MjData, root: str) -> np.ndarray:
    """World <- root link rotation matrix."""
    return data.body(root).xmat.reshape(3, 3).copy()


def loaded_links(model: mujoco.MjModel, data: mujoco.MjData) -> set[str]:
    """The moving links (a fixed frame's body counts as the link it is fixed to) the ground
    pushes on, in the last step's contacts."""
    ground = model.geom("ground").id
    wrench = np.zeros(6)
    out = set()
    for i in range(data.ncon):
        contact = data.contact[i]
        mujoco.mj_contactForce(model, data, i, wrench)
        if wrench[0] <= 0.0:  # the normal force, in the contact frame
            continue
        geom = contact.geom2 if contact.geom1 == ground else contact.geom1
        out.add(moving_link(model, model.geom_bodyid[geom]))
    return out


def moving_link(model: mujoco.MjModel, body: int | str) -> str:
    """The link a body moves with: itself if it has a joint, else its parent's."""
    b = model.body(body).id
    while model.body_jntnum[b] == 0 and model.body_parentid[b] != 0:
        b = model.body_parentid[b]
    return model.body(b).name


def _refuse_what_the_twin_lacks(sim) -> None:
    cfg = sim.config
    lacks = []
    if tuple(cfg.ground.normal) != (0.0, 0.0, 1.0):
        lacks.append("a tilted ground")
    if cfg.terrain.boxes or cfg.terrain.stairs or cfg.terrain.heightfield:
        lacks.append("terrain")
    if cfg.collision.self_collision:
        lacks.append("self-collision")
    if cfg.contact.torsional_friction:
        lacks.append("torsional friction (condim 3 has none)")
    friction = cfg.joints.friction or sim.robot.model.friction  # the URDF's, in pinocchio's model
    if cfg.joints.urdf_dynamics and np.any(np.asarray(friction) > 0.0):
        lacks.append("Coulomb joint friction")
    if lacks:
        raise ValueError(f"the MuJoCo twin does not model {', '.join(lacks)}")


def _per_joint(values, names) -> np.ndarray:
    """A parameter of one value or one per joint, as an array over ``names``."""
    values = np.asarray(values, dtype=float)
    return np.full(len(names), values[0]) if values.size == 1 else values


def _matrix(quaternion_xyzw) -> np.ndarray:
    x, y, z, w = quaternion_xyzw
    out = np.zeros(9)
    mujoco.mju_quat2Mat(out, np.array([w, x, y, z]))
    return out.reshape(3, 3)
