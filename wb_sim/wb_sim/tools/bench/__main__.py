"""``python -m wb_sim.tools.bench SCENARIO``: the physics benchmark (:mod:`.physics`)."""

import sys

from .physics import main

sys.exit(main())
