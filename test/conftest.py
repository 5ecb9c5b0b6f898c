"""The test tree's root (docs/testing.md has the map): core/ (with core/contact/), tools/,
ros/ and repo/ are packages named by subject; helpers/ holds what they share.

test/ goes on sys.path here, before any test module is imported, so ``import helpers``
and the packages' own names (``core.test_physics``) resolve the same way whether pytest
runs from the repository root, from a subdirectory or on one file.
"""

import os
import sys
from pathlib import Path

TEST_DIR = str(Path(__file__).resolve().parent)
if TEST_DIR not in sys.path:
    sys.path.insert(0, TEST_DIR)


#: tests that run processes against the wall clock (ROS nodes and their controllers, the
#: browser): with pytest-xdist (the README's command runs ``-n auto --dist loadgroup``) they
#: run one at a time on one worker, so that two real-time scenes never share the machine's
#: cores with each other; the physics and tool tests fill the other workers beside them
SERIAL_GROUP = "wall_clock"
SERIAL_PATHS = ("ros/", "tools/test_viewer.py", "repo/test_packaging.py")


#: the niceness of the workers' other tests while the wall-clock group runs beside them
BACKGROUND_NICE = 19


def _can_renice_back() -> bool:
    """Whether a worker may go from niceness 19 back to 0 (root, or CAP_SYS_NICE; an
    ordinary user may not): tried in a child process, so a refusal costs nothing here."""
    import subprocess

    probe = ("import os; os.setpriority(os.PRIO_PROCESS, 0, 19); "
             "os.setpriority(os.PRIO_PROCESS, 0, 0)")
    try:
        return subprocess.run([sys.executable, "-c", probe], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


_renice = {"ok": None}


def pytest_runtest_setup(item):
    """On a pytest-xdist worker, a test outside the wall-clock group runs at niceness 19 and
    one inside it at 0 (its node processes inherit it), so the physics tests take only the
    cores the real-time scene leaves: it meets a machine as busy as a developer's, not one
    shared half and half. Where the worker cannot go back to 0 (not root, no CAP_SYS_NICE)
    nothing changes: every test runs at the worker's own niceness."""
    if "PYTEST_XDIST_WORKER" not in os.environ or not hasattr(os, "setpriority"):
        return
    if _renice["ok"] is None:
        _renice["ok"] = _can_renice_back()
    if not _renice["ok"]:
        return
    serial = any(m.args and m.args[0] == SERIAL_GROUP for m in item.iter_markers("xdist_group"))
    want = 0 if serial else BACKGROUND_NICE
    if os.getpriority(os.PRIO_PROCESS, 0) != want:
        os.setpriority(os.PRIO_PROCESS, 0, want)


def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):
        return
    import pytest

    for item in items:
        rel = Path(str(item.path)).resolve().relative_to(TEST_DIR).as_posix()
        if rel.startswith(SERIAL_PATHS):
            item.add_marker(pytest.mark.xdist_group(SERIAL_GROUP))
