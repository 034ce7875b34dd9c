"""Vectorized MinHash and LSH banding for short texts.

Shingles of a normalized text are its character 3-grams (the whole text when it is shorter
than 3 characters, so short texts are never skipped) plus its space-separated word tokens.
Shingle hashes are computed for a whole batch of texts at once: the texts are concatenated
into one array of code points, a polynomial hash of every substring comes from prefix sums
(arithmetic mod 2^64), and a splitmix64 finalizer mixes it. MinHash applies ``num_perm``
affine maps mod 2^32 to the 32-bit shingle hashes and takes the minimum per text with
``np.minimum.reduceat``. Everything is seeded and independent of Python's salted hash().
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

NGRAM = 3
_BASE = 0x100000001B3  # odd, so it is invertible mod 2^64
_BASE_INV = pow(_BASE, -1, 1 << 64)
_WORD_TAG = np.uint64(0x9E3779B97F4A7C15)
_U64 = np.uint64
EMPTY = np.uint32(0xFFFFFFFF)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer, element-wise on a uint64 array (returns a new array)."""
    x = np.asarray(x, dtype=np.uint64)
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def _powers(base: int, n: int) -> np.ndarray:
    out = np.full(n, base, dtype=np.uint64)
    out[0] = 1
    return np.cumprod(out, dtype=np.uint64)


def shingle_hashes(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """64-bit hashes of the shingles of each text, grouped by text.

    Returns (hashes, offsets): the shingles of text i are hashes[offsets[i]:offsets[i+1]].
    Texts are expected normalized (single spaces). An empty text has no shingles.
    """
    n = len(texts)
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=n)
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.uint64), np.zeros(n + 1, dtype=np.int64)
    cp = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    cp = cp.astype(np.uint64) + _U64(1)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    ends = starts + lengths
    doc_of_pos = np.repeat(np.arange(n, dtype=np.int64), lengths)
    end_of_pos = ends[doc_of_pos]
    pos = np.arange(total, dtype=np.int64)

    # prefix[i] = sum_{j<i} cp[j] * B^-j; substring [l, r) hashes to B^(r-1) * (prefix[r] - prefix[l]).
    prefix = np.zeros(total + 1, dtype=np.uint64)
    np.cumsum(cp * _powers(_BASE_INV, total), dtype=np.uint64, out=prefix[1:])
    pow_b = _powers(_BASE, total)

    def substring_hash(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return pow_b[hi - 1] * (prefix[hi] - prefix[lo])

    # Character n-grams; a text shorter than NGRAM is one shingle.
    gram_lo = pos[pos + NGRAM <= end_of_pos]
    short = np.flatnonzero((lengths > 0) & (lengths < NGRAM))
    lo = np.concatenate([gram_lo, starts[short]])
    hi = np.concatenate([gram_lo + NGRAM, ends[short]])
    gram_doc = np.concatenate([doc_of_pos[gram_lo], short])
    gram_hash = substring_hash(lo, hi)

    # Word tokens: maximal runs without a space.
    is_word = cp != _U64(33)  # space (32) + 1
    prev_word = np.r_[False, is_word[:-1]]
    next_word = np.r_[is_word[1:], False]
    at_start = np.zeros(total, dtype=bool)
    at_start[starts[lengths > 0]] = True
    at_end = np.zeros(total, dtype=bool)
    at_end[ends[lengths > 0] - 1] = True
    w_lo = np.flatnonzero(is_word & (~prev_word | at_start))
    w_hi = np.flatnonzero(is_word & (~next_word | at_end)) + 1
    word_hash = substring_hash(w_lo, w_hi) ^ _WORD_TAG

    hashes = splitmix64(np.concatenate([gram_hash, word_hash]))
    docs = np.concatenate([gram_doc, doc_of_pos[w_lo]])
    order = np.argsort(docs, kind="stable")
    counts = np.bincount(docs, minlength=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return hashes[order], offsets


@dataclass(frozen=True)
class LshParams:
    num_perm: int = 64
    bands: int = 8
    rows: int = 8

    def __post_init__(self):
        if self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands*rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}")


class MinHasher:
    """Seeded MinHash signatures (uint32) for many texts at once."""

    def __init__(self, num_perm: int = 64, seed: int = 1):
        rng = np.random.default_rng(seed)
        self.num_perm = num_perm
        self.a = (rng.integers(0, 1 << 32, num_perm, dtype=np.uint64) | _U64(1)).astype(np.uint32)
        self.b = rng.integers(0, 1 << 32, num_perm, dtype=np.uint64).astype(np.uint32)

    def signatures(self, texts: Sequence[str], chunk: int = 50_000) -> np.ndarray:
        """(len(texts), num_perm) uint32; an empty text's signature is all 0xFFFFFFFF."""
        out = np.empty((len(texts), self.num_perm), dtype=np.uint32)
        for c in range(0, len(texts), chunk):
            part = texts[c : c + chunk]
            hashes, offsets = shingle_hashes(part)
            out[c : c + len(part)] = self.signatures_of_shingles(hashes, offsets)
        return out

    def signatures_of_shingles(self, hashes: np.ndarray, offsets: np.ndarray, block: int = 32_768) -> np.ndarray:
        n = len(offsets) - 1
        sig = np.full((n, self.num_perm), EMPTY, dtype=np.uint32)
        counts = np.diff(offsets)
        nonempty = np.flatnonzero(counts > 0)
        if not len(nonempty):
            return sig
        x = (hashes >> _U64(32)).astype(np.uint32)[:, None]
        # Blocks of whole texts, about `block` shingles each, so reduceat never spans a block.
        cuts = np.searchsorted(offsets[nonempty], np.arange(0, offsets[-1], block), side="left")
        cuts = np.unique(np.r_[cuts, len(nonempty)])
        buf = np.empty((block + int(counts.max()), self.num_perm), dtype=np.uint32)
        for i0, i1 in zip(cuts[:-1], cuts[1:]):
            docs = nonempty[i0:i1]
            s0, s1 = offsets[docs[0]], offsets[docs[-1] + 1]
            m = buf[: s1 - s0]
            np.multiply(x[s0:s1], self.a[None, :], out=m)
            np.add(m, self.b[None, :], out=m)
            sig[docs] = np.minimum.reduceat(m, offsets[docs] - s0, axis=0)
        return sig


def band_keys(signatures: np.ndarray, params: LshParams) -> np.ndarray:
    """(n, bands) uint64 bucket keys; a band's key mixes its rows and the band's index."""
    n = len(signatures)
    keys = np.empty((n, params.bands), dtype=np.uint64)
    sig = signatures.astype(np.uint64)
    for b in range(params.bands):
        acc = np.full(n, (b + 1) * 0xD6E8FEB86659FD93 & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
        for r in range(params.rows):
            acc = splitmix64(acc ^ sig[:, b * params.rows + r])
        keys[:, b] = acc
    return keys


def estimated_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """Row-wise fraction of equal MinHash values (both empty texts give 1.0)."""
    return (np.asarray(sig_a) == np.asarray(sig_b)).mean(axis=-1)


def candidate_pairs(keys: np.ndarray) -> np.ndarray:
    """All pairs (i < j) sharing a bucket in at least one band, as a sorted unique (k, 2) array.
    Quadratic in bucket size: callers block large buckets further."""
    from pipelines.clean.dedup.image_index import pairs_within_groups, unique_pairs

    chunks = []
    for b in range(keys.shape[1]):
        order = np.argsort(keys[:, b], kind="stable")
        k = keys[order, b]
        starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        sizes = np.diff(np.r_[starts, len(k)])
        chunks.append(pairs_within_groups(order, starts, sizes))
    return unique_pairs(np.concatenate(chunks), len(keys))
