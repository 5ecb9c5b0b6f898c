"""Simulated sensors: the IMU, and the reading types of the other sensors.

IMU conventions (REP 145):
* ``orientation``: quaternion (x, y, z, w) of the IMU frame in the world
  frame (it rotates IMU-frame vectors into the world frame);
* ``angular_velocity``: rad/s, expressed in the IMU frame;
* ``linear_acceleration``: proper acceleration ``R^T (a - g)`` in m/s^2,
  expressed in the IMU frame: at rest with z up it reads (0, 0, +9.81).

The accelerometer uses the acceleration computed by the most recent step (at
that step's starting state), the orientation and gyroscope the current state.
Noise is white Gaussian, drawn once per step from a generator seeded with
``imu.seed`` (reset re-seeds it), so readings do not depend on how often they
are read; the biases are constant.
"""

from __future__ import annotations

import copy

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .parameters import Group
from .pin_views import new_data
from .robot import RobotModel, rotate_inverse


@dataclass(frozen=True)
class ImuReading:
    frame: str
    orientation: np.ndarray  #: (x, y, z, w), IMU frame in the world frame
    angular_velocity: np.ndarray  #: rad/s, IMU frame
    linear_acceleration: np.ndarray  #: m/s^2, proper acceleration, IMU frame


@dataclass(frozen=True)
class ContactWrench:
    """Contact wrench of one surface, about the surface frame's origin, in that frame."""

    frame: str
    force: np.ndarray  #: N
    torque: np.ndarray  #: N*m


@dataclass(frozen=True)
class ContactPointsReading:
    """Per-point contact data of the last step (n points, all surfaces)."""

    surface: tuple[str, ...]  #: surface name of each point
    position: np.ndarray  #: (n, 3) world position of the contact point, m
    force: np.ndarray  #: (n, 3) world force exerted by the ground, N
    depth: np.ndarray  #: (n,) penetration (negative: above the ground), m
    status: tuple[str, ...]  #: 'none' | 'stick' | 'slip'
    #: (n, 3) the ground's unit normal at each point, world (the surfaces' reading;
    #: None where a reading does not give it)
    normal: np.ndarray | None = None


def pressure_centre(position: np.ndarray, force: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """The centre of pressure of point forces: ``sum(f_n p) / sum(f_n)`` with ``f_n`` each
    force's component along its point's normal (3,); NaN where the normal forces sum to
    zero or less. Over coplanar contacts and with no other external force, the centre of
    pressure of all of them is the ZMP (the node's ``contact_state`` ZMP, the
    :class:`~wb_sim.tools.recording.Recorder`'s)."""
    fn = np.einsum("ij,ij->i", force, normal)
    total = fn.sum()
    if not total > 0.0:
        return np.full(3, np.nan)
    return fn @ position / total


def surface_pressure_centres(position: np.ndarray, force: np.ndarray, normal: np.ndarray,
                             surface_of_point: np.ndarray, n_surfaces: int,
                             out: np.ndarray | None = None) -> np.ndarray:
    """(S, 3) each surface's centre of pressure (:func:`pressure_centre` of its points,
    ``surface_of_point``: each point's surface index of ``n_surfaces``), NaN where a surface
    carries no normal force; written into ``out`` (S, 3, any strides) where given. One
    implementation for the node's ``contact_state`` and the Recorder: they agree bit for bit."""
    idx, S = surface_of_point, int(n_surfaces)
    out = np.empty((S, 3)) if out is None else out
    fn = np.einsum("ij,ij->i", force, normal)
    den = np.bincount(idx, weights=fn, minlength=S)
    for a in range(3):
        out[:, a] = np.bincount(idx, weights=fn * position[:, a], minlength=S)
    carried = den > 0.0
    np.divide(out, den[:, None], out=out, where=carried[:, None])
    out[~carried] = np.nan
    return out


@dataclass(frozen=True)
class SelfContactsReading:
    """Self-collision contacts of the last step (k sphere pairs within the margin)."""

    link_a: tuple[str, ...]  #: the first link of each pair
    link_b: tuple[str, ...]  #: the second link of each pair
    position: np.ndarray  #: (k, 3) world contact point (the middle of the overlap), m
    force: np.ndarray  #: (k, 3) world force on link_a, N (link_b gets the opposite)
    depth: np.ndarray  #: (k,) overlap of the two spheres (negative: apart), m
    status: tuple[str, ...]  #: 'none' | 'stick' | 'slip'


@dataclass(frozen=True)
class ContactState:
    """A contact sensor's reading (a contact surface, or a link with whole-body collision)."""

    kind: str  #: 'surface' | 'link'
    normal_force: float  #: N, the sum of its contacts' normal forces at the last step
    in_contact: bool  #: raw: normal_force > contact_sensors.threshold at the last step
    debounced: bool  #: in_contact held for contact_sensors.t_on (on) / t_off (off)


class ContactSensors:
    """Contact sensors on named bodies (the contact surfaces, then the collision links): raw
    (normal force above ``threshold``) and debounced (on once raw has been on for ``t_on``,
    off once it has been off for ``t_off``, each rounded to whole steps). Their state lives in
    the simulator's record: (raw (n,) bool, debounced (n,) bool, steps (n,) int: how many
    steps in a row raw has differed from debounced)."""

    def __init__(self, names: tuple[str, ...], kinds: tuple[str, ...], cfg: Group, dt: float):
        self.names, self.kinds = names, kinds
        self.threshold = float(cfg.threshold)
        self.n_on = int(round(cfg.t_on / dt))
        self.n_off = int(round(cfg.t_off / dt))
        self._zeros = _frozen(np.zeros(len(names), dtype=int))

    def initial(self, normal: np.ndarray) -> tuple:
        """The state at a reset: debounced as raw (settled)."""
        raw = normal > self.threshold
        return _frozen(raw), _frozen(raw.copy()), _frozen(np.zeros(len(raw), dtype=int)), \
            _frozen(np.asarray(normal, dtype=float).copy())

    def next(self, state: tuple, normal: np.ndarray) -> tuple:
        """The state after a step whose normal forces are ``normal`` (a new array, kept and
        made read-only)."""
        _, debounced, steps, _ = state
        raw = normal > self.threshold
        normal.setflags(write=False)
        differ = raw != debounced
        if not differ.any():  # settled: nothing to count (the common case, one test)
            raw.setflags(write=False)
            return raw, debounced, self._zeros, normal
        steps = np.where(differ, steps + 1, 0)
        wait = np.where(raw, self.n_on, self.n_off)
        flip = differ & (steps > wait)
        debounced = np.where(flip, raw, debounced)
        steps = np.where(flip, 0, steps)
        return _frozen(raw), _frozen(debounced), _frozen(steps), normal

    def per_sensor(self, cfgs, dt: float) -> None:
        """Each sensor its own ``contact_sensors`` group (``cfgs``, one per sensor: its
        robot's, several robots in one physics): threshold and debounce steps per sensor."""
        self.threshold = np.array([float(c.threshold) for c in cfgs])
        self.n_on = np.array([int(round(c.t_on / dt)) for c in cfgs], dtype=int)
        self.n_off = np.array([int(round(c.t_off / dt)) for c in cfgs], dtype=int)

    def readings(self, state: tuple, rows=None, prefix: str = "") -> dict[str, ContactState]:
        """By sensor name; ``rows``: those sensors only (one robot's of several), their
        names without ``prefix``."""
        raw, debounced, _, normal = state
        if rows is None:
            return {name: ContactState(kind, float(f), bool(r), bool(d)) for name, kind, f, r, d
                    in zip(self.names, self.kinds, normal, raw, debounced)}
        return {self.names[i].removeprefix(prefix): ContactState(
            self.kinds[i], float(normal[i]), bool(raw[i]), bool(debounced[i])) for i in rows}


def _frozen(x: np.ndarray) -> np.ndarray:
    x.setflags(write=False)
    return x


class SeededNoise:
    """White noise drawn from a seeded generator, once per step, as part of a sensor's state
    (the IMU's, the force-torque sensors'): :meth:`reset` to the seed, :meth:`snapshot` /
    :meth:`restore` of the generator and the current draw. A subclass sets ``cfg.seed``,
    ``noisy`` and ``_noise_shape``, and draws ``_noise`` in ``draw_noise``."""

    _noise_shape: tuple = ()

    def reset(self) -> None:
        self._rng = np.random.default_rng(self.cfg.seed)
        self._noise = np.zeros(self._noise_shape)
        if self.noisy:
            self.draw_noise()

    def snapshot(self) -> tuple:
        """The evolving state, a copy: (noise generator state, current noise)."""
        return copy.deepcopy(self._rng.bit_generator.state), self._noise.copy()

    def restore(self, snap: tuple) -> None:
        """Back to a :meth:`snapshot` (which stays usable: it is copied)."""
        rng_state, noise = snap
        self._rng.bit_generator.state = copy.deepcopy(rng_state)
        self._noise = np.array(noise, dtype=float)

    def draw_noise(self) -> None:
        raise NotImplementedError


class Imu(SeededNoise):
    """An IMU at a frame of the robot; see the module docstring."""

    def __init__(self, robot: RobotModel, cfg: Group, gravity: np.ndarray,
                 model: pin.Model | None = None, closed_form: bool = True):
        """``model``: the model whose configuration and velocity :meth:`read`
        receives (default ``robot.model``; the simulator passes its stepping
        model, same frames, other base velocity coordinates). ``closed_form``:
        read an IMU on the simulator's free base in closed form (False: always
        through pinocchio's frame kinematics; the tests compare the two)."""
        self.robot = robot
        self.cfg = cfg
        self.frame = cfg.frame
        self.frame_id = robot.frame_id(cfg.frame, key="imu.frame")
        self.gravity = np.asarray(gravity, dtype=float)
        self.noisy = cfg.angular_velocity_noise_std > 0 or cfg.linear_acceleration_noise_std > 0
        self._std = np.repeat([cfg.angular_velocity_noise_std,
                               cfg.linear_acceleration_noise_std], 3)
        self._bias = np.concatenate([cfg.angular_velocity_bias, cfg.linear_acceleration_bias])
        self._chain_model(robot.model if model is None else model, closed_form)
        self._data = new_data(self._model)
        self.reset()

    def _chain_model(self, model: pin.Model, closed_form: bool) -> None:
        """Keep only the joints that move the IMU (its parent joint's support):
        the others cannot change its reading, and the two forward-kinematics
        passes of a reading then cost a chain's, not the whole robot's (the
        humanoid's pelvis IMU: the free joint alone). Sets ``_model``,
        ``frame_id`` in it and the indices ``_iq``, ``_iv`` of its coordinates in
        the full ``q`` and ``v`` (slices when contiguous)."""
        parent = model.frames[self.frame_id].parentJoint
        chain = [j for j in model.supports[parent] if j > 0]
        locked = [j for j in range(1, model.njoints) if j not in chain]
        iq = [i for j in chain for i in range(model.idx_qs[j], model.idx_qs[j] + model.nqs[j])]
        iv = [i for j in chain for i in range(model.idx_vs[j], model.idx_vs[j] + model.nvs[j])]
        if locked:
            reduced = pin.buildReducedModel(model, locked, pin.neutral(model))
            reduced.gravity = model.gravity
            # by type too: a link and a joint may share the IMU frame's name
            self.frame_id = reduced.getFrameId(self.frame, model.frames[self.frame_id].type)
            model = reduced
        self._model = model
        self._iq, self._iv = _index(iq), _index(iv)
        # On the simulator's free base (a world-axes translation joint, then a
        # spherical one: v = [origin velocity in world axes, angular velocity in
        # base axes]) the reading has a closed form: 3-4 times cheaper than two
        # forward-kinematics passes and frame queries, the same numbers.
        root = model.joints[1].shortname() if model.njoints > 1 else ""
        self._on_base = closed_form and chain == [1] and root == "JointModelComposite" and \
            [j.shortname() for j in model.joints[1].extract().joints] == ["JointModelTranslation",
                                                                "JointModelSpherical"]
        if self._on_base:
            placement = model.frames[self.frame_id].placement  # base <- IMU
            self._offset = placement.translation.copy() if placement.translation.any() else None
            rotated = not np.array_equal(placement.rotation, np.eye(3))
            self._R_p = placement.rotation.copy() if rotated else None
            self._q_p = pin.Quaternion(placement.rotation) if rotated else None

    _noise_shape = (6,)

    def draw_noise(self) -> None:
        """Draw the white noise of the next reading (called once per step)."""
        self._noise = self._std * self._rng.standard_normal(6)

    def read(self, q: np.ndarray, v: np.ndarray,
             q_prev: np.ndarray, v_prev: np.ndarray, a_prev: np.ndarray) -> ImuReading:
        if self._on_base:
            return self._read_on_base(q, v, q_prev, v_prev, a_prev)
        model, data, fid = self._model, self._data, self.frame_id
        iq, iv = self._iq, self._iv
        q, v, q_prev, v_prev, a_prev = q[iq], v[iv], q_prev[iq], v_prev[iv], a_prev[iv]
        pin.forwardKinematics(model, data, q_prev, v_prev, a_prev)
        R_prev = pin.updateFramePlacement(model, data, fid).rotation
        acc = pin.getFrameClassicalAcceleration(model, data, fid, pin.LOCAL).linear
        proper = acc - R_prev.T.dot(self.gravity)
        pin.forwardKinematics(model, data, q, v)
        R = pin.updateFramePlacement(model, data, fid).rotation
        gyro = pin.getFrameVelocity(model, data, fid, pin.LOCAL).angular
        extra = self._bias + self._noise
        return ImuReading(
            frame=self.frame,
            orientation=pin.Quaternion(R).coeffs().copy(),
            angular_velocity=gyro + extra[:3],
            linear_acceleration=proper + extra[3:],
        )

    def _read_on_base(self, q, v, q_prev, v_prev, a_prev) -> ImuReading:
        """:meth:`read` for an IMU on the free base (see ``_chain_model``): with
        ``R`` the base rotation, ``(R_p, r)`` the IMU's placement on the base and
        ``w``, ``dw`` the base's angular velocity and acceleration (base axes),
        orientation ``R R_p``, gyro ``R_p^T w`` and proper acceleration
        ``R_p^T (R_prev^T (a_origin - g) + dw x r + w x (w x r))`` at the step's start."""
        acc = np.array(rotate_inverse(q_prev[3:7], a_prev[:3] - self.gravity))
        gyro = v[3:6]
        orientation = q[3:7]
        if self._offset is not None:  # the IMU origin's own acceleration
            omega, r = v_prev[3:6], self._offset
            acc += np.cross(a_prev[3:6], r) + np.cross(omega, np.cross(omega, r))
        if self._R_p is not None:
            acc = self._R_p.T.dot(acc)
            gyro = self._R_p.T.dot(gyro)
            orientation = (pin.Quaternion(orientation) * self._q_p).coeffs()
        extra = self._bias + self._noise
        return ImuReading(frame=self.frame, orientation=orientation.copy(),
                          angular_velocity=gyro + extra[:3], linear_acceleration=acc + extra[3:])


def _index(idx: list[int]):
    """A slice for contiguous indices (a view: free), else an index array."""
    if idx and idx == list(range(idx[0], idx[-1] + 1)):
        return slice(idx[0], idx[-1] + 1)
    return np.array(idx, dtype=int)
