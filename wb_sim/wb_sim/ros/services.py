"""The node's services: its own ``~/reset``, ``~/pause`` and ``~/step`` (std_srvs), the
ROS 2 ``simulation_interfaces`` (:mod:`.sim_interfaces`) where that package imports, and
wb_sim's own (``wb_sim_interfaces``): the named snapshots (:mod:`.snapshots`), the
dynamics (:mod:`.dynamics`) and the payloads.

Both act through the node's simulation control (:class:`.sim_interfaces.Control`: reset,
pause, step while paused), so they agree on what each does.

Where they run: the short services in a mutually exclusive callback group of their own
(:attr:`NodeServices.group`), the stepping service and the action in a reentrant one
(:attr:`NodeServices.long_group`), served by the workers of the node's
MultiThreadedExecutor (:mod:`.process`), never in the group of the parameters and of the
command subscriptions (the node's default group), and never on the physics thread; all of
them paced by :class:`RequestLimiter` (:data:`REQUESTS_MAX_RATE_HZ`). With rclpy's
internals (the default, :mod:`.rclpy_shim`) the short ones are served instead by a thread
of their own (:class:`.rclpy_shim.RequestServer`, ~5x cheaper per request than the
executor), bounded by :class:`CpuBudget` (:data:`REQUESTS_MAX_CPU_SHARE`) rather than
counted. Each is bounded: the state
queries take the simulator's lock for a copy, a stepping request takes it one step at a time
and ends early when the node stops, the step counts and the ``get_entities`` filter are
checked before anything runs (:mod:`.sim_interfaces`).
"""

from __future__ import annotations

import array
import math
import re
import threading
import time

from builtin_interfaces.msg import Time
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_srvs.srv import SetBool, Trigger
from wb_sim_interfaces.msg import Matrix
from wb_sim_interfaces.srv import (AttachPayload, DeleteSnapshot, DetachPayload, GetDynamics,
                                   ListSnapshots, RestoreSnapshot, SaveSnapshot)

from ..errors import CommandError, WbSimError
from . import dynamics
from .rclpy_shim import RequestServer, serves_requests
from .sim_interfaces import Control, SimulationInterfaces, filter_error, interfaces
from .snapshots import SnapshotError, SnapshotStore

#: services: a burst of calls (scripts resetting in a loop) is queued, not dropped, up to
#: this depth per service; above it (a client sending faster than the node answers) the
#: middleware keeps the newest SERVICE_QUEUE_DEPTH requests of that service and the older
#: ones are never answered (their clients time out): DDS drops them without telling the node
#: (rclpy hands a service neither the request's client nor anything else to count the lost
#: by). 100 answered 100 of a burst of 300 while the physics ran free (paced at 25 a second);
#: 1000 holds 40 s of paced requests per service (with the requests' thread, bounded by CPU
#: time instead, ~3 s of cheap requests), a few hundred bytes each. KEEP_ALL would
#: answer any burst but bounds nothing a client sends
SERVICE_QUEUE_DEPTH = 1000
SERVICE_QOS = QoSProfile(depth=SERVICE_QUEUE_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
#: while the physics runs free (not paused, not lockstep), at most this many service
#: requests and action goals are answered a second, all services together (the
#: parameter services included; with rclpy's internals only the stepping service and the
#: action, the others being served by the requests' thread, REQUESTS_MAX_CPU_SHARE): rclpy's executor costs ~1-2 ms of CPU per request (its
#: wait set over the node's ~30 entities, rebuilt a few times per request, holding the
#: interpreter lock the physics thread needs), so an observer polling at 370 Hz took
#: ~40 % of a core from the physics and made a free-running humanoid fall. Requests above
#: it wait their turn in the queue (SERVICE_QOS: the newest SERVICE_QUEUE_DEPTH per service). Paused or
#: in lockstep nothing is paced: there the requests cannot change the outcome
REQUESTS_MAX_RATE_HZ = 25.0
#: with rclpy's internals the short requests (the requests' group) are served by a thread of
#: their own (:class:`.rclpy_shim.RequestServer`: ~0.15 instead of ~1-2 ms of CPU each) and,
#: while the physics runs free, bounded by the CPU time they take instead of their count: at
#: most this share of one core over time (the thread's own CPU time, which is when it holds
#: the interpreter lock the physics thread needs), REQUESTS_BURST_CPU_S of it at once; a
#: request over the budget waits its turn in its queue (SERVICE_QOS), answered in order
REQUESTS_MAX_CPU_SHARE = 0.03
#: the most CPU time the requests may take at once (a burst) within REQUESTS_MAX_CPU_SHARE, s
REQUESTS_BURST_CPU_S = 0.02
#: requests waiting for their CPU budget are logged (a warning) at most this often, s
BUDGET_WARN_PERIOD_S = 10.0
#: rclpy's parameter services (``~/get_parameters``, ...): moved to the requests' group and
#: paced as they are (a flood of get_parameters halved the real-time factor)
PARAMETER_SERVICES = ("describe_parameters", "get_parameter_types", "get_parameters",
                      "list_parameters", "set_parameters", "set_parameters_atomically")


class RequestLimiter:
    """Spaces the requests' callbacks at least ``1 / rate_hz`` apart: a callback waits for
    its slot asleep (without the interpreter lock) on its worker; while it waits, the
    requests' group runs nothing else, so the executor does not even take the next request
    (no cost until its turn). ``served``: requests let through, for the stats."""

    def __init__(self, rate_hz: float = REQUESTS_MAX_RATE_HZ, active=lambda: True):
        """``active()``: whether to pace now (checked at each request)."""
        self.period = 1.0 / rate_hz
        self.active = active
        self._next = 0.0
        self._lock = threading.Lock()
        self.served = 0

    def wait(self) -> None:
        if not self.active():
            return
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.period
            self.served += 1
        if slot > now:
            time.sleep(slot - now)

    def wrap(self, callback):
        """``callback`` (a service's) called after :meth:`wait`."""
        def limited(request, response):
            self.wait()
            return callback(request, response)
        limited.__name__ = getattr(callback, "__name__", "limited")
        limited.__wrapped__ = callback  # type: ignore[attr-defined]
        return limited


class CpuBudget:
    """A token bucket of CPU time for the requests' thread (:class:`.rclpy_shim.RequestServer`):
    it earns ``share`` s of CPU per wall second, holds at most ``burst_s``; each request's CPU
    time is charged after it (:meth:`charge`), and the next one waits asleep (without the
    interpreter lock) while the balance is negative (:meth:`wait`). Only while ``active()``
    (the physics runs free); otherwise nothing waits and nothing is charged."""

    def __init__(self, share: float = REQUESTS_MAX_CPU_SHARE,
                 burst_s: float = REQUESTS_BURST_CPU_S, active=lambda: True,
                 clock=time.monotonic, warn=None):
        """``warn(text)``: told when requests start to wait for the budget (at most once
        per :data:`BUDGET_WARN_PERIOD_S`): they come faster than it answers them, and a
        service's queue that overflows loses its oldest requests in DDS."""
        self.share, self.burst_s, self.active, self._clock = share, burst_s, active, clock
        self._credit = burst_s
        self._t = clock()
        self.waited_s = 0.0  #: wall time the requests waited for the budget, s
        self._warn = warn
        self._warned = -math.inf

    def _refill(self) -> float:
        now = self._clock()
        self._credit = min(self.burst_s, self._credit + self.share * (now - self._t))
        self._t = now
        return self._credit

    def delay(self) -> float:
        """How long the next request must wait now, s (0: at once)."""
        if not self.active():
            return 0.0
        credit = self._refill()
        return 0.0 if credit >= 0 else -credit / self.share

    def wait(self, stop: threading.Event) -> bool:
        """Sleep until the budget allows the next request (or ``stop`` is set); False if
        stopping."""
        pause = self.delay()
        if pause > 0:
            if self._warn is not None and self._t - self._warned >= BUDGET_WARN_PERIOD_S:
                self._warned = self._t
                self._warn(f"requests come faster than their CPU budget answers them "
                           f"({self.share:.0%} of a core while the physics runs free, "
                           f"REQUESTS_MAX_CPU_SHARE): they wait in their services' queues, "
                           f"answered in order; a service with more than "
                           f"{SERVICE_QUEUE_DEPTH} waiting loses its oldest (DDS drops them)")
            stop.wait(pause)
            self.waited_s += pause
        return not stop.is_set()

    def charge(self, cpu_s: float) -> None:
        """A request took ``cpu_s`` of the thread's CPU time. The debt stops at one burst:
        a rare long request (a spawn's rebuild, ~1 s; a linearisation, ~0.07 s) delays the
        next one by at most ``burst_s / share`` (0.67 s), instead of starving every request
        for ``cpu_s / share`` (33 s after a spawn); what the budget bounds is a stream of
        requests, and a stream pays in full."""
        if self.active():
            self._refill()
            self._credit = max(self._credit - cpu_s, -self.burst_s)


class NodeServices:
    """``~/reset`` (Trigger), ``~/pause`` (SetBool: true pauses), ``~/step`` (Trigger: one
    step while paused), wb_sim_interfaces' (``~/get_dynamics``, the payloads, the
    snapshots) and, if importable, simulation_interfaces (``self.sim_interfaces``, else
    None)."""

    def __init__(self, node, control: Control, now_s):
        """``now_s()``: the simulated time, s (for the answers of ``~/step``)."""
        self.control, self._now_s = control, now_s
        #: the requests' own callback groups (the executor runs them on its workers, beside
        #: the parameters and commands of the default group): the short requests one at a
        #: time, paced by :attr:`limiter`; the stepping ones (step_simulation, the action:
        #: long) reentrant, so that a cancel or a short request is served meanwhile
        self.group = MutuallyExclusiveCallbackGroup()
        self.long_group = ReentrantCallbackGroup()
        self.limiter = RequestLimiter(active=control.physics_free_running)
        kw = {"qos_profile": SERVICE_QOS, "callback_group": self.group}
        node.create_service(Trigger, "~/reset", self.limiter.wrap(self._on_reset), **kw)
        node.create_service(SetBool, "~/pause", self.limiter.wrap(self._on_pause), **kw)
        node.create_service(Trigger, "~/step", self.limiter.wrap(self._on_step), **kw)
        node.create_service(GetDynamics, "~/get_dynamics",
                            self.limiter.wrap(self._on_get_dynamics), **kw)
        node.create_service(AttachPayload, "~/attach_payload",
                            self.limiter.wrap(self._payload_request(self._attach)), **kw)
        node.create_service(DetachPayload, "~/detach_payload",
                            self.limiter.wrap(self._payload_request(self._detach)), **kw)
        self._snapshot_services(node, kw)
        self._pace_parameter_services(node)
        self.sim_interfaces = None
        if interfaces() is None:
            node.get_logger().info(
                "simulation_interfaces is not installed: its services (~/reset_simulation, "
                "...) are off (a ROS 2 install has it; on a pip-only machine "
                "tools/setup_venv.sh generates it)")
        else:
            self.sim_interfaces = SimulationInterfaces(node, control, SERVICE_QOS, self.group,
                                                       self.long_group, self.limiter)
        #: with rclpy's internals: the thread serving the requests' group (else None: the
        #: executor's workers serve it, paced by the limiter)
        self.server = None
        self.budget = CpuBudget(active=control.physics_free_running,
                                warn=node.get_logger().warning)
        if serves_requests():
            short = [srv for srv in node.services if srv.callback_group is self.group]
            for srv in short:  # the budget bounds them instead of the limiter
                srv.callback = getattr(srv.callback, "__wrapped__", srv.callback)
            self.server = RequestServer(node, short, self.budget)

    def stats_text(self) -> str:
        """For the node's stats line: the requests the requests' thread answered since the
        start, its CPU time and how long they waited for the budget ('' without it)."""
        if self.server is None:
            return ""
        return (f", requests answered {self.server.served} in all ({self.server.cpu_s * 1e3:.0f}"
                f" ms of CPU, {self.budget.waited_s:.1f} s waited for the CPU budget)")

    def start(self) -> None:
        """Start the requests' thread (the node calls it once it is whole)."""
        if self.server is not None:
            self.server.start()

    def close(self) -> None:
        """Stop the requests' thread (before the node is destroyed)."""
        if self.server is not None:
            self.server.close()

    # ------------------------------------------------------------------ dynamics

    def _on_get_dynamics(self, request, response):
        """``~/get_dynamics`` (wb_sim_interfaces/srv/GetDynamics): the state now and the
        quantities ``names`` of :data:`.dynamics.MATRICES` (none: :data:`.dynamics.DEFAULT_NAMES`,
        all but the linearisation, in that order), each a Matrix, all at one state (the lock
        held while they are computed)."""
        with self.control.lock:
            d = dynamics.query(self.control.sim, self.control.now_ns(), request.names)
        response.success, response.message = not d.error, d.error
        response.stamp.sec, response.stamp.nanosec = divmod(d.stamp_ns, 1_000_000_000)
        response.q = array.array("d", d.q.tobytes())
        response.v = array.array("d", d.v.tobytes())
        response.contact_points = d.contact_points
        response.quantities = [Matrix(name=name, rows=x.shape[0], cols=x.shape[1],
                                      data=array.array("d", x.tobytes()))
                               for name, x in d.matrices]
        return response

    # ------------------------------------------------------------------ payloads

    def _payload_request(self, act):
        """``~/attach_payload`` / ``~/detach_payload`` (wb_sim_interfaces/srv/AttachPayload,
        DetachPayload: the payload's fields; the answer ``success`` and ``message``). Acted
        on under the simulator's lock, between two steps; a refused request changes
        nothing."""
        def callback(request, response):
            try:
                with self.control.lock:
                    response.message = act(request)
                response.success = True
            except WbSimError as e:
                response.success, response.message = False, str(e)
            return response
        callback.__name__ = act.__name__
        return callback

    def _attach(self, request) -> str:
        sim = self.control.sim
        ixx, ixy, ixz, iyy, iyz, izz = request.inertia
        c = request.com
        p = sim.attach_payload(request.link, request.mass, (c.x, c.y, c.z),
                               [[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]],
                               name=request.name or request.link)
        return (f"attached payload {p.name!r} ({p.mass:g} kg) to {p.link!r} at t = "
                f"{self.control.now_ns() / 1e9:.6f} s, acting from the next step; "
                f"{len(sim.payloads)} attached")

    def _detach(self, request) -> str:
        sim = self.control.sim
        p = sim.detach_payload(request.name)
        return (f"detached payload {p.name!r} ({p.mass:g} kg) from {p.link!r} at t = "
                f"{self.control.now_ns() / 1e9:.6f} s, from the next step; "
                f"{len(sim.payloads)} attached")

    # ------------------------------------------------------------------ snapshots

    def _snapshot_services(self, node, kw) -> None:
        """``~/save_snapshot``, ``~/restore_snapshot``, ``~/delete_snapshot`` (a name in;
        a result code and message out) and ``~/list_snapshots`` (the names, oldest first,
        matching ``filter``, their stamps and sizes), wb_sim_interfaces' types."""
        cfg = self.control.cfg
        self.snapshots = SnapshotStore(cfg["snapshots.max_count"],
                                       cfg["snapshots.max_mb"] * 1e6)
        for name, kind in (("save_snapshot", SaveSnapshot),
                           ("restore_snapshot", RestoreSnapshot),
                           ("delete_snapshot", DeleteSnapshot),
                           ("list_snapshots", ListSnapshots)):
            node.create_service(kind, f"~/{name}", self.limiter.wrap(
                self._snapshot_request(getattr(self, f"_{name}"))), **kw)

    def _snapshot_request(self, act):
        """A snapshot service: ``act(request, response)`` returns the message of a
        success; a :class:`.snapshots.SnapshotError` becomes the response's ``RESULT_*``
        of its kind ("invalid", "not_found", "full") and its message, the simulator's
        CommandError (a restore its objects refuse) ``RESULT_FAILED``; the bounds are the
        live parameters'."""
        def callback(request, response):
            cfg = self.control.cfg
            self.snapshots.max_count = cfg["snapshots.max_count"]
            self.snapshots.max_bytes = cfg["snapshots.max_mb"] * 1e6
            try:
                response.message = act(request, response)
                response.result = response.RESULT_OK
            except CommandError as e:  # a SnapshotError, or the simulator refusing
                response.message = str(e)
                kind = getattr(e, "kind", "failed")
                response.result = getattr(response, f"RESULT_{kind.upper()}")
            return response
        callback.__name__ = act.__name__
        return callback

    def _save_snapshot(self, request, response) -> str:
        name = request.name
        self.snapshots.fits(name, 0)  # the count, before anything is copied
        snap = self.control.take_snapshot()
        replaced = self.snapshots.save(name, snap)
        return (f"{'replaced' if replaced else 'saved'} snapshot {name!r} at t = "
                f"{snap.t_ns / 1e9:.6f} s ({snap.nbytes / 1e6:.3f} MB; "
                f"{len(self.snapshots.names())} of {self.snapshots.max_count} kept)")

    def _restore_snapshot(self, request, response) -> str:
        return self.control.restore_snapshot(self.snapshots.get(request.name))

    def _delete_snapshot(self, request, response) -> str:
        snap = self.snapshots.delete(request.name)
        return f"deleted snapshot {request.name!r} (of t = {snap.t_ns / 1e9:.6f} s)"

    def _list_snapshots(self, request, response) -> str:
        store = self.snapshots
        names = store.names()
        pattern = request.filter
        if pattern:
            why = filter_error(pattern, max(names, key=len, default=""))
            if why is not None:  # checked before it runs, as get_entities' filter
                raise SnapshotError(f"filter refused: {why}")
            names = [n for n in names if re.search(pattern, n) is not None]
        snaps = [store.get(n) for n in names]
        response.names = names
        response.stamps = [Time(sec=s.t_ns // 1_000_000_000, nanosec=s.t_ns % 1_000_000_000)
                           for s in snaps]
        response.sizes = [int(s.nbytes) for s in snaps]
        response.total_size, response.max_size = int(store.total_bytes), int(store.max_bytes)
        response.count, response.max_count = len(store.names()), int(store.max_count)
        return (f"{len(self.snapshots.names())} of {self.snapshots.max_count} snapshots, "
                f"{self.snapshots.total_bytes / 1e6:.3f} of {self.snapshots.max_bytes / 1e6:g} "
                f"MB; " + ", ".join(f"{n}: t = {self.snapshots.get(n).t_ns / 1e9:.6f} s"
                                     for n in names))

    def _pace_parameter_services(self, node) -> None:
        """rclpy's parameter services (made with the node, in its default group): into the
        requests' group, paced (``Service.callback`` and ``callback_group`` are public
        attributes; a group knows its entities through ``add_entity``)."""
        prefix = node.get_fully_qualified_name().strip("/") + "/"
        for srv in list(node.services):
            name = srv.srv_name.lstrip("/")  # rclpy gives 'wb_sim/get_parameters'
            if name.startswith(prefix) and name[len(prefix):] in PARAMETER_SERVICES:
                srv.callback = self.limiter.wrap(srv.callback)
                self.group.add_entity(srv)
                srv.callback_group = self.group

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
