"""The simulation's state: one record of everything that evolves, and its snapshots.

=============  ===========================================================================
``Record``     what the simulator itself advances: built by ``reset``, replaced by each
               ``step`` (a new record, the old one's arrays untouched), copied by
               ``get_state``, restored by ``set_state``. Adding a field here is all it
               takes for snapshots to carry it (:func:`copy_record` copies every field).
``SimState``   a snapshot (``Simulator.get_state``): a copy of the record (the drives'
               state included), plus the ``snapshot()`` of every component with state of
               its own (the contact model's warm starts and the links' contacts, the IMU's
               noise generator), and the signature of the configuration it fits.
``State``      the read-only view of the present state users read (``Simulator.state``).
=============  ===========================================================================
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .robot import RobotModel


@dataclass(eq=False, slots=True)
class Record:
    """Everything of the simulator's own that evolves from step to step (arrays are
    read-only: a step builds new ones). ``q`` and ``v`` are in the stepping coordinates
    (a floating base's linear velocity in world axes)."""

    k: int  #: steps since the last reset
    q: np.ndarray  #: (nq,) configuration
    v: np.ndarray  #: (nv,) velocity, stepping coordinates
    u: np.ndarray  #: (2, n) the contact surfaces' tangential ground deformation, m
    q_prev: np.ndarray  #: the last step's start (its readings were computed there)
    v_prev: np.ndarray
    u_prev: np.ndarray
    #: (nv,) the last step's mean acceleration (v - v_prev) / dt, the IMU's; None: not
    #: computed yet (it is when read)
    a: np.ndarray | None
    force: np.ndarray  #: (n, 3) the last step's surface point forces, ground coordinates
    tau_applied: np.ndarray  #: (nj,) the torques the last step applied (after saturation)
    pushes: tuple = ()  #: ((frame id, (6,) wrench, steps left), ...) still to act
    pushes_applied: tuple = ()  #: ((frame id, wrench), ...) of the last step
    commands: tuple = ()  #: joints.command_delay_steps: the torques given, not yet acting
    sensed: tuple = ()  #: sensors.delay_steps: the readings of the last steps, oldest first
    #: (wb_sim.payloads.Payload, ...) attached now, in the order they were attached (the
    #: models' body inertias follow it: set_state attaches a snapshot's)
    payloads: tuple = ()
    #: the contact sensors' state (wb_sim.sensors.ContactSensors): (raw, debounced, steps
    #: in a row raw has differed, normal forces N) per sensor; () without them
    touch: tuple = ()
    #: (6, m) the drives' state (wb_sim.actuators: torque loop N*m and N*m/s, winding
    #: temperature C, trip latch, the last step's current A and voltage V); None: ideal
    actuator: np.ndarray | None = None
    #: objects.sleep: ((n,) each free object's sleeping island (its label, >= 0) or -1
    #: awake, (n,) the steps in a row it has been slower than objects.sleep_speed); ()
    #: without objects or sleeping
    sleep: tuple = ()


def _copied(x):
    """A snapshot's copy of one field: arrays copied read-only, containers deep-copied."""
    if isinstance(x, np.ndarray):
        out = x.copy()
        out.setflags(write=False)
        return out
    if isinstance(x, (tuple, list, dict)):
        return copy.deepcopy(x)
    return x


def copy_record(record: Record) -> Record:
    """A copy of every field of ``record`` (whatever fields it has)."""
    return type(record)(**{f.name: _copied(getattr(record, f.name))
                           for f in dataclasses.fields(record)})


@dataclass(frozen=True, eq=False)
class SimState:
    """A snapshot of everything that determines a simulation's future; see
    :meth:`Simulator.get_state`. The record's fields read as attributes
    (``snap.q``, ``snap.commands``, ...); arrays are copies."""

    record: Record
    #: component name -> its snapshot(): "contact" (warm starts, the links' contacts),
    #: "imu" (noise generator state, current noise) where there is one
    components: dict
    signature: tuple  #: ((label, value), ...): the configuration it fits
    dt: float  #: s

    @property
    def step_count(self) -> int:
        return self.record.k

    @property
    def t(self) -> float:
        """Simulated time, s (step_count dt)."""
        return self.record.k * self.dt

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "record":  # copy/pickle probe the instance
            raise AttributeError(name)
        try:
            return getattr(self.record, name)
        except AttributeError:
            raise AttributeError(f"SimState has no field {name!r}") from None


@dataclass(frozen=True)
class State:
    """A snapshot of the simulation state (arrays are read-only).

    ``q`` and ``v`` follow pinocchio: for a floating base ``q = [x, y, z,
    qx, qy, qz, qw, joints...]`` and ``v = [base linear velocity (base frame),
    base angular velocity (base frame), joint velocities...]``.
    """

    t: float  #: simulated time, s
    q: np.ndarray
    v: np.ndarray
    applied_torques: np.ndarray  #: torque actually applied to each joint (after saturation)
    contact_deformation: np.ndarray  #: (n_points, 2) tangential ground deformation (t1, t2), m
    robot: RobotModel
    base_pose: pin.SE3  #: world <- base

    @property
    def joint_positions(self) -> np.ndarray:
        """rad or m, in ``joint_names`` order."""
        return self.robot.joint_positions(self.q)

    @property
    def joint_velocities(self) -> np.ndarray:
        """rad/s or m/s, in ``joint_names`` order."""
        return self.v[self.robot.idx_v]

    @property
    def base_position(self) -> np.ndarray:
        """World position of the base origin, m."""
        return self.base_pose.translation.copy()

    @property
    def base_quaternion(self) -> np.ndarray:
        """Base orientation in the world, (x, y, z, w)."""
        return pin.Quaternion(self.base_pose.rotation).coeffs().copy()

    @property
    def base_linear_velocity(self) -> np.ndarray:
        """Velocity of the base origin, world frame, m/s (zero for a fixed base)."""
        if not self.robot.floating_base:
            return np.zeros(3)
        return self.base_pose.rotation @ self.v[:3]

    @property
    def base_angular_velocity(self) -> np.ndarray:
        """Angular velocity of the base, world frame, rad/s (zero for a fixed base)."""
        if not self.robot.floating_base:
            return np.zeros(3)
        return self.base_pose.rotation @ self.v[3:6]
