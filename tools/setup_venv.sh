#!/usr/bin/env bash
# Create (or update) the project's virtual environment on a pip-only machine:
# wb_sim with its test, ROS 2, plot and viewer extras from PyPI, plus tf2_msgs, which is not on PyPI
# and is generated locally (tools/build_tf2_msgs.sh, ~15 s the first time), plus the ROS 2 launch
# stack (launch, launch_ros, ros2cli: `ros2 launch`, `ros2 topic`, ...) from ../shared/ros2-launch
# where it exists (its install.sh; colcon comes from PyPI with the test extra).
#
# Usage: bash tools/setup_venv.sh            # venv in .venv (or $WB_SIM_VENV)
#   WB_SIM_EDITABLE=0        install wb_sim as users get it (non-editable), as CI does
#   WB_SIM_ROS2_LAUNCH=DIR   where the launch stack is (default: ../shared/ros2-launch)
# Needs: python3 >= 3.10 with venv, cmake >= 3.21, gcc/g++. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${WB_SIM_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
if [ "${WB_SIM_EDITABLE:-1}" = "0" ]; then
  # a fresh build: nothing left over from an earlier build of the tree may ship
  rm -rf build wb_sim.egg-info
  "$VENV/bin/python" -m pip install --quiet ".[test,ros,plot,viewer]"
  "$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps .
else
  "$VENV/bin/python" -m pip install --quiet -e ".[test,ros,plot,viewer]"
fi
bash tools/build_tf2_msgs.sh "$VENV/bin/python"
LAUNCH_STACK="${WB_SIM_ROS2_LAUNCH:-../shared/ros2-launch}"
if [ -f "$LAUNCH_STACK/install.sh" ]; then
  bash "$LAUNCH_STACK/install.sh" "$VENV/bin/python"
else
  echo "setup_venv.sh: no ROS 2 launch stack at '$LAUNCH_STACK' (set WB_SIM_ROS2_LAUNCH):" \
       "the colcon build + ros2 launch tests will be skipped" >&2
fi
echo "setup_venv.sh: ready: $VENV" >&2
