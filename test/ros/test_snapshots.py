"""Named snapshots on the node (wb_sim/ros/snapshots.py, services.py): saved, restored,
listed and deleted over real DDS; a restored snapshot continues bit for bit as the run
from the moment it was saved, in lockstep and stepped while paused (the held command and
the watchdog's trip included); the clock never goes back; the bounds refuse with a
message naming the parameter.

The services are wb_sim_interfaces' (SaveSnapshot, RestoreSnapshot, DeleteSnapshot,
ListSnapshots); the paused runs step with simulation_interfaces' step_simulation. Skipped
without rclpy, wb_sim_interfaces or simulation_interfaces unless ``WB_SIM_REQUIRE_ROS=1``."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.extras import require_ros

require_ros("sensor_msgs.msg", "simulation_interfaces.srv", "wb_sim_interfaces.srv")

from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from simulation_interfaces import msg as si_msg  # noqa: E402
from simulation_interfaces import srv as si  # noqa: E402
from wb_sim_interfaces import srv as wb  # noqa: E402

from helpers.ros import LockstepController, SimSetup, stamp_ns  # noqa: E402

OK = si_msg.Result.RESULT_OK  # step_simulation's
SNAP_OK, NOT_FOUND = wb.SaveSnapshot.Response.RESULT_OK, wb.RestoreSnapshot.Response.RESULT_NOT_FOUND
INVALID, FULL = wb.SaveSnapshot.Response.RESULT_INVALID, wb.SaveSnapshot.Response.RESULT_FULL
KINDS = {"save": wb.SaveSnapshot, "restore": wb.RestoreSnapshot, "delete": wb.DeleteSnapshot}
STATE_QOS = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope="module")
def s(tmp_path_factory):
    # sync.timeout_s 0: the node waits for its controller however long the test takes
    # between two runs (a lost controller would let the physics run on)
    setup = SimSetup(tmp_path_factory.mktemp("snapshots"), "sync.mode:=lockstep",
                     "real_time_factor:=0.0", "sync.timeout_s:=0.0")
    yield setup
    setup.close()


def _snap(s, service, name):
    kind = KINDS[service]
    return s.ros.call(kind, f"/wb_sim/{service}_snapshot", kind.Request(name=name))


def _list(s, pattern=""):
    return s.ros.call(wb.ListSnapshots, "/wb_sim/list_snapshots",
                      wb.ListSnapshots.Request(filter=pattern))


def _clear(s):
    for name in _list(s).names:
        assert _snap(s, "delete", name).result == SNAP_OK


LAW_EFFORTS = np.random.default_rng(3).normal(0.0, 3.0, (400, 64))


def _law(i, qj, vj, q):
    """PD about the initial posture plus a seeded random effort per cycle: a rich,
    state-dependent trajectory (the gains 0 of the node: applied as sent)."""
    return {"effort": -60.0 * qj - 2.0 * vj + LAW_EFFORTS[i, :len(qj)]}


def _equal(a, b):
    assert len(a) == len(b)
    for k, (x, y) in enumerate(zip(a, b)):
        for f, (u, w) in enumerate(zip(x, y)):
            assert np.array_equal(u, w), f"state {k}, field {f}: {u} != {w}"


def test_restore_continues_bit_identically_in_lockstep(s):
    """Reset, 100 lockstep cycles, save; 150 cycles; restore; the same 150 cycles: the
    joint positions, velocities, efforts, the base's configuration and twist are equal
    bit for bit, cycle by cycle, and the stamps only go forward (the clock goes on)."""
    _clear(s)
    js = s.ros.record(JointState, "joint_states", STATE_QOS)
    before = LockstepController(s, _law, 100).run(s)
    res = _snap(s, "save", "t100")
    assert res.result == SNAP_OK and "saved snapshot 't100'" in res.message, res
    first = LockstepController(s, _law, 150, reset=False).run(s)
    res = _snap(s, "restore", "t100")
    assert res.result == SNAP_OK and "the simulated clock goes on" in res.message, res
    second = LockstepController(s, _law, 150, reset=False).run(s)
    _equal(first[:1], before[-1:])  # the run went on from the saved state
    _equal(second, first)
    assert not np.array_equal(first[0][0], first[-1][0])  # it moved
    s.ros.stop_recording(js)
    stamps = [stamp_ns(m) for m in js.msgs]
    assert np.all(np.diff(stamps) >= 0), "the clock went back"
    assert len(set(stamps)) >= 100 + 150 + 150


def _paused_steps(s, js, n):
    """``n`` steps while paused (step_simulation); the joint states they published."""
    js.clear()
    res = s.ros.call(si.StepSimulation, "/wb_sim/step_simulation",
                     si.StepSimulation.Request(steps=n), timeout=60.0)
    assert res.result.result == OK, res.result.error_message
    assert s.ros.spin_until(lambda: len({stamp_ns(m) for m in js.msgs}) >= n, 10.0)
    msgs = sorted(js.msgs, key=stamp_ns)
    stamps = [stamp_ns(m) for m in msgs]
    assert np.all(np.diff(stamps) > 0) and len(stamps) == n
    return stamps, [(np.array(m.position), np.array(m.velocity), np.array(m.effort))
                    for m in msgs]


def test_restore_continues_bit_identically_while_paused(s):
    """50 lockstep cycles leave a command acting; paused, save, then 150 steps without
    commands: the held command acts until the watchdog (command.timeout_s 0.1 s = 100
    steps) trips to damping. Restored, the same 150 steps give the same joint states bit
    for bit: the held command and the watchdog's origin came back with the state (the
    trip at the same step), and the restored stamps are later than all before."""
    _clear(s)
    LockstepController(s, _law, 50).run(s)
    s.pause(True)
    try:
        js = s.ros.record(JointState, "joint_states", STATE_QOS)
        s.ros.spin_for(0.3)
        assert _snap(s, "save", "paused").result == SNAP_OK
        stamps1, first = _paused_steps(s, js, 150)
        res = _snap(s, "restore", "paused")
        assert res.result == SNAP_OK, res.message
        s.ros.spin_for(0.3)
        stamps2, second = _paused_steps(s, js, 150)
        s.ros.stop_recording(js)
        _equal(second, first)
        assert stamps2[0] > stamps1[-1]  # the clock went on
        assert set(np.diff(stamps2)) == {1_000_000}
        # the watchdog tripped within the run (damping: a step's efforts are -20 times
        # the velocities it started from) and not before it: the held command's first
        tripped = [k for k in range(1, len(first))
                   if np.allclose(first[k][2], -20.0 * first[k - 1][1], rtol=1e-9, atol=0)]
        # (about 0.1 s after the last command became active; from then on, to the end)
        assert tripped and 90 <= tripped[0] <= 140, tripped[:3]
        assert tripped == list(range(tripped[0], len(first)))
    finally:
        s.pause(False)


def test_list_delete_replace_and_the_bounds(s):
    _clear(s)
    names = [f"b{k:02d}" for k in range(32)]
    for name in names:
        assert _snap(s, "save", name).result == SNAP_OK
    res = _snap(s, "save", "one_more")
    assert res.result == FULL
    assert "32 snapshots are kept" in res.message
    assert "snapshots.max_count (32)" in res.message
    listed = _list(s)
    assert listed.result == SNAP_OK and listed.names == names  # oldest first
    assert "32 of 32 snapshots" in listed.message
    assert listed.count == listed.max_count == 32 and len(listed.sizes) == 32
    # the sizes: each snapshot's estimate, together the total, under the bound
    assert min(listed.sizes) > 1000 and sum(listed.sizes) == listed.total_size
    assert listed.total_size <= listed.max_size == 256_000_000
    stamps = [t.sec * 10**9 + t.nanosec for t in listed.stamps]
    assert stamps == sorted(stamps) and len(stamps) == 32
    part = _list(s, "^b0[0-2]$")
    assert part.names == ["b00", "b01", "b02"] and list(part.sizes) == list(listed.sizes[:3])
    assert part.count == 32  # all kept, matching or not
    res = _list(s, "(a*)*b")
    assert res.result == wb.ListSnapshots.Response.RESULT_INVALID and res.names == []
    assert "filter refused" in res.message
    res = _snap(s, "save", "b05")  # a kept name: replaced, the count unchanged
    assert res.result == SNAP_OK and "replaced snapshot 'b05'" in res.message
    assert _list(s).names == [n for n in names if n != "b05"] + ["b05"]
    assert _snap(s, "delete", "b07").result == SNAP_OK
    res = _snap(s, "restore", "b07")
    assert res.result == NOT_FOUND and "no snapshot 'b07'" in res.message
    res = _snap(s, "delete", "b07")
    assert res.result == wb.DeleteSnapshot.Response.RESULT_NOT_FOUND
    assert _snap(s, "save", "one_more").result == SNAP_OK  # room again
    res = _snap(s, "save", "bad name/")
    assert res.result == INVALID
    assert "letters, digits" in res.message
    _clear(s)
    # the memory bound, live
    assert s.ros.set_parameter("snapshots.max_mb", 0.001).successful
    try:
        res = _snap(s, "save", "big")
        assert res.result == FULL
        assert "snapshots.max_mb (0.001 MB)" in res.message, res.message
        assert _list(s).names == []
    finally:
        assert s.ros.set_parameter("snapshots.max_mb", 256.0).successful


def test_an_in_process_controller_continues_bit_identically(tmp_path):
    """The in-process PD at 100 Hz (its torques held for 10 steps): reset and 5 steps while
    paused (saved mid-hold), 30 steps, restore, 30 steps: the same joint states bit for
    bit, because the snapshot carries the held torques (without them the steps up to the
    next call would apply the torques of the last call before the restore)."""
    from helpers.ros import pd_gains_param
    s = SimSetup(tmp_path, "controller.callable:=wb_sim.controllers:pd_gravity", pd_gains_param(),
                 "controller.rate_hz:=100.0", "real_time_factor:=1.0")
    try:
        s.pause(True)
        s.reset()
        js = s.ros.record(JointState, "joint_states", STATE_QOS)
        s.ros.spin_for(0.3)
        _paused_steps(s, js, 5)
        assert _snap(s, "save", "mid_hold").result == SNAP_OK
        _, first = _paused_steps(s, js, 30)
        assert _snap(s, "restore", "mid_hold").result == SNAP_OK
        s.ros.spin_for(0.3)
        _, second = _paused_steps(s, js, 30)
        s.ros.stop_recording(js)
        _equal(second, first)
        assert not np.array_equal(first[0][2], first[-1][2])  # the PD's torques changed
    finally:
        s.close()


def test_through_ros2cli(s):
    """`ros2 service call` as docs/ros.md shows it (needs the launch stack's ros2cli)."""
    from helpers.extras import require_launch_stack
    require_launch_stack()
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from helpers.ros import cli_answered, ros_env
    _clear(s)
    ros2 = Path(sys.executable).with_name("ros2")
    ros2 = str(ros2) if ros2.exists() else shutil.which("ros2")
    for service, kind, request, expected in (
            ("save_snapshot", "SaveSnapshot", "{name: before_push}", "saved snapshot"),
            ("list_snapshots", "ListSnapshots", "{}", "names=['before_push']"),
            ("restore_snapshot", "RestoreSnapshot", "{name: before_push}", "restored the state"),
            ("delete_snapshot", "DeleteSnapshot", "{name: before_push}", "deleted snapshot")):
        out = subprocess.run([ros2, "service", "call", f"/wb_sim/{service}",
                              f"wb_sim_interfaces/srv/{kind}", request],
                             env=ros_env(s.domain), capture_output=True, text=True, timeout=60)
        assert cli_answered(out), (service, out.returncode, out.stderr)
        assert expected in out.stdout and "(result=1," in out.stdout, (service, out.stdout)


def test_the_branching_example_gives_the_same_table_twice(tmp_path):
    """examples/branching.py against a node with the in-process PD, from the initial
    state (--reset): two runs print the same table, digit for digit, a branch repeated
    within a run gives the same row, and the push moves the base forward."""
    import subprocess
    import sys
    from pathlib import Path

    from helpers.ros import ros_env
    s = SimSetup(tmp_path, "controller.callable:=wb_sim.controllers:pd_gravity",
                 'controller.params:="{kp: 1000.0, kd: 20.0}"', "real_time_factor:=1.0")
    example = Path(__file__).resolve().parents[2] / "examples" / "branching.py"
    try:
        tables = []
        for _ in range(2):
            out = subprocess.run([sys.executable, str(example), "--reset", "--forces", "0",
                                  "0", "150", "--seconds", "0.4"], env=ros_env(s.domain),
                                 capture_output=True, text=True, timeout=180)
            assert out.returncode == 0, out.stderr + s.describe()
            tables.append(out.stdout)
        assert tables[0] == tables[1], tables
        rows = [line.split("|")[1:-1] for line in tables[0].splitlines()[2:]]
        assert [float(r[0]) for r in rows] == [0.0, 0.0, 150.0]
        assert rows[0] == rows[1]  # the same branch twice: the same outcome
        assert float(rows[2][3]) > float(rows[0][3]) + 1e-3  # pushed forward
        assert _list(s).names == []  # the example deleted its snapshot
    finally:
        s.close()
