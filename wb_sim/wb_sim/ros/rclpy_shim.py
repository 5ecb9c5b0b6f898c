"""The one place where wb_sim touches rclpy's private internals, each with a public fallback.

The node's 1 kHz loop is cheaper through a few internals of rclpy (measured on
Kilted; README, "Performance"):

==================  ==============================================  ==========================
internal            what for                                        public fallback
==================  ==============================================  ==========================
``publish_raw``     publish serialized bytes without                ``Publisher.publish(bytes)``
(``Publisher.__     ``Publisher.publish``'s type dispatch and
publisher``)        handle guard: 0.7 instead of 1.5 us a message
``take_message``    the physics loop takes the command messages     the executor delivers them
(``Subscription.    itself at the start of each step (applied at    to callbacks (on its thread,
handle``)           the next step, ~1 us each); the executor        under the node's lock)
                    must not see those subscriptions: the node
                    overrides ``Node.subscriptions`` / ``waitables``
``WaitSet``         lockstep blocks in rcl_wait on the command      a threading.Event set by
(``implementation_  subscriptions (where ``EventsExecutor`` is      the executor's callbacks
singleton``)        missing)
``EventsExecutor``  lockstep waits for the answer in an             the rcl wait set above
over a view of      EventsExecutor that sees only the command
the command         subscriptions (a stand-in "node" with just
subscriptions       them): rmw's new-message callback wakes the
                    physics thread, which runs the command's
                    callback itself; ~65 us sooner per answer
                    than polling and 2x cheaper than rcl_wait
``service_take_``   the short requests (state queries, parameters,  the executor serves them
``request``         ...) served on a thread of their own: an rcl    (a worker of its
(``Service.         wait set over just those services, take,        MultiThreadedExecutor:
handle``)           callback, send (~0.15 ms of CPU a request, 5x   ~0.8-2 ms of CPU a
                    less than the executor); the executor must not  request)
                    see them: the node overrides ``Node.services``
``RCLError``        tell a failed rcl call (going on) from a bug    ``RuntimeError``
(``_rclpy_pybind11``)
``_parameter_``     the names of the parameters given to the node   the ``--params-file`` and
``overrides``       (to refuse an unknown key, to pick the default  ``-p`` arguments of the
                    robot when none is given)                        command line, read again
==================  ==============================================  ==========================

Each is checked when this module is imported; whatever is missing takes the
fallback. Kilted (rclpy 9.1) and Jazzy (rclpy 7.1) have them all and take the
internal path: CI checks both (test/ros/test_rclpy_public_api.py in the Kilted and
the Jazzy venv, docs/testing.md); Humble has no ``EventsExecutor``. An
``EventsExecutor`` that fails on the command subscriptions' stand-in node at its
first use is logged (a warning) and lockstep waits in the rcl wait set instead.
``WB_SIM_RCLPY_PUBLIC_API=1`` in the environment forces every fallback (the tests
run the node so). The node logs which path it uses.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any, Callable

import rclpy
from rclpy.node import Node
from rclpy.publisher import Publisher

#: longest wait of the requests' thread (:class:`RequestServer`) before it looks whether
#: it should stop, s
SERVE_WAIT_S = 0.1
#: environment variable: "1" forces the public-API path everywhere
FORCE_PUBLIC_ENV = "WB_SIM_RCLPY_PUBLIC_API"
FORCED_PUBLIC = os.environ.get(FORCE_PUBLIC_ENV, "") not in ("", "0")

try:
    from rclpy._rclpy_pybind11 import RCLError
except ImportError:  # pragma: no cover - every supported distro has it
    RCLError = RuntimeError  # type: ignore[misc,assignment]

try:
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
    _HAVE_WAITSET = hasattr(_rclpy, "WaitSet")
except ImportError:  # pragma: no cover
    _rclpy, _HAVE_WAITSET = None, False

_HAVE_NODE_PROPERTIES = isinstance(getattr(Node, "subscriptions", None), property) and \
    isinstance(getattr(Node, "waitables", None), property)
_HAVE_TAKE = _rclpy is not None and hasattr(getattr(_rclpy, "Subscription", None), "take_message")
_HAVE_SERVICE_TAKE = _rclpy is not None and hasattr(getattr(_rclpy, "Service", None),
                                                    "service_take_request")

#: internal -> whether it is used (present and not forced off)
INTERNALS: dict[str, bool] = {
    "RCLError": RCLError is not RuntimeError,
    "publish_raw": not FORCED_PUBLIC,
    "polled subscriptions": not FORCED_PUBLIC and _HAVE_WAITSET and _HAVE_NODE_PROPERTIES
    and _HAVE_TAKE,
    "parameter overrides": not FORCED_PUBLIC,
}
try:
    from rclpy.experimental import EventsExecutor as _EventsExecutor
except ImportError:  # Humble has none
    _EventsExecutor = None
INTERNALS["events wait"] = INTERNALS["polled subscriptions"] and _EventsExecutor is not None
INTERNALS["served requests"] = not FORCED_PUBLIC and _HAVE_WAITSET and _HAVE_SERVICE_TAKE \
    and isinstance(getattr(Node, "services", None), property)


class _CommandsOnly:
    """What rclpy's EventsExecutor reads of a node (its entity collections), holding
    only the command subscriptions: the executor serves them and nothing else of the
    node (its services stay with the node's own executor)."""

    timers: tuple = ()
    clients: tuple = ()
    services: tuple = ()
    guards: tuple = ()
    waitables: tuple = ()

    def __init__(self, subscriptions: list):
        self.subscriptions = subscriptions
        self.executor = None  # EventsExecutor.add_node sets it


def describe() -> str:
    """One line for the node's log: which path is in use and why."""
    if FORCED_PUBLIC:
        return f"rclpy: public API only (forced by {FORCE_PUBLIC_ENV}=1)"
    used = [k for k, v in INTERNALS.items() if v]
    missing = [k for k, v in INTERNALS.items() if not v]
    text = f"rclpy {_version()}: internals used: {', '.join(used) or 'none'}"
    if missing:
        text += f"; public fallback for: {', '.join(missing)} (not in this rclpy)"
    return text


def _version() -> str:
    from importlib.metadata import version
    # the PyPI wheel's version first (Jazzy's ros-rclpy 7.1.6 carries rclpy's own 7.1.5
    # metadata), then rclpy's (a ROS install)
    for dist in ("ros-rclpy", "rclpy"):
        try:
            return version(dist)
        except Exception:  # noqa: BLE001 - a colcon install may have no metadata
            continue
    return getattr(rclpy, "__version__", "")


# ----------------------------------------------------------------------------- parameters


def parameter_overrides(node: Node, argv: list[str] | None = None) -> set[str]:
    """The names of the parameters given to ``node`` at start (``--params-file``, ``-p``,
    launch): rclpy's ``Node._parameter_overrides``, or (public path) the ROS arguments of
    the command line ``argv`` (default ``sys.argv``) read again: every ``--params-file``
    (the node's block, ``/**`` too) and every ``-p`` / ``--param NAME:=VALUE``."""
    if INTERNALS["parameter overrides"]:
        given = getattr(node, "_parameter_overrides", None)
        if isinstance(given, dict):
            return set(given)
    import sys

    from ..config import read_yaml_params
    from ..errors import ConfigError

    args = sys.argv if argv is None else argv
    names: set[str] = set()
    in_ros = False
    for i, a in enumerate(args):
        if a == "--ros-args":
            in_ros = True
        elif a == "--":
            in_ros = False
        elif in_ros and i + 1 < len(args):
            if a == "--params-file":
                try:
                    names |= set(read_yaml_params(args[i + 1], node.get_name()))
                except ConfigError:
                    pass  # rclpy has read (or refused) the file already
            elif a in ("-p", "--param") and ":=" in args[i + 1]:
                names.add(args[i + 1].split(":=", 1)[0])
    return names


# ----------------------------------------------------------------------------- publishing


def raw_publisher(publisher: Publisher | None) -> Callable[[bytes], None] | None:
    """A function publishing an already serialized message (bytes) on ``publisher``
    (None: None): the C publisher's ``publish_raw`` without ``Publisher.publish``'s
    type dispatch and handle guard, 0.7 instead of 1.5 us a message. The guard keeps
    a publisher from being destroyed while in use; the node's publishers are
    destroyed only by ``destroy_node``, after the physics loop and the executor
    have stopped. The fallback, ``Publisher.publish``, accepts bytes as well."""
    if publisher is None:
        return None
    if INTERNALS["publish_raw"]:
        impl = getattr(publisher, "_Publisher__publisher", None)
        raw = getattr(impl, "publish_raw", None)
        if raw is not None:
            return raw
    return publisher.publish


# ----------------------------------------------------------------------------- commands in


class PolledNodeMixin:
    """Mixed into a Node before ``Node``: the executor does not see the subscriptions
    in ``self._polled`` (nor their QoS event handlers); the physics loop takes
    their messages itself (:class:`CommandIntake`); nor the services in
    ``self._served`` (ids), which a :class:`RequestServer` serves."""

    @property
    def subscriptions(self):
        polled = getattr(self, "_polled", ())
        return (s for s in super().subscriptions if s not in polled)

    @property
    def services(self):
        served = getattr(self, "_served", frozenset())
        return (s for s in super().services if id(s) not in served)

    @property
    def waitables(self):
        skip = [h for s in getattr(self, "_polled", ()) for h in getattr(s, "event_handlers", ())]
        return (w for w in super().waitables if not any(w is h for h in skip))


class CommandIntake:
    """How command messages reach the node.

    ``polled`` (the internals): the physics loop calls :meth:`poll` at the start
    of each step and takes every waiting message itself (at 1 kHz the executor's
    per-message overhead would cost a third of a core, and the command is applied
    at the very next step); :meth:`wait` blocks in an rcl wait set. Otherwise the
    executor calls the callbacks on its thread, :meth:`poll` does nothing and
    :meth:`wait` waits for a callback to have run.

    ``node`` must mix in :class:`PolledNodeMixin`; the callbacks must take the node's
    lock and never raise.
    """

    def __init__(self, node: Node, polled: bool | None = None):
        self.node = node
        self.polled = INTERNALS["polled subscriptions"] if polled is None else polled
        self.subs: list = []
        node._polled = self.subs if self.polled else []  # what the executor must not see
        self._takers: list[tuple] = []
        self._wait_set = None
        self._events = None  # the EventsExecutor of wait_events, made at its first use
        self._arrived = threading.Event()

    def subscribe(self, msg_type, topic: str, callback: Callable[[Any], None], qos,
                  raw: bool = False):
        if self.polled:
            sub = self.node.create_subscription(msg_type, topic, callback, qos, raw=raw)
            self._takers.append(_taker(sub))
        else:
            sub = self.node.create_subscription(msg_type, topic, self._delivered(callback), qos,
                                                raw=raw)
        self.subs.append(sub)
        return sub

    def _delivered(self, callback):
        arrived = self._arrived

        def deliver(msg):
            try:
                callback(msg)
            finally:
                arrived.set()
        return deliver

    def poll(self, subs=None) -> None:
        """Take every waiting message of ``subs`` (default: all) and call its callback
        (physics thread; polled mode only)."""
        if not self.polled:
            return
        # bound take_message methods, without the handle guard (like the publishers:
        # the subscriptions live until destroy_node): 0.7 instead of 1.2 us each
        for take, msg_type, raw, callback in (self._takers if subs is None else
                                              (_taker(s) for s in subs)):
            while (taken := take(msg_type, raw)) is not None:
                callback(taken[0])

    def wait_events(self, timeout_s: float) -> None:
        """Block until a command message arrives or ``timeout_s``; its callback runs here,
        on the caller's thread (which must not hold the lock the callbacks take). Where
        the EventsExecutor is missing (the node's log says so, :func:`describe`) or fails to
        start (a warning here), it falls back to :meth:`wait` and :meth:`poll`."""
        if self._events is None and INTERNALS["events wait"] and self.polled:
            try:
                ex = _EventsExecutor(context=self.node.context)
                ex.add_node(_CommandsOnly(list(self.subs)))
                self._events = ex
            except Exception as e:  # noqa: BLE001 - an rclpy whose executor reads more of a node
                INTERNALS["events wait"] = False
                self.node.get_logger().warning(
                    f"rclpy {_version()}: the EventsExecutor refused the command subscriptions "
                    f"({type(e).__name__}: {e}); lockstep waits in an rcl wait set instead")
        if self._events is not None:
            self._events.spin_once(timeout_sec=max(0.0, timeout_s))
            return
        ready = self.wait(timeout_s)
        if ready:
            self.poll(ready)

    def close(self) -> None:
        """Release the EventsExecutor of :meth:`wait_events` (before the node goes)."""
        if self._events is not None:
            self._events.shutdown(timeout_sec=1.0)
            self._events = None

    def wait(self, timeout_s: float) -> list:
        """Block until a command message is there (polled: the subscriptions that
        have one), or ``timeout_s``."""
        if not self.polled:
            if self._arrived.wait(max(0.0, timeout_s)):
                self._arrived.clear()
            return []
        node = self.node
        with contextlib.ExitStack() as stack:
            for s in self.subs:
                stack.enter_context(s.handle)
            stack.enter_context(node.context.handle)
            if self._wait_set is None:
                self._wait_set = _rclpy.WaitSet(len(self.subs), 0, 0, 0, 0, 0, node.context.handle)
            ws = self._wait_set
            ws.clear_entities()
            for s in self.subs:
                ws.add_subscription(s.handle)
            ws.wait(max(0, int(timeout_s * 1e9)))
            ready = ws.get_ready_entities("subscription")
            return [s for s in self.subs if s.handle.pointer in ready]


# ----------------------------------------------------------------------------- requests


class RequestServer:
    """Serves ``services`` (rclpy Services of ``node``) on a thread of its own, one request
    at a time, without the executor: it waits in an rcl wait set over just those services
    (slices of :data:`SERVE_WAIT_S`, so that :meth:`close` is noticed), takes each waiting
    request, calls the service's callback and sends its answer. rclpy's
    MultiThreadedExecutor costs ~0.8-2 ms of CPU per request (its wait set over every
    entity of the node rebuilt in Python, a task, a future, a worker, a guard condition),
    most of it holding the interpreter lock the physics thread needs; this ~0.09 ms of its
    own (~0.2 ms with DDS's threads) in a quiet process, 0.2-0.4 ms beside a busy physics
    thread on a loaded machine (docs/performance.md, "An observer's cost").

    Order: each service's requests in the order they came (DDS's queue); services with
    requests waiting take turns, one request each. ``budget`` (optional) bounds the work:
    ``budget.wait(stop)`` before each request (it may sleep; the request stays in DDS's
    queue meanwhile, nothing is dropped by this server), ``budget.charge(cpu_s)`` with all
    of the thread's CPU time (waking, taking, answering, sending; waiting costs none). A
    callback that raises is logged (an error) and its client gets no answer, as with the
    executor; the server goes on.

    Only where :func:`serves_requests` (the internals); the node must mix in
    :class:`PolledNodeMixin`, which hides the services from the executor."""

    def __init__(self, node: Node, services: list, budget=None):
        self.node, self.services, self.budget = node, list(services), budget
        node._served = frozenset(id(s) for s in self.services)
        self.served = 0  #: requests answered
        self.failed = 0  #: requests whose callback or answer failed
        self.cpu_s = 0.0  #: the thread's CPU time, s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wb_sim requests", daemon=True)

    def start(self) -> None:
        """Start serving (once the node is whole: its parameter callback registered)."""
        self._thread.start()

    def close(self, timeout_s: float = 1.0) -> None:
        """Stop serving (the thread ends within a wait slice, or after its request)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        node = self.node
        timeout_ns = int(SERVE_WAIT_S * 1e9)
        self._cpu_mark = time.thread_time()
        try:
            # the handles stay entered while the thread serves (destroy_node closes it
            # first): each wake adds them to the wait set and takes from them directly
            with contextlib.ExitStack() as stack:
                for s in self.services:
                    stack.enter_context(s.handle)
                stack.enter_context(node.context.handle)
                ws = _rclpy.WaitSet(0, 0, 0, 0, len(self.services), 0, node.context.handle)
                served = [(s.handle, s.srv_type.Request, s.srv_type.Response, s)
                          for s in self.services]
                by_pointer = {entry[0].pointer: entry for entry in served}
                while not self._stop.is_set() and node.context.ok():
                    ws.clear_entities()
                    for entry in served:
                        ws.add_service(entry[0])
                    ws.wait(timeout_ns)
                    pending = [by_pointer[p] for p in ws.get_ready_entities("service")
                               if p in by_pointer]
                    while pending and not self._stop.is_set():
                        pending = [e for e in pending if self._serve_one(*e)]
                    self._charge()
        except Exception as e:  # noqa: BLE001 - the context or a handle went down under us
            if node.context.ok() and not self._stop.is_set():
                node.get_logger().error(f"the requests' thread stopped: "
                                        f"{type(e).__name__}: {e}")

    def _charge(self) -> None:
        """Charge the budget with the thread's CPU time since the last charge: the requests
        and the waking, taking and sending around them (waiting costs none)."""
        now = time.thread_time()
        spent, self._cpu_mark = now - self._cpu_mark, now
        self.cpu_s += spent
        if self.budget is not None:
            self.budget.charge(spent)

    def _serve_one(self, handle, request_type, response_type, srv) -> bool:
        """Take and answer ``srv``'s next request; False if there was none (or stopping)."""
        budget = self.budget
        if budget is not None:
            self._charge()
            if not budget.wait(self._stop):
                return False
        request, header = handle.service_take_request(request_type)
        if header is None:
            return False
        try:
            response = srv.callback(request, response_type())
            if not isinstance(response, response_type):
                raise TypeError(f"the callback returned a {type(response).__name__}, not a "
                                f"{response_type.__name__}")
            handle.service_send_response(response, header.request_id)
            self.served += 1
        except Exception as e:  # noqa: BLE001 - one failed request must not end the server
            self.failed += 1
            self.node.get_logger().error(f"a request to {srv.srv_name} failed: "
                                         f"{type(e).__name__}: {e}")
        return True


def serves_requests() -> bool:
    """Whether the short requests are served by a :class:`RequestServer` (the internals),
    else by the executor."""
    return INTERNALS["served requests"]


def _taker(sub) -> tuple:
    return sub.handle.take_message, sub.msg_type, sub.raw, sub.callback


# ----------------------------------------------------------------------------- tools


def take_raw(sub) -> Callable[[], Any] | None:
    """For a tool draining a raw subscription itself (the recorder): a function
    returning the next ``(bytes, info dict)`` or None (under the handle's guard);
    None where only the public API is used (then the tool lets the executor deliver
    the messages to the subscription's callback)."""
    if not INTERNALS["polled subscriptions"]:
        return None
    handle, msg_type = sub.handle, sub.msg_type

    def take():
        with handle:
            return handle.take_message(msg_type, True)
    return take
