"""ROS 2 simulation_interfaces on the node (wb_sim/ros/sim_interfaces.py), called
over real DDS as any simulator-agnostic client calls them: features, entities,
entity state get/set round trip, pause / step / play / stop, reset scopes, named
poses, and the same through ros2cli where the launch stack is installed.

Skipped without rclpy or simulation_interfaces unless ``WB_SIM_REQUIRE_ROS=1``
(CI: tools/setup_venv.sh generates simulation_interfaces)."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

from helpers.extras import require_ros

require_ros("sensor_msgs.msg", "simulation_interfaces.srv")

from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from simulation_interfaces import msg as si_msg  # noqa: E402
from simulation_interfaces import srv as si  # noqa: E402

import wb_sim  # noqa: E402
from helpers.ros import LockstepController, SimSetup, cli_answered, ros_env, stamp_ns  # noqa: E402

DT_NS = 1_000_000
STATE_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
POSES = ("poses:=[crouch]", "poses.crouch.joint_names:=[l_knee]",
         "poses.crouch.joint_positions:=[0.3]", "poses.crouch.base_position:=[0.1, 0.0, 0.75]")


@pytest.fixture(scope="module")
def s(tmp_path_factory):
    setup = SimSetup(tmp_path_factory.mktemp("sim_interfaces"), "sync.mode:=lockstep",
                     "real_time_factor:=0.0", *POSES)
    yield setup
    setup.close()


def _call(s, kind, name, timeout: float = 10.0, **fields):
    """Call /wb_sim/<name> (one warmed-up client per service, see RosClient.call)."""
    return s.ros.call(kind, f"/wb_sim/{name}", kind.Request(**fields), timeout)


OK = si_msg.Result.RESULT_OK


def test_features_and_the_robot_entity(s):
    F = si_msg.SimulatorFeatures
    features = set(_call(s, si.GetSimulatorFeatures, "get_simulator_features").features.features)
    assert {F.SIMULATION_RESET_STATE, F.STEP_SIMULATION_MULTIPLE, F.ENTITY_STATE_GETTING,
            F.ENTITY_STATE_SETTING, F.NAMED_POSES, F.SIMULATION_STATE_PAUSE} <= features
    assert F.SPAWNING in features and F.DELETING in features  # free objects
    assert F.SIMULATION_RESET_TIME not in features
    res = _call(s, si.GetEntities, "get_entities")
    assert res.result.result == OK and res.entities == ["wb_humanoid"]
    res = _call(s, si.GetEntities, "get_entities",
                filters=si_msg.EntityFilters(filter="^nothing$"))
    assert res.entities == []
    res = _call(s, si.GetEntityState, "get_entity_state", entity="nobody")
    assert res.result.result == si_msg.Result.RESULT_NOT_FOUND


def test_entity_state_round_trip(s):
    state = si_msg.EntityState()
    state.pose.position.x, state.pose.position.y, state.pose.position.z = 0.3, -0.1, 1.2
    state.pose.orientation.z, state.pose.orientation.w = np.sin(0.25), np.cos(0.25)
    state.twist.linear.x, state.twist.angular.z = 0.5, 0.2
    res = _call(s, si.SetEntityState, "set_entity_state", entity="wb_humanoid", state=state,
                set_pose=True, set_twist=True)
    assert res.result.result == OK, res.result.error_message
    got = _call(s, si.GetEntityState, "get_entity_state", entity="wb_humanoid").state
    assert got.header.frame_id == "world"
    assert (got.pose.position.x, got.pose.position.y, got.pose.position.z) == (0.3, -0.1, 1.2)
    assert got.pose.orientation.z == pytest.approx(np.sin(0.25), abs=1e-15)
    assert got.twist.linear.x == pytest.approx(0.5, abs=1e-15)
    assert got.twist.angular.z == pytest.approx(0.2, abs=1e-15)
    assert _call(s, si.ResetSimulation, "reset_simulation",
                 scope=si.ResetSimulation.Request.SCOPE_STATE).result.result == OK
    back = _call(s, si.GetEntityState, "get_entity_state", entity="wb_humanoid").state
    assert back.pose.position.x == 0.0 and back.twist.linear.x == 0.0
    res = _call(s, si.ResetSimulation, "reset_simulation",
                scope=si.ResetSimulation.Request.SCOPE_TIME)
    assert res.result.result == si_msg.Result.RESULT_FEATURE_UNSUPPORTED


@pytest.mark.parametrize("where, value, fragments", [
    ("position", -0.5, ("set_base_state: position [0, 0, -0.5] and quaternion [0, 0, 0, 1] "
                        "puts contact surface",
                        "mm into the ground", "contact.max_penetration")),
    ("linear", 1e5, ("|linear_velocity| = 1e+05 m/s", "above 10000")),
])
def test_set_entity_state_refuses_what_the_next_step_would_refuse(s, where, value, fragments):
    """A base under the ground or at 1e5 m/s (issue 27) is refused by the call, naming the
    value, and changes nothing; it was taken and the next step diverged."""
    before = _call(s, si.GetEntityState, "get_entity_state", entity="wb_humanoid").state
    state = si_msg.EntityState()
    state.pose.orientation.w = 1.0
    if where == "position":
        state.pose.position.z = value
    else:
        state.pose.position.z = before.pose.position.z
        state.twist.linear.x = value
    res = _call(s, si.SetEntityState, "set_entity_state", entity="wb_humanoid", state=state,
                set_pose=True, set_twist=where != "position")
    assert res.result.result == si_msg.Result.RESULT_OPERATION_FAILED
    for fragment in fragments:
        assert fragment in res.result.error_message, res.result.error_message
    after = _call(s, si.GetEntityState, "get_entity_state", entity="wb_humanoid").state
    assert after.pose == before.pose and after.twist == before.twist


def test_after_set_entity_state_lockstep_continues_as_the_core_does(s):
    """Reset, SetEntityState (pose and twist, the humanoid thrown 0.4 m up, sideways and
    turning), then 200 lockstep cycles of one open-loop effort sequence: the node's
    joint states and odometry equal, bit for bit, the core's from the same reset,
    set_base_state and efforts; run twice, the node gives the same states twice."""
    pose = dict(position=[0.2, -0.1, 1.1], quaternion=[0.0, 0.0, np.sin(0.15), np.cos(0.15)],
                linear_velocity=[0.4, 0.1, 0.0], angular_velocity=[0.0, 0.3, 0.5])
    state = si_msg.EntityState()
    p, o = state.pose.position, state.pose.orientation
    p.x, p.y, p.z = pose["position"]
    o.x, o.y, o.z, o.w = pose["quaternion"]
    t = state.twist
    t.linear.x, t.linear.y, t.linear.z = pose["linear_velocity"]
    t.angular.x, t.angular.y, t.angular.z = pose["angular_velocity"]
    ref = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"))
    efforts = np.random.default_rng(5).normal(0.0, 4.0, (200, ref.nj))
    cycles = len(efforts)

    def law(i, qj, vj, q):  # open loop: what the first state is does not matter
        return {"effort": efforts[i]}

    def run():
        assert _call(s, si.ResetSimulation, "reset_simulation",
                     scope=si.ResetSimulation.Request.SCOPE_STATE).result.result == OK
        res = _call(s, si.SetEntityState, "set_entity_state", entity="wb_humanoid",
                    state=state, set_pose=True, set_twist=True)
        assert res.result.result == OK, res.result.error_message
        # subscribed only now: the first state seen is the node's resend of the moved one
        return LockstepController(s, law, cycles, reset=False).run(s)

    first, second = run(), run()
    # the core: the same reset, move and efforts (gains 0: the gate applies them as sent)
    ref.reset()
    ref.set_base_state(**pose)
    expect = []
    for i in range(cycles + 1):
        expect.append((ref.joint_positions.copy(), ref.joint_velocities.copy(), ref.q.copy()))
        if i < cycles:
            ref.step(efforts[i])
    assert np.array_equal(first[0][4][:7], ref_q0 := expect[0][2][:7]), (first[0][4], ref_q0)
    for got in (first, second):
        for k, ((qj, vj, _, _, q, _), (eqj, evj, eq)) in enumerate(zip(got, expect)):
            assert np.array_equal(qj, eqj) and np.array_equal(vj, evj), f"cycle {k}"
            assert np.array_equal(q, eq), f"cycle {k}: base {q[:7]} vs {eq[:7]}"
    assert expect[-1][2][2] < 1.1  # it moved: the body fell for 0.2 s


def test_pause_step_play_and_stop(s):
    S = si_msg.SimulationState
    js = s.ros.record(JointState, "joint_states", STATE_QOS)
    res = _call(s, si.StepSimulation, "step_simulation", steps=3)
    assert res.result.result == si_msg.Result.RESULT_INCORRECT_STATE  # playing
    assert _call(s, si.SetSimulationState, "set_simulation_state",
                 state=S(state=S.STATE_PAUSED)).result.result == OK
    assert _call(s, si.GetSimulationState, "get_simulation_state").state.state == S.STATE_PAUSED
    s.ros.spin_for(0.3)
    js.clear()
    assert _call(s, si.StepSimulation, "step_simulation", steps=5).result.result == OK
    assert s.ros.spin_until(lambda: len({stamp_ns(m) for m in js.msgs}) >= 5, 5.0)
    s.ros.spin_for(0.3)
    stamps = sorted({stamp_ns(m) for m in js.msgs})
    assert len(stamps) == 5 and set(np.diff(stamps)) == {DT_NS}  # exactly 5 steps
    res = _call(s, si.SetSimulationState, "set_simulation_state", state=S(state=S.STATE_PAUSED))
    assert res.result.result == si.SetSimulationState.Response.ALREADY_IN_TARGET_STATE
    assert _call(s, si.SetSimulationState, "set_simulation_state",
                 state=S(state=S.STATE_STOPPED)).result.result == OK
    assert _call(s, si.GetSimulationState, "get_simulation_state").state.state == S.STATE_STOPPED
    assert _call(s, si.SetSimulationState, "set_simulation_state",
                 state=S(state=S.STATE_PLAYING)).result.result == OK
    res = _call(s, si.SetSimulationState, "set_simulation_state",
                state=S(state=S.STATE_QUITTING))
    assert res.result.result == si_msg.Result.RESULT_FEATURE_UNSUPPORTED
    s.ros.stop_recording(js)


def test_named_poses(s):
    res = _call(s, si.GetNamedPoses, "get_named_poses")
    assert [p.name for p in res.poses] == ["crouch"]
    p = res.poses[0].pose
    assert (p.position.x, p.position.z, p.orientation.w) == (0.1, 0.75, 1.0)


def test_through_ros2cli(s):
    """`ros2 service call` as a user types it (needs the launch stack's ros2cli)."""
    from helpers.extras import require_launch_stack
    require_launch_stack()
    import shutil
    import sys
    from pathlib import Path
    ros2 = Path(sys.executable).with_name("ros2")
    ros2 = str(ros2) if ros2.exists() else shutil.which("ros2")
    calls = [("get_entities", "GetEntities", "{}", "wb_humanoid"),
             ("get_entity_state", "GetEntityState", "{entity: wb_humanoid}", "frame_id='world'"),
             ("get_named_poses", "GetNamedPoses", "{}", "name='crouch'"),
             ("get_simulation_state", "GetSimulationState", "{}", "SimulationState(state=1)"),
             ("get_simulator_features", "GetSimulatorFeatures", "{}", "features=[")]
    for name, kind, request, expected in calls:
        out = subprocess.run([ros2, "service", "call", f"/wb_sim/{name}",
                              f"simulation_interfaces/srv/{kind}", request],
                             env=ros_env(s.domain), capture_output=True, text=True, timeout=60)
        assert cli_answered(out), (name, out.returncode, out.stderr)
        assert expected in out.stdout, (name, out.stdout)
        if kind != "GetSimulatorFeatures":  # the one response without a Result
            assert "Result(result=1," in out.stdout, (name, out.stdout)  # RESULT_OK


def test_spawn_and_delete_through_ros2cli(s):
    """Issue 31: SpawnEntity and DeleteEntity with `ros2 service call`, as docs/ros.md
    shows them: the box is then an entity (GetEntities lists it, GetEntityState has
    its pose) and after the delete it is gone."""
    from helpers.extras import require_launch_stack
    require_launch_stack()
    import shutil
    import sys
    from pathlib import Path
    ros2 = Path(sys.executable).with_name("ros2")
    ros2 = str(ros2) if ros2.exists() else shutil.which("ros2")

    def call(name, kind, request):
        out = subprocess.run([ros2, "service", "call", f"/wb_sim/{name}",
                              f"simulation_interfaces/srv/{kind}", request],
                             env=ros_env(s.domain), capture_output=True, text=True, timeout=60)
        assert cli_answered(out), (name, out.returncode, out.stderr)
        return out.stdout

    spawned = call("spawn_entity", "SpawnEntity",
                   "{name: cli_crate, entity_resource: {uri: "
                   "'wb_sim://box?size=0.2,0.2,0.2&mass=1.5'}, initial_pose: {pose: "
                   "{position: {x: 1.5, y: 0.0, z: 0.5}}}}")
    assert "Result(result=1," in spawned and "entity_name='cli_crate'" in spawned, spawned
    assert "cli_crate" in call("get_entities", "GetEntities", "{}")
    state = call("get_entity_state", "GetEntityState", "{entity: cli_crate}")
    assert "Result(result=1," in state, state
    x = float(re.search(r"position=geometry_msgs\.msg\.Point\(x=([-0-9.e]+)", state).group(1))
    assert x == pytest.approx(1.5, abs=1e-4), state  # where it was put (it falls in z only)
    deleted = call("delete_entity", "DeleteEntity", "{entity: cli_crate}")
    assert "Result(result=1," in deleted, deleted
    assert "cli_crate" not in call("get_entities", "GetEntities", "{}")
    gone = call("get_entity_state", "GetEntityState", "{entity: cli_crate}")
    assert "Result(result=2," in gone, gone  # RESULT_NOT_FOUND


def test_simulate_steps_action_gives_feedback(s):
    """The SimulateSteps action while paused: feedback after each step, exactly the
    steps asked, and refused (aborted) while playing."""
    from rclpy.action import ActionClient
    from simulation_interfaces.action import SimulateSteps
    S = si_msg.SimulationState
    client = ActionClient(s.ros.node, SimulateSteps, "/wb_sim/simulate_steps")
    assert client.wait_for_server(timeout_sec=10.0)
    s.ros.spin_for(0.5)

    def run(steps):
        feedback = []
        goal = client.send_goal_async(SimulateSteps.Goal(steps=steps),
                                      feedback_callback=lambda f: feedback.append(f.feedback))
        assert s.ros.spin_until(goal.done, 10.0)
        result = goal.result().get_result_async()
        assert s.ros.spin_until(result.done, 10.0)
        return result.result().result, feedback

    assert _call(s, si.SetSimulationState, "set_simulation_state",
                 state=S(state=S.STATE_PAUSED)).result.result in (
        OK, si.SetSimulationState.Response.ALREADY_IN_TARGET_STATE)
    res, feedback = run(4)
    assert res.result.result == OK
    assert [f.completed_steps for f in feedback] == [1, 2, 3, 4]
    assert [f.remaining_steps for f in feedback] == [3, 2, 1, 0]
    assert _call(s, si.SetSimulationState, "set_simulation_state",
                 state=S(state=S.STATE_PLAYING)).result.result == OK
    res, _ = run(2)
    assert res.result.result == si_msg.Result.RESULT_OPERATION_FAILED
