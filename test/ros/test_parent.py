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


# the child of the watcher's test: no PR_SET_PDEATHSIG, its main thread in one long C call
WATCHED = """
import os, time
from wb_sim.ros.parent import watch_parent
watch_parent(lambda: os._exit(9), period_s=0.05)
print("watching", flush=True)
time.sleep(60)
"""
WATCHER_PARENT = f"""
import os, signal, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {WATCHED!r}], stdout=subprocess.PIPE, text=True)
child.stdout.readline()
print(child.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_parent_watch_stops_a_process_whose_main_thread_is_in_a_c_call():
    """watch_parent (the node and the example controller, beside the parent-death signal):
    its own thread sees the parent gone and stops the process while the main thread is
    still inside a 60 s sleep, where a Python signal handler would wait for it."""
    parent = subprocess.run([sys.executable, "-c", WATCHER_PARENT], capture_output=True,
                            text=True, timeout=60)
    assert parent.returncode == -signal.SIGKILL, parent.stderr
    pid = int(parent.stdout.split()[0])
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the watched child outlived its parent by 5 s")


# on_stop_signals' child: its main thread inside an Event's lock most of the time, where a
# handler that set an Event itself deadlocked the node under a burst of signals
STOPPED = """
import threading, time
from wb_sim.ros.parent import on_stop_signals
busy, done, calls = threading.Event(), threading.Event(), []

def stop():
    calls.append(threading.current_thread().name)
    done.set()

on_stop_signals(stop, "child")
print("ready", flush=True)
t0 = time.monotonic()
while not done.is_set() and time.monotonic() - t0 < 20.0:
    busy.set()
    busy.clear()
time.sleep(0.3)  # the rest of the burst arrives
print(len(calls), calls[0] if calls else "-", flush=True)
"""


def test_a_burst_of_signals_stops_the_process_once_from_a_thread_of_its_own():
    """on_stop_signals (node, example controller, recorder): the handlers take no lock,
    so 40 signals in a burst, while the main thread keeps taking an Event's lock, stop the
    process once, on the stop thread."""
    child = subprocess.Popen([sys.executable, "-c", STOPPED], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    for i in range(40):
        os.kill(child.pid, signal.SIGTERM if i % 2 else signal.SIGINT)
    try:
        out, err = child.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        child.kill()
        pytest.fail("the child did not stop within 10 s of 40 signals")
    assert child.returncode == 0, err
    assert out.split() == ["1", "child-stop"], (out, err)


def test_exit_after_ends_a_process_that_does_not_stop_by_itself():
    """The deadline behind a stop signal (node and example controller): a process stuck
    after its signal (here a sleep that ignores it) ends at the deadline with the code
    given, and says so."""
    child = ("import time\nfrom wb_sim.ros.parent import exit_after\n"
             "exit_after(0.3, 'stuck', lambda: 3)\ntime.sleep(30)\n")
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 3, out.stderr
    assert 0.3 <= time.monotonic() - t0 < 15.0
    assert "[stuck] not stopped cleanly within 0.3 s of the signal" in out.stderr


def test_exit_after_ends_a_process_whose_interpreter_lock_is_held():
    """A C call that hangs holding the interpreter lock (here libc's sleep through
    ctypes.PyDLL, which keeps the lock) starves the deadline's thread; faulthandler's
    watchdog ends the process LOCK_HELD_GRACE_S later, exit code 1, with the stacks."""
    from wb_sim.ros.parent import LOCK_HELD_GRACE_S
    child = ("import ctypes\nfrom wb_sim.ros.parent import exit_after\n"
             "exit_after(0.3, 'held', lambda: 3)\nctypes.PyDLL(None).sleep(30)\n")
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=25)
    took = time.monotonic() - t0
    assert out.returncode == 1, out.stderr
    assert 0.3 + LOCK_HELD_GRACE_S <= took < 20.0, took
    assert "most recent call first" in out.stderr and "sleep(30)" not in out.stdout


def test_exit_after_leaves_a_clean_stop_alone():
    """A process that ends before the deadline keeps its own exit code."""
    child = ("import sys\nfrom wb_sim.ros.parent import exit_after\n"
             "exit_after(5.0, 'quick', lambda: 3)\nsys.exit(0)\n")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 0 and "not stopped cleanly" not in out.stderr, out.stderr
