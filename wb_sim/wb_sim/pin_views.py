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
the four ``nv x nv x nv``    the second-order RNEA derivatives, which    :func:`new_data`
tensors of a ``Data``       wb_sim never computes: their pages, zeros   keeps them resident
(``d2tau_*``: an Eigen      since the constructor, handed back to the   (a plain
``Tensor3x``, a pointer     system (``madvise(MADV_DONTNEED)``; they    ``pin.Data``)
and three sizes)            read zeros again if ever used)
==========================  ==========================================  ====================

It is checked when this module is imported (on a small model: addresses, strides and
values against ``homogeneous``) and again for every data object a view is made of;
whatever does not hold takes the fallback. ``WB_SIM_PIN_COPY=1`` in the environment
forces the fallback (a test runs the contact code so and compares).

The tensors are why memory grew with the cube of the joints (pinocchio allocates and zeroes
them in every ``Data``, 4 * 8 * nv^3 bytes: 254 MB at 199 joints); without them a ``Data``
is quadratic (its ``nv x nv`` matrices). :func:`new_data` finds them in the ``Data`` it has
just built (read through ``/proc/self/mem``, which answers an error rather than a crash for
an address that is not mapped): four consecutive tensor headers, each a pointer followed by
the sizes (nv, nv, nv), whose memory holds only zeros; only whole pages inside a tensor are
handed back, and only memory this new object owns. Anything that does not hold (another
layout, no ``/proc``, no ``madvise``) keeps the plain ``Data``. ``WB_SIM_PIN_FULL_DATA=1``
keeps them resident (a test compares the physics both ways).
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pinocchio as pin

#: environment variable: "1" forces the copying fallback
FORCE_COPY_ENV = "WB_SIM_PIN_COPY"
FORCED_COPY = os.environ.get(FORCE_COPY_ENV, "") not in ("", "0")

#: environment variable: "1" keeps pinocchio's cubic tensors resident (a plain pin.Data)
FULL_DATA_ENV = "WB_SIM_PIN_FULL_DATA"
FULL_DATA = os.environ.get(FULL_DATA_ENV, "") not in ("", "0")

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


# ---------------------------------------------------------------------------
# Data without its cubic tensors resident
# ---------------------------------------------------------------------------

_MADV_DONTNEED = 4  # Linux
#: bytes of a boost.python instance before its holder pointer (refcount, type, size, dict,
#: weakrefs)
_HOLDER_OFFSET = 40
#: bytes of the Data read to find the tensors' headers (pinocchio 3-4: about 6 kB in)
_SCAN_BYTES = 1 << 15
_CHUNK = 1 << 22


def _read(fd: int, address: int, size: int) -> bytes:
    try:
        return os.pread(fd, size, address)
    except OSError:
        return b""


def _zeros(fd: int, address: int, size: int) -> bool:
    """Whether the ``size`` bytes at ``address`` are mapped and all zero."""
    for start in range(address, address + size, _CHUNK):
        n = min(_CHUNK, address + size - start)
        block = _read(fd, start, n)
        if len(block) != n or block.count(0) != n:
            return False
    return True


def _tensors(fd: int, data: pin.Data, nv: int) -> list[int]:
    """The addresses of the four (nv, nv, nv) tensors of ``data``, or [] where they are
    not found as expected."""
    if type(data).__basicsize__ < _HOLDER_OFFSET + 8:  # not a boost.python instance
        return []
    header = (ctypes.c_int64 * 6).from_address(id(data))
    holder = int(header[5])
    if holder <= 0:
        return []
    raw = b""
    for start in range(0, _SCAN_BYTES, 4096):  # stop at the first page that cannot be read
        block = _read(fd, holder + start, 4096)
        raw += block
        if len(block) < 4096:
            break
    words = np.frombuffer(raw[: len(raw) // 8 * 8], dtype=np.int64)
    cube = np.flatnonzero((words[1:-2] == nv) & (words[2:-1] == nv) & (words[3:] == nv))
    for i in cube:
        run = [int(i) + 4 * k for k in range(4)]
        if all(j in cube for j in run[1:]) and int(i) + 4 * 4 not in cube:
            return [int(words[j]) for j in run]
    return []


def release_cubic_tensors(data: pin.Data, nv: int) -> int:
    """Hand back the pages of the four nv^3 tensors of a ``data`` nobody has used yet
    (they hold zeros); the bytes handed back (0 where they were not found or any check
    failed: the ``data`` is then untouched)."""
    size = 8 * nv ** 3
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    if size < page or not os.path.exists("/proc/self/mem"):
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        addresses = _tensors(fd, data, nv)
        if not addresses or not all(_zeros(fd, a, size) for a in addresses):
            return 0
        released = 0
        for a in addresses:
            start = -(-a // page) * page
            end = (a + size) // page * page
            if end > start and madvise(start, end - start, _MADV_DONTNEED) == 0:
                released += end - start
        return released
    finally:
        os.close(fd)


def new_data(model: pin.Model) -> pin.Data:
    """``pin.Data(model)`` with the pages of its four nv^3 tensors handed back (see the
    module's docstring): a Data quadratic in the joints, the same in every computation
    wb_sim makes. Built by the constructor, not ``model.createData()`` (which holds two
    copies at once while it returns)."""
    data = pin.Data(model)
    if not FULL_DATA:
        release_cubic_tensors(data, model.nv)
    return data
