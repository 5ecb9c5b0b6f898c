"""Recording a headless run in memory: :class:`Recorder` samples a
:class:`~wb_sim.Simulator` after each step into a :class:`History` of arrays,
which saves to and loads from ``.npz`` and is what :mod:`wb_sim.tools.plot` draws.

numpy only (the plots import matplotlib themselves, the bag reader rosbags)::

    rec = Recorder(sim)
    for _ in range(steps):
        sim.step(tau)
        rec.record(sim, q_ref)          # q_ref: reference joint positions, or None
    hist = rec.history()
    hist.save("run.npz")                # History.load("run.npz") gives it back, bit for bit

Frames and units: positions in the world frame (m), contact forces of the
ground on each surface in the world frame (N), joint positions in rad (m for
prismatic joints), torques in N*m (N), times in s.
"""

from __future__ import annotations

import dataclasses
import math
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import WbSimError

#: format version written into every .npz history
FORMAT_VERSION = 1


class RecordingError(WbSimError, ValueError):
    """A recording (``.npz`` history, rosbag2) is missing, unreadable or inconsistent."""


def joint_units(robot) -> tuple[str, ...]:
    """``"m"`` for each prismatic joint of a :class:`~wb_sim.RobotModel`, else ``"rad"``."""
    model = robot.model
    return tuple("m" if model.joints[int(j)].shortname().startswith(("JointModelP",))
                 else "rad" for j in robot.joint_ids)


@dataclass(eq=False)
class History:
    """Recorded signals of a run, one row per sample.

    ``n`` samples, ``nj`` joints (``joint_names`` order), ``ns`` contact
    surfaces (``surface_names`` order). Unknown values are NaN.
    """

    t: np.ndarray  #: (n,) simulated time, s
    wall: np.ndarray  #: (n,) wall-clock time since the first sample, s
    base_position: np.ndarray  #: (n, 3) world position of the base origin, m
    com: np.ndarray  #: (n, 3) world position of the centre of mass, m
    contact_force: np.ndarray  #: (ns, n, 3) ground force on each surface, world frame, N
    joint_positions: np.ndarray  #: (n, nj) rad (m for prismatic joints)
    reference_positions: np.ndarray  #: (n, nj) the controller's reference; NaN when unknown
    applied_torques: np.ndarray  #: (n, nj) after saturation, N*m (N)
    torque_limits: np.ndarray  #: (nj,) effort limits, N*m (N); inf when none
    joint_names: tuple[str, ...]
    surface_names: tuple[str, ...]
    ground_normal: np.ndarray = dataclasses.field(
        default_factory=lambda: np.array([0.0, 0.0, 1.0]))  #: (3,) unit, world frame
    friction_coefficient: float = math.nan  #: Coulomb mu of the contacts (NaN: unknown)
    mass: float = math.nan  #: robot mass, kg
    gravity: np.ndarray = dataclasses.field(
        default_factory=lambda: np.array([0.0, 0.0, -9.81]))  #: (3,) m/s^2, world frame
    robot: str = ""  #: robot (URDF model) name
    dt: float = math.nan  #: physics step, s
    joint_units: tuple[str, ...] = ()  #: "rad" or "m" per joint ('' = all rad)

    def __post_init__(self) -> None:
        f = lambda x: np.asarray(x, dtype=float)  # noqa: E731
        self.t, self.wall = f(self.t).reshape(-1), f(self.wall).reshape(-1)
        self.base_position, self.com = f(self.base_position), f(self.com)
        self.contact_force = f(self.contact_force)
        self.joint_positions = f(self.joint_positions)
        self.reference_positions = f(self.reference_positions)
        self.applied_torques = f(self.applied_torques)
        self.torque_limits = f(self.torque_limits).reshape(-1)
        self.ground_normal, self.gravity = f(self.ground_normal), f(self.gravity)
        self.joint_names = tuple(str(s) for s in self.joint_names)
        self.surface_names = tuple(str(s) for s in self.surface_names)
        self.joint_units = tuple(str(s) for s in self.joint_units) or ("rad",) * len(
            self.joint_names)
        self.friction_coefficient, self.mass = float(self.friction_coefficient), float(self.mass)
        self.dt, self.robot = float(self.dt), str(self.robot)
        n, nj, ns = self.t.size, len(self.joint_names), len(self.surface_names)
        expected = {"wall": (n,), "base_position": (n, 3), "com": (n, 3),
                    "contact_force": (ns, n, 3), "joint_positions": (n, nj),
                    "reference_positions": (n, nj), "applied_torques": (n, nj),
                    "torque_limits": (nj,), "ground_normal": (3,), "gravity": (3,),
                    "joint_units": (nj,)}
        for key, shape in expected.items():
            got = np.shape(getattr(self, key))
            if got != shape:
                raise RecordingError(f"history field '{key}' has shape {got}, expected {shape} "
                                     f"({n} samples, {nj} joints, {ns} surfaces)")

    @property
    def n(self) -> int:
        """Number of samples."""
        return self.t.size

    @property
    def normal_force(self) -> np.ndarray:
        """(ns, n) component of each surface's contact force along the ground normal, N."""
        return self.contact_force @ self.ground_normal

    @property
    def tangential_force(self) -> np.ndarray:
        """(ns, n) magnitude of each surface's contact force in the ground plane, N."""
        n = self.ground_normal
        return np.linalg.norm(self.contact_force - self.normal_force[..., None] * n, axis=-1)

    # ------------------------------------------------------------------ files

    def save(self, path: str | Path) -> Path:
        """Write an uncompressed ``.npz`` (the suffix is added if missing, and the
        directory created); returns its path."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_name(path.name + ".npz")
        arrays = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for key in ("joint_names", "surface_names", "joint_units"):
            arrays[key] = np.array(arrays[key], dtype=str)
        arrays["format_version"] = np.array(FORMAT_VERSION)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, **arrays)
        except OSError as e:
            raise RecordingError(f"cannot write '{path}': {e.strerror or e}") from None
        return path

    @classmethod
    def load(cls, path: str | Path) -> "History":
        """Read a history written by :meth:`save`; :class:`RecordingError` if the file
        is missing or is not one."""
        path = Path(path)
        if not path.is_file():
            raise RecordingError(f"no such file: '{path}'")
        with open(path, "rb") as f:
            if f.read(4) != b"PK\x03\x04":
                raise RecordingError(f"'{path}' is not a wb_sim history (.npz): not a zip "
                                     f"archive")
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise RecordingError(f"'{path}' is not a wb_sim history (.npz): {e}") from None
        if "format_version" not in data:
            raise RecordingError(f"'{path}' is an .npz file but not a wb_sim history "
                                 f"(no 'format_version' entry)")
        version = int(data.pop("format_version"))
        if version > FORMAT_VERSION:
            raise RecordingError(f"'{path}' has history format {version}; this wb_sim reads "
                                 f"up to {FORMAT_VERSION}")
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [k for k in names if k not in data]
        if missing:
            raise RecordingError(f"'{path}': the history lacks {', '.join(missing)}")
        kw = {k: data[k] for k in names}
        for key in ("joint_names", "surface_names", "joint_units"):
            kw[key] = tuple(kw[key].tolist())
        for key in ("friction_coefficient", "mass", "dt"):
            kw[key] = float(kw[key])
        kw["robot"] = str(kw["robot"])
        return cls(**kw)


class Recorder:
    """Samples a :class:`~wb_sim.Simulator` into growing buffers.

    Call :meth:`record` after each ``sim.step``; it keeps the steps whose
    count is a multiple of ``every``. Buffers start at ``capacity`` samples and
    double when full. :meth:`history` returns the samples so far.

    Cost per kept sample, measured on the 2-core CI machine with the humanoid
    (23 joints, 8 contact points): 14 us (the simulator's contact-point reading
    6.5 us, the centre of mass 2.5 us, the rest copying into the buffers),
    against 85 us for a step with its controller; a skipped sample costs
    0.15 us. After ``sim.reset()`` call :meth:`clear` (or keep the samples:
    ``t`` then starts again from 0).
    """

    def __init__(self, sim, every: int = 1, capacity: int = 4096):
        if int(every) < 1:
            raise ValueError(f"every must be a positive integer, got {every!r}")
        self.sim = sim
        self.every = int(every)
        robot = sim.robot
        self._nj = sim.nj
        self.surface_names = tuple(sim.surface_names)
        pts = sim.contact_points_state()
        # (ns, n_points) 0/1: sums the points' forces per surface
        self._sum = np.array([[1.0 if s == name else 0.0 for s in pts.surface]
                              for name in self.surface_names]).reshape(len(self.surface_names),
                                                                       len(pts.surface))
        single = bool(np.all(robot.nq_joint == 1))
        self._idx_q = np.asarray(robot.idx_q) if single else None
        self._fixed_base = None if robot.floating_base else sim.state.base_position
        self._meta = dict(
            torque_limits=np.array(sim.actuation.effort_limit, dtype=float),
            joint_names=tuple(sim.joint_names), surface_names=self.surface_names,
            ground_normal=np.array(sim.config.ground.normal, dtype=float),
            friction_coefficient=float(sim.config.contact.friction_coefficient),
            mass=float(sim.mass), gravity=np.array(sim.config.gravity, dtype=float),
            robot=str(robot.model.name), dt=float(sim.dt), joint_units=joint_units(robot))
        self._n = 0
        self._wall0: float | None = None
        self._alloc(max(16, int(capacity)))

    def _alloc(self, cap: int) -> None:
        nj, ns = self._nj, len(self.surface_names)
        new = {"t": np.empty(cap), "wall": np.empty(cap), "base_position": np.empty((cap, 3)),
               "com": np.empty((cap, 3)), "contact_force": np.empty((ns, cap, 3)),
               "joint_positions": np.empty((cap, nj)),
               "reference_positions": np.full((cap, nj), np.nan),
               "applied_torques": np.empty((cap, nj))}
        n = self._n
        if n:
            for key, buf in new.items():
                if key == "contact_force":
                    buf[:, :n] = self._buf[key][:, :n]
                else:
                    buf[:n] = self._buf[key][:n]
        self._buf = new
        self._cap = cap

    def __len__(self) -> int:
        return self._n

    def record(self, sim=None, q_ref=None) -> bool:
        """Append a sample of ``sim`` (default: the recorder's) if its step count
        is a multiple of ``every``; ``q_ref`` (nj,) is the reference joint
        position, if any. Returns whether a sample was taken."""
        sim = self.sim if sim is None else sim
        if sim.step_count % self.every:
            return False
        wall = time.perf_counter()
        if self._wall0 is None:
            self._wall0 = wall
        if self._n == self._cap:
            self._alloc(2 * self._cap)
        i, b = self._n, self._buf
        q = sim.q
        b["t"][i] = sim.t
        b["wall"][i] = wall - self._wall0
        b["base_position"][i] = q[:3] if self._fixed_base is None else self._fixed_base
        b["com"][i] = sim.center_of_mass()
        if self._sum.size:
            b["contact_force"][:, i] = self._sum @ sim.contact_points_state().force
        b["joint_positions"][i] = q[self._idx_q] if self._idx_q is not None \
            else sim.robot.joint_positions(q)
        if q_ref is not None:
            b["reference_positions"][i] = q_ref
        b["applied_torques"][i] = sim.applied_torques
        self._n = i + 1
        return True

    def history(self) -> History:
        """The samples so far (copies)."""
        n, b = self._n, self._buf
        arrays = {k: (v[:, :n] if k == "contact_force" else v[:n]).copy() for k, v in b.items()}
        return History(**arrays, **self._meta)

    def clear(self) -> None:
        """Forget the samples (e.g. after ``sim.reset()``); the wall clock restarts."""
        self._n = 0
        self._wall0 = None
        self._buf["reference_positions"][:] = np.nan
