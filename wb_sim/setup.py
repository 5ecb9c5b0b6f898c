"""wb_sim: ament_python package (colcon) and plain pip package in one setup.py."""

from glob import glob

from setuptools import Extension, find_packages, setup

package_name = "wb_sim"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{package_name}"]),
        (f"share/{package_name}", ["package.xml"]),
        (f"share/{package_name}/launch", glob("launch/*.py")),
        (f"share/{package_name}/config", glob("config/*.yaml")),
        (f"share/{package_name}/config/worlds", glob("config/worlds/*.yaml")),
        (f"share/{package_name}/urdf", glob("urdf/*.urdf") + glob("urdf/*.srdf")),
        (f"share/{package_name}/rviz", glob("rviz/*.rviz")),
    ],
    # the step's compiled kernels (wb_sim/compiled.py): plain C over Python's buffer protocol,
    # no numpy or pinocchio headers, a second to build; WB_SIM_PLAIN=1 runs the Python path.
    # optional: without a C compiler the install still succeeds, and wb_sim warns at run time
    # that the plain (slower) step runs; CI and the tests require it built. -ffp-contract=off:
    # no fused multiply-add, so the kernels round alike on every CPU (aarch64's baseline has FMA)
    ext_modules=[Extension("wb_sim._compiled", ["wb_sim/_compiled.c"],
                           extra_compile_args=["-O3", "-ffp-contract=off"], optional=True)],
    python_requires=">=3.10",
    # pip installs these from PyPI; in a ROS install rosdep provides them (package.xml)
    install_requires=["numpy", "scipy", "pyyaml", "pin>=3"],
    extras_require={
        # pytest-xdist: the suite's two workers (pytest.ini); setuptools + wheel: test_packaging
        # builds the wheel; colcon: the `colcon build` tests;
        # ray + pyarrow: the campaign tests run the Ray backend and write Parquet; ruff: test_lint;
        # xacro: the .xacro urdf_path tests; mujoco: the independent engine the physics is
        # compared with (test/helpers/mujoco_twin.py)
        "test": ["pytest", "pytest-xdist", "icub-models", "example-robot-data", "idyntree",
                 "setuptools", "wheel", "colcon-common-extensions", "ray", "pyarrow", "ruff",
                 "xacro", "mujoco"],
        # ROS 2 (Kilted) Python wheels for a pip-only machine; tf2_msgs is not on PyPI:
        # tools/build_tf2_msgs.sh generates it (tools/setup_venv.sh does both)
        "ros": ["ros-rclpy[fastrtps]", "ros-sensor-msgs", "ros-geometry-msgs", "ros-std-msgs",
                "ros-std-srvs", "ros-nav-msgs", "ros-rosgraph-msgs", "ros-builtin-interfaces",
                "ros-rcl-interfaces", "ros-ament-index-python", "ros-visualization-msgs",
                "ros-diagnostic-msgs"],
        # recordings (rosbag2 MCAP without ROS) and their plots
        "plot": ["matplotlib", "rosbags>=0.10"],
        # the browser viewer (viewer: meshcat)
        "viewer": ["meshcat"],
        # wb_sim_batch --backend ray (a local Ray instance or a cluster)
        "ray": ["ray"],
        # a .xacro urdf_path (parameter xacro.args)
        "xacro": ["xacro"],
    },
    zip_safe=False,
    maintainer="wb_sim developers",
    maintainer_email="wb_sim@example.com",
    description="Whole-body simulator of floating-base robots in contact with the ground (ROS 2)",
    license="BSD-3-Clause",
    entry_points={
        "console_scripts": [
            "wb_sim_demo = wb_sim.tools.demo:main",
            "wb_sim_bench = wb_sim.tools.bench.physics:main",
            "wb_sim_node = wb_sim.ros.process:main",
            "wb_sim_pd_controller = wb_sim.ros.pd_controller:main",
            "wb_sim_run = wb_sim.ros.run:main",
            "wb_sim_record = wb_sim.ros.record:main",
            "wb_sim_replay = wb_sim.ros.replay:main",
            "wb_sim_plot = wb_sim.tools.plot:main",
            "wb_sim_batch = wb_sim.tools.campaign.cli:main",
            "wb_sim_robot = wb_sim.tools.robot_setup:main",
        ],
    },
)
