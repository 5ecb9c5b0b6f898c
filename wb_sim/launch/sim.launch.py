"""Start the wb_sim simulator node, and optionally the example controller and RViz.

    ros2 launch wb_sim sim.launch.py                       # humanoid + PD controller
    ros2 launch wb_sim sim.launch.py robot:=icub rviz:=true
    ros2 launch wb_sim sim.launch.py robot:=/path/my_robot.yaml   # your own robot
    ros2 launch wb_sim sim.launch.py controller:=none      # bring your own controller
    ros2 launch wb_sim sim.launch.py controller:=wb_sim.controllers:pd_gravity   # in the node
    ros2 launch wb_sim sim.launch.py config:=/path/my.yaml # override the robot's parameters
    ros2 launch wb_sim sim.launch.py sync:=realtime        # free-running (default with pd: lockstep)
    ros2 launch wb_sim sim.launch.py viewer:=meshcat       # browser view where RViz is absent
    ros2 launch wb_sim sim.launch.py world:=/path/world.yaml   # a world file (docs/world.md)

Parameters, each layer winning over the one before: the robot's file
(share/wb_sim/config/<robot>.yaml, or the file ``robot`` names), this launcher's
defaults (``wb_sim.ros.parameters.launcher_layers``, shared with ``wb_sim_run``:
``command.wait_for_first: true``, the physics waits for the first command; with
``controller:=pd`` paced lockstep, ``sync.mode: lockstep``: one step per answer, never
faster than real time, so a busy machine slows the simulation and never drops the
robot), the ``config`` file, then the controller's (``controller:=module:factory``
runs it inside the node), ``sync`` and ``viewer`` when given. A ``world`` file
(docs/world.md) stands for the robot's file (its ground, terrain, objects and robot, as one
parameter file) and its robot's controller is the default of ``controller``. A world of
several robots: the node serves them all (``world_file``: each robot under its name as
namespace) and each robot whose ``controller`` is ``pd`` gets its own example controller in
the namespace ``/<name>`` (``controller:=none``: none of them), and ``rviz:=true`` opens a
configuration generated from ``rviz/wb_sim.rviz`` beside the launch's logs that shows every
robot (``wb_sim.ros.rviz_config``: one RobotModel per robot, "TF Prefix" ``<name>``).

The processes are one unit: when one of them ends, the launch shuts the others
down, and exits non-zero if that process failed.
"""

import os

from ament_index_python.packages import PackageNotFoundError, get_package_prefix
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from wb_sim.errors import ConfigError
from wb_sim.ros.parameters import launcher_layers

ROBOTS = ("humanoid", "icub", "talos", "anymal", "panda")


class ProcessFailed(RuntimeError):
    """A process of the launch ended with a non-zero exit code."""


def _on_exit(context, *args, **kwargs):
    """A process ended: shut the launch down; a failure makes ``ros2 launch`` exit non-zero
    (an exception in launch is what sets its return code)."""
    event = context.locals.event
    if event.returncode != 0 and not context.is_shutdown:
        raise ProcessFailed(f"{event.process_name} exited with code "
                            f"{event.returncode}; the launch is shut down")
    return [EmitEvent(event=Shutdown(reason=f"{event.process_name} exited"))]


def _robot_file(share: str, robot: str) -> str:
    if robot.endswith((".yaml", ".yml")):  # the user's own robot
        path = os.path.abspath(robot)
        if not os.path.isfile(path):
            raise RuntimeError(f"robot file not found: {robot}")
        return path
    if robot not in ROBOTS:
        raise RuntimeError(f"unknown robot '{robot}'; choose one of {', '.join(ROBOTS)}, "
                           f"or give the path of your robot's YAML file")
    return os.path.join(share, "config", f"{robot}.yaml")


def _nodes(context, *args, **kwargs):
    share = get_package_share_directory("wb_sim")
    fleet = None  # a world of several robots: [(params, RobotInfo)]
    arg = {name: LaunchConfiguration(name).perform(context)
           for name in ("robot", "config", "controller", "use_sim_time", "sync", "viewer", "rviz",
                        "world")}
    if arg["world"]:
        if arg["robot"]:
            raise RuntimeError("world:= declares the robot (world.robots); leave robot:= out")
        from wb_sim.world import load_world_robots, write_params_file
        try:
            robots = load_world_robots(arg["world"])
        except ConfigError as e:
            raise RuntimeError(str(e)) from None
        params, info = robots[0]
        if len(robots) > 1:  # the node serves them all (world_file), one controller each
            fleet = robots
            for _, i in robots:
                if (arg["controller"] or i.controller) not in ("pd", "none"):
                    raise RuntimeError(f"robot '{i.name}': controller "
                                       f"'{arg['controller'] or i.controller}': with several "
                                       f"robots each robot's is 'pd' or 'none'")
            arg["controller"] = arg["controller"] or (
                "pd" if any(i.controller == "pd" for _, i in robots) else "none")
        # the node's parameter file, written beside this launch's logs (~/.ros/log/<run>/):
        # kept with the run it configured, cleaned with them
        from launch.logging import launch_config
        out = os.path.join(launch_config.log_dir, "wb_sim_world_params.yaml")
        robot_file = str(write_params_file(params, info, out))
        arg["controller"] = arg["controller"] or info.controller
    else:
        robot_file = _robot_file(share, arg["robot"] or "humanoid")
    arg["controller"] = arg["controller"] or "pd"
    user = []
    if arg["config"]:
        if not os.path.isfile(arg["config"]):
            raise RuntimeError(f"config file not found: {arg['config']}")
        user = [os.path.abspath(arg["config"])]
    try:
        defaults, explicit = launcher_layers(arg["controller"], robot_file, arg["sync"] or None)
    except ConfigError as e:
        raise RuntimeError(str(e)) from None
    if arg["sync"] not in ("", "realtime", "lockstep"):
        raise RuntimeError(f"unknown sync mode '{arg['sync']}'; choose realtime or lockstep")
    if arg["viewer"] not in ("", "none", "meshcat"):
        raise RuntimeError(f"unknown viewer '{arg['viewer']}'; choose none or meshcat")
    if arg["rviz"].lower() not in ("true", "false"):
        raise RuntimeError(f"rviz:={arg['rviz']}: choose true or false")
    rviz = arg["rviz"].lower() == "true"
    if rviz:  # fail before anything starts
        try:
            get_package_prefix("rviz2")
        except PackageNotFoundError:
            raise RuntimeError("rviz:=true, but rviz2 is not installed (in a ROS install: "
                               "apt install ros-$ROS_DISTRO-rviz2); without it use "
                               "viewer:=meshcat for a browser view") from None
    use_sim_time = arg["use_sim_time"].lower() == "true"

    # the physics starts with the first command (the example controller starts later,
    # your own controller too), in lockstep with the example controller; the user's
    # file may say otherwise
    explicit.update({{"sync": "sync.mode"}.get(k, k): arg[k] for k in ("sync", "viewer")
                     if arg[k]})
    if fleet is not None:
        explicit["world_file"] = os.path.abspath(arg["world"])
    sim_params = [robot_file, defaults] + user + ([explicit] if explicit else [])
    on_exit = [OpaqueFunction(function=_on_exit)]
    actions = [Node(package="wb_sim", executable="wb_sim_node", name="wb_sim", output="screen",
                    parameters=sim_params, emulate_tty=True, on_exit=on_exit)]
    if fleet is not None:  # one example controller per 'pd' robot, in its namespace
        for _, i in fleet:
            if (arg["controller"] if arg["controller"] == "none" else i.controller) != "pd":
                continue
            gains = {k: v if isinstance(v, (int, float)) else list(v)
                     for k, v in i.controller_params.items() if k in ("kp", "kd")}
            actions.append(Node(package="wb_sim", executable="wb_sim_pd_controller",
                                name="wb_sim_pd_controller", namespace=i.name,
                                output="screen", emulate_tty=True,
                                parameters=[{**gains, "robot": i.name,
                                             "use_sim_time": use_sim_time}],
                                on_exit=on_exit))
    elif arg["controller"] == "pd":
        actions.append(Node(package="wb_sim", executable="wb_sim_pd_controller",
                            name="wb_sim_pd_controller", output="screen", emulate_tty=True,
                            parameters=[robot_file] + user + [{"use_sim_time": use_sim_time}],
                            on_exit=on_exit))
    if rviz:
        rviz_file = os.path.join(share, "rviz", "wb_sim.rviz")
        if fleet is not None:  # every robot shown: generated beside the world's parameters
            from launch.logging import launch_config

            from wb_sim.ros.rviz_config import fleet_rviz_config
            rviz_file = str(fleet_rviz_config(
                rviz_file, [(i.name, list(p.get("contact_surfaces", ()))) for p, i in fleet],
                os.path.join(launch_config.log_dir, "wb_sim_world.rviz")))
        actions.append(Node(package="rviz2", executable="rviz2", name="rviz2", output="log",
                            arguments=["-d", rviz_file],
                            parameters=[{"use_sim_time": use_sim_time}], on_exit=on_exit))
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="",
                              description=f"Robot configuration: one of {', '.join(ROBOTS)}, or "
                                          f"the path of your robot's YAML file ('': humanoid)"),
        DeclareLaunchArgument("world", default_value="",
                              description="A world file (docs/world.md): ground, terrain, "
                                          "objects and the robot with its controller, in place "
                                          "of robot:="),
        DeclareLaunchArgument("config", default_value="",
                              description="A YAML parameter file (wb_sim: ros__parameters:) "
                                          "overriding the robot's configuration"),
        DeclareLaunchArgument("controller", default_value="",
                              description="'pd': start the example PD + gravity-compensation "
                                          "controller, in paced lockstep; 'none': bring your "
                                          "own (the physics waits for its first command); "
                                          "'module:factory': an in-process controller, e.g. "
                                          "wb_sim.controllers:pd_gravity; '' (default): "
                                          "the world's, else pd"),
        DeclareLaunchArgument("rviz", default_value="false", description="Start RViz (true/false)"),
        DeclareLaunchArgument("use_sim_time", default_value="true",
                              description="Run the controller and RViz on the simulated /clock"),
        DeclareLaunchArgument("sync", default_value="",
                              description="'lockstep': each step waits for the controller's "
                                          "answer, never faster than real_time_factor; "
                                          "'realtime': free-running against the wall clock; "
                                          "'' (default): lockstep with controller:=pd, else "
                                          "the configuration's"),
        DeclareLaunchArgument("viewer", default_value="",
                              description="'meshcat': serve a browser view of the robot and "
                                          "contact forces (URL in the log); 'none'; '' "
                                          "(default): the configuration's (none)"),
        OpaqueFunction(function=_nodes),
    ])
