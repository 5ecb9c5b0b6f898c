"""Free objects: rigid bodies (box, sphere, cylinder, capsule, a mesh's convex hull, a rigid
URDF's links together) that nothing drives, in the same physics as the robot.

**Design.** Each object is appended to the simulator's own pinocchio models as one more
free joint under the universe, one body (its solid's inertia about its centre) and its
collision geometry (a coal primitive or a mesh's hull; a urdf object: one per
``<collision>`` of its links, at its placement in the body's frame, as a link's several
geometries are: :class:`Solid`, :func:`load_urdf_body`). Why a rigid URDF is one body
and not a robot of fixed joints: pinocchio merges fixed links into their joint anyway,
and as one free joint it takes every path a box takes (the islands' one-object batch,
the stepping model's root, spawn and delete); an articulated URDF is a robot (refused
here, listed under ``robots:`` in a world file). Appended after the robot's joints, it changes
nothing of the robot's layout: the robot's base stays joint 1, its joints keep their
``idx_q`` / ``idx_v`` and :attr:`~wb_sim.Simulator.joint_names` lists the robot's joints
only; an object's 7 coordinates and 6 velocities come after them in ``q`` and ``v``. Then
the machinery that already exists handles every object contact in the step's one
solve, with no second solver or coupling loop: the ground and terrain collision
(:mod:`~wb_sim.contact.ground_collision`, exact shape slots and coal manifolds) takes the
objects' geometries as it takes a link's, and the pair collision of
:mod:`~wb_sim.contact.self_collision` (exact coal shapes, relative Jacobians) takes
object-object and object-robot-link pairs. Both contact models (compliant, rigid) see
these as more rows of the same problem, with the same friction (``contact.*``: one
friction coefficient for every contact, the objects' included; the models have no
per-body friction). The alternative, a separate rigid-body solver per object coupled to
the robot through exchanged forces, would be explicit in the coupling and would need
its own contact code.

In the stepping model an object's joint is, like the robot's floating root, a
translation joint followed by a spherical one (its linear velocity in world axes, so
semi-implicit Euler does not pump energy into a spinning object); in the physical model
(the dynamics queries) a pinocchio free-flyer. ``q`` has the same layout in both.

Objects are built at construction: :meth:`~wb_sim.Simulator.spawn_object` and
``delete_object`` rebuild the simulator (the models, the contact model) and carry the
robot's state over (see there for the cost).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from .errors import CommandError, ConfigError
from .robot import did_you_mean
from .terrain import box_query

#: the surface points an object's placement on the heightfield is checked at
#: (:meth:`FreeObject.surface_points`)
SURFACE_SAMPLES = 2000

#: the shapes an object may have, and what its three size numbers mean
SHAPES = {
    "box": "x, y, z edge lengths (m)",
    "sphere": "radius (m), 0, 0",
    "cylinder": "radius, length along its z axis (m), 0",
    "capsule": "radius, length of its cylindrical part along its z axis (m), 0",
    "mesh": "x, y, z scale of its mesh file's coordinates (> 0; 1, 1, 1: as the file gives "
            "them in m)",
    "urdf": "0, 0, 0 (its links' <collision> geometry is its shape; its <inertial>s its mass)",
}
#: the mesh files an object may be made of (coal's assimp loader, as the links' meshes)
MESH_FORMATS = (".stl", ".obj", ".dae")
#: the largest mesh file read, bytes (refused before reading: the load time it bounds)
MAX_MESH_BYTES = 64 * 2 ** 20
#: objects.max_mesh_vertices's default: most vertices of a mesh file
MAX_MESH_VERTICES = 100_000
#: a URDF object's bounds, checked before pinocchio or coal read anything: the file's (or
#: string's) bytes, its links, its <collision> geometries (each one more shape in every
#: contact query of the object)
MAX_URDF_BYTES = 4 * 2 ** 20
MAX_URDF_LINKS = 100
MAX_URDF_GEOMETRIES = 64


@dataclass(frozen=True)
class MeshHull:
    """A mesh object's solid: the convex hull of its file's vertices (scaled), moved to its
    centre of mass. Why the hull: the contact machinery meets convex shapes exactly (the
    ground's and terrain's support features, coal's GJK/EPA between two shapes, manifolds
    clipped from support features), as it does a link's mesh; a BVH of the triangles would
    meet the plane and other shapes only through its triangles' pairs, with no volume to
    push out of (a triangle soup has no inside), and its mass properties would need a
    closed, consistently oriented surface that files often lack. A concave object (a cup,
    a chair) is its hull here: split it into convex objects to keep its hollows."""

    vertices: np.ndarray  #: (n, 3) the hull's vertices about the centre of mass, m
    faces: np.ndarray  #: (k, 3) their triangles (outward, counter-clockwise)
    planes: np.ndarray  #: (k, 4) the faces' planes n . x + o <= 0 inside (n unit)
    volume: float  #: m^3
    com: np.ndarray  #: (3,) the centre of mass in the file's frame (scaled), m
    #: (3, 3) the hull's inertia about its centre of mass for density 1, m^5
    unit_inertia: np.ndarray
    file_vertices: int  #: how many vertices the file has


def load_mesh_hull(path, scale, max_vertices: int, what: str, err) -> MeshHull:
    """The :class:`MeshHull` of mesh file ``path`` (:data:`MESH_FORMATS`) scaled by
    ``scale`` (3 numbers > 0). Volume, centre of mass and inertia: coal's
    ``Convex.computeVolume`` / ``computeCOM`` / ``computeMomentofInertiaRelatedToCOM`` of
    the hull coal builds (qhull); the vertices as coal reads them (assimp: 32-bit floats,
    as every link mesh). ``err`` (naming ``what``) for a missing, unreadable, too large
    (:data:`MAX_MESH_BYTES`, ``max_vertices``) or flat file."""
    import coal
    from scipy.spatial import ConvexHull, QhullError

    p = Path(path)
    if not p.is_file():
        why = "does not exist" if not p.exists() else "is not a regular file"
        raise err(f"{what}: mesh file '{path}' {why}; give an existing "
                  f"{'/'.join(f[1:].upper() for f in MESH_FORMATS)} file (an absolute path, or "
                  f"one relative to the parameter file that names it)")
    if p.suffix.lower() not in MESH_FORMATS:
        raise err(f"{what}: mesh file '{path}': its format {p.suffix or '(no extension)'!r} "
                  f"is not read; the formats are {', '.join(MESH_FORMATS)}")
    size = p.stat().st_size
    if size > MAX_MESH_BYTES:
        raise err(f"{what}: mesh file '{path}' has {size} bytes, more than "
                  f"{MAX_MESH_BYTES} ({MAX_MESH_BYTES // 2 ** 20} MiB): decimate it (only its "
                  f"convex hull is used)")
    try:
        bvh = coal.MeshLoader().load(str(p.resolve()), np.asarray(scale, dtype=float))
    except (ValueError, RuntimeError) as e:
        first = str(e).strip().splitlines()
        why = next((line for line in first if line.startswith("message:")), first[-1:] or [""])
        raise err(f"{what}: cannot read mesh file '{path}' "
                  f"({str(why).removeprefix('message: ').strip() or 'no mesh in it'})") from None
    n = int(bvh.num_vertices)
    if n > max_vertices:
        raise err(f"{what}: mesh file '{path}' has {n} vertices, more than "
                  f"objects.max_mesh_vertices = {max_vertices}: decimate it (only its convex "
                  f"hull is used), or raise the parameter")
    V = np.asarray(bvh.vertices(), dtype=float) if n else np.zeros((0, 3))
    if n < 4 or not np.isfinite(V).all():
        raise err(f"{what}: mesh file '{path}' has {n} vertices" +
                  ("" if n < 4 else " not all finite") + ": no solid")
    try:
        hull = ConvexHull(V)
        bvh.buildConvexHull(True, "Qt")
    except (QhullError, ValueError, RuntimeError):
        hull = None
    convex = bvh.convex if hull is not None else None
    volume = float(convex.computeVolume()) if convex is not None else 0.0
    extent = float(np.max(V.max(axis=0) - V.min(axis=0)))
    if not volume > 1e-9 * extent ** 3:
        raise err(f"{what}: mesh file '{path}' (scaled by {list(scale)}) is flat: its convex "
                  f"hull has no volume, so no mass distribution")
    com = np.asarray(convex.computeCOM(), dtype=float)
    unit = np.asarray(convex.computeMomentofInertiaRelatedToCOM(), dtype=float)
    unit = 0.5 * (unit + unit.T)
    H = hull.points[hull.vertices]
    index = {int(k): i for i, k in enumerate(hull.vertices)}
    faces = np.array([[index[int(k)] for k in tri] for tri in hull.simplices])
    planes = hull.equations.copy()
    # outward, counter-clockwise triangles (qhull's simplices have no fixed order)
    e = np.cross(H[faces[:, 1]] - H[faces[:, 0]], H[faces[:, 2]] - H[faces[:, 0]])
    flip = np.einsum("ij,ij->i", e, planes[:, :3]) < 0.0
    faces[flip] = faces[flip][:, ::-1]
    planes[:, 3] += planes[:, :3] @ com  # about the centre of mass
    return MeshHull(vertices=H - com, faces=faces, planes=planes, volume=volume, com=com,
                    unit_inertia=unit, file_vertices=n)


@dataclass(frozen=True)
class Solid:
    """One convex solid of an object, at its placement in the object's frame: the object
    itself for the primitives and meshes, each ``<collision>`` geometry of a URDF object's
    links for ``urdf``."""

    shape: str  #: box, sphere, cylinder, capsule or mesh
    size: tuple[float, float, float]  #: see :data:`SHAPES` (a mesh's: its scale)
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)  #: in the object's frame, m
    quaternion: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)  #: x, y, z, w
    mesh: str = ""  #: a mesh's file (absolute path)
    #: a mesh's hull about its centre (the solid's frame), None for the primitives
    hull: MeshHull | None = field(default=None, compare=False, repr=False)

    def placement(self) -> pin.SE3:
        """object <- solid"""
        return pin.SE3(pin.Quaternion(np.array(self.quaternion)).matrix(),
                       np.array(self.position))

    def geometry(self):
        """Its coal collision shape (centred on the solid's frame): a mesh's is its hull's
        triangles as a BVH, which the contact code meets through their convex hull
        (:mod:`wb_sim.contact.geometry`, as a link's mesh)."""
        import coal
        a, b, _ = self.size
        if self.shape == "mesh":
            h = self.hull
            bvh = coal.BVHModelOBBRSS()
            bvh.beginModel(len(h.faces), len(h.vertices))
            bvh.addVertices(h.vertices)
            bvh.addTriangles(h.faces.astype(np.int64))
            bvh.endModel()
            return bvh
        if self.shape == "box":
            return coal.Box(*self.size)
        if self.shape == "sphere":
            return coal.Sphere(a)
        if self.shape == "cylinder":
            return coal.Cylinder(a, b)
        return coal.Capsule(a, b)

    def support(self, d: np.ndarray) -> float:
        """How far its surface reaches from the object's frame along the unit direction
        ``d`` (object axes), m."""
        R = pin.Quaternion(np.array(self.quaternion)).matrix()
        e = R.T @ d  # in the solid's axes
        a, b, c = self.size
        if self.shape == "mesh":
            reach = float(np.max(self.hull.vertices @ e))
        elif self.shape == "box":
            reach = float(np.abs(e) @ (np.array([a, b, c]) / 2.0))
        elif self.shape == "sphere":
            reach = a
        elif self.shape == "cylinder":
            reach = a * math.hypot(e[0], e[1]) + b / 2.0 * abs(e[2])
        else:
            reach = a + b / 2.0 * abs(e[2])
        return reach + float(np.asarray(self.position) @ d)

    def ray(self, d: np.ndarray) -> np.ndarray:
        """(n,) how far from its own centre the unit directions ``d`` (n, 3; its own axes)
        leave the solid (convex: star-shaped about its centre)."""
        a, b, c = self.size
        ad = np.abs(d)
        with np.errstate(divide="ignore"):
            if self.shape == "mesh":  # the nearest of the hull's planes n . x + o = 0 ahead
                P = self.hull.planes
                along = d @ P[:, :3].T
                return np.min(np.where(along > 0.0, -P[:, 3] / along, np.inf), axis=1)
            if self.shape == "box":
                return 1.0 / np.max(ad / (np.array([a, b, c]) / 2.0), axis=1)
            if self.shape == "sphere":
                return np.full(len(d), a)
            rho = np.hypot(d[:, 0], d[:, 1])
            if self.shape == "cylinder":
                return 1.0 / np.maximum(rho / a, ad[:, 2] / (b / 2.0))
            # capsule: the side where the ray meets it within the length, else a cap's sphere
            side = a / rho
            on_side = side * ad[:, 2] <= b / 2.0
            h = b / 2.0 * ad[:, 2]  # |t d - (0, 0, +-b/2)| = a, the cap on the ray's side
            cap = h + np.sqrt(np.maximum(h * h - b * b / 4.0 + a * a, 0.0))
            return np.where(on_side, side, cap)


@dataclass(frozen=True)
class UrdfBody:
    """A rigid URDF read as one body (:func:`load_urdf_body`)."""

    mass: float  #: the links' masses summed, kg
    com: np.ndarray  #: (3,) the centre of mass in the root link's frame, m
    inertia: np.ndarray  #: (3, 3) about the centre of mass, the root link's axes, kg*m^2
    solids: tuple[Solid, ...]  #: every <collision> geometry, in the object's frame
    file: str  #: the file read (absolute path), "" for an XML string


def _urdf_numbers(text, count: int, what: str, err) -> np.ndarray:
    try:
        x = np.array([float(t) for t in str(text).split()])
    except ValueError:
        x = np.array([])
    if x.shape != (count,) or not np.isfinite(x).all():
        raise err(f"{what} must be {count} finite number{'s' * (count > 1)}, got {text!r}")
    return x


def _urdf_origin(element, what: str, err) -> pin.SE3:
    """The placement of an element's <origin> (identity without one)."""
    o = element.find("origin")
    if o is None:
        return pin.SE3.Identity()
    xyz = _urdf_numbers(o.get("xyz", "0 0 0"), 3, f"{what}: <origin xyz>", err)
    rpy = _urdf_numbers(o.get("rpy", "0 0 0"), 3, f"{what}: <origin rpy>", err)
    return pin.SE3(pin.rpy.rpyToMatrix(*rpy), xyz)


def _urdf_text(urdf: str, what: str, err) -> tuple[str, Path | None, str]:
    """(the XML, its file or None, how the messages name it) of ``urdf``: XML text (it
    starts with '<') or a file: a path, ``file://``, ``package://`` or another scheme of
    :data:`wb_sim.robot.URDF_SCHEMES`, as ``urdf_path`` takes."""
    from .errors import WbSimError
    from .robot import URDF_SCHEMES

    if not isinstance(urdf, str) or not urdf.strip():
        raise err(f"{what}: a urdf object needs its URDF (a file, or its XML)")
    if urdf.lstrip().startswith("<"):
        size = len(urdf.encode())
        if size > MAX_URDF_BYTES:
            raise err(f"{what}: the URDF string has {size} bytes, more than {MAX_URDF_BYTES} "
                      f"({MAX_URDF_BYTES // 2 ** 20} MiB)")
        return urdf, None, "the URDF string"
    scheme, sep, rest = urdf.partition(":")
    if urdf.startswith("file://"):
        p = Path(urdf.removeprefix("file://"))
    elif sep and len(scheme) > 1:
        if scheme not in URDF_SCHEMES:
            raise err(f"{what}: unknown scheme '{scheme}:' in URDF {urdf!r}; give a file path, "
                      f"file://, or " + ", ".join(f for _, f in URDF_SCHEMES.values()))
        try:
            p = Path(URDF_SCHEMES[scheme][0](rest))
        except WbSimError as e:
            raise err(f"{what}: URDF {urdf!r}: {e}") from None
    else:
        p = Path(urdf)
    if not p.is_file():
        why = "does not exist" if not p.exists() else "is not a regular file"
        raise err(f"{what}: URDF file '{p}' {why}; give an existing file (an absolute path, "
                  f"package://, or one relative to the parameter file that names it)")
    size = p.stat().st_size
    if size > MAX_URDF_BYTES:
        raise err(f"{what}: URDF file '{p}' has {size} bytes, more than {MAX_URDF_BYTES} "
                  f"({MAX_URDF_BYTES // 2 ** 20} MiB)")
    try:
        return p.read_text(), p.resolve(), f"URDF file '{p.resolve()}'"
    except (OSError, UnicodeDecodeError) as e:
        raise err(f"{what}: cannot read URDF file '{p}': {e}") from None


def _urdf_mesh_path(filename: str, file: Path | None, what: str, err) -> str:
    """A <mesh filename> (after :func:`wb_sim.robot.resolve_mesh_uris`) as a path."""
    from .errors import WbSimError
    from .robot import package_share_dir

    if filename.startswith("file://"):
        return filename.removeprefix("file://")
    if filename.startswith("package://"):
        package, _, rel = filename.removeprefix("package://").partition("/")
        try:
            return str(package_share_dir(package) / rel)
        except WbSimError as e:
            raise err(f"{what}: mesh {filename!r}: {e}") from None
    if "://" in filename:
        raise err(f"{what}: mesh {filename!r}: give a file path, file:// or package://")
    if not Path(filename).is_absolute() and file is None:
        raise err(f"{what}: mesh {filename!r} is relative in a URDF string: give its absolute "
                  f"path, file:// or package://")
    return filename


def load_urdf_body(urdf: str, max_vertices: int, what: str, err) -> UrdfBody:
    """A rigid URDF (every joint fixed) read as one free body: its mass the links' summed,
    its inertia theirs combined at the combined centre of mass (pinocchio's ``Inertia``
    placed by each link's placement in the root link's frame, summed), its shape every
    ``<collision>`` geometry of every link (box, sphere, cylinder, capsule; a mesh: its
    convex hull, :func:`load_mesh_hull`, as a mesh object's) at its placement in the
    object's frame: the centre of mass, the root link's axes. ``urdf``: a file (a path,
    ``file://``, ``package://``...) or the XML. ``err`` (naming ``what`` and the file) for a
    file too large (:data:`MAX_URDF_BYTES`), too many links (:data:`MAX_URDF_LINKS`) or
    geometries (:data:`MAX_URDF_GEOMETRIES`), meshes of more than :data:`MAX_MESH_BYTES`
    together, all checked before pinocchio or coal read them; a joint that is not fixed (an articulated object is a robot); no <inertial> with
    mass; no <collision>; a bad number."""
    import xml.etree.ElementTree as ET

    from .robot import resolve_mesh_uris

    xml, file, origin = _urdf_text(urdf, what, err)
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as e:
        raise err(f"{what}: {origin} is not well-formed XML: {e}") from None
    if root.tag != "robot":
        raise err(f"{what}: {origin} is not a URDF: its root element is <{root.tag}>, "
                  f"expected <robot>")
    links = root.findall("link")
    if not links:
        raise err(f"{what}: {origin} has no <link>")
    if len(links) > MAX_URDF_LINKS:
        raise err(f"{what}: {origin} has {len(links)} links, more than {MAX_URDF_LINKS}: a "
                  f"free object is one rigid body; merge its links")
    for j in root.findall("joint"):
        if j.get("type") != "fixed":
            raise err(f"{what}: {origin}: joint '{j.get('name')}' is {j.get('type')!r}; a "
                      f"urdf object is one rigid body (every joint fixed): an articulated "
                      f"object is a robot without a controller, list it under 'robots:' in a "
                      f"world file (docs/world.md)")
    collisions = [(link, c) for link in links for c in link.findall("collision")]
    if not collisions:
        raise err(f"{what}: {origin} has no <collision> geometry: the object would touch "
                  f"nothing; give its links <collision> elements")
    if len(collisions) > MAX_URDF_GEOMETRIES:
        raise err(f"{what}: {origin} has {len(collisions)} <collision> geometries, more than "
                  f"{MAX_URDF_GEOMETRIES} (each is one more shape in every contact query of "
                  f"the object): merge them")
    inertials = [(link, link.find("inertial")) for link in links
                 if link.find("inertial") is not None]
    if not inertials:
        raise err(f"{what}: {origin} has no <inertial> in any link: a free object needs a "
                  f"mass and an inertia; give its links <inertial> elements")
    try:
        model = pin.buildModelFromXML(xml, pin.JointModelFreeFlyer())
    except (RuntimeError, ValueError) as e:
        raise err(f"{what}: pinocchio cannot read {origin}: {e}") from None

    def placed(link) -> pin.SE3:  # root link <- link
        name = link.get("name")
        return model.frames[model.getFrameId(name, pin.FrameType.BODY)].placement

    total = pin.Inertia.Zero()
    for link, inertial in inertials:
        where = f"{what}: {origin}: link '{link.get('name')}': <inertial>"
        mass = inertial.find("mass")
        m = 0.0 if mass is None else float(_urdf_numbers(mass.get("value"), 1,
                                                         f"{where} <mass value>", err)[0])
        if m < 0:
            raise err(f"{where}: mass {m:g} kg; a mass must be >= 0")
        I = np.zeros((3, 3))
        inertia = inertial.find("inertia")
        if inertia is not None:
            v = {k: float(_urdf_numbers(inertia.get(k, "0"), 1, f"{where} <inertia {k}>",
                                        err)[0])
                 for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
            I = np.array([[v["ixx"], v["ixy"], v["ixz"]], [v["ixy"], v["iyy"], v["iyz"]],
                          [v["ixz"], v["iyz"], v["izz"]]])
            ev = np.linalg.eigvalsh(I)
            if ev[0] < -1e-9 * max(1.0, abs(ev[-1])):
                raise err(f"{where}: the inertia is not positive semi-definite (eigenvalues "
                          f"{ev.tolist()} kg*m^2)")
        frame = placed(link) * _urdf_origin(inertial, where, err)  # root <- inertial frame
        total += frame.act(pin.Inertia(m, np.zeros(3), I))
    if not total.mass > 0:
        raise err(f"{what}: {origin}: its links' <inertial> masses sum to {total.mass:g} kg; a "
                  f"free object's mass must be > 0")
    com = np.array(total.lever)
    to_object = pin.SE3(np.eye(3), -com)  # object (centre of mass, root axes) <- root
    resolved = ET.fromstring(resolve_mesh_uris(xml, file))
    meshes = {}  # <mesh> element -> its file, all sized before any is read
    for link in resolved.findall("link"):
        for k, c in enumerate(link.findall("collision")):
            shape = c.find("geometry/mesh")
            if shape is not None:
                where = f"{what}: {origin}: link '{link.get('name')}': <collision> {k}"
                path = _urdf_mesh_path(shape.get("filename", ""), file, where, err)
                if not Path(path).is_absolute() and file is not None:
                    path = str(file.parent / path)
                meshes[shape] = path
    size = sum(Path(m).stat().st_size for m in set(meshes.values()) if Path(m).is_file())
    if size > MAX_MESH_BYTES:
        raise err(f"{what}: {origin}: its collision meshes have {size} bytes together, more "
                  f"than {MAX_MESH_BYTES} ({MAX_MESH_BYTES // 2 ** 20} MiB): decimate them "
                  f"(only their convex hulls are used)")
    solids = []
    for link in resolved.findall("link"):
        for k, c in enumerate(link.findall("collision")):
            where = f"{what}: {origin}: link '{link.get('name')}': <collision> {k}"
            at = to_object * placed(link) * _urdf_origin(c, where, err)
            geometry = c.find("geometry")
            shape = geometry[0] if geometry is not None and len(geometry) else None
            kind = None if shape is None else shape.tag
            if kind == "mesh":
                scale = tuple(_urdf_numbers(shape.get("scale", "1 1 1"), 3,
                                            f"{where}: <mesh scale>", err))
                if any(not s > 0 for s in scale):
                    raise err(f"{where}: <mesh scale> {list(scale)}: each factor must be > 0 "
                              f"(a mirrored mesh is not supported)")
                path = meshes[shape]
                hull = load_mesh_hull(path, scale, max_vertices, where, err)
                at = at * pin.SE3(np.eye(3), hull.com)
                solid = dict(shape="mesh", size=scale, mesh=str(Path(path).resolve()),
                             hull=hull)
            elif kind in ("box", "sphere", "cylinder", "capsule"):
                if kind == "box":
                    size = _urdf_numbers(shape.get("size"), 3, f"{where}: <box size>", err)
                else:
                    r = _urdf_numbers(shape.get("radius"), 1, f"{where}: <{kind} radius>", err)
                    length = [0.0] if kind == "sphere" else _urdf_numbers(
                        shape.get("length"), 1, f"{where}: <{kind} length>", err)
                    size = np.array([r[0], length[0], 0.0])
                needed = 3 if kind == "box" else 1 if kind == "sphere" else 2
                if any(not s > 0 for s in size[:needed]):
                    raise err(f"{where}: <{kind}> sizes must be > 0, got "
                              f"{size[:needed].tolist()}")
                solid = dict(shape=kind, size=tuple(float(x) for x in size))
            else:
                raise err(f"{where}: geometry {kind!r} is not supported (box, sphere, "
                          f"cylinder, capsule, mesh are)")
            solids.append(Solid(position=tuple(float(x) for x in at.translation),
                                quaternion=tuple(float(x) for x in
                                                 pin.Quaternion(at.rotation).coeffs()),
                                **solid))
    return UrdfBody(mass=float(total.mass), com=com, inertia=np.array(total.inertia),
                    solids=tuple(solids), file=str(file) if file is not None else "")


@dataclass(frozen=True)
class FreeObject:
    """A free rigid body (values as checked; frozen, compared by value). Its frame is at
    its centre (the centre of mass), the shape's axes."""

    name: str
    shape: str  #: one of :data:`SHAPES`
    size: tuple[float, float, float]  #: see :data:`SHAPES`, m
    mass: float  #: kg, > 0
    #: inertia about the centre of mass, body axes, kg*m^2, row by row
    inertia: tuple[tuple[float, float, float], ...]
    position: tuple[float, float, float]  #: initial centre, world, m
    quaternion: tuple[float, float, float, float]  #: initial orientation x, y, z, w
    linear_velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)  #: initial, world, m/s
    angular_velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)  #: initial, world, rad/s
    mesh: str = ""  #: a mesh object's file (absolute path); "" for the primitives
    #: a mesh object's solid (its hull about the centre of mass), None for the primitives
    hull: MeshHull | None = field(default=None, compare=False, repr=False)
    urdf: str = ""  #: a urdf object's file (absolute path); "" for an XML string and the others
    #: a urdf object's solids (its links' <collision> geometries), () for the others
    parts: tuple[Solid, ...] = ()

    def spatial_inertia(self) -> pin.Inertia:
        return pin.Inertia(self.mass, np.zeros(3), np.array(self.inertia))

    def solids(self) -> tuple[Solid, ...]:
        """Its convex solids in its frame: itself, or a urdf object's parts."""
        if self.shape == "urdf":
            return self.parts
        return (Solid(self.shape, self.size, mesh=self.mesh, hull=self.hull),)

    def lowest(self, normal: np.ndarray, R: np.ndarray | None = None) -> float:
        """How far its surface reaches from its centre along ``-normal`` (its support
        distance), with orientation ``R`` (default: the initial one), m."""
        R = pin.Quaternion(np.array(self.quaternion)).matrix() if R is None else R
        d = R.T @ -np.asarray(normal, dtype=float)  # the direction in body axes
        return max(s.support(d) for s in self.solids())

    def surface_points(self, count: int = SURFACE_SAMPLES) -> np.ndarray:
        """(count, 3) points of its surface in body axes: where the rays from its centre
        along ``count`` directions spread evenly over the sphere (a Fibonacci lattice)
        leave the solid (its surface is star-shaped about the centre: every shape is
        convex). What the heightfield is queried at (spacing about ``4 r / sqrt(count)``
        for a body of radius r: 4 mm on a 0.2 m box at the default). A urdf object's: each
        of its solids' (``count`` split among them, at least 100 each)."""
        solids = self.solids()
        each = count if len(solids) == 1 else max(count // len(solids), 100)
        k = np.arange(each) + 0.5
        z = 1.0 - 2.0 * k / each
        rho = np.sqrt(1.0 - z * z)
        phi = np.pi * (1.0 + 5.0 ** 0.5) * k
        d = np.stack([rho * np.cos(phi), rho * np.sin(phi), z], axis=1)
        out = []
        for s in solids:
            M = s.placement()
            out.append((d * s.ray(d)[:, None]) @ M.rotation.T + M.translation)
        return out[0] if len(out) == 1 else np.concatenate(out)


def terrain_penetration(obj: FreeObject, terrain) -> tuple[float, int]:
    """(how deep, m, and which item) the solid ``obj`` at its initial pose reaches into the
    terrain (wb_sim.terrain.Terrain, or None): item 1 + b for terrain box b, item 0 for the
    heightfield; (0.0, -1) where it is clear of them. Its depth is that of its deepest
    :meth:`FreeObject.surface_points` under the item's surface (the terrain's own signed
    distance, plain numpy: an edge of a terrain box poking into a face between two points,
    at most their spacing deep, is missed). Not coal's exact signed distance of the two
    convex shapes: a query with a ``coal.Box`` set coal's process-wide Box support static
    (see :func:`wb_sim.contact.manifold.box_shape`, which now avoids it), and a check
    needs no GJK. The ground plane is :meth:`FreeObject.lowest`'s."""
    if terrain is None:
        return 0.0, -1
    R = pin.Quaternion(np.array(obj.quaternion)).matrix()
    P = obj.surface_points() @ R.T + np.array(obj.position)
    worst, which = 0.0, -1
    items = [(1 + k, box_query(box, P)[0]) for k, box in enumerate(terrain.boxes)]
    if terrain.heightfield is not None:
        items.append((0, terrain.heightfield.query(P)[0]))
    for item, sdf in items:
        deepest = -float(np.min(sdf))
        if deepest > worst:
            worst, which = deepest, item
    return worst, which


def solid_inertia(shape: str, size, mass: float) -> np.ndarray:
    """The 3 x 3 inertia about the centre of a homogeneous solid ``shape`` of ``size``
    (:data:`SHAPES`) and ``mass``, body axes, kg*m^2."""
    a, b, c = (float(x) for x in size)
    m = float(mass)
    if shape == "box":
        return np.diag([m * (b * b + c * c), m * (a * a + c * c), m * (a * a + b * b)]) / 12.0
    if shape == "sphere":
        return np.eye(3) * 0.4 * m * a * a
    if shape == "cylinder":
        r, h = a, b
        ixx = m * (3.0 * r * r + h * h) / 12.0
        return np.diag([ixx, ixx, 0.5 * m * r * r])
    # capsule: a cylinder (radius r, length h) and two half-spheres at its ends, same density
    r, h = a, b
    vc, vs = math.pi * r * r * h, 4.0 / 3.0 * math.pi * r ** 3
    mc, ms = m * vc / (vc + vs), m * vs / (vc + vs)  # the two half-spheres: ms together
    izz = 0.5 * mc * r * r + 0.4 * ms * r * r
    # a half-sphere's centroid is 3r/8 from its flat face; about its own centroid its
    # transverse moment is (83/320) m r^2; shifted to the capsule's centre
    half = ms / 2.0
    d = h / 2.0 + 3.0 * r / 8.0
    ixx = mc * (3.0 * r * r + h * h) / 12.0 + 2.0 * (half * 83.0 / 320.0 * r * r + half * d * d)
    return np.diag([ixx, ixx, izz])


def _numbers(x, n: int, what: str, err) -> tuple[float, ...]:
    try:
        if np.iscomplexobj(x):
            raise ValueError("complex value")
        out = np.asarray(x, dtype=float).reshape(-1)
    except (TypeError, ValueError) as e:
        raise err(f"{what} must be {n} real numbers: {e}") from None
    if out.shape != (n,):
        raise err(f"{what} must be {n} numbers, got {out.size}")
    if not np.isfinite(out).all():
        raise err(f"{what} has non-finite entries: {out.tolist()}")
    return tuple(float(v) for v in out)


def make_object(name, shape, size, mass, position, *, rpy=None, quaternion=None,
                inertia=None, linear_velocity=(0.0, 0.0, 0.0),
                angular_velocity=(0.0, 0.0, 0.0), mesh: str = "", urdf: str = "",
                max_mesh_vertices: int = MAX_MESH_VERTICES, where: str = "spawn_object",
                err=CommandError) -> FreeObject:
    """A checked :class:`FreeObject`. ``err`` (CommandError for a call, ConfigError for the
    parameters; ``where`` names the call or the parameter) for a bad name or shape (with the
    closest shape), a size that is not positive where the shape needs it, a mass that is not
    > 0, an inertia that is not symmetric positive definite or breaks the triangle
    inequality (default: the homogeneous solid's), a non-finite pose or twist. A ``mesh``
    object's file is read here (:func:`load_mesh_hull`: its refusals), its size is the
    file's scale and its inertia defaults to its hull's, homogeneous. A ``urdf`` object's
    URDF (a file or its XML) is read here (:func:`load_urdf_body`: its refusals): its size
    is 0, 0, 0 (or None), its mass 0 (or None: its links' summed), its inertia defaults to
    its links' combined at their centre of mass, which its ``position`` places."""
    if not isinstance(name, str) or not name or "/" in name or " " in name:
        raise err(f"{where}: an object's name must be a non-empty string without '/' or "
                  f"spaces, got {name!r}")
    if shape not in SHAPES:
        raise err(f"{where}: object '{name}': unknown shape {shape!r}"
                  f"{did_you_mean(str(shape), SHAPES)}; the shapes are: "
                  + "; ".join(f"{k} (size: {v})" for k, v in SHAPES.items()))
    if shape == "urdf":
        return _urdf_object(name, size, mass, position, rpy, quaternion, inertia,
                            linear_velocity, angular_velocity, mesh, urdf, max_mesh_vertices,
                            where, err)
    if urdf:
        raise err(f"{where}: object '{name}': a {shape} takes no URDF; give shape 'urdf' to "
                  f"use it")
    size = _numbers(size, 3, f"{where}: object '{name}': size", err)
    hull = None
    if (shape == "mesh") != bool(mesh):
        raise err(f"{where}: object '{name}': " + (
            "a mesh object needs its file (objects.meshes, spawn_object(mesh=...))"
            if shape == "mesh" else f"a {shape} takes no mesh file (got {mesh!r}); give shape "
            f"'mesh' to use it"))
    if shape == "mesh" and any(not s > 0 for s in size):
        raise err(f"{where}: object '{name}': a mesh's size is its scale along x, y, z: each "
                  f"must be > 0 (1, 1, 1: the file's coordinates, in m), got {list(size)}")
    if shape == "mesh":
        hull = load_mesh_hull(mesh, size, max_mesh_vertices, f"{where}: object '{name}'", err)
        mesh = str(Path(mesh).resolve())
    needed = 3 if shape in ("box", "mesh") else 1 if shape == "sphere" else 2
    if any(not s > 0 for s in size[:needed]):
        raise err(f"{where}: object '{name}': a {shape}'s size is {SHAPES[shape]}: the first "
                  f"{needed} must be > 0, got {list(size)}")
    if shape == "capsule" and size[1] == 0:
        raise err(f"{where}: object '{name}': a capsule needs a length > 0; use a sphere")
    size = size[:needed] + (0.0,) * (3 - needed)
    (m,) = _numbers([mass], 1, f"{where}: object '{name}': mass (kg)", err)
    if not m > 0:
        raise err(f"{where}: object '{name}' has mass {m:g} kg; a free object's mass must be "
                  f"> 0 (a body without mass has no dynamics)")
    if inertia is None and hull is not None:
        inertia_array = m / hull.volume * hull.unit_inertia
    elif inertia is None:
        inertia_array = solid_inertia(shape, size, m)
    else:
        inertia_array = _checked_inertia(inertia, name, where, err)
    return _placed(name, shape, size, m, inertia_array, position, rpy, quaternion,
                   linear_velocity, angular_velocity, where, err, mesh=mesh, hull=hull)


def _checked_inertia(inertia, name: str, where: str, err) -> np.ndarray:
    """A 3 x 3 inertia (9 numbers) checked: symmetric, positive definite, a rigid body's."""
    inertia_array = np.asarray(_numbers(inertia, 9, f"{where}: object '{name}': inertia "
                                        f"(3 x 3, kg*m^2)", err)).reshape(3, 3)
    scale = float(np.abs(inertia_array).max())
    if not np.allclose(inertia_array, inertia_array.T, rtol=0.0, atol=1e-12 * scale):
        raise err(f"{where}: object '{name}': the inertia is not symmetric: "
                  f"{inertia_array.tolist()}")
    ev = np.linalg.eigvalsh(inertia_array)
    if not ev[0] > 0:
        raise err(f"{where}: object '{name}': the inertia is not positive definite "
                  f"(eigenvalues {ev.tolist()} kg*m^2)")
    if ev[0] + ev[1] < ev[2] * (1.0 - 1e-12):
        raise err(f"{where}: object '{name}': the inertia's principal moments "
                  f"{ev.tolist()} break the triangle inequality (no rigid body has them)")
    return inertia_array


def _urdf_object(name, size, mass, position, rpy, quaternion, inertia, linear_velocity,
                 angular_velocity, mesh, urdf, max_mesh_vertices, where, err) -> FreeObject:
    """:func:`make_object`'s urdf object."""
    what = f"{where}: object '{name}'"
    if mesh:
        raise err(f"{what}: a urdf object takes no mesh file (got {mesh!r}); its links' "
                  f"<collision> meshes are its shape")
    if size is not None and any(_numbers(size, 3, f"{what}: size", err)):
        raise err(f"{what}: a urdf object's size is 0, 0, 0 (its links' <collision> "
                  f"geometry is its shape), got {list(size)}")
    if mass is not None and _numbers([mass], 1, f"{what}: mass (kg)", err)[0] != 0:
        raise err(f"{what}: a urdf object's mass is its links' <inertial> masses summed: give "
                  f"0 (or None), got {mass!r}")
    body = load_urdf_body(urdf, max_mesh_vertices, what, err)
    if inertia is None:
        inertia = body.inertia.reshape(-1)
        if not np.linalg.eigvalsh(body.inertia)[0] > 0:
            raise err(f"{what}: the links' <inertia> combined at their centre of mass is not "
                      f"positive definite (eigenvalues {np.linalg.eigvalsh(body.inertia).tolist()}"
                      f" kg*m^2): a free body needs rotational inertia about every axis; give "
                      f"its links <inertia> values")
    return _placed(name, "urdf", (0.0, 0.0, 0.0), body.mass,
                   _checked_inertia(inertia, name, where, err), position, rpy, quaternion,
                   linear_velocity, angular_velocity, where, err,
                   urdf=body.file, parts=body.solids)


def _placed(name, shape, size, m, inertia_array, position, rpy, quaternion, linear_velocity,
            angular_velocity, where, err, **solid) -> FreeObject:
    """The :class:`FreeObject` of checked solid values, its pose and twist checked."""
    pos = _numbers(position, 3, f"{where}: object '{name}': position (m, world)", err)
    if quaternion is not None:
        quat = np.array(_numbers(quaternion, 4, f"{where}: object '{name}': quaternion "
                                                f"(x, y, z, w)", err))
        norm = float(np.linalg.norm(quat))
        if not norm > 1e-9:
            raise err(f"{where}: object '{name}': the quaternion is zero")
        quat = quat / norm
    else:
        rpy = (0.0, 0.0, 0.0) if rpy is None else rpy
        angles = _numbers(rpy, 3, f"{where}: object '{name}': rpy (rad)", err)
        quat = pin.Quaternion(pin.rpy.rpyToMatrix(*angles)).coeffs()
    lin = _numbers(linear_velocity, 3, f"{where}: object '{name}': linear_velocity (m/s, "
                                       f"world)", err)
    ang = _numbers(angular_velocity, 3, f"{where}: object '{name}': angular_velocity (rad/s, "
                                        f"world)", err)
    return FreeObject(name=name, shape=shape, size=size, mass=m,
                      inertia=tuple(tuple(float(x) for x in row) for row in inertia_array),
                      position=pos, quaternion=tuple(float(x) for x in quat),
                      linear_velocity=lin, angular_velocity=ang, **solid)


def configured_objects(p) -> tuple[FreeObject, ...]:
    """The objects of the parameters ``objects.*`` (``p``: the validated group)."""
    out = []
    for i, name in enumerate(p.names):
        def group(values, k, default=None):
            return values[k * i:k * i + k] if values else default
        out.append(make_object(
            name, p.shapes[i], group(p.sizes, 3), p.mass[i], group(p.positions, 3),
            rpy=group(p.rpy, 3), inertia=group(p.inertia, 6) and _full(group(p.inertia, 6)),
            linear_velocity=group(p.linear_velocities, 3, (0.0, 0.0, 0.0)),
            angular_velocity=group(p.angular_velocities, 3, (0.0, 0.0, 0.0)),
            mesh=p.meshes[i] if p.meshes else "", urdf=p.urdfs[i] if p.urdfs else "",
            max_mesh_vertices=p.max_mesh_vertices,
            where=f"parameter 'objects.names' ({name})", err=ConfigError))
    return tuple(out)


def _full(six) -> list:
    ixx, ixy, ixz, iyy, iyz, izz = six
    return [ixx, ixy, ixz, ixy, iyy, iyz, ixz, iyz, izz]


def check_object_group(p) -> None:
    """The objects' lists agree in length (their values: :func:`configured_objects`)."""
    n = len(p.names)
    if len(set(p.names)) != n:
        raise ConfigError("parameter 'objects.names': names must be unique")
    for key, values, per, optional in (("shapes", p.shapes, 1, False),
                                       ("sizes", p.sizes, 3, False),
                                       ("mass", p.mass, 1, False),
                                       ("positions", p.positions, 3, False),
                                       ("rpy", p.rpy, 3, True),
                                       ("inertia", p.inertia, 6, True),
                                       ("linear_velocities", p.linear_velocities, 3, True),
                                       ("angular_velocities", p.angular_velocities, 3, True),
                                       ("meshes", p.meshes, 1, True),
                                       ("urdfs", p.urdfs, 1, True)):
        if optional and not values:
            continue
        if len(values) != per * n:
            raise ConfigError(
                f"parameter 'objects.{key}' has {len(values)} entries but 'objects.names' "
                f"names {n} object(s): give {per} per object" + (" (or [])" if optional else ""))


def _stepping_root() -> pin.JointModelComposite:
    root = pin.JointModelComposite(2)
    root.addJoint(pin.JointModelTranslation())
    root.addJoint(pin.JointModelSpherical())
    return root


def append_objects(model: pin.Model, objects, stepping: bool) -> list[int]:
    """Append each object to ``model`` (in place): a free joint under the universe (the
    stepping model's translation + spherical composite, or a free-flyer), its body and a
    body frame named after it. Returns the joints' ids."""
    ids = []
    for obj in objects:
        joint = pin.JointModelComposite(_stepping_root()) if stepping else \
            pin.JointModelFreeFlyer()
        jid = model.addJoint(0, joint, pin.SE3.Identity(), obj.name)
        model.appendBodyToJoint(jid, obj.spatial_inertia(), pin.SE3.Identity())
        model.addBodyFrame(obj.name, jid, pin.SE3.Identity(), 0)
        ids.append(jid)
    return ids


def object_geometries(model: pin.Model, objects, joint_ids) -> dict[str, list]:
    """{object name: [its pinocchio GeometryObject]} on the appended joints of ``model``
    (the form :func:`wb_sim.contact.geometry.geometry_by_link` gives the links')."""
    out = {}
    for obj, jid in zip(objects, joint_ids):
        fid = model.getFrameId(obj.name, pin.FrameType.BODY)
        solids = obj.solids()
        out[obj.name] = [pin.GeometryObject(obj.name if len(solids) == 1 else f"{obj.name}_{k}",
                                            int(jid), int(fid), s.placement(), s.geometry())
                         for k, s in enumerate(solids)]
    return out


def unknown_object(call: str, name, objects) -> CommandError:
    names = [o.name for o in objects]
    return CommandError(f"{call}: no object named {name!r}{did_you_mean(str(name), names)}; "
                        f"objects: {', '.join(names) or 'none'}")
