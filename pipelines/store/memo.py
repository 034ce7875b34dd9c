"""Stage memoization: a stage redoes its work only when what it depends on changed.

A stage's fingerprint is a digest of
- the content of its input files (sha256 of the bytes; a file whose size and mtime_ns
  equal the ones recorded last time reuses the recorded digest instead of being read
  again: every lake write is a new file renamed into place, with a new mtime, and a copy
  that keeps mtimes, such as ``cp -p`` or ``rsync -a``, keeps the bytes too),
- the settings that affect it (a JSON-able dict),
- its code: the bytes of every library module the stage's function uses, found from its
  imports (``pipelines.store.code_deps``), plus a version string,
- any further key the caller computes (a raw store digest, a source's file listing).

The record of the last run lives in ``lake/state/fingerprints/<stage>.json`` with the
fingerprint, the inputs' identities and digests, the outputs' identities and the figures
the run returned. When the fingerprint matches and every recorded output is still there,
unchanged (same size and mtime), the stage is skipped: nothing is written (so the
warehouse's mtime-based fingerprint stays equal) and the recorded figures come back with
``skipped: True``. Otherwise the stage runs, and the record is written after its
outputs, so a crash in between only costs a recomputation. Because the fingerprint is
over content, a stage that recomputed the same bytes lets the stages after it skip.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from pipelines.store.code_deps import code_digest_of
from pipelines.store.home import DataHome
from pipelines.store.atomic import atomic_write_text
from pipelines.store.checksums import recorded_checksum
from pipelines.store.publish import live_name

RECORD_FORMAT = 1
_CHUNK = 1 << 20

# (path, size, mtime_ns) -> sha256: files already hashed by this process
_digest_cache: dict[tuple, str] = {}
_cache_lock = threading.Lock()


def fingerprint_dir(home: DataHome) -> Path:
    return home.lake / "state" / "fingerprints"


def record_path(home: DataHome, stage: str) -> Path:
    return fingerprint_dir(home) / f"{stage}.json"


# ---- file identities and digests ------------------------------------------------------

def file_identity(path: Path) -> dict | None:
    """What identifies this version of a file on disk, or None if it does not exist."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def sha256_file(path: Path) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
    return hasher.hexdigest()


def _same(identity: dict | None, recorded: dict | None) -> bool:
    if identity is None or not recorded:
        return False
    return all(recorded.get(k) == v for k, v in identity.items())


def describe_file(path: Path, recorded: dict | None = None) -> dict:
    """``{"path", size, mtime_ns, "sha256"}`` of an existing file (``sha256``
    None if it does not exist). The digest is reused from ``recorded`` or from this
    process's cache when the file's identity is unchanged."""
    identity = file_identity(path)
    if identity is None:
        return {"path": str(path), "sha256": None}
    if _same(identity, recorded) and recorded.get("sha256"):
        digest = recorded["sha256"]
    else:
        key = (str(path), *identity.values())
        with _cache_lock:
            digest = _digest_cache.get(key)
        if digest is None:
            digest = recorded_checksum(path, fresh=True) or sha256_file(path)  # the one its writer recorded
            with _cache_lock:
                _digest_cache[key] = digest
    return {"path": str(path), **identity, "sha256": digest}


# ---- the record ------------------------------------------------------------------------

@dataclass(frozen=True)
class StageCheck:
    """The outcome of comparing a stage's current fingerprint with its record."""

    stage: str
    key: str
    inputs: list[dict]
    up_to_date: bool
    reason: str
    record: dict | None


def load_record(home: DataHome, stage: str) -> dict | None:
    path = record_path(home, stage)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("format") == RECORD_FORMAT else None


def _rel(home: DataHome, path: Path) -> str:
    """The name a record gives ``path``: relative to the home; a staged export or warehouse file
    (``pipelines.store.publish``) under the live name it will have, with the same size and mtime."""
    try:
        return live_name(str(path.resolve().relative_to(home.root)))
    except ValueError:
        return str(path.resolve())


def _abs(home: DataHome, name: str) -> Path:
    path = Path(name)
    return path if path.is_absolute() else home.root / path


def check_stage(
    home: DataHome,
    stage: str,
    *,
    inputs: Sequence[Path] = (),
    settings: dict | None = None,
    code: Callable | None = None,
    version: str = "1",
    extra: Any = None,
) -> StageCheck:
    """Compute the stage's fingerprint and compare it with the recorded one."""
    record = load_record(home, stage)
    recorded_inputs = {i["path"]: i for i in (record or {}).get("inputs", [])}
    described = []
    for path in sorted({Path(p) for p in inputs}):
        name = _rel(home, path)
        entry = describe_file(path, recorded_inputs.get(name))
        entry["path"] = name
        described.append(entry)
    hasher = hashlib.sha256()
    hasher.update(f"stage {stage} version {version}\n".encode())
    for entry in described:
        hasher.update(f"input {entry['path']} {entry['sha256']}\n".encode())
    hasher.update(("settings " + json.dumps(settings or {}, sort_keys=True, default=str) + "\n").encode())
    hasher.update(f"code {code_digest_of(code) if code is not None else ''}\n".encode())
    hasher.update(("extra " + json.dumps(extra, sort_keys=True, default=str) + "\n").encode())
    key = hasher.hexdigest()
    if record is None:
        reason = "never built"
    elif record.get("key") != key:
        reason = _changed_reason(record, described, key)
    else:
        missing = [o["path"] for o in record.get("outputs", []) if not _same(file_identity(_abs(home, o["path"])), o)]
        reason = f"output changed or missing: {missing[0]}" if missing else ""
    return StageCheck(stage, key, described, reason == "", reason or "unchanged", record)


def _changed_reason(record: dict, described: list[dict], key: str) -> str:
    before = {i["path"]: i.get("sha256") for i in record.get("inputs", [])}
    now = {i["path"]: i.get("sha256") for i in described}
    changed = sorted(p for p in before.keys() | now.keys() if before.get(p) != now.get(p))
    if changed:
        return f"input changed: {changed[0]}" + (f" (+{len(changed) - 1} more)" if len(changed) > 1 else "")
    return "settings, code or source changed"


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def save_record(home: DataHome, check: StageCheck, outputs: Iterable[Path], figures: dict) -> None:
    entries = []
    for path in sorted({Path(p) for p in outputs}):
        identity = file_identity(path)
        if identity is not None:
            entries.append({"path": _rel(home, path), **identity})
    record = {
        "format": RECORD_FORMAT,
        "stage": check.stage,
        "key": check.key,
        "inputs": check.inputs,
        "outputs": entries,
        "figures": _json_safe(figures),
    }
    atomic_write_text(record_path(home, check.stage), json.dumps(record, sort_keys=True, indent=1))


def forget(home: DataHome, stage: str) -> None:
    record_path(home, stage).unlink(missing_ok=True)


def memoized(
    home: DataHome,
    stage: str,
    compute: Callable[[], dict],
    *,
    inputs: Sequence[Path] = (),
    outputs: Sequence[Path] | Callable[[dict], Sequence[Path]] = (),
    settings: dict | None = None,
    code: Callable | None = None,
    version: str = "1",
    extra: Any = None,
) -> dict:
    """Run ``compute`` (which writes the stage's outputs and returns its figures) unless
    the stage is up to date; returns the figures with ``skipped`` set accordingly.

    ``outputs`` may be a callable of the figures, evaluated after ``compute``, for stages
    whose output files are only known then. The code the stage depends on is derived from
    the imports of ``code`` (default: ``compute`` itself; see ``pipelines.store.code_deps``).
    """
    check = check_stage(home, stage, inputs=inputs, settings=settings, code=code or compute, version=version,
                        extra=extra)
    if check.up_to_date:
        return {**check.record.get("figures", {}), "skipped": True}
    figures = compute()
    written = outputs(figures) if callable(outputs) else outputs
    save_record(home, check, written, figures)
    return {**_json_safe(figures), "skipped": False, "rebuilt_because": check.reason}
