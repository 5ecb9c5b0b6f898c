"""Real robots from PyPI stand on the DEFAULT contact parameters (issue 18).

Each ready configuration is loaded with every ``contact.*`` key removed except
``contact.model`` and ``contact.friction_coefficient`` (so stiffness, damping,
reference depth ... are wb_sim's defaults, which the explicit integration
refused for Solo12, Talos and ANYmal), and Solo12 (example-robot-data's
``solo12.urdf``, 2.5 kg, sphere feet), which has no ready configuration, is
configured here. Each stands 5 s at 1 kHz under joint PD + gravity
compensation (``PDGravityController``, the gains of the configuration's
``wb_sim_pd_controller`` block; for Solo12 kp = 5 N*m/rad, kd = 0.1 N*m*s/rad)
and must:

* never raise (no ConfigError, no DivergenceError);
* keep its base within 2 cm of its height at t = 0.5 s (settled start);
* not slide: every contact surface's frame moves < 5 mm horizontally after 0.5 s;
* be carried by the ground: the world vertical contact force over the weight
  is within 1 % at every step of the last second.
"""

from __future__ import annotations

import numpy as np
import pytest

import wb_sim
from wb_sim.config import read_yaml_params
from wb_sim.controllers import PDGravityController

from helpers.extras import require_robot_data

G = 9.81
RATE = 1000.0
DURATION = 5.0  # s
SETTLE = 0.5  # s

#: contact keys kept from a ready configuration; every other contact.* key is removed
KEPT = ("contact.model", "contact.friction_coefficient")

SOLO12_URDF = "example-robot-data:solo_description/robots/solo12.urdf"
SOLO_FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
#: the foot mesh (solo_foot.stl) is centred on the foot frame, radius 16 mm
SOLO_FOOT_RADIUS = 0.016
SOLO_JOINTS = [f"{leg}_{j}" for leg in ("FL", "FR", "HL", "HR") for j in ("HAA", "HFE", "KFE")]
#: the SRDF's "straight_standing" posture
SOLO_POSTURE = [0.0, 0.8, -1.6, 0.0, 0.8, -1.6, 0.0, -0.8, 1.6, 0.0, -0.8, 1.6]
SOLO_GAINS = (5.0, 0.1)


def default_contact(params: dict) -> dict:
    """``params`` with every contact.* key except KEPT removed."""
    return {k: v for k, v in params.items() if not k.startswith("contact.") or k in KEPT}


def ready_robot(name: str):
    """(params with default contact, surface frames, kp, kd) of a ready configuration."""
    require_robot_data(name)
    path = wb_sim.config_path(name)
    params = default_contact(read_yaml_params(path))
    frames = [params[f"{s}.frame"] for s in params["contact_surfaces"]]
    gains = read_yaml_params(path, "wb_sim_pd_controller")
    return params, frames, gains["kp"], gains["kd"]


def solo12():
    """Solo12 with sphere feet, standing posture, feet 1 mm above the ground."""
    require_robot_data(SOLO12_URDF)
    def params(z):
        p = {"urdf_path": SOLO12_URDF,
             "floating_base": True, "physics_rate_hz": RATE,
             "contact.model": "compliant",
             "contact_surfaces": [f.lower() for f in SOLO_FEET],
             "initial.joint_names": SOLO_JOINTS, "initial.joint_positions": SOLO_POSTURE,
             "initial.base_position": [0.0, 0.0, z], "imu.frame": "base_link"}
        for f in SOLO_FEET:
            p.update({f"{f.lower()}.frame": f, f"{f.lower()}.shape": "sphere",
                      f"{f.lower()}.radius": SOLO_FOOT_RADIUS})
        return p

    probe = wb_sim.Simulator.from_params(params(1.0))
    lowest = min(probe.frame_pose(f).translation[2] for f in SOLO_FEET)
    return params(1.0 - lowest + SOLO_FOOT_RADIUS + 1e-3), list(SOLO_FEET), *SOLO_GAINS


def test_default_contact_strips_the_tuned_keys():
    """The configurations really run on defaults: no stiffness/damping key survives."""
    params, *_ = ready_robot("talos")
    contact = {k for k in params if k.startswith("contact.")}
    assert contact <= set(KEPT), contact
    assert "contact.model" in contact


@pytest.mark.parametrize("robot", ["solo12", "talos", "anymal", "icub"])
def test_robot_stands_5_s_on_default_contact(robot):
    """Solo12 (sphere feet), Talos (box feet), ANYmal and iCub with default contact
    parameters stand 5 s at 1 kHz under PD + gravity compensation: base within
    2 cm of its settled height, feet slide < 5 mm, vertical reaction = weight
    within 1 % at every step of the last second."""
    params, frames, kp, kd = solo12() if robot == "solo12" else ready_robot(robot)
    params = dict(params, physics_rate_hz=RATE)
    sim = wb_sim.Simulator.from_params(params)
    ctrl = PDGravityController(sim.robot, sim.state.joint_positions, kp, kd,
                               gravity=sim.config.gravity)
    weight = sim.mass * G
    n, settle, last = int(DURATION * RATE), int(SETTLE * RATE), int(1.0 * RATE)
    z = np.empty(n)
    ratio = np.empty(last)
    feet0, slide = None, 0.0
    for i in range(n):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        z[i] = sim.q[2]
        if i >= n - last:
            ratio[i - (n - last)] = sim.contact_points_state().force[:, 2].sum() / weight
        if i >= settle and (i - settle) % 20 == 0:
            feet = np.array([sim.frame_pose(f).translation[:2] for f in frames])
            if feet0 is None:
                feet0 = feet
            slide = max(slide, float(np.hypot(*(feet - feet0).T).max()))
    assert np.isfinite(sim.q).all()
    drift = np.abs(z[settle:] - z[settle]).max()
    assert drift < 0.02, f"base moved {drift * 1e3:.1f} mm from its settled height"
    assert slide < 5e-3, f"feet slid {slide * 1e3:.2f} mm"
    assert np.abs(ratio - 1.0).max() < 1e-2, (ratio.min(), ratio.max())


def test_rigid_solo12_standing_reports_sticking_feet():
    """Rigid contact: a standing Solo12's feet are reported sticking (the stick
    threshold follows the solver tolerance; at 10x tighter than it, 89 % of the
    foot-steps read 'slip'), while a foot that really slides reads 'slip'."""
    params, frames, kp, kd = solo12()
    sim = wb_sim.Simulator.from_params(dict(params, **{"contact.model": "rigid"}))
    ctrl = PDGravityController(sim.robot, sim.state.joint_positions, kp, kd)
    states = []
    for i in range(2000):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        if i >= 1000:
            states += sim.contact_points_state().status
    assert states.count("stick") >= 0.99 * len(states), \
        {s: states.count(s) for s in set(states)}
    # pushed sideways hard, with no friction to speak of: the feet slide and say so
    sim.set_contact_parameters(friction_coefficient=0.05)
    for _ in range(50):
        sim.apply_external_wrench("base_link", force=[20.0, 0.0, 0.0])
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
    assert "slip" in sim.contact_points_state().status


def _lowest_drop(make_humanoid, shipped_controller, delay: int, dz: float) -> float:
    """The base's largest drop (m) over 4 s under the shipped PD acting ``delay`` steps late,
    from the shipped start raised by ``dz`` m."""
    start = make_humanoid().q[2]
    sim = make_humanoid(**{"joints.command_delay_steps": delay,
                           "initial.base_position": [0.0, 0.0, float(start + dz)]})
    ctrl = shipped_controller(sim)
    z0 = low = sim.q[2]
    for _ in range(4000):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        low = min(low, sim.q[2])
    return float(z0 - low)


#: starts raised by these (m): the margin must not hang on one start's rounding
STARTS = (0.0, 5e-5, 2e-4)


def test_humanoid_stands_with_its_pd_behind_by_3_ms_from_most_starts(make_humanoid,
                                                                     shipped_controller):
    """A controller in another process answers late (the ROS node's p99 is ~1 ms, more on a
    loaded machine): the default humanoid under its shipped PD, its torques acting 3 steps
    late, stands from most starts. 3 steps is its edge: its feet chatter, and a start a
    micrometre higher, or the rounding of another summation order, decides whether it stands
    (from 0, 1e-12, 1e-9, 1e-6, 5e-5, 1e-4, 2e-4, 4e-4 and 8e-4 m higher: 8 of 9 stood on
    the plain Python path, 7 of 9 with the compiled solve; 2 steps late every start stands,
    3.4-4.4 mm down; each trajectory alone is deterministic). The contact's
    tangential stiffness sets this margin: at 1e6 N/m the same robot fell with 3 steps."""
    drops = [_lowest_drop(make_humanoid, shipped_controller, 3, dz) for dz in STARTS]
    stood = sum(d < 0.02 for d in drops)
    assert stood >= 2, f"3 steps late, {stood} of {len(STARTS)} starts stood: drops (mm) " \
                       f"{[round(d * 1e3, 1) for d in drops]}"


def test_humanoid_stands_still_with_its_pd_one_step_behind(make_humanoid, shipped_controller):
    """1 step (1 ms, the node's p99) late, the humanoid of the test above stands still:
    after the first second every foot point sticks at every step. (From 2 steps late its
    feet chatter, in either friction law: no step with all of them sticking; 3 steps
    late, the test above, it chatters without falling, from 18 of 18 starts 0.05-0.8 mm
    apart in height with friction opposing each step's slip, 17 of 18 when a slipping
    point kept the last step's direction; at 1e6 N/m 1 of 6 stood, with either law.)"""
    sim = make_humanoid(**{"joints.command_delay_steps": 1})
    ctrl = shipped_controller(sim)
    z0 = sim.q[2]
    low = z0
    for i in range(4000):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities))
        low = min(low, sim.q[2])
        if i >= 1000:
            assert set(sim.contact_points_state().status) == {"stick"}, i
    assert z0 - low < 0.02, f"the base dropped {(z0 - low) * 1e3:.1f} mm"
