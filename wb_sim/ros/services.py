"""The node's services: its own ``~/reset``, ``~/pause`` and ``~/step`` (std_srvs), and the
ROS 2 ``simulation_interfaces`` (:mod:`.sim_interfaces`) where that package imports.

Both act through the node's simulation control (:class:`.sim_interfaces.Control`: reset,
pause, step while paused), so they agree on what each does.

Where they run: every service and the action are in one reentrant callback group of their
own (:attr:`NodeServices.group`), served by the workers of the node's MultiThreadedExecutor
(:mod:`.process`), never in the group of the parameters and of the command subscriptions
(the node's default group), and never on the physics thread. Each is bounded: the state
queries take the simulator's lock for a copy, a stepping request takes it one step at a time
and ends early when the node stops, the step counts and the ``get_entities`` filter are
checked before anything runs (:mod:`.sim_interfaces`).
"""

from __future__ import annotations

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_srvs.srv import SetBool, Trigger

from .sim_interfaces import Control, SimulationInterfaces, interfaces

#: services: a burst of calls (scripts resetting in a loop) is queued, not dropped, up to
#: this depth per service; above it (a client sending faster than the node answers) the
#: middleware keeps the newest 100 requests of that service and the older ones are never
#: answered (their clients time out): DDS drops them without telling the node
SERVICE_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


class NodeServices:
    """``~/reset`` (Trigger), ``~/pause`` (SetBool: true pauses), ``~/step`` (Trigger: one
    step while paused) and, if importable, simulation_interfaces (``self.sim_interfaces``,
    else None)."""

    def __init__(self, node, control: Control, now_s):
        """``now_s()``: the simulated time, s (for the answers of ``~/step``)."""
        self.control, self._now_s = control, now_s
        #: the requests' own callback group (the executor runs them on its workers, beside
        #: the parameters and commands of the default group)
        self.group = ReentrantCallbackGroup()
        kw = {"qos_profile": SERVICE_QOS, "callback_group": self.group}
        node.create_service(Trigger, "~/reset", self._on_reset, **kw)
        node.create_service(SetBool, "~/pause", self._on_pause, **kw)
        node.create_service(Trigger, "~/step", self._on_step, **kw)
        self.sim_interfaces = None
        if interfaces() is None:
            node.get_logger().info(
                "simulation_interfaces is not installed: its services (~/reset_simulation, "
                "...) are off (a ROS 2 install has it; on a pip-only machine "
                "tools/setup_venv.sh generates it)")
        else:
            self.sim_interfaces = SimulationInterfaces(node, control, SERVICE_QOS, self.group)

    def _on_reset(self, request, response):
        response.success = True
        response.message = self.control.reset_simulation()
        return response

    def _on_pause(self, request, response):
        self.control.set_paused(request.data)
        response.success = True
        response.message = "paused" if request.data else "running"
        return response

    def _on_step(self, request, response):
        if not self.control.is_paused():
            response.success = False
            response.message = "not paused: call ~/pause with data: true first"
            return response
        ok, why = self.control.step_paused(1)
        response.success = ok
        response.message = f"t = {self._now_s():.6f} s" if ok else why
        return response
