"""Issue 30, point 17: an error names the file and stays one short line: a 300 MB bad id is
not echoed whole (it made a 314 MB error line)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipelines.evaluation.prediction_errors import PredictionsImportError
from pipelines.evaluation.predictions_import import import_predictions


def test_a_huge_bad_id_is_not_echoed_whole(tmp_path):
    path = tmp_path / "preds.jsonl"
    path.write_text(json.dumps({"question_id": "x" * 5_000_000, "prediction": 0}) + "\n")
    questions = pl.DataFrame({"question_id": ["q1"], "num_choices": [2], "split": ["test"], "answer_idx": [0],
                              "order": [0]})
    with pytest.raises(PredictionsImportError) as caught:
        import_predictions(path, "m", questions)
    message = str(caught.value)
    assert message.startswith("preds.jsonl line 1: unknown question id 'xxx")
    assert len(message) < 500 and "\n" not in message and "(5,000,022 characters)" in message


def test_a_full_disk_during_a_crawl_names_the_index_and_the_cause(tmp_path, monkeypatch):
    import sqlite3

    from pipelines.ingest.crawl import CrawlConfig, crawl
    from pipelines.ingest.crawl.frontier import Frontier
    from pipelines.ingest.crawl.raw_store import RawStoreError
    from support.loopback_site import Site, page

    real_commit = Frontier.commit
    calls = {"n": 0}

    def full(self):
        calls["n"] += 1
        if calls["n"] > 2 and self._in_txn:
            self.conn.execute("ROLLBACK")  # SQLite ends the transaction itself on SQLITE_FULL
            raise sqlite3.OperationalError("database or disk is full")
        real_commit(self)

    monkeypatch.setattr(Frontier, "commit", full)
    routes = {"/": page("<!doctype html><html><body>" + "".join(f'<a href="/{i}.html">{i}</a>' for i in range(30)) + "</body></html>")}
    routes.update({f"/{i}.html": page(f"<html><body>{i}</body></html>") for i in range(30)})
    with Site(routes) as site, pytest.raises(RawStoreError) as caught:
        crawl(CrawlConfig(base_url=site.base_url, rate_per_host=1000, burst=50, concurrency=2, timeout=5), tmp_path / "raw")
    message = str(caught.value)
    assert str(tmp_path / "raw" / "index.sqlite") in message and "disk holding it is full" in message, message
    assert "cannot rollback" not in message


def test_a_broken_xlsx_sheet_names_the_file(tmp_path):
    from hostile.test_fuzz_linear import _questions, _workbook
    from pipelines.evaluation.harness_import import read_vlmevalkit

    path = tmp_path / "m_stemforge_test.xlsx"
    path.write_bytes(_workbook(extra_rows=b'<row r="3"><c r="A3"><v>1</v></row>'))  # a cell never closed
    with pytest.raises(PredictionsImportError, match=r"^m_stemforge_test.xlsx: not a readable .xlsx workbook"):
        list(read_vlmevalkit(path, _questions()))


# ---- issue 30, point 17: every importer's error names the file, in one line of at most ~300 characters

_DEEP = "[" * 100_000  # past the JSON and YAML parsers' recursion limits
_BIG_NUMBER = "1" * 5000  # past Python's 4,300-digit limit on int(): a ValueError, not a JSONDecodeError
_BIG_FIELD = '"' + "x" * 200_000 + '"'  # past csv's 131,072-character field limit


def _one_line_naming(message: str, name: str) -> None:
    assert name in message and "\n" not in message and len(message) <= 320, message[:400]


@pytest.mark.parametrize("name, text, fmt", [
    ("deep.jsonl", _DEEP + "\n", "auto"),
    ("number.jsonl", '{"question_id": "q1", "prediction": ' + _BIG_NUMBER + "}\n", "auto"),
    ("header.csv", f"question_id,prediction,{_BIG_FIELD}\nq1,0,x\n", "auto"),
    ("row.csv", f"question_id,prediction\nq1,{_BIG_FIELD}\n", "auto"),
    ("m_stemforge_test.tsv", f"index\tquestion_id\tprediction\t{_BIG_FIELD}\n", "auto"),
    ("samples_deep.jsonl", '{"doc_id": 0}\n' + _DEEP + "\n", "lmms-eval"),
    ("samples_number.jsonl", '{"doc_id": ' + _BIG_NUMBER + "}\n", "lmms-eval"),
    ("not_a_zip.xlsx", "PK\x03\x04 not a workbook", "auto"),
])
def test_a_broken_predictions_file_names_itself(tmp_path, name, text, fmt):
    path = tmp_path / name
    path.write_text(text)
    questions = pl.DataFrame({"question_id": ["q1"], "num_choices": [2], "split": ["test"], "answer_idx": [0],
                              "order": [0], "problem_image": [None], "choices": [["a", "b"]], "choice_images": [None]})
    with pytest.raises(PredictionsImportError) as caught:
        import_predictions(path, "m", questions, fmt=fmt)
    _one_line_naming(str(caught.value), name)


@pytest.mark.parametrize("name, data", [("deep.yaml", _DEEP.encode()), ("latin1.yaml", b"name: caf\xe9\n"),
                                        ("tabs.yaml", b"a:\n\t- b\n")])
def test_a_broken_taxonomy_yaml_names_itself(tmp_path, name, data):
    from pipelines.profiles.cogme.taxonomy import TaxonomyError, load_taxonomy

    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(TaxonomyError) as caught:
        load_taxonomy(str(path))
    _one_line_naming(str(caught.value), name)


@pytest.mark.parametrize("row", [_BIG_FIELD + ",Recall,x,y", "q1,Recall\x00,x,y", "q1," + "R" * 100_000 + ",x,y"])
def test_a_broken_manual_tags_csv_names_itself(tmp_path, row):
    from pipelines.profiles.cogme.manual import ManualTagsError, load_manual_tags
    from pipelines.profiles.cogme.taxonomy import load_taxonomy

    path = tmp_path / "tags.csv"
    path.write_text("question_id,thinking,target,content\n" + row + "\n")
    with pytest.raises(ManualTagsError) as caught:
        load_manual_tags(path, load_taxonomy("stem"))
    _one_line_naming(str(caught.value), "tags.csv")


@pytest.mark.parametrize("kind, name, text", [
    ("json", "deep.json", _DEEP),
    ("json", "number.json", '[{"question": "x", "answer": ' + _BIG_NUMBER + "}]"),
    ("jsonl", "deep.jsonl", _DEEP + "\n"),
    ("jsonl", "number.jsonl", '{"question": "x", "answer": ' + _BIG_NUMBER + "}\n"),
    ("scienceqa", "problems.json", _DEEP),
])
def test_a_broken_import_file_is_quarantined_under_its_name(tmp_path, kind, name, text):
    from pipelines.ingest.importers import iter_import_records
    from pipelines.ingest.spec import parse_source_spec
    from pipelines.store.images import ImageStore

    path = tmp_path / name
    path.write_text(text)
    entries = list(iter_import_records(parse_source_spec(f"{kind}:{path}"), ImageStore(tmp_path / "images")))
    assert len(entries) == 1
    entry = entries[0]
    assert entry.source_key.split("#")[0] == name
    _one_line_naming(f"{entry.source_key}: {entry.reason}: {entry.detail or ''}", name)
