"""The package's imports flow one way, derived from the source (every import, at top level or inside a function):
no module imports one that imports it back, directly or through others, and no module imports from a subpackage
above its own in ``kdtree_lab.LAYERS``."""

import ast
from pathlib import Path

from kdtree_lab import LAYERS
from kdtree_lab.core.paths import ROOT

PKG = ROOT / "kdtree_lab"


def _module(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str], root: Path = ROOT) -> set[str]:
    """The package modules ``path`` imports (``from .x import y`` names module x, or x.y where y is a module)."""
    here = _module(path, root)
    package = here if path.stem == "__init__" else here.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names}
    return {m for m in found if m in modules and m != here}


def _graph(pkg: Path = PKG) -> dict[str, set[str]]:
    paths = sorted(pkg.rglob("*.py"))
    modules = {_module(p, pkg.parent) for p in paths}
    return {_module(p, pkg.parent): _imports(p, modules, pkg.parent) for p in paths}


def _layer(module: str) -> int | None:
    """A module's rank in LAYERS (a subpackage's __init__ has its subpackage's); None for the top-level modules
    (the package's own __init__ and __main__)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def _upward(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for mod, deps in sorted(graph.items()):
        rank = _layer(mod)
        for dep in sorted(deps):
            if rank is not None and (_layer(dep) is None or _layer(dep) > rank):
                out.append(f"{mod} imports {dep}")
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_every_subpackage_has_a_layer():
    subs = sorted(p.parent.name for p in PKG.glob("*/__init__.py"))
    assert subs == sorted(LAYERS), f"subpackages {subs}, LAYERS {LAYERS}: place each new subpackage in LAYERS"
    assert not [p.name for p in PKG.glob("*.py") if p.stem not in ("__init__", "__main__")], \
        "a module at the package's top level: put it in the subpackage of its role"


def test_no_import_cycle():
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle)


def test_no_import_from_a_layer_above():
    assert _upward(_graph()) == []


def test_the_graph_sees_every_kind_of_import():
    graph = _graph()
    assert "kdtree_lab.core.mla" in graph["kdtree_lab.kernels.launch_plan"]  # from ..core.mla import D_V
    assert "kdtree_lab.kernels.loader" in graph["kdtree_lab.checks.timing"]  # from ..kernels import loader, in a def
    assert "kdtree_lab.cli.main" in graph["kdtree_lab.__main__"]  # from .cli.main import main


def test_the_checks_find_a_cycle_and_an_upward_import(tmp_path):
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    assert _upward({"kdtree_lab.core.paths": {"kdtree_lab.kernels.loader"},
                    "kdtree_lab.kernels.loader": {"kdtree_lab.core.paths"}}) == \
        ["kdtree_lab.core.paths imports kdtree_lab.kernels.loader"]
    pkg = tmp_path / "kdtree_lab"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "core" / "b.py").write_text("import kdtree_lab.core.a\n")
    assert _cycle(_graph(pkg)) == ["kdtree_lab.core.a", "kdtree_lab.core.b", "kdtree_lab.core.a"]
