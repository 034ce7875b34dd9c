"""Perceptual hashing speed: ``imagehash.phash`` vs ``pipelines.clean.dedup.phash.phash_files``.

Both hash the same image files (demo-site drawings rendered to a temporary folder: the
site's own mix, plus all-PNG and all-JPEG sets), after a warm-up. imagehash runs the
documented way, ``imagehash.phash(Image.open(path))`` in a loop; ours is the batched,
threaded call the pipeline uses. Prints hashes/s of both (wall clock) and their all-core ratio, the per-core ratio (CPU time per
image of imagehash vs ours with one worker: the work done, independent of other load on the
machine), and the agreement: how often the fast path's 64 bits differ from imagehash's, by how
many bits, and the same for the exact path.

    .venv/bin/python bench/imagehash_speed.py [--images 2000] [--seed 0] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipelines.clean.dedup.phash import phash_files  # noqa: E402
from pipelines.ingest.demo_site.generator import DemoSite, SiteConfig, render_image  # noqa: E402


def demo_images(count: int, seed: int, variant: str | None):
    """Distinct image specs from the demo site; variant None keeps each spec's own encoding."""
    site = DemoSite(SiteConfig(seed=seed, questions=max(4, count * 2)))
    seen, specs = set(), []
    step = 1
    i = 0
    while len(specs) < count and i < site.num_indices:
        q = site.question(i)
        i += step
        for spec in q.images:
            if variant is not None:
                spec = spec.with_variant(variant)
            if spec.key not in seen:
                seen.add(spec.key)
                specs.append(spec)
                if len(specs) >= count:
                    break
    return specs


def write_images(specs, folder: Path) -> list[Path]:
    paths = []
    for spec in specs:
        path = folder / f"{spec.key}.{spec.extension}"
        path.write_bytes(render_image(spec))
        paths.append(path)
    return paths


def run_imagehash(paths):
    import imagehash
    from PIL import Image

    out = []
    for p in paths:
        with Image.open(p) as im:
            out.append(int(str(imagehash.phash(im)), 16))
    return out


def measure(label: str, paths: list[Path], workers: int | None, repeats: int = 3) -> dict:
    run_imagehash(paths[:20])  # warm-up: scipy import, Pillow plugins
    phash_files(paths[:20], workers=workers)
    t_ref = min(_timed(lambda: run_imagehash(paths)) for _ in range(repeats))
    t_ours = min(_timed(lambda: phash_files(paths, workers=workers)) for _ in range(repeats))
    t_exact = min(_timed(lambda: phash_files(paths, workers=workers, fast=False)) for _ in range(repeats))
    cpu_ref = min(_cpu(lambda: run_imagehash(paths)) for _ in range(repeats))
    cpu_ours = min(_cpu(lambda: phash_files(paths, workers=1)) for _ in range(repeats))
    ref = np.array(run_imagehash(paths), dtype=np.uint64)
    ours = phash_files(paths, workers=workers)
    ours_exact = phash_files(paths, workers=workers, fast=False)
    dist = np.bitwise_count(ref ^ ours)
    dist_exact = np.bitwise_count(ref ^ ours_exact)
    n = len(paths)
    differing = dist[dist > 0]
    row = {
        "set": label,
        "images": n,
        "imagehash_per_s": n / t_ref,
        "ours_per_s": n / t_ours,
        "ratio": t_ref / t_ours,
        "exact_per_s": n / t_exact,
        "ratio_exact": t_ref / t_exact,
        "cpu_us_imagehash": cpu_ref / n * 1e6,
        "cpu_us_ours": cpu_ours / n * 1e6,
        "per_core_ratio": cpu_ref / cpu_ours,
        "identical": float((dist == 0).mean()),
        "differ": float((dist > 0).mean()),
        "differ_mean_bits": float(differing.mean()) if differing.size else 0.0,
        "hamming_hist": {int(k): int(v) for k, v in zip(*np.unique(dist, return_counts=True))},
        "identical_exact_path": float((dist_exact == 0).mean()),
    }
    print(
        f"{label:<10} {n:>6} images  imagehash {row['imagehash_per_s']:>8.0f}/s  ours {row['ours_per_s']:>8.0f}/s  "
        f"all-core ratio {row['ratio']:.2f}x (exact path {row['ratio_exact']:.2f}x)  "
        f"per-core ratio {row['per_core_ratio']:.2f}x (CPU/image on one core {row['cpu_us_imagehash']:.0f} vs "
        f"{row['cpu_us_ours']:.0f} us)  "
        f"bits differ from imagehash on {100 * row['differ']:.1f}% of images (mean {row['differ_mean_bits']:.1f} of 64 "
        f"bits where they differ; exact path {100 * (1 - row['identical_exact_path']):.1f}%)  "
        f"hamming histogram {row['hamming_hist']}"
    )
    return row


def _cpu(fn) -> float:
    """CPU seconds of this process (all threads): the work, whatever else the machine runs."""
    t = time.process_time()
    fn()
    return time.process_time() - t


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None, help="worker processes for ours (default: cpu count, at most 8)")
    args = ap.parse_args(argv)
    print(f"perceptual hash speed, {args.images} demo-site images per set, cpus={os.cpu_count()}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="phash-bench-") as tmp:
        for label, variant in (("site-mix", None), ("png", ""), ("jpeg", "jpeg")):
            folder = Path(tmp) / label
            folder.mkdir()
            paths = write_images(demo_images(args.images, args.seed, variant), folder)
            rows.append(measure(label, paths, args.workers))
    total_ref = sum(r["images"] / r["imagehash_per_s"] for r in rows)
    total_ours = sum(r["images"] / r["ours_per_s"] for r in rows)
    total_exact = sum(r["images"] / r["exact_per_s"] for r in rows)
    cpu_ref = sum(r["images"] * r["cpu_us_imagehash"] for r in rows)
    cpu_ours = sum(r["images"] * r["cpu_us_ours"] for r in rows)
    images = sum(r["images"] for r in rows)
    differ = sum(r["images"] * r["differ"] for r in rows) / images
    site = rows[0]
    print(f"site mix: all-core ratio {site['ratio']:.2f}x, per-core ratio {site['per_core_ratio']:.2f}x, "
          f"bits differ on {100 * site['differ']:.1f}% of images")
    print(f"all sets: ratio {total_ref / total_ours:.2f}x (goal >= 3x); exact path {total_ref / total_exact:.2f}x; "
          f"per-core ratio {cpu_ref / cpu_ours:.2f}x; bits differ on {100 * differ:.1f}% of images "
          f"(workers {args.workers or 'cpu count'}, cpus {os.cpu_count()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
