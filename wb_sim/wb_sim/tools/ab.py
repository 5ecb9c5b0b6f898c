"""The A/B switch (issue 32): the same controller on two settings of the simulator (compliant
against rigid contact, two stiffnesses, ...) and where the two runs part.

``wb_sim_batch --ab KEY:=VALUE`` runs every case twice, as the campaign says (A) and with these
values over it (B); ``wb_sim_run --ab KEY:=VALUE`` runs the closed loop twice in lockstep,
records both and compares the recordings. Both report the same :class:`Divergence`: the first
simulated time at which the base's position differs by more than ``base_m`` or a joint's
position by more than ``joint_rad`` (the divergence time), what crossed first, and the largest
differences over the run.

Only numpy here: the trajectories come from a headless run's trace or from two rosbags
(:func:`wb_sim.tools.bag.history_from_bag`), compared at the simulated times both hold."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

#: the default tolerances of the divergence time (documented in docs/campaigns.md)
BASE_TOLERANCE_M = 0.01
JOINT_TOLERANCE_RAD = 0.05
#: the most --ab values one command takes
MAX_OVERRIDES = 64


def parse_overrides(items, option: str = "--ab") -> dict:
    """``["contact.model:=rigid", "contact.stiffness:=2e4"]`` -> {key: YAML value}.

    Raises :class:`~wb_sim.ConfigError` naming the bad item."""
    import yaml

    from ..config import yaml_value  # wb_sim's one YAML loader: 2e4 is a number, as in -p
    items = list(items or ())
    if len(items) > MAX_OVERRIDES:
        raise ConfigError(f"{option}: {len(items)} values, at most {MAX_OVERRIDES}")
    out = {}
    for item in items:
        key, sep, text = str(item).partition(":=")
        if not sep or not key.strip():
            raise ConfigError(f"{option} {item!r}: expected KEY:=VALUE, e.g. "
                              f"{option} contact.model:=rigid")
        if "&" in text or "*" in text:  # no anchors or aliases (the bound of every YAML read)
            raise ConfigError(f"{option} {item!r}: YAML anchors and aliases are not accepted")
        try:
            out[key.strip()] = yaml_value(text) if text.strip() else ""
        except yaml.YAMLError as e:
            raise ConfigError(f"{option} {item!r}: the value is not YAML: "
                              f"{str(e).splitlines()[0]}") from None
    return out


@dataclass(frozen=True)
class Divergence:
    """Where two runs of the same controller part (:func:`divergence`)."""

    time_s: float  #: first simulated time over a tolerance; NaN if never
    cause: str  #: 'base position' or 'joint <name>' at that time; '' if never
    max_base_m: float  #: largest distance between the two bases' positions, m (NaN: fixed base)
    max_joint_rad: float  #: largest |difference| of a joint's position, rad (m, prismatic)
    worst_joint: str  #: the joint of max_joint_rad
    samples: int  #: simulated times compared
    base_tolerance_m: float
    joint_tolerance_rad: float

    @property
    def diverged(self) -> bool:
        return not math.isnan(self.time_s)

    def row(self) -> dict:
        """The columns a campaign's table gets."""
        return {"ab.divergence_time_s": self.time_s,
                "ab.max_base_difference_m": self.max_base_m,
                "ab.max_joint_difference_rad": self.max_joint_rad}

    def summary(self, a: str = "A", b: str = "B") -> str:
        """One line for a log."""
        base = "" if math.isnan(self.max_base_m) else f"base {self.max_base_m:.4g} m, "
        largest = (f"largest differences: {base}joint {self.max_joint_rad:.4g} rad "
                   f"({self.worst_joint or '-'}) over {self.samples} samples")
        if not self.diverged:
            return (f"{a} and {b} stay within {self.base_tolerance_m:g} m / "
                    f"{self.joint_tolerance_rad:g} rad of each other; {largest}")
        bound = (f"{self.base_tolerance_m:g} m" if self.cause == "base position" else
                 f"{self.joint_tolerance_rad:g} rad")
        return (f"{a} and {b} diverge at t = {self.time_s:.3f} s ({self.cause} apart by more "
                f"than {bound}); {largest}")


def divergence(t_a, joints_a, t_b, joints_b, joint_names, *, base_a=None, base_b=None,
               wrap=None, base_m: float = BASE_TOLERANCE_M,
               joint_rad: float = JOINT_TOLERANCE_RAD) -> Divergence:
    """Compare two runs at the simulated times both hold (matched to 1 ns).

    ``joints_*`` (n, nj) joint positions in ``joint_names`` order; ``base_*`` (n, 3) the base's
    world position (None: a fixed base); ``wrap`` (nj,) bool: joints whose difference is an
    angle taken modulo 2 pi (continuous joints; default: none)."""
    if not (base_m > 0 and joint_rad > 0):
        raise ConfigError(f"A/B tolerances must be > 0 (base {base_m!r} m, joint {joint_rad!r} rad)")
    ka = np.round(np.asarray(t_a, dtype=float) * 1e9).astype(np.int64)
    kb = np.round(np.asarray(t_b, dtype=float) * 1e9).astype(np.int64)
    common, ia, ib = np.intersect1d(ka, kb, assume_unique=False, return_indices=True)
    names = tuple(joint_names)
    ja, jb = np.asarray(joints_a, dtype=float)[ia], np.asarray(joints_b, dtype=float)[ib]
    dj = ja - jb
    if wrap is not None and np.any(wrap):
        w = np.asarray(wrap, dtype=bool)
        dj[:, w] = (dj[:, w] + np.pi) % (2 * np.pi) - np.pi
    dj = np.abs(dj)
    joint_over = (dj > joint_rad).any(axis=1) if dj.shape[1] else np.zeros(len(common), bool)
    if base_a is not None and base_b is not None:
        db = np.linalg.norm(np.asarray(base_a, float)[ia] - np.asarray(base_b, float)[ib], axis=1)
        base_over = db > base_m
        max_base = float(db.max()) if len(db) else 0.0
    else:
        base_over, max_base = np.zeros(len(common), bool), math.nan
    over = np.flatnonzero(base_over | joint_over)
    time_s, cause = math.nan, ""
    if len(over):
        k = int(over[0])
        time_s = float(np.asarray(t_a, dtype=float)[ia[k]])  # A's own time, not rounded
        if base_over[k]:
            cause = "base position"
        else:
            cause = f"joint {names[int(np.argmax(dj[k]))]}"
    if dj.size:
        i, j = np.unravel_index(int(np.argmax(dj)), dj.shape)
        max_joint, worst = float(dj[i, j]), names[int(j)]
    else:
        max_joint, worst = 0.0, ""
    return Divergence(time_s, cause, max_base, max_joint, worst, int(len(common)),
                      float(base_m), float(joint_rad))

