#!/usr/bin/env bash
# A second virtual environment for the node on ROS 2 Jazzy (the LTS), beside the main one on
# Kilted (tools/setup_venv.sh): wb_sim installed as users get it (non-editable), pytest, Jazzy's
# rclpy and message wheels from PyPI (ros-jazzy-*, which pin ros-rclpy 7.1.x and the Jazzy
# versions of the ros-* wheels), and tf2_msgs and the node's own wb_sim_interfaces (this
# repository's wb_sim_interfaces/) generated with Jazzy's rosidl build wheels
# (tools/build_interfaces.sh picks them from the installed rclpy). What it does not install: the
# test extras of the core (iDynTree, robot data, ray, ...), the plot and viewer extras,
# simulation_interfaces and the ROS 2 launch stack: the Jazzy subset of .ci/run
# (docs/testing.md) needs none of them.
#
# Usage: bash tools/setup_jazzy_venv.sh     # venv in .ci/venv-jazzy (or $WB_SIM_JAZZY_VENV)
#   WB_SIM_JAZZY_PYTHON=python3.X   the interpreter the venv is made with (default python3;
#                                   Jazzy's rclpy wheels exist for CPython 3.10 to 3.14)
# Needs what tools/setup_venv.sh needs: python3 with venv, cmake >= 3.21, gcc/g++. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "setup_jazzy_venv.sh: ERROR: $*" >&2; exit 1; }
VENV="${WB_SIM_JAZZY_VENV:-.ci/venv-jazzy}"
BASE_PY="${WB_SIM_JAZZY_PYTHON:-python3}"
# the node's ROS packages (setup.py's `ros` extra), Jazzy's
JAZZY_WHEELS=(
  "ros-jazzy-rclpy[fastrtps]" ros-jazzy-sensor-msgs ros-jazzy-geometry-msgs ros-jazzy-std-msgs
  ros-jazzy-std-srvs ros-jazzy-nav-msgs ros-jazzy-rosgraph-msgs ros-jazzy-builtin-interfaces
  ros-jazzy-rcl-interfaces ros-jazzy-ament-index-python ros-jazzy-visualization-msgs
  ros-jazzy-diagnostic-msgs
)
if [ ! -x "$VENV/bin/python" ]; then
  "$BASE_PY" -m venv "$VENV" || die "cannot make a venv with '$BASE_PY' (set WB_SIM_JAZZY_PYTHON)"
fi
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip
# wb_sim without the `ros` extra (it names the unprefixed ros-* wheels, which are Kilted's), then
# Jazzy's wheels (rosbags: the bag reader the contact_state round trip uses; pytest-xdist: the
# workers pytest.ini asks for); a fresh build of
# wb_sim, as tools/setup_venv.sh does with WB_SIM_EDITABLE=0
rm -rf wb_sim/build wb_sim/wb_sim.egg-info
"$PY" -m pip install --quiet --disable-pip-version-check ./wb_sim pytest pytest-xdist "rosbags>=0.10" "${JAZZY_WHEELS[@]}" \
  || die "pip install of wb_sim and the ros-jazzy-* wheels failed (no Jazzy wheel for $("$PY" -V)?)"
"$PY" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps ./wb_sim
WB_SIM_ROS_DISTRO=jazzy bash tools/build_tf2_msgs.sh "$PY" \
  || die "tf2_msgs could not be generated with Jazzy's rosidl (tools/build_tf2_msgs.sh)"
WB_SIM_ROS_DISTRO=jazzy bash tools/build_interfaces.sh wb_sim_interfaces "$PY" \
  || die "wb_sim_interfaces could not be generated with Jazzy's rosidl (tools/build_interfaces.sh)"
# the venv must hold Jazzy's rclpy, not a Kilted one pulled in by a stray dependency
RCLPY="$(env -u _ROS_WHEELS_BOOTSTRAP_COMPLETE -u PYTHONPATH -u LD_LIBRARY_PATH "$PY" -c \
  'from importlib.metadata import version; import rclpy, tf2_msgs.msg, wb_sim_interfaces.msg; print(version("ros-rclpy"))')" \
  || die "rclpy, tf2_msgs or wb_sim_interfaces does not import in $VENV"
case "$RCLPY" in
  7.*) ;;
  *) die "$VENV has ros-rclpy $RCLPY, not Jazzy's 7.x" ;;
esac
echo "setup_jazzy_venv.sh: ready: $VENV (ros-rclpy $RCLPY, ROS 2 Jazzy)" >&2
