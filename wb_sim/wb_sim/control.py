"""The controller interface: one Python callable that closes the loop inside the simulation.

A controller ``module:factory`` is a factory ``make(sim, case, **params)`` returning a
callable ``ctrl(obs) -> torques`` (nj,), called every step, or every
``round(1 / (rate_hz dt))`` steps with the torques held in between (``rate_hz`` 0: every
step). ``obs`` is an :class:`Observation` (t, q, v, joint positions and velocities, the
IMU reading), ``case`` a :class:`CaseInfo`. The same controller runs

* headless, in a plain loop (:class:`ControllerLoop`);
* in campaigns (``wb_sim_batch``, :mod:`wb_sim.tools.campaign`), one case per run;
* inside the ROS node at the physics rate (its parameter ``controller.callable``,
  ``wb_sim_run --controller module:factory``, ``ros2 launch ... controller:=module:factory``):
  no message hop, the same trajectory as the headless loop, bit for bit.

The example joint PD + gravity compensation ships as :func:`wb_sim.controllers.pd_gravity`
(``wb_sim.controllers:pd_gravity``), the law of the external ``wb_sim_pd_controller``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from .errors import ConfigError


@dataclass(frozen=True)
class CaseInfo:
    """What a controller factory learns about its run (a campaign's case; index 0 and the
    node's ``controller.seed`` in the node)."""
    index: int = 0
    seed: int = 0
    params: Mapping[str, Any] = field(default_factory=dict)  #: a campaign's case values


class Observation(NamedTuple):
    """What the controller sees (delayed by ``sensors.delay_steps``)."""
    t: float
    q: np.ndarray  #: pinocchio configuration (base xyz, quaternion xyzw, joints)
    v: np.ndarray  #: pinocchio velocity (None: the factory declared wants_velocity = False)
    joint_positions: np.ndarray
    joint_velocities: np.ndarray
    imu: Any  #: wb_sim.ImuReading, or None (no IMU, or the factory declared it needs none)


def import_callable(ref: str, key: str = "controller.callable") -> Callable:
    """The callable ``module:name`` (``name`` may be dotted); ConfigError naming ``key``
    otherwise."""
    if not isinstance(ref, str) or ref.count(":") != 1 or not all(ref.partition(":")[::2]):
        raise ConfigError(f"parameter '{key}': expected 'module:callable', got {ref!r}")
    mod, _, name = ref.partition(":")
    try:
        module = importlib.import_module(mod)
    except ImportError as e:
        raise ConfigError(f"parameter '{key}': cannot import module '{mod}': {e}") from None
    fn = module
    for part in name.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise ConfigError(f"parameter '{key}': module '{mod}' has no attribute '{name}'")
    if not callable(fn):
        raise ConfigError(f"parameter '{key}': '{ref}' is not callable")
    return fn


def controller_decimation(rate_hz: float, dt: float) -> int:
    """Steps between two controller calls at ``rate_hz`` (0: every step)."""
    return max(1, int(round(1.0 / (rate_hz * dt)))) if rate_hz > 0 else 1


class ControllerLoop:
    """A controller closing the loop on a :class:`~wb_sim.Simulator`: call :meth:`torques`
    before each ``sim.step`` (it calls the controller when due and holds its torques in
    between) and step with what it returns::

        loop = ControllerLoop(sim, "wb_sim.controllers:pd_gravity", {"kp": 1000, "kd": 20})
        for _ in range(n):
            sim.step(loop.torques())

    ``ref``: ``module:factory``, or the factory itself; ``params``: its keyword
    arguments; ``rate_hz``: the controller's rate (0: every step); ``case``: what the
    factory learns of the run. The factory may set ``wants_imu = False`` on itself to skip
    the IMU reading in the observation (``obs.imu`` is then None), and ``wants_velocity =
    False`` to skip ``obs.v`` (None then; the joint velocities stay): a floating base's
    velocity is converted into its axes for the observation, ~1 us a step that a law
    reading only the joints need not pay. Raises ConfigError naming ``key`` for a factory
    that cannot be imported or refuses ``params`` (its TypeError or ValueError); a controller
    returning torques of the wrong shape raises ValueError at its first call.
    """

    def __init__(self, sim, ref, params: Mapping[str, Any] | None = None, rate_hz: float = 0.0,
                 case: CaseInfo | None = None, key: str = "controller.callable"):
        self._factory = import_callable(ref, key) if isinstance(ref, str) else ref
        self.sim = sim
        self.name = ref if isinstance(ref, str) else getattr(ref, "__qualname__", repr(ref))
        self.case = case or CaseInfo()
        self._params, self._key = dict(params or {}), key
        wants_imu = getattr(self._factory, "wants_imu", True)
        self._imu = sim.imu if wants_imu and sim.imu_sensor is not None else None
        self._wants_v = bool(getattr(self._factory, "wants_velocity", True))
        self.every = controller_decimation(rate_hz, sim.dt)
        self._delayed = bool(sim.config.sensors.delay_steps)  # fixed when the simulator is built
        self.calls = 0  #: how often the controller was called
        self.reset()

    def reset(self) -> None:
        """A new controller from the factory, at the simulator's present state (call it
        after ``sim.reset()``: the run then repeats)."""
        try:
            self.controller = self._factory(self.sim, self.case, **self._params)
        except (TypeError, ValueError) as e:  # its signature or its check of the params
            raise ConfigError(f"parameter '{self._key}': '{self.name}' cannot be made with "
                              f"parameters {self._params}: {e}") from None
        self._tau = np.zeros(self.sim.nj)
        self.fresh = False  #: whether the last :meth:`torques` called the controller

    def snapshot(self) -> tuple:
        """What the loop holds between steps (its held torques): a copy, for
        :meth:`restore` (a node snapshot; the controller's own memory is not in it)."""
        return self._tau.copy(), self.fresh

    def restore(self, snap: tuple) -> None:
        """Back to :meth:`snapshot`'s torques (``snap`` stays usable)."""
        self._tau, self.fresh = snap[0].copy(), snap[1]

    def observe(self) -> Observation:
        """What the controller sees now (``sensors.delay_steps`` ago where delayed)."""
        sim = self.sim
        if self._delayed:
            st = sim.sensed_state
            return Observation(st.t, st.q, st.v if self._wants_v else None, st.joint_positions,
                               st.joint_velocities,
                               sim.sensed_imu() if self._imu is not None else None)
        return Observation(sim.t, sim.q, sim.v if self._wants_v else None, sim.joint_positions,
                           sim.joint_velocities, self._imu() if self._imu is not None else None)

    def torques(self) -> np.ndarray:
        """The torques of the coming step (nj,): the controller's, called when due."""
        self.fresh = self.sim.step_count % self.every == 0
        if self.fresh:
            tau = np.asarray(self.controller(self.observe()), dtype=float)
            if tau.shape != self._tau.shape:
                raise ValueError(f"the controller '{self.name}' returned torques of shape "
                                 f"{tau.shape}, expected {self._tau.shape}")
            self._tau = tau
            self.calls += 1
        return self._tau


class RobotView:
    """One robot of a several-robot simulator (wb_sim.multirobot) as a controller factory
    sees a single robot's simulator: ``robot`` is its own
    :class:`~wb_sim.robot.RobotModel`, ``q``, ``v``, ``joint_positions``,
    ``joint_velocities`` its slices of the whole state (``sim.robots[k]``: its own model's
    layout), ``imu()`` its own IMU; ``t``, ``dt``, ``step_count`` and ``config`` (gravity,
    sensors) the world's. A :class:`ControllerLoop` on it gives that robot's torques
    (:class:`RobotsLoop` joins them). Robot k >= 1's IMU is read without
    ``sensors.delay_steps`` (as :meth:`wb_sim.Simulator.robot_imu`)."""

    def __init__(self, sim, part):
        self.sim, self.part, self.name = sim, part, part.name
        self.robot, self.nj, self.joint_names = part.robot, part.nj, part.joint_names
        self.config, self.dt = sim.config, sim.dt
        self.imu_sensor = sim.imu_sensor if part.index == 0 else sim.robot_imus.get(part.name)

    t = property(lambda self: self.sim.t)
    step_count = property(lambda self: self.sim.step_count)
    q = property(lambda self: self.sim.q[self.part.q_slice])
    v = property(lambda self: self.sim.v[self.part.v_slice])
    joint_positions = property(lambda self: self.sim.joint_positions[self.part.joints])
    joint_velocities = property(lambda self: self.sim.joint_velocities[self.part.joints])

    @property
    def sensed_state(self) -> Observation:
        """Its slice of ``sim.sensed_state`` (t, q, v, joint positions and velocities)."""
        st, p = self.sim.sensed_state, self.part
        return Observation(st.t, st.q[p.q_slice], st.v[p.v_slice],
                           st.joint_positions[p.joints], st.joint_velocities[p.joints], None)

    def imu(self):
        return self.sim.robot_imu(self.name)

    def sensed_imu(self):
        return self.sim.sensed_imu() if self.part.index == 0 else self.imu()


class RobotsLoop:
    """One :class:`ControllerLoop` per robot of a several-robot simulator, each on its
    :class:`RobotView` (None: that robot's torques are zero, ``controller: none``):
    :meth:`torques` joins theirs into the whole joint vector ``sim.step`` takes."""

    def __init__(self, sim, loops):
        self.sim, self.loops = sim, list(loops)

    def torques(self) -> np.ndarray:
        return self.sim.join_joints([np.zeros(p.nj) if loop is None else loop.torques()
                                     for loop, p in zip(self.loops, self.sim.robots)])
