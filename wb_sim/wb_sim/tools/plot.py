"""PNG plots of a run: ``wb_sim_plot INPUT [-o OUT_DIR]``, or :func:`plot_history`
on a :class:`~wb_sim.tools.recording.History` from Python.

INPUT is a history saved by :meth:`History.save` (``.npz``, e.g. ``python -m
wb_sim --record run.npz``) or a rosbag2 of the node's topics (its directory,
or its ``.mcap`` file; e.g. from ``wb_sim_record``), read by
:func:`wb_sim.tools.bag.history_from_bag`. The figures:

* ``base_com.png``: base origin and centre of mass, x / y / z against time and
  a top view;
* ``contact_forces.png``: per contact surface, the force along the ground
  normal and the tangential force with the friction-cone limit mu f_n; the
  total normal force against the weight;
* ``joint_tracking.png``: joint positions against the reference (the joints
  with the largest tracking errors when there are many);
* ``torques.png``: applied torques against their limits (the joints closest to
  their limits when there are many);
* ``real_time_factor.png``: simulated time over wall-clock time, over the run;
* ``contact_state.png`` (a bag with the node's ``contact_state``): each surface's centre of
  pressure and the ZMP, x and y against time and a top view;

* ``solver_health.png`` (a bag with the node's ``/diagnostics``): each numeric figure of
  the solver health (``wb_sim: <group>`` statuses) against simulated time, one panel per
  figure titled ``<group>/<key>`` (:func:`health_figure`);

and, for a run with drives (``actuators.model`` other than ``ideal``), per driven joint:

* ``motor_current.png``: the winding current against the stall current V / R;
* ``motor_temperature.png``: the winding temperature against its limit (each limit drawn
  where the peak reaches a quarter of it, as the torques');
* ``torque_speed.png`` (``dc_motor``): the drive's operating points (joint speed at the
  step's start, joint torque; :func:`~wb_sim.tools.recording.operating_points`) inside
  the torque-speed envelope N eta kt (+-V - kt N omega) / R.

and, for a run with force-torque sensors (``ft_sensors.*``, recorded on ``ft/<sensor>``):

* ``ft_sensors.png``: per sensor its force and its torque (x, y, z in the sensor's frame,
  as published), against time (:func:`ft_figure`).

matplotlib is imported here, inside the functions, and never by ``import wb_sim``.
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np

from ..errors import WbSimError
from .recording import History, RecordingError, operating_points, torque_speed_envelope

#: at most this many joints in the joint grids
MAX_JOINTS = 12
#: grid columns of the joint figures
COLUMNS = 4
#: torque limits are drawn when the peak torque reaches this fraction of them (else
#: they would flatten the curve)
LIMIT_IN_VIEW = 0.25
DPI = 100

_STYLE = {
    "font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "legend.fontsize": 9,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "figure.titlesize": 12,
    "axes.grid": True, "grid.alpha": 0.3, "lines.linewidth": 1.2,
    "axes.formatter.useoffset": False, "axes.formatter.limits": (-4, 5),
    "savefig.dpi": DPI, "figure.dpi": DPI,
}


def _figure(width: float, height: float):
    """A matplotlib Figure drawn by the Agg canvas (no pyplot, no GUI backend)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig, out_dir: Path, name: str) -> Path:
    path = out_dir / name
    fig.savefig(path)
    return path


def _title(h: History, what: str) -> str:
    return f"{h.robot}: {what}" if h.robot else what


# ----------------------------------------------------------------------------- figures


def _min_span(ax, span: float) -> None:
    """Widen the y range to at least ``span`` around its centre, so numerical noise
    (1e-15 m) is drawn flat instead of filling the plot."""
    lo, hi = ax.get_ylim()
    if hi - lo < span:
        c = 0.5 * (lo + hi)
        ax.set_ylim(c - 0.5 * span, c + 0.5 * span)


def _base_com(h: History, out_dir: Path) -> Path:
    fig = _figure(13, 7.5)
    fig.suptitle(_title(h, "base origin and centre of mass (world frame)"))
    grid = fig.add_gridspec(2, 3)
    panels = ((grid[0, 0], "x", "x position", "both"), (grid[0, 1], "y", "y position", "both"),
              (grid[1, 0], "z", "base height", "base"), (grid[1, 1], "z", "centre of mass height",
                                                         "com"))
    for cell, axis, title, which in panels:
        ax = fig.add_subplot(cell)
        k = "xyz".index(axis)
        if which in ("both", "base"):
            ax.plot(h.t, h.base_position[:, k], label="base origin")
        if which in ("both", "com"):
            ax.plot(h.t, h.com[:, k], "--", color="C1", label="centre of mass")
        _min_span(ax, 2e-3)
        ax.set_xlabel("simulated time [s]")
        ax.set_ylabel(f"{axis} [m]")
        ax.set_title(title)
        if which == "both":
            ax.legend(loc="best")
    ax = fig.add_subplot(grid[:, 2])
    for xy, label, style in ((h.base_position, "base origin", "-"),
                             (h.com, "centre of mass", "--")):
        line, = ax.plot(xy[:, 0], xy[:, 1], style, label=label)
        if h.n:
            ax.plot(xy[0, 0], xy[0, 1], "o", color=line.get_color(), markersize=5)
            ax.plot(xy[-1, 0], xy[-1, 1], "s", color=line.get_color(), markersize=5)
    ax.plot([], [], "ko", markersize=5, label="start")
    ax.plot([], [], "ks", markersize=5, label="end")
    pts = np.vstack([h.base_position[:, :2], h.com[:, :2]])
    pts = pts[np.isfinite(pts).all(axis=1)]
    if pts.size:  # a square view, at least 2 cm wide
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        c, half = 0.5 * (lo + hi), 0.55 * max(float(np.max(hi - lo)), 0.02)
        ax.set_xlim(c[0] - half, c[0] + half)
        ax.set_ylim(c[1] - half, c[1] + half)
    ax.set_aspect("equal", adjustable="box")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_title("top view")
    ax.legend(loc="best")
    return _save(fig, out_dir, "base_com.png")


def _contact_forces(h: History, out_dir: Path) -> Path:
    ns = len(h.surface_names)
    fig = _figure(11, 2.2 + 2.3 * (ns + 1))
    mu = h.friction_coefficient
    fig.suptitle(_title(h, "contact forces of the ground (world frame)"
                         + (f", friction coefficient mu = {mu:g}" if math.isfinite(mu)
                            else ", friction coefficient unknown")))
    axes = fig.subplots(ns + 1, 2, sharex=True, squeeze=False)
    fn, ft = h.normal_force, h.tangential_force
    ax = axes[0, 0]
    ax.plot(h.t, fn.sum(axis=0), label="sum over surfaces")
    weight = h.mass * float(np.linalg.norm(h.gravity))
    if math.isfinite(weight):
        ax.axhline(weight, color="k", linestyle=":", label=f"weight m g = {weight:.1f} N")
    ax.set_title("total normal force")
    ax.set_ylabel("force [N]")
    ax.legend(loc="best")
    ax = axes[0, 1]
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        # where a surface carries at least 1 % of its peak load
        loaded = fn > 0.01 * np.nanmax(np.abs(fn), axis=1, initial=1e-9, keepdims=True)
        ratio = np.where(loaded, ft / fn, np.nan)
    for k, name in enumerate(h.surface_names):
        ax.plot(h.t, ratio[k], label=name)
    if math.isfinite(mu):
        ax.axhline(mu, color="r", linestyle="--", label=f"cone limit mu = {mu:g}")
    ax.set_title("friction use |f_t| / f_n (where in contact)")
    ax.set_ylabel("ratio [-]")
    ax.legend(loc="best")
    for k, name in enumerate(h.surface_names):
        ax = axes[k + 1, 0]
        ax.plot(h.t, fn[k], label="normal f_n")
        ax.set_title(f"{name}: normal force")
        ax.set_ylabel("force [N]")
        ax = axes[k + 1, 1]
        ax.plot(h.t, ft[k], label="tangential |f_t|")
        if math.isfinite(mu):
            ax.plot(h.t, mu * np.maximum(fn[k], 0.0), "r--", label="cone limit mu f_n")
        ax.set_title(f"{name}: tangential force")
        ax.set_ylabel("force [N]")
        ax.legend(loc="best")
    for ax in axes[-1]:
        ax.set_xlabel("simulated time [s]")
    return _save(fig, out_dir, "contact_forces.png")


def _contact_state(h: History, out_dir: Path) -> Path:
    fig = _figure(11, 7.5)
    fig.suptitle(_title(h, "centres of pressure and ZMP (contact truth, world frame)"))
    grid = fig.add_gridspec(2, 2)
    ax_x, ax_y = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[1, 0])
    ax_top = fig.add_subplot(grid[:, 1])
    t = h.truth_t
    series = [(f"CoP {name}", h.cop[k]) for k, name in enumerate(h.cop_names)]
    series.append(("ZMP", h.zmp))
    for label, p in series:
        style = {"color": "k", "linestyle": "--"} if label == "ZMP" else {}
        ax_x.plot(t, p[:, 0], label=label, **style)
        ax_y.plot(t, p[:, 1], label=label, **style)
        ax_top.plot(p[:, 0], p[:, 1], label=label, **style)
    ax_x.set_title("x (NaN: the surface carries no normal force)")
    ax_x.set_ylabel("x [m]")
    ax_y.set_title("y")
    ax_y.set_ylabel("y [m]")
    ax_y.set_xlabel("simulated time [s]")
    ax_x.legend(loc="best")
    ax_top.set_title("top view")
    ax_top.set_xlabel("x [m]")
    ax_top.set_ylabel("y [m]")
    ax_top.set_aspect("equal", adjustable="datalim")
    return _save(fig, out_dir, "contact_state.png")


def ft_figure(h: History):
    """The figure of ``ft_sensors.png``: one row per force-torque sensor, its force (left)
    and torque (right), x / y / z in the sensor's frame; the lines are the recorded
    ``ft_wrench`` columns as they are (NaN where none was recorded: a gap)."""
    k = len(h.ft_names)
    fig = _figure(11, 1.2 + 2.3 * k)
    fig.suptitle(_title(h, "force-torque sensors (each in its frame, as published)"))
    axes = fig.subplots(k, 2, sharex=True, squeeze=False)
    for s, name in enumerate(h.ft_names):
        for c, (what, unit) in enumerate((("force", "N"), ("torque", "N m"))):
            ax = axes[s, c]
            for a, axis in enumerate("xyz"):
                ax.plot(h.t, h.ft_wrench[:, s, 3 * c + a], label=f"{what} {axis}")
            ax.set_title(f"{name}: {what}")
            ax.set_ylabel(f"{what} [{unit}]")
            ax.legend(loc="best")
    for ax in axes[-1]:
        ax.set_xlabel("simulated time [s]")
    return fig


def health_figure(h: History):
    """The figure of ``solver_health.png``: one panel per column of ``h.health`` (the
    solver health's numeric figures, titled ``<group>/<key>``), its values as recorded
    against ``h.health_t`` (markers: a sample per published window; NaN, not measured: a gap)."""
    names = h.health_names
    cols = min(COLUMNS, max(1, len(names)))
    rows = max(1, math.ceil(len(names) / cols))
    fig = _figure(3.2 * cols, 1.0 + 2.0 * rows)
    fig.suptitle(_title(h, "solver health (/diagnostics, as published)"))
    axes = fig.subplots(rows, cols, sharex=True, squeeze=False).ravel()
    for k, name in enumerate(names):
        ax = axes[k]
        ax.plot(h.health_t, h.health[:, k], marker=".", label=name)
        ax.set_title(name)
    for ax in axes[len(names):]:
        ax.set_visible(False)
    for ax in axes[-cols:]:
        ax.set_xlabel("simulated time [s]")
    return fig


def _joint_grid(h: History, idx: list[int], title: str, time_axis: bool = True):
    """A figure with a grid of small plots, one per joint of ``idx``; ``time_axis``: they
    share the simulated time as x axis."""
    rows = max(1, math.ceil(len(idx) / COLUMNS))
    cols = min(COLUMNS, max(1, len(idx)))
    fig = _figure(3.1 * cols + 0.6, 2.35 * rows + 1.0)
    fig.suptitle(title)
    axes = fig.subplots(rows, cols, sharex=time_axis, squeeze=False)
    for ax in axes.flat[len(idx):]:
        ax.set_visible(False)
    for r in range(rows if time_axis else 0):  # the bottom visible plot of each column gets the time axis label
        for c in range(cols):
            if r * cols + c < len(idx) and (r + 1) * cols + c >= len(idx):
                axes[r, c].set_xlabel("simulated time [s]")
                axes[r, c].xaxis.set_tick_params(labelbottom=True)
    return fig, list(axes.flat)


def _pick(score: np.ndarray, limit: int = MAX_JOINTS) -> list[int]:
    """Indices of the ``limit`` largest finite scores, in decreasing order (all when fewer)."""
    score = np.where(np.isfinite(score), score, -np.inf)
    order = np.argsort(-score, kind="stable")
    return sorted(order[:limit].tolist(), key=lambda i: -score[i])


def tracking_selection(h: History, limit: int = MAX_JOINTS):
    """Joints of the tracking figure: ``(indices, why, RMS error per joint [rad or m],
    reference known per joint)``. With a reference, the ``limit`` joints with the
    largest RMS error, largest first; without one, those that moved most."""
    nj = len(h.joint_names)
    with warnings.catch_warnings():  # all-NaN columns (no reference) are expected
        warnings.simplefilter("ignore", RuntimeWarning)
        err = h.joint_positions - h.reference_positions
        rms = np.sqrt(np.nanmean(err**2, axis=0)) if h.n else np.full(nj, np.nan)
        span = np.nanmax(h.joint_positions, axis=0) - np.nanmin(h.joint_positions, axis=0) \
            if h.n else np.zeros(nj)
    has_ref = np.isfinite(h.reference_positions).any(axis=0) if h.n else np.zeros(nj, bool)
    if has_ref.any():
        return _pick(np.where(has_ref, rms, -1.0), limit), "the largest RMS tracking error", \
            rms, has_ref
    return _pick(span, limit), "the largest motion (no reference recorded)", rms, has_ref


def torque_selection(h: History, limit: int = MAX_JOINTS):
    """Joints of the torque figure: ``(indices, why, peak |torque| per joint, limited
    per joint)``: the ``limit`` joints with the largest peak torque / limit (or peak
    torque when no joint has a limit), largest first."""
    nj = len(h.joint_names)
    lim = h.torque_limits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        peak = np.nanmax(np.abs(h.applied_torques), axis=0) if h.n else np.zeros(nj)
    limited = np.isfinite(lim) & (lim > 0)
    if limited.any():
        use = np.where(limited, peak / np.where(limited, lim, 1.0), -1.0)
        return _pick(use, limit), "the largest peak torque / limit", peak, limited
    return _pick(peak, limit), "the largest peak torque (no limits)", peak, limited


def _joint_tracking(h: History, out_dir: Path) -> Path:
    from matplotlib.lines import Line2D

    nj = len(h.joint_names)
    idx, how, rms, has_ref = tracking_selection(h)
    what = (f"joint positions, {len(idx)} of {nj} joints, those with {how}" if len(idx) < nj
            else "joint positions" + ("" if has_ref.any() else " (no reference recorded)"))
    fig, axes = _joint_grid(h, idx, _title(h, what))
    for ax, j in zip(axes, idx):
        unit = h.joint_units[j]
        ax.plot(h.t, h.joint_positions[:, j], label="actual")
        if has_ref[j]:
            ax.plot(h.t, h.reference_positions[:, j], "--", label="reference")
            scale, u = (1e3, "mrad") if unit == "rad" else (1e3, "mm")
            e = rms[j] * scale
            ax.set_title(f"{h.joint_names[j]}\nRMS error "
                         + (f"{e:.3g} {u}" if e >= 1e-3 else f"< 0.001 {u}"))
        else:
            ax.set_title(h.joint_names[j])
        _min_span(ax, 2e-3)
        ax.set_ylabel(f"position [{unit}]")
    if idx:
        handles = [Line2D([], [], color="C0", label="actual")]
        if has_ref.any():
            handles.append(Line2D([], [], color="C1", linestyle="--", label="reference"))
        fig.legend(handles=handles, loc="outside upper right")
    return _save(fig, out_dir, "joint_tracking.png")


def _torques(h: History, out_dir: Path) -> Path:
    from matplotlib.lines import Line2D

    nj = len(h.joint_names)
    lim = h.torque_limits
    idx, how, peak, limited = torque_selection(h)
    what = (f"applied torques, {len(idx)} of {nj} joints, those with {how}" if len(idx) < nj
            else "applied torques" + ("" if limited.any() else " (no limits)"))
    if limited.any():
        what += (f"\n(the limits are drawn where the peak reaches {100 * LIMIT_IN_VIEW:.0f} % "
                 f"of them)")
    fig, axes = _joint_grid(h, idx, _title(h, what))
    shown = False  # limit lines drawn somewhere
    for ax, j in zip(axes, idx):
        unit = "N" if h.joint_units[j] == "m" else "N*m"
        ax.plot(h.t, h.applied_torques[:, j], label="applied")
        if limited[j]:
            title = f"{h.joint_names[j]}\npeak {100 * peak[j] / lim[j]:.0f} % of ±{lim[j]:g} {unit}"
            if peak[j] >= LIMIT_IN_VIEW * lim[j]:
                shown = True
                ax.axhline(lim[j], color="r", linestyle="--", label="limit")
                ax.axhline(-lim[j], color="r", linestyle="--")
        else:
            title = f"{h.joint_names[j]}\npeak {peak[j]:.3g} {unit}, no limit"
        ax.set_title(title)
        _min_span(ax, 0.1)
        ax.set_ylabel(f"torque [{unit}]")
    if idx:
        handles = [Line2D([], [], color="C0", label="applied")]
        if shown:
            handles.append(Line2D([], [], color="r", linestyle="--", label="± effort limit"))
        fig.legend(handles=handles, loc="outside upper right")
    return _save(fig, out_dir, "torques.png")


def real_time_factor(t: np.ndarray, wall: np.ndarray,
                     window: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Real-time factor over windows of ``window`` seconds of simulated time
    (default: 1/100 of the run, at least 50 ms): (window centres [s], factors)."""
    ok = np.isfinite(t) & np.isfinite(wall)
    t, wall = t[ok], wall[ok]
    if t.size < 2 or t[-1] <= t[0]:
        return np.empty(0), np.empty(0)
    span = t[-1] - t[0]
    window = window or max(span / 100.0, 0.05)
    edges = np.arange(t[0], t[-1] + 0.5 * window, window)
    if edges.size < 2:
        edges = np.array([t[0], t[-1]])
    i = np.unique(np.searchsorted(t, edges))
    i = i[i < t.size]
    dt_sim, dt_wall = np.diff(t[i]), np.diff(wall[i])
    with np.errstate(divide="ignore", invalid="ignore"):
        rtf = np.where(dt_wall > 0, dt_sim / dt_wall, np.nan)
    return 0.5 * (t[i][1:] + t[i][:-1]), rtf


def _real_time_factor(h: History, out_dir: Path) -> Path:
    fig = _figure(9, 4.2)
    centres, rtf = real_time_factor(h.t, h.wall)
    ok = np.isfinite(h.t) & np.isfinite(h.wall)
    total = ""
    if ok.sum() >= 2:
        t, w = h.t[ok], h.wall[ok]
        if w[-1] > w[0]:
            total = f", {(t[-1] - t[0]) / (w[-1] - w[0]):.2f} over the whole run"
    fig.suptitle(_title(h, f"real-time factor (simulated time / wall-clock time){total}"))
    ax = fig.subplots()
    if centres.size:
        ax.plot(centres, rtf, drawstyle="steps-mid",
                label=f"over windows of {np.diff(centres).mean() if centres.size > 1 else 0:.3g} s "
                      f"of simulated time")
        ax.axhline(1.0, color="k", linestyle=":", label="real time (1)")
        ax.set_ylim(bottom=0.0, top=max(1.2, 1.1 * float(np.nanmax(rtf, initial=1.0))))
        ax.legend(loc="best")
    else:
        ax.text(0.5, 0.5, "no wall-clock times recorded", transform=ax.transAxes,
                ha="center", va="center")
    ax.set_xlabel("simulated time [s]")
    ax.set_ylabel("real-time factor [-]")
    return _save(fig, out_dir, "real_time_factor.png")


def _drive_grid(h: History, score: np.ndarray, what: str, how: str, time_axis: bool = True):
    """A joint grid over the driven joints with the largest ``score`` (all when few):
    (figure, axes, the driven joints' indices k in actuator_joints order)."""
    m = len(h.actuator_joints)
    ks = _pick(score)
    title = what if len(ks) == m else f"{what}, {len(ks)} of {m} driven joints, those with {how}"
    fig, axes = _joint_grid(h, ks, _title(h, title), time_axis)
    return fig, axes, ks


def _drive_legend(fig, axes) -> None:
    """One legend for the figure: every label drawn in some plot, once."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside upper right")


def _finite(*arrays) -> np.ndarray:
    """Rows where every one of the (n,) arrays is finite."""
    ok = np.ones(arrays[0].shape, dtype=bool)
    for a in arrays:
        ok &= np.isfinite(a)
    return ok


def _motor_current(h: History, out_dir: Path) -> Path:
    stall = h.drive("supply_voltage") / h.drive("resistance")  # A
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        peak = np.nanmax(np.abs(h.motor_current), axis=0, initial=0.0)
        use = np.where(np.isfinite(stall), peak / stall, peak)
    fig, axes, ks = _drive_grid(h, use, f"motor current ({h.actuator_model})",
                                "the largest peak current / stall current")
    for ax, k in zip(axes, ks):
        ok = _finite(h.motor_current[:, k])
        ax.plot(h.t[ok], h.motor_current[ok, k], label="current")
        title = h.actuator_joints[k]
        if math.isfinite(stall[k]):
            if use[k] >= LIMIT_IN_VIEW:
                ax.axhline(stall[k], color="r", linestyle="--", label="stall current V / R")
                ax.axhline(-stall[k], color="r", linestyle="--")
            title += f"\npeak {100 * use[k]:.0f} % of ±{stall[k]:.3g} A (V / R)"
        ax.set_title(title)
        _min_span(ax, 0.1)
        ax.set_ylabel("current [A]")
    _drive_legend(fig, axes[:len(ks)])
    return _save(fig, out_dir, "motor_current.png")


def _motor_temperature(h: History, out_dir: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        peak = np.nanmax(h.motor_temperature, axis=0, initial=-np.inf)
        rise = peak - np.nanmin(h.motor_temperature, axis=0, initial=np.inf)
    limit = h.drive("temperature_limit")
    fig, axes, ks = _drive_grid(h, rise, f"winding temperature ({h.actuator_model})",
                                "the largest rise")
    for ax, k in zip(axes, ks):
        ok = _finite(h.motor_temperature[:, k])
        ax.plot(h.t[ok], h.motor_temperature[ok, k], color="C3", label="winding")
        title = f"{h.actuator_joints[k]}\npeak {peak[k]:.4g} C (+{rise[k]:.2g} K)"
        if math.isfinite(limit[k]):
            title += f", limit {limit[k]:g} C"
            start = h.motor_temperature[ok, k][0] if ok.any() else limit[k]
            if rise[k] >= LIMIT_IN_VIEW * (limit[k] - start):  # (else it flattens the curve)
                ax.axhline(limit[k], color="k", linestyle="--", label="temperature limit")
        ax.set_title(title)
        _min_span(ax, 0.01)
        ax.set_ylabel("temperature [C]")
    _drive_legend(fig, axes[:len(ks)])
    return _save(fig, out_dir, "motor_temperature.png")


#: an operating point is on the envelope when its terminal voltage is within this
#: fraction of the supply voltage
ON_ENVELOPE = 1e-9


def _torque_speed(h: History, out_dir: Path) -> Path:
    speed, torque = operating_points(h)
    kt, r, v, n, eta = (h.drive(c) for c in ("torque_constant", "resistance", "supply_voltage",
                                              "gear_ratio", "gear_efficiency"))
    stall, no_load = n * eta * kt * v / r, v / (kt * n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        use = np.nanmax(np.abs(torque), axis=0, initial=0.0) / stall
        on = np.abs(h.motor_voltage) >= (1.0 - ON_ENVELOPE) * v
    fig, axes, ks = _drive_grid(h, use, "torque-speed: the drives' operating points in the "
                                "dc_motor envelope", "the largest peak torque / stall torque",
                                time_axis=False)
    lim = h.torque_limits[h.drive_index]
    for ax, k in zip(axes, ks):
        ok = _finite(speed[:, k], torque[:, k])
        w, tau = speed[ok, k], torque[ok, k]
        lo_w = min(-1.1 * no_load[k], float(w.min(initial=0.0)))
        hi_w = max(1.1 * no_load[k], float(w.max(initial=0.0)))
        grid = np.linspace(lo_w, hi_w, 200)
        lower, upper = torque_speed_envelope(h, grid)
        ax.plot(w, tau, ".", markersize=2, alpha=0.5, label="operating points")
        ax.plot(grid, upper[:, k], "r-", label="envelope N eta kt (±V - kt N w) / R")
        ax.plot(grid, lower[:, k], "r-")
        top = max(1.15 * stall[k], float(np.abs(tau).max(initial=0.0)) * 1.05)
        if math.isfinite(lim[k]) and lim[k] < top:
            ax.axhline(lim[k], color="k", linestyle=":", label="effort limit")
            ax.axhline(-lim[k], color="k", linestyle=":")
        ax.set_xlim(lo_w, hi_w)
        ax.set_ylim(-top, top)
        ax.set_title(f"{h.actuator_joints[k]}: {int(on[ok, k].sum())} of {int(ok.sum())} on it\n"
                     f"stall {stall[k]:.3g} N*m, no-load {no_load[k]:.3g} rad/s")
        ax.set_xlabel("joint speed [rad/s]")
        ax.set_ylabel("joint torque [N*m]")
    _drive_legend(fig, axes[:len(ks)])
    return _save(fig, out_dir, "torque_speed.png")


# ----------------------------------------------------------------------------- API


def plot_history(history: History, out_dir: str | Path) -> list[Path]:
    """Write the PNG figures of a history into ``out_dir`` (created if needed);
    returns their paths. ``contact_forces.png`` only when there are contact surfaces, the
    drives' figures only when the run had drives (``torque_speed.png``: dc_motor).
    An empty history is refused: its plots would be empty axes."""
    if len(history.t) == 0:
        raise RecordingError("the history holds no samples (call Recorder.record(sim) after "
                             "each step); no plots written")
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError("the plots need matplotlib: pip install 'wb_sim[plot]' "
                          "(or pip install matplotlib)") from e
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RecordingError(f"cannot create the output directory '{out}': "
                             f"{e.strerror or e}") from None
    h = history
    with matplotlib.rc_context(_STYLE):
        paths = [_base_com(h, out)]
        if h.surface_names:
            paths.append(_contact_forces(h, out))
        if h.joint_names:
            paths += [_joint_tracking(h, out), _torques(h, out)]
        paths.append(_real_time_factor(h, out))
        if h.truth_t.size:
            paths.append(_contact_state(h, out))
        if h.actuator_joints and np.isfinite(h.motor_current).any():
            paths += [_motor_current(h, out), _motor_temperature(h, out)]
            if h.actuator_model == "dc_motor" and np.isfinite(h.drive_parameters).all() \
                    and np.isfinite(h.motor_voltage).any():
                paths.append(_torque_speed(h, out))
        if h.ft_names and np.isfinite(h.ft_wrench).any():
            paths.append(_save(ft_figure(h), out, "ft_sensors.png"))
        if h.health_t.size and h.health_names:
            paths.append(_save(health_figure(h), out, "solver_health.png"))
    return paths


def load_input(path: str | Path) -> History:
    """A history from a ``.npz`` file, or from a rosbag2 (directory or ``.mcap`` file)."""
    path = Path(path)
    if not path.exists():
        raise RecordingError(f"no such file or directory: '{path}'")
    if path.is_file() and path.suffix != ".mcap":
        with open(path, "rb") as f:
            magic = f.read(8)
        if path.suffix == ".npz" or magic.startswith(b"PK"):
            return History.load(path)
        if not magic.startswith(b"\x89MCAP"):
            raise RecordingError(f"'{path}' is neither a wb_sim history (.npz) nor a rosbag2 "
                                 f"(a directory with metadata.yaml, or an .mcap file)")
    from .bag import history_from_bag  # rosbags: only for bags
    return history_from_bag(path)


def main(argv=None) -> int:
    """Entry point of ``wb_sim_plot``: 0 on success, 2 on an unusable input."""
    ap = argparse.ArgumentParser(
        prog="wb_sim_plot", description="PNG plots of a wb_sim run: base and centre of mass, "
        "contact forces with the friction cone, joint tracking, torques against their limits, "
        "real-time factor; with drives: motor current, winding temperature and the "
        "torque-speed envelope; with force-torque sensors: their forces and torques.")
    ap.add_argument("input", help="a history (.npz from 'python -m wb_sim --record') or a "
                                  "rosbag2 of the node's topics (directory or .mcap file)")
    ap.add_argument("-o", "--output", metavar="OUT_DIR",
                    help="directory of the PNG files (default: INPUT without its suffix + "
                         "'_plots')")
    args = ap.parse_args(argv)
    src = Path(args.input)
    out = Path(args.output) if args.output else \
        src.with_name((src.stem if src.suffix in (".npz", ".mcap") else src.name) + "_plots")
    try:
        robots = _bag_robots(src)
        # a bag of several robots: each robot's plots in OUT_DIR/<name>/
        runs = [("", load_input(src), out)] if not robots else \
            [(r, _robot_history(src, r), out / r) for r in robots]
        for robot, history, where in runs:
            paths = plot_history(history, where)
            name = f"robot '{robot}': " if robot else ""
            print(f"wb_sim_plot: {name}{history.n} samples, "
                  f"{history.t[-1] - history.t[0] if history.n else 0:.3f} s of simulated time "
                  f"-> {len(paths)} figures in {where}/: {', '.join(p.name for p in paths)}")
    except (WbSimError, ImportError) as e:
        print(f"wb_sim_plot: {e}", file=sys.stderr)
        return 2
    return 0


def _bag_robots(path: Path) -> list[str]:
    """The robots of a bag of a node serving several ([] otherwise: a history, one robot)."""
    if not path.exists():
        return []
    if path.is_file() and path.suffix != ".mcap":
        with open(path, "rb") as f:
            if not f.read(5) == b"\x89MCAP":
                return []
    from .bag import bag_robots  # rosbags: only for bags
    return bag_robots(path)


def _robot_history(path: Path, robot: str) -> History:
    """Robot ``robot``'s history of a bag of several, labelled ``<name> (<model>)``."""
    from .bag import history_from_bag
    h = history_from_bag(path, robot=robot)
    h.robot = f"{robot} ({h.robot})"
    return h


if __name__ == "__main__":
    sys.exit(main())
