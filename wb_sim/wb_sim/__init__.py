"""wb_sim: a whole-body simulator of floating-base robots in contact with the ground.

The physics core imports only numpy, scipy and pinocchio (never rclpy); the ROS 2
node is a thin adapter over it.

    >>> import wb_sim
    >>> sim = wb_sim.Simulator.from_yaml(wb_sim.default_config_path())
    >>> sim.step([0.0] * sim.nj)
"""

from .actuators import ActuatorReading
from .config import PARAMETERS, SimConfig, load_config
from .ft_sensors import WrenchReading
from .errors import (CommandError, ConfigError, DivergenceError, ModelError, UnsupportedError,
                     WbSimError)
from .paths import config_path, default_config_path, share_dir
from .robot import RobotModel
from .sensors import (ContactPointsReading, ContactState, ContactWrench, ImuReading,
                      SelfContactsReading)
from .simulator import SimState, Simulator, State

__version__ = "0.1.0"


__all__ = [
    "PARAMETERS", "ActuatorReading", "CommandError", "ConfigError", "ContactPointsReading",
    "ContactState", "ContactWrench",
    "DivergenceError", "ImuReading", "ModelError", "RobotModel", "SelfContactsReading",
    "SimConfig", "SimState", "Simulator",
    "State", "UnsupportedError", "WbSimError", "WrenchReading", "config_path", "default_config_path",
    "load_config", "share_dir",
]
