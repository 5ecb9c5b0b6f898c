"""The node says once what the simulator adjusted: a contact damping the physics
rate cannot resolve is accepted (no refusal for stability any more), the node
runs, and its log explains that the contact behaves as the stiffest one the rate
resolves."""

from __future__ import annotations

from helpers.extras import require_ros

require_ros("sensor_msgs.msg")

from helpers.ros import Proc, fresh_domain_id, sim_node_argv  # noqa: E402


def test_node_logs_the_resolution_note_once_and_keeps_running(tmp_path):
    node = Proc("wb_sim", sim_node_argv("contact.damping:=1000000.0", "real_time_factor:=0.0",
                                        "command.wait_for_first:=false"),
                fresh_domain_id(), tmp_path)
    try:
        assert node.wait_for_log("numerically damped", timeout=60.0), node.describe()
        assert node.wait_for_log("real-time factor", timeout=60.0) or node.alive(), \
            node.describe()
        assert node.alive(), node.describe()
        assert node.log().count("numerically damped") == 1, node.describe()
    finally:
        node.close()
