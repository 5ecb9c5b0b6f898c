"""The README stays true: its parameter table is the one generated from the code,
and the commands and configurations it names exist."""

import re
from pathlib import Path

import wb_sim
from wb_sim.config import (NODE_PARAMETERS, PARAMETERS, node_parameter_table_markdown,
                           parameter_table_markdown)

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_parameter_table_is_generated_from_the_code():
    assert parameter_table_markdown() in README
    assert node_parameter_table_markdown() in README
    for p in PARAMETERS + NODE_PARAMETERS:
        assert f"| `{p.key}` |" in README, p.key


def test_every_robot_named_in_readme_has_a_config():
    robots = re.findall(r"^\| `(\w+)`(?: \(default\))? \| ", README, flags=re.M)
    robots = [r for r in robots if (ROOT / "config" / f"{r}.yaml").exists() or r.islower()]
    named = {"humanoid", "icub", "talos", "anymal", "panda"}
    assert named <= set(robots)
    for r in named:
        assert wb_sim.config_path(r).is_file()


def test_readme_commands_are_the_ci_commands():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "-m pytest test -q" in README
    assert "bash tools/setup_venv.sh && .venv/bin/python -m pytest test -q" in README
    assert "bash tools/setup_venv.sh && .venv/bin/wb_sim_run" in README
    assert "tools/setup_venv.sh" in ci and "-m pytest test -q" in ci
