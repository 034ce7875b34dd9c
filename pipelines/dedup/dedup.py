"""Exact and near-duplicate removal for multiple-choice quiz questions.

Identity and exact duplicates
    A question's identity is its normalized text, the sha256 of its image and the sorted
    multiset of its options (``normalize.question_identity``); ``question_id`` is the first
    16 hex characters of the identity's sha256. Records with the same question_id are exact
    duplicates. The kept record of any group is the one with the smallest
    (source, source_key).

Conflicting answers
    Answers are compared by option content (normalized text or image hash), never by index.
    When the records of one identity disagree on the answer, none of them is kept: every
    member goes to quarantine, since nothing tells which answer is right. A record whose
    answer is unknown (-1) agrees with any answer. A near duplicate whose answer differs from
    its group's kept record is quarantined itself (the kept record stays).

Near duplicates
    Work runs on one representative per identity. Candidates come from blocks that share an
    exact key (the math tokens of the text, i.e. its numbers and operators in order, and the
    option multiset for text options or the option count for image options) and one of:
    - a band of the problem image's perceptual hash (multi-index hashing with
      ``image_hamming + 1`` bands, so every pair within ``image_hamming`` shares a band);
    - for image options without a problem image, a band of any option's perceptual hash
      (near-equal option multisets match every option within ``image_hamming``, so they
      share one);
    - for questions without images, a MinHash LSH bucket of the text (character 3-grams
      plus word tokens).
    Blocks larger than ``max_block`` are split further by the text's LSH buckets, so
    templated questions never produce quadratic candidate sets.
    A candidate pair is confirmed only when: equal math tokens and text-option multisets;
    equal normalized texts or MinHash-estimated Jaccard >= ``text_threshold``; problem
    images both absent or near-equal; image options matched one to one, each pair
    near-equal. Images are near-equal when byte-identical, or when their perceptual hashes
    are within ``image_hamming`` bits and (when thumbnails are given) their 16x16 thumbnails
    within ``thumbnail_tolerance``: the 64-bit hash alone cannot tell apart sparse line
    drawings that differ in a detail (the hands of a clock, the poles of a magnet). Groups are formed greedily in the kept-record order: an unassigned
    record becomes a representative and takes its confirmed, still unassigned neighbours.
    Every member is thus confirmed against its representative directly; matches never chain
    (A~B and B~C with A!~C leaves C out of A's group).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import polars as pl

from .image_index import band_layout, iter_pairs_within_groups
from .minhash import LshParams, MinHasher, band_keys, splitmix64
from .normalize import math_tokens, normalize_text
from .phash import thumbnail_distance

STAGE = "dedup"
REASON_CONFLICT = "conflicting answers for the same question"
REASON_NEAR_CONFLICT = "near duplicate with a conflicting answer"
_U64 = np.uint64
_NO_HASH = np.uint64(0xFFFFFFFFFFFFFFFF)
_PAIR_CHUNK = 1 << 18  # candidate pairs generated and filtered at a time

DUPLICATES_SCHEMA = {
    "source": pl.String,
    "source_key": pl.String,
    "question_id": pl.String,
    "kept_question_id": pl.String,
    "kind": pl.String,
    "evidence": pl.String,
}
QUARANTINE_SCHEMA = {
    "source": pl.String,
    "source_key": pl.String,
    "stage": pl.String,
    "reason": pl.String,
    "detail": pl.String,
}
REQUIRED_COLUMNS = (
    "source", "source_key", "problem", "problem_image", "choices", "choice_images", "answer_idx",
)


class DedupInputError(ValueError):
    """The questions frame cannot be deduplicated; the message says why."""


@dataclass(frozen=True)
class DedupConfig:
    """Thresholds of near-duplicate confirmation and the LSH/MIH parameters.

    text_threshold: minimum MinHash-estimated Jaccard similarity of the texts' shingles.
    image_hamming: maximum perceptual-hash Hamming distance of near-equal images.
    num_perm/bands/rows: MinHash LSH; 64 permutations in 8 bands of 8 rows is datasketch's
      optimal choice for threshold 0.7.
    max_block: candidate blocks larger than this are split by text LSH buckets.
    thumbnail_tolerance: largest mean absolute gray-level difference (0-255) of the 16x16
      thumbnails of near-equal images (measured on the demo site: re-encoded/resized copies
      <= 2.5, distinct look-alike drawings >= 4.5).
    """

    text_threshold: float = 0.7
    image_hamming: int = 4
    num_perm: int = 64
    bands: int = 8
    rows: int = 8
    seed: int = 1
    max_block: int = 64
    thumbnail_tolerance: float = 3.0

    def __post_init__(self):
        if not 0.0 < self.text_threshold <= 1.0:
            raise ValueError(f"text_threshold must be in (0, 1], got {self.text_threshold}")
        if not 0 <= self.image_hamming < 32:
            raise ValueError(f"image_hamming must be in [0, 32), got {self.image_hamming}")
        LshParams(self.num_perm, self.bands, self.rows)

    @property
    def lsh(self) -> LshParams:
        return LshParams(self.num_perm, self.bands, self.rows)


@dataclass
class DedupResult:
    kept: pl.DataFrame
    duplicates: pl.DataFrame
    quarantine: pl.DataFrame


def _key64(*parts: str) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).digest(), "big")


def _mix(acc: np.ndarray, value) -> np.ndarray:
    return splitmix64(np.bitwise_xor(acc, value))


class _Questions:
    """Per-record derived columns: normalization runs once per distinct string, the rest in
    Polars; the results are Python lists for the per-pair work."""

    def __init__(self, frame: pl.DataFrame, phash_of: Mapping[str, int]):
        self.n = frame.height
        self.phash_of = phash_of
        strings = pl.concat(
            [frame["problem"].drop_nulls(), frame["choices"].explode().drop_nulls()], how="vertical"
        ).unique()
        originals = strings.to_list()
        normalized = [normalize_text(x) for x in originals]
        mapping = dict(zip(originals, normalized))

        def norm_expr(col: pl.Expr) -> pl.Expr:
            return col.replace_strict(mapping, default="", return_dtype=pl.String)

        derived = frame.select(
            "source",
            "source_key",
            "problem_image",
            "choice_images",
            "answer_idx",
            norm_expr(pl.col("problem")).alias("problem_norm"),
            pl.col("choices").list.eval(norm_expr(pl.element())).alias("choices_norm"),
        ).with_columns(
            pl.when(pl.col("choices_norm").is_not_null())
            .then(pl.lit("t:") + pl.col("choices_norm").list.sort().list.join("\x1f"))
            .when(pl.col("choice_images").is_not_null())
            .then(pl.lit("i:") + pl.col("choice_images").list.sort().list.join("\x1f"))
            .otherwise(pl.lit("-"))
            .alias("options_key"),
            pl.when(pl.col("answer_idx") >= 0)
            .then(
                pl.coalesce(
                    pl.col("choices_norm").list.get(pl.col("answer_idx"), null_on_oob=True),
                    pl.col("choice_images").list.get(pl.col("answer_idx"), null_on_oob=True),
                )
            )
            .alias("answer"),
        ).with_columns(
            pl.concat_str(
                [pl.col("problem_norm"), pl.col("problem_image").fill_null("-"), pl.col("options_key")],
                separator="\x1e",
            ).alias("identity")
        )
        self.problem = derived["problem_norm"].to_list()
        self.problem_image = derived["problem_image"].to_list()
        self.options_key = derived["options_key"].to_list()
        self.answer = derived["answer"].to_list()
        with_pics = derived.select(pl.int_range(pl.len()).alias("row"), "choice_images").filter(
            pl.col("choice_images").is_not_null()
        )
        self.image_options: dict[int, tuple[str, ...]] = {
            r: tuple(x) for r, x in zip(with_pics["row"].to_list(), with_pics["choice_images"].to_list())
        }
        sha = hashlib.sha256
        self.question_id = [sha(x.encode("utf-8")).hexdigest()[:16] for x in derived["identity"].to_list()]
        self.frame = derived.select("source", "source_key", "answer")
        self.blocking = derived.select(
            "problem_norm", "problem_image", "options_key",
            pl.col("choice_images").list.len().fill_null(0).cast(pl.Int64).alias("n_pics"),
        )


def _phash(phash_of: Mapping[str, int], image: str | None) -> int | None:
    if image is None:
        return None
    value = phash_of.get(image)
    return None if value is None else int(value)


class ImageMatcher:
    """Near-equality of two images by content hash: equal sha256, or perceptual hashes within
    ``limit`` bits and, when both thumbnails are known, thumbnails within ``tolerance``
    (mean absolute gray-level difference). Images without a perceptual hash only match
    themselves."""

    def __init__(self, phash_of: Mapping[str, int], thumbnail_of: Mapping[str, bytes] | None, limit: int,
                 tolerance: float):
        self.phash_of = phash_of
        self.thumbnail_of = thumbnail_of or {}
        self.limit = limit
        self.tolerance = tolerance

    def distance(self, a: str, b: str) -> tuple[int, float | None] | None:
        """(Hamming distance, thumbnail distance or None) when a and b are near-equal, else None."""
        if a == b:
            return 0, 0.0
        ha, hb = _phash(self.phash_of, a), _phash(self.phash_of, b)
        if ha is None or hb is None:
            return None
        d = (ha ^ hb).bit_count()
        if d > self.limit:
            return None
        ta, tb = self.thumbnail_of.get(a), self.thumbnail_of.get(b)
        if ta is None or tb is None:
            return d, None
        td = thumbnail_distance(ta, tb)
        return (d, td) if td <= self.tolerance else None

    def options(self, a: tuple[str, ...], b: tuple[str, ...]) -> tuple[int, float | None] | None:
        """Worst (Hamming, thumbnail) distance of a one-to-one near-equal matching of two image
        option multisets, or None when there is none (greedy, options are few)."""
        if len(a) != len(b):
            return None
        remaining = list(b)
        worst_h, worst_t = 0, None
        for x in sorted(a):
            if x in remaining:
                remaining.remove(x)
                continue
            best = None
            for k, y in enumerate(remaining):
                d = self.distance(x, y)
                if d is not None and (best is None or d < best[1]):
                    best = (k, d)
            if best is None:
                return None
            worst_h = max(worst_h, best[1][0])
            if best[1][1] is not None:
                worst_t = max(worst_t or 0.0, best[1][1])
            remaining.pop(best[0])
        return worst_h, worst_t


def _answers_agree(a: str | None, b: str | None, image_answers: bool, matcher: ImageMatcher) -> bool:
    if a is None or b is None or a == b:
        return True
    return image_answers and matcher.distance(a, b) is not None


def deduplicate(
    questions: pl.DataFrame,
    phash_of: Mapping[str, int],
    config: DedupConfig = DedupConfig(),
    thumbnail_of: Mapping[str, bytes] | None = None,
) -> DedupResult:
    """Remove exact and near duplicates; see the module docstring for the rules.

    ``thumbnail_of`` (optional) maps image sha256 to its 256-byte 16x16 grayscale thumbnail
    (``phash.image_signatures``); with it, near-equal images must also have thumbnails within
    ``config.thumbnail_tolerance``. Without it the 64-bit hash alone decides, which merges
    look-alike line drawings (two clocks, two circuits) that differ in a small detail.

    ``questions`` has the RAW_QUESTION_SCHEMA columns; ``phash_of`` maps image sha256 to its
    64-bit perceptual hash (images without one only match byte-identical images).
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in questions.columns]
    if missing:
        raise DedupInputError(f"questions frame lacks column(s) {', '.join(missing)}")
    dupes = questions.select("source", "source_key").is_duplicated()
    if dupes.any():
        row = questions.filter(dupes).row(0, named=True)
        raise DedupInputError(f"record ({row['source']}, {row['source_key']}) appears twice in the input")

    q = _Questions(questions, phash_of)
    n = q.n
    rows = np.arange(n, dtype=np.int64)
    # Preference rank: smallest (source, source_key) first.
    rank = np.empty(n, dtype=np.int64)
    rank[questions.select(pl.arg_sort_by("source", "source_key")).to_series().to_numpy()] = rows
    qid = pl.Series("question_id", q.question_id, dtype=pl.String)

    # ---- exact groups ------------------------------------------------------------------
    ids = pl.DataFrame({"qid": qid, "rank": rank, "row": rows, "answer": q.frame["answer"]})
    ids = ids.with_columns(
        pl.col("row").sort_by("rank").first().over("qid").alias("rep"),
        pl.col("answer").drop_nulls().n_unique().over("qid").alias("answers"),
    )
    rep_of = ids["rep"].to_numpy().astype(np.int64)
    removed = np.zeros(n, dtype=bool)  # quarantined
    quarantine_parts = []
    conflicting = ids.filter(pl.col("answers") > 1)
    if conflicting.height:
        answers = conflicting.group_by("qid").agg(pl.col("answer").drop_nulls().unique().sort())
        detail = {
            k: json.dumps({"question_id": k, "answers": v}, ensure_ascii=False, sort_keys=True)
            for k, v in zip(answers["qid"].to_list(), answers["answer"].to_list())
        }
        members = conflicting["row"].to_numpy()
        removed[members] = True
        quarantine_parts.append(
            q.frame[members].select("source", "source_key").with_columns(
                pl.lit(STAGE).alias("stage"),
                pl.lit(REASON_CONFLICT).alias("reason"),
                pl.Series("detail", [detail[k] for k in conflicting["qid"].to_list()], dtype=pl.String),
            )
        )
    is_rep = (rep_of == rows) & ~removed
    reps = rows[is_rep][np.argsort(rank[is_rep], kind="stable")]

    # ---- near duplicates among representatives ------------------------------------------
    matcher = ImageMatcher(phash_of, thumbnail_of, config.image_hamming, config.thumbnail_tolerance)
    head_of_rep, evidence_of_rep, near_conflicts = _near_groups(q, reps, rank, config, matcher)
    if near_conflicts:
        conflict_reps = np.array(sorted(near_conflicts), dtype=np.int64)
        members = rows[np.isin(rep_of, conflict_reps) & ~removed]  # each with its exact duplicates
        removed[members] = True
        quarantine_parts.append(
            q.frame[members].select("source", "source_key").with_columns(
                pl.lit(STAGE).alias("stage"),
                pl.lit(REASON_NEAR_CONFLICT).alias("reason"),
                pl.Series("detail", [near_conflicts[int(r)][1] for r in rep_of[members]], dtype=pl.String),
            )
        )

    # ---- outputs ---------------------------------------------------------------------------
    head_of = rows.copy()  # per representative row: the kept row of its group
    if head_of_rep:
        merged = np.fromiter(head_of_rep.keys(), dtype=np.int64, count=len(head_of_rep))
        head_of[merged] = np.fromiter(head_of_rep.values(), dtype=np.int64, count=len(head_of_rep))
    head_row = head_of[rep_of]
    kept_mask = ~removed & (head_row == rows)
    dup_rows = rows[~removed & ~kept_mask]
    kept = (
        questions.filter(pl.Series(kept_mask))
        .with_columns(qid.filter(pl.Series(kept_mask)))
        .with_columns(pl.col("question_id").alias("duplicate_group"))
        .sort("question_id")
    )
    exact_evidence = json.dumps({"jaccard": 1.0, "hamming": 0, "options": "equal"}, sort_keys=True)
    own = qid.gather(dup_rows)
    kept_of = qid.gather(head_row[dup_rows])
    is_exact = (own == kept_of).to_numpy()
    evidence = [
        exact_evidence if ex else evidence_of_rep[r] for ex, r in zip(is_exact.tolist(), rep_of[dup_rows].tolist())
    ]
    duplicates = q.frame[dup_rows].select("source", "source_key").with_columns(
        own.alias("question_id"),
        kept_of.alias("kept_question_id"),
        pl.Series("kind", np.where(is_exact, "exact", "near"), dtype=pl.String),
        pl.Series("evidence", evidence, dtype=pl.String),
    ).sort("kept_question_id", "source", "source_key")
    quarantine = (
        pl.concat(quarantine_parts, how="vertical")
        if quarantine_parts
        else pl.DataFrame(schema=QUARANTINE_SCHEMA)
    ).sort("source", "source_key", "reason")
    return DedupResult(kept=kept, duplicates=duplicates, quarantine=quarantine)


def _near_groups(q: _Questions, reps: np.ndarray, rank: np.ndarray, config: DedupConfig,
                 matcher: ImageMatcher):
    """Greedy near-duplicate groups over representative rows.

    Returns (head_of_rep for merged reps, evidence JSON per merged rep, conflicts: rep ->
    (head, detail JSON))."""
    m = len(reps)
    if m < 2:
        return {}, {}, {}
    t = config.image_hamming
    phash_of = q.phash_of

    # Exact-match key: math tokens + option shape + which images exist; texts numbered.
    rep_frame = q.blocking[reps]
    unique_texts = rep_frame["problem_norm"].unique(maintain_order=True)
    texts = pl.DataFrame(
        {
            "problem_norm": unique_texts,
            "text_idx": np.arange(len(unique_texts), dtype=np.int64),
            "tokens": ["\x1d".join(math_tokens(x)) for x in unique_texts.to_list()],
        },
        schema={"problem_norm": pl.String, "text_idx": pl.Int64, "tokens": pl.String},
    )
    rep_frame = rep_frame.join(texts, on="problem_norm", how="left", maintain_order="left")
    # Only equality of these keys matters (blocking and the confirmation both compare them),
    # so a fast seeded 64-bit hash is enough.
    exact_key = (
        rep_frame.select(
            pl.concat_str(
                [
                    pl.col("tokens"),
                    pl.when(pl.col("n_pics") > 0)
                    .then(pl.lit("i:") + pl.col("n_pics").cast(pl.String))
                    .otherwise(pl.col("options_key")),
                    pl.when(pl.col("problem_image").is_null()).then(pl.lit("-")).otherwise(pl.lit("p")),
                ],
                separator="\x1e",
            ).hash(seed=config.seed)
        )
        .to_series()
        .to_numpy()
        .astype(np.uint64)
    )
    text_idx = rep_frame["text_idx"].to_numpy()
    opt_count = rep_frame["n_pics"].to_numpy()
    images = rep_frame["problem_image"].to_list()
    has_prob_image = np.fromiter((x is not None for x in images), dtype=bool, count=m)
    hashes = [None if x is None else phash_of.get(x) for x in images]
    has_prob_hash = np.fromiter((h is not None for h in hashes), dtype=bool, count=m)
    prob_hash = np.fromiter((_NO_HASH if h is None else int(h) for h in hashes), dtype=np.uint64, count=m)
    # problem image identity as an integer (0 = none), for vectorized equality
    image_id = rep_frame.select(pl.col("problem_image").rank("dense").fill_null(0)).to_series().to_numpy()
    del images, hashes, rep_frame

    # MinHash signatures, once per distinct normalized text.
    signatures = MinHasher(config.num_perm, config.seed).signatures(unique_texts.to_list())
    text_bands = band_keys(signatures, config.lsh)[text_idx]  # (m, bands)

    # ---- blocking keys -------------------------------------------------------------------
    key_parts, row_parts = [], []
    # problem image with a perceptual hash: multi-index bands (exact for distance <= t)
    sel = np.flatnonzero(has_prob_hash)
    for j, (shift, width) in enumerate(band_layout(t + 1)):
        band = (prob_hash[sel] >> _U64(shift)) & _U64((1 << width) - 1)
        key_parts.append(_mix(_mix(exact_key[sel], _U64(0x1000 + j)), band))
        row_parts.append(sel)
    # problem image without a hash: only byte-identical images can match
    sel = np.flatnonzero(has_prob_image & ~has_prob_hash)
    if len(sel):
        sha_keys = np.array([_key64(q.problem_image[reps[i]]) for i in sel.tolist()], dtype=np.uint64)
        key_parts.append(_mix(_mix(exact_key[sel], _U64(0x2000)), sha_keys))
        row_parts.append(sel)
    # image options, no problem image: multi-index bands of every option's hash. Two
    # near-equal option multisets pair every option with one within t bits, so they share
    # a band value of some option.
    sel = np.flatnonzero(~has_prob_image & (opt_count > 0))
    opt_hash_all = opt_present = None
    if len(sel):
        width_max = int(opt_count[sel].max())
        opt_hash_all = np.zeros((m, width_max), dtype=np.uint64)
        opt_present = np.zeros((m, width_max), dtype=bool)
        names = [x for i in sel.tolist() for x in q.image_options[reps[i]]]
        found = [phash_of.get(x) for x in names]
        # unhashed images: a hash of the name, far from everything in practice
        values = np.fromiter(
            (_key64(x) if h is None else int(h) for x, h in zip(names, found)), dtype=np.uint64, count=len(names)
        )
        counts = opt_count[sel]
        owner = np.repeat(sel, counts)
        column = np.arange(len(names)) - np.repeat(np.cumsum(counts) - counts, counts)
        opt_hash_all[owner, column] = values
        opt_present[owner, column] = True
        del names, found, values
        for c in range(width_max):
            rows_c = sel[opt_present[sel, c]]
            for j, (shift, width) in enumerate(band_layout(t + 1)):
                band = (opt_hash_all[rows_c, c] >> _U64(shift)) & _U64((1 << width) - 1)
                key_parts.append(_mix(_mix(exact_key[rows_c], _U64(0x3000 + j)), band))
                row_parts.append(rows_c)
    # no image at all: text LSH buckets
    sel = np.flatnonzero(~has_prob_image & (opt_count == 0))
    for b in range(config.bands):
        key_parts.append(_mix(_mix(exact_key[sel], _U64(0x4000 + b)), text_bands[sel, b]))
        row_parts.append(sel)

    keys = np.concatenate(key_parts) if key_parts else np.empty(0, dtype=np.uint64)
    rows = np.concatenate(row_parts) if row_parts else np.empty(0, dtype=np.int64)
    del key_parts, row_parts

    # ---- vectorized confirmation: cheap checks first, MinHash Jaccard last ------------------
    def cheap_checks(a: np.ndarray, b: np.ndarray):
        """The pairs (a, b) with equal exact keys and problem/option hashes within t bits, and
        each one's problem-image Hamming distance (-1: no hashed problem images). Text
        similarity, thumbnails and the one-to-one option matching are checked later."""
        keep = exact_key[a] == exact_key[b]
        a, b = a[keep], b[keep]
        both_hash = has_prob_hash[a] & has_prob_hash[b]
        dist = np.where(both_hash, np.bitwise_count(prob_hash[a] ^ prob_hash[b]).astype(np.int64), -1)
        keep = np.where(both_hash, dist <= t, True)
        a, b, both_hash, dist = a[keep], b[keep], both_hash[keep], dist[keep]
        keep = both_hash | (image_id[a] == image_id[b])  # absent or unhashed images: identical only
        a, b, dist = a[keep], b[keep], dist[keep]
        if opt_hash_all is not None:
            # every option of one needs an option of the other within t bits (greedy check
            # later); first option 0 alone, which rejects almost every templated pair cheaply
            with_opts = opt_present[a, 0]
            d0 = np.bitwise_count(opt_hash_all[a, 0][:, None] ^ opt_hash_all[b]).astype(np.int64)
            d0 = np.where(opt_present[b], d0, 99).min(axis=1)
            keep = ~with_opts | (d0 <= t)
            a, b, dist = a[keep], b[keep], dist[keep]
            ha, hb = opt_hash_all[a], opt_hash_all[b]
            d = np.bitwise_count(ha[:, :, None] ^ hb[:, None, :]).astype(np.int64)
            d = np.where(opt_present[a][:, :, None] & opt_present[b][:, None, :], d, 99)
            worst = np.maximum(d.min(axis=2).max(axis=1, initial=0, where=opt_present[a]),
                               d.min(axis=1).max(axis=1, initial=0, where=opt_present[b]))
            keep = (opt_count[a] == 0) | (worst <= t)
            a, b, dist = a[keep], b[keep], dist[keep]
        return a, b, dist

    # Blocks overlap (one pair can share several bands), so pairs repeat across chunks; each
    # chunk is filtered before it is kept, packed as a * m + b, and the survivors de-duplicated
    # once. The checks depend on the pair alone, so filtering before or after is the same.
    packed_parts = []
    for a, b in _block_pairs(keys, rows, text_bands, config.max_block):
        a, b, _ = cheap_checks(a, b)
        packed_parts.append(a * np.int64(m) + b)
    packed = np.concatenate(packed_parts) if packed_parts else np.empty(0, dtype=np.int64)
    del packed_parts
    if not len(packed):
        return {}, {}, {}
    packed = np.unique(packed)
    a, b, dist = cheap_checks(packed // m, packed % m)
    del packed
    jacc = np.ones(len(a), dtype=np.float64)
    differ = np.flatnonzero(text_idx[a] != text_idx[b])
    if len(differ):
        sa, sb = signatures[text_idx[a[differ]]], signatures[text_idx[b[differ]]]
        jacc[differ] = np.count_nonzero(sa == sb, axis=1) / signatures.shape[1]
    keep = jacc >= config.text_threshold
    pairs, jacc, dist = np.column_stack([a[keep], b[keep]]), jacc[keep], dist[keep]

    # ---- greedy grouping against representatives ------------------------------------------
    neighbours: dict[int, list[tuple[int, float, int]]] = {}
    for (x, y), jv, dv in zip(pairs.tolist(), jacc.tolist(), dist.tolist()):
        neighbours.setdefault(x, []).append((y, jv, dv))
        neighbours.setdefault(y, []).append((x, jv, dv))
    assigned: set[int] = set()
    head_of_rep: dict[int, int] = {}
    evidence_of_rep: dict[int, str] = {}
    conflicts: dict[int, tuple[int, str]] = {}
    # reps is sorted by rank, so local index order is preference order
    for x in sorted(neighbours):
        if x in assigned:
            continue
        assigned.add(x)
        rx = int(reps[x])
        for y, jv, dv in sorted(neighbours[x]):
            if y in assigned or y < x:
                continue
            ry = int(reps[y])
            evidence = {"jaccard": round(jv, 4), "hamming": None if dv < 0 else dv}
            if dv >= 0:
                near = matcher.distance(q.problem_image[rx], q.problem_image[ry])
                if near is None:
                    continue  # hashes close but thumbnails apart
                if near[1] is not None:
                    evidence["thumbnail"] = round(near[1], 2)
            if rx in q.image_options:
                worst = matcher.options(q.image_options[rx], q.image_options[ry])
                if worst is None:
                    continue
                evidence["options"] = "equal" if worst == (0, None) or worst == (0, 0.0) else "near"
                evidence["options_hamming"] = worst[0]
                if worst[1] is not None:
                    evidence["options_thumbnail"] = round(worst[1], 2)
            else:
                evidence["options"] = "equal"
            assigned.add(y)
            detail = json.dumps(evidence, sort_keys=True)
            image_answers = rx in q.image_options
            if not _answers_agree(q.answer[rx], q.answer[ry], image_answers, matcher):
                conflicts[ry] = (
                    rx,
                    json.dumps(
                        {"kept_question_id": q.question_id[rx], "answer": q.answer[ry],
                         "kept_answer": q.answer[rx], **evidence},
                        ensure_ascii=False, sort_keys=True,
                    ),
                )
                continue
            head_of_rep[ry] = rx
            evidence_of_rep[ry] = detail
    return head_of_rep, evidence_of_rep, conflicts


def _block_pairs(keys: np.ndarray, rows: np.ndarray, text_bands: np.ndarray, max_block: int):
    """Candidate pairs (smaller, larger) of rows sharing a key, in chunks; blocks above
    max_block are split by text LSH bands. Pairs repeat when rows share several keys."""
    if not len(keys):
        return
    order = np.argsort(keys, kind="stable")
    k, r = keys[order], rows[order]
    del order
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    sizes = np.diff(np.r_[starts, len(k)])
    small = sizes <= max_block
    yield from iter_pairs_within_groups(r, starts[small], sizes[small], _PAIR_CHUNK)
    big = np.flatnonzero(~small)
    if len(big):
        member_pos = np.concatenate([np.arange(s, s + z) for s, z in zip(starts[big], sizes[big])])
        block_key = k[member_pos]
        members = r[member_pos]
        sub_keys, sub_rows = [], []
        for band in range(text_bands.shape[1]):
            sub_keys.append(_mix(_mix(block_key, _U64(0x5000 + band)), text_bands[members, band]))
            sub_rows.append(members)
        sk, sr = np.concatenate(sub_keys), np.concatenate(sub_rows)
        o = np.argsort(sk, kind="stable")
        sk, sr = sk[o], sr[o]
        s2 = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
        z2 = np.diff(np.r_[s2, len(sk)])
        yield from iter_pairs_within_groups(sr, s2, z2, _PAIR_CHUNK)
