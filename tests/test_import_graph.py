"""The import graph of isaaclab_mgpu: no circle, and the package's two sides kept apart.

The rules (``docs/architecture.md``):

1. the rank side (``rank/`` and the public names that run in a rank, ``isaaclab_mgpu.worker`` and
   ``isaaclab_mgpu.progress``) and the contract never import the launcher side, the command layer,
   ``cli/`` or ``report/``;
2. ``contract/`` imports nothing of the package outside itself, and only the standard library;
3. only the command layer (``launch.py``) and ``cli/`` import ``report/``: the rank side prints
   through ``rank/console.py``, the launcher side returns data;
4. the launcher side never imports the rank side: a module both processes run (the worker's
   argument parser, the embedded tasks' override keys, the libraries' checkpoint names) lives in
   ``contract/``, where rule 2 keeps it light.

The graph is read from the source with :mod:`ast`, so it sees every import statement: module
level, inside functions (the lazy imports that keep torch off ``mgpu --help``'s path) and under
``if TYPE_CHECKING:``. TYPE_CHECKING-only imports count: a type named in a signature is a
dependency of the design even when Python does not execute the import, and letting them through
would let a circle hide behind a string annotation.

An edge goes to the module an import statement names (``from ..worker.rank import X`` →
``worker.rank``; ``from .. import backends`` → ``backends``). The parent packages Python
initialises on the way (``worker/__init__.py`` above) are not edges of their own: every submodule
import runs them, so counting them would only restate the package tree.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import isaaclab_mgpu

ROOT = Path(isaaclab_mgpu.__file__).parent
PKG = "isaaclab_mgpu"

#: The command layer: the only modules besides report itself that may import report.
COMMAND_LAYER = ("isaaclab_mgpu.cli", "isaaclab_mgpu.launch")
REPORT = "isaaclab_mgpu.report"
CONTRACT = "isaaclab_mgpu.contract"
#: Code that runs in a rank: the rank package and the public names that run there.
RANK_SIDE = ("isaaclab_mgpu.rank", "isaaclab_mgpu.worker", "isaaclab_mgpu.progress")
#: What the rank side and the contract must never import.
LAUNCHER_SIDE = (
    "isaaclab_mgpu.launcher",
    "isaaclab_mgpu.jaxrun",
    "isaaclab_mgpu.__main__",
    *COMMAND_LAYER,
    REPORT,
)


def _modules() -> dict[str, Path]:
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = [PKG, *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _owner(name: str, mods: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is one of our modules."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom, mods: dict[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        submodules = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in mods]
        plain = len(submodules) < len(node.names)
        names = submodules + ([source] if plain else [])
    found = {_owner(n, mods) for n in names if n == PKG or n.startswith(PKG + ".")}
    return {t for t in found if t is not None and t != module}


def third_party(path: Path) -> set[str]:
    """Top-level names of the modules ``path`` imports that are neither ours nor the standard library."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        found |= {n.split(".")[0] for n in names}
    return {n for n in found if n != PKG and n not in sys.stdlib_module_names}


def import_graph() -> dict[str, set[str]]:
    """Module → the isaaclab_mgpu modules its source imports anywhere."""
    mods = _modules()
    graph = {}
    for module, path in mods.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges |= _targets(module, path, node, mods)
        graph[module] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_no_import_circle():
    assert circles(import_graph()) == []


def _edges(
    graph: dict[str, set[str]], sources: tuple[str, ...], targets: tuple[str, ...]
) -> set[tuple[str, str]]:
    return {
        (module, t)
        for module, imported in graph.items()
        if _within(module, sources)
        for t in imported
        if _within(t, targets)
    }


def test_the_rank_side_and_the_contract_never_import_the_launcher_side():
    assert _edges(import_graph(), (*RANK_SIDE, CONTRACT), LAUNCHER_SIDE) == set()


def test_the_contract_imports_only_itself_and_the_standard_library():
    graph = import_graph()
    assert {
        (m, t)
        for m, ts in graph.items()
        if _within(m, (CONTRACT,))
        for t in ts
        if not _within(t, (CONTRACT,))
    } == set()
    mods = _modules()
    outside = {m: third_party(p) for m, p in mods.items() if _within(m, (CONTRACT,))}
    assert {m: names for m, names in outside.items() if names} == {}


def test_the_launcher_side_never_imports_the_rank_side():
    assert _edges(import_graph(), LAUNCHER_SIDE, RANK_SIDE) == set()


def test_only_the_command_layer_imports_report():
    graph = import_graph()
    offenders = {
        module: sorted(t for t in targets if _within(t, (REPORT,)))
        for module, targets in graph.items()
        if not _within(module, (REPORT, *COMMAND_LAYER))
    }
    assert {m: t for m, t in offenders.items() if t} == {}


def test_the_graph_sees_what_the_checks_need():
    """Guard against a graph that cannot fail: the edges these tests rely on must be found."""
    graph = import_graph()
    # a lazy, function-level import
    assert "isaaclab_mgpu.launcher.probe.run" in graph["isaaclab_mgpu.launch"]
    # a TYPE_CHECKING-only import
    assert "isaaclab_mgpu.launcher.supervise" in graph["isaaclab_mgpu.report.supervise"]
    # ``from .. import backends`` names the submodule, not the package above it
    assert "isaaclab_mgpu.rank.backends" in graph["isaaclab_mgpu.rank.worker.train"]
    assert PKG not in graph["isaaclab_mgpu.rank.worker.train"]
    # the printing layer is reached by the command layer
    assert "isaaclab_mgpu.report.checkenv" in graph["isaaclab_mgpu.launch"]
    # the rank side reaches the contract, and so does the launcher side for what both run
    assert "isaaclab_mgpu.contract.progress" in graph["isaaclab_mgpu.rank.worker.main"]
    assert "isaaclab_mgpu.contract.worker_args" in graph["isaaclab_mgpu.launcher.forwarded"]
    # a lazy third-party import is seen, the standard library and our own package are not
    assert third_party(ROOT / "launcher" / "nvml.py") == {"psutil", "pynvml"}
    assert third_party(ROOT / "contract" / "errors.py") == set()


def test_circles_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def _second_names(path: Path) -> list[str]:
    """Where a module spells an ``MGPU_*`` variable itself, or gives one of contract/env.py's a name."""
    found = []
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
        if re.fullmatch(r"MGPU_[A-Z0-9_]+", text):
            found.append(f"{path.name}:{node.lineno} spells {text}")
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "env":
            found.append(f"{path.name}:{node.lineno} renames env.{value.attr}")
    return found


def test_every_mgpu_variable_has_one_python_name(tmp_path):
    mods = _modules()
    env_module = mods[f"{CONTRACT}.env"]
    found = [hit for m, p in mods.items() if p != env_module for hit in _second_names(p)]
    assert found == []
    # the check sees both kinds
    assert _second_names(env_module) != []
    planted = tmp_path / "planted.py"
    planted.write_text('from isaaclab_mgpu.contract import env\nRUN = env.RUN_DIR\nX = "MGPU_X"\n')
    assert len(_second_names(planted)) == 2
