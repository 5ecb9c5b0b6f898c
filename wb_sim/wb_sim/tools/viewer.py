"""Browser view of the simulated robot (option ``viewer: meshcat``).

:class:`MeshcatViewer` draws the robot's URDF visual geometry (meshes when the
URDF has them, primitives otherwise) and the contact forces as arrows in a
`meshcat <https://github.com/meshcat-dev/meshcat-python>`_ scene, served on
localhost to any browser with WebGL; :attr:`MeshcatViewer.url` is the page.

It owns the meshcat server it starts: a child process that exits with
:meth:`MeshcatViewer.close`, at interpreter exit, and also when this process
dies without cleaning up (it watches a pipe from us). meshcat and zmq are
imported only when a viewer is made, so ``import wb_sim`` does not need them
(``pip install wb_sim[viewer]`` installs them).

Each :meth:`~MeshcatViewer.show` computes the forward kinematics on the
viewer's own pinocchio data and sends only the transforms that changed since
the last call, pipelined over one zmq socket (no round trip per object).
:meth:`~MeshcatViewer.start` does it from a daemon thread at ``rate_hz``.

Scene paths: ``/meshcat/wb_sim/robot/visuals/<geometry>`` (the robot),
``/meshcat/wb_sim/contact_forces/<i>/{shaft,head}`` (arrows), and meshcat's
``/Grid`` (our ground grid, on the ground plane), ``/Axes`` (world frame) and
``/Cameras/default``. meshcat 0.3's camera always looks at the scene's origin,
so the view is centred on the robot by drawing the world shifted (see
:meth:`MeshcatViewer.set_camera`).
"""

from __future__ import annotations

import atexit
import functools
import logging
import subprocess
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import pinocchio as pin

from ..errors import CommandError, ConfigError, WbSimError
from ..pin_views import new_data
from ..robot import RobotModel

log = logging.getLogger(__name__)

#: arrow shape: shaft radius, cone head length and radius (m; the head shrinks
#: with arrows shorter than two head lengths)
ARROW_SHAFT_RADIUS = 0.006
ARROW_HEAD_LENGTH = 0.035
ARROW_HEAD_RADIUS = 0.015
#: arrows shorter than this are hidden (m): at the default scale, forces below 0.5 N
ARROW_MIN_LENGTH = 1e-3
ARROW_COLOR = 0x20D040  # green: no robot of ours uses it

#: seconds to wait for the server to start, and for it to answer a message
SERVER_START_TIMEOUT = 30.0
REPLY_TIMEOUT = 10.0
#: messages sent ahead of the server's replies before sending blocks
MAX_PENDING = 500

#: a transform is re-sent when one of its entries changed by more than this
_TRANSFORM_TOL = 1e-6

#: three.js cylinders and cones lie along their y axis: this maps y to z
_Y_TO_Z = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])

# Run in the server process: exit when our stdin reaches EOF (the parent closed the
# pipe or died, even by SIGKILL), then run meshcat's server as ``meshcat-server`` would.
_SERVER_MAIN = """\
import os, sys, threading
def _watch_parent():
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)
threading.Thread(target=_watch_parent, daemon=True).start()
from meshcat.servers.zmqserver import main
main()
"""


class ViewerError(WbSimError, RuntimeError):
    """The meshcat server did not start, died, or does not answer."""


def _import_meshcat():
    """The meshcat modules, or a ConfigError saying how to install them."""
    try:
        with warnings.catch_warnings():  # meshcat 0.3.2 imports a deprecated pyzmq module
            warnings.filterwarnings("ignore", message="zmq.eventloop.ioloop is deprecated")
            import meshcat
            import meshcat.geometry
        import umsgpack
        import zmq
    except ImportError as e:
        raise ConfigError(
            f"parameter 'viewer': 'meshcat' needs the Python package meshcat ({e}); "
            f"install it with: pip install wb_sim[viewer]  (or: pip install meshcat)") from e
    return meshcat, umsgpack, zmq


def rotation_z_to(direction: np.ndarray) -> np.ndarray:
    """Rotation matrices taking the z axis to unit vectors: (3, 3) for one
    ``direction`` (3,), (n, 3, 3) for (n, 3)."""
    d = np.asarray(direction, dtype=float)
    one = d.ndim == 1
    d = d.reshape(-1, 3)
    # R = I + K + K^2 / (1 + d_z), K = skew(z x d); for d_z < 0, flip z first (a
    # half turn about x) to keep away from the division by zero at d = -z
    down = d[:, 2] < 0
    flip = np.array([1.0, -1.0, -1.0])
    e = np.where(down[:, None], d * flip, d)
    K = np.zeros((len(d), 3, 3))
    K[:, 0, 2], K[:, 1, 2] = e[:, 0], e[:, 1]
    K[:, 2, 0], K[:, 2, 1] = -e[:, 0], -e[:, 1]
    R = np.eye(3) + K + (K @ K) / (1.0 + e[:, 2])[:, None, None]
    R[down] *= flip[:, None]  # diag(flip) @ R
    return R[0] if one else R


def arrows_transforms(positions: np.ndarray, forces: np.ndarray, scale: float):
    """Vectorized :func:`arrow_transforms` of (n, 3) positions and forces:
    ``(visible (n,) bool, shafts (n, 4, 4), heads (n, 4, 4))``; the transforms
    of hidden arrows are unspecified."""
    P = np.asarray(positions, dtype=float).reshape(-1, 3)
    F = np.asarray(forces, dtype=float).reshape(-1, 3)
    length = np.linalg.norm(F, axis=1) * scale
    visible = np.isfinite(length) & (length >= ARROW_MIN_LENGTH)
    safe = np.where(visible, length, 1.0)
    d = np.where(visible[:, None], F * (scale / safe)[:, None], [0.0, 0.0, 1.0])
    R = rotation_z_to(d) @ _Y_TO_Z
    head = np.minimum(ARROW_HEAD_LENGTH, 0.5 * safe)
    shaft = safe - head
    shrink = head / ARROW_HEAD_LENGTH  # short arrows get a smaller head
    one = np.ones_like(shaft)
    shafts = np.zeros((len(P), 4, 4))
    heads = np.zeros((len(P), 4, 4))
    shafts[:, 3, 3] = heads[:, 3, 3] = 1.0
    shafts[:, :3, :3] = R * np.stack([one, shaft, one], axis=1)[:, None, :]
    shafts[:, :3, 3] = P + d * (0.5 * shaft)[:, None]
    heads[:, :3, :3] = R * np.stack([shrink, head, shrink], axis=1)[:, None, :]
    heads[:, :3, 3] = P + d * (shaft + 0.5 * head)[:, None]
    return visible, shafts, heads


def arrow_transforms(position, force, scale: float):
    """World transforms (4x4) of an arrow's shaft and head, or ``None`` when the
    arrow is shorter than :data:`ARROW_MIN_LENGTH` (or not finite).

    The arrow starts at ``position`` (m) and ends at ``position + scale * force``
    (``scale`` in m/N). The transforms apply to the unit geometries the viewer
    draws: a cylinder of height 1 and radius :data:`ARROW_SHAFT_RADIUS` and a cone
    of height 1 and base radius :data:`ARROW_HEAD_RADIUS`, both along their y axis
    and centred on their origin (three.js conventions). The head is
    :data:`ARROW_HEAD_LENGTH` long, or half the arrow if that is shorter.
    """
    visible, shafts, heads = arrows_transforms(position, force, scale)
    return (shafts[0], heads[0]) if visible[0] else None


def visual_geometry(robot: RobotModel) -> pin.GeometryModel:
    """pinocchio's visual GeometryModel of the robot's URDF
    (:meth:`wb_sim.robot.RobotModel.geometry_model`)."""
    return robot.geometry_model("visual")


@functools.lru_cache(maxsize=None)
def _dae_loads_in_meshcat(path: str) -> bool:
    """Whether meshcat 0.3's browser code can show this COLLADA file: it merges
    the file's parts into one geometry, which fails (the object is missing) when
    some parts have texture coordinates or vertex colours and others do not."""
    import xml.etree.ElementTree as ET
    kinds = set()
    try:
        for _, el in ET.iterparse(path):
            tag = el.tag.rsplit("}", 1)[-1]
            if tag in ("triangles", "polylist", "polygons", "tristrips", "trifans"):
                kinds.add(frozenset(i.get("semantic") for i in el
                                    if i.tag.endswith("input")) & {"TEXCOORD", "COLOR"})
            if tag in ("float_array", "p", "vcount", "triangles", "polylist", "polygons"):
                el.clear()  # keep memory low on big files
    except (OSError, ET.ParseError):
        return False
    return len(kinds) <= 1


class _Connection:
    """A zmq link to a meshcat server; also the ``window`` of a ``meshcat.Visualizer``.

    Messages are pipelined (a DEALER socket talking to the server's REP socket):
    :meth:`send_frames` returns once they are queued, and replies are counted
    as they come, blocking only when more than :data:`MAX_PENDING` are missing.
    """

    def __init__(self, zmq, umsgpack, zmq_url: str):
        self._zmq, self._pack = zmq, umsgpack.packb
        self.zmq_url = zmq_url
        self._sock = zmq.Context.instance().socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.connect(zmq_url)
        self._pending = 0
        self._prefix: dict[str, bytes] = {}  # packed set_transform head per path
        self.lock = threading.RLock()

    # meshcat.Visualizer calls window.send(command) for each command
    def send(self, command) -> None:
        m = command.lower()
        self.send_frames([(m["type"].encode(), m.get("path", "").encode(), self._pack(m))],
                         wait=True)

    def property_frames(self, path: str, key: str, value) -> tuple[bytes, bytes, bytes]:
        m = {"type": "set_property", "path": path, "property": key, "value": value}
        return b"set_property", path.encode(), self._pack(m)

    def transform_frames(self, paths: list[str], T: np.ndarray) -> list[tuple[bytes, bytes, bytes]]:
        """set_transform messages of the (k, 4, 4) transforms ``T``, packed as
        umsgpack would (a map; the matrix column-major, as 16 float64), but at once."""
        if not paths:
            return []
        k = len(paths)
        body = np.empty((k, 16), dtype=_MSGPACK_F64)
        body["tag"] = 0xCB
        body["x"] = np.asarray(T).transpose(0, 2, 1).reshape(k, 16)
        raw, n = body.tobytes(), body.itemsize * 16
        out = []
        for i, path in enumerate(paths):
            prefix = self._prefix.get(path)
            if prefix is None:
                packed = self._pack({"type": "set_transform", "path": path, "matrix": []})
                self._prefix[path] = prefix = packed[:-1] + b"\xdc\x00\x10"  # array of 16
            out.append((b"set_transform", path.encode(), prefix + raw[i * n:(i + 1) * n]))
        return out

    def send_frames(self, messages: list[tuple[bytes, bytes, bytes]], wait: bool = False) -> None:
        """Queue (type, path, payload) messages in order; ``wait``: until all are answered."""
        with self.lock:
            send, more = self._sock.send, int(self._zmq.SNDMORE)
            for kind, path, payload in messages:  # envelope delimiter, then REP's 3 frames
                send(b"", more)
                send(kind, more)
                send(path, more)
                send(payload)
            self._pending += len(messages)
            self._wait_replies(0 if wait else MAX_PENDING, collect=not wait)

    def request(self, what: bytes) -> bytes:
        """A one-frame request (``url``, ``get_scene``); its reply."""
        with self.lock:
            self._wait_replies(0)
            self._sock.send_multipart([b"", what])
            self._pending += 1
            return self._wait_replies(0)

    def _wait_replies(self, at_most: int, collect: bool = False,
                      timeout: float = REPLY_TIMEOUT) -> bytes:
        """Receive replies until at most ``at_most`` are missing (``collect``: and
        take those already there); the last reply."""
        reply = b""
        deadline = time.monotonic() + timeout
        while self._pending:
            if self._pending <= at_most:
                if not (collect and self._sock.poll(0)):
                    break
            else:
                left = deadline - time.monotonic()
                if left <= 0 or not self._sock.poll(int(left * 1000) + 1):
                    raise ViewerError(f"the meshcat server at {self.zmq_url} does not answer "
                                      f"({self._pending} replies missing after {timeout:g} s)")
            reply = self._sock.recv_multipart()[-1]
            self._pending -= 1
        return reply

    def close(self, flush_timeout: float = 0.0) -> None:
        """Close the socket, after waiting up to ``flush_timeout`` s for the replies."""
        with self.lock:
            if flush_timeout > 0:
                try:
                    self._wait_replies(0, timeout=flush_timeout)
                except ViewerError:
                    pass
            self._sock.close(linger=0)


#: a msgpack float64: tag 0xcb and a big-endian double
_MSGPACK_F64 = np.dtype([("tag", "u1"), ("x", ">f8")])


class _Server:
    """A meshcat server child process tied to our lifetime."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-c", _SERVER_MAIN], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self._atexit = functools.partial(_stop_process, self.proc)
        atexit.register(self._atexit)
        self.output: deque[str] = deque(maxlen=50)  # last lines, for error messages
        self.zmq_url = self.web_url = ""
        ready = threading.Event()
        threading.Thread(target=self._read_output, args=(ready,), name="meshcat-server-output",
                         daemon=True).start()
        if not ready.wait(SERVER_START_TIMEOUT) or not self.web_url:
            self.stop()
            tail = "\n".join(self.output)
            raise ViewerError(f"the meshcat server did not start within "
                              f"{SERVER_START_TIMEOUT:g} s; its output:\n{tail}")

    def _read_output(self, ready: threading.Event) -> None:
        # also drains the pipe for the server's whole life, so it never blocks on it
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.output.append(line)
            if line.startswith("zmq_url="):
                self.zmq_url = line.partition("=")[2]
            elif line.startswith("web_url="):
                self.web_url = line.partition("=")[2]
                ready.set()
        ready.set()  # EOF: the server exited

    def stop(self) -> None:
        atexit.unregister(self._atexit)
        _stop_process(self.proc)


def _stop_process(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for f in (proc.stdin, proc.stdout):
        if f is not None:
            try:
                f.close()
            except OSError:
                pass


class MeshcatViewer:
    """Browser view of a Simulator's robot (meshcat).

    Args:
        robot: the robot (``sim.robot``); its URDF's visual geometry is drawn.
        rate_hz: drawing rate of :meth:`start`, Hz.
        force_scale_m_per_N: arrow length per newton of contact force, m/N.
        zmq_url: a running meshcat server (``meshcat-server`` prints it) to draw
            into; ``None`` starts one, owned by this viewer.
        world_frame_axes: show the world frame's axes (red x, green y, blue z).
        ground_height, ground_normal: the ground plane (m, unit vector), where
            the grid is drawn.
        terrain: the simulator's terrain (``sim.terrain``: boxes, stairs, a
            heightfield), drawn as solids; None: the plane only.

    Raises:
        ConfigError: meshcat is not installed, or a parameter is out of range.
        ModelError: the visual geometry cannot be loaded (a missing mesh).
        ViewerError: the meshcat server does not start or answer.
    """

    def __init__(self, robot: RobotModel, *, rate_hz: float = 30.0,
                 force_scale_m_per_N: float = 0.002, zmq_url: str | None = None,
                 world_frame_axes: bool = True, ground_height: float = 0.0,
                 ground_normal=(0.0, 0.0, 1.0), terrain=None):
        if not rate_hz > 0:
            raise ConfigError(f"viewer rate_hz must be > 0, got {rate_hz}")
        if not force_scale_m_per_N >= 0:
            raise ConfigError(f"viewer force_scale_m_per_N must be >= 0, got {force_scale_m_per_N}")
        meshcat, umsgpack, zmq = _import_meshcat()
        self.robot = robot
        self.rate_hz = float(rate_hz)
        self.force_scale = float(force_scale_m_per_N)
        self.model = pin.Model(robot.model)
        self.data = new_data(self.model)
        self.visual_model = visual_geometry(robot)
        self.visual_data = self.visual_model.createData()
        self._scale = [np.diag([*g.meshScale, 1.0]) for g in self.visual_model.geometryObjects]
        self._thread: threading.Thread | None = None
        self._last_T: np.ndarray | None = None  # (G, 4, 4) last sent geometry transforms
        self._last_q: np.ndarray | None = None
        self._last_arrow_input: tuple[np.ndarray, np.ndarray] | None = None
        self._arrows: list[Any] = []  # per arrow: last sent (shaft, head) or None if hidden
        self._arrow_paths: list[tuple[str, str, str]] = []  # per arrow: node, shaft, head
        self._camera_set = False
        self._last_state: tuple[np.ndarray, np.ndarray] | None = None
        self._objects: tuple = ()  # the free objects drawn (wb_sim.objects.FreeObject)
        self._object_paths: list[str] = []
        self._last_object_poses: np.ndarray | None = None
        self._stop = threading.Event()
        self._closed = False
        self._server = _Server() if zmq_url is None else None
        try:
            #: the meshcat server's command socket, e.g. ``tcp://127.0.0.1:6000``
            self.zmq_url: str = zmq_url or self._server.zmq_url
            self._conn = _Connection(zmq, umsgpack, self.zmq_url)
            #: the page to open in a browser, e.g. ``http://127.0.0.1:7000/static/``
            self.url: str = (self._server.web_url if self._server else
                             self._conn.request(b"url").decode())
            self._vis = meshcat.Visualizer(window=self._conn)
            self._root = "wb_sim"
            self._load_scene(world_frame_axes, ground_height, np.asarray(ground_normal, float))
            self._load_terrain(terrain)
        except BaseException:
            self.close()
            raise
        log.info("meshcat viewer of '%s': open %s", robot.root_link, self.url)

    # ------------------------------------------------------------------ scene

    def _load_scene(self, axes: bool, ground_height: float, ground_normal: np.ndarray) -> None:
        import meshcat.geometry as mg
        from pinocchio.visualize import MeshcatVisualizer as PinMeshcat

        vis = self._vis
        vis[self._root].delete()  # a server we connect to may hold an old scene
        self._pin = PinMeshcat(self.model, None, self.visual_model, data=self.data,
                               visual_data=self.visual_data)
        self._pin.initViewer(viewer=vis)
        for k, g in enumerate(self.visual_model.geometryObjects):
            if g.meshPath.lower().endswith(".dae") and not _dae_loads_in_meshcat(g.meshPath):
                # send coal's triangles instead (no texture): pinocchio's loader does so
                # for a mesh file it does not know; those vertices are already scaled
                log.info("meshcat viewer: %s: sending triangles, meshcat cannot merge "
                         "this COLLADA file's parts", g.meshPath)
                g.meshPath += "#triangles"
                self._scale[k] = np.eye(4)
        self._pin.loadViewerModel(rootNodeName=f"{self._root}/robot")
        self._geom_paths = [self._path(self._pin.getViewerNodeName(g, pin.GeometryType.VISUAL))
                            for g in self.visual_model.geometryObjects]
        # The ground grid, in place of meshcat's: the same 20 m x 20 m with 0.5 m cells,
        # but in 0.5 m segments, because software WebGL (headless Chromium's SwiftShader)
        # drops whole lines that pass behind the camera, so the grid around the robot vanished.
        vis["/Grid"].set_object(mg.LineSegments(mg.PointsGeometry(_grid_segments(10.0, 0.5)),
                                                mg.LineBasicMaterial(color=0x909090)))
        vis["/Axes"].set_property("visible", bool(axes))
        n = ground_normal / np.linalg.norm(ground_normal)
        self._ground = np.eye(4)
        self._ground[:3, :3] = rotation_z_to(n)
        self._ground[:3, 3] = [0.0, 0.0, ground_height]
        self._view_offset(np.zeros(3))

    def _load_terrain(self, terrain) -> None:
        """The terrain's boxes and heightfield as grey solids under ``<root>/terrain``."""
        import meshcat.geometry as mg
        material = mg.MeshLambertMaterial(color=TERRAIN_COLOR)
        from ..terrain import heightfield_mesh, terrain_boxes
        for i, (size, T) in enumerate(terrain_boxes(terrain)):
            node = self._vis[f"{self._root}/terrain/box_{i}"]
            node.set_object(mg.Box(size.tolist()), material)
            node.set_transform(T)
        mesh = heightfield_mesh(terrain)
        if mesh is not None:
            self._vis[f"{self._root}/terrain/heightfield"].set_object(
                mg.TriangularMeshGeometry(*mesh), material)

    def _path(self, path: str) -> str:
        """The absolute scene path of ``path`` (relative to meshcat's root)."""
        return self._vis[path].path.lower()

    def _arrow_geometry(self, i: int) -> None:
        import meshcat.geometry as mg
        material = mg.MeshPhongMaterial(color=ARROW_COLOR)
        node = self._vis[f"{self._root}/contact_forces/{i}"]
        node["shaft"].set_object(mg.Cylinder(1.0, ARROW_SHAFT_RADIUS), material)
        node["head"].set_object(mg.Cylinder(1.0, radiusTop=0.0, radiusBottom=ARROW_HEAD_RADIUS),
                                material)
        node.set_property("visible", False)

    def _view_offset(self, target: np.ndarray) -> None:
        """Draw the world shifted by ``-target``: meshcat 0.3's camera always
        looks at (and orbits around) the scene's origin, so this puts ``target``
        at the centre of the view."""
        T = np.eye(4)
        T[:3, 3] = -target
        self._vis[self._root].set_transform(T)
        self._vis["/Axes"].set_transform(T)
        self._vis["/Grid"].set_transform(T @ self._ground)

    @property
    def server_pid(self) -> int | None:
        """Process id of the meshcat server this viewer started (None: not ours,
        or closed)."""
        return self._server.proc.pid if self._server is not None else None

    def set_visibility(self, *, robot: bool | None = None,
                       contact_forces: bool | None = None) -> None:
        """Show or hide the robot and the contact force arrows (None: unchanged)."""
        for name, visible in (("robot", robot), ("contact_forces", contact_forces)):
            if visible is not None:
                self._vis[f"{self._root}/{name}"].set_property("visible", bool(visible))

    def set_camera(self, target, position) -> None:
        """Look from ``position`` at ``target`` (world, m); the mouse then orbits
        around ``target``. The first :meth:`show` frames the robot this way."""
        target, position = np.asarray(target, float), np.asarray(position, float)
        self._view_offset(target)
        a, b, c = position - target  # in the camera's parent frame, y up (three.js)
        self._vis["/Cameras/default/rotated/<object>"].set_property("position", [a, c, -b])
        self._camera_set = True

    def _auto_camera(self, T: np.ndarray) -> None:
        """Frame the robot: look at the middle of its bounding box from the front
        left, a little above, from far enough for all of it to fit.

        The box holds the model's frames (soles to head, wherever the meshes'
        origins are) and the geometries' own bounding boxes when coal has them."""
        pin.updateFramePlacements(self.model, self.data)
        points = [M.translation for M in self.data.oMf[1:]] + list(T[:, :3, 3])
        for g, Tg in zip(self.visual_model.geometryObjects, T):
            try:
                g.geometry.computeLocalAABB()
                box = g.geometry.aabb_local
                lo, hi = np.array(box.min_), np.array(box.max_)
            except (AttributeError, RuntimeError):
                continue
            corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                                for z in (lo[2], hi[2])])
            points.extend(corners @ Tg[:3, :3].T + Tg[:3, 3])  # Tg includes the mesh scale
        points = np.array(points)
        lo, hi = points.min(axis=0), points.max(axis=0)
        size = max(float(np.max(hi - lo)), 0.3)
        target = 0.5 * (lo + hi)
        direction = np.array([1.0, 0.6, 0.3])
        self.set_camera(target, target + 1.1 * size * direction / np.linalg.norm(direction))

    # ------------------------------------------------------------------ drawing

    def show(self, q: np.ndarray, contact_positions: np.ndarray,
             contact_forces: np.ndarray, objects: tuple = (),
             object_poses: np.ndarray | None = None) -> None:
        """Draw now: the robot at configuration ``q`` (the robot's pinocchio layout, its
        nq: ``sim.q[:sim.robot.model.nq]``), and an arrow of length
        ``|F| * force_scale_m_per_N`` from each contact point (``(n, 3)`` world
        positions, m) along its force (``(n, 3)`` world forces exerted by the ground, N);
        the free ``objects`` (``sim.objects``) at ``object_poses`` (``sim.object_poses()``:
        (k, 7) rows [x, y, z, qx, qy, qz, qw]). Sends only what changed."""
        q = np.asarray(q, dtype=float)
        if q.shape != (self.model.nq,):
            raise CommandError(f"viewer: q must have shape ({self.model.nq},), got {q.shape}")
        P = np.asarray(contact_positions, dtype=float).reshape(-1, 3)
        F = np.asarray(contact_forces, dtype=float).reshape(-1, 3)
        if P.shape != F.shape:
            raise CommandError(f"viewer: {len(P)} contact positions but {len(F)} forces")
        if objects:
            object_poses = np.asarray(object_poses, dtype=float)
            if object_poses.shape != (len(objects), 7):
                raise CommandError(f"viewer: {len(objects)} objects need ({len(objects)}, 7) "
                                   f"poses, got {object_poses.shape}")
        with self._conn.lock:
            if self._closed:
                raise ViewerError("the viewer is closed")
            if self._server is not None and self._server.proc.poll() is not None:
                raise ViewerError(f"the meshcat server exited (code {self._server.proc.poll()}); "
                                  f"its output:\n" + "\n".join(self._server.output))
            paths, transforms, properties = [], [], []
            self._robot_updates(q, paths, transforms)
            self._arrow_updates(P, F, paths, transforms, properties)
            self._object_updates(tuple(objects), object_poses, paths, transforms)
            conn = self._conn
            conn.send_frames(conn.transform_frames(paths, transforms)
                             + [conn.property_frames(*p) for p in properties])

    def _robot_updates(self, q: np.ndarray, paths: list, transforms: list) -> None:
        if self._last_q is not None and np.array_equal(q, self._last_q):
            return
        self._last_q = q.copy()
        model, data, gm, gd = self.model, self.data, self.visual_model, self.visual_data
        pin.forwardKinematics(model, data, q)
        pin.updateGeometryPlacements(model, data, gm, gd)
        T = np.array([M.homogeneous for M in gd.oMg]).reshape(-1, 4, 4)
        T = np.matmul(T, self._scale) if len(T) else T
        if not self._camera_set and len(T):
            self._auto_camera(T)
        last = self._last_T
        changed = (range(len(T)) if last is None else
                   np.flatnonzero(np.abs(T - last).reshape(len(T), -1).max(axis=1) > _TRANSFORM_TOL))
        self._last_T = T
        for k in changed:
            paths.append(self._geom_paths[k])
            transforms.append(T[k])

    def _object_geometry(self, objects: tuple) -> None:
        """(Re)build the free objects' solids under ``<root>/objects`` (after a spawn or a
        delete the set changes): a node per object that its pose moves, its solid in a
        child node in the object's axes (three.js cylinders lie along y)."""
        import meshcat.geometry as mg
        self._vis[f"{self._root}/objects"].delete()
        material = mg.MeshLambertMaterial(color=OBJECT_COLOR)
        y_to_z = np.eye(4)
        y_to_z[:3, :3] = _Y_TO_Z
        self._object_paths = []
        for o in objects:
            node = self._vis[f"{self._root}/objects/{o.name}"]
            parts: list = []
            for solid in o.solids():  # itself, or a urdf object's <collision> geometries
                at = solid.placement().homogeneous
                a, b, c = solid.size
                if solid.shape == "mesh":  # its convex hull (what collides), about its centre
                    parts.append((mg.TriangularMeshGeometry(solid.hull.vertices,
                                                            solid.hull.faces), at))
                elif solid.shape == "box":
                    parts.append((mg.Box([a, b, c]), at))
                elif solid.shape == "sphere":
                    parts.append((mg.Sphere(a), at))
                else:  # cylinder, capsule: radius a, length b along z
                    parts.append((mg.Cylinder(b, a), at @ y_to_z))
                    if solid.shape == "capsule":
                        for sign in (1.0, -1.0):
                            T = np.eye(4)
                            T[2, 3] = sign * 0.5 * b
                            parts.append((mg.Sphere(a), at @ T))
            for i, (geometry, T) in enumerate(parts):
                node[f"part_{i}"].set_object(geometry, material)
                node[f"part_{i}"].set_transform(T)
            self._object_paths.append(self._path(f"{self._root}/objects/{o.name}"))
        self._objects = objects
        self._last_object_poses = None

    def _object_updates(self, objects: tuple, poses, paths: list, transforms: list) -> None:
        if objects != self._objects:
            self._object_geometry(objects)
        if not objects:
            return
        poses = np.asarray(poses, dtype=float)
        last = self._last_object_poses
        for k, row in enumerate(poses):
            if last is not None and np.abs(row - last[k]).max() <= _TRANSFORM_TOL:
                continue
            T = np.eye(4)
            T[:3, :3] = pin.Quaternion(row[3:7]).normalized().matrix()  # x, y, z, w
            T[:3, 3] = row[:3]
            paths.append(self._object_paths[k])
            transforms.append(T)
        self._last_object_poses = poses.copy()

    def _arrow_updates(self, P: np.ndarray, F: np.ndarray, paths: list, transforms: list,
                       properties: list) -> None:
        last_in = self._last_arrow_input
        if last_in is not None and np.array_equal(P, last_in[0]) and np.array_equal(F, last_in[1]):
            return
        self._last_arrow_input = (P.copy(), F.copy())
        while len(self._arrows) < len(P):
            i = len(self._arrows)
            self._arrow_geometry(i)
            node = self._path(f"{self._root}/contact_forces/{i}")
            self._arrow_paths.append((node, f"{node}/shaft", f"{node}/head"))
            self._arrows.append(None)
        visible, shafts, heads = arrows_transforms(P, F, self.force_scale)
        for i, last in enumerate(self._arrows):
            node, *parts = self._arrow_paths[i]
            if i >= len(P) or not visible[i]:
                if last is not None:
                    properties.append((node, "visible", False))
                self._arrows[i] = None
                continue
            Ts = (shafts[i], heads[i])
            for path, T, T_last in zip(parts, Ts, last or (None, None)):
                if T_last is None or np.abs(T - T_last).max() > _TRANSFORM_TOL:
                    paths.append(path)
                    transforms.append(T)
            if last is None:
                properties.append((node, "visible", True))
            self._arrows[i] = Ts

    # ------------------------------------------------------------------ background drawing

    def start(self, snapshot: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray] | None]
              ) -> None:
        """Draw from a daemon thread: every ``1 / rate_hz`` s, call ``snapshot()``
        and :meth:`show` its ``(q, contact_positions, contact_forces)`` or
        ``(q, contact_positions, contact_forces, objects, object_poses)``, unless
        they equal the last ones (or it returned ``None``).

        ``snapshot`` runs in the viewer's thread: it must return copies that the
        simulation thread does not modify (e.g. taken under the caller's lock).
        Errors are logged, at most once per kind, and drawing goes on.
        """
        if self._thread is not None:
            raise RuntimeError("the viewer is already started")
        if self._closed:
            raise ViewerError("the viewer is closed")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(snapshot,),
                                        name="wb_sim-meshcat-viewer", daemon=True)
        self._thread.start()

    def _run(self, snapshot) -> None:
        period = 1.0 / self.rate_hz
        reported: set[str] = set()
        next_t = time.monotonic()
        while not self._stop.is_set():
            try:
                state = snapshot()
                if state is not None:
                    q, P, F = (np.array(x, dtype=float) for x in state[:3])
                    objects, poses = (tuple(state[3]), np.array(state[4], dtype=float)) \
                        if len(state) > 3 else ((), np.zeros((0, 7)))
                    last = self._last_state
                    if (last is None or not np.array_equal(q, last[0])
                            or not np.array_equal(F, last[1]) or objects != last[2]
                            or not np.array_equal(poses, last[3])):
                        self.show(q, P, F, objects, poses)
                        self._last_state = (q, F, objects, poses)
            except Exception as e:  # keep drawing; the simulation must not notice
                if self._stop.is_set():
                    break
                kind = type(e).__name__
                if kind not in reported:
                    reported.add(kind)
                    log.warning("meshcat viewer: %s: %s (further %s errors not reported)",
                                kind, e, kind)
            next_t += period
            now = time.monotonic()
            if next_t < now:  # behind (a slow server): do not try to catch up
                next_t = now
            self._stop.wait(next_t - now)

    def close(self) -> None:
        """Stop drawing and the meshcat server this viewer started (idempotent)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=REPLY_TIMEOUT + 1.0)
        self._thread = None
        conn = getattr(self, "_conn", None)
        if conn is not None:
            with conn.lock:
                self._closed = True
                conn.close(flush_timeout=0.0 if self._server is not None else 1.0)
        self._closed = True
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> "MeshcatViewer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _grid_segments(half_size: float, cell: float) -> np.ndarray:
    """(3, 2k) float32 end points of the segments of a square grid in the z = 0
    plane, from -half_size to half_size, one segment per cell edge."""
    ticks = np.arange(-half_size, half_size + 0.5 * cell, cell)
    a, b = np.meshgrid(ticks, ticks[:-1], indexing="ij")  # line at a, segment from b to b + cell
    a, b = a.ravel(), b.ravel()
    zero = np.zeros_like(a)
    along_y = np.stack([np.stack([a, b, zero]), np.stack([a, b + cell, zero])], axis=-1)
    along_x = np.stack([np.stack([b, a, zero]), np.stack([b + cell, a, zero])], axis=-1)
    return np.concatenate([along_y, along_x], axis=1).reshape(3, -1).astype(np.float32)


#: RGB of the terrain's solids
TERRAIN_COLOR = 0xB0A890
#: the free objects' colour (orange)
OBJECT_COLOR = 0xE08030


#: viewer option ``viewer``: name -> class (``None``: no viewer)
VIEWERS: dict[str, type[MeshcatViewer] | None] = {"none": None, "meshcat": MeshcatViewer}


def contact_arrows(sim) -> tuple[np.ndarray, np.ndarray]:
    """(positions (n, 3), world forces (n, 3)) of every contact point of ``sim`` to
    draw: the contact surfaces' and, with whole-body collision, the links' points
    within the margin (the viewer draws a varying number of arrows)."""
    pts = sim.contact_points_state()
    if sim.collision is None:
        return pts.position, pts.force
    c = sim.collision_points_state()
    return np.vstack([pts.position, c.position]), np.vstack([pts.force, c.force])


def make_viewer(name: str, robot: RobotModel, **kw) -> MeshcatViewer | None:
    """The viewer called ``name`` in :data:`VIEWERS` for ``robot`` (``None`` for
    ``"none"``); keyword arguments go to its constructor."""
    if name not in VIEWERS:
        raise ConfigError(f"parameter 'viewer': unknown viewer {name!r}; "
                          f"valid: {', '.join(sorted(VIEWERS))}")
    cls = VIEWERS[name]
    return None if cls is None else cls(robot, **kw)
