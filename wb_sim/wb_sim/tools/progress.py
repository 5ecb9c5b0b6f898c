"""A progress line for long headless runs: simulated time, % done, real-time
factor and time left. Standard library only.

On a terminal it is one line rewritten in place (at most 10 times a second);
otherwise (a log file, CI) it prints a plain line every ``interval`` seconds of
wall time, so logs stay readable::

    with Progress(total_s=10.0, label="humanoid") as bar:
        for k in range(steps):
            sim.step(tau)
            bar.update(sim.t)            # cheap: a clock read when nothing is drawn
"""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO


def _duration(s: float) -> str:
    s = max(0.0, s)
    if s < 60:
        return f"{s:4.1f} s"
    m, s = divmod(int(round(s)), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Progress of a run of ``total_s`` seconds of simulated time (see the module docstring).

    ``update(t)`` with the simulated time reached; ``close()`` (or leaving the
    ``with`` block) prints the final line. ``enabled=False`` prints nothing.
    ``stream`` defaults to stderr, ``tty`` to whether it is a terminal.
    """

    WIDTH = 24  #: characters of the bar on a terminal

    def __init__(self, total_s: float, label: str = "", stream: TextIO | None = None,
                 interval: float | None = None, enabled: bool = True, tty: bool | None = None):
        self.total = float(total_s)
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty and isatty())
        self.tty = tty
        #: seconds between two drawn lines (default 0.1 on a terminal, else 2)
        self.interval = (0.1 if tty else 2.0) if interval is None else float(interval)
        self.t = 0.0
        self.extra = ""
        self._start = time.perf_counter()
        self._next = self._start + self.interval
        self._width = 0
        self._closed = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, t_sim: float, extra: str | Callable[[], str] = "") -> None:
        """Simulated time reached, s; ``extra`` is appended to the line (e.g. the base
        height): a string, or a function returning one, called only when the line is drawn."""
        self.t = t_sim
        self.extra = extra
        now = time.perf_counter()
        if now >= self._next and self.enabled:
            self._next = now + self.interval
            self._draw(now, final=False)

    def line(self, now: float | None = None) -> str:
        """The progress text (without bar on a non-terminal)."""
        now = time.perf_counter() if now is None else now
        wall = now - self._start
        frac = min(1.0, self.t / self.total) if self.total > 0 else 1.0
        rtf = self.t / wall if wall > 0 else float("nan")
        left = (self.total - self.t) / rtf if rtf > 0 else float("nan")
        parts = [f"{self.label}: " if self.label else ""]
        if self.tty:
            fill = int(round(frac * self.WIDTH))
            parts.append(f"[{'#' * fill}{'.' * (self.WIDTH - fill)}] ")
        parts.append(f"t = {self.t:7.2f} / {self.total:g} s ({100 * frac:3.0f} %), "
                     f"real-time factor {rtf:6.2f}")
        if self.t < self.total and left == left:  # not NaN
            parts.append(f", {_duration(left)} left")
        elif self.t >= self.total:
            parts.append(f", {_duration(wall)} wall")
        extra = self.extra() if callable(self.extra) else self.extra
        if extra:
            parts.append(f", {extra}")
        return "".join(parts)

    def _draw(self, now: float, final: bool) -> None:
        text = self.line(now)
        if self.tty:
            pad = " " * max(0, self._width - len(text))
            self._width = len(text)
            self.stream.write(f"\r{text}{pad}" + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self, t_sim: float | None = None,
              extra: str | Callable[[], str] | None = None) -> None:
        """Print the final line (once)."""
        if self._closed:
            return
        self._closed = True
        if t_sim is not None:
            self.t = t_sim
        if extra is not None:
            self.extra = extra
        if self.enabled:
            self._draw(time.perf_counter(), final=True)
