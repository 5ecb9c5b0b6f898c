"""Tools around the physics core: recording and plots of runs, rosbag reading, the
browser viewer, the benchmarks, the headless demo (``python -m wb_sim``), the stand
verdict and campaigns (``wb_sim_batch``). They use the core's public API; the core
never imports them. Optional dependencies (matplotlib, meshcat, rosbags, ray) are
imported only where they are used."""
