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


#: the hands' collision spheres: radius (m) and centre in the forearm frames (the URDF's)
HAND_RADIUS, HAND_CENTRE = 0.04, np.array([0.0, 0.0, -0.22])


@functools.lru_cache(maxsize=None)
def pushes_box(model: str = "compliant", seconds: float = 5.5) -> dict:
    """config/worlds/humanoid_pushes_box.yaml under its keyframe controller (``model``: the
    world's contact law, or another one in its place), per step: the box's x, x velocity and
    pitch, the gap between its rear face and the nearer hand sphere (m; < 0: pressed), the
    base height, how far the soles moved on the floor since the start and how far they
    tilted (rad); and the box's free slide, after the hands let go."""
    params, info = load_world(WORLDS / "humanoid_pushes_box.yaml")
    params = {**params, "contact.model": model}
    sim = wb_sim.Simulator.from_params(params)
    half = 0.5 * sim.objects[0].size[0]
    soles = ("l_sole", "r_sole")
    start = [sim.frame_pose(f).translation[:2].copy() for f in soles]
    rows = {k: [] for k in ("t", "x", "vx", "pitch", "gap", "base_z", "feet", "tilt")}

    def watch(s):
        box = s.object_pose("box")
        hands = max(s.frame_pose(f).act(HAND_CENTRE)[0] for f in ("l_forearm", "r_forearm"))
        rows["t"].append(s.t)
        rows["x"].append(box.translation[0])
        rows["vx"].append(s.object_twist("box")[0][0])
        rows["pitch"].append(float(np.arccos(np.clip(box.rotation[2, 2], -1.0, 1.0))))
        rows["gap"].append(box.translation[0] - half - hands - HAND_RADIUS)
        rows["base_z"].append(s.q[2])
        poses = [s.frame_pose(f) for f in soles]
        rows["feet"].append(max(float(np.linalg.norm(p.translation[:2] - p0))
                                for p, p0 in zip(poses, start)))
        rows["tilt"].append(max(float(np.arccos(np.clip(p.rotation[2, 2], -1.0, 1.0)))
                                for p in poses))
    x0 = float(sim.object_pose("box").translation[0])
    z0 = float(sim.q[2])
    run(sim, controller_loop(sim, info), seconds, watch)
    out = {k: np.array(v) for k, v in rows.items()}
    # the free slide: from the step the hands are 1 mm off the box (after its fastest step)
    # while it still moves faster than 0.03 m/s
    peak = int(out["vx"].argmax())
    off = peak + int(np.argmax(out["gap"][peak:] > 1e-3))
    end = off + int(np.argmax(out["vx"][off:] < 0.03))
    t, v = out["t"][off:end], out["vx"][off:end]
    decel = -float(np.polyfit(t, v, 1)[0]) if t.size > 2 else float("nan")
    mu = sim.config.contact.friction_coefficient
    return {**out, "info": info, "x0": x0, "z0": z0, "mu": mu, "g": G,
            "moved": float(out["x"][-1] - x0), "peak_v": float(out["vx"][peak]),
            "peak_t": float(out["t"][peak]),
            "release_t": float(out["t"][off]), "release_v": float(out["vx"][off]),
            "slide_steps": int(end - off), "slide": float(out["x"][end] - out["x"][off]),
            "decel": decel, "final_v": float(out["vx"][-1])}
