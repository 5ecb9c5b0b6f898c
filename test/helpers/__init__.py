"""What the tests share (importable as ``helpers``: the root conftest.py puts test/ on sys.path).

* :mod:`helpers.extras`: skip a test whose optional extra is absent, or fail where CI asks
  for it (``WB_SIM_REQUIRE_ROS``, ``WB_SIM_REQUIRE_EXTRAS``, ``WB_SIM_REQUIRE_BROWSER``);
* :mod:`helpers.robots`: the default humanoid and its shipped PD controller (the fixtures of
  test/core/conftest.py);
* :mod:`helpers.contact_reference`: the compliant contact law integrated as a 1-D ODE;
* :mod:`helpers.campaign`: controllers and metrics that the campaign tests name;
* :mod:`helpers.ros`: node processes, DDS domains and an rclpy client of the ROS tests;
  :mod:`helpers.ros_effort_controller` is a controller process they start;
* :mod:`helpers.browser`: headless Chromium over the DevTools protocol (the viewer tests).

Only the standard library is imported here.
"""

from pathlib import Path

#: the test tree (test/)
TEST_DIR = Path(__file__).resolve().parents[1]
#: the repository: docs/, tools/, .ci/, test/ and the two ROS 2 packages below
ROOT = TEST_DIR.parent
#: the wb_sim package's sources (a colcon package and a pip project: package.xml, setup.py,
#: the ``wb_sim`` module, config/, urdf/, launch/, rviz/)
PKG = ROOT / "wb_sim"
#: the interface package's sources (msg/, srv/)
INTERFACES_PKG = ROOT / "wb_sim_interfaces"
#: screenshots and other files the tests keep for a look (ignored by git)
ARTIFACTS = TEST_DIR / "artifacts"
