"""ruff over the repository (ruff.toml: pyflakes' unused and undefined names, syntax
errors, statement errors): the code has none. ruff comes with the test extra."""

from __future__ import annotations

import subprocess
import sys

from helpers.extras import require_modules

require_modules("ruff", why="pip install ruff (the test extra)")

from helpers import ROOT


def test_ruff_finds_nothing():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format",
                          "concise", "."], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
