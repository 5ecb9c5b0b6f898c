"""Closed kinematic chains (loop_closures.*): a parallelogram four-bar linkage released under
gravity against the closed form of its single degree of freedom (a pendulum), the loop's
drift, the energy, the closure force against the statics (with the links' collision contacts
too), a joint limit in the loop, and the parameters' errors."""

from __future__ import annotations

import warnings

import numpy as np
import pinocchio as pin
import pytest

from wb_sim import Simulator
from wb_sim.errors import ConfigError, ModelError, UnsupportedError
from wb_sim.loop_closures import PassiveJointsWarning

from helpers.fourbar import (CRANK_ROCKER, FOURBAR, G, L, M1, M2, M3, TH0, D,
                            closed_angles as _closed_angles, fourbar as _fourbar,
                            params as _params,
                            revolute as _revolute, rod as _rod,
                            sim as _sim, swing)


def _energy(sim) -> float:
    model, data = sim.model, sim.model.createData()
    q, v = sim.q, sim.v
    return 0.5 * v @ pin.crba(model, data, q) @ v + pin.computePotentialEnergy(model, data, q)


def _statics(sim, a: str = "tip", b: str = "anchor"):
    """(model, data, generalized gravity, the closure's Jacobian J_a - J_b in world-aligned
    axes) at the simulator's configuration: the independent statics the tests compare with."""
    mdl = sim.model
    data = mdl.createData()
    q = sim.q
    grav = pin.computeGeneralizedGravity(mdl, data, q)
    pin.computeJointJacobians(mdl, data, q)
    pin.updateFramePlacements(mdl, data)
    lwa = pin.LOCAL_WORLD_ALIGNED
    J = pin.getFrameJacobian(mdl, data, mdl.getFrameId(a), lwa)
    if b is not None:
        J = J - pin.getFrameJacobian(mdl, data, mdl.getFrameId(b), lwa)
    return mdl, data, grav, J


def test_fourbar_follows_its_one_dof_motion():
    got = swing()
    worst, amp = got["worst"], got["amplitude"]
    print(f"four-bar: max |theta - theta_ref| = {worst:.3e} rad over 2 s, amplitude {amp:.3f} "
          f"rad: {100 * worst / amp:.3f} %")
    # the loop's other angles follow: j2 = -theta, j3 = theta
    assert got["loop"] < 1e-3
    assert amp > 1.0  # it swung through a large arc, about 2 half periods
    assert got["far"] < -2.5  # reached the far side
    assert worst < 0.005 * amp


def _crank_rocker(**extra) -> Simulator:
    th1 = 1.0
    q23 = _closed_angles(*CRANK_ROCKER, th1)
    return _sim(**{"robot_description": _fourbar(*CRANK_ROCKER),
                   "initial.joint_positions": [th1, *q23], **extra})


def _swing_60s(time_constant):
    """(largest loop error m, largest energy gain J, energy change at the end J, scale J)
    of the crank-rocker released from j1 = 1 rad, 60 s at 1 kHz."""
    sim = _crank_rocker(**{"loop_closures.time_constant": time_constant})
    e0 = _energy(sim)
    drift, e_max = 0.0, e0
    for i in range(60000):
        sim.step(np.zeros(3))
        if i % 100 == 99:
            drift = max(drift, float(sim.loop_closure_errors()[0]))
            e_max = max(e_max, _energy(sim))
    scale = G * (M1 + M2 + M3) * 0.5  # the potential energy's range is of this order
    return drift, e_max - e0, _energy(sim) - e0, scale


def test_fourbar_stays_closed_and_energy_does_not_grow():
    """A crank-rocker (its loop curved in joint space, unlike the parallelogram's) swinging
    under gravity for 60 s at 1 kHz: the loop stays closed to < 0.1 mm with the default
    stabilisation (10 ms), less well with next to none (10 s); the energy never grows."""
    import concurrent.futures
    import multiprocessing
    # the two 60 s swings side by side (forked workers): half the suite's wall time
    with concurrent.futures.ProcessPoolExecutor(
            2, mp_context=multiprocessing.get_context("fork")) as pool:
        (drift, gain, end, scale), (loose, _, _, _) = pool.map(_swing_60s, (0.01, 10.0))
    print(f"crank-rocker over 60 s: drift {drift * 1e3:.2e} mm (T = 10 s: {loose * 1e3:.2e} "
          f"mm), energy max gain {gain / scale * 100:.4f} %, at the end {end / scale * 100:.2f} "
          f"% of m g l / 2 = {scale:.1f} J")
    assert drift < 1e-4
    assert loose > 1.5 * drift
    assert gain < 0.01 * scale


def test_closure_force_holds_the_statics():
    """Held at rest by a PD on j1 (j2, j3 passive, their commands ignored): the closure's
    force balances gravity as the statics g(q) = tau + J^T f gives it (pinocchio's
    generalized gravity and the tip's Jacobian, independent of the step)."""
    sim = _sim(**{"loop_closures.passive_joints": ["j2", "j3"]})
    k = M1 * L / 2 + M2 * L + M3 * L / 2
    for _ in range(4000):
        th, w = sim.q[0], sim.v[0]
        sim.step(np.array([G * k * np.cos(th) + 50.0 * (TH0 - th) - 5.0 * w, 5.0, -5.0]))
    assert abs(sim.q[0] - TH0) < 1e-7 and np.abs(sim.v).max() < 1e-7
    model, data, grav, J = _statics(sim, "tip", None)
    q = sim.q
    J = J[:2]  # x, y rows (planar)
    f = np.linalg.solve(J[:, 1:].T, grav[1:])  # the passive joints' rows: tau = 0
    w = sim.loop_closure_wrenches
    assert w.shape == (1, 6)
    print(f"closure force {w[0, :2]} N, statics {f} N")
    assert np.allclose(w[0, :2], f, rtol=1e-6, atol=1e-6)
    assert np.abs(w[0, 2:]).max() < 1e-9
    # and j1's torque closes the balance: tau_1 = g_1 - (J^T f)_1, the 1-DOF g k cos(theta)
    assert grav[0] - J[:, 0] @ f == pytest.approx(sim.applied_torques[0], rel=1e-7)
    assert sim.applied_torques[0] == pytest.approx(G * k * np.cos(q[0]), rel=1e-6)


def test_passive_joints_warn_and_take_no_torque():
    with pytest.warns(PassiveJointsWarning, match="j2, j3"):
        Simulator.from_params(_params(**{"loop_closures.passive_joints": ["j2", "j3"]}))


def test_unknown_frame_is_named_with_close_names():
    with pytest.raises(ModelError, match=r"frame 'ancor'.*did you mean 'anchor'"):
        _sim(**{"loop_closures.frames_b": ["ancor"]})
    with pytest.raises(ModelError, match=r"loop_closures.passive_joints.*'j4'"):
        _sim(**{"loop_closures.passive_joints": ["j4"]})
    with pytest.raises(ConfigError, match=r"loop_closures.types.*did you mean 'point'"):
        _sim(**{"loop_closures.types": ["pont"]})
    with pytest.raises(ConfigError, match=r"loop_closures.offsets.*6 per closure"):
        _sim(**{"loop_closures.offsets": [0.0, 0.0, 0.0]})
    with pytest.raises(ConfigError, match=r"time_constant.*dt"):
        _sim(**{"loop_closures.time_constant": 1e-4})


def _standing_fourbar() -> str:
    """The four-bar on a 5 kg floating base standing on four contact points, the linkage
    in the base's x-z plane (axes along y) so that gravity loads its passive joints."""
    urdf = FOURBAR.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 1 0"/>')
    return urdf.replace('<link name="base"/>', """<link name="base">
    <inertial><mass value="5.0"/>
      <inertia ixx="0.05" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>""")


@pytest.mark.parametrize("model, description", [("compliant", "urdf"), ("rigid", "urdf"),
                                                ("compliant", "mjcf")])
def test_closure_and_contacts_in_one_solve(model, description, tmp_path):
    """Both contact models: the base stands on its points, the linkage held by a PD on j1;
    at rest the ground carries the whole weight, the loop is closed and the closure's force
    is the statics' (the passive joints' rows of g(q) = J^T f; the contacts act on the base
    only), read through the contacts' share of the solve."""
    th0 = -0.5  # about y: the cranks point up and forward
    p = _params(**{"robot_description": _standing_fourbar(), "floating_base": True,
                   "gravity": [0.0, 0.0, -G], "contact.model": model,
                   "contact.friction_coefficient": 1.0, "contact_surfaces": ["feet"],
                   "feet.frame": "base", "feet.shape": "points",
                   "feet.points": [0.4, 0.2, -0.1, 0.4, -0.2, -0.1, -0.4, 0.2, -0.1,
                                   -0.4, -0.2, -0.1],
                   "initial.base_position": [0.0, 0.0, 0.1],
                   "initial.joint_positions": [th0, -th0, th0],
                   "loop_closures.passive_joints": ["j2", "j3"]})
    base_mass = 5.0
    if description == "mjcf":  # the same linkage on a 1 kg base, closed by its <equality>
        path = tmp_path / "standing.xml"
        path.write_text(_mjcf_fourbar().replace('axis="0 0 1"', 'axis="0 1 0"'))
        p.update({"robot_description": "", "urdf_path": str(path), "loop_closures.frames_a": [],
                  "loop_closures.frames_b": []})
        base_mass = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PassiveJointsWarning)
        sim = Simulator.from_params(p)
    for _ in range(3000):
        j = sim.joint_positions
        sim.step(np.array([300.0 * (th0 - j[0]) - 20.0 * sim.joint_velocities[0], 0.0, 0.0]))
    # the rigid model's solver stops at its tolerance: its forces jitter by a few 1e-4 of
    # the weight with or without the closure (measured: 4e-4 without, 4e-4 with)
    tol = {"compliant": 1e-6, "rigid": 1e-3}[model]
    assert np.abs(sim.v).max() < 1e-4
    weight = (base_mass + M1 + M2 + M3) * G
    fz = sim.point_forces[:, 2].sum()
    assert fz == pytest.approx(weight, rel=tol)
    assert sim.loop_closure_errors()[0] < 1e-6
    a, b = ("tip", "anchor") if description == "urdf" else ("mjcf_connect0_a", "mjcf_connect0_b")
    mdl, data, grav, J = _statics(sim, a, b)
    J = J[[0, 2]]
    f = np.linalg.solve(J[:, 7:].T, grav[7:])  # j2, j3 (v: base 6, j1, j2, j3)
    w = sim.loop_closure_wrenches[0]
    print(f"{model} {description}: closure force {w[[0, 2]]} N, statics {f} N; ground {fz:.6f} N of "
          f"{weight:.6f} N")
    assert np.allclose(w[[0, 2]], f, rtol=tol, atol=tol * np.abs(f).max())


def test_anchor_offset_on_frame_b_is_the_same_closure():
    """The anchor given as an offset on the base (frame_b = base, offset (D, 0, 0)) instead
    of the anchor frame: the same trajectory."""
    a = _sim()
    b = _sim(**{"loop_closures.frames_b": ["base"],
                "loop_closures.offsets": [D, 0.0, 0.0, 0.0, 0.0, 0.0]})
    for _ in range(500):
        a.step(np.zeros(3))
        b.step(np.zeros(3))
    assert np.abs(a.q - b.q).max() < 1e-12


def _welded(closed: bool) -> str:
    """A pendulum rod with a block at its end, the block's centre of mass off the rod's
    axis: welded by a URDF fixed joint (closed False), or hung on a revolute joint about
    the rod's axis (closed True: a frame closure welds it back)."""
    joint = ('<joint name="j2" type="revolute"><parent link="rod"/><child link="block"/>'
             '<origin xyz="0.4 0 0" rpy="0.2 0 0.3"/><axis xyz="1 0 0"/>'
             '<limit lower="-10" upper="10" effort="100" velocity="100"/></joint>')
    if not closed:
        joint = ('<joint name="j2" type="fixed"><parent link="rod"/><child link="block"/>'
                 '<origin xyz="0.4 0 0" rpy="0.2 0 0.3"/></joint>')
    return f"""<robot name="welded"><link name="base"/>{_rod("rod", 1.0, 0.4)}
  <link name="block"><inertial><origin xyz="0.02 0.05 0.01"/><mass value="0.7"/>
    <inertia ixx="0.002" ixy="0" ixz="0" iyy="0.003" iyz="0" izz="0.004"/></inertial></link>
  {_revolute("j1", "base", "rod", 0.0)}{joint}</robot>"""


def test_frame_closure_welds_like_a_fixed_joint():
    """A 6-D closure with a rotated offset holds a revolute joint like a URDF fixed joint:
    the same pendulum motion, and its torque about j2's axis holds the block's weight."""
    ref = Simulator.from_params({"robot_description": _welded(False), "floating_base": False,
                                 "gravity": [0.0, -G, 0.0], "joints.damping": 0.0})
    sim = _sim(**{"robot_description": _welded(True), "initial.joint_names": [],
                  "initial.joint_positions": [], "loop_closures.frames_a": ["block"],
                  "loop_closures.frames_b": ["rod"], "loop_closures.types": ["frame"],
                  "loop_closures.offsets": [0.4, 0.0, 0.0, 0.2, 0.0, 0.3]})
    worst = 0.0
    for _ in range(2000):
        ref.step(np.zeros(1))
        sim.step(np.zeros(2))
        worst = max(worst, abs(sim.q[0] - ref.q[0]))
    print(f"welded by a frame closure: max |q1 - q1_fixed| = {worst:.2e} rad over 2 s, "
          f"j2 {abs(sim.q[1]):.1e} rad")
    assert abs(ref.q[0]) > 0.5  # it swung
    assert worst < 1e-9 and abs(sim.q[1]) < 1e-12
    # the weld's torque did hold j2 (gravity loads it through the block's offset mass)
    axis = sim.frame_pose("block").rotation[:, 0]  # j2's axis, world
    assert abs(sim.loop_closure_wrenches[0, 3:] @ axis) > 0.01


def test_mjcf_errors_are_clear(tmp_path):
    """An MJCF string (pinocchio parses files only) is refused saying what to do; a file
    pinocchio cannot read is a ModelError naming it."""
    with pytest.raises(UnsupportedError, match=r"MJCF.*urdf_path ending in .xml"):
        Simulator.from_params({"robot_description": _mjcf_fourbar(), "floating_base": False})
    path = tmp_path / "bad.xml"
    path.write_text(_mjcf_fourbar().replace('body2="base"', 'body2="nowhere"'))
    with pytest.raises(ModelError, match=r"bad.xml.*nowhere"):
        Simulator.from_params({"urdf_path": str(path), "floating_base": False})
    path.write_text(_mjcf_fourbar())
    with pytest.raises(UnsupportedError, match=r"collision.enabled.*MJCF"):
        _sim(**{"robot_description": "", "urdf_path": str(path), "collision.enabled": True,
                "loop_closures.frames_a": [], "loop_closures.frames_b": []})


def _mjcf_fourbar() -> str:
    """The four-bar of FOURBAR as MJCF, closed by an <equality><connect>."""
    def body(name, m, length, sign, pos, joint, inner=""):
        i = m * length**2 / 12.0
        return (f'<body name="{name}" pos="{pos} 0 0"><joint name="{joint}" type="hinge" '
                f'axis="0 0 1"/><inertial pos="{sign * length / 2} 0 0" mass="{m}" '
                f'diaginertia="1e-4 {i} {i}"/>{inner}</body>')
    chain = body("crank1", M1, L, 1, 0.0, "j1",
                 body("coupler", M2, D, 1, L, "j2", body("crank2", M3, L, -1, D, "j3")))
    return f"""<mujoco model="fourbar"><compiler angle="radian"/><worldbody>
  <body name="base"><inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/>{chain}</body>
  </worldbody>
  <equality><connect body1="crank2" body2="base" anchor="{-L} 0 0"/></equality></mujoco>"""


def test_mjcf_fourbar_equals_the_urdf_one(tmp_path):
    """urdf_path an MJCF file: its <equality><connect> becomes a point closure; the same
    trajectory as the URDF + loop_closures.* description."""
    path = tmp_path / "fourbar.xml"
    path.write_text(_mjcf_fourbar())
    a = _sim()
    b = _sim(**{"robot_description": "", "urdf_path": str(path),
                "loop_closures.frames_a": [], "loop_closures.frames_b": []})
    assert b.joint_names == a.joint_names and b.loop_closures.names == (
        "mjcf_connect0_a-mjcf_connect0_b",)
    worst = 0.0
    for _ in range(2000):
        a.step(np.zeros(3))
        b.step(np.zeros(3))
        worst = max(worst, np.abs(a.q - b.q).max())
    print(f"MJCF four-bar against the URDF one: max |dq| {worst:.1e} rad over 2 s")
    assert worst < 1e-6
    assert np.allclose(a.loop_closure_wrenches, b.loop_closure_wrenches, atol=1e-6)


def _coupler_on_the_ground() -> str:
    """The four-bar of FOURBAR in the x-z plane (axes along -y: the same angles, z for y)
    with a box of collision geometry under its coupler, which translates level."""
    urdf = FOURBAR.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 -1 0"/>')
    return urdf.replace('<link name="coupler">', f"""<link name="coupler">
    <collision><origin xyz="{D / 2} 0 -0.02"/>
      <geometry><box size="0.4 0.04 0.04"/></geometry></collision>""")


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_closure_force_with_a_link_on_the_ground(model):
    """The linkage rests with its coupler's collision box (collision.enabled, no contact
    surface) on the ground, no torque anywhere: the closure's force is the statics'
    g(q) = J_cl^T f + J_c^T f_c (pinocchio's generalized gravity, the links' contact forces
    the simulator reports at their points, the Jacobians), so the closure's share accounts
    for the link contacts' impulses (before issue 29's fix it took only the contact
    surfaces': 9.37 N for 12.50 N here, the motion right)."""
    ground = L * np.sin(TH0) - 0.04 + 1e-4  # the box's bottom at j1 = TH0, 0.1 mm deep
    sim = _sim(**{"robot_description": _coupler_on_the_ground(), "gravity": [0.0, 0.0, -G],
                  "collision.enabled": True, "ground.height": ground, "contact.model": model,
                  "contact.friction_coefficient": 1.0,
                  "loop_closures.passive_joints": ["j2", "j3"]})
    for _ in range(3000):
        sim.step(np.zeros(3))
    reading = sim.collision_points_state()
    assert set(reading.surface) == {"coupler"} and len(reading.surface) == 4
    mdl, data, grav, J = _statics(sim)
    J = J[[0, 2]]
    lwa = pin.LOCAL_WORLD_ALIGNED
    jid = mdl.getJointId("j2")  # the coupler's joint
    Jj = pin.getJointJacobian(mdl, data, jid, lwa)
    contacts = np.zeros(mdl.nv)  # J_c^T f_c of the reported forces at their points
    for p, f in zip(reading.position, reading.force):
        r = p - data.oMi[jid].translation
        contacts += (Jj[:3] - np.cross(r, Jj[3:].T).T).T @ f
    f, *_ = np.linalg.lstsq(J.T, grav - contacts, rcond=None)
    residual = np.abs(J.T @ f - (grav - contacts)).max()
    w = sim.loop_closure_wrenches[0]
    print(f"{model}: closure force {w[[0, 2]]} N, statics {f} N (residual {residual:.1e} N*m); "
          f"the links' normal force {sim.contact.link_normal_forces()} N")
    assert abs(w[2]) > 10.0  # the loop carries a share of the coupler's load
    assert sim.loop_closure_errors()[0] < 1e-9
    # the rigid model stops at its solver's tolerance: at rest to a few 1e-3 of the forces
    tol = {"compliant": 1e-6, "rigid": 5e-3}[model]
    assert np.abs(sim.v).max() < (1e-9 if model == "compliant" else 1e-3)
    assert residual < tol * np.abs(grav).max()
    assert np.allclose(w[[0, 2]], f, rtol=tol, atol=tol * np.abs(f).max())


def _limited_fourbar(upper: float) -> str:
    """FOURBAR with an upper limit ``upper`` on its passive joint j2."""
    i = FOURBAR.index('<joint name="j2"')
    j = FOURBAR.index("<limit", i)
    return (FOURBAR[:j] + f'<limit lower="-10" upper="{upper}" effort="100" velocity="100"/>'
            + FOURBAR[FOURBAR.index("/>", j) + 2:])


def test_joint_limit_in_a_closed_chain_acts_with_the_chains_inertia():
    """The parallelogram swings down until its passive joint j2 (= -j1 on the loop) meets its
    upper limit: the closures are eliminated first, so the limit's spring-damper acts with
    the closed chain's inertia and keeps the loop. Its motion equals that of the equivalent
    pendulum (the 1-DOF inertia and gravity moment of the closed form) with the same stop on
    its joint, to round-off; before issue 29's fix (the limit impulse on the open chain's
    inertia, then the closures' projection) the stop let j2 1.07e-2 rad past (the pendulum:
    3.7e-3) and left it 4.9e-4 rad deep at rest (8.1e-5), 2.9e-2 rad off the pendulum."""
    upper = 1.0
    sim = _sim(**{"robot_description": _limited_fourbar(upper)})
    m = M1 + M2 + M3
    k = M1 * L / 2 + M2 * L + M3 * L / 2  # m * (the centre of mass's distance)
    inertia = M1 * L**2 / 3 + M3 * L**2 / 3 + M2 * L**2  # about j1, the coupler translating
    izz = inertia - k**2 / m
    pendulum = f"""<robot name="pendulum"><link name="base"/>
  <link name="bar"><inertial><origin xyz="{k / m} 0 0"/><mass value="{m}"/>
    <inertia ixx="1e-4" ixy="0" ixz="0" iyy="{izz}" iyz="0" izz="{izz}"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="bar"/>
    <axis xyz="0 0 1"/><limit lower="{-upper}" upper="10" effort="100" velocity="100"/>
  </joint></robot>"""
    ref = Simulator.from_params({"robot_description": pendulum, "floating_base": False,
                                 "gravity": [0.0, -G, 0.0], "joints.damping": 0.0,
                                 "contact_surfaces": [], "physics_rate_hz": 1000.0,
                                 "initial.joint_names": ["j1"],
                                 "initial.joint_positions": [TH0]})
    worst = past = past_ref = loop = 0.0
    for _ in range(2000):
        sim.step(np.zeros(3))
        ref.step(np.zeros(1))
        worst = max(worst, abs(sim.q[0] - ref.q[0]))
        past, past_ref = max(past, sim.q[1] - upper), max(past_ref, -upper - ref.q[0])
        loop = max(loop, float(sim.loop_closure_errors()[0]))
    print(f"four-bar on j2's stop: max |j1 - pendulum| {worst:.1e} rad over 2 s; j2 past its "
          f"limit by {past:.3e} rad at most (the pendulum {past_ref:.3e}), at the end "
          f"{sim.q[1] - upper:.2e} rad; loop {loop:.1e} m")
    assert past_ref > 1e-3  # the stop was hit hard
    assert abs(sim.q[1] - upper) < 1e-3 and np.abs(sim.v).max() < 1e-3  # resting on it
    assert worst < 1e-9
    assert past < 1.01 * past_ref
    assert loop < 1e-9


@pytest.mark.parametrize("model", ["compliant", "rigid"])
def test_generalized_impulse_is_the_contacts_velocity_change(model):
    """ContactModel.generalized_impulse() (what the closures read) is the whole solve's
    J_c^T p: M (v' - v_free) of the step, with the links' collision contacts (the open
    chain, no closure, its coupler's box dropped on the ground), at every step of 0.2 s."""
    ground = L * np.sin(TH0) - 0.04 + 1e-3
    sim = _sim(**{"robot_description": _coupler_on_the_ground(), "gravity": [0.0, 0.0, -G],
                  "collision.enabled": True, "ground.height": ground, "contact.model": model,
                  "loop_closures.frames_a": [],
                  "loop_closures.frames_b": []})
    mdl, data = sim._model_step, sim._model_step.createData()
    tau = np.zeros(3)
    touched, worst, scale = 0, 0.0, 0.0
    for _ in range(200):
        q, v = sim.q, sim.v  # a fixed base: the stepping velocity is pinocchio's
        v_free = v + sim.dt * pin.aba(mdl, data, q, v, tau)
        v_next, _, _ = sim._dynamics(q, v, sim._s.u, tau)
        p = sim.contact.generalized_impulse()
        M = pin.crba(mdl, data, q)
        expected = (np.triu(M) + np.triu(M, 1).T) @ (v_next - v_free)
        if p is None:
            assert np.abs(expected).max() < 1e-12
        else:
            touched += np.abs(p).max() > 1e-4
            worst = max(worst, np.abs(p - expected).max())
            scale = max(scale, np.abs(p).max())
        sim.step(tau)
    worst /= scale
    print(f"{model}: J_c^T p against M (v' - v_free): {worst:.1e} of its largest, "
          f"{touched} steps of 200 touching")
    assert touched > 50
    assert worst < 1e-9
