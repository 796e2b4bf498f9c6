"""No import circle among rivet_workflows' modules, type-only imports included (DESIGN.md section 15: shared
types live in the leaf). The graph is grimp's, the one import-linter checks the layer contracts on."""

from __future__ import annotations

import grimp


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        "rivet_workflows",
        include_external_packages=False,
        exclude_type_checking_imports=False,
        cache_dir=None,
    )


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative): each is an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def _describe(graph: grimp.ImportGraph, circle: list[str]) -> str:
    """One circle: its modules and, for each import between two of them, the importing line."""
    members = set(circle)
    lines = [f"{len(circle)} modules: {', '.join(circle)}"]
    for importer in circle:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"  {importer}:{detail['line_number']}: {detail['line_contents']}")
    return "\n".join(lines)


def test_the_package_has_no_import_circle_type_only_imports_included():
    graph = _graph()
    circles = _circles(graph)
    assert not circles, f"{len(circles)} import circle(s):\n" + "\n".join(
        _describe(graph, c) for c in circles
    )


def test_the_circle_finder_sees_a_circle_made_only_of_type_checking_imports():
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.low", "pkg.high", "pkg.leaf"):
        graph.add_module(name)
    graph.add_import(
        importer="pkg.high", imported="pkg.low", line_number=1, line_contents="from . import low"
    )
    graph.add_import(
        importer="pkg.low", imported="pkg.high", line_number=5, line_contents="from .high import High"
    )
    graph.add_import(
        importer="pkg.low", imported="pkg.leaf", line_number=2, line_contents="from . import leaf"
    )
    assert _circles(graph) == [["pkg.high", "pkg.low"]]
    assert "pkg.low:5: from .high import High" in _describe(graph, ["pkg.high", "pkg.low"])
