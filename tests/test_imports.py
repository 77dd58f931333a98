"""The package's imports flow one way: no module imports (at top level or inside a function) one that imports
it back, directly or through others."""

import ast

from kdtree_lab.paths import ROOT


def _graph() -> dict[str, set[str]]:
    pkg = ROOT / "kdtree_lab"
    names = {p.stem for p in pkg.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in pkg.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps |= {a.name for a in node.names}
        graph[path.stem] = {d for d in deps if d in names and d != path.stem}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
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


def test_no_import_cycle():
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
