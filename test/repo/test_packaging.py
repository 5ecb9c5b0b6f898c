"""What users install: every module and data file ships in a built wheel, and
the node processes of the tests run the installed package, not the source tree.

The tests import wb_sim from the source tree (``python -m pytest`` from the
repository); an editable install does the same. Neither would notice a module
that ``find_packages`` leaves out (a folder without ``__init__.py``, as
``wb_sim/ros/`` once was): every colcon, ``pip install .`` and wheel install
then fails with ``ModuleNotFoundError``. So:

* the wheel is built from a copy of the sources and its file list compared with
  the source tree's modules, data files and console scripts;
* the node tests start their processes outside the source tree without it on
  ``PYTHONPATH``; CI (``WB_SIM_REQUIRE_INSTALLED=1``) installs wb_sim
  non-editable, and this file checks that those processes import it from the
  install.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers.ros import copy_package_sources

from helpers import PKG, ROOT
DATA_GLOBS = {"launch": "*.py", "config": "*.yaml", "config/worlds": "*.yaml", "urdf": "*.?rdf",
              "rviz": "*.rviz"}


def _source_modules() -> set[str]:
    return {p.relative_to(PKG).as_posix() for p in (PKG / "wb_sim").rglob("*.py")
            if "__pycache__" not in p.parts}


def _console_scripts() -> set[str]:
    tree = ast.parse((PKG / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "console_scripts" for k in node.keys):
            entries = ast.literal_eval(node.values[0])
            return {e.split("=")[0].strip() for e in entries}
    raise AssertionError("no console_scripts in setup.py")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    tmp = tmp_path_factory.mktemp("wheel")
    src = copy_package_sources(tmp / "src")
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                          "-q", "-w", str(tmp / "dist"), str(src / "wb_sim")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, (f"building the wheel failed (needs setuptools and wheel: the test "
                                 f"extra):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    wheels = list((tmp / "dist").glob("wb_sim-*.whl"))
    assert len(wheels) == 1, wheels
    with zipfile.ZipFile(wheels[0]) as z:
        yield z


def test_every_python_package_has_an_init():
    """find_packages ships only folders with __init__.py: every folder with modules has one."""
    folders = {p.parent for p in (PKG / "wb_sim").rglob("*.py") if "__pycache__" not in p.parts}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file())
    assert not missing, f"folders without __init__.py (left out of every install): {missing}"


def test_wheel_ships_every_module(wheel):
    shipped = {n for n in wheel.namelist() if n.startswith("wb_sim/") and n.endswith(".py")}
    source = _source_modules()
    assert shipped == source, (f"in the source tree, not in the wheel: {sorted(source - shipped)}; "
                               f"in the wheel only: {sorted(shipped - source)}")
    assert "wb_sim/ros/node.py" in shipped and "wb_sim/contact/rigid.py" in shipped


def test_wheel_ships_every_data_file_and_script(wheel):
    names = wheel.namelist()
    data = {n.split(".data/data/", 1)[1] for n in names if ".data/data/" in n}
    expected = {"share/wb_sim/package.xml", "share/ament_index/resource_index/packages/wb_sim"}
    for folder, pattern in DATA_GLOBS.items():
        files = sorted((PKG / folder).glob(pattern))
        assert files, folder
        expected |= {f"share/wb_sim/{folder}/{f.name}" for f in files}
    assert data == expected, (f"missing: {sorted(expected - data)}; extra: {sorted(data - expected)}")
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = wheel.read(entry_points).decode()
    scripts = _console_scripts()
    assert {"wb_sim_node", "wb_sim_pd_controller", "wb_sim_run", "wb_sim_record",
            "wb_sim_replay"} <= scripts
    for s in scripts:
        assert f"{s} = " in text, s


def test_node_processes_run_the_installed_package(tmp_path):
    """The ROS tests' processes (helpers.ros.ros_env, outside the source tree) import
    wb_sim.ros as installed; in CI (WB_SIM_REQUIRE_INSTALLED=1) not from the sources."""
    from helpers.ros import RUN_DIR, ros_env

    code = "import wb_sim.ros, wb_sim.ros.run; print(wb_sim.ros.run.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=RUN_DIR, env=ros_env(0))
    assert out.returncode == 0, out.stderr[-2000:]
    where = Path(out.stdout.strip()).resolve()
    assert where.name == "run.py"
    # the sources are ROOT/wb_sim; a venv inside the tree (CI's .ci/venv) is an install
    from_sources = (PKG / "wb_sim") in where.parents
    if os.environ.get("WB_SIM_REQUIRE_INSTALLED") == "1":
        assert not from_sources, (f"the node processes import wb_sim from the source tree "
                                  f"({where}); CI must test a non-editable install")
    elif from_sources:
        print(f"note: wb_sim is installed editable ({where}); CI tests a non-editable install")


def test_the_wheel_and_the_installed_package_have_the_compiled_kernels(wheel):
    """wb_sim/_compiled.c is built into the wheel, and the installed package runs the compiled
    step (wb_sim.compiled.path(), as the benchmarks report it) unless WB_SIM_PLAIN=1."""
    from helpers.ros import RUN_DIR, ros_env

    built = [n for n in wheel.namelist() if n.startswith("wb_sim/_compiled.")
             and n.endswith((".so", ".pyd"))]
    assert len(built) == 1, [n for n in wheel.namelist() if "_compiled" in n]
    code = "import wb_sim.compiled as c; print(c.path())"
    for plain, expected in (("0", "compiled"), ("1", "plain")):
        out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                             text=True, timeout=60, cwd=RUN_DIR,
                             env={**ros_env(0), "WB_SIM_PLAIN": plain})
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == expected, (plain, out.stdout, out.stderr)


def test_wb_sim_imports_as_the_package_from_the_repository_root():
    """The repository's root holds the package's directory ``wb_sim/`` (beside
    ``wb_sim_interfaces/``, the layout colcon needs); ``python -m`` started there puts the
    root on the path, where ``wb_sim/`` has no ``__init__.py``. The installed package must
    still be what ``import wb_sim`` gives (an editable install from tools/setup_venv.sh is a
    path entry for this reason), not an empty namespace package."""
    code = "import wb_sim, wb_sim.config; print(wb_sim.__file__); print(wb_sim.config.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    init, config = out.stdout.split()
    assert init.endswith(os.path.join("wb_sim", "__init__.py")), init
    assert config.endswith(os.path.join("wb_sim", "config.py")), config
