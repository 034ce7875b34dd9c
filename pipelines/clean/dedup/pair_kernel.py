"""Candidate pairs of the dedup passes, enumerated and filtered block by block in compiled code.

Within a block (items with equal exact keys), a pair is a candidate when the block is small, or,
in a large block, when the two items share a band of a page hash (``page_masks``), of a content
hash (``content_masks``), of some option picture's hashes (image options without a problem
image) or, for problem images without a hash, the same image. A candidate survives when its
problem images are close enough for some near-equality rule (page hashes within
``rescan_hamming`` bits or content hashes within ``content_hamming``; the same image when
either has no hash) and every option picture of each item is close to some option picture of
the other. This is what ``dedup._Candidates`` did with NumPy over materialized band-key pairs;
here each pair of a block is visited once and nothing but the survivors is stored, which
matters because look-alike drawings make most pairs of a large templated block share a band.

Numba is imported with this module; import it where it is used (Dagster definitions do not).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return (x * _H01) >> np.uint64(56)


@njit(cache=True, nogil=True, inline="always")
def _shares_band(x, masks):
    for k in range(masks.shape[0]):
        if (x & masks[k]) == np.uint64(0):
            return True
    return False


@njit(cache=True, nogil=True)
def _options_close(i, j, opt_row, opt_hash, opt_content, opt_chash, rescan_hamming, content_hamming):
    """Every present option picture of i close to one of j's, and the other way round."""
    width = opt_row.shape[1]
    for side in range(2):
        a, b = (i, j) if side == 0 else (j, i)
        for c in range(width):
            if opt_row[a, c] == -2:
                continue
            found = False
            for d in range(width):
                if opt_row[b, d] == -2:
                    continue
                if opt_row[a, c] >= 0 and opt_row[a, c] == opt_row[b, d]:
                    found = True
                elif _popcount(opt_hash[a, c] ^ opt_hash[b, d]) <= rescan_hamming:
                    found = True
                elif opt_content[a, c] and opt_content[b, d] and \
                        _popcount(opt_chash[a, c] ^ opt_chash[b, d]) <= content_hamming:
                    found = True
                if found:
                    break
            if not found:
                return False
    return True


@njit(cache=True, nogil=True)
def _options_share_band(i, j, opt_row, opt_hash, opt_content, opt_chash, page_masks, content_masks):
    width = opt_row.shape[1]
    for c in range(width):
        if opt_row[i, c] == -2:
            continue
        for d in range(width):
            if opt_row[j, d] == -2:
                continue
            if _shares_band(opt_hash[i, c] ^ opt_hash[j, d], page_masks):
                return True
            if opt_content[i, c] and opt_content[j, d] and \
                    _shares_band(opt_chash[i, c] ^ opt_chash[j, d], content_masks):
                return True
    return False


@njit(cache=True, nogil=True)
def _candidate(i, j, large, has_prob, prob_hashed, prob_hash, prob_content, prob_chash, image_id, opt_count,
               opt_row, opt_hash, opt_content, opt_chash, page_masks, content_masks):
    if not large[i]:
        return True
    if prob_hashed[i] and prob_hashed[j] and _shares_band(prob_hash[i] ^ prob_hash[j], page_masks):
        return True
    if prob_content[i] and prob_content[j] and _shares_band(prob_chash[i] ^ prob_chash[j], content_masks):
        return True
    if has_prob[i] and has_prob[j] and not prob_hashed[i] and not prob_hashed[j] and image_id[i] == image_id[j]:
        return True
    if not has_prob[i] and not has_prob[j] and opt_count[i] > 0 and opt_count[j] > 0:
        return _options_share_band(i, j, opt_row, opt_hash, opt_content, opt_chash, page_masks, content_masks)
    return False


@njit(cache=True, nogil=True)
def _image_survives(i, j, prob_hashed, prob_hash, prob_content, prob_chash, image_id, rescan_hamming,
                    content_hamming):
    if prob_hashed[i] and prob_hashed[j]:
        if _popcount(prob_hash[i] ^ prob_hash[j]) <= rescan_hamming:
            return True
        return prob_content[i] and prob_content[j] and _popcount(prob_chash[i] ^ prob_chash[j]) <= content_hamming
    return image_id[i] == image_id[j]


@njit(cache=True, nogil=True)
def _emit_run_pair(r1, r2, s, run_start, members, pictured, only, use_only, large, has_prob, prob_hashed, prob_hash,
                   prob_content, prob_chash, image_id, opt_count, opt_row, opt_hash, opt_content, opt_chash,
                   page_masks, content_masks, rescan_hamming, content_hamming, out_a, out_b, count):
    """Append the surviving pairs of runs r1 <= r2 whose problem images already pair."""
    for p in range(run_start[r1], run_start[r1 + 1]):
        i = members[s + p]
        q0 = p + 1 if r1 == r2 else run_start[r2]
        for q in range(q0, run_start[r2 + 1]):
            j = members[s + q]
            if use_only and not (only[i] or only[j]):
                continue
            if opt_count[min(i, j)] > 0 and not _options_close(
                    i, j, opt_row, opt_hash, opt_content, opt_chash, rescan_hamming, content_hamming):
                continue
            if not pictured:
                if not _candidate(i, j, large, has_prob, prob_hashed, prob_hash, prob_content, prob_chash, image_id,
                                  opt_count, opt_row, opt_hash, opt_content, opt_chash, page_masks, content_masks):
                    continue
            if count == out_a.shape[0]:
                grown_a = np.empty(2 * count, dtype=np.int64)
                grown_b = np.empty(2 * count, dtype=np.int64)
                grown_a[:count] = out_a[:count]
                grown_b[:count] = out_b[:count]
                out_a, out_b = grown_a, grown_b
            out_a[count] = min(i, j)
            out_b[count] = max(i, j)
            count += 1
    return out_a, out_b, count


@njit(cache=True, nogil=True)
def _shared_before(x1, x2, band, hashed, content, page_masks, content_masks, prob_hash, prob_chash):
    """Whether runs with first items x1, x2 share a band that comes before ``band`` (page bands,
    then content bands): the pair was met there already."""
    n_page = page_masks.shape[0]
    if hashed:
        for k in range(min(band, n_page)):
            if ((prob_hash[x1] ^ prob_hash[x2]) & page_masks[k]) == np.uint64(0):
                return True
    if content and band > n_page:
        for k in range(band - n_page):
            if ((prob_chash[x1] ^ prob_chash[x2]) & content_masks[k]) == np.uint64(0):
                return True
    return False


@njit(cache=True, nogil=True)
def _band_run_pair(r1, r2, band, s, run_start, members, firsts, only, use_only, large, has_prob, prob_hashed,
                   prob_hash, prob_content, prob_chash, image_id, opt_count, opt_row, opt_hash, opt_content, opt_chash,
                   page_masks, content_masks, rescan_hamming, content_hamming, out_a, out_b, count):
    """Append the surviving pairs of runs r1 < r2 of a large block that share ``band``, unless
    they share an earlier band (met there)."""
    x1, x2 = firsts[r1], firsts[r2]
    hashed = prob_hashed[x1] and prob_hashed[x2]
    content = prob_content[x1] and prob_content[x2]
    if _shared_before(x1, x2, band, hashed, content, page_masks, content_masks, prob_hash, prob_chash):
        return out_a, out_b, count
    if not _image_survives(x1, x2, prob_hashed, prob_hash, prob_content, prob_chash, image_id, rescan_hamming,
                           content_hamming):
        return out_a, out_b, count
    return _emit_run_pair(r1, r2, s, run_start, members, True, only, use_only, large, has_prob, prob_hashed,
                          prob_hash, prob_content, prob_chash, image_id, opt_count, opt_row, opt_hash, opt_content,
                          opt_chash, page_masks, content_masks, rescan_hamming, content_hamming, out_a, out_b, count)


# with ``only``, a large block's runs to pair are scanned for (not sorted) up to this many
ONLY_SCAN_RUNS = 32


@njit(cache=True, nogil=True)
def block_pairs(members, starts, sizes, only, use_only, large, has_prob, prob_hashed, prob_hash, prob_content,
                prob_chash, image_id, opt_count, opt_row, opt_hash, opt_content, opt_chash, page_masks,
                content_masks, rescan_hamming, content_hamming):
    """Surviving candidate pairs (a < b, item indices) of the blocks ``members[starts[g]:
    starts[g] + sizes[g]]`` (each block ordered by ``image_id``); with ``use_only``, just the
    pairs with an endpoint in ``only``.

    Items with the same problem image form a run: whether two runs' problem images pair is
    decided once for the two runs. In a small block every two runs are compared; in a large one
    the runs are sorted by each band's value and only runs that share a band meet (a pair is
    taken at the first band it shares), so a block of distinct random-looking pictures costs its
    band collisions, not its runs squared. With ``use_only``, a large block where at most
    ``ONLY_SCAN_RUNS`` runs hold ``only`` items looks for those runs' band values by a scan."""
    out_a = np.empty(1 << 16, dtype=np.int64)
    out_b = np.empty(1 << 16, dtype=np.int64)
    count = 0
    n_page, n_content = page_masks.shape[0], content_masks.shape[0]
    for g in range(starts.shape[0]):
        s, n = starts[g], sizes[g]
        run_start = np.empty(n + 1, dtype=np.int64)
        runs = 0
        for p in range(n):
            if p == 0 or image_id[members[s + p]] != image_id[members[s + p - 1]]:
                run_start[runs] = p
                runs += 1
        run_start[runs] = n
        run_only = np.zeros(runs, dtype=np.bool_)
        if use_only:
            for r in range(runs):
                for p in range(run_start[r], run_start[r + 1]):
                    if only[members[s + p]]:
                        run_only[r] = True
                        break
        banded = large[members[s]]
        # pairs inside a run; in a small block, also every two runs
        for r1 in range(runs):
            first1 = members[s + run_start[r1]]
            pictured = has_prob[first1]  # a run shares one problem image (or none)
            for r2 in range(r1, runs if not banded else r1 + 1):
                if use_only and not (run_only[r1] or run_only[r2]):
                    continue
                if r1 != r2:
                    first2 = members[s + run_start[r2]]
                    if pictured:
                        if not _image_survives(first1, first2, prob_hashed, prob_hash, prob_content, prob_chash,
                                               image_id, rescan_hamming, content_hamming):
                            continue
                        if not _candidate(first1, first2, large, has_prob, prob_hashed, prob_hash, prob_content,
                                          prob_chash, image_id, opt_count, opt_row, opt_hash, opt_content, opt_chash,
                                          page_masks, content_masks):
                            continue
                out_a, out_b, count = _emit_run_pair(
                    r1, r2, s, run_start, members, pictured, only, use_only, large, has_prob, prob_hashed,
                    prob_hash, prob_content, prob_chash, image_id, opt_count, opt_row, opt_hash, opt_content,
                    opt_chash, page_masks, content_masks, rescan_hamming, content_hamming, out_a, out_b, count)
        if not banded:
            continue
        # a large block: runs with a problem image meet where they share a band
        firsts = np.empty(runs, dtype=np.int64)
        for r in range(runs):
            firsts[r] = members[s + run_start[r]]
        values = np.empty(runs, dtype=np.uint64)
        for band in range(n_page + n_content):
            page = band < n_page
            usable = np.zeros(runs, dtype=np.bool_)
            for r in range(runs):
                x = firsts[r]
                usable[r] = prob_hashed[x] if page else prob_content[x]
                values[r] = (prob_hash[x] & page_masks[band]) if page else (prob_chash[x] & content_masks[band - n_page])
            picked = np.flatnonzero(usable)
            if picked.shape[0] < 2:
                continue
            if use_only:
                dirty_runs = np.flatnonzero(usable & run_only)
                if dirty_runs.shape[0] <= ONLY_SCAN_RUNS:
                    # a few runs to pair: scan the block for each one's band value instead of sorting
                    for o in dirty_runs:
                        for r in picked:
                            if r == o or values[r] != values[o] or (run_only[r] and r < o):
                                continue  # a pair of two such runs is met from its first one
                            out_a, out_b, count = _band_run_pair(
                                min(o, r), max(o, r), band, s, run_start, members, firsts, only, use_only, large,
                                has_prob, prob_hashed, prob_hash, prob_content, prob_chash, image_id, opt_count,
                                opt_row, opt_hash, opt_content, opt_chash, page_masks, content_masks, rescan_hamming,
                                content_hamming, out_a, out_b, count)
                    continue
            order = picked[np.argsort(values[picked], kind="mergesort")]
            lo = 0
            while lo < order.shape[0]:
                hi = lo + 1
                while hi < order.shape[0] and values[order[hi]] == values[order[lo]]:
                    hi += 1
                for u in range(lo, hi):
                    for v in range(u + 1, hi):
                        r1, r2 = min(order[u], order[v]), max(order[u], order[v])
                        if use_only and not (run_only[r1] or run_only[r2]):
                            continue
                        # _band_run_pair written out: calling it here costs a full build ~2.5 s of CPU,
                        # even with numba's inline="always" (measured)
                        x1, x2 = firsts[r1], firsts[r2]
                        hashed = prob_hashed[x1] and prob_hashed[x2]
                        content = prob_content[x1] and prob_content[x2]
                        if _shared_before(x1, x2, band, hashed, content, page_masks, content_masks, prob_hash,
                                          prob_chash):
                            continue
                        if not _image_survives(x1, x2, prob_hashed, prob_hash, prob_content, prob_chash, image_id,
                                               rescan_hamming, content_hamming):
                            continue
                        out_a, out_b, count = _emit_run_pair(
                            r1, r2, s, run_start, members, True, only, use_only, large, has_prob, prob_hashed,
                            prob_hash, prob_content, prob_chash, image_id, opt_count, opt_row, opt_hash,
                            opt_content, opt_chash, page_masks, content_masks, rescan_hamming, content_hamming,
                            out_a, out_b, count)
                lo = hi
    return out_a[:count].copy(), out_b[:count].copy()


@njit(cache=True, nogil=True)
def component_labels(n, a, b):
    """Per node of ``n``, the smallest node index in its connected component (edges ``a[k]-b[k]``):
    union-find whose root is always its component's smallest node."""
    parent = np.arange(n)
    for k in range(a.shape[0]):
        x, y = a[k], b[k]
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        while parent[y] != y:
            parent[y] = parent[parent[y]]
            y = parent[y]
        if x < y:
            parent[y] = x
        elif y < x:
            parent[x] = y
    for i in range(n):  # a parent is smaller than its child: in this order, already final
        parent[i] = parent[parent[i]]
    return parent


_BLOCK_COST_PER_THREAD = 200_000  # below this many estimated comparisons per thread, one thread


def block_pairs_threaded(members, starts, sizes, *arrays):
    """``block_pairs`` over the blocks, shared by threads (the kernel releases the GIL): the
    blocks are cut into consecutive parts of about equal estimated cost and the parts' pairs
    are concatenated in block order, so the result is the single-threaded one."""
    cost = sizes * np.minimum(sizes, 32)  # a large block is banded: its cost grows about linearly
    threads = min(os.cpu_count() or 1, 8, max(1, int(cost.sum()) // _BLOCK_COST_PER_THREAD))
    if threads <= 1 or len(sizes) < 2:
        return block_pairs(members, starts, sizes, *arrays)
    parts = threads * 4  # a few parts per thread even out a part that holds one huge block
    cuts = np.searchsorted(np.cumsum(cost), np.arange(1, parts) * (cost.sum() / parts))
    bounds = np.unique(np.r_[0, cuts, len(sizes)])

    def part(k: int):
        lo, hi = bounds[k], bounds[k + 1]
        return block_pairs(members, starts[lo:hi], sizes[lo:hi], *arrays)

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(part, range(len(bounds) - 1)))
    return np.concatenate([a for a, _ in results]), np.concatenate([b for _, b in results])


@njit(cache=True, nogil=True)
def aligned_distance(a, b, shift):
    """Smallest mean absolute difference of two (F, F, C) arrays over shifts of ``b`` by up to
    ``shift`` pixels, on the inner window both cover; a shift is abandoned once its partial sum
    exceeds the best mean so far."""
    side, channels = a.shape[0], a.shape[2]
    inner = side - 2 * shift
    cells = inner * inner * channels
    best = np.inf
    for dy in range(-shift, shift + 1):
        for dx in range(-shift, shift + 1):
            limit = best * cells
            total = 0.0
            for y in range(inner):
                for x in range(inner):
                    for c in range(channels):
                        total += abs(a[shift + y, shift + x, c] - b[shift + dy + y, shift + dx + x, c])
                if total > limit:
                    break
            if total <= limit:
                best = min(best, total / cells)
    return best


@njit(cache=True, nogil=True, inline="always")
def _pairwise_abs_difference(x, y, i, j):
    """``np.abs(x[i] / 255 - y[j] / 255).sum()`` of two uint8 rows, summed as NumPy's pairwise
    sum does (eight partial sums), so the value is NumPy's to the last bit."""
    n = x.shape[1]
    if n < 8:
        total = 0.0
        for k in range(n):
            total += abs(x[i, k] / 255.0 - y[j, k] / 255.0)
        return total
    r0 = abs(x[i, 0] / 255.0 - y[j, 0] / 255.0)
    r1 = abs(x[i, 1] / 255.0 - y[j, 1] / 255.0)
    r2 = abs(x[i, 2] / 255.0 - y[j, 2] / 255.0)
    r3 = abs(x[i, 3] / 255.0 - y[j, 3] / 255.0)
    r4 = abs(x[i, 4] / 255.0 - y[j, 4] / 255.0)
    r5 = abs(x[i, 5] / 255.0 - y[j, 5] / 255.0)
    r6 = abs(x[i, 6] / 255.0 - y[j, 6] / 255.0)
    r7 = abs(x[i, 7] / 255.0 - y[j, 7] / 255.0)
    k = 8
    while k < n - (n % 8):
        r0 += abs(x[i, k] / 255.0 - y[j, k] / 255.0)
        r1 += abs(x[i, k + 1] / 255.0 - y[j, k + 1] / 255.0)
        r2 += abs(x[i, k + 2] / 255.0 - y[j, k + 2] / 255.0)
        r3 += abs(x[i, k + 3] / 255.0 - y[j, k + 3] / 255.0)
        r4 += abs(x[i, k + 4] / 255.0 - y[j, k + 4] / 255.0)
        r5 += abs(x[i, k + 5] / 255.0 - y[j, k + 5] / 255.0)
        r6 += abs(x[i, k + 6] / 255.0 - y[j, k + 6] / 255.0)
        r7 += abs(x[i, k + 7] / 255.0 - y[j, k + 7] / 255.0)
        k += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while k < n:
        total += abs(x[i, k] / 255.0 - y[j, k] / 255.0)
        k += 1
    return total


# what ``judge_pairs`` found of a pair before any aligned distance
NOT_NEAR, RE_ENCODED, SAME_LAYOUT_ALIGNED, MOVED_ALIGNED = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def judge_pairs(ra, rb, phash, has_phash, content_slot, content_phash, box, colours, thumbs, thumb_slot,
                image_hamming, thumbnail_tolerance, rescan_hamming, rescan_tolerance, content_hamming,
                content_tolerance, box_tolerance, colour_tolerance, same_box):
    """``ImageMatcher._distance`` up to its aligned distance, for index rows ``ra[k]``, ``rb[k]``.

    Returns per pair: the outcome (NOT_NEAR; RE_ENCODED; SAME_LAYOUT_ALIGNED: re-encoded when the
    aligned distance is within ``rescan_tolerance``; MOVED_ALIGNED: re-scanned or re-cropped per
    the flags and the aligned distance), the aligned distance bound under which the pair is
    near (-1: none), page Hamming distance, colour distance (NaN: not described), grey
    thumbnail distance (NaN: none), content-box distance, content Hamming distance, and whether
    the re-scan and re-crop rules apply. ``content_slot`` and ``thumb_slot`` give each row's entry
    in ``colours`` and ``thumbs`` (-1: none)."""
    m = ra.shape[0]
    outcome = np.zeros(m, dtype=np.int8)
    bound = np.full(m, -1.0)
    hamming = np.zeros(m, dtype=np.int64)
    colour = np.full(m, np.nan)
    grey = np.full(m, np.nan)
    box_distance = np.zeros(m, dtype=np.int64)
    chamming = np.zeros(m, dtype=np.int64)
    rescanned = np.zeros(m, dtype=np.bool_)
    recropped = np.zeros(m, dtype=np.bool_)
    side = thumbs.shape[1]
    for k in range(m):
        a, b = ra[k], rb[k]
        if a < 0 or b < 0 or not (has_phash[a] and has_phash[b]):
            continue
        h = _popcount(phash[a] ^ phash[b])
        hamming[k] = h
        described = content_slot[a] >= 0 and content_slot[b] >= 0
        if described:
            c = _pairwise_abs_difference(colours, colours, content_slot[a], content_slot[b])
            if c > colour_tolerance:
                continue
            colour[k] = c
            d = 0
            for t in range(4):
                d = max(d, abs(box[a, t] - box[b, t]))
            box_distance[k] = d
        if h <= image_hamming:
            grey_ok = True
            if thumb_slot[a] >= 0 and thumb_slot[b] >= 0:
                ta, tb = thumb_slot[a], thumb_slot[b]
                s = 0
                for t in range(side):
                    s += abs(np.int64(thumbs[ta, t]) - np.int64(thumbs[tb, t]))
                g = s / side
                grey_ok = g <= thumbnail_tolerance
                if grey_ok:
                    grey[k] = g
            if grey_ok:
                if not described or box_distance[k] > same_box:
                    outcome[k] = RE_ENCODED
                else:
                    outcome[k] = SAME_LAYOUT_ALIGNED
                    bound[k] = rescan_tolerance
                continue
        if not described:
            continue
        ch = _popcount(content_phash[a] ^ content_phash[b])
        chamming[k] = ch
        rescanned[k] = h <= rescan_hamming and box_distance[k] <= box_tolerance
        recropped[k] = ch <= content_hamming
        if rescanned[k]:
            bound[k] = content_tolerance if box_distance[k] <= same_box else rescan_tolerance
        if recropped[k]:
            bound[k] = max(bound[k], content_tolerance)
        if rescanned[k] or recropped[k]:
            outcome[k] = MOVED_ALIGNED
    return outcome, bound, hamming, colour, grey, box_distance, chamming, rescanned, recropped


# Sums of integer-valued float64 below 2**53 are exact in any order: the kernels below may let
# the compiler reorder (vectorize) them without changing a bit of the result.
_EXACT_SUMS = {"reassoc"}


@njit(cache=True, nogil=True, fastmath=_EXACT_SUMS)
def _upsample_scaled(thumb, taps, tap_weights, rows, out):
    """``upsample(thumb, weights, scale) * scale**2`` for integer weights (F, S) given as two taps
    per output index (``taps`` (F, 2) indices, ``tap_weights`` (F, 2) integer-valued floats), as
    rows of (F, F * C) integer-valued float64. ``rows``: (F, S, C) float64 scratch."""
    fine_side = taps.shape[0]
    side, channels = thumb.shape[1], thumb.shape[2]
    for i in range(fine_side):
        p0, p1, w0, w1 = taps[i, 0], taps[i, 1], tap_weights[i, 0], tap_weights[i, 1]
        for q in range(side):
            for c in range(channels):
                rows[i, q, c] = w0 * thumb[p0, q, c] + w1 * thumb[p1, q, c]
    for i in range(fine_side):
        for j in range(fine_side):
            q0, q1, w0, w1 = taps[j, 0], taps[j, 1], tap_weights[j, 0], tap_weights[j, 1]
            for c in range(channels):
                out[i, j * channels + c] = w0 * rows[i, q0, c] + w1 * rows[i, q1, c]


@njit(cache=True, nogil=True, fastmath=_EXACT_SUMS, inline="always")
def _row_difference(a, b, width):
    total = 0.0
    for t in range(width):
        total += abs(a[t] - b[t])
    return total


@njit(cache=True, nogil=True)
def aligned_distances(thumbs, taps, tap_weights, scale, ra, rb, bound, shift):
    """``aligned_distance(upsample(thumbs[ra[k]], ...), upsample(thumbs[rb[k]], ...), shift)`` per pair, exact
    when it is at most ``bound[k]``; above it, some value above ``bound[k]`` (shifts are abandoned
    early). ``taps``, ``tap_weights``: the upsampling weights times ``scale``, all integers, as two
    taps per output index (``upsampling_taps``): every upsampled value times ``scale**2`` is an
    integer, so the sums are exact (in any order) and the means are the unscaled computation's to
    the last bit. Pairs sharing their first image in a row upsample it once."""
    m = ra.shape[0]
    out = np.empty(m)
    # the unshifted comparison first: for a near pair it is usually the best, and the rest stop early
    order = np.empty(((2 * shift + 1) ** 2, 2), dtype=np.int64)
    n = 0
    for reach in range(shift + 1):
        for dy in range(-shift, shift + 1):
            for dx in range(-shift, shift + 1):
                if max(abs(dy), abs(dx)) == reach:
                    order[n, 0], order[n, 1] = dy, dx
                    n += 1
    side, channels = taps.shape[0], thumbs.shape[3]
    rows = np.zeros((side, thumbs.shape[2], channels))
    inner = side - 2 * shift
    width = inner * channels
    cells = inner * inner * channels
    units = float(scale * scale)
    a = np.zeros((side, side * channels))
    b = np.zeros((side, side * channels))
    last = -1
    x0 = shift * channels
    for k in range(m):
        if ra[k] != last:
            _upsample_scaled(thumbs[ra[k]], taps, tap_weights, rows, a)
            last = ra[k]
        _upsample_scaled(thumbs[rb[k]], taps, tap_weights, rows, b)
        # a margin far above rounding, so the shift with the smallest mean is never abandoned
        cap = bound[k] * (1.0 + 1e-9) + 1e-12
        best = np.inf
        for s in range(order.shape[0]):
            dy, dx = order[s, 0], order[s, 1]
            limit = min(best, cap) * cells * units
            total = 0.0
            bx = (shift + dx) * channels
            for y in range(inner):
                total += _row_difference(a[shift + y, x0:x0 + width], b[shift + dy + y, bx:bx + width], width)
                if total > limit:
                    break
            if total <= limit:
                best = min(best, total / (cells * units))
        out[k] = best
    return out


def upsample(thumb: np.ndarray, weights: np.ndarray, scale: int) -> np.ndarray:
    """``(weights / scale) @ thumb @ (weights / scale).T`` per channel of a (S, S, C) uint8 thumbnail,
    as (F, F, C) float64, for integer ``weights`` (F, S) with at most two taps per row: the sums are
    of integers, so the values are exact (and those ``aligned_distances`` compares)."""
    taps, tap_weights = upsampling_taps(weights)
    side, channels = weights.shape[0], thumb.shape[2]
    out = np.zeros((side, side * channels))
    _upsample_scaled(thumb, taps, tap_weights, np.zeros((side, thumb.shape[1], channels)), out)
    return (out / (scale * scale)).reshape(side, side, channels)


def upsampling_taps(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An (F, S) weight matrix with at most two nonzero weights per row as (F, 2) tap indices and
    their (F, 2) weights (a missing second tap: weight 0)."""
    taps = np.zeros((weights.shape[0], 2), dtype=np.int64)
    tap_weights = np.zeros((weights.shape[0], 2), dtype=np.float64)
    for i, row in enumerate(weights):
        nonzero = np.flatnonzero(row)
        if len(nonzero) > 2:
            raise ValueError("more than two taps in a row of the upsampling weights")
        taps[i, :len(nonzero)] = nonzero
        tap_weights[i, :len(nonzero)] = row[nonzero]
    return taps, tap_weights
