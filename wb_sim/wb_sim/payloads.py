"""Rigid payloads attached to a link: checked once, added to the models' body inertias.

A payload (mass, centre of mass and inertia in a link's frame) is welded to the link: its
spatial inertia is added to that of the link's parent joint, in the simulator's own copies of
the pinocchio model (the physical one and the stepping one), so that M(q), gravity, the bias
forces, the contact solve and the IMU see it exactly as a body of the URDF. The simulator keeps
the models' original inertias and rebuilds each touched joint's inertia from them and the
payloads attached now (:func:`apply_payloads`): detaching restores the original bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .errors import CommandError, ModelError
from .robot import RobotModel, did_you_mean


@dataclass(frozen=True)
class Payload:
    """A rigid payload welded to a link (values as given; frozen, compared by value)."""

    name: str
    link: str  #: the frame it is attached to
    mass: float  #: kg, >= 0
    com: tuple[float, float, float]  #: centre of mass in the link's frame, m
    #: inertia about the centre of mass, link axes, kg*m^2, row by row (3 x 3, symmetric)
    inertia: tuple[tuple[float, float, float], ...]

    def spatial_inertia(self) -> pin.Inertia:
        """The payload's spatial inertia about the link frame's origin, link axes."""
        return pin.Inertia(self.mass, np.array(self.com), np.array(self.inertia))


def _floats(x, shape: tuple, what: str) -> np.ndarray:
    try:
        if np.iscomplexobj(x):
            raise ValueError("complex value")
        out = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as e:
        raise CommandError(f"{what} must be {shape} real numbers: {e}") from None
    if out.shape != shape:
        raise CommandError(f"{what} must have shape {shape}, got shape {out.shape}")
    if not np.isfinite(out).all():
        raise CommandError(f"{what} has non-finite entries: {out.tolist()}")
    return out


def make_payload(robot: RobotModel, name: str, link: str, mass, com, inertia,
                 where: str = "attach_payload") -> Payload:
    """A checked :class:`Payload`: ModelError for an unknown link (with the closest names)
    or a link welded to the world (a payload there moves nothing); CommandError for a
    mass that is negative or not finite, a centre of mass that is not 3 finite numbers, an
    inertia that is not a symmetric positive semi-definite 3 x 3 matrix obeying the
    triangle inequality (a point mass, zero inertia, is allowed). ``where`` names the
    call or the parameter in the messages."""
    if not isinstance(name, str) or not name:
        raise CommandError(f"{where}: the payload's name must be a non-empty string, got {name!r}")
    if not isinstance(link, str) or not robot.model.existFrame(link):
        names = robot.frame_names()
        raise ModelError(f"{where}: payload '{name}': link {link!r} is not in the model"
                         f"{did_you_mean(str(link), names)} (RobotModel.frame_names() lists "
                         f"the frames)")
    fid = robot.frame_id(link)
    if robot.model.frames[fid].parentJoint == 0:
        raise ModelError(f"{where}: payload '{name}': link '{link}' is welded to the world "
                         f"(fixed base); a payload there moves nothing: attach it to a link "
                         f"that a joint moves")
    m = float(_floats(mass, (), f"{where}: payload '{name}': mass (kg)"))
    if m < 0:
        raise CommandError(f"{where}: payload '{name}' has a negative mass {m:g} kg; a mass "
                           f"must be >= 0")
    c = _floats(com, (3,), f"{where}: payload '{name}': com (m, link frame)")
    inertia_array = _floats(inertia, (3, 3), f"{where}: payload '{name}': inertia (kg*m^2)")
    scale = max(float(np.abs(inertia_array).max()), 1e-300)
    if not np.allclose(inertia_array, inertia_array.T, rtol=0.0, atol=1e-12 * scale):
        raise CommandError(f"{where}: payload '{name}': the inertia is not symmetric: "
                           f"{inertia_array.tolist()}")
    ev = np.linalg.eigvalsh(0.5 * (inertia_array + inertia_array.T))
    tol = 1e-12 * scale
    if ev[0] < -tol:
        raise CommandError(f"{where}: payload '{name}': the inertia is not positive "
                           f"semi-definite (eigenvalues {ev.tolist()} kg*m^2)")
    if ev[0] + ev[1] < ev[2] - tol:
        raise CommandError(f"{where}: payload '{name}': the inertia's principal moments "
                           f"{ev.tolist()} break the triangle inequality (no rigid body has "
                           f"them)")
    if not math.isfinite(m) or (m == 0 and scale > 1e-300):
        raise CommandError(f"{where}: payload '{name}': a payload without mass cannot have "
                           f"an inertia")
    return Payload(name=name, link=link, mass=m, com=tuple(float(x) for x in c),
                   inertia=tuple(tuple(float(x) for x in row) for row in inertia_array))


def joint_and_placement(robot: RobotModel, link: str) -> tuple[int, pin.SE3]:
    """(the link's parent joint, the link's placement in that joint's frame)."""
    frame = robot.model.frames[robot.frame_id(link)]
    return int(frame.parentJoint), pin.SE3(frame.placement)


def apply_payloads(models, originals: list, robot: RobotModel, before: tuple,
                   after: tuple) -> None:
    """Set the body inertias of ``models`` (pinocchio models of the same tree) for the
    payloads ``after`` where they were set for ``before``: each joint either set touches is
    rebuilt from its original inertia (``originals``, copies of the models' first
    ``inertias``) plus its payloads in ``after``'s order, so that no payload leaves a
    rounding behind once it is gone."""
    add: dict[int, list] = {}
    for p in after:
        joint, placement = joint_and_placement(robot, p.link)
        add.setdefault(joint, []).append(placement.act(p.spatial_inertia()))
    touched = set(add) | {joint_and_placement(robot, p.link)[0] for p in before}
    for j in sorted(touched):
        total = pin.Inertia(originals[j])
        for Y in add.get(j, ()):
            total = total + Y
        for model in models:
            model.inertias[j] = total
