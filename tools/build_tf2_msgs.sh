#!/usr/bin/env bash
# Build and install the ROS 2 interface package `tf2_msgs` (TFMessage only) into a Python
# virtual environment that already has the PyPI ROS 2 wheels, Kilted's or Jazzy's, e.g.
#     pip install 'ros-rclpy[fastrtps]' ros-geometry-msgs ros-std-msgs                  # Kilted
#     pip install 'ros-jazzy-rclpy[fastrtps]' ros-jazzy-geometry-msgs ros-jazzy-std-msgs  # Jazzy
# tf2_msgs is not on PyPI: its one message is written here and built by
# tools/build_interfaces.sh (rosidl from PyPI build wheels, the machine's cmake and gcc).
#
# Usage: tools/build_tf2_msgs.sh [PYTHON] [--force]
#   PYTHON   the target venv's interpreter (default: `python` on PATH)
#   --force  rebuild even if `from tf2_msgs.msg import TFMessage` already works
set -euo pipefail
PKG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/tf2_msgs_src.XXXXXX")"
trap 'rm -rf "$PKG_DIR"' EXIT
mkdir -p "$PKG_DIR/msg"
cat > "$PKG_DIR/msg/TFMessage.msg" <<'MSG'
geometry_msgs/TransformStamped[] transforms
MSG
cat > "$PKG_DIR/package.xml" <<'XML'
<?xml version="1.0"?>
<package format="3">
  <name>tf2_msgs</name>
  <version>0.0.0</version>
  <description>tf2_msgs (TFMessage only), built locally from PyPI ROS 2 wheels.</description>
  <maintainer email="nobody@example.com">nobody</maintainer>
  <license>Apache-2.0</license>
  <buildtool_depend>ament_cmake</buildtool_depend>
  <buildtool_depend>rosidl_default_generators</buildtool_depend>
  <depend>geometry_msgs</depend>
  <exec_depend>rosidl_default_runtime</exec_depend>
  <member_of_group>rosidl_interface_packages</member_of_group>
  <export>
    <build_type>ament_cmake</build_type>
  </export>
</package>
XML
bash "$(dirname "$0")/build_interfaces.sh" "$PKG_DIR" "$@"
