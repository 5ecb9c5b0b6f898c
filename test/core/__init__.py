"""The physics core: simulator, physics, robots, configuration, errors, sensors, actuation,
terrain, snapshots, perturbations; contact models in core/contact/."""
