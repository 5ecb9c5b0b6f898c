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

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .config import ImuConfig
from .robot import RobotModel


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


class Imu:
    """An IMU at a frame of the robot; see the module docstring."""

    def __init__(self, robot: RobotModel, cfg: ImuConfig, gravity: np.ndarray,
                 model: pin.Model | None = None):
        """``model``: the model whose configuration and velocity :meth:`read`
        receives (default ``robot.model``; the simulator passes its stepping
        model, same frames, other base velocity coordinates)."""
        self.robot = robot
        self.cfg = cfg
        self.frame = cfg.frame
        self.frame_id = robot.frame_id(cfg.frame, key="imu.frame")
        self.gravity = np.asarray(gravity, dtype=float)
        self.noisy = cfg.angular_velocity_noise_std > 0 or cfg.linear_acceleration_noise_std > 0
        self._std = np.repeat([cfg.angular_velocity_noise_std,
                               cfg.linear_acceleration_noise_std], 3)
        self._bias = np.concatenate([cfg.angular_velocity_bias, cfg.linear_acceleration_bias])
        self._model = robot.model if model is None else model
        self._data = self._model.createData()
        self.reset()

    def reset(self) -> None:
        self._rng = np.random.default_rng(self.cfg.seed)
        self._noise = np.zeros(6)
        if self.noisy:
            self.draw_noise()

    def draw_noise(self) -> None:
        """Draw the white noise of the next reading (called once per step)."""
        self._noise = self._std * self._rng.standard_normal(6)

    def read(self, q: np.ndarray, v: np.ndarray,
             q_prev: np.ndarray, v_prev: np.ndarray, a_prev: np.ndarray) -> ImuReading:
        model, data, fid = self._model, self._data, self.frame_id
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
