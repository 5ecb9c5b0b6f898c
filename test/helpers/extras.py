"""Optional extras, one way for all: a test that needs one is skipped where it is absent, with
a reason that names what is missing and how to get it, and fails instead where the
environment variable of its kind is 1. CI (``.ci/run``) sets all three: there, nothing is
skipped for want of an extra.

* :func:`require_ros`: rclpy, tf2_msgs, ROS message packages (``WB_SIM_REQUIRE_ROS``);
* :func:`require_launch_stack`: ``ros2`` with its launch, topic, param and service verbs,
  launch_ros, colcon (``WB_SIM_REQUIRE_ROS``);
* :func:`require_modules`: a module of the test, plot or viewer extra: iDynTree, ray,
  pyarrow, ruff, xacro, matplotlib, rosbags (``WB_SIM_REQUIRE_EXTRAS``);
* :func:`require_mujoco`: MuJoCo, the independent reference of the physics comparisons
  (``WB_SIM_REQUIRE_EXTRAS``);
* :func:`require_robot_data`: a robot's data, icub-models or example-robot-data
  (``WB_SIM_REQUIRE_EXTRAS``);
* :func:`require_browser`: meshcat and Chromium for the viewer's browser tests
  (``WB_SIM_REQUIRE_BROWSER``).

Each may be called at a module's top (the whole module is skipped: call it before importing
the extra), in a fixture (the tests using it are skipped) or in a test.

Only the standard library and pytest are imported at the top.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

#: modules the node needs; a machine without them skips the ROS tests (CI must not)
ROS_MODULES = ("rclpy", "tf2_msgs.msg")
#: the browser of the viewer's tests (Debian's Chromium; ``WB_SIM_CHROMIUM`` names another)
CHROMIUM = os.environ.get("WB_SIM_CHROMIUM", "/usr/bin/chromium")


def settle(missing: list[str], env_var: str, what: str, hint: str = "") -> None:
    """Nothing where ``missing`` is empty; otherwise skip the calling test (or module),
    saying ``what``, the ``missing`` ones and ``hint`` (how to get them), or fail instead
    where ``env_var=1``."""
    if not missing:
        return
    reason = f"{what}: {', '.join(missing)}{'; ' + hint if hint else ''}"
    if os.environ.get(env_var) == "1":
        pytest.fail(f"{reason}; {env_var}=1 requires it", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def _unimportable(names) -> list[str]:
    missing = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as e:
            missing.append(f"{name} ({e})")
    return missing


def require_ros(*extra: str) -> None:
    """rclpy, tf2_msgs and the ``extra`` modules (e.g. ``"sensor_msgs.msg"``)."""
    settle(_unimportable(ROS_MODULES + extra), "WB_SIM_REQUIRE_ROS",
           "ROS 2 Python packages not importable", "tools/setup_venv.sh, or a ROS 2 install")


def require_launch_stack() -> None:
    """The ROS 2 launch stack (``ros2`` with the launch, topic, param and service verbs,
    launch_ros) and colcon, besides :func:`require_ros`'s modules."""
    require_ros()
    missing = [name for name in ("launch_ros", "ros2launch", "ros2topic", "ros2param",
                                 "ros2service", "composition_interfaces.srv", "colcon_core",
                                 "colcon_ros") if _unimportable([name])]
    bindir = Path(sys.executable).parent
    missing += [f"the '{exe}' command" for exe in ("ros2", "colcon")
                if not (bindir / exe).exists() and shutil.which(exe) is None]
    settle(missing, "WB_SIM_REQUIRE_ROS", "the ROS 2 launch stack / colcon is missing",
           "run tools/setup_venv.sh with ../shared/ros2-launch beside the project (or "
           "WB_SIM_ROS2_LAUNCH=DIR), or use a ROS 2 install with colcon")


def require_modules(*names: str, why: str) -> None:
    """Python modules of an extra (a ROS install's ``colcon test`` has none of the PyPI-only
    ones), ``why`` saying how to get them (``"pip install ray (the test extra)"``)."""
    settle(_unimportable(names), "WB_SIM_REQUIRE_EXTRAS", "not importable", why)


def require_mujoco() -> None:
    """MuJoCo (the test extra), the independent engine wb_sim's physics is compared with
    (``helpers/mujoco_twin.py``)."""
    settle(_unimportable(["mujoco"]), "WB_SIM_REQUIRE_EXTRAS",
           "MuJoCo, the reference of the physics comparisons, is not importable",
           "pip install mujoco (the test extra)")


def require_robot_data(*robots: str) -> None:
    """The robot data packages the ``robots`` load: a ready configuration's name
    (``"icub"``, ``"talos"``: its ``urdf_path``) or a ``urdf_path`` itself
    (``"example-robot-data:solo_description/robots/solo12.urdf"``), resolved as wb_sim
    resolves it (icub-models, example-robot-data: from PyPI or a ROS install)."""
    import wb_sim
    from wb_sim.config import read_yaml_params
    from wb_sim.errors import ModelError
    from wb_sim.robot import URDF_SCHEMES

    missing = []
    for robot in robots:
        url = robot if ":" in robot else read_yaml_params(wb_sim.config_path(robot))["urdf_path"]
        scheme, _, rest = str(url).partition(":")
        if scheme == "package" or scheme not in URDF_SCHEMES:
            continue
        try:
            URDF_SCHEMES[scheme][0](rest)
        except ModelError as e:
            if "is not installed" not in str(e):
                raise  # a wrong name in the test or the configuration: not a missing extra
            missing.append(f"{robot} ({e})")
    settle(missing, "WB_SIM_REQUIRE_EXTRAS", "robot data not installed",
           "pip install icub-models example-robot-data (the test extra)")


def require_browser(*what: str) -> None:
    """``"meshcat"`` (the viewer extra) and/or ``"chromium"`` (:data:`CHROMIUM`, and
    matplotlib to read its screenshots)."""
    missing = []
    if "meshcat" in what and importlib.util.find_spec("meshcat") is None:
        missing.append("meshcat is not installed (pip install wb_sim[viewer])")
    if "chromium" in what and not os.access(CHROMIUM, os.X_OK):
        missing.append(f"no browser: {CHROMIUM} not found (apt-get install chromium)")
    if "chromium" in what and importlib.util.find_spec("matplotlib") is None:
        missing.append("matplotlib, which reads the screenshots, is not installed "
                       "(pip install wb_sim[plot])")
    settle(missing, "WB_SIM_REQUIRE_BROWSER", "the viewer in a browser cannot be tested")
