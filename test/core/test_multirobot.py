"""Several robots in one physics (wb_sim/multirobot.py): one combined pinocchio model, one
step, one contact solve.

Checked against numbers: two humanoids 1.5 m apart, each under its own PD + gravity
compensation, stand 10 s and each one's trajectory equals the single-robot run of that
humanoid (independent systems: the combined step is two separate simulators' to rounding,
1e-12 m/rad asserted); the run is bit-identical in this process and in a fresh one; a
humanoid pushed into the other on a frictionless ground moves it, the horizontal linear
momentum of the pair conserved through the contact; an ANYmal beside the humanoid, both
stand; a fixed-base Panda beside it moves as alone; robot b's own IMU reads as the
humanoid alone; each robot's own joints.* and actuators.* (a DC-motor humanoid beside an
ideal one with its own friction, damping, armature, effort and position limits) move it as
its own single simulator does; snapshots, spawn_object and reset keep every robot; the
refusals name the robot, the key and the fix; a world file with two robots builds headless and the node's
loader (wb_sim_run --world) refuses it in one line.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from helpers import ROOT
from wb_sim import Simulator
from wb_sim.config import read_yaml_params
from wb_sim.controllers import PDGravityController
from wb_sim.errors import ConfigError, ModelError
from wb_sim.paths import robot_config_file

HUMANOID = read_yaml_params(robot_config_file("humanoid"))
Z0 = HUMANOID["initial.base_position"][2]


def _humanoid(x: float, y: float = 0.0, **extra) -> dict:
    """The humanoid's parameters with its base at (x, y)."""
    p = dict(HUMANOID)
    p["initial.base_position"] = [x, y, Z0]
    p.update(extra)
    return p


def _pair(dx: float = 1.5, **extra) -> list:
    return [("a", _humanoid(0.0, **extra)), ("b", _humanoid(dx, **{"imu.frame": "", **extra}))]


def _run(sim, steps: int, kp=1000.0, kd=20.0, push=None) -> np.ndarray:
    """q after each of ``steps`` steps, each robot under its own PD + gravity compensation
    holding its start posture (gains per robot: ``kp``, ``kd`` scalars or per robot)."""
    kps = kp if isinstance(kp, (list, tuple)) else [kp] * len(sim.robots)
    kds = kd if isinstance(kd, (list, tuple)) else [kd] * len(sim.robots)
    laws = [PDGravityController(p.robot, sim.joint_positions[p.joints].copy(), kps[i], kds[i],
                                sim.config.gravity) for i, p in enumerate(sim.robots)]
    out = np.empty((steps, sim.model.nq))
    for k in range(steps):
        if push is not None:
            push(sim, k)
        q, qj, vj = sim.q, sim.joint_positions, sim.joint_velocities
        sim.step(sim.join_joints([law(q[p.q_slice], qj[p.joints], vj[p.joints])
                                  for law, p in zip(laws, sim.robots)]))
        out[k] = sim.q
    return out


def test_layout_names_and_helpers():
    sim = Simulator.from_robots(_pair())
    single = Simulator.from_params(HUMANOID)
    a, b = sim.robots
    assert (a.name, b.name) == ("a", "b")
    # robot 0 exactly as alone: its joints, indices and frames; robot 1 prefixed after it
    assert sim.joint_names[:single.nj] == single.joint_names
    assert sim.joint_names[single.nj:] == tuple(f"b/{n}" for n in single.joint_names)
    np.testing.assert_array_equal(sim.robot.idx_v[:single.nj], single.robot.idx_v)
    assert (a.q_slice, b.q_slice) == (slice(0, single.model.nq),
                                      slice(single.model.nq, 2 * single.model.nq))
    assert sim.nj == 2 * single.nj and b.joints == slice(single.nj, 2 * single.nj)
    assert b.joint_names == single.joint_names and b.surfaces == ("b/left_foot",
                                                                    "b/right_foot")
    assert sim.surface_names == ["left_foot", "right_foot", "b/left_foot", "b/right_foot"] \
        or tuple(sim.surface_names) == ("left_foot", "right_foot", "b/left_foot",
                                        "b/right_foot")
    np.testing.assert_array_equal(sim.q[a.q_slice], single.q)
    np.testing.assert_allclose(sim.robot_base_pose("b").translation, [1.5, 0.0, Z0])
    assert sim.mass == pytest.approx(2 * single.mass, rel=1e-12)
    tau = np.arange(sim.nj, dtype=float)
    parts = sim.split_joints(tau)
    np.testing.assert_array_equal(parts[1], tau[single.nj:])
    np.testing.assert_array_equal(sim.join_joints(parts), tau)
    with pytest.raises(ConfigError, match="no robot named 'c'"):
        sim.robot_part("c")


def test_two_humanoids_stand_and_move_as_two_simulators():
    """Apart, the two robots are independent systems: the combined step (one ABA over the
    union, one contact problem split into islands) gives each the trajectory of its own
    simulator. Measured: 7.8e-16 (rounding: the other robot's rows change the order of no
    operation on this robot's; the islands are solved alone), asserted 1e-12."""
    steps = 10_000
    Q = _run(Simulator.from_robots(_pair()), steps)
    nq = Q.shape[1] // 2
    A = _run(Simulator.from_params(_humanoid(0.0)), steps)
    B = _run(Simulator.from_params(_humanoid(1.5)), steps)
    assert np.abs(Q[:, :nq] - A).max() < 1e-12
    assert np.abs(Q[:, nq:] - B).max() < 1e-12
    for z in (Q[:, 2], Q[:, nq + 2]):  # both stand: base heights within 2 cm of the start
        assert np.abs(z - Z0).max() < 0.02
    assert np.isfinite(Q).all()


_DIGEST = """
import hashlib, sys
sys.path.insert(0, {test!r})
from test_multirobot import _pair, _run
from wb_sim import Simulator
print(hashlib.sha1(_run(Simulator.from_robots(_pair(0.9)), 1500).tobytes()).hexdigest())
"""


def test_bit_identical_in_this_and_a_fresh_process():
    def digest():
        import hashlib
        return hashlib.sha1(_run(Simulator.from_robots(_pair(0.9)), 1500).tobytes()).hexdigest()
    first = digest()
    assert digest() == first
    code = _DIGEST.format(test=str(ROOT / "test" / "core"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, cwd=str(ROOT / "test"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == first


def test_pushed_humanoid_moves_the_other_momentum_conserved():
    """Frictionless ground: the ground's forces are vertical (as gravity), the joints' and
    the robots' contact forces internal, so the pair's horizontal linear momentum stays
    what the push gave it while robot a runs into robot b. Measured (compliant law): the
    largest deviation 2.0e-3 of 60 N*s (3.3e-5 relative), over the 125 touching steps (up
    to 8e-4 N*s in one step, with 1.4 kN between the robots; the ground's horizontal force
    is 0): the articulated semi-implicit step's drift, the impulses being internal at the
    step's start configuration while the momentum is read at the next one (the humanoid
    alone on this ground: 4e-6; test_objects' box thrown at it: 0.17 % in 0.3 s); asserted
    1e-4 relative. Robot b, at rest before, moves along x after."""
    sim = Simulator.from_robots(_pair(0.75, **{"contact.friction_coefficient": 0.0}))
    b = sim.robots[1]
    force, steps_push = 600.0, 100  # 60 N*s along x on a's pelvis

    def push(s, k):
        if k == 0:
            s.apply_external_wrench("pelvis", [force, 0.0, 0.0], duration_s=steps_push * s.dt)

    laws = [PDGravityController(p.robot, sim.joint_positions[p.joints].copy(), 1000.0, 20.0,
                                sim.config.gravity) for p in sim.robots]
    momenta, touching = [], 0
    for k in range(1200):
        push(sim, k)
        q, qj, vj = sim.q, sim.joint_positions, sim.joint_velocities
        sim.step(sim.join_joints([law(q[p.q_slice], qj[p.joints], vj[p.joints])
                                  for law, p in zip(laws, sim.robots)]))
        if k >= steps_push:
            momenta.append(sim.centroidal_momentum()[1][:2].copy())
            touching += bool(np.abs(sim.self_collision_contacts().force).sum() > 1.0)
    p = np.array(momenta)
    assert np.isfinite(sim.q).all() and np.isfinite(p).all()
    px0 = p[0, 0]
    assert px0 == pytest.approx(force * steps_push * sim.dt, rel=0.02)
    assert touching > 10  # they touched, for more than 10 steps
    assert np.abs(p - p[0]).max() < 1e-4 * abs(px0)
    vb = sim.robot_base_pose("b").rotation @ sim.v[b.v_slice][:3]  # world axes
    assert vb[0] > 0.1  # robot b, at rest before, was pushed along x


def test_quadruped_beside_humanoid_both_stand():
    anymal = read_yaml_params(robot_config_file("anymal"))
    anymal.update({"initial.base_position": [0.0, 1.2, anymal["initial.base_position"][2]],
                   "imu.frame": "", "joints.armature": HUMANOID["joints.armature"],
                   "contact.reference_depth": HUMANOID.get("contact.reference_depth", 0.001)})
    sim = Simulator.from_robots([("humanoid", dict(HUMANOID)), ("anymal", anymal)])
    h, q4 = sim.robots
    assert q4.nj == 12 and q4.joint_names[0] == "LF_HAA"
    z0 = (sim.q[h.q_slice][2], sim.q[q4.q_slice][2])
    Q = _run(sim, 3000, kp=[1000.0, 200.0], kd=[20.0, 5.0])
    assert np.isfinite(Q).all()
    assert abs(Q[-1, h.q_slice][2] - z0[0]) < 0.02
    assert abs(Q[-1, q4.q_slice][2] - z0[1]) < 0.03
    assert abs(Q[-1, q4.q_slice][1] - 1.2) < 0.02  # the quadruped stays where it stood


def test_fixed_base_arm_beside_humanoid_moves_as_alone():
    """A fixed-base robot (the Panda, its base placed by its initial.base_*) appended after
    the humanoid: its trajectory under its own PD is its single simulator's (measured
    5e-17 rad over 1 s), the humanoid stands."""
    panda = read_yaml_params(robot_config_file("panda"))
    panda.update({"initial.base_position": [0.0, 1.0, 0.0],  # its own joints.* (armature)
                  "contact.reference_depth": HUMANOID.get("contact.reference_depth", 0.001),
                  "collision.enabled": True})
    with pytest.warns(UserWarning, match="mimics"):  # its own joints.mimic
        sim = Simulator.from_robots([("h", HUMANOID), ("arm", panda)])
        alone = Simulator.from_params(panda)
    arm = sim.robots[1]
    assert not arm.floating_base and arm.nj == alone.nj
    np.testing.assert_allclose(sim.robot_base_pose("arm").translation, [0.0, 1.0, 0.0])
    Q = _run(sim, 1000, kp=[1000.0, 100.0], kd=[20.0, 10.0])
    assert np.abs(Q[:, arm.q_slice] - _run(alone, 1000, kp=100.0, kd=10.0)).max() < 1e-12
    assert abs(Q[-1, 2] - Z0) < 0.02


def test_snapshot_spawn_and_reset_keep_every_robot():
    sim = Simulator.from_robots(_pair())
    q0 = sim.q.copy()
    for _ in range(50):
        sim.step(np.zeros(sim.nj))
    snap = sim.get_state()
    for _ in range(20):
        sim.step(np.zeros(sim.nj))
    q_a = sim.q.copy()
    sim.set_state(snap)
    for _ in range(20):
        sim.step(np.zeros(sim.nj))
    np.testing.assert_array_equal(sim.q, q_a)  # bit-identical replay
    sim.spawn_object("box", "box", [0.2, 0.2, 0.2], 1.0, [0.75, 0.0, 0.1])
    assert [p.name for p in sim.robots] == ["a", "b"]
    np.testing.assert_array_equal(sim.q[:q0.size], q_a)  # both robots carried over
    sim.reset()
    np.testing.assert_array_equal(sim.q[:q0.size], q0)
    sim.apply_external_wrench("b/pelvis", [10.0, 0.0, 0.0])
    sim.step(np.zeros(sim.nj))
    assert np.isfinite(sim.q).all()


def test_each_robot_reads_its_own_imu():
    """Robot b's IMU (its own imu.*, frame prefixed, read through pinocchio's frame
    kinematics) reads as the same humanoid alone (closed form on the base): 1e-9 asserted
    after 0.3 s of standing."""
    sim = Simulator.from_robots([("a", _humanoid(0.0)), ("b", _humanoid(1.5))])
    alone = Simulator.from_params(_humanoid(1.5))
    _run(sim, 300)
    _run(alone, 300)
    mine, ref = sim.robot_imu("b"), alone.imu()
    assert mine.frame == "b/imu_link"
    for f in ("orientation", "angular_velocity", "linear_acceleration"):
        np.testing.assert_allclose(getattr(mine, f), getattr(ref, f), rtol=0, atol=1e-9)
    assert np.linalg.norm(mine.linear_acceleration) == pytest.approx(9.81, abs=0.5)
    np.testing.assert_array_equal(sim.robot_imu("a").linear_acceleration,
                                  sim.imu().linear_acceleration)


def test_refusals():
    with pytest.raises(ConfigError, match="two robots named 'a'"):
        Simulator.from_robots([("a", _humanoid(0.0)), ("a", _humanoid(1.5, **{"imu.frame": ""}))])
    with pytest.raises(ConfigError, match="parameter 'physics_rate_hz'.*belongs to the world"):
        Simulator.from_robots([("a", _humanoid(0.0)),
                               ("b", _humanoid(1.5, **{"imu.frame": "",
                                                       "physics_rate_hz": 500.0}))])
    with pytest.raises(ConfigError, match="parameter 'contact.stiffness'.*belongs to the world"):
        Simulator.from_robots([("a", _humanoid(0.0)),
                               ("b", _humanoid(1.5, **{"imu.frame": "",
                                                       "contact.stiffness": 1e5}))])
    with pytest.raises(ConfigError, match=r"'payloads\.\w+': payloads is the first robot's "
                                          "only"):
        Simulator.from_robots([("a", _humanoid(0.0)), ("b", _humanoid(1.5, **{
            "payloads.names": ["p"], "payloads.links": ["pelvis"], "payloads.mass": [1.0],
            "payloads.com": [0.0, 0.0, 0.0]}))])
    with pytest.raises(ConfigError, match="'joints.command_delay_steps'.*one command delay "
                                          "line.*same value for every robot"):
        Simulator.from_robots([("a", _humanoid(0.0)),
                               ("b", _humanoid(1.5, **{"imu.frame": "",
                                                       "joints.command_delay_steps": 2}))])
    with pytest.raises(ConfigError, match="'sensors.delay_steps'.*same value for every robot"):
        Simulator.from_robots([("a", _humanoid(0.0)),
                               ("b", _humanoid(1.5, **{"imu.frame": "",
                                                       "sensors.delay_steps": 2}))])
    with pytest.raises(ConfigError, match="'collision.self_collision': not supported"):
        Simulator.from_robots(_pair(**{"collision.self_collision": True}))
    with pytest.raises(ConfigError, match="'sensors.delay_steps' is 2: not supported with "
                                          "several robots.*set it 0"):
        Simulator.from_robots([("a", _humanoid(0.0, **{"sensors.delay_steps": 2})),
                               ("b", _humanoid(1.5, **{"imu.frame": "",
                                                       "sensors.delay_steps": 2}))])
    sim = Simulator.from_robots(_pair())
    with pytest.raises(ConfigError, match="no robot named 'nobody'.*robots: a, b"):
        sim.robot_part("nobody")


#: robot-specific joints.* and actuators.* (issue 31: each robot its own)
_DRIVEN = {"joints.damping": [0.8], "joints.armature": [0.02], "actuators.model": "dc_motor",
           "actuators.bandwidth": [150.0], "actuators.viscous_friction": [1e-4]}
_DRAGGED = {"joints.friction": [0.6], "joints.damping": [0.3], "joints.armature": [0.05],
            "joints.effort_limit": [15.0], "joints.friction_velocity": 0.02}


def test_a_recording_of_several_robots_names_each_robots_drives():
    """A Recorder of two robots, the second (b) with DC motors: its drive table lists b's
    joints under their combined names ('b/...') with b's constants, the ones b has alone
    (it raised AttributeError on the combined drives)."""
    from wb_sim.tools.recording import Recorder, drive_parameters

    pa, pb = _humanoid(0.0), _humanoid(1.5, **{"imu.frame": "", **_DRIVEN})
    sim = Simulator.from_robots([("a", pa), ("b", pb)])
    model, names, constants = drive_parameters(sim.actuators)
    alone_model, alone_names, alone_constants = drive_parameters(
        Simulator.from_params(pb).actuators)
    assert model == alone_model == "dc_motor"
    assert names == tuple(f"b/{n}" for n in alone_names) and len(names) == 23
    np.testing.assert_array_equal(constants, alone_constants)
    rec = Recorder(sim)
    for _ in range(3):
        sim.step(np.zeros(sim.nj))
        rec.record()
    assert np.isfinite(sim.q).all()


def test_each_robot_its_own_joints_and_actuators():
    """Robot a with a DC motor model (torque loop, back-EMF envelope, reflected viscous
    friction) and its own damping and armature, robot b ideal with its own friction,
    damping, armature and effort limits (saturating its PD): each robot's trajectory equals
    the single simulator built with its own parameters (independent run; measured 6.7e-16
    and 4.4e-16 over 0.4 s, asserted 1e-12), and each of those values changes that robot's
    motion alone (so each robot's own values are what acted); a's drives read as alone,
    b's read NaN (ideal)."""
    steps = 400
    pa, pb = _humanoid(0.0, **_DRIVEN), _humanoid(1.5, **{"imu.frame": "", **_DRAGGED})
    sim = Simulator.from_robots([("a", pa), ("b", pb)])
    Q = _run(sim, steps)
    a, b = sim.robots
    alone_a, alone_b = Simulator.from_params(pa), Simulator.from_params(pb)
    A, B = _run(alone_a, steps), _run(alone_b, steps)
    assert np.abs(Q[:, a.q_slice] - A).max() < 1e-12
    assert np.abs(Q[:, b.q_slice] - B).max() < 1e-12
    # each value acted: the robot alone without it moves otherwise (measured: effort limit
    # 2.5e-5, damping 7e-5, friction 8e-4, armature 3e-2, the DC motor model 4e-4)
    for params, ref, key in ((pb, B, "joints.effort_limit"), (pb, B, "joints.damping"),
                             (pb, B, "joints.friction"), (pb, B, "joints.armature"),
                             (pa, A, "actuators.model")):
        other = {k: v for k, v in params.items() if k != key}
        assert np.abs(_run(Simulator.from_params(other), steps) - ref).max() > 1e-5, key
    np.testing.assert_array_equal(sim.actuation.effort_limit[b.joints], 15.0)
    np.testing.assert_array_equal(sim.actuation.effort_limit[a.joints],
                                  alone_a.actuation.effort_limit)
    mine, ref = sim.actuator_readings, alone_a.actuator_readings
    np.testing.assert_allclose(mine.current[a.joints], ref.current, rtol=0, atol=1e-9)
    np.testing.assert_allclose(mine.temperature[a.joints], ref.temperature, rtol=0, atol=1e-9)
    assert np.isnan(mine.current[b.joints]).all()
    assert np.isfinite(Q).all()
    snap = sim.get_state()  # the drives' state (a's columns) replays with the snapshot
    for _ in range(20):
        sim.step(np.zeros(sim.nj))
    q1, temp1 = sim.q.copy(), sim.actuator_readings.temperature
    sim.set_state(snap)
    for _ in range(20):
        sim.step(np.zeros(sim.nj))
    np.testing.assert_array_equal(sim.q, q1)
    np.testing.assert_array_equal(sim.actuator_readings.temperature, temp1)


def test_each_robot_its_own_position_limits():
    """Both humanoids fall limp (zero torques) onto their joint stops: robot b with its own
    limit time constant and damping ratio (then: no position limits at all) beside robot a
    with the defaults; each falls as alone (measured 1.5e-13 over 0.8 s: the stops of both
    robots solved in one system, the rounding grown by the fall; asserted 1e-11), and b's
    values change its fall by decimetres (they acted)."""
    def limp(sim, steps=800):
        out = np.empty((steps, sim.model.nq))
        for k in range(steps):
            sim.step(np.zeros(sim.nj))
            out[k] = sim.q
        return out

    pa = _humanoid(0.0)
    A = limp(Simulator.from_params(pa))
    B0 = limp(Simulator.from_params(_humanoid(1.5, **{"imu.frame": ""})))
    for own in ({"joints.limit_time_constant": 0.01, "joints.limit_damping_ratio": 0.5},
                {"joints.position_limits": False}):
        pb = _humanoid(1.5, **{"imu.frame": "", **own})
        sim = Simulator.from_robots([("a", pa), ("b", pb)])
        a, b = sim.robots
        Q, B = limp(sim), limp(Simulator.from_params(pb))
        assert np.abs(Q[:, a.q_slice] - A).max() < 1e-11
        assert np.abs(Q[:, b.q_slice] - B).max() < 1e-11
        assert np.abs(B - B0).max() > 0.1, own


def test_a_bad_per_robot_value_names_the_robot_and_the_key():
    with pytest.raises(ConfigError, match=r"robot 'b' \(robots\[1\]\).*'joints.damping'"):
        Simulator.from_robots(_pair()[:1] + [("b", _humanoid(1.5, **{
            "imu.frame": "", "joints.damping": [-1.0]}))])
    with pytest.raises(ConfigError, match=r"robot 'b' \(robots\[1\]\).*'joints.friction' "
                                          r"has 2 values; expected 1 or one per"):
        Simulator.from_robots(_pair()[:1] + [("b", _humanoid(1.5, **{
            "imu.frame": "", "joints.friction": [0.1, 0.2]}))])
    with pytest.raises(ModelError, match=r"robot 'a' \(robots\[0\]\).*'actuators.joints': "
                                          "unknown joint 'nope'"):
        Simulator.from_robots([("a", _humanoid(0.0, **{"actuators.model": "dc_motor",
                                                       "actuators.joints": ["nope"]})),
                               _pair()[1]])


WORLD = """
world:
  physics_rate_hz: 1000.0
  robots:
    - name: alpha
      robot: humanoid
    - name: {second}
      robot: humanoid
      initial: {{base_position: [1.5, 0.0, 0.696882]}}
      parameters: {{{params}}}
"""


def test_world_file_with_two_robots(tmp_path):
    from wb_sim.world import load_world
    path = tmp_path / "two.yaml"
    path.write_text(WORLD.format(second="beta", params="imu: {frame: ''}"))
    sim = Simulator.from_world(path)
    assert [p.name for p in sim.robots] == ["alpha", "beta"]
    np.testing.assert_allclose(sim.robot_base_pose("beta").translation, [1.5, 0.0, 0.696882])
    with pytest.raises(ConfigError, match="lists 2 robots; this reads one .*load_world_robots"):
        load_world(path)
    # wb_sim_run --world serves both (test/ros/test_multirobot_node.py), one controller
    # process each: an in-process controller is refused in one line, exit status 2, before
    # anything starts
    out = subprocess.run([sys.executable, "-c", "import sys; from wb_sim.ros.run import main; "
                          f"sys.exit(main(['--world', {str(path)!r}, '--duration', '1', "
                          f"'--controller', 'wb_sim.controllers:pd_gravity']))"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "robot 'alpha': controller 'wb_sim.controllers:pd_gravity': " \
        "with several robots each robot's controller is 'pd'" in lines[0], out.stderr
    path.write_text(WORLD.format(second="alpha", params="imu: {frame: ''}"))
    with pytest.raises(ConfigError, match=r"'world.robots\[1\].name': two robots named 'alpha'"):
        Simulator.from_world(path)
    path.write_text(WORLD.format(second="beta", params="imu: {frame: ''}, jonts: {armature: [1]}"))
    with pytest.raises(ConfigError, match="jonts"):
        Simulator.from_world(path)
    path.write_text(WORLD.format(second="beta", params="imu: {frame: ''}") + "      robto: x\n")
    with pytest.raises(ConfigError, match=r"unknown key 'world.robots\[1\].robto'"):
        Simulator.from_world(path)
    # the second robot's own joints.* and actuators.* from its entry's parameters
    path.write_text(WORLD.format(second="beta", params="imu: {frame: ''}, joints: {damping: "
                                 "[0.5]}, actuators: {model: dc_motor}"))
    sim = Simulator.from_world(path)
    alpha, beta = sim.robots
    np.testing.assert_array_equal(sim.actuation.damping[beta.joints], 0.5)
    np.testing.assert_array_equal(sim.actuation.damping[alpha.joints],
                                  Simulator.from_params(HUMANOID).actuation.damping)
    assert np.isnan(sim.actuator_readings.current[alpha.joints]).all()
    assert not np.isnan(sim.actuator_readings.temperature[beta.joints]).any()
    path.write_text(WORLD.format(second="beta", params="joints: {friction: [-1.0]}"))
    with pytest.raises(ConfigError, match=r"'joints.friction': every entry must be >= 0.*"
                                          r"world.robots\[1\].parameters.joints.friction"):
        Simulator.from_world(path)
    path.write_text(WORLD.format(second="beta", params="joints: {command_delay_steps: 3}"))
    with pytest.raises(ConfigError, match=r"'world.robots\[1\]' \('beta'\): parameter "
                                          r"'joints.command_delay_steps'.*one command delay"):
        Simulator.from_world(path)
    path.write_text(WORLD.format(second="beta", params="physics_rate_hz: 500.0"))
    with pytest.raises(ConfigError, match=r"'world.robots\[1\].parameters.physics_rate_hz' "
                                          r"belongs to the world"):
        Simulator.from_world(path)


def test_node_parameters_keep_each_robots_joints(tmp_path):
    """On the node (wb_sim.ros.robots.fleet_params) the others' parameters come from the
    world file: a robot's own joints.* stay its own, while the node's override of a
    one-value key (joints.command_delay_steps) reaches every robot (else it would refuse)."""
    from wb_sim.ros.robots import fleet_params
    from wb_sim.world import load_world_robots
    path = tmp_path / "two.yaml"
    path.write_text(WORLD.format(second="beta", params="imu: {frame: ''}, joints: {damping: "
                                 "[0.5]}"))
    flat0 = dict(load_world_robots(path)[0][0], **{"joints.command_delay_steps": 3,
                                                   "joints.damping": [0.2]})
    (_, alpha), (_, beta) = fleet_params(str(path), flat0)
    assert (alpha["joints.damping"], beta["joints.damping"]) == ([0.2], [0.5])
    assert beta["joints.command_delay_steps"] == 3
    sim = Simulator.from_robots([("alpha", alpha), ("beta", beta)])
    np.testing.assert_array_equal(sim.actuation.damping, [0.2] * 23 + [0.5] * 23)
