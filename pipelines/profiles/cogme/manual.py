"""Import hand-made CogME annotations from CSV.

Layout (header required, UTF-8)::

    question_id,target1,target2,target3,content1,content2,content3,thinking

Empty cells are unused slots. Equivalent layout: ``question_id,target,content,thinking``
where ``target`` and ``content`` hold up to three sub-components separated by ``;``.
Sub-component names are matched case-insensitively against the taxonomy. Each tag's
source is ``manual:<file name>``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl

from pipelines.profiles.cogme.tags import TagRuleError, tag_rows, tags_frame
from pipelines.profiles.cogme.taxonomy import Taxonomy


class ManualTagsError(ValueError):
    """A manual annotation file cannot be imported (one-line message naming the file and line)."""


_SLOTS = {"TARGET": ("target1", "target2", "target3"), "CONTENT": ("content1", "content2", "content3")}
_LISTS = {"TARGET": "target", "CONTENT": "content"}


MAX_ERROR_CHARS = 300


def load_manual_tags(csv_path: str | Path, taxonomy: Taxonomy) -> pl.DataFrame:
    """The tags of a manual annotation CSV; ManualTagsError, one line of at most ~300 characters
    naming the file (and the line where known), for anything wrong with it."""
    path = Path(csv_path)
    try:
        return _load_manual_tags(path, taxonomy)
    except csv.Error as exc:
        raise ManualTagsError(f"manual tags {path.name}: malformed CSV ({exc})"[:MAX_ERROR_CHARS]) from None
    except OSError as exc:
        raise ManualTagsError(f"manual tags {path.name}: cannot be read: {exc.strerror or exc}") from None
    except ManualTagsError as exc:
        message = " ".join(str(exc).split())
        if len(message) <= MAX_ERROR_CHARS:
            raise
        raise ManualTagsError(f"{message[:MAX_ERROR_CHARS - 30]}... ({len(message):,} characters)") from None


def _load_manual_tags(path: Path, taxonomy: Taxonomy) -> pl.DataFrame:
    if not path.is_file():
        raise ManualTagsError(f"manual tags {path}: no such file")
    source = f"manual:{path.name}"
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ManualTagsError(f"manual tags {path.name}: not UTF-8 text") from None
    reader = csv.DictReader(text.splitlines())
    header = [h.strip().lower() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    if "question_id" not in header or "thinking" not in header:
        raise ManualTagsError(f"manual tags {path.name}: header needs question_id, thinking and target/content columns")
    slotted = all(s in header for s in _SLOTS["TARGET"] + _SLOTS["CONTENT"])
    listed = all(s in header for s in _LISTS.values())
    if not (slotted or listed):
        raise ManualTagsError(
            f"manual tags {path.name}: header needs target1..target3 and content1..content3 (or target and content lists)"
        )

    rows: list[dict] = []
    seen: dict[str, int] = {}
    for record in reader:
        line = reader.line_num
        where = f"manual tags {path.name} line {line}"
        qid = (record.get("question_id") or "").strip()
        if not qid:
            raise ManualTagsError(f"{where}: empty question_id")
        if qid in seen:
            raise ManualTagsError(f"{where}: question {qid} already annotated on line {seen[qid]}")
        seen[qid] = line
        picked: dict[str, list[str]] = {}
        for component in ("TARGET", "CONTENT"):
            if slotted:
                cells = [(record.get(col) or "") for col in _SLOTS[component]]
                extra = (record.get(_LISTS[component]) or "") if listed else ""
                cells += extra.split(";") if extra.strip() else []
            else:
                cells = (record.get(_LISTS[component]) or "").split(";")
            labels = [c.strip() for c in cells if c and c.strip()]
            if len(labels) > taxonomy.limits[component]:
                raise ManualTagsError(
                    f"{where}: {len(labels)} {component} tags for question {qid}, at most {taxonomy.limits[component]}"
                )
            if not labels:
                raise ManualTagsError(f"{where}: question {qid} has no {component} tag")
            resolved = []
            for label in labels:
                name = taxonomy.resolve(component, label)
                if name is None:
                    raise ManualTagsError(
                        f"{where}: unknown {component} sub-component {label!r} (taxonomy {taxonomy.name!r})"
                    )
                if name in resolved:
                    raise ManualTagsError(f"{where}: {component} {name!r} given twice")
                resolved.append(name)
            picked[component] = resolved
        thinking_cell = (record.get("thinking") or "").strip()
        if not thinking_cell:
            raise ManualTagsError(f"{where}: question {qid} needs exactly one THINKING level")
        if any(sep in thinking_cell for sep in ";,|/"):
            raise ManualTagsError(
                f"{where}: several THINKING levels {thinking_cell!r}; tag only the highest one"
            )
        thinking = taxonomy.resolve("THINKING", thinking_cell)
        if thinking is None:
            raise ManualTagsError(f"{where}: unknown THINKING level {thinking_cell!r}")
        rows.extend(tag_rows(qid, source, picked["TARGET"], picked["CONTENT"], thinking, taxonomy))
    try:
        return tags_frame(rows, taxonomy)
    except TagRuleError as exc:
        raise ManualTagsError(f"manual tags {path.name}: {exc}") from None
