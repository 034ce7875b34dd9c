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

A function that cannot be imported, or that raises, fails the source with one line
(``ImportSourceError``); a record that cannot be used is quarantined like any other. What the
function reads is unknown to stemforge, so a ``python:`` source is imported on every build.
"""

from __future__ import annotations

import hashlib
import importlib
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
)


def split_target(location: str) -> tuple[str, str]:
    """``MODULE:FUNCTION`` -> (MODULE, FUNCTION)."""
    module, sep, function = location.rpartition(":")
    if not sep or not module or not function.isidentifier():
        raise ImportSourceError(f"python: {location!r} is not MODULE:FUNCTION")
    return module, function


def load_function(location: str) -> Callable[..., Any]:
    module_name, function_name = split_target(location)
    try:
        if module_name.endswith(".py"):
            module = _load_file(Path(module_name))
        else:
            module = _import(module_name)
    except ImportSourceError:
        raise
    except Exception as exc:  # any error raised while importing user code
        raise ImportSourceError(f"python: cannot import {module_name}: {type(exc).__name__}: {one_line(exc, 200)}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ImportSourceError(f"python: {module_name} has no function {function_name}")
    return function


def _import(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        cwd = os.getcwd()
        if cwd in sys.path:
            raise
        sys.path.insert(0, cwd)
        try:
            return importlib.import_module(name)
        finally:
            sys.path.remove(cwd)


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
    return location


# what the function reads is unknown: the default watch (none) imports it every build
@register_source("python", usage="python:MODULE:FUNCTION", query=True, location=python_target)
def iter_python_records(spec: SourceSpec, images: ImageStore) -> Iterator[Record]:
    function = load_function(spec.location)  # raises before iteration starts
    mapping = RowMapping(spec.options, "python", passthrough=True)
    root = image_folder(mapping, Path.cwd())
    _, function_name = split_target(spec.location)
    return _iter_rows(spec.text, function_name, function, function_arguments(spec.options), mapping, root, images)


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
