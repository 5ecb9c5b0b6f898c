"""``wb_sim_robot URDF|XACRO [--srdf FILE] [-o my_robot.yaml]``: your own robot's
configuration, guessed from its model (``python -m wb_sim.tools.robot_setup``).

It reads the URDF (a path, ``example-robot-data:<path under robots/>`` or
``icub-models:<model>``, as ``urdf_path`` takes) and its SRDF (``--srdf``; else the
``srdf/<name>.srdf`` beside the URDF's folder, as example-robot-data ships them), and
writes a ``wb_sim: ros__parameters:`` file that ``Simulator.from_yaml`` and
``wb_sim_run --robot FILE.yaml`` load as it is. The rules, each printed with what it found:

* **pose**: the SRDF's ``group_state`` named ``standing`` (then ``half_sitting``, ``stand``,
  ``home``, ``ready``, then any name with "stand" or "home"), else the neutral pose (0; a
  joint whose range excludes 0 starts 0.05 rad inside it); every SRDF group state becomes a
  named pose (``poses.*``, a floating base's with its own base height).
* **feet**: the URDF collision geometry at that pose, with the base at the origin; each
  limb (the subtree of a joint hanging from the root link) whose lowest point is within
  ``--foot-tol`` (3 cm) of the robot's lowest point gets one contact surface, on the link
  holding that lowest point, named after it. A sphere becomes ``shape: sphere`` (on a frame
  of the link at its centre if the URDF has one; a mesh whose lowest 10 mm fit a sphere
  within 1 mm too), a box whose bottom face lies in the z = 0 plane of a frame of the link
  ``shape: box`` (size, offset), anything else (meshes, capsules, cylinders, several
  shapes, a box off every frame) ``shape: points``: 4 corners of the outline of its lowest
  face (the points within 3 mm of its lowest point).
* **floating or fixed**: floating when two limbs or more reach the ground and the root
  link itself is at least 5 cm above it (legs); fixed otherwise (an arm stands on its
  base link, or has one limb); ``--floating`` / ``--fixed`` override.
* **base height**: the lowest sole 1 mm above the ground (a floating base; a fixed base
  is mounted at the world origin and has no contact surfaces).
* **gains**: per joint, the reflected inertia at the pose ``I = 1 / (M^-1)_ii`` (what the
  joint drives with the other joints and the base free: the smallest it meets);
  ``kp = I w^2``, ``kd = 2 I w`` (critically damped), ``w = 2 pi f``, ``f = physics rate
  / 20`` (50 Hz at 1 kHz: one joint alone has ``kp dt^2 / I + 2 kd dt / I = 1.36``, the
  explicit PD diverges at 4). Joints are coupled through M: where the largest eigenvalue
  of ``M^-1 (kp dt^2 + 2 kd dt)`` (base free) exceeds 3, ``w`` is lowered for the joints of
  that mode (the most for those that move most in it) until it does not. Written as
  ``wb_sim_pd_controller`` ``kp`` / ``kd`` and as the node's drive gains ``command.kp`` /
  ``command.kd`` (the same law evaluated at every physics step).
* **effort limits**: the URDF's; a joint without one gets the largest the URDF gives any
  joint (or ``--default-effort``; 1000 N*m if it gives none), written as
  ``joints.effort_limit``.
  A pose whose gravity torque exceeds a limit is flagged (WARNING): it cannot be held.
* **IMU**: a floating base's, on the first frame named like "imu", else the root link;
  none on a fixed base, and none where the URDF names a joint and a link alike (the
  IMU's reduced model refuses such a model; said).
* **collision**: off (only the feet touch the ground, fast); ``--collision`` turns on the
  other links' collision with the ground (slower with meshes).
* ``--armature A``: motor reflected inertia on every joint (``joints.armature``), counted by
  the gains; ``--delay-steps N``: ``f`` divided by 1 + N, for a torque loop whose commands act
  N steps late (G1 needs both to stand one step late; the node's drives see no delay).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import textwrap
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from ..controllers import RATE_DIVISOR, STABILITY, derived_gains
from ..errors import ConfigError, ModelError, WbSimError
from ..robot import RobotModel, resolve_data_path, resolve_urdf_path

#: a joint whose neutral (0) or SRDF value is outside its limits starts this far inside, rad or m
LIMIT_MARGIN = 0.05
#: the SRDF group states tried as the standing pose, in this order
STANDING_NAMES = ("standing", "half_sitting", "stand", "home", "ready")
#: the lowest sole starts this far above the ground, m
CLEARANCE = 1e-3
#: a limb whose lowest point is within this of the robot's lowest is a foot, m
FOOT_TOL = 0.03
#: the points of a foot's lowest face: within this of its lowest point, m
FACE_TOL = 3e-3
#: at most this many points per foot of shape 'points'
MAX_FOOT_POINTS = 4
#: a mesh whose vertices are all within this of a sphere is that sphere, m
SPHERE_FIT = 1e-3
#: ... fitted to the part of it within this of its lowest point (the cap that touches), m
CAP_DEPTH = 0.01
#: ... and no larger than this (a flat sole fits a huge sphere), m
MAX_SPHERE = 0.1
#: the root link at least this far above the lowest point for legs, m
ROOT_CLEARANCE = 0.05


@dataclass
class Foot:
    name: str  #: the contact surface's name
    link: str
    params: dict  #: S.* keys (frame, shape, ...)
    lowest: float  #: world z of its lowest point at the pose with the base at the origin
    why: str


@dataclass
class Setup:
    """What the tool guessed, and why (``notes``: one line per rule)."""

    urdf_path: str
    floating: bool
    pose_name: str
    joint_names: list
    joint_positions: list
    base_position: list
    feet: list
    poses: dict
    kp: list
    kd: list
    inertia: list
    effort_limit: list | None
    mimic: bool
    imu_frame: str
    srdf: str
    rate: float
    collision: bool = False
    armature: float = 0.0
    notes: list = field(default_factory=list)


# ----------------------------------------------------------------------------
# SRDF
# ----------------------------------------------------------------------------


def find_srdf(urdf_file: Path) -> Path | None:
    """The SRDF example-robot-data ships beside a URDF: ``../srdf/<stem>.srdf``,
    ``<stem>.srdf`` next to it, or the ``../srdf/*.srdf`` whose name begins the URDF's
    (None if none)."""
    folder = urdf_file.parent.parent / "srdf"
    for cand in (folder / f"{urdf_file.stem}.srdf", urdf_file.with_suffix(".srdf")):
        if cand.is_file():
            return cand
    # the longest name that begins the URDF's (solo.srdf for solo12.urdf, ur5.srdf for ur5_robot)
    near = sorted((c for c in folder.glob("*.srdf") if urdf_file.stem.startswith(c.stem)),
                  key=lambda c: -len(c.stem)) if folder.is_dir() else []
    return near[0] if near else None


def srdf_group_states(path: Path) -> dict[str, dict[str, float]]:
    """{group state name: {joint: value}} of an SRDF (states of the same name merged)."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        raise ModelError(f"cannot read SRDF '{path}': {e}") from None
    states: dict[str, dict[str, float]] = {}
    for gs in root.iter("group_state"):
        joints = states.setdefault(gs.get("name", ""), {})
        for j in gs.iter("joint"):
            try:
                joints[j.get("name", "")] = float(j.get("value", "").split()[0])
            except (ValueError, IndexError):
                continue
    return {k: v for k, v in states.items() if k}


def standing_pose_name(states: dict) -> str | None:
    for name in STANDING_NAMES:
        if name in states:
            return name
    for name in states:
        if "stand" in name.lower() or "home" in name.lower():
            return name
    return None


# ----------------------------------------------------------------------------
# the model at the pose
# ----------------------------------------------------------------------------


def _into_limits(robot: RobotModel, x: np.ndarray) -> np.ndarray:
    """``x`` rounded to the micro-radian the YAML writes, inside the limits (a value
    outside goes LIMIT_MARGIN inside, or to the middle of a narrower range)."""
    lo, hi = robot.position_lower, robot.position_upper
    margin = np.minimum(LIMIT_MARGIN, (hi - lo) / 2)
    x = np.where(x < lo, lo + margin, np.where(x > hi, hi - margin, x))
    x = np.round(x, 6)
    return np.clip(x, np.ceil(lo * 1e6) / 1e6, np.floor(hi * 1e6) / 1e6)


def neutral_positions(robot: RobotModel) -> np.ndarray:
    """0 for every joint, moved into its limits where 0 is outside them."""
    return _into_limits(robot, np.zeros(robot.nj))


def pose_positions(robot: RobotModel, values: dict[str, float]) -> np.ndarray:
    """Joint positions: the neutral ones with ``values`` (joints the model lacks, such as
    an SRDF's fixed or mimic joints, ignored), inside the limits."""
    x = neutral_positions(robot)
    for name, v in values.items():
        if name in robot.joint_names:
            x[robot.joint_names.index(name)] = v
    return _into_limits(robot, x)


def _limbs(model: pin.Model, root_joint: int) -> dict[int, int]:
    """{joint: the limb it belongs to}: the limb of a joint is its ancestor whose parent
    is ``root_joint`` (the root link's own joint maps to itself)."""
    limb = {root_joint: root_joint}
    for j in range(root_joint + 1, model.njoints):
        p = model.parents[j]
        limb[j] = j if p == root_joint else limb.get(p, root_joint)
    return limb


def _bottom_points(geom, link: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(points (k, 3) in the geometry's frame, their radius (k,) or None): a sphere's
    centre with its radius, a capsule's axis every 5 mm with its radius, a box's corners,
    a cylinder's rims (64 points each), a mesh's vertices. (wb_sim.contact has its own
    for the contact points, private to the contact wing.)"""
    import coal
    if isinstance(geom, coal.Sphere):
        return np.zeros((1, 3)), np.array([float(geom.radius)])
    if isinstance(geom, coal.Capsule):
        hl = float(geom.halfLength)
        z = np.linspace(-hl, hl, max(2, int(math.ceil(2 * hl / 0.005)) + 1))
        return np.column_stack([0 * z, 0 * z, z]), np.full(len(z), float(geom.radius))
    if isinstance(geom, coal.Box):
        h = np.asarray(geom.halfSide, dtype=float)
        return np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1)
                         for sz in (-1, 1)]) * h, None
    if isinstance(geom, coal.Cylinder):
        r, hl = float(geom.radius), float(geom.halfLength)
        a = 2 * math.pi * np.arange(64) / 64
        rim = np.column_stack([r * np.cos(a), r * np.sin(a)])
        return np.vstack([np.column_stack([rim, np.full(64, z)]) for z in (-hl, hl)]), None
    if hasattr(geom, "vertices") and hasattr(geom, "num_vertices"):  # meshes (BVH)
        return np.asarray(geom.vertices(), dtype=float), None
    if hasattr(geom, "points") and hasattr(geom, "num_points"):  # convex
        return np.asarray(geom.points(), dtype=float), None
    raise ModelError(f"link '{link}': collision geometry of kind {type(geom).__name__} is not "
                     f"supported by wb_sim_robot (spheres, capsules, boxes, cylinders, meshes)")


def _spread(P: np.ndarray, k: int) -> np.ndarray:
    """Indices of k of the points P (n, 2 or 3), spread: the one farthest from their
    centroid first, then each time the one farthest from those taken (all if n <= k)."""
    if len(P) <= k:
        return np.arange(len(P))
    taken = [int(np.argmax(np.linalg.norm(P - P.mean(axis=0), axis=1)))]
    d = np.linalg.norm(P - P[taken[0]], axis=1)
    while len(taken) < k:
        i = int(np.argmax(d))
        taken.append(i)
        d = np.minimum(d, np.linalg.norm(P - P[i], axis=1))
    return np.array(taken)


def _fit_sphere(P: np.ndarray) -> tuple[np.ndarray, float] | None:
    """(centre, radius) of the sphere through the points P (n, 3) if every point is within
    SPHERE_FIT of it, else None (least squares on |p|^2 = 2 c.p + r^2 - |c|^2)."""
    P = np.unique(np.asarray(P, dtype=float), axis=0)
    if len(P) < 10:
        return None
    A = np.column_stack([2 * P, np.ones(len(P))])
    sol, *_ = np.linalg.lstsq(A, (P * P).sum(axis=1), rcond=None)
    c = sol[:3]
    r2 = sol[3] + c @ c
    if r2 <= 0:
        return None
    r = math.sqrt(r2)
    if r > MAX_SPHERE or np.abs(np.linalg.norm(P - c, axis=1) - r).max() > SPHERE_FIT:
        return None
    return c, r


def _unique(model: pin.Model, name: str) -> bool:
    """Whether one frame only has this name (wb_sim names frames by name alone: a joint
    and a link of the same name are ambiguous to it)."""
    return sum(f.name == name for f in model.frames) == 1


def _frames_on_joint(model: pin.Model, joint: int) -> list:
    """The frames on ``joint`` that a name alone designates, links (BODY frames) first."""
    frames = [f for f in model.frames if f.parentJoint == joint and f.name != "universe"
              and _unique(model, f.name)]
    return sorted(frames, key=lambda f: f.type != pin.FrameType.BODY)


def _link_frame(model: pin.Model, link: str, joint: int):
    """The frame a surface of ``link`` is written in: the link's own if its name is unique,
    else the first frame on its joint that is (a link named like a joint)."""
    if _unique(model, link):
        return model.frames[model.getFrameId(link)]
    frames = _frames_on_joint(model, joint)
    if not frames:
        raise ModelError(f"link '{link}': its name is also another frame's, and no frame on its "
                         f"joint has a name of its own: name the contact surface's frame by hand")
    return frames[0]


def _foot_surface(model, data, link: str, joint: int, geoms: list, name: str) -> tuple[dict, str]:
    """The S.* keys of the contact surface of ``link``'s collision ``geoms`` (all on
    joint ``joint``), and why that shape."""
    import coal
    oMj = data.oMi[joint]
    body = _link_frame(model, link, joint)
    jMb = body.placement
    ref = body.name  # the frame the surface is written in
    # one sphere: the sphere itself
    if len(geoms) == 1 and isinstance(geoms[0].geometry, coal.Sphere):
        g = geoms[0]
        r = float(g.geometry.radius)
        c = g.placement.translation
        for f in _frames_on_joint(model, joint):
            if np.linalg.norm(f.placement.translation - c) < 1e-4:
                return ({"frame": f.name, "shape": "sphere", "radius": r, "center": [0.0, 0.0, 0.0]},
                        f"a sphere of radius {r * 1e3:.1f} mm, frame {f.name} at its centre")
        center = jMb.actInv(c)
        return ({"frame": ref, "shape": "sphere", "radius": r, "center": list(center)},
                f"a sphere of radius {r * 1e3:.1f} mm, centre {np.round(center, 4).tolist()} in {ref}")
    # one mesh that is a sphere (its hull's vertices fit one within SPHERE_FIT): that sphere
    if len(geoms) == 1 and not isinstance(geoms[0].geometry, (coal.Box, coal.Capsule, coal.Cylinder)):
        g = geoms[0]
        P = _bottom_points(g.geometry, link)[0]
        oMg = oMj * g.placement
        z = P @ oMg.rotation[2] + oMg.translation[2]
        fit = _fit_sphere(P[z <= z.min() + CAP_DEPTH])  # the cap that meets the ground
        if fit is not None:
            c, r = fit
            center = jMb.actInv(g.placement.act(c))
            return ({"frame": ref, "shape": "sphere", "radius": r, "center": list(center)},
                    f"a mesh whose lowest {CAP_DEPTH * 1e3:g} mm are a sphere of radius "
                    f"{r * 1e3:.1f} mm (within {SPHERE_FIT * 1e3:g} mm), centre {np.round(center, 4).tolist()} in {ref}")
    # one box whose bottom face lies in a frame's z = 0 plane, axes aligned: a box
    if len(geoms) == 1 and isinstance(geoms[0].geometry, coal.Box):
        g = geoms[0]
        h = np.asarray(g.geometry.halfSide, dtype=float)
        for f in _frames_on_joint(model, joint):
            fMg = f.placement.actInv(g.placement)
            R, t = fMg.rotation, fMg.translation
            A = np.abs(R)
            if not np.allclose(A, np.round(A), atol=1e-6):
                continue
            ext = A @ h  # half sizes along the frame's axes
            if abs(t[2] - ext[2]) < 1e-4 and (oMj * f.placement).rotation[2, 2] > 0.999:
                size = [2 * ext[0], 2 * ext[1]]
                return ({"frame": f.name, "shape": "box", "size": size, "offset": [t[0], t[1]]},
                        f"a box {size[0] * 1e3:.0f} x {size[1] * 1e3:.0f} mm whose bottom face "
                        f"is the z = 0 plane of frame {f.name}")
    # anything else: the polygon of the lowest face, as points in the link frame
    world = []
    for g in geoms:
        P, radius = _bottom_points(g.geometry, link)
        oMg = oMj * g.placement
        W = P @ oMg.rotation.T + oMg.translation
        if radius is not None:
            W = W - np.outer(radius, [0.0, 0.0, 1.0])
        world.append(W)
    W = np.vstack(world)
    zmin = W[:, 2].min()
    low = W[W[:, 2] <= zmin + FACE_TOL]
    outline = low
    if len(low) >= 3:
        from scipy.spatial import ConvexHull, QhullError
        try:
            outline = low[ConvexHull(low[:, :2]).vertices]
        except (QhullError, ValueError):
            outline = low
    outline = outline[np.sort(_spread(outline[:, :2], MAX_FOOT_POINTS))]
    outline = outline.copy()
    outline[:, 2] = zmin  # one plane: the sole
    oMb = oMj * jMb
    local = (outline - oMb.translation) @ oMb.rotation
    kinds = sorted({type(g.geometry).__name__ for g in geoms})
    span = np.ptp(outline[:, :2], axis=0) if len(outline) > 1 else np.zeros(2)
    return ({"frame": ref, "shape": "points", "points": local.ravel().tolist()},
            f"{len(outline)} points outlining the lowest face ({span[0] * 1e3:.0f} x "
            f"{span[1] * 1e3:.0f} mm) of its {'/'.join(kinds)} collision geometry")


def _surface_lowest(model, data, params: dict) -> float:
    """World z of a surface's lowest point at the current kinematics (data)."""
    oMf = pin.updateFramePlacement(model, data, model.getFrameId(params["frame"]))
    if params["shape"] == "sphere":
        return float(oMf.act(np.asarray(params["center"]))[2] - params["radius"])
    if params["shape"] == "box":
        (lx, ly), (ox, oy) = params["size"], params["offset"]
        P = np.array([[ox + sx * lx / 2, oy + sy * ly / 2, 0.0] for sx in (-1, 1) for sy in (-1, 1)])
    else:
        P = np.asarray(params["points"]).reshape(-1, 3)
    return float((P @ oMf.rotation.T + oMf.translation)[:, 2].min())


def _surface_name(link: str, taken: set) -> str:
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in link.lower()) or "foot"
    if not base[0].isalpha():
        base = "s_" + base
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def analyse(urdf: str, srdf: str | None = None, *, floating: bool | None = None,
            rate: float = 1000.0, foot_tol: float = FOOT_TOL, min_kp: float = 0.0,
            default_effort: float | None = None, armature: float = 0.0,
            xacro_args: dict | None = None, stability: float | None = None,
            divisor: float | None = None, collision: bool = False,
            delay_steps: int = 0) -> Setup:
    """Guess a configuration for the robot of ``urdf`` (a path or ``scheme:name``)."""
    with warnings.catch_warnings():  # the mimic joints: the notes say it once
        warnings.filterwarnings("ignore", message=".*mimics.*", category=UserWarning)
        return _analyse(urdf, srdf, floating=floating, rate=rate, foot_tol=foot_tol,
                        min_kp=min_kp, default_effort=default_effort, armature=armature,
                        xacro_args=xacro_args, stability=stability, divisor=divisor,
                        collision=collision, delay_steps=delay_steps)


def _analyse(urdf, srdf, *, floating, rate, foot_tol, min_kp, default_effort, armature,
             xacro_args, stability, divisor, collision, delay_steps) -> Setup:
    notes = []
    path = resolve_urdf_path(urdf)
    text = path.read_text() if path.suffix != ".xacro" else ""
    mimic = "<mimic" in text
    mimic_mode = "independent" if mimic else "refuse"
    try:
        robot = RobotModel.from_urdf(urdf_path=urdf, floating_base=True, mimic=mimic_mode,
                                     xacro_args=xacro_args)
    except ModelError as e:
        if "mimic" not in str(e) or mimic:
            raise
        robot = RobotModel.from_urdf(urdf_path=urdf, floating_base=True, mimic="independent",
                                     xacro_args=xacro_args)
        mimic = True
    if mimic:
        notes.append("mimic joints: simulated as independent joints (joints.mimic: independent; "
                     "the coupling is not enforced)")
    model = robot.model
    data = model.createData()

    # --- the SRDF and the pose
    srdf_path = None
    if srdf:
        srdf_path = resolve_data_path(srdf, "--srdf", "SRDF")
    elif path.suffix == ".urdf":
        srdf_path = find_srdf(path)
    states = srdf_group_states(srdf_path) if srdf_path else {}
    pose_name = standing_pose_name(states)
    if pose_name:
        positions = pose_positions(robot, states[pose_name])
        notes.append(f"pose: the SRDF's group state '{pose_name}' ({srdf_path.name})")
    else:
        positions = neutral_positions(robot)
        clipped = [n for n, x in zip(robot.joint_names, positions) if x != 0.0]
        notes.append("pose: the neutral pose (no SRDF standing pose"
                     + (f" in {srdf_path.name}" if srdf_path else ", no SRDF") + ")"
                     + (f"; 0 is outside the limits of {', '.join(clipped)}: "
                        f"{LIMIT_MARGIN:g} inside them" if clipped else ""))
    q = pin.neutral(model)
    robot.set_joint_positions(q, positions)
    pin.forwardKinematics(model, data, q)
    pin.updateFramePlacements(model, data)

    # --- the collision geometry at the pose: the lowest point of each link
    gmodel = robot.geometry_model("collision")
    by_link: dict[str, list] = {}
    for g in gmodel.geometryObjects:
        by_link.setdefault(model.frames[g.parentFrame].name, []).append(g)
    if not by_link and floating is not False:
        raise ModelError(f"'{path}': no <collision> geometry: no feet to find (give --fixed "
                         f"for an arm, or write the contact surfaces by hand)")
    lowest: dict[str, float] = {}
    joint_of: dict[str, int] = {}
    for link, geoms in by_link.items():
        zs = []
        for g in geoms:
            P, radius = _bottom_points(g.geometry, link)
            oMg = data.oMi[g.parentJoint] * g.placement
            z = P @ oMg.rotation[2] + oMg.translation[2]
            zs.append(float((z - (radius if radius is not None else 0.0)).min()))
        lowest[link], joint_of[link] = min(zs), geoms[0].parentJoint
    zmin = min(lowest.values(), default=0.0)
    limb = _limbs(model, 1)
    limb_low: dict[int, tuple[float, str]] = {}
    for link, z in lowest.items():
        k = limb[joint_of[link]]
        if k not in limb_low or z < limb_low[k][0]:
            limb_low[k] = (z, link)
    ground_limbs = {k: v for k, v in limb_low.items() if k != 1 and v[0] <= zmin + foot_tol}
    root_low = limb_low.get(1, (math.inf, ""))[0]

    # --- floating or fixed
    legs = len(ground_limbs) >= 2 and root_low > zmin + ROOT_CLEARANCE
    if floating is None:
        floating = legs
        if legs:
            above = (f"is {(root_low - zmin) * 100:.0f} cm above it" if math.isfinite(root_low)
                     else "has no collision geometry")
            notes.append(f"floating base: {len(ground_limbs)} limbs reach the ground and the root "
                         f"link '{robot.root_link}' {above} (legs; --fixed overrides)")
        else:
            why = ({0: "no limb below the root link reaches the ground",
                    1: "one limb reaches the ground"}[len(ground_limbs)] if len(ground_limbs) < 2
                   else f"the root link '{robot.root_link}' is at the ground")
            notes.append(f"fixed base: {why} (an arm on its base; --floating overrides)")
    else:
        notes.append(f"{'floating' if floating else 'fixed'} base: as asked")

    # --- feet (a floating base only: a fixed one stands on its mount)
    feet: list[Foot] = []
    base_position = [0.0, 0.0, 0.0]
    if floating:
        taken: set = set()
        for k, (z, link) in sorted(ground_limbs.items(), key=lambda kv: kv[0]):
            params, why = _foot_surface(model, data, link, joint_of[link], by_link[link], "")
            name = _surface_name(link, taken)
            taken.add(name)
            feet.append(Foot(name, link, params, _surface_lowest(model, data, params),
                             f"lowest point of limb '{model.names[k]}' "
                             f"({(z - zmin) * 1e3:.1f} mm above the robot's lowest): {why}"))
        if not feet:
            raise ModelError(f"'{path}': no limb reaches below the root link at the pose: no "
                             f"feet found (give --fixed for an arm)")
        sole = min(f.lowest for f in feet)
        base_position = [0.0, 0.0, math.ceil((CLEARANCE - sole) * 1e6) / 1e6]
        notes.append(f"base height {base_position[2]:.6f} m: the lowest sole "
                     f"{CLEARANCE * 1e3:g} mm above the ground")
        uneven = [f"{f.name} +{(f.lowest - sole) * 1e3:.1f} mm" for f in feet
                  if f.lowest - sole > 1e-3]
        if uneven:
            notes.append(f"feet not level at the pose: {', '.join(uneven)} (the robot settles)")

    # --- gains from the reflected inertia at the pose
    gm = robot if floating else RobotModel.from_urdf(urdf_path=urdf, floating_base=False,
                                                     mimic=mimic_mode if not mimic else "independent",
                                                     xacro_args=xacro_args)
    gmodel_ = gm.model
    gq = pin.neutral(gmodel_)
    gm.set_joint_positions(gq, positions)
    M = pin.crba(gmodel_, gmodel_.createData(), gq)
    M = np.triu(M) + np.triu(M, 1).T
    M[np.diag_indices_from(M)] += np.r_[np.zeros(gmodel_.nv - gm.nj), np.full(gm.nj, armature)]
    stability = STABILITY if stability is None else stability
    divisor = RATE_DIVISOR * (1 + delay_steps) if divisor is None else divisor
    # the coupled explicit PD is stable while M^-1 (kp dt^2 + 2 kd dt) has its largest
    # eigenvalue below 4: kept below STABILITY (a quarter of room for the contact)
    gains = derived_gains(M, gm.idx_v, rate, divisor=divisor, stability=stability, min_kp=min_kp)
    inertia, w, w0, lam, kp, kd = (gains.inertia, gains.w, gains.w0, gains.load, gains.kp,
                                   gains.kd)
    lowered = [n for n, x in zip(gm.joint_names, w) if x < 0.99 * w0]
    if armature > 0:
        notes.append(f"armature {armature:g} kg*m^2 on every joint (--armature): joints.armature, "
                     f"in the gains' inertia too")
    notes.append(f"gains: kp = I w^2, kd = 2 I w (critically damped), I = 1 / (M^-1)_ii at the pose "
                 f"(the joint's reflected inertia, the rest free, {inertia.min():.3g} to "
                 f"{inertia.max():.3g} kg*m^2), w = 2 pi x {rate / divisor:g} Hz (the physics "
                 f"rate / {divisor:g}"
                 + (f": 20 x (1 + {delay_steps} steps of command delay)" if delay_steps else "")
                 + "), lowered where the coupled joints need it: the largest "
                 f"eigenvalue of M^-1 (kp dt^2 + 2 kd dt), base free, kept <= {STABILITY:g} (the "
                 f"explicit PD diverges at 4; it is {lam:.2f})"
                 + (f"; lowered for {len(lowered)} joints, down to "
                    f"{w.min() / 2 / math.pi:.3g} Hz ({gm.joint_names[int(np.argmin(w))]})"
                    if lowered else "")
                 + (f"; kp floored at {min_kp:g}" if min_kp > 0 else ""))

    # --- effort limits
    eff = np.array(robot.effort_limit, dtype=float)
    effort_limit = None
    missing = [n for n, e in zip(robot.joint_names, eff) if not np.isfinite(e)]
    if missing:
        given = eff[np.isfinite(eff)]
        fill = default_effort if default_effort is not None else (
            float(given.max()) if len(given) else 1000.0)
        eff[~np.isfinite(eff)] = fill
        effort_limit = eff.tolist()
        notes.append(f"effort limits: none in the URDF for {', '.join(missing)}: {fill:g} N*m "
                     f"({'--default-effort' if default_effort is not None else 'the largest the URDF gives' if len(given) else 'a default'})")
    else:
        notes.append("effort limits: the URDF's")
    # a pose gravity alone pulls harder than a limit allows cannot be held (a fixed base: the
    # whole load; a floating one: the subtree's weight, the feet's share comes on top)
    g = pin.computeGeneralizedGravity(gmodel_, gmodel_.createData(), gq)[gm.idx_v]
    over = [f"{n} {abs(x):.0f} > {e:g} N*m" for n, x, e in zip(gm.joint_names, g, eff)
            if abs(x) > e]
    if over:
        notes.append(f"WARNING: gravity at the pose needs more than the effort limit of "
                     f"{', '.join(over)}: the pose cannot be held (give an SRDF with another "
                     f"pose, or edit initial.*)")

    # --- named poses: the SRDF's group states
    poses = {}
    for name, values in states.items():
        x = pose_positions(robot, values)
        entry = {"joint_names": list(robot.joint_names), "joint_positions": x.tolist()}
        if floating:
            qp = pin.neutral(model)
            robot.set_joint_positions(qp, x)
            pin.forwardKinematics(model, data, qp)
            low = min(_surface_lowest(model, data, f.params) for f in feet)
            entry["base_position"] = [0.0, 0.0, math.ceil((CLEARANCE - low) * 1e6) / 1e6]
        poses[_surface_name(name, set(poses))] = entry
    if poses:
        notes.append(f"named poses from the SRDF: {', '.join(poses)}"
                     + (" (each with its soles 1 mm above the ground)" if floating else ""))

    imu = next((f.name for f in model.frames if "imu" in f.name.lower() and _unique(model, f.name)),
               robot.root_link)
    shared = sorted({f.name for f in model.frames if not _unique(model, f.name)})
    if not floating:
        imu = ""  # as config/panda.yaml: an arm's base does not move
        notes.append("no IMU (a fixed base; imu.frame adds one)")
    elif shared:
        # the IMU reads its chain through pinocchio's buildReducedModel, which refuses a model
        # with two frames of one name (wb_sim/sensors.py): no IMU rather than a failing file
        notes.append(f"no IMU: the URDF gives a joint and a link the same name ({', '.join(shared[:3])}"
                     f"{', ...' if len(shared) > 3 else ''}), which the IMU's reduced model "
                     f"refuses; imu.frame: {imu} once it does not")
        imu = ""
    else:
        notes.append(f"IMU on {imu}" + (" (a frame named imu)" if "imu" in imu.lower()
                                        else " (the root link: no frame named imu)"))
    urdf_out = urdf if ":" in urdf and len(urdf.partition(":")[0]) > 1 else str(path.resolve())
    return Setup(urdf_path=urdf_out, floating=floating, pose_name=pose_name or "neutral",
                 joint_names=list(robot.joint_names), joint_positions=positions.tolist(),
                 base_position=base_position, feet=feet, poses=poses, kp=kp.tolist(),
                 kd=kd.tolist(), inertia=inertia.tolist(), effort_limit=effort_limit,
                 mimic=mimic, imu_frame=imu, srdf=str(srdf_path) if srdf_path else "",
                 rate=rate, collision=collision and floating, armature=armature, notes=notes)


# ----------------------------------------------------------------------------
# the YAML
# ----------------------------------------------------------------------------


def _num(x: float) -> str:
    x = float(x)
    if x == 0.0:
        return "0.0"
    s = f"{x:.6g}" if abs(x) >= 1e-3 else f"{x:.4e}"
    return s if any(c in s for c in ".e") else s + ".0"


def _pos(x: float) -> str:
    """A position: at most 6 decimals, exactly as computed (the values were rounded so)."""
    s = f"{float(x):.6f}".rstrip("0")
    return s + "0" if s.endswith(".") else s


def _list(xs, fmt=_num) -> str:
    return "[" + ", ".join(fmt(x) for x in xs) + "]"


def _names(xs) -> str:
    return "[" + ", ".join(str(x) for x in xs) + "]"


def render_yaml(s: Setup, output: Path | None = None, source: str = "") -> str:
    """The configuration file's text: a comment header with the notes, the
    ``wb_sim`` block and the ``wb_sim_pd_controller`` block."""
    urdf = s.urdf_path
    if output is not None and Path(urdf).is_absolute():
        try:
            urdf = os.path.relpath(urdf, Path(output).resolve().parent)
        except ValueError:  # another drive
            pass
    lines = [f"# Generated by wb_sim_robot from {source or s.urdf_path}: what it guessed and why.",
             "# Check it, then edit freely; rerun the tool to start over.", "#"]
    said = s.notes + [f"foot {f.name} on {f.link}: {f.why}" for f in s.feet]
    for n in said:
        lines += textwrap.wrap(n, 98, initial_indent="# - ", subsequent_indent="#   ",
                               break_on_hyphens=False)
    lines += ["wb_sim:", "  ros__parameters:",
              f"    urdf_path: {urdf}",
              f"    floating_base: {'true' if s.floating else 'false'}",
              f"    physics_rate_hz: {_num(s.rate)}"]
    if s.floating:
        lines += ["    collision:",
                  f"      enabled: {'true' if s.collision else 'false'}"
                  + ("                       # the other links meet the ground too" if s.collision else
                     "                      # true: the other links meet the ground too (slower)")]
        lines.append(f"    contact_surfaces: {_names(f.name for f in s.feet)}")
        for f in s.feet:
            lines.append(f"    {f.name}:")
            for k, v in f.params.items():
                if isinstance(v, str):
                    lines.append(f"      {k}: {v}")
                elif isinstance(v, list):
                    lines.append(f"      {k}: {_list(v)}")
                else:
                    lines.append(f"      {k}: {_num(v)}")
    lines += ["    initial:",
              f"      # pose '{s.pose_name}'" + ("; the lowest sole 1 mm above the ground" if s.floating else ""),
              f"      joint_names: {_names(s.joint_names)}",
              f"      joint_positions: {_list(s.joint_positions, _pos)}",
              f"      base_position: {_list(s.base_position, _pos)}",
              "      base_rpy: [0.0, 0.0, 0.0]"]
    if s.poses:
        lines.append(f"    poses: {_names(s.poses)}")
        for name, p in s.poses.items():
            lines.append(f"    poses.{name}.joint_names: {_names(p['joint_names'])}")
            lines.append(f"    poses.{name}.joint_positions: {_list(p['joint_positions'], _pos)}")
            if "base_position" in p:
                lines.append(f"    poses.{name}.base_position: {_list(p['base_position'], _pos)}")
    if s.imu_frame:
        lines += ["    imu:", f"      frame: {s.imu_frame}"]
    lines += ["    joints:", "      position_limits: true", "      effort_limits: true",
              "      urdf_dynamics: true"]
    if s.mimic:
        lines.append("      mimic: independent")
    if s.armature > 0:
        lines.append(f"      armature: [{_num(s.armature)}]              # kg*m^2, --armature (the gains count it)")
    if s.effort_limit is not None:
        lines.append(f"      effort_limit: {_list(s.effort_limit)}   # N*m, see the header")
    lines += ["    command:                              # the node's drives (joint_commands positions)",
              f"      kp: {_list(s.kp)}",
              f"      kd: {_list(s.kd)}",
              "",
              "# The example PD + gravity-compensation controller, one gain per joint in wb_sim's order:",
              f"# {', '.join(s.joint_names)}",
              "wb_sim_pd_controller:", "  ros__parameters:",
              f"    kp: {_list(s.kp)}   # N*m/rad",
              f"    kd: {_list(s.kd)}   # N*m*s/rad", ""]
    return "\n".join(lines)


def report(s: Setup) -> str:
    out = [f"wb_sim_robot: {s.urdf_path}: {len(s.joint_names)} joints, "
           f"{'floating' if s.floating else 'fixed'} base"]
    out += ["  " + n for n in s.notes]
    for f in s.feet:
        out.append(f"  foot {f.name} on {f.link}: {f.why}")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="wb_sim_robot", description=__doc__.split("\n\n")[0])
    parser.add_argument("urdf", help="URDF or .xacro file, example-robot-data:<path under robots/> "
                                     "or icub-models:<model>")
    parser.add_argument("--srdf", help="SRDF with the named poses (default: srdf/<name>.srdf "
                                       "beside the URDF's folder, if any)")
    parser.add_argument("-o", "--output", metavar="FILE.yaml", help="write here (default: stdout)")
    base = parser.add_mutually_exclusive_group()
    base.add_argument("--floating", dest="floating", action="store_true", default=None,
                      help="a floating base, whatever the structure says")
    base.add_argument("--fixed", dest="floating", action="store_false",
                      help="a fixed base, whatever the structure says")
    parser.add_argument("--rate", type=float, default=1000.0, help="physics rate, Hz (default 1000)")
    parser.add_argument("--foot-tol", type=float, default=FOOT_TOL,
                        help=f"a limb this close to the lowest point is a foot, m (default {FOOT_TOL})")
    parser.add_argument("--min-kp", type=float, default=0.0, help="floor of kp, N*m/rad (default 0)")
    parser.add_argument("--default-effort", type=float,
                        help="effort limit of joints the URDF gives none (default: its largest)")
    parser.add_argument("--armature", type=float, default=0.0,
                        help="motor reflected inertia of every joint, kg*m^2, written as "
                             "joints.armature and counted by the gains (default 0: none)")
    parser.add_argument("--delay-steps", type=int, default=0,
                        help="steps of command delay the torque loop must survive: the drives' "
                             "frequency is divided by 1 + N (default 0; the node's drives, "
                             "wb_sim_run's default, see no delay)")
    parser.add_argument("--collision", action="store_true",
                        help="the other links' collision geometry meets the ground too (slower)")
    parser.add_argument("--xacro-arg", action="append", default=[], metavar="NAME:=VALUE",
                        help="an argument of a .xacro file (repeatable)")
    args = parser.parse_args(argv)
    try:
        xargs = {}
        for a in args.xacro_arg:
            k, sep, v = a.partition(":=")
            if not sep:
                raise ConfigError(f"--xacro-arg {a!r}: expected NAME:=VALUE")
            xargs[k] = v
        s = analyse(args.urdf, args.srdf, floating=args.floating, rate=args.rate,
                    foot_tol=args.foot_tol, min_kp=args.min_kp,
                    default_effort=args.default_effort, xacro_args=xargs or None,
                    collision=args.collision, armature=args.armature,
                    delay_steps=args.delay_steps)
    except (WbSimError, OSError) as e:
        print(f"wb_sim_robot: {e}", file=sys.stderr)
        return 2
    text = render_yaml(s, Path(args.output) if args.output else None, source=args.urdf)
    if s.urdf_path.endswith(".xacro") and xargs:
        text = text.replace("    floating_base:", "    xacro.args: " + _names(
            f"{k}:={v}" for k, v in xargs.items()) + "\n    floating_base:", 1)
    print(report(s), file=sys.stderr)
    if args.output:
        Path(args.output).write_text(text)
        print(f"wb_sim_robot: wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
