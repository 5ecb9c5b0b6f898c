"""Actuator models: what a joint's drive makes of the commanded torque.

The model is chosen from :data:`ACTUATOR_MODELS` by ``actuators.model``:

``ideal`` (the default)
    The commanded torque, saturated at the effort limits, acts at once and in full at
    any speed: today's behaviour. The simulator skips it (``active`` is False), so every
    trajectory is bit-identical to a build without actuator models.

``dc_motor``
    Per driven joint (``actuators.joints``; [] = all), a brushed-equivalent DC motor
    behind a gear (ratio N, efficiency eta), torque constant kt (N*m/A, motor side),
    winding resistance R (ohm), supply voltage V:

    * the torque loop: the commanded joint torque r (after the effort limits) through
      ``x'' + 2 zeta w_n x' + w_n^2 x = w_n^2 r`` (w_n = 2 pi ``bandwidth``), integrated
      exactly over each step with r held (the state relaxes to (r, 0) through
      ``Phi = expm(A dt)``: stable at any rate); bandwidth 0 = instantaneous;
    * the voltage envelope: current ``I = x / (N eta kt)`` clipped to
      ``[(-V - kt w_m) / R, (V - kt w_m) / R]`` (w_m = N qdot, the motor speed at the
      step's start: back-EMF), so the joint torque ``N eta kt I`` stays within
      ``N eta kt (+-V - kt N qdot) / R``: the stall torque N eta kt V / R at rest, zero
      at the no-load speed V / (kt N);
    * the winding's terminal voltage ``R I + kt w_m``;
    * heat: copper losses ``P = I^2 R`` into a first-order thermal model
      ``C_th T' = P - (T - T_amb) / R_th``, updated exactly over the step with P held:
      ``T' = T_inf + (T - T_inf) exp(-dt / (R_th C_th))``, ``T_inf = T_amb + P R_th``;
    * at the temperature limit: ``derate`` scales the current linearly from 1 at
      ``limit - derate_band`` to 0 at the limit; ``trip`` drops it to zero once the
      winding reaches the limit, latched until reset (a drive's over-temperature fault);
    * transmission friction on the motor side, reflected through the gear: Coulomb
      ``N f_c`` and viscous ``N^2 b_m`` at the joint, added to the joint's friction and
      damping (``wb_sim.actuation``: the viscous part implicit).

The drive's state (torque loop, its rate, temperature, trip latch, and the last step's
current and voltage) is one (6, m) array in the simulator's record
(``Record.actuator``): snapshots carry it, reset restores it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .errors import ConfigError, ModelError
from .parameters import Group, Param
from .robot import RobotModel, did_you_mean

#: rows of the dc_motor state array (6, m)
X, XDOT, TEMPERATURE, TRIPPED, CURRENT, VOLTAGE = range(6)


def _per_joint(key: str, unit: str, default, doc: str, lo: float = 0.0, lo_open: bool = True,
               hi: float | None = None) -> Param:
    return Param(f"actuators.{key}", "floats", [default], unit,
                 doc + " One value, or one per joint of actuators.joints.",
                 lo=lo, lo_open=lo_open, hi=hi)


#: the actuators.* parameters; the defaults are the T-Motor (CubeMars) AK80-9's published
#: electrical and gear numbers with assumed efficiency and thermal numbers (docs/physics.md)
PARAMETERS: tuple[Param, ...] = (
    Param("actuators.model", "str", "ideal", "",
          "The joints' drives: 'ideal' (the commanded torque acts at once, in full, at any "
          "speed) | 'dc_motor' (torque loop, back-EMF envelope, heat; docs/physics.md).",
          choices=("ideal", "dc_motor")),
    Param("actuators.joints", "strs", [], "",
          "Joints driven by actuators.model ([] = every actuated joint); the others are ideal."),
    _per_joint("torque_constant", "N*m/A", 0.091, "Motor torque constant kt (motor side)."),
    _per_joint("resistance", "ohm", 0.17, "Winding resistance R (terminal to terminal)."),
    _per_joint("supply_voltage", "V", 48.0, "Supply (bus) voltage V."),
    _per_joint("gear_ratio", "", 9.0, "Gear ratio N (motor turns per joint turn)."),
    _per_joint("gear_efficiency", "", 0.9, "Gear efficiency eta, in (0, 1].", hi=1.0),
    _per_joint("bandwidth", "Hz", 0.0,
               "Natural frequency of the second-order torque loop; 0 = instantaneous.",
               lo_open=False),
    _per_joint("damping_ratio", "", 0.7, "Damping ratio of the torque loop, in [0, 10].",
               lo_open=False, hi=10.0),
    _per_joint("thermal_resistance", "K/W", 1.5, "Winding-to-ambient thermal resistance R_th."),
    _per_joint("thermal_capacitance", "J/K", 150.0, "Winding thermal capacitance C_th."),
    Param("actuators.ambient_temperature", "float", 25.0, "C",
          "Ambient temperature; the windings start at it.", lo=-100.0, hi=500.0),
    _per_joint("temperature_limit", "C", 90.0, "Winding temperature limit (above ambient).",
               lo=-100.0, hi=1000.0),
    Param("actuators.limit_action", "str", "derate", "",
          "At the temperature limit: 'derate' (the current scaled linearly from 1 at "
          "limit - derate_band to 0 at the limit) | 'trip' (zero current from the limit on, "
          "latched until reset).", choices=("derate", "trip")),
    _per_joint("derate_band", "K", 10.0, "Width of the derating band below the limit."),
    _per_joint("friction", "N*m", 0.0,
               "Motor-side Coulomb friction f_c; the joint feels N f_c.", lo_open=False),
    _per_joint("viscous_friction", "N*m*s/rad", 0.0,
               "Motor-side viscous friction b_m; the joint feels N^2 b_m (implicit).",
               lo_open=False),
)


@dataclass(frozen=True)
class ActuatorReading:
    """What the drives report, per joint in ``joint_names`` order (NaN for a joint
    without a motor model: ``ideal``)."""

    joint_names: tuple[str, ...]
    current: np.ndarray  #: A, the last step's winding current
    voltage: np.ndarray  #: V, the last step's terminal voltage R I + kt N qdot
    temperature: np.ndarray  #: C, the winding temperature now


class ActuatorModel(Protocol):
    """What the simulator asks of the drives (one object for every joint)."""

    name: str
    #: False: the simulator skips the drive altogether (``ideal``: the torque as commanded)
    active: bool

    def initial_state(self) -> np.ndarray | None:
        """The drives' state at reset (read-only), or None (no state)."""

    def drive(self, state: np.ndarray | None, tau: np.ndarray,
              vj: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(the joint torques (nj,) acting this step, the next state) from the commanded
        torques ``tau`` (nj,, after the effort limits) and the joint velocities ``vj``
        at the step's start; ``state`` is left untouched."""

    def reflected_friction(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(Coulomb N*m, viscous N*m*s/rad) per joint (nj,) the transmission adds at the
        joints, or None."""

    def readings(self, state: np.ndarray | None) -> ActuatorReading:
        """The drives' readings from the state."""

    def signature(self) -> tuple:
        """((label, value), ...): what a snapshot's drive state must fit."""


class IdealActuators:
    """The commanded torque as it is: no state, no readings (NaN)."""

    name = "ideal"
    active = False

    def __init__(self, robot: RobotModel, cfg: Group, dt: float):
        self._names = tuple(robot.joint_names)

    def initial_state(self) -> None:
        return None

    def drive(self, state, tau, vj):
        return tau, state

    def reflected_friction(self) -> None:
        return None

    def readings(self, state) -> ActuatorReading:
        nan = np.full(len(self._names), np.nan)
        return ActuatorReading(self._names, nan, nan.copy(), nan.copy())

    def signature(self) -> tuple:
        return (("actuators.model", self.name),)


def second_order_transition(bandwidth_hz: np.ndarray, zeta: np.ndarray,
                            dt: float) -> np.ndarray:
    """(4, m) the entries (11, 12, 21, 22) of ``Phi = expm(A dt)``,
    ``A = [[0, 1], [-w^2, -2 zeta w]]``, ``w = 2 pi f``, per joint; zero where f = 0
    (instantaneous). In closed form (under-, critically and over-damped)."""
    out = np.zeros((4, len(bandwidth_hz)))
    for j, (f, z) in enumerate(zip(bandwidth_hz, zeta)):
        if f == 0.0:
            continue
        w = 2.0 * math.pi * f
        s = z * w
        e = math.exp(-s * dt)
        if abs(z - 1.0) < 1e-9:  # critical: te^{-wt} terms
            p11 = e * (1.0 + s * dt)
            p12 = e * dt
        elif z < 1.0:
            wd = w * math.sqrt(1.0 - z * z)
            c, sn = math.cos(wd * dt), math.sin(wd * dt)
            p11 = e * (c + s / wd * sn)
            p12 = e * sn / wd
        else:
            wd = w * math.sqrt(z * z - 1.0)
            c, sn = math.cosh(wd * dt), math.sinh(wd * dt)
            p11 = e * (c + s / wd * sn)
            p12 = e * sn / wd
        p21 = -w * w * p12
        p22 = p11 - 2.0 * s * p12
        out[:, j] = p11, p12, p21, p22
    return out


class DcMotorActuators:
    """DC motors behind gears on ``actuators.joints``; see the module docstring."""

    name = "dc_motor"
    active = True

    def __init__(self, robot: RobotModel, cfg: Group, dt: float):
        self.dt = dt
        self.joint_names = tuple(robot.joint_names)
        names = cfg.joints or self.joint_names
        for n in names:
            if n not in self.joint_names:
                raise ModelError(f"parameter 'actuators.joints': unknown joint '{n}'"
                                 f"{did_you_mean(n, self.joint_names)}; the actuated joints "
                                 f"are: {', '.join(self.joint_names)}")
        if len(set(names)) != len(names):
            raise ConfigError("parameter 'actuators.joints': names must be unique")
        self.idx = np.array([self.joint_names.index(n) for n in names], dtype=int)
        m = len(self.idx)

        def per(key: str) -> np.ndarray:
            values = getattr(cfg, key)
            if len(values) == 1:
                return np.full(m, values[0])
            if len(values) == m:
                return np.array(values, dtype=float)
            raise ConfigError(f"parameter 'actuators.{key}' has {len(values)} values; expected "
                              f"1 or one per joint of actuators.joints ({m})")

        self.kt, self.R, self.V = per("torque_constant"), per("resistance"), per("supply_voltage")
        self.N, self.eta = per("gear_ratio"), per("gear_efficiency")
        self.r_th, self.c_th = per("thermal_resistance"), per("thermal_capacitance")
        self.t_amb = float(cfg.ambient_temperature)
        self.t_lim = per("temperature_limit")
        if np.any(self.t_lim <= self.t_amb):
            raise ConfigError(f"parameter 'actuators.temperature_limit' must be above "
                              f"actuators.ambient_temperature ({self.t_amb:g} C)")
        self.band = per("derate_band")
        self.trip = cfg.limit_action == "trip"
        self.coulomb, self.viscous = per("friction"), per("viscous_friction")
        self.phi = second_order_transition(per("bandwidth"), per("damping_ratio"), dt)
        self.decay = np.exp(-dt / (self.r_th * self.c_th))
        self.gain = self.N * self.eta * self.kt  #: joint torque per ampere, N*m/A
        self.ke = self.kt * self.N  #: back-EMF per joint speed, V*s/rad
        # the step's constants
        m = len(self.idx)
        self._all = bool(np.array_equal(self.idx, np.arange(len(self.joint_names))))
        self._loop = bool(self.phi.any())
        self._phi_x, self._phi_v = self.phi[[0, 2]].copy(), self.phi[[1, 3]].copy()
        self._instant = np.zeros((2, m))  # (r, 0) without a torque loop (overwritten per step)
        self._inv_gain = 1.0 / self.gain
        self._i_max = self.V / self.R
        self._bemf_per_speed = self.ke / self.R
        self._heat = (1.0 - self.decay) * self.R * self.r_th
        self._cool_to = (1.0 - self.decay) * self.t_amb
        self._derate_from = float(np.min(self.t_lim - self.band))
        self._trip_from = float(np.min(self.t_lim))

    def stall_torque(self) -> np.ndarray:
        """N eta kt V / R per driven joint, N*m."""
        return self.gain * self.V / self.R

    def no_load_speed(self) -> np.ndarray:
        """V / (kt N) per driven joint, rad/s."""
        return self.V / self.ke

    def initial_state(self) -> np.ndarray:
        s = np.zeros((6, len(self.idx)))
        s[TEMPERATURE] = self.t_amb
        s.setflags(write=False)
        return s

    def drive(self, state, tau, vj):
        # about 20 whole-row numpy calls (each ~0.5 us: the count is the cost); the torque
        # loop, derating and the trip latch only where they can act
        idx = self.idx
        r = tau if self._all else tau[idx]
        z = state[:2]
        if self._loop:  # relaxes to (r, 0), exact for r held over the step
            e = z.copy()
            e[0] -= r
            z1 = self._phi_x * e[0]
            z1 += self._phi_v * e[1]
            z1[0] += r
        else:
            z1 = self._instant
            z1[0] = r
        bemf = self._bemf_per_speed * (vj if self._all else vj[idx])  # ke w / R, A
        current = np.minimum(np.maximum(z1[0] * self._inv_gain, -self._i_max - bemf),
                             self._i_max - bemf)
        temp = state[TEMPERATURE]
        if self.trip:
            if state[TRIPPED].any():
                current *= 1.0 - state[TRIPPED]
        elif temp.max() > self._derate_from:
            current *= np.clip((self.t_lim - temp) / self.band, 0.0, 1.0)
        nxt = np.empty_like(state)
        nxt[:2] = z1
        # T' = T_inf + (T - T_inf) d = T d + (1 - d) T_amb + (1 - d) R R_th I^2
        temp1 = nxt[TEMPERATURE]
        np.multiply(current, current, out=temp1)
        temp1 *= self._heat
        temp1 += self._cool_to
        temp1 += temp * self.decay
        nxt[TRIPPED] = state[TRIPPED]
        if self.trip and temp1.max() >= self._trip_from:
            nxt[TRIPPED] = np.maximum(state[TRIPPED], temp1 >= self.t_lim)
        nxt[CURRENT] = current
        bemf *= self.R
        bemf += self.R * current
        nxt[VOLTAGE] = bemf  # R I + ke w
        nxt.setflags(write=False)
        current *= self.gain
        if self._all:
            return current, nxt
        out = tau.copy()
        out[idx] = current
        return out, nxt

    def reflected_friction(self) -> tuple[np.ndarray, np.ndarray] | None:
        if not (self.coulomb.any() or self.viscous.any()):
            return None
        nj = len(self.joint_names)
        coulomb, viscous = np.zeros(nj), np.zeros(nj)
        coulomb[self.idx] = self.N * self.coulomb
        viscous[self.idx] = self.N ** 2 * self.viscous
        return coulomb, viscous

    def signature(self) -> tuple:
        return (("actuators.model", self.name),
                ("actuators.joints", tuple(self.joint_names[i] for i in self.idx)))

    def readings(self, state) -> ActuatorReading:
        nj = len(self.joint_names)
        out = np.full((3, nj), np.nan)
        out[:, self.idx] = state[[CURRENT, VOLTAGE, TEMPERATURE]]
        return ActuatorReading(self.joint_names, out[0], out[1], out[2])


class CombinedActuators:
    """Several robots' drives in one physics (wb_sim.multirobot): each robot's own model
    (its own ``actuators.*``, built alone on its own joints) on its slice of the combined
    joint vector; the state is the active robots' states side by side (columns), each
    robot's drive computed as it is alone."""

    name = "combined"

    def __init__(self, robot: RobotModel, drives: list, slices: list):
        self.joint_names = tuple(robot.joint_names)
        self.drives = tuple(drives)
        self.slices = tuple(slices)
        self.active = any(d.active for d in drives)
        cols, c = [], 0
        for d in drives:
            s0 = d.initial_state()
            m = 0 if s0 is None else s0.shape[1]
            cols.append(slice(c, c + m) if s0 is not None else None)
            c += m
        self._cols = tuple(cols)

    def initial_state(self) -> np.ndarray | None:
        states = [d.initial_state() for d in self.drives if d.initial_state() is not None]
        if not states:
            return None
        s = np.concatenate(states, axis=1)
        s.setflags(write=False)
        return s

    def drive(self, state, tau, vj):
        out = tau.copy()
        nxt = []
        for d, sl, cols in zip(self.drives, self.slices, self._cols):
            if not d.active:
                continue
            out[sl], s_k = d.drive(None if cols is None else state[:, cols], tau[sl], vj[sl])
            if s_k is not None:
                nxt.append(s_k)
        if not nxt:
            return out, state
        s = np.concatenate(nxt, axis=1)
        s.setflags(write=False)
        return out, s

    def reflected_friction(self) -> tuple[np.ndarray, np.ndarray] | None:
        nj = len(self.joint_names)
        coulomb, viscous = np.zeros(nj), np.zeros(nj)
        any_ = False
        for d, sl in zip(self.drives, self.slices):
            r = d.reflected_friction()
            if r is not None:
                coulomb[sl], viscous[sl] = r
                any_ = True
        return (coulomb, viscous) if any_ else None

    def readings(self, state) -> ActuatorReading:
        out = np.full((3, len(self.joint_names)), np.nan)
        for d, sl, cols in zip(self.drives, self.slices, self._cols):
            r = d.readings(None if cols is None else state[:, cols])
            out[:, sl] = r.current, r.voltage, r.temperature
        return ActuatorReading(self.joint_names, out[0], out[1], out[2])

    def signature(self) -> tuple:
        return tuple((f"robot {i}: {label}", value) for i, d in enumerate(self.drives)
                     for label, value in d.signature())


def combine_actuators(robot: RobotModel, drives: list, slices: list) -> ActuatorModel:
    """The drives of several robots (``drives``: each robot's own, on its ``slices`` of the
    combined joints): :class:`IdealActuators` where every robot's is ideal (skipped, as
    for one robot), else :class:`CombinedActuators`."""
    if not any(d.active for d in drives):
        return IdealActuators(robot, None, 0.0)
    return CombinedActuators(robot, drives, slices)


#: actuators.model -> the class
ACTUATOR_MODELS = {"ideal": IdealActuators, "dc_motor": DcMotorActuators}


def make_actuators(robot: RobotModel, cfg: Group, dt: float) -> ActuatorModel:
    """The drives ``actuators.model`` names."""
    return ACTUATOR_MODELS[cfg.model](robot, cfg, dt)
