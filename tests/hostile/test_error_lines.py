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
