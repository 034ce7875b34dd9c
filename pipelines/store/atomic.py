"""Atomic writes for the whole data home: one temporary name, one cleanup.

``atomic_write`` / ``atomic_path`` / ``temporary_path`` are the one way to write a file
atomically (lake tables, images, raw bodies, stage records, reports, and the temporaries of
the warehouse and the export): the content goes to ``.<name>.<pid>.<random>.tmp`` beside
the target and is renamed into place, so a reader sees the previous file or the new one.
``remove_stale_temporaries`` finds every temporary by one glob and deletes those whose
process no longer runs. Every file written here gets its content checksum recorded beside it
(``<name>.sha256``, ``pipelines.store.checksums``) unless the caller passes ``checksum=False``
(stores whose file names are already the hash of their bytes). Plain Python (no Arrow or
Polars), so the crawler can use it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import random
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from pipelines.store.checksums import checksum_lines, checksum_path, sha256_file

# causes worth naming in a message: libraries (pyarrow, DuckDB) put them in their own words
_NAMED_CAUSES = (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EFBIG, errno.EIO, errno.ENOENT)

# Every temporary of the data home (``temporary_path``) is ``.<name>.<pid>.<random>.tmp``
# beside its target; ``remove_stale_temporaries`` finds them all with this one glob.
TEMPORARY_SUFFIX = ".tmp"
TEMPORARY_GLOB = ".*.tmp*"
_TEMPORARY_NAME = re.compile(r"^\.(?P<target>.+)\.(?P<pid>\d+)\.[^./]+\.tmp(\..+)?$")


class StorageError(OSError):
    """A write to the data home failed (full disk, permissions, ...). The message is one
    line naming the path and the cause; what was at the path before is unchanged.
    ``errno`` and ``filename`` are those of the failure."""

    def __str__(self) -> str:
        return self.args[0]


def describe_os_error(exc: BaseException, *, temporary_marker: str | None = None) -> str:
    """The cause of a failed file operation in a few words, e.g. ``No space left on device``,
    followed by the file involved when the error names one that is not a temporary of ours
    (a name containing ``temporary_marker``)."""
    text = str(exc)
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and code > 0:
        cause = os.strerror(code)
    else:
        cause = next((os.strerror(c) for c in _NAMED_CAUSES if os.strerror(c) in text), "")
        if not cause:
            match = re.search(r"\[errno (\d+)\]", text, flags=re.IGNORECASE)
            if not match:
                return (text.splitlines() or [type(exc).__name__])[0]
            cause = os.strerror(int(match.group(1)))
    filename = getattr(exc, "filename", None)
    if not filename:
        quoted = re.search(r'"(/[^"]+)"', text)  # DuckDB quotes the file it failed on
        filename = quoted.group(1) if quoted else None
    if filename and not (temporary_marker and temporary_marker in str(filename)):
        return f"{cause} ({filename})"
    return cause


def storage_error(path: Path | str, exc: BaseException) -> StorageError:
    cause = describe_os_error(exc, temporary_marker=f".{Path(path).name}.")
    error = StorageError(f"could not write {path}: {cause}; the file there, if any, is unchanged")
    error.errno = getattr(exc, "errno", None)
    error.filename = str(path)
    return error


def process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), or "" where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def process_alive(pid: int, start: str = "") -> bool:
    """Whether process ``pid`` runs; with ``start`` (from ``process_start``), whether it is
    still the same process and not a later one that reused the number."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not start or process_start(pid) in ("", start)


def _temporary_owner(name: str, target: str | None) -> int | None:
    """The pid in a temporary's name ``.<target>.<pid>.<random>.tmp`` (or a file a library
    keeps beside one, such as DuckDB's ``.tmp.wal``); None for any other name."""
    match = _TEMPORARY_NAME.match(name)
    if match is None or (target is not None and match["target"] != target):
        return None
    return int(match["pid"])


def remove_stale_temporaries(folder: Path, target: str | None = None, *, recursive: bool = False) -> int:
    """Delete the temporaries (of ``target``, else of any file) in ``folder``, and with
    ``recursive`` in its subfolders, that processes no longer running left behind (a build
    killed mid-write); temporaries of live processes are left alone. Returns how many."""
    folder = Path(folder)
    candidates = folder.rglob(TEMPORARY_GLOB) if recursive else folder.glob(TEMPORARY_GLOB)
    removed = 0
    try:
        for path in list(candidates):
            pid = _temporary_owner(path.name, target)
            if pid is None or process_alive(pid):
                continue
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
                removed += 1
            except OSError:
                pass
    except OSError:
        pass
    return removed


def fsync_directory(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temporary_path(path: Path, *, kind: str = "file", sweep: bool = True) -> Path:
    """A new temporary beside ``path``, named ``.<name>.<pid>.<random>.tmp``: an empty file
    (``kind="file"``), an empty folder (``"folder"``) or only a free name (``"name"``, for a
    library that creates the file itself). With ``sweep``, stale temporaries of ``path``
    are removed first."""
    if kind not in ("file", "folder", "name"):
        raise ValueError(f"unknown temporary kind {kind!r}")
    tmp, fd = _new_temporary(Path(path), kind, sweep)
    if fd is not None:
        os.close(fd)
    return tmp


def _new_temporary(path: Path, kind: str, sweep: bool) -> tuple[Path, int | None]:
    """The temporary of ``temporary_path``, and with ``kind="file"`` its open descriptor."""
    try:
        if kind == "name":
            path.parent.mkdir(parents=True, exist_ok=True)
        if sweep:
            remove_stale_temporaries(path.parent, path.name)
        made_parent = False
        while True:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{random.getrandbits(48):012x}{TEMPORARY_SUFFIX}")
            try:
                if kind == "file":
                    return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                if kind == "folder":
                    tmp.mkdir()
                elif os.path.lexists(tmp):
                    continue
                return tmp, None
            except FileExistsError:
                continue
            except FileNotFoundError:
                # first write in this folder; another process may be making it at the same moment,
                # so the folder existing now is no proof that the write cannot succeed: try once more
                if made_parent:
                    raise
                path.parent.mkdir(parents=True, exist_ok=True)
                made_parent = True
    except OSError as exc:
        raise storage_error(path, exc) from None


def replace_recording_checksum(tmp: Path, path: Path, *, sweep: bool = True) -> None:
    """Rename the complete file ``tmp`` to ``path`` and record its sha256 in ``<path>.sha256``.
    The sidecar goes to a temporary of its own first, so a full disk fails before ``path``
    changes; a crash between the two renames leaves a checksum that does not match the file,
    which the next build takes for damage and rebuilds."""
    path = Path(path)
    sidecar_tmp = _sidecar_temporary(path, sha256_file(tmp), sweep)
    try:
        os.replace(tmp, path)
        os.replace(sidecar_tmp, checksum_path(path))
    except BaseException:
        sidecar_tmp.unlink(missing_ok=True)
        raise


def record_checksum(path: Path | str) -> str:
    """Record the sha256 of the file at ``path`` as it is now (a file written before checksums
    existed); returns it."""
    path = Path(path)
    digest = sha256_file(path)
    sidecar_tmp = _sidecar_temporary(path, digest, True)
    try:
        os.replace(sidecar_tmp, checksum_path(path))
    except OSError as exc:
        sidecar_tmp.unlink(missing_ok=True)
        raise storage_error(checksum_path(path), exc) from None
    return digest


def _sidecar_temporary(path: Path, digest: str, sweep: bool) -> Path:
    """A complete new sidecar of ``path`` under a temporary name, for the caller to rename."""
    sidecar_tmp, fd = _new_temporary(checksum_path(path), "file", sweep)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(checksum_lines({path.name: digest}))
    except BaseException as exc:
        sidecar_tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise storage_error(checksum_path(path), exc) from None
        raise
    return sidecar_tmp


@contextmanager
def renamed_into_place(tmp: Path, path: Path, *, checksum: bool = True, sweep: bool = True) -> Iterator[None]:
    """Rename ``tmp`` to ``path`` when the block ends (recording its checksum beside it unless
    ``checksum`` is false); on failure remove ``tmp`` instead."""
    try:
        yield
        if checksum:
            replace_recording_checksum(tmp, path, sweep=sweep)
        else:
            os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise storage_error(path, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_path(path: Path | str, *, sweep: bool = True, checksum: bool = True) -> Iterator[Path]:
    """A temporary path beside ``path`` for the block to write; when the block ends it is
    renamed to ``path`` in one step, so ``path`` holds the previous content or the new, never
    part of it. On failure the temporary is removed, ``path`` is unchanged and an ``OSError``
    becomes a one-line ``StorageError`` naming ``path``."""
    path = Path(path)
    tmp = temporary_path(path, sweep=sweep)
    with renamed_into_place(tmp, path, checksum=checksum, sweep=sweep):
        yield tmp


@contextmanager
def atomic_write(path: Path | str, mode: str = "wb", *, encoding: str | None = None, newline: str | None = None,
                 sweep: bool = True, checksum: bool = True) -> Iterator[IO]:
    """``open(path, mode)`` for writing, made atomic as ``atomic_path`` describes."""
    if "b" not in mode and encoding is None:
        encoding = "utf-8"
    path = Path(path)
    tmp, fd = _new_temporary(path, "file", sweep)
    with renamed_into_place(tmp, path, checksum=checksum, sweep=sweep):
        with os.fdopen(fd, mode, encoding=encoding, newline=newline) as handle:
            yield handle


def atomic_write_bytes(path: Path | str, data: bytes, *, sweep: bool = True, checksum: bool = True) -> None:
    with atomic_write(path, "wb", sweep=sweep, checksum=checksum) as handle:
        handle.write(data)


def atomic_write_text(path: Path | str, text: str, *, encoding: str = "utf-8") -> None:
    with atomic_write(path, "w", encoding=encoding) as handle:
        handle.write(text)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP}


def rename_exchange(a: Path, b: Path) -> None:
    """Swap two existing paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError, TypeError):
        raise OSError(errno.ENOSYS, "renameat2 is not available") from None
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(a), None, str(b))


def publish_folder(new: Path, final: Path, *, exchange=None) -> None:
    """Put the complete folder ``new`` at ``final`` in one step; afterwards ``new`` holds
    the previous content of ``final`` (or no longer exists), for the caller to remove.

    Where the file system cannot exchange two paths atomically, two renames are used and a
    reader can miss ``final`` for the instant between them. ``exchange``: the function that
    swaps two paths (default ``rename_exchange``).
    """
    if not os.path.lexists(final):
        os.rename(new, final)
        return
    try:
        (exchange or rename_exchange)(new, final)
        return
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED:
            raise
    previous = temporary_path(final, kind="name", sweep=False)
    os.rename(final, previous)
    try:
        os.rename(new, final)
    except OSError:
        os.rename(previous, final)
        raise
    os.rename(previous, new)
