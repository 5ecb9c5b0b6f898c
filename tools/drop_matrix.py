"""Prints the drop matrix of docs/contact-robustness.md: a cube of 0.05-200 kg dropped from
0.2-2 m at 250-4000 Hz with default contact parameters, both contact models, against the
exact rebound of the compliant law. Run from the repository root:

    .venv/bin/python tools/drop_matrix.py            # ~2 min on 2 cores
"""
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the test tree's root

from core.contact.test_contact_robustness import HEIGHTS, MASSES, RATES, run_drop  # noqa: E402
from helpers.contact_reference import G, drop  # noqa: E402

for model in ("compliant", "rigid"):
    for m in MASSES:
        for H in HEIGHTS:
            exact = drop(m, math.sqrt(2 * G * H)).rebound if model == "compliant" else 0.0
            rebs, sinks = [], []
            for rate in RATES:
                sim, z, bottom, rest, sink = run_drop(m, H, rate, model)
                rebs.append(float(z[bottom:].max()))
                sinks.append(sink)
            print(f"{model:9s} {m:6.2f} kg {H:.1f} m exact {exact * 1e3:8.3f} mm | rebound mm "
                  + " ".join(f"{r * 1e3:8.3f}" for r in rebs)
                  + " | sink um " + " ".join(f"{s * 1e6:8.3f}" for s in sinks), flush=True)
