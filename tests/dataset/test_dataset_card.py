"""The export's README.md is a Hugging Face dataset card that agrees with its shards: the YAML
header parses, ``datasets`` and ``huggingface_hub`` accept it, its features and splits are
those of the Parquet files, and the same export writes the same bytes."""

from __future__ import annotations

import fnmatch
import hashlib
import io

import datasets
import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml
from huggingface_hub import DatasetCard, DatasetCardData
from PIL import Image

from pipelines.dataset.dataset_card import CARD_NAME, CITATION, BuildFacts, source_label
from pipelines.dataset.export import write_stem_export
from pipelines.store.images import ImageStore

SUBJECTS = ("science", "technology", "engineering", "math")
SPLITS = ("train", "train", "train", "valid", "test")


def png(i: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (12 + i % 7, 10), ((i * 37) % 256, (i * 91) % 256, 40)).save(buffer, format="PNG")
    return buffer.getvalue()


def questions_frame(store: ImageStore, n: int) -> pl.DataFrame:
    """``n`` questions in the lake's ``questions`` layout: figures, picture options, a Chinese one."""
    rows = []
    for i in range(n):
        subject = SUBJECTS[i % 4]
        pictures = i % 5 == 4
        choices = [f"option {j} of {i}" for j in range(2 + i % 3)]
        rows.append({
            "question_id": hashlib.sha256(str(i).encode()).hexdigest()[:16],
            "source": ("demo", "jsonl:/home/someone/private/q.jsonl?subject=x", "hf:/data/mmmu")[i % 3],
            "source_key": f"k{i}",
            "subject": subject,
            "grade": None if subject == "technology" else f"grade-{1 + i % 5}",
            "skill": f"skill-{i % 6}",
            "problem": "下图中哪个是三角形？" if i == 7 else f"What is \\( {i} \\times 2 \\)?",
            "problem_original": f"What is {i} × 2?" if i % 2 else f"What is \\( {i} \\times 2 \\)?",
            "problem_image": store.put(png(i)).image_hash,
            "choices": None if pictures else choices,
            "choice_images": [store.put(png(100 + i * 5 + j)).image_hash for j in range(3)] if pictures else None,
            "answer_idx": i % 2,
            "shuffle": "kept-order:figure-labels" if i % 10 == 3 else "shuffled",
            "split": SPLITS[i % 5],
            "duplicate_group": f"g{i // 2}",
            "source_split": "train" if i % 6 == 0 else None,
        })
    schema = {"choice_images": pl.List(pl.String), "choices": pl.List(pl.String), "grade": pl.String,
              "source_split": pl.String}
    return pl.DataFrame(rows, schema_overrides=schema)


FACTS = BuildFacts(seed=7, split_ratios=(0.6, 0.2, 0.2), cap_per_skill=2000, duplicates_by_kind={"exact": 3, "near": 2})


def header_and_body(text: str) -> tuple[dict, str]:
    assert text.startswith("---\n")
    header, _, body = text[4:].partition("\n---\n")
    return yaml.safe_load(header), body


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("card")
    store = ImageStore(root / "images")
    frame = questions_frame(store, 47)
    write_stem_export(frame, store, root / "export" / "stem", rows_per_shard=6, card=FACTS)
    return frame, store, root / "export" / "stem"


def test_header_parses_and_agrees_with_the_shards(exported):
    frame, _, export = exported
    header, body = header_and_body((export / CARD_NAME).read_text(encoding="utf-8"))
    shards = sorted((export / "data").glob("*.parquet"))
    # features: exactly what datasets reads from the shards' Arrow schema
    for shard in shards:
        from_shard = datasets.Features.from_arrow_schema(pq.read_schema(shard))
        assert datasets.Features._from_yaml_list(header["dataset_info"]["features"]) == from_shard
        assert from_shard._to_yaml_list() == header["dataset_info"]["features"]
    # splits: rows and sizes from the shards; every shard matched by exactly its split's pattern
    splits = {s["name"]: s for s in header["dataset_info"]["splits"]}
    assert list(splits) == ["train", "valid", "test"]
    patterns = {f["split"]: f["path"] for f in header["configs"][0]["data_files"]}
    for name, info in splits.items():
        files = [p for p in shards if fnmatch.fnmatch(f"data/{p.name}", patterns[name])]
        assert files == [p for p in shards if p.name.startswith(f"{name}-")] and files
        assert info["num_examples"] == sum(pq.read_metadata(p).num_rows for p in files)
        assert info["num_examples"] == frame.filter(pl.col("split") == name).height
        assert info["num_bytes"] > 0
    assert header["dataset_info"]["download_size"] == sum(p.stat().st_size for p in shards)
    assert header["dataset_info"]["dataset_size"] == sum(s["num_bytes"] for s in splits.values())
    assert header["license"] == "cc-by-nc-sa-4.0" and header["language"] == ["en", "zh"]
    assert header["size_categories"] == ["n<1K"] and "visual-question-answering" in header["task_categories"]
    assert header["pretty_name"] and "stem" in header["tags"]


def test_datasets_loads_the_export_as_the_card_says(exported, tmp_path):
    frame, _, export = exported
    header, _ = header_and_body((export / CARD_NAME).read_text(encoding="utf-8"))
    expected = {s["name"]: s["num_examples"] for s in header["dataset_info"]["splits"]}
    features = datasets.Features._from_yaml_list(header["dataset_info"]["features"])
    # the packaged Parquet builder on data/ (it calls the valid split "validation")
    plain = datasets.load_dataset("parquet", data_dir=str(export / "data"), cache_dir=str(tmp_path / "a"))
    assert {name: part.num_rows for name, part in plain.items()} == {
        {"valid": "validation"}.get(k, k): v for k, v in expected.items()
    }
    assert all(part.features == features for part in plain.values())
    # the folder itself, read through the card's configs and dataset_info
    carded = datasets.load_dataset(str(export), cache_dir=str(tmp_path / "b"))
    assert {name: part.num_rows for name, part in carded.items()} == expected
    assert carded["test"].unique("answer_idx") == [-1]
    # num_bytes: what datasets records for each split it builds (issue 27.6), either way of loading
    card_bytes = {s["name"]: s["num_bytes"] for s in header["dataset_info"]["splits"]}
    assert {name: part.info.splits[name].num_bytes for name, part in carded.items()} == card_bytes
    assert {name: part.info.splits[name].num_bytes for name, part in plain.items()} == {
        {"valid": "validation"}.get(k, k): v for k, v in card_bytes.items()
    }
    assert carded["train"].features == features


def test_huggingface_hub_card_parser_accepts_it(exported):
    _, _, export = exported
    text = (export / CARD_NAME).read_text(encoding="utf-8")
    card = DatasetCard(text)
    assert isinstance(card.data, DatasetCardData)
    header, body = header_and_body(text)
    assert card.data.to_dict() == header
    assert card.text.strip() == body.strip()
    assert DatasetCardData(**header).to_dict() == header


def test_body_counts_and_build_story(exported):
    frame, _, export = exported
    _, body = header_and_body((export / CARD_NAME).read_text(encoding="utf-8"))
    counts = frame.group_by("subject", "split").len()
    for subject in SUBJECTS:
        cells = [counts.filter((pl.col("subject") == subject) & (pl.col("split") == s))["len"].sum() for s in ("train", "valid", "test")]
        assert f"| {subject} | {cells[0]} | {cells[1]} | {cells[2]} | {sum(cells)} |" in body
    assert "| **total** | " in body and "47 multiple-choice questions" in body
    assert "`demo`: 16" in body and "`jsonl:q.jsonl`: 16" in body and "`hf:mmmu`: 15" in body
    assert "/home/someone" not in body and "private" not in body  # local folders stay private
    assert "5 duplicate records removed (3 exact, 2 near)" in body
    assert "46 questions belong to families of two or more" in body  # g0..g22 of two, g23 alone
    assert "23 question texts changed" in body  # the odd ones, the Chinese one among them
    assert "5 kept-order:figure-labels, 42 shuffled" in body and "with seed 7" in body
    assert "0.6 / 0.2 / 0.2" in body and "(6 questions)" in body  # kept their source's split
    assert "`answer_idx = -1`" in body and "leave the answer key out of a public upload" in body
    assert CITATION in body and "at most 2,000 per skill" in body


def test_same_export_same_card_bytes_and_the_card_follows_the_shards(exported, tmp_path):
    frame, store, export = exported
    again = tmp_path / "again" / "stem"
    write_stem_export(frame, store, again, rows_per_shard=6, card=FACTS, workers=2)
    assert (again / CARD_NAME).read_bytes() == (export / CARD_NAME).read_bytes()
    other = tmp_path / "other" / "stem"
    write_stem_export(frame, store, other, rows_per_shard=50, hide_test_answers=False)
    header, body = header_and_body((other / CARD_NAME).read_text(encoding="utf-8"))
    assert sorted(p.name for p in (other / "data").iterdir()) == [
        "test-00000-of-00001.parquet", "train-00000-of-00001.parquet", "valid-00000-of-00001.parquet"]
    assert "`answer_idx = -1`" not in body and "with the test answers in the test shards" in body
    assert "duplicate records removed" in body and "seed" not in body.split("Option shuffling")[1].split("\n")[0]


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("demo", "demo"),
        ("http://127.0.0.1:8000/?layout=site.toml", "127.0.0.1:8000"),
        ("hf:/srv/data/MMMU?subject=id", "hf:MMMU"),
        ("json:/a/b/SceMQA/", "json:SceMQA"),
        ("python:/x/y/corpus_sources.py:gaokao_slice?per_file=7", "python:corpus_sources:gaokao_slice"),
        ("python:mypkg.mod:records", "python:mypkg.mod:records"),
    ],
)
def test_source_labels_hide_local_folders(text, label):
    assert source_label(text) == label
