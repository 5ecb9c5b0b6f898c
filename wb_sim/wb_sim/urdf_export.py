"""A URDF written from a pinocchio model and its visual geometry (MJCF robots in RViz).

An MJCF robot (``urdf_path`` ending in .xml) has no URDF for ``robot_description``,
robot_state_publisher and the TF tree. :func:`urdf_from_model` writes one from what
pinocchio parsed: one link per joint (named after the body the joint moves; its inertial
the joint's whole body inertia, the massless bodies welded to it included), one URDF
joint per pinocchio joint (origin the joint's placement, its axis, its limits, damping and
friction), every other body and frame (an ``<equality>``'s anchors) a massless link on a
fixed joint, and the visual geometry (boxes, spheres, cylinders, capsules as a cylinder
and two spheres, meshes by absolute path; planes and ellipsoids are left out).

Numbers are written with ``repr`` (17 significant digits): the URDF read back by
pinocchio has the same inertias and joint placements but for the orientations' round trip
through roll-pitch-yaw (~1e-16). No rclpy: the core's.
"""

from __future__ import annotations

import math
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np
import pinocchio as pin

#: pinocchio joint kinds -> (URDF type, fixed axis or None for the model's own axis)
_AXES = {"RX": ("revolute", (1.0, 0.0, 0.0)), "RY": ("revolute", (0.0, 1.0, 0.0)),
         "RZ": ("revolute", (0.0, 0.0, 1.0)), "PX": ("prismatic", (1.0, 0.0, 0.0)),
         "PY": ("prismatic", (0.0, 1.0, 0.0)), "PZ": ("prismatic", (0.0, 0.0, 1.0)),
         "RevoluteUnaligned": ("revolute", None), "PrismaticUnaligned": ("prismatic", None)}
#: what a limit that is not (+-inf in pinocchio as its largest double) is written as
_NO_LIMIT = 1.0e300


def _f(x: float) -> str:
    x = float(x)
    if not math.isfinite(x) or abs(x) > _NO_LIMIT:
        x = math.copysign(_NO_LIMIT, x)
    return repr(x)


def _vec(v) -> str:
    return " ".join(_f(x) for x in v)


def _origin(M: pin.SE3) -> str:
    rpy = pin.rpy.matrixToRpy(M.rotation)
    return f'<origin xyz="{_vec(M.translation)}" rpy="{_vec(rpy)}"/>'


def _inertial(Y: pin.Inertia) -> str:
    if Y.mass <= 0.0:
        return ""
    I = Y.inertia
    return (f'<inertial><origin xyz="{_vec(Y.lever)}" rpy="0 0 0"/><mass value="{_f(Y.mass)}"/>'
            f'<inertia ixx="{_f(I[0, 0])}" ixy="{_f(I[0, 1])}" ixz="{_f(I[0, 2])}" '
            f'iyy="{_f(I[1, 1])}" iyz="{_f(I[1, 2])}" izz="{_f(I[2, 2])}"/></inertial>')


def _kind(joint) -> str:
    return joint.shortname().removeprefix("JointModel")


def _visuals(obj) -> list[str]:
    """The URDF <visual> elements of one GeometryObject (a capsule: three of them)."""
    g, M = obj.geometry, pin.SE3(obj.placement)
    color = np.asarray(obj.meshColor, dtype=float)
    material = (f'<material name={quoteattr(obj.name + "_color")}><color rgba="{_vec(color)}"/>'
                f'</material>') if color.size == 4 else ""
    kind = type(g).__name__

    def visual(shape: str, at: pin.SE3 = M) -> str:
        return f"<visual>{_origin(at)}<geometry>{shape}</geometry>{material}</visual>"

    if kind == "Box":
        return [visual(f'<box size="{_vec(2.0 * np.asarray(g.halfSide))}"/>')]
    if kind == "Sphere":
        return [visual(f'<sphere radius="{_f(g.radius)}"/>')]
    if kind == "Cylinder":
        return [visual(f'<cylinder radius="{_f(g.radius)}" length="{_f(2.0 * g.halfLength)}"/>')]
    if kind == "Capsule":  # no capsule in URDF: its cylinder and its two end spheres
        out = [visual(f'<cylinder radius="{_f(g.radius)}" length="{_f(2.0 * g.halfLength)}"/>')]
        for s in (1.0, -1.0):
            end = M * pin.SE3(np.eye(3), np.array([0.0, 0.0, s * g.halfLength]))
            out.append(visual(f'<sphere radius="{_f(g.radius)}"/>', end))
        return out
    if obj.meshPath:
        path = Path(obj.meshPath)
        uri = obj.meshPath if "://" in obj.meshPath else path.resolve().as_uri()
        return [visual(f'<mesh filename={quoteattr(uri)} scale="{_vec(obj.meshScale)}"/>')]
    return []  # a plane, a half-space, an ellipsoid: nothing URDF can draw


def urdf_from_model(model: pin.Model, root_link: str, floating_base: bool,
                    visual: pin.GeometryModel | None = None, name: str | None = None) -> str:
    """A URDF of ``model`` (see the module's text). ``root_link``: the link of the floating
    base's joint (``floating_base``: joint 1 is a free flyer, left out: the reader adds its
    own) or, for a fixed base, the link welded to the world (a body on joint 0, or a new
    massless link of that name); ``visual``: the visual GeometryModel (None: no visuals)."""
    first = 2 if floating_base else 1
    # the link each joint moves: the body on it at its origin, or a new one
    link_of: dict[int, str] = {0: root_link}
    if floating_base:
        link_of = {1: root_link}
    taken = {root_link}
    for fr in model.frames:
        j = fr.parentJoint
        if (fr.type == pin.FrameType.BODY and j >= first and j not in link_of
                and fr.placement.isIdentity() and fr.name not in taken):
            link_of[j] = fr.name
            taken.add(fr.name)
    for j in range(first, model.njoints):
        if j not in link_of:
            link_of[j] = f"{model.names[j]}_link"
            taken.add(link_of[j])
    base_joint = 1 if floating_base else 0
    visuals: dict[int, list[str]] = {}
    if visual is not None:
        for obj in visual.geometryObjects:
            visuals.setdefault(int(obj.parentJoint), []).extend(_visuals(obj))

    links, joints = [], []
    root_offset = pin.SE3.Identity()
    if not floating_base:  # the root link may be a body on the world, away from its origin
        for fr in model.frames:
            if fr.name == root_link and fr.parentJoint == 0 and fr.type == pin.FrameType.BODY:
                root_offset = pin.SE3(fr.placement)
    for j in [base_joint] + list(range(first, model.njoints)):
        body = "".join(visuals.get(j, []))
        links.append(f"<link name={quoteattr(link_of[j])}>{_inertial(model.inertias[j])}"
                     f"{body}</link>")
    for j in range(first, model.njoints):
        kind = _kind(model.joints[j])
        if kind not in _AXES:
            raise ValueError(f"joint '{model.names[j]}' is a {kind}: a URDF has no such joint")
        jtype, axis = _AXES[kind]
        if axis is None:
            axis = tuple(model.joints[j].extract().axis)
        parent = model.parents[j]
        M = pin.SE3(model.jointPlacements[j])
        if parent == 0:
            M = root_offset.inverse() * M
        iq, iv = model.idx_qs[j], model.idx_vs[j]
        joints.append(
            f"<joint name={quoteattr(model.names[j])} type=\"{jtype}\">"
            f"<parent link={quoteattr(link_of[parent])}/><child link={quoteattr(link_of[j])}/>"
            f"{_origin(M)}<axis xyz=\"{_vec(axis)}\"/>"
            f"<limit lower=\"{_f(model.lowerPositionLimit[iq])}\" "
            f"upper=\"{_f(model.upperPositionLimit[iq])}\" effort=\"{_f(model.effortLimit[iv])}\" "
            f"velocity=\"{_f(model.velocityLimit[iv])}\"/>"
            f"<dynamics damping=\"{_f(model.damping[iv])}\" friction=\"{_f(model.friction[iv])}\"/>"
            f"</joint>")
    # every other body and frame: a massless link welded where it is
    for fr in model.frames:
        if fr.name in taken or fr.type not in (pin.FrameType.BODY, pin.FrameType.OP_FRAME,
                                               pin.FrameType.SENSOR):
            continue
        j = fr.parentJoint
        if j not in link_of:
            continue  # on the world of a floating base: no link of the robot carries it
        M = pin.SE3(fr.placement)
        if j == 0:
            M = root_offset.inverse() * M
        taken.add(fr.name)
        links.append(f"<link name={quoteattr(fr.name)}/>")
        joints.append(f"<joint name={quoteattr(fr.name + '_fixed')} type=\"fixed\">"
                      f"<parent link={quoteattr(link_of[j])}/><child link={quoteattr(fr.name)}/>"
                      f"{_origin(M)}</joint>")
    robot = name or model.name or "robot"
    return (f"<?xml version=\"1.0\"?>\n<robot name={quoteattr(robot)}>\n"
            + "\n".join(links + joints) + "\n</robot>\n")
