"""Exception types of wb_sim.

Every error the library raises on purpose derives from :class:`WbSimError`, so a
caller (the ROS node, a test, a script) can tell our diagnostics from bugs.
"""


class WbSimError(Exception):
    """Base class of all wb_sim errors."""


class ConfigError(WbSimError, ValueError):
    """A parameter is missing, unknown, of the wrong type or out of range.

    The message names the offending parameter key (e.g. ``contact.stiffness``).
    """


class ModelError(WbSimError, ValueError):
    """The robot description cannot be used: missing file, malformed XML,
    unsupported joint type, unknown frame or joint name."""


class CommandError(WbSimError, ValueError):
    """A command (torque vector, external input) is malformed: wrong length,
    NaN or infinite values. The simulator state is left untouched."""


class DivergenceError(WbSimError, RuntimeError):
    """The simulation left its domain of validity: a non-finite state, or a
    contact deeper than ``contact.max_penetration``. The state is the last
    valid one; call :meth:`wb_sim.Simulator.reset` to continue."""


class UnsupportedError(WbSimError, NotImplementedError):
    """A requested feature is not available with the installed dependencies."""
