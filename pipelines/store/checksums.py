"""Content checksums recorded beside the files of a data home.

A file written through ``pipelines.store.atomic`` gets a sidecar ``<file>.sha256`` holding
one line ``<sha256>  <file name>``: the format of ``sha256sum``, so ``sha256sum -c`` checks
it too. A folder published as a whole (the export) has one manifest of such lines instead,
paths relative to the manifest's folder. Plain Python (hashlib only).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

CHECKSUM_SUFFIX = ".sha256"
MANIFEST_NAME = "checksums.sha256"  # the manifest of a folder published as a whole
_LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")


def sha256_file(path: Path | str) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def checksum_path(path: Path | str) -> Path:
    """The sidecar that records the checksum of ``path``."""
    path = Path(path)
    return path.with_name(path.name + CHECKSUM_SUFFIX)


def is_checksum_file(path: Path | str) -> bool:
    return Path(path).name.endswith(CHECKSUM_SUFFIX)


def checksum_lines(entries: dict[str, str]) -> str:
    """Manifest text of ``{relative path: sha256}``, sorted by path."""
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(entries.items()))


def parse_checksums(text: str) -> dict[str, str] | None:
    """``{relative path: sha256}`` of a sidecar or manifest; None when any line is malformed
    (a damaged record is unknown, never trusted)."""
    entries: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None:
            return None
        entries[match[2]] = match[1]
    return entries or None


def read_checksums(path: Path | str) -> dict[str, str] | None:
    """The entries of the sidecar or manifest at ``path``; None if it is missing or unreadable."""
    try:
        return parse_checksums(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def recorded_checksum(path: Path | str, *, fresh: bool = False) -> str | None:
    """The sha256 recorded for ``path`` by its sidecar, None if there is none or it is unreadable.
    With ``fresh``, also None when the file changed after its sidecar was written (a file
    rewritten by something other than ``pipelines.store.atomic``), so the caller hashes it."""
    path = Path(path)
    sidecar = checksum_path(path)
    entries = read_checksums(sidecar)
    digest = entries.get(path.name) if entries else None
    if digest is None or not fresh:
        return digest
    try:
        if os.stat(path).st_mtime_ns > os.stat(sidecar).st_mtime_ns:
            return None
    except OSError:
        return None
    return digest
