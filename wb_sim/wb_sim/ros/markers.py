"""visualization_msgs/MarkerArray for RViz, in the world frame:

* the terrain (latched, once): each box a CUBE, the heightfield one TRIANGLE_LIST, from
  the same geometry the contact meets (wb_sim.terrain) and the meshcat viewer draws;
* the contacts (a stream, ``publish.contact_markers_rate_hz``): every loaded contact
  point, the contact surfaces' and (``collision.enabled``) the other links', as one
  SPHERE_LIST (namespace ``contact_points``) and the ground's force on each as one
  LINE_LIST from the point (namespace ``contact_forces``), :data:`WEIGHT_LENGTH_M` long
  for the robot's whole weight; with ``collision.self_collision`` the links' contacts
  with each other likewise (``self_contact_points``, ``self_contact_forces``: the force
  on the pair's first link, the second gets the opposite). All four markers are sent
  every time (ADD replaces them), empty when nothing touches;
* the free objects (latched, again at each spawn or delete): one marker per object
  (namespace ``objects``; a CUBE, SPHERE or CYLINDER of its size, a capsule as a CYLINDER
  of its whole length; a urdf object: one per <collision> geometry, at its placement),
  drawn in the object's own TF frame (its name, on ``/tf``) with
  ``frame_locked``: RViz moves it with TF, nothing is sent per step. Each message starts
  with a DELETEALL, so a deleted object's marker goes."""

from __future__ import annotations

import math

import numpy as np

from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from ..terrain import heightfield_mesh, terrain_boxes

#: the terrain's colour in RViz (the meshcat viewer's, 0xB0A890)
COLOR = ColorRGBA(r=0.69, g=0.66, b=0.56, a=1.0)
#: contact points (yellow) and forces (the RViz config's wrench red)
POINT_COLOR = ColorRGBA(r=0.95, g=0.85, b=0.2, a=1.0)
FORCE_COLOR = ColorRGBA(r=0.8, g=0.2, b=0.2, a=1.0)
#: self-collision contacts (cyan) and forces (blue)
SELF_POINT_COLOR = ColorRGBA(r=0.2, g=0.85, b=0.95, a=1.0)
SELF_FORCE_COLOR = ColorRGBA(r=0.2, g=0.4, b=0.9, a=1.0)
#: the free objects' colour (orange)
OBJECT_COLOR = ColorRGBA(r=0.9, g=0.5, b=0.15, a=1.0)
#: diameter of a contact point's sphere, m; width of a force line, m
POINT_DIAMETER_M = 0.02
LINE_WIDTH_M = 0.005
#: length of a force line carrying the robot's whole weight, m (forces scale with it)
WEIGHT_LENGTH_M = 0.5


def terrain_markers(terrain, frame_id: str, stamp) -> MarkerArray:
    """The markers of ``terrain`` (wb_sim.terrain.Terrain; None: no markers)."""
    out = MarkerArray()
    for i, (size, T) in enumerate(terrain_boxes(terrain)):
        m = _marker(Marker.CUBE, i, frame_id, stamp)
        m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(x) for x in T[:3, 3])
        yaw = math.atan2(T[1, 0], T[0, 0])
        m.pose.orientation.z, m.pose.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
        m.scale.x, m.scale.y, m.scale.z = (float(x) for x in size)
        out.markers.append(m)
    mesh = heightfield_mesh(terrain)
    if mesh is not None:
        vertices, faces = mesh
        m = _marker(Marker.TRIANGLE_LIST, len(out.markers), frame_id, stamp)
        m.pose.orientation.w = 1.0
        m.scale.x = m.scale.y = m.scale.z = 1.0
        m.points = [Point(x=x, y=y, z=z) for x, y, z in vertices[faces.reshape(-1)].tolist()]
        out.markers.append(m)
    return out


def object_markers(objects, frame_id: str, stamp) -> MarkerArray:
    """The markers of the free objects ``objects`` (wb_sim.objects.FreeObject): a
    DELETEALL (``frame_id``: the world frame), then per object its shape in its own frame."""
    clear = Marker(action=Marker.DELETEALL, ns="objects")
    clear.header.frame_id, clear.header.stamp = frame_id, stamp
    out = MarkerArray(markers=[clear])
    kinds = {"box": Marker.CUBE, "sphere": Marker.SPHERE, "cylinder": Marker.CYLINDER,
             "capsule": Marker.CYLINDER}
    for obj in objects:
        for solid in obj.solids():  # one for each; a urdf object's each <collision> geometry
            m = _marker(kinds.get(solid.shape, Marker.TRIANGLE_LIST), len(out.markers) - 1,
                        obj.name, stamp, "objects", OBJECT_COLOR)
            (m.pose.position.x, m.pose.position.y, m.pose.position.z) = solid.position
            (m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z,
             m.pose.orientation.w) = solid.quaternion
            a, b, c = solid.size
            if solid.shape == "mesh":  # its convex hull (what collides), about its centre
                h = solid.hull
                m.scale.x = m.scale.y = m.scale.z = 1.0
                m.points = [Point(x=x, y=y, z=z) for x, y, z in
                            h.vertices[h.faces.reshape(-1)].tolist()]
            elif solid.shape == "box":
                m.scale.x, m.scale.y, m.scale.z = a, b, c
            elif solid.shape == "sphere":
                m.scale.x = m.scale.y = m.scale.z = 2.0 * a
            else:  # cylinder, capsule: diameter, diameter, length (a capsule's with its caps)
                m.scale.x = m.scale.y = 2.0 * a
                m.scale.z = b + (2.0 * a if solid.shape == "capsule" else 0.0)
            m.text = obj.shape
            out.markers.append(m)
    return out


class ContactMarkers:
    """The contact markers of one simulator: :meth:`message` builds them from its last
    step (the caller holds the lock)."""

    def __init__(self, sim, frame_id: str):
        from ..tools.viewer import contact_arrows
        self._arrows = contact_arrows
        self.sim, self.frame_id = sim, frame_id
        weight = sim.mass * float(np.linalg.norm(sim.config.gravity))
        self.metres_per_newton = WEIGHT_LENGTH_M / weight if weight > 0 else 0.0

    def message(self, stamp) -> MarkerArray:
        position, force = self._arrows(self.sim)
        markers = self._pair(position, force, stamp, "contact", POINT_COLOR, FORCE_COLOR)
        own = self.sim.self_collision_contacts()
        markers += self._pair(own.position, own.force, stamp, "self_contact",
                              SELF_POINT_COLOR, SELF_FORCE_COLOR)
        return MarkerArray(markers=markers)

    def _pair(self, position, force, stamp, ns, point_color, force_color) -> list:
        """[SPHERE_LIST of the loaded points, LINE_LIST of their forces] (``<ns>_points``,
        ``<ns>_forces``)."""
        loaded = np.einsum("ij,ij->i", force, force) > 0.0
        position, force = position[loaded], force[loaded]
        tip = position + self.metres_per_newton * force
        points = _marker(Marker.SPHERE_LIST, 0, self.frame_id, stamp, f"{ns}_points",
                         point_color)
        points.scale.x = points.scale.y = points.scale.z = POINT_DIAMETER_M
        points.points = [Point(x=x, y=y, z=z) for x, y, z in position.tolist()]
        lines = _marker(Marker.LINE_LIST, 0, self.frame_id, stamp, f"{ns}_forces",
                        force_color)
        lines.scale.x = LINE_WIDTH_M
        ends = np.empty((2 * len(position), 3))
        ends[0::2], ends[1::2] = position, tip
        lines.points = [Point(x=x, y=y, z=z) for x, y, z in ends.tolist()]
        for m in (points, lines):
            m.pose.orientation.w = 1.0
            m.frame_locked = False
        return [points, lines]


def _marker(kind: int, i: int, frame_id: str, stamp, ns: str = "terrain",
            color: ColorRGBA = COLOR) -> Marker:
    m = Marker(type=kind, action=Marker.ADD, ns=ns, id=i, color=color)
    m.header.frame_id = frame_id
    m.header.stamp = stamp
    m.frame_locked = True
    return m
