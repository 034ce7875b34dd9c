"""Compiled per-picture kernels of the image descriptors (``phash.content_box``,
``phash.colour_histogram``, ``phash._paper_colour``): a few passes over the pixels instead of a
dozen NumPy temporaries, with the same results bit for bit (whole-number sums; the colour sums
add the same float64 shares in the same order as ``np.bincount``; no fastmath, so no reordering or
fused multiply-add). tests/clean/test_image_kernel.py pins them against the NumPy code.

Numba is imported with this module; import it where it is used (Dagster definitions do not).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _bounds(mass, total, tail):
    """``searchsorted`` of the cumulative share of ``mass``: the first index past ``tail`` of the
    total and one past the first index at or beyond 1 - tail."""
    running = 0
    lo = 0
    hi = 0
    upper = 1.0 - tail
    for i in range(mass.shape[0]):
        running += mass[i]
        share = running / total
        if share <= tail:
            lo += 1
        if share < upper:
            hi += 1
    return lo, max(hi + 1, lo + 1)


@njit(cache=True, nogil=True)
def content_bounds(rgb, floor, tail):
    """(left, top, right, bottom) of the edge strength of an (h, w, 3) image: see ``phash.content_box``."""
    h, w = rgb.shape[0], rgb.shape[1]
    n = 3 * w
    rows_of_bytes = rgb.reshape(h, n)
    # per byte steps first (contiguous, vectorized), then the channel maximum per pixel
    byte_step = np.zeros(n, dtype=np.uint8)
    step = np.zeros(w, dtype=np.int16)
    strength = np.zeros((h, w), dtype=np.int16)  # at most 4 * 255
    for y in range(h):
        row = rows_of_bytes[y]
        line = strength[y]
        if w > 1:
            for i in range(n - 3):
                byte_step[i] = max(row[i + 3], row[i]) - min(row[i + 3], row[i])
            for x in range(w - 1):
                step[x] = max(max(byte_step[3 * x], byte_step[3 * x + 1]), byte_step[3 * x + 2])
            for x in range(w - 1):
                line[x] += step[x]
            for x in range(w - 1):
                line[x + 1] += step[x]
        if y + 1 < h:
            below = rows_of_bytes[y + 1]
            for i in range(n):
                byte_step[i] = max(below[i], row[i]) - min(below[i], row[i])
            for x in range(w):
                step[x] = max(max(byte_step[3 * x], byte_step[3 * x + 1]), byte_step[3 * x + 2])
            next_line = strength[y + 1]
            for x in range(w):
                line[x] += step[x]
                next_line[x] += step[x]
    columns = np.zeros(w, dtype=np.int64)
    rows = np.zeros(h, dtype=np.int64)
    for y in range(h):
        line_total = 0
        for x in range(w):
            s = max(np.int32(strength[y, x]) - np.int32(2 * floor), np.int32(0))
            columns[x] += s
            line_total += s
        rows[y] = line_total
    total = columns.sum()
    if total <= 0:
        return 0, 0, w, h
    left, right = _bounds(columns, total, tail)
    top, bottom = _bounds(rows, total, tail)
    return left, top, right, bottom


@njit(cache=True, nogil=True)
def colour_shares(rgb, bins, min_saturation, floor):
    """The colour histogram of an (h, w, 3) image: see ``phash.colour_histogram``."""
    h, w = rgb.shape[0], rgb.shape[1]
    n = h * w
    lower = np.empty(n, dtype=np.int64)
    weight = np.empty(n, dtype=np.float64)
    count = 0
    for y in range(h):
        for x in range(w):
            r = np.float64(rgb[y, x, 0])
            g = np.float64(rgb[y, x, 1])
            b = np.float64(rgb[y, x, 2])
            top = max(max(r, g), b)
            saturation = top - min(min(r, g), b)
            if not saturation >= min_saturation:
                continue
            if top == r:
                hue = ((g - b) / saturation) % 6.0
            elif top == g:
                hue = (b - r) / saturation + 2.0
            else:
                hue = (r - g) / saturation + 4.0
            position = (hue / 6.0) * bins - 0.5
            below = np.floor(position)
            lower[count] = np.int64(below)
            weight[count] = position - below
            count += 1
    out = np.zeros(bins, dtype=np.float64)
    # all lower shares, then all upper shares: per bin the order of np.bincount's additions
    for k in range(count):
        out[lower[k] % bins] += 1.0 - weight[k]
    for k in range(count):
        out[(lower[k] + 1) % bins] += weight[k]
    least = floor * n
    mass = np.float64(count) if count >= least else least
    for k in range(bins):
        out[k] = out[k] / mass
    return out


@njit(cache=True, nogil=True)
def colour_bytes(rgb, bins, min_saturation, floor):
    """``colour_shares`` in 1/255ths of the mass, rounded half to even, as uint8."""
    shares = colour_shares(rgb, bins, min_saturation, floor)
    out = np.empty(bins, dtype=np.uint8)
    for k in range(bins):
        out[k] = np.uint8(min(max(np.rint(shares[k] * 255), 0.0), 255.0))
    return out


@njit(cache=True, nogil=True, inline="always")
def _order_statistic(counts, k):
    seen = 0
    for v in range(256):
        seen += counts[v]
        if seen > k:
            return v
    return 255


@njit(cache=True, nogil=True)
def ring_median(rgb):
    """Per channel, the floor of the median of the outermost pixel ring of an (h, w, 3) uint8
    image, the ring taken as first row, last row, first column, last column (corners twice)."""
    h, w = rgb.shape[0], rgb.shape[1]
    counts = np.zeros((3, 256), dtype=np.int64)
    for x in range(w):
        for c in range(3):
            counts[c, rgb[0, x, c]] += 1
            counts[c, rgb[h - 1, x, c]] += 1
    for y in range(h):
        for c in range(3):
            counts[c, rgb[y, 0, c]] += 1
            counts[c, rgb[y, w - 1, c]] += 1
    n = 2 * (w + h)
    out = np.empty(3, dtype=np.int64)
    for c in range(3):
        out[c] = (_order_statistic(counts[c], n // 2 - 1) + _order_statistic(counts[c], n // 2)) // 2
    return out[0], out[1], out[2]


def compile_kernels() -> None:
    """Compile (or load from the cache) every kernel for uint8 pictures, e.g. before forking
    workers, which then share the machine code instead of each compiling it."""
    tiny = np.zeros((2, 2, 3), dtype=np.uint8)
    content_bounds(tiny, 24, 0.005)
    colour_shares(tiny, 16, 48, 0.03)
    colour_bytes(tiny, 16, 48, 0.03)
    ring_median(tiny)

