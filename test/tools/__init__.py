"""The core's tools (wb_sim.tools): campaigns, recording, plots, the viewer."""
