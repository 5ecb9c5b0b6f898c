"""The four-bar linkages of test/core/test_loop_closures.py (a parallelogram released under
gravity, a crank-rocker) and the closed form of the parallelogram's one degree of freedom;
``swing()`` is the run both that test and docs/physics.md (through test/helpers/docs_rows.py)
use, cached per process."""

from __future__ import annotations

import functools
import warnings

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import fsolve

from wb_sim import Simulator
from wb_sim.loop_closures import PassiveJointsWarning

G = 9.81
L, D = 0.3, 0.5        # crank and coupler lengths, m
M1, M2, M3 = 1.0, 2.0, 1.5  # crank, coupler, second crank masses, kg
#: the start, rad from the x axis (hanging is -pi/2; 0 and pi, all links in line, are the
#: parallelogram's branch points, which the swing from here never reaches)
TH0 = -0.5


def rod(name, m, length, sign=1.0):
    """A uniform rod along x (sign -1: along -x) from its frame's origin."""
    i = m * length**2 / 12.0
    return f"""
  <link name="{name}">
    <inertial><origin xyz="{sign * length / 2} 0 0"/><mass value="{m}"/>
      <inertia ixx="1e-4" ixy="0" ixz="0" iyy="{i}" iyz="0" izz="{i}"/></inertial>
  </link>"""


def revolute(name, parent, child, x):
    return f"""
  <joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>
    <origin xyz="{x} 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-10" upper="10" effort="100" velocity="100"/></joint>"""


#: a parallelogram four-bar in the x-y plane (gravity along -y): crank1 from the base's
#: origin, the coupler from crank1's end, crank2 from the coupler's end back (along -x)
#: to the base's anchor at (D, 0, 0); the loop is closed at crank2's tip
def fourbar(l1, l2, l3, ground) -> str:
    return f"""<robot name="fourbar">
  <link name="base"/>
  <link name="anchor"/>
  <joint name="base_anchor" type="fixed"><parent link="base"/><child link="anchor"/>
    <origin xyz="{ground} 0 0"/></joint>
  {rod("crank1", M1, l1)}{rod("coupler", M2, l2)}{rod("crank2", M3, l3, -1.0)}
  <link name="tip"/>
  {revolute("j1", "base", "crank1", 0.0)}{revolute("j2", "crank1", "coupler", l1)}
  {revolute("j3", "coupler", "crank2", l2)}
  <joint name="crank2_tip" type="fixed"><parent link="crank2"/><child link="tip"/>
    <origin xyz="{-l3} 0 0"/></joint>
</robot>"""


FOURBAR = fourbar(L, D, L, D)
#: a crank-rocker (Grashof, not a parallelogram): its loop is not a linear set of joint
#: angles, so the step's first-order motion leaves it and the stabilisation brings it back
CRANK_ROCKER = (0.3, 0.5, 0.4, 0.45)


def closed_angles(l1, l2, l3, ground, th1):
    """(j2, j3) closing the loop at j1 = th1 (the elbow-up branch)."""
    def gap(x):
        a, b = th1 + x[0], th1 + x[0] + x[1]
        return [l1 * np.cos(th1) + l2 * np.cos(a) - l3 * np.cos(b) - ground,
                l1 * np.sin(th1) + l2 * np.sin(a) - l3 * np.sin(b)]
    x = fsolve(gap, [-th1 + 0.5, 0.5], xtol=1e-12)
    assert np.abs(gap(x)).max() < 1e-12
    return x


def params(**extra):
    out = {"robot_description": FOURBAR, "floating_base": False, "gravity": [0.0, -G, 0.0],
         "contact_surfaces": [], "physics_rate_hz": 1000.0,
         "loop_closures.frames_a": ["tip"], "loop_closures.frames_b": ["anchor"],
         "joints.damping": 0.0, "initial.joint_names": ["j1", "j2", "j3"],
         "initial.joint_positions": [TH0, -TH0, TH0]}
    out.update(extra)
    return out


def sim(**extra) -> Simulator:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PassiveJointsWarning)
        return Simulator.from_params(params(**extra))


def pendulum(t_end, theta0=TH0):
    """The closed form's 1-DOF equation: the coupler translates, both cranks turn by theta
    about their pivots: I theta'' = -g k cos(theta)."""
    inertia = M1 * L**2 / 3 + M3 * L**2 / 3 + M2 * L**2
    k = M1 * L / 2 + M2 * L + M3 * L / 2
    return solve_ivp(lambda t, y: [y[1], -G * k * np.cos(y[0]) / inertia], (0.0, t_end),
                     [theta0, 0.0], rtol=1e-11, atol=1e-12, dense_output=True)



@functools.lru_cache(maxsize=None)
def swing() -> dict:
    """The parallelogram released from TH0, 2 s at 1 kHz, against the closed form:
    ``worst`` (largest |theta - theta_ref|, rad), ``amplitude`` (the reference's largest
    swing about hanging, rad), ``loop`` (largest |j2 + j1|, |j3 - j1|: the loop's other
    angles), ``far`` (the reference's lowest angle, rad)."""
    s = sim()
    ref = pendulum(2.0)
    worst = amp = loop = 0.0
    for _ in range(2000):
        s.step(np.zeros(3))
        th = ref.sol(s.t)[0]
        worst = max(worst, abs(s.q[0] - th))
        amp = max(amp, abs(th + np.pi / 2))  # the swing about hanging
        loop = max(loop, abs(s.q[1] + s.q[0]), abs(s.q[2] - s.q[0]))
    return {"worst": float(worst), "amplitude": float(amp), "loop": float(loop),
            "far": float(ref.sol(np.linspace(0.0, 2.0, 2001))[0].min())}
