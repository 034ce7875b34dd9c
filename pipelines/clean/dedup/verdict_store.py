"""Picture verdicts kept on disk as they are computed, apart from the dedup state.

A verdict (``ink.compare_pictures``) is a pure function of two pictures, named by their content
hash, and of the verdict's code: it stays valid whatever else changes (dedup's candidate rule,
the build settings, the questions). At paper scale a first build judges about a million pairs
(CPU-hours), so verdicts must survive what the dedup state does not:

- a run killed in the middle keeps every part already written: the next run judges only the rest;
- a change to dedup's other code or settings keeps them (the state is dropped, the verdicts not);
- a change to the verdict's code (its modules, or the libraries that decode and warp pictures)
  starts a new generation: parts of another generation are never read, and are removed once a
  run ends.

Parts are Parquet files (``image_match.VERDICT_SCHEMA``) named ``<generation>-<number>.parquet``,
each written atomically with its checksum. ``compact`` rewrites the verdicts a run ended with
(pairs of images the index still describes) as one part and removes the others. A part that
cannot be read is skipped (``integrity`` removes a damaged one before a build).
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

import polars as pl

from pipelines.store.lake import write_table

FORMAT = 1
_LIBRARIES = ("numpy", "opencv-python-headless", "pillow")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def verdict_generation() -> str:
    """16 hex digits naming the verdict's code (``ink`` and what it imports, and ``image_match``,
    which reads the pictures and writes the verdicts) and the libraries it runs on."""
    from pipelines.clean.dedup import ink
    from pipelines.store.code_deps import code_modules, module_file

    modules = sorted({*code_modules(ink.ink_picture), *code_modules(ink.compare_prepared),
                      "pipelines.clean.dedup.image_match"})
    code = {module: hashlib.sha256(module_file(module).read_bytes()).hexdigest() for module in modules
            if module_file(module) is not None}
    context = {"format": FORMAT, "code": code, **{name: _version(name) for name in _LIBRARIES}}
    return hashlib.sha256(json.dumps(context, sort_keys=True).encode()).hexdigest()[:16]


class VerdictStore:
    """The picture verdicts of one data home (``folder``: ``lake/state/verdicts``)."""

    def __init__(self, folder: Path, generation: str | None = None):
        self.folder = Path(folder)
        self.generation = generation or verdict_generation()

    def _parts(self, generation: str | None = None) -> list[Path]:
        pattern = f"{generation}-*.parquet" if generation else "*-*.parquet"
        return sorted(self.folder.glob(pattern))

    def load(self) -> tuple[pl.DataFrame | None, str]:
        """(verdicts of this generation, one row per pair; or None) and why parts were skipped."""
        from pipelines.clean.dedup.image_match import VERDICT_SCHEMA

        frames, skipped = [], []
        for path in self._parts(self.generation):
            try:
                frame = pl.read_parquet(path)
            except (OSError, pl.exceptions.PolarsError):
                skipped.append(path.name)
                continue
            if dict(frame.schema) != VERDICT_SCHEMA:
                skipped.append(path.name)
                continue
            frames.append(frame)
        why = f"unreadable verdict part(s) skipped: {', '.join(skipped)}" if skipped else ""
        if not frames:
            return None, why
        return pl.concat(frames).unique(["image_a", "image_b"], keep="first", maintain_order=True), why

    def append(self, verdicts: pl.DataFrame) -> None:
        """Keep newly computed verdicts now, as a part of their own."""
        if not verdicts.height:
            return
        parts = self._parts(self.generation)
        number = 1 + max((int(p.stem.rsplit("-", 1)[1]) for p in parts if p.stem.rsplit("-", 1)[1].isdigit()),
                         default=0)
        self.folder.mkdir(parents=True, exist_ok=True)
        write_table(verdicts, self.folder / f"{self.generation}-{number:06d}.parquet", dictionary=False,
                    compression="lz4")

    def compact(self, verdicts: pl.DataFrame) -> None:
        """Keep exactly ``verdicts`` (a run's final verdicts) as one part; every other part,
        of any generation, is removed."""
        before = self._parts()
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.folder / f"{self.generation}-000000.parquet"
        write_table(verdicts, target, dictionary=False, compression="lz4")
        for path in before:
            if path != target:
                _remove(path)


def _remove(path: Path) -> None:
    from pipelines.store.checksums import checksum_path

    path.unlink(missing_ok=True)
    checksum_path(path).unlink(missing_ok=True)
