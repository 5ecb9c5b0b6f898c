"""Physics checks of wb_sim against analytic results and conservation laws.

Every test builds a tiny robot from a URDF string written here (a free box, a
box with a ``sole`` frame on its bottom face, a ball, a fixed-base turntable
and a fixed-base double pendulum), runs the simulator and compares numbers
with closed-form values, each with a stated tolerance:

* free fall: the exact discrete trajectory of symplectic Euler (1e-9 m) and
  the continuous parabola (relative error <= 1e-3, it is dt/(2T));
* pendulum: large-swing period = elliptic-integral period (1e-5 relative),
  energy bounded (0.5 %) without drift; chaotic double pendulum: energy error
  < 1 % over 5 s and first order in dt;
* static sink of a box on 4 and 9 points: sum of forces = m g (1 %), depth =
  (W sqrt(d_ref) / (N k))^(2/3) (2 %);
* box on an incline: sticks for tan(th) < mu, slides with
  a = g (sin th - mu cos th) (5 %) for tan(th) > mu;
* ball on an incline: contact point = centre - r n (1e-12 m), rolls with
  a = 5/7 g sin th (1 %) and no slip at the contact point;
* IMU: proper acceleration at rest / in free fall / tilted, gyroscope of a
  turntable under constant torque (1e-9), noise statistics and seeding;
* contact wrench: torque = sum r_i x f_i (1e-9), centre of pressure = CoM
  projection (1 mm).

``test_rolling_ball_does_not_gain_energy`` guards the floating-base
integration: with the base's linear velocity rotated by an explicit Euler step
a rolling ball gained ~25 % of its kinetic energy in 2 s. The step therefore
integrates free-joint coordinates (base velocity in world axes); the last two
tests check their conversion to pinocchio's free-flyer convention of the API.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

import wb_sim
from wb_sim.controllers import PDGravityController
from wb_sim.sensors import Imu

from helpers.extras import require_robot_data

G = 9.81
DT = 1e-3
NO_TORQUE = np.zeros(0)

# ---------------------------------------------------------------------------
# URDF strings
# ---------------------------------------------------------------------------


from helpers.spinning import _inertial  # noqa: E402  (one copy of the URDF snippet)


BOX_M, BOX_LX, BOX_LY, BOX_LZ = 2.0, 0.2, 0.1, 0.05


def box_urdf(m=BOX_M, lx=BOX_LX, ly=BOX_LY, lz=BOX_LZ, com=(0.0, 0.0, 0.0)):
    """A solid box (link ``box``, origin at its geometric centre) with a fixed
    child link ``sole`` at the centre of its bottom face, z up."""
    ixx, iyy, izz = m * (ly**2 + lz**2) / 12, m * (lx**2 + lz**2) / 12, m * (lx**2 + ly**2) / 12
    return (f'<robot name="box"><link name="box">{_inertial(m, ixx, iyy, izz, com)}</link>'
            f'<link name="sole"/>'
            f'<joint name="sole_joint" type="fixed"><parent link="box"/><child link="sole"/>'
            f'<origin xyz="0 0 {-lz / 2}" rpy="0 0 0"/></joint></robot>')


BALL_M, BALL_R = 1.0, 0.1


def ball_urdf(m=BALL_M, r=BALL_R):
    i = 0.4 * m * r**2
    return f'<robot name="ball"><link name="ball">{_inertial(m, i, i, i)}</link></robot>'


# turntable: fixed base, one revolute joint about its z axis turning a balanced disc
# (CoM on the axis, so gravity exerts no torque whatever the base tilt), with an
# IMU link on the disc at distance L_IMU from the axis
TT_M, TT_IZZ, TT_L_IMU = 1.5, 0.05, 0.25
TT_I_AXIS = TT_IZZ

TURNTABLE_URDF = (
    '<robot name="turntable">'
    f'<link name="base">{_inertial(1.0, 1e-2, 1e-2, 1e-2)}</link>'
    f'<link name="arm">{_inertial(TT_M, 0.03, 0.02, TT_IZZ)}</link>'
    '<link name="imu"/>'
    '<joint name="spin" type="revolute"><parent link="base"/><child link="arm"/>'
    '<origin xyz="0 0 0.1" rpy="0 0 0"/><axis xyz="0 0 1"/>'
    '<limit lower="-1000" upper="1000" effort="100" velocity="1000"/></joint>'
    '<joint name="imu_joint" type="fixed"><parent link="arm"/><child link="imu"/>'
    f'<origin xyz="{TT_L_IMU} 0 0" rpy="0 0 0"/></joint>'
    '</robot>')

# double pendulum: fixed base, two revolute joints about y, hanging along -z at q = 0
DP_M1, DP_L1, DP_M2, DP_L2 = 1.0, 0.5, 0.8, 0.4
DOUBLE_PENDULUM_URDF = (
    '<robot name="double_pendulum">'
    f'<link name="base">{_inertial(1.0, 1e-2, 1e-2, 1e-2)}</link>'
    f'<link name="l1">{_inertial(DP_M1, 1e-3, 1e-3, 1e-3, (0, 0, -DP_L1))}</link>'
    f'<link name="l2">{_inertial(DP_M2, 1e-3, 1e-3, 1e-3, (0, 0, -DP_L2))}</link>'
    '<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>'
    '<origin xyz="0 0 0" rpy="0 0 0"/><axis xyz="0 1 0"/>'
    '<limit lower="-3" upper="3" effort="100" velocity="100"/></joint>'
    '<joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/>'
    f'<origin xyz="0 0 {-DP_L1}" rpy="0 0 0"/><axis xyz="0 1 0"/>'
    '<limit lower="-3" upper="3" effort="100" velocity="100"/></joint>'
    '</robot>')

# contact parameters stable at dt = 1 ms for the 1-2 kg bodies used here
K, C = 4.0e4, 100.0
KT, CT = 4.0e4, 100.0
D_REF = 1e-3


def box_params(**extra):
    """A box standing on its 4 bottom corners, 1 mm above a horizontal ground."""
    p = {
        "robot_description": box_urdf(),
        "contact_surfaces": ["foot"],
        "foot.frame": "sole", "foot.shape": "box", "foot.size": [BOX_LX, BOX_LY],
        "contact.stiffness": K, "contact.damping": C,
        "contact.tangential_stiffness": KT, "contact.tangential_damping": CT,
        "contact.reference_depth": D_REF,
        "initial.base_position": [0.0, 0.0, BOX_LZ / 2 + 1e-3],
        "imu.frame": "box",
    }
    p.update(extra)
    return p


def run(sim, n, tau=NO_TORQUE, record=None):
    """Step ``n`` times; ``record(sim)`` after every step, results stacked."""
    out = []
    for _ in range(n):
        sim.step(tau)
        if record is not None:
            out.append(record(sim))
    return np.array(out) if record is not None else None


def static_sink(weight, n_points, k=K, d_ref=D_REF):
    """Depth at which n equal points carry ``weight`` with f = sqrt(d/d_ref) k d."""
    return (weight * math.sqrt(d_ref) / (n_points * k)) ** (2.0 / 3.0)


def rpy_matrix(rpy):
    """R = Rz(yaw) Ry(pitch) Rx(roll), written out (independent of pinocchio)."""
    cr, sr = math.cos(rpy[0]), math.sin(rpy[0])
    cp, sp = math.cos(rpy[1]), math.sin(rpy[1])
    cy, sy = math.cos(rpy[2]), math.sin(rpy[2])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    return Rz @ Ry @ Rx


def quat_matrix(xyzw):
    """Rotation matrix of a unit quaternion (x, y, z, w)."""
    x, y, z, w = xyzw
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def slope_fit(t, x):
    """Slope of the least-squares line through (t, x)."""
    return np.polyfit(t, x, 1)[0]


# ---------------------------------------------------------------------------
# 1. Free fall
# ---------------------------------------------------------------------------


def test_free_fall_is_exact_symplectic_euler():
    z0, n = 10.0, 2000  # T = 2 s, falls 19.6 m, no contact surface
    sim = wb_sim.Simulator.from_params({"robot_description": box_urdf(),
                                        "initial.base_position": [0.3, -0.2, z0]})
    assert sim.nj == 0 and sim.dt == DT
    traj = run(sim, n, record=lambda s: np.concatenate(
        [s.state.base_position, s.state.base_linear_velocity, s.state.base_quaternion]))
    k = np.arange(1, n + 1)
    # symplectic Euler: v_k = v_{k-1} - g dt, z_k = z_{k-1} + dt v_k
    v_exact = -G * DT * k
    z_exact = z0 - G * DT**2 * k * (k + 1) / 2
    np.testing.assert_allclose(traj[:, 2], z_exact, rtol=0, atol=1e-9)
    np.testing.assert_allclose(traj[:, 5], v_exact, rtol=0, atol=1e-9)
    # no horizontal drift, no rotation
    np.testing.assert_allclose(traj[:, :2], np.tile([0.3, -0.2], (n, 1)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(traj[:, 3:5], 0.0, atol=1e-12)
    np.testing.assert_allclose(traj[:, 6:10], np.tile([0, 0, 0, 1.0], (n, 1)), atol=1e-12)
    # continuous parabola: the discrete one leads it by g dt T / 2, relative dt / (2 T)
    T = n * DT
    assert sim.t == pytest.approx(T, abs=1e-12)
    drop_cont = G * T**2 / 2
    drop_sim = z0 - traj[-1, 2]
    assert abs(drop_sim - drop_cont) / drop_cont <= 1e-3
    assert drop_sim - drop_cont == pytest.approx(G * DT * T / 2, abs=1e-9)


# ---------------------------------------------------------------------------
# 2. Energy conservation (fixed-base pendulums: wb_sim has no initial-velocity
#    parameter, so a free tumbling body cannot be started spinning)
# ---------------------------------------------------------------------------

# single pendulum on a continuous joint about y: bob of mass M at L below the pivot
SP_M, SP_L, SP_IC = 1.2, 0.6, 2e-3
SP_I_PIVOT = SP_IC + SP_M * SP_L**2
PENDULUM_URDF = (
    '<robot name="pendulum">'
    f'<link name="base">{_inertial(1.0, 1e-2, 1e-2, 1e-2)}</link>'
    f'<link name="bob">{_inertial(SP_M, SP_IC, SP_IC, SP_IC, (0, 0, -SP_L))}</link>'
    '<joint name="swing" type="continuous"><parent link="base"/><child link="bob"/>'
    '<origin xyz="0 0 0" rpy="0 0 0"/><axis xyz="0 1 0"/></joint></robot>')


def _link_com_height(sim, q, link, com_z):
    """World height of a link's CoM, from the link frame's pose (not from
    sim.center_of_mass, which leaves out the fixed root link)."""
    return sim.frame_pose(link, q).act(np.array([0.0, 0.0, com_z]))[2]


def test_pendulum_period_and_energy():
    """Large swing (115 deg): the period is the elliptic-integral one and the
    energy error of symplectic Euler (exactly symplectic here: constant inertia)
    stays bounded, without drift."""
    from scipy.special import ellipk

    th0, seconds = 2.0, 10.0
    sim = wb_sim.Simulator.from_params({
        "robot_description": PENDULUM_URDF, "floating_base": False,
        "initial.joint_names": ["swing"], "initial.joint_positions": [th0]})

    def record(s):
        q, v = s.state.q, s.state.v
        e = 0.5 * v @ s.mass_matrix(q) @ v + SP_M * G * _link_com_height(s, q, "bob", -SP_L)
        return [s.t, s.state.joint_positions[0], e]

    e0 = record(sim)[2]
    t, th, e = run(sim, int(seconds / DT), np.zeros(1), record=record).T
    # period: 4 sqrt(I / (m g L)) K(k), k = sin(th0 / 2) (scipy's ellipk takes k^2)
    T_exact = 4 * math.sqrt(SP_I_PIVOT / (SP_M * G * SP_L)) * ellipk(math.sin(th0 / 2) ** 2)
    down = np.flatnonzero((th[:-1] > 0) & (th[1:] <= 0))  # downward zero crossings
    tc = t[down] + DT * th[down] / (th[down] - th[down + 1])
    assert len(tc) >= 4
    periods = np.diff(tc)
    np.testing.assert_allclose(periods, T_exact, rtol=1e-5)
    # the amplitude is kept
    assert th.max() == pytest.approx(th0, abs=1e-4)
    assert th.min() == pytest.approx(-th0, abs=1e-4)
    # energy: bounded error, no drift between the first and the last 2 s
    scale = e0 + SP_M * G * SP_L  # energy above the rest state
    assert np.abs(e - e0).max() / scale < 5e-3
    n2 = int(2.0 / DT)
    assert abs(e[-n2:].mean() - e[:n2].mean()) / scale < 5e-4


def _double_pendulum_energy(rate_hz, q0=(0.8, 0.5), seconds=5.0):
    sim = wb_sim.Simulator.from_params({
        "robot_description": DOUBLE_PENDULUM_URDF, "floating_base": False,
        "physics_rate_hz": rate_hz, "joints.urdf_dynamics": False,
        "joints.position_limits": False,
        "initial.joint_names": ["j1", "j2"], "initial.joint_positions": list(q0),
    })
    assert sim.nj == 2

    def energy(s, q=None, v=None):
        q = s.state.q if q is None else q
        v = s.state.v if v is None else v
        pot = G * (DP_M1 * _link_com_height(s, q, "l1", -DP_L1)
                   + DP_M2 * _link_com_height(s, q, "l2", -DP_L2))
        return 0.5 * v @ s.mass_matrix(q) @ v + pot

    e0 = energy(sim)
    e = run(sim, int(round(seconds * rate_hz)), np.zeros(2), record=energy)
    e_rest = energy(sim, np.zeros(2), np.zeros(2))  # hanging straight down, at rest
    return e0, e, e0 - e_rest, sim


def test_double_pendulum_energy_error_is_small_and_first_order():
    """Chaotic double pendulum, frictionless, zero torque, 5 s. Its inertia
    depends on q, where the velocity form of semi-implicit Euler is not
    exactly symplectic: the energy error is O(dt) (it halves with dt)."""
    e0, e, scale, sim = _double_pendulum_energy(1000.0)
    assert scale > 3.0  # J: a large swing, not a trivial test
    err = np.abs(e - e0) / scale
    assert err.max() < 1e-2, f"max energy error {err.max():.2e} of the swing energy"
    e0_2, e_2, scale_2, _ = _double_pendulum_energy(2000.0)
    assert scale_2 == pytest.approx(scale, rel=1e-12)
    err_2 = np.abs(e_2 - e0_2) / scale
    assert err_2.max() < 0.6e-2
    ratio = err.max() / err_2.max()
    assert 1.7 < ratio < 2.3, f"error ratio dt vs dt/2 = {ratio:.2f}, expected 2 (first order)"


# ---------------------------------------------------------------------------
# 3. Static sink
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("grid", [(2, 2), (3, 3)])
def test_static_sink_matches_analytic_depth(grid):
    sim = wb_sim.Simulator.from_params(box_params(**{"foot.grid": list(grid)}))
    n_pts = grid[0] * grid[1]
    run(sim, 2000)
    cp = sim.contact_points_state()
    W = sim.mass * G
    assert cp.force.shape == (n_pts, 3)
    assert cp.status == ("stick",) * n_pts
    # force balance: the ground carries the weight, no horizontal force
    assert cp.force[:, 2].sum() == pytest.approx(W, rel=1e-2)
    np.testing.assert_allclose(cp.force[:, :2], 0.0, atol=1e-6)
    # every point sinks the analytic depth (the box stays level: equal shares)
    d = static_sink(W, n_pts)
    np.testing.assert_allclose(cp.depth, d, rtol=2e-2)
    np.testing.assert_allclose(cp.force[:, 2], W / n_pts, rtol=2e-2)
    # and the base sits at half its height minus the sink
    assert sim.state.base_position[2] == pytest.approx(BOX_LZ / 2 - d, abs=2e-2 * d)
    assert np.linalg.norm(sim.state.base_linear_velocity) < 1e-6


# ---------------------------------------------------------------------------
# 4. Inclined plane
# ---------------------------------------------------------------------------

MU = 0.5


def _incline_sim(theta, gap=1e-3):
    """The ground tilted by theta about y (rising towards +x); the box lies
    flat on it, ``gap`` above it along the normal."""
    n = np.array([-math.sin(theta), 0.0, math.cos(theta)])
    p = box_params(**{
        "ground.normal": n.tolist(), "contact.friction_coefficient": MU,
        "initial.base_rpy": [0.0, -theta, 0.0],
        "initial.base_position": ((BOX_LZ / 2 + gap) * n).tolist(),
    })
    sim = wb_sim.Simulator.from_params(p)
    # the box's z axis is the ground normal, its bottom face gap above the plane
    R = sim.frame_pose("box").rotation
    np.testing.assert_allclose(R[:, 2], n, atol=1e-12)
    down = -np.array([math.cos(theta), 0.0, math.sin(theta)])  # down the slope
    return sim, n, down


def test_incline_below_friction_angle_sticks():
    theta = math.radians(20.0)
    assert math.tan(theta) < MU
    sim, n, down = _incline_sim(theta)
    run(sim, 500)  # settle
    x0 = sim.state.base_position.copy()
    rec = run(sim, 2000, record=lambda s: np.concatenate(
        [s.state.base_position, s.state.base_linear_velocity]))
    speed = np.linalg.norm(rec[:, 3:], axis=1)
    assert speed.max() < 1e-3, f"max speed {speed.max():.2e} m/s"
    disp = np.linalg.norm(rec[:, :3] - x0, axis=1)
    assert disp.max() < 1e-3, f"displacement {disp.max():.2e} m"
    # and since t = 0 (including the 1 mm drop onto the slope) it moved < 1 mm along it
    assert abs((sim.state.base_position - (BOX_LZ / 2 + 1e-3) * n) @ down) < 1e-3
    cp = sim.contact_points_state()
    assert set(cp.status) == {"stick"}
    # the ground carries the weight: normal m g cos th, friction m g sin th up the slope
    W = sim.mass * G
    F = cp.force.sum(axis=0)
    np.testing.assert_allclose(F, [0.0, 0.0, W], atol=1e-2 * W)
    assert F @ n == pytest.approx(W * math.cos(theta), rel=1e-2)
    assert F @ down == pytest.approx(-W * math.sin(theta), rel=1e-2)
    # every sticking point is inside its friction cone
    fn = cp.force @ n
    ft = np.linalg.norm(cp.force - np.outer(fn, n), axis=1)
    assert np.all(ft <= MU * fn)
    # the resting IMU (box frame = the tilted frame) reads gravity in that frame
    acc = sim.imu().linear_acceleration
    np.testing.assert_allclose(acc, [G * math.sin(theta), 0.0, G * math.cos(theta)], atol=1e-2)


def test_incline_above_friction_angle_slides_with_coulomb_acceleration():
    theta = math.radians(35.0)
    assert math.tan(theta) > MU
    sim, n, down = _incline_sim(theta)
    rec = run(sim, 1500, record=lambda s: np.concatenate(
        [[s.t], s.state.base_position, s.state.base_linear_velocity]))
    t, pos, vel = rec[:, 0], rec[:, 1:4], rec[:, 4:7]
    window = t >= 0.3  # after the landing transient
    a_expected = G * (math.sin(theta) - MU * math.cos(theta))
    a_fit = slope_fit(t[window], vel[window] @ down)
    assert a_fit == pytest.approx(a_expected, rel=5e-2), \
        f"a = {a_fit:.4f} vs {a_expected:.4f} m/s^2"
    # it slides, it does not leave the plane nor move sideways
    assert (pos[-1] - pos[0]) @ down > 0.5 * a_expected * (t[-1] - 0.3) ** 2
    assert abs(vel[-1] @ n) < 1e-3 and abs(vel[-1, 1]) < 1e-6
    cp = sim.contact_points_state()
    assert cp.status == ("slip",) * 4
    # slipping points sit on the Coulomb cone, friction opposing the motion
    fn = cp.force @ n
    f_t = cp.force - np.outer(fn, n)
    np.testing.assert_allclose(np.linalg.norm(f_t, axis=1), MU * fn, rtol=1e-9)
    assert np.all(f_t @ down < 0)


# ---------------------------------------------------------------------------
# 5. Ball rolling on an incline
# ---------------------------------------------------------------------------

BALL_THETA = math.radians(10.0)


def _ball_sim(rpy=(0.0, 0.0, 0.0), height=0.0, rate_hz=1000.0):
    n = np.array([-math.sin(BALL_THETA), 0.0, math.cos(BALL_THETA)])
    sim = wb_sim.Simulator.from_params({
        "robot_description": ball_urdf(), "physics_rate_hz": rate_hz,
        "contact_surfaces": ["ball_foot"],
        "ball_foot.frame": "ball", "ball_foot.shape": "sphere", "ball_foot.radius": BALL_R,
        "contact.stiffness": K, "contact.damping": C,
        "contact.tangential_stiffness": KT, "contact.tangential_damping": CT,
        "contact.friction_coefficient": 1.0,
        "ground.normal": n.tolist(), "ground.height": height,
        "initial.base_rpy": list(rpy),
        "initial.base_position": (np.array([0.0, 0.0, height]) + BALL_R * n).tolist(),
    })
    down = -np.array([math.cos(BALL_THETA), 0.0, math.sin(BALL_THETA)])
    return sim, n, down


def test_ball_contact_point_and_rolling_acceleration():
    # an arbitrary orientation: the ball's contact point must not depend on it
    sim, n, down = _ball_sim(rpy=(0.7, -1.1, 2.3), height=0.02)
    origin = np.array([0.0, 0.0, 0.02])
    rec, errs, depth_errs = [], [], []
    centre = sim.state.base_position
    for _ in range(600):
        sim.step(NO_TORQUE)
        st, cp = sim.state, sim.contact_points_state()
        # contact_points_state() belongs to the start of the last step: the old centre
        errs.append(np.abs(cp.position[0] - (centre - BALL_R * n)).max())
        depth_errs.append(abs(cp.depth[0] - (BALL_R - (centre - origin) @ n)))
        centre = st.base_position
        rec.append(np.concatenate([[sim.t], st.base_linear_velocity,
                                   st.base_angular_velocity]))
    assert max(errs) < 1e-12, f"contact point off the lowest point by {max(errs):.1e} m"
    assert max(depth_errs) < 1e-12
    rec = np.array(rec)
    t, vel, omega = rec[:, 0], rec[:, 1:4], rec[:, 4:7]
    # it rolls: solid ball, a = 5/7 g sin th (far inside the cone: tan th < 3.5 mu)
    window = t >= 0.2
    a_expected = 5.0 / 7.0 * G * math.sin(BALL_THETA)
    a_fit = slope_fit(t[window], vel[window] @ down)
    assert a_fit == pytest.approx(a_expected, rel=1e-2), \
        f"a = {a_fit:.4f} vs {a_expected:.4f} m/s^2"
    # without slipping: the material point at the contact has no tangential velocity
    v_end, w_end = vel[-1], omega[-1]
    assert v_end @ down > 0.5
    v_contact = v_end + np.cross(w_end, -BALL_R * n)
    v_contact_t = v_contact - (v_contact @ n) * n
    assert np.linalg.norm(v_contact_t) < 1e-3 * np.linalg.norm(v_end)
    assert sim.contact_points_state().status == ("stick",)
    # rolling axis: omega = n x v / r, horizontal, perpendicular to the slope direction
    np.testing.assert_allclose(w_end, np.cross(n, v_end) / BALL_R,
                               atol=1e-2 * np.linalg.norm(w_end))


def test_rolling_ball_does_not_gain_energy():
    sim, _, _ = _ball_sim()
    inertia = 0.4 * BALL_M * BALL_R**2

    def energy(s):
        st = s.state
        v, w = st.base_linear_velocity, st.base_angular_velocity
        return 0.5 * BALL_M * v @ v + 0.5 * inertia * w @ w + BALL_M * G * st.base_position[2]

    e = run(sim, 2000, record=energy)
    # rolling without slipping conserves mechanical energy; the contact can only
    # dissipate. Allow 1 % of the kinetic energy reached.
    ke_end = 0.5 * BALL_M * np.linalg.norm(sim.state.base_linear_velocity) ** 2
    assert e[-1] - e[200] < 1e-2 * ke_end, f"energy gained: {e[-1] - e[200]:.3f} J"


# ---------------------------------------------------------------------------
# 6. IMU
# ---------------------------------------------------------------------------


def test_imu_at_rest_on_the_ground():
    sim = wb_sim.Simulator.from_params(box_params())
    run(sim, 1500)
    imu = sim.imu()
    assert imu.frame == "box"
    np.testing.assert_allclose(imu.linear_acceleration, [0.0, 0.0, G], atol=1e-2)
    np.testing.assert_allclose(imu.angular_velocity, 0.0, atol=1e-6)
    np.testing.assert_allclose(imu.orientation, [0, 0, 0, 1.0], atol=1e-6)


def test_imu_in_free_fall_reads_zero():
    rpy = [0.4, -0.3, 1.0]
    sim = wb_sim.Simulator.from_params({"robot_description": box_urdf(), "imu.frame": "sole",
                                        "initial.base_position": [0, 0, 10.0],
                                        "initial.base_rpy": rpy})
    # before the first step and after 500 steps of free fall
    for _ in range(2):
        imu = sim.imu()
        np.testing.assert_allclose(imu.linear_acceleration, 0.0, atol=1e-9)
        np.testing.assert_allclose(imu.angular_velocity, 0.0, atol=1e-12)
        run(sim, 500)
    # the orientation stays the initial one (the sole frame is parallel to the box)
    np.testing.assert_allclose(quat_matrix(sim.imu().orientation), rpy_matrix(rpy), atol=1e-12)


def test_imu_tilted_fixed_base_reads_rotated_gravity():
    rpy = (0.3, -0.2, 0.5)
    sim = wb_sim.Simulator.from_params({
        "robot_description": TURNTABLE_URDF, "floating_base": False,
        "initial.base_rpy": list(rpy), "imu.frame": "base"})
    run(sim, 50, np.zeros(1))
    R = rpy_matrix(rpy)
    imu = sim.imu()
    np.testing.assert_allclose(imu.linear_acceleration, R.T @ [0.0, 0.0, G], atol=1e-12)
    np.testing.assert_allclose(imu.angular_velocity, 0.0, atol=1e-12)
    # orientation: the quaternion rotates IMU-frame vectors into the world frame
    np.testing.assert_allclose(quat_matrix(imu.orientation), R, atol=1e-12)


def test_imu_gyro_and_accelerometer_on_a_turntable():
    """Constant torque on a balanced disc about a tilted axis: the gyro reads the
    exact rate about the IMU's z, the accelerometer centripetal + tangential +
    gravity, all in the IMU frame."""
    tau, rpy = 0.6, (0.4, 0.3, -0.2)
    sim = wb_sim.Simulator.from_params({
        "robot_description": TURNTABLE_URDF, "floating_base": False,
        "initial.base_rpy": list(rpy), "joints.urdf_dynamics": False, "imu.frame": "imu"})
    alpha = tau / TT_I_AXIS
    n = 400
    run(sim, n, np.array([tau]))
    w_n = n * DT * alpha  # symplectic Euler is exact for constant acceleration
    assert sim.state.joint_velocities[0] == pytest.approx(w_n, abs=1e-9)
    angle = sim.state.joint_positions[0]
    assert angle == pytest.approx(DT**2 * alpha * n * (n + 1) / 2, abs=1e-9)
    imu = sim.imu()
    np.testing.assert_allclose(imu.angular_velocity, [0.0, 0.0, w_n], atol=1e-9)
    # orientation: the tilted base, then the disc's rotation about its z axis
    c, s_ = math.cos(angle), math.sin(angle)
    R_imu = rpy_matrix(rpy) @ np.array([[c, -s_, 0], [s_, c, 0], [0, 0, 1]])
    np.testing.assert_allclose(quat_matrix(imu.orientation), R_imu, atol=1e-9)
    # accelerometer: the acceleration of the last step (rate at its start, w_{n-1}):
    # centripetal -w^2 L along x, tangential alpha L along y, and -g in the IMU frame,
    # at the orientation of the start of that step
    w_prev = (n - 1) * DT * alpha
    a_prev = angle - DT * w_n
    c, s_ = math.cos(a_prev), math.sin(a_prev)
    R_prev = rpy_matrix(rpy) @ np.array([[c, -s_, 0], [s_, c, 0], [0, 0, 1]])
    expected = np.array([-w_prev**2 * TT_L_IMU, alpha * TT_L_IMU, 0.0]) + R_prev.T @ [0, 0, G]
    np.testing.assert_allclose(imu.linear_acceleration, expected, atol=1e-9)


@pytest.mark.parametrize("origin", ['xyz="0 0 0" rpy="0 0 0"', 'xyz="0.05 -0.03 0.12" rpy="0.3 -0.2 0.9"'])
def test_imu_on_the_free_base_closed_form_matches_the_frame_kinematics(origin):
    """An IMU on the floating base is read in closed form; pinocchio's frame
    kinematics (forward kinematics, classical acceleration) give the same
    reading on a tumbling humanoid, with the IMU at the base origin and off it,
    rotated (centripetal and tangential terms)."""
    default = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid")).robot.urdf_xml
    imu_joint = '<child link="imu_link"/>\n    <origin xyz="0 0 0" rpy="0 0 0"/>'
    assert imu_joint in default
    xml = default.replace(imu_joint, f'<child link="imu_link"/>\n    <origin {origin}/>')
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
        "robot_description": xml, "urdf_path": ""})
    assert sim.imu_sensor._on_base
    kinematics = Imu(sim.robot, sim.config.imu, np.array(sim.config.gravity), sim._model_step,
                     closed_form=False)
    assert not kinematics._on_base
    rng = np.random.default_rng(3)
    worst = 0.0
    for k in range(600):
        sim.step(rng.normal(0.0, 20.0, sim.nj))
        a = sim.imu()
        b = kinematics.read(sim._s.q, sim._s.v, sim._s.q_prev, sim._s.v_prev, sim._s.a)
        for f in ("orientation", "angular_velocity", "linear_acceleration"):
            worst = max(worst, np.abs(getattr(a, f) - getattr(b, f)).max())
    # the robot tumbled: rates and accelerations far from trivial
    assert np.abs(sim.v[3:6]).max() > 0.5
    assert worst < 1e-10, worst


def _noisy_turntable(seed, std=0.1):
    return wb_sim.Simulator.from_params({
        "robot_description": TURNTABLE_URDF, "floating_base": False, "imu.frame": "imu",
        "imu.linear_acceleration_noise_std": std, "imu.seed": seed})


def test_imu_noise_statistics_and_seeding():
    std, n = 0.1, 2000

    def readings(sim):
        return run(sim, n, np.zeros(1), record=lambda s: np.concatenate(
            [s.imu().linear_acceleration, s.imu().angular_velocity]))

    sim = _noisy_turntable(7, std)
    a = readings(sim)
    noise = a[:, :3] - [0.0, 0.0, G]  # at rest: the true reading is (0, 0, g)
    np.testing.assert_allclose(noise.std(axis=0), std, rtol=0.1)
    np.testing.assert_allclose(noise.mean(axis=0), 0.0, atol=4 * std / math.sqrt(n))
    # white: consecutive samples uncorrelated
    r = np.corrcoef(noise[:-1].ravel(), noise[1:].ravel())[0, 1]
    assert abs(r) < 4 / math.sqrt(3 * n)
    # no gyro noise was asked for
    np.testing.assert_allclose(a[:, 3:], 0.0, atol=1e-12)
    # reading twice in a step gives the same sample
    assert np.array_equal(sim.imu().linear_acceleration, sim.imu().linear_acceleration)
    # same seed: identical; reset: the same sequence again; other seed: different
    b = readings(_noisy_turntable(7, std))
    assert np.array_equal(a, b)
    sim.reset()
    assert np.array_equal(readings(sim), a)
    c = readings(_noisy_turntable(8, std))
    assert np.abs(c[:, :3] - a[:, :3]).max() > std


# ---------------------------------------------------------------------------
# 7. Contact wrench
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("grid", [(2, 2), (3, 3)])
def test_contact_wrench_torque_and_centre_of_pressure(grid):
    com = (0.03, -0.015, 0.0)  # CoM off the box centre: the CoP must follow it
    sim = wb_sim.Simulator.from_params(box_params(**{
        "robot_description": box_urdf(com=com), "foot.grid": list(grid)}))
    run(sim, 2000)
    wrench = sim.contact_wrenches()["foot"]
    assert wrench.frame == "sole"
    cp = sim.contact_points_state()
    # reference: from the per-point data, about the sole origin, in the sole frame
    # (the box is at rest: its pose now is the one the forces were computed at)
    assert np.linalg.norm(sim.state.v) < 1e-9
    sole = sim.frame_pose("sole")
    R, o = sole.rotation, sole.translation
    F = cp.force.sum(axis=0)
    T = np.cross(cp.position - o, cp.force).sum(axis=0)
    np.testing.assert_allclose(wrench.force, R.T @ F, atol=1e-9)
    np.testing.assert_allclose(wrench.torque, R.T @ T, atol=1e-9)
    W = sim.mass * G
    assert wrench.force[2] == pytest.approx(W, rel=1e-2)
    # centre of pressure (sole frame, on its z = 0 plane) under the CoM
    cop = np.array([-wrench.torque[1], wrench.torque[0]]) / wrench.force[2]
    com_sole = sole.actInv(sim.center_of_mass())
    np.testing.assert_allclose(cop, com_sole[:2], atol=1e-3)
    np.testing.assert_allclose(cop, com[:2], atol=1e-3)
    assert np.linalg.norm(cop) > 0.03  # the check is not trivially at the origin


@pytest.mark.parametrize("robot, normal", [("anymal", [0.0, 0.0, 1.0]),
                                           ("anymal", [0.05, -0.03, 0.99829]),
                                           ("humanoid", [0.04, 0.02, 0.99900])])
def test_contact_wrenches_of_moving_feet_match_the_point_forces(robot, normal):
    """Sphere feet (their contact point moves on the sphere) and boxes, on flat
    and inclined ground, while the robot moves: each surface's wrench equals the
    sum of its points' forces and moments about the surface frame's origin,
    both in that frame, at the configuration the forces were computed at."""
    require_robot_data(robot)
    sim = wb_sim.Simulator.from_yaml(wb_sim.config_path(robot), overrides={
        "ground.normal": normal, "ground.height": -0.01})
    rng = np.random.default_rng(5)
    ctrl = PDGravityController(sim.robot, sim.state.joint_positions, 200.0, 5.0)
    worst, total = 0.0, 0.0
    for k in range(400):
        st = sim.state
        sim.step(ctrl(st.q, st.joint_positions, st.joint_velocities)
                 + rng.normal(0.0, 5.0, sim.nj))
        if k % 20:
            continue
        W = sim.contact_wrench_array()
        cp = sim.contact_points_state()
        surface = np.array(cp.surface)
        for s, (name, frame) in enumerate(zip(sim.surface_names,
                                              sim.contact_points.surface_frames)):
            pose = sim.frame_pose(frame, q=sim._s.q_prev)  # where the forces were computed
            mine = surface == name
            F = cp.force[mine].sum(axis=0)
            T = np.cross(cp.position[mine] - pose.translation, cp.force[mine]).sum(axis=0)
            ref = np.concatenate([pose.rotation.T @ F, pose.rotation.T @ T])
            worst = max(worst, np.abs(W[s] - ref).max())
            total += abs(F[2])
            w = sim.contact_wrenches()[name]
            assert np.array_equal(np.concatenate([w.force, w.torque]), W[s])
    assert total > 100.0  # the feet did carry the robot
    assert worst < 1e-9, worst


def test_forward_dynamics_query_leaves_contact_readings_alone():
    sim = wb_sim.Simulator.from_params(box_params())
    run(sim, 1000)
    before = sim.contact_wrenches()["foot"].force.copy()
    depth = sim.contact_points_state().depth.copy()
    q = np.array(sim.state.q)
    q[2] -= 2e-3  # a query 2 mm deeper: 9x the static sink
    sim.forward_dynamics(np.zeros(0), q=q)
    np.testing.assert_allclose(sim.contact_wrenches()["foot"].force, before, atol=1e-9)
    np.testing.assert_allclose(sim.contact_points_state().depth, depth, atol=1e-12)


# ---------------------------------------------------------------------------
# Floating-base coordinates: the step integrates MuJoCo-style free-joint
# coordinates (base linear velocity in world axes); the API speaks pinocchio's
# free-flyer convention (base twist in base axes). These check the conversion.
# ---------------------------------------------------------------------------


def _tumbling_humanoid(steps=300):
    """The humanoid in the air without gravity, spun up by a push: every base
    velocity component is non-zero and the base has turned."""
    sim = wb_sim.Simulator.from_yaml(
        wb_sim.config_path("humanoid"),
        overrides={"gravity": [0.0, 0.0, 0.0], "initial.base_position": [0.0, 0.0, 3.0]})
    sim.apply_external_wrench(sim.robot.root_link, [40.0, -25.0, 10.0], [6.0, 4.0, -5.0],
                              duration_s=0.1)
    rng = np.random.default_rng(3)
    for _ in range(steps):
        sim.step(rng.normal(0.0, 2.0, sim.nj))
    return sim


def test_reported_base_velocity_is_the_one_that_moved_the_base():
    """Semi-implicit Euler: p' = p + dt v'_world, R' = R exp(dt w'_base)."""
    sim = _tumbling_humanoid()
    q0 = sim.q.copy()
    sim.step(np.zeros(sim.nj))
    q1, v1 = sim.q, sim.v
    R1 = pin.Quaternion(q1[3:7]).matrix()
    assert np.linalg.norm(v1[:3]) > 0.05 and np.linalg.norm(v1[3:6]) > 0.05
    # world velocity of the base origin = R' v_base (pinocchio's linear part)
    np.testing.assert_allclose(R1 @ v1[:3], (q1[:3] - q0[:3]) / sim.dt, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sim.state.base_linear_velocity, (q1[:3] - q0[:3]) / sim.dt,
                               atol=1e-12)
    R0 = pin.Quaternion(q0[3:7]).matrix()
    np.testing.assert_allclose(R0 @ pin.exp3(sim.dt * v1[3:6]), R1, atol=1e-12)
    # pinocchio's v is what pin.difference measures over the step, to first order
    dv = pin.difference(sim.model, q0, q1) / sim.dt
    np.testing.assert_allclose(dv[6:], v1[6:], atol=1e-12)
    assert np.abs(dv[:6] - v1[:6]).max() < sim.dt * np.linalg.norm(v1[:6]) ** 2


def test_forward_dynamics_matches_pinocchio_free_flyer_aba():
    """Contact-free forward dynamics in the API's coordinates = pinocchio's ABA
    on the free-flyer model (armature included; the URDF joint damping and
    friction as the simulator applies them)."""
    sim = _tumbling_humanoid()
    q, v = sim.q, sim.v
    tau = np.linspace(-3.0, 3.0, sim.nj)
    a = sim.forward_dynamics(tau)
    passive = sim.actuation.passive_torques(sim.robot.joint_positions(q), v[sim.robot.idx_v])
    tau_gen = np.zeros(sim.model.nv)
    tau_gen[sim.robot.idx_v] = tau + (passive if passive is not None else 0.0)
    # the step makes viscous damping implicit (armature + dt D): the same here
    model = pin.Model(sim.model)
    model.armature[sim.robot.idx_v] += sim.dt * sim.actuation.damping
    a_ref = pin.aba(model, model.createData(), q, v, tau_gen)
    assert np.linalg.norm(a[:6]) > 0.1
    np.testing.assert_allclose(a, a_ref, rtol=0, atol=1e-9 * np.abs(a_ref).max())
