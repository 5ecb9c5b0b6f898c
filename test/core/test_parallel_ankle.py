"""A leg with a parallel ankle (issue 29): a foot standing on the ground, a shank on a passive
pitch + roll ankle, and two rods, each driven by an actuated crank on the shank and fastened
to the foot by a point closure (a ball joint), so that the ankle is driven only through the
rods. Held by a PD on the two cranks, the foot's contact wrench carries the whole weight; the
same leg as MJCF (<equality><connect>) gives the same trajectory."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import fsolve

from wb_sim import Simulator
from wb_sim.loop_closures import PassiveJointsWarning

G = 9.81
M_FOOT, M_SHANK, M_CRANK, M_ROD = 1.0, 3.0, 0.1, 0.1   # kg
MASS = M_FOOT + M_SHANK + 2 * M_CRANK + 2 * M_ROD
H_ANKLE = 0.08       # the ankle's height above the sole, m
SHANK = 0.4          # shank length (its centre of mass half way), m
Z_CRANK = 0.3        # the cranks' pivots above the ankle, m
X_ARM, Y_ARM = 0.06, 0.04   # crank length (along x) and the rods' lateral offsets (+-y), m
Z_ANCHOR = 0.05      # the rods' ball joints on the foot, above the sole, m
ROD = Z_CRANK + H_ANKLE - Z_ANCHOR   # vertical at the start (all joints at zero), m
SIDES = ("l", "r")
PASSIVE = ["ankle_roll", "ankle_pitch", "rod_l_x", "rod_l_y", "rod_r_x", "rod_r_y"]
CRANKS = ["crank_l", "crank_r"]
#: the foot's corners, m (sole frame = foot frame)
POINTS = [0.12, 0.06, 0.0, 0.12, -0.06, 0.0, -0.08, 0.06, 0.0, -0.08, -0.06, 0.0]


def _y(side):
    return Y_ARM if side == "l" else -Y_ARM


def _urdf() -> str:
    def link(name, m, com, ixx, iyy, izz):
        return (f'<link name="{name}"><inertial><origin xyz="{com[0]} {com[1]} {com[2]}"/>'
                f'<mass value="{m}"/><inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{iyy}" iyz="0" '
                f'izz="{izz}"/></inertial></link>')

    def joint(name, parent, child, xyz, axis):
        return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/>'
                f'<child link="{child}"/><origin xyz="{xyz[0]} {xyz[1]} {xyz[2]}"/>'
                f'<axis xyz="{axis}"/><limit lower="-3" upper="3" effort="100" '
                f'velocity="100"/></joint>')

    i_shank = M_SHANK * SHANK**2 / 12
    i_rod = M_ROD * ROD**2 / 12
    parts = [link("foot", M_FOOT, (0.02, 0, 0.02), 0.002, 0.004, 0.005),
             '<link name="cross"/>',
             link("shank", M_SHANK, (0, 0, SHANK / 2), i_shank, i_shank, 0.003),
             joint("ankle_roll", "foot", "cross", (0, 0, H_ANKLE), "1 0 0"),
             joint("ankle_pitch", "cross", "shank", (0, 0, 0), "0 1 0")]
    for s in SIDES:
        parts += [link(f"crank_{s}", M_CRANK, (X_ARM / 2, 0, 0), 1e-5, 4e-5, 4e-5),
                  f'<link name="rod_{s}_u"/>',
                  link(f"rod_{s}", M_ROD, (0, 0, -ROD / 2), i_rod, i_rod, 1e-5),
                  f'<link name="rod_{s}_tip"/>',
                  f'<link name="anchor_{s}"/>',
                  joint(f"crank_{s}", "shank", f"crank_{s}", (0, _y(s), Z_CRANK), "0 1 0"),
                  joint(f"rod_{s}_x", f"crank_{s}", f"rod_{s}_u", (X_ARM, 0, 0), "1 0 0"),
                  joint(f"rod_{s}_y", f"rod_{s}_u", f"rod_{s}", (0, 0, 0), "0 1 0"),
                  f'<joint name="rod_{s}_tip" type="fixed"><parent link="rod_{s}"/>'
                  f'<child link="rod_{s}_tip"/><origin xyz="0 0 {-ROD}"/></joint>',
                  f'<joint name="anchor_{s}" type="fixed"><parent link="foot"/>'
                  f'<child link="anchor_{s}"/><origin xyz="{X_ARM} {_y(s)} {Z_ANCHOR}"/>'
                  f'</joint>']
    return '<robot name="ankle_leg">' + "".join(parts) + "</robot>"


def _mjcf() -> str:
    """The same leg as MJCF: the rods' ball joints are <equality><connect>s."""
    def inertial(m, com, ixx, iyy, izz):
        return (f'<inertial pos="{com[0]} {com[1]} {com[2]}" mass="{m}" '
                f'diaginertia="{ixx} {iyy} {izz}"/>')

    def hinge(name, axis):
        return f'<joint name="{name}" type="hinge" axis="{axis}" range="-3 3"/>'

    i_shank = M_SHANK * SHANK**2 / 12
    i_rod = M_ROD * ROD**2 / 12
    rods = ""
    for s in SIDES:
        rods += (f'<body name="crank_{s}" pos="0 {_y(s)} {Z_CRANK}">{hinge(f"crank_{s}", "0 1 0")}'
                 f'{inertial(M_CRANK, (X_ARM / 2, 0, 0), 1e-5, 4e-5, 4e-5)}'
                 f'<body name="rod_{s}_u" pos="{X_ARM} 0 0">{hinge(f"rod_{s}_x", "1 0 0")}'
                 f'<body name="rod_{s}" pos="0 0 0">{hinge(f"rod_{s}_y", "0 1 0")}'
                 f'{inertial(M_ROD, (0, 0, -ROD / 2), i_rod, i_rod, 1e-5)}'
                 f'</body></body></body>')
    eq = "".join(f'<connect body1="rod_{s}" body2="foot" anchor="0 0 {-ROD}"/>' for s in SIDES)
    return f"""<mujoco model="ankle_leg"><compiler angle="radian"/><worldbody>
  <body name="foot">{inertial(M_FOOT, (0.02, 0, 0.02), 0.002, 0.004, 0.005)}
    <body name="cross" pos="0 0 {H_ANKLE}">{hinge("ankle_roll", "1 0 0")}
      <body name="shank">{hinge("ankle_pitch", "0 1 0")}
        {inertial(M_SHANK, (0, 0, SHANK / 2), i_shank, i_shank, 0.003)}{rods}
      </body></body></body></worldbody>
  <equality>{eq}</equality></mujoco>"""


def _params(description: str, tmp_path, closed: bool = True) -> dict:
    p = {"floating_base": True, "gravity": [0.0, 0.0, -G], "physics_rate_hz": 1000.0,
         "contact.model": "compliant", "contact.friction_coefficient": 1.0,
         "contact_surfaces": ["foot"], "foot.frame": "foot", "foot.shape": "points",
         "foot.points": POINTS, "initial.base_position": [0.0, 0.0, 0.002],
         "loop_closures.passive_joints": PASSIVE}
    if description == "urdf":
        p.update({"robot_description": _urdf(),
                  "loop_closures.frames_a": [f"rod_{s}_tip" for s in SIDES] if closed else [],
                  "loop_closures.frames_b": [f"anchor_{s}" for s in SIDES] if closed else []})
    else:
        path = tmp_path / "ankle_leg.xml"
        path.write_text(_mjcf())
        p.update({"robot_description": "", "urdf_path": str(path)})
    return p


def _sim(description: str, tmp_path, closed: bool = True) -> Simulator:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PassiveJointsWarning)
        return Simulator.from_params(_params(description, tmp_path, closed))


def _pd(sim, target):
    """The PD on the two cranks (the passive joints' commands are ignored)."""
    names = list(sim.joint_names)
    idx = [names.index(c) for c in CRANKS]
    tau = np.zeros(len(names))
    tau[idx] = 40.0 * (np.asarray(target) - sim.joint_positions[idx]) \
        - 2.0 * sim.joint_velocities[idx]
    return tau


def _by_name(sim, names):
    j = list(sim.joint_names)
    return sim.joint_positions[[j.index(n) for n in names]]


#: the cranks' set points: the left one up more than the right one, so the ankle both
#: pitches and rolls (rad)
TARGET = [0.15, 0.05]


def _loop_angles(sim, cranks):
    """The passive joints' angles closing both loops at the given crank angles: an
    independent solve of the linkage's kinematics (pinocchio's frame placements, fsolve)."""
    names = list(sim.joint_names)
    q0 = sim.q.copy()

    def gap(x):
        q = q0.copy()
        for n, v in zip(PASSIVE + CRANKS, [*x, *cranks]):
            q[7 + names.index(n)] = v  # revolute joints: nq = 1 each after the base's 7
        return np.concatenate([sim.frame_pose(f"rod_{s}_tip", q).translation
                               - sim.frame_pose(f"anchor_{s}", q).translation for s in SIDES])
    x = fsolve(gap, _by_name(sim, PASSIVE), xtol=1e-13)
    assert np.abs(gap(x)).max() < 1e-12
    return x


def test_leg_stands_on_its_parallel_ankle(tmp_path):
    """The PD on the cranks moves them to TARGET and holds them; at rest the foot's contact
    wrench is the whole weight acting at the centre of mass (the leg stands alone: its share
    is all of it), the loops are closed and the ankle's angles are those the linkage's
    kinematics give for the cranks' angles."""
    sim = _sim("urdf", tmp_path)
    worst_err, band = 0.0, 0.0
    for _ in range(3000):
        sim.step(_pd(sim, TARGET))
        worst_err = max(worst_err, float(sim.loop_closure_errors().max()))
        band = max(band, float(np.abs(_by_name(sim, ["ankle_roll", "ankle_pitch"])).max()))
    assert np.abs(sim.v).max() < 1e-5
    weight = MASS * G
    foot = sim.frame_pose("foot")
    w = sim.contact_wrenches()["foot"]
    force = foot.rotation @ w.force
    torque = foot.rotation @ w.torque     # about the foot frame's origin
    lever = sim.center_of_mass() - foot.translation
    expected_torque = np.cross(lever, [0.0, 0.0, weight])
    ankle = _by_name(sim, ["ankle_roll", "ankle_pitch"])
    kin = _loop_angles(sim, _by_name(sim, CRANKS))
    print(f"parallel ankle: ground force {force} N, weight {weight:.6f} N "
          f"({abs(force[2] / weight - 1):.1e}); torque {torque[:2]} N m, statics "
          f"{expected_torque[:2]} N m; ankle roll, pitch {ankle} rad (kinematics "
          f"{kin[:2]}), loop error max {worst_err:.1e} m, |ankle| max {band:.3f} rad")
    assert force[2] == pytest.approx(weight, rel=0.01)
    assert force[2] == pytest.approx(weight, rel=1e-6)  # measured: to round-off
    assert np.abs(force[:2]).max() < 1e-5 * weight  # measured 9e-7
    assert np.allclose(torque[:2], expected_torque[:2], atol=1e-6 * weight)
    # the ankle moved (the cranks drove it), to the angles the closed loops give them
    assert np.abs(ankle).min() > 0.02
    # at rest the loops close to round-off: the stabilisation's second-order term is taken
    # at the step's start velocity (at the free velocity, which the light cranks make large
    # under the PD's torque, 2 rad/s, it left T h/2 gamma(v_free) = 1.15e-6 m and 3.7e-6 rad
    # on the angles); measured 1.2e-16 m, the angles 1.8e-15 rad
    final_err = float(sim.loop_closure_errors().max())
    print(f"loop error at rest {final_err:.2e} m, passive angles against the kinematics "
          f"{np.abs(_by_name(sim, PASSIVE) - kin).max():.1e} rad")
    assert np.allclose(_by_name(sim, PASSIVE), kin, atol=1e-10)
    assert final_err < 1e-12 and worst_err < 1e-6 and band < 0.2  # worst measured 7.6e-8


def test_without_the_closures_the_ankle_falls(tmp_path):
    """The check above can fail: the same leg without its two point closures (the rods
    hang free) cannot hold its shank, which leaves the band the closed ankle stays in
    (0.2 rad) within 0.5 s."""
    sim = _sim("urdf", tmp_path, closed=False)
    band = 0.0
    for _ in range(500):
        sim.step(_pd(sim, TARGET))
        band = max(band, float(np.abs(_by_name(sim, ["ankle_roll", "ankle_pitch"])).max()))
    print(f"open loops: |ankle| max {band:.3f} rad in 0.5 s")
    assert band > 0.3


def test_mjcf_leg_gives_the_same_trajectory(tmp_path):
    """The leg as MJCF, its ball joints as <equality><connect>: the same trajectory as the
    URDF + loop_closures.* description over 2 s (the drop onto the ground, the cranks'
    move to TARGET, the settling)."""
    a = _sim("urdf", tmp_path)
    b = _sim("mjcf", tmp_path)
    assert b.joint_names == a.joint_names
    assert b.loop_closures.names == ("mjcf_connect0_a-mjcf_connect0_b",
                                     "mjcf_connect1_a-mjcf_connect1_b")
    worst = 0.0
    for _ in range(2000):
        a.step(_pd(a, TARGET))
        b.step(_pd(b, TARGET))
        worst = max(worst, np.abs(a.q - b.q).max())
    print(f"MJCF parallel-ankle leg against the URDF one: max |dq| {worst:.1e} over 2 s")
    assert np.abs(_by_name(a, ["ankle_roll", "ankle_pitch"])).min() > 0.02  # it moved
    assert worst < 1e-6
    assert np.allclose(a.contact_wrench_array(), b.contact_wrench_array(), atol=1e-6)
    assert np.allclose(np.abs(a.loop_closure_wrenches), np.abs(b.loop_closure_wrenches),
                       atol=1e-6)
