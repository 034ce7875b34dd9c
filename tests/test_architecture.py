"""The layers of the code, read from the import statements (``ast``, nothing is imported).

The rules are written in ``pipelines/__init__.py``: only ``pipelines/orchestration/`` and
``assets/`` import Dagster; in the library only ``pipelines/orchestration/`` imports ``assets``;
the flow folders import only downward (store <- shared <- ingest <- clean <- dataset <-
evaluation <- profiles <- orchestration, the shared modules being ``pipelines/{settings,
parallel,checks,http,plugins,compiled,tex_math,progress}.py``); the library's top-level imports have no cycles.

The checker takes a repository root, so the tests also run it on a planted tree in ``tmp_path``
and it can measure another checkout: ``python tests/test_architecture.py /path/to/checkout``.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIBRARY = "pipelines"
ASSETS = "assets"
FLOWS = ("store", "shared", "ingest", "clean", "dataset", "evaluation", "profiles", "orchestration")
SHARED_MODULES = ("settings", "parallel", "checks", "http", "plugins", "compiled", "tex_math", "progress")
DAGSTER_ALLOWED = (f"{LIBRARY}.orchestration", ASSETS)


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # the in-repo module it runs, or the top-level name of an outside package
    line: int
    in_function: bool
    type_checking: bool  # under ``if TYPE_CHECKING:``: never runs

    def where(self) -> str:
        return f"{self.importer} (line {self.line}) imports {self.target}"


def modules_of(root: Path) -> dict[str, Path]:
    """Every module of the library and of ``assets/`` under ``root``, by dotted name."""
    found = {}
    for package in (LIBRARY, ASSETS):
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.AST):
    """Each import statement with (in a function?, under TYPE_CHECKING?)."""
    def visit(node, in_function, type_checking):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, in_function, type_checking
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, True, type_checking)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), in_function, True)
                for stmt in child.orelse:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), in_function, type_checking)
            else:
                yield from visit(child, in_function, type_checking)
    yield from visit(tree, False, False)


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The modules each import statement of ``module`` runs: the named module, or for
    ``from package import name`` the submodule ``package.name`` when there is one, and the
    packages above it that ``module`` does not already sit in (their ``__init__`` runs too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node, in_function, type_checking in _statements(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                     for alias in node.names]
        for name in dict.fromkeys(names):
            parts = name.split(".")
            if parts[0] not in (LIBRARY, ASSETS):
                found.append(Import(module, parts[0], node.lineno, in_function, type_checking))
                continue
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix in modules and not _under(module, prefix):  # its own packages already ran
                    found.append(Import(module, prefix, node.lineno, in_function, type_checking))
    return found


def all_imports(root: Path) -> list[Import]:
    modules = modules_of(root)
    return [imp for module, path in modules.items() for imp in imports_of(module, path, modules)]


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def dagster_outside_orchestration(imports: list[Import]) -> list[Import]:
    return [i for i in imports if i.target == "dagster"
            and not any(_under(i.importer, allowed) for allowed in DAGSTER_ALLOWED)]


def library_importing_assets(imports: list[Import]) -> list[Import]:
    return [i for i in imports if _under(i.importer, LIBRARY) and _under(i.target, ASSETS)
            and not _under(i.importer, f"{LIBRARY}.orchestration")]


def layer_of(module: str) -> str | None:
    """The flow folder of a library module (``shared`` for the shared modules), else None."""
    parts = module.split(".")
    if parts[0] != LIBRARY or len(parts) < 2:
        return None
    if len(parts) == 2 and parts[1] in SHARED_MODULES:
        return "shared"
    return parts[1] if parts[1] in FLOWS else None


def upward_imports(imports: list[Import]) -> list[Import]:
    """Imports from a flow folder into a later one, and library modules outside every layer."""
    bad = []
    for imp in imports:
        if not (_under(imp.importer, LIBRARY) and _under(imp.target, LIBRARY)) or imp.type_checking:
            continue
        source, target = layer_of(imp.importer), layer_of(imp.target)
        if imp.target == LIBRARY:
            continue  # the package docstring and version
        if source is None or target is None or FLOWS.index(target) > FLOWS.index(source):
            bad.append(imp)
    return bad


def unplaced_modules(modules: dict[str, Path]) -> list[str]:
    """Library modules that belong to no layer: a new flat module must pick its folder."""
    return [m for m in modules if _under(m, LIBRARY) and m != LIBRARY and layer_of(m) is None]


def library_graph(imports: list[Import], *, in_functions: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.type_checking or (imp.in_function and not in_functions):
            continue
        if _under(imp.importer, LIBRARY) and _under(imp.target, LIBRARY):
            graph.setdefault(imp.importer, set()).add(imp.target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                connect(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(components)


def cycle_edges(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    members = set(component)
    return [f"{a} -> {b}" for a in component for b in sorted(graph.get(a, ())) if b in members]


def describe(imports: list[Import]) -> str:
    return "\n".join(imp.where() for imp in imports)


# --- the rules on this repository ------------------------------------------------------------


def test_only_orchestration_and_assets_import_dagster():
    bad = dagster_outside_orchestration(all_imports(REPO))
    assert not bad, describe(bad)


def test_the_library_imports_assets_only_from_orchestration():
    bad = library_importing_assets(all_imports(REPO))
    assert not bad, describe(bad)


def test_flow_folders_import_only_downward():
    assert not unplaced_modules(modules_of(REPO))
    bad = upward_imports(all_imports(REPO))
    assert not bad, describe(bad)


def test_the_library_has_no_import_cycles():
    graph = library_graph(all_imports(REPO), in_functions=False)
    cycles = import_cycles(graph)
    assert not cycles, "\n".join(", ".join(cycle_edges(graph, c)) for c in cycles)


def test_the_layer_rule_is_written_where_a_newcomer_looks():
    doc = ast.get_docstring(ast.parse((REPO / LIBRARY / "__init__.py").read_text()))
    assert " <- ".join(FLOWS) in doc
    assert f"pipelines/{{{','.join(SHARED_MODULES)}}}.py" in doc


# --- the checker catches planted violations -----------------------------------------------------


def plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in (LIBRARY, ASSETS):
        (root / package).mkdir(exist_ok=True)
        for folder in [root / package, *(p for p in (root / package).rglob("*") if p.is_dir())]:
            (folder / "__init__.py").touch()
    return root


def test_the_checker_catches_a_planted_violation_of_each_rule(tmp_path):
    root = plant(tmp_path, {
        "pipelines/store/lake.py": "from pipelines.ingest import stage\n",                   # upward
        "pipelines/ingest/stage.py": "def run():\n    import dagster\n",                      # dagster
        "pipelines/clean/stage.py": "from assets import clean\n",                             # assets
        "pipelines/dataset/split.py": "from . import shuffle\n",                              # cycle ...
        "pipelines/dataset/shuffle.py": "from pipelines.dataset.split import x\n",            # ... closed
        "pipelines/evaluation/metrics.py": "def f():\n    from pipelines.profiles import report\n",
        "pipelines/profiles/report.py": "from pipelines.evaluation import metrics\n",
        "pipelines/settings.py": "from pipelines.clean import stage\n",                      # shared up
        "pipelines/helpers.py": "",                                                            # unplaced
        "pipelines/orchestration/definitions.py": "import dagster\nfrom assets import clean\n",
        "assets/clean.py": "import dagster\nfrom pipelines.clean import stage\n",
    })
    imports = all_imports(root)
    modules = modules_of(root)
    assert {i.importer for i in dagster_outside_orchestration(imports)} == {"pipelines.ingest.stage"}
    assert {i.importer for i in library_importing_assets(imports)} == {"pipelines.clean.stage"}
    assert sorted((i.importer, i.target) for i in upward_imports(imports)) == [
        ("pipelines.evaluation.metrics", "pipelines.profiles"),
        ("pipelines.evaluation.metrics", "pipelines.profiles.report"),
        ("pipelines.settings", "pipelines.clean"),
        ("pipelines.settings", "pipelines.clean.stage"),
        ("pipelines.store.lake", "pipelines.ingest"),
        ("pipelines.store.lake", "pipelines.ingest.stage"),
    ]
    assert unplaced_modules(modules) == ["pipelines.helpers"]
    top_level = import_cycles(library_graph(imports, in_functions=False))
    assert top_level == [["pipelines.dataset.shuffle", "pipelines.dataset.split"]]
    everywhere = import_cycles(library_graph(imports, in_functions=True))
    assert ["pipelines.evaluation.metrics", "pipelines.profiles.report"] in everywhere


def test_the_checker_reads_relative_imports_type_checking_and_package_inits(tmp_path):
    root = plant(tmp_path, {
        "pipelines/clean/dedup/phash.py": "from ..filtering import keep\nfrom ...store import lake\n",
        "pipelines/clean/filtering.py": "from typing import TYPE_CHECKING\n"
                                        "if TYPE_CHECKING:\n    from pipelines.profiles import report\n",
        "pipelines/store/lake.py": "",
        "pipelines/profiles/report.py": "",
        "pipelines/dataset/stage.py": "import pipelines.clean.dedup.phash\n",
    })
    imports = {(i.importer, i.target, i.type_checking) for i in all_imports(root)}
    assert ("pipelines.clean.dedup.phash", "pipelines.clean.filtering", False) in imports
    assert ("pipelines.clean.dedup.phash", "pipelines.store.lake", False) in imports
    assert ("pipelines.clean.filtering", "pipelines.profiles.report", True) in imports
    # importing a submodule runs the packages above it, except those the importer sits in
    assert {("pipelines.dataset.stage", t, False) for t in
            ("pipelines.clean", "pipelines.clean.dedup", "pipelines.clean.dedup.phash")} <= imports
    assert ("pipelines.clean.dedup.phash", "pipelines.clean", False) not in imports
    assert not upward_imports(all_imports(root))  # TYPE_CHECKING never runs


def report(root: Path) -> str:
    """Figures for a checkout: cycles (top level, and counting function-level imports), upward imports."""
    imports = all_imports(root)
    modules = modules_of(root)
    lines = []
    for in_functions in (False, True):
        graph = library_graph(imports, in_functions=in_functions)
        cycles = import_cycles(graph)
        label = "with function-level imports" if in_functions else "top-level imports"
        lines.append(f"cycles ({label}): {len(cycles)} components, "
                     f"{sum(len(cycle_edges(graph, c)) for c in cycles)} edges inside them")
        lines += [f"  {' '.join(cycle_edges(graph, c))}" for c in cycles]
    upward = upward_imports(imports)
    lines.append(f"upward or unplaced imports: {len(upward)}")
    lines += [f"  {i.where()}" for i in upward]
    lines.append(f"unplaced modules: {len(unplaced_modules(modules))}")
    lines.append(f"dagster outside orchestration/assets: {len(dagster_outside_orchestration(imports))}")
    lines.append(f"library importing assets: {len(library_importing_assets(imports))}")
    in_function = [i for i in imports if i.in_function and _under(i.target, LIBRARY)]
    lines.append(f"in-function imports of {LIBRARY}.* (statements): "
                 f"{len({(i.importer, i.line) for i in in_function})}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO))
