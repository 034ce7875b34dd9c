"""Seeded 64-bit hashes of question ids, the same in every process and library version.

A question id written by dedup is 16 hex digits, the first 64 bits of a sha256: already uniform,
so its hash is the seeded splitmix64 of those bits (vectorized). Any other id (a test's, an
importer's) is hashed by sha256 first.
"""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl

_HEX_ID = r"^[0-9a-f]{16}$"
_MASK = (1 << 64) - 1


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer, element-wise on a uint64 array (returns a new array)."""
    x = np.asarray(x, dtype=np.uint64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def question_id_bits(question_ids: pl.Series) -> np.ndarray:
    """Dedup's question ids (16 hex digits) as the uint64 they spell."""
    return question_ids.str.to_integer(base=16, dtype=pl.UInt64).to_numpy()


def other_id_hash(question_id: str, salt: str) -> int:
    """The hash of an id that is not 16 hex digits."""
    return int.from_bytes(hashlib.sha256(f"{salt}:{question_id}".encode()).digest()[:8], "big")


def question_id_hashes(question_ids: pl.Series, seed: int, salt: str) -> np.ndarray:
    """A uint64 per id: ``splitmix64(bits ^ splitmix64(seed mixed with salt))`` for dedup's ids,
    ``other_id_hash(id, f"{salt}:{seed}")`` for others. ``salt`` names the use (two uses of one
    seed draw independent hashes)."""
    keys = np.zeros(len(question_ids), dtype=np.uint64)
    hexed = question_ids.str.contains(_HEX_ID).fill_null(False).to_numpy()
    if hexed.any():
        bits = question_id_bits(question_ids.filter(hexed))
        mixed = int.from_bytes(hashlib.sha256(f"{salt}:{seed & _MASK}".encode()).digest()[:8], "big")
        keys[hexed] = splitmix64(bits ^ splitmix64(np.array([mixed], dtype=np.uint64)))
    others = np.flatnonzero(~hexed)
    keys[others] = [other_id_hash(qid, f"{salt}:{seed}") for qid in question_ids.gather(others).to_list()]
    return keys
