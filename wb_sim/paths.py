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


def default_config_path() -> Path:
    """The default robot's configuration (the project's humanoid)."""
    return config_path("humanoid")
