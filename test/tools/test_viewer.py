"""The meshcat viewer (wb_sim.tools.viewer).

Unit tests (no browser): the viewer table and its errors, the contact force
arrows' geometry, the visual geometry of a primitive and a mesh robot, lazy
imports, and the meshcat server's lifetime.

Browser tests: Debian's headless Chromium opens the page the viewer serves on
localhost, driven over the DevTools protocol on a pipe (helpers/browser.py): wait
until the scene is in the page, take screenshots with everything shown, with the
arrows hidden, and with the robot hidden too; the differences are the arrows' and
the robot's pixels. The screenshots are kept in ``test/artifacts/``. Skipped
without Chromium or meshcat, unless ``WB_SIM_REQUIRE_BROWSER=1`` (CI), which turns
the skip into a failure (helpers.extras.require_browser).
"""

from __future__ import annotations

import os
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

from helpers import ARTIFACTS, ROOT
from helpers.browser import CAMERA_JS, HEIGHT, MESHES_JS, WIDTH, Chromium, central, changed
from helpers.extras import require_browser, require_robot_data


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
    require_browser("meshcat")  # umsgpack and zmq come with it
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
    require_robot_data("icub")
    robot = wb_sim.RobotModel.from_urdf("icub-models:iCubGazeboV2_5")
    gm = visual_geometry(robot)  # package://iCub/meshes/... resolved next to the URDF
    assert gm.ngeoms > 30
    for g in gm.geometryObjects:
        assert g.meshPath.endswith(".stl") and Path(g.meshPath).is_file(), g.meshPath


# ---------------------------------------------------------------- meshcat server, browser

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
    require_browser("meshcat")
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
    require_browser("meshcat")
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


def _browser_check(sim, name: str, tmp_path: Path) -> dict:
    """Show the simulator's state in the browser; screenshots (kept in
    test/artifacts/) with everything, without the arrows, without the robot; the
    fractions of the central region that the robot and the arrows cover."""
    require_browser("meshcat", "chromium")
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
    arrows = changed(full, no_arrows)
    green = (full[..., 1].astype(int) - np.maximum(full[..., 0], full[..., 2])) > 40
    robot = changed(no_arrows, empty)
    return {"robot": central(robot), "robot_mask": robot, "arrows": central(arrows),
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
    require_robot_data("icub")
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("icub"))
    for _ in range(300):
        sim.step(sim.gravity_torques())
    r = _browser_check(sim, "icub", tmp_path)
    assert r["n_arrows"] >= 4
    assert r["robot"] > 0.05, r
    assert r["arrows"] > 0.0005, r
    assert r["green_arrows"] > 0.5, r


@pytest.mark.parametrize("robot", ["anymal", "panda"])
def test_mesh_robots_are_framed_in_the_browser(robot, tmp_path):
    """Robots whose mesh origins sit far from their links' (ANYmal's, the Panda's) fill the
    view as the humanoid does: the camera looks at the bounding box of the frames and the
    meshes (issue 28: they used to come out tiny and far away). The robot's pixels span at
    least a third of the image's height and cover a good part of its centre."""
    require_robot_data(robot)
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path(robot))
    r = _browser_check(sim, robot, tmp_path)
    assert r["robot"] > 0.05, r
    ys = np.flatnonzero(r["robot_mask"].any(axis=1))
    span = (ys.max() - ys.min()) / r["robot_mask"].shape[0] if len(ys) else 0.0
    assert span > 1 / 3, f"{robot}: the robot spans {span:.2f} of the image's height"


def test_free_objects_in_the_browser(tmp_path):
    """The free objects (issue 31) in the page: one node per object at its pose (the
    matrix three.js holds equals the simulator's pose), its solid's parts, rebuilt when
    an object is spawned; the robot drawn from its own coordinates."""
    require_browser("meshcat", "chromium")
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
        "objects.names": ["crate", "ball"], "objects.shapes": ["box", "sphere"],
        "objects.sizes": [0.3, 0.2, 0.25, 0.1, 0.0, 0.0], "objects.mass": [5.0, 1.0],
        "objects.positions": [0.7, 0.0, 0.4, 0.5, 0.5, 0.3], "objects.rpy": [0.0, 0.0, 0.5,
                                                                          0.0, 0.0, 0.0]})
    for _ in range(50):
        sim.step(np.zeros(sim.nj))
    nq = sim.robot.model.nq
    from wb_sim.tools.viewer import contact_arrows

    def node(name):
        return f"viewer.scene_tree.find(['meshcat', 'wb_sim', 'objects', '{name}'])"

    with make_viewer("meshcat", sim.robot) as viewer:
        with pytest.raises(CommandError, match=r"2 objects need \(2, 7\) poses"):
            viewer.show(sim.q[:nq], *contact_arrows(sim), sim.objects, np.zeros((1, 7)))
        viewer.show(sim.q[:nq], *contact_arrows(sim), sim.objects, sim.object_poses())
        browser = Chromium(viewer.url, tmp_path / "chromium-profile")
        try:
            browser.wait_for(f"Object.keys({node('crate')}.children).length == 1 && "
                             f"Object.keys({node('ball')}.children).length == 1")
            for name in ("crate", "ball"):
                m = np.array(browser.evaluate(f"Array.from({node(name)}.object.matrix.elements)"),
                             dtype=float).reshape(4, 4).T  # three.js: column-major
                assert np.allclose(m, sim.object_pose(name).homogeneous, atol=1e-6), (name, m)
            # a spawned capsule: the set is rebuilt, a cylinder and two spheres
            sim.spawn_object("rod", "capsule", [0.05, 0.4, 0.0], 2.0, [0.0, 0.8, 0.3])
            viewer.show(sim.q[:nq], *contact_arrows(sim), sim.objects, sim.object_poses())
            browser.wait_for(f"Object.keys({node('rod')}.children).length == 3 && "
                             f"Math.abs({node('rod')}.object.matrix.elements[13] - 0.8) < 1e-6")
            m = np.array(browser.evaluate(f"Array.from({node('rod')}.object.matrix.elements)"),
                         dtype=float).reshape(4, 4).T
            assert np.allclose(m, sim.object_pose("rod").homogeneous, atol=1e-6)
            # a spawned mesh: its hull's triangles, one part
            from core.test_objects import BOX_FACES, _box_vertices, _write_mesh
            cube = _write_mesh(tmp_path / "cube.obj", _box_vertices((0.2, 0.2, 0.2)), BOX_FACES)
            sim.spawn_object("part", "mesh", [1.0, 1.0, 1.0], 1.0, [0.0, -0.8, 0.3], mesh=cube)
            viewer.show(sim.q[:nq], *contact_arrows(sim), sim.objects, sim.object_poses())
            browser.wait_for(f"Object.keys({node('part')}.children).length == 1 && "
                             f"Math.abs({node('part')}.object.matrix.elements[13] + 0.8) < 1e-6")
            # a spawned URDF object: one part per <collision> box, each at its placement
            from core.test_objects_urdf import TWO_BOXES
            pair = sim.spawn_object("pair", "urdf", None, None, [0.8, -0.8, 0.4], urdf=TWO_BOXES)
            viewer.show(sim.q[:nq], *contact_arrows(sim), sim.objects, sim.object_poses())
            # the parts arrive, then their placements (a busy machine showed them in between)
            placed = " && ".join(
                f"Math.abs({node('pair')}.children['part_{k}'].object.matrix.elements[{i}] - "
                f"{float(solid.placement().translation[j])!r}) < 1e-6"
                for k, solid in enumerate(pair.parts) for i, j in ((12, 0), (13, 1), (14, 2)))
            browser.wait_for(f"Object.keys({node('pair')}.children).length == 2 && {placed}")
            for k, solid in enumerate(pair.parts):
                m = np.array(browser.evaluate(f"Array.from({node('pair')}.children['part_{k}']"
                                              f".object.matrix.elements)"),
                             dtype=float).reshape(4, 4).T
                assert np.allclose(m, solid.placement().homogeneous, atol=1e-6), (k, m)
        finally:
            browser.close()
