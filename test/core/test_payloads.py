"""Payloads (Simulator.attach_payload / detach_payload, parameters payloads.*) against an
independent model: the same URDF with the payload written in as one more link, welded to the
hand by a fixed joint (pinocchio merges it into the hand's body when it parses the URDF).

Figures when written (Panda, 2 kg on panda_hand, an off-diagonal inertia): the holding
torques equal RNEA of the edited URDF bit for bit (0.0 N*m), M(q) its crba to 1.1e-16; the
acceleration under them is 1.9e-13 rad/s^2 (a step from rest: |qdot| 1.9e-16 rad/s); detaching
gives M(q), g(q) and every body inertia back bit for bit. The humanoid with a 5 kg crate on its
torso (not in its controller's model) stands 5 s: the base sinks 3.2 mm, tilts 0.29 deg, and
the feet carry (m + 5 kg) g to 3e-7.
"""

from __future__ import annotations

import warnings

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.errors import CommandError, ConfigError, ModelError

from helpers.extras import require_robot_data
from helpers.robots import CRATE, crate_stand

MASS = 2.0
COM = (0.01, -0.02, 0.08)  # m, panda_hand frame
INERTIA = np.array([[0.02, 0.001, -0.002], [0.001, 0.015, 0.0005], [-0.002, 0.0005, 0.01]])


def with_payload_link(urdf_xml: str, link: str, mass=MASS, com=COM, inertia=INERTIA) -> str:
    """The URDF with one more link holding the payload's inertial, welded to ``link``."""
    (ixx, ixy, ixz), (_, iyy, iyz), (_, _, izz) = np.asarray(inertia, dtype=float).tolist()
    x, y, z = (float(c) for c in com)
    mass = float(mass)
    extra = (f'<link name="payload_ref"><inertial><origin xyz="{x!r} {y!r} {z!r}" rpy="0 0 0"/>'
             f'<mass value="{mass!r}"/><inertia ixx="{ixx!r}" ixy="{ixy!r}" ixz="{ixz!r}" '
             f'iyy="{iyy!r}" iyz="{iyz!r}" izz="{izz!r}"/></inertial></link>'
             f'<joint name="payload_ref_joint" type="fixed"><parent link="{link}"/>'
             f'<child link="payload_ref"/><origin xyz="0 0 0" rpy="0 0 0"/></joint>')
    head, tail = urdf_xml.rsplit("</robot>", 1)
    return head + extra + "</robot>" + tail


def panda(**overrides) -> wb_sim.Simulator:
    require_robot_data("panda")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*mimics", category=UserWarning)
        return wb_sim.Simulator.from_yaml(wb_sim.config_path("panda"), overrides=overrides)


def reference_model(sim) -> tuple[pin.Model, pin.Data]:
    """The Panda with the payload as a URDF link: its own parse, the simulator's armature."""
    model = pin.buildModelFromXML(with_payload_link(sim.robot.urdf_xml, "panda_hand"))
    model.gravity = sim.model.gravity
    model.armature[:] = sim.model.armature
    return model, model.createData()


@pytest.fixture()
def arm():
    sim = panda()
    q = sim.q.copy()
    q[:7] += np.array([0.3, 0.2, -0.4, 0.1, 0.5, -0.3, 0.2])  # away from the symmetric pose
    sim.set_state(_at(sim, q))
    return sim


def _at(sim, q):
    """A snapshot of ``sim`` at rest at ``q``."""
    import dataclasses

    from wb_sim.state import copy_record
    snap = sim.get_state()
    rec = copy_record(snap.record)
    q = np.array(q)
    q.setflags(write=False)
    rec.q = rec.q_prev = q
    return dataclasses.replace(snap, record=rec)


def test_holding_torques_and_mass_matrix_equal_the_model_with_the_payload_as_a_body(arm):
    sim = arm
    M0, g0 = sim.mass_matrix(), sim.generalized_gravity()
    sim.attach_payload("panda_hand", MASS, COM, INERTIA, name="box")
    model, data = reference_model(sim)
    q, zero = sim.q, np.zeros(sim.model.nv)
    hold = pin.rnea(model, data, q, zero, zero)
    assert np.abs(sim.generalized_gravity() - hold).max() < 1e-9
    assert np.abs(sim.gravity_torques() - hold[sim.robot.idx_v]).max() < 1e-9
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    assert np.abs(sim.mass_matrix() - M).max() < 1e-9
    assert np.abs(M - M0).max() > 0.1 and np.abs(hold - g0).max() > 5.0  # the payload counts
    assert sim.mass == pytest.approx(pin.computeTotalMass(model),  # link0 (welded) left out
                                     abs=1e-12)
    # the torques that hold it: a step from rest under them stays at rest
    a = sim.forward_dynamics(hold[sim.robot.idx_v])
    assert np.abs(a).max() < 1e-9
    sim.step(hold[sim.robot.idx_v])
    assert np.abs(sim.v).max() < 1e-11


def test_the_step_follows_the_urdf_with_the_payload_written_in(arm):
    sim = arm
    sim.attach_payload("panda_hand", MASS, COM, INERTIA)
    ref = panda(urdf_path="", robot_description=with_payload_link(sim.robot.urdf_xml,
                                                                      "panda_hand"))
    ref.set_state(_at(ref, sim.q))
    tau = np.zeros(sim.nj)
    tau[:7] = [5.0, -3.0, 2.0, 1.0, -0.5, 0.3, 0.2]
    for _ in range(300):
        sim.step(tau)
        ref.step(tau)
    assert np.abs(sim.q - ref.q).max() < 1e-10
    assert np.abs(sim.v - ref.v).max() < 1e-8
    assert np.abs(sim.q - arm.q).max() == 0.0 and np.abs(sim.v).max() > 0.1  # it moved


def test_detaching_restores_the_model_bit_for_bit(arm):
    sim = arm
    M0, g0, mass0 = sim.mass_matrix(), sim.generalized_gravity(), sim.mass
    inertias0 = [Y.toDynamicParameters().copy() for Y in sim.model.inertias]
    sim.attach_payload("panda_hand", MASS, COM, INERTIA, name="a")
    sim.attach_payload("panda_link5", 0.7, (0.0, 0.05, 0.0), np.eye(3) * 1e-3, name="b")
    assert [p.name for p in sim.payloads] == ["a", "b"]
    assert sim.mass == pytest.approx(mass0 + 2.7, abs=1e-12)
    sim.detach_payload("a")
    sim.detach_payload("b")
    assert sim.payloads == ()
    assert np.array_equal(sim.mass_matrix(), M0) and np.array_equal(sim.generalized_gravity(), g0)
    assert sim.mass == mass0
    for Y, p0 in zip(sim.model.inertias, inertias0):
        assert np.array_equal(Y.toDynamicParameters(), p0)


def test_payloads_are_part_of_the_snapshot_and_reset_goes_back_to_the_configured_ones(arm):
    sim = arm
    M0 = sim.mass_matrix()
    sim.attach_payload("panda_hand", MASS, COM, INERTIA, name="box")
    M1 = sim.mass_matrix()
    with_box = sim.get_state()
    sim.detach_payload("box")
    without = sim.get_state()
    sim.set_state(with_box)
    assert [p.name for p in sim.payloads] == ["box"] and np.array_equal(sim.mass_matrix(), M1)
    # the same future from the snapshot, twice
    tau = np.full(sim.nj, 0.5)
    runs = []
    for _ in range(2):
        sim.set_state(with_box)
        for _ in range(50):
            sim.step(tau)
        runs.append(sim.q.copy())
    assert np.array_equal(runs[0], runs[1])
    sim.set_state(without)
    assert sim.payloads == () and np.array_equal(sim.mass_matrix(), M0)
    sim.attach_payload("panda_hand", MASS, COM, INERTIA, name="box")
    sim.reset()
    assert sim.payloads == ()


def test_configured_payloads_equal_attached_ones():
    params = {"payloads.names": ["box"], "payloads.links": ["panda_hand"],
              "payloads.mass": [MASS], "payloads.com": list(COM),
              "payloads.inertia": [INERTIA[0, 0], INERTIA[0, 1], INERTIA[0, 2], INERTIA[1, 1],
                                   INERTIA[1, 2], INERTIA[2, 2]]}
    configured = panda(**params)
    attached = panda()
    attached.attach_payload("panda_hand", MASS, COM, INERTIA, name="box")
    assert configured.payloads == attached.payloads
    assert np.array_equal(configured.mass_matrix(), attached.mass_matrix())
    configured.detach_payload("box")
    configured.reset()
    assert [p.name for p in configured.payloads] == ["box"]


def test_the_humanoid_carrying_a_payload_stands():
    got = crate_stand()
    assert got["mass"] == pytest.approx(got["bare_mass"] + CRATE, abs=1e-12)
    assert abs(got["drop"]) < 0.02 and got["tilt_deg"] < 3.0
    assert abs(got["carried"]) < 1e-3  # the crate is carried


def test_bad_payloads_are_typed_errors(arm):
    sim = arm
    with pytest.raises(ModelError, match="did you mean 'panda_hand'"):
        sim.attach_payload("panda_hnd", 1.0)
    with pytest.raises(CommandError, match="negative mass"):
        sim.attach_payload("panda_hand", -1.0)
    with pytest.raises(CommandError, match="not positive semi-definite"):
        sim.attach_payload("panda_hand", 1.0, inertia=np.diag([0.01, -0.01, 0.01]))
    with pytest.raises(CommandError, match="triangle inequality"):
        sim.attach_payload("panda_hand", 1.0, inertia=np.diag([0.01, 0.01, 0.05]))
    with pytest.raises(CommandError, match="not symmetric"):
        sim.attach_payload("panda_hand", 1.0, inertia=[[0.01, 0.002, 0], [0, 0.01, 0],
                                                        [0, 0, 0.01]])
    with pytest.raises(CommandError, match="non-finite"):
        sim.attach_payload("panda_hand", 1.0, com=(0.0, np.nan, 0.0))
    with pytest.raises(ModelError, match="welded to the world"):
        sim.attach_payload("panda_link0", 1.0)
    sim.attach_payload("panda_hand", 1.0, name="crate")
    with pytest.raises(CommandError, match="attached already"):
        sim.attach_payload("panda_hand", 1.0, name="crate")
    with pytest.raises(CommandError, match="did you mean 'crate'"):
        sim.detach_payload("crat")
    assert [p.name for p in sim.payloads] == ["crate"]  # the failures changed nothing
    with pytest.raises(ConfigError, match="payloads.com"):
        panda(**{"payloads.names": ["a"], "payloads.links": ["panda_hand"],
                 "payloads.mass": [1.0], "payloads.com": [0.0, 0.0]})
    with pytest.raises(ModelError, match="payloads.names.*did you mean 'panda_hand'"):
        panda(**{"payloads.names": ["a"], "payloads.links": ["panda_hnd"],
                 "payloads.mass": [1.0], "payloads.com": [0.0, 0.0, 0.0]})
