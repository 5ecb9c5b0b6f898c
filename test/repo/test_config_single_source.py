"""Each parameter is declared once (a :class:`wb_sim.parameters.Param`), and that one
declaration is what YAML loading, the Python API, the ROS node's descriptors and the
docs' parameter tables say: the same default, range, unit and live flag everywhere, and the
same ConfigError for a bad value whichever way it comes in."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest

import wb_sim
from wb_sim.config import (NODE_GROUPS, NODE_NAMES, PARAMETER_BY_KEY, PARAMETERS,
                           POSE_PARAMETERS, SURFACE_PARAMETERS, load_config,
                           parameter_table_markdown, read_yaml_params)
from wb_sim.contact import CONTACT_MODELS, CompliantContact, RigidContact
from wb_sim.parameters import Param
from wb_sim.ros.parameters import (DEFAULT_TOPICS, NODE_PARAMETERS, is_node_key, load_node_config,
                                   node_parameter_table_markdown)

from helpers import PKG, ROOT
DOCS = (ROOT / "docs" / "parameters.md").read_text() + (ROOT / "docs" / "ros.md").read_text()
ARM = """<robot name="arm"><link name="base"/>
  <link name="l1"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01"
    ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="10" velocity="1"/></joint></robot>"""
BOX_BASE = {"robot_description": ARM.replace('type="revolute"', 'type="fixed"').replace(
    '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="10" velocity="1"/>', ""),
    "contact_surfaces": ["foot"], "foot.frame": "l1", "foot.shape": "box",
    "foot.size": [0.2, 0.1], "initial.base_position": [0.0, 0.0, 0.3]}


def _config_value(cfg, key: str):
    head, _, field = key.partition(".")
    return getattr(getattr(cfg, head), field) if field else getattr(cfg, key)


def _bad_value(p: Param):
    """A value of the right type that the declaration's range or choices refuse."""
    if p.choices:
        return "no_such_choice"
    if p.lo is not None:
        below = p.lo if p.lo_open else p.lo - 1
        below = int(below) if p.kind == "int" else float(below)
        return [below] * (p.length or 1) if p.kind == "floats" else below
    if p.hi is not None:
        return p.hi + 1
    return None


ALL = [(p.key, p) for p in PARAMETERS] + [(f"foot.{p.key}", p) for p in SURFACE_PARAMETERS] \
    + [(p.key, p) for p in NODE_PARAMETERS]
BAD = [(key, p, _bad_value(p)) for key, p in ALL if _bad_value(p) is not None]


def test_the_contact_group_is_assembled_from_the_models_own_declarations():
    contact_keys = [p.key for p in PARAMETERS if p.key.startswith("contact.")]
    for cls in CONTACT_MODELS.values():
        for p in cls.PARAMETERS:
            assert PARAMETER_BY_KEY[p.key] is p, p.key  # the same object, not a copy
        assert cls.LIVE_PARAMETERS == tuple(p.key.removeprefix("contact.")
                                            for p in cls.PARAMETERS if p.live)
    owned = {p.key for cls in CONTACT_MODELS.values() for p in cls.PARAMETERS}
    assert set(contact_keys) == owned | {"contact.model"}
    assert len(contact_keys) == len(set(contact_keys)) == 15
    # which parameters are live is the model's: the rigid ground has no spring to change
    assert CompliantContact.LIVE_PARAMETERS == ("stiffness", "damping", "tangential_stiffness",
                                                "tangential_damping", "friction_coefficient",
                                                "torsional_friction")
    assert RigidContact.LIVE_PARAMETERS == ("friction_coefficient", "torsional_friction")
    assert PARAMETER_BY_KEY["contact.model"].check("soft") == \
        "unknown contact model 'soft'; valid choices: compliant, rigid"


def test_defaults_of_yaml_loading_are_the_declared_ones():
    cfg = load_config(BOX_BASE)
    for p in PARAMETERS:
        if p.key in BOX_BASE or p.key == "contact_surfaces":
            continue
        assert _config_value(cfg, p.key) == p.default_value, p.key
    surface = cfg.surfaces[0]
    for p in SURFACE_PARAMETERS:
        if f"foot.{p.key}" not in BOX_BASE and p.key not in ("grid", "points"):
            assert getattr(surface, p.key) == p.default_value, p.key
    assert surface.grid == (2, 2) and surface.points == ()
    node = load_node_config({})
    for p in NODE_PARAMETERS:
        assert node[p.key] == p.default_value, p.key
    assert DEFAULT_TOPICS["joint_states"] == "joint_states" and \
        DEFAULT_TOPICS["odom"] == "odom/ground_truth"


def test_what_the_lower_layers_know_of_the_node_is_its_declarations():
    """The core (which does not import ros/) leaves the node's keys to it by name, and
    the bag reader (a tool) falls back on the node's default topics: both held here to
    the node's declarations, so that neither can drift."""
    from wb_sim.config import is_node_key as core_leaves_to_node
    from wb_sim.tools.bag import DEFAULT_TOPICS as BAG_TOPICS
    for p in NODE_PARAMETERS:
        assert core_leaves_to_node(p.key), p.key
    for p in PARAMETERS:
        assert not core_leaves_to_node(p.key), p.key
    heads = {p.key.partition(".")[0] for p in NODE_PARAMETERS if "." in p.key}
    assert set(NODE_GROUPS) == heads | {"qos_overrides"}
    assert set(NODE_NAMES) == {p.key for p in NODE_PARAMETERS if "." not in p.key} | {
        "use_sim_time", "start_type_description_service"}
    for key in ("qos_overrides./clock.publisher.depth", "use_sim_time"):
        assert core_leaves_to_node(key) and is_node_key(key)
    assert BAG_TOPICS == {k: DEFAULT_TOPICS[k] for k in BAG_TOPICS}


def test_docs_tables_show_each_declaration():
    assert parameter_table_markdown() in DOCS and node_parameter_table_markdown() in DOCS
    for key, p in [(p.key, p) for p in PARAMETERS + NODE_PARAMETERS] + \
            [(f"S.{p.key}", p) for p in SURFACE_PARAMETERS] + \
            [(f"poses.P.{p.key}", p) for p in POSE_PARAMETERS]:
        row = next(line for line in DOCS.splitlines()
                   if line.startswith(f"| `{key}` | {p.kind} |"))
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        assert cells[5] == p.doc.replace("|", "\\|"), key
        assert cells[1:5] == [p.kind, f"`{json.dumps(p.default)}`", p.unit,
                              "yes" if p.live else ""], key


def test_node_descriptors_come_from_the_declarations():
    from helpers.extras import require_ros
    require_ros()
    from wb_sim.ros.parameters import descriptor

    for key, p in ALL:
        d = descriptor(key, p)
        assert d.name == key and d.read_only == (not p.live) and d.dynamic_typing
        assert d.description.startswith(p.doc) and d.description.endswith(
            f" [{p.unit}]" if p.unit else p.doc), key
        fr, ir = list(d.floating_point_range), list(d.integer_range)
        if p.kind == "float" and (p.lo is not None or p.hi is not None):
            assert (fr[0].from_value, fr[0].to_value) == (
                p.lo if p.lo is not None else -math.inf, p.hi if p.hi is not None else math.inf), key
        else:
            assert not fr, key
        if p.kind == "int" and p.lo is not None:
            assert (ir[0].from_value, ir[0].to_value) == (
                p.lo + p.lo_open, p.hi if p.hi is not None else 2**63 - 1), key
        else:
            assert not ir, key
        if p.choices:
            assert all(repr(c) in d.additional_constraints for c in p.choices), key
    by_key = {k: descriptor(k, p) for k, p in ALL}
    assert by_key["physics_rate_hz"].floating_point_range[0].to_value == 1e6
    assert by_key["contact.stiffness"].read_only is False
    assert by_key["contact.reference_depth"].read_only is True
    assert by_key["contact.reference_depth"].additional_constraints == "> 0"
    assert by_key["realtime_priority"].integer_range[0].to_value == 99
    assert "[N/m]" in by_key["contact.stiffness"].description


@pytest.mark.parametrize("key, p, bad", BAD, ids=[k for k, _, _ in BAD])
def test_a_bad_value_gets_the_declarations_message_from_every_entry(key, p, bad, tmp_path):
    with pytest.raises(wb_sim.ConfigError) as declared:
        p.coerce(bad, key)
    msg = str(declared.value)
    assert msg.startswith(f"parameter '{key}': ") and f"(got {bad!r})" in msg
    params = {**BOX_BASE, key: bad}
    if p in NODE_PARAMETERS:
        with pytest.raises(wb_sim.ConfigError) as node:
            load_node_config(params)
        assert str(node.value) == msg
        load_config(params)  # the core leaves the node's keys to it
        return
    with pytest.raises(wb_sim.ConfigError) as api:
        wb_sim.Simulator.from_params(params)
    assert str(api.value) == msg
    yaml_file = tmp_path / "bad.yaml"
    yaml_file.write_text("wb_sim:\n  ros__parameters:\n" + "".join(
        f"    {k}: {json.dumps(v)}\n" for k, v in params.items()))
    with pytest.raises(wb_sim.ConfigError) as from_yaml:
        wb_sim.Simulator.from_yaml(yaml_file)
    assert str(from_yaml.value) == msg


@pytest.mark.parametrize("model", sorted(CONTACT_MODELS))
def test_live_contact_changes_are_checked_by_the_same_declarations(model):
    sim = wb_sim.Simulator.from_params({**BOX_BASE, "contact.model": model})
    for name in sim.contact.LIVE_PARAMETERS:
        p = PARAMETER_BY_KEY[f"contact.{name}"]
        bad = _bad_value(p)
        with pytest.raises(wb_sim.ConfigError) as declared:
            p.coerce(bad)
        with pytest.raises(wb_sim.ConfigError) as live:
            sim.set_contact_parameters(**{name: bad})
        assert str(live.value) == str(declared.value)
        with pytest.raises(wb_sim.ConfigError) as api:
            wb_sim.Simulator.from_params({**BOX_BASE, "contact.model": model, p.key: bad})
        assert str(api.value) == str(declared.value)
    read_only = [p for p in sim.contact.PARAMETERS if not p.live]
    assert read_only
    for p in read_only:
        with pytest.raises(wb_sim.ConfigError, match="cannot be changed while running"):
            sim.set_contact_parameters(**{p.key: p.default})
    if model == "rigid":  # a parameter of the other model: not live here
        with pytest.raises(wb_sim.ConfigError, match="'contact.stiffness' cannot be changed"):
            sim.set_contact_parameters(stiffness=1e5)


def test_users_files_load_unchanged():
    for f in sorted((PKG / "config").glob("*.yaml")):
        flat = read_yaml_params(f)
        load_config(flat)
        load_node_config(flat)
        unknown = [k for k in flat if k not in PARAMETER_BY_KEY and not is_node_key(k)
                   and k.partition(".")[0] not in flat.get("contact_surfaces", [])]
        assert not unknown, (f.name, unknown)
    with pytest.raises(wb_sim.ConfigError, match="unknown parameter 'publsh.tf_rate_hz'"):
        wb_sim.load_config({**BOX_BASE, "publsh.tf_rate_hz": 1.0})
    for key in ("qos_overrides./clock.publisher.depth", "use_sim_time", "publish.tf_rate_hz"):
        load_config({**BOX_BASE, key: 1})  # the node's keys and rclpy's are left to the node


def test_node_parameters_import_no_rclpy():
    code = ("import sys, wb_sim.ros.parameters as p, wb_sim.config as c, wb_sim.tools.bag; "
            "c.load_config({'robot_description': 'x', 'publish.tf_rate_hz': 1.0}); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('rclpy', 'rcl_interfaces')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT / "test")


def test_the_typed_config_is_frozen_and_pickles():
    """The groups are read as attributes without a second declaration; they stay frozen
    and cross process boundaries (campaign workers)."""
    import pickle
    cfg = load_config(BOX_BASE)
    with pytest.raises(AttributeError, match="read-only"):
        cfg.contact.stiffness = 1.0
    with pytest.raises(AttributeError, match="no parameter 'stifness'"):
        cfg.contact.stifness  # noqa: B018
    again = pickle.loads(pickle.dumps(cfg))
    assert again == cfg and again.dt == 1e-3 and again.surfaces[0].local_points().shape == (4, 3)
