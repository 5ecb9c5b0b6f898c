"""The node's services: its own ``~/reset``, ``~/pause`` and ``~/step`` (std_srvs), and the
ROS 2 ``simulation_interfaces`` (:mod:`.sim_interfaces`) where that package imports.

Both act through the node's simulation control (:class:`.sim_interfaces.Control`: reset,
pause, step while paused), so they agree on what each does.
"""

from __future__ import annotations

from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_srvs.srv import SetBool, Trigger

from .sim_interfaces import Control, SimulationInterfaces, interfaces

#: services: a burst of calls (scripts resetting in a loop) is queued, not dropped
SERVICE_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


class NodeServices:
    """``~/reset`` (Trigger), ``~/pause`` (SetBool: true pauses), ``~/step`` (Trigger: one
    step while paused) and, if importable, simulation_interfaces (``self.sim_interfaces``,
    else None)."""

    def __init__(self, node, control: Control, now_s):
        """``now_s()``: the simulated time, s (for the answers of ``~/step``)."""
        self.control, self._now_s = control, now_s
        node.create_service(Trigger, "~/reset", self._on_reset, qos_profile=SERVICE_QOS)
        node.create_service(SetBool, "~/pause", self._on_pause, qos_profile=SERVICE_QOS)
        node.create_service(Trigger, "~/step", self._on_step, qos_profile=SERVICE_QOS)
        self.sim_interfaces = None
        if interfaces() is None:
            node.get_logger().info(
                "simulation_interfaces is not installed: its services (~/reset_simulation, "
                "...) are off (a ROS 2 install has it; on a pip-only machine "
                "tools/setup_venv.sh generates it)")
        else:
            self.sim_interfaces = SimulationInterfaces(node, control, SERVICE_QOS)

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
