"""Integrity of a data home: files checked against the checksums recorded when they were written.

What is recorded (``pipelines.store.checksums``): every lake, report and warehouse file has a
sidecar ``<file>.sha256`` written with it (``pipelines.store.atomic``); the export lists its
files in ``export/stem/checksums.sha256``; an image's and a raw body's name is the sha256 of
its bytes.

- ``check_before_build``: every build reads every byte of the lake and the warehouse (what it
  reads from and publishes; small next to the export) and compares them with their checksums.
  A damaged file is named on one line and removed, so the stage that wrote it runs again and
  rebuilds it from its inputs (its memo record finds the output missing); a file no stage
  writes (an imported model's predictions) is moved to ``damaged/`` instead. Files from
  before checksums existed get theirs recorded.
- ``verify_home`` (``stemforge verify``): the same for every file of the home, the export and
  the images included (the export is most of a home's bytes: 7.6 GiB at paper scale, too much
  to read on every build), and the warehouse opened and every table read by DuckDB.
  ``repair`` removes what it found damaged, for the next build to rebuild.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from pipelines.store.atomic import record_checksum
from pipelines.store.checksums import (
    MANIFEST_NAME,
    checksum_path,
    is_checksum_file,
    read_checksums,
    recorded_checksum,
    sha256_file,
)
from pipelines.store.home import DataHome
from pipelines.store.memo import fingerprint_dir

DAMAGED = "damaged"
MISSING = "missing"
UNRECORDED = "no checksum recorded"
MISMATCH = "its bytes do not match the checksum recorded when it was written"
NOT_ONE_VERSION = "not one version"  # the warehouse and the export are not one published version
SIDECAR_DAMAGED = "its checksum record is damaged, not the file (the record differs from the file's checksum by a byte or two)"
DAMAGED_DIR = "damaged"  # under the home: damaged files no stage can rebuild, kept for the user


@dataclass(frozen=True)
class Finding:
    path: Path
    problem: str  # DAMAGED, MISSING or UNRECORDED
    detail: str = ""


@dataclass(frozen=True)
class VerifyReport:
    findings: list[Finding]
    files: int
    bytes: int

    def count(self, problem: str) -> int:
        return sum(f.problem == problem for f in self.findings)

    @property
    def clean(self) -> bool:
        return not any(f.problem in (DAMAGED, MISSING, NOT_ONE_VERSION) for f in self.findings)


def relative(home: DataHome, path: Path) -> str:
    try:
        return Path(path).relative_to(home.root).as_posix()
    except ValueError:
        return str(path)


def describe(home: DataHome, finding: Finding) -> str:
    """One line naming the file and what is wrong with it."""
    detail = f" ({finding.detail})" if finding.detail else ""
    return f"{finding.problem}: {relative(home, finding.path)}{detail}"


# ---- files and their checks -------------------------------------------------------------

def _files_under(folder: Path) -> Iterator[Path]:
    """The files a home keeps under ``folder``: no temporaries, no checksum sidecars."""
    if not folder.is_dir():
        return
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if not name.startswith(".") and not is_checksum_file(name):
                yield Path(root) / name


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _check_sidecar(path: Path) -> Finding | None:
    """Compare a file with its sidecar: None when they agree."""
    if not checksum_path(path).exists():
        return Finding(path, UNRECORDED)
    recorded = recorded_checksum(path)
    if recorded is None:
        return Finding(path, DAMAGED, "its checksum record is unreadable")
    try:
        actual = sha256_file(path)
    except OSError as exc:
        return Finding(path, DAMAGED, f"cannot be read: {exc.strerror or exc}")
    if actual == recorded:
        return None
    return Finding(path, DAMAGED, SIDECAR_DAMAGED if _near(recorded, actual) else MISMATCH)


def _near(recorded: str, actual: str) -> bool:
    """A record that differs from the file's sha256 in one or two hex digits: the record took
    the damage (a damaged file's digest shares nothing with the old one)."""
    return len(recorded) == len(actual) and 0 < sum(a != b for a, b in zip(recorded, actual)) <= 2


def _reads_whole(path: Path) -> bool:
    """A Parquet file whose record is unreadable, checked against its own content: its footer
    and every page decode. Other files cannot tell, and are not kept on their word."""
    if path.suffix != ".parquet":
        return False
    try:
        import pyarrow.parquet as pq

        pq.read_table(path)
        return True
    except Exception:  # any decoding error: damaged
        return False


def _check_named_by_hash(path: Path) -> Finding | None:
    """An image or raw body is named by the sha256 of its bytes."""
    name = path.name.split(".", 1)[0]
    if len(name) != 64:
        return Finding(path, UNRECORDED, "not named by its hash")
    try:
        actual = sha256_file(path)
    except OSError as exc:
        return Finding(path, DAMAGED, f"cannot be read: {exc.strerror or exc}")
    return None if actual == name else Finding(path, DAMAGED, "its bytes do not match the hash it is named by")


def _parallel(check: Callable[[Path], Finding | None], paths: list[Path]) -> list[Finding]:
    """``check`` over ``paths`` on every core (hashlib hashes without holding the GIL)."""
    if len(paths) < 2:
        return [f for f in map(check, paths) if f is not None]
    with ThreadPoolExecutor(max_workers=max(1, min(len(paths), os.cpu_count() or 1))) as pool:
        return [f for f in pool.map(check, paths) if f is not None]


def _check_manifest(folder: Path, files: list[Path]) -> list[Finding]:
    """Files of a folder published as a whole against its manifest."""
    manifest = folder / MANIFEST_NAME
    if not manifest.exists():
        return [Finding(p, UNRECORDED) for p in files]
    entries = read_checksums(manifest)
    if entries is None:
        return [Finding(manifest, DAMAGED, "the checksum list is unreadable")]
    findings = [Finding(p, UNRECORDED) for p in files if p.relative_to(folder).as_posix() not in entries]

    def check(name: str) -> Finding | None:
        path = folder / name
        try:
            actual = sha256_file(path)
        except FileNotFoundError:
            return Finding(path, MISSING, f"listed in {MANIFEST_NAME}")
        except OSError as exc:
            return Finding(path, DAMAGED, f"cannot be read: {exc.strerror or exc}")
        return None if actual == entries[name] else Finding(path, DAMAGED, MISMATCH)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        findings += [f for f in pool.map(check, sorted(entries)) if f is not None]
    return findings


def _check_warehouse_reads(path: Path) -> Finding | None:
    """Open the warehouse read-only and read every row of every table."""
    import duckdb

    try:
        con = duckdb.connect(str(path), read_only=True)
        try:
            tables = con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' ORDER BY 1"
            ).fetchall()
            for (table,) in tables:  # hashing every column reads every page of the table
                con.execute(f'SELECT count(*), bit_xor(hash(COLUMNS(*))) FROM "{table}"').fetchall()
        finally:
            con.close()
    except duckdb.Error as exc:
        return Finding(path, DAMAGED, f"DuckDB cannot read it: {(str(exc).splitlines() or [''])[0]}")
    return None


def _stage_outputs(home: DataHome) -> dict[str, str]:
    """Relative path -> the stage whose memo record lists it as an output."""
    outputs: dict[str, str] = {}
    for record_file in sorted(fingerprint_dir(home).glob("*.json")):
        try:
            record = json.loads(record_file.read_text(encoding="utf-8"))
            for entry in record.get("outputs", []):
                outputs[entry["path"]] = record.get("stage", record_file.stem)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            continue  # a damaged record is found damaged by its own checksum
    return outputs


def _raw_indexes(home: DataHome) -> list[Path]:
    return sorted(home.raw.glob("*/index.sqlite")) if home.raw.is_dir() else []


ROWS_DAMAGED = "row(s) fail their checksum"  # in a raw index finding's detail: those rows, not the file


def _check_raw_index(path: Path) -> Finding | None:
    """A crawler's index changes with every crawl, so it has no file checksum; SQLite checks its
    structure (a flipped byte there made every build fail on it, and verify saw nothing) and each
    row its own checksum (a flipped byte inside a row's data passes SQLite's check)."""
    import sqlite3

    from pipelines.store.raw_index import damaged_rows

    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
        try:
            verdict = [row[0] for row in con.execute("PRAGMA quick_check")]
            con.execute("SELECT count(*) FROM urls").fetchone()
            rows = damaged_rows(con) if verdict == ["ok"] else []
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        return Finding(path, DAMAGED, f"SQLite cannot read it: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    if verdict != ["ok"]:
        return Finding(path, DAMAGED, f"SQLite's integrity check fails: {str(verdict[0])[:120]}")
    if rows:
        return Finding(path, DAMAGED, f"{len(rows)} {ROWS_DAMAGED} (first: {rows[0][1][:120]!r})")
    return None


def _export_files(home: DataHome) -> list[Path]:
    root = home.export.parent
    return [*sorted(home.export.glob("*.parquet")), *(p for p in (root / "index.parquet", root / "test_answer_key.jsonl") if p.exists())]


# ---- the whole home -----------------------------------------------------------------------

def verify_home(home: DataHome) -> VerifyReport:
    """Check every file of the home against its recorded checksum (``stemforge verify``)."""
    recorded = [*_files_under(home.lake), *_files_under(home.reports)]
    if home.warehouse.exists():
        recorded.append(home.warehouse)
    findings = _parallel(_check_sidecar, recorded)
    if home.warehouse.exists() and not any(f.path == home.warehouse for f in findings):
        findings += [f for f in [_check_warehouse_reads(home.warehouse)] if f is not None]
    exported = _export_files(home)
    findings += _check_manifest(home.export.parent, exported)
    images = list(_files_under(home.images))
    bodies = [p for p in _files_under(home.raw) if p.parent.parent.name == "bodies"]
    findings += _parallel(_check_named_by_hash, images + bodies)
    indexes = _raw_indexes(home)
    findings += [f for f in map(_check_raw_index, indexes) if f is not None]
    seen = {f.path for f in findings}
    for name in sorted(_stage_outputs(home)):
        path = home.root / name
        if path not in seen and not os.path.lexists(path) and not is_checksum_file(path):
            findings.append(Finding(path, MISSING, "a stage's recorded output; the next build rebuilds it"))
    findings += _check_one_version(home, findings)
    checked = recorded + exported + images + bodies + indexes
    findings.sort(key=lambda f: relative(home, f.path))
    return VerifyReport(findings, len(checked), sum(_size(p) for p in checked))


def _check_one_version(home: DataHome, findings: list[Finding]) -> list[Finding]:
    """The warehouse and the export are one version (``pipelines.store.publish``); a warehouse
    published before versions were recorded is not checked."""
    from pipelines.store.publish import version_mismatch, warehouse_version

    if not home.warehouse.exists() or any(f.path == home.warehouse for f in findings):
        return []
    if warehouse_version(home.warehouse) is None:
        return []
    problem = version_mismatch(home)
    return [Finding(home.warehouse, NOT_ONE_VERSION, f"{problem}; the next build republishes it")] if problem else []


def check_before_build(home: DataHome, log: Callable[[str], None]) -> list[Finding]:
    """Byte-check the lake and the warehouse before a build reads them: damaged files are named
    and removed for their stages to rebuild, unrecorded ones get their checksum recorded."""
    _remove_orphan_sidecars(home)
    files = list(_files_under(home.lake))
    if home.warehouse.exists():
        files.append(home.warehouse)
    findings = _parallel(_check_sidecar, files)
    findings += [f for f in map(_check_raw_index, _raw_indexes(home)) if f is not None]
    unrecorded = [f.path for f in findings if f.problem == UNRECORDED and f.path != home.warehouse]
    for path in unrecorded:
        record_checksum(path)
    if unrecorded:
        log(f"recorded the checksums of {len(unrecorded)} lake file(s) written before checksums existed "
            f"(first: {relative(home, unrecorded[0])})")
    damaged = [f for f in findings if f.problem == DAMAGED]
    repair(home, damaged, log)
    return findings


def _remove_orphan_sidecars(home: DataHome) -> None:
    """Sidecars whose file is gone (a stage or ``stemforge eval --remove`` deleted it)."""
    for sidecar in [*home.lake.rglob("*.sha256"), checksum_path(home.warehouse)]:
        if not sidecar.name.startswith(".") and not sidecar.with_name(sidecar.name[: -len(".sha256")]).exists():
            sidecar.unlink(missing_ok=True)


def repair(home: DataHome, findings: Iterable[Finding], log: Callable[[str], None]) -> None:
    """Name each damaged file on one line and get it out of the way of the next build: removed
    when a stage rebuilds it (its memo record then finds its output missing), moved to
    ``damaged/`` when none does (an imported model's predictions), and for an image moved to
    ``damaged/`` with the sources' landing records forgotten, so the next build stores it anew."""
    outputs = _stage_outputs(home)
    forget_landing = False
    manifest = home.export.parent / MANIFEST_NAME
    for finding in sorted(findings, key=lambda f: relative(home, f.path)):
        if finding.problem in (MISSING, UNRECORDED) and finding.path.is_relative_to(home.export.parent) \
                and manifest.exists():
            # a listed file that is not there or a file not listed: the list does not describe the
            # export (bit rot in the list itself reads so), and only the export stage writes it
            manifest.unlink()
            log(f"damaged: {relative(home, manifest)} (it does not list the export's files: "
                f"{finding.problem} {relative(home, finding.path)}); removed; the build writes the export anew")
            continue
        if finding.problem == NOT_ONE_VERSION:
            finding.path.unlink(missing_ok=True)  # the warehouse: the build republishes it with the live export
            checksum_path(finding.path).unlink(missing_ok=True)
            log(f"{describe(home, finding)}; removed; the build republishes it")
            continue
        if finding.problem != DAMAGED:
            continue
        path, name = finding.path, relative(home, finding.path)
        if path.is_relative_to(home.raw) and path.name == "index.sqlite" and ROWS_DAMAGED in finding.detail:
            import sqlite3

            from pipelines.store.raw_index import reset_damaged_rows

            con = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            try:  # the rows, not the index: fetched again, never trusted
                urls = reset_damaged_rows(con)
            finally:
                con.close()
            forget_landing = True
            action = f"{len(urls)} row(s) marked never fetched; the next build fetches them again"
        elif path.is_relative_to(home.raw) and path.name == "index.sqlite":
            _move_aside(home, path)
            for suffix in ("-wal", "-shm"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)
            forget_landing = True
            action = f"moved to {DAMAGED_DIR}/{name}; the next build crawls the site again"
        elif path.is_relative_to(home.images):
            _move_aside(home, path)
            forget_landing = True
            action = f"moved to {DAMAGED_DIR}/{name}; the next build lands the sources again and stores it anew"
        elif name in outputs or path == home.warehouse or path.is_relative_to(home.lake / "state") \
                or path.is_relative_to(home.export.parent) or path.is_relative_to(home.reports):
            path.unlink(missing_ok=True)
            checksum_path(path).unlink(missing_ok=True)
            stage = outputs.get(name) or ("warehouse" if path == home.warehouse else "")
            action = "removed; the build rebuilds it from its inputs" + (f" (stage {stage})" if stage else "")
        elif finding.detail == SIDECAR_DAMAGED or (finding.detail != MISMATCH and _reads_whole(path)):
            record_checksum(path)  # the file is intact: its record was what broke
            action = "kept: the file checks against its content; its checksum is recorded again"
        else:
            _move_aside(home, path)
            action = f"moved to {DAMAGED_DIR}/{name}: no stage writes it (import it again if it was imported)"
        log(f"{describe(home, finding)}; {action}")
    if forget_landing:
        for record in fingerprint_dir(home).glob("ingest-*.json"):
            record.unlink(missing_ok=True)


def _move_aside(home: DataHome, path: Path) -> None:
    target = home.root / DAMAGED_DIR / relative(home, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)
    checksum_path(path).unlink(missing_ok=True)


def summary_line(report: VerifyReport) -> str:
    counts = ", ".join(f"{report.count(p)} {p}" for p in (DAMAGED, MISSING, UNRECORDED))
    if report.count(NOT_ONE_VERSION):
        counts += ", warehouse and export not one version"
    verdict = "clean" if report.clean else "damage found"
    return f"verified {report.files:,} files ({report.bytes / 2**20:,.1f} MiB): {verdict} ({counts})"
