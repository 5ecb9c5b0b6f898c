"""Where wb_sim's data files are: config/, urdf/, launch/, rviz/ (the source tree or an
installed ``share/wb_sim``), and the ready configurations in them."""

from __future__ import annotations

from pathlib import Path

from .errors import ConfigError, ModelError


def share_dir() -> Path:
    """Directory holding config/, urdf/, launch/, rviz/: the source tree, or an
    installed ``share/wb_sim`` (pip or colcon)."""
    here = Path(__file__).resolve().parent
    candidates = [here.parent]
    # pip/colcon install data files under <prefix>/share/wb_sim
    for parent in here.parents:
        candidates.append(parent / "share" / "wb_sim")
    for c in candidates:
        if (c / "config" / "humanoid.yaml").is_file():
            return c
    raise ModelError("cannot find wb_sim's data files (config/, urdf/); is wb_sim installed?")


def config_path(robot: str) -> Path:
    """Path of the ready configuration ``config/<robot>.yaml``."""
    path = share_dir() / "config" / f"{robot}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in (share_dir() / "config").glob("*.yaml"))
        raise ConfigError(f"no configuration for robot '{robot}'; available: {', '.join(names)}")
    return path


def robot_config_file(robot: str) -> Path:
    """The configuration of ``robot``: a ready one's name (``config/<robot>.yaml``) or the
    path of the user's own robot file (``my_robot.yaml``): the one meaning of ``--robot``
    in every command line."""
    if robot.endswith((".yaml", ".yml")) or Path(robot).is_file():
        path = Path(robot).resolve()
        if not path.is_file():
            raise ConfigError(f"robot file '{robot}' not found")
        return path
    try:
        return config_path(robot)
    except ConfigError as e:
        raise ConfigError(f"{e}; or give the path of your robot's YAML file "
                          f"(--robot my_robot.yaml)") from None


def default_config_path() -> Path:
    """The default robot's configuration (the project's humanoid)."""
    return config_path("humanoid")
