"""Resolving untrusted relative paths inside a folder, and reading image files safely."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from ...images import MAX_IMAGE_BYTES
from .common import RecordProblem, one_line


class UnsafePath(RecordProblem):
    """A path from the data would leave the folder it must stay in."""


def resolve_inside(base: Path, relative: str) -> Path:
    """``base / relative`` resolved (symlinks followed), refused if it leaves ``base``.

    Absolute paths are accepted only when they point inside ``base``; ``..`` segments and
    symlinks that lead outside are refused with ``UnsafePath``.
    """
    if not isinstance(relative, str) or not relative.strip():
        raise RecordProblem(f"image path {one_line(repr(relative), 80)} is not a path")
    if "\x00" in relative:
        raise UnsafePath("image path contains a NUL byte")
    if "://" in relative:
        raise UnsafePath(f"image path {one_line(relative, 80)!r} is a URL; only local files are read")
    base_resolved = base.resolve()
    candidate = Path(relative)
    try:
        target = (candidate if candidate.is_absolute() else base_resolved / candidate).resolve()
    except (OSError, RuntimeError) as exc:  # symlink loops raise RuntimeError on 3.11
        raise RecordProblem(f"image path {one_line(relative, 80)!r} cannot be resolved: {one_line(exc, 80)}") from None
    if not target.is_relative_to(base_resolved):
        raise UnsafePath(f"image path {one_line(relative, 160)!r} escapes the folder {one_line(base_resolved, 200)}")
    return target


def is_single_component(name: str) -> bool:
    """True for a plain file or folder name (no separators, not '.' or '..')."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    return len(parts) == 1 and parts[0] not in (".", "..") and "/" not in name


def read_image_file(path: Path, shown_as: str) -> bytes:
    """The bytes of an image file, refusing missing, non-regular and oversized files."""
    shown_as = one_line(shown_as, 120)
    try:
        if not path.exists():
            raise RecordProblem(f"image file {shown_as!r} not found")
        if not path.is_file():  # folders, FIFOs and devices (opening a FIFO would block)
            raise RecordProblem(f"image {shown_as!r} is not a regular file")
        with open(path, "rb") as f:
            data = f.read(MAX_IMAGE_BYTES + 1)
    except OSError as exc:
        raise RecordProblem(f"image {shown_as!r} unreadable: {one_line(exc.strerror or exc, 120)}") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise RecordProblem(f"image {shown_as!r} is larger than {MAX_IMAGE_BYTES} bytes")
    return data
