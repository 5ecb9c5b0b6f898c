"""The whole-body contact: the contact surfaces, the links against the ground
(:mod:`~wb_sim.contact.ground_collision`) and the links against each other
(:mod:`~wb_sim.contact.self_collision`) as one more contact model.

While no collision point is within the margin, the contact model solves the feet
alone, exactly as without collision. Otherwise a second instance of the same model
solves the feet, the near collision points and the self-contacts together, in one
problem (:class:`MergedPoints` presents them as one point set; the collision points'
rows come after the feet's, the self-contacts' last). The collision points' and the
self-contacts' state (deformation, warm starts, last readings) lives in
:class:`WholeBodyContact`'s snapshot, so ``Simulator.get_state`` / ``set_state``
continue bit-identically.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from ..errors import ConfigError
from ..sensors import ContactPointsReading, SelfContactsReading
from .base import no_collision_points, no_self_contacts
from .compliant import STATUS_NAMES
from .geometry import collision_geometries, geometry_by_link, self_collision_links
from .ground_collision import CollisionPoints
from .points import ContactPoints, Ground
from .self_collision import build_self_collision, carry, to_world

# ----------------------------------------------------------------------------
# The feet and the near collision points as one point set
# ----------------------------------------------------------------------------


class MergedPoints:
    """The contact surfaces' points (first), the collision points (after them) and the
    self-collision slots (last, :attr:`SelfCollision.capacity` of them, with
    ``collision.self_collision``) as the one point set a contact model solves: the
    subset of :class:`ContactPoints`' interface the models use. Collision points outside
    the margin and free self-collision slots have depth -inf (they never enter a solve)
    and no Jacobian rows."""

    def __init__(self, feet: ContactPoints, coll: CollisionPoints, selfc=None):
        self.feet, self.coll, self.selfc = feet, coll, selfc
        self.nf = feet.n
        self.ns0 = feet.n + coll.m  #: the first self-collision slot
        self.ns = selfc.capacity if selfc is not None else 0
        self.n = self.ns0 + self.ns
        self.model = feet.model
        self.nv = feet.nv
        self.joint_ids = next(ids for ids in (feet.joint_ids, coll.joint_ids,
                                              selfc.joint_ids if selfc is not None else [1])
                              if len(ids))
        #: the rigid model's impulse unit is one point's share of the weight: the feet's
        self.reference_count = max(feet.n, 1)
        self.depth = np.full(self.n, -np.inf)
        self._row = np.full(coll.m, -1, dtype=int)
        self._k_self = 0

    def refresh(self) -> None:
        """After the feet's update and the collision and self-collision narrow phases."""
        parts = [self.feet.depth, self.coll.depth]
        if self.selfc is not None:
            parts.append(self.selfc.slot_depth)
            self._k_self = self.selfc.k
        self.depth = np.concatenate(parts)
        self._row = np.full(self.coll.m, -1, dtype=int)
        self._row[self.coll.candidates] = np.arange(len(self.coll.candidates))

    def normal_velocity(self, v: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n)
        if self.nf:
            out[:self.nf] = self.feet.normal_velocity(v)
        out[self.nf + self.coll.candidates] = self.coll.J_cm[2].dot(v)
        if self._k_self:
            out[self.ns0:self.ns0 + self._k_self] = self.selfc.J_cm[2].dot(v)
        return out

    def jacobian_component_major(self, idx: np.ndarray | None = None) -> np.ndarray:
        """(3k, nv) rows t1 of all, t2 of all, n of all, for the points ``idx`` (sorted;
        collision points among them must be within the margin, self-collision slots in
        use); for all points (``None``, the plain references' call) the rows of the
        others are zero."""
        if idx is None:
            J = np.zeros((3, self.n, self.nv))
            if self.nf:
                J[:, :self.nf] = self.feet.jacobian_component_major(
                    np.arange(self.nf)).reshape(3, self.nf, self.nv)
            J[:, self.nf + self.coll.candidates] = self.coll.J_cm
            if self._k_self:
                J[:, self.ns0:self.ns0 + self._k_self] = self.selfc.J_cm
            return J.reshape(-1, self.nv)
        idx = np.asarray(idx)
        f = idx[idx < self.nf]
        c = self._row[idx[(idx >= self.nf) & (idx < self.ns0)] - self.nf]
        if np.any(c < 0):
            raise AssertionError("a collision point outside the margin entered the solve")
        blocks = [self.feet.jacobian_component_major(f).reshape(3, len(f), self.nv),
                  self.coll.J_cm[:, c]]
        if self.ns:
            sl = idx[idx >= self.ns0] - self.ns0
            if np.any(sl >= self._k_self):
                raise AssertionError("a free self-collision slot entered the solve")
            blocks.append(self.selfc.J_cm[:, sl])
        return np.concatenate(blocks, axis=1).reshape(-1, self.nv)

    def torsion_jacobian(self, idx: np.ndarray | None = None) -> np.ndarray:
        """(k, nv) the spin rows of the points ``idx`` (default: all): the contact
        surfaces' (:meth:`ContactPoints.torsion_jacobian`); zero for the collision
        points and self-contacts, which have no torsional friction."""
        idx = np.arange(self.n) if idx is None else np.asarray(idx)
        out = np.zeros((len(idx), self.nv))
        feet = idx < self.nf
        if feet.any():
            out[feet] = self.feet.torsion_jacobian(idx[feet])
        return out

    def jacobian_g(self, idx: np.ndarray | None = None) -> np.ndarray:
        """(3k, nv) the same rows point-major (t1, t2, n per point)."""
        J = self.jacobian_component_major(idx)
        k = J.shape[0] // 3
        return J.reshape(3, k, self.nv).transpose(1, 0, 2).reshape(-1, self.nv)


# ----------------------------------------------------------------------------
# The contact model with collision
# ----------------------------------------------------------------------------


class WholeBodyContact:
    """The contact model the simulator talks to with ``collision.enabled`` or
    ``collision.self_collision``: the feet's model (``feet``) while no collision point
    and no pair of self-collision spheres is within the margin, else a second instance
    (``merged``) over :class:`MergedPoints`. Its interface is the
    :class:`~wb_sim.contact.ContactModel` one for the contact surfaces' points (depth,
    status, forces and state are theirs), plus the collision points' and the
    self-contacts' readings."""

    def __init__(self, feet_model, merged_model, collision: CollisionPoints | None,
                 merged_points: MergedPoints, data: pin.Data, self_collision=None):
        self.feet, self.merged = feet_model, merged_model
        #: the links' points against the ground (collision.enabled), or None
        self.collision = collision
        #: the links against each other (collision.self_collision), or None
        self.self_collision = self_collision
        self.points = merged_points
        self._coll = merged_points.coll  # without collision.enabled: no geometry, never near
        #: the contact surfaces' points
        self.surfaces = merged_points.feet
        #: there is always something that may touch: a link if not a foot
        self.active = True
        self._data = data
        self.name = feet_model.name
        self.PARAMETERS = feet_model.PARAMETERS
        self.LIVE_PARAMETERS = feet_model.LIVE_PARAMETERS
        self.max_penetration = feet_model.max_penetration
        self.nf = merged_points.nf
        self.initial_state()

    # -- state
    def initial_state(self) -> np.ndarray:
        u = self.feet.initial_state()
        self.merged.initial_state()
        self._merged_last = False
        self._uc = np.zeros((2, self._coll.m))
        self._contacts = _NO_CONTACTS
        self._self = _NO_SELF
        return u

    def clear_deformation(self) -> None:
        """The collision points' ground deformation and the self-contacts' deformation
        back to zero (the readings stay): a reset's trial step must not leave its
        deformation, as the feet's is dropped."""
        self._uc = np.zeros((2, self._coll.m))
        self.feet.clear_deformation()  # the twist the models keep (torsional friction)
        self.merged.clear_deformation()
        if self._self is not _NO_SELF:
            ids, _, ws_t, ws_rest, readings = self._self
            self._self = (ids, np.zeros((len(ids), 3)), ws_t, ws_rest, readings)

    def snapshot(self) -> tuple:
        return (self.feet.snapshot(), self.merged.snapshot(), self._merged_last, self._uc,
                self._contacts, self._self)

    def restore(self, snap: tuple) -> None:
        feet, merged, self._merged_last, self._uc, self._contacts, self._self = snap
        self.feet.restore(feet)
        self.merged.restore(merged)

    # -- readings of the contact surfaces
    @property
    def _last(self):
        return self.merged if self._merged_last else self.feet

    @property
    def depth(self) -> np.ndarray:
        return self._last.depth[:self.nf]

    @property
    def status(self) -> np.ndarray:
        return self._last.status[:self.nf]

    @property
    def max_depth(self) -> float:
        return self._last.max_depth if (self.nf or self._merged_last) else -math.inf

    def deepest(self) -> tuple[str, float]:
        """(what: "contact surface 'x'", "link 'y'" or "links 'a' and 'b'", depth m) of
        the deepest point."""
        depth = np.asarray(self._last.depth)
        worst = int(np.argmax(depth))
        if worst < self.nf:
            feet = self.surfaces
            return (f"contact surface '{feet.surface_names[feet.surface_of_point[worst]]}'",
                    depth[worst])
        if worst < self.points.ns0:
            g = self._coll.point_geometry[worst - self.nf]
            return f"link '{self._coll.link_names[g]}'", depth[worst]
        slot = worst - self.points.ns0
        a, b = self.self_collision.pair_links()
        return f"links '{a[slot]}' and '{b[slot]}' (self-collision)", depth[worst]

    def parameters(self) -> dict:
        return self.feet.parameters()

    def set_parameters(self, **values) -> None:
        self.feet.set_parameters(**values)  # checked here first: nothing changes on an error
        self.merged.set_parameters(**values)

    def resolution_note(self, delassus, weight, dt):
        return self.feet.resolution_note(delassus, weight, dt)

    def statistics(self) -> dict:
        out = dict(self.feet.statistics())
        for key, value in self.merged.statistics().items():
            if key in ("solves", "nonconverged", "active_set_solves"):
                out[key] = out.get(key, 0) + value
            out[f"collision_{key}"] = value
        if self.self_collision is not None:
            sc = self.self_collision
            #: steps that ran the self-collision phases (the others: its quiet test), and
            #: sphere pairs left out of a full problem (SELF_CAPACITY)
            out["self_collision_checks"] = sc.checked_steps
            out["self_contacts_dropped"] = sc.dropped
        return out

    # -- the step
    def solve(self, Minv_upper, v_free, u, dt):
        coll, selfc, data = self._coll, self.self_collision, self._data
        ground = coll.any_near(data) and coll.narrow(data)
        touch = selfc is not None and selfc.contacts(data, v_free, dt,
                                                     self.merged.activation_margin, self._self[0])
        if not (ground or touch):
            if self._merged_last:  # hand the warm start back
                self.feet.set_warm_start(self.merged.warm_start()[:self.nf])
                self._merged_last = False
            if self._contacts is not _NO_CONTACTS:
                self._contacts = _NO_CONTACTS
                self._uc = np.zeros((2, coll.m))
            self._self = _NO_SELF
            if not self.nf:
                return v_free, np.zeros((0, 3)), u
            return self.feet.solve(Minv_upper, v_free, u, dt)
        if not ground:
            coll.clear()  # the last narrow phase's candidates are not this step's
        if not touch and selfc is not None:
            selfc.clear()
        pts = self.points
        pts.refresh()
        if not self._merged_last:
            self.merged.set_warm_start(self.feet.warm_start())
            self._merged_last = True
        parts = [u, self._uc]
        if pts.ns:
            parts.append(self._self_before(selfc))
        v_next, force, u_next = self.merged.solve(Minv_upper, v_free,
                                                  np.concatenate(parts, axis=1), dt)
        nf, s0 = self.nf, pts.ns0
        self._uc = u_next[:, nf:s0]
        cand = coll.candidates
        fc = force[nf + cand]
        self._contacts = (cand, coll.position.copy(), coll.world_forces(fc),
                          coll.depth[cand].copy(), np.asarray(self.merged.status)[nf + cand])
        if pts.ns:
            self._self_after(selfc, u_next[:, s0:s0 + selfc.k], force[s0:s0 + selfc.k])
        return v_next, force[:nf], u_next[:, :nf]

    def _self_before(self, selfc) -> np.ndarray:
        """(2, capacity) the self-contacts' tangential deformation for this step's slots,
        and their warm start set in ``merged``: each contact's from the last step (by
        its identity, turned onto its new tangent plane), zeros for new ones."""
        k, s0 = selfc.k, self.points.ns0
        ids, u_world, ws_t, ws_rest, _ = self._self
        both = carry(ids, np.stack([u_world, ws_t], axis=1), selfc.ids, selfc.bases)
        out = np.zeros((2, selfc.capacity))
        out[:, :k] = both[:, 0].T
        warm = np.array(self.merged.warm_start(), dtype=float)
        rows = warm[s0:]
        rows[...] = 0.0
        rows[:k, :2] = both[:, 1]
        if ws_rest.shape[1] and len(ids) and k:  # the rigid model's normal impulses
            pos = np.minimum(np.searchsorted(ids, selfc.ids), len(ids) - 1)
            match = ids[pos] == selfc.ids
            rows[:k, 2:][match] = ws_rest[pos[match]]
        self.merged.set_warm_start(warm)
        return out

    def _self_after(self, selfc, u_slots: np.ndarray, force: np.ndarray) -> None:
        """Keep the self-contacts' deformation and warm start by identity, in world
        axes, and their readings."""
        k = selfc.k
        if not k:
            self._self = _NO_SELF
            return
        s0 = self.points.ns0
        warm = np.asarray(self.merged.warm_start())[s0:s0 + k]
        status = np.asarray(self.merged.status)[s0:s0 + k]
        links = selfc.pair_links()
        readings = (links[0], links[1], selfc.position.copy(), selfc.world_forces(force),
                    selfc.depth.copy(), status)
        self._self = (selfc.ids, to_world(u_slots.T, selfc.bases),
                      to_world(warm[:, :2], selfc.bases), warm[:, 2:].copy(), readings)

    # -- readings of the collision points
    def contacts(self) -> tuple:
        """(point indices, world positions (k, 3), world forces (k, 3), depths (k,),
        status codes (k,)) of the collision points within the margin at the last step."""
        return self._contacts

    def collision_points_state(self) -> ContactPointsReading:
        """The collision points within the margin at the last step, as a reading: link
        name (in ``surface``), world contact point, world force, depth, stick/slip."""
        if self.collision is None:
            return no_collision_points()
        idx, pos, force, depth, status = self._contacts
        coll = self.collision
        return ContactPointsReading(
            surface=tuple(coll.link_names[coll.point_geometry[i]] for i in idx),
            position=pos.copy(), force=force.copy(), depth=depth.copy(),
            status=tuple(STATUS_NAMES[s] for s in status))

    def self_contacts_state(self) -> SelfContactsReading:
        """The self-collision sphere pairs within the margin at the last step: the two
        links, the world contact point, the world force on the first link (the second
        gets the opposite), the depth and the stick/slip state."""
        if self.self_collision is None:
            return no_self_contacts()
        a, b, pos, force, depth, status = self._self[4]
        return SelfContactsReading(link_a=a, link_b=b, position=pos.copy(), force=force.copy(),
                                   depth=depth.copy(),
                                   status=tuple(STATUS_NAMES[s] for s in status))

    def signature(self) -> tuple:
        """((label, value), ...): what a snapshot of this model fits."""
        sc = self.self_collision
        return (*self.feet.signature(),
                ("collision points (collision.*)", 0 if self.collision is None else self._coll.m),
                ("self-collision spheres and pairs (collision.self_collision)",
                 None if sc is None else (sc.s, len(sc.pa))))

    def collision_wrench(self) -> np.ndarray:
        """(6,) total [force, torque] of the ground on the collision points at the last
        step, world axes, torque about the world origin."""
        _, pos, f, _, _ = self._contacts
        out = np.zeros(6)
        if len(f):
            out[:3] = f.sum(axis=0)
            out[3:] = np.cross(pos, f).sum(axis=0)
        return out


_NO_CONTACTS = (np.zeros(0, dtype=int), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0),
                np.zeros(0, dtype=np.int8))
#: no self-contact: (ids, deformation, warm start (tangential, world; the rest), readings)
_NO_SELF = (np.zeros(0, dtype=np.int64), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 0)),
            ((), (), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros(0, dtype=np.int8)))


def build_whole_body_contact(robot, surfaces, cfg, feet_model, make_model, ground: Ground,
                             terrain, model_step: pin.Model, data_step: pin.Data,
                             notes: list[str]) -> WholeBodyContact:
    """The :class:`WholeBodyContact` of a configuration with ``collision.enabled`` or
    ``collision.self_collision`` (``cfg``: the ``collision`` group; ``surfaces``: the
    contact surfaces' groups). ``make_model(points)``: a contact model of the configured
    kind over ``points``; ``notes`` gets what the build wants said once."""
    gmodel, by_link = geometry_by_link(robot, cfg)  # gmodel keeps the objects alive
    geometries = []
    if cfg.enabled:
        surface_joints = {int(robot.model.frames[robot.frame_id(s.frame, key=f"{s.name}.frame")]
                              .parentJoint) for s in surfaces}
        geometries = collision_geometries(robot, cfg, surface_joints, by_link)
        if not geometries:
            raise ConfigError("parameter 'collision.enabled': no link of the robot has "
                              "<collision> geometry left to collide (check collision.links / "
                              "collision.exclude_links, or set collision.enabled: false)")
    selfc = None
    if cfg.self_collision:
        selfc = build_self_collision(model_step, robot.model, self_collision_links(cfg, by_link),
                                     cfg, notes, robot.floating_base)
    del gmodel
    coll = CollisionPoints(model_step, geometries, ground, terrain, cfg.margin)
    merged_points = MergedPoints(feet_model.points, coll, selfc)
    return WholeBodyContact(feet_model, make_model(merged_points), coll if cfg.enabled else None,
                            merged_points, data_step, selfc)
