"""The two shipped world files run headless under their controller (test/core/test_world.py
asserts on these runs, docs/world.md quotes them through test/helpers/docs_rows.py). Each run
returns its measured figures; runs are deterministic, so they are cached per process."""

from __future__ import annotations

import functools

import numpy as np

import wb_sim
from wb_sim.paths import share_dir
from wb_sim.world import controller_loop, load_world

WORLDS = share_dir() / "config" / "worlds"
G = 9.81


def run(sim, loop, seconds: float, watch=None) -> np.ndarray:
    """Steps ``seconds`` under ``loop`` (a ControllerLoop); the configurations (n + 1, nq);
    ``watch(sim)`` after each step."""
    n = int(round(seconds / sim.dt))
    qs = np.empty((n + 1, sim.q.size))
    qs[0] = sim.q
    for k in range(n):
        sim.step(loop.torques())
        qs[k + 1] = sim.q
        if watch is not None:
            watch(sim)
    return qs


@functools.lru_cache(maxsize=None)
def humanoid_box() -> dict:
    """config/worlds/humanoid_box.yaml for 2 s, and its robot without the box for 0.5 s: the
    box's x, x velocity and the base's x, z per step; where friction alone would stop it."""
    params, info = load_world(WORLDS / "humanoid_box.yaml")
    sim = wb_sim.Simulator.from_params(params)
    rows = {"vx": [], "x": [], "base_x": [], "base_z": []}

    def watch(s):
        rows["vx"].append(s.object_twist("box")[0][0])
        rows["x"].append(s.object_pose("box").translation[0])
        rows["base_x"].append(s.q[0])
        rows["base_z"].append(s.q[2])
    x0 = float(sim.object_pose("box").translation[0])
    v0 = float(sim.object_twist("box")[0][0])
    mu = sim.config.contact.friction_coefficient
    qs = run(sim, controller_loop(sim, info), 2.0, watch)
    alone = wb_sim.Simulator.from_params({k: v for k, v in params.items()
                                          if not k.startswith("objects.")})
    x_alone = run(alone, controller_loop(alone, info), 0.5)[1:, 0]
    out = {k: np.array(v) for k, v in rows.items()}
    pushed = out["base_x"][:x_alone.size] - x_alone
    return {**out, "info": info, "qs": qs, "x0": x0, "v0": v0, "mu": mu, "dt": sim.dt,
            # friction alone (deceleration mu g) would stop the box here
            "x_friction": x0 - v0 ** 2 / (2.0 * mu * G),
            "x_alone": x_alone, "pushed": float(pushed.min()),
            "pushed_t": float((int(pushed.argmin()) + 1) * sim.dt),
            "rebound_t": float((int(np.argmax(out["vx"] > 0.0)) + 1) * sim.dt)}


@functools.lru_cache(maxsize=None)
def playground() -> dict:
    """config/worlds/objects_playground.yaml for 2 s: each object's start and end centre
    and end speed, the base heights."""
    params, info = load_world(WORLDS / "objects_playground.yaml")
    sim = wb_sim.Simulator.from_params(params)
    start = {o.name: np.array(o.position) for o in sim.objects}
    qs = run(sim, controller_loop(sim, info), 2.0)
    end = {o.name: sim.object_pose(o.name).translation.copy() for o in sim.objects}
    speed = {o.name: float(np.linalg.norm(sim.object_twist(o.name)[0])) for o in sim.objects}
    return {"start": start, "end": end, "speed": speed, "qs": qs,
            "has_terrain": sim.terrain is not None}
