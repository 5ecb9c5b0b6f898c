"""``python -m wb_sim.tools.campaign``: ``wb_sim_batch`` (:func:`.cli.main`)."""

import sys

from .cli import main

sys.exit(main())
