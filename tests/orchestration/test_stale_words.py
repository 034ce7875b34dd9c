"""What the README, --help and the UI say matches what the code does (issue 28, item 8)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.orchestration.cli import main
from pipelines.store.checksums import MANIFEST_NAME, checksum_lines, parse_checksums
from pipelines.store.home import DataHome

REPO = Path(__file__).resolve().parents[2]


def help_text(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "pipelines.orchestration.cli", *args, "--help"],
                          capture_output=True, text=True, check=True, cwd=REPO).stdout


def test_build_help_names_every_source_kind():
    from pipelines.ingest.sources import source_kinds

    text = " ".join(help_text("build").split())
    for kind in source_kinds().values():
        assert kind.usage in text, kind.usage
    assert "hf:PATH" in text


def test_latex_help_says_what_it_does():
    text = help_text("latex")
    assert "stdin" in text and "LaTeX" in text and "example:" in text


def test_the_dedup_asset_says_how_it_finds_duplicates():
    from assets.clean import deduplicated_questions

    description = deduplicated_questions.specs_by_key[deduplicated_questions.key].description
    assert "MinHash" not in description and "LSH" not in description
    assert "perceptual image hashes" in description


def test_the_readme_duplicates_query_reads_evidence_dedup_writes():
    readme = (REPO / "README.md").read_text()
    (query,) = re.findall(r"```sql\n(-- duplicates removed.*?)```", readme, flags=re.S)
    assert "jaccard" not in query
    evidence = [json.dumps({"text": "equal", "image": "equal", "options": "equal"}),
                json.dumps({"text": "equivalent", "options": "equivalent", "hamming": 3})]
    duplicates = pl.DataFrame({"kind": ["exact", "near"], "evidence": evidence})  # noqa: F841 (read by duckdb)
    rows = duckdb.sql(query).fetchall()
    assert rows == [("exact", "equal", "equal", 1), ("near", "equivalent", "equivalent", 1)]


def fake_export(home: DataHome) -> None:
    root = home.export.parent
    (root / "data").mkdir(parents=True)
    home.lake.mkdir(parents=True)
    pq.write_table(pa.table({"question_id": ["a", "b"]}), home.lake_path("questions"))
    pq.write_table(pa.table({"question_id": ["a", "b"]}), root / "data" / "test-00000.parquet")
    (root / "test_answer_key.jsonl").write_text('{"question_id": "a", "answer_idx": 1}\n')
    (root / "README.md").write_text("card\n")
    import hashlib

    digests = {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in sorted(root.rglob("*")) if p.is_file()}
    (root / MANIFEST_NAME).write_text(checksum_lines(digests))


def test_a_stem_copy_leaves_the_test_answer_key_out_unless_asked(tmp_path, capsys):
    home = DataHome(tmp_path / "home")
    fake_export(home)
    upload = tmp_path / "upload"
    assert main(["export", "--format", "stem", "--out", str(upload), "--home", str(home.root)]) == 0
    assert not (upload / "test_answer_key.jsonl").exists() and (upload / "data" / "test-00000.parquet").exists()
    manifest = parse_checksums((upload / MANIFEST_NAME).read_text())
    assert manifest and "test_answer_key.jsonl" not in manifest and "README.md" in manifest
    assert "left out of the copy" in capsys.readouterr().out
    private = tmp_path / "private"
    assert main(["export", "--format", "stem", "--out", str(private), "--home", str(home.root), "--with-answer-key"]) == 0
    assert (private / "test_answer_key.jsonl").exists()
    assert "test_answer_key.jsonl" in parse_checksums((private / MANIFEST_NAME).read_text())


def test_the_vlmevalkit_table_ends_its_lines_with_lf(tmp_path):
    import pandas as pd

    from pipelines.dataset.harness_export import _vlmevalkit
    from pipelines.store.images import ImageStore
    from support.images import real_png

    store = ImageStore(tmp_path / "images")
    picture = store.put(real_png(1)).image_hash
    base = {"subject": "math", "grade": "g", "skill": "s", "choice_images": None, "answer_idx": 0,
            "problem_image": picture, "choices": ["x", "y"]}
    rows = [{**base, "question_id": "a", "problem": "One line?"},
            {**base, "question_id": "b", "problem": "Two\r\nlines and a lone\rreturn?"}]
    result = _vlmevalkit(pl.DataFrame(rows), store, tmp_path, "test")
    raw = result.files[0].read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\r\n") == 1  # only the one inside the quoted question
    assert raw.count(b"\n") == 4  # header, two rows, and the line break inside the question
    table = pd.read_csv(result.files[0], sep="\t")
    assert list(table["question"]) == [r["problem"] for r in rows]
