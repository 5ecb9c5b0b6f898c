"""The node, the example controller and the recorder end with the process that started
them (wb_sim/ros/parent.py): ``ros2 launch`` orphans its processes on SIGTERM, and a
parent killed with SIGKILL can do nothing at all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

# the child: arms die_with_parent, says whether it is armed, exits 7 on SIGTERM
CHILD = """
import signal, sys, time
from wb_sim.ros.parent import die_with_parent
got = []
signal.signal(signal.SIGTERM, lambda *_: got.append(1))
print(die_with_parent(), flush=True)
while not got:
    time.sleep(0.01)
sys.exit(7)
"""
# the parent: starts the child, reports its pid, then dies by SIGKILL (nothing of it can
# stop the child)
PARENT = f"""
import os, signal, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {CHILD!r}], stdout=subprocess.PIPE, text=True)
armed = child.stdout.readline().strip()
print(child.pid, armed, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_process_that_arms_it_gets_sigterm_when_its_parent_is_killed():
    parent = subprocess.run([sys.executable, "-c", PARENT], capture_output=True, text=True,
                            timeout=60)
    assert parent.returncode == -signal.SIGKILL, parent.stderr
    pid, armed = parent.stdout.split()
    assert armed == "True"
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            break  # gone: its SIGTERM handler ran and it exited
        time.sleep(0.05)
    else:
        os.kill(int(pid), signal.SIGKILL)
        pytest.fail("the child outlived its parent by 5 s")
