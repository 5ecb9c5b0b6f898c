"""ROS 2 ``simulation_interfaces`` on the node: the simulator-agnostic services that
Gazebo, Isaac Sim and O3DE serve, for everything wb_sim can do.

Served under the node's name (``/wb_sim/reset_simulation``, ``/wb_sim/step_simulation``,
``/wb_sim/get_simulation_state``, ``/wb_sim/set_simulation_state``,
``/wb_sim/get_entities``, ``/wb_sim/get_entity_state``, ``/wb_sim/set_entity_state``,
``/wb_sim/get_named_poses``, ``/wb_sim/get_simulator_features``, and the action
``/wb_sim/simulate_steps``) wherever the
``simulation_interfaces`` package imports (a ROS 2 install has it; on a pip-only machine
``tools/setup_venv.sh`` generates it). The node's own ``~/reset``, ``~/pause`` and
``~/step`` stay.

What wb_sim supports, as ``get_simulator_features`` lists it:

* reset of the state (``SCOPE_STATE``, and ``SCOPE_DEFAULT`` / ``SCOPE_ALL``, which reset
  the state while the simulated clock goes on: it never goes back); ``SCOPE_TIME`` alone is
  refused as unsupported, ``SCOPE_SPAWNED`` has nothing to remove;
* the simulation state: playing, paused, stopped (paused at the initial state); quitting is
  left to the process (SIGINT);
* stepping while paused, one step or several (a service, or the action with feedback and
  cancellation);
* one entity, the robot (named by its URDF), with get and set of its base pose and twist
  (world frame; a fixed base can be read, not moved);
* the named poses of the configuration (``poses``), as the base pose of each.
"""

from __future__ import annotations

import re
from typing import Any, Protocol


class Control(Protocol):
    """What the services need of the node."""

    lock: Any  #: held while the simulation is read or changed
    sim: Any  #: the wb_sim.Simulator
    world_frame: str

    def reset_simulation(self) -> str: ...  # back to the initial state (clock goes on)

    def set_paused(self, paused: bool) -> None: ...

    def is_paused(self) -> bool: ...

    def step_paused(self, steps: int) -> tuple[bool, str]: ...  # steps while paused

    def now_msg(self) -> Any: ...  # builtin_interfaces/Time of the current step


def interfaces():
    """(msg, srv) modules of simulation_interfaces, or None where it does not import."""
    try:
        from simulation_interfaces import msg, srv
    except ImportError:
        return None
    return msg, srv


class SimulationInterfaces:
    """The services over ``node`` (an rclpy Node) and ``control``."""

    SERVICES = ("reset_simulation", "step_simulation", "get_simulation_state",
                "set_simulation_state", "get_entities", "get_entity_state", "set_entity_state",
                "get_named_poses", "get_simulator_features")

    def __init__(self, node, control: Control, qos_profile=None):
        found = interfaces()
        if found is None:
            raise ImportError("simulation_interfaces is not importable")
        self.msg, srv = found
        self.node, self.control = node, control
        robot = control.sim.robot
        self.entity = robot.model.name or robot.root_link  # the URDF's robot name
        self._stopped = False  # STATE_STOPPED: paused at the initial state, until played
        kinds = {"reset_simulation": srv.ResetSimulation, "step_simulation": srv.StepSimulation,
                 "get_simulation_state": srv.GetSimulationState,
                 "set_simulation_state": srv.SetSimulationState,
                 "get_entities": srv.GetEntities, "get_entity_state": srv.GetEntityState,
                 "set_entity_state": srv.SetEntityState, "get_named_poses": srv.GetNamedPoses,
                 "get_simulator_features": srv.GetSimulatorFeatures}
        for name in self.SERVICES:
            node.create_service(kinds[name], f"~/{name}", getattr(self, f"_{name}"),
                                qos_profile=qos_profile)
        from rclpy.action import ActionServer, CancelResponse
        from simulation_interfaces.action import SimulateSteps
        self._action_type = SimulateSteps
        self.action = ActionServer(node, SimulateSteps, "~/simulate_steps", self._simulate_steps,
                                   cancel_callback=lambda _: CancelResponse.ACCEPT)

    # ------------------------------------------------------------------ helpers

    def _result(self, response, code: int, message: str = ""):
        response.result.result = code
        response.result.error_message = message
        return response

    def _ok(self, response, message: str = ""):
        return self._result(response, self.msg.Result.RESULT_OK, message)

    def _state_code(self) -> int:
        S = self.msg.SimulationState
        if self._stopped:
            return S.STATE_STOPPED
        return S.STATE_PAUSED if self.control.is_paused() else S.STATE_PLAYING

    # ------------------------------------------------------------------ simulation control

    def _reset_simulation(self, request, response):
        R = request
        scope = request.scope
        if scope == R.SCOPE_SPAWNED:
            return self._ok(response, "nothing spawned: wb_sim has no spawned entities")
        if scope == R.SCOPE_TIME:
            return self._result(response, self.msg.Result.RESULT_FEATURE_UNSUPPORTED,
                                "the simulated clock never goes back: reset the state "
                                "(SCOPE_STATE) and the clock goes on")
        message = self.control.reset_simulation()
        return self._ok(response, message + " (the simulated clock goes on)")

    def _step_simulation(self, request, response):
        if not self.control.is_paused():
            return self._result(response, self.msg.Result.RESULT_INCORRECT_STATE,
                                "not paused: set the simulation state to STATE_PAUSED first")
        if request.steps < 1:
            return self._result(response, self.msg.Result.RESULT_OPERATION_FAILED,
                                f"steps must be >= 1, got {request.steps}")
        ok, why = self.control.step_paused(int(request.steps))
        self._stopped = False
        if not ok:
            return self._result(response, self.msg.Result.RESULT_OPERATION_FAILED, why)
        return self._ok(response)

    def _simulate_steps(self, goal):
        """The SimulateSteps action: ``steps`` steps while paused, feedback after each,
        cancellable between steps."""
        result = self._action_type.Result()
        if not self.control.is_paused():
            goal.abort()
            return self._result(result, self.msg.Result.RESULT_OPERATION_FAILED,
                                "not paused: set the simulation state to STATE_PAUSED first")
        total = int(goal.request.steps)
        feedback = self._action_type.Feedback()
        for done in range(1, total + 1):
            if goal.is_cancel_requested:
                goal.canceled()
                return self._result(result, self.msg.Result.RESULT_OPERATION_FAILED,
                                    f"cancelled after {done - 1} of {total} steps")
            ok, why = self.control.step_paused(1)
            if not ok:
                goal.abort()
                return self._result(result, self.msg.Result.RESULT_OPERATION_FAILED, why)
            feedback.completed_steps, feedback.remaining_steps = done, total - done
            goal.publish_feedback(feedback)
        self._stopped = False
        goal.succeed()
        return self._ok(result)

    def _get_simulation_state(self, request, response):
        response.state.state = self._state_code()
        return self._ok(response)

    def _set_simulation_state(self, request, response):
        S, target = self.msg.SimulationState, request.state.state
        if target == self._state_code():
            return self._result(response, response.ALREADY_IN_TARGET_STATE,
                                "already in that state")
        if target == S.STATE_PLAYING:
            self._stopped = False
            self.control.set_paused(False)
        elif target == S.STATE_PAUSED:
            self._stopped = False
            self.control.set_paused(True)
        elif target == S.STATE_STOPPED:
            self.control.set_paused(True)
            self.control.reset_simulation()
            self._stopped = True
        else:
            return self._result(response, self.msg.Result.RESULT_FEATURE_UNSUPPORTED,
                                "supported states: STATE_PLAYING, STATE_PAUSED, STATE_STOPPED "
                                "(end the node with SIGINT to quit)")
        return self._ok(response)

    # ------------------------------------------------------------------ entities

    def _get_entities(self, request, response):
        pattern = request.filters.filter
        try:
            match = not pattern or re.search(pattern, self.entity) is not None
        except re.error as e:
            return self._result(response, self.msg.Result.RESULT_OPERATION_FAILED,
                                f"filter {pattern!r} is not a regular expression: {e}")
        response.entities = [self.entity] if match else []
        return self._ok(response)

    def _entity_error(self, response, entity: str):
        if entity != self.entity:
            return self._result(response, self.msg.Result.RESULT_NOT_FOUND,
                                f"no entity {entity!r}: the only one is {self.entity!r}")
        return None

    def _get_entity_state(self, request, response):
        failed = self._entity_error(response, request.entity)
        if failed is not None:
            return failed
        with self.control.lock:
            st = self.control.sim.state
            p, o = st.base_position, st.base_quaternion
            lin, ang = st.base_linear_velocity, st.base_angular_velocity
            stamp = self.control.now_msg()
        s = response.state
        s.header.stamp = stamp
        s.header.frame_id = self.control.world_frame
        s.pose.position.x, s.pose.position.y, s.pose.position.z = (float(x) for x in p)
        (s.pose.orientation.x, s.pose.orientation.y, s.pose.orientation.z,
         s.pose.orientation.w) = (float(x) for x in o)
        s.twist.linear.x, s.twist.linear.y, s.twist.linear.z = (float(x) for x in lin)
        s.twist.angular.x, s.twist.angular.y, s.twist.angular.z = (float(x) for x in ang)
        return self._ok(response)

    def _set_entity_state(self, request, response):
        failed = self._entity_error(response, request.entity)
        if failed is not None:
            return failed
        if request.set_acceleration:
            return self._result(response, self.msg.Result.RESULT_FEATURE_UNSUPPORTED,
                                "accelerations cannot be set: set the pose and twist")
        frame = request.state.header.frame_id
        if frame not in ("", self.control.world_frame):
            return self._result(response, self.msg.Result.RESULT_OPERATION_FAILED,
                                f"header.frame_id {frame!r}: give the state in "
                                f"'{self.control.world_frame}' (or leave it empty)")
        s = request.state
        kwargs = {}
        if request.set_pose:
            kwargs["position"] = [s.pose.position.x, s.pose.position.y, s.pose.position.z]
            kwargs["quaternion"] = [s.pose.orientation.x, s.pose.orientation.y,
                                    s.pose.orientation.z, s.pose.orientation.w]
        if request.set_twist:
            kwargs["linear_velocity"] = [s.twist.linear.x, s.twist.linear.y, s.twist.linear.z]
            kwargs["angular_velocity"] = [s.twist.angular.x, s.twist.angular.y,
                                          s.twist.angular.z]
        from ..errors import CommandError
        try:
            with self.control.lock:
                self.control.sim.set_base_state(**kwargs)
        except CommandError as e:
            return self._result(response, self.msg.Result.RESULT_OPERATION_FAILED, str(e))
        return self._ok(response)

    def _get_named_poses(self, request, response):
        poses = []
        for name, q in self.control.sim.named_poses.items():
            pose = self.msg.NamedPose(name=name, description=f"configuration pose '{name}'")
            if self.control.sim.robot.floating_base:
                pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = (
                    float(x) for x in q[:3])
                (pose.pose.orientation.x, pose.pose.orientation.y, pose.pose.orientation.z,
                 pose.pose.orientation.w) = (float(x) for x in q[3:7])
            else:
                pose.pose.orientation.w = 1.0
            poses.append(pose)
        response.poses = poses
        return self._ok(response)

    def _get_simulator_features(self, request, response):
        F = self.msg.SimulatorFeatures
        response.features.features = [
            F.SIMULATION_RESET, F.SIMULATION_RESET_STATE, F.SIMULATION_STATE_GETTING,
            F.SIMULATION_STATE_SETTING, F.SIMULATION_STATE_PAUSE, F.STEP_SIMULATION_SINGLE,
            F.STEP_SIMULATION_MULTIPLE, F.STEP_SIMULATION_ACTION, F.ENTITY_STATE_GETTING,
            F.ENTITY_STATE_SETTING,
            F.NAMED_POSES]
        response.features.custom_info = (
            "wb_sim: one entity, the robot; its base pose and twist in the world frame; the "
            "simulated clock never goes back (a reset keeps it going)")
        return response
