"""The vectorized helpers of dedup give what their plain, row-by-row definitions give."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl

from pipelines.clean.dedup import dedup as dedup_module
from pipelines.clean.dedup.dedup import _by_distinct_list, _duplicated_in_order, _hex_series
from pipelines.store.id_hash import question_id_bits


def _sorted_order(keys: pl.DataFrame) -> np.ndarray:
    return keys.select(pl.arg_sort_by(*keys.columns)).to_series().to_numpy()


def test_duplicated_in_order_is_is_duplicated():
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 50, 400):
        keys = pl.DataFrame({
            "source": pl.Series([None if x == 0 else f"s{x}" for x in rng.integers(0, 3, n).tolist()], dtype=pl.String),
            "source_key": pl.Series([f"k{x}" for x in rng.integers(0, 40, n).tolist()], dtype=pl.String),
        })
        got = _duplicated_in_order(keys, _sorted_order(keys))
        assert got.tolist() == keys.is_duplicated().to_list()


def _text_options(lists: pl.DataFrame) -> pl.DataFrame:
    return lists.select(
        pl.col("choices").list.eval(pl.element().str.to_uppercase()).alias("upper"),
        (pl.lit("t:") + pl.col("choices").list.sort().list.join("|")).alias("key"),
    )


def _choices() -> pl.Series:
    rows = [["b", "a"], None, ["a", "b"], [], ["b", "a"], None, ["x"], [], ["a", "b"], ["é", "a"]]
    return pl.Series("choices", rows, dtype=pl.List(pl.String))


def test_by_distinct_list_is_row_by_row():
    choices = _choices()
    assert _by_distinct_list(choices, _text_options).equals(_text_options(choices.to_frame()))
    empty = choices.clear()
    assert _by_distinct_list(empty, _text_options).equals(_text_options(empty.to_frame()))


def test_by_distinct_list_survives_hash_collisions(monkeypatch):
    """Every list hashing alike must not give rows another list's values."""
    monkeypatch.setattr(pl.Series, "hash", lambda self, seed=0: pl.Series(np.zeros(len(self), dtype=np.uint64)))
    choices = _choices()
    assert _by_distinct_list(choices, _text_options).equals(_text_options(choices.to_frame()))


def test_question_ids_as_hex_strings_and_integers():
    identities = ["a\x1e-\x1e-", "é\x1eimg\x1et:1\x1f2", ""]
    digests = b"".join(hashlib.sha256(x.encode("utf-8")).digest()[:8] for x in identities)
    hex_ids = _hex_series("question_id", digests.hex().encode("ascii"), len(identities))
    assert hex_ids.to_list() == [hashlib.sha256(x.encode("utf-8")).hexdigest()[:16] for x in identities]
    assert hex_ids.dtype == pl.String and hex_ids.name == "question_id"
    assert question_id_bits(hex_ids).tolist() == np.frombuffer(digests, dtype=">u8").tolist()
    assert _hex_series("question_id", b"", 0).len() == 0


def test_questions_keep_ids_and_options_by_row():
    frame = pl.DataFrame({
        "source": ["s", "s", "s"], "source_key": ["1", "2", "3"], "problem": ["a", "b", "c"],
        "problem_image": [None, "img", None], "choices": [["1", "2"], None, ["2", "1"]],
        "choice_images": [None, ["p", "q"], None], "answer_idx": [0, 1, -1],
    }, schema_overrides={"choices": pl.List(pl.String), "choice_images": pl.List(pl.String)})
    q = dedup_module._Questions(frame, dedup_module.TextForms())
    assert q.ids.tolist() == question_id_bits(q.question_id).tolist()
    assert q.problem_image([2, 1]) == [None, "img"]
    assert q.image_options([0, 1, 2]) == {1: ("p", "q")}
    assert q.has_options.tolist() == [False, True, False]
