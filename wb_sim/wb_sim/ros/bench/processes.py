"""What the node's benchmarks share (:mod:`.flood`, :mod:`.soak`): the node as a child
process whose log lines a thread reads (:class:`NodeProcess`), the environment that makes
those lines stamped and unbuffered (:func:`bench_env`), the patterns of the node's stats
line they read, and a clean stop of the processes (:func:`stop`)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

#: a log line of the node in :func:`bench_env`'s format: its wall time and text
LINE = re.compile(r"\[INFO\] \[(?P<time>[\d.]+)\] \[wb_sim\]: (?P<text>.*)")
#: the stats line's valid commands taken and the steps that applied a new one
APPLIED = re.compile(r"valid commands (?P<accepted>\d+), new commands applied at (?P<applied>\d+) "
                     r"of (?P<steps>\d+) steps")
#: the stats line's counts of rejected messages, by topic and reason
REJECTED = re.compile(r"rejected messages: (?P<list>.*)$")


def bench_env() -> dict:
    """This process's environment for the node and its peers: a ROS domain of their own
    (unless ROS_DOMAIN_ID is set), log lines with their wall time (:data:`LINE`), each
    written as it comes."""
    env = dict(os.environ)
    env.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
    env["RCUTILS_CONSOLE_OUTPUT_FORMAT"] = "[{severity}] [{time}] [{name}]: {message}"
    env["PYTHONUNBUFFERED"] = "1"
    env["RCUTILS_LOGGING_BUFFERED_STREAM"] = "0"  # each log line as it is written
    return env


class NodeProcess:
    """The node process, its log lines (wall time, text) read by a thread."""

    def __init__(self, argv, env):
        import threading
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1, env=env)
        self.lines: list[tuple[float, str]] = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.proc.stdout:
            m = LINE.search(line)
            self.lines.append((float(m["time"]), m["text"]) if m else (time.time(), line.strip()))

    def join(self, timeout: float = 10.0) -> None:
        """Wait until the process's output is read to its end."""
        self._t.join(timeout)

    def wait_for(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in t for _, t in self.lines):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False


def stop(*procs) -> None:
    """SIGINT to each process still running (None: skipped), then wait 10 s for each
    before killing it."""
    for p in procs:
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        if p is not None:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
