"""The stream table: which state stream publishes at which rate, and what is due at a step.

Plain Python, no rclpy. A stream's rate (``publish.<stream>_rate_hz``, 0 = every
physics step) becomes a decimation: one message every ``n`` physics steps,
``n = round(physics_rate / rate)`` (:meth:`wb_sim.config.NodeConfig.decimation`
validates it). A stream without a topic (``topics.<stream>: ''``) or without a
source (no IMU; ``odom`` of a fixed base) is off. At step ``k`` the streams with
``k % n == 0`` are due, in the order a controller needs them: joint states and
the base pose first, then the rest.
"""

from __future__ import annotations

from typing import Mapping

#: the per-step streams in publishing order, with their rate parameter
STREAMS: tuple[tuple[str, str], ...] = (
    ("joint_states", "publish.joint_states_rate_hz"),
    ("odom", "publish.odom_rate_hz"),
    ("object_odom", "publish.object_odom_rate_hz"),
    ("clock", "publish.clock_rate_hz"),
    ("imu", "publish.imu_rate_hz"),
    ("contact_wrench", "publish.contact_wrench_rate_hz"),
    ("ft", "publish.ft_rate_hz"),
    ("contact_sensors", "publish.contact_sensors_rate_hz"),
    ("loop_closures", "publish.loop_closures_rate_hz"),
    ("actuators", "publish.actuators_rate_hz"),
    ("tf", "publish.tf_rate_hz"),
    ("contact_markers", "publish.contact_markers_rate_hz"),
    ("contact_state", "publish.contact_state_rate_hz"),
)


class StreamTable:
    """``every``: stream -> decimation (steps between two messages), for the streams that
    are on; a stream absent from it (or with a decimation < 1: refused) is off."""

    def __init__(self, every: Mapping[str, int], physics_rate_hz: float):
        unknown = set(every) - {s for s, _ in STREAMS}
        if unknown:
            raise ValueError(f"unknown stream(s) {sorted(unknown)}; streams: "
                             f"{[s for s, _ in STREAMS]}")
        bad = {s: n for s, n in every.items() if int(n) != n or n < 1}
        if bad:
            raise ValueError(f"decimations must be whole numbers >= 1, got {bad}")
        self.every = {s: int(every[s]) for s, _ in STREAMS if s in every}
        self.physics_rate_hz = physics_rate_hz
        self._all = tuple(self.every)
        # the pattern repeats every lcm of the decimations: precomputed when short
        self._period = 1
        for n in self.every.values():
            self._period = _lcm(self._period, n)
        self._due = [tuple(s for s, n in self.every.items() if k % n == 0)
                     for k in range(self._period)] if self._period <= 10_000 else None

    @classmethod
    def from_config(cls, cfg, physics_rate_hz: float, on: Mapping[str, bool]) -> "StreamTable":
        """From the node's parameters; ``on``: stream -> whether it has a topic and a source."""
        return cls({s: cfg.decimation(key, physics_rate_hz) for s, key in STREAMS if on.get(s)},
                   physics_rate_hz)

    def rate_hz(self, stream: str) -> float:
        """The rate a stream publishes at (0 if it is off)."""
        n = self.every.get(stream)
        return self.physics_rate_hz / n if n else 0.0

    def due(self, k: int, every: bool = False) -> tuple[str, ...]:
        """The streams to publish at physics step ``k`` (all that are on with ``every``)."""
        if every:
            return self._all
        if self._due is not None:
            return self._due[k % self._period]
        return tuple(s for s, n in self.every.items() if k % n == 0)

    def __contains__(self, stream: str) -> bool:
        return stream in self.every


def _lcm(a: int, b: int) -> int:
    from math import gcd
    return a * b // gcd(a, b)
