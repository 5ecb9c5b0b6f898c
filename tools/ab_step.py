"""A scenario's step, this tree's core against another checkout's, timed in one process.

    .venv/bin/python tools/ab_step.py OTHER_CORE [--rounds 30] [--steps 500] [--scenario lying]
        [--contact rigid]

Scenarios: ``icub_stand`` (the benchmark's controller) and ``lying`` (the shipped humanoid with
whole-body collision, limp, face down, settled 3 s: test/helpers/lying.py's), each with the
contact model ``--contact`` (compliant by default, or rigid).

OTHER_CORE is another checkout's core package directory (``wb_sim/wb_sim`` in this layout,
``wb_sim`` before it), e.g. from ``git worktree add /tmp/before <commit>``. Both cores are
copied under two names (``wb_a``: OTHER_CORE, ``wb_b``: this tree's, without ``ros`` and
``tools``) into a temporary directory and imported side by side (the core imports itself
relatively). Chunks of ``--steps`` steps alternate between them, and the script prints each
one's median and the median of the chunk ratios b / a. The machine's drift then cancels,
which separate benchmark runs on a shared machine do not give. This tree's compiled kernels
come along if it is built (an editable install builds them in place).
"""

from __future__ import annotations

import argparse
import importlib
import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1] / "wb_sim" / "wb_sim"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the other checkout's core package directory")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--scenario", choices=["icub_stand", "lying"], default="icub_stand")
    parser.add_argument("--contact", choices=["compliant", "rigid"], default="compliant")
    args = parser.parse_args(argv)
    if not (args.other / "simulator.py").is_file():
        print(f"ab_step: {args.other} is not a wb_sim core package (no simulator.py)",
              file=sys.stderr)
        return 2
    import wb_sim
    from wb_sim.tools.bench import ICUB_STAND, KD, KP
    params = dict(ICUB_STAND, **{"contact.model": args.contact, "collision.enabled": False})
    tmp = Path(tempfile.mkdtemp(prefix="wb_sim_ab_"))
    share = wb_sim.paths.share_dir()  # the cores find the data files beside them
    for d in ("config", "urdf"):
        (tmp / d).symlink_to(share / d)
    sys.path.insert(0, str(tmp))
    runs = {}
    for name, src in (("wb_a", args.other), ("wb_b", HERE)):
        shutil.copytree(src, tmp / name,
                        ignore=shutil.ignore_patterns("ros", "tools", "__pycache__"))
        (tmp / name / "tools").mkdir()
        (tmp / name / "tools" / "__init__.py").write_text("")
        core = importlib.import_module(name)
        if args.scenario == "lying":
            sim = core.Simulator.from_yaml(wb_sim.config_path("humanoid"), overrides={
                "collision.enabled": True, "contact.model": args.contact,
                "initial.base_position": [0.0, 0.0, 0.16],
                "initial.base_rpy": [0.0, math.pi / 2, 0.0]})
            zero = np.zeros(sim.nj)
            ctrl = lambda q, qj, vj, zero=zero: zero  # noqa: E731 - limp
            settle = 3000
        else:
            controllers = importlib.import_module(name + ".controllers")
            sim = core.Simulator.from_params(params)
            ctrl = controllers.PDGravityController(sim.robot, np.zeros(sim.nj), KP, KD,
                                                   gravity=params["gravity"])
            settle = 2000
        for _ in range(settle):
            sim.step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
        runs[name] = (sim, ctrl, [])
    for r in range(args.rounds):
        for name in ("wb_a", "wb_b") if r % 2 == 0 else ("wb_b", "wb_a"):
            sim, ctrl, times = runs[name]
            step = sim.step
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))
            times.append((time.perf_counter() - t0) / args.steps * 1e6)
    a, b = runs["wb_a"][2], runs["wb_b"][2]
    ratio = statistics.median(y / x for x, y in zip(a, b))
    print(f"other ({args.other}): median {statistics.median(a):.1f} us/step, "
          f"min {min(a):.1f}")
    print(f"this tree:  median {statistics.median(b):.1f} us/step, min {min(b):.1f}")
    print(f"this / other, median of {args.rounds} chunk ratios: {ratio:.3f}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
