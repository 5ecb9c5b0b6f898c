"""The repository itself: lint, layers, README and docs, packaging, one source per parameter,
the RViz configuration."""
