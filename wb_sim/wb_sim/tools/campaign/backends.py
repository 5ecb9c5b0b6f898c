"""Where a campaign's cases run: each backend takes the tasks (``{"spec", "case", "out"}``) and
yields ``(task, row)`` as the cases finish, a row being :func:`.case.run_case`'s. The rows do
not depend on the backend or the number of workers (every case is a pure function of its
parameters)."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ...errors import ConfigError
from .case import run_case

#: the backends :func:`wb_sim.tools.campaign.run_campaign` takes
BACKENDS = ("local", "ray")


def serial(tasks: list):
    """Yield (task, row), one case after the other in this process (no pool: debugging)."""
    for t in tasks:
        yield t, run_case(t)


def worker_died_row(task: dict, why: str) -> dict:
    """The row of a case whose worker process died (killed, out of memory): an error, not
    cached, run again next time."""
    case = task["case"]
    return {"case_id": case["index"], "case_hash": case["hash"], "status": "error",
            "error": f"its worker process died ({why}); killed, or out of memory?"}


#: the environment of a campaign's worker processes: one BLAS / OpenMP thread each. A case's
#: matrices are small (nv of a robot), so a worker gains nothing from BLAS threads, while n
#: workers each starting one per core (OpenBLAS's default) ask n x cores threads of the machine.
#: The user's own setting wins.
WORKER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@contextlib.contextmanager
def _worker_env():
    """Set :data:`WORKER_ENV` (where the user has not) while workers are started; the
    spawned processes read it at their start, this process's BLAS is already set up."""
    added = {k: v for k, v in WORKER_ENV.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def pinned_cpus(workers: int) -> list[int] | None:
    """The CPUs the local pool's ``workers`` are pinned to, one each (Linux), so that the
    kernel does not move them between cores (their caches stay warm) and two never share
    one while another idles; None (not pinned) where ``WB_SIM_CAMPAIGN_PIN=0``, where
    ``os.sched_setaffinity`` does not exist, where the user restricted this process's
    affinity (taskset, a cpuset: fewer CPUs allowed than the machine has; their choice is
    kept) or where there are more workers than CPUs."""
    if os.environ.get("WB_SIM_CAMPAIGN_PIN") == "0" or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < (os.cpu_count() or 0) or workers > len(allowed):
        return None
    return allowed[:workers]


def _pin_worker(cpus: list[int], counter) -> None:
    """A pool worker's initializer: pin this process to the next CPU of ``cpus``."""
    with counter.get_lock():
        i = counter.value
        counter.value += 1
    try:
        os.sched_setaffinity(0, {cpus[i % len(cpus)]})
    except OSError:
        pass  # the CPU went offline or a cpuset changed since: run unpinned


def local_pool(tasks: list, workers: int):
    """Yield (task, row) as the cases finish, on a local process pool of ``workers``
    (spawned: they inherit ``sys.path``); ``serial`` with 1 worker and
    ``WB_SIM_CAMPAIGN_INLINE=1``. A worker that dies breaks the pool and every case in it:
    the unfinished cases then run on a pool of one worker, in order, until one breaks it
    again (that case gets an error row: its worker died) or all are done; after such a
    case, the rest run on ``workers`` again. One killed case never costs the others. Each
    worker is pinned to a CPU of its own where :func:`pinned_cpus` allows."""
    import concurrent.futures as cf
    import multiprocessing as mp
    from concurrent.futures.process import BrokenProcessPool
    if workers == 1 and os.environ.get("WB_SIM_CAMPAIGN_INLINE") == "1":
        yield from serial(tasks)  # no pool (debugging)
        return
    left = list(range(len(tasks)))
    size = workers
    while left:
        broken = None
        size = min(size, len(left))
        done: set[int] = set()
        ctx = mp.get_context("spawn")
        cpus = pinned_cpus(size)
        pin = {} if cpus is None else {"initializer": _pin_worker,
                                       "initargs": (cpus, ctx.Value("i", 0))}
        with _worker_env(), \
                cf.ProcessPoolExecutor(max_workers=size, mp_context=ctx, **pin) as ex:
            futures = {ex.submit(run_case, tasks[i]): i for i in left}
            try:
                for fut in cf.as_completed(futures):
                    i = futures[fut]
                    try:
                        row = fut.result()
                    except BrokenProcessPool as e:
                        broken = e
                        break
                    done.add(i)
                    yield tasks[i], row
            finally:
                for fut in futures:
                    fut.cancel()
        if broken is None:
            return
        left = [i for i in left if i not in done]
        if size == 1:  # one worker runs the cases in order: the first unfinished one died
            culprit = left.pop(0)
            yield tasks[culprit], worker_died_row(tasks[culprit], str(broken) or "broken pool")
            size = workers
        else:
            size = 1


#: seconds to wait for a Ray cluster's address to accept a connection
RAY_CONNECT_S = 10.0


def check_reachable(address: str, timeout: float = RAY_CONNECT_S) -> None:
    """ConfigError naming ``address`` ('host:port' or 'ray://host:port') where nothing
    accepts a TCP connection there within ``timeout`` s (ray.init waited silently for
    ever); 'auto' and addresses without a port are left to Ray."""
    import socket
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise ConfigError(f"cannot reach the Ray cluster at '{address}' (--address): "
                          f"{e.strerror or e}; is it running (ray start --head)?") from None


def ray_cluster(tasks: list, workers: int | None, address: str | None):
    """Yield (task, row) as the cases finish, on Ray (an existing cluster at ``address``,
    else a local instance with ``workers`` CPUs)."""
    if address:
        check_reachable(address)
    try:
        import ray
    except ImportError:
        raise ConfigError("the Ray backend needs Ray: pip install ray") from None
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = workers or os.cpu_count()
        ray.init(**kwargs)
        started = True
    try:
        remote = ray.remote(num_cpus=1, runtime_env={"env_vars": {
            k: os.environ.get(k, v) for k, v in WORKER_ENV.items()}})(run_case)
        pending = {remote.remote(t): t for t in tasks}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                yield pending.pop(ref), ray.get(ref)
    finally:
        if started:
            ray.shutdown()


def cases_on(backend: str, tasks: list, workers: int, address: str | None = None):
    """Yield (task, row) from ``backend`` (:data:`BACKENDS`): 'local' on at most ``workers``
    processes, 'ray' on ``address`` (else a local instance of ``workers`` CPUs)."""
    if backend == "local":
        return local_pool(tasks, min(workers, len(tasks)))
    if backend == "ray":
        return ray_cluster(tasks, workers, address)
    raise ConfigError(f"unknown backend '{backend}'; choose 'local' or 'ray'")
