"""The per-skill cap's rank keys (``pipelines.store.id_hash``): a seeded mix of a dedup question id's
bits, sha256 for other ids."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl

from pipelines.clean.filtering import cap_per_skill, cap_rank_keys
from pipelines.store.id_hash import other_id_hash


def _ids(n: int) -> list[str]:
    return [hashlib.sha256(str(i).encode()).hexdigest()[:16] for i in range(n)]


def test_keys_of_dedup_ids_are_seeded_and_do_not_depend_on_the_other_ids():
    ids = _ids(1000)
    keys = cap_rank_keys(pl.Series(ids), seed=0)
    assert len(np.unique(keys)) == 1000
    assert (cap_rank_keys(pl.Series(ids[::-1]), seed=0) == keys[::-1]).all()
    assert (cap_rank_keys(pl.Series(ids[:10]), seed=0) == keys[:10]).all()
    assert not (cap_rank_keys(pl.Series(ids), seed=1) == keys).any()
    # the keep order is spread: about half of the ids rank in the lower half
    assert 400 < int((keys < np.uint64(2**63)).sum()) < 600


def test_other_ids_use_the_sha256_key_whatever_they_are_mixed_with():
    ids = ["q1", _ids(1)[0], "0123456789ABCDEF", "0123456789abcdef0"]
    keys = cap_rank_keys(pl.Series(ids), seed=3)
    for at in (0, 2, 3):
        assert int(keys[at]) == other_id_hash(ids[at], "cap:3")
    assert int(keys[1]) != other_id_hash(ids[1], "cap:3")


def test_cap_keeps_the_same_questions_in_any_row_order():
    frame = pl.DataFrame({"question_id": _ids(50) + ["plain-1", "plain-2"], "subject": "math", "source": "demo",
                          "source_key": [f"k{i}" for i in range(52)],
                          "skill": ["a"] * 40 + ["b"] * 12})
    kept, over = cap_per_skill(frame, cap=10, seed=5)
    assert kept.height == 20 and over.height == 32
    again, _ = cap_per_skill(frame.sample(fraction=1.0, shuffle=True, seed=1), cap=10, seed=5)
    assert sorted(again["question_id"]) == sorted(kept["question_id"])
    assert set(over["detail"]) == {"math/a", "math/b"}
