"""The URDF as ROS tools read it (``robot_description``, RViz; the browser viewer too).

Pure Python (no rclpy): ``ament_index_python`` is asked, when importable, which
packages a ROS environment knows.
"""

from __future__ import annotations

import re
from pathlib import Path

_MESH_URI = re.compile(r'(<mesh\b[^>]*?\bfilename\s*=\s*)(["\'])(.*?)\2', re.S)


def urdf_for_ros(urdf_xml: str, urdf_file: Path | None) -> str:
    """The URDF text with mesh URIs that a ROS tool could not resolve made absolute.

    ``package://P/rel`` stays when the ament index knows P (a ROS install);
    otherwise, as for robots installed from PyPI, P is looked up next to the
    URDF file's ancestors and the URI becomes ``file:///abs/path``. Relative
    file names become ``file://`` paths against the URDF's directory. URIs
    that cannot be resolved are left as they are (RViz will report them).
    """
    def known_to_ament(package: str) -> bool:
        try:
            from ament_index_python.packages import get_package_share_directory
            get_package_share_directory(package)
            return True
        except Exception:  # not importable, or unknown package
            return False

    def rewrite(m: re.Match) -> str:
        uri = m.group(3)
        target = None
        if uri.startswith("package://"):
            package, _, rel = uri[len("package://"):].partition("/")
            if urdf_file is not None and not known_to_ament(package):
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
