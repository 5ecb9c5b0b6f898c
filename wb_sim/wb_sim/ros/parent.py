"""A ROS process of wb_sim ends with the process that started it.

``ros2 launch`` answers SIGTERM by cancelling itself and leaving its processes running
(launch's own log says "using SIGTERM can result in orphaned processes"): the node and
the example controller went on at 1 kHz after the launch was gone. So the node, the
example controller and the recorder ask Linux to send them SIGTERM when their parent
dies (``prctl(PR_SET_PDEATHSIG)``), which their own handlers turn into a clean stop:
``ros2 launch``, ``ros2 run`` and ``wb_sim_run`` stay one unit under any signal, even
SIGKILL. Elsewhere than on Linux this does nothing (and says so by returning False).
Their stop runs on a thread of its own (``on_stop_signals``): the handlers take no lock,
and a thread also watches the parent, without a signal.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import signal
import sys
import threading
import time
from typing import Callable

#: prctl option: the signal sent to this process when its parent dies (linux/prctl.h)
PR_SET_PDEATHSIG = 1
#: :func:`exit_after`: how long after its deadline the process ends even if the interpreter
#: lock is never given back (exit code 1, every thread's Python stack on stderr), s
LOCK_HELD_GRACE_S = 1.0


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Have ``sig`` sent to this process when its parent process ends; True where it is
    armed. A parent already gone before the call (the process was reparented) sends it
    now."""
    if not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    if armed and os.getppid() != parent:  # the parent died between fork and prctl
        os.kill(os.getpid(), sig)
    return armed


#: :func:`watch_parent`: how often its thread looks at the parent process, s
PARENT_POLL_S = 0.25


def watch_parent(on_gone: Callable[[], None], period_s: float = PARENT_POLL_S) -> None:
    """A daemon thread that calls ``on_gone()`` once, from that thread, when this process's
    parent ends (the process is reparented: ``os.getppid()`` changes); on every platform,
    and without a signal: beside :func:`die_with_parent`'s SIGTERM."""
    parent = os.getppid()

    def body():
        while os.getppid() == parent:
            time.sleep(period_s)
        on_gone()
    threading.Thread(target=body, daemon=True, name="parent-watch").start()


def on_stop_signals(stop: Callable[[], None], who: str,
                    signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> None:
    """Call ``stop()`` once, from a thread of its own, at the first of ``signals`` or when
    the parent ends (:func:`watch_parent`); later signals change nothing.

    The handlers only write a byte to a pipe, which takes no lock. A Python handler runs
    between two bytecodes of the main thread, possibly inside a lock that thread holds.
    A handler that set an Event deadlocked the node when a burst of signals arrived: the
    launch's own stop signal, then the parent-death SIGTERM. The second handler ran inside
    the first one's ``Event.set`` and waited on the Event's lock, which its own thread held.
    The node then outlived its launch (py-spy's stack, about 1 in 20 runs of test_launch's
    SIGTERM test). So ``stop()`` runs where no handler can interrupt it."""
    r, w = os.pipe()
    os.set_blocking(w, False)

    def handler(*_):
        try:
            os.write(w, b"s")
        except OSError:
            pass  # the pipe is full: a stop is pending already

    def body():
        os.read(r, 1)
        stop()
    threading.Thread(target=body, daemon=True, name=f"{who}-stop").start()
    for sig in signals:
        signal.signal(sig, handler)
    watch_parent(handler)


def exit_after(seconds: float, who: str, code: Callable[[], int] = lambda: 0) -> None:
    """After SIGINT / SIGTERM: a daemon thread that ends the process ``seconds`` from now
    with ``code()`` if it still runs then (a callback that does not return, a middleware
    call that hangs, an executor that does not come back to Python), saying so on stderr.
    A clean stop within ``seconds`` ends the process first and the thread with it.

    That thread needs the interpreter lock, which a C++ call that hangs while holding it
    (a middleware teardown, say) never gives back: the example controller outlived a
    SIGTERMed launch by more than 5 s once in CI, after this deadline of 2 s was in place.
    So faulthandler's watchdog, a C thread that needs no lock, ends the process
    :data:`LOCK_HELD_GRACE_S` later still: exit code 1, and every thread's Python stack on
    stderr, which says where it hung."""
    def body():
        time.sleep(seconds)
        try:
            sys.stderr.write(f"[{who}] not stopped cleanly within {seconds:g} s of the "
                             f"signal: exiting now (exit code {code()})\n")
            sys.stderr.flush()
            sys.stdout.flush()
        finally:
            os._exit(code())
    threading.Thread(target=body, daemon=True, name=f"{who}-exit-after").start()
    try:
        faulthandler.dump_traceback_later(seconds + LOCK_HELD_GRACE_S, exit=True,
                                          file=sys.__stderr__ or sys.stderr)
    except (ValueError, OSError, RuntimeError, TypeError, AttributeError):
        pass  # no stderr with a file descriptor (an embedding host): the thread alone
