"""The whole-body contact: the contact surfaces, the links against the ground
(:mod:`~wb_sim.contact.ground_collision`: the primitives' slots, and the pairs against the
terrain's boxes and of the meshes) and the links against each other
(:mod:`~wb_sim.contact.self_collision`) as one more contact model.

While no collision point is within the margin, the contact model solves the feet
alone, exactly as without collision. Otherwise a second instance of the same model
solves the feet, the near collision points and the contacts of the pairs together, in
one problem (:class:`MergedPoints` presents them as one point set: the feet's rows first,
then the slots', then each *block* of pair contacts: the terrain's, then the
self-contacts'). A slot's state (its tangential deformation) is kept by its index; a
block's contacts come and go, and their deformation and warm start follow each by its
identity, carried in world axes and turned onto its new tangent plane. All of it lives
in :class:`WholeBodyContact`'s snapshot, so ``Simulator.get_state`` / ``set_state``
continue bit-identically.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pinocchio as pin

from ..errors import ConfigError
from ..sensors import ContactPointsReading, SelfContactsReading
from .base import gather_rows, no_collision_points, no_self_contacts
from .compliant import STATUS_NAMES
from .geometry import (collision_geometries, geometry_by_link, link_geometry,
                       self_collision_links)
from .ground_collision import CollisionPoints, TerrainContacts
from .points import ContactPoints, Ground
from .self_collision import build_self_collision, carry, to_world

# ----------------------------------------------------------------------------
# The feet and the near collision points as one point set
# ----------------------------------------------------------------------------


class MergedPoints:
    """The contact surfaces' points (first), the collision slots (after them) and the
    slots of the blocks of pair contacts (last, each block's ``capacity``: the terrain
    pairs', then the self-contacts') as the one point set a contact model solves: the
    subset of :class:`ContactPoints`' interface the models use. Slots outside the margin
    and free block slots have depth -inf (they never enter a solve) and no Jacobian
    rows."""

    def __init__(self, feet: ContactPoints, coll: CollisionPoints, blocks=()):
        self.feet, self.coll = feet, coll
        self.blocks = [b for b in blocks if b is not None]
        self.nf = feet.n
        self.ns0 = feet.n + coll.m  #: the first block slot
        starts, at = [], self.ns0
        for b in self.blocks:
            starts.append(at)
            at += b.capacity
        self.starts = starts  #: the first slot of each block
        self.ns = at - self.ns0
        self.n = at
        self.model = feet.model
        self.nv = feet.nv
        self.joint_ids = next(ids for ids in (feet.joint_ids, coll.joint_ids,
                                              *(b.joint_ids for b in self.blocks), [1])
                              if len(ids))
        #: the rigid model's impulse unit is one point's share of the weight: the feet's
        self.reference_count = max(feet.n, 1)
        self.depth = np.full(self.n, -np.inf)
        self._ks = [0] * len(self.blocks)
        self._rows = np.zeros((3, 0, self.nv))  # (refresh's: no point has rows yet)
        self._index = np.zeros(0, dtype=np.intp)
        self._feet_index = np.arange(self.nf)
        self._row_of = None  # each point's row (-1: none), formed when first asked

    def refresh(self) -> None:
        """After the feet's update and the narrow phases: the depths of all points, and
        the rows of those that can enter a solve (the feet's, the collision candidates',
        the blocks' slots in use) gathered in one (3, r, nv) array, component-major, and
        the point of each row (:attr:`candidates`), so that a solve's rows are one gather."""
        coll = self.coll
        if not self.blocks and coll.joined is not None:  # the feet placed first this step
            self.depth, self._rows, self._index = coll.joined
            self._row_of = None
            return
        if not self.blocks:  # the feet and the collision points alone: three joins
            self.depth = np.concatenate((self.feet.depth, coll.depth))
            self._rows = np.concatenate((self.feet.jacobian_component_major().reshape(
                3, self.nf, self.nv), coll.J_cm), axis=1)
            self._index = np.concatenate((self._feet_index, coll.candidates + self.nf))
            self._row_of = None
            return
        self.depth = np.concatenate([self.feet.depth, coll.depth,
                                     *(b.slot_depth for b in self.blocks)])
        self._ks = [b.k for b in self.blocks]
        parts = [self.feet.jacobian_component_major().reshape(3, self.nf, self.nv), coll.J_cm]
        index = [self._feet_index, self.nf + coll.candidates]
        for b, start, k in zip(self.blocks, self.starts, self._ks):
            if k:
                parts.append(b.J_cm)
                index.append(np.arange(start, start + k))
        self._rows = np.concatenate(parts, axis=1)
        self._index = np.concatenate(index)  # the point of each row
        self._row_of = None

    @property
    def candidates(self) -> np.ndarray:
        """(c,) sorted: the points that can enter a solve (the feet, the collision slots
        within the margin, the block slots in use: those with rows); the others' depth is
        -inf (:meth:`refresh`)."""
        return self._index

    @property
    def candidate_rows(self) -> np.ndarray:
        """(3, c, nv) the :attr:`candidates`' Jacobian rows, component-major (a new array
        each :meth:`refresh`)."""
        return self._rows

    def candidate_normal_velocity(self, v: np.ndarray) -> np.ndarray:
        """(c,) :meth:`normal_velocity` of the :attr:`candidates`."""
        return self._rows[2].dot(v)

    def candidate_jacobian(self, sel: np.ndarray) -> np.ndarray:
        """:meth:`jacobian_component_major` of the candidates ``sel`` (positions in
        :attr:`candidates`, sorted)."""
        return gather_rows(self._rows, sel)

    def normal_velocity(self, v: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n)
        out[self._index] = self.candidate_normal_velocity(v)
        return out

    def jacobian_component_major(self, idx: np.ndarray | None = None) -> np.ndarray:
        """(3k, nv) rows t1 of all, t2 of all, n of all, for the points ``idx`` (sorted;
        slots among them must be within the margin, block slots in use); for all points
        (``None``, the plain references' call) the rows of the others are zero."""
        if idx is None:
            J = np.zeros((3, self.n, self.nv))
            J[:, self._index] = self._rows
            return J.reshape(-1, self.nv)
        if self._row_of is None:  # the compliant model's solve reads the candidates instead
            self._row_of = np.full(self.n, -1, dtype=np.intp)
            self._row_of[self._index] = np.arange(len(self._index))
        rows = self._row_of.take(idx)
        if len(rows) and rows.min() < 0:
            raise AssertionError("a collision point outside the margin or a free block slot "
                                 "entered the solve")
        return self._rows.take(rows, axis=1).reshape(-1, self.nv)

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


class FirstColumns:
    """A point set's rows over its first ``nv`` velocities only: the robot's, while every
    free object sleeps (the objects' columns of every row in the solve are then zero, and
    their velocities are held at zero). The rest of the point set reads through."""

    #: the candidates' shortcuts read all columns: the solve here takes the general path
    candidates = None

    def __init__(self, points, nv: int):
        self._points, self.nv = points, nv

    def __getattr__(self, name):
        return getattr(self._points, name)

    def jacobian_component_major(self, idx=None) -> np.ndarray:
        return self._points.jacobian_component_major(idx)[:, :self.nv]

    def jacobian_g(self, idx=None) -> np.ndarray:
        return self._points.jacobian_g(idx)[:, :self.nv]

    def torsion_jacobian(self, idx=None) -> np.ndarray:
        return self._points.torsion_jacobian(idx)[:, :self.nv]

    def normal_velocity(self, v: np.ndarray) -> np.ndarray:
        full = np.zeros(self._points.nv)
        full[:self.nv] = v
        return self._points.normal_velocity(full)


def _solve_first_columns(law, Minv_upper, v_free, u, dt):
    """``law.solve`` over its points' first ``len(v_free)`` velocities (FirstColumns)."""
    points = law.points
    law.points = FirstColumns(points, len(v_free))
    try:
        return law.solve(Minv_upper, v_free, u, dt)
    finally:
        law.points = points


# ----------------------------------------------------------------------------
# The contact model with collision
# ----------------------------------------------------------------------------


class WholeBodyContact:
    """The contact model the simulator talks to with ``collision.enabled`` or
    ``collision.self_collision``: the feet's model (``feet``) while no collision point,
    no terrain pair and no self-collision pair is within the margin, else a second
    instance (``merged``) over :class:`MergedPoints`. Its interface is the
    :class:`~wb_sim.contact.ContactModel` one for the contact surfaces' points (depth,
    status, forces and state are theirs), plus the collision points' and the
    self-contacts' readings."""

    #: the free objects' names (their geometries are among the ground collision's; the
    #: robot's readings leave them out)
    object_names: frozenset = frozenset()
    #: after :meth:`solve`: (n objects,) bool, the objects woken because an awake body
    #: came within the margin of their island; None: none woke
    woken: np.ndarray | None = None

    def __init__(self, feet_model, merged_model, collision: CollisionPoints | None,
                 merged_points: MergedPoints, data: pin.Data, self_collision=None,
                 terrain_contacts: TerrainContacts | None = None):
        self.feet, self.merged = feet_model, merged_model
        #: the links' slots against the ground (collision.enabled), or None
        self.collision = collision
        #: the links' pairs against the terrain boxes, the meshes', or None
        self.terrain_contacts = terrain_contacts
        #: the links against each other (collision.self_collision), or None
        self.self_collision = self_collision
        self.points = merged_points
        self._coll = merged_points.coll  # without collision.enabled: no geometry, never near
        self._blocks = merged_points.blocks
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
        #: the feet and the ground's collision points alone (no pair blocks): solve's lines
        #: for them in :meth:`_solve_plane` while no object sleeps
        self._plane_only = terrain_contacts is None and self_collision is None and \
            not self._blocks
        #: (u_next, (its feet's columns, its slots')) of _solve_plane's last merged solve
        self._u_last = (None, (None, None))
        self.set_objects(())
        self.initial_state()

    # -- sleeping free objects (the Simulator's objects.sleep)
    def set_objects(self, names: tuple) -> None:
        """The free objects' names in the simulator's order: each geometry's object
        (its index, -1: a robot's link) for :meth:`set_sleeping` and
        :meth:`object_contacts`."""
        index = {n: i for i, n in enumerate(names)}
        self._coll_obj = np.array([index.get(n, -1) for n in self._coll.link_names], dtype=int)
        sc = self.self_collision
        self._self_obj = np.zeros(0, dtype=int) if sc is None else \
            np.array([index.get(n, -1) for n in sc.link_names], dtype=int)
        #: an object among the pair geometries (else the pairs are a robot's links' alone,
        #: self-collision without objects, and no step records which objects touched)
        self._pairs_have_objects = bool((self._self_obj >= 0).any())
        self._labels = None  # (n,) island label of each sleeping object, -1 awake
        self._sleep_key = None
        self._self_asleep = None
        self._touch = (np.zeros(0, dtype=int), np.zeros(0, dtype=int))

    def set_sleeping(self, labels: np.ndarray | None) -> None:
        """The islands asleep for the next solves: ``labels`` (n objects,) each sleeping
        object's island label (>= 0), -1 for an awake one (None: all awake). A sleeping
        object's geometry meets neither the ground, the terrain nor another sleeping
        object; a pair with an awake body within the margin wakes its island
        (:attr:`woken`)."""
        self.woken = None
        key = None if labels is None or not (labels >= 0).any() else labels.tobytes()
        if key != self._sleep_key:
            self._apply_sleep(None if key is None else labels)
        self._sleep_key = key

    def _apply_sleep(self, labels: np.ndarray | None) -> None:
        tc, sc = self.terrain_contacts, self.self_collision
        self._labels = labels
        if labels is None:
            self._coll_awake = self._self_asleep = None
            if tc is not None:
                tc.awake = None
            if sc is not None:
                sc.asleep_pairs = None
            return
        asleep = np.append(labels >= 0, False)  # index -1: a robot's link, awake
        self._coll_awake = ~asleep[self._coll_obj]
        if tc is not None:
            tc.awake = self._coll_awake
        if sc is not None:
            ga = self._self_asleep = asleep[self._self_obj]
            sc.asleep_pairs = ga[sc.pa] & ga[sc.pb]

    def wake_near(self, v: np.ndarray, dt: float) -> np.ndarray | None:
        """The proximity wake alone (:meth:`solve` runs it first), at the placements the
        step's dynamics left and the velocity ``v`` (nv,): :attr:`woken`."""
        if self._labels is not None:
            self._wake_near(self._data, v, dt)
        return self.woken

    def _wake_near(self, data, v, dt) -> None:
        """Wake every sleeping island a shape of an awake body (a link, an awake object) is
        within the margin of touching (the pairs' broad and narrow phases), until none is;
        :attr:`woken` says which."""
        sc = self.self_collision
        if sc is None or sc.quiet_now(data, v, dt):
            return
        close = sc.close_pairs(data)
        labels = self._labels
        woken = np.zeros(len(labels), dtype=bool)
        while labels is not None:
            ga = self._self_asleep
            one = np.flatnonzero(close & (ga[sc.pa] != ga[sc.pb]))
            if not len(one):
                break
            a, b = sc.near_geometries(data, one)
            mixed = ga[a] != ga[b]
            if not mixed.any():
                break
            a, b = a[mixed], b[mixed]
            hit = np.where(ga[a], self._self_obj[a], self._self_obj[b])
            island = np.isin(labels, labels[hit])
            woken |= island
            labels = labels.copy()
            labels[island] = -1
            self._apply_sleep(labels if (labels >= 0).any() else None)
            labels = self._labels
        if woken.any():
            self.woken = woken if self.woken is None else (self.woken | woken)
            self._sleep_key = None if labels is None else labels.tobytes()

    def object_contacts(self) -> tuple[np.ndarray, np.ndarray]:
        """(a, b): the pairs of the last solve's pair contacts that involve a free
        object, each side an object's index or -1 (a robot's link)."""
        return self._touch

    # -- state
    def initial_state(self) -> np.ndarray:
        u = self.feet.initial_state()
        self.merged.initial_state()
        self._merged_last = False
        self._uc = np.zeros((2, self._coll.m))
        self._contacts = _NO_CONTACTS
        self._dyn = tuple(_NO_BLOCK for _ in self._blocks)
        return u

    def clear_deformation(self) -> None:
        """The collision points' ground deformation and the pair contacts' deformation
        back to zero (the readings stay): a reset's trial step must not leave its
        deformation, as the feet's is dropped."""
        self._uc = np.zeros((2, self._coll.m))
        self._dyn = tuple(st if st is _NO_BLOCK else
                          (st[0], np.zeros((len(st[0]), 3)), *st[2:]) for st in self._dyn)
        self.feet.clear_deformation()  # the twist the models keep (torsional friction)
        self.merged.clear_deformation()

    def snapshot(self) -> tuple:
        return (self.feet.snapshot(), self.merged.snapshot(), self._merged_last, self._uc,
                self._contacts, self._dyn)

    def restore(self, snap: tuple) -> None:
        feet, merged, self._merged_last, self._uc, self._contacts, self._dyn = snap
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
            return f"link '{self._coll.links([worst - self.nf])[0]}'", depth[worst]
        for block, start in zip(self._blocks, self.points.starts):
            if start <= worst < start + block.capacity:
                slot = worst - start
                if block is self.self_collision:
                    a, b = block.pair_links()
                    return f"links '{a[slot]}' and '{b[slot]}' (self-collision)", depth[worst]
                return f"link '{block.links()[slot]}'", depth[worst]
        return "?", depth[worst]

    def parameters(self) -> dict:
        return self.feet.parameters()

    def set_parameters(self, **values) -> None:
        self.feet.set_parameters(**values)  # checked here first: nothing changes on an error
        self.merged.set_parameters(**values)

    def resolution_note(self, delassus, weight, dt):
        return self.feet.resolution_note(delassus, weight, dt)

    def solver_health(self, residual: bool = True) -> dict[str, float]:
        """The last solve's residual and impulse energy (the feet's alone, or the merged
        problem's); the counters of both instances summed."""
        out = dict(self._last.solver_health(residual))
        other = (self.feet if self._merged_last else self.merged).solver_health(False)
        for key in ("solves", "nonconverged", "iterations"):
            if key in out:
                out[key] += other[key]
        return out

    def statistics(self) -> dict:
        out = dict(self.feet.statistics())
        for key, value in self.merged.statistics().items():
            if key in ("solves", "nonconverged", "active_set_solves"):
                out[key] = out.get(key, 0) + value
            out[f"collision_{key}"] = value
        if self.terrain_contacts is not None:
            #: terrain-pair contacts left out of a full problem (TERRAIN_CAPACITY)
            out["terrain_contacts_dropped"] = self.terrain_contacts.dropped
        if self.self_collision is not None:
            sc = self.self_collision
            #: steps that ran the self-collision phases (the others: its quiet test), and
            #: sphere pairs left out of a full problem (SELF_CAPACITY)
            out["self_collision_checks"] = sc.checked_steps
            out["self_contacts_dropped"] = sc.dropped
        return out

    # -- the step
    def solve(self, Minv_upper, v_free, u, dt):
        """The ContactModel's; ``Minv_upper`` and ``v_free`` may cover the first velocities
        only (the robot's, while every free object sleeps and :meth:`wake_near` woke none:
        the phases then see the objects at rest, the laws the robot's columns)."""
        if self._plane_only and self._labels is None and len(v_free) == self.points.nv:
            return self._solve_plane(Minv_upper, v_free, u, dt)
        coll, selfc, data = self._coll, self.self_collision, self._data
        tc = self.terrain_contacts
        reduced = len(v_free) != self.points.nv
        v_law = v_free
        if reduced:
            v_free = np.zeros(self.points.nv)
            v_free[:len(v_law)] = v_law
        elif self._labels is not None:
            self._wake_near(data, v_free, dt)
        if self._labels is None:
            near, ground = coll.near_and_narrow(data)
        else:
            near = coll.any_near(data)
            if near:
                coll.near &= self._coll_awake
                near = bool(coll.near.any())
            ground = near and coll.narrow(data)
        terrain = tc is not None and tc.contacts(data, coll.near if near else None)
        held = self._dyn[-1][0] if selfc is not None else None
        touch = selfc is not None and selfc.contacts(data, v_free, dt,
                                                     self.merged.activation_margin, held)
        if touch and self._pairs_have_objects:
            g = selfc.sphere_geometry
            self._touch = (self._self_obj[g[selfc.sphere_a]], self._self_obj[g[selfc.sphere_b]])
        elif len(self._touch[0]):
            self._touch = (np.zeros(0, dtype=int), np.zeros(0, dtype=int))
        if not (ground or terrain or touch):
            self._leave_merged()
            self._dyn = tuple(_NO_BLOCK for _ in self._blocks)
            if not self.nf:
                return v_law, np.zeros((0, 3)), u
            if reduced:
                return _solve_first_columns(self.feet, Minv_upper, v_law, u, dt)
            return self.feet.solve(Minv_upper, v_free, u, dt)
        if not ground:
            coll.clear()  # the last narrow phase's candidates are not this step's
        if tc is not None and not terrain:
            tc.clear()
        if selfc is not None and not touch:
            selfc.clear()
        pts = self.points
        pts.refresh()
        self._enter_merged()
        parts = [u, self._uc, *self._blocks_before()]
        if reduced:
            v_next, force, u_next = _solve_first_columns(self.merged, Minv_upper, v_law,
                                                         np.concatenate(parts, axis=1), dt)
        else:
            v_next, force, u_next = self.merged.solve(Minv_upper, v_free,
                                                      np.concatenate(parts, axis=1), dt)
        nf, s0 = self.nf, pts.ns0
        self._uc = u_next[:, nf:s0]
        status = self.merged.status_kept()  # read, never written
        readings = _Readings(coll, coll.candidates, coll.position, coll.depth, coll.bases,
                             force, status, nf)
        if tc is not None and tc.k:  # the terrain's contacts after the collision points'
            sl = slice(pts.starts[0], pts.starts[0] + tc.k)
            parts = zip(readings.arrays(), (tc.geometry, tc.position, tc.world_forces(force[sl]),
                                            tc.depth, status[sl], force[sl, 2]))
            readings = tuple(np.concatenate(two) for two in parts)
        self._contacts = readings  # a _Readings forms the arrays when they are first read
        self._blocks_after(u_next, force)
        return v_next, force[:nf], u_next[:, :nf]

    def _leave_merged(self) -> None:
        """Nothing but the feet touches: the warm start back to the feet's model, and no
        collision contacts."""
        if self._merged_last:
            self.feet.set_warm_start(self.merged.warm_start()[:self.nf])
            self._merged_last = False
        if self._contacts is not _NO_CONTACTS:
            self._contacts = _NO_CONTACTS
            self._uc = np.zeros((2, self._coll.m))

    def _enter_merged(self) -> None:
        """A collision point touches: the merged model starts from the feet's warm start."""
        if not self._merged_last:
            self.merged.set_warm_start(self.feet.warm_start())
            self._merged_last = True

    def _solve_plane(self, Minv_upper, v_free, u, dt):
        """:meth:`solve`'s lines for the feet and the ground's collision points alone (no
        terrain pairs, no self-collision, no sleeping objects): the same results and state,
        without the lines of the blocks (the lying humanoid's step, issue 33)."""
        coll, feet = self._coll, self.surfaces
        _, ground = coll.near_and_narrow(self._data, (feet.depth, feet.jacobian_component_major()))
        if not ground:
            self._leave_merged()
            if not self.nf:
                return v_free, np.zeros((0, 3)), u
            return self.feet.solve(Minv_upper, v_free, u, dt)
        self.points.refresh()
        merged = self.merged
        self._enter_merged()
        # every point's deformation: the feet's u, then the slots'. Where u and _uc are the two
        # halves this method returned of the last merged solve's u_next (the step before was
        # merged, nothing restored between), that array is their join
        full, views = self._u_last
        if u is not views[0] or self._uc is not views[1]:
            full = np.concatenate((u, self._uc), axis=1)
        v_next, force, u_next = merged.solve(Minv_upper, v_free, full, dt)
        nf = self.nf
        u_feet, self._uc = u_next[:, :nf], u_next[:, nf:]
        self._u_last = (u_next, (u_feet, self._uc))
        self._contacts = _Readings(coll, coll.candidates, coll.position, coll.depth, coll.bases,
                                   force, merged.status_kept(), nf)
        return v_next, force[:nf], u_feet

    def generalized_impulse(self) -> np.ndarray | None:
        """(nv,) ``J_c^T p`` of the last solve, N*s: the feet's alone, or the merged
        problem's (surfaces, ground and terrain collision points, self-contacts, objects);
        ``None`` if no impulse acted."""
        if not (self._merged_last or self.nf):
            return None
        return self._last.generalized_impulse()

    def _blocks_before(self) -> list[np.ndarray]:
        """(2, capacity) per block: its contacts' tangential deformation for this step's
        slots, and their warm start set in ``merged``: each contact's from the last step
        (by its identity, turned onto its new tangent plane), zeros for new ones. Without
        blocks the merged model's own warm start stays as its last solve left it (a round
        trip through set_warm_start would drop the compliant model's slip compliances and
        the rigid one's spin: their solvers' start, which the feet-alone model keeps)."""
        if not self._blocks:
            return []
        warm = np.array(self.merged.warm_start(), dtype=float)
        out = []
        for block, start, st in zip(self._blocks, self.points.starts, self._dyn):
            k = block.k
            ids, u_world, ws_t, ws_rest, _ = st
            both = carry(ids, np.stack([u_world, ws_t], axis=1), block.ids, block.bases)
            u_block = np.zeros((2, block.capacity))
            u_block[:, :k] = both[:, 0].T
            out.append(u_block)
            rows = warm[start:start + block.capacity]
            rows[...] = 0.0
            rows[:k, :2] = both[:, 1]
            if ws_rest.shape[1] and len(ids) and k:  # the rigid model's normal impulses
                pos = np.minimum(np.searchsorted(ids, block.ids), len(ids) - 1)
                match = ids[pos] == block.ids
                rows[:k, 2:][match] = ws_rest[pos[match]]
        self.merged.set_warm_start(warm)
        return out

    def _blocks_after(self, u_next: np.ndarray, force: np.ndarray) -> None:
        """Keep each block's contacts' deformation and warm start by identity, in world
        axes, and their readings."""
        if not self._blocks:  # (self._dyn stays the empty tuple)
            return
        warm_all = np.asarray(self.merged.warm_start())
        status_all = np.asarray(self.merged.status)
        states = []
        for block, start in zip(self._blocks, self.points.starts):
            k = block.k
            if not k:
                states.append(_NO_BLOCK)
                continue
            sl = slice(start, start + k)
            warm = warm_all[sl]
            if block is self.self_collision:
                links = block.pair_links()
            else:
                links = (block.links(), ())
            readings = (links[0], links[1], block.position.copy(),
                        block.world_forces(force[sl]), block.depth.copy(), status_all[sl])
            states.append((block.ids, to_world(u_next[:, sl].T, block.bases),
                           to_world(warm[:, :2], block.bases), warm[:, 2:].copy(), readings))
        self._dyn = tuple(states)

    # -- readings of the collision points
    def _collision_readings(self) -> tuple:
        """The last solve's contacts of the collision points (and terrain) with the ground:
        (geometry, world point, world force, depth, status, normal force), each per
        contact."""
        c = self._contacts
        if type(c) is _Readings:
            c = self._contacts = c.arrays()
        return c

    def collision_points_state(self) -> ContactPointsReading:
        """The collision points within the margin at the last step, as a reading: link
        name (in ``surface``), world contact point, world force, depth, stick/slip."""
        if self.collision is None:
            return no_collision_points()
        geometry, pos, force, depth, status, _ = self._collision_readings()
        names = self._coll.link_names
        return ContactPointsReading(
            surface=tuple(names[g] for g in geometry), position=pos.copy(), force=force.copy(),
            depth=depth.copy(), status=tuple(STATUS_NAMES[s] for s in status))

    def collision_links(self) -> tuple[str, ...]:
        """The links whose collision geometry meets the ground (collision.enabled), each once."""
        if self.collision is None:
            return ()
        return tuple(dict.fromkeys(n for n in self._coll.link_names
                                   if n not in self.object_names))

    def link_normal_forces(self) -> np.ndarray:
        """(L,) per link of :meth:`collision_links`, the sum of the normal forces (N, along
        each contact's normal) of its contacts with the ground and terrain at the last step."""
        if self.collision is None:
            return np.zeros(0)
        cached = self.__dict__.get("_geometry_link")
        if cached is None:  # geometry -> its link's index, and the link count, once
            links = self.collision_links()
            # a free object's geometry counts in the bin past the links' (dropped)
            cached = self._geometry_link = (np.array(
                [links.index(n) if n in links else len(links) for n in self._coll.link_names],
                dtype=int), len(links))
        geometry_link, n = cached
        if self._contacts is _NO_CONTACTS:
            return np.zeros(n)
        geometry, _, _, _, _, normal = self._collision_readings()
        return np.bincount(geometry_link[geometry], weights=normal, minlength=n + 1)[:n]

    def self_contacts_state(self) -> SelfContactsReading:
        """The self-collision pairs within the margin at the last step: the two links, the
        world contact point, the world force on the first link (the second gets the
        opposite), the depth and the stick/slip state."""
        if self.self_collision is None:
            return no_self_contacts()
        a, b, pos, force, depth, status = self._dyn[-1][4]
        return SelfContactsReading(link_a=a, link_b=b, position=pos.copy(), force=force.copy(),
                                   depth=depth.copy(),
                                   status=tuple(STATUS_NAMES[s] for s in status))

    def signature(self) -> tuple:
        """((label, value), ...): what a snapshot of this model fits."""
        sc, tc = self.self_collision, self.terrain_contacts
        return (*self.feet.signature(),
                ("collision points (collision.*)", 0 if self.collision is None else
                 self._coll.m + (0 if tc is None else tc.capacity)),
                ("self-collision pairs (collision.self_collision)",
                 None if sc is None else sc.signature()))

    def collision_wrench(self) -> np.ndarray:
        """(6,) total [force, torque] of the ground on the collision points at the last
        step, world axes, torque about the world origin."""
        geometry, pos, f, _, _, _ = self._collision_readings()
        out = np.zeros(6)
        if len(f) and self.object_names:  # the robot's links only
            names = self._coll.link_names
            mine = np.array([names[g] not in self.object_names for g in geometry], dtype=bool)
            pos, f = pos[mine], f[mine]
        if len(f):
            out[:3] = f.sum(axis=0)
            out[3:] = np.cross(pos, f).sum(axis=0)
        return out


class _Readings:
    """A solve's contacts of the collision points with the ground, kept as the solve left
    them (each array is new each step and never written after) and formed into
    :meth:`WholeBodyContact._collision_readings`' arrays when first read: the lying
    humanoid's step paid ≈ 5 µs for readings most steps never have (issue 33). A deep copy
    (a snapshot's, ``Simulator.get_state``) is the formed arrays."""

    __slots__ = ("coll", "cand", "position", "depth", "bases", "force", "status", "nf")

    def __init__(self, coll, cand, position, depth, bases, force, status, nf):
        self.coll, self.cand, self.position, self.depth = coll, cand, position, depth
        self.bases, self.force, self.status, self.nf = bases, force, status, nf

    def arrays(self) -> tuple:
        at = self.nf + self.cand
        force = self.force[at]
        return (self.coll.point_geometry[self.cand], self.position,
                self.coll.world_forces(force, self.bases), self.depth[self.cand],
                self.status[at], force[:, 2])

    def __deepcopy__(self, memo) -> tuple:
        return copy.deepcopy(self.arrays(), memo)


_NO_CONTACTS = (np.zeros(0, dtype=int), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0),
                np.zeros(0, dtype=np.int8), np.zeros(0))
#: a block without contacts: (ids, deformation, warm start (tangential, world; the rest),
#: readings (first links, second links, positions, forces, depths, status))
_NO_BLOCK = (np.zeros(0, dtype=np.int64), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 0)),
             ((), (), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros(0, dtype=np.int8)))


def build_whole_body_contact(robot, surfaces, cfg, feet_model, make_model, ground: Ground,
                             terrain, model_step: pin.Model, data_step: pin.Data,
                             notes: list[str], objects: dict | None = None) -> WholeBodyContact:
    """The :class:`WholeBodyContact` of a configuration with ``collision.enabled`` or
    ``collision.self_collision`` or free objects (``cfg``: the ``collision`` group;
    ``surfaces``: the contact surfaces' groups; ``objects``: {object: [its geometry
    objects]} on ``model_step``'s appended joints). ``make_model(points)``: a contact model
    of the configured kind over ``points``; ``notes`` gets what the build wants said once.

    A free object is one more "link" to both collision phases: its geometry joins the
    ground collision's (ground, terrain) whatever ``collision.enabled`` says of the robot's
    links, and the pair collision's (other objects, the robot's links with geometry);
    without ``collision.self_collision`` only the pairs with an object are checked."""
    objects = objects or {}
    if objects and not (cfg.enabled or cfg.self_collision) and robot.mjcf_file is not None:
        gmodel, by_link = None, {}  # an MJCF's geometry is not read: objects meet no link
        notes.append("objects: the robot is an MJCF model, whose geometry is not read: "
                     "the objects do not touch its links")
    else:
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
    geometries += [link_geometry(name, g, cfg.max_points)
                   for name, gs in objects.items() for g in gs]
    selfc = None
    # several robots in one physics (wb_sim.multirobot): {link: its robot}; the pairs
    # between two robots' links collide as an object's pairs do
    link_robot = getattr(robot, "link_robot", None)
    between = link_robot if link_robot and len(set(link_robot.values())) > 1 else None
    if cfg.self_collision or objects or between:
        # free_root: moving the robot's base changes no distance within the robot, but it
        # does change the distances to the objects (and to the other robots)
        selfc = build_self_collision(model_step, robot.model,
                                     {**self_collision_links(cfg, by_link), **objects},
                                     cfg, notes,
                                     robot.floating_base and not objects and not between,
                                     only_with=None if cfg.self_collision else set(objects),
                                     between=between)
    del gmodel
    coll = CollisionPoints(model_step, geometries, ground, terrain, cfg.margin)
    tc = TerrainContacts(model_step, geometries, ground, terrain, cfg.margin)
    tc = tc if tc.active else None
    merged_points = MergedPoints(feet_model.points, coll, (tc, selfc))
    out = WholeBodyContact(feet_model, make_model(merged_points),
                           coll if (cfg.enabled or objects) else None,
                           merged_points, data_step, selfc, tc)
    out.object_names = frozenset(objects)
    out.set_objects(tuple(objects))
    return out
