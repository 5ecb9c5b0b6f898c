"""``wb_sim_replay`` and :func:`wb_sim.ros.testing.assert_replays`: a lockstep recording
run again against a fresh node, compared bit for bit, end to end over real ROS 2.

One recording (module fixture): ``wb_sim_run --sync lockstep --record BAG --duration 1``,
the humanoid under the example controller, 1 s of simulated time. Then:

* the example controller, with the gains the bag recorded, replays it bit for bit
  (the helper returns; every recorded joint state compared);
* the same controller with ``kp`` one more (a command line after ``--controller``)
  does not: exit 1, naming the first differing stamp, joint, field and values;
* bad input ends with exit 2 and one line naming the reason, before any process
  starts: no bag, a bag without the simulator's parameters or joint states, a
  recording made in realtime mode, a recorded controller that is not the example one
  without ``--controller``, a controller command that does not exist;
* the comparison itself (no ROS): bit for bit (-0.0 is not 0.0, a NaN equals the same
  NaN), joint by joint whatever the order of the names.

Skipped without rclpy, tf2_msgs or rosbags unless ``WB_SIM_REQUIRE_ROS=1``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from helpers.extras import require_ros

require_ros("sensor_msgs.msg", "rcl_interfaces.srv", "rosbags")

from helpers.ros import HUMANOID_YAML, fresh_domain_id, ros_env  # noqa: E402
from wb_sim.ros.replay import (CONTROLLERS_TOPIC, PARAMETERS_TOPIC, Comparison,  # noqa: E402
                               JointStates, main, read_recording, verdict)
from wb_sim.ros.testing import assert_replays  # noqa: E402
from wb_sim.tools.bag import typestore  # noqa: E402

NS = 1_000_000_000


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A bag of 1 s of the standing humanoid, lockstep, under the example controller."""
    tmp = tmp_path_factory.mktemp("replay")
    bag = tmp / "stand"
    out = subprocess.run([sys.executable, "-m", "wb_sim.ros.run", "--sync", "lockstep",
                          "--duration", "1", "--record", str(bag)],
                         capture_output=True, text=True, timeout=180, cwd=tmp,
                         env=ros_env(fresh_domain_id()))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    # the replay needs the controller's parameters in the bag (the recorder's log says why
    # not, if not)
    assert read_recording(bag).controllers, out.stdout[-4000:] + out.stderr[-4000:]
    return bag


def _replay_env(monkeypatch) -> None:
    """What ros_env gives the processes the tests start: DDS discovery on this host."""
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    monkeypatch.delenv("ROS_LOCALHOST_ONLY", raising=False)


def test_the_same_controller_replays_bit_for_bit(recorded, monkeypatch):
    _replay_env(monkeypatch)
    rec = read_recording(recorded)
    assert rec.parameters["sync.mode"] == "lockstep" and len(rec.states) >= 1000
    result = assert_replays(recorded, domain_id=fresh_domain_id(), timeout_s=150)
    assert result.identical and result.recorded == len(rec.states)
    assert result.compared == result.recorded and result.differing == result.missing == 0
    assert result.message == f"replay identical: {result.recorded} joint states, bit for bit"


def test_one_gain_more_fails_naming_the_first_difference(recorded):
    """The example controller's kp one more than recorded: exit 1, the first difference."""
    kp = read_recording(recorded).example_controller()["parameters"]["kp"]
    argv = [sys.executable, "-m", "wb_sim.ros.replay", str(recorded), "--timeout", "150",
            "--controller", sys.executable, "-m", "wb_sim.ros.pd_controller", "--ros-args",
            "--params-file", str(HUMANOID_YAML), "-p", f"kp:={kp + 1.0!r}"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=200,
                         env=ros_env(fresh_domain_id()), cwd=recorded.parent)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("replay differs: first difference at t = "), out.stdout
    assert " joint '" in line and "recorded " in line and "replayed " in line, line
    assert "joint states compared differ" in line and "largest differences: position" in line


def _copy(src, dst, keep=lambda topic: True, edit=lambda topic, doc: doc):
    """The bag ``src`` into ``dst``: the topics ``keep`` accepts, the parameter
    documents through ``edit``."""
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer

    ts = typestore()
    with Reader(src) as reader, Writer(dst, version=8, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {c.id: w.add_connection(c.topic, c.msgtype, typestore=ts)
                 for c in reader.connections if keep(c.topic)}
        for c, log_ns, raw in reader.messages([c for c in reader.connections if c.id in conns]):
            if c.topic in (PARAMETERS_TOPIC, CONTROLLERS_TOPIC):
                doc = edit(c.topic, json.loads(ts.deserialize_cdr(raw, c.msgtype).data))
                msg = ts.types[c.msgtype](data=json.dumps(doc))
                raw = bytes(ts.serialize_cdr(msg, c.msgtype))
            w.write(conns[c.id], log_ns, raw)
    return dst


def _exit_2(capsys, *argv) -> str:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("wb_sim_replay: ") and err.count("\n") == 1, err
    return err


def test_bad_input_exits_2_naming_the_reason(recorded, tmp_path, capsys):
    assert "no such bag" in _exit_2(capsys, tmp_path / "nothing")
    small = lambda t: t in (PARAMETERS_TOPIC, CONTROLLERS_TOPIC, "/joint_states")  # noqa: E731
    plain = _copy(recorded, tmp_path / "plain", keep=lambda t: small(t) and t != PARAMETERS_TOPIC)
    assert "no simulator parameters on '/wb_sim_record/parameters'" in _exit_2(capsys, plain)
    blind = _copy(recorded, tmp_path / "blind", keep=lambda t: small(t) and t != "/joint_states")
    assert "no joint states on '/joint_states'" in _exit_2(capsys, blind)

    def realtime(topic, doc):
        if topic == PARAMETERS_TOPIC:
            doc["parameters"]["sync.mode"] = "realtime"
        return doc
    rt = _copy(recorded, tmp_path / "realtime", keep=small, edit=realtime)
    err = _exit_2(capsys, rt)
    assert "recorded with sync.mode 'realtime': only a lockstep run is reproducible" in err

    def other_controller(topic, doc):
        if topic == CONTROLLERS_TOPIC:
            doc["node"] = "/my_controller"
        return doc
    other = _copy(recorded, tmp_path / "other", keep=small, edit=other_controller)
    err = _exit_2(capsys, other)
    assert "its controller was '/my_controller'" in err and "--controller" in err
    err = _exit_2(capsys, recorded, "--controller", tmp_path / "no_such_controller")
    assert "cannot start the controller" in err


def _js(names, position, velocity=(), effort=()) -> JointStates:
    return JointStates(tuple(names), tuple(np.asarray(x, dtype=np.float64)
                                           for x in (position, velocity, effort)))


def test_the_comparison_is_bit_for_bit_joint_by_joint():
    nan = float("nan")
    recorded = {0: _js("ab", [0.0, 1.0], [nan, 2.0]), NS // 1000: _js("ab", [0.5, 1.5])}
    same = Comparison(recorded)
    same.add(0, _js("ba", [1.0, 0.0], [2.0, nan]))  # another order, the same values
    same.add(0, _js("ab", [9.0, 9.0]))  # a state sent again: counts once
    same.add(NS // 1000, _js("ab", [0.5, 1.5]))
    assert same.done and verdict(same).identical
    assert verdict(same).message == "replay identical: 2 joint states, bit for bit"

    c = Comparison(recorded)
    c.add(0, _js("ab", [-0.0, 1.0], [nan, 2.0]))  # -0.0 is not 0.0
    v = verdict(c)
    assert not v.identical and v.differing == 1 and v.missing == 1
    assert v.first.joint == "a" and v.first.field == "position" and v.first.size == 0.0
    assert "first difference at t = 0.000000 s, joint 'a' position: recorded 0.0, " \
           "replayed -0.0" in v.message
    assert "1 of 2 recorded joint states did not come (first t = 0.001000 s" in v.message

    fewer = Comparison({0: recorded[0]})
    fewer.add(0, _js("a", [0.0], [nan]))
    v = verdict(fewer)
    assert not v.identical and v.differing == 1 and v.first is None
    assert "the replay's joint states name other joints (missing: b; extra: none)" in v.message
