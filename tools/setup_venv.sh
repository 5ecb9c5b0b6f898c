#!/usr/bin/env bash
# Create (or update) the project's virtual environment on a pip-only machine:
# wb_sim with its test, ROS 2, plot and viewer extras from PyPI, plus tf2_msgs, which is not on PyPI
# and is generated locally (tools/build_tf2_msgs.sh, ~15 s the first time), as are the node's own
# wb_sim_interfaces (this repository's wb_sim_interfaces/) and ROS 2's simulation_interfaces from
# ../shared/ros2-interfaces (tools/build_interfaces.sh), plus the ROS 2 launch
# stack (launch, launch_ros, ros2cli: `ros2 launch`, `ros2 topic`, ...) from ../shared/ros2-launch
# where it exists (its install.sh; colcon comes from PyPI with the test extra).
#
# Usage: bash tools/setup_venv.sh            # venv in .venv (or $WB_SIM_VENV)
#   WB_SIM_EDITABLE=0        install wb_sim as users get it (non-editable), as CI does
#   WB_SIM_ROS2_LAUNCH=DIR   where the launch stack is (default: ../shared/ros2-launch)
#   WB_SIM_ROS2_INTERFACES=DIR  where simulation_interfaces is (default: ../shared/ros2-interfaces)
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
  rm -rf wb_sim/build wb_sim/wb_sim.egg-info
  "$VENV/bin/python" -m pip install --quiet "./wb_sim[test,ros,plot,viewer]"
  "$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps ./wb_sim
else
  # editable as a path entry (compat): the repository's root holds the package's directory
  # wb_sim/, which a `python -m` started there would otherwise import as an empty namespace
  # package before setuptools' default editable finder is asked
  "$VENV/bin/python" -m pip install --quiet -e "./wb_sim[test,ros,plot,viewer]" \
    --config-settings editable_mode=compat
fi
bash tools/build_tf2_msgs.sh "$VENV/bin/python"
# the node's own interfaces (ContactState, the snapshots, GetDynamics, the payloads: the node
# needs them), from this repository (~3 min the first time)
bash tools/build_interfaces.sh wb_sim_interfaces "$VENV/bin/python"
# ROS 2 simulation_interfaces (not on PyPI either): generated from its unchanged upstream
# definitions where they are (~3 min the first time)
INTERFACES="${WB_SIM_ROS2_INTERFACES:-../shared/ros2-interfaces}"
if [ -f "$INTERFACES/simulation_interfaces/package.xml" ]; then
  bash tools/build_interfaces.sh "$INTERFACES/simulation_interfaces" "$VENV/bin/python"
else
  echo "setup_venv.sh: no simulation_interfaces at '$INTERFACES' (set WB_SIM_ROS2_INTERFACES):" \
       "the node runs without the simulation_interfaces services" >&2
fi
LAUNCH_STACK="${WB_SIM_ROS2_LAUNCH:-../shared/ros2-launch}"
if [ -f "$LAUNCH_STACK/install.sh" ]; then
  bash "$LAUNCH_STACK/install.sh" "$VENV/bin/python"
else
  echo "setup_venv.sh: no ROS 2 launch stack at '$LAUNCH_STACK' (set WB_SIM_ROS2_LAUNCH):" \
       "the colcon build + ros2 launch tests will be skipped" >&2
fi
echo "setup_venv.sh: ready: $VENV" >&2
