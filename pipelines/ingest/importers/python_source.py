"""Importer that calls a Python function, for any other layout: ``python:MODULE:FUNCTION[?query]``.

MODULE is a dotted module name importable from the Python path or the current folder
(``mypkg.readers``), or the path of a ``.py`` file (``tools/read_corpus.py``). FUNCTION is
called once per import with the query's parameters that are not mapping fields or settings
(``rows.py``) as keyword arguments, all strings: ``python:readers:gaokao?folder=data&limit=50``
calls ``gaokao(folder="data", limit="50")``. It returns an iterable of records: dicts in the
input shape of the mapping, read exactly as ``jsonl:`` reads its lines (default field names
``question``, ``options``, ``answer``, ``image``, ``subject``, ``skill``, ...; the query's
fields and settings apply). Image values are paths, resolved against ``image_root``
(relative to the current folder, by default the current folder) and never outside it, or
image bytes. ``source_key`` is ``<FUNCTION>#<0-based position>``.

A source spec is data (anyone who can launch a run in the UI writes one), so the code it names
is loaded only from places the operator allows:

- a ``.py`` file or a module inside a plugins folder: ``plugins/`` of the current folder (the
  project) or ``plugins/`` of the data home;
- a module, a folder or a ``.py`` file named in ``STEMFORGE_PYTHON_SOURCES`` (comma-separated),
  an environment variable of the process that builds, which only the operator sets.

Never the standard library (``python:os:system`` is refused even when named in the setting), and
never a module that only the spec names (a run config cannot reach the Python path).

A function that cannot be imported, or that raises, fails the source with one line
(``ImportSourceError``); a record that cannot be used is quarantined like any other. What the
function reads is unknown to stemforge, so a ``python:`` source is imported on every build.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from pipelines.store.images import ImageStore
from pipelines.store.records import Record
from pipelines.ingest.sources import SourceLocationError, register_source
from pipelines.ingest.spec import SourceSpec
from pipelines.ingest.importers.common import ImportSourceError, one_line
from pipelines.ingest.importers.rows import (
    FIELDS,
    SETTINGS,
    RowMapping,
    image_folder,
    row_record,
    unused_field_entries,
    with_index_base,
)


def split_target(location: str) -> tuple[str, str]:
    """``MODULE:FUNCTION`` -> (MODULE, FUNCTION)."""
    module, sep, function = location.rpartition(":")
    if not sep or not module or not function.isidentifier():
        raise ImportSourceError(f"python: {location!r} is not MODULE:FUNCTION")
    return module, function


ALLOWED_ENV = "STEMFORGE_PYTHON_SOURCES"
PLUGINS_FOLDER = "plugins"
_WHERE = (f"put it in {PLUGINS_FOLDER}/ of the project or of the data home, or name it in "
          f"{ALLOWED_ENV} (a setting of the operator, not of a run)")


def _standard_library(module_name: str) -> bool:
    top = module_name.split(".")[0]
    return top in sys.stdlib_module_names or top in sys.builtin_module_names


def allowed_places(home: Path | None = None) -> tuple[list[Path], set[str]]:
    """(folders and ``.py`` files, module names) the operator allows ``python:`` code from."""
    places = [Path.cwd() / PLUGINS_FOLDER]
    if home is not None:
        places.append(Path(home) / PLUGINS_FOLDER)
    modules: set[str] = set()
    for entry in os.environ.get(ALLOWED_ENV, "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        if all(part.isidentifier() for part in entry.split(".")):
            modules.add(entry)
        else:
            places.append(Path(entry).expanduser())
    return [p.resolve() for p in places], modules


def _inside(path: Path, places: list[Path]) -> bool:
    return any(path == place or path.is_relative_to(place) for place in places)


def load_function(location: str, home: Path | None = None) -> Callable[..., Any]:
    module_name, function_name = split_target(location)
    places, modules = allowed_places(home)
    try:
        if module_name.endswith(".py"):
            path = Path(module_name).expanduser().resolve()
            if not _inside(path, places):
                raise ImportSourceError(f"python: {path} is not in a place allowed for python: sources; {_WHERE}")
            module = _load_file(path)
        else:
            module = _import(module_name, places, modules)
    except ImportSourceError:
        raise
    except Exception as exc:  # any error raised while importing user code
        raise ImportSourceError(f"python: cannot import {module_name}: {type(exc).__name__}: {one_line(exc, 200)}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ImportSourceError(f"python: {module_name} has no function {function_name}")
    return function


def _import(name: str, places: list[Path], modules: set[str]):
    if _standard_library(name):
        raise ImportSourceError(f"python: {name} is the standard library, never a source")
    parts = name.split(".")
    if any(".".join(parts[:n]) in modules for n in range(1, len(parts) + 1)):
        return importlib.import_module(name)  # named by the operator
    top = parts[0]
    folders = [str(p) for p in places if p.is_dir()]
    found = importlib.machinery.PathFinder.find_spec(top, folders) if folders else None
    if found is None or found.origin is None:
        raise ImportSourceError(f"python: {name} is not in a place allowed for python: sources; {_WHERE}")
    origin = Path(found.origin).resolve()
    loaded = sys.modules.get(top)
    if loaded is not None and Path(getattr(loaded, "__file__", None) or "/").resolve() != origin:
        raise ImportSourceError(f"python: {top} is already another module ({getattr(loaded, '__file__', None)}); rename the plugin")
    folder = str(Path(found.origin).parent if found.submodule_search_locations is None
                 else Path(found.origin).parent.parent)
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(folder)


def _load_file(path: Path):
    path = path.resolve()
    if not path.is_file():
        raise ImportSourceError(f"python: {path} is not a file")
    name = f"stemforge_source_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def function_arguments(options: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in options.items() if k not in FIELDS and k not in SETTINGS}


def python_target(location: str) -> str:
    """``MODULE:FUNCTION`` checked, a ``.py`` path made absolute."""
    module, sep, function = location.rpartition(":")
    if not sep or not module or not function.isidentifier():
        raise SourceLocationError("expected python:MODULE:FUNCTION")
    if module.endswith(".py"):
        path = Path(module).expanduser()
        if not path.is_file():
            raise SourceLocationError(f"file {module} does not exist")
        return f"{path.resolve()}:{function}"
    if not all(part.isidentifier() for part in module.split(".")):
        raise SourceLocationError(f"{module!r} is not a module name or a .py file")
    if _standard_library(module):
        raise SourceLocationError(f"{module} is the standard library, never a source")
    return location


# what the function reads is unknown: the default watch (none) imports it every build
@register_source("python", usage="python:MODULE:FUNCTION", query=True, location=python_target)
def iter_python_records(spec: SourceSpec, images: ImageStore) -> Iterator[Record]:
    function = load_function(spec.location, images.root.parent)  # raises before iteration starts
    mapping = RowMapping(spec.options, "python", passthrough=True)
    root = image_folder(mapping, Path.cwd())
    _, function_name = split_target(spec.location)
    return with_index_base(
        lambda m: _iter_rows(spec.text, function_name, function, function_arguments(spec.options), m, root, images),
        mapping)


def _iter_rows(source, name, function, arguments, mapping, root, images) -> Iterator[Record]:
    def failed(exc: BaseException) -> ImportSourceError:
        return ImportSourceError(f"python: {name}() failed: {type(exc).__name__}: {one_line(exc, 200)}")

    try:
        rows = iter(function(**arguments))
    except Exception as exc:
        raise failed(exc) from None
    position = 0
    while True:
        try:
            row = next(rows)
        except StopIteration:
            break
        except Exception as exc:
            raise failed(exc) from None
        yield row_record(source, f"{name}#{position}", row, mapping, {}, root, images)
        position += 1
    yield from unused_field_entries(source, name, mapping)
