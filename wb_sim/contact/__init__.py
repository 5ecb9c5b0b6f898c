"""Contact models, chosen by the parameter ``contact.model``.

Each model lives in its own module behind the same interface,
:class:`ContactModel`; :data:`CONTACT_MODELS` is the explicit table of the
available ones. The simulator calls every model the same way: once per step,
after ``points.update`` at the step's configuration, ``solve(Minv_upper,
v_free, u, dt)`` returns the end-of-step velocity with the contact impulses,
the point forces and the next per-point state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..parameters import Param
from .compliant import STATUS_NAMES, CompliantContact
from .points import ContactPoints, Ground
from .rigid import RigidContact

if TYPE_CHECKING:
    from ..config import SimConfig

class ContactModel(Protocol):
    """What the simulator needs of a contact model."""

    name: str
    #: the model's parameter group (``contact.<name>`` declarations), validated there
    PARAMETERS: tuple[Param, ...]
    #: parameters ``ros2 param set`` / ``Simulator.set_contact_parameters`` may change
    LIVE_PARAMETERS: tuple[str, ...]
    max_penetration: float  #: m: deeper raises DivergenceError
    #: m: a point enters the solve once it is this close to touching (depth > -it), now
    #: or after the step's free motion (depth - dt * normal velocity > -it)
    activation_margin: float
    depth: np.ndarray  #: (n,) penetration at the last solve, m (> 0 below the ground)

    def initial_state(self) -> np.ndarray:
        """(2, n) per-point state at rest (the compliant ground's deformation)."""

    def solve(self, Minv_upper: np.ndarray, v_free: np.ndarray, u: np.ndarray,
              dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(v_next (nv,), a new array: the end-of-step velocity ``v_free`` plus what
        the contact impulses add (``v_free`` itself when nothing touches); point
        forces (n, 3) in ground coordinates; next state (2, n))."""

    @property
    def max_depth(self) -> float: ...

    @property
    def status(self) -> np.ndarray:
        """(n,) 0 none, 1 stick, 2 slip at the last solve."""

    def parameters(self) -> dict[str, float]: ...

    def snapshot(self) -> tuple:
        """Warm starts and last readings, by reference (never changed in place)."""

    def restore(self, snap: tuple) -> None: ...

    def set_parameters(self, **values: float) -> None:
        """Change some live parameters: all checked by their declarations, then
        applied together (ConfigError: nothing changes)."""

    def resolution_note(self, delassus: np.ndarray, weight: float, dt: float) -> str | None:
        """A sentence for the log if dt does not resolve the contact."""

    def statistics(self) -> dict:
        """Counts of the solver's work: at least ``solves``; the rigid model adds
        ``nonconverged`` and ``iterations_mean`` / ``iterations_p99``, the compliant
        one ``active_set_solves``."""


#: contact.model value -> class
CONTACT_MODELS = {
    "compliant": CompliantContact,
    "rigid": RigidContact,
}


def _known_model(name: str) -> str | None:
    return None if name in CONTACT_MODELS else (
        f"unknown contact model {name!r}; valid choices: {', '.join(sorted(CONTACT_MODELS))}")


#: the ``contact.*`` parameters: the model's name, then each model's group in the order
#: of :data:`CONTACT_MODELS` (a parameter two models read is declared once, in their
#: shared module, and listed once). Every key is accepted whichever model runs, so one
#: file can hold the settings of both.
PARAMETERS: tuple[Param, ...] = (
    Param("contact.model", "str", "compliant", "",
          "Contact model: 'compliant' (spring-damper ground, the contact.stiffness ... keys) or "
          "'rigid' (impulses with a friction cone, the keys marked rigid).",
          choices=tuple(CONTACT_MODELS), check=_known_model),
    *{p.key: p for cls in CONTACT_MODELS.values() for p in cls.PARAMETERS}.values(),
)


def make_contact_model(config: SimConfig, points: ContactPoints):
    """Instantiate the model named by ``contact.model`` (validated by its declaration)."""
    return CONTACT_MODELS[config.contact.model](config.contact, points)


__all__ = ["CONTACT_MODELS", "PARAMETERS", "ContactModel", "STATUS_NAMES", "CompliantContact", "ContactPoints", "Ground",
           "RigidContact", "make_contact_model"]
