#!/usr/bin/env bash
# Create (or update) the project's virtual environment on a pip-only machine:
# wb_sim with its test, ROS 2, plot and viewer extras from PyPI, plus tf2_msgs, which is not on PyPI
# and is generated locally (tools/build_tf2_msgs.sh, ~15 s the first time).
#
# Usage: bash tools/setup_venv.sh            # venv in .venv (or $WB_SIM_VENV)
# Needs: python3 >= 3.10 with venv, cmake >= 3.21, gcc/g++. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${WB_SIM_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e ".[test,ros,plot,viewer]"
bash tools/build_tf2_msgs.sh "$VENV/bin/python"
echo "setup_venv.sh: ready: $VENV" >&2
