"""The benchmarks of the core and the tools (the ROS node's are in :mod:`wb_sim.ros.bench`):

* :mod:`.physics`: ``python -m wb_sim.tools.bench icub_stand`` (also ``wb_sim_bench``): the
  shared ``icub_stand`` scenario timed, with ``--peer`` for MuJoCo, ``--contact``,
  ``--collision``, ``--self-collision``; and ``humanoid_lying``;
* :mod:`.campaign`: ``python -m wb_sim.tools.bench.campaign``: the campaign runner's
  throughput against a plain loop.

docs/performance.md has their figures. The names below were ``wb_sim.tools.bench``'s when it
was one module, and stay importable from here.
"""

from .physics import (ICUB_STAND, KD, KP, STEPS, collision_cost, humanoid_lying, icub_stand,
                      icub_stand_setup, main, self_collision_cost)

__all__ = ["ICUB_STAND", "KD", "KP", "STEPS", "collision_cost", "humanoid_lying", "icub_stand",
           "icub_stand_setup", "main", "self_collision_cost"]
