"""The floors of the house: each package imports only what its ``__init__`` says it may, and
no modules import each other in a circle.

An import is any ``import``/``from`` statement, wherever it sits (a lazy import inside a
function still ties the floors together), and any string naming a module of Reflex (the
``reflex`` command and the agent import their subcommands and collectors by name).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "reflex_localize"
FLOORS = ("schemas", "influx", "collectors", "simulator", "flows", "dashboards", "shell")
_RULE = re.compile(r"Imports only (\w+)(?: and (\w+))?\.")
_MODULE_STRING = re.compile(rf"{PACKAGE}(\.\w+)+(:\w+)?")


def allowed_imports(package: str) -> set[str]:
    """What a package's ``__init__`` docstring says it may import, besides itself."""
    doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text())) or ""
    lines = doc.splitlines()
    if "May import every package." in lines:
        return set(FLOORS)
    if "Imports no other package of Reflex." in lines:
        return {package}
    rules = [m for m in map(_RULE.fullmatch, lines) if m]
    assert len(rules) == 1, f"{package}/__init__.py: no one line says what it may import"
    return {package, *(name for name in rules[0].groups() if name)}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The Reflex modules (of ``known``) that the file at ``path`` imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = _MODULE_STRING.fullmatch(node.value)
            names.update({node.value.split(":")[0]} if match else set())
    return {name for name in names if name in known}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for floor in FLOORS for p in (ROOT / floor).rglob("*.py")}
    known = set(files)
    return {name: imported_modules(path, known) - {name} for name, path in files.items()}


def floor_of(module: str) -> str:
    return module.split(".")[1]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    allowed = {floor: allowed_imports(floor) for floor in FLOORS}
    return sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        for target in targets
        if floor_of(target) not in allowed[floor_of(module)]
    )


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_package_says_what_it_may_import() -> None:
    assert allowed_imports("schemas") == {"schemas"}
    assert allowed_imports("influx") == {"influx", "schemas"}
    for side_by_side in ("collectors", "simulator", "flows", "dashboards"):
        assert allowed_imports(side_by_side) == {side_by_side, "influx", "schemas"}
    assert allowed_imports("shell") == set(FLOORS)


def test_no_package_imports_above_its_floor() -> None:
    graph = import_graph()
    assert len(graph) > 80  # every module was read
    assert upward_imports(graph) == []


def test_no_import_circles() -> None:
    assert circles(import_graph()) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}, "c": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}}, [["a", "b", "c"]]),
    ],
)
def test_circles_are_found(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert circles(graph) == expected


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    """The check reads lazy imports and module strings too, not only the top of a file."""
    source = tmp_path / "probe.py"
    source.write_text(
        "def later():\n    from reflex_localize.shell.cli import main\n"
        'TARGET = "reflex_localize.simulator.scenario:load_scenario"\n'
    )
    known = {"reflex_localize.shell.cli", "reflex_localize.simulator.scenario"}
    found = imported_modules(source, known)
    assert found == known
    graph = {"reflex_localize.flows.probe": found}
    assert upward_imports(graph) == [
        "reflex_localize.flows.probe imports reflex_localize.shell.cli",
        "reflex_localize.flows.probe imports reflex_localize.simulator.scenario",
    ]
