"""The requests' thread (issue 27: an observer's cost): with rclpy's internals the node's
short requests are served by :class:`wb_sim.ros.rclpy_shim.RequestServer` (an rcl wait set
over just those services, ~5x cheaper per request than rclpy's executor), bounded by
:class:`wb_sim.ros.services.CpuBudget` while the physics runs free.

* the budget: a request waits exactly as long as the CPU time overdrawn takes to earn back
  at its share, never while inactive (paused, lockstep), and holds at most its burst;
* the server: a burst of calls is answered whole and in the order sent; the executor does
  not see its services (``Node.services``); a callback that raises is logged, its client
  gets no answer, and the next request is answered; it stops on :meth:`close`.

No timing is asserted (the budget runs on a fake clock).
"""

from __future__ import annotations

import threading

import pytest

from helpers.extras import require_ros

require_ros("std_srvs.srv")

from std_srvs.srv import Trigger  # noqa: E402

from helpers.ros import RosClient, fresh_domain_id  # noqa: E402
from wb_sim.ros import rclpy_shim  # noqa: E402
from wb_sim.ros.services import BUDGET_WARN_PERIOD_S, SERVICE_QOS, CpuBudget  # noqa: E402


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Never(threading.Event):
    """A stop event whose wait only records how long it was asked to sleep."""

    def __init__(self):
        super().__init__()
        self.slept: list[float] = []

    def wait(self, timeout=None):
        self.slept.append(timeout)
        return False


def test_the_budget_lets_a_burst_through_then_waits_for_what_was_overdrawn():
    clock = FakeClock()
    b = CpuBudget(share=0.02, burst_s=0.01, clock=clock)
    stop = Never()
    assert b.delay() == 0.0  # starts with its burst
    b.charge(0.004)
    assert b.delay() == 0.0  # 0.006 s left
    b.charge(0.016)  # 0.010 s overdrawn: 0.5 s to earn back at 2 %
    assert b.delay() == pytest.approx(0.5)
    assert b.wait(stop) is True
    assert stop.slept == [pytest.approx(0.5)]
    assert b.waited_s == pytest.approx(0.5)
    clock.t += 0.25  # half of it earned back
    assert b.delay() == pytest.approx(0.25)
    clock.t += 10.0  # a long quiet time earns no more than the burst
    assert b.delay() == 0.0
    b.charge(0.015)  # 0.010 - 0.015: 0.005 s overdrawn
    assert b.delay() == pytest.approx(0.25)
    # one long request (a spawn's rebuild: ~1 s) overdraws one burst at most: the next
    # waits 0.5 s, not 50 s
    clock.t += 10.0
    b.charge(1.0)
    assert b.delay() == pytest.approx(0.5)


def test_waiting_for_the_budget_is_told_at_most_once_per_period():
    clock = FakeClock()
    told: list[str] = []
    b = CpuBudget(share=0.02, burst_s=0.01, clock=clock, warn=told.append)
    stop = Never()
    b.charge(0.02)
    b.wait(stop)
    assert len(told) == 1 and "REQUESTS_MAX_CPU_SHARE" in told[0] and "1000" in told[0]
    clock.t += 1.0
    b.charge(0.05)
    b.wait(stop)
    assert len(told) == 1  # within BUDGET_WARN_PERIOD_S of the first
    clock.t += BUDGET_WARN_PERIOD_S
    b.charge(0.05)
    b.wait(stop)
    assert len(told) == 2


def test_the_budget_neither_waits_nor_charges_while_inactive():
    clock = FakeClock()
    active = [False]
    b = CpuBudget(share=0.02, burst_s=0.01, active=lambda: active[0], clock=clock)
    stop = Never()
    b.charge(1.0)  # paused or lockstep: the requests cannot change the run
    assert b.delay() == 0.0 and b.wait(stop) and stop.slept == []
    active[0] = True
    assert b.delay() == 0.0  # nothing was charged while inactive
    b.charge(0.02)
    assert b.delay() == pytest.approx(0.5)


def test_a_set_stop_event_ends_the_wait():
    b = CpuBudget(share=0.5, burst_s=0.01)
    stop = threading.Event()
    stop.set()
    b.charge(1.0)
    assert b.wait(stop) is False


@pytest.fixture
def ros():
    client = RosClient(fresh_domain_id(), "request_server_test")
    yield client
    client.close()


@pytest.mark.skipif(not rclpy_shim.serves_requests(),
                    reason="rclpy's internals are off: the executor serves the requests")
def test_the_server_answers_a_burst_in_order_and_survives_a_failing_callback(ros):
    from rclpy.node import Node

    class Served(rclpy_shim.PolledNodeMixin, Node):
        pass

    node = Served("served", context=ros.context)
    count = [0]

    def counted(request, response):
        count[0] += 1
        response.success, response.message = True, str(count[0])
        return response

    def failing(request, response):
        raise RuntimeError("a broken callback")

    good = node.create_service(Trigger, "~/counted", counted, qos_profile=SERVICE_QOS)
    bad = node.create_service(Trigger, "~/failing", failing, qos_profile=SERVICE_QOS)
    other = node.create_service(Trigger, "~/executors", counted)
    server = rclpy_shim.RequestServer(node, [good, bad])
    server.start()
    try:
        # the executor sees the node's services but those the server serves
        seen = list(node.services)
        assert other in seen and good not in seen and bad not in seen
        assert len(seen) == len(node._services) - 2
        # a client with the node's depth: the default (10) loses all but 10 answers
        client = ros.node.create_client(Trigger, "/served/counted", qos_profile=SERVICE_QOS)
        ros._clients[(Trigger, "/served/counted")] = client
        assert client.wait_for_service(timeout_sec=10.0)
        ros.spin_for(0.5)  # matched both ways (RosClient.call)
        assert ros.call(Trigger, "/served/counted", Trigger.Request()).message == "1"
        futures = [client.call_async(Trigger.Request()) for _ in range(200)]
        assert ros.spin_until(lambda: all(f.done() for f in futures), 30.0), \
            f"{sum(f.done() for f in futures)} of 200 answered"
        # each call got the answer to its own request, in the order they were sent
        assert [f.result().message for f in futures] == [str(i) for i in range(2, 202)]
        failed = ros.node.create_client(Trigger, "/served/failing")
        assert failed.wait_for_service(timeout_sec=10.0)
        ros.spin_for(0.5)  # matched both ways (RosClient.call)
        lost = failed.call_async(Trigger.Request())
        assert ros.spin_until(lambda: server.failed == 1, 10.0), server.failed
        after = client.call_async(Trigger.Request())
        assert ros.spin_until(after.done, 10.0)
        assert after.result().message == "202"
        assert not lost.done()  # as with the executor: no answer to a failed callback
        assert server.served == 202
    finally:
        server.close()
        assert not server._thread.is_alive()
        node.destroy_node()
