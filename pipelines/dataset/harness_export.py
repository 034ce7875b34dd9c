"""Export one split for an evaluation harness (``stemforge export --format F [--split S]``).

- ``stem``: the release shards the build already wrote (``export/stem/``); with ``--out`` a
  copy of that folder to upload, without ``test_answer_key.jsonl`` (the hidden test answers)
  unless ``with_answer_key`` (``--with-answer-key``); its manifest lists what it holds.
- ``vlmevalkit``: ``stemforge_<split>.tsv``, the table VLMEvalKit loads for a custom
  multiple-choice set (``LMUData=DIR python run.py --data stemforge_<split> ...``): ``index``,
  ``question_id``, ``question``, ``hint``, ``A``..``E`` (blank past a question's last option),
  ``answer`` (letter), ``category`` (subject), ``l2-category`` (skill), ``grade``, ``split``,
  ``image`` (base64 PNG; several pictures as a Python list of base64 strings, which
  VLMEvalKit's loader expands with ``toliststr``).
- ``lmms-eval``: a task folder: ``stemforge_<split>.yaml``, ``utils.py`` (the file
  ``pipelines/dataset/lmms_eval_task.py``) and ``data/<split>.parquet`` with Hugging Face
  ``Image`` features (``image``, ``option_images``), loaded by lmms-eval through
  ``datasets.load_dataset("parquet", data_files=...)``.

Questions whose options are pictures: the row's pictures are the problem's picture (when it
has one) followed by the option pictures, and each option's text names its picture
("picture 2"); ``hint`` says which pictures are the options. Both harnesses pass all of a
row's pictures to the model before the text, in that order.

Answers: the harness files carry the answer letter, so a harness can score; only questions
with an answer key in this home are exported (the others are counted as left out). These
files are for running models, not for publishing: the public test answers stay hidden only
in ``export/stem``.

Left out of the VLMEvalKit table (counted): questions without any picture (VLMEvalKit's
image multiple-choice class drops rows without an image) and questions with a text cell that
its pandas loader reads as missing (an empty question, an option such as ``None`` or
``NA``). Options that loader shows reformatted (an option column holding only numbers is
read as numbers, so ``3`` may be shown as ``3.0``) are counted in a note.

Each row carries our ``question_id``; VLMEvalKit copies every column into its prediction
table and the lmms-eval task logs it from ``process_results``, so outputs map back exactly.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import shutil
import string
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.dataset.export import export_order, png_bytes
from pipelines.dataset.split import SPLITS
from pipelines.store.atomic import atomic_path, atomic_write, atomic_write_text
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore

HARNESS_FORMATS = ("stem", "vlmevalkit", "lmms-eval")
DEFAULT_SPLIT = "test"
TASK_UTILS = Path(__file__).with_name("lmms_eval_task.py")
# what pandas.read_csv (VLMEvalKit's TSV loader) reads as a missing value by default
PANDAS_NA_TOKENS = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
})
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")


class HarnessExportError(ValueError):
    """An export that cannot be written; the message is one line."""


@dataclass
class HarnessExport:
    format: str
    out: Path
    files: list[Path]
    rows: int
    left_out: dict[str, int] = field(default_factory=dict)  # reason -> questions
    notes: list[str] = field(default_factory=list)


def dataset_name(split: str) -> str:
    return f"stemforge_{split}"


def row_pictures(row: dict) -> tuple[list[str], list[str], str | None]:
    """(option texts as the harness shows them, the row's image hashes in order, hint)."""
    images = [row["problem_image"]] if row["problem_image"] else []
    if row["choice_images"] is None:
        return list(row["choices"]), images, None
    first = len(images) + 1
    labels = [f"picture {first + i}" for i in range(len(row["choice_images"]))]
    mapping = ", ".join(f"{string.ascii_uppercase[i]} = {label}" for i, label in enumerate(labels))
    hint = ("Picture 1 is the problem's figure; the" if images else "The") + f" options are pictures: {mapping}."
    return labels, images + list(row["choice_images"]), hint


def harness_questions(home: DataHome, split: str) -> tuple[pl.DataFrame, dict[str, int]]:
    """The split's questions with an answer key, in export order, and what was left out."""
    if split not in SPLITS:
        raise HarnessExportError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    path = home.lake_path("questions")
    if not path.exists():
        raise HarnessExportError(f"no built dataset in {home.root}; run `stemforge build` first")
    part = export_order(pl.read_parquet(path)).filter(pl.col("split") == split)
    keyed = part.filter(pl.col("answer_idx") >= 0)
    left_out = {"no answer key in this home": part.height - keyed.height} if part.height > keyed.height else {}
    if keyed.height == 0:
        raise HarnessExportError(f"no {split} questions with an answer key in {home.root}; nothing to export")
    return keyed, left_out


def export_for_harness(home: DataHome, fmt: str, out: Path | None = None, split: str = DEFAULT_SPLIT,
                       with_answer_key: bool = False) -> HarnessExport:
    if fmt not in HARNESS_FORMATS:
        raise HarnessExportError(f"unknown export format {fmt!r}; use one of {', '.join(HARNESS_FORMATS)}")
    _refuse_home_folder(home, out, fmt)
    if fmt == "stem":
        return _stem(home, out, with_answer_key)
    questions, left_out = harness_questions(home, split)
    out = Path(out) if out is not None else home.root / "export" / fmt
    _refuse_overwrite(out, fmt, split)
    out.mkdir(parents=True, exist_ok=True)
    writer = _vlmevalkit if fmt == "vlmevalkit" else _lmms_eval
    result = writer(questions, ImageStore(home.images), out, split)
    for reason, n in left_out.items():
        result.left_out[reason] = result.left_out.get(reason, 0) + n
    return result


ANSWER_KEY_NAME = "test_answer_key.jsonl"


def _refuse_home_folder(home: DataHome, out: Path | None, fmt: str) -> None:
    """``--out`` inside the data home is refused (its folders are stemforge's: an export into
    export/stem made every later build fail), but for the format's own default folder."""
    if out is None:
        return
    target, root = Path(out).resolve(), home.root.resolve()
    own = (root / "export" / fmt) if fmt != "stem" else home.export.parent.resolve()
    if target != own and (target == root or target.is_relative_to(root)):
        raise HarnessExportError(f"--out {out} is inside the data home {home.root}, whose folders stemforge manages; "
                                 f"give a folder outside it (or leave --out out: {own})")


def _refuse_overwrite(out: Path, fmt: str, split: str) -> None:
    """A harness export replaces only files an earlier export wrote (their checksum sidecar
    still matches); anything else in ``--out`` under the same name is refused, never overwritten."""
    from pipelines.store.checksums import recorded_checksum, sha256_file

    names = ([f"{dataset_name(split)}.tsv"] if fmt == "vlmevalkit"
             else [f"{dataset_name(split)}.yaml", "utils.py", f"data/{split}.parquet"])
    for name in names:
        path = out / name
        if path.is_symlink() or path.exists() and (not path.is_file() or recorded_checksum(path) != sha256_file(path)):
            raise HarnessExportError(f"{out} holds {name}, which this export would overwrite (stemforge did not write "
                                     "it, or it changed since); give an empty or new folder")


class LfWriter:
    """Tab-separated rows ending in LF, as VLMEvalKit's own TSV files; a cell holding a line
    break (CR or LF) is quoted, as csv does only for the characters of its line ending."""

    def __init__(self, handle):
        self.handle = handle
        self.buffer = io.StringIO()
        self.writer = csv.writer(self.buffer, delimiter="\t", lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)

    def writerow(self, row: list) -> None:
        self.buffer.seek(0)
        self.buffer.truncate()
        self.writer.writerow(row)
        self.handle.write(self.buffer.getvalue()[:-2] + "\n")


def _stem(home: DataHome, out: Path | None, with_answer_key: bool = False) -> HarnessExport:
    from pipelines.store.checksums import MANIFEST_NAME, checksum_lines, parse_checksums

    source = home.export.parent
    if not (source / "data").is_dir():
        raise HarnessExportError(f"no STEM export in {home.root}; run `stemforge build` first")
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in (source / "data").glob("*.parquet"))
    if out is None or Path(out).resolve() == source.resolve():
        result = HarnessExport("stem", source, sorted(source.rglob("*")), rows)
        if (source / ANSWER_KEY_NAME).exists():
            result.notes.append(f"{ANSWER_KEY_NAME} here holds the hidden test answers; give --out DIR for a copy to upload without it")
        return result
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise HarnessExportError(f"{out} exists and is not empty; give an empty or new folder for the copy")
    left_out = () if with_answer_key else (ANSWER_KEY_NAME,)
    shutil.copytree(source, out, dirs_exist_ok=True, ignore=lambda folder, names: [n for n in names if n in left_out]
                    if Path(folder) == source else [])
    result = HarnessExport("stem", out, [], rows)
    manifest = out / MANIFEST_NAME
    if left_out and manifest.exists():
        entries = parse_checksums(manifest.read_text(encoding="utf-8")) or {}
        atomic_write_text(manifest, checksum_lines({k: v for k, v in entries.items() if k not in left_out}))
    if left_out and (source / ANSWER_KEY_NAME).exists():
        result.notes.append(f"{ANSWER_KEY_NAME} (the hidden test answers) left out of the copy; --with-answer-key includes it")
    result.files = sorted(p for p in out.rglob("*") if p.is_file())
    return result


# ---- VLMEvalKit --------------------------------------------------------------------------

def pandas_shown_text(values: list[str]) -> list[str]:
    """How pandas' default CSV reading shows each cell of one column (blank = missing): a
    column of only numbers is read as numbers (integers without blanks, else floats)."""
    present = [v for v in values if v not in PANDAS_NA_TOKENS]
    if present and all(_DECIMAL.fullmatch(v) for v in present):
        as_int = len(present) == len(values) and all(_INTEGER.fullmatch(v) for v in present)
        return [v if v in PANDAS_NA_TOKENS else (str(int(v)) if as_int else repr(float(v))) for v in values]
    return list(values)


def _b64_png(store: ImageStore, image_hash: str, cache: dict) -> str:
    text = cache.get(image_hash)
    if text is None:
        text = cache[image_hash] = base64.b64encode(png_bytes(store, image_hash)).decode("ascii")
    return text


def _vlmevalkit(questions: pl.DataFrame, store: ImageStore, out: Path, split: str) -> HarnessExport:
    rows, left_out = [], {}
    for r in questions.iter_rows(named=True):
        options, images, hint = row_pictures(r)
        reason = None
        if not images:
            reason = "no picture (VLMEvalKit's image multiple-choice set drops such rows)"
        elif r["problem"].strip() in PANDAS_NA_TOKENS or any(o.strip() in PANDAS_NA_TOKENS for o in options):
            reason = "a question or option text VLMEvalKit's TSV loader reads as missing (empty, None, NA, ...)"
        if reason:
            left_out[reason] = left_out.get(reason, 0) + 1
            continue
        rows.append((r, options, images, hint))
    if not rows:
        raise HarnessExportError(f"none of the {questions.height} {split} questions can go into a VLMEvalKit table")
    width = max(len(options) for _, options, _, _ in rows)
    letters = list(string.ascii_uppercase[:width])
    header = ["index", "question_id", "question", "hint", *letters, "answer", "category", "l2-category", "grade", "split", "image"]
    reformatted = set()
    for i, letter in enumerate(letters):
        cells = [options[i] if i < len(options) else "" for _, options, _, _ in rows]
        shown = pandas_shown_text(cells)
        reformatted.update(j for j, (a, b) in enumerate(zip(cells, shown)) if a != b)
    path = out / f"{dataset_name(split)}.tsv"
    cache: dict[str, str] = {}
    with atomic_write(path, "w", newline="") as handle:
        writer = LfWriter(handle)
        writer.writerow(header)
        for index, (r, options, images, hint) in enumerate(rows):
            encoded = [_b64_png(store, h, cache) for h in images]
            writer.writerow([
                index, r["question_id"], r["problem"], hint or "",
                *[options[i] if i < len(options) else "" for i in range(width)],
                string.ascii_uppercase[r["answer_idx"]], r["subject"], r["skill"], r["grade"], split,
                encoded[0] if len(encoded) == 1 else str(encoded),
            ])
    notes = []
    if reformatted:
        notes.append(
            f"{len(reformatted)} row(s) have options VLMEvalKit's TSV loader shows reformatted "
            "(an option column of only numbers is read as numbers, e.g. 3 as 3.0)"
        )
    return HarnessExport("vlmevalkit", out, [path], len(rows), left_out, notes)


# ---- lmms-eval ---------------------------------------------------------------------------

IMAGE_STRUCT = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
LMMS_SCHEMA = pa.schema([
    ("index", pa.int64()),
    ("question_id", pa.string()),
    ("question", pa.string()),
    ("hint", pa.string()),
    ("options", pa.list_(pa.string())),
    ("answer", pa.string()),
    ("subject", pa.string()),
    ("grade", pa.string()),
    ("skill", pa.string()),
    ("split", pa.string()),
    ("image", IMAGE_STRUCT),
    ("option_images", pa.list_(IMAGE_STRUCT)),
])
# The Hugging Face features (``datasets`` reads them from the Parquet schema metadata): the
# two image columns decode to PIL images. A list in this JSON is a list feature in old and
# new ``datasets`` alike.
HF_FEATURES = {
    "index": {"dtype": "int64", "_type": "Value"},
    "question_id": {"dtype": "string", "_type": "Value"},
    "question": {"dtype": "string", "_type": "Value"},
    "hint": {"dtype": "string", "_type": "Value"},
    "options": [{"dtype": "string", "_type": "Value"}],
    "answer": {"dtype": "string", "_type": "Value"},
    "subject": {"dtype": "string", "_type": "Value"},
    "grade": {"dtype": "string", "_type": "Value"},
    "skill": {"dtype": "string", "_type": "Value"},
    "split": {"dtype": "string", "_type": "Value"},
    "image": {"_type": "Image"},
    "option_images": [{"_type": "Image"}],
}

TASK_YAML = """\
# Written by `stemforge export --format lmms-eval`. Run it with
#   lmms-eval --include_path {folder} --tasks {task} --model ... --log_samples --output_path OUT
# and import OUT/<model>/<date>_samples_{task}.jsonl with
#   stemforge eval --predictions FILE --model NAME
task: {task}
dataset_path: parquet
dataset_kwargs:
  data_files:
    {split}: data/{split}.parquet
test_split: {split}
output_type: generate_until
doc_to_visual: !function utils.doc_to_visual
doc_to_text: !function utils.doc_to_text
doc_to_target: !function utils.doc_to_target
process_results: !function utils.process_results
generation_kwargs:
  max_new_tokens: 32
  temperature: 0
  do_sample: false
metric_list:
  - metric: stemforge_accuracy
    aggregation: !function utils.aggregate_accuracy
    higher_is_better: true
lmms_eval_specific_kwargs:
  default:
    pre_prompt: ""
    post_prompt: {post_prompt}
metadata:
  version: 1.0
  questions: {rows}
"""


def _lmms_eval(questions: pl.DataFrame, store: ImageStore, out: Path, split: str) -> HarnessExport:
    from pipelines.dataset.lmms_eval_task import DEFAULT_POST_PROMPT

    columns: dict[str, list] = {name: [] for name in LMMS_SCHEMA.names}
    pngs: dict[str, bytes] = {}

    def image(image_hash: str) -> dict:
        data = pngs.get(image_hash)
        if data is None:
            data = pngs[image_hash] = png_bytes(store, image_hash)
        return {"bytes": data, "path": None}

    for index, r in enumerate(questions.iter_rows(named=True)):
        options, _, hint = row_pictures(r)
        columns["index"].append(index)
        columns["question_id"].append(r["question_id"])
        columns["question"].append(r["problem"])
        columns["hint"].append(hint)
        columns["options"].append(options)
        columns["answer"].append(string.ascii_uppercase[r["answer_idx"]])
        columns["subject"].append(r["subject"])
        columns["grade"].append(r["grade"])
        columns["skill"].append(r["skill"])
        columns["split"].append(split)
        columns["image"].append(image(r["problem_image"]) if r["problem_image"] else None)
        columns["option_images"].append([image(h) for h in r["choice_images"]] if r["choice_images"] is not None else None)
    metadata = {b"huggingface": json.dumps({"info": {"features": HF_FEATURES}}).encode()}
    table = pa.Table.from_pydict(columns, schema=LMMS_SCHEMA.with_metadata(metadata))
    task = dataset_name(split)
    data_path = out / "data" / f"{split}.parquet"
    data_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(data_path) as tmp:
        pq.write_table(table, tmp, compression="zstd", row_group_size=500)
    utils_path = out / "utils.py"
    atomic_write_text(utils_path, TASK_UTILS.read_text(encoding="utf-8"))
    yaml_path = out / f"{task}.yaml"
    atomic_write_text(yaml_path, TASK_YAML.format(
        folder=out, task=task, split=split, rows=table.num_rows, post_prompt=json.dumps(DEFAULT_POST_PROMPT),
    ))
    return HarnessExport("lmms-eval", out, [yaml_path, utils_path, data_path], table.num_rows)
