"""A robot's memory grows at most quadratically with its links (issue 27, round 3).

pinocchio's Data allocates and zeroes four nv x nv x nv tensors (the second-order RNEA
derivatives, 254 MB at 199 joints) that wb_sim never computes; ``pin_views.new_data`` hands
their pages back. Measured in fresh processes: the resident memory above the imports after
building a serial chain and stepping it 100 times, with collision on. The peak while a Data
is built stays one Data's four tensors for a moment (pinocchio's constructor zeroes them
before they can be handed back: 280 MB peak at 200 links, 761 MB before)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pinocchio as pin

from wb_sim import pin_views


def collision_chain_urdf(n: int) -> str:
    """A serial chain of n links (n - 1 revolute joints), boxes and cylinders alternating."""
    inertial = ('<inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" '
                'ixz="0" iyz="0"/></inertial>')

    def link(i: int) -> str:
        shape = ('<box size="0.05 0.05 0.08"/>' if i % 2
                 else '<cylinder radius="0.03" length="0.08"/>')
        return (f'<link name="l{i}">{inertial}<collision><origin xyz="0 0 0.05"/><geometry>'
                f'{shape}</geometry></collision></link>')

    parts = ['<robot name="chain">', link(0)]
    for i in range(1, n):
        parts.append(link(i))
        parts.append(f'<joint name="j{i}" type="revolute"><parent link="l{i - 1}"/>'
                     f'<child link="l{i}"/><origin xyz="0 0 0.1"/><axis xyz="0 1 0"/>'
                     f'<limit lower="-1" upper="1" effort="10" velocity="10"/></joint>')
    parts.append("</robot>")
    return "".join(parts)


_MEASURE = textwrap.dedent("""
    import json, sys, tracemalloc
    import numpy as np
    import wb_sim
    from core.test_memory_growth import collision_chain_urdf

    def rss_mb():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

    n, steps = int(sys.argv[1]), int(sys.argv[2])
    urdf = collision_chain_urdf(n)
    base = rss_mb()
    tracemalloc.start()
    sim = wb_sim.Simulator.from_params({
        "robot_description": urdf, "max_joints": 1000, "floating_base": True,
        "collision.enabled": True, "initial.base_position": [0.0, 0.0, 0.5]})
    tau = np.zeros(sim.nj)
    for _ in range(steps):
        sim.step(tau)
    peak = tracemalloc.get_traced_memory()[1]
    print(json.dumps({"rss": rss_mb() - base, "python_peak": peak / 2**20,
                      "q": sim.q.tobytes().hex()}))
""")


def _run(n: int, steps: int = 100, full_data: bool = False) -> dict:
    env = dict(os.environ)
    env.pop(pin_views.FULL_DATA_ENV, None)
    if full_data:
        env[pin_views.FULL_DATA_ENV] = "1"
    test_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (test_dir, env.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(n), str(steps)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_robots_memory_grows_at_most_quadratically_with_its_links():
    small, large = _run(100), _run(200)
    # doubling the links: at most 4 x (quadratic); the cube would be 8 x. Measured: 17 MB at
    # 100 links, 46 MB at 200 (522 MB there before, two Data with their tensors resident)
    assert large["rss"] < 4.0 * small["rss"], (small, large)
    assert large["rss"] < 150.0, large
    # the Python side (the collision pairs' arrays) is quadratic too: 48 MB -> 191 MB
    assert large["python_peak"] < 4.5 * small["python_peak"], (small, large)


def test_the_same_chain_with_pinocchios_tensors_resident_grows_with_the_cube():
    """The measurement above can fail: with the tensors kept (WB_SIM_PIN_FULL_DATA=1) the
    same chains grow about 5 x from 100 to 200 links (two Data of 4 * 8 * nv^3 bytes)."""
    small, large = _run(100, steps=1, full_data=True), _run(200, steps=1, full_data=True)
    assert large["rss"] > 4.5 * small["rss"], (small, large)
    assert large["rss"] > 2 * 4 * 8 * 199 ** 3 / 2**20, large


def test_handing_the_tensors_back_changes_no_physics_to_the_bit():
    released, full = _run(60, steps=300), _run(60, steps=300, full_data=True)
    assert released["q"] == full["q"]
    assert released["rss"] < full["rss"] - 10.0, (released, full)  # 2 x 4 x 1.6 MB resident


def test_release_hands_back_the_four_cubes_and_they_read_zeros():
    model = pin.buildModelFromXML(collision_chain_urdf(100))
    nv = model.nv
    data, plain = pin.Data(model), pin.Data(model)
    released = pin_views.release_cubic_tensors(data, nv)
    page = os.sysconf("SC_PAGE_SIZE")
    # every whole page of the four tensors, at most one page short at each end
    assert 4 * (8 * nv ** 3 - 2 * page) <= released <= 4 * 8 * nv ** 3
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        addresses = pin_views._tensors(fd, data, nv)
        assert len(addresses) == 4
        assert all(pin_views._zeros(fd, a, 8 * nv ** 3) for a in addresses)
    finally:
        os.close(fd)
    rng = np.random.default_rng(3)
    q, v, a = pin.randomConfiguration(model), rng.normal(size=nv), rng.normal(size=nv)
    assert np.array_equal(pin.rnea(model, data, q, v, a), pin.rnea(model, plain, q, v, a))
    pin.computeRNEADerivatives(model, data, q, v, a)
    pin.computeRNEADerivatives(model, plain, q, v, a)
    assert np.array_equal(data.dtau_dq, plain.dtau_dq)
    # sizes that are not its own find no tensors: nothing is handed back
    assert pin_views.release_cubic_tensors(data, nv + 1) == 0


def test_new_data_keeps_the_tensors_where_asked(monkeypatch):
    model = pin.buildModelFromXML(collision_chain_urdf(20))
    monkeypatch.setattr(pin_views, "FULL_DATA", True)
    calls = []
    monkeypatch.setattr(pin_views, "release_cubic_tensors", lambda *a: calls.append(a))
    assert isinstance(pin_views.new_data(model), pin.Data) and calls == []
    monkeypatch.setattr(pin_views, "FULL_DATA", False)
    pin_views.new_data(model)
    assert len(calls) == 1
