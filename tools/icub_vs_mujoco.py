"""icub_stand's step against MuJoCo's twin, in paired rounds in one process (issue 33).

    .venv/bin/python tools/icub_vs_mujoco.py [--rounds 15] [--steps 500] [--contact compliant]
        [--peer ../shared/benchmarks/peers/mujoco_icub_stand.py]

``python -m wb_sim.tools.bench icub_stand --peer ...`` times the two simulators in separate
processes, seconds apart: on a shared machine its ratio moved from 1.2 to 1.95 between three
calls of one minute. Here both run in one process. Each settles 2 s of the scenario (the
robot standing), then each round times ``--steps`` steps of wb_sim (its step and the
benchmark's controller, ``bench icub_stand``'s loop) and right after them as many of MuJoCo
(the peer script's model and its loop: ``mj_step1``, the gravity from ``mj_jacSubtreeCom``,
the PD, ``mj_step2``). Prints each round, the medians and the median of the rounds' ratios:
each round's two runs are back to back, so the machine's drift cancels in that figure. Needs
MuJoCo (the test extras) and the peer script (../shared/benchmarks/peers)."""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PEER = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "peers" / "mujoco_icub_stand.py"
SETTLE_STEPS = 2000


def _peer(path: Path):
    """The peer script as a module (its directory on sys.path for icub_stand_common)."""
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("mujoco_icub_stand", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--contact", choices=["compliant", "rigid"], default="compliant")
    parser.add_argument("--peer", type=Path, default=PEER)
    args = parser.parse_args(argv)
    if not args.peer.is_file():
        print(f"icub_vs_mujoco: no peer script at {args.peer} (--peer)", file=sys.stderr)
        return 2
    try:
        import mujoco
        peer = _peer(args.peer)
    except ImportError as e:
        print(f"icub_vs_mujoco: needs MuJoCo (pip install mujoco): {e}", file=sys.stderr)
        return 2
    from wb_sim.tools.bench import icub_stand_setup

    sim, ctrl = icub_stand_setup(**{"contact.model": args.contact})
    m, _ = peer.build_model("euler", tempfile.mkdtemp(prefix="icub_vs_mujoco_"))
    d = mujoco.MjData(m)
    q0 = np.array([peer.C.Q0[name] for name in peer.joint_maps(m)])
    peer.init_state(m, d)
    qpos, qvel, qfa = d.qpos, d.qvel, d.qfrc_applied
    jac = np.zeros((3, m.nv))
    jz = jac[2, 6:]
    mg = m.body_subtreemass[1] * peer.C.GRAVITY
    kp, kd = peer.C.KP, peer.C.KD
    step1, step2, jacsc = mujoco.mj_step1, mujoco.mj_step2, mujoco.mj_jacSubtreeCom

    def theirs(n: int) -> None:  # the peer script's timed loop, as it is there
        for _ in range(n):
            step1(m, d)
            jacsc(m, d, jac, 1)
            qfa[6:] = mg * jz + kp * (q0 - qpos[7:]) - kd * qvel[6:]
            step2(m, d)

    step = sim.step

    def ours(n: int) -> None:  # bench icub_stand's loop
        for _ in range(n):
            step(ctrl(sim.q, sim.joint_positions, sim.joint_velocities))

    ours(SETTLE_STEPS)
    theirs(SETTLE_STEPS)
    a, b = [], []
    for r in range(args.rounds):
        t0 = time.perf_counter()
        ours(args.steps)
        a.append((time.perf_counter() - t0) / args.steps * 1e6)
        t0 = time.perf_counter()
        theirs(args.steps)
        b.append((time.perf_counter() - t0) / args.steps * 1e6)
        print(f"round {r + 1}: wb_sim {a[-1]:.1f} us/step, MuJoCo {mujoco.__version__} "
              f"{b[-1]:.1f} us/step ({d.ncon} contacts)", flush=True)
    if not (np.isfinite(sim.q).all() and sim.q[2] > 0.3 and qpos[2] > 0.3):
        print("icub_vs_mujoco: a robot fell: the figures are not the standing step's",
              file=sys.stderr)
        return 1
    ma, mb = statistics.median(a), statistics.median(b)
    paired = statistics.median(x / y for x, y in zip(a, b))
    print(f"icub_stand {args.contact}: wb_sim {ma:.1f} us/step, MuJoCo {mb:.1f}: ratio "
          f"{ma / mb:.2f} (median of the rounds' ratios {paired:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
