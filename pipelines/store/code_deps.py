"""Which library files a piece of code depends on, derived from its imports.

A stage's code digest covers the module of the function it runs, the in-repo modules that
function (and the module-level functions of its own module it calls) names, and everything
those modules import, transitively. Nothing is typed by hand: adding an import to a stage is
enough for the memo to see changes in the imported module.
"""

from __future__ import annotations

import ast
import gc
import hashlib
import types
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ROOT_PACKAGES = ("pipelines",)
REPO_ROOT = Path(__file__).resolve().parents[2]


def _in_repo(module: str) -> bool:
    return module.split(".", 1)[0] in ROOT_PACKAGES


@lru_cache(maxsize=None)
def module_file(module: str) -> Path | None:
    """The source file of an in-repo module (``None`` for names that are not modules)."""
    if not _in_repo(module):
        return None
    parts = module.split(".")
    base = REPO_ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


# the fields of a node that hold statements: an import is a statement, so these are all the
# places one can be (expressions, the most of a tree's nodes, hold none)
_STATEMENT_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(body: list[ast.stmt]):
    todo = list(body)
    while todo:
        node = todo.pop()
        yield node
        for field in _STATEMENT_FIELDS:
            todo.extend(getattr(node, field, None) or ())


@dataclass(frozen=True)
class _ModuleImports:
    modules: frozenset[str]  # every in-repo module the file imports, anywhere in it
    names: dict[str, str]  # names bound by a top-level ``from X import name``: X (in-repo)


@lru_cache(maxsize=None)
def _module_imports(module: str) -> _ModuleImports:
    """What ``module``'s file imports, read once from its syntax tree. The cyclic collector is
    paused while the tree is built: its hundreds of thousands of nodes would start collections
    that traverse every object of a process holding Dagster's definitions (half of the time)."""
    path = module_file(module)
    if path is None:
        return _ModuleImports(frozenset(), {})
    source = path.read_text(encoding="utf-8")
    collecting = gc.isenabled()
    gc.disable()
    try:
        tree = ast.parse(source, filename=str(path))
        is_package = path.name == "__init__.py"
        found: set[str] = set()
        for node in _statements(tree.body):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = (_resolve_relative(module, is_package, node.level, node.module) if node.level
                          else node.module or "")
                names = [target] + [f"{target}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                # ``import a.b.c`` also runs a and a.b
                parts = name.split(".")
                for i in range(1, len(parts) + 1):
                    prefix = ".".join(parts[:i])
                    if module_file(prefix) is not None:
                        found.add(prefix)
        found.discard(module)
        bound = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                source_module = (_resolve_relative(module, is_package, node.level, node.module) if node.level
                                 else node.module or "")
                if module_file(source_module) is not None:
                    for alias in node.names:
                        bound[alias.asname or alias.name] = source_module
        del tree
    finally:
        if collecting:
            gc.enable()
    return _ModuleImports(frozenset(found), bound)


def imported_modules(module: str) -> frozenset[str]:
    """The in-repo modules ``module`` imports anywhere in its file (top level or in functions);
    ``from package import name`` counts ``package.name`` when that is a module."""
    return _module_imports(module).modules


def names_imported_from(module: str) -> dict[str, str]:
    """The names ``module`` binds with a top-level ``from X import name``, each with the in-repo
    module it comes from: a constant imported this way has no ``__module__`` to follow."""
    return _module_imports(module).names


def module_closure(modules: set[str]) -> list[str]:
    """``modules`` and every in-repo module they import, transitively, sorted."""
    seen: set[str] = set()
    todo = [m for m in modules if module_file(m) is not None]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(imported_modules(module) - seen)
    return sorted(seen)


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def function_modules(function) -> set[str]:
    """The in-repo modules a function refers to: its own module, the modules of the globals it
    names (following module-level functions of its own module), and the modules it imports."""
    function = getattr(function, "__wrapped__", function)
    if isinstance(function, types.MethodType):
        function = function.__func__
    own = function.__module__
    found = {own}
    seen: set = set()
    todo = [function]
    while todo:
        fn = todo.pop()
        if id(fn) in seen or not hasattr(fn, "__code__"):
            continue
        seen.add(id(fn))
        namespace = fn.__globals__
        imported_from = names_imported_from(fn.__module__)
        for code in _code_objects(fn.__code__):
            for name in code.co_names:
                if module_file(name) is not None:  # import inside the function
                    found.add(name)
                if name in imported_from:
                    found.add(imported_from[name])
                value = namespace.get(name)
                if value is None:
                    continue
                if isinstance(value, types.ModuleType):
                    if _in_repo(value.__name__):
                        found.add(value.__name__)
                    continue
                home = getattr(value, "__module__", None)
                if home and _in_repo(home):
                    found.add(home)
                    if home == own and isinstance(value, types.FunctionType):
                        todo.append(value)
    return found


def code_modules(function) -> list[str]:
    """The modules whose files make ``function``'s code digest: its own module (the file, not
    everything it imports) and the closure of the modules it uses."""
    function = getattr(function, "__wrapped__", function)
    own = function.__module__
    used = function_modules(function) - {own}
    return sorted({own} | set(module_closure(used)))


def code_digest_of(function) -> str:
    """sha256 over the files of every module ``function`` depends on (see module doc)."""
    hasher = hashlib.sha256()
    for module in code_modules(function):
        path = module_file(module)
        if path is None:  # code outside the library (a test's, a user's plug-in): not tracked
            continue
        hasher.update(f"{module}\n".encode())
        hasher.update(hashlib.sha256(path.read_bytes()).digest())
    return hasher.hexdigest()
