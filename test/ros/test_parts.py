"""The node's plain parts, without rclpy or processes, driven by a fake clock in milliseconds:
the command gate (wb_sim.ros.gate), the pacer (wb_sim.ros.pacer), the stream table
(wb_sim.ros.streams)."""

from __future__ import annotations

import math
import re
import sys

import numpy as np
import pytest

from wb_sim.ros.gate import (BUSY_POLL_S, MAX_PUSHES, RESEND_S, WAIT_SLICE_S, CommandGate,
                             CommandRejected)
from wb_sim.ros.pacer import Pacer, PacerStats
from wb_sim.ros.streams import StreamTable

MS = 1e-3
NS_PER_MS = 1_000_000


def test_the_parts_import_no_rclpy():
    """Plain parts: importing them loads no ROS module."""
    import subprocess
    code = ("import sys, wb_sim.ros.gate, wb_sim.ros.pacer, wb_sim.ros.streams, "
            "wb_sim.ros.verdict; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('rclpy', 'sensor_msgs', 'std_msgs', 'builtin_interfaces')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ----------------------------------------------------------------------------- fakes


class FakeClock:
    """Wall time in s that moves only when the code under test sleeps or yields;
    ``late_ms`` is added to every sleep (a late wake-up), ``yield_ms`` to each yield."""

    def __init__(self, late_ms: float = 0.0, yield_ms: float = 0.01):
        self.t = 100.0
        self.late = late_ms * MS
        self.yield_s = yield_ms * MS
        self.slept: list[float] = []
        self.yields = 0

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t += s + self.late

    def yield_(self) -> None:
        self.yields += 1
        self.t += self.yield_s

    def wait_event(self, event, s: float) -> bool:
        if event.is_set():
            return True
        self.slept.append(s)
        self.t += s
        return event.is_set()


class FakeEvent:
    def __init__(self, set_after: int | None = None):
        self.calls, self.set_after, self.flag = 0, set_after, False

    def is_set(self) -> bool:
        self.calls += 1
        if self.set_after is not None and self.calls > self.set_after:
            self.flag = True
        return self.flag


class Log(list):
    def __call__(self, level, text, topic):
        self.append((level, text, topic))

    def texts(self, level=None):
        return [t for lv, t, _ in self if level in (None, lv)]


JOINTS = ["a", "b", "c"]
CFG = {"command.timeout_s": 0.1, "command.timeout_action": "zero",
       "command.timeout_damping": 20.0, "command.kp": (0.0,), "command.kd": (0.0,),
       "command.nan_is_unset": False, "sync.timeout_s": 0.0,
       "topics.joint_commands": "joint_commands", "topics.effort_commands": "effort_commands",
       "topics.external_wrench": "external_wrench"}


def make_gate(**kw):
    cfg = dict(CFG, **kw.pop("cfg", {}))
    log = Log()
    stats = PacerStats()
    gate = CommandGate(JOINTS, kw.pop("command_joint_names", JOINTS), cfg, stats, log,
                       frame_names=("base", "hand"), **kw)
    return gate, log, stats


# ----------------------------------------------------------------------------- command gate


def test_a_joint_command_by_name_sets_only_its_joints_and_keeps_the_others():
    gate, log, stats = make_gate()
    assert gate.joint_command(0, ["b", "a"], [2.0, 1.0], now_ns=0, wall=0.0)
    assert gate.joint_command(0, ["c"], [3.0], now_ns=NS_PER_MS, wall=0.001)
    np.testing.assert_array_equal(gate.torques(2 * NS_PER_MS, np.zeros(3), 0.002), [1, 2, 3])
    assert stats.accepted == 2 and stats.applied == 1  # one step applied the newest command


@pytest.mark.parametrize("names, effort, kind", [
    ([], [], "no names"),
    (["a", "b"], [1.0], "length mismatch"),
    (["a", "zz"], [1.0, 2.0], "unknown joint"),
    (["a", "a"], [1.0, 2.0], "duplicated names"),
    (["a", "b"], [1.0, math.nan], "non-finite"),
    (["a", "b"], [1.0, 1e300], "non-finite"),  # too large: overflows in the squared norm
])
@pytest.mark.filterwarnings("error::RuntimeWarning")  # refused quietly: no numpy warning on stderr
def test_a_bad_joint_command_is_rejected_counted_and_the_last_valid_one_kept(names, effort, kind):
    gate, log, stats = make_gate()
    gate.joint_command(0, ["a", "b", "c"], [1.0, 2.0, 3.0], 0, 0.0)
    assert not gate.joint_command(0, names, effort, NS_PER_MS, 0.001)
    assert gate.rejected == {("joint_commands", kind): 1}
    np.testing.assert_array_equal(gate.tau, [1, 2, 3])
    assert stats.accepted == 1
    (level, text, topic), = [e for e in log if e[0] == "warning"]
    assert topic == "joint_commands" and "rejected a command on 'joint_commands'" in text


def test_rejections_are_counted_each_but_logged_once_a_second_per_topic_and_reason():
    gate, log, _ = make_gate()
    for i in range(3000):  # 3 s of a 1 kHz flood
        gate.joint_command(0, ["zz"], [1.0], 0, wall=i * MS)
        gate.effort_command([1.0], 0, wall=i * MS)
    assert gate.rejected == {("joint_commands", "unknown joint"): 3000,
                             ("effort_commands", "wrong length"): 3000}
    assert gate.rejected_total == 6000
    warnings = [t for lv, t, _ in log if lv == "warning"]
    assert len(warnings) == 6  # at 0, 1 and 2 s for each topic


def test_effort_commands_follow_command_joint_names_order():
    gate, _, _ = make_gate(command_joint_names=["c", "a"])
    assert gate.effort_command([3.0, 1.0], 0, 0.0)
    np.testing.assert_array_equal(gate.tau, [1.0, 0.0, 3.0])
    assert not gate.effort_command([3.0, math.inf], 0, 0.0)
    assert gate.rejected == {("effort_commands", "non-finite"): 1}
    assert "non-finite effort for a" in [t for _, t, _ in gate.log if "non-finite" in t][0]


@pytest.mark.parametrize("action, expected", [("zero", [0, 0, 0]), ("hold", [1, 2, 3]),
                                               ("damp", [-20 * 0.5, 0, -20 * -1.0])])
def test_the_watchdog_trips_after_timeout_of_simulated_time(action, expected):
    gate, log, _ = make_gate(cfg={"command.timeout_action": action})
    qdot = np.array([0.5, 0.0, -1.0])
    gate.joint_command(0, JOINTS, [1.0, 2.0, 3.0], now_ns=0, wall=0.0)
    np.testing.assert_array_equal(gate.torques(100 * NS_PER_MS, qdot, 0.1), [1, 2, 3])  # = timeout
    assert not gate.tripped
    np.testing.assert_allclose(gate.torques(101 * NS_PER_MS, qdot, 0.101), expected)
    assert gate.tripped
    assert sum("no valid command for 0.1 s" in t for t in log.texts("warning")) == 1
    gate.joint_command(0, ["a"], [5.0], now_ns=102 * NS_PER_MS, wall=0.102)  # back
    assert "commands are back; applying them" in log.texts("info")
    # after a zeroing trip, the dead controller's torques on b and c do not come back
    back = [5, 0, 0] if action != "hold" else [5, 2, 3]
    np.testing.assert_array_equal(gate.torques(103 * NS_PER_MS, qdot, 0.103), back)


def test_no_watchdog_before_the_first_command_or_with_timeout_zero():
    gate, _, _ = make_gate()
    np.testing.assert_array_equal(gate.torques(10**9, np.ones(3), 1.0), [0, 0, 0])
    assert not gate.tripped
    gate, _, _ = make_gate(cfg={"command.timeout_s": 0.0})
    gate.joint_command(0, JOINTS, [1.0, 2.0, 3.0], 0, 0.0)
    np.testing.assert_array_equal(gate.torques(10**12, np.ones(3), 1.0), [1, 2, 3])


def test_latency_from_published_state_to_applied_command():
    gate, _, stats = make_gate()
    gate.state_published(5 * NS_PER_MS, wall=10.000)
    gate.joint_command(5 * NS_PER_MS, JOINTS, [1.0, 1.0, 1.0], 5 * NS_PER_MS, 10.0003)
    gate.torques(6 * NS_PER_MS, np.zeros(3), wall=10.0012)
    assert stats.latencies[0] == pytest.approx(1.2 * MS)
    p50, p99 = stats.latency_percentiles()
    assert p50 == p99 == pytest.approx(1.2 * MS) and not stats.latencies


def test_lockstep_with_stamp_matching_takes_only_the_answer_to_the_last_state():
    gate, log, stats = make_gate(lockstep=True, match_stamp=True)
    gate.state_published(7 * NS_PER_MS, 1.0)
    assert gate.need_command
    assert not gate.joint_command(6 * NS_PER_MS, JOINTS, [1.0, 1.0, 1.0], 7 * NS_PER_MS, 1.0)
    assert stats.stale == 1 and gate.need_command and not gate.rejected
    assert not gate.effort_command([1.0, 1.0, 1.0], 7 * NS_PER_MS, 1.0)  # no stamp
    assert gate.rejected == {("effort_commands", "no stamp"): 1}
    assert gate.joint_command(7 * NS_PER_MS, JOINTS, [1.0, 1.0, 1.0], 7 * NS_PER_MS, 1.0)
    assert not gate.need_command
    assert log.texts("info") == ["first command received: the simulation starts"]


def test_wait_for_first_command_is_reported_once():
    gate, log, _ = make_gate(wait_for_first=True)
    assert gate.waiting_for_first
    gate.joint_command(0, JOINTS, [0.0, 0.0, 0.0], 0, 0.0)
    gate.joint_command(0, JOINTS, [0.0, 0.0, 0.0], 0, 0.0)
    assert not gate.waiting_for_first
    assert log.texts("info").count("first command received: the simulation starts") == 1


def test_lockstep_wait_polls_first_then_blocks_resends_and_times_out():
    gate, _, stats = make_gate(lockstep=True, match_stamp=True, cfg={"sync.timeout_s": 2.0})
    gate.state_published(0, 0.0)
    # before the controller's first answer there is no timeout: a start takes long
    assert gate.lockstep_step(0.0, 0.0, 100.0) == ("resend", 0.0)
    assert gate.lockstep_step(0.0, 99.9, 100.0)[0] == "block"
    assert gate.joint_command(0, JOINTS, [0.0, 0.0, 0.0], 0, 0.0)
    gate.state_published(MS * 1_000_000, 0.0)
    start = 50.0
    assert gate.lockstep_step(start, start, start + 1 * MS) == ("poll", 0.0)
    assert BUSY_POLL_S == 2 * MS
    action, wait = gate.lockstep_step(start, start, start + 3 * MS)
    assert action == "block" and wait == pytest.approx(WAIT_SLICE_S)
    action, wait = gate.lockstep_step(start, start, start + RESEND_S - 10 * MS)
    assert action == "block" and wait == pytest.approx(10 * MS)  # wakes for the resend
    assert gate.lockstep_step(start, start, start + RESEND_S) == ("resend", 0.0)
    action, wait = gate.lockstep_step(start, start + 1.9, start + 1.99)
    assert action == "block" and wait == pytest.approx(10 * MS)  # wakes for the timeout
    assert gate.lockstep_step(start, start + 1.9, start + 2.0) == ("timeout", 0.0)
    assert stats.misses == 1 and not gate.need_command


def test_a_silent_controller_is_lost_and_lockstep_resumes_with_its_next_answer():
    """After sync.timeout_s without an answer the physics steps on without waiting (the
    watchdog then acts in simulated time); an answer to any state published meanwhile
    brings lockstep back from the next state; a reset waits anew."""
    gate, log, stats = make_gate(lockstep=True, match_stamp=True, cfg={"sync.timeout_s": 1.0})
    gate.state_published(0, 0.0)
    assert gate.joint_command(0, JOINTS, [1.0, 2.0, 3.0], 0, 0.0)
    gate.state_published(1_000_000, 0.0)
    assert gate.need_command
    assert gate.lockstep_step(10.0, 10.0, 11.0) == ("timeout", 0.0)
    assert gate.lost and gate.losses == 1 and stats.misses == 1
    assert any("counts as lost" in t for t in log.texts("warning"))
    for k in range(2, 5):  # stepping on: no state waits
        gate.state_published(k * 1_000_000, 0.0)
        assert not gate.need_command
    assert not gate.joint_command(123, JOINTS, [0.0, 0.0, 0.0], 0, 0.0)  # never published
    assert gate.lost and stats.stale == 1
    assert gate.joint_command(2_000_000, JOINTS, [4.0, 5.0, 6.0], 0, 0.0)  # a late answer
    assert not gate.lost and "the controller answers again: lockstep resumes" in log.texts("info")
    gate.state_published(5_000_000, 0.0)
    assert gate.need_command  # waits again
    assert not gate.joint_command(2_000_000, JOINTS, [0.0, 0.0, 0.0], 0, 0.0)  # now stale
    gate.lockstep_step(20.0, 20.0, 21.0)
    assert gate.lost
    gate.clear()  # a reset
    gate.state_published(0, 0.0)
    assert not gate.lost and gate.need_command


def test_several_robots_lockstep_waits_for_each_and_a_lost_one_alone_is_tripped():
    """GateSet (several robots on the node): a step waits until every robot answered its
    state; one silent for sync.timeout_s is lost alone (the other is waited for on), and its
    own watchdog zeroes its own joints only; the torques are each robot's, joined."""
    from types import SimpleNamespace
    from wb_sim.ros.gate import GateSet
    stats = PacerStats()
    logs = {n: Log() for n in ("alice", "bob")}
    cfg = dict(CFG, **{"sync.timeout_s": 1.0})
    gates = [CommandGate(JOINTS, JOINTS, cfg, stats, logs[n], lockstep=True, match_stamp=True)
             for n in ("alice", "bob")]
    parts = [SimpleNamespace(name="alice", joints=slice(0, 3)),
             SimpleNamespace(name="bob", joints=slice(3, 6))]
    fleet = GateSet(gates, parts, 6)
    q = v = np.zeros(6)
    for g in gates:
        g.state_published(0, 0.0)
    assert fleet.need_command and fleet.lockstep_step(0.0, 0.0, 100.0)[0] == "resend"
    assert gates[0].joint_command(0, JOINTS, [1.0, 2.0, 3.0], 0, 0.0)
    assert fleet.need_command  # bob has not answered: no step
    assert gates[1].joint_command(0, JOINTS, [4.0, 5.0, 6.0], 0, 0.0)
    assert not fleet.need_command
    assert fleet.torques(0, v, 0.0, q).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert stats.applied == 1  # one step with new commands, counted once
    for g in gates:
        g.state_published(1_000_000, 0.0)
    assert gates[0].joint_command(1_000_000, JOINTS, [1.5, 2.5, 3.5], 1_000_000, 0.0)
    # bob silent: alice answered, so at the timeout bob alone is lost and the step goes on
    assert fleet.lockstep_step(10.0, 10.0, 10.3)[0] == "block"
    assert fleet.lockstep_step(10.0, 10.0, 11.0) == ("timeout", 0.0)
    assert gates[1].lost and not gates[0].lost and fleet.lost and stats.misses == 1
    assert fleet.lost_robots == ["'bob'"]
    assert not logs["alice"].texts("warning")
    # 0.1 s of simulated time later bob's watchdog zeroes bob's joints; alice's command acts
    t = fleet.torques(100_500_000, v, 0.0, q)  # bob: 100.5 ms since his, alice 99.5
    assert t.tolist() == [1.5, 2.5, 3.5, 0.0, 0.0, 0.0]
    assert gates[1].tripped and not gates[0].tripped
    assert any("no valid command for 0.1 s" in x for x in logs["bob"].texts("warning"))
    assert not any("no valid command" in x for x in logs["alice"].texts())
    for g in gates:  # the next state: alice is waited for, bob (lost) is not
        g.state_published(2_000_000, 0.0)
    assert gates[0].need_command and not gates[1].need_command and fleet.need_command
    fleet.clear()
    assert not fleet.lost


def test_resend_without_stamp_matching_only_until_the_first_command():
    gate, _, _ = make_gate(lockstep=True, match_stamp=False)
    assert gate.resend_wanted()
    gate.joint_command(0, JOINTS, [0.0, 0.0, 0.0], 0, 0.0)
    assert not gate.resend_wanted()
    gate, _, _ = make_gate(lockstep=True, match_stamp=True)
    gate.joint_command(0, JOINTS, [0.0, 0.0, 0.0], 0, 0.0)
    assert gate.resend_wanted()


def test_pushes_on_unknown_links_and_beyond_the_limit_are_refused():
    gate, _, _ = make_gate()
    gate.check_push("hand", 0, "robot")
    with pytest.raises(CommandRejected) as e:
        gate.check_push("foot", 0, "robot")
    assert e.value.kind == "unknown link" and "'foot'" in str(e.value)
    with pytest.raises(CommandRejected) as e:
        gate.check_push("hand", MAX_PUSHES, "robot")
    assert e.value.kind == "too many pushes"


def test_clear_forgets_the_commands():
    gate, _, _ = make_gate()
    gate.joint_command(0, JOINTS, [1.0, 2.0, 3.0], 0, 0.0)
    gate.clear()
    assert not gate.have_cmd and gate.cmd_seq == 0
    np.testing.assert_array_equal(gate.torques(10**9, np.zeros(3), 1.0), [0, 0, 0])


# ----------------------------------------------------------------------------- command modes


def _modes_gate(kp=(100.0,), kd=(10.0,), **kw):
    cfg = {"command.kp": kp, "command.kd": kd, **kw.pop("cfg", {})}
    return make_gate(cfg=cfg, **kw)


def _tau(gate, q, v, t_ms=1):
    return gate.torques(t_ms * NS_PER_MS, np.asarray(v, float), t_ms * MS,
                        joint_positions=np.asarray(q, float))


def test_the_fields_given_select_each_joints_mode():
    """ros2_control's convention: position on a, velocity on b, effort on c, each by
    its own message; the law tau = kp (q_ref - q) + kd (v_ref - v) + tau_ff per joint."""
    gate, _, stats = _modes_gate()
    assert gate.joint_command(0, ["a"], [], 0, 0.0, position=[1.0])
    assert gate.joint_command(0, ["b"], [], 0, 0.0, velocity=[2.0])
    assert gate.joint_command(0, ["c"], [3.0], 0, 0.0)
    tau = _tau(gate, q=[0.5, 0.0, 0.0], v=[0.1, 1.0, 7.0])
    # a: 100 * 0.5 + 10 * (0 - 0.1); b: 10 * (2 - 1); c: its effort, no damping
    np.testing.assert_allclose(tau, [49.0, 10.0, 3.0], rtol=0, atol=1e-12)
    assert stats.accepted == 3


def test_an_impedance_command_gives_every_term():
    gate, _, _ = _modes_gate(kp=(100.0, 200.0, 300.0), kd=(1.0, 2.0, 3.0))
    assert gate.joint_command(0, JOINTS, [1.0, 2.0, 3.0], 0, 0.0, position=[0.1, 0.2, 0.3],
                              velocity=[1.0, 1.0, 1.0])
    tau = _tau(gate, q=[0.0, 0.0, 0.0], v=[0.0, 0.5, 2.0])
    np.testing.assert_allclose(tau, [1 + 10 + 1, 2 + 40 + 1, 3 + 90 - 3], rtol=0, atol=1e-12)


def test_the_law_is_evaluated_at_every_step_from_the_current_state():
    """One command, many steps: the torque follows the state, not the message."""
    gate, _, stats = _modes_gate()
    gate.joint_command(0, ["a"], [], 0, 0.0, position=[1.0])
    assert _tau(gate, [0.0, 0, 0], [0, 0, 0], 1)[0] == pytest.approx(100.0)
    assert _tau(gate, [0.9, 0, 0], [0, 0, 0], 2)[0] == pytest.approx(10.0)
    assert _tau(gate, [1.2, 0, 0], [0.5, 0, 0], 3)[0] == pytest.approx(-25.0)
    assert stats.applied == 1  # one new command, applied at three steps


def test_efforts_alone_are_applied_bit_for_bit_whatever_the_gains():
    efforts = [0.1 + 0.2, -1e-300, 123.456789]
    gate, _, _ = _modes_gate()
    gate.joint_command(0, JOINTS, efforts, 0, 0.0)
    tau = _tau(gate, q=[3.0, 2.0, 1.0], v=[5.0, 6.0, 7.0])
    assert tau.tobytes() == np.array(efforts).tobytes()
    # an effort command takes a joint out of position mode
    gate.joint_command(0, ["a"], [], 0, 0.0, position=[1.0])
    gate.joint_command(0, ["a"], [2.0], 0, 0.0)
    assert _tau(gate, q=[0.0, 2.0, 1.0], v=[5.0, 6.0, 7.0])[0] == 2.0
    # so does effort_commands
    gate.joint_command(0, ["b"], [], 0, 0.0, position=[1.0])
    gate.effort_command([7.0, 8.0, 9.0], 0, 0.0)
    assert _tau(gate, q=[0.0, 0.0, 0.0], v=[1.0, 1.0, 1.0]).tolist() == [7.0, 8.0, 9.0]


def test_positions_without_gains_are_a_reference_only_and_say_so_once():
    """The example controller sends the reference in position beside its efforts: with
    the default gains (0) the efforts act exactly as before, and the log says once why
    the positions do nothing."""
    gate, log, _ = _modes_gate(kp=(0.0,), kd=(0.0,))
    for k in range(3):
        gate.joint_command(0, JOINTS, [1.0, 2.0, 3.0], 0, 0.0, position=[9.0, 9.0, 9.0])
        assert _tau(gate, [0.0, 0, 0], [1.0, 1, 1], k + 1).tolist() == [1.0, 2.0, 3.0]
    notes = [t for t in log.texts("info") if "without gains" in t]
    assert len(notes) == 1 and "a, b, c" in notes[0] and "command.kp" in notes[0]
    assert not [t for t in log.texts("warning") if "without gains" in t]


def test_positions_alone_without_gains_are_a_warning_naming_the_limp_joints():
    """A position controller against the default gains (0): its joints get no torque at
    all; said once, as a warning naming them."""
    gate, log, _ = _modes_gate(kp=(0.0,), kd=(0.0,))
    for k in range(3):
        gate.joint_command(0, JOINTS[:2], [], 0, 0.0, position=[0.5, 0.5])
        assert _tau(gate, [0.0, 0, 0], [1.0, 1, 1], k + 1).tolist() == [0.0, 0.0, 0.0]
    warnings = [t for t in log.texts("warning") if "without gains" in t]
    assert len(warnings) == 1 and "2 of them get no torque at all: a, b" in warnings[0]
    assert not [t for t in log.texts("info") if "without gains" in t]


def test_an_effort_of_zero_beside_a_position_is_an_effort_not_a_limp_joint():
    """The example controller's gravity feed-forward is exactly 0.0 on some joints at the
    start: those joints are given an effort (zero), so the note is an INFO, never the
    'no torque at all' warning (issue 28: the default run warned against our own
    controller)."""
    gate, log, _ = _modes_gate(kp=(0.0,), kd=(0.0,))
    gate.joint_command(0, JOINTS, [0.0, 0.0, 2.5], 0, 0.0, position=[0.1, 0.2, 0.3])
    assert _tau(gate, [0.0, 0, 0], [0.0, 0, 0]).tolist() == [0.0, 0.0, 2.5]
    assert not [t for t in log.texts("warning") if "without gains" in t]
    assert len([t for t in log.texts("info") if "without gains" in t]) == 1


def test_gains_are_one_value_or_one_per_command_joint_name_and_change_whole():
    from wb_sim.errors import ConfigError
    gate, _, _ = _modes_gate(kp=(10.0, 20.0), kd=(0.0,), command_joint_names=["c", "a"])
    kp, kd = gate.gains(gate.cfg)
    assert kp.tolist() == [20.0, 0.0, 10.0] and kd.tolist() == [0.0, 0.0, 0.0]
    gate.joint_command(0, JOINTS, [], 0, 0.0, position=[1.0, 1.0, 1.0])
    assert _tau(gate, [0.0] * 3, [0.0] * 3).tolist() == [20.0, 0.0, 10.0]
    with pytest.raises(ConfigError, match=r"parameter 'command.kd': expected one value .* or 2 "
                                          r"\(one per joint of command.joint_names.*c, a\), got 3"):
        gate.cfg = dict(gate.cfg, **{"command.kp": (1.0,), "command.kd": (1.0, 2.0, 3.0)})
    assert gate.gains(gate.cfg)[0].tolist() == [20.0, 0.0, 10.0]  # nothing changed
    gate.cfg = dict(gate.cfg, **{"command.kp": (5.0,)})  # live: the next step uses it
    assert _tau(gate, [0.0] * 3, [0.0] * 3, 2).tolist() == [5.0, 5.0, 5.0]


@pytest.mark.parametrize("names, fields, kind, text", [
    (["a", "b"], {"position": [1.0]}, "length mismatch", "2 names but 1 positions"),
    (["a"], {"velocity": [1.0, 2.0]}, "length mismatch", "1 names but 2 velocities"),
    (["a", "b"], {"position": [1.0, 2.0], "effort": [1.0]}, "length mismatch", "1 efforts"),
    (["a", "b"], {}, "no values", "no position, velocity or effort"),
    (["a", "b"], {"position": [1.0, math.nan]}, "non-finite", "non-finite position for b"),
    (["a"], {"velocity": [math.inf]}, "non-finite", "non-finite velocity for a"),
    (["a", "zz"], {"position": [1.0, 2.0]}, "unknown joint", "unknown joint 'zz'"),
])
def test_a_bad_mixed_command_is_rejected_whole(names, fields, kind, text):
    gate, log, stats = _modes_gate()
    gate.joint_command(0, JOINTS, [1.0, 2.0, 3.0], 0, 0.0)
    effort = fields.pop("effort", [])
    assert not gate.joint_command(0, names, effort, NS_PER_MS, 0.001, **fields)
    assert gate.rejected == {("joint_commands", kind): 1} and stats.accepted == 1
    assert any(text in t for t in log.texts("warning")), log
    assert _tau(gate, [0.0] * 3, [1.0] * 3, 2).tolist() == [1.0, 2.0, 3.0]  # the last valid one


def test_nan_is_unset_leaves_that_interface_uncommanded():
    """command.nan_is_unset: what joint_state_topic_hardware_interface publishes for a
    command interface no controller has written (NaN)."""
    gate, _, _ = _modes_gate(cfg={"command.nan_is_unset": True})
    gate.joint_command(0, JOINTS, [1.0, 2.0, 3.0], 0, 0.0)
    assert gate.joint_command(0, JOINTS, [5.0, math.nan, math.nan], 0, 0.0,
                              position=[math.nan, 0.5, math.nan])
    # a: effort 5; b: position 0.5 (no effort: 0); c: all NaN, keeps its effort 3
    np.testing.assert_allclose(_tau(gate, [0.0] * 3, [0.0] * 3), [5.0, 50.0, 3.0], atol=1e-12)
    assert not gate.joint_command(0, JOINTS, [], 0, 0.0, position=[math.nan] * 3)
    assert not gate.joint_command(0, ["a"], [math.inf], 0, 0.0)
    assert gate.rejected == {("joint_commands", "no command"): 1,
                             ("joint_commands", "non-finite"): 1}
    gate, _, _ = _modes_gate()  # the default: a NaN rejects the message
    assert not gate.joint_command(0, ["a", "b"], [1.0, 2.0], 0, 0.0, position=[math.nan, 0.0])
    assert gate.rejected == {("joint_commands", "non-finite"): 1}


def test_watchdog_hold_keeps_servoing_the_last_targets_zero_forgets_them():
    gate, _, _ = _modes_gate(cfg={"command.timeout_action": "hold"})
    gate.joint_command(0, ["a", "b"], [1.0, 0.0], 0, 0.0, position=[1.0, 0.0])
    tau = _tau(gate, [0.5, 0.0, 0.0], [0.0] * 3, 200)  # tripped: holds
    assert gate.tripped and tau[0] == pytest.approx(1.0 + 50.0)
    assert _tau(gate, [0.8, 0.0, 0.0], [0.0] * 3, 201)[0] == pytest.approx(1.0 + 20.0)
    gate, _, _ = _modes_gate(cfg={"command.timeout_action": "zero"})
    gate.joint_command(0, ["a", "b"], [1.0, 0.0], 0, 0.0, position=[1.0, 1.0])
    assert _tau(gate, [0.5, 0.0, 0.0], [0.0] * 3, 200).tolist() == [0.0, 0.0, 0.0]
    gate.joint_command(0, ["a"], [2.0], 201 * NS_PER_MS, 0.201)  # back, for a only
    assert _tau(gate, [0.5, 0.0, 0.0], [0.0] * 3, 202).tolist() == [2.0, 0.0, 0.0]


# ----------------------------------------------------------------------------- command timing


def _timing_gate(timeout_s: float = 0.0, **timing):
    """A gate with command timing (``latency_steps=3``: ``command.latency_steps`` 3), 1 ms
    steps, the watchdog off unless ``timeout_s``."""
    cfg = {"command.timeout_s": timeout_s, **{f"command.{k}": v for k, v in timing.items()}}
    return make_gate(cfg=cfg, dt_ns=NS_PER_MS)


def _run_timed(gate, steps: int, first: int = 0, send=lambda k: True,
               pending: list | None = None) -> list[int]:
    """Steps ``first`` .. ``first + steps - 1`` of 1 ms: at step k (where ``send(k)``) the
    command i = k - first is sent as efforts [i + 1] * 3, then the step's torques are
    read. Returns, per step, the i of the command acting (-1: none); ``pending`` gets the
    entries of the delay line after each step."""
    out = []
    for k in range(first, first + steps):
        if send(k):
            assert gate.effort_command([float(k - first + 1)] * 3, k * NS_PER_MS, 0.0)
        tau = gate.torques(k * NS_PER_MS, np.zeros(3), 0.0)
        assert tau[0] == tau[1] == tau[2]
        out.append(int(tau[0]) - 1)
        if pending is not None:
            pending.append(gate.timing.count)
    return out


def _expected_timed(steps: int, latency: int, jitter: int = 0, law: str = "uniform",
                    p: float = 0.0, seed: int = 0, send=lambda k: True) -> tuple[list, dict]:
    """What :func:`_run_timed` must see, from the parameters' text alone: per sent
    command two draws of PCG64(seed) (the drop's, the jitter's), release step
    max(k + latency + j, the previous release); the first kept command acts from its
    arrival. Returns the acting command per step and the release step of each kept one."""
    from wb_sim.ros.timing import JITTER_DISTRIBUTIONS
    rng = np.random.Generator(np.random.PCG64(seed))
    release: dict[int, int] = {}
    last = -1
    for k in range(steps):
        if not send(k):
            continue
        j = 0
        if jitter or p:
            lost, u = rng.random() < p, rng.random()
            if lost:
                continue
            j = JITTER_DISTRIBUTIONS[law](u, jitter)
        last = release[k] = max(k + latency + j, last)
    first = min(release, default=None)
    acting = []
    for s in range(steps):
        due = [k for k, r in release.items() if r <= s]
        acting.append(max(due) if due else first if first is not None and s >= first else -1)
    return acting, release


def test_without_timing_parameters_there_is_no_delay_line():
    for cfg in ({}, {"command.latency_steps": 0, "command.jitter_steps": 0,
                     "command.drop_probability": 0.0, "command.timing_seed": 7}):
        gate, log, _ = make_gate(cfg=cfg)
        assert gate.timing is None and gate.dropped == 0 and not log.texts("info")
    gate, log, _ = _timing_gate(latency_steps=3)
    assert gate.timing is not None
    assert log.texts("info") == ["command timing: commands become active 3 steps after they "
                                 "arrive, in order"]


def test_latency_releases_each_command_exactly_n_steps_later_as_the_cores_delay():
    gate, _, stats = _timing_gate(latency_steps=3)
    # one command a step: step s applies the one of step s - 3; the first fills the pipe
    # (joints.command_delay_steps: "until then, the first command given")
    assert _run_timed(gate, 12) == [0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert stats.accepted == 12 and stats.applied == 9  # released at steps 3 .. 11
    # after a silence, a lone command acts exactly 3 steps after it arrives
    gate, _, _ = _timing_gate(latency_steps=3)
    acting = _run_timed(gate, 20, send=lambda k: k in (2, 10))
    assert acting == [-1, -1] + [2] * 11 + [10] * 7
    assert acting.index(10) == 13
    # with a latency of 0 and drops on, a kept command acts at the step it arrives
    gate, _, _ = _timing_gate(drop_probability=1e-9)
    assert _run_timed(gate, 5) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("law", ["uniform", "geometric"])
def test_jitter_follows_its_seed_exactly_and_commands_never_overtake(law):
    kw = dict(latency_steps=2, jitter_steps=5, jitter_distribution=law)
    runs, entries = {}, {}
    for seed in (11, 11, 12):
        gate, _, _ = _timing_gate(timing_seed=seed, **kw)
        entries[seed] = []
        runs.setdefault(seed, []).append(_run_timed(gate, 400, pending=entries[seed]))
    assert runs[11][0] == runs[11][1]  # the same seed: the same run
    assert runs[11][0] != runs[12][0]  # another seed: another one
    for seed in (11, 12):
        expected, release = _expected_timed(400, 2, 5, law, seed=seed)
        assert runs[seed][0] == expected
        acting = runs[seed][0]
        assert all(b >= a for a, b in zip(acting, acting[1:]))  # in order: none overtakes
        # one entry per release step still to come (the commands of one step merged)
        assert entries[seed] == [len({r for k, r in release.items() if k <= s < r})
                                 for s in range(400)]
        assert all(k + 2 <= r <= k + 7 for k, r in release.items())  # within the bounds
        # the rule was exercised: some command's own draw was earlier than its release
        assert any(release[k + 1] == release[k] for k in range(399))
    # the laws, from their inverse distribution functions
    from wb_sim.ros.timing import JITTER_DISTRIBUTIONS
    uniform, geometric = JITTER_DISTRIBUTIONS["uniform"], JITTER_DISTRIBUTIONS["geometric"]
    assert [uniform(u, 3) for u in (0.0, 0.2499, 0.25, 0.5, 0.75, 0.99999)] == [0, 0, 1, 2, 3, 3]
    assert [geometric(u, 3) for u in (0.0, 0.4999, 0.5, 0.7499, 0.75, 0.875, 0.999)] == \
        [0, 0, 1, 1, 2, 3, 3]
    u = np.random.default_rng(3).random(100_000)
    for f, probs in ((uniform, [1 / 5] * 5), (geometric, [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 16])):
        counts = np.bincount([f(x, 4) for x in u], minlength=5)
        sigma = np.sqrt(u.size * np.multiply(probs, np.subtract(1, probs)))
        assert np.all(np.abs(counts - u.size * np.array(probs)) <= 4 * sigma), counts


def test_drop_probability_loses_that_share_of_commands_within_4_sigma():
    n, p = 10_000, 0.3
    gate, log, _ = _timing_gate(drop_probability=p, timing_seed=5)
    acting = _run_timed(gate, n)
    expected, release = _expected_timed(n, 0, p=p, seed=5)
    assert acting == expected  # lost ones never act: the last kept one stays
    assert gate.dropped == n - len(release)
    assert abs(gate.dropped - n * p) <= 4 * math.sqrt(n * p * (1 - p)), gate.dropped
    assert "lost with probability 0.3 (command.timing_seed 5)" in log.texts("info")[0]


def test_reset_empties_the_line_and_seeds_again_so_the_run_repeats():
    kw = dict(latency_steps=4, jitter_steps=3, drop_probability=0.2, timing_seed=9)
    gate, _, _ = _timing_gate(**kw)
    first = _run_timed(gate, 300)
    _run_timed(gate, 10, first=300)  # commands pending in the line
    assert gate.timing.count > 0
    gate.clear()
    assert gate.timing.count == 0 and gate.dropped == 0
    # nothing pending acts after the reset (the node's clock goes on)
    assert _run_timed(gate, 20, first=310, send=lambda k: False) == [-1] * 20
    assert _run_timed(gate, 300, first=330) == first
    assert first == _expected_timed(300, 4, 3, p=0.2, seed=9)[0]


def test_the_watchdog_counts_from_the_release_not_the_arrival():
    # 50 ms of latency, a 100 ms watchdog (CFG: zero): the last command, sent at step 99,
    # becomes active at 149 and the watchdog trips 100 ms later, at step 250
    gate, log, _ = _timing_gate(timeout_s=0.1, latency_steps=50)
    acting = _run_timed(gate, 300, send=lambda k: k < 100)
    assert acting[149] == acting[200] == acting[249] == 99  # from the arrival: 200
    assert acting[250:] == [-1] * 50 and gate.tripped
    assert sum("no valid command for 0.1 s" in t for t in log.texts("warning")) == 1
    # a latency longer than the watchdog: the first command fills the pipe, unwatched
    gate, _, _ = _timing_gate(timeout_s=0.1, latency_steps=150)
    acting = _run_timed(gate, 400)
    assert acting == [0] * 151 + list(range(1, 250)) and not gate.tripped
    # a command released while tripped brings the commands back
    gate, log, _ = _timing_gate(timeout_s=0.1, latency_steps=50)
    acting = _run_timed(gate, 400, send=lambda k: k < 100 or k == 300)
    assert acting[349] == -1 and acting[350] == 300 and not gate.tripped
    assert "commands are back; applying them" in log.texts("info")


def test_the_delay_line_is_bounded_and_merges_the_commands_of_one_release_step():
    gate, _, _ = _timing_gate(latency_steps=2)
    gate.joint_command(0, ["a"], [1.0], 0, 0.0)
    gate.joint_command(0, ["b"], [2.0], 0, 0.0)
    assert gate.timing.count == 1  # one release step: one entry
    taus = [gate.torques(k * NS_PER_MS, np.zeros(3), 0.0).tolist() for k in range(3)]
    assert taus == [[1, 0, 0], [1, 0, 0], [1, 2, 0]]  # the first fills; both at step 2
    # a flood of 50 commands a step, with jitter: never more than latency + jitter + 1
    gate, _, _ = _timing_gate(latency_steps=3, jitter_steps=2, timing_seed=1)
    assert gate.timing.capacity == 6
    most = 0
    for k in range(200):
        for i in range(50):
            gate.joint_command(0, [JOINTS[i % 3]], [float(k)], k * NS_PER_MS, 0.0)
            most = max(most, gate.timing.count)
        gate.torques(k * NS_PER_MS, np.zeros(3), 0.0)
    assert most == 6


@pytest.mark.parametrize("key, bad, text", [
    ("command.latency_steps", 1001, "must be in [0, 1000] steps"),
    ("command.jitter_steps", 5000, "must be in [0, 1000] steps"),
    ("command.drop_probability", 1.0, "must be < 1 (1 would lose every command)"),
    ("command.drop_probability", -0.1, "must be in [0, 1]"),
    ("command.jitter_distribution", "normal", "must be one of 'uniform', 'geometric'"),
    ("command.timing_seed", -1, "must be >= 0"),
])
def test_timing_parameters_out_of_bounds_are_refused_naming_key_and_bound(key, bad, text):
    from wb_sim.errors import ConfigError
    from wb_sim.ros.parameters import load_node_config
    expected = f"parameter '{key}': {text} (got {bad!r})"
    with pytest.raises(ConfigError) as e:
        make_gate(cfg={key: bad}, dt_ns=NS_PER_MS)
    assert str(e.value) == expected
    with pytest.raises(ConfigError) as e:
        load_node_config({key: bad})
    assert str(e.value) == expected


def test_latency_in_the_gate_is_the_cores_command_delay_step_for_step():
    """The humanoid under PD + gravity compensation: efforts through a gate with
    command.latency_steps 3 give, bit for bit, the core's run with
    joints.command_delay_steps 3 (the first command fills both pipes: it acts at
    steps 0 .. 3)."""
    import wb_sim
    from wb_sim.config import read_yaml_params
    from wb_sim.controllers import PDGravityController
    from wb_sim.ros.parameters import load_node_config

    n, steps = 3, 500
    path = wb_sim.config_path("humanoid")
    gains = read_yaml_params(path, node_name="wb_sim_pd_controller")
    sims, ctrls = [], []
    for delay in (0, n, 0):  # through the gate, the core's delay, no delay at all
        sim = wb_sim.Simulator.from_yaml(path, {"joints.command_delay_steps": delay})
        sims.append(sim)
        ctrls.append(PDGravityController(sim.robot, sim.state.joint_positions, gains["kp"],
                                         gains["kd"], gravity=sim.config.gravity))
    names = list(sims[0].joint_names)
    dt_ns = round(sims[0].dt * 1e9)
    gate = CommandGate(names, names, load_node_config({"command.latency_steps": n}),
                       PacerStats(), Log(), dt_ns=dt_ns)
    first = None
    for k in range(steps):
        taus = []
        for sim, ctrl in zip(sims, ctrls):
            st = sim.state
            taus.append(ctrl(st.q, st.joint_positions, st.joint_velocities))
        assert gate.effort_command(taus[0], k * dt_ns, 0.0)
        st = sims[0].state
        applied = gate.torques(k * dt_ns, st.joint_velocities, 0.0, st.joint_positions)
        first = taus[0] if first is None else first
        if k <= n:
            np.testing.assert_array_equal(applied, first)
        sims[0].step(applied)
        sims[1].step(taus[1])
        sims[2].step(taus[2])
        assert np.array_equal(sims[0].q, sims[1].q) and \
            np.array_equal(sims[0].v, sims[1].v), f"step {k}"
    # the delay changes the run: the comparison could fail
    assert np.max(np.abs(sims[1].v - sims[2].v)) > 1e-6


# ----------------------------------------------------------------------------- pacer


def run_steps(pacer: Pacer, clock: FakeClock, n: int, step_ms: float, rtf: float = 1.0,
              lockstep: bool = False, spikes: dict[int, float] | None = None) -> list[float]:
    """Run n steps of ``step_ms`` compute each (plus ``spikes``: step -> extra ms);
    returns each step's end relative to its deadline, ms."""
    pacer.anchor(clock.now())
    t0, late = clock.now(), []
    for k in range(1, n + 1):
        clock.t += (step_ms + (spikes or {}).get(k, 0.0)) * MS
        late.append((clock.now() - (t0 + k * pacer.dt / rtf)) / MS)
        wait, behind = pacer.after_step(clock.now(), rtf, lockstep)
        if behind:
            t0 = clock.now() - k * pacer.dt / rtf
        if wait > 0:
            pacer.wait(wait, FakeEvent(), spin=not lockstep)
    return late


def test_pacer_keeps_absolute_deadlines_at_real_time_factor_2():
    clock = FakeClock()
    pacer = Pacer(1 * MS, clock=clock, spin_margin_s=0.0)
    t0 = clock.now()
    run_steps(pacer, clock, 1000, step_ms=0.3, rtf=2.0)
    assert clock.now() - t0 == pytest.approx(0.5, abs=1e-9)  # 1000 steps of 0.5 ms
    assert pacer.stats.steps == 1000 and pacer.stats.misses == 0
    assert pacer.stats.real_time_factor(clock.now(), 1.0) == pytest.approx(2.0)
    assert pacer.policy == "sleep"


def test_a_late_wake_up_below_the_spin_margin_costs_no_miss_plain_sleep_misses():
    """Every sleep wakes 2 ms late and a step computes 0.3 ms: with plain sleeps the
    step after a sleep ends 1.3 ms after its deadline (a miss); sleeping until 0.6 ms
    before the deadline absorbs 0.6 ms of the late wake-up: 0.7 ms late, no miss."""
    plain = Pacer(1 * MS, clock=FakeClock(late_ms=2.0), spin_margin_s=0.0)
    late = run_steps(plain, plain.clock, 1000, step_ms=0.3)
    assert max(late) == pytest.approx(1.3)
    assert plain.stats.misses >= 200
    hybrid = Pacer(1 * MS, clock=FakeClock(late_ms=2.0), spin_margin_s=0.6 * MS)
    late = run_steps(hybrid, hybrid.clock, 1000, step_ms=0.3)
    assert hybrid.stats.misses == 0 and max(late) == pytest.approx(0.7)
    assert hybrid.policy == "sleep + spin 0.6 ms"


def test_spin_costs_the_margin_of_each_period_in_yields():
    """The CPU cost of the active wait: ~margin / yield-time yields per step."""
    clock = FakeClock(late_ms=0.0, yield_ms=0.01)
    pacer = Pacer(1 * MS, clock=clock, spin_margin_s=0.2 * MS)
    late = run_steps(pacer, clock, 100, step_ms=0.3)
    assert clock.yields == pytest.approx(100 * 20, rel=0.06)  # 0.2 ms / 0.01 ms a step
    # each sleep stopped the margin short: period - step - margin = 0.5 ms
    assert np.median(clock.slept) == pytest.approx(0.5 * MS, abs=1e-9)
    assert max(late) < 0.3 - 1.0 + 0.02  # every step ends on time (its compute before it)


def test_misses_per_1000_and_reanchoring_after_a_long_stall():
    clock = FakeClock()
    pacer = Pacer(1 * MS, clock=clock, spin_margin_s=0.0)
    late = run_steps(pacer, clock, 1000, step_ms=0.5, spikes={100: 1.7, 500: 800.0})
    # step 100 ends 1.2 ms late (a miss; the next ones catch up), step 500 0.8 s late
    assert late[99] == pytest.approx(1.2)
    assert pacer.stats.misses == 2
    assert pacer.stats.misses_per_1000() == pytest.approx(2.0)
    assert max(late[500:]) < 1.0  # re-anchored: the steps after the stall are on time


def test_reanchoring_at_realtime_priority_suspends_it_until_the_next_factor():
    clock = FakeClock()
    calls = []
    pacer = Pacer(1 * MS, clock=clock, set_priority=calls.append, tune=lambda: [])
    assert pacer.schedule(50, pacing=True) is None and pacer.priority == 50
    assert pacer.policy == "SCHED_FIFO 50"
    clock.t += 0.7
    wait, behind = pacer.after_step(clock.now(), 1.0, False)
    assert behind == pytest.approx(0.699) and wait == 0
    assert pacer.fell_behind() and pacer.suspended
    pacer.schedule(50, pacing=True)
    assert pacer.priority == 0 and calls == [50, 0]
    pacer.unsuspend()
    pacer.schedule(50, pacing=True)
    assert calls == [50, 0, 50]


def test_refused_realtime_priority_is_reported_once_and_the_hybrid_wait_is_used():
    def refuse(prio):
        if prio:
            raise PermissionError("Operation not permitted")
    pacer = Pacer(1 * MS, clock=FakeClock(), set_priority=refuse, spin_margin_s=0.2 * MS,
                  tune=lambda: ["slice 0.1 ms"])
    assert "not permitted" in pacer.schedule(50, pacing=True)
    assert pacer.schedule(50, pacing=True) is None  # not again
    assert pacer.priority == 0
    assert pacer.policy == "sleep + spin 0.2 ms (slice 0.1 ms)"
    pacer.schedule(50, pacing=False)  # lockstep / as fast as possible: normal scheduler


def test_lockstep_pace_is_a_cap_late_steps_are_no_misses_and_do_not_spin():
    clock = FakeClock()
    pacer = Pacer(1 * MS, clock=clock, spin_margin_s=0.5 * MS)
    run_steps(pacer, clock, 100, step_ms=0.2, lockstep=True, spikes={10: 30.0})
    assert pacer.stats.misses == 0 and clock.yields == 0


def test_a_long_wait_is_cut_into_slices_and_ends_when_woken():
    clock = FakeClock()
    pacer = Pacer(1 * MS, clock=clock, spin_margin_s=0.2 * MS)
    t0 = clock.now()
    pacer.wait(1e6, FakeEvent(set_after=4))  # a real-time factor of 1e-9
    assert clock.now() - t0 <= 4 * 0.05 + 1e-9
    assert max(clock.slept) <= 0.05
    t0 = clock.now()
    pacer.wait(1.0, FakeEvent(), running=lambda: clock.now() - t0 < 0.12)  # stop()
    assert clock.now() - t0 == pytest.approx(0.15)


def test_real_time_factor_zero_never_waits():
    clock = FakeClock()
    pacer = Pacer(1 * MS, clock=clock)
    assert pacer.after_step(clock.now() + 5.0, 0.0, False) == (0.0, 0.0)
    assert pacer.stats.misses == 0


def test_stats_lines_have_the_format_bench_and_soak_parse():
    from wb_sim.ros.bench import LOCKSTEP_REPORT, REPORT
    clock = FakeClock()
    pacer = Pacer(1 * MS, clock=clock, spin_margin_s=0.0)
    pacer.stats.reset(clock.now(), 0.0)
    run_steps(pacer, clock, 2000, step_ms=0.4, spikes={3: 2.0})  # 1.4 ms late
    m = REPORT.search(pacer.pace_text(clock.now(), 2.0))
    assert float(m["rtf"]) == pytest.approx(1.0, abs=1e-3) and float(m["miss"]) == 0.5
    m = LOCKSTEP_REPORT.search(pacer.lockstep_text(clock.now(), 2.0))
    assert int(m["sps"]) == 1000


def test_the_observers_cost_is_measured_against_its_neighbour_windows_so_a_drift_cancels():
    """``bench --observer-windows``: an observer that costs 10 % on a machine whose speed
    drifts by 30 % over the run measures 10 %; the windows' plain means would not."""
    from wb_sim.ros.bench.perf import window_costs
    t0, window, period = 100.0, 4.0, 1.0
    lines = []
    for i in range(1, 49):  # a stats line a second, for 48 s: 12 windows, on first
        end = t0 + 0.05 + i * period
        k = int((end - t0) // window)
        speed = 8.0 * (1.0 + 0.3 * (end - t0) / 48)  # the machine's drift
        lines.append((end, period, speed * (0.9 if k % 2 == 0 else 1.0)))
    r = window_costs(lines, t0, window)
    assert len(r["pairs"]) == 5  # on windows 2, 4, ..., 10, between two off ones
    assert r["pairs"] == [pytest.approx(0.1, abs=1e-9)] * 5 and r["cost"] == pytest.approx(0.1)
    assert abs(1.0 - r["on"] / r["off"] - 0.1) > 0.015  # the plain means: misled by the drift
    # a line reaching back over a switch (or less than the margin after it) is no window's
    mixed = [(t0 + 4.1, 1.0, 1.0), (t0 + 7.5, 1.0, 5.0), (t0 + 8.3, 1.0, 1.0),
             (t0 + 9.5, 1.0, 4.0), (t0 + 13.5, 1.0, 3.0)]
    assert window_costs(mixed, t0, window)["pairs"] == [pytest.approx(1 - 4.0 / 4.0)]
    assert window_costs(lines[:6], t0, window) == {}  # no on window between two off ones


def test_a_negative_spin_margin_is_refused():
    with pytest.raises(ValueError, match="spin margin"):
        Pacer(1 * MS, clock=FakeClock(), spin_margin_s=-1.0)


# ----------------------------------------------------------------------------- stream table


def test_stream_table_decimation_and_what_is_due():
    table = StreamTable({"joint_states": 1, "imu": 2, "tf": 10, "clock": 1}, 1000.0)
    assert table.due(0) == ("joint_states", "clock", "imu", "tf")  # publishing order
    assert table.due(1) == ("joint_states", "clock")
    assert table.due(2) == ("joint_states", "clock", "imu")
    assert table.due(30) == ("joint_states", "clock", "imu", "tf")
    counts = {s: sum(s in table.due(k) for k in range(1000)) for s in table.every}
    assert counts == {"joint_states": 1000, "clock": 1000, "imu": 500, "tf": 100}
    assert table.rate_hz("tf") == 100.0 and table.rate_hz("odom") == 0.0
    assert "odom" not in table and table.due(7, every=True) == ("joint_states", "clock",
                                                                  "imu", "tf")


def test_stream_table_from_the_node_parameters():
    from wb_sim.ros.parameters import load_node_config
    cfg = load_node_config({"publish.imu_rate_hz": 250.0, "publish.tf_rate_hz": 30.0})
    table = StreamTable.from_config(cfg, 1000.0, {"joint_states": True, "imu": True,
                                                  "tf": True, "odom": False})
    assert table.every == {"joint_states": 1, "imu": 4, "tf": 33}
    assert table.due(33) == ("joint_states", "tf")


def test_stream_table_refuses_unknown_streams_and_bad_decimations():
    with pytest.raises(ValueError, match="unknown stream"):
        StreamTable({"jointstates": 1}, 1000.0)
    with pytest.raises(ValueError, match="whole numbers"):
        StreamTable({"imu": 0}, 1000.0)


def test_stream_table_with_a_long_pattern_computes_due_on_the_fly():
    table = StreamTable({"joint_states": 997, "imu": 991, "tf": 983}, 1000.0)
    assert table._due is None
    assert table.due(997 * 991) == ("joint_states", "imu")


def test_the_normal_scheduler_tuning_is_asked_once_and_reported_in_the_policy():
    asked = []
    pacer = Pacer(1 * MS, clock=FakeClock(), set_priority=lambda prio: None,
                  tune=lambda: asked.append(1) or ["slice 0.1 ms"], spin_margin_s=0.2 * MS)
    assert pacer.policy == "sleep + spin 0.2 ms"  # nothing asked before the loop schedules
    pacer.schedule(0, pacing=True)
    pacer.schedule(50, pacing=True)
    pacer.schedule(0, pacing=False)
    assert asked == [1]
    assert pacer.policy == "sleep + spin 0.2 ms (slice 0.1 ms)"


def test_tune_normal_grants_the_slice_on_this_thread_only():
    """The real system call, on a thread of its own (it changes the calling thread):
    Linux 6.12+ (EEVDF) grants the slice to anyone; the test's thread keeps its own."""
    import ctypes
    import platform
    import threading

    from wb_sim.ros.pacer import _SchedAttr, tune_normal
    kernel = tuple(int(x) for x in re.findall(r"\d+", platform.release())[:2])
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64") \
            or kernel < (6, 12):
        pytest.skip(f"the slice is Linux 6.12+'s (this: {platform.system()} {platform.release()})")

    def runtime() -> int:
        a = _SchedAttr()
        a.size = ctypes.sizeof(a)
        nr = {"x86_64": 315, "aarch64": 275}[platform.machine()]
        assert ctypes.CDLL(None).syscall(nr, 0, ctypes.byref(a), a.size, 0) == 0
        return a.sched_runtime

    out = []
    t = threading.Thread(target=lambda: out.append((tune_normal(), runtime())))
    t.start()
    t.join()
    assert out[0] == (["slice 0.1 ms"], 100_000)
    assert runtime() != 100_000
