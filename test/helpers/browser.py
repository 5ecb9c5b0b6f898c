"""Headless Chromium for the viewer's browser tests (test/tools/test_viewer.py, the node's
viewer in test/ros/test_workflow.py): driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``, no extra Python package), with software WebGL; the page's
three.js scene read with JavaScript, screenshots as RGB arrays.

Call :func:`helpers.extras.require_browser` first: it skips (or fails, in CI) without
Chromium or meshcat.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import numpy as np

from helpers.extras import CHROMIUM

#: headless Chromium with software WebGL (SwiftShader through ANGLE): there is no GPU
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--mute-audio", "--hide-scrollbars", "--window-size=1280,800",
]
WIDTH, HEIGHT = 1280, 800


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


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pixels that differ between two screenshots, (H, W) bool."""
    return np.abs(a.astype(int) - b.astype(int)).sum(axis=-1) > 30


def central(mask: np.ndarray) -> float:
    """Fraction of the central region (half the width, 80 % of the height) set in ``mask``."""
    h, w = mask.shape
    return float(mask[h // 10: h - h // 10, w // 4: w - w // 4].mean())
