"""Several robots on one node (issue 31): each robot's namespace, parameters, state streams
and ``robot_description``, and the one TF tree with per-robot frame prefixes.

With one robot nothing here is used: the node is as it always was. With several robots
(parameter ``world_file`` naming a world file of two or more, docs/world.md) the node
simulates them in one physics (:mod:`wb_sim.multirobot`) and every robot, the first one
included, gets its world-file ``name`` as namespace: ``<name>/joint_states``,
``<name>/joint_commands``, ``<name>/effort_commands``, ``<name>/external_wrench``,
``<name>/odom/ground_truth``, ``<name>/imu/data``, ``<name>/contact_wrench/<surface>``,
``<name>/ft/<sensor>`` (its own ``ft_sensors.*``), ``<name>/contact_sensors`` (its own
surfaces and links, labelled with its own names, with its ``contact_sensors.active``),
``<name>/robot_description`` (the robot's own URDF, latched), each relative to the
node's namespace as the single robot's topics are. Its frames on ``/tf`` and
``/tf_static`` are ``<name>/<link>`` (robot_state_publisher's ``frame_prefix``, RViz's
"TF Prefix"; a force-torque sensor's own frame, ``<name>/<sensor>``, on ``/tf_static``);
the world frame, ``/clock``, the services and the free objects' topics stay
the world's. Its joint names on its topics are its own (its URDF's, unprefixed).

Per robot, node parameters under ``<name>.``: read-only ``floating_base``,
``initial.joint_names``, ``initial.joint_positions``, ``initial.base_position``,
``initial.base_rpy`` (what a controller reads, as the example controller does with
``robot:=<name>``), and live ``command.kp``, ``command.kd`` (the drive gains of its
joints, in its own joint order or one value; ``[]``: derived from the robot),
``command.timeout_s`` and ``command.timeout_action`` (its watchdog; by default the
node-wide values).
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import numpy as np
import pinocchio as pin
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray, String

from ..config import PARAMETER_BY_KEY
from ..errors import ConfigError
from ..multirobot import ONE_VALUE_KEYS, PER_ROBOT_GROUPS, PER_ROBOT_KEYS, ROBOT0_ONLY_GROUPS
from . import conversions as cv
from . import rclpy_shim
from .frames import FrameTree, ft_sensor_frames
from .parameters import NODE_PARAMETER_BY_KEY, NodeConfig, descriptor
from .publishers import check_ft_topics
from .urdf import urdf_for_ros

#: the per-robot parameters a controller reads (read-only), and the per-robot live ones:
#: the drive gains and the watchdog (each declared with the node-wide value as its default;
#: the node-wide ones are then refused live, each robot having its own)
ROBOT_READ_KEYS = ("floating_base", "initial.joint_names", "initial.joint_positions",
                   "initial.base_position", "initial.base_rpy")
ROBOT_LIVE_KEYS = ("command.kp", "command.kd", "command.timeout_s", "command.timeout_action")
#: the node's own streams that become per robot (off in the world's StatePublishers)
PER_ROBOT_STREAMS = ("joint_states", "odom", "imu", "contact_wrench", "ft", "contact_sensors",
                     "tf", "tf_static", "robot_description")
#: how often (wall, s) the streams look again whether anyone subscribes
LISTENERS_REFRESH_S = 0.05


def robot_topic(name: str, topic: str) -> str:
    """``topic`` under robot ``name``'s namespace: ``joint_states`` -> ``<name>/joint_states``
    (relative to the node's namespace), ``/x`` -> ``/<name>/x``, ``~/x`` -> ``~/<name>/x``;
    '' stays '' (off)."""
    if not topic:
        return ""
    if topic.startswith("~/"):
        return f"~/{name}/{topic[2:]}"
    if topic.startswith("/"):
        return f"/{name}{topic}"
    return f"{name}/{topic}"


def fleet_params(world_file: str, flat0: Mapping[str, Any]) -> list[tuple[str, dict]] | None:
    """The robots of the node with parameter ``world_file``: None for '' or a world of one
    robot (the node's own parameters are that robot: as ever); else ``[(name, params)]``,
    the first robot's parameters the node's own (``flat0``: wb_sim_run and the launch file
    write them from the world file; ``-p`` and ``--params-file`` layer over them), the
    others' from the world file with the world's keys (and those the first robot's are for
    the whole set) taken from the node's, so that an override reaches every robot."""
    if not world_file:
        return None
    from ..world import load_world_robots
    robots = load_world_robots(world_file)
    if len(robots) < 2:
        return None
    shared = {k: v for k, v in flat0.items()
              if (k in ONE_VALUE_KEYS  # one value for every robot (its own joints.* else)
                  or k not in PER_ROBOT_KEYS and k.partition(".")[0] not in PER_ROBOT_GROUPS
                  and k.partition(".")[0] not in ROBOT0_ONLY_GROUPS
                  and k != "collision.srdf_path")
              and k in PARAMETER_BY_KEY}
    out = [(robots[0][1].name, dict(flat0))]
    for params, info in robots[1:]:
        out.append((info.name, {**params, **shared}))
    return out


def ros_value(value):
    """A parameter value as rclpy declares it: a list for a sequence (a tuple, a ROS double
    array), the value itself otherwise."""
    return value if isinstance(value, (str, bool, int, float)) or value is None \
        else list(value)


class RobotChannel:
    """One robot of several on the node: its part of the physics, its namespace, its
    configuration (the node's with its own drive gains), its command gate (set by the
    node) and its state streams."""

    def __init__(self, part, config, node_cfg: NodeConfig):
        self.part = part
        self.name = part.name
        self.config = config  #: its validated core configuration (its initial pose, ...)
        self.gains: dict[str, Any] = {k: node_cfg[k] for k in ROBOT_LIVE_KEYS}
        self.gate = None
        self.cfg = self.overlay(node_cfg)

    def overlay(self, node_cfg: NodeConfig) -> NodeConfig:
        """The node's configuration with this robot's drive gains and watchdog."""
        return NodeConfig({**node_cfg.values, **self.gains})

    def topic(self, key: str, node_cfg: NodeConfig) -> str:
        return robot_topic(self.name, node_cfg[f"topics.{key}"])

    def frame(self, combined_name: str) -> str:
        """Its TF frame of a frame of the combined model (its own name, prefixed)."""
        own = combined_name.removeprefix(self.part.prefix)
        return f"{self.name}/{own}"

    def declare(self, node) -> None:
        """Its parameters on ``node`` (``<name>.<key>``): the read-only ones say what it
        simulates (a value given to the node for them is ignored: the world file sets the
        robot); for the drive gains a value given to the node (``-p``) wins."""
        c = self.config
        values = {"floating_base": c.floating_base,
                  "initial.joint_names": list(c.initial.joint_names),
                  "initial.joint_positions": list(c.initial.joint_positions),
                  "initial.base_position": list(c.initial.base_position),
                  "initial.base_rpy": list(c.initial.base_rpy)}
        for k, v in values.items():
            node.declare_parameter(f"{self.name}.{k}", v,
                                   descriptor(f"{self.name}.{k}", PARAMETER_BY_KEY[k]),
                                   ignore_override=True)
        for k in ROBOT_LIVE_KEYS:
            p = NODE_PARAMETER_BY_KEY[k]
            value = node.declare_parameter(f"{self.name}.{k}", ros_value(self.gains[k]),
                                           descriptor(f"{self.name}.{k}", p)).value
            self.gains[k] = p.coerce([] if value is None else ros_value(value),
                                     f"{self.name}.{k}")


class FleetPublishers:
    """The robots' own streams (each under its namespace) and the one TF tree. The
    caller holds the node's lock around :meth:`publish`."""

    def __init__(self, node, sim, cfg: NodeConfig, robots: list[RobotChannel], streams):
        from tf2_msgs.msg import TFMessage

        from .publishers import LATCHED_QOS, STATE_QOS, TF_QOS
        self.sim, self.robots, self.streams = sim, robots, streams
        raw = rclpy_shim.raw_publisher
        world = cfg["world_frame"]
        self._world = world
        self._delayed = bool(sim.config.sensors.delay_steps)
        self._per: list[dict] = []
        #: publisher lists by stream, asked whether anyone listens
        self._publishers: dict[str, list] = {}
        self._heard: set[str] = {"joint_states"}
        self._refresh_at = 0.0
        #: the notes to log once (a force-torque sensor's frame renamed to avoid a clash)
        self.notes: list[str] = []
        for r in robots:
            p = r.part
            d: dict[str, Any] = {"robot": r}

            def pub(stream, msg_type, topic, qos):
                x = node.create_publisher(msg_type, topic, qos)
                self._publishers.setdefault(stream, []).append(x)
                return x
            if "joint_states" in streams:
                d["js"] = raw(pub("joint_states", JointState, r.topic("joint_states", cfg),
                                  STATE_QOS))
                d["js_cdr"] = cv.joint_state_template(p.joint_names)
            if "odom" in streams and p.floating_base and cfg["topics.odom"]:
                d["odom"] = raw(pub("odom", Odometry, r.topic("odom", cfg), STATE_QOS))
                d["odom_cdr"] = cv.odometry_template(world, r.frame(p.robot.root_link))
            imu = (sim.imu_sensor if p.index == 0 else sim.robot_imus.get(r.name))
            if "imu" in streams and imu is not None and cfg["topics.imu"]:
                ic = r.config.imu
                d["imu"] = raw(pub("imu", Imu, r.topic("imu", cfg), STATE_QOS))
                d["imu_cdr"] = cv.imu_template(r.frame(imu.frame), cv.imu_covariances(
                    ic.angular_velocity_noise_std, ic.linear_acceleration_noise_std))
            if "contact_wrench" in streams and cfg["topics.contact_wrench"]:
                rows = [i for i, s in enumerate(sim.surface_names) if s in p.surfaces]
                d["wrench_rows"] = rows
                d["wrench"] = [
                    (raw(pub("contact_wrench", WrenchStamped,
                             f"{r.topic('contact_wrench', cfg)}/"
                             f"{sim.surface_names[i].removeprefix(p.prefix)}", STATE_QOS)),
                     cv.wrench_template(r.frame(sim.contact_points.surface_frames[i])))
                    for i in rows]
            ft = sim.ft_sensors if p.index == 0 else sim.robot_ft_sensors.get(r.name)
            if "ft" in streams and ft is not None and cfg["topics.ft"]:
                # its own sensors' frames (its URDF's names), prefixed as its links
                ids, static, notes = ft_sensor_frames(ft, p.robot.description_urdf,
                                                      {world}, prefix=p.prefix)
                self.notes += [f"robot '{r.name}': {n}" for n in notes]
                check_ft_topics(ft.names, r.topic("ft", cfg))
                d["ft"] = [(raw(pub("ft", WrenchStamped, f"{r.topic('ft', cfg)}/{n}",
                                    STATE_QOS)), cv.wrench_template(f"{r.name}/{i}"))
                           for n, i in zip(ft.names, ids)]
                d["ft_static"] = static
            if "contact_sensors" in streams and cfg["topics.contact_sensors"] \
                    and r.config.contact_sensors.active:
                d["contact_sensors"] = (
                    pub("contact_sensors", Float64MultiArray, r.topic("contact_sensors", cfg),
                        STATE_QOS),
                    cv.ContactSensorsMessage(list(sim.robot_contact_states(r.name))))
            base = pin.SE3(pin.rpy.rpyToMatrix(*r.config.initial.base_rpy),
                           np.array(r.config.initial.base_position))
            d["frames"] = FrameTree(p.robot, world, base)
            d["desc"] = node.create_publisher(String, r.topic("robot_description", cfg),
                                              LATCHED_QOS) if cfg["topics.robot_description"] \
                else None
            self._per.append(d)
        self._tf_raw = None
        if cfg["topics.tf"] and "tf" in streams:
            tf_pub = node.create_publisher(TFMessage, cfg["topics.tf"], TF_QOS)
            self._publishers["tf"] = [tf_pub]
            self._tf_raw = raw(tf_pub)
        self._tf_static = node.create_publisher(TFMessage, cfg["topics.tf_static"], LATCHED_QOS) \
            if cfg["topics.tf_static"] else None
        self._tf_objects = None
        if self._tf_raw is not None:
            self._tf_template()

    def _tf_template(self) -> None:
        """The /tf template: each robot's moving frames (world -> its base when floating),
        prefixed, then world -> each free object."""
        parents, children = [], []
        for d in self._per:
            r, frames = d["robot"], d["frames"]
            if r.part.floating_base:
                parents.append(self._world)
                children.append(r.frame(r.part.robot.root_link))
            parents += [r.frame(a) for a, _ in frames.moving]
            children += [r.frame(b) for _, b in frames.moving]
        objects = self.sim.objects
        names = [o.name for o in objects]
        self._tf_cdr = cv.tf_template(parents + [self._world] * len(names), children + names)
        self._tf_rows = np.empty((len(parents) + len(names), 7))
        self._tf_n_robots = len(parents)
        self._tf_objects = objects

    def publish_latched(self, t_ns: int) -> None:
        """Each robot's ``robot_description`` and the one ``/tf_static`` of every robot."""
        from tf2_msgs.msg import TFMessage
        stamp = cv.time_msg(t_ns)
        tfs = []
        for d in self._per:
            r = d["robot"]
            robot = r.part.robot
            if d["desc"] is not None:
                d["desc"].publish(String(data=urdf_for_ros(robot.description_urdf,
                                                           robot.urdf_file)))
            for t in d["frames"].static_transforms():
                parent = t.parent if t.parent == self._world else r.frame(t.parent)
                tfs.append(cv.transform_msg(stamp, type(t)(parent, r.frame(t.child),
                                                           t.translation, t.rotation)))
            for t in d.get("ft_static", ()):  # its own names: its links and sensors
                tfs.append(cv.transform_msg(stamp, type(t)(f"{r.name}/{t.parent}",
                                                           f"{r.name}/{t.child}",
                                                           t.translation, t.rotation)))
        if self._tf_static is not None:
            self._tf_static.publish(TFMessage(transforms=tfs))

    def publish(self, t_ns: int, every: bool = False) -> None:
        """The robots' streams due at this step (each robot's joint states first)."""
        now = time.perf_counter()
        if now >= self._refresh_at:
            self._refresh_at = now + LISTENERS_REFRESH_S
            self._heard = {"joint_states"} | {
                name for name, pubs in self._publishers.items()
                if any(p.get_subscription_count() for p in pubs)}
        due = self.streams.due(self.sim.step_count, every)
        heard = self._heard
        sim = self.sim
        s = sim.sensed_state if self._delayed else sim
        wall = time.perf_counter()
        if "joint_states" in due:
            qj, vj, tau = s.joint_positions, s.joint_velocities, s.applied_torques
            for d in self._per:
                if "js" in d:
                    r = d["robot"]
                    j = r.part.joints
                    d["js"](d["js_cdr"].serialize(t_ns, qj[j], vj[j], tau[j]))
                    r.gate.state_published(t_ns, wall)
        q = v = None
        if "odom" in due and "odom" in heard:
            q, v = sim.q, sim.v
            for d in self._per:
                if "odom" in d:
                    qs, vs = q[d["robot"].part.q_slice], v[d["robot"].part.v_slice]
                    d["odom"](d["odom_cdr"].serialize(t_ns, qs[:3], qs[3:7], vs[:3], vs[3:6]))
        if "imu" in due and "imu" in heard:
            for d in self._per:
                if "imu" in d:
                    r = d["robot"]
                    if r.part.index == 0:
                        x = sim.sensed_imu() if self._delayed else sim.imu()
                    else:
                        x = sim.robot_imu(r.name)
                    d["imu"](d["imu_cdr"].serialize(t_ns, x.orientation, x.angular_velocity,
                                                    x.linear_acceleration))
        if "contact_wrench" in due and "contact_wrench" in heard:
            w = sim.sensed_contact_wrench_array() if self._delayed \
                else sim.contact_wrench_array()
            for d in self._per:
                for (publish, cdr), i in zip(d.get("wrench", ()), d.get("wrench_rows", ())):
                    publish(cdr.serialize(t_ns, w[i, :3], w[i, 3:]))
        if "ft" in due and "ft" in heard:  # never delayed, with their noise and bias
            for d in self._per:
                if "ft" in d:
                    w = sim.robot_ft_wrench_array(d["robot"].name)
                    for (publish, cdr), row in zip(d["ft"], w):
                        publish(cdr.serialize(t_ns, row[:3], row[3:]))
        if "contact_sensors" in due and "contact_sensors" in heard:  # never delayed
            for d in self._per:
                if "contact_sensors" in d:
                    publisher, msg = d["contact_sensors"]
                    publisher.publish(msg(t_ns, sim.robot_contact_sensor_array(
                        d["robot"].name)))
        if self._tf_raw is not None and "tf" in due and "tf" in heard:
            self._tf(t_ns)

    def resend(self, t_ns: int) -> None:
        """Lockstep: the joint states (and base poses) again, to the robots whose command
        is still awaited only (one that answered would answer twice)."""
        sim = self.sim
        s = sim.sensed_state if self._delayed else sim
        qj, vj, tau = s.joint_positions, s.joint_velocities, s.applied_torques
        q, v = sim.q, sim.v
        wall = time.perf_counter()
        for d in self._per:
            r = d["robot"]
            if "js" not in d or not r.gate.need_command:
                continue
            p = r.part
            if "odom" in d:
                qs, vs = q[p.q_slice], v[p.v_slice]
                d["odom"](d["odom_cdr"].serialize(t_ns, qs[:3], qs[3:7], vs[:3], vs[3:6]))
            j = p.joints
            d["js"](d["js_cdr"].serialize(t_ns, qj[j], vj[j], tau[j]))
            r.gate.state_published(t_ns, wall)

    def _tf(self, t_ns: int) -> None:
        sim = self.sim
        if sim.objects is not self._tf_objects:
            self._tf_template()
        rows, k = self._tf_rows, 0
        q, qj = sim.q, sim.joint_positions
        for d in self._per:
            p = d["robot"].part
            if p.floating_base:
                rows[k] = q[p.q_slice][:7]
                k += 1
            t, r = d["frames"].moving_arrays(qj[p.joints])
            m = len(t)
            rows[k:k + m, :3], rows[k:k + m, 3:] = t, r
            k += m
        if k < len(rows):
            rows[k:] = sim.object_poses()
        self._tf_raw(self._tf_cdr.serialize(t_ns, *rows))


def node_cfg_for_world(cfg: NodeConfig) -> NodeConfig:
    """The node's configuration for the world's own streams (clock, objects, terrain,
    markers, the first robot's sensors of its own) with several robots: the robots' streams
    are :class:`FleetPublishers`'."""
    values = dict(cfg.values)
    for s in PER_ROBOT_STREAMS:
        values[f"topics.{s}"] = ""
    return NodeConfig(values)


def check_fleet_cfg(cfg: NodeConfig) -> None:
    """What the node refuses with several robots."""
    if cfg["command.joint_names"]:
        raise ConfigError("parameter 'command.joint_names': with several robots (world_file) "
                          "each robot's effort_commands take its own joints in its order: "
                          "leave it empty")
    if cfg["controller.callable"]:
        raise ConfigError("parameter 'controller.callable': with several robots (world_file) "
                          "each robot's controller runs over its own topics (<name>/"
                          "joint_commands); an in-process controller is for one robot: "
                          "leave it empty (headless, python -m wb_sim --world FILE runs one "
                          "in-process controller per robot)")
