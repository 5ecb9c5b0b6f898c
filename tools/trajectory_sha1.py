"""sha1 of the states of the reference scenarios: a refactoring that must not change
behaviour gives the same digests before and after (issue 25).

    .venv/bin/python tools/trajectory_sha1.py            # one line per scenario

Each digest covers, at every step: q, v (pinocchio layout), the applied torques, the
contact forces (surface wrenches, collision wrench, self-contact forces), the contact
deformation, the IMU reading where there is one, and the full snapshot at the end.
"""

from __future__ import annotations

import hashlib
import sys

import numpy as np

import wb_sim
from wb_sim.controllers import PDGravityController
from wb_sim.tools.bench import icub_stand_setup


def _digest(sim, ctrl, steps: int, before_step=None) -> str:
    h = hashlib.sha1()
    for i in range(steps):
        if before_step is not None:
            before_step(sim, i)
        tau = np.zeros(sim.nj) if ctrl is None else ctrl(sim.q, sim.joint_positions,
                                                        sim.joint_velocities)
        if before_step is not None and hasattr(before_step, "tau"):
            tau = before_step.tau(sim, i, tau)
        sim.step(tau)
        for x in (sim.q, sim.v, sim.applied_torques, sim.contact_wrench_array(),
                  sim.collision_wrench_array(), sim.state.contact_deformation):
            h.update(np.ascontiguousarray(x, dtype=float).tobytes())
        if sim.self_collision is not None:
            h.update(np.ascontiguousarray(sim.self_collision_contacts().force).tobytes())
        if sim.imu_sensor is not None:
            r = sim.imu()
            h.update(np.concatenate([np.ravel(getattr(r, f)) for f in r.__dataclass_fields__
                                     if isinstance(getattr(r, f), np.ndarray)]).tobytes())
    s = sim.get_state()
    for x in (s.q, s.v, s.u, s.force, s.tau_applied):
        h.update(np.ascontiguousarray(x).tobytes())
    return h.hexdigest()


def icub_stand(contact: str, steps: int = 3000) -> str:
    return _digest(*icub_stand_setup(**{"contact.model": contact}), steps)


def humanoid_lying(contact: str, steps: int = 3000) -> str:
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
        "collision.enabled": True, "contact.model": contact})
    sim.apply_external_wrench("pelvis", force=[300.0, 0.0, 0.0], duration_s=0.2)
    return _digest(sim, None, steps)


def self_collision(contact: str, steps: int = 2000) -> str:
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
        "collision.self_collision": True, "contact.model": contact})
    names = sim.joint_names
    target = np.zeros(sim.nj)
    target[names.index("l_shoulder_yaw")] = -1.5
    ctrl = PDGravityController(sim.robot, target, 200.0, 5.0, gravity=sim.config.gravity)
    elbow = names.index("l_elbow")
    rng = np.random.default_rng(5)

    class Shake:
        def __call__(self, sim, i):
            pass

        def tau(self, sim, i, tau):
            if (i // 250) % 2:  # the forearm into the torso, every joint shaken
                tau[elbow] = -30.0
                tau += rng.normal(0.0, 10.0, sim.nj)
            return tau

    return _digest(sim, ctrl, steps, Shake())


def humanoid_noisy_delayed(contact: str, steps: int = 2000) -> str:
    """IMU noise, delayed commands and sensors, a push, and a snapshot taken at step 700
    and restored at step 1300 (the run goes on from step 700 a second time)."""
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
        "contact.model": contact, "imu.angular_velocity_noise_std": 0.01,
        "imu.linear_acceleration_noise_std": 0.1, "imu.seed": 7,
        "joints.command_delay_steps": 2, "sensors.delay_steps": 1})
    ctrl = PDGravityController(sim.robot, sim.state.joint_positions, 300.0, 10.0,
                               gravity=sim.config.gravity)
    saved = []

    def event(sim, i):
        if i == 400:
            sim.apply_external_wrench("pelvis", force=[40.0, 10.0, 0.0], duration_s=0.1)
        if i == 700:
            saved.append(sim.get_state())
        if i == 1300:
            sim.set_state(saved[0])

    h = hashlib.sha1(_digest(sim, ctrl, steps, event).encode())
    st = sim.sensed_state
    h.update(np.concatenate([st.q, st.v]).tobytes())
    h.update(np.concatenate([np.ravel(x) for x in (sim.sensed_contact_wrench_array(),)]).tobytes())
    return h.hexdigest()


SCENARIOS = {
    "humanoid noisy delayed compliant": lambda: humanoid_noisy_delayed("compliant"),
    "humanoid noisy delayed rigid": lambda: humanoid_noisy_delayed("rigid"),
    "icub_stand compliant": lambda: icub_stand("compliant"),
    "icub_stand rigid": lambda: icub_stand("rigid"),
    "humanoid lying compliant": lambda: humanoid_lying("compliant"),
    "humanoid lying rigid": lambda: humanoid_lying("rigid"),
    "self-collision compliant": lambda: self_collision("compliant"),
    "self-collision rigid": lambda: self_collision("rigid"),
}


def main() -> int:
    for name, run in SCENARIOS.items():
        print(f"{name:34s} {run()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
