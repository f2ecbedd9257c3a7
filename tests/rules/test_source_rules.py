"""House rules on the source tree (CONTRIBUTING.md): no import cycle between files, no file over
a hard size limit (files are split by meaning, "a file holds one job", not by line count: the
limit only catches a file that has grown several jobs), no name in ``src/`` that only its tests
use, and every module named in CONTRIBUTING's layout.

The imports are read as ``tests/test_layering.py`` reads them (every ``import``, at module level
or inside a function). A name "has a user" when something outside ``tests/`` names it: code in
``src/`` other than its own definition (a reference, an attribute, an import, an identifier in
a string such as a ``class_path``), ``examples/`` (the demos included), ``studies/``,
``benchmarks/``, ``configs/`` (the YAML files and their README, which lists what a config may
name), ``Makefile`` or ``pyproject.toml``.
A module's ``__all__`` (``contrastkit.losses``, ``contrastkit.data.decode.video``, ...) is its
public API and counts as a user of what it lists; a method that overrides one of a base class
from outside contrastkit (``forward``, Lightning hooks, ...) is called by that framework.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re

from test_layering import PACKAGE, SRC, imported_modules, modules

ROOT = SRC.parent
#: The hard limit: a file over it holds more than one job (CONTRIBUTING.md, "a file holds one
#: job"); below it, a file is split only where its jobs part.
MAX_LINES = 800
#: Source files allowed over MAX_LINES, with the reason (none today).
LONG_FILES: dict[str, str] = {}
#: Methods a framework calls by name, without a base class that defines them, and who calls them.
CALLED_BY_NAME = {"set_epoch": "Lightning calls set_epoch on a loader's sampler every epoch"}
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def import_graph() -> dict[str, set[str]]:
    """``module -> contrastkit modules it imports`` over every file of the package."""
    known = modules()
    names = set(known)
    return {m: {t for _, t in imported_modules(m, p, names) if t in names and t != m}
            for m, p in known.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` as ``[a, b, ..., a]``, or ``[]``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_no_import_cycle_between_files():
    cycle = find_cycle(import_graph())
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_source_files_are_short():
    long = {str(p.relative_to(ROOT)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    unexplained = {path: n for path, n in long.items() if path not in LONG_FILES}
    assert not unexplained, f"files over {MAX_LINES} lines without a reason: {unexplained}"
    assert set(LONG_FILES) <= set(long), "LONG_FILES lists files that are short now"


# --- names without a user ----------------------------------------------------------------------
def _docstrings(tree: ast.Module) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                out.add(id(first.value))
    return out


def _all_entries(tree: ast.Module) -> set[int]:
    return {id(c) for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            for c in ast.walk(node.value)}


def definitions(module: str, tree: ast.Module) -> list[tuple[str, str | None, int]]:
    """``(name, class or None, line)`` of the top-level functions, classes and constants of a
    module, and of the public methods of its classes."""
    out: list[tuple[str, str | None, int]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((node.name, None, node.lineno))
            if isinstance(node, ast.ClassDef):
                out += [(m.name, node.name, m.lineno) for m in node.body
                        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and not m.name.startswith("_")]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [(t.id, None, node.lineno) for t in targets
                    if isinstance(t, ast.Name) and t.id != "__all__"]
    return [d for d in out if not d[0].startswith("__")]


def names_used_in(tree: ast.Module, *, package: bool) -> set[str]:
    """The identifiers a module names, docstrings aside, and what its ``__all__`` lists (the
    public API); a package's imports (its public face) do not count."""
    used: set[str] = set()
    skip = _docstrings(tree) | _all_entries(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and not package:
            used.update(alias.name for alias in node.names)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in skip):
            used.update(_IDENTIFIER.findall(node.value))
    return used | _public_api(tree)


def used_names() -> set[str]:
    """Every identifier something outside ``tests/`` names (see the module docstring)."""
    used: set[str] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        used |= names_used_in(ast.parse(path.read_text()), package=path.name == "__init__.py")
    for folder, pattern in (("examples", "*.py"), ("studies", "*.py"), ("benchmarks", "*.py"),
                            ("configs", "*.yaml"), ("configs", "*.md")):
        for path in sorted((ROOT / folder).rglob(pattern)):
            used.update(_IDENTIFIER.findall(path.read_text()))
    for name in ("Makefile", "pyproject.toml"):
        used.update(_IDENTIFIER.findall((ROOT / name).read_text()))
    return used


def _public_api(tree: ast.Module) -> set[str]:
    return {c.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            for c in ast.walk(node.value) if isinstance(c, ast.Constant)}


def overrides_a_framework_method(module: str, owner: str, name: str) -> bool:
    """True when ``owner.name`` overrides a method of a base class from outside contrastkit."""
    cls = getattr(importlib.import_module(module), owner)
    return any(name in vars(base) for base in inspect.getmro(cls)[1:]
               if not base.__module__.startswith("contrastkit"))


def layout_block() -> str:
    """The fenced layout block of CONTRIBUTING.md (its first code block)."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    return text.split("```")[1]


def test_every_module_is_named_in_the_contributing_layout():
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", layout_block()))
    missing = sorted(m for m, path in modules().items()
                     if path.stem != "__init__" and path.stem not in words)
    assert missing == [], f"name these modules in CONTRIBUTING.md's layout: {missing}"


def test_every_name_in_src_has_a_user_outside_its_tests():
    used = used_names()
    unused = []
    for module, path in modules().items():
        for name, owner, line in definitions(module, ast.parse(path.read_text())):
            if name in used or (owner and name in CALLED_BY_NAME):
                continue
            if owner and overrides_a_framework_method(module, owner, name):
                continue
            unused.append(f"{path.relative_to(ROOT)}:{line}: {owner + '.' if owner else ''}{name}")
    assert not unused, "defined in src/ and used by nothing outside tests/:\n" + "\n".join(unused)


def test_the_user_finder_reads_what_it_should():
    source = ('"""Docstring naming ghost."""\n__all__ = ["listed"]\nfrom x import imported\n'
              'def f():\n    """About spirit."""\n    return g.attr("class.path_name")\n')
    tree = ast.parse(source)
    assert [d[0] for d in definitions("m", tree)] == ["f"]
    module = names_used_in(tree, package=False)
    assert {"g", "attr", "imported", "path_name"} <= module
    assert not {"ghost", "spirit"} & module and "listed" in module
    package = names_used_in(tree, package=True)
    assert "listed" in package and "imported" not in package
