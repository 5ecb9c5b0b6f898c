"""MJCF robots of the closed-chain tests with visual geometry: the parallel-ankle leg of
``test/core/test_parallel_ankle.py`` with a box foot, a capsule shank, cylinder cranks and
rods and a sphere at each crank's pivot (a leg RViz can draw)."""

from __future__ import annotations

import re
from pathlib import Path

from core import test_parallel_ankle as ankle

#: body -> the geom added to it (the inertials stay the file's own)
GEOMS = {
    "foot": '<geom type="box" size="0.1 0.06 0.01" pos="0.02 0 0.01" rgba="0.3 0.3 0.3 1"/>',
    "shank": '<geom type="capsule" size="0.03 0.17" pos="0 0 0.2"/>',
    "crank_l": '<geom type="cylinder" size="0.008 0.03" pos="0.03 0 0" euler="0 1.5707963267948966 0"/>'
               '<geom type="sphere" size="0.012"/>',
    "crank_r": '<geom type="cylinder" size="0.008 0.03" pos="0.03 0 0" euler="0 1.5707963267948966 0"/>'
               '<geom type="sphere" size="0.012"/>',
    "rod_l": f'<geom type="cylinder" size="0.005 {ankle.ROD / 2}" pos="0 0 {-ankle.ROD / 2}"/>',
    "rod_r": f'<geom type="cylinder" size="0.005 {ankle.ROD / 2}" pos="0 0 {-ankle.ROD / 2}"/>',
}


def ankle_leg_mjcf() -> str:
    """The parallel-ankle leg's MJCF with :data:`GEOMS` (contype 0: drawn only)."""
    text = ankle._mjcf()
    for body, geom in GEOMS.items():
        geom = geom.replace("<geom ", '<geom contype="0" conaffinity="0" ')
        text, n = re.subn(rf'(<body name="{body}"[^>]*>)', rf"\1{geom}", text)
        assert n == 1, body
    return text


def ankle_leg_params(path: Path) -> dict:
    """The leg's parameters (``test_parallel_ankle._params('mjcf')``) with the MJCF above
    written to ``path``."""
    path.write_text(ankle_leg_mjcf())
    p = ankle._params("urdf", path.parent)
    for key in ("robot_description", "loop_closures.frames_a", "loop_closures.frames_b"):
        p.pop(key)
    p.update({"robot_description": "", "urdf_path": str(path)})
    return p
