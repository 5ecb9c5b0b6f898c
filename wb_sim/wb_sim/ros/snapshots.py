"""Named snapshots of the node (``~/save_snapshot``, ``~/restore_snapshot``,
``~/list_snapshots``, ``~/delete_snapshot``): the store, bounded in count and memory
(plain Python, no rclpy).

A node snapshot is the core's :class:`wb_sim.SimState` (``Simulator.get_state``:
bit-identical continuation) plus what the node itself carries from step to step and
that changes the physics: the command acting and the watchdog's state, the command
timing's delay line and generator (:meth:`.gate.CommandGate.snapshot`), the in-process
controller's held torques; and the node's clock when it was taken (a restore moves the
clock on, never back: :meth:`.node.SimNode.restore_snapshot`).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import CommandError

#: a snapshot's name: what a ROS name allows and a little more, short enough to log
NAME_RE = re.compile(r"[A-Za-z0-9_.\-]{1,64}\Z")


class SnapshotError(CommandError):
    """A snapshot request refused: ``kind`` is "invalid" (a bad name), "not_found" or
    "full" (the count or memory bound)."""

    def __init__(self, message: str, kind: str = "invalid"):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, eq=False)
class NodeSnapshot:
    """What ``~/save_snapshot`` keeps (see the module's text)."""

    sim: Any  #: the core's SimState
    gate: dict  #: CommandGate.snapshot()
    controller: Any  #: the in-process controller's held torques (None: no such controller)
    t_ns: int  #: the node's simulated clock when taken, ns
    nbytes: int  #: the memory it holds, bytes (:func:`nbytes`)


def nbytes(x: Any, _seen: set | None = None) -> int:
    """An estimate of the memory ``x`` holds, bytes: its arrays' buffers and the
    Python objects around them (containers, dataclasses, plain objects), each counted once."""
    seen = set() if _seen is None else _seen
    if id(x) in seen:
        return 0
    seen.add(id(x))
    if isinstance(x, np.ndarray):
        return x.nbytes + 112
    n = sys.getsizeof(x)
    if isinstance(x, dict):
        return n + sum(nbytes(k, seen) + nbytes(v, seen) for k, v in x.items())
    if isinstance(x, (list, tuple, set, frozenset)):
        return n + sum(nbytes(v, seen) for v in x)
    fields = getattr(x, "__dataclass_fields__", None)
    if fields is not None:
        return n + sum(nbytes(getattr(x, f, None), seen) for f in fields)
    if hasattr(x, "__dict__"):
        return n + nbytes(vars(x), seen)
    return n


class SnapshotStore:
    """Snapshots by name, in the order they were saved; at most ``max_count`` of them,
    together at most ``max_bytes``. Saving under a name that exists replaces that
    snapshot. Not thread-safe by itself: the node's services run one at a time (their
    mutually exclusive callback group)."""

    def __init__(self, max_count: int, max_bytes: float):
        self.max_count, self.max_bytes = int(max_count), float(max_bytes)
        self._snaps: dict[str, NodeSnapshot] = {}

    @staticmethod
    def check_name(name: str) -> None:
        if not isinstance(name, str) or not NAME_RE.match(name):
            shown = name if len(str(name)) <= 70 else str(name)[:70] + "..."
            raise SnapshotError(f"snapshot name {shown!r} refused: give 1 to 64 letters, digits, "
                                "'_', '.' or '-'")

    @property
    def total_bytes(self) -> int:
        return sum(s.nbytes for s in self._snaps.values())

    def names(self) -> list[str]:
        """The names, oldest first."""
        return list(self._snaps)

    def fits(self, name: str, size: int) -> None:
        """SnapshotError ("full") if a snapshot of ``size`` bytes saved as ``name`` would
        exceed a bound; called before the snapshot is taken (a replaced one is freed)."""
        self.check_name(name)
        replaced = self._snaps.get(name)
        count = len(self._snaps) + (replaced is None)
        if count > self.max_count:
            raise SnapshotError(
                f"snapshot {name!r} refused: {len(self._snaps)} snapshots are kept, the most "
                f"snapshots.max_count ({self.max_count}) allows; delete one "
                f"(~/delete_snapshot) or raise snapshots.max_count", "full")
        total = self.total_bytes - (replaced.nbytes if replaced else 0) + size
        if total > self.max_bytes:
            raise SnapshotError(
                f"snapshot {name!r} refused: the snapshots would hold {total / 1e6:.3f} MB, "
                f"more than snapshots.max_mb ({self.max_bytes / 1e6:g} MB); delete some "
                f"(~/delete_snapshot) or raise snapshots.max_mb", "full")

    def save(self, name: str, snap: NodeSnapshot) -> bool:
        """Keep ``snap`` as ``name`` (bounds checked: :meth:`fits`); True if it replaced one."""
        self.fits(name, snap.nbytes)
        replaced = self._snaps.pop(name, None) is not None
        self._snaps[name] = snap
        return replaced

    def get(self, name: str) -> NodeSnapshot:
        self.check_name(name)
        try:
            return self._snaps[name]
        except KeyError:
            raise SnapshotError(f"no snapshot {name!r}; kept: "
                                f"{', '.join(self._snaps) or 'none'}", "not_found") from None

    def delete(self, name: str) -> NodeSnapshot:
        snap = self.get(name)
        del self._snaps[name]
        return snap
