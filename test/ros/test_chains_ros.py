"""A closed-chain MJCF robot through the node, over real DDS: the parallel-ankle leg
(``test/helpers/mjcf_robots.py``: two rods closing the ankle's loops by ``<equality>
<connect>``, drawn geoms), in lockstep, answered by a PD on its two cranks plus seeded
noise. The core, from the same parameters file and the same law:

* every ``loop_closures`` message (one labelled row [force, torque] per closure) equals the
  core's ``loop_closure_wrenches`` after the same steps, bit for bit;
* a payload attached through ``~/attach_payload`` between two lockstep cycles gives the
  joint states of the core's ``attach_payload`` at the same step, bit for bit (and a run
  without it ends elsewhere); bad requests are refused with what to fix, changing nothing;
  ``~/detach_payload`` takes it off;
* ``robot_description`` is the URDF written from the MJCF model
  (``RobotModel.description_urdf``), and TF carries the leg's links and the closures'
  anchors; the transforms of the TF tree compose to pinocchio's frame placements.

Skipped without rclpy unless ``WB_SIM_REQUIRE_ROS=1``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pinocchio as pin
import pytest
import yaml

from helpers.extras import require_ros

require_ros("sensor_msgs.msg", "std_msgs.msg", "tf2_msgs.msg", "wb_sim_interfaces.srv")

from geometry_msgs.msg import Vector3  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from std_msgs.msg import Float64MultiArray, String  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from wb_sim_interfaces.srv import AttachPayload, DetachPayload  # noqa: E402

import wb_sim  # noqa: E402
from helpers.mjcf_robots import ankle_leg_params  # noqa: E402
from helpers.ros import LockstepController, SimSetup  # noqa: E402
from wb_sim.ros.conversions import read_loop_closures  # noqa: E402
from wb_sim.ros.frames import FrameTree  # noqa: E402

STATE_QOS = QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
BEFORE, AFTER = 60, 60  # lockstep cycles before and after the payload is attached
CRANKS = ("crank_l", "crank_r")
NOISE = np.random.default_rng(29).normal(0.0, 0.5, (BEFORE + AFTER + 2, 2))
PAYLOAD = {"name": "tool", "link": "shank", "mass": 1.5, "com": [0.05, 0.0, 0.3],
           "inertia": [0.002, 0.0, 0.0, 0.003, 0.0, 0.001]}


def _nested(flat: dict) -> dict:
    out: dict = {}
    for key, value in flat.items():
        *head, last = key.split(".")
        d = out
        for h in head:
            d = d.setdefault(h, {})
        d[last] = value
    return out


@pytest.fixture(scope="module")
def params_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("chains_params")
    params = ankle_leg_params(d / "ankle_leg.xml")
    path = d / "ankle_leg.yaml"
    path.write_text(yaml.safe_dump({"wb_sim": {"ros__parameters": _nested(params)}}))
    return path


def _core(params_file):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the passive joints
        return wb_sim.Simulator.from_yaml(params_file)


def _law_for(names):
    idx = [list(names).index(c) for c in CRANKS]

    def law(i, qj, vj, q, offset=0):
        tau = np.zeros(len(qj))
        tau[idx] = -40.0 * qj[idx] - 2.0 * vj[idx] + NOISE[i + offset]
        return {"effort": tau}
    return law


def _payload(s, service, **fields):
    """``~/attach_payload`` or ``~/detach_payload`` with ``fields`` (PAYLOAD's keys)."""
    if service == "attach":
        kind = AttachPayload
        fields = {**fields, "mass": float(fields.get("mass", 0.0)),
                  "com": Vector3(**dict(zip("xyz", map(float, fields.get("com", [0.0] * 3))))),
                  "inertia": [float(x) for x in fields.get("inertia", [0.0] * 6)]}
    else:
        kind = DetachPayload
    return s.ros.call(kind, f"/wb_sim/{service}_payload", kind.Request(**fields))


@pytest.fixture(scope="module")
def run(tmp_path_factory, params_file):
    s = SimSetup(tmp_path_factory.mktemp("chains_ros"), "sync.mode:=lockstep",
                 "real_time_factor:=0.0", "sync.timeout_s:=0.0", params_file=params_file)
    try:
        ros = s.ros
        closures = ros.record(Float64MultiArray, "loop_closures", STATE_QOS)
        desc = ros.record(String, "robot_description", LATCHED_QOS)
        static = ros.record(TFMessage, "/tf_static", LATCHED_QOS)
        tf = ros.record(TFMessage, "/tf", QoSProfile(depth=100,
                                                     reliability=ReliabilityPolicy.RELIABLE))
        ros.spin_for(0.5)  # the node sees the subscribers (it looks every 50 ms)
        names = _core(params_file).joint_names
        law = _law_for(names)
        first = LockstepController(s, law, BEFORE)
        before = first.run(s)
        refusals = {
            "unknown link": _payload(s, "attach", **{**PAYLOAD, "link": "shin"}),
            "bad inertia": _payload(s, "attach", **{**PAYLOAD, "inertia": [1, 0, 0, 1, 0, 3]}),
            "negative mass": _payload(s, "attach", **{**PAYLOAD, "mass": -1.0}),
            "no mass": _payload(s, "attach", **{**PAYLOAD, "mass": 0.0}),
            "detach unknown": _payload(s, "detach", name="nothing"),
        }
        attached = _payload(s, "attach", **PAYLOAD)
        second = LockstepController(s, lambda i, *a: law(i + BEFORE, *a), AFTER, reset=False)
        after = second.run(s)
        detached = _payload(s, "detach", name="tool")
        stamps = first.stamps[:BEFORE + 1] + second.stamps[1:AFTER + 1]
        ros.spin_until(lambda: stamps[-1] in {read_loop_closures(m)[0] for m in closures.msgs},
                       10.0)
        ros.spin_until(lambda: bool(desc.msgs) and bool(static.msgs) and bool(tf.msgs), 10.0)
        out = {"states": before + after[1:], "stamps": stamps, "seam": (before[-1], after[0]),
               "closures": {read_loop_closures(m)[0]: read_loop_closures(m)[1]
                            for m in closures.msgs},
               "refusals": refusals, "attached": attached, "detached": detached,
               "description": desc.msgs[0].data if desc.msgs else None,
               "static": {t.child_frame_id: t.header.frame_id
                          for m in static.msgs for t in m.transforms},
               "tf_children": {t.child_frame_id for m in tf.msgs for t in m.transforms}}
        ros.stop_recording(closures, desc, static, tf)
    finally:
        s.close()
    return out


def _replay(params_file, attach_at: int | None):
    """The core driven by the same law, the payload attached after ``attach_at`` steps;
    yields (cycle, core) before each step."""
    core = _core(params_file)
    law = _law_for(core.joint_names)
    for i in range(BEFORE + AFTER + 1):
        if i == attach_at:
            p = PAYLOAD
            ixx, ixy, ixz, iyy, iyz, izz = p["inertia"]
            core.attach_payload(p["link"], p["mass"], p["com"],
                                [[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]],
                                name=p["name"])
        yield i, core
        if i < BEFORE + AFTER:
            core.step(law(i, core.joint_positions, core.joint_velocities, core.q)["effort"])


def test_payload_attached_through_the_service_equals_the_cores(run, params_file):
    assert run["attached"].success, run["attached"].message
    assert "attached payload 'tool' (1.5 kg) to 'shank'" in run["attached"].message
    assert run["detached"].success and "detached payload 'tool'" in run["detached"].message
    for a, b in zip(*run["seam"]):  # the second run went on from the first's last state
        assert np.array_equal(a, b)
    states = run["states"]
    assert len(states) == BEFORE + AFTER + 1
    for i, core in _replay(params_file, BEFORE):
        qj, vj, effort = states[i][:3]
        assert np.array_equal(qj, core.joint_positions), i
        assert np.array_equal(vj, core.joint_velocities), i
        if i:
            assert np.array_equal(effort, core.applied_torques), i
    assert [p.name for p in core.payloads] == ["tool"]
    # without the payload (or with it a step late) the run ends elsewhere
    for attach_at in (None, BEFORE + 1):
        for i, other in _replay(params_file, attach_at):
            pass
        assert np.abs(states[-1][0] - other.joint_positions).max() > 1e-9, attach_at


def test_bad_payload_requests_are_refused_saying_why(run):
    r = run["refusals"]
    assert all(not x.success for x in r.values())
    assert "link 'shin' is not in the model" in r["unknown link"].message
    assert "shank" in r["unknown link"].message  # the closest name
    assert "triangle inequality" in r["bad inertia"].message
    assert "negative mass -1 kg" in r["negative mass"].message
    assert "without mass cannot have an inertia" in r["no mass"].message
    assert "no payload named 'nothing'" in r["detach unknown"].message


def test_loop_closure_wrenches_equal_the_cores(run, params_file):
    compared = 0
    for i, core in _replay(params_file, BEFORE):
        if i:  # the wrenches of the step that led to this state
            got = run["closures"].get(run["stamps"][i])
            assert got is not None, i
            assert list(got) == list(core.loop_closures.names)
            want = core.loop_closure_wrenches
            assert np.array_equal(np.array([got[n] for n in core.loop_closures.names]), want), i
            compared += 1
    assert compared == BEFORE + AFTER
    # the rods carry the leg's weight above the ankle: tens of newtons
    assert np.abs(want[:, :3]).max() > 5.0


def test_robot_description_and_tf_of_the_mjcf_leg(run, params_file):
    core = _core(params_file)
    robot = core.robot
    assert run["description"] == robot.description_urdf
    assert run["description"].lstrip().startswith("<?xml") and "<mujoco" not in run["description"]
    # the moving links on /tf, the closures' anchors on /tf_static
    assert {"foot", "cross", "shank", "crank_l", "rod_l_u", "rod_l", "rod_r"} <= \
        run["tf_children"]
    for kind, a, b in robot.closures:
        assert a in run["static"] and b in run["static"], (a, b)
    # the TF tree composes to pinocchio's placements (a closed, bent configuration)
    tree = FrameTree(robot, "world", pin.SE3.Identity())
    q = pin.randomConfiguration(robot.model, -np.ones(robot.model.nq),
                                np.ones(robot.model.nq))
    placed = {"world": pin.SE3.Identity()}
    edges = [(t.parent, t.child, pin.XYZQUATToSE3(np.r_[t.translation, t.rotation]))
             for t in tree.static_transforms() + tree.moving_transforms(q)]
    while len(placed) < len(edges) + 1:
        for p, c, M in edges:
            if p in placed and c not in placed:
                placed[c] = placed[p] * M
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)
    worst = max(np.abs(placed[f.name].homogeneous - data.oMf[i].homogeneous).max()
                for i, f in enumerate(robot.model.frames)
                if f.type in (pin.FrameType.BODY, pin.FrameType.OP_FRAME))
    assert worst < 1e-12, worst
