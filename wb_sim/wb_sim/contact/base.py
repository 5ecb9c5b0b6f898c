"""What a contact model over the contact surfaces alone answers for the parts of
:class:`~wb_sim.contact.ContactModel` that concern the links' collision (there is
none) and the deepest point (a surface's). The compliant and rigid models inherit it;
:class:`~wb_sim.contact.whole_body.WholeBodyContact` answers them itself."""

from __future__ import annotations

import numpy as np

from ..sensors import ContactPointsReading, SelfContactsReading


def no_collision_points() -> ContactPointsReading:
    """The reading of no collision point (new arrays)."""
    return ContactPointsReading((), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), ())


def no_self_contacts() -> SelfContactsReading:
    """The reading of no self-contact (new arrays)."""
    return SelfContactsReading((), (), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), ())


def gather_rows(rows: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """(3k, nv): of the rows (3, c, nv) of a point set's candidates (component-major), those
    of the candidates ``sel`` (positions among them), component-major: a solve's rows."""
    return rows.take(sel, axis=1).reshape(-1, rows.shape[2])


class SurfaceContact:
    """Mixin of the models that solve a set of points (``self.points``): the contact
    surfaces' when the simulator holds the model itself."""

    #: the links' points against the ground (ground_collision.CollisionPoints), or None
    collision = None
    #: the links against each other (self_collision.SelfCollision), or None
    self_collision = None
    #: (J rows, their impulses or forces, scale) of the last solve, or None: nothing acted;
    #: the rows may be ``(rows, sel)``: :func:`gather_rows`' arguments, gathered when asked
    _generalized = None
    #: the objects the last solve woke: none (a law over the surfaces holds no objects)
    woken = None

    @property
    def surfaces(self):
        """The contact surfaces' points (:class:`~wb_sim.contact.points.ContactPoints`)."""
        return self.points

    @property
    def active(self) -> bool:
        """Whether anything can touch: False lets the simulator skip the solve."""
        return self.points.n > 0

    def deepest(self) -> tuple[str, float]:
        """(what, depth m) of the deepest point at the last solve: "contact surface 'x'"."""
        depth = np.asarray(self.depth)
        worst = int(np.argmax(depth))
        pts = self.points
        return f"contact surface '{pts.surface_names[pts.surface_of_point[worst]]}'", depth[worst]

    def status_kept(self) -> np.ndarray:
        """:attr:`status` for a reader that keeps it and never writes into it (a law that
        replaces its status array each solve hands that array, not a copy)."""
        return self.status

    def generalized_impulse(self) -> np.ndarray | None:
        """(nv,) ``J_c^T p`` of the last solve, N*s: every row it solved (the points' three,
        the torsional spin rows) times its impulse; ``None`` if no impulse acted. Computed
        when asked (nothing per step); valid until the next solve."""
        g = self._generalized
        if g is None:
            return None
        J, p, scale = g
        if type(J) is tuple:  # rows gathered when asked (CompliantContact._stick_candidates)
            J = gather_rows(*J)
        out = J.T.dot(p)
        if scale != 1.0:
            out *= scale
        return out

    def clear_deformation(self) -> None:
        """Nothing to clear: the surfaces' deformation is the simulator's (``u``)."""

    def collision_wrench(self) -> np.ndarray:
        """(6,) the ground's total [force, torque] on the other links: none."""
        return np.zeros(6)

    def collision_points_state(self) -> ContactPointsReading:
        return no_collision_points()

    def self_contacts_state(self) -> SelfContactsReading:
        return no_self_contacts()

    def collision_links(self) -> tuple[str, ...]:
        """The links meeting the ground besides the surfaces: none."""
        return ()

    def link_normal_forces(self) -> np.ndarray:
        """(0,): no link meets the ground besides the surfaces."""
        return np.zeros(0)

    def set_sleeping(self, labels) -> None:
        """No free objects: nothing sleeps."""

    def wake_near(self, v, dt) -> None:
        """No free objects: nothing to wake."""

    def object_contacts(self) -> tuple[np.ndarray, np.ndarray]:
        """No free objects: no pair contact involves one."""
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int)

    def signature(self) -> tuple:
        """((label, value), ...): what a snapshot of this model fits."""
        return (("contact points", self.points.n), ("contact model", self.name))
