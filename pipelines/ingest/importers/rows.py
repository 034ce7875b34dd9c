"""The field mapping shared by the row importers (``jsonl:``, ``json:``, ``python:``), and
the conversion of one input row (a dict) into a RawQuestion.

The mapping (``spec.options``) maps our field names to the input's field names: a value in
single quotes is a constant for every row (``subject='math'``); a dotted name reaches into
nested objects (``image=media.path``) when no field has that exact name, and ``[N]`` picks
item N (from 0) of a list (``skill=skill[0]`` reads ``"skill": ["inductive"]``,
``image=media.images[1].path``); a list too short has no such field. A ``*`` part reads every
item of an array or value of an object as a list (``choices=answerChoices.*.processedText``). A text field
(``problem``, ``subject``, ``grade``, ``skill``, ``split``, ``id``) whose value is a list of
texts (or numbers) reads them joined: the question text with a line break between items, the
others with ``, `` (``["inductive", "spatial"]`` is skill ``inductive-spatial``); an empty list
is no value. A constant for ``choices`` is a comma-separated list of option texts, the same for
every row (``choices='A,B,C,D'``: options drawn in the figure, whose letters every row has).
Two names are provided by the importer, not the row: ``_file`` (the data file's name without
its suffix) and ``_key`` (the key of the array a record came from, for a JSON object of arrays,
or the record's own key, for a JSON object of records keyed by id; such a record with no
``id`` field takes its key as its ``id`` too); they are null where they do not apply. An
unmapped field takes the first of its DEFAULT_NAMES found in the row, and is null when none
is; nothing else is guessed. A mapped field that no row of the
source has is reported once (quarantine reason ``mapped field in no record``), which makes the
build fail: a misspelt field name never silently empties a column.

Settings, beside the fields:

- ``answer_format`` (``auto`` | ``letter`` | ``index`` | ``index1`` | ``text``): how answers are
  written (see ``answers.py``; ``letter`` also reads ``D. because ...``); indices count from 0
  unless the source's answers prove they count from 1 (``with_index_base``), or ``index1`` says so;
- ``options_in_text=1``: the options are written in the question text (``A. ...``,
  ``(A) ...``, full-width ``Ａ．``); the text keeps the stem only (see ``text_options.py``);
  ``options_in_text=FIELD``: they are written, labelled, in the text of FIELD (We-Math's
  ``"option": "A. 300, 400;B. 400, 300;..."``), read the same way; the question text stays whole;
- ``max_options=N`` (2 to 5, default 5): a question with more options is quarantined
  (``more options than max_options=N``); the STEM release holds 2 to 5 options per question,
  and so does every export;
- ``image_root=DIR``: image paths resolve against DIR (relative to the data file's folder;
  for ``python:`` to the current folder) and may not leave it; by default the data file's
  folder (the current folder for ``python:``); ``image_prefix=FOLDER``: paths that start with
  FOLDER (an absolute folder of the machine the corpus was made on) lose it first;
- ``subjects=NAME:SUBJECT,...``: this source's subject names, matched whole or as a word of
  the value (``subject=_file&subjects=Biology:science`` reads ``2010-2023_Biology_MCQs``);
- ``image_options=labelled:N`` | ``ordered:N`` | ``none``: how a question with several
  pictures and no options of its own holds its options (see ``picture_options.py``);
- ``figure_options=named`` | ``A-D`` | ``none``: the options of a question with one picture and
  none of its own are drawn in the figure: their letters are those its text names ("Select
  from A–E", "Choose A, B, C or D"), or these letters for every such question (see
  ``figure_options.py``).

Options are a list of texts (numbers are turned into text), or an object keyed by labels
(``{"A": "...", "B": "..."}``, whose keys then name the options for letter answers), or columns
(``{"text": [...], "label": [...]}``, how ``datasets`` stores a sequence of records), or one
text of labelled options (read as ``options_in_text=FIELD`` reads it), or a
list of image paths under ``choice_images``. Texts written in HTML (the question, the options,
the answer) are read as a browser shows them (``html_dom.markup_text``), unless ``html=0`` keeps
every text as written (a corpus about HTML whose texts quote tags). Two options identical but for white space, or an
option holding another option's label (``; C. ...``, see ``text_options.py``), quarantine the
question (``identical options``, ``an option holds another option's label``). An image is a path (a list of one path is that
path; a path without a suffix such as ``Math/1`` finds ``Math/1.png`` or ``Math/1.jpg`` when
exactly one exists) or, from ``python:`` sources, bytes, or the picture itself written as base64
or a data URI. A question with several images and options with text of its own shows them as one
figure (one problem image in the STEM schema), joined in source order, unless its text names
them by placeholder (``<image 2>``); otherwise several images are quarantined as ``several
images``, unless ``image_options`` says how the pictures are the options; an answer naming
several options is quarantined too (``several answers``).
Placeholders ``<image1>`` / ``<image 1>`` are removed from the texts (the image is the
question's figure). Their numbers are not checked here: against one mapped picture field they
prove nothing (a competition's one picture often holds the panels ``<image1>`` and ``<image2>``
that its text names). Sources with numbered picture fields (``hf:``'s MMMU ``image_1`` ...
``image_7``) check them where the numbers name fields (``hf_dataset.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from pipelines.store.images import ImageStore
from pipelines.store.records import SUBJECTS, QuarantineEntry, RawQuestion, Record
from pipelines.ingest.importers.answers import ANSWER_FORMATS, IndexAnswers, parse_answer
from pipelines.ingest.importers.common import (
    PLACEHOLDER_HASH,
    STAGE,
    ImageStoreFailure,
    ImportSourceError,
    RecordProblem,
    finish_question,
    list_literal,
    normalize_grade,
    normalize_skill,
    normalize_split,
    normalize_subject,
    one_line,
)
from pipelines.ingest.html_dom import PictureInMarkup, markup_text
from pipelines.ingest.importers.paths import UnsafePath, image_in_text, read_image_file, resolve_image_file
from pipelines.ingest.importers.figure_options import parse_figure_options
from pipelines.ingest.importers.picture_options import join_pictures, parse_image_options
from pipelines.ingest.importers.text_options import (
    HELD_LABEL,
    ONLY_PLACEHOLDER,
    held_label,
    own_labels,
    read_options,
    strip_placeholders,
)

DEFAULT_NAMES: dict[str, tuple[str, ...]] = {
    "problem": ("question", "problem", "text", "stem"),
    "choices": ("options", "choices"),
    "answer": ("answer", "label", "answer_idx", "answerKey"),
    "image": ("image", "image_path"),
    "choice_images": ("choice_images", "option_images"),
    "subject": ("subject",),
    "grade": ("grade",),
    "skill": ("skill", "topic"),
    "split": ("split",),
    "id": ("id", "qid"),
}
FIELDS = tuple(DEFAULT_NAMES)
SETTINGS = ("answer_format", "options_in_text", "image_root", "subjects", "image_options", "max_options", "figure_options",
            "html", "image_prefix")
PSEUDO_FIELDS = ("_file", "_key")
MAPPED_FIELD_UNUSED = "mapped field in no record"
MAX_OPTIONS = 5  # the STEM release: 2 to 5 options per question
_CONSTANT = re.compile(r"^'(.*)'$", re.DOTALL)
_INDEXED = re.compile(r"^([^\[\]]*)((?:\[\d+\])+)$")  # name[0][1]
_FIELD_LIST = re.compile(r"^\[([^\[\]]+)\]$")  # choices=[A,B,C,D]: one option per field
TEXT_FIELDS = ("problem", "subject", "grade", "skill", "split", "id")
_MISSING = object()


class RowMapping:
    """How to read our fields from one input row; built (and checked) once per import.

    ``extra_settings`` are the importer's own settings (``records`` for ``json:``);
    ``passthrough=True`` leaves names that are neither fields nor settings to the caller
    (``python:`` passes them to its function) instead of refusing them.
    """

    def __init__(self, options: Mapping[str, str], kind: str, extra_settings: tuple[str, ...] = (), passthrough: bool = False):
        settings = SETTINGS + extra_settings
        unknown = sorted(k for k in options if k not in FIELDS and k not in settings)
        if unknown and not passthrough:
            raise ImportSourceError(
                f"unknown field {unknown[0]!r} in {kind} mapping; known fields: {', '.join(FIELDS + settings)}"
            )
        self.answer_format = options.get("answer_format", "auto") or "auto"
        if self.answer_format not in ANSWER_FORMATS:
            raise ImportSourceError(
                f"answer_format {self.answer_format!r} in {kind} mapping is not one of {', '.join(ANSWER_FORMATS)}"
            )
        flag = options.get("options_in_text", "0")
        if _CONSTANT.match(flag):
            raise ImportSourceError(
                f"options_in_text={flag!r} in {kind} mapping: expected 1 (the question text), 0, or the input field holding the options"
            )
        self.options_in_text = flag not in ("0", "")  # options read from a text: the question's, or a field's
        self.options_field = flag if self.options_in_text and flag != "1" else None
        self.max_options = _max_options(options.get("max_options"), kind)
        html = options.get("html", "1")
        if html not in ("0", "1"):
            raise ImportSourceError(f"html={html!r} in {kind} mapping: expected 1 (texts in HTML read as shown, the default) or 0")
        self.html = html == "1"
        self.image_root = options.get("image_root") or None
        self.image_prefix = options.get("image_prefix") or None
        self.subject_names = _subject_table(options.get("subjects", ""), kind)
        self.image_options = parse_image_options(options.get("image_options"), kind)
        self.figure_options = parse_figure_options(options.get("figure_options"), kind)
        self.constants: dict[str, Any] = {}
        self.names: dict[str, tuple[str, ...]] = dict(DEFAULT_NAMES)
        self.mapped: dict[str, str] = {}  # our field -> the input field the user named
        # NAME=[F1,F2,...]: the values of several fields (choices=[A,B,C,D]: option k in the k-th)
        self.field_lists: dict[str, tuple[str, ...]] = {}
        for ours, theirs in options.items():
            if ours not in FIELDS:
                continue
            constant = _CONSTANT.match(theirs)
            listed = _FIELD_LIST.match(theirs)
            if listed:
                names = tuple(name.strip() for name in listed.group(1).split(","))
                if not all(names) or len(names) > 26:
                    raise ImportSourceError(f"{kind} mapping {ours}={theirs}: expected [FIELD,FIELD,...]")
                self.field_lists[ours] = names
                self.names[ours] = ()
                self.mapped[ours] = theirs
            elif constant:
                value = constant.group(1)
                self.constants[ours] = [t.strip() for t in value.split(",")] if ours == "choices" and value else value
            elif not theirs:
                raise ImportSourceError(f"{kind} mapping gives field {ours!r} an empty name")
            else:
                self.names[ours] = (theirs,)
                self.mapped[ours] = theirs
        if self.options_in_text:
            if "choices" in options:
                raise ImportSourceError(f"{kind} mapping: options_in_text={flag} reads the options from the text; drop choices=")
            self.names["choices"] = (self.options_field,) if self.options_field else ()
            if self.options_field:
                self.mapped["choices"] = self.options_field
        self._seen: set[str] = set()
        self.index_base = 0  # where numbers read as indices count from (``with_index_base``)
        self.indices = IndexAnswers()

    def observe(self, row: dict[str, Any], meta: Mapping[str, Any]) -> None:
        """Note which mapped fields this row has (see ``unused_fields``)."""
        for ours, theirs in self.mapped.items():
            if ours in self._seen:
                continue
            names = self.field_lists.get(ours, (theirs,))
            if any(_lookup(row, name, meta) is not _MISSING for name in names):
                self._seen.add(ours)

    def unused_fields(self) -> list[str]:
        """``ours=theirs`` of every mapped field that no observed row had."""
        return [f"{ours}={theirs}" for ours, theirs in self.mapped.items() if ours not in self._seen]

    def get(self, row: dict[str, Any], ours: str, meta: Mapping[str, Any]) -> Any:
        if ours in self.constants:
            return self.constants[ours]
        if ours in self.field_lists:
            found = self._field_values(row, ours, meta)
            if ours == "choices":
                return found
            value = list(found.values()) or None
            return _joined(value, "\n" if ours == "problem" else ", ") if ours in TEXT_FIELDS else value
        for name in self.names[ours]:
            value = _lookup(row, name, meta)
            if value is not _MISSING:
                return _joined(value, "\n" if ours == "problem" else ", ") if ours in TEXT_FIELDS else value
        return None

    def _field_values(self, row: dict[str, Any], ours: str, meta: Mapping[str, Any]) -> dict[str, Any]:
        """The values of ``ours=[F1,F2,...]`` keyed by position letters (the k-th field is the
        k-th letter, whatever its name: ``option1`` is A); an empty or absent field is no value,
        and the others keep their letters (MMBench leaves C and D empty for two options). For
        ``choices`` a field holding a list gives its items, in order, as the next options
        (OpenTDB's ``[correct_answer,incorrect_answers]``)."""
        found = {}
        k = 0  # the next value's place
        for name in self.field_lists[ours]:
            value = _lookup(row, name, meta)
            values = value if isinstance(value, list) and ours == "choices" else [value]
            for item in values:
                k += 1
                if item is _MISSING or _no_option(item):
                    continue
                if k > 26:
                    raise RecordProblem("more options than letters", f"{ours}={self.mapped[ours]}")
                found[chr(ord("A") + k - 1)] = item
        return found

    def subject(self, raw: Any) -> str:
        if self.subject_names and isinstance(raw, str):
            whole = self.subject_names.get(raw.strip().casefold())
            if whole is not None:
                return whole
            found = {self.subject_names[w] for w in _words(raw) if w in self.subject_names}
            if len(found) == 1:
                return found.pop()
            if len(found) > 1:
                raise RecordProblem("subject names several subjects", one_line(raw, 80))
        return normalize_subject(raw)


def _max_options(value: str | None, kind: str) -> int:
    if value is None or value == "":
        return MAX_OPTIONS
    if not value.isdigit() or not 2 <= int(value) <= MAX_OPTIONS:
        raise ImportSourceError(
            f"max_options={value!r} in {kind} mapping: expected a number from 2 to {MAX_OPTIONS} (the STEM release's 2 to 5 options)"
        )
    return int(value)


def _words(text: str) -> list[str]:
    return [w.casefold() for w in re.findall(r"[^\W\d_]+", text)]


def _subject_table(text: str, kind: str) -> dict[str, str]:
    table: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, sep, subject = entry.rpartition(":")
        if not sep or not name.strip() or subject.strip() not in SUBJECTS:
            raise ImportSourceError(
                f"subjects={text!r} in {kind} mapping: expected NAME:SUBJECT,... with SUBJECT one of {', '.join(SUBJECTS)}"
            )
        table[name.strip().casefold()] = subject.strip()
    return table


def _lookup(row: dict[str, Any], name: str, meta: Mapping[str, Any]) -> Any:
    if name in PSEUDO_FIELDS:
        value = meta.get(name)
        return _MISSING if value is None else value
    if name in row:
        return row[name]
    if "*" in name.split("."):
        return _lookup_all(row, name.split("."))
    node: Any = row
    for part in name.split("."):
        indexed = _INDEXED.match(part)
        key, indexes = (indexed.group(1), [int(i) for i in re.findall(r"\d+", indexed.group(2))]) if indexed else (part, [])
        if key:
            if not isinstance(node, dict) or key not in node:
                return _MISSING
            node = node[key]
        for index in indexes:
            if not isinstance(node, list) or index >= len(node):
                return _MISSING
            node = node[index]
    return node


def _lookup_all(node: Any, parts: list[str]) -> Any:
    """A path with ``*`` parts (``answerChoices.*.processedText``): the list of what the rest of
    the path reaches from every item of an array or value of an object, in order; no value when
    it reaches nothing."""
    found = list(_reached(node, parts))
    return found if found else _MISSING


def _reached(node: Any, parts: list[str]) -> Iterator[Any]:
    if not parts:
        yield node
        return
    head, rest = parts[0], parts[1:]
    if head == "*":
        items = list(node.values()) if isinstance(node, dict) else node if isinstance(node, list) else []
    else:
        items = [node[head]] if isinstance(node, dict) and head in node else []
    for item in items:
        yield from _reached(item, rest)


def _joined(value: Any, separator: str) -> Any:
    """A list of texts (or numbers) as one text; an empty list as no value; anything else as is."""
    if not isinstance(value, list):
        return value
    if not value:
        return None
    if all(isinstance(v, str) or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in value):
        return separator.join(v if isinstance(v, str) else json.dumps(v) for v in value)
    return value


def image_folder(mapping: RowMapping, data_folder: Path) -> Path:
    """The folder image paths resolve in: ``image_root`` against ``data_folder``, or ``data_folder``."""
    root = (data_folder / mapping.image_root).resolve() if mapping.image_root else data_folder.resolve()
    if not root.is_dir():
        raise ImportSourceError(f"image_root={mapping.image_root} is not a folder (resolved to {root})")
    return root


def quarantine(source: str, key: str, exc: RecordProblem) -> QuarantineEntry:
    return QuarantineEntry(source, key, STAGE, exc.reason, exc.detail)


def with_index_base(read: Callable[[RowMapping], Iterator[Record]], mapping: RowMapping) -> Iterator[Record]:
    """The records ``read(mapping)`` yields, read once more with indices counted from 1 when
    the first reading proves the source's index answers 1-based (``IndexAnswers.one_based``:
    none is 0 and one names the option after the last, which no 0-based index can): answers
    ``1`` … ``n`` of such a source would otherwise name the next option, and its last options'
    questions be quarantined as out of range. Formats that say the base (``index1``, or no
    index at all) are read once."""
    records = list(read(mapping))
    if mapping.answer_format in ("auto", "index") and mapping.indices.one_based():
        mapping.index_base = 1
        records = list(read(mapping))
    yield from records


def unused_field_entries(source: str, key: str, mapping: RowMapping) -> Iterator[QuarantineEntry]:
    """One source-level quarantine entry per mapped field that no row had (fails the build)."""
    for field in mapping.unused_fields():
        yield QuarantineEntry(source, key, STAGE, MAPPED_FIELD_UNUSED, field)


def row_record(
    source: str, key: str, row: Any, mapping: RowMapping, meta: Mapping[str, Any], images_root: Path, images: ImageStore
) -> Record:
    """The RawQuestion of one input row, or its QuarantineEntry; never raises but for a
    failing image store."""
    try:
        return row_question(source, key, row, mapping, meta, images_root, images)
    except RecordProblem as exc:
        return quarantine(source, key, exc)
    except ImageStoreFailure:
        raise
    except Exception as exc:  # a record must never stop the import
        return QuarantineEntry(source, key, STAGE, f"unexpected {type(exc).__name__}", one_line(exc, 160))


def _options(raw: Any) -> tuple[list[str] | None, list[str] | None, list[int] | None]:
    """Option texts, their labels (None: default A, B, C...) and, where empty slots lie between
    options (``["left", "", "right"]``), the slot of each option (None: each in its own order).
    The options keep the letters of their slots (``right`` is C), so a letter or an index answer
    still names its option; an answer naming an empty slot is refused (``parse_answer``)."""
    if raw is None or raw == [] or raw == {} or raw == "":
        return None, None, None
    labels = None
    if isinstance(raw, str):
        listed = list_literal(raw)  # a CSV cell or an exported column: '["1", "2"]', "['1', '2']"
        if listed is None:
            return _options_text(raw), None, None
        raw = listed
    columns = _option_columns(raw)
    if columns is not None:  # {"text": [...], "label": [...]}: Hugging Face's sequence of records
        raw, labels = columns
    elif isinstance(raw, dict):  # keyed by labels, dressed or not: {"A": ...}, {"(B)": ...}, {"C.": ...}
        labels = [str(k).strip().strip("()（）[].．:：、 ") or str(k) for k in raw]
        raw = list(raw.values())
    if not isinstance(raw, list):
        raise RecordProblem("options are not a list", type(raw).__name__)
    while raw and _no_option(raw[-1]):  # fixed slots left empty after the last option: ["a", "b", null, NaN, ""]
        raw = raw[:-1]
        labels = labels[:-1] if labels is not None else None
    if not raw:
        return None, None, None
    texts, slots = [], []
    for i, option in enumerate(raw):
        if _no_option(option):
            if labels is None and len(raw) > 26:
                raise RecordProblem("an option is empty", f"option {i} of {len(raw)} is {option!r}")
            continue
        if isinstance(option, str):
            texts.append(option)
        elif isinstance(option, (int, float)) and not isinstance(option, bool):
            texts.append(json.dumps(option))
        else:
            raise RecordProblem("an option is not text", f"option {i} is {type(option).__name__}")
        slots.append(i)
    if labels is not None:  # the source's, one per slot
        labels = [labels[i] for i in slots]
    labelled = own_labels(texts, slots) if labels is None else None
    if labelled is not None:  # ["A. 5", "B. 6"]: the labels are not the options' text
        texts, labels = labelled
    if len(slots) == len(raw):
        return texts, labels, None
    return texts, labels or [chr(ord("A") + i) for i in slots], slots


def _no_option(value: Any) -> bool:
    """An empty slot of options or of a field: null, NaN (pandas' empty cell) or blank text."""
    return value is None or (isinstance(value, float) and value != value) or (isinstance(value, str) and not value.strip())


_OPTION_TEXTS = ("text", "texts", "option", "options", "choice", "choices", "content")
_OPTION_LABELS = ("label", "labels", "key", "keys", "letter", "letters")


def _option_columns(raw: Any) -> tuple[list, list[str] | None] | None:
    """(texts, labels) of options stored as columns: an object of lists of one length, one of
    them the texts (``text``) and maybe one the labels (``label``), as ``datasets`` stores a
    sequence of records (ARC's ``{"text": [...], "label": ["1", "2", "3", "4"]}``); else None."""
    if not isinstance(raw, dict) or not raw or not all(isinstance(v, list) for v in raw.values()):
        return None
    if len({len(v) for v in raw.values()}) != 1:
        return None
    texts = next((raw[name] for name in _OPTION_TEXTS if name in raw), None)
    if texts is None:
        return None
    labels = next((raw[name] for name in _OPTION_LABELS if name in raw), None)
    return texts, [str(label) for label in labels] if labels is not None else None


def _options_text(text: str) -> list[str]:
    """The options written, labelled, in a field of their own (``options_in_text=FIELD``)."""
    found = read_options(text)
    if found is None:
        raise RecordProblem("no labelled options in the options text", one_line(text, 80))
    if found.stem.strip():
        raise RecordProblem("text before option A in the options text", one_line(found.stem, 80))
    if found.held_label:
        raise RecordProblem(HELD_LABEL, one_line(found.held_label, 160))
    return found.options


def _check_options(texts: list[str] | None, count: int, mapping: RowMapping) -> None:
    """More options than ``max_options``, or a listed option holding another's label: quarantined."""
    if count > mapping.max_options:
        raise RecordProblem(f"more options than max_options={mapping.max_options}", f"{count} options")
    for i, text in enumerate(texts or ()):
        held = held_label(text, i)
        if held:
            raise RecordProblem(HELD_LABEL, one_line(held, 160))


_PICTURE_NAME = re.compile(
    r"[(（\[]?\s*(?:(?:picture|image|figure|fig\.?|图)\s*[(（]?\s*[A-Za-z0-9]{1,2}|[A-Za-z]|[甲乙丙丁戊己])"
    r"\s*[)）\]]?\s*[.．]?",
    re.IGNORECASE,
)


def _names_pictures_only(texts: list[str]) -> bool:
    """Every option only names a picture (``A``, ``(b)``, ``picture 2``, ``图3``, ``甲``, a
    placeholder ``<image 2>``; a bare number is a value): the pictures may be the options
    themselves, so they are not one figure."""
    return all(_PICTURE_NAME.fullmatch(text.strip()) or ONLY_PLACEHOLDER.match(text) for text in texts)


def _pictures(value: Any) -> list[Any]:
    """The image field's pictures (paths or bytes): none, one, or a list of them."""
    if value is None or value == "":
        return []
    if isinstance(value, str) and value.startswith("["):  # VLMEvalKit: "['<base64>', '<base64>']"
        value = list_literal(value) or value
    if isinstance(value, list):
        return [item for item in value if item is not None and item != ""]
    return [value]


def _image_bytes(root: Path, value: Any, what: str, prefix: str | None = None) -> bytes:
    if isinstance(value, dict) and "bytes" in value:  # Hugging Face Image feature: {bytes, path}
        value = value["bytes"]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if not isinstance(value, str):
        raise RecordProblem(f"{what} path is not text", one_line(repr(value), 80))
    written = image_in_text(value)
    if written is not None:
        return written
    shown = value
    if prefix is not None and value.startswith(prefix):  # a folder of the machine the corpus was made on
        value = value[len(prefix):].lstrip("/\\") or value
    try:
        return read_image_file(resolve_image_file(root, value), shown)
    except UnsafePath as exc:
        if prefix is None and Path(value).is_absolute():
            raise UnsafePath(exc.reason, f"{exc.detail}; an absolute path: image_prefix=FOLDER reads the paths "
                                         "that start with FOLDER from the image folder") from None
        raise


def _as_shown(value: Any, what: str, mapping: RowMapping) -> Any:
    """``value`` (a text, or a list or object of texts) with every text written in HTML read as
    a reader sees it (``markup_text``: tags, character references), unless the mapping says
    ``html=0``; a picture inside such a text cannot be kept in it and quarantines the record."""
    if not mapping.html:
        return value
    if isinstance(value, str):
        try:
            return markup_text(value)
        except PictureInMarkup as exc:
            raise RecordProblem("picture inside the text's HTML", f"{what}: {one_line(str(exc), 120)}") from None
    if isinstance(value, list):
        return [_as_shown(item, what, mapping) for item in value]
    if isinstance(value, dict):
        return {key: _as_shown(item, what, mapping) for key, item in value.items()}
    return value


def _strip_placeholders(text: str) -> str:
    """``text`` without its ``<image N>`` placeholders; their numbers are not checked (see the
    module docstring)."""
    return strip_placeholders(text)[0]


def row_question(
    source: str, key: str, row: Any, mapping: RowMapping, meta: Mapping[str, Any], images_root: Path, images: ImageStore
) -> RawQuestion:
    if not isinstance(row, dict):
        raise RecordProblem("record is not an object", type(row).__name__)
    mapping.observe(row, meta)
    pictures = _pictures(mapping.get(row, "image", meta))
    problem = mapping.get(row, "problem", meta)
    if problem is not None and not isinstance(problem, str):
        raise RecordProblem("question text is not text", type(problem).__name__)
    problem = _as_shown(problem or "", "the question text", mapping)
    labels = slots = None
    if mapping.options_in_text and mapping.options_field is None:
        parsed = read_options(problem)
        texts = None
        if parsed is not None:
            if parsed.held_label:
                raise RecordProblem(HELD_LABEL, one_line(parsed.held_label, 160))
            problem, texts = parsed.stem, parsed.options
    else:
        texts, labels, slots = _options(_as_shown(mapping.get(row, "choices", meta), "the options", mapping))
    image_paths = mapping.get(row, "choice_images", meta)
    if image_paths in ([], "", {}):
        image_paths = None
    if image_paths is not None and not isinstance(image_paths, list):
        raise RecordProblem("choice_images are not a list", type(image_paths).__name__)
    image: Any = pictures[0] if len(pictures) == 1 else None
    joined: list[Any] | None = None  # pictures to join into the problem figure
    if len(pictures) > 1 and texts is not None and image_paths is None and not _names_pictures_only(texts):
        # options with text of their own: every picture is the figure, joined in source order as
        # a page shows them, unless the text names them by number (<image 2>), which one
        # figure cannot keep apart (options that only name pictures may be the pictures themselves)
        if strip_placeholders(problem)[1]:
            raise RecordProblem("several images", f"{len(pictures)} images named by placeholders in the text")
        joined = pictures
    elif len(pictures) > 1:
        if image_paths is not None or mapping.image_options is None:
            hint = ("" if image_paths is not None else " and no options (see image_options)" if texts is None
                    else " and options that only name pictures (see image_options)")
            raise RecordProblem("several images", f"{len(pictures)} images{hint}")
        mapping.image_options.check_fits(len(pictures))
        if mapping.image_options.mode == "labelled":
            joined, texts = pictures, mapping.image_options.labels()
        else:
            figures = len(pictures) - mapping.image_options.count
            image, image_paths = (pictures[0] if figures else None), pictures[figures:]
    if texts is None and image_paths is None and image is not None and mapping.figure_options is not None:
        texts = mapping.figure_options.letters(problem)  # drawn in the figure (figure_options.py)
    if texts is None and image_paths is None:
        raise RecordProblem("no options in the text" if mapping.options_in_text else "not multiple choice: no options")
    _check_options(texts, len(texts) if texts is not None else len(image_paths), mapping)
    if texts is not None and image_paths is not None:
        raise RecordProblem("both text options and option images are given; a question has one kind")
    problem = _strip_placeholders(problem)
    if texts is not None:
        texts = [_strip_placeholders(text) for text in texts]
    num_options = len(texts) if texts is not None else len(image_paths)
    answer = parse_answer(_as_shown(mapping.get(row, "answer", meta), "the answer", mapping), texts, num_options, labels,
                          mapping.answer_format, mapping.index_base, mapping.indices, slots)
    subject = mapping.subject(mapping.get(row, "subject", meta))
    split_raw = mapping.get(row, "split", meta)
    extra: dict[str, Any] = {}
    row_id = mapping.get(row, "id", meta)
    if row_id is None:
        row_id = meta.get("_record_key")  # a JSON object of records: the key it is filed under
    if row_id is not None:
        extra["id"] = row_id if isinstance(row_id, (str, int)) and not isinstance(row_id, bool) else json.dumps(row_id)
    if split_raw is not None and normalize_split(split_raw) is None:
        extra["split"] = split_raw
    draft = RawQuestion(
        source=source,
        source_key=key,
        subject=subject,
        grade=normalize_grade(mapping.get(row, "grade", meta), subject),
        skill=normalize_skill(mapping.get(row, "skill", meta)),
        problem=problem,
        problem_image=PLACEHOLDER_HASH if image is not None or joined else None,
        choices=tuple(texts) if texts is not None else None,
        choice_images=(PLACEHOLDER_HASH,) * num_options if image_paths is not None else None,
        answer_idx=answer,
        source_split=normalize_split(split_raw),
        extra=extra,
    )
    if joined:
        problem_bytes = join_pictures([_image_bytes(images_root, p, f"picture {i}", mapping.image_prefix)
                                       for i, p in enumerate(joined)])
    else:
        problem_bytes = _image_bytes(images_root, image, "image", mapping.image_prefix) if image is not None else None
    choice_bytes = (
        [_image_bytes(images_root, p, f"image of option {i}", mapping.image_prefix) for i, p in enumerate(image_paths)]
        if image_paths is not None
        else None
    )
    return finish_question(draft, images, problem_bytes, choice_bytes)


def watched_data_files(spec, data_files: list[Path], exclude: Path) -> list[Path] | None:
    """The files a mapped source reads: its data files and every file under the folder its
    images resolve in (the data file's folder, or its ``image_root``); [] if a data file is missing."""
    from pipelines.ingest.sources import walk_files

    if not all(path.is_file() for path in data_files):
        return []
    image_root = spec.options.get("image_root")
    found = set(data_files)
    for folder in sorted({(path.parent / image_root).resolve() if image_root else path.parent for path in data_files}):
        walked = walk_files(folder, exclude)
        if walked is None:
            return None
        found.update(walked)
    return sorted(found)
