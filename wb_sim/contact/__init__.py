"""Contact models, chosen by the parameter ``contact.model``.

Each model lives in its own module behind the same small interface
(``initial_state()``, ``forces(u, dt)``, ``status``, ``depth``,
``check_stability(...)``, ``set_parameters(...)``); :data:`CONTACT_MODELS` is the
explicit table of the available ones.
"""

from __future__ import annotations

from ..config import SimConfig
from ..errors import ConfigError
from .compliant import STATUS_NAMES, CompliantContact
from .points import ContactPoints, Ground
from .rigid import RigidContact

#: contact.model value -> class
CONTACT_MODELS = {
    "compliant": CompliantContact,
    "rigid": RigidContact,
}


def make_contact_model(config: SimConfig, points: ContactPoints):
    """Instantiate the model named by ``contact.model``."""
    try:
        cls = CONTACT_MODELS[config.contact.model]
    except KeyError:
        raise ConfigError(
            f"parameter 'contact.model': unknown contact model {config.contact.model!r}; "
            f"valid choices: {', '.join(sorted(CONTACT_MODELS))}") from None
    return cls(config.contact, points)


__all__ = ["CONTACT_MODELS", "STATUS_NAMES", "CompliantContact", "ContactPoints", "Ground",
           "RigidContact", "make_contact_model"]
