"""Relative file paths in a parameter file (issue 27, round 3): the node resolves a
relative ``terrain.heightfield`` and ``collision.srdf_path`` beside the YAML that sets
them, as the Python API does (it resolved them against its working directory)."""

from __future__ import annotations

import numpy as np

from helpers.extras import require_ros

require_ros()

from helpers.ros import PKG, Proc, fresh_domain_id, sim_node_argv  # noqa: E402
from wb_sim.ros.parameters import path_relative_to_its_file  # noqa: E402


def _config(tmp_path):
    here = tmp_path / "robots"
    here.mkdir()
    np.save(here / "hill.npy", np.zeros((5, 5)))
    (here / "me.srdf").write_text((PKG / "urdf" / "humanoid.srdf").read_text())
    cfg = here / "me.yaml"
    cfg.write_text("wb_sim:\n  ros__parameters:\n    terrain:\n      heightfield: hill.npy\n"
                   "      heightfield_origin: [5.0, 5.0, 0.0]\n"
                   "    collision:\n      srdf_path: me.srdf\n")
    return here, cfg


def test_relative_file_keys_resolve_beside_their_yaml(tmp_path):
    here, cfg = _config(tmp_path)
    assert path_relative_to_its_file("terrain.heightfield", "hill.npy", (str(cfg),), "wb_sim") \
        == str(here / "hill.npy")
    assert path_relative_to_its_file("collision.srdf_path", "me.srdf", (str(cfg),), "wb_sim") \
        == str(here / "me.srdf")
    # given with -p (no file sets it): stays relative to the working directory
    assert path_relative_to_its_file("terrain.heightfield", "other.npy", (str(cfg),),
                                     "wb_sim") == "other.npy"


def test_the_node_finds_a_relative_heightfield_beside_its_yaml(tmp_path):
    _, cfg = _config(tmp_path)
    elsewhere = tmp_path / "elsewhere"  # the node's working directory: not the YAML's
    elsewhere.mkdir()
    p = Proc("wb_sim", sim_node_argv() + ["--params-file", str(cfg)], fresh_domain_id(),
             elsewhere)
    try:
        assert p.wait_for_log("simulating", 60), p.describe()
        assert p.interrupt(10) == 0, p.describe()
    finally:
        p.close()
