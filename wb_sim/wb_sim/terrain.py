"""The terrain beyond the ground plane: boxes (steps, platforms, stairs) and a
heightfield, as one solid the contact points meet.

The world's solid is the union of the ground half-space (``ground.height``,
``ground.normal``) and the terrain's items. A contact query returns, for each
point, its signed distance to that solid (positive outside, m) and the unit
normal of the surface it is closest to: the gradient of the distance, so a point
over a box's edge or corner gets the direction from the nearest edge or corner
point (well defined, continuous as the point moves round the edge). Inside a
box the normal is that of the face the point is least deep under.

* **Boxes** (``terrain.boxes``: centre, size, yaw about the vertical): the exact
  signed distance of each box.
* **Stairs** (``terrain.stairs``): a flight of ``count`` boxes, each one step
  higher and one step deeper, resting on the ground.
* **Heightfield** (``terrain.heightfield``: a ``.npy`` grid of heights, its size
  and origin): bilinear height; the normal of the bilinear surface
  ``(-h_x, -h_y, 1) / |.|``; distance ``n_z (z - h(x, y))`` (exact on a plane,
  first order where the surface curves on the scale of the penetration).

The plane alone keeps the contact models' fast path (one basis for every point);
:class:`Terrain` is consulted only when terrain items are configured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import ConfigError, ModelError

#: numbers per box in terrain.boxes and per flight in terrain.stairs
BOX_FIELDS = 7  # cx, cy, cz, sx, sy, sz, yaw
STAIRS_FIELDS = 8  # x0, y0, yaw, step_depth, step_height, width, count, ground height
#: the default bounds of terrain.max_boxes and terrain.max_heightfield_cells: every box is
#: queried for every contact point at every step (2000 boxes cost 422 ms a step; a flight of
#: 1e9 steps hung the load), and the heightfield is held in memory and drawn (RViz)
MAX_BOXES = 200
MAX_HEIGHTFIELD_CELLS = 4_000_000
#: |height| after the scale, m: beyond it the normals overflow and the field vanished silently
MAX_HEIGHT = 1.0e5


def count_boxes(boxes, stairs) -> int:
    """The boxes ``terrain.boxes`` and ``terrain.stairs`` make, counted before any is built
    (a malformed layout counts what it can: its own error comes when it is built)."""
    n = len(boxes) // BOX_FIELDS
    for i in range(STAIRS_FIELDS - 2, len(stairs) - 1, STAIRS_FIELDS):
        count = stairs[i]
        n += int(count) if math.isfinite(count) and count > 0 else 0
    return n


def check_box_count(boxes, stairs, limit: int) -> None:
    """ConfigError where the terrain would hold more than ``limit`` boxes."""
    n = count_boxes(boxes, stairs)
    if n > limit:
        key = "terrain.stairs" if len(boxes) // BOX_FIELDS <= limit else "terrain.boxes"
        raise ConfigError(
            f"parameter '{key}': the terrain would hold {n} boxes (terrain.boxes + every step "
            f"of terrain.stairs), more than terrain.max_boxes = {limit}; every box is tested "
            f"against every contact point at every step: raise parameter 'terrain.max_boxes' "
            f"(at most 100000) if you mean it")


@dataclass(frozen=True)
class Box:
    centre: np.ndarray  #: (3,) m
    half: np.ndarray  #: (3,) half sizes, m
    yaw: float  #: rad, about the world z axis


def boxes_from_flat(values, key: str = "terrain.boxes") -> list[Box]:
    """Boxes from ``[cx, cy, cz, sx, sy, sz, yaw, ...]`` (7 numbers each)."""
    if len(values) % BOX_FIELDS:
        raise ConfigError(f"parameter '{key}': {BOX_FIELDS} numbers per box (cx, cy, cz, sx, sy, "
                          f"sz, yaw), got {len(values)}")
    out = []
    for i in range(0, len(values), BOX_FIELDS):
        cx, cy, cz, sx, sy, sz, yaw = values[i:i + BOX_FIELDS]
        if min(sx, sy, sz) <= 0:
            raise ConfigError(f"parameter '{key}': box {i // BOX_FIELDS} needs sizes > 0, got "
                              f"{[sx, sy, sz]}")
        out.append(Box(np.array([cx, cy, cz], float), np.array([sx, sy, sz], float) / 2.0,
                       float(yaw)))
    return out


def stairs_boxes(values, key: str = "terrain.stairs") -> list[Box]:
    """The boxes of stair flights ``[x0, y0, yaw, step_depth, step_height, width, count,
    z0, ...]``: step k (0-based) spans ``[k d, (k + 1) d]`` along the flight's heading
    from (x0, y0), is ``width`` wide and rises from ``z0`` to ``z0 + (k + 1) h``."""
    if len(values) % STAIRS_FIELDS:
        raise ConfigError(f"parameter '{key}': {STAIRS_FIELDS} numbers per flight (x0, y0, yaw, "
                          f"step_depth, step_height, width, count, z0), got {len(values)}")
    out = []
    for i in range(0, len(values), STAIRS_FIELDS):
        x0, y0, yaw, depth, height, width, count, z0 = values[i:i + STAIRS_FIELDS]
        if min(depth, height, width) <= 0 or count < 1 or count != int(count):
            raise ConfigError(f"parameter '{key}': flight {i // STAIRS_FIELDS} needs step_depth, "
                              f"step_height, width > 0 and a whole count >= 1")
        c, s = math.cos(yaw), math.sin(yaw)
        for k in range(int(count)):
            along = (k + 0.5) * depth
            top = z0 + (k + 1) * height
            out.append(Box(np.array([x0 + c * along, y0 + s * along, (z0 + top) / 2.0]),
                           np.array([depth, width, top - z0]) / 2.0, float(yaw)))
    return out


@dataclass(frozen=True)
class Heightfield:
    heights: np.ndarray  #: (rows along y, columns along x), m (after the scale)
    origin: np.ndarray  #: (3,) world position of heights[0, 0]
    size: np.ndarray  #: (2,) extent along x and y, m

    @classmethod
    def load(cls, path: str, size, origin, scale: float,
             max_cells: int = MAX_HEIGHTFIELD_CELLS) -> "Heightfield":
        """The grid of the .npy file ``path``: its header (shape, type) checked before the
        data is read (at most ``max_cells`` cells, real numbers), then its heights (finite,
        within :data:`MAX_HEIGHT` m after ``scale``); ModelError naming the key otherwise."""
        key = "parameter 'terrain.heightfield'"
        p = Path(path)
        if not p.is_file():  # a FIFO or a device would block the read; a directory is no grid
            what = "does not exist" if not p.exists() else "is not a regular file"
            raise ModelError(f"{key}: '{path}' {what}; give a .npy file of heights")
        try:
            with open(p, "rb") as f:
                version = np.lib.format.read_magic(f)
                shape, _, dtype = _npy_header(f, version)
        except (OSError, ValueError) as e:
            raise ModelError(f"{key}: cannot read '{path}' as a .npy array (np.save writes "
                             f"one; .npz and text files are not): {e}") from None
        if len(shape) != 2 or min(shape) < 2:
            raise ModelError(f"{key}: '{path}' must hold a 2-D grid of heights, at least 2 x 2; "
                             f"got shape {shape}")
        if dtype.kind not in "biuf":
            raise ModelError(f"{key}: '{path}' must hold real numbers (float or integer "
                             f"heights); got dtype {dtype}")
        cells = shape[0] * shape[1]
        if cells > max_cells:
            raise ModelError(f"{key}: '{path}' has {shape[0]} x {shape[1]} = {cells} cells, "
                             f"more than terrain.max_heightfield_cells = {max_cells}; "
                             f"decimate the grid, or raise parameter "
                             f"'terrain.max_heightfield_cells' (at most 100000000) if you mean it")
        try:
            grid = np.load(p, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise ModelError(f"{key}: cannot read '{path}' as a .npy array: {e}") from None
        with np.errstate(all="ignore"):
            heights = np.asarray(grid, float) * scale
        if not np.isfinite(heights).all() or np.abs(heights).max() > MAX_HEIGHT:
            raise ModelError(f"{key}: '{path}' must hold finite heights within "
                             f"+-{MAX_HEIGHT:g} m (after terrain.heightfield_scale); got "
                             f"[{np.nanmin(heights):g}, {np.nanmax(heights):g}]")
        if min(size) <= 0:
            raise ConfigError("parameter 'terrain.heightfield_size': [length x, length y] > 0")
        return cls(heights, np.asarray(origin, float), np.asarray(size, float))

    def query(self, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(signed distance (n,), normal (n, 3)) of points P (n, 3); +inf off the grid."""
        rows, cols = self.heights.shape
        u = (P[:, 0] - self.origin[0]) / self.size[0] * (cols - 1)
        w = (P[:, 1] - self.origin[1]) / self.size[1] * (rows - 1)
        inside = (u >= 0) & (u <= cols - 1) & (w >= 0) & (w <= rows - 1)
        i = np.clip(np.floor(w).astype(int), 0, rows - 2)
        j = np.clip(np.floor(u).astype(int), 0, cols - 2)
        a, b = np.clip(u - j, 0.0, 1.0), np.clip(w - i, 0.0, 1.0)
        H = self.heights
        h00, h01, h10, h11 = H[i, j], H[i, j + 1], H[i + 1, j], H[i + 1, j + 1]
        h = (h00 * (1 - a) * (1 - b) + h01 * a * (1 - b) + h10 * (1 - a) * b + h11 * a * b)
        dx, dy = self.size[0] / (cols - 1), self.size[1] / (rows - 1)
        hx = ((h01 - h00) * (1 - b) + (h11 - h10) * b) / dx
        hy = ((h10 - h00) * (1 - a) + (h11 - h01) * a) / dy
        normal = np.stack([-hx, -hy, np.ones_like(hx)], axis=1)
        normal /= np.linalg.norm(normal, axis=1)[:, None]
        sdf = normal[:, 2] * (P[:, 2] - (self.origin[2] + h))
        return np.where(inside, sdf, np.inf), normal


def _npy_header(f, version) -> tuple[tuple, bool, np.dtype]:
    """(shape, fortran order, dtype) of an open .npy file after its magic string."""
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(f)
    raise ValueError(f"unsupported .npy version {version}")


def box_query(box: Box, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact signed distance (n,) of points P (n, 3) to a box, and its gradient (n, 3):
    outside, the unit direction from the nearest point of the box; inside, the
    outward normal of the face the point is least deep under."""
    c, s = math.cos(box.yaw), math.sin(box.yaw)
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])  # box -> world
    local = (P - box.centre) @ R  # R^T (p - c), row-wise
    q = np.abs(local) - box.half  # > 0 along the axes the point is outside
    outside = np.maximum(q, 0.0)
    dist_out = np.linalg.norm(outside, axis=1)
    inner = np.max(q, axis=1)  # < 0 inside: minus the depth under the nearest face
    sdf = np.where(dist_out > 0.0, dist_out, inner)
    grad_local = np.where(dist_out[:, None] > 0.0, outside * np.sign(local)
                          / np.where(dist_out > 0.0, dist_out, 1.0)[:, None], 0.0)
    face = np.argmax(q, axis=1)
    in_rows = dist_out <= 0.0
    grad_local[in_rows, face[in_rows]] = np.where(local[in_rows, face[in_rows]] >= 0.0, 1.0, -1.0)
    return sdf, grad_local @ R.T


class Terrain:
    """The ground half-space and the terrain items, queried together."""

    def __init__(self, ground_height: float, ground_normal, boxes: list[Box],
                 heightfield: Heightfield | None = None):
        self.ground_normal = np.asarray(ground_normal, float)
        self.ground_origin = np.array([0.0, 0.0, ground_height])
        self.boxes = list(boxes)
        self.heightfield = heightfield

    @property
    def flat(self) -> bool:
        """Only the ground plane (the contact models' single-basis fast path)."""
        return not self.boxes and self.heightfield is None

    def query(self, P: np.ndarray, boxes: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(signed distance (n,), unit normal (n, 3)) of points P (n, 3) to the union of
        the ground and the items: the smallest distance wins, with its normal.
        ``boxes=False``: the ground and the heightfield only."""
        sdf = (P - self.ground_origin) @ self.ground_normal
        normal = np.broadcast_to(self.ground_normal, P.shape).copy()
        items = [box_query(b, P) for b in self.boxes] if boxes else []
        if self.heightfield is not None:
            items.append(self.heightfield.query(P))
        for d, n in items:
            closer = d < sdf
            sdf = np.where(closer, d, sdf)
            normal[closer] = n[closer]
        return sdf, normal


def box_distances(boxes: list[Box], P: np.ndarray) -> np.ndarray:
    """(B, n) the exact signed distance of the points P (n, 3) to each of the boxes
    (:func:`box_query`'s, all boxes at once)."""
    if not boxes:
        return np.zeros((0, len(P)))
    C = np.array([b.centre for b in boxes])
    H = np.array([b.half for b in boxes])
    c, s = np.cos([b.yaw for b in boxes]), np.sin([b.yaw for b in boxes])
    d = P[None, :, :] - C[:, None, :]  # (B, n, 3)
    local = np.stack([c[:, None] * d[..., 0] + s[:, None] * d[..., 1],
                      -s[:, None] * d[..., 0] + c[:, None] * d[..., 1], d[..., 2]], axis=2)
    q = np.abs(local) - H[:, None, :]
    outside = np.linalg.norm(np.maximum(q, 0.0), axis=2)
    return np.where(outside > 0.0, outside, q.max(axis=2))


def box_pose(box: Box) -> tuple[np.ndarray, np.ndarray]:
    """(rotation (3, 3), centre (3,)) of a box in the world."""
    c, s = math.cos(box.yaw), math.sin(box.yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]), np.asarray(box.centre, float)


def tangent_bases(normals: np.ndarray) -> np.ndarray:
    """(n, 3, 3) right-handed bases with columns (t1, t2, n) for unit normals (n, 3),
    t1 from the world x axis (or y where the normal is near x), as Ground does; the
    products by component (``np.cross`` costs 13 us on a few rows): the numbers of
    :func:`tangent_bases_reference` (tested)."""
    nx, ny, nz = normals[:, 0], normals[:, 1], normals[:, 2]
    near_x = np.abs(nx) >= 0.9
    # t1 = ref - n (ref . n), ref = x (or y): its components, then normalized
    dot = np.where(near_x, ny, nx)
    t1 = -normals * dot[:, None]
    t1[:, 0] += ~near_x
    t1[:, 1] += near_x
    t1 /= np.sqrt(np.einsum("ij,ij->i", t1, t1))[:, None]
    ax, ay, az = t1[:, 0], t1[:, 1], t1[:, 2]
    out = np.empty((len(normals), 3, 3))
    out[:, :, 0] = t1
    out[:, 0, 1] = ny * az - nz * ay
    out[:, 1, 1] = nz * ax - nx * az
    out[:, 2, 1] = nx * ay - ny * ax
    out[:, :, 2] = normals
    return out


def tangent_bases_reference(normals: np.ndarray) -> np.ndarray:
    """:func:`tangent_bases` the plain way (projection, ``np.linalg.norm``, ``np.cross``)."""
    ref = np.where(np.abs(normals[:, :1]) < 0.9, np.array([[1.0, 0.0, 0.0]]),
                   np.array([[0.0, 1.0, 0.0]]))
    t1 = ref - normals * np.sum(ref * normals, axis=1)[:, None]
    t1 /= np.linalg.norm(t1, axis=1)[:, None]
    t2 = np.cross(normals, t1)
    return np.stack([t1, t2, normals], axis=2)


def load_terrain(config) -> Terrain | None:
    """The terrain of a SimConfig, or None where there is only the ground plane."""
    t = config.terrain
    check_box_count(t.boxes, t.stairs, t.max_boxes)
    boxes = boxes_from_flat(t.boxes) + stairs_boxes(t.stairs)
    field = None
    if t.heightfield:
        path = Path(t.heightfield)
        field = Heightfield.load(str(path), t.heightfield_size, t.heightfield_origin,
                                 t.heightfield_scale, t.max_heightfield_cells)
    if not boxes and field is None:
        return None
    return Terrain(config.ground.height, config.ground.normal, boxes, field)


def terrain_boxes(terrain) -> list[tuple[np.ndarray, np.ndarray]]:
    """(size (3,), world <- box (4, 4)) of each box of ``terrain`` (None: none)."""
    out = []
    for box in (terrain.boxes if terrain is not None else ()):
        c, s = math.cos(box.yaw), math.sin(box.yaw)
        T = np.eye(4)
        T[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
        T[:3, 3] = box.centre
        out.append((2.0 * box.half, T))
    return out


#: most grid cells a drawn heightfield keeps (RViz, meshcat): a larger grid is drawn decimated
MAX_DRAWN_CELLS = 40_000


def heightfield_mesh(terrain, max_cells: int = MAX_DRAWN_CELLS
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """(vertices (N, 3), triangles (M, 3)) of the terrain's heightfield surface, two
    triangles per grid cell, in world coordinates; None without a heightfield. A grid of
    more than ``max_cells`` cells is drawn from every k-th row and column (the first and
    last always kept), k the smallest that fits: a drawing, not the contact's surface."""
    field = terrain.heightfield if terrain is not None else None
    if field is None:
        return None
    H = field.heights
    k = 1
    while math.ceil((H.shape[0] - 1) / k) * math.ceil((H.shape[1] - 1) / k) > max_cells:
        k += 1
    ri = np.unique(np.r_[np.arange(0, H.shape[0], k), H.shape[0] - 1])
    ci = np.unique(np.r_[np.arange(0, H.shape[1], k), H.shape[1] - 1])
    rows, cols = len(ri), len(ci)
    x = field.origin[0] + field.size[0] * ci / (H.shape[1] - 1)
    y = field.origin[1] + field.size[1] * ri / (H.shape[0] - 1)
    X, Y = np.meshgrid(x, y)
    vertices = np.column_stack([X.ravel(), Y.ravel(),
                                field.origin[2] + H[np.ix_(ri, ci)].ravel()])
    i, j = np.meshgrid(np.arange(rows - 1), np.arange(cols - 1), indexing="ij")
    a = (i * cols + j).ravel()
    faces = np.concatenate([np.column_stack([a, a + 1, a + cols + 1]),
                            np.column_stack([a, a + cols + 1, a + cols])])
    return vertices, faces.astype(np.uint32)
