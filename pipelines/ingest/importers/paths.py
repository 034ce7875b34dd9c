"""Resolving untrusted relative paths inside a folder, and reading image files safely.

Reasons are stable categories (``image file not found``); the path is the ``detail``.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path, PurePosixPath

from pipelines.store.images import ALLOWED_FORMATS, MAX_IMAGE_BYTES
from pipelines.ingest.importers.common import ImportSourceError, RecordProblem, one_line

# Suffixes tried, in this order, for an image path written without one (``Math/1``).
IMAGE_SUFFIXES = tuple(dict.fromkeys([".png", ".jpg", ".jpeg", *(f".{ext}" for ext in ALLOWED_FORMATS.values())]))


class UnsafePath(RecordProblem):
    """A path from the data would leave the folder it must stay in."""


def resolve_inside(base: Path, relative: str) -> Path:
    """``base / relative`` resolved (symlinks followed), refused if it leaves ``base``.

    Absolute paths are accepted only when they point inside ``base``; ``..`` segments and
    symlinks that lead outside are refused with ``UnsafePath``.
    """
    if not isinstance(relative, str) or not relative.strip():
        raise RecordProblem("image path is not a path", one_line(repr(relative), 80))
    if "\x00" in relative:
        raise UnsafePath("image path contains a NUL byte", one_line(repr(relative), 80))
    if "://" in relative:
        raise UnsafePath("image path is a URL; only local files are read", one_line(relative, 160))
    base_resolved = base.resolve()
    candidate = Path(relative)
    try:
        target = (candidate if candidate.is_absolute() else base_resolved / candidate).resolve()
    except (OSError, RuntimeError) as exc:  # symlink loops raise RuntimeError on 3.11
        raise RecordProblem("image path cannot be resolved", f"{one_line(relative, 120)}: {one_line(exc, 80)}") from None
    if not target.is_relative_to(base_resolved):
        raise UnsafePath("image path escapes the folder", f"{one_line(relative, 160)} leaves {one_line(base_resolved, 200)}")
    return target


def resolve_image_file(base: Path, relative: str) -> Path:
    """Like ``resolve_inside``; a path without a suffix that names no file is completed with
    the one image suffix (``.png``, ``.jpg``, ...) under which a file exists. Two candidates
    are refused as ambiguous; none leaves the path as written (reported as not found)."""
    target = resolve_inside(base, relative)
    if target.suffix or _exists(target):
        return target
    found = [resolve_inside(base, relative + suffix) for suffix in IMAGE_SUFFIXES]
    found = [path for path in found if _exists(path)]
    if len(found) > 1:
        names = ", ".join(path.name for path in found)
        raise RecordProblem("image path without suffix is ambiguous", f"{one_line(relative, 120)}: {names}")
    return found[0] if found else target


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name too long, a permission: read_image_file reports it
        return False


def find_data_files(kind: str, location: str | Path) -> list[Path]:
    """The data files of a ``KIND:PATH`` source: the file itself, or the ``*.KIND`` files of a
    folder (not its subfolders, not hidden ones) in name order."""
    path = Path(location)
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() == f".{kind}" and p.is_file() and not p.name.startswith("."))
        if not files:
            raise ImportSourceError(f"{kind}: no .{kind} files in {path}")
        return files
    raise ImportSourceError(f"{kind}: {path} is neither a file nor a folder")


def is_single_component(name: str) -> bool:
    """True for a plain file or folder name (no separators, not '.' or '..')."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    return len(parts) == 1 and parts[0] not in (".", "..") and "/" not in name


def read_image_file(path: Path, shown_as: str) -> bytes:
    """The bytes of an image file, refusing missing, non-regular and oversized files."""
    shown_as = one_line(shown_as, 160)
    try:
        if not path.exists():
            raise RecordProblem("image file not found", shown_as)
        if not path.is_file():  # folders, FIFOs and devices (opening a FIFO would block)
            raise RecordProblem("image is not a regular file", shown_as)
        with open(path, "rb") as f:
            data = f.read(MAX_IMAGE_BYTES + 1)
    except OSError as exc:
        raise RecordProblem("image file unreadable", f"{shown_as}: {one_line(exc.strerror or exc, 120)}") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise RecordProblem(f"image file larger than {MAX_IMAGE_BYTES} bytes", shown_as)
    return data


# The length of the largest picture the image store takes, written as base64 (4/3 of its bytes):
# how long a text field that holds a picture itself may be (``image_in_text``).
MAX_IMAGE_TEXT_CHARS = MAX_IMAGE_BYTES * 4 // 3
# The first bytes of the formats the image store takes (``ALLOWED_FORMATS``).
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"BM")
_DATA_URI = re.compile(r"^data:image/[\w.+-]+;base64,", re.IGNORECASE)
_BASE64 = re.compile(r"^[A-Za-z0-9+/\s]+={0,2}\s*$")
_SHORTEST_BASE64_IMAGE = 64  # a path is shorter, or holds a '.', which base64 never does


def image_in_text(value: str) -> bytes | None:
    """The picture a text field holds itself (VLMEvalKit's TSVs, web exports): a data URI
    ``data:image/png;base64,...`` or bare base64 whose bytes start as an image does; None
    for anything else (a path). A data URI that does not decode is a problem, not a path."""
    head = value[:64]
    if _DATA_URI.match(head):
        try:
            return base64.b64decode(value[value.index(",") + 1:], validate=False)
        except (binascii.Error, ValueError):
            raise RecordProblem("image data URI is not base64", one_line(value, 80)) from None
    if len(value) < _SHORTEST_BASE64_IMAGE or "." in head or not _BASE64.match(value):
        return None
    try:
        data = base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        return None
    if data.startswith(_IMAGE_MAGIC) or (data[:4] == b"RIFF" and data[8:12] == b"WEBP"):
        return data
    return None
