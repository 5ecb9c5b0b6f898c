"""Optional extras: a test module (or a test) that needs one is skipped where it is absent,
with a reason that names what is missing and how to get it, and fails instead where the
environment asks for it (CI, ``.ci/run``, sets every variable):

* :func:`require_ros`: rclpy, tf2_msgs and the named ROS 2 Python modules
  (``WB_SIM_REQUIRE_ROS=1``);
* :func:`require_launch_stack`: ``ros2`` with its launch, topic, param and service verbs,
  launch_ros, colcon (``WB_SIM_REQUIRE_ROS=1``);
* :func:`require_modules`: Python modules of the test, plot and viewer extras
  (``WB_SIM_REQUIRE_EXTRAS=1``).

Only the standard library and pytest are imported here.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

#: modules the node needs; a machine without them skips the ROS tests (CI must not)
ROS_MODULES = ("rclpy", "tf2_msgs.msg")


def require_ros(*extra: str) -> None:
    """Skip the calling test module if rclpy, tf2_msgs or ``extra`` modules
    cannot be imported; fail instead when ``WB_SIM_REQUIRE_ROS=1`` (CI)."""
    _require(ROS_MODULES + extra, "WB_SIM_REQUIRE_ROS", "ROS 2 Python packages not importable")


def _require(names, env_var: str, what: str, hint: str = "") -> None:
    """Skip the calling test module, or fail where ``env_var=1``, naming the
    modules of ``names`` that cannot be imported."""
    missing = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as e:
            missing.append(f"{name} ({e})")
    if not missing:
        return
    why = f"{what}: {', '.join(missing)}{'; ' + hint if hint else ''}"
    if os.environ.get(env_var) == "1":
        pytest.fail(f"{why}; {env_var}=1 requires them", pytrace=False)
    pytest.skip(why, allow_module_level=True)


def require_launch_stack() -> None:
    """Skip the calling module without the ROS 2 launch stack (``ros2`` with the launch,
    topic, param and service verbs, launch_ros) and colcon, saying how to get them;
    fail instead when ``WB_SIM_REQUIRE_ROS=1`` (CI)."""
    import shutil
    require_ros()
    missing = []
    for name in ("launch_ros", "ros2launch", "ros2topic", "ros2param", "ros2service",
                 "composition_interfaces.srv", "colcon_core", "colcon_ros"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    bindir = Path(sys.executable).parent
    for exe in ("ros2", "colcon"):
        if not (bindir / exe).exists() and shutil.which(exe) is None:
            missing.append(f"the '{exe}' command")
    if not missing:
        return
    why = (f"the ROS 2 launch stack / colcon is missing ({', '.join(missing)}): run "
           f"tools/setup_venv.sh with ../shared/ros2-launch beside the project (or "
           f"WB_SIM_ROS2_LAUNCH=DIR), or use a ROS 2 install with colcon")
    if os.environ.get("WB_SIM_REQUIRE_ROS") == "1":
        pytest.fail(f"{why}; WB_SIM_REQUIRE_ROS=1 requires it", pytrace=False)
    pytest.skip(why, allow_module_level=True)


def require_modules(*names: str, why: str) -> None:
    """Skip the calling test module if one of ``names`` cannot be imported (a ROS
    install's ``colcon test`` has no PyPI-only test extras), with ``why`` saying how to
    get them; fail instead when ``WB_SIM_REQUIRE_EXTRAS=1`` (CI)."""
    _require(names, "WB_SIM_REQUIRE_EXTRAS", "not importable", why)
