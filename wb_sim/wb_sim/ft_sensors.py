"""Six-axis force-torque sensors: the wrench a joint transmits, from pinocchio's RNEA.

A sensor cuts the robot at a joint, moving or fixed (a URDF fixed joint is merged into its
parent's body by pinocchio; the sensor cuts that body at the joint's frame). Its reading is the
wrench transmitted through the cut during the last step: with ``direction`` parent_to_child,
the wrench the parent side exerts on the child side (everything beyond the joint), force (N)
and torque (N*m, about the frame's origin), expressed in

* ``child``: the joint's frame on the child side (the child link's frame for a URDF joint);
* ``parent``: the joint's frame on the parent side (the joint's origin fixed to the parent
  link: for a revolute joint the same origin, turned back by the joint's angle; for a fixed
  joint the same frame as ``child``);
* ``sensor``: the child frame moved by a pose (Gazebo's ``<frame>sensor</frame>`` with its
  ``<pose>``).

``child_to_parent`` (Gazebo's default) reads the opposite wrench, the one the child side exerts
on the parent. The wrench is that of the step the simulator just took: pinocchio's RNEA at the
step's starting state with the step's mean acceleration ``(v' - v) / dt`` (the IMU's) and, as
external forces, the contact forces of the step (the surfaces', the links' against the ground
and against each other) and the pushes; for a moving joint it is RNEA's ``data.f[joint]``, for
a fixed one the child side's share of its body (the inertias pinocchio keeps per merged link,
the child side's moving joints' ``data.f``, the external forces on the child side's links).
Noise is white Gaussian per axis, drawn once per step from a generator seeded with
``ft_sensors.seed`` (reset re-seeds it); the biases are constant.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .errors import ModelError
from .pin_views import new_data
from .robot import RobotModel, did_you_mean
from .sensors import SeededNoise

FRAMES = ("child", "parent", "sensor")
DIRECTIONS = ("parent_to_child", "child_to_parent")


@dataclass(frozen=True)
class WrenchReading:
    """A force-torque sensor's reading (see :mod:`wb_sim.ft_sensors` for its conventions)."""

    joint: str  #: the joint it cuts
    link: str  #: the child link
    frame: str  #: 'child' | 'parent' | 'sensor': the frame it is expressed in
    direction: str  #: 'parent_to_child' | 'child_to_parent'
    force: np.ndarray  #: N
    torque: np.ndarray  #: N*m, about the frame's origin


@dataclass(frozen=True)
class FTSpec:
    """A declared sensor: its name, joint, frame, direction and sensor pose (child <- sensor)."""

    name: str
    joint: str
    frame: str = "child"
    direction: str = "parent_to_child"
    pose: tuple = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)  #: x y z roll pitch yaw, m and rad
    origin: str = "parameter 'ft_sensors.names'"  #: where it was declared (for messages)


def gazebo_ft_sensors(urdf_xml: str) -> tuple[list[FTSpec], list[str]]:
    """(the sensors, notes on those left out) of the URDF's Gazebo extensions
    ``<gazebo reference="JOINT"><sensor type="force_torque" name="N">`` with their
    ``<force_torque><frame>`` and ``<measure_direction>`` and ``<pose>``."""
    root = ET.fromstring(urdf_xml)
    specs, notes = [], []
    for gz in root.iter("gazebo"):
        joint = gz.get("reference")
        for sensor in gz.findall("sensor"):
            if sensor.get("type") != "force_torque":
                continue
            name = sensor.get("name") or joint
            ft = sensor.find("force_torque")
            frame = (ft.findtext("frame") if ft is not None else None) or "child"
            direction = (ft.findtext("measure_direction") if ft is not None else None) \
                or "child_to_parent"
            pose = (sensor.findtext("pose") or "0 0 0 0 0 0").split()
            frame, direction = frame.strip(), direction.strip()
            if frame not in FRAMES or direction not in DIRECTIONS or len(pose) != 6 or not joint:
                notes.append(f"ft_sensors: the URDF's force_torque sensor '{name}' is left out "
                             f"(frame {frame!r}, measure_direction {direction!r}, pose "
                             f"{' '.join(pose)!r}, reference {joint!r}: supported are frames "
                             f"{FRAMES}, directions {DIRECTIONS}, a 6-number pose, a joint)")
                continue
            specs.append(FTSpec(name, joint, frame, direction, tuple(float(x) for x in pose),
                                origin="the URDF's <gazebo> force_torque sensor"))
    return specs, notes


def _cut_joints(model: pin.Model) -> tuple[list[str], list[str]]:
    """(the moving joints' names, the fixed joints' names) of ``model``: what a sensor may cut."""
    names = [model.names[j] for j in range(1, model.njoints)]
    fixed = [f.name for f in model.frames if f.type == pin.FrameType.FIXED_JOINT
             and f.name != "universe"]
    return names, fixed


def check_ft_joints(model: pin.Model, specs: list[FTSpec]) -> None:
    """ModelError (naming the sensor's ``origin``, with the closest names) for a sensor of
    ``specs`` whose joint ``model`` does not have: a robot's sensors checked on its own model
    before they cut the combined one (wb_sim.multirobot)."""
    names, fixed = _cut_joints(model)
    known = set(names) | set(fixed)
    for spec in specs:
        if spec.joint not in known:
            raise ModelError(f"{spec.origin} ({spec.name}): joint '{spec.joint}' is not in its "
                             f"model{did_you_mean(spec.joint, names + fixed)} (a force-torque "
                             f"sensor cuts a moving or fixed joint)")


class _Cut:
    """One sensor's cut of the model: the joint ``j`` whose body holds the cut, and for a
    fixed joint the frames, moving child joints and merged inertias on its child side."""

    def __init__(self, model: pin.Model, robot: RobotModel, spec: FTSpec):
        self.spec = spec
        names, fixed = _cut_joints(model)
        if spec.joint in names:
            self.j = model.getJointId(spec.joint)
            self.fixed = False
            self.placement = pin.SE3.Identity()  # joint j <- cut frame
            self.link = next((f.name for f in model.frames if f.type == pin.FrameType.BODY
                              and f.parentJoint == self.j
                              and model.frames[f.parentFrame].type == pin.FrameType.JOINT),
                             spec.joint)
        elif spec.joint in fixed:
            fid = model.getFrameId(spec.joint, pin.FrameType.FIXED_JOINT)
            self.j = int(model.frames[fid].parentJoint)
            if self.j == 0:
                raise ModelError(f"{spec.origin} ({spec.name}): joint '{spec.joint}' is welded "
                                 f"to the world; nothing moves through it")
            self.fixed = True
            self.fid = fid
            self.placement = pin.SE3(model.frames[fid].placement)
            beyond = np.array([self._beyond(model, f) for f in range(len(model.frames))])
            #: the frames of the child side in j's own body (their external forces and
            #: inertias are the cut's own; those of the joints beyond are in their data.f)
            self.in_child = beyond & np.array([f.parentJoint == self.j for f in model.frames])
            self.link = next((f.name for f in model.frames if f.parentFrame == fid
                              and f.type == pin.FrameType.BODY), spec.joint)
            #: the links merged into j's body beyond the cut (each fixed joint frame keeps its
            #: child link's inertia), in j's frame
            self.own_inertia = pin.Inertia.Zero()
            for f, frame in enumerate(model.frames):
                if self.in_child[f] and frame.type == pin.FrameType.FIXED_JOINT:
                    self.own_inertia = self.own_inertia + frame.placement.act(frame.inertia)
            #: the moving joints hanging off the child side
            self.children = [k for k in range(1, model.njoints) if model.parents[k] == self.j
                             and beyond[model.getFrameId(model.names[k], pin.FrameType.JOINT)]]
        else:
            raise ModelError(f"{spec.origin} ({spec.name}): joint '{spec.joint}' is not in the "
                             f"model{did_you_mean(spec.joint, names + fixed)} (a force-torque "
                             f"sensor cuts a moving or fixed joint)")
        x, y, z, r, p, yaw = spec.pose
        self.pose = pin.SE3(pin.rpy.rpyToMatrix(r, p, yaw), np.array([x, y, z]))  # child <- sensor
        self.frame, self.sign = spec.frame, (1.0 if spec.direction == "parent_to_child" else -1.0)
        if self.fixed and self.frame == "parent":
            self.frame_used = "child"  # a fixed joint's two sides share the frame
        else:
            self.frame_used = self.frame

    def _beyond(self, model: pin.Model, f: int) -> bool:
        """Whether frame ``f`` lies on the cut's child side (its frame ancestry meets the cut's
        frame before the body's root joint)."""
        while True:
            if f == self.fid:
                return True
            frame = model.frames[f]
            if f == 0 or (frame.type == pin.FrameType.JOINT and frame.parentJoint == self.j):
                return False
            if frame.parentJoint != self.j and frame.type == pin.FrameType.JOINT \
                    and model.parents[frame.parentJoint] != self.j:
                return False  # a joint further out: its own body is not in j's
            f = frame.parentFrame

    def merged_inertia(self, model: pin.Model, frame_payloads) -> pin.Inertia:
        """The child side's own inertia in joint ``j``'s frame: the links pinocchio merged into
        the body beyond the cut (each fixed joint frame keeps its child link's inertia) and the
        payloads on them (``frame_payloads``: (frame id, spatial inertia in the frame))."""
        total = self.own_inertia
        for f, Y in frame_payloads:
            if self.in_child[f]:
                total = total + model.frames[f].placement.act(Y)
        return total


class FTSensors(SeededNoise):
    """The force-torque sensors of a robot (see the module docstring): ``specs`` declared,
    ``model`` the simulator's stepping model (its inertias carry the payloads), ``cfg`` the
    ``ft_sensors`` parameter group (noise, bias, seed)."""

    def __init__(self, model: pin.Model, robot: RobotModel, specs: list[FTSpec], cfg):
        self.model = model
        self.data = new_data(model)
        self.cuts = [_Cut(model, robot, s) for s in specs]
        self._noise_shape = (len(self.cuts), 6)
        self.names = tuple(s.name for s in specs)
        n = len(specs)
        self.cfg = cfg
        self._std = np.tile(np.repeat([cfg.force_noise_std, cfg.torque_noise_std], 3), (n, 1))
        bias = np.zeros((n, 6))
        # the biases are given for the parameters' sensors, in order (the URDF's have none)
        fb = np.reshape(cfg.force_bias, (-1, 3)) if cfg.force_bias else np.zeros((0, 3))
        tb = np.reshape(cfg.torque_bias, (-1, 3)) if cfg.torque_bias else np.zeros((0, 3))
        bias[:len(fb), :3] = fb
        bias[:len(tb), 3:] = tb
        self._bias = bias
        self.noisy = bool(cfg.force_noise_std > 0 or cfg.torque_noise_std > 0) and n > 0
        self._frame_joint = np.array([f.parentJoint for f in model.frames], dtype=int)
        self._fext = pin.StdVec_Force()
        self._fext.extend([pin.Force.Zero() for _ in range(model.njoints)])
        self._touched: list[int] = []
        self.reset()

    def draw_noise(self) -> None:
        """Draw the white noise of the next readings (once per step)."""
        self._noise = self._std * self._rng.standard_normal(self._noise.shape)

    def true_wrenches(self, q, v, a, frames: np.ndarray, wrenches: np.ndarray,
                      pushes=(), frame_payloads=()) -> np.ndarray:
        """(S, 6) the transmitted wrenches without noise or bias, rows [force, torque] in each
        sensor's frame, from the step's start ``q``, ``v``, its mean acceleration ``a``
        (stepping coordinates) and the external wrenches: ``frames`` (k,) the frame each acts
        on, ``wrenches`` (k, 6) each in world axes about the world origin; ``pushes``:
        ((frame, (6,) wrench in the frame's axes about its origin), ...); ``frame_payloads``:
        ((frame, spatial inertia in the frame), ...) of the payloads attached."""
        model, data = self.model, self.data
        pin.forwardKinematics(model, data, q)
        if pushes:
            extra_f, extra_w = [], []
            for fid, w in pushes:
                frame = model.frames[fid]
                oMf = data.oMi[frame.parentJoint] * frame.placement
                extra_f.append(fid)
                extra_w.append(oMf.act(pin.Force(np.asarray(w, dtype=float))).vector)
            frames = np.concatenate([np.asarray(frames, dtype=int), extra_f])
            wrenches = np.vstack([np.reshape(wrenches, (-1, 6)), extra_w])
        joints = self._frame_joint[frames] if len(frames) else np.zeros(0, dtype=int)
        world = np.zeros((model.njoints, 6))
        np.add.at(world, joints, wrenches)
        fext = self._fext
        for j in self._touched:  # last read's
            fext[j] = pin.Force.Zero()
        self._touched = np.flatnonzero(world.any(axis=1)).tolist()
        for j in self._touched:
            fext[j] = data.oMi[j].actInv(pin.Force(world[j]))
        pin.rnea(model, data, q, v, a, fext)
        out = np.empty((len(self.cuts), 6))
        for i, cut in enumerate(self.cuts):
            j = cut.j
            if not cut.fixed:
                f = pin.Force(data.f[j])
                if cut.frame_used == "parent":  # parent side <- child side: the joint's motion
                    f = (model.jointPlacements[j].inverse() * data.liMi[j]).act(f)
            else:
                Y = cut.merged_inertia(model, frame_payloads)
                vj, aj = data.v[j], data.a_gf[j]
                f = Y * aj + vj.cross(Y * vj)
                for k in cut.children:
                    f = f + data.liMi[k].act(data.f[k])
                mine = cut.in_child[frames] if len(frames) else np.zeros(0, dtype=bool)
                if mine.any():
                    f = f - data.oMi[j].actInv(pin.Force(wrenches[mine].sum(axis=0)))
                f = cut.placement.actInv(f)
            if cut.frame_used == "sensor":
                f = cut.pose.actInv(f)
            out[i] = cut.sign * f.vector
        return out

    def read(self, true: np.ndarray) -> np.ndarray:
        """The readings: ``true`` plus bias and this step's noise (a new array)."""
        return true + self._bias + self._noise

    def readings(self, values: np.ndarray) -> dict[str, WrenchReading]:
        return {c.spec.name: WrenchReading(c.spec.joint, c.link, c.spec.frame, c.spec.direction,
                                           w[:3].copy(), w[3:].copy())
                for c, w in zip(self.cuts, values)}
