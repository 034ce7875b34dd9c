"""Dedup benchmark: ours vs datasketch's MinHashLSH on the demo generator's questions.

Corpus: ``DemoSite(SiteConfig(seed, questions=N))`` (default N = 1,000,000), minus the
text-only questions (the pipeline's filter runs before dedup). Each image's identity is its
spec ``key`` (what the sha256 of its bytes is in a crawl) and its perceptual hash is a
stand-in derived from the spec: a hash of the drawing (``content_key``) for originals; for
the ``jpeg``/``resize``/``rescan`` variants the same hash with d bits flipped, where d is drawn from
the distances measured in this run between real renders of variants and their originals
(``--calibrate`` pairs, real ``phash_bytes`` of ``render_image``). Rendering a million
images would measure the renderer, not dedup; ``--real`` runs a smaller corpus with every
image rendered and hashed for real instead.

Truth: the generator's planted groups (an original and its ``exact``/``near`` copies); every
pair inside a group is a duplicate pair. Templated siblings (same text, other image or other
options) must not be merged. Scores are pair-level precision / recall / F1 over the
corpus, plus the number of merged templated pairs.

Contenders:
- ours: ``pipelines.clean.dedup.deduplicate`` end to end (identity, exact groups, conflicts,
  blocking by canonical text and image multi-index hashing, pairwise confirmation);
- datasketch, the usual recipe (full corpus; normalized text, shingles = character 3-grams +
  word tokens, 64 permutations in 8 bands x 8 rows, which is what MinHashLSH picks for
  threshold 0.7): ``MinHash.bulk`` per chunk, then in kept-record
  order ``MinHashLSH.query``; a record with a hit is a duplicate of the first hit, otherwise
  it is inserted. Its sets also hold one token per option and one for the problem image
  identity, so that images and options take part in the similarity;
- datasketch + our confirmation (``--confirm-size`` records, default 50,000): the same
  recipe, but each hit must pass our pairwise confirmation (canonical text and options,
  near-equal images, answers) before a record counts as a duplicate. On templated
  quiz data the hit lists grow with the number of kept siblings (quadratic), so this one
  runs on a prefix-sized corpus and ours is timed again on the same corpus.

    .venv/bin/python bench/dedup.py [--questions 1000000] [--seed 0] [--confirm-size 50000]
        [--real 20000] [--skip-datasketch]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.clean.dedup import DedupConfig, ImageIndex, ImageMatcher, deduplicate  # noqa: E402
from pipelines.clean.dedup.dedup import _answers_agree, splitmix64  # noqa: E402
from pipelines.clean.dedup.normalize import canonical_text, normalize_text  # noqa: E402
from pipelines.clean.dedup.phash import describe_bytes, phash_bytes  # noqa: E402
from pipelines.ingest.demo_site.generator import DemoSite, SiteConfig, render_image  # noqa: E402
from pipelines.store.records import RAW_QUESTION_SCHEMA  # noqa: E402

BASE_URL = "http://demo.localhost"
TEXT_THRESHOLD = 0.7  # datasketch: MinHashLSH's threshold, 64 permutations (8 bands x 8 rows)
NUM_PERM = 64


# ---- corpus --------------------------------------------------------------------------------

def _generate(args):
    seed, n, lo, hi, real = args
    site = DemoSite(SiteConfig(seed=seed, questions=n))
    cols = {k: [] for k in ("index", "subject", "grade", "skill", "problem", "problem_image", "choices",
                            "choice_images", "answer_idx", "role", "dup_of", "template_of")}
    images: dict[str, tuple[str, str]] = {}  # key -> (content_key, variant)
    blobs: dict[str, bytes] = {}
    for i in range(lo, hi):
        q = site.question(i)
        if q.problem_image is None and q.choice_images is None:
            continue  # text-only: dropped by the filter stage before dedup
        for spec in q.images:
            images[spec.key] = (spec.content_key, spec.variant)
            if real and spec.key not in blobs:
                blobs[spec.key] = render_image(spec)
        cols["index"].append(i)
        cols["subject"].append(q.subject)
        cols["grade"].append(q.grade)
        cols["skill"].append(q.skill)
        cols["problem"].append(q.problem)
        cols["problem_image"].append(q.problem_image.key if q.problem_image is not None else None)
        cols["choices"].append(list(q.choices) if q.choices is not None else None)
        cols["choice_images"].append([s.key for s in q.choice_images] if q.choice_images is not None else None)
        cols["answer_idx"].append(q.answer_idx)
        cols["role"].append(q.role)
        cols["dup_of"].append(q.dup_of)
        cols["template_of"].append(q.template_of)
    signatures = {}
    for k, b in blobs.items():
        d = describe_bytes(b)
        signatures[k] = (int(d.phash[0]), d.thumbnail[0].tobytes(),
                         (int(d.content_phash[0]), d.content_thumbnail[0].tobytes(), d.content_box[0].tolist(),
                          d.colours[0].tobytes()))
    return cols, images, signatures


def build_corpus(seed: int, n: int, real: bool, workers: int = 2):
    """(questions frame, truth frame, phash_of, image table) for the first n site questions."""
    step = 50_000
    tasks = [(seed, n, lo, min(n, lo + step), real) for lo in range(0, n, step)]
    ctx = get_context("fork")
    parts = []
    with ctx.Pool(workers) as pool:
        for part in pool.imap(_generate, tasks):
            parts.append(part)
    cols = {k: [] for k in parts[0][0]}
    images: dict[str, tuple[str, str]] = {}
    real_hashes: dict[str, int] = {}
    for c, im, ph in parts:
        for k in cols:
            cols[k].extend(c[k])
        images.update(im)
        real_hashes.update(ph)
    del parts
    index = cols.pop("index")
    truth = pl.DataFrame(
        {"index": index, "role": cols.pop("role"), "dup_of": cols.pop("dup_of"),
         "template_of": cols.pop("template_of")},
        schema={"index": pl.Int64, "role": pl.String, "dup_of": pl.Int64, "template_of": pl.Int64},
    )
    frame = pl.DataFrame(
        {
            "source": ["demo"] * len(index),
            "source_key": [f"{BASE_URL}/q/{i:08d}" for i in index],
            **cols,
            "source_split": [None] * len(index),
            "extra": ["{}"] * len(index),
        },
        schema=pl.Schema(RAW_QUESTION_SCHEMA),
    )
    return frame, truth, images, real_hashes


def calibrate_variant_distances(seed: int, pairs: int) -> np.ndarray:
    """Hamming distances between real phashes of jpeg/resize/rescan variants and their originals."""
    site = DemoSite(SiteConfig(seed=seed + 1, questions=200_000))
    out = []
    i = 0
    while len(out) < pairs and i < site.num_indices:
        q = site.question(i)
        i += 1
        if q.role == "near" and q.near_variant in ("jpeg", "resize", "rescan"):
            spec = q.problem_image if q.problem_image is not None else q.choice_images[0]
            original = spec.with_variant("")
            out.append((phash_bytes(render_image(spec)) ^ phash_bytes(render_image(original))).bit_count())
    return np.array(out, dtype=np.int64)


def stand_in_phashes(images: dict[str, tuple[str, str]], distances: np.ndarray) -> dict[str, int]:
    keys = list(images)
    content = np.array([int(images[k][0], 16) for k in keys], dtype=np.uint64)
    base = splitmix64(content)
    own = splitmix64(np.array([int(k, 16) for k in keys], dtype=np.uint64))
    out = {}
    for k, b, h in zip(keys, base.tolist(), own.tolist()):
        if images[k][1]:
            d = int(distances[h % len(distances)])
            bits = np.random.default_rng(h).choice(64, size=d, replace=False)
            for bit in bits.tolist():
                b ^= 1 << bit
        out[k] = b
    return out


# ---- scoring --------------------------------------------------------------------------------

def _pairs(sizes: pl.Series) -> int:
    s = sizes.cast(pl.Int64)
    return int((s * (s - 1) // 2).sum())


def score(truth: pl.DataFrame, predicted_group: np.ndarray) -> dict:
    """Pair-level precision/recall/F1 of predicted groups (one id per corpus row) vs truth."""
    t = truth.with_columns(
        pl.coalesce(pl.col("dup_of"), pl.col("index")).alias("true_group"),
        pl.Series("pred_group", predicted_group),
    )
    # originals referenced by a copy but absent from the corpus leave single copies: fine
    true_pairs = _pairs(t.group_by("true_group").len()["len"])
    pred_pairs = _pairs(t.group_by("pred_group").len()["len"])
    both = _pairs(t.group_by("true_group", "pred_group").len()["len"])
    precision = both / pred_pairs if pred_pairs else 1.0
    recall = both / true_pairs if true_pairs else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    pos = dict(zip(t["index"].to_list(), range(t.height)))
    templated = t.filter(pl.col("template_of").is_not_null())
    merged_templates = 0
    for i, j in zip(templated["index"].to_list(), templated["template_of"].to_list()):
        if j in pos and predicted_group[pos[i]] == predicted_group[pos[j]]:
            merged_templates += 1
    return {"precision": precision, "recall": recall, "f1": f1, "true_pairs": true_pairs,
            "predicted_pairs": pred_pairs, "merged_templated_pairs": merged_templates}


# ---- contenders -------------------------------------------------------------------------------

def run_ours(frame: pl.DataFrame, images, config: DedupConfig, thumbnail_of=None):
    t = time.perf_counter()
    result = deduplicate(frame, images, config, thumbnail_of)
    seconds = time.perf_counter() - t
    row_of = {k: r for r, k in enumerate(frame["source_key"].to_list())}
    group = np.arange(frame.height, dtype=np.int64)
    kept_row = {qid: row_of[k] for qid, k in zip(result.kept["question_id"].to_list(), result.kept["source_key"].to_list())}
    for k, kq in zip(result.duplicates["source_key"].to_list(), result.duplicates["kept_question_id"].to_list()):
        group[row_of[k]] = kept_row[kq]
    extra = {"kept": result.kept.height, "duplicates": result.duplicates.height,
             "quarantined": result.quarantine.height}
    return seconds, group, extra


def _shingles(text: str) -> list[bytes]:
    grams = [text[i : i + 3] for i in range(len(text) - 2)] if len(text) >= 3 else ([text] if text else [])
    return [g.encode("utf-8") for g in grams] + [("\x00w" + w).encode("utf-8") for w in text.split(" ") if w]


class _Confirm:
    """Our pairwise confirmation, for records that datasketch proposes."""

    def __init__(self, frame: pl.DataFrame, images, config: DedupConfig, thumbnail_of=None):
        index = images if isinstance(images, ImageIndex) else ImageIndex(images, thumbnail_of)
        self.matcher = ImageMatcher(index, config.rule)
        self.problem = [canonical_text(p) for p in frame["problem"].to_list()]
        self.image = frame["problem_image"].to_list()
        raw_choices = frame["choices"].to_list()
        self.choices = [None if c is None else tuple(sorted(canonical_text(x, option=True) for x in c)) for c in raw_choices]
        self.pics = [None if c is None else tuple(c) for c in frame["choice_images"].to_list()]
        answers = frame["answer_idx"].to_list()
        self.answer = []
        for c, p, a in zip(raw_choices, self.pics, answers):
            opts = [canonical_text(x, option=True) for x in c] if c is not None else list(p or ())
            self.answer.append(opts[a] if 0 <= a < len(opts) else None)

    def __call__(self, x: int, y: int, jaccard: float) -> bool:
        if self.problem[x] != self.problem[y] or self.choices[x] != self.choices[y]:
            return False
        if (self.pics[x] is None) != (self.pics[y] is None):
            return False
        ix, iy = self.image[x], self.image[y]
        if (ix is None) != (iy is None):
            return False
        if ix is not None and not self.matcher.near(ix, iy):
            return False
        if self.pics[x] is not None and self.matcher.options(self.pics[x], self.pics[y]) is None:
            return False
        return _answers_agree(self.answer[x], self.answer[y], self.pics[x] is not None, self.matcher)


def run_datasketch(frame: pl.DataFrame, phash_of, config: DedupConfig, confirm: bool, thumbnail_of=None,
                   chunk: int = 20_000):
    from datasketch import MinHash, MinHashLSH

    t0 = time.perf_counter()
    order = frame.select(pl.arg_sort_by("source", "source_key")).to_series().to_numpy()
    problems = frame["problem"].to_list()
    images = frame["problem_image"].to_list()
    choices = frame["choices"].to_list()
    pics = frame["choice_images"].to_list()
    checker = _Confirm(frame, phash_of, config, thumbnail_of) if confirm else None
    lsh = MinHashLSH(threshold=TEXT_THRESHOLD, num_perm=NUM_PERM)
    assert lsh.b == 8 and lsh.r == 8, (lsh.b, lsh.r)
    group = np.arange(frame.height, dtype=np.int64)
    kept_sig: dict[int, MinHash] = {}
    comparisons = 0
    norm_cache: dict[str, str] = {}

    def norm(s):
        v = norm_cache.get(s)
        if v is None:
            v = norm_cache[s] = normalize_text(s)
        return v

    for start in range(0, len(order), chunk):
        rows = order[start : start + chunk].tolist()
        sets = []
        for r in rows:
            tokens = _shingles(norm(problems[r] or ""))
            if choices[r] is not None:
                tokens += [("\x00o" + norm(c)).encode("utf-8") for c in choices[r]]
            if pics[r] is not None:
                tokens += [("\x00p" + p).encode("utf-8") for p in pics[r]]
            if images[r] is not None:
                tokens.append(("\x00i" + images[r]).encode("utf-8"))
            sets.append(tokens)
        sigs = MinHash.bulk(sets, num_perm=NUM_PERM)
        for r, m in zip(rows, sigs):
            hits = lsh.query(m)
            head = None
            if confirm:
                for h in sorted(hits):
                    comparisons += 1
                    if checker(r, h, m.jaccard(kept_sig[h])):
                        head = h
                        break
            elif hits:
                head = min(hits)
            if head is None:
                lsh.insert(r, m, check_duplication=False)
                if confirm:
                    kept_sig[r] = m
            else:
                group[r] = head
    seconds = time.perf_counter() - t0
    return seconds, group, {"confirmations": comparisons}


# ---- main --------------------------------------------------------------------------------

def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024


def _line(name: str, seconds: float, s: dict, extra: dict | None = None) -> str:
    more = "  " + json.dumps(extra, sort_keys=True) if extra else ""
    return (f"  {name:<34} {seconds:8.1f} s  P {s['precision']:.4f}  R {s['recall']:.4f}  F1 {s['f1']:.4f}  "
            f"pred pairs {s['predicted_pairs']:,}  templated merged {s['merged_templated_pairs']}{more}")


def compare(label: str, frame, truth, phash_of, config, datasketch: bool, confirm: bool, thumbnail_of=None):
    print(f"{label}: {frame.height:,} questions, {truth.filter(pl.col('dup_of').is_not_null()).height:,} planted copies")
    sec, group, extra = run_ours(frame, phash_of, config, thumbnail_of)
    ours = score(truth, group)
    print(_line("ours (deduplicate)", sec, ours, extra), flush=True)
    if not datasketch:
        return
    gc.collect()
    dsec, dgroup, dextra = run_datasketch(frame, phash_of, config, confirm=confirm, thumbnail_of=thumbnail_of)
    theirs = score(truth, dgroup)
    name = "datasketch + our confirmation" if confirm else "datasketch MinHashLSH (usual)"
    print(_line(name, dsec, theirs, dextra))
    print(f"  speed ratio datasketch/ours: {dsec / sec:.1f}x   F1 ours {ours['f1']:.4f} vs {theirs['f1']:.4f}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--confirm-size", type=int, default=50_000,
                    help="corpus size for datasketch + our confirmation (0 to skip)")
    ap.add_argument("--real", type=int, default=20_000, help="corpus size with real rendered images (0 to skip)")
    ap.add_argument("--calibrate", type=int, default=300, help="real variant pairs measured for the stand-in hashes")
    ap.add_argument("--skip-datasketch", action="store_true")
    args = ap.parse_args(argv)
    config = DedupConfig()
    print(f"dedup benchmark, seed {args.seed}, cpus={os.cpu_count()}, config {config}")

    t = time.perf_counter()
    distances = calibrate_variant_distances(args.seed, args.calibrate)
    print(f"calibration: {len(distances)} real jpeg/resize variant pairs, phash distance "
          f"p50 {np.percentile(distances, 50):.0f} p90 {np.percentile(distances, 90):.0f} max {distances.max()}, "
          f"share <= {config.image_hamming}: {(distances <= config.image_hamming).mean():.3f}, "
          f"<= {config.rescan_hamming}: {(distances <= config.rescan_hamming).mean():.3f} ({time.perf_counter() - t:.0f} s)")

    if args.questions:
        t = time.perf_counter()
        frame, truth, images, _ = build_corpus(args.seed, args.questions, real=False)
        phash_of = stand_in_phashes(images, distances)
        print(f"corpus built in {time.perf_counter() - t:.0f} s ({len(images):,} images)", flush=True)
        compare(f"stand-in image hashes, {args.questions:,} site questions", frame, truth, phash_of, config,
                not args.skip_datasketch, confirm=False)
        if args.confirm_size and not args.skip_datasketch:
            n = min(args.confirm_size, frame.height)
            compare(f"stand-in image hashes, first {n:,} records", frame[:n], truth[:n], phash_of, config,
                    True, confirm=True)
        del frame, truth, images, phash_of
        gc.collect()

    if args.real:
        t = time.perf_counter()
        frame, truth, images, signatures = build_corpus(args.seed, args.real, real=True)
        print(f"real corpus built and hashed in {time.perf_counter() - t:.0f} s ({len(images):,} images)")
        phash_of = {k: v[0] for k, v in signatures.items()}
        thumbnail_of = {k: v[1] for k, v in signatures.items()}
        index = ImageIndex(phash_of, thumbnail_of, {k: v[2] for k, v in signatures.items()})
        compare(f"real images, full descriptors, {args.real:,} site questions", frame, truth, index, config,
                not args.skip_datasketch, confirm=True)
        compare(f"real images, hash + grey thumbnail, {args.real:,} site questions", frame, truth, phash_of, config,
                False, confirm=True, thumbnail_of=thumbnail_of)
        compare(f"real images, 64-bit hash only, {args.real:,} site questions", frame, truth, phash_of, config,
                False, confirm=True)
    print(f"peak RSS {_rss_gb():.2f} GB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
