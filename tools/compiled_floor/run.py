"""The compiled floor of the step (issue 33): what the work of one icub_stand step costs when
pinocchio and the contact solve are called from C++ instead of Python, next to the Python
step and MuJoCo in the same run.

    .venv/bin/python -m pip install "libpinocchio[build]==$(.venv/bin/python -c 'import pinocchio; print(pinocchio.__version__)')"
    .venv/bin/python tools/compiled_floor/run.py [--avx2] [--peer ../shared/benchmarks/peers/mujoco_icub_stand.py]

The ``[build]`` extra brings the headers pinocchio's CMake config asks for (Eigen, urdfdom).
It builds ``floor.cpp`` with CMake against the pinocchio of the PyPI wheels (its CMake config
in the cmeel prefix: the build path a compiled step would take), into
``~/.cache/wb_sim/compiled_floor`` (``--avx2``: AVX2 and FMA), loads the simulator's own stepping model into it
(serialized) and the icub_stand contact points, and times each part there and from Python.
A measurement, not part of wb_sim: docs/performance.md has its figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

from wb_sim.controllers import PDGravityController
from wb_sim.simulator import Simulator
from wb_sim.tools.bench.physics import ICUB_STAND, KD, KP, STEPS, _run, _run_peer

HERE = Path(__file__).resolve().parent


def _cmeel_prefix() -> Path:
    out = subprocess.run([sys.executable, "-m", "cmeel", "cmake"], capture_output=True,
                         text=True, check=True)
    return Path(out.stdout.strip().split(";")[0])


def build(avx2: bool) -> Path:
    """Configure and build the module; returns its path. Exits 2 when pinocchio's build
    dependencies are missing."""
    prefix = _cmeel_prefix()
    if not (prefix / "share" / "eigen3" / "cmake" / "Eigen3Config.cmake").exists():
        print(f"compiled_floor: Eigen's CMake config is not in {prefix}: "
              f"`{sys.executable} -m pip install 'libpinocchio[build]=={pin.__version__}'` "
              f"(pinocchio's build dependencies: Eigen's and urdfdom's headers)", file=sys.stderr)
        sys.exit(2)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    out = cache / "wb_sim" / ("compiled_floor_avx2" if avx2 else "compiled_floor")
    t0 = time.perf_counter()
    subprocess.run(["cmake", "-S", str(HERE), "-B", str(out), f"-DCMAKE_PREFIX_PATH={prefix}",
                    f"-DPython3_EXECUTABLE={sys.executable}",
                    f"-DFLOOR_AVX2={'ON' if avx2 else 'OFF'}"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(out), "--parallel", "2"], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"built in {time.perf_counter() - t0:.0f} s (cached when nothing changed)")
    return next(out.glob("floor*.so"))


def _load(path: Path):
    spec = importlib.util.spec_from_file_location("floor", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _best(f, n: int) -> float:
    """min over 5 rounds of the mean microseconds of n calls of f()."""
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--avx2", action="store_true",
                    help="compile with AVX2 and FMA, pinocchio header-only (CMakeLists.txt says why)")
    ap.add_argument("--peer", help="MuJoCo's icub_stand harness, run in the same process tree")
    ap.add_argument("-n", type=int, default=20000, help="calls per timed round")
    args = ap.parse_args(argv)
    floor = _load(build(args.avx2))

    sim = Simulator.from_params(dict(ICUB_STAND, **{"contact.model": "compliant"}))
    m, pts = sim._model_step, sim.contact.points
    floor.load(m.saveToString().encode(),
               [(int(pts.joint_ids[s]), *map(float, r)) for s, r in zip(pts.slot, pts.r_local)])
    diff = floor.contact_check()
    assert diff < 1e-12, f"the column-sparse contact products differ from the dense ones: {diff}"

    rows = [("ABA (world) + M^-1 from its factorization", 0),
            ("CRBA + bias forces + sparse LDL + one solve", 1),
            ("computeGeneralizedGravity (the controller's)", 2),
            (f"{pts.n}-point contact rows + all-sticking implicit solve, dense", 3),
            ("the same on the columns that move the points", 4),
            ("a compiled step's work: 2 + 0 + 4 + integrate", 5)]
    cpp = {v: min(floor.bench(args.n, v) for _ in range(5)) for _, v in rows}

    d = m.createData()
    q, v, tau = pin.neutral(m), np.full(m.nv, 0.05), np.zeros(m.nv)

    def aba_minv():
        pin.aba(m, d, q, v, tau, pin.Convention.WORLD)
        pin.computeMinverse(m, d)

    py = {0: _best(aba_minv, args.n), 2: _best(lambda: pin.computeGeneralizedGravity(m, d, q),
                                              args.n)}
    ctrl = PDGravityController(sim.robot, np.zeros(sim.nj), KP, KD, gravity=ICUB_STAND["gravity"])
    step_us = min(_run(sim, ctrl, STEPS) for _ in range(3)) / STEPS * 1e6
    peer = _run_peer(args.peer, 3) if args.peer else None  # None: it said why on stderr

    print(f"\nicub_stand, nv {m.nv}, {pts.n} contact points; microseconds per call "
          f"({'AVX2 + FMA' if args.avx2 else 'generic x86-64'})")
    print(f"{'':58s} {'C++':>7s} {'Python':>7s}")
    for name, k in rows:
        p = f"{py[k]:7.2f}" if k in py else f"{'':7s}"
        print(f"{k}. {name:55s} {cpp[k]:7.2f} {p}")
    print(f"wb_sim's Python step with its controller (icub_stand, min of 3 x {STEPS} steps): "
          f"{step_us:.1f}")
    if peer is not None:
        print(f"MuJoCo's step with its controller (same run): {peer:.1f}; compiled work / MuJoCo "
              f"= {cpp[5] / peer:.2f}, Python step / MuJoCo = {step_us / peer:.2f}")
    return 1 if args.peer and peer is None else 0


if __name__ == "__main__":
    sys.exit(main())
