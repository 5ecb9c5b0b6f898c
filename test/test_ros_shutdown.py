"""Processes that end when asked and tell the truth when they fail: the example
controller answers Ctrl-C / SIGTERM at once, also while it waits for the
simulator, and ``wb_sim_run`` exits non-zero within seconds after a failure
(never rc 0, never a hang).

Skipped without rclpy / tf2_msgs unless ``WB_SIM_REQUIRE_ROS=1`` (CI).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from ros_helpers import Proc, fresh_domain_id, pd_controller_argv, require_ros, ros_env

require_ros()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_pd_controller_waiting_for_the_simulator_ends_at_once_on_a_signal(tmp_path, sig):
    p = Proc("pd_controller", pd_controller_argv(), fresh_domain_id(), tmp_path)
    try:
        assert p.wait_for_log("waiting for 'robot_description'", 60), p.describe()
        time.sleep(0.5)  # well inside its wait (30 s before it gives up)
        t0 = time.monotonic()
        p.popen.send_signal(sig)
        rc = p.popen.wait(10)
        took = time.monotonic() - t0
    finally:
        p.close()
    assert rc == 0, p.describe()
    assert took < 1.5, f"{took:.2f} s to end after {sig.name}"
