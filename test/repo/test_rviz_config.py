"""The RViz configuration (rviz2 is not on PyPI: checked by reading it). The launch
file itself runs for real in test/ros/test_launch.py."""


import yaml

import wb_sim

from helpers import PKG
RVIZ = PKG / "rviz" / "wb_sim.rviz"


def test_rviz_config_shows_model_tf_and_a_wrench_per_default_surface():
    cfg = yaml.safe_load(RVIZ.read_text())
    vm = cfg["Visualization Manager"]
    assert vm["Global Options"]["Fixed Frame"] == "world"
    displays = {d["Class"]: d for d in vm["Displays"]}
    model = displays["rviz_default_plugins/RobotModel"]
    assert model["Description Source"] == "Topic"
    assert model["Description Topic"]["Value"] == "/robot_description"
    assert model["Description Topic"]["Durability Policy"] == "Transient Local"
    assert "rviz_default_plugins/TF" in displays
    wrench_topics = {d["Topic"]["Value"] for d in vm["Displays"]
                     if d["Class"] == "rviz_default_plugins/Wrench"}
    sim = wb_sim.config.read_yaml_params(wb_sim.default_config_path())
    assert wrench_topics == {f"/contact_wrench/{s}" for s in sim["contact_surfaces"]}



def test_rviz_config_shows_the_terrain_objects_and_contact_markers_as_the_node_sends_them():
    cfg = yaml.safe_load(RVIZ.read_text())
    markers = [d for d in cfg["Visualization Manager"]["Displays"]
               if d["Class"] == "rviz_default_plugins/MarkerArray"]
    from wb_sim.ros.parameters import NODE_PARAMETERS
    table = {p.key: p.default for p in NODE_PARAMETERS}
    by_topic = {d["Topic"]["Value"]: d for d in markers}
    assert set(by_topic) == {"/" + table["topics.terrain"], "/" + table["topics.contact_markers"],
                             "/" + table["topics.objects"]}
    for latched in ("topics.terrain", "topics.objects"):  # published once (objects: again
        # at each spawn or delete), latched
        assert by_topic["/" + table[latched]]["Topic"]["Durability Policy"] == "Transient Local"
    assert set(by_topic["/" + table["topics.objects"]]["Namespaces"]) == {"objects"}
    contacts = by_topic["/" + table["topics.contact_markers"]]
    assert contacts["Topic"]["Durability Policy"] == "Volatile"  # a stream
    assert set(contacts["Namespaces"]) == {"contact_points", "contact_forces",  # markers.py
                                           "self_contact_points", "self_contact_forces"}
