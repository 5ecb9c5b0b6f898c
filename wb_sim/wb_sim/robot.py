"""Loading a URDF into an immutable robot description.

:class:`RobotModel` wraps a pinocchio model with what the simulator needs to
know about the actuated joints: their order, name <-> index maps, where they
sit in ``q`` and ``v``, and the URDF limits and ``<dynamics>``.

Joint order: the actuated joints are pinocchio's joints in model order (a
depth-first traversal of the URDF tree), excluding the free-flyer root joint
and fixed joints. ``joint_names[i]`` is the name of the i-th entry of every
joint vector (torques, positions, velocities) in the API.
"""

from __future__ import annotations

import difflib
import os
from collections import OrderedDict
import re
import sys
import sysconfig
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pinocchio as pin

from .errors import ConfigError, ModelError, UnsupportedError, WbSimError
from .paths import share_dir

#: URDF joint types the simulator accepts (fixed joints are merged by pinocchio).
SUPPORTED_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")


#: the package of a ``package://<package>/...`` mesh URI
_MESH_PACKAGE = re.compile(r'filename\s*=\s*["\']package://([^/"\']+)/')


def did_you_mean(name: str, known) -> str:
    """"; did you mean 'a', 'b'?" with the names of ``known`` closest to ``name`` (as the
    parameters' messages have), or "" when none is close."""
    close = difflib.get_close_matches(name, list(known), n=3)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""

def _example_robot_data_dir() -> Path:
    """``share/example-robot-data/robots`` from the PyPI wheel or a ROS install."""
    roots = [Path(p) for p in {sysconfig.get_paths()["purelib"], *sys.path} if p]
    candidates = [r / "cmeel.prefix" / "share" / "example-robot-data" / "robots" for r in roots]
    candidates += [Path(p) / "share" / "example-robot-data" / "robots"
                   for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for c in candidates:
        if c.is_dir():
            return c
    raise ModelError("robot data 'example-robot-data' is not installed "
                     "(pip install example-robot-data, or apt install ros-$ROS_DISTRO-example-robot-data)")


def _icub_models(name: str) -> Path:
    try:
        import icub_models
    except ImportError as e:
        raise ModelError("robot data 'icub-models' is not installed (pip install icub-models)") from e
    try:
        return Path(icub_models.get_model_file(name))
    except Exception as e:  # icub_models raises its own errors for unknown names
        raise ModelError(f"icub-models has no model '{name}': {e}") from e


def package_share_dir(package: str) -> Path:
    """Share directory of a ROS package: wb_sim's own (source tree or install),
    or any other through the ament index of a ROS environment."""
    if package == "wb_sim":
        return share_dir()
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        raise ModelError(f"cannot resolve 'package://{package}/...': no ROS environment "
                         f"(ament_index_python is not importable)") from None
    try:
        return Path(get_package_share_directory(package))
    except Exception as e:  # PackageNotFoundError, ValueError
        raise ModelError(f"cannot resolve 'package://{package}/...': {e}") from None


def _package_uri(rest: str) -> Path:
    package, _, rel = rest.removeprefix("//").partition("/")
    if not rest.startswith("//") or not package or not rel:
        raise ConfigError(f"expected 'package://<package>/<path>', got 'package:{rest}'")
    return package_share_dir(package) / rel


#: ``urdf_path`` schemes for robots installed as packages: scheme -> (resolver, how it
#: is written, for the error messages).
URDF_SCHEMES = {
    "package": (_package_uri, "package://<package>/<path>"),
    "icub-models": (_icub_models, "icub-models:<model name>"),
    "example-robot-data": (lambda rel: _example_robot_data_dir() / rel,
                           "example-robot-data:<path under robots/>"),
}


_MESH_URI = re.compile(r'(<mesh\b[^>]*?\bfilename\s*=\s*)(["\'])(.*?)\2', re.S)


def resolve_mesh_uris(urdf_xml: str, urdf_file: Path | None,
                      keep_package: Callable[[str], bool] = lambda package: False) -> str:
    """The URDF text with the mesh URIs it can resolve made absolute (``file://``).

    ``package://P/rel`` is looked up next to the URDF file's ancestors (how robots
    installed from PyPI ship their meshes) unless ``keep_package(P)`` says to leave
    it; relative file names are taken against the URDF's directory. URIs that cannot
    be resolved are left as they are.
    """
    def rewrite(m: re.Match) -> str:
        uri = m.group(3)
        target = None
        if uri.startswith("package://"):
            package, _, rel = uri[len("package://"):].partition("/")
            if urdf_file is not None and not keep_package(package):
                for anc in Path(urdf_file).resolve().parents:
                    for cand in (anc / package / rel, anc / rel if anc.name == package else None):
                        if cand is not None and cand.is_file():
                            target = cand
                            break
                    if target is not None:
                        break
        elif "://" not in uri and urdf_file is not None:
            cand = Path(urdf_file).resolve().parent / uri
            target = cand if cand.is_file() else None
        if target is None:
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}file://{target}{m.group(2)}"

    return _MESH_URI.sub(rewrite, urdf_xml)


def resolve_urdf_path(urdf_path: str) -> Path:
    """Resolve ``urdf_path`` (a file path or ``scheme:name``) to an existing file."""
    return resolve_data_path(urdf_path, "urdf_path", "URDF")


def resolve_data_path(value: str, key: str, kind: str) -> Path:
    """Resolve a robot data file named by parameter ``key`` (a file path or
    ``scheme:name`` of :data:`URDF_SCHEMES`, as ``urdf_path`` takes) to an existing
    file; ``kind`` names it in the error ("URDF", "SRDF")."""
    scheme, sep, rest = value.partition(":")
    if sep and len(scheme) > 1:  # 'C:' style drive letters are not schemes
        if scheme not in URDF_SCHEMES:
            raise ConfigError(
                f"parameter '{key}': unknown scheme '{scheme}:' in {value!r}; "
                f"valid schemes: {', '.join(sorted(URDF_SCHEMES))}")
        try:
            path = Path(URDF_SCHEMES[scheme][0](rest))
        except (ConfigError, ModelError) as e:  # the resolver knows no parameter: name it
            raise type(e)(f"parameter '{key}': {e}") from None
    else:
        path = Path(value)
    if not path.is_file():
        where = "an existing file, or " + ", ".join(form for _, form in URDF_SCHEMES.values())
        if key == "urdf_path":  # the words users and tests grep for come first
            raise ModelError(f"URDF file not found: '{path}' (parameter 'urdf_path': give {where})")
        raise ModelError(f"parameter '{key}': {kind} file not found: '{path}' (give {where})")
    return path


def expand_xacro(path: Path, args: dict[str, str]) -> str:
    """The URDF text of the xacro file ``path`` with its ``xacro:arg`` values
    ``args``, through the xacro package (imported only here). Raises
    :class:`ModelError` naming the file when xacro is missing or the file does not
    expand (an undefined property, a missing include, ``$(find pkg)`` without ROS)."""
    try:
        import xacro
    except ImportError:
        raise ModelError(f"urdf_path '{path}' is a xacro file and the xacro package is not "
                         f"installed: pip install xacro (in a ROS 2 install: rosdep key "
                         f"xacro), or expand it yourself with the xacro command") from None
    try:
        doc = xacro.process_file(str(path), mappings=dict(args))
    except Exception as e:  # xacro raises its own XacroException and plain errors alike
        raise ModelError(f"cannot expand xacro file '{path}' (xacro.args {dict(args)}): "
                         f"{type(e).__name__}: {e}") from None
    return doc.toxml()


def edit_inertials(xml: str, mass_scale: dict[str, float], com_offset: dict[str, tuple],
                   origin: str = "the URDF") -> str:
    """The URDF with the named links' masses and rotational inertias times their
    factor (the same shape, density times it: the centre of mass stays) and their
    centres of mass moved by their offset (m, in the link's frame). Raises
    :class:`ModelError` naming a link that does not exist or has no ``<inertial>``."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as e:
        raise ModelError(f"{origin} is not valid XML: {e}") from None
    links = {e.get("name"): e for e in root.iter("link")}
    for name in list(mass_scale) + [n for n in com_offset if n not in mass_scale]:
        key = "mass_scale" if name in mass_scale else "com_offset"
        if name not in links:
            raise ModelError(f"parameter 'perturbation.{key}_links': {origin} has no link "
                             f"{name!r}; its links with an <inertial>: "
                             f"{', '.join(n for n, e in links.items() if e.find('inertial') is not None)}")
        inertial = links[name].find("inertial")
        if inertial is None or inertial.find("mass") is None:
            raise ModelError(f"parameter 'perturbation.{key}_links': link {name!r} of {origin} "
                             f"has no <inertial> mass to perturb")
        s = float(mass_scale.get(name, 1.0))
        mass = inertial.find("mass")
        what = f"{origin}: link '{name}'"
        mass.set("value", repr(float(_numbers(mass.get("value"), 1, f"{what}: <mass value>")[0] * s)))
        inertia = inertial.find("inertia")
        if inertia is not None:
            for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"):
                if inertia.get(k) is not None:
                    inertia.set(k, repr(float(_numbers(inertia.get(k), 1,
                                                       f"{what}: <inertia {k}>")[0] * s)))
        if name in com_offset:
            pose = inertial.find("origin")
            if pose is None:
                pose = ET.SubElement(inertial, "origin")
            xyz = _numbers(pose.get("xyz") or "0 0 0", 3, f"{what}: <inertial><origin xyz>")
            pose.set("xyz", " ".join(repr(float(a + b)) for a, b in zip(xyz, com_offset[name])))
    return ET.tostring(root, encoding="unicode")


#: the default of parameter max_joints: pinocchio's Data zeroes four nv x nv x nv tensors when
#: it is built (the second-order RNEA derivatives, allocated whether used or not; 200 joints:
#: 254 MB). wb_sim hands their pages back at once (pin_views.new_data): a simulator's memory
#: then grows with the square of the joints, but building each Data peaks at the cube
MAX_JOINTS = 100


def _check_joint_count(root: ET.Element, origin: str, key: str, limit: int) -> None:
    """ModelError where the URDF has more than ``limit`` moving joints, before pinocchio
    builds it (building its Data is cubic in them)."""
    n = sum(1 for j in root.findall("joint") if j.get("type") != "fixed")
    if n > limit:
        raise ModelError(
            f"parameter '{key}': {origin} has {n} moving joints, more than max_joints = {limit}; "
            f"building pinocchio's Data takes memory growing with the cube of the joints for a "
            f"moment (4 * 8 * n^3 bytes: 254 MB at 200, 32 GB at 1000): raise parameter "
            f"'max_joints' (at most 1000) if you mean it")


def _check_urdf_xml(xml: str, origin: str, mimic: str = "refuse") -> ET.Element:
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as e:
        raise ModelError(f"malformed URDF XML in {origin}: {e}") from e
    if root.tag == "mujoco":
        raise UnsupportedError(
            f"{origin} is an MJCF model (<mujoco>): give it as a file, urdf_path ending in "
            f".xml (pinocchio parses MJCF files only); or convert it to URDF and give each "
            f"<equality> as a loop closure: <connect> as loop_closures.types 'point', <weld> "
            f"as 'frame' (docs/physics.md, Closed kinematic chains)")
    if root.tag != "robot":
        raise ModelError(f"{origin} is not a URDF: root element is <{root.tag}>, expected <robot>")
    for j in root.findall("joint"):  # not the <joint> elements of <transmission>
        jtype = j.get("type")
        if jtype not in SUPPORTED_JOINT_TYPES:
            raise ModelError(
                f"{origin}: joint '{j.get('name')}' has unsupported type '{jtype}'; "
                f"supported: {', '.join(SUPPORTED_JOINT_TYPES)}")
        _check_joint(j, origin, mimic)
    for link in root.findall("link"):
        _check_inertial(link, origin)
        for collision in link.findall("collision"):
            _check_collision(collision, link.get("name"), origin)
    return root


#: the largest collision geometry (box side, radius, length), m, and the farthest a link's
#: centre of mass or a geometry sits from its frame: beyond them the geometry and the
#: dynamics overflow (a 1e300 box was an OverflowError at start)
MAX_GEOMETRY_M = 100.0
MAX_OFFSET_M = 1000.0


def _check_origin(element: ET.Element, what: str) -> None:
    """An <origin> (if any) of finite xyz within MAX_OFFSET_M and finite rpy."""
    pose = element.find("origin")
    if pose is None:
        return
    xyz = _numbers(pose.get("xyz", "0 0 0"), 3, f"{what}: <origin xyz>")
    _numbers(pose.get("rpy", "0 0 0"), 3, f"{what}: <origin rpy>")
    if np.abs(xyz).max() > MAX_OFFSET_M:
        raise ModelError(f"{what}: <origin xyz> {pose.get('xyz')!r} is more than "
                         f"{MAX_OFFSET_M:g} m from the link's frame")


def _check_collision(collision: ET.Element, link: str, origin: str) -> None:
    """A <collision> geometry of finite, positive sizes within MAX_GEOMETRY_M (a mesh:
    finite non-zero scale factors)."""
    what = f"{origin}: link '{link}': <collision>"
    _check_origin(collision, what)
    geometry = collision.find("geometry")
    if geometry is None or not len(geometry):
        return
    shape = geometry[0]
    sizes = {"box": [("size", 3)], "sphere": [("radius", 1)],
             "cylinder": [("radius", 1), ("length", 1)],
             "capsule": [("radius", 1), ("length", 1)]}.get(shape.tag)
    if shape.tag == "mesh":
        if shape.get("scale") is not None:
            scale = _numbers(shape.get("scale"), 3, f"{what}: <mesh scale>")
            if np.any(scale == 0) or np.abs(scale).max() > MAX_GEOMETRY_M:
                raise ModelError(f"{what}: <mesh scale> {shape.get('scale')!r} must be non-zero "
                                 f"factors of at most {MAX_GEOMETRY_M:g}")
        return
    for attr, count in sizes or ():
        x = _numbers(shape.get(attr), count, f"{what}: <{shape.tag} {attr}>")
        if np.any(x <= 0) or x.max() > MAX_GEOMETRY_M:
            raise ModelError(f"{what}: <{shape.tag} {attr}> {shape.get(attr)!r} must be > 0 and "
                             f"at most {MAX_GEOMETRY_M:g} m")


def _numbers(text, count: int, what: str) -> np.ndarray:
    """``count`` finite numbers from a URDF attribute, or ModelError naming ``what``."""
    try:
        x = np.array([float(t) for t in str(text).split()])
    except ValueError:
        x = np.array([])
    if x.shape != (count,) or not np.isfinite(x).all():
        raise ModelError(f"{what} must be {count} finite number{'s' * (count > 1)}, got {text!r}")
    return x


def _check_joint(j: ET.Element, origin: str, mimic: str = "refuse") -> None:
    """A moving joint needs a non-zero axis. A moving mimic joint is refused
    (``mimic='refuse'``) or simulated as an independent joint with a warning
    (``'independent'``): pinocchio 4.1 can build mimic joints but its forward
    dynamics (ABA), which the step uses, does not support them, and without its
    mimic flag it makes the joint independent, silently dropping the coupling.
    (A ``<mimic>`` on a fixed joint, as in Talos' grippers, couples nothing.)"""
    name, jtype = j.get("name"), j.get("type")
    if j.find("mimic") is not None and jtype != "fixed":
        what = f"{origin}: joint '{name}' mimics '{j.find('mimic').get('joint')}'"
        if mimic != "independent":
            raise ModelError(
                f"{what}; mimic couplings are not supported (pinocchio's forward dynamics has "
                f"none): set parameter 'joints.mimic' to 'independent' to simulate it as an "
                f"independent actuated joint, or remove the <mimic> element")
        warnings.warn(f"{what}: simulated as an independent actuated joint (joints.mimic: "
                      f"independent); the coupling is not enforced", stacklevel=4)
    axis = j.find("axis")
    if jtype != "fixed" and axis is not None:
        xyz = _numbers(axis.get("xyz", "1 0 0"), 3, f"{origin}: joint '{name}': <axis xyz>")
        if np.linalg.norm(xyz) < 1e-9:
            raise ModelError(f"{origin}: joint '{name}' has a zero axis {axis.get('xyz')!r}; "
                             f"give <axis xyz> a non-zero direction")


def _check_inertial(link: ET.Element, origin: str) -> None:
    """A link's <inertial> must be physical: a finite mass >= 0 and a symmetric
    positive semi-definite inertia (pinocchio would take 'abc' as no mass and
    accept a negative one; the first step then diverges for no visible reason)."""
    inertial = link.find("inertial")
    if inertial is None:
        return
    name = link.get("name")
    _check_origin(inertial, f"{origin}: link '{name}': <inertial>")
    mass = inertial.find("mass")
    if mass is not None:
        m = _numbers(mass.get("value"), 1, f"{origin}: link '{name}': <mass value>")[0]
        if m < 0:
            raise ModelError(f"{origin}: link '{name}' has a negative mass {m:g} kg; "
                             f"a mass must be >= 0")
    inertia = inertial.find("inertia")
    if inertia is not None:
        keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
        v = {}
        for k in keys:
            v[k] = _numbers(inertia.get(k, "0"), 1, f"{origin}: link '{name}': <inertia {k}>")[0]
        matrix = np.array([[v["ixx"], v["ixy"], v["ixz"]], [v["ixy"], v["iyy"], v["iyz"]],
                           [v["ixz"], v["iyz"], v["izz"]]])
        eig = np.linalg.eigvalsh(matrix)
        if eig[0] < -1e-9 * max(1.0, abs(eig[-1])) or eig[0] < -1e-6 * abs(eig[-1]):
            raise ModelError(
                f"{origin}: link '{name}' has an inertia that is not positive semi-definite "
                f"(eigenvalues {', '.join(f'{e:.3g}' for e in eig)} kg*m^2); check the signs "
                f"and magnitudes of ixx ... izz")


@dataclass(frozen=True, eq=False)
class RobotModel:
    """Immutable structure of the robot.

    Attributes:
        model: the pinocchio model (with the free-flyer when ``floating_base``).
        urdf_xml: the URDF text the model was built from.
        urdf_file: the file it was read from, or ``None`` for an XML string.
        floating_base: whether the root is a free-flyer.
        joint_names: actuated joints, in API order.
        joint_ids: pinocchio joint index of each actuated joint.
        idx_q, idx_v: index of each actuated joint in ``q`` and ``v``.
        nq_joint: 1 (revolute, prismatic) or 2 (continuous: cos, sin) per joint.
        position_lower, position_upper: URDF limits (rad or m; +-inf when none).
        velocity_limit, effort_limit: URDF limits (inf when none or zero).
        damping, friction: URDF ``<dynamics>`` (N*m*s/rad, N*m).
        root_link: name of the URDF root link (the floating base).
        mjcf_file: the MJCF file the model was built from (``urdf_path`` ending in .xml
            with a ``<mujoco>`` root), or None for a URDF.
        closures: the loop closures the model brings (an MJCF's ``<equality>`` connect /
            weld): (type 'point' or 'frame', frame_a, frame_b) each, frames of
            :attr:`extra_frames` (the anchor is frame_b's origin).
        extra_frames: frames added to the parsed model, (name, parent joint, placement)
            each: :meth:`add_extra_frames` adds them to a model parsed again.
    """

    model: pin.Model
    urdf_xml: str
    urdf_file: Path | None
    floating_base: bool
    joint_names: tuple[str, ...]
    joint_ids: np.ndarray
    idx_q: np.ndarray
    idx_v: np.ndarray
    nq_joint: np.ndarray
    position_lower: np.ndarray
    position_upper: np.ndarray
    velocity_limit: np.ndarray
    effort_limit: np.ndarray
    damping: np.ndarray
    friction: np.ndarray
    root_link: str
    mjcf_file: Path | None = None
    closures: tuple = ()
    extra_frames: tuple = ()

    def __post_init__(self):
        # derived once: which joints take one coordinate (revolute, prismatic) and which
        # two (continuous: cos, sin); the configuration helpers run per step in controllers
        one = self.nq_joint == 1
        object.__setattr__(self, "_one", one)
        object.__setattr__(self, "_two", ~one)
        object.__setattr__(self, "_idx_q_one", self.idx_q[one])
        object.__setattr__(self, "_idx_q_two", self.idx_q[~one])
        object.__setattr__(self, "_all_one", bool(one.all()))

    @property
    def nj(self) -> int:
        """Number of actuated joints."""
        return len(self.joint_names)

    @property
    def mass(self) -> float:
        """Mass moved by the joints, kg: the whole robot for a floating base; for a
        fixed base, links welded to the world are left out (as in the CoM)."""
        return float(sum(inertia.mass for inertia in self.model.inertias[1:]))

    @property
    def description_urdf(self) -> str:
        """The robot as a URDF, for robot_description, robot_state_publisher and the TF
        tree: :attr:`urdf_xml` for a URDF robot; for an MJCF robot one written from its
        model and its visual geometry (:func:`wb_sim.urdf_export.urdf_from_model`; the
        ``<equality>`` anchors as massless links), once."""
        if self.mjcf_file is None:
            return self.urdf_xml
        return self._mjcf_as_urdf()

    def _mjcf_as_urdf(self) -> str:
        cached = self.__dict__.get("_description_urdf")
        if cached is None:
            cached = self._write_mjcf_as_urdf()
            object.__setattr__(self, "_description_urdf", cached)
        return cached

    def _write_mjcf_as_urdf(self) -> str:
        from .urdf_export import urdf_from_model
        path = str(self.mjcf_file)
        # parsed again: the model of a fixed base holds base_placement, which TF adds itself
        model = (pin.buildModelAndConstraintsFromMJCF(path, pin.JointModelFreeFlyer())
                 if self.floating_base else pin.buildModelAndConstraintsFromMJCF(path))[0]
        self.add_extra_frames(model)
        try:
            visual = pin.buildGeomFromMJCF(model, path, pin.GeometryType.VISUAL)
        except (RuntimeError, ValueError) as e:
            warnings.warn(f"'{path}': its visual geometry cannot be loaded ({e}); the URDF "
                          f"for RViz has none", stacklevel=3)
            visual = None
        return urdf_from_model(model, self.root_link, self.floating_base, visual)

    def joint_index(self, name: str) -> int:
        """API index of an actuated joint; :class:`ModelError` naming it if unknown."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise ModelError(
                f"unknown joint '{name}'{did_you_mean(name, self.joint_names)}; the model's "
                f"actuated joints are: {', '.join(self.joint_names)}") from None

    def frame_id(self, name: str, key: str = "") -> int:
        """pinocchio frame index; :class:`ModelError` naming the frame if unknown, with the
        closest names the model has."""
        if not self.model.existFrame(name):
            where = f"parameter '{key}': " if key else ""
            raise ModelError(f"{where}frame '{name}' is not in the model"
                             f"{did_you_mean(name, self.frame_names())} (the frames are the "
                             f"URDF's links and joints; RobotModel.frame_names() lists them)")
        # a link and a joint may share a name (ANYmal C, SO-100): the link is meant (the
        # surfaces', the IMU's and the pushes' frames are bodies), then the first that is
        for kind in (pin.FrameType.BODY, pin.FrameType.FIXED_JOINT, pin.FrameType.JOINT,
                     pin.FrameType.OP_FRAME, pin.FrameType.SENSOR):
            if self.model.existFrame(name, kind):
                return self.model.getFrameId(name, kind)
        return self.model.getFrameId(name)

    def frame_names(self) -> list[str]:
        return [f.name for f in self.model.frames]

    @classmethod
    def from_urdf(cls, urdf_path: str = "", robot_description: str = "",
                  floating_base: bool = True,
                  base_placement: pin.SE3 | None = None,
                  mimic: str = "refuse",
                  mass_scale: dict[str, float] | None = None,
                  com_offset: dict[str, tuple] | None = None,
                  xacro_args: dict[str, str] | None = None,
                  max_joints: int = MAX_JOINTS) -> "RobotModel":
        """Build from a URDF file (``urdf_path``) or string (``robot_description``).

        For a fixed base, ``base_placement`` (world <- root link) places the
        root link in the world; for a floating base it is ignored (the initial
        base pose is part of the state). ``mimic``: what a moving mimic joint
        gets, 'refuse' (ModelError) or 'independent' (parameter ``joints.mimic``).
        ``mass_scale`` / ``com_offset``: per-link edits of the URDF's
        ``<inertial>`` before the build (:func:`edit_inertials`; parameters
        ``perturbation.*``); :attr:`urdf_xml` is then the edited URDF. A
        ``.xacro`` ``urdf_path`` is expanded first with ``xacro_args``
        (``name: value``; parameter ``xacro.args``). More than ``max_joints`` moving
        joints is a ModelError before pinocchio builds anything (parameter ``max_joints``).
        """
        if urdf_path:
            path = resolve_urdf_path(urdf_path)
            if path.suffix == ".xml" and _is_mjcf(path):
                if mass_scale or com_offset:
                    raise UnsupportedError(
                        f"'{path}' is an MJCF model: perturbation.* edits the inertials of "
                        f"URDF models only for now")
                return cls._from_mjcf(path, floating_base, base_placement, max_joints)
            if path.suffix == ".xacro":
                xml = expand_xacro(path, xacro_args or {})
            else:
                try:
                    xml = path.read_text()
                except (OSError, UnicodeDecodeError) as e:
                    raise ModelError(f"cannot read URDF file '{path}': {e}") from e
            origin: str = f"'{path}'"
        else:
            path, xml, origin = None, robot_description, "robot_description"
        if mass_scale or com_offset:
            xml = edit_inertials(xml, mass_scale or {}, com_offset or {}, origin)
        root = _check_urdf_xml(xml, origin, mimic)
        _check_joint_count(root, origin, "urdf_path" if urdf_path else "robot_description",
                           max_joints)
        try:
            if floating_base:
                model = pin.buildModelFromXML(xml, pin.JointModelFreeFlyer())
            else:
                model = pin.buildModelFromXML(xml)
        except (RuntimeError, ValueError) as e:
            raise ModelError(f"pinocchio cannot build a model from {origin}: {e}") from e
        return cls._assemble(model, origin, floating_base, base_placement, urdf_xml=xml,
                             urdf_file=path, root_link=_root_link_name(root))

    @classmethod
    def _from_mjcf(cls, path: Path, floating_base: bool, base_placement, max_joints: int):
        """The robot of an MJCF file, its ``<equality>`` connect and weld constraints as
        loop closures between frames added at their anchors (pinocchio's parser)."""
        origin = f"'{path}'"
        root = pin.JointModelFreeFlyer() if floating_base else None
        try:
            model, points, frames = (pin.buildModelAndConstraintsFromMJCF(str(path), root)
                                     if root is not None else
                                     pin.buildModelAndConstraintsFromMJCF(str(path)))
        except (RuntimeError, ValueError) as e:
            raise ModelError(f"pinocchio cannot build a model from the MJCF {origin}: {e}") \
                from e
        moving = model.njoints - (2 if floating_base else 1)
        if moving > max_joints:
            raise ModelError(f"parameter 'urdf_path': {origin} has {moving} moving joints, more "
                             f"than max_joints = {max_joints}")
        extra, closures = [], []
        for kind, constraints in (("point", points), ("frame", frames)):
            for i, c in enumerate(constraints):
                names = []
                for side, joint, placement in (("a", c.joint1_id, c.joint1_placement),
                                               ("b", c.joint2_id, c.joint2_placement)):
                    name = f"mjcf_{'connect' if kind == 'point' else 'weld'}{i}_{side}"
                    extra.append((name, int(joint), pin.SE3(placement)))
                    names.append(name)
                closures.append((kind, names[0], names[1]))
        _add_frames(model, extra)
        bodies = [f.name for f in model.frames if f.type == pin.FrameType.BODY]
        xml = path.read_text()
        return cls._assemble(model, origin, floating_base, base_placement, urdf_xml=xml,
                             urdf_file=path, root_link=bodies[0] if bodies else "",
                             mjcf_file=path, closures=tuple(closures), extra_frames=tuple(extra))

    def add_extra_frames(self, model: pin.Model) -> None:
        """Add :attr:`extra_frames` to ``model`` (the same model parsed again)."""
        _add_frames(model, self.extra_frames)

    @classmethod
    def _assemble(cls, model: pin.Model, origin: str, floating_base: bool, base_placement,
                  **fields) -> "RobotModel":
        """The robot of a parsed model: the base placed, the joints' data read."""
        if not floating_base and base_placement is not None:
            for j in range(1, model.njoints):
                if model.parents[j] == 0:
                    model.jointPlacements[j] = base_placement * model.jointPlacements[j]
            for f in model.frames:
                if f.parentJoint == 0 and f.name != "universe":
                    f.placement = base_placement * f.placement

        first = 2 if floating_base else 1
        ids = list(range(first, model.njoints))
        names = tuple(model.names[j] for j in ids)
        if not ids and not floating_base:
            raise ModelError(f"{origin}: a fixed-base robot needs at least one actuated joint")
        nq = np.array([model.nqs[j] for j in ids], dtype=int)
        nv = np.array([model.nvs[j] for j in ids], dtype=int)
        if np.any(nv != 1):  # guarded by SUPPORTED_JOINT_TYPES; keep the model honest
            bad = [n for n, k in zip(names, nv) if k != 1]
            raise ModelError(f"{origin}: joints with more than one degree of freedom: {bad}")
        idx_q = np.array([model.idx_qs[j] for j in ids], dtype=int)
        idx_v = np.array([model.idx_vs[j] for j in ids], dtype=int)

        # limits: pinocchio keeps them per q / v entry; continuous joints have none
        lower = np.full(len(ids), -np.inf)
        upper = np.full(len(ids), np.inf)
        for i, (iq, k) in enumerate(zip(idx_q, nq)):
            if k == 1:
                lo, hi = model.lowerPositionLimit[iq], model.upperPositionLimit[iq]
                lower[i] = lo if lo > -1e300 else -np.inf
                upper[i] = hi if hi < 1e300 else np.inf
        vel = np.array([model.velocityLimit[i] for i in idx_v], dtype=float)
        eff = np.array([model.effortLimit[i] for i in idx_v], dtype=float)
        vel[(vel <= 0) | (vel > 1e300)] = np.inf
        eff[(eff <= 0) | (eff > 1e300)] = np.inf
        damping = np.array([model.damping[i] for i in idx_v], dtype=float)
        friction = np.array([model.friction[i] for i in idx_v], dtype=float)
        for arr in (lower, upper, vel, eff, damping, friction):
            arr.setflags(write=False)

        robot = cls(model=model, floating_base=floating_base,
                    joint_names=names, joint_ids=np.array(ids, dtype=int), idx_q=idx_q,
                    idx_v=idx_v, nq_joint=nq, position_lower=lower, position_upper=upper,
                    velocity_limit=vel, effort_limit=eff, damping=damping, friction=friction,
                    **fields)
        robot._check_masses(origin)
        return robot

    def geometry_model(self, kind: str = "collision", key: str = "") -> pin.GeometryModel:
        """pinocchio's GeometryModel of the URDF's ``<collision>`` (``kind``
        "collision") or ``<visual>`` ("visual") elements: the one loader of the
        robot's geometry (coal shapes; meshes through coal).

        Mesh URIs are resolved with :func:`resolve_mesh_uris`: ``package://`` URIs
        of robots installed from PyPI (e.g. icub-models) are found next to the URDF
        file; packages known to a ROS environment through their share directory.
        A file that cannot be loaded raises ModelError naming the URDF (and ``key``,
        the parameter that asked for the geometry, when given)."""
        types = {"collision": pin.GeometryType.COLLISION, "visual": pin.GeometryType.VISUAL}
        if self.mjcf_file is not None:
            raise UnsupportedError(f"{key + ': ' if key else ''}the geometry of an MJCF model "
                                   f"('{self.mjcf_file}') is not supported yet (URDF only)")
        if kind not in types:
            raise ValueError(f"geometry kind must be one of {sorted(types)}, got {kind!r}")
        # loaded once per robot (a simulator built again on a cached robot, RobotCache, does
        # not load the meshes again); each caller gets its own copy of the model (the shapes
        # are shared: nothing in wb_sim changes a shape)
        loaded = self.__dict__.setdefault("_geometry", {})
        if kind not in loaded:
            loaded[kind] = self._load_geometry(kind, types[kind], key)
        return loaded[kind].copy()

    def _load_geometry(self, kind: str, kind_type, key: str) -> pin.GeometryModel:
        xml = resolve_mesh_uris(self.urdf_xml, self.urdf_file)
        package_dirs = []
        for package in sorted(set(_MESH_PACKAGE.findall(xml))):
            try:
                package_dirs.append(str(package_share_dir(package).parent))
            except WbSimError:
                pass  # pinocchio's own search (ROS_PACKAGE_PATH, AMENT_PREFIX_PATH) may know it
        try:
            return pin.buildGeomFromUrdfString(self.model, xml, kind_type,
                                              package_dirs=package_dirs)
        except (RuntimeError, ValueError) as e:
            origin = f"'{self.urdf_file}'" if self.urdf_file else "robot_description"
            where = f"{key}: " if key else ""
            raise ModelError(f"{where}cannot load the {kind} geometry of {origin}: {e}") from e

    def _check_masses(self, origin: str) -> None:
        """Every joint must move some mass, or the mass matrix is singular."""
        model = self.model
        subtree_mass = np.array([model.inertias[j].mass for j in range(model.njoints)])
        for j in range(model.njoints - 1, 0, -1):
            subtree_mass[model.parents[j]] += subtree_mass[j]
        start = 1
        for j in range(start, model.njoints):
            if subtree_mass[j] <= 0:
                raise ModelError(
                    f"{origin}: joint '{model.names[j]}' moves no mass (every link after it "
                    f"has zero or missing <inertial>); the dynamics would be singular")

    # --- configuration helpers -------------------------------------------------

    def joint_positions(self, q: np.ndarray) -> np.ndarray:
        """Actuated joint positions from a pinocchio configuration."""
        if self._all_one:
            return q[self.idx_q]
        out = np.empty(self.nj)
        out[self._one] = q[self._idx_q_one]
        iq = self._idx_q_two
        out[self._two] = np.arctan2(q[iq + 1], q[iq])
        return out

    def set_joint_positions(self, q: np.ndarray, positions: np.ndarray) -> None:
        """Write actuated joint positions into a pinocchio configuration in place
        (a continuous joint as cos, sin of its angle)."""
        x = np.asarray(positions, dtype=float)
        if self._all_one:
            q[self.idx_q] = x
            return
        q[self._idx_q_one] = x[self._one]
        iq, two = self._idx_q_two, self._two
        q[iq] = np.cos(x[two])
        q[iq + 1] = np.sin(x[two])


def _hashable(x):
    """``x`` (a parameter value: lists, dicts, arrays, SE3) as nested tuples, for a key."""
    if isinstance(x, pin.SE3):
        return _hashable(x.homogeneous)
    if isinstance(x, np.ndarray):
        return _hashable(x.tolist())
    if isinstance(x, dict):
        return tuple((k, _hashable(v)) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return tuple(_hashable(v) for v in x)
    return x


class RobotCache:
    """The robots last built, by the arguments of :meth:`RobotModel.from_urdf` (the structural
    parameters: ``urdf_path`` or ``robot_description``, ``floating_base``, a fixed base's
    placement, ``joints.mimic``, ``perturbation.*``, ``xacro.args``, ``max_joints``) and the
    URDF file's size and modification time: a simulator built again with the same ones (a
    campaign's worker, case after case) takes the robot (immutable) instead of parsing the
    URDF again, with the stepping model and the collision geometry parsed from it
    (``Simulator.from_params(params, robots=cache)``). The ``size`` most recent are kept.
    Files a URDF includes (xacro includes, meshes) are not watched: a cache lives for one
    campaign's worker. ``built``, ``reused``: counts, for tests and benchmarks."""

    def __init__(self, size: int = 4):
        self.size = size
        self._robots: OrderedDict = OrderedDict()
        self.built = 0
        self.reused = 0

    @staticmethod
    def key(arguments: dict) -> tuple:
        """The cache key of :meth:`RobotModel.from_urdf`'s ``arguments``."""
        stamp = None
        if arguments.get("urdf_path"):
            try:
                st = resolve_urdf_path(arguments["urdf_path"]).stat()
                stamp = (st.st_size, st.st_mtime_ns)
            except (OSError, WbSimError):
                stamp = None  # from_urdf says what is wrong with it
        return _hashable(sorted(arguments.items())) + (stamp,)

    def robot(self, arguments: dict) -> RobotModel:
        """The robot of ``arguments`` (:meth:`RobotModel.from_urdf`'s): the cached one, else
        built (and cached)."""
        key = self.key(arguments)
        robot = self._robots.get(key)
        if robot is not None:
            self._robots.move_to_end(key)
            self.reused += 1
            return robot
        robot = RobotModel.from_urdf(**arguments)
        self.built += 1
        self._robots[key] = robot
        while len(self._robots) > self.size:
            self._robots.popitem(last=False)
        return robot

    def clear(self) -> None:
        self._robots.clear()


def _is_mjcf(path: Path) -> bool:
    """Whether the file's root element is <mujoco> (an unreadable file: False, the URDF
    path reports it)."""
    try:
        for _, elem in ET.iterparse(path, events=("start",)):
            return elem.tag == "mujoco"
    except (OSError, ET.ParseError):
        return False
    return False


def _add_frames(model: pin.Model, frames) -> None:
    for name, joint, placement in frames:
        model.addFrame(pin.Frame(name, joint, placement, pin.FrameType.OP_FRAME))


def _root_link_name(root: ET.Element) -> str:
    links = [link.get("name") for link in root.findall("link")]
    children = {j.find("child").get("link") for j in root.findall("joint")
                if j.find("child") is not None}
    roots = [n for n in links if n not in children]
    return roots[0] if roots else (links[0] if links else "")


def rotate_inverse(quaternion: np.ndarray, vector: np.ndarray) -> tuple[float, float, float]:
    """``R^T vector`` for the rotation ``R`` of the unit quaternion (x, y, z, w):
    rotation by the conjugate, ``v + w t + u x t`` with ``u = -(x, y, z)`` and
    ``t = 2 u x v``. Scalar arithmetic: for one 3-vector, cheaper than building R."""
    x, y, z, w = quaternion.tolist()
    a, b, c = vector.tolist()
    tx, ty, tz = 2.0 * (z * b - y * c), 2.0 * (x * c - z * a), 2.0 * (y * a - x * b)
    return (a + w * tx + z * ty - y * tz,
            b + w * ty + x * tz - z * tx,
            c + w * tz + y * tx - x * ty)
