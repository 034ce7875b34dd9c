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
