"""The contact wing: every source of contact force, behind one interface.

==========================  ==========================================================
module                      what it holds
==========================  ==========================================================
``points``                  the contact surfaces' points (feet: boxes, spheres, points)
``compliant``, ``rigid``    the contact laws (``contact.model``), in :data:`CONTACT_MODELS`
``geometry``                the URDF ``<collision>`` shapes as points and vertices
``ground_collision``        the links against the ground and terrain (``collision.enabled``)
``self_collision``          the links against each other (``collision.self_collision``)
``whole_body``              surfaces + ground collision + self-collision as one model
``base``, ``shared``        what the laws share (the surfaces-only answers, parameters)
==========================  ==========================================================

The simulator holds exactly one :class:`ContactModel`, made by :func:`make_contact`,
and calls it the same way whatever it is: once per step, after the step's kinematics
are in pinocchio's data, ``solve(Minv_upper, v_free, u, dt)`` returns the end-of-step
velocity with the contact impulses, the surfaces' point forces and their next state.
Contact code receives its own parameter groups (``config.contact``,
``config.collision``, the surfaces'), never the whole configuration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..parameters import Param
from . import ground_collision, self_collision
from .compliant import STATUS_NAMES, CompliantContact
from .points import ContactPoints, Ground
from .rigid import RigidContact
from .self_collision import srdf_text, touching_pairs
from .whole_body import build_whole_body_contact

if TYPE_CHECKING:
    import pinocchio as pin

    from ..sensors import ContactPointsReading, SelfContactsReading

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

    def generalized_impulse(self) -> np.ndarray | None:
        """(nv,) the generalized impulse ``J_c^T p`` (N*s) of every row the last
        :meth:`solve` solved (surfaces, torsional spin rows, and with the whole-body model
        the links' ground, terrain and self-contacts, the objects'); ``None`` if no impulse
        acted. Computed when asked; valid until the next solve."""

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

    def solver_health(self, residual: bool = True) -> dict[str, float]:
        """The last solve, computed when asked (nothing per step): ``residual`` (m/s, how
        far its impulses are from solving the contact problem; NaN unless asked) and
        ``impulse_work`` (J,
        the kinetic energy its impulses added; > 0: energy gained); NaN where the law has
        no such measure (the compliant ground); and the counters since construction,
        cheap to read: ``solves``, and for an iterative solver ``nonconverged`` and
        ``iterations`` (:meth:`statistics` sorts its iterations: milliseconds)."""

    # -- what the simulator reads without asking which model it holds
    #: the contact surfaces' points (ContactPoints)
    surfaces: ContactPoints
    #: the links' points against the ground (collision.enabled), or None
    collision: object | None
    #: the links against each other (collision.self_collision), or None
    self_collision: object | None

    @property
    def active(self) -> bool:
        """Whether anything can touch (False: the simulator skips the solve)."""

    #: after :meth:`solve`: (n objects,) bool, the sleeping objects an awake body came
    #: within the margin of (their islands woke for this solve); None: none
    woken: np.ndarray | None

    def set_sleeping(self, labels: np.ndarray | None) -> None:
        """The free objects asleep for the next solves (``labels``: each object's island
        label, -1 awake; None: all awake): their geometry is skipped by the phases and
        the solve, an awake body within the margin wakes their island (:attr:`woken`)."""

    def wake_near(self, v: np.ndarray, dt: float) -> np.ndarray | None:
        """The sleeping islands an awake body is within the margin of, woken now, at the
        placements the step's dynamics left and the velocity ``v`` (nv,): :attr:`woken`.
        :meth:`solve` runs it first, unless it is given the robot's velocities only (every
        object asleep: the simulator asked first)."""

    def object_contacts(self) -> tuple[np.ndarray, np.ndarray]:
        """(a, b) the last solve's pair contacts with a free object: the two sides'
        object indices, -1 for a robot's link (the simulator's islands of objects)."""

    def deepest(self) -> tuple[str, float]:
        """(what, depth m) of the deepest point at the last solve, for an error
        message: "contact surface 'x'", "link 'y'", "links 'a' and 'b' (self-collision)"."""

    def clear_deformation(self) -> None:
        """Drop the deformation the model keeps itself (the links' contacts; the
        surfaces' is the simulator's ``u``): a reset's trial step must leave none."""

    def collision_wrench(self) -> np.ndarray:
        """(6,) the ground's total [force N, torque N*m about the world origin] on the
        links other than the contact surfaces at the last step, world axes."""

    def collision_points_state(self) -> ContactPointsReading:
        """The links' collision points near the ground at the last step."""

    def self_contacts_state(self) -> SelfContactsReading:
        """The links' contacts with each other at the last step."""

    def collision_links(self) -> tuple[str, ...]:
        """The links whose collision geometry meets the ground (collision.enabled), in the
        order of :meth:`link_normal_forces`; () without collision."""

    def link_normal_forces(self) -> np.ndarray:
        """(L,) per link of :meth:`collision_links`: the sum of its ground and terrain
        contacts' normal forces at the last step, N."""

    def signature(self) -> tuple:
        """((label, value), ...): what a snapshot of this model fits."""


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
    # the links' collision (collision.*): against the ground, then against each other
    *ground_collision.PARAMETERS,
    *self_collision.PARAMETERS,
)


def make_contact_model(params, points) -> ContactModel:
    """The contact law named by ``contact.model`` over ``points`` (``params``: the
    validated ``contact`` group)."""
    return CONTACT_MODELS[params.model](params, points)


def make_contact(robot, *, surfaces, contact, collision, ground: Ground, terrain,
                 model_step: pin.Model, data_step: pin.Data, notes: list[str],
                 objects: dict | None = None) -> ContactModel:
    """The simulator's one contact object: the law ``contact.model`` over the contact
    surfaces, or, with ``collision.enabled`` or ``collision.self_collision``, the
    whole-body model that adds the links (:mod:`~wb_sim.contact.whole_body`).

    ``surfaces``, ``contact``, ``collision``: their parameter groups; ``ground`` and
    ``terrain``: what the points touch; ``model_step``/``data_step``: the model the
    step integrates and the data its kinematics are left in; ``notes`` gets what the
    build wants said once; ``objects``: {free object: [its geometry objects]}
    (:mod:`wb_sim.objects`), which always take the whole-body model: they meet the ground,
    the terrain, each other and the links with geometry."""
    points = ContactPoints(robot, surfaces, ground, terrain,
                           model=model_step if objects else None)
    law = make_contact_model(contact, points)
    if not (collision.enabled or collision.self_collision or objects):
        return law
    return build_whole_body_contact(robot, surfaces, collision, law,
                                    lambda merged: make_contact_model(contact, merged), ground,
                                    terrain, model_step, data_step, notes, objects or {})


__all__ = ["CONTACT_MODELS", "PARAMETERS", "ContactModel", "STATUS_NAMES", "CompliantContact",
           "ContactPoints", "Ground", "RigidContact", "make_contact", "make_contact_model",
           "srdf_text", "touching_pairs"]
