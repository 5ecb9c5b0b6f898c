"""The TF tree of a robot, computed from its URDF with pinocchio (no rclpy).

As robot_state_publisher does, every URDF joint gives one transform
``parent link -> child link``: fixed joints are static (published once on
``/tf_static``), moving joints change with ``q`` (``/tf``). The floating base
adds ``world -> root link``, moving; a fixed base adds it as a static one.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..errors import ConfigError
from ..robot import RobotModel


@dataclass(frozen=True)
class Transform:
    """``parent <- child``: translation (m) and quaternion (x, y, z, w)."""

    parent: str
    child: str
    translation: np.ndarray
    rotation: np.ndarray


class FrameTree:
    """Transforms of every URDF link, for TF.

    Args:
        robot: the robot model.
        world_frame: name of the world frame.
        base_placement: world <- root link for a fixed base (ignored when floating).
    """

    def __init__(self, robot: RobotModel, world_frame: str, base_placement: pin.SE3):
        self.robot = robot
        self.world_frame = world_frame
        root = ET.fromstring(robot.description_urdf)
        moving, fixed = [], []
        for j in root.findall("joint"):  # direct children: not those of <transmission>
            parent, child = j.find("parent").get("link"), j.find("child").get("link")
            (fixed if j.get("type") == "fixed" else moving).append((j, parent, child))
        self._fixed = [(p, c, _origin(j)) for j, p, c in fixed]
        #: moving joints: parent <- child = origin * motion(axis, position)
        self.moving = [(p, c) for _, p, c in moving]
        self._joint_api = np.array([robot.joint_index(j.get("name")) for j, _, _ in moving],
                                   dtype=np.intp)
        origins = [_origin(j) for j, _, _ in moving]
        axes = np.array([_axis(j) for j, _, _ in moving]).reshape(-1, 3)
        self._prismatic = np.array([j.get("type") == "prismatic" for j, _, _ in moving])
        self._t0 = np.array([M.translation for M in origins]).reshape(-1, 3)
        self._q0 = np.array([pin.Quaternion(M.rotation).coeffs() for M in origins]).reshape(-1, 4)
        self._R0_axis = np.array([M.rotation @ a for M, a in zip(origins, axes)]).reshape(-1, 3)
        self._has_prismatic = bool(self._prismatic.any())
        # q0 (x) (s axis, c) = c q0 + s (q0 (x) (axis, 0)): linear in (c, s), the
        # second quaternion constant (Hamilton product, (x, y, z, w))
        v0, w0 = self._q0[:, :3], self._q0[:, 3:]
        self._q0_axis = np.hstack([w0 * axes + np.cross(v0, axes),
                                   -np.einsum("ij,ij->i", v0, axes)[:, None]])
        self.root_link = robot.root_link
        self._base_placement = base_placement

    def static_transforms(self) -> list[Transform]:
        """The fixed joints' transforms (and world -> root for a fixed base)."""
        out = [_transform(p, c, M) for p, c, M in self._fixed]
        if not self.robot.floating_base:
            out.insert(0, _transform(self.world_frame, self.root_link, self._base_placement))
        return out

    def moving_transforms(self, q: np.ndarray) -> list[Transform]:
        """The moving joints' transforms at ``q`` (and world -> root when floating)."""
        translation, rotation = self.moving_arrays(self.robot.joint_positions(q))
        out = [Transform(p, c, t, r) for (p, c), t, r in zip(self.moving, translation, rotation)]
        if self.robot.floating_base:
            out.insert(0, Transform(self.world_frame, self.root_link, q[:3].copy(), q[3:7].copy()))
        return out

    def moving_arrays(self, joint_positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(m, 3) translations and (m, 4) quaternions (x, y, z, w) of the moving
        joints, vectorized: revolute ``origin * Rot(axis, x)``, prismatic
        ``origin * Trans(axis x)``."""
        x = joint_positions[self._joint_api]
        half = 0.5 * x
        if self._has_prismatic:
            half[self._prismatic] = 0.0
            trans = self._t0 + np.where(self._prismatic, x, 0.0)[:, None] * self._R0_axis
        else:
            trans = self._t0.copy()
        rot = self._q0 * np.cos(half)[:, None]
        rot += self._q0_axis * np.sin(half)[:, None]
        return trans, rot


def _origin(joint: ET.Element) -> pin.SE3:
    o = joint.find("origin")
    xyz = [float(v) for v in (o.get("xyz", "0 0 0") if o is not None else "0 0 0").split()]
    rpy = [float(v) for v in (o.get("rpy", "0 0 0") if o is not None else "0 0 0").split()]
    return pin.SE3(pin.rpy.rpyToMatrix(*rpy), np.array(xyz))


def _axis(joint: ET.Element) -> np.ndarray:
    a = joint.find("axis")
    axis = np.array([float(v) for v in (a.get("xyz") if a is not None else "1 0 0").split()])
    return axis / np.linalg.norm(axis)


def _transform(parent: str, child: str, M: pin.SE3) -> Transform:
    return Transform(parent, child, M.translation.copy(), pin.Quaternion(M.rotation).coeffs().copy())


def ft_sensor_frames(ft_sensors, urdf_xml: str, taken, prefix: str = ""
                     ) -> tuple[list[str], list[Transform], list[str]]:
    """The TF frame of each force-torque sensor (``ft_sensors``: the simulator's
    :class:`wb_sim.ft_sensors.FTSensors`, in its ``names`` order): (frame ids, the static
    transforms to add to ``/tf_static``, notes to log).

    * ``child`` (and ``parent`` of a fixed joint, whose two sides share the frame): the child
      link, already in TF;
    * ``parent`` of a moving joint: the joint's frame on the parent side, the URDF joint's
      ``<origin>`` in its parent link, static;
    * ``sensor``: the child link moved by the sensor's pose, static.

    A new frame is named after its sensor, or ``<sensor>_frame`` where that name is a frame
    already (``taken``: the URDF's links and the world frame; noted); ConfigError when both
    are. ``prefix``: the robot's in the combined model of several robots (its sensors cut
    ``<prefix><joint>``; ``urdf_xml`` is its own URDF): the frames are its own names.
    """
    root = ET.fromstring(urdf_xml)
    joints = {j.get("name"): j for j in root.findall("joint")}
    taken = set(taken) | {link.get("name") for link in root.findall("link")}
    ids, static, notes = [], [], []
    for cut in ft_sensors.cuts:
        spec = cut.spec
        link = cut.link.removeprefix(prefix)
        if cut.frame_used == "child":
            ids.append(link)
            continue
        if cut.frame_used == "parent":
            j = joints[spec.joint.removeprefix(prefix)]
            parent, M = j.find("parent").get("link"), _origin(j)
        else:  # sensor: the child side's frame (the child link's) moved by the pose
            parent, M = link, cut.pose
        name = spec.name
        if name in taken:
            alt = f"{name}_frame"
            if alt in taken:
                raise ConfigError(f"{spec.origin}: the force-torque sensor "
                                  f"'{name}' needs a TF frame, '{name}' or '{alt}', and "
                                  f"both name a frame already; rename the sensor")
            notes.append(f"force-torque sensor '{name}': a frame of that name exists already; "
                         f"its frame in TF is '{alt}'")
            name = alt
        taken.add(name)
        ids.append(name)
        static.append(_transform(parent, name, M))
    return ids, static, notes
