"""``python -m wb_sim.ros.bench``: the node's performance benchmark (:mod:`.perf`)."""

import sys

from .perf import main

sys.exit(main())
