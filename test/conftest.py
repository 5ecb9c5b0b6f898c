"""The test tree's root (docs/testing.md has the map): core/ (with core/contact/), tools/,
ros/ and repo/ are packages named by subject; helpers/ holds what they share.

test/ goes on sys.path here, before any test module is imported, so ``import helpers``
and the packages' own names (``core.test_physics``) resolve the same way whether pytest
runs from the repository root, from a subdirectory or on one file.
"""

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


def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):
        return
    import pytest

    for item in items:
        rel = Path(str(item.path)).resolve().relative_to(TEST_DIR).as_posix()
        if rel.startswith(SERIAL_PATHS):
            item.add_marker(pytest.mark.xdist_group(SERIAL_GROUP))
