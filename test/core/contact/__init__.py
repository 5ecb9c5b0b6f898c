"""Contact: the compliant and rigid models, collision, self-collision, robustness on default
parameters."""
