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
