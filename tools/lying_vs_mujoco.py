"""The lying humanoid's step against MuJoCo's on the same URDF, in one run (issue 33).

    .venv/bin/python tools/lying_vs_mujoco.py [--rounds 3] [--steps 2000] [--model compliant]

Both engines take the scenario of ``test/helpers/lying.py`` (the shipped humanoid with
whole-body collision, limp, dropped face down; MuJoCo's twin from ``test/helpers/mujoco_twin.py``
with MuJoCo's own collision geometry of the URDF), settle ``lying.SECONDS`` at 1 kHz, then
each round times ``--steps`` steps of wb_sim and of MuJoCo, one after the other. Prints each
round's us/step, the medians and their ratio, and the median of the rounds' ratios (each
round's two runs back to back: the machine's drift cancels). Needs MuJoCo (the test extras)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--model", choices=["compliant", "rigid"], default="compliant")
    args = parser.parse_args(argv)
    try:
        import mujoco
        from helpers import lying
    except ImportError as e:
        print(f"lying_vs_mujoco: needs MuJoCo (pip install mujoco): {e}", file=sys.stderr)
        return 2
    sim = lying.humanoid(args.model)
    model, data = lying.settle_mujoco(lying.humanoid(args.model))
    zero = np.zeros(sim.nj)
    for _ in range(round(lying.SECONDS / sim.dt)):
        sim.step(zero)
    ours, theirs = [], []
    for r in range(args.rounds):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            sim.step(zero)
        ours.append((time.perf_counter() - t0) / args.steps * 1e6)
        t0 = time.perf_counter()
        for _ in range(args.steps):
            mujoco.mj_step(model, data)
        theirs.append((time.perf_counter() - t0) / args.steps * 1e6)
        print(f"round {r + 1}: wb_sim {ours[-1]:.1f} us/step, MuJoCo {mujoco.__version__} "
              f"{theirs[-1]:.1f} us/step ({data.ncon} contacts)", flush=True)
    pts = sim.collision_points_state()
    loaded = int(np.count_nonzero(pts.force[:, 2] > 0.0))
    a, b = statistics.median(ours), statistics.median(theirs)
    paired = statistics.median(x / y for x, y in zip(ours, theirs))
    print(f"{args.model}: wb_sim {a:.1f} us/step ({loaded} loaded collision points, "
          f"{len(pts.surface)} within the margin), MuJoCo {b:.1f}: ratio {a / b:.2f} "
          f"(median of the rounds' ratios {paired:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
