"""The export's ``README.md``: a Hugging Face dataset card, so that uploading ``export/stem`` makes a
complete dataset page.

The YAML header holds what the Hub reads: ``configs`` (one ``data_files`` pattern per split,
matching the shard names ``data/{split}-NNNNN-of-MMMMM.parquet``), ``dataset_info`` (the shards'
``features`` as ``datasets`` writes them, and per split ``num_examples`` and ``num_bytes``: what
``datasets`` records when it loads the split, the Arrow size of its rows read back from the
shards and cast to the features), ``license``,
``task_categories``, ``language``, ``pretty_name``, ``size_categories`` and ``tags``. The body
gives the counts per split and subject, how the set was built (sources, deduplication, LaTeX
conversion, option shuffling, splitting), that test answers are hidden, and the STEM paper's
citation. Nothing in it depends on the time or the machine: the same build writes the same
bytes. Source locations are shown by their last path component only (no local folders).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from pipelines.dataset.split import SPLITS

CARD_NAME = "README.md"
DEFAULT_LICENSE = "cc-by-nc-sa-4.0"  # the STEM paper's licence for its dataset
PRETTY_NAME = "STEM: vision-language multiple-choice questions (stemforge build)"
TASK_CATEGORIES = ["visual-question-answering", "multiple-choice"]
TAGS = ["stem", "science", "technology", "engineering", "math", "multimodal", "k-12", "benchmark"]
SUBJECT_ORDER = ("science", "technology", "engineering", "math")
# The shards' columns as ``datasets.Features._to_yaml_list`` writes them (tests check they agree).
FEATURES = [
    {"name": "subject", "dtype": "string"},
    {"name": "grade", "dtype": "string"},
    {"name": "skill", "dtype": "string"},
    {"name": "pic_choice", "dtype": "bool"},
    {"name": "pic_prob", "dtype": "bool"},
    {"name": "problem", "dtype": "string"},
    {"name": "problem_pic", "dtype": "binary"},
    {"name": "choices", "list": "string"},
    {"name": "choices_pic", "list": "binary"},
    {"name": "answer_idx", "dtype": "int64"},
]
CITATION = """@inproceedings{shen2024measuring,
  title     = {Measuring Vision-Language {STEM} Skills of Neural Models},
  author    = {Shen, Jianhao and Yuan, Ye and Mirzoyan, Srbuhi and Zhang, Ming and Wang, Chenguang},
  booktitle = {The Twelfth International Conference on Learning Representations ({ICLR})},
  year      = {2024}
}"""
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                    (10_000_000, "1M<n<10M"))


@dataclass(frozen=True)
class BuildFacts:
    """What the card tells about the build beyond the exported questions (all optional)."""

    seed: int | None = None
    split_ratios: tuple[float, float, float] | None = None
    cap_per_skill: int | None = None
    duplicates_by_kind: dict[str, int] = field(default_factory=dict)
    license: str = DEFAULT_LICENSE


@dataclass(frozen=True)
class SplitFiles:
    shards: list[str]
    num_examples: int
    num_bytes: int  # Arrow bytes of the rows as ``datasets`` records them (``arrow_nbytes``)
    download_size: int  # bytes of the shard files


def shard_facts(data_dir: Path) -> dict[str, SplitFiles]:
    """Per split, its shard names (relative to the export root), rows and sizes."""
    found: dict[str, SplitFiles] = {}
    for split in SPLITS:
        paths = sorted(Path(data_dir).glob(f"{split}-*.parquet"))
        rows = size = download = 0
        for path in paths:
            metadata = pq.read_metadata(path)
            rows += metadata.num_rows
            size += arrow_nbytes(path)
            download += path.stat().st_size
        found[split] = SplitFiles([f"data/{p.name}" for p in paths], rows, size, download)
    return found


def features_schema() -> pa.Schema:
    """``FEATURES`` as the Arrow schema ``datasets`` casts the shards to."""
    scalar = {"string": pa.string(), "bool": pa.bool_(), "binary": pa.binary(), "int64": pa.int64()}
    return pa.schema([
        pa.field(f["name"], pa.list_(scalar[f["list"]]) if "list" in f else scalar[f["dtype"]]) for f in FEATURES
    ])


def arrow_nbytes(path: Path) -> int:
    """The ``num_bytes`` ``datasets`` records for a shard: its Parquet builder reads the file in
    batches of the first row group's size, casts each to the features' schema and its
    ``ArrowWriter`` adds up ``nbytes`` of the combined table (not the Parquet metadata's
    ``total_byte_size``, the encoded size: 19,349,608 against 19,667,461 bytes on the demo's train)."""
    schema = features_schema()
    total = 0
    with pq.ParquetFile(path) as parquet:
        if parquet.metadata.num_row_groups == 0:
            return 0
        batch_size = max(1, parquet.metadata.row_group(0).num_rows)
        for group in range(parquet.metadata.num_row_groups):
            for batch in parquet.iter_batches(batch_size=batch_size, row_groups=[group], use_threads=False):
                total += pa.Table.from_batches([batch]).cast(schema).combine_chunks().nbytes
    return total


def card_header(questions: pl.DataFrame, splits: dict[str, SplitFiles], facts: BuildFacts) -> dict:
    present = [split for split in SPLITS if splits[split].shards]
    total = sum(splits[s].num_examples for s in present)
    return {
        "license": facts.license,
        "pretty_name": PRETTY_NAME,
        "language": _languages(questions),
        "task_categories": TASK_CATEGORIES,
        "task_ids": ["multiple-choice-qa", "visual-question-answering"],
        "size_categories": [next((name for bound, name in _SIZE_CATEGORIES if total < bound), "n>10M")],
        "tags": TAGS,
        "configs": [
            {"config_name": "default", "data_files": [{"split": s, "path": f"data/{s}-*"} for s in present]}
        ],
        "dataset_info": {
            "features": FEATURES,
            "splits": [
                {"name": s, "num_bytes": splits[s].num_bytes, "num_examples": splits[s].num_examples} for s in present
            ],
            "download_size": sum(splits[s].download_size for s in present),
            "dataset_size": sum(splits[s].num_bytes for s in present),
        },
    }


def _languages(questions: pl.DataFrame) -> list[str]:
    if questions.height == 0:
        return ["en"]
    with_cjk = questions["problem"].str.contains(_CJK.pattern).fill_null(False).sum()
    return (["en"] if with_cjk < questions.height else []) + (["zh"] if with_cjk else [])


def source_label(text: str) -> str:
    """A source as the card shows it: its kind and last path component, or a site's host."""
    if text in ("demo", ""):
        return text or "(unknown)"
    if text.startswith(("http://", "https://")):
        return urlsplit(text).netloc or text
    kind, _, rest = text.partition(":")
    location = rest.split("?", 1)[0].rstrip("/")
    if kind == "python":
        module, _, function = location.rpartition(":")
        return f"python:{Path(module).name.removesuffix('.py')}:{function}" if module else f"python:{location}"
    return f"{kind}:{Path(location).name}" if location else kind


def _value_counts(frame: pl.DataFrame) -> list[tuple[tuple, int]]:
    """Each distinct row of ``frame`` (a tuple) with how often it occurs."""
    if frame.height == 0:
        return []
    counted = frame.group_by(frame.columns).len(name="__count")
    return [(row[:-1], row[-1]) for row in counted.rows()]


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _counts_table(questions: pl.DataFrame, present: list[str]) -> str:
    counts = Counter(dict(_value_counts(questions.select("subject", "split"))))
    subjects = [s for s in SUBJECT_ORDER if any(counts[(s, sp)] for sp in present)]
    subjects += sorted({s for s, _ in counts} - set(subjects))
    rows = [[s, *(counts[(s, sp)] for sp in present), sum(counts[(s, sp)] for sp in present)] for s in subjects]
    rows.append(["**total**", *(sum(counts[(s, sp)] for s in subjects) for sp in present), questions.height])
    return _table(["subject", *present, "total"], rows)


def card_body(questions: pl.DataFrame, splits: dict[str, SplitFiles], facts: BuildFacts, test_answers_hidden: bool = True) -> str:
    present = [split for split in SPLITS if splits[split].shards]
    n = questions.height
    column = lambda name: questions[name] if name in questions.columns else pl.Series(name, [None] * n)  # noqa: E731
    with_figure = int(column("problem_image").is_not_null().sum())
    picture_options = int(column("choice_images").is_not_null().sum())
    sources = Counter()
    for source, count in _value_counts(column("source").to_frame()):
        sources[source_label(source[0])] += count
    converted = int((column("problem") != column("problem_original")).sum()) if "problem_original" in questions.columns else None
    orders = Counter({order[0]: count for order, count in _value_counts(column("shuffle").to_frame())})
    family_sizes = column("duplicate_group").drop_nulls().value_counts(name="size")["size"]
    shared = int(family_sizes.filter(family_sizes > 1).sum())
    kept_source_split = int(((column("source_split") == column("split")).fill_null(False)).sum())
    split_rows = [[s, splits[s].num_examples, len(splits[s].shards), f"`data/{s}-*`"] for s in present]

    out = [f"# {PRETTY_NAME}", ""]
    out.append(
        f"{n:,} multiple-choice questions on science, technology, engineering and math, each with at least "
        "one picture (in the question or as the options), in the layout of the public STEM release "
        "(*Measuring Vision-Language STEM Skills of Neural Models*, ICLR 2024). Built by stemforge."
    )
    out += ["", "## Dataset structure", ""]
    out.append(
        "One row per question. `problem` is the question text (formulas in LaTeX, `\\( ... \\)`); "
        "`problem_pic` its figure as PNG bytes (null when `pic_prob` is false); the options are either "
        "texts in `choices` or PNG pictures in `choices_pic` (exactly one is set; `pic_choice` tells which), "
        "2 to 5 of them; `answer_idx` is the 0-based index of the correct option. `subject` is one of "
        "science, technology, engineering, math; `grade` a slug such as `grade-6` (null for technology); "
        "`skill` a slug."
    )
    out += ["", _table(["split", "questions", "shards", "files"], split_rows), ""]
    out += ["## Questions per split and subject", "", _counts_table(questions, present), ""]
    out.append(f"{with_figure:,} questions have a figure; {picture_options:,} have picture options.")
    out += ["", "## How the set was built", ""]
    out.append("- **Sources** (questions kept per source):")
    out += [f"  - `{label}`: {count:,}" for label, count in sorted(sources.items())]
    filtered = "- **Filtering**: only questions with at least one picture are kept"
    out.append(filtered + (f", at most {facts.cap_per_skill:,} per skill." if facts.cap_per_skill else "."))
    removed = sum(facts.duplicates_by_kind.values())
    kinds = ", ".join(f"{count:,} {kind}" for kind, count in sorted(facts.duplicates_by_kind.items()))
    out.append(
        f"- **Deduplication**: {removed:,} duplicate records removed" + (f" ({kinds})" if kinds else "")
        + ": same normalized text, the same or a near-equal figure (re-encoded, resized, re-scanned) and the same "
        "options. Records of one question that disagree on the answer are all dropped. Questions that share a "
        f"figure and a stem form a family, kept in one split: {shared:,} questions belong to families of two or more."
    )
    if converted is not None:
        out.append(
            f"- **LaTeX conversion**: math written in Unicode or plain text is rewritten as inline LaTeX "
            f"`\\( ... \\)`, TeX already present keeps its content; {converted:,} question texts changed."
        )
    order_text = ", ".join(f"{count:,} {name}" for name, count in sorted(orders.items()) if name is not None)
    seed = f" with seed {facts.seed}" if facts.seed is not None else ""
    out.append(
        f"- **Option shuffling**: the options of each question are put in a random order{seed}, the answer "
        f"following its option; options that are only the labels of a figure's parts (`A`, `B`, ...) or that "
        f"refer to other options (\"All of the above\") keep their order" + (f" ({order_text})." if order_text else ".")
    )
    ratios = ""
    if facts.split_ratios:
        ratios = " in the proportions " + " / ".join(f"{r:g}" for r in facts.split_ratios) + " (train / valid / test)"
    out.append(
        f"- **Splitting**: families are dealt to train, valid and test per subject, spreading each skill{ratios}{seed}; a "
        "family never straddles two splits, and a question that came with a split from its "
        f"source keeps it ({kept_source_split:,} questions). Rows within a split are ordered by question id."
    )
    out += ["", "## Hidden test answers", ""]
    if test_answers_hidden:
        out.append(
            "The test shards carry `answer_idx = -1`: the answers are hidden, as in the public STEM release. The "
            "answer key (`test_answer_key.jsonl`) and `index.parquet` (each row's question id) are written beside "
            "`data/` for local scoring; leave the answer key out of a public upload."
        )
    else:
        out.append("This export was written with the test answers in the test shards: it is not for a public leaderboard.")
    out += ["", "## License", ""]
    out.append(
        f"`{facts.license}`, as the STEM paper's dataset. The questions and pictures remain the property of "
        "their sources' owners; use the set for non-commercial research."
    )
    out += ["", "## Citation", "", "```bibtex", CITATION, "```", ""]
    return "\n".join(out)


def dataset_card(questions: pl.DataFrame, data_dir: Path, facts: BuildFacts | None = None, test_answers_hidden: bool = True) -> str:
    """The card's text for the shards in ``data_dir`` and the exported ``questions``."""
    facts = facts or BuildFacts()
    splits = shard_facts(data_dir)
    header = yaml.safe_dump(card_header(questions, splits, facts), sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{header}---\n\n{card_body(questions, splits, facts, test_answers_hidden)}"


def write_dataset_card(
    export_root: Path, questions: pl.DataFrame, facts: BuildFacts | None = None, test_answers_hidden: bool = True
) -> Path:
    path = Path(export_root) / CARD_NAME
    path.write_text(dataset_card(questions, Path(export_root) / "data", facts, test_answers_hidden), encoding="utf-8")
    return path
