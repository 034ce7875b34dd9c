"""The crawler's raw store: response bodies addressed by sha256, plus a SQLite index.

Layout under ``store_dir``::

    bodies/ab/<sha256>     one file per distinct body (written to a temp name, then renamed)
    index.sqlite           WAL-mode SQLite: the ``urls`` table (one row per canonical URL,
                           its last fetch result and its frontier state) and ``meta``

A URL's ``state`` is one of ``pending`` (known, never finished), ``stored``, ``failed``
(with ``reason``), ``skipped_robots`` or ``gone`` (stored once, 404/410 on a later pass).
A row keeps its last good body (``sha256``) while a later pass revalidates it, so readers
always see a complete previous version.

For the ``lastmod`` revalidation mode a row also keeps ``sitemap_pass`` (the last pass
whose sitemaps listed the URL), ``fetched_lastmod`` (the sitemap lastmod known when the
body was last stored) and ``is_sitemap``. Stores written before these columns existed
gain them when opened.

Every row carries ``row_sum``, a checksum of its values that SQLite triggers write whenever
the row is written (the function behind them is registered by ``connect``). SQLite's own
integrity check sees a damaged page structure, not a flipped byte inside a row's data (a
changed body hash or URL): ``damaged_rows`` (``pipelines.store.raw_index``) finds those rows, ``stemforge verify`` reports
them, and ``reset_damaged_rows`` (``verify --repair`` and the check before each build) makes
them never fetched, so the next crawl fetches them again instead of trusting them. A store
written before ``row_sum`` existed has its sums computed when it is first opened.
"""

from __future__ import annotations

import fcntl
import hashlib
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from pipelines.store.atomic import atomic_write_bytes, remove_stale_temporaries
from pipelines.store.raw_index import (ROW_SUM_SQL, ROW_SUM_TRIGGERS, ROW_SUMS_META, register_row_sum,
                                       reset_damaged_rows)

INDEX_NAME = "index.sqlite"
BODIES_DIR = "bodies"
LOCK_NAME = "crawl.lock"
STATES = ("pending", "stored", "failed", "skipped_robots", "gone")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS urls (
    id INTEGER PRIMARY KEY,
    url TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL DEFAULT 'pending',
    visited_pass INTEGER NOT NULL DEFAULT 0,
    discovered_pass INTEGER NOT NULL,
    status INTEGER,
    content_type TEXT,
    sha256 TEXT,
    size INTEGER,
    etag TEXT,
    last_modified TEXT,
    sitemap_lastmod TEXT,
    final_url TEXT,
    reason TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    fetched_at REAL,
    sitemap_pass INTEGER,
    fetched_lastmod TEXT,
    is_sitemap INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS urls_state ON urls(state);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
# columns added after the first stores were written: (name, declaration)
_ADDED_COLUMNS = (
    ("sitemap_pass", "INTEGER"),
    ("fetched_lastmod", "TEXT"),
    ("is_sitemap", "INTEGER NOT NULL DEFAULT 0"),
    ("row_sum", "TEXT"),
)
class RawStoreError(ValueError):
    """A raw store that cannot be opened or used; the message is one line."""


@dataclass(frozen=True)
class UrlRecord:
    url: str
    state: str
    status: int | None
    content_type: str | None
    sha256: str | None
    size: int | None
    etag: str | None
    last_modified: str | None
    sitemap_lastmod: str | None
    final_url: str | None
    reason: str | None
    attempts: int
    visited_pass: int
    fetched_at: float | None
    sitemap_pass: int | None = None
    fetched_lastmod: str | None = None
    is_sitemap: int = 0


_RECORD_COLUMNS = ", ".join(UrlRecord.__dataclass_fields__)


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    register_row_sum(conn)  # the row_sum triggers call it
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


class RawStore:
    """Read API over a raw store (the parse stage's input) and the body writer."""

    def __init__(self, store_dir: Path | str, create: bool = False):
        self.root = Path(store_dir)
        self.index_path = self.root / INDEX_NAME
        self.bodies = self.root / BODIES_DIR
        if not self.index_path.exists():
            if not create:
                raise RawStoreError(f"no raw store at {self.root} (missing {INDEX_NAME})")
            self.bodies.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = connect(self.index_path)
            if create:
                self.conn.executescript(_SCHEMA)
            self.conn.execute("SELECT 1 FROM urls LIMIT 1").fetchall()
            self._add_missing_columns()
        except sqlite3.DatabaseError as exc:
            raise RawStoreError(f"raw store index {self.index_path} is unreadable: {exc}") from None
        self._made_dirs: set[str] = set()

    def _add_missing_columns(self) -> None:
        present = {row[1] for row in self.conn.execute("PRAGMA table_info(urls)")}
        for name, declaration in _ADDED_COLUMNS:
            if name not in present:
                try:
                    self.conn.execute(f"ALTER TABLE urls ADD COLUMN {name} {declaration}")
                except sqlite3.OperationalError as exc:  # another process added it meanwhile
                    if "duplicate column" not in str(exc):
                        raise
        self.conn.executescript(ROW_SUM_TRIGGERS)
        if self.meta(ROW_SUMS_META) != "1":  # a store written before row checksums: computed once, now
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.execute(f"UPDATE urls SET row_sum = {ROW_SUM_SQL}")
                self.conn.execute("INSERT INTO meta (key, value) VALUES (?, '1') "
                                  "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (ROW_SUMS_META,))
                self.conn.execute("COMMIT")
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise

    def reset_damaged_rows(self) -> list[str]:
        """Make every row that fails its checksum never fetched (``pending``, its fetch result
        forgotten), so the next crawl fetches it again; returns their URLs (as stored)."""
        return reset_damaged_rows(self.conn)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "RawStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # bodies -----------------------------------------------------------------------------
    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the store's crawl lock (one crawl per store); stale temp files of a killed
        crawl are removed once it is held."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / LOCK_NAME, "a+b") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RawStoreError(f"another crawl is writing to {self.root}") from None
            remove_stale_temporaries(self.bodies, recursive=True)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def body_path(self, sha256: str) -> Path:
        return self.bodies / sha256[:2] / sha256

    def put_body(self, body: bytes) -> str:
        """Store ``body`` (idempotent, atomic, thread-safe); returns its sha256 hex."""
        sha = hashlib.sha256(body).hexdigest()
        path = self.body_path(sha)
        if path.exists():
            return sha
        if sha[:2] not in self._made_dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._made_dirs.add(sha[:2])
        atomic_write_bytes(path, body, sweep=False, checksum=False)  # named by its hash; swept under the crawl lock
        return sha

    def read_body(self, sha256: str) -> bytes | None:
        try:
            return self.body_path(sha256).read_bytes()
        except FileNotFoundError:
            return None

    # read API -----------------------------------------------------------------------------
    def _rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        return self.conn.execute(sql, params).fetchall()

    def content_type(self, url: str) -> str | None:
        """The Content-Type a stored URL was served with (charset included), or None."""
        row = self.conn.execute("SELECT content_type FROM urls WHERE url = ?", (url,)).fetchone()
        return row[0] if row else None

    def iter_pages(self, content_type_prefix: str = "text/html") -> Iterator[tuple[str, bytes]]:
        """(canonical URL, body) of every stored URL whose content type starts with the
        prefix, in URL order. A body missing from disk raises RawStoreError."""
        rows = self.conn.execute(
            "SELECT url, sha256 FROM urls WHERE state = 'stored' AND sha256 IS NOT NULL "
            "AND lower(substr(content_type, 1, ?)) = lower(?) ORDER BY url",
            (len(content_type_prefix), content_type_prefix),
        )
        for url, sha in rows:
            body = self.read_body(sha)
            if body is None:
                raise RawStoreError(f"raw store body {sha} for {url} is missing")
            yield url, body

    def get_body(self, url: str) -> bytes | None:
        """The last good body of ``url`` (also for failed/gone URLs that had one)."""
        row = self.conn.execute("SELECT sha256 FROM urls WHERE url = ?", (url,)).fetchone()
        if row is None or row[0] is None:
            return None
        return self.read_body(row[0])

    def record(self, url: str) -> UrlRecord | None:
        row = self.conn.execute(f"SELECT {_RECORD_COLUMNS} FROM urls WHERE url = ?", (url,)).fetchone()
        return UrlRecord(*row) if row else None

    def records(self) -> list[UrlRecord]:
        return [UrlRecord(*row) for row in self._rows(f"SELECT {_RECORD_COLUMNS} FROM urls ORDER BY url")]

    def failures(self) -> list[tuple[str, str]]:
        """(URL, reason) of every URL whose last attempt failed, in URL order."""
        return [tuple(r) for r in self._rows("SELECT url, reason FROM urls WHERE state = 'failed' ORDER BY url")]

    def skipped(self) -> list[tuple[str, str]]:
        return [tuple(r) for r in self._rows("SELECT url, reason FROM urls WHERE state = 'skipped_robots' ORDER BY url")]

    def gone(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT url FROM urls WHERE state = 'gone' ORDER BY url")]

    def url_states(self) -> dict[str, str]:
        return dict(self._rows("SELECT url, state FROM urls ORDER BY url"))

    def sitemap_lastmods(self) -> dict[str, str]:
        return dict(self._rows("SELECT url, sitemap_lastmod FROM urls WHERE sitemap_lastmod IS NOT NULL ORDER BY url"))

    def listed_lastmods(self) -> dict[str, str | None]:
        """URL -> lastmod of every page the sitemaps of the last pass that read them listed
        (sitemaps themselves excluded)."""
        row = self.conn.execute("SELECT max(sitemap_pass) FROM urls").fetchone()
        if row is None or row[0] is None:
            return {}
        return dict(self._rows(
            "SELECT url, sitemap_lastmod FROM urls WHERE sitemap_pass = ? AND is_sitemap = 0 ORDER BY url", (row[0],)
        ))

    def sitemap_urls(self) -> list[str]:
        """URLs whose stored body is a sitemap (or sitemap index), in URL order."""
        return [r[0] for r in self._rows("SELECT url FROM urls WHERE is_sitemap = 1 AND sha256 IS NOT NULL ORDER BY url")]

    def digest(self) -> str:
        """sha256 over (URL, state, body hash) of every URL: equal digests, equal contents."""
        hasher = hashlib.sha256()
        for url, state, sha in self._rows("SELECT url, state, sha256 FROM urls ORDER BY url"):
            hasher.update(f"{url}\t{state}\t{sha or ''}\n".encode())
        return hasher.hexdigest()

    def content_digest(self) -> str:
        """sha256 over what parsing the store can see: (URL, state, body hash, failure
        reason) of every URL except the sitemaps (whose bytes may name the port a site was
        served on). Equal digests, equal parse input."""
        hasher = hashlib.sha256()
        rows = self._rows(
            "SELECT url, state, sha256, CASE WHEN state = 'failed' THEN reason END FROM urls "
            "WHERE is_sitemap = 0 ORDER BY url"
        )
        for url, state, sha, reason in rows:
            hasher.update(f"{url}\t{state}\t{sha or ''}\t{reason or ''}\n".encode())
        return hasher.hexdigest()

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def pass_info(self) -> tuple[int, bool]:
        """(current pass number, whether it completed); (0, True) for a new store."""
        number = int(self.meta("pass") or 0)
        return number, (self.meta("pass_complete") or "1") == "1"
