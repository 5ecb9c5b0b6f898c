"""Test helpers for your controller's CI (pytest or any test runner).

:func:`assert_replays` runs a lockstep recording again with a controller (yours, or
the example one the bag names) against a fresh simulator node and fails, naming the
first difference, unless every joint state comes back bit for bit. Record the bag
once (``wb_sim_run --sync lockstep --record BAG``, or ``wb_sim_record`` beside your
own controller), keep it with your tests, and a change of your controller's
behaviour, one gain is enough, fails the test. See "Replay in your CI" in
docs/ros.md and :mod:`wb_sim.ros.replay` (``wb_sim_replay``, the same as a command).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from .replay import ReplayError, ReplayResult, replay

__all__ = ["assert_replays", "ReplayError", "ReplayResult"]


def assert_replays(bag: str | Path, controller: Sequence[str] | str | None = None, *,
                   timeout_s: float | None = None, domain_id: int | None = None,
                   echo: Callable[[str], None] | None = None) -> ReplayResult:
    """Replay ``bag`` and return the :class:`~wb_sim.ros.replay.ReplayResult` if every
    recorded joint state came back bit for bit; otherwise raise ``AssertionError``
    with the verdict (first differing stamp, joint, field and values, how many
    states differ, the largest differences).

    ``controller``: your controller's command line (a list of arguments, or one string
    split as a shell does, e.g. ``"python my_ctrl.py --ros-args -p kp:=1000.0"``);
    None runs the example controller with the parameters the bag recorded.
    ``timeout_s``: wall seconds for the whole replay (default 90 s + 20 s per recorded
    simulated second). ``domain_id``: the ROS_DOMAIN_ID of the replay (default: the
    environment's); tests that run in parallel need one each. ``echo``: receives each
    output line of the simulator and the controller.

    A replay that cannot run (no bag, not a lockstep recording, a process that fails
    to start) raises :class:`~wb_sim.ros.replay.ReplayError` instead."""
    result = replay(bag, controller, timeout_s=timeout_s, domain_id=domain_id, echo=echo)
    if not result.identical:
        raise AssertionError(result.message)
    return result
