"""When two images show the same figure: the descriptors of the image index and the rule.

Two images are near-equal when their bytes are equal, or when their colours agree (colour
histograms within ``colour_tolerance``: a green and a teal square are nearly the same grey, so
grey hashes and thumbnails alone would call them equal) and one of:

- same layout (a re-encoded or resized copy): page hashes within ``image_hamming`` bits and grey
  page thumbnails within ``thumbnail_tolerance``, and, when the content boxes agree (within
  SAME_BOX permille), the aligned content thumbnails within ``rescan_tolerance`` (colours where
  they are: two spinners with the same colours on other sectors have the same histogram);
- re-scanned (the page moved a little: rescaled, margins cut or widened, grain): page hashes
  within ``rescan_hamming`` bits, content boxes within ``box_tolerance`` permille of the page
  and the content thumbnails, aligned, within ``rescan_tolerance`` (``content_tolerance`` when
  the boxes agree within SAME_BOX: a page that did not move leaves no misalignment to forgive);
- re-cropped (the figure itself is the same, its margins and place on the page are not):
  content hashes within ``content_hamming`` bits and the aligned content thumbnails within
  ``content_tolerance`` (stricter than for a re-scan: nothing of the page is compared).

The aligned distance of two 16x16 RGB content thumbnails is the smallest mean absolute
difference (0-255, all channels) over shifts of up to one thumbnail cell, compared at twice the
resolution (bilinear), so half a cell of misplacement costs little.

Images the index describes only by a page hash (and perhaps a grey thumbnail) match by the
same-layout rule alone; images without a hash match only themselves.

With a reader of the images' bytes (``read_image``), the descriptors only decide which pairs
are worth a look: a pair they call near-equal is near-equal only when the picture verdict
(``ink.compare_pictures``: the ink of one, aligned onto the other, coincides with it) says it
is the same picture, and its evidence names the verdict (``verdict``, ``ink``). The verdicts
are kept per pair of names (``verdicts`` / ``known_verdicts``): names are content hashes, so a
pair's verdict never changes.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
import polars as pl

from pipelines.clean.dedup.phash import (
    COLOUR_BINS,
    CONTENT_BYTES,
    CONTENT_SIDE,
    THUMB_BYTES,
    thumbnail_distance,
)
from pipelines.parallel import contiguous_slices, forked_pool, shared, sharing, worker_count
from pipelines.store.id_hash import splitmix64

NO_HASH = np.uint64(0xFFFFFFFFFFFFFFFF)
SAME_BOX = 10  # permille: content boxes this close are the same layout
_FINE = 2 * CONTENT_SIDE
_SHIFT = 2  # fine pixels = one thumbnail cell
_PAIRS_PER_THREAD = 2000  # fewer aligned distances than this per thread are computed in one thread


@dataclass(frozen=True)
class MatchRule:
    image_hamming: int = 4
    thumbnail_tolerance: float = 3.0
    rescan_hamming: int = 12
    rescan_tolerance: float = 8.0
    content_hamming: int = 4
    content_tolerance: float = 3.5
    box_tolerance: int = 50
    colour_tolerance: float = 1.0


def _bilinear(n_out: int, n_in: int) -> np.ndarray:
    """(n_out, n_in) weights of a bilinear resize with pixel centres aligned (Pillow's convention)."""
    weights = np.zeros((n_out, n_in))
    for i in range(n_out):
        x = (i + 0.5) * n_in / n_out - 0.5
        lo = int(np.floor(x))
        frac = x - lo
        for j, w in ((lo, 1.0 - frac), (lo + 1, frac)):
            weights[i, min(max(j, 0), n_in - 1)] += w
    return weights


_UP = _bilinear(_FINE, CONTENT_SIDE)
# the same weights as integers: the compiled batch sums upsampled pixels exactly in integers
_UP_SCALE = 4
_UP_SCALED = np.rint(_UP * _UP_SCALE).astype(np.int32)
assert np.array_equal(_UP_SCALED / _UP_SCALE, _UP), "bilinear weights are not multiples of 1/_UP_SCALE"


def aligned_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Smallest mean absolute difference of two (32, 32, 3) upsampled content thumbnails over
    shifts of up to ``_SHIFT`` fine pixels, on the inner window both shifts cover."""
    from pipelines.clean.dedup.pair_kernel import aligned_distance as compiled  # numba: loaded on first use

    return float(compiled(a, b, _SHIFT))


_DESCRIPTOR_SCHEMA = {
    "name": pl.String, "phash": pl.UInt64, "thumbnail": pl.Binary, "content_phash": pl.UInt64,
    "content_thumbnail": pl.Binary, "content_box": pl.List(pl.Int64), "colours": pl.Binary,
}
_DIGEST_SEED = np.uint64(0x1D2E3F4A5B6C7D8E)


def _slots(present: np.ndarray, rows: int) -> np.ndarray:
    """Per row (``rows`` = present's length + 1), its index among the present ones, or -1."""
    slot = np.full(rows, -1, dtype=np.int64)
    slot[:-1][present] = np.arange(int(present.sum()), dtype=np.int64)
    return slot


def _packed(column: pl.Series, width: int) -> np.ndarray:
    """The values of a binary column of ``width``-byte values as (len + 1, width) uint8, the last
    row all zeros (slot -1)."""
    out = np.zeros((len(column) + 1, width), dtype=np.uint8)
    if len(column):
        out[:-1] = np.frombuffer(b"".join(column.to_list()), dtype=np.uint8).reshape(-1, width)
    return out


class ImageIndex:
    """The descriptors of images by content hash (sha256 hex).

    Built from the ``images`` lake table (``from_table``), or from a page-hash mapping and
    optional grey thumbnails (the same-layout rule only)."""

    def __init__(self, phash_of: Mapping[str, int], thumbnail_of: Mapping[str, bytes] | None = None,
                 content: Mapping[str, tuple[int, bytes, tuple, bytes]] | None = None):
        names = list(phash_of) if not content else list(dict.fromkeys([*phash_of, *content]))
        columns = {"name": names,
                   "phash": list(phash_of.values()) if not content else [phash_of.get(n) for n in names]}
        if thumbnail_of:
            columns["thumbnail"] = [thumbnail_of.get(name) for name in names]
        if content:
            described = [content.get(name) or (None, None, None, None) for name in names]
            columns.update({
                "content_phash": [c[0] for c in described],
                "content_thumbnail": [c[1] for c in described],
                "content_box": [None if c[2] is None else list(c[2]) for c in described],
                "colours": [c[3] for c in described],
            })
        frame = pl.DataFrame(columns, schema={k: _DESCRIPTOR_SCHEMA[k] for k in columns})
        self._build(frame.with_columns(pl.lit(None, dtype=dtype).alias(name)
                                       for name, dtype in _DESCRIPTOR_SCHEMA.items() if name not in columns),
                    unique_names=True)

    @classmethod
    def from_table(cls, images: pl.DataFrame) -> "ImageIndex":
        """From the ``images`` lake table; its content columns are optional."""
        index = cls.__new__(cls)
        index._build(images.rename({"image_hash": "name"}).select(
            pl.col(name) if name in images.columns or name == "name" else pl.lit(None).alias(name)
            for name in _DESCRIPTOR_SCHEMA).cast(_DESCRIPTOR_SCHEMA))
        return index

    def _build(self, frame: pl.DataFrame, unique_names: bool = False) -> None:
        """Arrays of the descriptors, one row per image in name order, from a frame of
        ``_DESCRIPTOR_SCHEMA`` (a name's first row counts; malformed descriptors count as missing)."""
        if not unique_names:
            frame = frame.unique("name", keep="first", maintain_order=True)
        frame = frame.sort("name")
        self._names = frame["name"]
        self._rows = pl.Series(np.arange(frame.height, dtype=np.int64))
        self.row_of = dict(zip(self._names.to_list(), range(frame.height)))
        n = frame.height + 1  # the last row describes nothing: row -1 of an unknown image
        self.phash = np.full(n, NO_HASH, dtype=np.uint64)
        self.has_phash = np.zeros(n, dtype=bool)
        self.phash[:-1] = frame["phash"].fill_null(int(NO_HASH)).to_numpy()
        self.has_phash[:-1] = frame["phash"].is_not_null().to_numpy()
        # descriptors present for some images only are stored compactly: row -> slot (-1: none;
        # slot -1 is an all-zero last entry)
        has_thumbnail = (frame["thumbnail"].bin.size() == THUMB_BYTES).fill_null(False)
        self.thumbnail_slot = _slots(has_thumbnail.to_numpy(), n)
        self.thumbnails = _packed(frame["thumbnail"].filter(has_thumbnail), THUMB_BYTES)
        self.has_thumbnail = self.thumbnail_slot >= 0
        content_valid = frame.select(
            pl.col("content_phash").is_not_null() & (pl.col("content_box").list.len() == 4).fill_null(False)
            & (pl.col("content_thumbnail").bin.size() == CONTENT_BYTES).fill_null(False)
            & (pl.col("colours").bin.size() == COLOUR_BINS).fill_null(False)).to_series()
        self.content_slot = _slots(content_valid.to_numpy(), n)
        self.has_content = valid = self.content_slot >= 0
        self.content_phash = np.full(n, NO_HASH, dtype=np.uint64)
        self.content_phash[:-1][valid[:-1]] = frame["content_phash"].filter(content_valid).to_numpy()
        self.box = np.zeros((n, 4), dtype=np.int64)
        if valid.any():
            self.box[:-1][valid[:-1]] = frame["content_box"].filter(content_valid).list.to_array(4).to_numpy()
        self.content_thumbnails = _packed(frame["content_thumbnail"].filter(content_valid), CONTENT_BYTES).reshape(
            -1, CONTENT_SIDE, CONTENT_SIDE, 3)
        self.colour_bins = _packed(frame["colours"].filter(content_valid), COLOUR_BINS)
        self._fine: dict[int, np.ndarray] = {}
        self.descriptor_digest = self._descriptor_digests()

    def _descriptor_digests(self) -> np.ndarray:
        """Per row, a 64-bit digest of everything the rule reads (0: the row that describes
        nothing): its descriptors' words folded with splitmix64, whatever the other rows hold."""
        n = len(self.phash)
        digest = np.zeros(n, dtype=np.uint64)
        for thumbnail in (False, True):
            for content in (False, True):
                rows = np.flatnonzero((self.has_thumbnail[:-1] == thumbnail) & (self.has_content[:-1] == content))
                if not len(rows):
                    continue
                for chunk in np.array_split(rows, max(1, len(rows) // 65536)):
                    parts = [self.has_phash[chunk, None].astype(np.uint64),
                             np.where(self.has_phash[chunk], self.phash[chunk], 0)[:, None],
                             np.full((len(chunk), 1), 2 * thumbnail + content, dtype=np.uint64)]
                    if thumbnail:
                        parts.append(self.thumbnails[self.thumbnail_slot[chunk]].view(np.uint64))
                    if content:
                        slots = self.content_slot[chunk]
                        parts += [self.content_phash[chunk, None], self.box[chunk].astype(np.uint64),
                                  self.content_thumbnails[slots].reshape(len(chunk), -1).view(np.uint64),
                                  self.colour_bins[slots].view(np.uint64)]
                    folded = np.full(len(chunk), _DIGEST_SEED, dtype=np.uint64)
                    for column in np.concatenate(parts, axis=1).T:
                        folded = splitmix64(folded ^ column)
                    digest[chunk] = folded
        return digest

    def __len__(self) -> int:
        return len(self.row_of)

    def rows(self, names: list[str | None]) -> np.ndarray:
        """Index rows of image names (-1: unknown or None; as an array index, -1 is the row that
        describes nothing)."""
        return (
            pl.Series(names, dtype=pl.String)
            .replace_strict(self._names, self._rows, default=-1, return_dtype=pl.Int64)
            .fill_null(-1)
            .to_numpy()
        )

    def fine_thumbnail(self, row: int) -> np.ndarray:
        """The (32, 32, 3) upsampled content thumbnail the aligned distance compares."""
        cached = self._fine.get(row)
        if cached is None:
            from pipelines.clean.dedup.pair_kernel import upsample  # numba: loaded on first use

            cached = self._fine[row] = upsample(self.content_thumbnails[self.content_slot[row]], _UP_SCALED, _UP_SCALE)
        return cached

    def colour_distance(self, a: int, b: int) -> float:
        x, y = self.colour_bins[self.content_slot[a]], self.colour_bins[self.content_slot[b]]
        return float(np.abs(x.astype(np.float64) / 255.0 - y.astype(np.float64) / 255.0).sum())


VERDICT_SCHEMA = {"image_a": pl.String, "image_b": pl.String, "same": pl.Boolean, "kind": pl.String,
                  "measure": pl.String}
# normalized pictures kept in memory per process (a picture meets many others in a row); one
# takes ~0.7-3.5 MB (its ink, colours and surroundings), so a count would not bound the memory
_PICTURE_BYTES_KEPT = 512 << 20
_VERDICTS_PER_WORKER = 8  # picture verdicts (~20 ms each) worth a forked worker
_TILE = 64  # pictures: two tiles' normalized pictures fit in _PICTURE_BYTES_KEPT
_MATCHER = "image-match:matcher"


def _kept_bytes(picture) -> int:
    """Memory a normalized picture (or its error text) holds once compared: its ink, its
    surroundings (the ink's peak and floor, as many bytes as the ink each, and two masks of a
    quarter of them), its ink's coordinates (two float64 a pixel) and its colours, raw and
    blurred; and those of its other readings (a mid-grey paper, the paper around
    it, the crop of its faint ink too, its page without a surround); and, once, the decoded grey
    pixels a large picture keeps for a finer look, which its readings share (its page has its
    own)."""
    if isinstance(picture, str):
        return len(picture)
    page = picture.page_reading  # its page's grey pixels, apart from the picture's
    return _reading_bytes(picture) + (picture.grey.nbytes if picture.grey is not None else 0) + \
        (page.grey.nbytes if page is not None and page.grey is not None else 0)


def _reading_bytes(picture) -> int:
    return 7 * picture.inkness.nbytes // 2 + 16 * picture.ink_pixels + \
        (2 * picture.chroma.nbytes if picture.chroma is not None else 0) + \
        sum(map(_reading_bytes, picture.other_readings().values()))


def cache_friendly(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``pairs`` in an order that keeps the pictures a run of pairs needs few: by connected
    component (pictures that meet), and within one, tile by tile of ``_TILE`` pictures (the pairs
    between two tiles together), so a process normalizes a picture about once per tile it meets
    instead of once per pair (name order scatters a picture's pairs over the whole list)."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    members: dict[str, list[str]] = {}
    for name in sorted(parent):
        members.setdefault(root(name), []).append(name)
    place = {name: (group, k // _TILE) for group, names in enumerate(members[r] for r in sorted(members))
             for k, name in enumerate(names)}
    return sorted(pairs, key=lambda pair: (*place[pair[0]], place[pair[1]][1], pair))


def _verdicts_in_worker(pairs: list[tuple[str, str]]) -> list[tuple[bool, str, str]]:
    matcher = shared(_MATCHER)
    return [matcher._compute_verdict(a, b) for a, b in pairs]


class ImageMatcher:
    """Near-equality of images by name (content hash), per the module's rule, and, with
    ``read_image`` (name -> bytes), the picture verdict on the pairs the rule lets through."""

    def __init__(self, index: ImageIndex, rule: MatchRule = MatchRule(),
                 read_image: Callable[[str], bytes] | None = None, known_verdicts: pl.DataFrame | None = None,
                 on_verdicts: Callable[[pl.DataFrame], None] | None = None):
        self.index = index
        # told each batch of verdicts as soon as it is computed (VERDICT_SCHEMA rows): kept on disk,
        # a long first build killed in the middle resumes from them
        self.on_verdicts = on_verdicts
        self.rule = rule
        # a picture reused by many questions meets the same others again and again
        self._known: dict[tuple[str, str], dict | None] = {}
        self.read_image = read_image
        self._verdicts: dict[tuple[str, str], tuple[bool, str, str]] = {}
        self._pictures: OrderedDict[str, object] = OrderedDict()  # least recently used first
        self._picture_bytes = 0
        self.verdicts_computed = 0
        if known_verdicts is not None and dict(known_verdicts.schema) == VERDICT_SCHEMA:
            for a, b, same, kind, measure in known_verdicts.iter_rows():
                self._verdicts[a, b] = (same, kind, measure)

    # ---- the picture verdict ----------------------------------------------------------------

    def _picture(self, name: str):
        from pipelines.clean.dedup import ink

        found = self._pictures.get(name)
        if found is not None:
            self._pictures.move_to_end(name)
            return found
        try:
            found = ink.ink_picture(self.read_image(name))
        except (OSError, ink.Undecodable) as exc:
            found = f"{type(exc).__name__}: {exc}"[:200]
        self._picture_bytes += _kept_bytes(found)
        self._pictures[name] = found
        while self._picture_bytes > _PICTURE_BYTES_KEPT and len(self._pictures) > 2:
            self._picture_bytes -= _kept_bytes(self._pictures.popitem(last=False)[1])
        return found

    def _compute_verdict(self, a: str, b: str) -> tuple[bool, str, str]:
        from pipelines.clean.dedup import ink

        first, second = self._picture(a), self._picture(b)
        if isinstance(first, str) or isinstance(second, str):
            error = first if isinstance(first, str) else second
            return False, "undecodable", json.dumps({"error": error}, sort_keys=True)
        verdict = ink.compare_prepared(first, second)
        return verdict.same, verdict.kind, json.dumps(verdict.measure, sort_keys=True)

    def verdicts_for(self, pairs: list[tuple[str, str]]) -> None:
        """Compute the verdicts of these (a < b) pairs not known yet."""
        # a picture's pairs close together reuse its normalized ink (in one process)
        todo = cache_friendly(sorted({pair for pair in pairs if pair not in self._verdicts}))
        workers = worker_count(len(todo), _VERDICTS_PER_WORKER)
        if workers <= 1:
            found = [self._compute_verdict(a, b) for a, b in todo]
        else:  # a verdict is a pure function of the two pictures: same results in any process
            with sharing({_MATCHER: self}), forked_pool(workers) as pool:
                found = [v for part in pool.map(_verdicts_in_worker, contiguous_slices(todo, 4 * workers)) for v in part]
        self._verdicts.update(zip(todo, found))
        self.verdicts_computed += len(todo)
        if self.on_verdicts is not None and todo:
            self.on_verdicts(pl.DataFrame([(a, b, *v) for (a, b), v in zip(todo, found)], schema=VERDICT_SCHEMA,
                                          orient="row"))

    def verdict(self, a: str, b: str) -> tuple[bool, str, str]:
        """(same, kind, measure JSON) of names ``a < b``."""
        self.verdicts_for([(a, b)])
        return self._verdicts[a, b]

    def verdicts(self) -> pl.DataFrame:
        """The verdicts known of pairs of images the index still describes, sorted: to keep for
        the next run (``known_verdicts``)."""
        present = self.index.row_of
        rows = sorted((a, b, *found) for (a, b), found in self._verdicts.items() if a in present and b in present)
        return pl.DataFrame(rows, schema=VERDICT_SCHEMA, orient="row")

    def _with_verdict(self, a: str, b: str, evidence: dict | None) -> dict | None:
        """``evidence`` of a pair (a < b) the descriptors let through, when the picture verdict
        agrees (with the verdict added), else None."""
        if evidence is None or self.read_image is None:
            return evidence
        same, kind, measure = self.verdict(a, b)
        if not same:
            return None
        return {**evidence, "verdict": kind, "ink": json.loads(measure)}

    def distance(self, a: str, b: str) -> dict | None:
        """Evidence (a dict) when images ``a`` and ``b`` are near-equal, else None."""
        if a == b:
            return {"image": "equal"}
        if b < a:  # the aligned distance shifts one image over the other: one order for a pair
            a, b = b, a
        try:
            found = self._known[a, b]
        except KeyError:
            found = self._known[a, b] = self._with_verdict(a, b, self._distance(a, b))
        return None if found is None else dict(found)

    def judge(self, a: list[str | None], b: list[str | None]) -> None:
        """Judge many pairs of image names at once, in compiled code: ``distance`` and ``near``
        then find them known. Same verdicts and evidence as judging them one by one."""
        known = self._known
        todo = list(dict.fromkeys(
            key for key in ((x, y) if x < y else (y, x) for x, y in zip(a, b) if x is not None and y is not None
                            and x != y) if key not in known))
        if todo:
            self._judge_new(todo)

    def _judge_new(self, pairs: list[tuple[str, str]]) -> None:
        from pipelines.clean.dedup import pair_kernel as kernel

        ra = self.index.rows([x for x, _ in pairs])
        rb = self.index.rows([y for _, y in pairs])
        _, (outcome, bound, hamming, colour, grey, box, chamming, rescanned, recropped), aligned = \
            self._judged(ra, rb)
        self._known.update(dict.fromkeys(pairs))
        found = {pairs[k]: _evidence(
            int(outcome[k]), float(bound[k]), int(hamming[k]), float(colour[k]), float(grey[k]), int(box[k]),
            int(chamming[k]), bool(rescanned[k]), bool(recropped[k]), float(aligned[k]), self.rule, kernel)
            for k in np.flatnonzero(outcome != kernel.NOT_NEAR).tolist()}
        if self.read_image is not None:  # the pictures of the pairs the descriptors let through, at once
            self.verdicts_for([pair for pair, evidence in found.items() if evidence is not None])
        for pair, evidence in found.items():
            self._known[pair] = self._with_verdict(*pair, evidence)

    def near_many(self, a: list[str | None], b: list[str | None]) -> np.ndarray:
        """``near(a[k], b[k])`` per pair, judged together in compiled code (nothing is cached)."""
        if not len(a):
            return np.zeros(0, dtype=bool)
        same = (pl.Series(a, dtype=pl.String).eq_missing(pl.Series(b, dtype=pl.String))).to_numpy()
        return self.near_rows(self.index.rows(a), self.index.rows(b), same)

    def near_rows(self, ra: np.ndarray, rb: np.ndarray, same: np.ndarray) -> np.ndarray:
        """``near_many`` of images given by index rows (-1: not described) and whether each pair
        names one image (``same``): no names gathered for pairs the descriptors reject."""
        if not len(ra):
            return np.zeros(0, dtype=bool)
        index = self.index
        lo, hi = np.minimum(ra, rb), np.maximum(ra, rb)  # rows are in name order: the pair's one order
        todo = np.flatnonzero(~same & (lo >= 0))
        verdict = same.copy()
        pairs, inverse = np.unique(lo[todo] * np.int64(len(index.phash)) + hi[todo], return_inverse=True)
        first_rows, second_rows = pairs // len(index.phash), pairs % len(index.phash)
        near = self._judged(first_rows, second_rows)[0]
        if self.read_image is not None:  # the pictures of the pairs the descriptors let through
            names = self.index._names
            self.verdicts_for([(names[int(first_rows[k])], names[int(second_rows[k])]) for k in np.flatnonzero(near).tolist()])
            for k in np.flatnonzero(near).tolist():
                near[k] = self.verdict(names[int(first_rows[k])], names[int(second_rows[k])])[0]
        verdict[todo] = near[inverse.reshape(-1)]
        return verdict

    def _judged(self, ra: np.ndarray, rb: np.ndarray):
        """(near, the figures of ``judge_pairs``, aligned distances) for index rows ``ra[k] < rb[k]``."""
        index, rule = self.index, self.rule
        from pipelines.clean.dedup import pair_kernel as kernel  # numba: loaded on first use

        figures = kernel.judge_pairs(
            ra, rb, index.phash, index.has_phash, index.content_slot, index.content_phash, index.box,
            index.colour_bins, index.thumbnails, index.thumbnail_slot, rule.image_hamming,
            rule.thumbnail_tolerance, rule.rescan_hamming, rule.rescan_tolerance, rule.content_hamming,
            rule.content_tolerance, rule.box_tolerance, rule.colour_tolerance, SAME_BOX)
        outcome, bound = figures[0], figures[1]
        aligned = np.full(len(ra), np.nan)
        pending = np.flatnonzero(outcome >= kernel.SAME_LAYOUT_ALIGNED)
        pending = pending[np.lexsort((rb[pending], ra[pending]))]  # a first image's pairs in a row
        taps, tap_weights = kernel.upsampling_taps(_UP_SCALED)

        def part(span: np.ndarray) -> np.ndarray:  # the kernel releases the GIL: threads share the work
            return kernel.aligned_distances(index.content_thumbnails, taps, tap_weights, _UP_SCALE,
                                            index.content_slot[ra[span]], index.content_slot[rb[span]], bound[span],
                                            _SHIFT)

        threads = min(os.cpu_count() or 1, 8, max(1, len(pending) // _PAIRS_PER_THREAD))
        if threads <= 1:
            aligned[pending] = part(pending)
        else:
            spans = np.array_split(pending, threads)
            with ThreadPoolExecutor(threads) as pool:
                for span, values in zip(spans, pool.map(part, spans)):
                    aligned[span] = values
        # a MOVED_ALIGNED pair's bound is the largest tolerance of the rules that apply to it
        near = (outcome == kernel.RE_ENCODED) | ((outcome >= kernel.SAME_LAYOUT_ALIGNED) & (aligned <= bound))
        return near, figures, aligned

    def _distance(self, a: str, b: str) -> dict | None:
        index, rule = self.index, self.rule
        ia, ib = index.row_of.get(a), index.row_of.get(b)
        if ia is None or ib is None or not (index.has_phash[ia] and index.has_phash[ib]):
            return None
        hamming = int(np.bitwise_count(index.phash[ia] ^ index.phash[ib]))
        if index.has_content[ia] and index.has_content[ib]:
            colour = index.colour_distance(ia, ib)
            if colour > rule.colour_tolerance:
                return None
            evidence = {"hamming": hamming, "colour": round(colour, 3)}
        else:
            evidence = {"hamming": hamming}
        described = index.has_content[ia] and index.has_content[ib]
        box = int(np.abs(index.box[ia] - index.box[ib]).max()) if described else None
        aligned = None
        if hamming <= rule.image_hamming:
            both = index.has_thumbnail[ia] and index.has_thumbnail[ib]
            grey = thumbnail_distance(index.thumbnails[index.thumbnail_slot[ia]],
                                      index.thumbnails[index.thumbnail_slot[ib]]) if both else None
            if grey is None or grey <= rule.thumbnail_tolerance:
                if grey is not None:
                    evidence["thumbnail"] = round(grey, 2)
                if not described or box > SAME_BOX:
                    return {"image": "re-encoded", **evidence}
                # same layout: the content thumbnails line up, so colours are compared where
                # they are (two spinners with the same colours on other sectors)
                aligned = aligned_distance(index.fine_thumbnail(ia), index.fine_thumbnail(ib))
                if aligned <= rule.rescan_tolerance:
                    return {"image": "re-encoded", **evidence, "aligned": round(aligned, 2)}
                return None
        if not described:
            return None
        content_hamming = int(np.bitwise_count(index.content_phash[ia] ^ index.content_phash[ib]))
        rescanned = hamming <= rule.rescan_hamming and box <= rule.box_tolerance
        recropped = content_hamming <= rule.content_hamming
        if not (rescanned or recropped):
            return None
        if aligned is None:
            aligned = aligned_distance(index.fine_thumbnail(ia), index.fine_thumbnail(ib))
        return _moved(evidence, rescanned, recropped, content_hamming, box, aligned, rule)

    def near(self, a: str, b: str) -> bool:
        return self.distance(a, b) is not None


    def options(self, a: tuple[str, ...], b: tuple[str, ...]) -> dict | None:
        """Evidence of a one-to-one near-equal matching of two image option multisets (greedy by
        Hamming distance, options are few), or None when there is none."""
        if len(a) != len(b):
            return None
        remaining = list(b)
        kinds: list[str] = []
        worst = 0
        for x in sorted(a):
            if x in remaining:
                remaining.remove(x)
                continue
            best = None
            for k, y in enumerate(remaining):
                found = self.distance(x, y)
                if found is not None and (best is None or found.get("hamming", 0) < best[1].get("hamming", 0)):
                    best = (k, found)
            if best is None:
                return None
            kinds.append(best[1]["image"])
            worst = max(worst, best[1].get("hamming", 0))
            remaining.pop(best[0])
        if not kinds:
            return {"options": "equal"}
        return {"options": "near", "options_image": sorted(set(kinds)), "options_hamming": worst}


def _evidence(outcome, bound, hamming, colour, grey, box, content_hamming, rescanned, recropped, aligned, rule,
              kernel) -> dict | None:
    """The evidence ``ImageMatcher._distance`` gives, from ``judge_pairs``'s figures."""
    if outcome == kernel.NOT_NEAR:
        return None
    evidence = {"hamming": hamming} if colour != colour else {"hamming": hamming, "colour": round(colour, 3)}
    if outcome == kernel.RE_ENCODED or outcome == kernel.SAME_LAYOUT_ALIGNED:
        if grey == grey:
            evidence["thumbnail"] = round(grey, 2)
        if outcome == kernel.RE_ENCODED:
            return {"image": "re-encoded", **evidence}
        if aligned <= bound:
            return {"image": "re-encoded", **evidence, "aligned": round(aligned, 2)}
        return None
    return _moved(evidence, rescanned, recropped, content_hamming, box, aligned, rule)


def _moved(evidence: dict, rescanned: bool, recropped: bool, content_hamming: int, box: int, aligned: float,
           rule: MatchRule) -> dict | None:
    """The verdict on a pair the re-scan or re-crop rule applies to, given its aligned distance."""
    evidence.update(content_hamming=content_hamming, box=box, aligned=round(aligned, 2))
    # a page that hardly moved leaves no misalignment to forgive
    if rescanned and aligned <= (rule.content_tolerance if box <= SAME_BOX else rule.rescan_tolerance):
        return {"image": "re-scanned", **evidence}
    if recropped and aligned <= rule.content_tolerance:
        return {"image": "re-cropped", **evidence}
    return None
