"""Importer for datasets saved by Hugging Face ``datasets``: ``hf:PATH[?mapping]``.

PATH is one of what ``datasets`` writes, read with pyarrow (``datasets`` is not needed):

- Parquet: one ``.parquet`` file, or a folder whose ``.parquet`` files (in any subfolder but
  hidden ones) are read in path order: ``push_to_hub``'s ``data/train-00000-of-00001.parquet``,
  the Hub's converted ``default/train/0000.parquet``, ``to_parquet``'s ``test.parquet``;
- ``save_to_disk``: a folder with ``state.json`` (one dataset; its ``.arrow`` files are those
  ``state.json`` lists) or with ``dataset_dict.json`` (a DatasetDict: one such folder per split,
  in the order ``dataset_dict.json`` lists them).

The split of a Parquet file is the name before ``-NNNNN-of-NNNNN`` (``testmini-00000-of-00001``),
else the first word of the file name or the nearest folder name when it names a split
(``train``, ``validation``, ``dev``, ``test``), else the folder of a file named by digits only;
a ``save_to_disk`` split is its DatasetDict key (or ``state.json``'s ``_split``). A row takes that
split (``train``/``valid``/``test`` kept by the split stage; another name is kept in ``extra``)
unless a ``split`` column or mapping says otherwise. ``source_key`` is ``<file>#<row>`` for Parquet
(the file's path under PATH, row counted in the file) and ``<split>#<row>`` for ``save_to_disk``
(row counted over the split's files; the folder's name when it has no split).

The mapping and how a row becomes a question are those of ``jsonl:`` (``rows.py``): same fields,
default names and settings; ``_file`` is the data file's name without suffix and ``_key`` the
split. Besides:

- ``Image`` columns (a struct of ``bytes`` and ``path``) hold the image's bytes, or else a path
  read relative to the dataset folder (PATH, or a file's folder; ``image_root=DIR`` relative to
  it) that may not leave it. Bytes that are no acceptable image quarantine the row
  (``question image rejected: ...``). A ``Sequence(Image)`` column under ``choices`` (or
  ``choice_images``) holds option pictures.
- Options may be a list or a text holding a Python list literal (MMMU's ``"['1', '2']"``).
- When ``image`` is not mapped and there is no ``image`` column, the numbered columns
  ``image_1``, ``image_2``, ... (MMMU) are the question's pictures, numbered as in the
  placeholders ``<image 1>``. Options that are only a placeholder (``['<image 2>', '<image 3>']``)
  are option pictures; the pictures left are the question's figure. Placeholders in the texts are
  removed (the figure is shown with the question). In a dataset with numbered picture columns
  (whether or not ``image`` is mapped) a placeholder names a column, so one naming a picture the
  row lacks, or an option's picture from the question text, quarantines the row; without them
  the numbers are not checked (one picture often holds the panels ``<image1>`` and ``<image2>``). A question left with several
  figures is quarantined as ``several images`` unless ``image_options`` says how they are options.
- ``ClassLabel`` columns are read as their label names.
- MMMU's columns (``id``, ``question``, ``options``, ``answer``, ``image_1``, ``subfield``, no
  ``subject``) are recognized: unless mapped, ``subject=id`` with ``subjects=MMMU_SUBJECTS`` (its
  STEM subjects by the word in the id, ``validation_Physics_3``; the others quarantined as outside
  STEM) and ``skill=subfield``. ScienceQA's columns (``image``, ``question``, ``choices``,
  ``answer`` index, ``subject``, ``grade``, ``skill``) are read by the default names.

An unreadable file is one quarantine entry keyed by its path under PATH (an Arrow file: its
name); a batch that cannot be read quarantines the rows it held (Parquet, counted from the
file's metadata) or, in an Arrow file, the rest of the file under the key of its first lost row.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.store.images import ImageStore
from pipelines.store.records import QuarantineEntry, Record
from pipelines.ingest.sources import register_source, walk_files
from pipelines.ingest.spec import SourceSpec
from pipelines.ingest.importers.common import (
    STAGE,
    ImageStoreFailure,
    ImportSourceError,
    RecordProblem,
    list_literal,
    normalize_split,
    one_line,
)
from pipelines.ingest.importers.text_options import ONLY_PLACEHOLDER, PLACEHOLDER
from pipelines.ingest.importers.rows import (
    RowMapping,
    image_folder,
    quarantine,
    row_record,
    unused_field_entries,
    with_index_base,
)

BATCH_ROWS = 64
MMMU_COLUMNS = frozenset({"id", "question", "options", "answer", "image_1", "subfield"})
MMMU_SUBJECTS = (
    "Math:math,Physics:science,Chemistry:science,Biology:science,Geography:science,Computer:technology,"
    "Electronics:engineering,Energy:engineering,Materials:engineering,Mechanical:engineering,"
    "Architecture:engineering,Engineering:engineering"
)
_NUMBERED_IMAGE = re.compile(r"^image_(\d+)$")
_SHARD_STEM = re.compile(r"^(.+?)-\d{5}-of-\d{5}(?:-.*)?$")
_FIRST_WORD = re.compile(r"^([A-Za-z]+)")
_PLACEHOLDER = re.compile(PLACEHOLDER, re.IGNORECASE)
# Names of the row fields the importer fills after resolving the mapping itself.
_OWN = {field: f"\x00hf:{field}" for field in ("problem", "choices", "image", "choice_images", "split")}


@dataclass(frozen=True)
class DataFile:
    path: Path
    key: str  # what a row's source_key starts with: a file's relative path, or a split
    split: str | None
    arrow: bool  # a save_to_disk Arrow stream; else Parquet


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ImportSourceError(f"hf: cannot read {path}: {one_line(exc, 160)}") from None


def _saved_dataset(folder: Path, split: str | None, key: str) -> list[DataFile]:
    state = _read_json(folder / "state.json")
    names = [entry.get("filename") for entry in state.get("_data_files", []) if isinstance(entry, dict)]
    if not names or not all(isinstance(n, str) and "/" not in n and "\\" not in n for n in names):
        raise ImportSourceError(f"hf: {folder / 'state.json'} lists no data files")
    split = split or state.get("_split") or None
    return [DataFile(folder / name, split or key, split, arrow=True) for name in names]


def _listed_split(folder: Path) -> str | None:
    """The split a ``save_to_disk`` folder holds when its parent's ``dataset_dict.json`` lists it."""
    listing = folder.parent / "dataset_dict.json"
    if not listing.is_file():
        return None
    splits = _read_json(listing).get("splits")
    return folder.name if isinstance(splits, list) and folder.name in splits else None


def parquet_split(relative: Path) -> str | None:
    """The split a Parquet file of a dataset holds, from its path (see the module text)."""
    stem = relative.name[: -len(".parquet")] if relative.name.endswith(".parquet") else relative.stem
    shard = _SHARD_STEM.match(stem)
    if shard:
        return shard.group(1)
    word = _FIRST_WORD.match(stem)
    if word and normalize_split(word.group(1)):
        return word.group(1)
    folders = list(relative.parent.parts)
    for folder in reversed(folders):
        if normalize_split(folder):
            return folder
    if stem.isdigit() and folders:
        return folders[-1]
    return None


def find_data_files(location: str | Path) -> list[DataFile]:
    path = Path(location)
    if path.is_file():
        if path.suffix == ".arrow":
            return [DataFile(path, path.name, None, arrow=True)]
        return [DataFile(path, path.name, parquet_split(Path(path.name)), arrow=False)]
    if not path.is_dir():
        raise ImportSourceError(f"hf: {path} is neither a folder nor a file")
    if (path / "dataset_dict.json").is_file():
        splits = _read_json(path / "dataset_dict.json").get("splits")
        if not isinstance(splits, list) or not splits or not all(isinstance(s, str) and (path / s).is_dir() for s in splits):
            raise ImportSourceError(f"hf: {path / 'dataset_dict.json'} does not list split folders")
        return [f for split in splits for f in _saved_dataset(path / split, split, split)]
    if (path / "state.json").is_file():
        return _saved_dataset(path, _listed_split(path), path.name)
    files = sorted(
        (p for p in path.rglob("*.parquet") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)),
        key=lambda p: p.relative_to(path).as_posix(),
    )
    if not files:
        raise ImportSourceError(f"hf: no .parquet files, state.json or dataset_dict.json in {path}")
    return [DataFile(p, p.relative_to(path).as_posix(), parquet_split(p.relative_to(path)), arrow=False) for p in files]


def dataset_folder(location: str | Path) -> Path:
    path = Path(location)
    return path if path.is_dir() else path.parent


def watch_hf(spec: SourceSpec, exclude: Path) -> list[Path] | None:
    """The dataset's files (a file source: that file), and those under ``image_root``."""
    location, folder = Path(spec.location), dataset_folder(spec.location)
    walks = [[location] if location.is_file() else walk_files(folder, exclude)]
    if spec.options.get("image_root"):
        walks.append(walk_files((folder / spec.options["image_root"]).resolve(), exclude))
    if any(found is None for found in walks):
        return None
    # what is read is what is watched: split folders that are symlinks (a walk does not follow
    # them) or listed as ../x in dataset_dict.json (outside the walk), and their state.json
    try:
        read = find_data_files(location)
    except ImportSourceError:
        read = []  # the import fails with its reason
    for data in read:
        state = data.path.parent / "state.json"
        walks.append([data.path, state] if data.arrow and state.is_file() else [data.path])
    return sorted({path for found in walks for path in found})


@register_source("hf", usage="hf:PATH", query=True, watch=watch_hf)
def iter_hf_records(spec: SourceSpec, images: ImageStore) -> Iterator[Record]:
    files = find_data_files(spec.location)  # raises before iteration starts
    columns = _columns(files)
    options = dict(spec.options)
    if MMMU_COLUMNS <= columns and "subject" not in columns:
        options.setdefault("subject", "id")
        if options["subject"] == "id":
            options.setdefault("subjects", MMMU_SUBJECTS)
        if "skill" not in columns and "topic" not in columns:
            options.setdefault("skill", "subfield")
    mapping = RowMapping(options, "hf")
    numbered: list[tuple[int, str]] = []
    if "image" not in options and not {"image", "image_path"} & columns:
        numbered = sorted((int(m.group(1)), name) for name in columns if (m := _NUMBERED_IMAGE.match(name)))
    # placeholder numbers name pictures only where the pictures are numbered columns
    reader = _RowReader(mapping, options, numbered, check_numbers=any(_NUMBERED_IMAGE.match(c) for c in columns))
    root = image_folder(mapping, dataset_folder(spec.location))
    return with_index_base(lambda _: _iter_files(spec.text, Path(spec.location).name, files, reader, root, images),
                           reader.inner)


def _columns(files: list[DataFile]) -> set[str]:
    found: set[str] = set()
    for data in files:
        try:
            found.update(_schema(data).names)
        except Exception:  # an unreadable file is quarantined when it is read
            continue
    return found


def _schema(data: DataFile) -> pa.Schema:
    if data.arrow:
        with pa.memory_map(str(data.path)) as source:
            return _open_arrow(source).schema
    return pq.read_schema(data.path)


def _open_arrow(source):
    try:
        return pa.ipc.open_stream(source)
    except pa.ArrowInvalid:
        source.seek(0)
        return pa.ipc.open_file(source)


def _class_labels(schema: pa.Schema) -> dict[str, list[str]]:
    """Label names of the ``ClassLabel`` columns, from the features ``datasets`` records in the schema."""
    raw = (schema.metadata or {}).get(b"huggingface")
    try:
        features = json.loads(raw)["info"]["features"] if raw else {}
    except (ValueError, KeyError, TypeError):
        return {}
    if not isinstance(features, dict):
        return {}
    return {
        name: [str(label) for label in feature["names"]]
        for name, feature in features.items()
        if isinstance(feature, dict) and feature.get("_type") == "ClassLabel" and isinstance(feature.get("names"), list)
    }


def _iter_files(source: str, source_name: str, files: list[DataFile], reader: "_RowReader", root: Path, images: ImageStore) -> Iterator[Record]:
    next_row: dict[str, int] = {}
    for data in files:
        first = next_row.get(data.key, 0) if data.arrow else 0
        rows = yield from _iter_file(source, data, first, reader, root, images)
        next_row[data.key] = first + rows
    yield from unused_field_entries(source, source_name, reader.mapping)


def _iter_file(source: str, data: DataFile, first: int, reader: "_RowReader", root: Path, images: ImageStore):
    """Records of one data file; returns how many rows it held (as far as they could be read)."""
    name = data.path.name
    file_key = name if data.arrow else data.key
    if not data.path.is_file():
        yield QuarantineEntry(source, file_key, STAGE, "unreadable data file: not a regular file")
        return 0
    meta = {"_file": name.rsplit(".", 1)[0], "_key": data.split}
    try:
        if data.arrow:
            handle = pa.memory_map(str(data.path))
            stream = _open_arrow(handle)
            labels = _class_labels(stream.schema)
            groups = [(None, None)]
        else:
            handle = pq.ParquetFile(data.path)
            labels = _class_labels(handle.schema_arrow)
            groups = [(g, handle.metadata.row_group(g).num_rows) for g in range(handle.metadata.num_row_groups)]
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for broken files
        kind = "Arrow" if data.arrow else "Parquet"
        yield QuarantineEntry(source, file_key, STAGE, f"unreadable {kind} file", one_line(exc, 200))
        return 0
    row = first
    with handle:
        for group, group_rows in groups:
            start = row
            try:
                if data.arrow:
                    batches = _arrow_batches(stream)
                else:
                    batches = handle.iter_batches(batch_size=BATCH_ROWS, row_groups=[group])
                for batch in batches:
                    for values in batch.to_pylist():
                        for column, names in labels.items():
                            values[column] = _label(values.get(column), names)
                        yield reader.record(source, f"{data.key}#{row}", values, meta, root, images)
                        row += 1
            except ImageStoreFailure:
                raise
            except Exception as exc:  # corrupt pages: the rest of this group (or Arrow file) is lost
                reason = "rows of the data file are unreadable"
                if group_rows is None:
                    yield QuarantineEntry(source, f"{data.key}#{row}", STAGE, reason, f"from row {row}: {one_line(exc, 200)}")
                    return row - first
                for lost in range(row, start + group_rows):
                    yield QuarantineEntry(source, f"{data.key}#{lost}", STAGE, reason, one_line(exc, 200))
                row = start + group_rows
    return row - first


def _arrow_batches(reader) -> Iterator[pa.RecordBatch]:
    if isinstance(reader, pa.ipc.RecordBatchFileReader):
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)
    else:
        yield from reader


def _label(value: Any, names: list[str]) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    return value


def _picture(value: Any) -> Any:
    """An ``Image`` value as bytes or a path; None when it holds neither."""
    if isinstance(value, dict) and set(value) == {"bytes", "path"}:
        return value["bytes"] if value["bytes"] is not None else value["path"]
    return value


def _is_picture(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"bytes", "path"}


class _RowReader:
    """Resolves the pictures, options and placeholders of a row, then hands it to ``rows.py``
    with those fields under names of its own."""

    def __init__(self, mapping: RowMapping, options: dict[str, str], numbered: list[tuple[int, str]],
                 check_numbers: bool = True):
        self.mapping = mapping
        self.numbered = numbered
        self.check_numbers = check_numbers
        own = {**{k: v for k, v in options.items() if k not in _OWN}, **_OWN}
        if mapping.options_in_text:
            own.pop("choices")
        self.inner = RowMapping(own, "hf")

    def record(self, source: str, key: str, row: dict[str, Any], meta: dict, root: Path, images: ImageStore) -> Record:
        self.mapping.observe(row, meta)
        try:
            own = self._own_fields(row, meta)
        except RecordProblem as exc:
            return quarantine(source, key, exc)
        except Exception as exc:  # a row must never stop the import
            return QuarantineEntry(source, key, STAGE, f"unexpected {type(exc).__name__}", one_line(exc, 160))
        return row_record(source, key, {**row, **own}, self.inner, meta, root, images)

    def _own_fields(self, row: dict[str, Any], meta: dict) -> dict[str, Any]:
        get = self.mapping.get
        if self.numbered:
            pictures = {n: _picture(row.get(name)) for n, name in self.numbered}
            pictures = {n: p for n, p in pictures.items() if p is not None and p != ""}
        else:
            value = get(row, "image", meta)
            listed = value if isinstance(value, list) else [value]
            pictures = {n: _picture(p) for n, p in enumerate(listed, 1) if p is not None and p != ""}
        choices = None if self.mapping.options_in_text else _option_list(get(row, "choices", meta))
        choice_images = get(row, "choice_images", meta)
        if isinstance(choices, list) and choices and all(_is_picture(c) for c in choices):
            choices, choice_images = None, choices
        figure_numbers = sorted(pictures)
        if isinstance(choices, list) and choices and all(isinstance(c, str) and ONLY_PLACEHOLDER.match(c) for c in choices):
            named = [int(ONLY_PLACEHOLDER.match(c).group(1)) for c in choices]
            missing = [n for n in named if n not in pictures]
            if missing:
                raise RecordProblem("placeholder names an image the question does not have", f"option <image {missing[0]}>")
            choices, choice_images = None, [pictures[n] for n in named]
            figure_numbers = [n for n in figure_numbers if n not in named]
        renumber = {n: i for i, n in enumerate(figure_numbers, 1)}
        option_pictures = set(pictures) - set(figure_numbers)
        problem = get(row, "problem", meta)
        if isinstance(problem, str):
            problem = _renumber(problem, renumber, option_pictures, self.check_numbers)
        if isinstance(choices, list):
            choices = [_renumber(c, renumber, option_pictures, self.check_numbers) if isinstance(c, str) else c
                       for c in choices]
        if isinstance(choice_images, list):
            choice_images = [_picture(p) for p in choice_images]
        split = get(row, "split", meta)
        return {
            _OWN["problem"]: problem,
            _OWN["choices"]: choices,
            _OWN["image"]: [pictures[n] for n in figure_numbers],
            _OWN["choice_images"]: choice_images,
            _OWN["split"]: split if split is not None else meta["_key"],
        }


def _option_list(value: Any) -> Any:
    """Options as a list: MMMU writes them as a text holding a Python list literal."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        parsed = list_literal(value)
        if parsed is None:
            raise RecordProblem("options text is not a list literal", one_line(value, 80))
        return parsed
    return value


def _renumber(text: str, renumber: dict[int, int], option_pictures: set[int], check: bool = True) -> str:
    def replace(match: re.Match) -> str:
        number = int(match.group(1))
        if number in option_pictures:
            raise RecordProblem("text names an option's picture", match.group(0))
        if number not in renumber:
            if not check:
                return match.group(0)  # removed with the others by rows.py
            raise RecordProblem("placeholder names an image the question does not have", match.group(0))
        return f"<image {renumber[number]}>"

    return _PLACEHOLDER.sub(replace, text)
