"""The export's picture conversion against Pillow's default PNG encoding, on real pictures.

    .venv/bin/python bench/export_png.py [--corpora ../shared/corpora] [--limit N]

Every picture of the corpora that is not a PNG (764 JPEGs in ../shared/corpora) is converted
to PNG as the export converts it (``pipelines.dataset.export._converted_png``) and with
Pillow's default zlib level (6). Prints the encoding time and the bytes of each, and their ratios.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from pipelines.dataset.export import PNG_COMPRESS_LEVEL, _converted_png

ROOT = Path(__file__).resolve().parent.parent
SUFFIXES = (".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff")


PILLOW_DEFAULT_LEVEL = 6  # what Image.save(format="PNG") uses when no level is given


def pillow_default(data: bytes) -> bytes:
    return _converted_png(data, compress_level=PILLOW_DEFAULT_LEVEL)


def timed(convert, pictures: list[bytes]) -> tuple[float, int]:
    started = time.perf_counter()
    size = sum(len(convert(data)) for data in pictures)
    return time.perf_counter() - started, size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, default=ROOT.parent / "shared" / "corpora")
    parser.add_argument("--limit", type=int, default=0, help="at most this many pictures (0: all)")
    args = parser.parse_args(argv)
    paths = sorted(p for p in args.corpora.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file())
    if args.limit:
        paths = paths[: args.limit]
    if not paths:
        parser.error(f"no picture other than PNG under {args.corpora}")
    pictures = [p.read_bytes() for p in paths]
    ours_s, ours_b = timed(_converted_png, pictures)
    peer_s, peer_b = timed(pillow_default, pictures)
    print(f"{len(pictures)} pictures ({sum(map(len, pictures)) / 2**20:.1f} MiB) from {args.corpora}")
    print(f"export (zlib level {PNG_COMPRESS_LEVEL}): {ours_s:.2f} s, {ours_b / 2**20:.1f} MiB")
    print(f"Pillow default (level {PILLOW_DEFAULT_LEVEL}): {peer_s:.2f} s, {peer_b / 2**20:.1f} MiB")
    print(f"time ratio {ours_s / peer_s:.2f}, size ratio {ours_b / peer_b:.3f} (export / Pillow default)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
