"""The terrain as visualization_msgs/MarkerArray for RViz: each box a CUBE, the
heightfield one TRIANGLE_LIST, in the world frame, from the same geometry the
contact meets (wb_sim.terrain) and the meshcat viewer draws."""

from __future__ import annotations

import math

from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from ..terrain import heightfield_mesh, terrain_boxes

#: the terrain's colour in RViz (the meshcat viewer's, 0xB0A890)
COLOR = ColorRGBA(r=0.69, g=0.66, b=0.56, a=1.0)


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
        m.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2]))
                    for p in vertices[faces.reshape(-1)]]
        out.markers.append(m)
    return out


def _marker(kind: int, i: int, frame_id: str, stamp) -> Marker:
    m = Marker(type=kind, action=Marker.ADD, ns="terrain", id=i, color=COLOR)
    m.header.frame_id = frame_id
    m.header.stamp = stamp
    m.frame_locked = True
    return m
