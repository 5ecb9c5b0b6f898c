"""The three layers stay layers (docs/layout.md): the physics core (wb_sim/*.py,
wb_sim/contact/) imports neither the tools nor the ROS node, and the tools do not
import the ROS node. Read from the source's import statements (every one, also
those inside functions), so an import on a rarely taken path counts too."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "wb_sim"


def _imports(path: Path) -> set[str]:
    """Absolute names of the wb_sim modules ``path`` imports."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = parts[:-1]  # the package a relative import starts from (also for __init__)
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            out.add(name)
            out |= {f"{name}.{a.name}" for a in node.names}  # from . import tools
    return {n for n in out if n == "wb_sim" or n.startswith("wb_sim.")}


def _layer(files, forbidden):
    bad = {}
    for path in files:
        hits = sorted(n for n in _imports(path) if any(n == f or n.startswith(f + ".")
                                                       for f in forbidden))
        if hits:
            bad[str(path.relative_to(PACKAGE.parent))] = hits
    return bad


def test_the_physics_core_imports_neither_the_tools_nor_ros():
    core = [p for p in PACKAGE.glob("*.py") if p.name != "__main__.py"]
    core += list((PACKAGE / "contact").glob("*.py"))
    assert len(core) >= 12
    assert _layer(core, ("wb_sim.tools", "wb_sim.ros")) == {}


def test_the_tools_do_not_import_ros():
    tools = list((PACKAGE / "tools").rglob("*.py"))  # campaign/, bench/ too
    assert len(tools) >= 10
    assert _layer(tools, ("wb_sim.ros",)) == {}


def test_the_import_reader_sees_relative_imports():
    """The check above can fail: the reader resolves the forms the code uses."""
    names = _imports(PACKAGE / "ros" / "run.py")
    assert any(n.startswith("wb_sim.tools.") for n in names), names
    assert "wb_sim.tools.demo" in _imports(PACKAGE / "__main__.py")
    assert "wb_sim.contact.compliant" in _imports(PACKAGE / "contact" / "__init__.py")


def _layout_sections() -> dict[str, str]:
    """docs/layout.md's tree, by section: a line at column 0 (``wb_sim/tools/``,
    ``launch/...``) starts one, its indented lines belong to it."""
    doc = (PACKAGE.parent / "docs" / "layout.md").read_text()
    tree = doc.split("```")[1]
    sections: dict[str, str] = {}
    head = ""
    for line in tree.splitlines():
        if line[:1].strip():
            head = line.split()[0]
        sections[head] = sections.get(head, "") + line + "\n"
    return sections


def test_every_module_has_its_line_in_docs_layout():
    """docs/layout.md shows the architecture one line per module: none is missing. A
    module is looked for in its layer's section (wb_sim/, wb_sim/tools/, wb_sim/ros/) by
    its path there: ``contact/points.py``, ``bag.py``, ``campaign/spec.py``."""
    import re
    sections = _layout_sections()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        layer = rel.parts[0] if rel.parts[0] in ("tools", "ros") else ""
        section = sections.get(f"wb_sim/{layer}/" if layer else "wb_sim/", "")
        name = "/".join(rel.parts[1:] if layer else rel.parts)
        if not re.search(r"(^|\s)" + re.escape(name) + r"\s", section, re.M):
            missing.append(str(rel))
    assert missing == []


def test_the_layout_check_reads_the_sections():
    sections = _layout_sections()
    assert {"wb_sim/", "wb_sim/tools/", "wb_sim/ros/"} <= set(sections)
    assert "  node.py " in sections["wb_sim/ros/"] and "  node.py " not in sections["wb_sim/tools/"]
