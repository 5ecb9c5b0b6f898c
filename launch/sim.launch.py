"""Start the wb_sim simulator node, and optionally the example controller and RViz.

    ros2 launch wb_sim sim.launch.py                       # humanoid + PD controller
    ros2 launch wb_sim sim.launch.py robot:=icub rviz:=true
    ros2 launch wb_sim sim.launch.py controller:=none      # bring your own controller
    ros2 launch wb_sim sim.launch.py config:=/path/my.yaml # override the robot's parameters
    ros2 launch wb_sim sim.launch.py sync:=lockstep        # one step per command (deterministic)
    ros2 launch wb_sim sim.launch.py viewer:=meshcat       # browser view where RViz is absent

The robot's parameters come from share/wb_sim/config/<robot>.yaml; a ``config``
file is loaded after it, so it overrides any key it sets.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

ROBOTS = ("humanoid", "icub", "talos", "anymal", "panda")


def _nodes(context, *args, **kwargs):
    share = get_package_share_directory("wb_sim")
    robot = LaunchConfiguration("robot").perform(context)
    if robot not in ROBOTS:
        raise RuntimeError(f"unknown robot '{robot}'; choose one of {', '.join(ROBOTS)}")
    params = [os.path.join(share, "config", f"{robot}.yaml")]
    override = LaunchConfiguration("config").perform(context)
    if override:
        if not os.path.isfile(override):
            raise RuntimeError(f"config file not found: {override}")
        params.append(override)
    controller = LaunchConfiguration("controller").perform(context)
    if controller not in ("pd", "none"):
        raise RuntimeError(f"unknown controller '{controller}'; choose pd or none")
    use_sim_time = LaunchConfiguration("use_sim_time").perform(context).lower() == "true"
    sync = LaunchConfiguration("sync").perform(context)
    if sync not in ("realtime", "lockstep"):
        raise RuntimeError(f"unknown sync mode '{sync}'; choose realtime or lockstep")
    viewer = LaunchConfiguration("viewer").perform(context)
    if viewer not in ("none", "meshcat"):
        raise RuntimeError(f"unknown viewer '{viewer}'; choose none or meshcat")

    # with the example controller, the physics starts at its first command (it starts later)
    sim_params = params + [{"command.wait_for_first": controller == "pd", "sync.mode": sync,
                            "viewer": viewer}]
    actions = [Node(package="wb_sim", executable="wb_sim_node", name="wb_sim", output="screen",
                    parameters=sim_params, emulate_tty=True)]
    if controller == "pd":
        actions.append(Node(package="wb_sim", executable="wb_sim_pd_controller",
                            name="wb_sim_pd_controller", output="screen", emulate_tty=True,
                            parameters=params + [{"use_sim_time": use_sim_time}]))
    actions.append(Node(package="rviz2", executable="rviz2", name="rviz2", output="log",
                        arguments=["-d", os.path.join(share, "rviz", "wb_sim.rviz")],
                        parameters=[{"use_sim_time": use_sim_time}],
                        condition=IfCondition(LaunchConfiguration("rviz"))))
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="humanoid",
                              description=f"Robot configuration: one of {', '.join(ROBOTS)}"),
        DeclareLaunchArgument("config", default_value="",
                              description="A YAML parameter file (wb_sim: ros__parameters:) "
                                          "overriding the robot's configuration"),
        DeclareLaunchArgument("controller", default_value="pd",
                              description="'pd': start the example PD + gravity-compensation "
                                          "controller; 'none': bring your own"),
        DeclareLaunchArgument("rviz", default_value="false", description="Start RViz (true/false)"),
        DeclareLaunchArgument("use_sim_time", default_value="true",
                              description="Run the controller and RViz on the simulated /clock"),
        DeclareLaunchArgument("sync", default_value="realtime",
                              description="'realtime': paced by real_time_factor; 'lockstep': "
                                          "each step waits for the controller's command"),
        DeclareLaunchArgument("viewer", default_value="none",
                              description="'meshcat': serve a browser view of the robot and "
                                          "contact forces (URL in the log); 'none'"),
        OpaqueFunction(function=_nodes),
    ])
