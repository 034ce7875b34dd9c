"""The source kinds: the one place a kind of ``--source`` is declared.

A kind is declared once, next to its reader, with ``@register_source``: how its spec is
written (``usage``), whether it takes ``?mapping`` options, how its location is checked, which
files change detection watches, and how its records are read. Every module of
``pipelines/ingest/importers/`` is imported when the kinds are first needed, so adding a
file source is one module there::

    @register_source("yaml", usage="yaml:PATH", query=True, watch=watch_data_file)
    def iter_yaml_records(spec: SourceSpec, images: ImageStore) -> Iterator[Record]:
        ...

The web kinds (``demo`` and ``http://``) are crawled, then parsed by ``pipelines.ingest.stage``;
they are declared here.

``SourceSpec`` (a parsed ``--source``) is defined here too, beside the kinds it names;
``pipelines.ingest.spec`` parses the text into one. The dependency is one way: ``spec``
imports this module, never the reverse.
"""

from __future__ import annotations

import itertools
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

if TYPE_CHECKING:
    from pipelines.store.images import ImageStore
    from pipelines.store.records import Record

from pipelines.plugins import import_package_modules
from pipelines.store.home import stable_file_stem

MAX_WATCHED_FILES = 200_000
IMPORTERS_PACKAGE = "pipelines.ingest.importers"

Reader = Callable[["SourceSpec", "ImageStore"], Iterator["Record"]]
Watch = Callable[["SourceSpec", Path], "list[Path] | None"]


@dataclass(frozen=True)
class SourceSpec:
    """A ``--source`` as parsed by ``pipelines.ingest.spec.parse_source_spec``."""

    text: str  # exactly as the user wrote it; recorded as each record's ``source``
    kind: str
    location: str  # base URL for http, a path for file importers, "" for demo
    options: dict[str, str] = field(default_factory=dict)  # the mapping (jsonl, json, python)

    @property
    def slug(self) -> str:
        """A file-system-safe, stable name for this source's folders and partitions."""
        return stable_file_stem(self.text)

    @property
    def is_web(self) -> bool:
        kind = source_kind(self.kind)
        return kind is not None and kind.web


class SourceLocationError(ValueError):
    """A location a kind cannot use; the message completes ``source 'TEXT': ...``."""


def existing_path(location: str) -> str:
    """The default location check of a file kind: the path must exist; it is made absolute."""
    path = Path(location).expanduser()
    if not path.exists():
        raise SourceLocationError(f"path {location} does not exist")
    return str(path.resolve())


def unwatched(spec: "SourceSpec", exclude: Path) -> None:
    """Files unknown (a function's reads, a too-large folder): the source is read every build."""
    return None


@dataclass(frozen=True)
class SourceKind:
    name: str
    usage: str  # as the user writes it, for messages: ``jsonl:PATH``
    read: Reader | None  # None for the web kinds (crawled, then parsed by the ingest stage)
    watch: Watch = unwatched  # (spec, data home to leave out) -> files, or None
    location: Callable[[str], str] = existing_path
    query: bool = False  # takes ``?key=value`` options after the location
    web: bool = False
    order: tuple[str, int] = ("", 0)  # (module, declaration): listing order whatever the import order
    # its records are distinct questions by their maker's judgment (a released benchmark,
    # deduplicated already): dedup never merges two records of one such source
    deduplicated: bool = False


_KINDS: dict[str, SourceKind] = {}
_declared = itertools.count()
_loaded = False


def register_source(name: str, *, usage: str, watch: Watch = unwatched,
                    location: Callable[[str], str] = existing_path, query: bool = False, deduplicated: bool = False):
    """Declare the file source kind ``name`` read by the decorated function. ``deduplicated``: a
    source of this kind is a released benchmark that its maker deduplicated, whose records are
    distinct questions: dedup keeps any two records of one such source apart (it still merges
    a record with a copy from another source)."""

    def decorate(read: Reader) -> Reader:
        _add(SourceKind(name, usage, read, watch, location, query, order=(read.__module__, next(_declared)),
                        deduplicated=deduplicated))
        return read

    return decorate


def _add(kind: SourceKind) -> None:
    existing = _KINDS.get(kind.name)
    if existing is not None and existing.read is not None and kind.read is not None and (
        (existing.read.__module__, existing.read.__qualname__) != (kind.read.__module__, kind.read.__qualname__)
    ):
        raise ValueError(f"source kind {kind.name!r} is registered twice")
    _KINDS[kind.name] = kind


_add(SourceKind("demo", "demo", None, web=True, order=("", next(_declared))))
_add(SourceKind("http", "http://HOST:PORT/", None, web=True, order=("", next(_declared))))


def source_kinds() -> dict[str, SourceKind]:
    """Every registered kind by name (the importer modules are imported on the first call)."""
    global _loaded
    if not _loaded:
        import_package_modules(IMPORTERS_PACKAGE)
        _loaded = True
    return dict(sorted(_KINDS.items(), key=lambda item: item[1].order))


def source_kind(name: str) -> SourceKind | None:
    return source_kinds().get(name)


def deduplicated_sources(texts: Iterable[str]) -> list[str]:
    """The source specs among ``texts`` (records' ``source``) whose kind is ``deduplicated``."""
    found = set()
    for text in texts:
        name, sep, _ = str(text).partition(":")
        kind = source_kind(name) if sep else None
        if kind is not None and kind.deduplicated and not kind.web:
            found.add(str(text))
    return sorted(found)


def expected_sources() -> str:
    usages = [kind.usage for kind in source_kinds().values()]
    return ", ".join(usages[:-1]) + " or " + usages[-1] if len(usages) > 1 else "".join(usages)


def _is_regular_file(path: Path) -> bool:
    """A regular file (through links): FIFOs, devices and dangling links are never read."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def walk_files(folder: Path, exclude: Path) -> list[Path] | None:
    """The regular, non-hidden files under ``folder`` (``exclude`` and its content left out),
    sorted; None when there are more than ``MAX_WATCHED_FILES``."""
    found: list[Path] = []
    for root, dirs, files in os.walk(folder):
        root_path = Path(root)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and (root_path / d).resolve() != exclude)
        for name in sorted(files):
            if not name.startswith(".") and _is_regular_file(root_path / name):
                found.append(root_path / name)
        if len(found) > MAX_WATCHED_FILES:
            return None
    return found
