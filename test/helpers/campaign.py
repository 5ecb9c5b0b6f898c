"""Controllers and metrics that test/tools/test_campaign.py names as 'helpers.campaign:...'
(imported by the campaign's worker processes, which inherit test/ on sys.path)."""

import os

import numpy as np


def pd_failing(sim, case, kp=300.0, kd=10.0):
    """A joint PD around the initial posture that raises in the cases whose index is at least
    $WB_SIM_TEST_FAIL_FROM (a controller with a bug, for the resume test)."""
    fail_from = int(os.environ.get("WB_SIM_TEST_FAIL_FROM", "1000000"))
    q0 = np.array(sim.joint_positions)
    g = np.array(sim.gravity_torques())

    def ctrl(obs):
        if case.index >= fail_from:
            raise RuntimeError(f"controller bug in case {case.index}")
        return g + kp * (q0 - obs.joint_positions) - kd * obs.joint_velocities
    return ctrl


def time_echo(sim, case):
    """Zero torques, and an even joint torque that encodes the time the controller saw: lets
    the test read the sensor delay back from the applied torques (the first joint gets
    1000 * obs.t, far below any limit for the first steps)."""
    def ctrl(obs):
        tau = np.zeros(sim.nj)
        tau[0] = 1000.0 * obs.t
        return tau
    return ctrl


def highest_base(sim, trace):
    """A custom metric: the highest base z of the run, and how many samples the trace had."""
    return {"z_max": float(trace["q"][:, 2].max()), "samples": len(trace["t"])}


def echoed_times(sim, trace):
    """With time_echo: the observation time behind the torque applied at steps 0, 1, 10."""
    tau = trace["applied_torques"][:, 0] / 1000.0
    return {"step0": float(tau[0]), "step1": float(tau[1]), "step10": float(tau[10])}


def gyro_echo(sim, case):
    """Zero torques but the first joint's: 1000 x the gyroscope's x reading the controller saw."""
    def ctrl(obs):
        tau = np.zeros(sim.nj)
        tau[0] = 1000.0 * obs.imu.angular_velocity[0]
        return tau
    return ctrl


def pd_killing_worker(sim, case, kp=300.0, kd=10.0):
    """A joint PD whose case $WB_SIM_TEST_KILL_CASE kills its own worker process (SIGKILL:
    a worker the kernel's OOM killer or a user ends)."""
    import signal
    if case.index == int(os.environ.get("WB_SIM_TEST_KILL_CASE", "-1")):
        os.kill(os.getpid(), signal.SIGKILL)
    return pd_failing(sim, case, kp, kd)


def blas_threads(sim, trace):
    """The worker's OPENBLAS_NUM_THREADS as a number (0: not set)."""
    return float(os.environ.get("OPENBLAS_NUM_THREADS", "0"))


def crate_height(sim, trace):
    """The height of the object 'crate' at the end of a case, m."""
    return float(sim.object_pose("crate").translation[2])


def robot_builds(sim, trace):
    """The worker's robot cache (wb_sim.tools.campaign.case.WORKER_ROBOTS) after this case's
    build: how many robots it parsed and how many times it handed one over."""
    from wb_sim.tools.campaign.case import WORKER_ROBOTS
    return {"built": WORKER_ROBOTS.built, "reused": WORKER_ROBOTS.reused}


def worker_affinity(sim, trace):
    """How many CPUs the worker process may run on (os.sched_getaffinity)."""
    return float(len(os.sched_getaffinity(0)))
