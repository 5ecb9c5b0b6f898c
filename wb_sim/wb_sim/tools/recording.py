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
prismatic joints), joint velocities in rad/s (m/s), torques in N*m (N), times in s.

With drives (``actuators.model`` other than ``ideal``) the history also holds, per
driven joint, the drives' readings (winding current A, terminal voltage V, winding
temperature C) and, for ``dc_motor``, the motor constants the torque-speed envelope is
drawn from (:data:`DRIVE_COLUMNS`, :func:`operating_points`, :func:`torque_speed_envelope`).
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
from ..sensors import pressure_centre, surface_pressure_centres

#: format version written into every .npz history (2: joint velocities and the drives'
#: readings; 3: the force-torque sensors' readings; 4: the contact truth's centres of
#: pressure and ZMP; 5: the solver health of /diagnostics; an older file reads with them
#: unknown)
FORMAT_VERSION = 5

#: the columns of :attr:`History.drive_parameters`, one row per driven joint: the
#: dc_motor's constants (``actuators.<column>``, units of docs/parameters.md)
DRIVE_COLUMNS = ("torque_constant", "resistance", "supply_voltage", "gear_ratio",
                 "gear_efficiency", "temperature_limit")
#: the History fields a version 1 file lacks (their defaults stand)
_ADDED_IN_2 = ("joint_velocities", "actuator_model", "actuator_joints", "motor_current",
               "motor_voltage", "motor_temperature", "drive_parameters")
#: the History fields a version 2 file lacks
_ADDED_IN_3 = ("ft_names", "ft_wrench")
#: the History fields a version 3 file lacks
_ADDED_IN_4 = ("truth_t", "cop", "zmp", "cop_names")
#: the History fields a version 4 file lacks
_ADDED_IN_5 = ("health_t", "health", "health_names")


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
    surfaces (``surface_names`` order), ``m`` driven joints (``actuator_joints``: those
    of ``actuators.joints`` when a motor model drives them; none with ideal drives).
    Unknown values are NaN (a drive's reading at a sample where none was recorded).
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
    joint_velocities: np.ndarray | None = None  #: (n, nj) rad/s (m/s); None: unknown (NaN)
    actuator_model: str = "ideal"  #: actuators.model of the run ('' = unknown)
    actuator_joints: tuple[str, ...] = ()  #: the m joints a motor model drives
    motor_current: np.ndarray | None = None  #: (n, m) winding current of the step, A
    motor_voltage: np.ndarray | None = None  #: (n, m) terminal voltage R I + kt N qdot, V
    motor_temperature: np.ndarray | None = None  #: (n, m) winding temperature, C
    #: (m, len(DRIVE_COLUMNS)) the dc_motor's constants per driven joint (NaN: unknown)
    drive_parameters: np.ndarray | None = None
    ft_names: tuple[str, ...] = ()  #: the k force-torque sensors (ft_sensors.names order)
    #: (n, k, 6) each sensor's reading [force N, torque N*m] in its frame, as published
    #: (``Simulator.ft_wrench_array()``, noise and bias included); NaN: none recorded
    ft_wrench: np.ndarray | None = None
    #: (k,) simulated time of the contact truth's samples (the node's contact_state), s; its
    #: own time base (its rate); empty: not recorded
    truth_t: np.ndarray | None = None
    #: (nc, k, 3) world centre of pressure of each surface of ``cop_names``, m (NaN: no
    #: normal force)
    cop: np.ndarray | None = None
    zmp: np.ndarray | None = None  #: (k, 3) world ZMP of all the contact points, m
    cop_names: tuple[str, ...] = ()  #: the surfaces of ``cop``'s rows
    #: (h,) simulated time (the header stamp) of each solver-health sample (the node's
    #: /diagnostics, at its wall-clock rate), s; empty: not recorded
    health_t: np.ndarray | None = None
    #: (h, nh) the numeric values of the simulator's diagnostic statuses, as published
    #: (NaN: 'not measured', or the figure absent from that sample)
    health: np.ndarray | None = None
    #: the nh figures of ``health``'s columns, ``"<group>/<key>"`` (the status
    #: ``wb_sim: <group>``'s KeyValue ``key``, e.g. ``contact solver/solver_residual_mps``)
    health_names: tuple[str, ...] = ()

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
        self.actuator_model = str(self.actuator_model)
        self.actuator_joints = tuple(str(s) for s in self.actuator_joints)
        m = len(self.actuator_joints)
        unknown = lambda x, shape: np.full(shape, np.nan) if x is None else f(x)  # noqa: E731
        self.joint_velocities = unknown(self.joint_velocities, (n, nj))
        self.motor_current = unknown(self.motor_current, (n, m))
        self.motor_voltage = unknown(self.motor_voltage, (n, m))
        self.motor_temperature = unknown(self.motor_temperature, (n, m))
        self.drive_parameters = unknown(self.drive_parameters, (m, len(DRIVE_COLUMNS)))
        self.ft_names = tuple(str(s) for s in self.ft_names)
        self.ft_wrench = unknown(self.ft_wrench, (n, len(self.ft_names), 6))
        self.cop_names = tuple(str(x) for x in self.cop_names)
        self.truth_t = np.zeros(0) if self.truth_t is None else f(self.truth_t).reshape(-1)
        k, nc = self.truth_t.size, len(self.cop_names)
        self.cop = unknown(self.cop, (nc, k, 3))
        self.zmp = unknown(self.zmp, (k, 3))
        self.health_names = tuple(str(x) for x in self.health_names)
        self.health_t = np.zeros(0) if self.health_t is None else f(self.health_t).reshape(-1)
        self.health = unknown(self.health, (self.health_t.size, len(self.health_names)))
        expected = {"wall": (n,), "base_position": (n, 3), "com": (n, 3),
                    "contact_force": (ns, n, 3), "joint_positions": (n, nj),
                    "reference_positions": (n, nj), "applied_torques": (n, nj),
                    "torque_limits": (nj,), "ground_normal": (3,), "gravity": (3,),
                    "joint_units": (nj,), "joint_velocities": (n, nj),
                    "motor_current": (n, m), "motor_voltage": (n, m),
                    "motor_temperature": (n, m),
                    "drive_parameters": (m, len(DRIVE_COLUMNS)),
                    "ft_wrench": (n, len(self.ft_names), 6),
                    "cop": (nc, k, 3), "zmp": (k, 3),
                    "health": (self.health_t.size, len(self.health_names))}
        for key, shape in expected.items():
            got = np.shape(getattr(self, key))
            if got != shape:
                raise RecordingError(f"history field '{key}' has shape {got}, expected {shape} "
                                     f"({n} samples, {nj} joints, {ns} surfaces, {m} driven "
                                     f"joints)")
        missing = [j for j in self.actuator_joints if j not in self.joint_names]
        if missing:
            raise RecordingError(f"history field 'actuator_joints' names joints the history "
                                 f"does not have: {', '.join(missing)}")

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

    @property
    def drive_index(self) -> np.ndarray:
        """(m,) index in ``joint_names`` of each driven joint (``actuator_joints``)."""
        return np.array([self.joint_names.index(j) for j in self.actuator_joints], dtype=int)

    def drive(self, column: str) -> np.ndarray:
        """(m,) one of :data:`DRIVE_COLUMNS` per driven joint (NaN: unknown)."""
        return self.drive_parameters[:, DRIVE_COLUMNS.index(column)]

    # ------------------------------------------------------------------ files

    def save(self, path: str | Path) -> Path:
        """Write an uncompressed ``.npz`` (the suffix is added if missing, and the
        directory created); returns its path."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_name(path.name + ".npz")
        arrays = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for key in ("joint_names", "surface_names", "joint_units", "actuator_joints", "ft_names",
                    "cop_names", "health_names"):
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
        optional = ((_ADDED_IN_2 if version < 2 else ()) + (_ADDED_IN_3 if version < 3 else ())
                    + (_ADDED_IN_4 if version < 4 else ()) + (_ADDED_IN_5 if version < 5 else ()))
        missing = [k for k in names if k not in data and k not in optional]
        if missing:
            raise RecordingError(f"'{path}': the history lacks {', '.join(missing)}")
        kw = {k: data[k] for k in names if k in data}
        if version < 2:
            kw["actuator_model"] = ""  # not recorded then
        for key in ("joint_names", "surface_names", "joint_units", "actuator_joints", "ft_names",
                    "cop_names", "health_names"):
            if key in kw:
                kw[key] = tuple(kw[key].tolist())
        for key in ("friction_coefficient", "mass", "dt"):
            kw[key] = float(kw[key])
        for key in ("robot", "actuator_model"):
            if key in kw:
                kw[key] = str(kw[key])
        return cls(**kw)


def drive_parameters(actuators) -> tuple[str, tuple[str, ...], np.ndarray]:
    """``(model name, driven joint names, (m, len(DRIVE_COLUMNS)) constants)`` of a
    simulator's drives (:attr:`wb_sim.Simulator.actuators`): no joint for ``ideal``;
    NaN constants for a model without them."""
    if not actuators.active:
        return actuators.name, (), np.empty((0, len(DRIVE_COLUMNS)))
    if hasattr(actuators, "drives"):  # several robots (CombinedActuators): each robot's own
        names, rows, models = [], [], set()
        for d, sl in zip(actuators.drives, actuators.slices):
            if d.active:
                model, _, constants = drive_parameters(d)
                own = actuators.joint_names[sl]  # its joints' names in the combined model
                names += [own[i] for i in np.asarray(d.idx, dtype=int)]
                rows.append(constants)
                models.add(model)
        return (models.pop() if len(models) == 1 else "combined"), tuple(names), np.vstack(rows)
    idx = np.asarray(actuators.idx, dtype=int)
    names = tuple(actuators.joint_names[i] for i in idx)
    table = {"torque_constant": "kt", "resistance": "R", "supply_voltage": "V",
             "gear_ratio": "N", "gear_efficiency": "eta", "temperature_limit": "t_lim"}
    cols = [np.asarray(getattr(actuators, table[c], np.full(len(idx), np.nan)), dtype=float)
            for c in DRIVE_COLUMNS]
    return actuators.name, names, np.column_stack(cols).reshape(len(idx), len(DRIVE_COLUMNS))


def operating_points(h: History) -> tuple[np.ndarray, np.ndarray]:
    """(speed rad/s, torque N*m), each (n, m): each driven joint's operating point as its
    drive reports it: the joint torque ``N eta kt I`` (the applied torque) and the joint
    speed the envelope was applied at (the step's start), ``(U - R I) / (kt N)`` from the
    terminal voltage U = R I + kt N qdot. NaN where a reading is missing."""
    kt, r, n, eta = (h.drive(c) for c in ("torque_constant", "resistance", "gear_ratio",
                                           "gear_efficiency"))
    i, u = h.motor_current, h.motor_voltage
    return (u - r * i) / (kt * n), n * eta * kt * i


def torque_speed_envelope(h: History, speed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) joint torque N*m the dc_motor allows at joint ``speed`` (rad/s):
    ``speed`` (k,) the same speeds for every driven joint, or (k, m) one per joint; each
    bound (k, m). ``N eta kt (-+V - kt N speed) / R`` (the supply voltage against
    the back-EMF: the stall torque N eta kt V / R at rest, zero at the no-load speed
    V / (kt N)). Not clipped at the stall torque: braking (torque against the motion)
    the winding may carry more than V / R."""
    kt, r, v, n, eta = (h.drive(c) for c in ("torque_constant", "resistance", "supply_voltage",
                                              "gear_ratio", "gear_efficiency"))
    w = np.asarray(speed, dtype=float)
    w = w[:, None] if w.ndim == 1 else w
    gain = n * eta * kt
    return gain * (-v - kt * n * w) / r, gain * (v - kt * n * w) / r


class Recorder:
    """Samples a :class:`~wb_sim.Simulator` into growing buffers.

    Call :meth:`record` after each ``sim.step``; it keeps the steps whose
    count is a multiple of ``every``. Buffers start at ``capacity`` samples and
    double when full. :meth:`history` returns the samples so far.

    Cost per kept sample, measured on the 2-core CI machine with the humanoid
    (23 joints, 8 contact points): 14 us (the simulator's contact-point reading
    6.5 us, the centre of mass 2.5 us, the rest copying into the buffers; the
    joint velocities, added later, 0.8 us more: 15.6 -> 16.4 us measured back to back),
    against 85 us for a step with its controller; with drives (every joint on
    ``dc_motor``) the readings add 8.7 us (25.1 us); a skipped sample costs 0.15 us. The
    contact truth (each surface's centre of pressure and the ZMP, as the node's
    ``contact_state``: :func:`wb_sim.sensors.surface_pressure_centres`) adds about 1.3 times
    the contact-point reading's cost (measured side by side on a loaded 2-core machine:
    about 8 us at the reading's 6.5 us). After ``sim.reset()`` call :meth:`clear` (or keep the samples:
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
        # the contact truth (centres of pressure, ZMP) of every sample, where there are points
        self._truth = len(pts.surface) > 0
        self._point_surface = np.array([self.surface_names.index(x) for x in pts.surface],
                                       dtype=np.intp)
        # (ns, n_points) 0/1: sums the points' forces per surface
        self._sum = np.array([[1.0 if s == name else 0.0 for s in pts.surface]
                              for name in self.surface_names]).reshape(len(self.surface_names),
                                                                       len(pts.surface))
        single = bool(np.all(robot.nq_joint == 1))
        self._idx_q = np.asarray(robot.idx_q) if single else None
        self._fixed_base = None if robot.floating_base else sim.state.base_position
        self._idx_v = np.asarray(robot.idx_v)
        model, driven, constants = drive_parameters(sim.actuators)
        self._drives = np.array([sim.joint_names.index(j) for j in driven], dtype=int) \
            if driven else None
        ft_names = tuple(sim.ft_sensors.names) if sim.ft_sensors is not None else ()
        self._nft = len(ft_names)
        self._meta = dict(
            torque_limits=np.array(sim.actuation.effort_limit, dtype=float),
            joint_names=tuple(sim.joint_names), surface_names=self.surface_names,
            ground_normal=np.array(sim.config.ground.normal, dtype=float),
            friction_coefficient=float(sim.config.contact.friction_coefficient),
            mass=float(sim.mass), gravity=np.array(sim.config.gravity, dtype=float),
            robot=str(robot.model.name), dt=float(sim.dt), joint_units=joint_units(robot),
            actuator_model=model, actuator_joints=driven, drive_parameters=constants,
            ft_names=ft_names, cop_names=self.surface_names if self._truth else ())
        self._n = 0
        self._wall0: float | None = None
        self._alloc(max(16, int(capacity)))

    #: the buffers whose first axis is the surface
    _BY_SURFACE = ("contact_force", "cop")

    def _alloc(self, cap: int) -> None:
        nj, ns = self._nj, len(self.surface_names)
        m = 0 if self._drives is None else len(self._drives)
        new = {"t": np.empty(cap), "wall": np.empty(cap), "base_position": np.empty((cap, 3)),
               "com": np.empty((cap, 3)), "contact_force": np.empty((ns, cap, 3)),
               "joint_positions": np.empty((cap, nj)), "joint_velocities": np.empty((cap, nj)),
               "reference_positions": np.full((cap, nj), np.nan),
               "applied_torques": np.empty((cap, nj)), "motor_current": np.empty((cap, m)),
               "motor_voltage": np.empty((cap, m)), "motor_temperature": np.empty((cap, m)),
               "ft_wrench": np.empty((cap, self._nft, 6))}
        if self._truth:
            new["cop"], new["zmp"] = np.empty((ns, cap, 3)), np.empty((cap, 3))
        n = self._n
        if n:
            for key, buf in new.items():
                if key in self._BY_SURFACE:
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
            pts = sim.contact_points_state()
            b["contact_force"][:, i] = self._sum @ pts.force
            if self._truth:  # as the node's contact_state (wb_sim.sensors: one implementation)
                surface_pressure_centres(pts.position, pts.force, pts.normal,
                                         self._point_surface, len(self.surface_names),
                                         out=b["cop"][:, i])
                b["zmp"][i] = pressure_centre(pts.position, pts.force, pts.normal)
        b["joint_positions"][i] = q[self._idx_q] if self._idx_q is not None \
            else sim.robot.joint_positions(q)
        b["joint_velocities"][i] = sim.v[self._idx_v]
        if q_ref is not None:
            b["reference_positions"][i] = q_ref
        b["applied_torques"][i] = sim.applied_torques
        if self._drives is not None:
            r, d = sim.actuator_readings, self._drives
            b["motor_current"][i] = r.current[d]
            b["motor_voltage"][i] = r.voltage[d]
            b["motor_temperature"][i] = r.temperature[d]
        if self._nft:
            b["ft_wrench"][i] = sim.ft_wrench_array()
        self._n = i + 1
        return True

    def history(self) -> History:
        """The samples so far (copies)."""
        n, b = self._n, self._buf
        arrays = {k: (v[:, :n] if k in self._BY_SURFACE else v[:n]).copy()
                  for k, v in b.items()}
        if self._truth:
            arrays["truth_t"] = arrays["t"].copy()
        return History(**arrays, **self._meta)

    def clear(self) -> None:
        """Forget the samples (e.g. after ``sim.reset()``); the wall clock restarts."""
        self._n = 0
        self._wall0 = None
        self._buf["reference_positions"][:] = np.nan
