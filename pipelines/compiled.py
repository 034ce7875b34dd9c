"""The numba kernels of the image index and dedup: compiled once per installation and Python
version (``@njit(cache=True)`` writes them beside their module, in ``__pycache__``, or under
``NUMBA_CACHE_DIR`` / the user's cache when that folder is read-only), then loaded by every
later build, in any data home. The first build says so before it compiles."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable

KERNELS = {
    "image_index": ("pipelines.clean.dedup.image_kernel",),
    "deduplicated_questions": ("pipelines.clean.dedup.pair_kernel",),
}


def cache_folders(module_file: Path) -> list[Path]:
    folders = [module_file.parent / "__pycache__"]
    if os.environ.get("NUMBA_CACHE_DIR"):
        folders.append(Path(os.environ["NUMBA_CACHE_DIR"]))
    folders.append(Path.home() / ".cache" / "numba")
    return folders


def is_compiled(module: str) -> bool:
    """Whether numba's cache holds compiled functions of ``module`` for this Python version."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return True
    origin = Path(spec.origin)
    pattern = f"{origin.stem}.*.py{sys.version_info.major}{sys.version_info.minor}.nbi"
    for folder in cache_folders(origin):
        if folder.is_dir() and next(iter(folder.rglob(pattern) if folder != origin.parent / "__pycache__"
                                         else folder.glob(pattern)), None):
            return True
    return False


def announce_compile(stage: str, log: Callable[[str], None]) -> bool:
    """Say, before a stage first compiles its kernels, what the wait is; True when it will."""
    missing = [m.rpartition(".")[2] for m in KERNELS.get(stage, ()) if not is_compiled(m)]
    if missing:
        log(f"{stage}: the numba kernels {', '.join(missing)} are not compiled yet for Python "
            f"{sys.version_info.major}.{sys.version_info.minor}: their first use compiles them, once per "
            "installation (about a minute on two cores); later builds, in any home, load them from numba's cache")
    return bool(missing)
