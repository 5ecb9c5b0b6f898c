"""Free objects through the node (issue 31, the ROS side), over real DDS.

The node starts from the humanoid's parameters file plus two free objects (a 2 kg crate
dropped from 0.3 m, a ball resting on the ground) in lockstep; this test's controller
answers each joint state with efforts. The core, built from the same file and driven by
the same law:

* every ``/tf`` message carries world -> each object's frame, equal bit for bit to the
  core's ``object_poses()`` after the same steps; the ``objects`` markers (latched) give
  each object's shape and size in its frame;
* ``get_entities`` lists the robot and the objects; ``get_entity_state`` of an object
  equals the core's ``object_poses()`` / ``object_twist`` bit for bit;
  ``set_entity_state`` moves one and refuses one under the ground;
* ``spawn_entity`` (``wb_sim://box?size=...&mass=...``) adds a box that falls onto the
  ground and rests at half its height (within 1 mm); ``delete_entity`` takes it out of
  ``/tf`` and the markers; the errors (unknown name, duplicate, bad shape, bad mass) say
  what is wrong and the node goes on;
* a snapshot restored with the crate in mid-air continues bit for bit (joint states and
  the objects' TF);
* ``objects/<name>/odom`` (nav_msgs/Odometry): pose and twist (in the object's frame) equal
  the core's ``object_pose`` / ``object_twist`` bit for bit; made with a spawned object and
  removed with a deleted one.

Skipped without rclpy or simulation_interfaces unless ``WB_SIM_REQUIRE_ROS=1``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from helpers.extras import require_ros

require_ros("sensor_msgs.msg", "tf2_msgs.msg", "visualization_msgs.msg",
            "simulation_interfaces.srv", "wb_sim_interfaces.srv")

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from simulation_interfaces import msg as si_msg  # noqa: E402
from simulation_interfaces import srv as si  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402
from wb_sim_interfaces import srv as wb  # noqa: E402

import wb_sim  # noqa: E402
from helpers import PKG  # noqa: E402
from helpers.ros import HUMANOID_YAML, LockstepController, SimSetup, stamp_ns  # noqa: E402

OK = si_msg.Result.RESULT_OK
SNAP_OK = wb.SaveSnapshot.Response.RESULT_OK
TF_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
OBJECTS = {"names": ["crate", "ball"], "shapes": ["box", "sphere"],
           "sizes": [0.2, 0.2, 0.2, 0.1, 0.0, 0.0], "mass": [2.0, 1.0],
           "positions": [0.8, 0.0, 0.3, 0.6, 0.5, 0.1]}
NAMES = tuple(OBJECTS["names"])
EFFORTS = np.random.default_rng(31).normal(0.0, 3.0, (400, 64))


def _law(i, qj, vj, q):
    return {"effort": -60.0 * qj - 2.0 * vj + EFFORTS[i, :len(qj)]}


@pytest.fixture(scope="module")
def params_file(tmp_path_factory):
    doc = yaml.safe_load(HUMANOID_YAML.read_text())
    doc["wb_sim"]["ros__parameters"]["objects"] = OBJECTS
    path = tmp_path_factory.mktemp("objects_params") / "humanoid_objects.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def s(tmp_path_factory, params_file):
    # sync.timeout_s 0: the node waits for its controller however long the test takes
    setup = SimSetup(tmp_path_factory.mktemp("objects_ros"), "sync.mode:=lockstep",
                     "real_time_factor:=0.0", "sync.timeout_s:=0.0", params_file=params_file)
    yield setup
    setup.close()


def _call(s, kind, service, timeout: float = 30.0, **fields):
    return s.ros.call(kind, f"/wb_sim/{service}", kind.Request(**fields), timeout)


def _object_rows(tf_msgs, names) -> dict[int, dict[str, np.ndarray]]:
    """{stamp: {object: [x, y, z, qx, qy, qz, qw]}} of the /tf messages."""
    out = {}
    for m in tf_msgs:
        rows = {}
        for t in m.transforms:
            if t.child_frame_id in names:
                assert t.header.frame_id == "world"
                tr, r = t.transform.translation, t.transform.rotation
                rows[t.child_frame_id] = np.array([tr.x, tr.y, tr.z, r.x, r.y, r.z, r.w])
        out[stamp_ns(m.transforms[0])] = rows
    return out


def _run(s, cycles, reset=True, names=NAMES):
    """``cycles`` lockstep cycles of the law: (states, stamps, {cycle: object rows})."""
    tf = s.ros.record(TFMessage, "/tf", TF_QOS)
    ctl = LockstepController(s, _law, cycles, reset=reset)
    states = ctl.run(s)
    stamps = ctl.stamps[:len(states)]
    s.ros.spin_until(lambda: any(stamp_ns(m.transforms[0]) >= stamps[-1] - 10_000_000
                                 for m in tf.msgs), 10.0)
    rows = _object_rows(tf.msgs, names)
    s.ros.stop_recording(tf)
    index = {t: i for i, t in enumerate(stamps)}
    return states, stamps, {index[t]: r for t, r in rows.items() if t in index}


def _core(params_file):
    return wb_sim.Simulator.from_yaml(params_file)


def test_object_tf_and_entity_state_equal_the_cores(s, params_file):
    """60 lockstep cycles: the objects' /tf rows equal the core's bit for bit (the crate
    falling: the test could fail); then get_entity_state of each object equals the core."""
    states, _, tf = _run(s, 60)
    core = _core(params_file)
    assert len(tf) >= 5, sorted(tf)
    for i in range(len(states)):
        qj = states[i][0]
        assert np.array_equal(qj, core.joint_positions), i
        if i in tf:
            assert set(tf[i]) == set(NAMES), (i, tf[i])
            poses = core.object_poses()
            for k, name in enumerate(core.objects):
                assert np.array_equal(tf[i][name.name], poses[k]), (i, name.name)
        if i < len(states) - 1:
            core.step(_law(i, core.joint_positions, core.joint_velocities, core.q)["effort"])
    crate = core.object_poses()[0]
    assert 0.1 < crate[2] < 0.3 - 0.01  # it fell during the run
    res = _call(s, si.GetEntities, "get_entities")
    assert res.result.result == OK and list(res.entities) == ["wb_humanoid", *NAMES]
    for k, name in enumerate(NAMES):
        st = _call(s, si.GetEntityState, "get_entity_state", entity=name).state
        p, o = st.pose.position, st.pose.orientation
        assert np.array_equal([p.x, p.y, p.z, o.x, o.y, o.z, o.w], core.object_poses()[k])
        lin, ang = core.object_twist(name)
        tw = st.twist
        assert np.array_equal([tw.linear.x, tw.linear.y, tw.linear.z], lin)
        assert np.array_equal([tw.angular.x, tw.angular.y, tw.angular.z], ang)
    assert core.object_twist("crate")[0][2] < -0.5  # falling: the twist is compared too
    res = _call(s, si.GetEntityState, "get_entity_state", entity="crat")
    assert res.result.result == si_msg.Result.RESULT_NOT_FOUND
    assert "did you mean 'crate'" in res.result.error_message


def _odometry(msgs) -> dict[int, tuple[np.ndarray, np.ndarray, str, str]]:
    """{stamp: ([x, y, z, qx, qy, qz, qw], [twist linear, angular], frame, child)}."""
    out = {}
    for m in msgs:
        p, o = m.pose.pose.position, m.pose.pose.orientation
        t = m.twist.twist
        out[stamp_ns(m)] = (np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w]),
                            np.array([t.linear.x, t.linear.y, t.linear.z,
                                      t.angular.x, t.angular.y, t.angular.z]),
                            m.header.frame_id, m.child_frame_id)
    return out


def test_object_odometry_equals_the_cores(s, params_file):
    """objects/<name>/odom (nav_msgs/Odometry, issue 31) over 40 lockstep cycles from the
    reset: world -> the object's frame, its pose the core's object_pose (translation) and
    object_poses row (quaternion) bit for bit, its twist the core's object_twist in the
    object's frame (R^T lin, R^T ang) bit for bit, every cycle (the crate falling)."""
    from nav_msgs.msg import Odometry
    recs = {n: s.ros.record(Odometry, f"objects/{n}/odom", TF_QOS) for n in NAMES}
    assert s.ros.spin_until(lambda: all(s.ros.node.count_publishers(f"/objects/{n}/odom")
                                        for n in NAMES), 10.0)
    ctl = LockstepController(s, _law, 40)
    states = ctl.run(s)
    stamps = ctl.stamps[:len(states)]
    s.ros.spin_until(lambda: all(stamps[-1] in _odometry(r.msgs) for r in recs.values()), 10.0)
    odom = {n: _odometry(r.msgs) for n, r in recs.items()}
    s.ros.stop_recording(*recs.values())
    core = _core(params_file)
    seen = 0
    for i, t in enumerate(stamps):
        poses = core.object_poses()
        for k, name in enumerate(NAMES):
            if t not in odom[name]:
                continue
            pose, twist, frame, child = odom[name][t]
            assert (frame, child) == ("world", name)
            assert np.array_equal(pose[:3], core.object_pose(name).translation), (i, name)
            assert np.array_equal(pose, poses[k]), (i, name)
            R = core.object_pose(name).rotation
            lin, ang = core.object_twist(name)
            assert np.array_equal(twist, np.concatenate([R.T @ lin, R.T @ ang])), (i, name)
            seen += 1
        if i < len(stamps) - 1:
            core.step(_law(i, core.joint_positions, core.joint_velocities, core.q)["effort"])
    assert seen >= 2 * 35, seen  # (the first states, sent before the subscription matched)
    assert core.object_twist("crate")[0][2] < -0.3  # falling: the twist is compared


def test_object_markers_are_latched_with_shape_and_size(s):
    rec = s.ros.record(MarkerArray, "objects", LATCHED_QOS)
    assert s.ros.spin_until(lambda: bool(rec.msgs), 10.0)
    markers = rec.msgs[-1].markers
    s.ros.stop_recording(rec)
    assert markers[0].action == Marker.DELETEALL
    by_frame = {m.header.frame_id: m for m in markers[1:]}
    assert set(by_frame) == set(NAMES)
    crate, ball = by_frame["crate"], by_frame["ball"]
    assert crate.type == Marker.CUBE and (crate.scale.x, crate.scale.y, crate.scale.z) == \
        (0.2, 0.2, 0.2)
    assert ball.type == Marker.SPHERE and ball.scale.x == 0.2
    assert crate.frame_locked and crate.pose.orientation.w == 1.0


def test_set_entity_state_moves_an_object_and_refuses_one_under_ground(s):
    state = si_msg.EntityState()
    state.pose.position.x, state.pose.position.y, state.pose.position.z = 1.2, 0.3, 0.4
    state.pose.orientation.w = 1.0
    state.twist.linear.y = 0.25
    res = _call(s, si.SetEntityState, "set_entity_state", entity="crate", state=state,
                set_pose=True, set_twist=True)
    assert res.result.result == OK, res.result.error_message
    got = _call(s, si.GetEntityState, "get_entity_state", entity="crate").state
    assert (got.pose.position.x, got.pose.position.y, got.pose.position.z) == (1.2, 0.3, 0.4)
    assert got.twist.linear.y == 0.25
    state.pose.position.z = 0.02  # its half height is 0.1
    res = _call(s, si.SetEntityState, "set_entity_state", entity="crate", state=state,
                set_pose=True)
    assert res.result.result == si_msg.Result.RESULT_OPERATION_FAILED
    assert "under the ground" in res.result.error_message and "raise it" in \
        res.result.error_message, res.result.error_message
    again = _call(s, si.GetEntityState, "get_entity_state", entity="crate").state
    assert again.pose == got.pose


def _spawn(s, name, uri, xyz=(0.5, -0.5, 0.3), **extra):
    pose = si.SpawnEntity.Request().initial_pose
    pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = xyz
    return _call(s, si.SpawnEntity, "spawn_entity", name=name,
                 entity_resource=si_msg.Resource(uri=uri), initial_pose=pose, **extra)


def test_spawn_falls_onto_the_ground_and_delete_removes_it(s):
    """Spawn a 0.1 m box 0.3 m up: after 400 lockstep cycles it rests at 0.05 m (1 mm);
    delete it: /tf and the markers lose it, the others stay. A snapshot of the set without
    it is refused while it is there (naming the sets), restored once it is gone."""
    res = _call(s, wb.SaveSnapshot, "save_snapshot", name="no_cube")
    assert res.result == SNAP_OK, res.message
    res = _spawn(s, "cube", "wb_sim://box?size=0.1,0.1,0.1&mass=0.5")
    assert res.result.result == OK, res.result.error_message
    assert res.entity_name == "cube" and "physics paused" in res.result.error_message
    res = _call(s, wb.RestoreSnapshot, "restore_snapshot", name="no_cube")
    assert res.result == res.RESULT_FAILED and "free objects" in res.message, res.message
    s.node.wait_for_log("spawned object 'cube'", 10.0)
    assert s.ros.spin_until(lambda: s.ros.node.count_publishers("/objects/cube/odom") == 1,
                            10.0)  # its odometry, made with it
    names = (*NAMES, "cube")
    markers = s.ros.record(MarkerArray, "objects", LATCHED_QOS)
    assert s.ros.spin_until(lambda: bool(markers.msgs), 10.0)
    assert {m.header.frame_id for m in markers.msgs[-1].markers[1:]} == set(names)
    s.ros.stop_recording(markers)
    _, _, tf = _run(s, 400, names=names)  # the reset puts it back at its spawn pose
    first, last = tf[min(tf)], tf[max(tf)]
    assert first["cube"][2] > 0.25, first["cube"]  # it started up there
    assert abs(last["cube"][2] - 0.05) < 1e-3, last["cube"]
    assert np.allclose(last["cube"][:2], [0.5, -0.5], atol=1e-3)
    res = _call(s, si.DeleteEntity, "delete_entity", entity="cube")
    assert res.result.result == OK, res.result.error_message
    markers = s.ros.record(MarkerArray, "objects", LATCHED_QOS)
    assert s.ros.spin_until(lambda: bool(markers.msgs), 10.0)
    assert {m.header.frame_id for m in markers.msgs[-1].markers[1:]} == set(NAMES)
    s.ros.stop_recording(markers)
    assert s.ros.spin_until(lambda: s.ros.node.count_publishers("/objects/cube/odom") == 0,
                            10.0)  # its odometry, removed with it
    assert s.ros.node.count_publishers("/objects/crate/odom") == 1
    _, _, tf = _run(s, 30, names=names)
    assert tf and all(set(rows) == set(NAMES) for rows in tf.values()), tf
    res = _call(s, si.GetEntities, "get_entities")
    assert list(res.entities) == ["wb_humanoid", *NAMES]
    res = _call(s, wb.RestoreSnapshot, "restore_snapshot", name="no_cube")
    assert res.result == SNAP_OK, res.message


def test_spawn_a_mesh_file_falls_onto_the_ground(s, tmp_path):
    """SpawnEntity of a mesh file (issue 31): ``file:///...cube.stl?mass=..&scale=0.5`` of a
    0.2 m cube adds a 0.1 m cube: listed, drawn as its hull's triangles (a TRIANGLE_LIST of
    12 triangles in its frame), falling onto the ground to rest at half its height (1 mm);
    ``wb_sim://mesh?file=...`` spawns the same way; the refusals say what is wrong."""
    from core.test_objects import BOX_FACES, _box_vertices, _write_mesh
    path = _write_mesh(tmp_path / "cube.stl", _box_vertices((0.2, 0.2, 0.2)), BOX_FACES)
    res = _spawn(s, "part", f"file://{path}?mass=0.5&scale=0.5")
    assert res.result.result == OK, res.result.error_message
    s.node.wait_for_log(f"spawned object 'part' (mesh '{path}' scaled [0.5, 0.5, 0.5]", 10.0)
    markers = s.ros.record(MarkerArray, "objects", LATCHED_QOS)
    assert s.ros.spin_until(lambda: any(m.header.frame_id == "part" for a in markers.msgs
                                        for m in a.markers), 10.0)
    (part,) = [m for m in markers.msgs[-1].markers if m.header.frame_id == "part"]
    s.ros.stop_recording(markers)
    assert part.type == Marker.TRIANGLE_LIST and len(part.points) == 36
    assert max(abs(getattr(p, c)) for p in part.points for c in "xyz") == pytest.approx(0.05)
    names = (*NAMES, "part")
    _, _, tf = _run(s, 400, names=names)
    last = tf[max(tf)]["part"]
    assert abs(last[2] - 0.05) < 1e-3 and np.allclose(last[:2], [0.5, -0.5], atol=1e-3), last
    res = _spawn(s, "part2", f"wb_sim://mesh?file={path}&mass=0.5", xyz=(0.5, 0.5, 0.3))
    assert res.result.result == OK, res.result.error_message
    for name in ("part", "part2"):
        res = _call(s, si.DeleteEntity, "delete_entity", entity=name)
        assert res.result.result == OK, res.result.error_message
    for uri, code, fragment in (
            ("file:///no/such/part.stl?mass=1", "RESULT_OPERATION_FAILED",
             "mesh file '/no/such/part.stl' does not exist"),
            (f"file://{path}", "RESOURCE_PARSE_ERROR", "lacks mass"),
            ("wb_sim://mesh?mass=1", "RESOURCE_PARSE_ERROR", "lacks file"),
            ("wb_sim://mesh?file=cube.stl&mass=1", "RESOURCE_PARSE_ERROR", "absolute path"),
            (f"file://{path}?mass=1&scale=0", "RESULT_OPERATION_FAILED", "each must be > 0")):
        res = _spawn(s, "bad", uri)
        expected = getattr(si.SpawnEntity.Response, code, None)
        expected = getattr(si_msg.Result, code) if expected is None else expected
        assert res.result.result == expected, (uri, res.result.error_message)
        assert fragment in res.result.error_message, res.result.error_message
    assert list(_call(s, si.GetEntities, "get_entities").entities) == ["wb_humanoid", *NAMES]


def test_spawn_a_urdf_string_falls_onto_the_ground_as_one_body(s, tmp_path):
    """SpawnEntity with a rigid URDF in ``resource_string`` (issue 31: two boxes welded by
    a fixed joint) and no name: named by its ``<robot name>``, drawn as two CUBE markers
    in its frame (the two links' collision boxes), falling onto the ground to rest with
    its centre of mass at the height its geometry gives (1 mm); a revolute one is refused
    naming the joint and robots:, a URDF file's URI spawns, an SDF string is refused."""
    from core.test_objects_urdf import TWO_BOXES, _box_link, _fixed, _parallel_axis
    from core.test_objects_urdf import A_EDGES, A_MASS, A_XYZ, B_MASS, B_XYZ
    _, com, _ = _parallel_axis([(A_MASS, A_XYZ, np.eye(3), np.eye(3)),
                                (B_MASS, B_XYZ, np.eye(3), np.eye(3))])
    rest = A_EDGES[2] / 2.0 + com[2] - A_XYZ[2]

    def spawn(name, text="", uri="", xyz=(0.5, -0.5, 0.3)):
        pose = si.SpawnEntity.Request().initial_pose
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = xyz
        return _call(s, si.SpawnEntity, "spawn_entity", name=name, initial_pose=pose,
                     entity_resource=si_msg.Resource(uri=uri, resource_string=text))

    res = spawn("", TWO_BOXES)
    assert res.result.result == OK, res.result.error_message
    assert res.entity_name == "two_boxes"
    s.node.wait_for_log("spawned object 'two_boxes' (urdf '(XML)', 2 geometries, 4 kg)", 10.0)
    markers = s.ros.record(MarkerArray, "objects", LATCHED_QOS)
    assert s.ros.spin_until(lambda: any(m.header.frame_id == "two_boxes" for a in markers.msgs
                                        for m in a.markers), 10.0)
    mine = [m for m in markers.msgs[-1].markers if m.header.frame_id == "two_boxes"]
    s.ros.stop_recording(markers)
    assert [m.type for m in mine] == [Marker.CUBE, Marker.CUBE]
    assert (mine[0].scale.x, mine[0].scale.y, mine[0].scale.z) == A_EDGES
    assert mine[0].pose.position.z == pytest.approx(A_XYZ[2] - com[2], abs=1e-15)
    names = (*NAMES, "two_boxes")
    _, _, tf = _run(s, 400, names=names)
    last = tf[max(tf)]["two_boxes"]
    assert abs(last[2] - rest) < 1e-3 and np.allclose(last[:2], [0.5, -0.5], atol=1e-3), last
    res = _call(s, si.DeleteEntity, "delete_entity", entity="two_boxes")
    assert res.result.result == OK, res.result.error_message
    path = tmp_path / "two_boxes.urdf"
    path.write_text(TWO_BOXES)
    res = spawn("pair", uri=f"file://{path}")
    assert res.result.result == OK, res.result.error_message
    res = _call(s, si.DeleteEntity, "delete_entity", entity="pair")
    assert res.result.result == OK, res.result.error_message
    door = ('<robot name="door">' + _box_link("frame", (0.1,) * 3, 1.0)
            + _box_link("leaf", (0.1,) * 3, 1.0)
            + _fixed("hinge", "frame", "leaf", (0.2, 0.0, 0.0), kind="revolute") + '</robot>')
    for text, code, fragments in (
            (door, si_msg.Result.RESULT_OPERATION_FAILED,
             ("joint 'hinge' is 'revolute'", "'robots:' in a world file")),
            ("<sdf version='1.9'/>", si.SpawnEntity.Response.UNSUPPORTED_FORMAT,
             ("rigid URDF",))):
        res = spawn("bad", text)
        assert res.result.result == code, res.result.error_message
        for f in fragments:
            assert f in res.result.error_message, res.result.error_message
    assert list(_call(s, si.GetEntities, "get_entities").entities) == ["wb_humanoid", *NAMES]


@pytest.mark.parametrize("name, uri, code, fragments", [
    ("crate", "wb_sim://box?size=0.1,0.1,0.1&mass=1", "NAME_NOT_UNIQUE", ("exists already",)),
    ("b2", "wb_sim://bx?size=0.1,0.1,0.1&mass=1", "RESULT_OPERATION_FAILED",
     ("unknown shape 'bx'", "did you mean 'box'")),
    ("b3", "wb_sim://box?size=0.1,0.1,0.1&mass=-2", "RESULT_OPERATION_FAILED",
     ("mass -2 kg", "> 0")),
    ("b4", "wb_sim://box?size=0.1,0,0.1&mass=1", "RESULT_OPERATION_FAILED",
     ("must be > 0",)),
    ("b5", "wb_sim://box?mass=1", "RESOURCE_PARSE_ERROR", ("lacks size",)),
    ("b6", "file:///tmp/box.sdf", "UNSUPPORTED_FORMAT", ("wb_sim://", "URDF")),
    ("", "wb_sim://box?size=0.1,0.1,0.1&mass=1", "NAME_INVALID", ("give the object a name",)),
    ("l_foot", "wb_sim://box?size=0.1,0.1,0.1&mass=1", "NAME_NOT_UNIQUE", ("robot frame",)),
    ("b7", "wb_sim://box?size=0.1,0.1,0.1&mass=1", "RESULT_OPERATION_FAILED",
     ("under the ground", "raise its position")),
])
def test_spawn_refusals_say_what_is_wrong(s, name, uri, code, fragments):
    res = _spawn(s, name, uri, xyz=(0.5, -0.5, 0.0 if name == "b7" else 0.3))
    expected = getattr(si.SpawnEntity.Response, code, None)
    expected = getattr(si_msg.Result, code) if expected is None else expected
    assert res.result.result == expected, res.result.error_message
    for f in fragments:
        assert f in res.result.error_message, res.result.error_message
    assert list(_call(s, si.GetEntities, "get_entities").entities) == ["wb_humanoid", *NAMES]


def test_spawn_with_allow_renaming_takes_a_free_name(s):
    res = _spawn(s, "crate", "wb_sim://cylinder?size=0.05,0.2&mass=1", allow_renaming=True)
    assert res.result.result == OK and res.entity_name == "crate_1", res.result.error_message
    assert list(_call(s, si.GetEntities, "get_entities").entities) == \
        ["wb_humanoid", *NAMES, "crate_1"]
    assert _call(s, si.DeleteEntity, "delete_entity", entity="crate_1").result.result == OK


def test_delete_refusals(s):
    res = _call(s, si.DeleteEntity, "delete_entity", entity="bal")
    assert res.result.result == si_msg.Result.RESULT_NOT_FOUND
    assert "did you mean 'ball'" in res.result.error_message, res.result.error_message
    res = _call(s, si.DeleteEntity, "delete_entity", entity="wb_humanoid")
    assert res.result.result == si_msg.Result.RESULT_OPERATION_FAILED
    assert "only free objects" in res.result.error_message
    assert s.node.alive()


def test_snapshot_with_objects_continues_bit_identically(s):
    """Reset, 50 cycles, save (the crate in mid-air), 80 cycles; restore, the same 80
    cycles: joint states and the objects' TF equal bit for bit, cycle by cycle."""
    _run(s, 50)
    res = _call(s, wb.SaveSnapshot, "save_snapshot", name="mid_air")
    assert res.result == SNAP_OK, res.message
    first = _run(s, 80, reset=False)
    res = _call(s, wb.RestoreSnapshot, "restore_snapshot", name="mid_air")
    assert res.result == SNAP_OK, res.message
    second = _run(s, 80, reset=False)
    (sa, _, ta), (sb, _, tb) = first, second
    assert len(sa) == len(sb) == 81
    for k, (x, y) in enumerate(zip(sa, sb)):
        for f, (u, w) in enumerate(zip(x, y)):
            assert np.array_equal(u, w), (k, f)
    assert sorted(ta) == sorted(tb) and len(ta) >= 5
    z = [ta[i]["crate"][2] for i in sorted(ta)]
    assert z[0] > z[-1] + 0.01  # the crate falls during the compared cycles
    for i in ta:
        for name in NAMES:
            assert np.array_equal(ta[i][name], tb[i][name]), (i, name)


def test_wb_sim_record_plans_the_object_markers_with_objects():
    """The objects' markers (latched) where the parameters name objects; their frames are
    on /tf, which is recorded anyway."""
    from wb_sim.ros.record import LATCHED, plan_topics
    assert "/objects" not in {t for t, _, _ in plan_topics({})}
    plan = {t: (m, k) for t, m, k in plan_topics({"objects.names": ["crate"]})}
    assert plan["/objects"] == ("visualization_msgs/msg/MarkerArray", "objects")
    assert "objects" in LATCHED and "/tf" in plan


def test_spawn_while_running_in_real_time_pauses_the_physics_and_goes_on(tmp_path, params_file):
    """Free-running at real_time_factor 1: a spawn pauses the physics for the rebuild (the
    answer and the log say how long), the clock then goes on at the real-time pace without
    a burst to catch up (no 'behind its deadlines' re-anchoring) and the new object's frame
    is on /tf."""
    from sensor_msgs.msg import JointState
    setup = SimSetup(tmp_path, "real_time_factor:=1.0", params_file=params_file)
    try:
        res = _spawn(setup, "cube", "wb_sim://sphere?size=0.05&mass=0.3")
        assert res.result.result == OK, res.result.error_message
        assert "physics paused" in res.result.error_message
        tf = setup.ros.record(TFMessage, "/tf", TF_QOS)
        js = setup.ros.record(JointState, "joint_states", TF_QOS)
        assert setup.ros.spin_until(lambda: any(
            t.child_frame_id == "cube" for m in tf.msgs for t in m.transforms), 10.0)
        setup.ros.spin_for(1.0)
        stamps = [stamp_ns(m) for m in js.msgs]
        assert stamps == sorted(stamps) and len(stamps) > 100
        log = setup.node.log()
        assert "spawned object 'cube'" in log and "behind its deadlines" not in log, log
        assert setup.node.alive()
    finally:
        setup.close()


WATCH_CTRL = '''import numpy as np
from wb_sim.controllers import pd_gravity


def make(sim, case=None, **params):
    """wb_sim.controllers:pd_gravity, saying each time its observation's q changes size."""
    inner = pd_gravity(sim, case, **params)
    size = [None]

    def control(obs):
        if len(obs.q) != size[0]:
            size[0] = len(obs.q)
            print(f"watch_ctrl: t = {obs.t:.3f} s, len(q) = {len(obs.q)}", flush=True)
        return inner(obs)
    return control


make.wants_imu = False
'''


def test_spawn_beside_an_in_process_controller_keeps_the_robot_standing(tmp_path):
    """The humanoid under the in-process PD (wb_sim.controllers:pd_gravity, wrapped to say
    its observation's size) in real time; a 5 kg crate spawned beside it: the controller's
    observation q grows by the crate's 7 coordinates and the controller goes on (the
    joint states advance 1.5 s past the spawn), the robot stands (base height within 1 cm of
    its start, joints within 0.02 rad of the initial posture) and the crate rests on the
    ground (its half height, within 1 mm)."""
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState

    from helpers.ros import pd_gains_param, ros_env
    (tmp_path / "watch_ctrl.py").write_text(WATCH_CTRL)
    path = ros_env(0).get("PYTHONPATH")
    setup = SimSetup(tmp_path, "controller.callable:=watch_ctrl:make", pd_gains_param(),
                     "real_time_factor:=1.0",
                     env={"PYTHONPATH": str(tmp_path) + (f":{path}" if path else "")})
    try:
        core = wb_sim.Simulator.from_yaml(HUMANOID_YAML)
        nq = len(core.q)
        assert setup.node.wait_for_log(f"len(q) = {nq}", 30.0), setup.describe()
        setup.ros.spin_for(0.5)
        res = _spawn(setup, "crate", "wb_sim://box?size=0.3,0.3,0.3&mass=5", xyz=(0.8, 0.0, 0.4))
        assert res.result.result == OK, res.result.error_message
        assert setup.node.wait_for_log(f"len(q) = {nq + 7}", 30.0), setup.describe()
        spawned_at = float(setup.node.log().split(f"len(q) = {nq + 7}")[0]
                           .rsplit("watch_ctrl: t = ", 1)[1].split(" s")[0])
        js = setup.ros.record(JointState, "joint_states", TF_QOS)
        odom = setup.ros.record(Odometry, "odom/ground_truth", TF_QOS)
        assert setup.ros.spin_until(
            lambda: js.msgs and stamp_ns(js.msgs[-1]) / 1e9 > spawned_at + 1.5, 30.0), \
            setup.describe()
        last, base = js.msgs[-1], odom.msgs[-1]
        crate = _call(setup, si.GetEntityState, "get_entity_state", entity="crate").state
        setup.ros.stop_recording(js, odom)
        assert setup.node.alive(), setup.describe()
    finally:
        setup.close()
    assert np.abs(np.array(last.position) - core.joint_positions).max() < 0.02
    assert abs(base.pose.pose.position.z - core.q[2]) < 0.01, base.pose.pose.position.z
    assert abs(crate.pose.position.z - 0.15) < 1e-3, crate.pose.position.z
    assert "failed at t =" not in setup.node.log()


def _panda_core(tmp_path, cycles: int) -> tuple[np.ndarray, int]:
    """helpers.panda_push.run_core in a fresh process, as the node runs it: (the box's pose
    rows, the steps in contact). Not in this one: the rounding of coal's contact queries
    depends on the queries the process made before (measured: an earlier GJK distance
    query moved the push's box 6 mm in 0.5 s), and this process ran other tests."""
    out = tmp_path / "core_rows.npz"
    code = ("import sys, numpy as np; from helpers.panda_push import run_core; "
            f"sim, rows, touched = run_core({cycles}); "
            "assert sim.dt == 1e-3; np.savez(sys.argv[1], rows=rows, touched=touched)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    subprocess.run([sys.executable, "-c", code, str(out)], env=env, check=True, timeout=120)
    with np.load(out) as f:
        return f["rows"], int(f["touched"])


def test_the_panda_pushes_a_box_and_its_odometry_equals_the_cores(tmp_path):
    """Issue 31: the Panda pushes a box across the ground with a position command (every
    joint's position on joint_commands, answered in lockstep; helpers/panda_push.py): the
    box's objects/box/odom equals the headless core run's box pose (the core driven as the
    node's gate drives: the derived gains, JointTargets) within 1e-9 at the same simulated
    time, every cycle, while the box is pushed (it moves > 0.1 m along +y here). Then
    spawn_entity into the terrain box beside it is refused, naming the box and the fix."""
    from nav_msgs.msg import Odometry

    from helpers.extras import require_robot_data
    from helpers.panda_push import BOX, Q0, TERRAIN_BOXES, targets
    require_robot_data("panda")
    doc = yaml.safe_load((PKG / "config" / "panda.yaml").read_text())
    params = doc["wb_sim"]["ros__parameters"]
    params["initial"]["joint_positions"] = list(Q0)
    params["objects"] = BOX
    params["terrain"] = {"boxes": TERRAIN_BOXES}
    path = tmp_path / "panda_box.yaml"
    path.write_text(yaml.safe_dump(doc))
    cycles = 500  # 0.5 s: the hand meets the box at 0.05 s
    setup = SimSetup(tmp_path, "sync.mode:=lockstep", "real_time_factor:=0.0",
                     "sync.timeout_s:=0.0", params_file=path)
    try:
        names = list(setup.first_js.name)
        rec = setup.ros.record(Odometry, "objects/box/odom", TF_QOS)
        assert setup.ros.spin_until(
            lambda: setup.ros.node.count_publishers("/objects/box/odom"), 10.0)
        dt = 1e-3
        ctl = LockstepController(setup, lambda i, qj, vj, q: {
            "position": targets(i, dt, len(qj))}, cycles, fixed_base=True)
        states = ctl.run(setup)
        stamps = ctl.stamps[:len(states)]
        setup.ros.spin_until(lambda: stamps[-1] in _odometry(rec.msgs), 10.0)
        odom = _odometry(rec.msgs)
        setup.ros.stop_recording(rec)
        into = _spawn(setup, "b8", "wb_sim://box?size=0.1,0.1,0.1&mass=1",
                      xyz=(TERRAIN_BOXES[0], TERRAIN_BOXES[1], 0.2))
    finally:
        setup.close()
    rows, touched = _panda_core(tmp_path, cycles)
    assert names == ["panda_joint1", "panda_joint2", "panda_joint3", "panda_joint4",
                     "panda_joint5", "panda_joint6", "panda_joint7", "panda_finger_joint1",
                     "panda_finger_joint2"]
    rows = np.vstack([BOX["positions"] + [0.0, 0.0, 0.0, 1.0], rows])  # row k: after k steps
    seen, worst = 0, 0.0
    for i, t in enumerate(stamps):
        if t not in odom:
            continue
        pose, _, frame, child = odom[t]
        assert (frame, child) == ("world", "box")
        worst = max(worst, float(np.abs(pose - rows[i]).max()))
        seen += 1
    print(f"Panda push over the node: {seen} odometry messages, largest difference to the "
          f"core {worst:.2e}; the box moved {(rows[-1, :3] - rows[0, :3]).round(4).tolist()} m")
    assert seen >= cycles - 5, seen
    assert worst <= 1e-9
    assert touched > 100 and rows[-1, 1] - rows[0, 1] > 0.1  # it was pushed: the test can fail
    assert into.result.result == si_msg.Result.RESULT_OPERATION_FAILED
    for fragment in ("object 'b8' starts 50.0 mm inside terrain box 0 (terrain.boxes)",
                     "place it on or above the terrain", "the state is untouched"):
        assert fragment in into.result.error_message, into.result.error_message
