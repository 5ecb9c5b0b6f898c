"""The README and docs/ stay true: the parameter tables are the ones generated from
the code, the commands and configurations they name exist, their links resolve."""

import re

import wb_sim
from wb_sim.config import PARAMETERS, parameter_table_markdown
from wb_sim.ros.parameters import NODE_PARAMETERS, node_parameter_table_markdown

from helpers import PKG, ROOT
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"


def test_parameter_table_is_generated_from_the_code():
    parameters = (DOCS / "parameters.md").read_text()
    ros = (DOCS / "ros.md").read_text()
    assert parameter_table_markdown() in parameters
    assert node_parameter_table_markdown() in ros
    for p in PARAMETERS:
        assert f"| `{p.key}` |" in parameters, p.key
    for p in NODE_PARAMETERS:
        assert f"| `{p.key}` |" in ros, p.key


def test_links_of_the_readme_and_the_docs_resolve():
    """Every relative link of README.md and docs/*.md names an existing file."""
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    checked = 0
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            assert (page.parent / target).exists(), f"{page.name}: link to {target} is broken"
            checked += 1
    assert checked >= 10  # the README links every page of docs/
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)\)", README))
    assert {p.name for p in DOCS.glob("*.md")} <= linked, "a page of docs/ the README does not link"


def test_every_robot_named_in_readme_has_a_config():
    robots = re.findall(r"^\| `(\w+)`(?: \(default\))? \| ", README, flags=re.M)
    robots = [r for r in robots if (PKG / "config" / f"{r}.yaml").exists() or r.islower()]
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


def test_readme_python_api_example_stands_and_records_data(tmp_path, monkeypatch):
    """The README's Python API example, run as written: the humanoid stands through it
    and the recording it plots holds the whole run (it once collapsed in 1 s and the
    recorder, never called, wrote empty plots)."""
    import numpy as np
    code = README.split("## Python API\n\n```python\n", 1)[1].split("```\n", 1)[0]
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(code, "README.md (Python API)", "exec"), ns)
    hist = ns["hist"]
    z = np.asarray(hist.base_position)[:, 2]
    z0 = wb_sim.config.read_yaml_params(wb_sim.config_path("humanoid"))["initial.base_position"][2]
    assert len(z) >= 2000 and abs(np.asarray(hist.t)[-1] - 2.0) < 2e-3
    assert np.all(np.abs(z - z0) < 0.02), f"base height {z.min():.4f}-{z.max():.4f} m, start {z0}"
    pngs = sorted((tmp_path / "plots").glob("*.png"))
    assert len(pngs) >= 4 and all(p.stat().st_size > 20_000 for p in pngs), \
        [(p.name, p.stat().st_size) for p in pngs]
    assert (tmp_path / "run.npz").is_file()


def test_plots_of_an_empty_history_are_refused(tmp_path):
    import pytest
    from wb_sim.tools.plot import plot_history
    from wb_sim.tools.recording import Recorder, RecordingError
    sim = wb_sim.Simulator.from_yaml(wb_sim.default_config_path())
    with pytest.raises(RecordingError, match="no samples"):
        plot_history(Recorder(sim).history(), tmp_path / "plots")
    assert not list(tmp_path.rglob("*.png"))
