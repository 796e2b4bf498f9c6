"""The engine's shape (DESIGN.md section 11): small modules, imports at module level, no import cycle, every
exception in errors.py. The layer order itself is import-linter's contract in pyproject.toml (make lint)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import pkgutil

import pytest

import rivet_workflows.engine
from rivet_workflows.engine.model import errors

ENGINE = pathlib.Path(rivet_workflows.engine.__file__).parent
#: imports a function body may make: optional dependencies the engine works without (none today)
OPTIONAL_IMPORTS: frozenset[str] = frozenset()


def _sources() -> list[pathlib.Path]:
    return sorted(ENGINE.rglob("*.py"))


def _modules() -> list[str]:
    names = ["rivet_workflows.engine"]
    for info in pkgutil.walk_packages([str(ENGINE)], prefix="rivet_workflows.engine."):
        names.append(info.name)
    return names


#: a module is split by concept, not to meet a count; past this many lines it holds more than one concept
MAX_MODULE_LINES = 700


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ENGINE)))
def test_no_engine_module_is_over_700_lines(path):
    assert len(path.read_text().splitlines()) <= MAX_MODULE_LINES


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ENGINE)))
def test_engine_imports_at_module_level_only(path):
    inner = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = ["." * node.level + (node.module or "")]
                else:
                    continue
                inner += [f"line {node.lineno}: {n}" for n in names if n not in OPTIONAL_IMPORTS]
    assert inner == []


def test_engine_modules_form_no_import_cycle():
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("rivet_workflows", exclude_type_checking_imports=True, cache_dir=None)
    engine = {m for m in graph.modules if m.startswith("rivet_workflows.engine")}
    cycles = []
    for module in sorted(engine):
        for imported in graph.find_modules_directly_imported_by(module) & engine:
            if imported != module and graph.chain_exists(imported, module):
                cycles.append(f"{module} -> {imported}")
    assert cycles == []


@pytest.mark.parametrize("name", _modules())
def test_every_exception_of_the_engine_is_defined_in_errors(name):
    module = importlib.import_module(name)
    defined_here = [
        cls.__name__
        for cls in vars(module).values()
        if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == name
    ]
    if name != errors.__name__:
        assert defined_here == []
