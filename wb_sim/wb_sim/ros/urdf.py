"""The URDF as ROS tools read it (``robot_description``, RViz).

Pure Python (no rclpy): ``ament_index_python`` is asked, when importable, which
packages a ROS environment knows.
"""

from __future__ import annotations

from pathlib import Path

from ..robot import resolve_mesh_uris


def _known_to_ament(package: str) -> bool:
    try:
        from ament_index_python.packages import get_package_share_directory
        get_package_share_directory(package)
        return True
    except Exception:  # not importable, or unknown package
        return False


def urdf_for_ros(urdf_xml: str, urdf_file: Path | None) -> str:
    """The URDF text with mesh URIs that a ROS tool could not resolve made absolute.

    ``package://P/rel`` stays when the ament index knows P (a ROS install);
    otherwise, as for robots installed from PyPI, P is looked up next to the
    URDF file's ancestors and the URI becomes ``file:///abs/path``. Relative
    file names become ``file://`` paths against the URDF's directory. URIs
    that cannot be resolved are left as they are (RViz will report them).
    """
    return resolve_mesh_uris(urdf_xml, urdf_file, keep_package=_known_to_ament)
