"""The meshcat viewer (wb_sim.tools.viewer).

Unit tests (no browser): the viewer table and its errors, the contact force
arrows' geometry, the visual geometry of a primitive and a mesh robot, lazy
imports, and the meshcat server's lifetime.

Browser tests: Debian's headless Chromium opens the page the viewer serves on
localhost, driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``,
no extra Python package): wait until the scene is in the page, take screenshots
with everything shown, with the arrows hidden, and with the robot hidden too;
the differences are the arrows' and the robot's pixels. The screenshots are
kept in ``test/artifacts/``. Skipped without Chromium or meshcat, unless
``WB_SIM_REQUIRE_BROWSER=1`` (CI), which turns the skip into a failure.
"""

from __future__ import annotations

import base64
import fcntl
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import wb_sim
from wb_sim.errors import ConfigError
from wb_sim.errors import CommandError
from wb_sim.tools.viewer import (ARROW_HEAD_LENGTH, ARROW_MIN_LENGTH, VIEWERS, arrow_transforms,
                           arrows_transforms, make_viewer, rotation_z_to, visual_geometry)

CHROMIUM = os.environ.get("WB_SIM_CHROMIUM", "/usr/bin/chromium")
from helpers import ARTIFACTS, ROOT
#: headless Chromium with software WebGL (SwiftShader through ANGLE): there is no GPU
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--mute-audio", "--hide-scrollbars", "--window-size=1280,800",
]
WIDTH, HEIGHT = 1280, 800


@pytest.fixture(scope="module")
def humanoid_sim():
    from wb_sim.controllers import PDGravityController
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    ctrl = PDGravityController(sim.robot, sim.state.joint_positions, 200.0, 5.0)
    for _ in range(300):  # standing on its feet (gravity torques alone let the knees fold)
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
    return sim


# ---------------------------------------------------------------- no browser needed

def test_make_viewer_none_is_none(humanoid_sim):
    assert make_viewer("none", humanoid_sim.robot) is None
    assert set(VIEWERS) == {"none", "meshcat"}


def test_unknown_viewer_lists_the_valid_ones(humanoid_sim):
    with pytest.raises(ConfigError, match=r"unknown viewer 'rviz'.*valid: meshcat, none"):
        make_viewer("rviz", humanoid_sim.robot)


def test_missing_meshcat_says_how_to_install(humanoid_sim, monkeypatch):
    monkeypatch.setitem(sys.modules, "meshcat", None)  # import meshcat -> ImportError
    with pytest.raises(ConfigError, match=r"pip install wb_sim\[viewer\]"):
        make_viewer("meshcat", humanoid_sim.robot)


@pytest.mark.parametrize("kw", [{"rate_hz": 0.0}, {"force_scale_m_per_N": -1.0}])
def test_bad_viewer_parameters(humanoid_sim, kw):
    with pytest.raises(ConfigError, match=next(iter(kw))):
        make_viewer("meshcat", humanoid_sim.robot, **kw)


def test_import_does_not_import_meshcat():
    code = ("import sys, wb_sim, wb_sim.tools.viewer; "
            "print(sorted(m for m in ('meshcat', 'zmq', 'umsgpack', 'pinocchio.visualize') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert out.stdout.strip() == "[]"


def test_rotation_z_to():
    rng = np.random.default_rng(0)
    for d in [*rng.normal(size=(20, 3)), [0, 0, 1], [0, 0, -1], [1e-9, 0, -1], [1, 0, 0]]:
        d = np.asarray(d, float) / np.linalg.norm(d)
        R = rotation_z_to(d)
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
        assert np.linalg.det(R) == pytest.approx(1.0)
        np.testing.assert_allclose(R[:, 2], d, atol=1e-12)


def _apply(T, point):
    return (T @ np.append(point, 1.0))[:3]


def test_arrow_from_a_known_force():
    p, F, scale = np.array([0.1, -0.2, 0.0]), np.array([3.0, 0.0, 4.0]), 0.02  # |F| = 5 N
    shaft, head = arrow_transforms(p, F, scale)
    length, d = 5.0 * scale, F / 5.0  # 0.1 m along (0.6, 0, 0.8)
    # unit geometries along y, centred: the shaft starts at the point, the head ends at the tip
    np.testing.assert_allclose(_apply(shaft, [0, -0.5, 0]), p, atol=1e-12)
    np.testing.assert_allclose(_apply(shaft, [0, 0.5, 0]), _apply(head, [0, -0.5, 0]), atol=1e-12)
    np.testing.assert_allclose(_apply(head, [0, 0.5, 0]), p + scale * F, atol=1e-12)
    np.testing.assert_allclose(shaft[:3, 1], d * (length - ARROW_HEAD_LENGTH), atol=1e-12)
    np.testing.assert_allclose(head[:3, 1], d * ARROW_HEAD_LENGTH, atol=1e-12)
    # radii are not scaled (the head is full size on an arrow longer than two heads)
    for T in (shaft, head):
        np.testing.assert_allclose(np.linalg.norm(T[:3, [0, 2]], axis=0), [1.0, 1.0])
        assert abs(T[:3, 0] @ d) < 1e-12 and abs(T[:3, 2] @ d) < 1e-12
    assert shaft[3].tolist() == head[3].tolist() == [0, 0, 0, 1]


def test_short_down_and_zero_arrows():
    p = np.zeros(3)
    shaft, head = arrow_transforms(p, [0.0, 0.0, -1.0], 0.02)  # 2 cm down: half of it is head
    np.testing.assert_allclose(_apply(head, [0, 0.5, 0]), [0, 0, -0.02], atol=1e-12)
    np.testing.assert_allclose(_apply(shaft, [0, -0.5, 0]), p, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(head[:3, 0]), 0.01 / ARROW_HEAD_LENGTH)
    assert arrow_transforms(p, [0.0, 0.0, 0.0], 0.002) is None
    assert arrow_transforms(p, [0.0, 0.0, 0.9 * ARROW_MIN_LENGTH / 0.002], 0.002) is None
    assert arrow_transforms(p, [0.0, 0.0, 1.1 * ARROW_MIN_LENGTH / 0.002], 0.002) is not None
    assert arrow_transforms(p, [np.nan, 0.0, 1.0], 0.002) is None


def test_batch_of_arrows_is_arrow_by_arrow():
    rng = np.random.default_rng(1)
    P, F = rng.normal(size=(12, 3)), rng.normal(scale=30.0, size=(12, 3))
    F[3], F[5], F[7] = 0.0, [0.0, 0.0, -50.0], [0.0, 0.0, 0.1]  # none, straight down, too small
    visible, shafts, heads = arrows_transforms(P, F, 0.002)
    assert visible.tolist() == [i not in (3, 7) for i in range(12)]
    for i in np.flatnonzero(visible):
        shaft, head = arrow_transforms(P[i], F[i], 0.002)
        np.testing.assert_allclose(shafts[i], shaft, atol=1e-15)
        np.testing.assert_allclose(heads[i], head, atol=1e-15)
        np.testing.assert_allclose(_apply(head, [0, 0.5, 0]), P[i] + 0.002 * F[i], atol=1e-12)


def test_transforms_are_packed_as_umsgpack_packs_them():
    require("meshcat")  # umsgpack and zmq come with it
    import umsgpack
    import zmq
    from wb_sim.tools.viewer import _Connection
    conn = _Connection(zmq, umsgpack, "tcp://127.0.0.1:1")  # never sent to
    try:
        T = np.random.default_rng(2).normal(size=(3, 4, 4))
        paths = ["/meshcat/a", "/meshcat/wb_sim/robot/visuals/l_foot_0", "/meshcat/é"]
        for (kind, path, payload), p, Tk in zip(conn.transform_frames(paths, T), paths, T):
            lowered = {"type": "set_transform", "path": p, "matrix": list(Tk.T.flatten())}
            assert payload == umsgpack.packb(lowered)  # what meshcat's SetTransform sends
            assert (kind, path) == (b"set_transform", p.encode())
    finally:
        conn.close()


def _dae(tmp_path, *primitives) -> str:
    parts = "".join(f'<triangles count="1">{"".join(f"<input semantic={s!r}/>" for s in sem)}'
                    f"<p>0 0 0</p></triangles>" for sem in primitives)
    path = tmp_path / f"m{len(list(tmp_path.iterdir()))}.dae"
    path.write_text('<COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema">'
                    f"<library_geometries><geometry><mesh>{parts}</mesh></geometry>"
                    "</library_geometries></COLLADA>")
    return str(path)


def test_collada_files_that_meshcat_cannot_merge(tmp_path):
    from wb_sim.tools.viewer import _dae_loads_in_meshcat
    vn, vnt = ("VERTEX", "NORMAL"), ("VERTEX", "NORMAL", "TEXCOORD")
    assert _dae_loads_in_meshcat(_dae(tmp_path, vn, vn, ("VERTEX",)))  # normals are computed
    assert _dae_loads_in_meshcat(_dae(tmp_path, vnt, vnt))
    assert not _dae_loads_in_meshcat(_dae(tmp_path, vn, vnt))  # e.g. ANYmal's base
    assert not _dae_loads_in_meshcat(str(tmp_path / "missing.dae"))


def test_visual_geometry_of_the_humanoid_is_primitives(humanoid_sim):
    gm = visual_geometry(humanoid_sim.robot)
    assert gm.ngeoms == humanoid_sim.robot.urdf_xml.count("<visual>") > 20
    assert all(g.meshPath.upper() in ("BOX", "CYLINDER", "SPHERE") for g in gm.geometryObjects)


def test_visual_geometry_of_icub_is_meshes():
    robot = wb_sim.RobotModel.from_urdf("icub-models:iCubGazeboV2_5")
    gm = visual_geometry(robot)  # package://iCub/meshes/... resolved next to the URDF
    assert gm.ngeoms > 30
    for g in gm.geometryObjects:
        assert g.meshPath.endswith(".stl") and Path(g.meshPath).is_file(), g.meshPath


# ---------------------------------------------------------------- meshcat server, browser

def require(what: str) -> None:
    """Skip without Chromium or meshcat; fail instead with WB_SIM_REQUIRE_BROWSER=1."""
    why = None
    if "meshcat" in what and importlib.util.find_spec("meshcat") is None:
        why = "meshcat is not installed (pip install wb_sim[viewer])"
    elif "chromium" in what and not os.access(CHROMIUM, os.X_OK):
        why = f"no browser: {CHROMIUM} not found (apt-get install chromium)"
    if why:
        if os.environ.get("WB_SIM_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{why}; WB_SIM_REQUIRE_BROWSER=1 requires it", pytrace=False)
        pytest.skip(why)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie has exited


def _wait_dead(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_server_stops_with_close_and_with_a_killed_parent(humanoid_sim):
    require("meshcat")
    viewer = make_viewer("meshcat", humanoid_sim.robot)
    pid = viewer.server_pid
    assert _alive(pid) and viewer.url.startswith("http://127.0.0.1:")
    viewer.close()
    viewer.close()  # idempotent
    assert _wait_dead(pid)
    # a parent that dies by SIGKILL (no atexit) does not leave its server behind
    code = ("import wb_sim, wb_sim.tools.viewer as v, time; "
            "sim = wb_sim.Simulator.from_yaml(wb_sim.config_path('humanoid')); "
            "w = v.MeshcatViewer(sim.robot); print(w.server_pid, flush=True); time.sleep(600)")
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        server = int(parent.stdout.readline())
        assert _alive(server)
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
    assert _wait_dead(server), f"meshcat server {server} outlived its parent"


def test_second_viewer_on_the_same_server_and_background_thread(humanoid_sim):
    require("meshcat")
    sim = humanoid_sim
    with make_viewer("meshcat", sim.robot) as owner:
        with make_viewer("meshcat", sim.robot, zmq_url=owner.zmq_url, rate_hz=200.0) as guest:
            assert guest.url == owner.url and guest.server_pid is None
            with pytest.raises(CommandError, match="q must have shape"):
                guest.show(sim.q[:-1], np.zeros((0, 3)), np.zeros((0, 3)))
            with pytest.raises(CommandError, match="2 contact positions but 3 forces"):
                guest.show(sim.q, np.zeros((2, 3)), np.zeros((3, 3)))
            calls, shows = [], []
            real_show = guest.show
            guest.show = lambda *a: (shows.append(a[0].copy()), real_show(*a))
            c = sim.contact_points_state()
            q = sim.q.copy()

            def snapshot():
                calls.append(1)
                if len(calls) == 5:
                    q[7] += 0.1  # one change after four identical snapshots
                return q.copy(), c.position, c.force

            guest.start(snapshot)
            deadline = time.monotonic() + 30.0
            while len(calls) < 12 and time.monotonic() < deadline:
                time.sleep(0.01)
            guest.close()
            n = len(calls)
            time.sleep(0.05)
            assert len(calls) == n >= 12  # stopped
            assert len(shows) == 2  # the first state, and the one change
            assert shows[1][7] == pytest.approx(shows[0][7] + 0.1)
        assert owner.server_pid is not None and _alive(owner.server_pid)  # the guest left it


def _high_fd(fd: int) -> int:
    """``fd`` moved to a number >= 10, so that the shell's redirections to 3 and 4
    cannot overwrite it."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4)."""

    def __init__(self, url: str, profile: Path):
        to_chrome_r, self._to_chrome = map(_high_fd, os.pipe())
        self._from_chrome, from_chrome_w = map(_high_fd, os.pipe())
        self.log = profile.with_name("chromium.log")
        self._log = self.log.open("wb")
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}', CHROMIUM,
             *CHROMIUM_FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}", url],
            pass_fds=(to_chrome_r, from_chrome_w), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self._log, start_new_session=True)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf, self._id = b"", 0
        try:
            targets = self.call("Target.getTargets")["targetInfos"]
            page = next(t for t in targets if t["type"] == "page")
            self.session = self.call("Target.attachToTarget", targetId=page["targetId"],
                                     flatten=True)["sessionId"]
            self.call("Emulation.setDeviceMetricsOverride", self.session, width=WIDTH,
                      height=HEIGHT, deviceScaleFactor=1, mobile=False)
        except BaseException:
            self.close()
            raise

    def call(self, method: str, session: str | None = None, timeout: float = 60.0, **params):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                    raise TimeoutError(f"Chromium did not answer {method} within {timeout} s; "
                                   f"its log:\n{self._stderr_tail()}")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium exited: {self._stderr_tail()}")
            self._buf += chunk

    def evaluate(self, expression: str):
        r = self.call("Runtime.evaluate", self.session, expression=expression,
                      returnByValue=True, awaitPromise=True)
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 90.0):
        """Poll a JavaScript expression until it is truthy; its last value."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.2)
        raise TimeoutError(f"page not ready after {timeout} s: {expression} -> {value!r}")

    def screenshot(self, path: Path) -> np.ndarray:
        """Render two more frames, save a PNG of the page; its RGB pixels (H, W, 3) uint8."""
        self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
                      ".then(() => true)")
        data = base64.b64decode(self.call("Page.captureScreenshot", self.session,
                                          format="png")["data"])
        path.write_bytes(data)
        import matplotlib.image
        img = matplotlib.image.imread(path)  # float in [0, 1], RGBA
        return (img[..., :3] * 255).round().astype(np.uint8)

    def _stderr_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.call("Browser.close", timeout=10.0)
                except (OSError, RuntimeError, TimeoutError):
                    pass
                try:
                    self.proc.wait(10.0)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            # Chromium's helpers (zygote, GPU, renderer) are in its process group:
            # give them a moment to exit, then make sure
            deadline = time.monotonic() + 5.0
            try:
                while time.monotonic() < deadline:
                    os.killpg(self.proc.pid, 0)
                    time.sleep(0.05)
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._log.close()
            for fd in (self._to_chrome, self._from_chrome):
                os.close(fd)


#: JavaScript: the number of meshes under /meshcat/wb_sim in the page's three.js scene
MESHES_JS = """(() => {
  if (typeof viewer === 'undefined' || !viewer.scene_tree) return 0;
  let n = 0;
  viewer.scene_tree.find(['meshcat', 'wb_sim']).object.traverse(o => { if (o.isMesh) n += 1; });
  return n;
})()"""
#: the camera's position property (set by the viewer's first show)
CAMERA_JS = "viewer.camera.position.toArray()"


def _changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pixels that differ between two screenshots, (H, W) bool."""
    return np.abs(a.astype(int) - b.astype(int)).sum(axis=-1) > 30


def _central(mask: np.ndarray) -> float:
    """Fraction of the central region (half the width, 80 % of the height) set in ``mask``."""
    h, w = mask.shape
    return float(mask[h // 10: h - h // 10, w // 4: w - w // 4].mean())


def _browser_check(sim, name: str, tmp_path: Path) -> dict:
    """Show the simulator's state in the browser; screenshots (kept in
    test/artifacts/) with everything, without the arrows, without the robot; the
    fractions of the central region that the robot and the arrows cover."""
    require("meshcat chromium")
    ARTIFACTS.mkdir(exist_ok=True)
    c = sim.contact_points_state()
    with make_viewer("meshcat", sim.robot) as viewer:
        viewer.show(sim.q, c.position, c.force)
        n_arrows = sum(arrow_transforms(p, f, viewer.force_scale) is not None
                       for p, f in zip(c.position, c.force))
        meshes = viewer.visual_model.ngeoms + 2 * len(c.position)
        browser = Chromium(viewer.url, tmp_path / "chromium-profile")
        try:
            # the whole scene has reached the page, and the camera is placed
            browser.wait_for(f"{MESHES_JS} >= {meshes} && "
                             f"JSON.stringify({CAMERA_JS}) !== '[3,1,0]'")  # meshcat's default
            full = browser.screenshot(ARTIFACTS / f"viewer_{name}.png")
            viewer.set_visibility(contact_forces=False)
            browser.wait_for("!viewer.scene_tree.find(['meshcat', 'wb_sim', 'contact_forces'])"
                             ".object.visible")
            no_arrows = browser.screenshot(ARTIFACTS / f"viewer_{name}_no_arrows.png")
            viewer.set_visibility(robot=False)
            browser.wait_for("!viewer.scene_tree.find(['meshcat', 'wb_sim', 'robot'])"
                             ".object.visible")
            empty = browser.screenshot(ARTIFACTS / f"viewer_{name}_empty.png")
        finally:
            browser.close()
    arrows = _changed(full, no_arrows)
    green = (full[..., 1].astype(int) - np.maximum(full[..., 0], full[..., 2])) > 40
    return {"robot": _central(_changed(no_arrows, empty)), "arrows": _central(arrows),
            "green_arrows": float((arrows & green).sum() / max(arrows.sum(), 1)),
            "n_arrows": n_arrows, "full": full}


def test_humanoid_in_the_browser(humanoid_sim, tmp_path):
    r = _browser_check(humanoid_sim, "humanoid", tmp_path)
    assert r["n_arrows"] >= 4  # it stands on its feet
    assert r["full"].shape == (HEIGHT, WIDTH, 3)
    assert r["robot"] > 0.10, r  # the robot covers a good part of the centre
    assert r["arrows"] > 0.001, r  # arrows are drawn...
    assert r["green_arrows"] > 0.5, r  # ...and they are the green ones


def test_icub_meshes_in_the_browser(tmp_path):
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("icub"))
    for _ in range(300):
        sim.step(sim.gravity_torques())
    r = _browser_check(sim, "icub", tmp_path)
    assert r["n_arrows"] >= 4
    assert r["robot"] > 0.05, r
    assert r["arrows"] > 0.0005, r
    assert r["green_arrows"] > 0.5, r
