"""Issue 30, point 8: an imported model's name cannot pass for another one in the metrics and the
report: invisible characters (``paper\\u200b:Human``), forms NFKC changes (full-width letters)
and Latin mixed with a lookalike script (``r\\u0430ndom``, a Cyrillic a) are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.evaluation.stage import ImportRefused, import_predictions_file, reserved_name_reason
from pipelines.store.home import DataHome


@pytest.mark.parametrize("name", ["paper\u200b:Human", "r\u0430ndom", "rand\u043em", "\uff52andom", "random\u200d",
                                  "gpt\u202e4o", "x\u00a0y", "a\tb", "\u0440aper:Human", "m\u03bfdel"])
def test_lookalike_model_names_are_refused(tmp_path, name):
    assert reserved_name_reason(name)
    with pytest.raises(ImportRefused, match="is refused"):
        import_predictions_file(DataHome(tmp_path), Path(tmp_path / "none.jsonl"), name)


@pytest.mark.parametrize("name", ["my-model", "Qwen2-VL 7B", "GPT-4o (2024-05)", "x'; DROP TABLE metrics; --",
                                  "模型-7B", "модель", "ελληνικό"])
def test_ordinary_names_still_import(name):
    assert reserved_name_reason(name) is None
