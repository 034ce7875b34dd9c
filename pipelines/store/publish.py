"""One build publishes one version of the export and the warehouse together, or neither.

The export step and the warehouse step do not replace what readers see. Each leaves its new
version complete beside the live one, inside the home (staged):
- the export at ``export/.stem-staged/`` (the folder that becomes ``export/stem/``),
- the warehouse at ``.staged/warehouse.duckdb`` with its sidecar ``warehouse.duckdb.sha256``.
Then ``commit`` (the end of the ``warehouse`` step, the last writer) swaps them in: it first
writes the journal ``<home>/.publish.json`` naming the version and what moves where, makes each
swap and removes the journal. Every swap is a rename, so each side is the previous version or the new one, and a
crash between two swaps leaves the journal: ``recover`` completes (rolls forward) the commit it
names, and the next build or command that opens the home runs it first. A build that fails
before its commit leaves no journal; ``recover`` removes what it staged, and the previous
version stays live. The stage records (``pipelines.store.memo``) name a staged file by its live
name (``live_name``) and moving it keeps its size and mtime, so after the commit they describe
the live files and a rebuild with no change is skipped as before; before it (a build that
failed) the live files differ from the records and the stages run again.

The version: ``export_version``, the sha256 of the export's manifest (``export/stem/
checksums.sha256``, which lists the sha256 of every export file, its dataset card included),
is recorded by every warehouse publish in the table ``build_version`` (with the version of
the export that will be live once the commit ends); ``version_mismatch`` compares the two, for
the asset check ``published_version_matches`` and ``stemforge verify``. A warehouse published
without the export (``stemforge_refresh``, ``stemforge eval``, ``--select``) records the live
export's version: that export stays the release.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from pipelines.store.atomic import atomic_write_text, fsync_directory, publish_folder
from pipelines.store.checksums import MANIFEST_NAME, checksum_path
from pipelines.store.home import DataHome

JOURNAL_NAME = ".publish.json"
VERSION_TABLE = "build_version"


STAGED_NAMES = {"export/.stem-staged": "export/stem", ".staged": ""}  # staged -> live, relative to the home


def live_name(relative: str) -> str:
    """The live name of a path relative to the home: the same, unless it lies in a staged version."""
    for staged, live in STAGED_NAMES.items():
        if relative == staged or relative.startswith(staged + "/"):
            rest = relative[len(staged) + 1:]
            return f"{live}/{rest}".strip("/") if rest else live
    return relative


def journal_path(home: DataHome) -> Path:
    return home.root / JOURNAL_NAME


def export_root(home: DataHome) -> Path:
    """The live export folder, ``export/stem``."""
    return home.export.parent


def staged_export(home: DataHome) -> Path:
    return export_root(home).parent / f".{export_root(home).name}-staged"


def previous_export(export_root: Path) -> Path:
    """Where the export replaced by the last publish is kept until the next one."""
    return Path(export_root).parent / f".{Path(export_root).name}-previous"


def staged_warehouse(home: DataHome) -> Path:
    return home.root / ".staged" / home.warehouse.name


def export_version(root: Path) -> str:
    """The version of the export folder ``root``: the sha256 of its manifest, "" when it has none."""
    try:
        return hashlib.sha256((Path(root) / MANIFEST_NAME).read_bytes()).hexdigest()
    except OSError:
        return ""


def pending_export_version(home: DataHome) -> str:
    """The version of the export that is live once this build commits: the staged one, if any."""
    staged = staged_export(home)
    return export_version(staged) if staged.is_dir() else export_version(export_root(home))


def warehouse_version(warehouse: Path) -> str | None:
    """The export version recorded in the warehouse file, None when it records none."""
    import duckdb

    try:
        con = duckdb.connect(str(warehouse), read_only=True)
    except duckdb.Error:
        return None
    try:
        return con.execute(f'SELECT export_version FROM "{VERSION_TABLE}"').fetchone()[0]
    except (duckdb.Error, TypeError):
        return None
    finally:
        con.close()


def record_version(con, version: str) -> None:
    """Write the version table into the warehouse being published (a DuckDB connection)."""
    con.execute(f'CREATE OR REPLACE TABLE "{VERSION_TABLE}" AS SELECT ?::VARCHAR AS export_version', [version])


def version_mismatch(home: DataHome) -> str:
    """Why the live warehouse and export are not one version ("" when they are, or when there is
    no warehouse yet)."""
    if not home.warehouse.exists():
        return ""
    recorded = warehouse_version(home.warehouse)
    live = export_version(export_root(home))
    if recorded is None:
        return "the warehouse records no export version (published before versions were recorded)"
    if recorded != live:
        return (f"the warehouse was published with export version {recorded[:12] or '(none)'} but the live export "
                f"is version {live[:12] or '(none)'}")
    return ""


# ---- commit and recovery -------------------------------------------------------------------

def _rel(home: DataHome, path: Path) -> str:
    return path.relative_to(home.root).as_posix()


def commit(home: DataHome) -> dict:
    """Swap in what this build staged (export, warehouse or both) as one version; returns figures.
    Nothing staged: nothing to do."""
    moves = []
    if staged_export(home).is_dir():
        moves.append({"kind": "folder", "stage": "export", "from": _rel(home, staged_export(home)),
                      "to": _rel(home, export_root(home))})
    warehouse = staged_warehouse(home)
    if warehouse.exists():
        moves.append({"kind": "file", "stage": "warehouse", "from": _rel(home, warehouse),
                      "to": _rel(home, home.warehouse)})
        if checksum_path(warehouse).exists():
            moves.append({"kind": "file", "stage": "warehouse", "from": _rel(home, checksum_path(warehouse)),
                          "to": _rel(home, checksum_path(home.warehouse))})
    if not moves:
        return {"committed": False}
    started = time.monotonic()
    version = pending_export_version(home)
    journal = {"format": 1, "version": version, "moves": moves}
    atomic_write_text(journal_path(home), json.dumps(journal, indent=1, sort_keys=True))
    fsync_directory(home.root)
    _roll_forward(home, journal)
    return {"committed": True, "version": version, "swapped": [m["to"] for m in moves],
            "seconds": round(time.monotonic() - started, 4)}


def _swap_in_export(home: DataHome, staged: Path, live: Path, version: str) -> None:
    """Make the staged export live. Idempotent: when the live export already is ``version``, the
    staged name holds the replaced export (a crash after the exchange), kept as the previous one."""
    previous = previous_export(live)
    if not staged.is_dir():
        return
    if not (live.is_dir() and export_version(live) == version and export_version(staged) != version):
        shutil.rmtree(previous, ignore_errors=True)
        publish_folder(staged, live)
        fsync_directory(live.parent)
    # the staged name now holds the replaced export: kept (until the next publish) for readers
    # that were inside it during the swap
    if staged.exists():
        shutil.rmtree(previous, ignore_errors=True)
        try:
            os.rename(staged, previous)
        except OSError:
            shutil.rmtree(staged, ignore_errors=True)


def _move(source: Path, target: Path) -> None:
    os.replace(source, target)
    fsync_directory(target.parent)


def _roll_forward(home: DataHome, journal: dict) -> None:
    version = journal.get("version", "")
    for move in journal["moves"]:
        source, target = home.root / move["from"], home.root / move["to"]
        if move["kind"] == "folder":
            _swap_in_export(home, source, target, version)
        elif source.exists():
            _move(source, target)
    shutil.rmtree(staged_warehouse(home).parent, ignore_errors=True)
    journal_path(home).unlink(missing_ok=True)
    fsync_directory(home.root)


def recover(home: DataHome, log=None) -> str:
    """Bring the home to one published version: complete a commit a crash interrupted (its journal
    is there), else remove what a build that did not commit staged. Call it holding the home's
    lock, or where no build runs. Returns what was done ("" for nothing); ``log`` is told of a
    completed commit (removing a failed build's staged files is silent)."""
    path = journal_path(home)
    try:
        journal = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        journal = None
    except (OSError, ValueError):
        journal = {}
    if journal is not None and isinstance(journal, dict) and isinstance(journal.get("moves"), list):
        _roll_forward(home, journal)
        done = f"completed the interrupted publish of version {journal.get('version', '')[:12]}"
    else:
        path.unlink(missing_ok=True)  # a journal never completely written: its commit never began
        staged = [p for p in (staged_export(home), staged_warehouse(home).parent) if p.exists()]
        for folder in staged:
            shutil.rmtree(folder, ignore_errors=True)
        return "removed the unpublished version a failed build staged" if staged else ""
    if log is not None:
        log(done)
    return done


def recover_if_idle(home: DataHome, log=None) -> str:
    """``recover`` for a command that opens the home (``stemforge sql``, ``verify``, ``export``):
    only when a journal is left and no build holds the home (a running build commits or
    recovers itself)."""
    if not journal_path(home).exists():
        return ""
    from pipelines.store.homelock import HomeBusy, home_lock

    try:
        with home_lock(home, "recover"):
            return recover(home, log)
    except (HomeBusy, OSError):
        return ""
