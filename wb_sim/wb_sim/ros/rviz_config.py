"""The RViz configuration of a world of several robots (``sim.launch.py world:= rviz:=true``),
generated at launch time from the shipped ``rviz/wb_sim.rviz`` rather than shipped per world.

The shipped file shows one robot: one RobotModel display on ``/robot_description`` with no TF
prefix, one Wrench display per contact surface of the humanoid on
``/contact_wrench/<surface>``. With several robots each robot's topics are under its name and
its frames ``<name>/<link>`` (docs/ros.md, "Several robots"), so the template's RobotModel
display becomes one per robot ("TF Prefix" ``<name>``, "Description Topic"
``/<name>/robot_description``) and its Wrench displays one per contact surface of each robot
(``/<name>/contact_wrench/<surface>``); every other display (grid, TF, terrain, objects,
contact markers) and the view are kept as they are. Plain Python (PyYAML), no rclpy.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from ..errors import ConfigError

ROBOT_MODEL = "rviz_default_plugins/RobotModel"
WRENCH = "rviz_default_plugins/Wrench"


def fleet_rviz_config(template: str | Path, robots, out: str | Path) -> Path:
    """Write to ``out`` the RViz configuration ``template`` (``rviz/wb_sim.rviz``) made to show
    every robot of ``robots``, a list of ``(name, contact surface names)``, the first robot
    first (module docstring). Returns ``out``'s path. ConfigError for a template without a
    RobotModel display."""
    template = Path(template)
    config = yaml.safe_load(template.read_text())
    try:
        displays = config["Visualization Manager"]["Displays"]
    except (KeyError, TypeError):
        raise ConfigError(f"RViz configuration '{template}' has no 'Visualization Manager: "
                          f"Displays:' list: give a file RViz wrote") from None
    model = next((d for d in displays if d.get("Class") == ROBOT_MODEL), None)
    if model is None:
        raise ConfigError(f"RViz configuration '{template}' has no {ROBOT_MODEL} display to "
                          f"copy per robot: add one (Add > RobotModel) and save it again")
    wrench = next((d for d in displays if d.get("Class") == WRENCH), None)
    out_displays = []
    for d in displays:
        if d is model:
            for name, _ in robots:
                m = copy.deepcopy(model)
                m["Name"] = f"{name} RobotModel"
                m["TF Prefix"] = name
                m.setdefault("Description Topic", {})["Value"] = f"/{name}/robot_description"
                m["Description Source"] = "Topic"
                out_displays.append(m)
        elif d is wrench:
            for name, surfaces in robots:
                for s in surfaces:
                    w = copy.deepcopy(wrench)
                    w["Name"] = f"{name} {s} contact wrench"
                    w.setdefault("Topic", {})["Value"] = f"/{name}/contact_wrench/{s}"
                    out_displays.append(w)
        elif d.get("Class") != WRENCH:  # the template's other wrenches: the first robot's
            out_displays.append(d)
    config["Visualization Manager"]["Displays"] = out_displays
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# generated from {template} for the robots "
                   f"{', '.join(n for n, _ in robots)} (wb_sim/ros/rviz_config.py)\n"
                   + yaml.safe_dump(config, sort_keys=False, default_flow_style=False))
    return out
