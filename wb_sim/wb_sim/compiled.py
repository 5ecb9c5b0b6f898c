"""The step's compiled kernels (``wb_sim/_compiled.c``, built by ``pip install`` and by
``colcon build``) and the switch to the plain Python path.

The kernels replace a Python code path where it is the common case (today: the compliant
contact's solve when every point sticks, :meth:`wb_sim.contact.compliant.CompliantContact.solve`);
that Python code stays the reference the tests hold them to. ``WB_SIM_PLAIN=1`` in the
environment, read when a simulator is built, makes the simulators built after it run the plain
Python path everywhere (for debugging, or to compare). A missing extension (a source tree that
was never built, or an install on a machine without a C compiler: setup.py builds it as an
optional extension) is said once, as a warning, and the plain path runs.
"""

from __future__ import annotations

import importlib
import os
import warnings

from .errors import ConfigError

#: the environment variable that forces the plain Python path ("1")
PLAIN_ENV = "WB_SIM_PLAIN"

_missing_said = False


def kernels():
    """The compiled kernels' module, or None where the plain path runs: ``WB_SIM_PLAIN=1``,
    or the extension is not built (warned once per process). Another value than 0 or 1 is a
    :class:`ConfigError`."""
    global _missing_said
    plain = os.environ.get(PLAIN_ENV, "").strip()
    if plain == "1":
        return None
    if plain not in ("", "0"):
        raise ConfigError(f"environment variable {PLAIN_ENV}={plain!r}: 1 runs the plain Python "
                          f"path, 0 (or unset) the compiled kernels")
    try:
        _compiled = importlib.import_module("._compiled", __package__)
    except ImportError as e:
        if not _missing_said:
            _missing_said = True
            warnings.warn(f"wb_sim's compiled kernels are not built ({e}): the plain Python step "
                          f"runs, slower; `pip install ./wb_sim` (or `colcon build`) builds them, "
                          f"and {PLAIN_ENV}=1 silences this by choosing the plain path",
                          RuntimeWarning, stacklevel=2)
        return None
    return _compiled


def path() -> str:
    """'compiled' or 'plain': what a simulator built now runs (for reports)."""
    return "plain" if kernels() is None else "compiled"
