"""The ROS node's benchmarks (the core's are in :mod:`wb_sim.tools.bench`), each starting the
node and its peers as processes:

* :mod:`.perf`: ``python -m wb_sim.ros.bench``: real-time factor, deadline misses, CPU and
  the joint_states -> command latency; with ``--sync lockstep``, the closed loop's throughput;
* :mod:`.flood`: ``python -m wb_sim.ros.bench.flood``: the node under floods of malformed
  messages;
* :mod:`.soak`: ``python -m wb_sim.ros.bench.soak``: long runs (memory, misses, stands);
* :mod:`.processes`: what they share (the node process and its log lines, a clean stop).

docs/performance.md has their figures. The names below were ``wb_sim.ros.bench``'s when it
was one module, and stay importable from here.
"""

from .perf import BURNER_CODE, LISTENER_CODE, LOCKSTEP_REPORT, REPORT, main, run

__all__ = ["BURNER_CODE", "LISTENER_CODE", "LOCKSTEP_REPORT", "REPORT", "main", "run"]
