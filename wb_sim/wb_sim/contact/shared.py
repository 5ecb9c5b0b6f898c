"""The parameters every contact model reads (each model lists them in its group)."""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import ConfigError
from ..parameters import Param

#: largest friction coefficient: mu**2 stays far from overflow, and a cone this
#: wide already never lets a foot slip (real materials: 0.1-2)
MAX_FRICTION_COEFFICIENT = 1.0e3

FRICTION_COEFFICIENT = Param(
    "contact.friction_coefficient", "float", 1.0, "",
    "Coulomb friction coefficient mu (the tangential force is at most mu f_n), in [0, 1000].",
    lo=0.0, hi=MAX_FRICTION_COEFFICIENT, live=True)

#: largest torsional friction length, m: a contact patch a metre across is no point contact
MAX_TORSIONAL_FRICTION = 1.0

TORSIONAL_FRICTION = Param(
    "contact.torsional_friction", "float", 0.0, "m",
    "Torsional (spin) friction of each contact point, a length (MuJoCo's torsional coefficient, "
    "condim 4): the torque about the contact normal is at most this times the point's normal "
    "force (~2/3 mu a for a contact patch of radius a). 0 = none, as MuJoCo's default condim 3, "
    "Gazebo, PhysX and Bullet: a ball spinning in place then never slows. It matters for "
    "single-point contacts (sphere feet, balls); a box's corners resist spin through their "
    "tangential friction already. Contact surfaces only (not the links' collision points); none "
    "where friction_coefficient is 0. Compliant: the twist is resisted by the tangential "
    "spring-damper acting at this lever arm.",
    lo=0.0, hi=MAX_TORSIONAL_FRICTION, live=True)

MAX_PENETRATION = Param(
    "contact.max_penetration", "float", 0.2, "m",
    "A contact point deeper than this raises DivergenceError (a guard against a lost robot, not a "
    "contact parameter: a 200 kg box dropped 2 m sinks ~7 cm into the default compliant ground).",
    lo=0.0, lo_open=True)


def short(p: Param) -> str:
    """A contact parameter's name within its group (``stiffness`` for ``contact.stiffness``)."""
    return p.key.removeprefix("contact.")


def live_names(group: tuple[Param, ...]) -> tuple[str, ...]:
    """The short names of a group's live parameters, in declaration order."""
    return tuple(short(p) for p in group if p.live)


def checked_live_values(group: tuple[Param, ...], current: Mapping[str, Any],
                        values: Mapping[str, Any]) -> dict[str, Any]:
    """``current`` (the live values) updated with ``values`` (names with or without
    ``contact.``), each checked by its declaration in ``group``: a ConfigError names
    the first one refused, and the caller applies nothing."""
    by_name = {short(p): p for p in group}
    new = dict(current)
    for key, value in values.items():
        name = key.removeprefix("contact.")
        p = by_name.get(name)
        if p is None or not p.live:
            raise ConfigError(f"parameter 'contact.{name}' cannot be changed while running; "
                              f"live contact parameters: "
                              f"{', '.join('contact.' + k for k in live_names(group))}")
        new[name] = p.coerce(value)
    return new
