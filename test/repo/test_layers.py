"""The three layers stay layers (docs/layout.md): the physics core (wb_sim/*.py,
wb_sim/contact/) imports neither the tools nor the ROS node, and the tools do not
import the ROS node; no module imports another's private name (``from .x import _foo``);
the modules form no import cycle; docs/layout.md has a line for every module. Read from
the source's import statements (every one, also those inside functions and under
TYPE_CHECKING), so an import on a rarely taken path counts too. There is no exception."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


from helpers import PKG, ROOT

PACKAGE = PKG / "wb_sim"


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
    doc = (ROOT / "docs" / "layout.md").read_text()
    # the module's tree (the page's first block is the repository's two packages)
    tree = next(b for b in doc.split("```")[1::2] if "THE PHYSICS CORE" in b)
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


# ----------------------------------------------------------------------------- the import graph
# Every import statement of every wb_sim module, read with ast: at module level, inside a
# function, or under ``if TYPE_CHECKING:`` (never executed, but a dependency all the same).


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


class _ImportReader(ast.NodeVisitor):
    """(target module, imported name or None, line, kind) of each wb_sim import in a module;
    ``from pkg import sub`` of a submodule targets the submodule, of a name the package."""

    def __init__(self, path: Path):
        self.package = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
        self.kind = "module level"
        self.found: list[tuple[str, str | None, int, str]] = []

    def _inside(self, node, kind):
        outer, self.kind = self.kind, kind if self.kind != "type checking" else self.kind
        self.generic_visit(node)
        self.kind = outer

    def visit_FunctionDef(self, node):
        self._inside(node, "in a function")

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node):
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
            outer, self.kind = self.kind, "type checking"
            for child in node.body:
                self.visit(child)
            self.kind = outer
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node):
        for a in node.names:
            if a.name in MODULES:
                self.found.append((a.name, None, node.lineno, self.kind))

    def visit_ImportFrom(self, node):
        if node.level:
            base = list(self.package[:len(self.package) - node.level + 1])
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        if target not in MODULES:
            return
        for a in node.names:
            sub = f"{target}.{a.name}"
            if sub in MODULES:
                self.found.append((sub, None, node.lineno, self.kind))
            else:
                self.found.append((target, a.name, node.lineno, self.kind))


@functools.lru_cache(maxsize=None)
def _imports_of(name: str) -> tuple[tuple[str, str | None, int, str], ...]:
    reader = _ImportReader(MODULES[name])
    reader.visit(ast.parse(MODULES[name].read_text()))
    return tuple(reader.found)


def _graph() -> dict[str, dict[str, tuple[int, str]]]:
    """{module: {module it imports: (first line, kind)}}; a module importing a name of its
    own package's ``__init__`` counts (``from . import share_dir``), its parents' implicit
    initialisation does not."""
    graph: dict[str, dict[str, tuple[int, str]]] = {m: {} for m in MODULES}
    for m in MODULES:
        for target, _, line, kind in _imports_of(m):
            if target != m:
                graph[m].setdefault(target, (line, kind))
    return graph


def _cycles(graph) -> list[list[str]]:
    """One cycle (a list of modules, the first repeated at the end) per strongly connected
    component of more than one module (Tarjan's algorithm, then a shortest path back)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(set(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for comp in components:
        start = min(comp)
        back = {start: None}  # breadth first, inside the component, back to start
        queue, path = [start], None
        while queue and path is None:
            v = queue.pop(0)
            for w in sorted(graph[v]):
                if w == start:  # v -> start closes it: start ... v, start
                    path = [v]
                    while back[path[-1]] is not None:
                        path.append(back[path[-1]])
                    path = path[::-1] + [start]
                    break
                if w in comp and w not in back:
                    back[w] = v
                    queue.append(w)
        cycles.append(path)
    return cycles


def _describe(cycle, graph) -> str:
    steps = []
    for a, b in zip(cycle, cycle[1:]):
        line, kind = graph[a][b]
        steps.append(f"{a} -> {b} ({MODULES[a].relative_to(PACKAGE.parent)}:{line}, {kind})")
    return "\n  ".join(steps)


def test_no_import_cycle_among_wb_sim_modules():
    """Module-level, function-level and type-checking imports alike: the modules of wb_sim
    form no cycle (the last ones, of the contact wing, went with issue 25)."""
    graph = _graph()
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(
        "  " + _describe(c, graph) for c in cycles)


def test_the_cycle_finder_reports_a_cycle():
    """The checks above can fail: the reader sees imports inside functions and under
    TYPE_CHECKING, and the finder reports a cycle as a path."""
    graph = _graph()
    assert graph["wb_sim.contact.self_collision"]["wb_sim.robot"][1] == "in a function"
    assert graph["wb_sim.contact"]["wb_sim.sensors"][1] == "type checking"
    assert graph["wb_sim.config"]["wb_sim.contact"][1] == "module level"
    assert "wb_sim.ros.node" in graph["wb_sim.ros.process"]
    toy = {"a": {"b": (1, "module level")}, "b": {"c": (2, "in a function")},
           "c": {"a": (3, "module level"), "d": (4, "module level")}, "d": {}}
    assert _cycles(toy) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b": (1, "")}, "b": {}}) == []


def _private_imports() -> set[tuple[str, str, str]]:
    """(importer, module, name) of each ``from module import _name`` across modules
    (dunder names such as ``__version__`` are public)."""
    out = set()
    for m in MODULES:
        for target, name, _, _ in _imports_of(m):
            if (name and name.startswith("_") and not name.endswith("__")
                    and target != m):
                out.add((m, target, name))
    return out


def test_no_module_imports_another_modules_private_name():
    """A name with a leading underscore is its module's own: no other module of wb_sim
    imports it (``from .x import _foo``)."""
    assert sorted(_private_imports()) == []


def test_the_private_import_reader_sees_them():
    reader = _ImportReader(PACKAGE / "tools" / "campaign" / "spec.py")
    reader.visit(ast.parse("from ...config import _x, y\nfrom . import case\n"
                           "def f():\n    from ..bench import _z\n"))
    assert reader.found == [("wb_sim.config", "_x", 1, "module level"),
                            ("wb_sim.config", "y", 1, "module level"),
                            ("wb_sim.tools.campaign.case", None, 2, "module level"),
                            ("wb_sim.tools.bench", "_z", 4, "in a function")]


# ----------------------------------------------------------------------------- the contact wing
# Every source of contact force is under wb_sim/contact/ (issue 25): the rest of wb_sim sees
# the package's public face (wb_sim.contact), and the simulator holds one contact object
# without asking what kind it is.


def test_only_the_contact_wing_imports_its_internals():
    """No module outside wb_sim/contact/ imports one of its submodules: they go through
    ``wb_sim.contact`` (the Protocol, the table, make_contact, the public helpers)."""
    inside = {m for m in MODULES if m.startswith("wb_sim.contact")}
    bad = sorted((m, target, line) for m in MODULES if m not in inside
                 for target, _, line, _ in _imports_of(m)
                 if target.startswith("wb_sim.contact.") and target in inside)
    assert bad == []
    assert any(t == "wb_sim.contact" for t, *_ in _imports_of("wb_sim.simulator"))


def _contact_kind_questions(source: str) -> list[str]:
    """What in ``source`` asks which contact it holds: an isinstance of a contact object or
    class, a read of the collision switches of the configuration."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
            text = ast.unparse(node)
            if "contact" in text.lower() or "collision" in text.lower():
                found.append(f"line {node.lineno}: {text}")
        if isinstance(node, ast.Attribute) and node.attr in ("enabled", "self_collision"):
            text = ast.unparse(node)
            if "config" in text or "cfg" in text:
                found.append(f"line {node.lineno}: {text}")
    return found


def test_the_simulator_never_asks_what_kind_of_contact_it_holds():
    source = MODULES["wb_sim.simulator"].read_text()
    assert _contact_kind_questions(source) == []
    assert source.count("make_contact(") == 1  # one contact object, made by one factory
    # the check can fail: it sees the branches the simulator had before issue 25
    assert _contact_kind_questions(
        "if isinstance(self.contact, WholeBodyContact): pass\n"
        "self._whole_body = config.collision.enabled or config.collision.self_collision\n") == [
        "line 1: isinstance(self.contact, WholeBodyContact)",
        "line 2: config.collision.enabled", "line 2: config.collision.self_collision"]


def test_contact_code_receives_its_groups_not_the_whole_configuration():
    """Nothing under wb_sim/contact/ imports config (and so SimConfig): each piece receives
    its own parameter groups; config.py imports only the wing's PARAMETERS."""
    inside = [m for m in MODULES if m.startswith("wb_sim.contact")]
    assert [m for m in inside if "wb_sim.config" in _graph()[m]] == []
    from_contact = [(t, name) for t, name, _, _ in _imports_of("wb_sim.config")
                    if t.startswith("wb_sim.contact")]
    assert from_contact == [("wb_sim.contact", "PARAMETERS")]
