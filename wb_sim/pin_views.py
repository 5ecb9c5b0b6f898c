"""The one place where wb_sim reads pinocchio's memory directly, with a copying fallback.

The contact code reads every joint placement of ``data.oMi`` (and ``data.liMi``) once a
step. pinocchio's Python API hands out one SE3 object per joint (about 1 us each, and
an allocation); pinocchio keeps those placements in one contiguous vector, so a numpy
view of that storage reads them all for nothing:

==========================  ==========================================  ====================
internal                    what for                                    fallback
==========================  ==========================================  ====================
the storage of ``data.oMi``  one read-only (njoints, 12) view: each row  :func:`copy_records`
/ ``data.liMi`` (an         a joint's placement as pinocchio stores an  (a new array, joint
aligned ``std::vector`` of  SE3, the rotation column-major, then the    by joint)
SE3, 96 bytes each)         translation
==========================  ==========================================  ====================

It is checked when this module is imported (on a small model: addresses, strides and
values against ``homogeneous``) and again for every data object a view is made of;
whatever does not hold takes the fallback. ``WB_SIM_PIN_COPY=1`` in the environment
forces the fallback (a test runs the contact code so and compares).
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pinocchio as pin

#: environment variable: "1" forces the copying fallback
FORCE_COPY_ENV = "WB_SIM_PIN_COPY"
FORCED_COPY = os.environ.get(FORCE_COPY_ENV, "") not in ("", "0")

#: bytes of one stored placement: rotation (9 doubles) and translation (3), 16-aligned
_STRIDE = 96


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _view(data: pin.Data, joint_ids, attr: str) -> np.ndarray | None:
    placements = getattr(data, attr)
    count = len(placements)
    if count < 2:
        return None
    try:
        base = _address(placements[0].rotation)
        for j in range(count):
            rotation, translation = placements[j].rotation, placements[j].translation
            if (_address(rotation) != base + _STRIDE * j
                    or _address(translation) != base + _STRIDE * j + 72
                    or rotation.strides != (8, 24) or rotation.flags.owndata
                    or translation.flags.owndata):
                return None
        buffer = (ctypes.c_double * (12 * count)).from_address(base)
        rows = np.frombuffer(buffer, dtype=float).reshape(count, 12)
        rows.flags.writeable = False
    except (AttributeError, TypeError, ValueError):
        return None
    for j in joint_ids:
        if not np.array_equal(rows[j].reshape(4, 3).T, placements[int(j)].homogeneous[:3]):
            return None
    return rows


def _works() -> bool:
    """Whether the view reads this pinocchio's placements right (a three-joint model
    moved to an arbitrary configuration)."""
    model = pin.Model()
    parent = 0
    for k, axis in enumerate((pin.JointModelRX(), pin.JointModelRY(), pin.JointModelPZ())):
        parent = model.addJoint(parent, axis, pin.SE3(np.eye(3), np.array([0.1, 0.2, 0.3])),
                                f"j{k}")
    data = model.createData()
    pin.forwardKinematics(model, data, np.array([0.3, -1.1, 0.25]))
    ids = np.arange(model.njoints)
    return _view(data, ids, "oMi") is not None and _view(data, ids, "liMi") is not None


#: whether views are used (they work with this pinocchio and are not forced off)
AVAILABLE = not FORCED_COPY and _works()


def placement_view(data: pin.Data, joint_ids, attr: str = "oMi") -> np.ndarray | None:
    """A read-only (njoints, 12) view of the storage of ``data.oMi`` (or of another
    vector of joint placements, ``attr``: ``liMi``), row j holding joint j's placement
    (the rotation column-major, then the translation: the columns of [R | t]), or None
    where views are not available (then read with :func:`copy_records`). The addresses,
    strides and the values of ``joint_ids`` are checked against ``homogeneous`` before
    the view is trusted. It stays valid while ``data`` lives: the caller keeps a
    reference."""
    return _view(data, joint_ids, attr) if AVAILABLE else None


def copy_records(data: pin.Data, attr: str = "oMi") -> np.ndarray:
    """The fallback: the same (njoints, 12) records as :func:`placement_view`, copied
    joint by joint into a new array."""
    return np.array([np.concatenate([M.rotation.T.reshape(-1), M.translation])
                     for M in getattr(data, attr)])
