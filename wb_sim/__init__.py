"""wb_sim: a whole-body simulator of floating-base robots in contact with the ground.

The physics core imports only numpy, scipy and pinocchio (never rclpy); the ROS 2
node is a thin adapter over it.

    >>> import wb_sim
    >>> sim = wb_sim.Simulator.from_yaml(wb_sim.default_config_path())
    >>> sim.step([0.0] * sim.nj)
"""

from pathlib import Path

from .config import PARAMETERS, SimConfig, load_config
from .errors import (CommandError, ConfigError, DivergenceError, ModelError, UnsupportedError,
                     WbSimError)
from .robot import RobotModel
from .sensors import ContactPointsReading, ContactWrench, ImuReading, SelfContactsReading
from .simulator import SimState, Simulator, State

__version__ = "0.1.0"


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


__all__ = [
    "PARAMETERS", "CommandError", "ConfigError", "ContactPointsReading", "ContactWrench",
    "DivergenceError", "ImuReading", "ModelError", "RobotModel", "SelfContactsReading",
    "SimConfig", "SimState", "Simulator",
    "State", "UnsupportedError", "WbSimError", "config_path", "default_config_path",
    "load_config", "share_dir",
]
