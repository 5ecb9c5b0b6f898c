"""CoP and ZMP during a push: the standing humanoid (shipped PD) pushed on its base by
60 N forward, 20 N sideways and 5 N*m about z for 0.15 s; at each of 200 steps from the
push on, the ZMP of the contact forces (their total force and moment, on the plane of their
centre of pressure) equals the ZMP of the centroidal dynamics: pinocchio's rate of
centroidal momentum at the step's start (computeCentroidalMomentumTimeVariation with the
step's acceleration) minus gravity and the push.

Measured: the two ZMPs agree within 5e-15 m (required: 1e-9 m) on both grounds, while the
push moves the ZMP by 12 cm forward and 5-6 cm sideways; the centre of pressure of the
normal forces (sum f_n p / sum f_n: contact_state's ZMP) equals them within 2.4e-8 m on the
rigid ground (required 1e-6 m) and 3.5e-5 m on the compliant one (required 2e-4 m: its points
sit at different depths, so the tangential forces' moment arms differ by up to a
millimetre)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from helpers.robots import make_humanoid, shipped_controller

PUSH_FORCE, PUSH_TORQUE, PUSH_S = [60.0, 20.0, 0.0], [0.0, 0.0, 5.0], 0.15
COP_TOLERANCE = {"rigid": 1e-6, "compliant": 2e-4}


def _plane_zmp(force, moment_origin, z0):
    """The point (x, y) on the plane z = z0 about which the wrench (force, moment about the
    world origin) has no horizontal moment."""
    return np.array([(z0 * force[0] - moment_origin[1]) / force[2],
                     (moment_origin[0] + z0 * force[1]) / force[2]])


def _step_acceleration(sim, q0, v0, v1, q1):
    """The step's acceleration in pinocchio's convention at (q0, v0): the step integrates
    the base's world linear velocity, so d/dt (R^T v_world) = R^T a_world - w x v_base."""
    R0, R1 = pin.Quaternion(q0[3:7]).matrix(), pin.Quaternion(q1[3:7]).matrix()
    vs0, vs1 = v0.copy(), v1.copy()
    vs0[:3], vs1[:3] = R0 @ v0[:3], R1 @ v1[:3]
    a = (vs1 - vs0) / sim.dt
    a[:3] = R0.T @ a[:3] - np.cross(v0[3:6], v0[:3])
    return a


@pytest.mark.parametrize("law", ["rigid", "compliant"])
def test_zmp_of_the_contact_forces_is_the_centroidal_zmp_during_a_push(law):
    sim = make_humanoid(**{"contact.model": law})
    ctrl = shipped_controller(sim)

    def torques():
        return ctrl(sim.q, sim.joint_positions, sim.joint_velocities)
    for _ in range(500):  # standing
        sim.step(torques())
    sim.apply_external_wrench(sim.robot.root_link, PUSH_FORCE, PUSH_TORQUE, duration_s=PUSH_S)
    model, data = sim.model, sim.model.createData()
    mass, gravity = sim.mass, np.array(sim.config.gravity)
    zmps, worst, worst_cop, pushed = [], 0.0, 0.0, 0
    for _ in range(200):
        q0, v0 = np.array(sim.q), np.array(sim.v)
        pushes = sim.external_wrenches  # those acting during this step
        sim.step(torques())
        a = _step_acceleration(sim, q0, v0, np.array(sim.v), np.array(sim.q))
        dh = pin.computeCentroidalMomentumTimeVariation(model, data, q0, v0, a)
        com = data.com[0].copy()
        pin.framesForwardKinematics(model, data, q0)
        force, moment = dh.linear - mass * gravity, dh.angular.copy()  # about the CoM
        for frame, wrench, _ in pushes:  # the push's share, world axes, about the CoM
            X = data.oMf[model.getFrameId(frame)]
            f, t = X.rotation @ wrench[:3], X.rotation @ wrench[3:]
            force -= f
            moment -= t + np.cross(X.translation - com, f)
        pushed += bool(pushes)
        moment_origin = moment + np.cross(com, force)
        # the contact forces' own wrench (the surfaces' points at the step's start, and the
        # other links' total, which is zero while the robot stands on its feet)
        r = sim.contact_points_state()
        P, F = r.position, r.force
        links = sim.collision_wrench_array()
        assert np.abs(links).max() == 0.0
        fn = F[:, 2]  # flat ground: the normal is z
        assert fn.sum() > 0.5 * mass * 9.81
        cop = fn @ P / fn.sum()
        z0 = cop[2]
        zmp = _plane_zmp(force, moment_origin, z0)
        zmp_contact = _plane_zmp(F.sum(axis=0), np.cross(P, F).sum(axis=0), z0)
        worst = max(worst, np.abs(zmp - zmp_contact).max())
        worst_cop = max(worst_cop, np.abs(zmp - cop[:2]).max())
        zmps.append(zmp)
    zmps = np.array(zmps)
    assert pushed == round(PUSH_S / sim.dt)
    assert worst < 1e-9, worst
    assert worst_cop < COP_TOLERANCE[law], worst_cop
    span = zmps.max(axis=0) - zmps.min(axis=0)
    assert span[0] > 0.05 and span[1] > 0.02, span  # the push moved the ZMP
    assert sim.q[2] > 0.6  # still standing
