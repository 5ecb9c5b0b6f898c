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
* the robot (named by its URDF), with get and set of its base pose and twist (world
  frame; a fixed base can be read, not moved), and each free object (named as it was
  configured or spawned), with get and set of its pose and twist;
* spawning and deleting free objects (``/wb_sim/spawn_entity``, ``/wb_sim/delete_entity``):
  the resource is a URI ``wb_sim://<shape>?size=a,b,c&mass=m``, a mesh file's
  ``file:///path/part.stl?mass=m&scale=s`` (:func:`parse_object_uri`), a rigid URDF's
  file (``file://``, ``package://``, ``.urdf``) or its XML in ``resource_string`` (its
  name then defaults to the URDF's ``<robot name>``),
  the pose ``initial_pose``; each rebuilds the simulator, the physics pausing for it
  (``Control.change_objects``);
* the named poses of the configuration (``poses``), as the base pose of each.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Protocol

try:  # the regular-expression parser of the standard library (3.11: re._parser)
    from re import _constants as _sre_c
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_c  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

#: most physics steps one ``~/step_simulation`` request or ``~/simulate_steps`` goal may
#: ask for: 1000 s of simulated time at 1 kHz; above it the request is refused with
#: RESULT_OPERATION_FAILED naming ``steps`` (2^64 - 1 was accepted and held the node)
MAX_STEPS_PER_REQUEST = 1_000_000
#: longest ``get_entities`` filter, characters
FILTER_MAX_CHARS = 256
#: the most backtracking paths a ``get_entities`` filter may have over the entity name:
#: (alternatives of its branches multiplied) x (name length + 2)^(variable repeats + 1);
#: Python's re holds the interpreter lock for the whole match and cannot be interrupted,
#: so a filter is checked before it runs (1e5 paths: a few ms at worst)
FILTER_MAX_PATHS = 100_000


def filter_error(pattern: str, subject: str) -> str | None:
    """Why ``pattern`` may not run as a ``get_entities`` filter on ``subject``, or None.

    The safe subset: at most :data:`FILTER_MAX_CHARS` characters; no backreference
    (matching with them is NP-hard); no repeat of a group that itself holds a repeat or
    an alternation (``(a*)*``, ``(a|a)*``: exponential backtracking); and few enough
    variable repeats and alternatives that the backtracking over ``subject`` stays below
    :data:`FILTER_MAX_PATHS` (``.*.*.*.*.*.*$x`` is polynomial, but of a high degree).
    Character classes, anchors, literals, counted repeats of one character and
    lookarounds of the same subset are allowed."""
    if len(pattern) > FILTER_MAX_CHARS:
        return f"longer than {FILTER_MAX_CHARS} characters ({len(pattern)})"
    try:
        parsed = _sre_parse.parse(pattern)
    except re.error as e:
        return f"not a regular expression: {e}"
    repeats = {_sre_c.MAX_REPEAT, _sre_c.MIN_REPEAT}
    repeats |= {getattr(_sre_c, "POSSESSIVE_REPEAT")} if hasattr(_sre_c,
                                                                  "POSSESSIVE_REPEAT") else set()
    refs = {_sre_c.GROUPREF, _sre_c.GROUPREF_EXISTS}
    refs |= {getattr(_sre_c, "GROUPREF_IGNORE")} if hasattr(_sre_c, "GROUPREF_IGNORE") else set()
    count = {"repeats": 0, "alternatives": 1}

    def walk(items, in_repeat: bool) -> str | None:
        for op, av in items:
            if op in refs:
                return "backreferences are not supported"
            if op in repeats:
                lo, hi, body = av
                variable = lo != hi
                if in_repeat and (variable or hi > 1):
                    return ("a repeated group holds another repeat (nested quantifiers, "
                            "exponential backtracking)")
                if variable:
                    count["repeats"] += 1
                why = walk(body, in_repeat or hi > 1)
                if why:
                    return why
            elif op == _sre_c.BRANCH:
                if in_repeat:
                    return ("a repeated group holds an alternation (exponential "
                            "backtracking): use a character class")
                count["alternatives"] *= len(av[1])
                for branch in av[1]:
                    why = walk(branch, in_repeat)
                    if why:
                        return why
            elif op == _sre_c.SUBPATTERN:
                why = walk(av[-1], in_repeat)
                if why:
                    return why
            elif op in (_sre_c.ASSERT, _sre_c.ASSERT_NOT):
                why = walk(av[1], in_repeat)
                if why:
                    return why
            elif op == getattr(_sre_c, "ATOMIC_GROUP", None):
                why = walk(av, in_repeat)
                if why:
                    return why
        return None

    why = walk(parsed, False)
    if why:
        return why
    paths = count["alternatives"] * (len(subject) + 2) ** (count["repeats"] + 1)
    if paths > FILTER_MAX_PATHS:
        return (f"too many ways to backtrack ({count['repeats']} variable repeats, "
                f"{count['alternatives']} alternatives: ~{paths:.0e} paths over the "
                f"{len(subject)}-character entity name, at most {FILTER_MAX_PATHS:.0e})")
    return None


#: how far into SpawnEntity's ``resource_string`` its ``<robot`` tag is looked for (a URDF)
MAX_URDF_HEAD = 4096
#: the URI scheme of a free object in SpawnEntity's ``entity_resource.uri``
OBJECT_SCHEME = "wb_sim://"
#: a mesh file's URI scheme there (the file is a mesh object: ``?mass=m[&scale=..]``)
FILE_SCHEME = "file://"
#: the URI's keys: the numbers each takes (one for the mass, up to three for the size and
#: a mesh's scale); ``file``: a mesh object's file (``wb_sim://mesh?file=...``)
OBJECT_URI_KEYS = {"size": 3, "mass": 1, "scale": 3, "file": 0}


def parse_object_uri(uri: str) -> tuple[str, list[float], float, str]:
    """(shape, size (3 numbers), mass, mesh file) of ``wb_sim://<shape>?size=a[,b[,c]]&mass=m``
    (a shape of :data:`wb_sim.objects.SHAPES`, its size: the numbers not given are 0, a
    sphere's ``size=0.1`` is its radius; its mass, kg; no file), of
    ``wb_sim://mesh?file=<path>&mass=m[&scale=s[,sy,sz]]`` or of
    ``file://<path>?mass=m[&scale=...]`` (a mesh object: its file, an absolute path, and its
    scale, one number for all three axes, default 1; its size is the scale). ValueError
    saying what is wrong; the values themselves are checked by the core (its messages name
    the shape's size, the file's problem)."""
    from urllib.parse import parse_qs, unquote

    from ..objects import SHAPES
    example = f"{OBJECT_SCHEME}box?size=0.2,0.2,0.2&mass=5"
    mesh_example = f"{OBJECT_SCHEME}mesh?file=/path/part.stl&mass=2&scale=0.001"
    if uri.startswith(FILE_SCHEME):
        path, _, text = uri.removeprefix(FILE_SCHEME).partition("?")
        shape, query = "mesh", parse_qs(text, keep_blank_values=True)
        if "file" in query:
            raise ValueError(f"{uri!r}: the file is the URI's path; no 'file' key")
        query["file"] = [unquote(path)]
    else:  # by hand: urllib takes no '_' in a scheme
        shape, _, text = uri.removeprefix(OBJECT_SCHEME).partition("?")
        shape = shape.strip("/")
        query = parse_qs(text, keep_blank_values=True)
    mesh = shape == "mesh"
    keys = ("file", "mass", "scale") if mesh else ("size", "mass")
    unknown = sorted(set(query) - set(keys))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)} in {uri!r}; the keys are "
                         f"{', '.join(keys)} (e.g. {mesh_example if mesh else example})")
    missing = [k for k in keys if k not in query and k != "scale"]
    if missing:
        raise ValueError(f"{uri!r} lacks {' and '.join(missing)} (e.g. "
                         + (mesh_example if mesh else example) + "; the shapes: "
                         + "; ".join(f"{k} size: {v}" for k, v in SHAPES.items()) + ")")
    values = {}
    for key in keys:
        if key == "file" or key not in query:
            continue
        n = OBJECT_URI_KEYS[key]
        text = ",".join(query[key])
        try:
            numbers = [float(x) for x in text.split(",")]
        except ValueError:
            raise ValueError(f"{key}={text!r} in {uri!r}: give {n if n == 1 else 'up to 3'} "
                             f"comma-separated numbers (e.g. {example})") from None
        if not 1 <= len(numbers) <= n:
            raise ValueError(f"{key}={text!r} in {uri!r}: {n if n == 1 else '1 to 3'} "
                             f"number(s), got {len(numbers)}")
        values[key] = numbers
    if mesh:
        (path,) = query["file"][-1:] or [""]
        if not path.startswith("/"):
            raise ValueError(f"file={path!r} in {uri!r}: give the mesh file's absolute path "
                             f"(the node's file system)")
        scale = values.get("scale", [1.0])
        if len(scale) == 1:
            scale = scale * 3
        elif len(scale) != 3:
            raise ValueError(f"scale in {uri!r}: one number (all axes) or three, got "
                             f"{len(scale)}")
        return shape, scale, values["mass"][0], path
    size = values["size"] + [0.0] * (3 - len(values["size"]))
    return shape, size, values["mass"][0], ""


def urdf_name(urdf: str) -> str:
    """The ``<robot name>`` in the first :data:`MAX_URDF_HEAD` characters of a URDF (its
    XML, or a ``file://`` / absolute path), if it is a valid entity name; else ""."""
    import re
    head = urdf[:MAX_URDF_HEAD]
    if not urdf.lstrip().startswith("<"):
        from pathlib import Path
        if not Path(urdf.removeprefix("file://")).is_file():  # no FIFO's wait
            return ""
        try:
            with open(urdf.removeprefix("file://"), encoding="utf-8", errors="replace") as f:
                head = f.read(MAX_URDF_HEAD)
        except OSError:
            return ""
    m = re.search(r"<robot\b[^>]*?\bname\s*=\s*[\"']([^\"'/ ]+)[\"']", head)
    return m.group(1) if m else ""


class Control(Protocol):
    """What the services need of the node."""

    lock: Any  #: held while the simulation is read or changed
    sim: Any  #: the wb_sim.Simulator
    world_frame: str

    def reset_simulation(self) -> str: ...  # back to the initial state (clock goes on)

    def set_paused(self, paused: bool) -> None: ...

    def is_paused(self) -> bool: ...

    def step_paused(self, steps: int) -> tuple[bool, str]: ...  # steps while paused

    def stepping_allowed(self) -> bool: ...  # False once the node stops

    def physics_free_running(self) -> bool: ...  # running, not lockstep: requests paced

    def now_msg(self) -> Any: ...  # builtin_interfaces/Time of the current step

    cfg: Any  #: the node's parameters (the snapshots' bounds)

    def now_ns(self) -> int: ...  # the simulated time of the state now, ns

    def take_snapshot(self) -> Any: ...  # a .snapshots.NodeSnapshot of now

    def restore_snapshot(self, snap: Any) -> str: ...  # back to it (the clock goes on)

    def change_objects(self, what: str, change) -> str: ...  # spawn / delete (a rebuild)


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
                "get_named_poses", "get_simulator_features", "spawn_entity", "delete_entity")

    #: the services that may run long (many steps): in the reentrant long group
    LONG = ("step_simulation",)

    def __init__(self, node, control: Control, qos_profile=None, callback_group=None,
                 long_group=None, limiter=None):
        """``callback_group``: the group of the short services; ``long_group``: of the
        stepping service and of the action (the node's requests groups, never the command
        intake's); ``limiter``: a :class:`.services.RequestLimiter` pacing every service
        and goal (None: none)."""
        found = interfaces()
        if found is None:
            raise ImportError("simulation_interfaces is not importable")
        self.msg, srv = found
        self.node, self.control = node, control
        robot = control.sim.robot
        self.entity = robot.model.name or robot.root_link  # the URDF's robot name
        self._stopped = False  # STATE_STOPPED: paused at the initial state, until played
        #: one stepping request at a time (service or action): a second one is refused
        self._stepping = threading.Lock()
        kinds = {"reset_simulation": srv.ResetSimulation, "step_simulation": srv.StepSimulation,
                 "get_simulation_state": srv.GetSimulationState,
                 "set_simulation_state": srv.SetSimulationState,
                 "get_entities": srv.GetEntities, "get_entity_state": srv.GetEntityState,
                 "set_entity_state": srv.SetEntityState, "get_named_poses": srv.GetNamedPoses,
                 "get_simulator_features": srv.GetSimulatorFeatures,
                 "spawn_entity": srv.SpawnEntity, "delete_entity": srv.DeleteEntity}
        for name in self.SERVICES:
            kw = {} if qos_profile is None else {"qos_profile": qos_profile}
            callback = getattr(self, f"_{name}")
            node.create_service(kinds[name], f"~/{name}",
                                callback if limiter is None else limiter.wrap(callback),
                                callback_group=long_group if name in self.LONG and long_group
                                is not None else callback_group, **kw)
        self._limiter = limiter
        from rclpy.action import ActionServer, CancelResponse
        from simulation_interfaces.action import SimulateSteps
        self._action_type = SimulateSteps
        # its execute callback runs on a worker of the node's MultiThreadedExecutor
        # (an executor task); a cancel request is served meanwhile by another
        self.action = ActionServer(node, SimulateSteps, "~/simulate_steps", self._simulate_steps,
                                   cancel_callback=lambda _: CancelResponse.ACCEPT,
                                   callback_group=long_group or callback_group)

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
            return self._result(response, self.msg.Result.RESULT_FEATURE_UNSUPPORTED,
                                "a reset keeps the free objects (each back at its initial "
                                "pose): delete a spawned one with delete_entity")
        if scope == R.SCOPE_TIME:
            return self._result(response, self.msg.Result.RESULT_FEATURE_UNSUPPORTED,
                                "the simulated clock never goes back: reset the state "
                                "(SCOPE_STATE) and the clock goes on")
        message = self.control.reset_simulation()
        return self._ok(response, message + " (the simulated clock goes on)")

    def steps_error(self, steps: int) -> tuple[int, str] | None:
        """(result code, message) refusing a stepping request of ``steps``, or None."""
        R = self.msg.Result
        if not self.control.is_paused():
            return (R.RESULT_INCORRECT_STATE,
                    "not paused: set the simulation state to STATE_PAUSED first")
        if steps < 1:
            return R.RESULT_OPERATION_FAILED, f"steps must be >= 1, got {steps}"
        if steps > MAX_STEPS_PER_REQUEST:
            return (R.RESULT_OPERATION_FAILED,
                    f"steps must be <= {MAX_STEPS_PER_REQUEST} per request, got {steps}")
        return None

    def _step_simulation(self, request, response):
        refused = self.steps_error(int(request.steps))
        if refused is not None:
            return self._result(response, *refused)
        if not self._stepping.acquire(blocking=False):
            return self._result(response, self.msg.Result.RESULT_INCORRECT_STATE,
                                "another step_simulation or simulate_steps request is running")
        try:
            ok, why = self.control.step_paused(int(request.steps))
            self._stopped = False
        finally:
            self._stepping.release()
        if not ok:
            return self._result(response, self.msg.Result.RESULT_OPERATION_FAILED, why)
        return self._ok(response)

    def _simulate_steps(self, goal):
        """The SimulateSteps action: ``steps`` steps while paused, feedback after each,
        cancellable between steps."""
        result = self._action_type.Result()
        if self._limiter is not None:  # a goal is a request like any other
            self._limiter.wait()
        total = int(goal.request.steps)
        refused = self.steps_error(total)
        if refused is not None:  # the same refusals as step_simulation
            goal.abort()
            return self._result(result, self.msg.Result.RESULT_OPERATION_FAILED, refused[1])
        if not self._stepping.acquire(blocking=False):
            goal.abort()
            return self._result(result, self.msg.Result.RESULT_OPERATION_FAILED,
                                "another step_simulation or simulate_steps request is running")
        try:
            feedback = self._action_type.Feedback()
            for done in range(1, total + 1):
                if goal.is_cancel_requested:
                    goal.canceled()
                    return self._result(result, self.msg.Result.RESULT_OPERATION_FAILED,
                                        f"cancelled after {done - 1} of {total} steps")
                ok, why = self.control.step_paused(1)
                if not ok:
                    goal.abort()
                    return self._result(result, self.msg.Result.RESULT_OPERATION_FAILED,
                                        f"after {done - 1} of {total} steps: {why}")
                self._stopped = False
                feedback.completed_steps, feedback.remaining_steps = done, total - done
                goal.publish_feedback(feedback)
        finally:
            self._stepping.release()
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

    def _entities(self) -> list[str]:
        """The robot, then the free objects."""
        return [self.entity] + [o.name for o in self.control.sim.objects]

    def _get_entities(self, request, response):
        pattern = request.filters.filter
        names = self._entities()
        why = filter_error(pattern, max(names, key=len)) if pattern else None
        if why is not None:  # checked before it runs: re cannot be interrupted
            shown = pattern if len(pattern) <= 60 else pattern[:60] + "..."
            return self._result(response, self.msg.Result.RESULT_OPERATION_FAILED,
                                f"filters.filter {shown!r} refused: {why}")
        response.entities = [n for n in names
                             if not pattern or re.search(pattern, n) is not None]
        return self._ok(response)

    def _entity_error(self, response, entity: str):
        names = self._entities()
        if entity not in names:
            from ..robot import did_you_mean
            return self._result(response, self.msg.Result.RESULT_NOT_FOUND,
                                f"no entity {entity!r}{did_you_mean(str(entity), names)}; "
                                f"the entities: {', '.join(names)}")
        return None

    def _get_entity_state(self, request, response):
        failed = self._entity_error(response, request.entity)
        if failed is not None:
            return failed
        with self.control.lock:
            sim = self.control.sim
            if request.entity == self.entity:
                st = sim.state
                p, o = st.base_position, st.base_quaternion
                lin, ang = st.base_linear_velocity, st.base_angular_velocity
            elif not any(ob.name == request.entity for ob in sim.objects):
                return self._result(response, self.msg.Result.RESULT_NOT_FOUND,
                                    f"entity {request.entity!r} was deleted meanwhile")
            else:  # a free object: its centre and axes, twist in world axes
                k = [ob.name for ob in sim.objects].index(request.entity)
                row = sim.object_poses()[k]
                p, o = row[:3], row[3:]
                lin, ang = sim.object_twist(request.entity)
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
                if request.entity == self.entity:
                    self.control.sim.set_base_state(**kwargs)
                else:
                    self.control.sim.set_object_state(request.entity, **kwargs)
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
            F.ENTITY_STATE_SETTING, F.SPAWNING, F.SPAWNING_RESOURCE_STRING, F.DELETING,
            F.NAMED_POSES]
        from ..objects import MESH_FORMATS
        response.features.spawn_formats = ["wb_sim", *(f[1:] for f in MESH_FORMATS), "urdf"]
        response.features.custom_info = (
            "wb_sim: the robot (its base) and the free objects, pose and twist in the world "
            "frame; spawn a free object with entity_resource.uri "
            f"'{OBJECT_SCHEME}<box|sphere|cylinder|capsule>?size=a,b,c&mass=m' or a mesh file "
            f"'file:///path/part.stl?mass=m&scale=s' (its convex hull) or a rigid URDF "
            "(every joint fixed: one body of its links; 'file:///path/crate.urdf', "
            "package://, or its XML in resource_string) and "
            "initial_pose (a spawn or delete rebuilds the simulator: the physics pauses for "
            "it); the simulated clock never goes back (a reset keeps it going)")
        return response

    # ------------------------------------------------------------------ spawn / delete

    def _spawn_entity(self, request, response):
        R, S = self.msg.Result, response
        uri, text = request.entity_resource.uri, request.entity_resource.resource_string
        from ..objects import MESH_FORMATS
        urdf = ""
        if not uri and not text:
            return self._result(response, S.NO_RESOURCE,
                                f"give entity_resource.uri '{OBJECT_SCHEME}<shape>?size=a,b,c"
                                f"&mass=m', a mesh or URDF file, or a URDF in resource_string")
        if not uri:  # resource_string: a rigid URDF's XML (the core bounds its size)
            if not (text.lstrip().startswith("<") and "<robot" in text[:MAX_URDF_HEAD]):
                return self._result(response, S.UNSUPPORTED_FORMAT,
                                    "entity_resource.resource_string: wb_sim spawns a rigid "
                                    "URDF (<robot> XML, every joint fixed) from it")
            urdf = text
        elif uri.partition("?")[0].lower().endswith(".urdf") and \
                uri.startswith(("file://", "package://", "/")):
            if "?" in uri:
                return self._result(response, S.RESOURCE_PARSE_ERROR,
                                    f"{uri!r}: a URDF file's URI takes no query (its mass and "
                                    f"geometry are its links')")
            urdf = uri
        mesh_file = uri.startswith(FILE_SCHEME) and \
            uri.partition("?")[0].lower().endswith(MESH_FORMATS)
        if not urdf and not uri.startswith(OBJECT_SCHEME) and not mesh_file:
            return self._result(response, S.UNSUPPORTED_FORMAT,
                                f"entity_resource.uri {uri!r}: wb_sim spawns free objects "
                                f"from '{OBJECT_SCHEME}<shape>?size=a,b,c&mass=m' (e.g. "
                                f"'{OBJECT_SCHEME}box?size=0.2,0.2,0.2&mass=5'), mesh files "
                                f"'file:///path/part.stl?mass=m[&scale=s]' "
                                f"({', '.join(MESH_FORMATS)}) and rigid URDF files "
                                f"('file:///path/crate.urdf', package://); no SDF files")
        if request.entity_namespace:
            return self._result(response, S.NAMESPACE_INVALID,
                                "a free object has no interfaces to put under a namespace: "
                                "leave entity_namespace empty")
        if urdf:
            shape, size, mass, mesh = "urdf", None, None, ""
        else:
            try:
                shape, size, mass, mesh = parse_object_uri(uri)
            except ValueError as e:
                return self._result(response, S.RESOURCE_PARSE_ERROR, str(e))
        pose = request.initial_pose
        frame = pose.header.frame_id
        if frame not in ("", self.control.world_frame):
            return self._result(response, S.INVALID_POSE,
                                f"initial_pose.header.frame_id {frame!r}: give the pose in "
                                f"'{self.control.world_frame}' (or leave it empty)")
        p, o = pose.pose.position, pose.pose.orientation
        position, quaternion = [p.x, p.y, p.z], [o.x, o.y, o.z, o.w]
        if not any(quaternion) or not all(map(_finite, position + quaternion)):
            return self._result(response, S.INVALID_POSE,
                                f"initial_pose: position {position}, orientation {quaternion}: "
                                f"finite numbers and a non-zero quaternion (x, y, z, w)")
        from ..errors import CommandError
        name = request.name or (urdf_name(urdf) if urdf else "")
        with self.control.lock:
            taken = set(self._entities()) | set(self.control.sim.robot.frame_names())
        if not name and not request.allow_renaming:
            return self._result(response, S.NAME_INVALID,
                                "give the object a name (or set allow_renaming)")
        if name and ("/" in name or " " in name):
            return self._result(response, S.NAME_INVALID,
                                f"name {name!r}: no '/' or spaces (it names a TF frame)")
        if not name or name in taken:
            if name and not request.allow_renaming:
                return self._result(response, S.NAME_NOT_UNIQUE,
                                    f"an entity or robot frame named {name!r} exists already; "
                                    f"give another name, delete_entity {name!r} first or set "
                                    f"allow_renaming")
            base = name or shape
            name = next(f"{base}_{k}" for k in range(1, len(taken) + 2)
                        if f"{base}_{k}" not in taken)
        try:
            message = self.control.change_objects("spawned", lambda sim: sim.spawn_object(
                name, shape, size, mass, position, quaternion=quaternion, mesh=mesh,
                urdf=urdf))
        except CommandError as e:
            return self._result(response, R.RESULT_OPERATION_FAILED, str(e))
        response.entity_name = name
        return self._ok(response, message)

    def _delete_entity(self, request, response):
        failed = self._entity_error(response, request.entity)
        if failed is not None:
            return failed
        if request.entity == self.entity:
            return self._result(response, self.msg.Result.RESULT_OPERATION_FAILED,
                                f"{self.entity!r} is the robot: only free objects can be "
                                f"deleted")
        from ..errors import CommandError
        try:
            message = self.control.change_objects(
                "deleted", lambda sim: sim.delete_object(request.entity))
        except CommandError as e:  # deleted meanwhile
            return self._result(response, self.msg.Result.RESULT_NOT_FOUND, str(e))
        return self._ok(response, message)


def _finite(x: float) -> bool:
    return x == x and abs(x) != float("inf")
