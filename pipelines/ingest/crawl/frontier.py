"""The resumable frontier, kept in the raw store's SQLite index.

A crawl works in passes. Every URL row has ``visited_pass``; the frontier of the current
pass is every row with ``visited_pass < pass``, taken in insertion order (breadth-first).
Results and the links they discovered are written in the same transaction, committed in
small batches, so a crawl killed at any point resumes from its last commit: the work
after it is simply redone. When a pass has finished, the next ``crawl()`` starts a new
pass that revisits every known URL (with conditional GET) and discovers new ones.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field

from pipelines.ingest.crawl.raw_store import RawStore, RawStoreError


@dataclass(frozen=True)
class Task:
    """One URL to fetch, with what the store already knows about it."""

    id: int
    url: str  # canonical
    state: str
    sha256: str | None
    etag: str | None
    last_modified: str | None
    content_type: str | None


@dataclass
class FetchResult:
    """What fetching one URL came to (built by the engine's worker threads)."""

    task: Task
    state: str  # stored | failed | skipped_robots | gone
    status: int | None = None
    content_type: str | None = None
    sha256: str | None = None
    size: int | None = None
    etag: str | None = None
    last_modified: str | None = None
    final_url: str | None = None
    reason: str | None = None
    attempts: int = 0
    requests: int = 0
    downloaded: bool = False  # a body came over the wire
    not_modified: bool = False  # 304: the stored body was kept
    links: list[str] = field(default_factory=list)  # canonical URLs found in the body
    sitemap_pages: list[tuple[str, str | None]] = field(default_factory=list)  # (canonical URL, lastmod)
    is_sitemap: bool = False  # the body parsed as a sitemap or sitemap index
    child_sitemaps: list[str] = field(default_factory=list)  # canonical URLs of a sitemap index's sitemaps
    sitemap_digest: str | None = None  # sha256 of the sitemap's (canonical URL, lastmod) entries


def sitemap_meta_key(url: str) -> str:
    """The ``meta`` key of what the last read of sitemap ``url`` found: the digest of its
    (canonical URL, lastmod) entries and its child sitemaps."""
    return f"sitemap {url}"


def recorded_sitemap(store: RawStore, url: str) -> dict | None:
    value = store.meta(sitemap_meta_key(url))
    try:
        return json.loads(value) if value else None
    except ValueError:
        return None


class Frontier:
    def __init__(self, store: RawStore):
        self.store = store
        self.conn: sqlite3.Connection = store.conn
        self.pass_number = 0
        self.resumed = False
        self._cursor = 0
        self._in_txn = False
        self._last_commit = time.monotonic()
        self._pending_writes = 0
        self._remaining: int | None = None
        self.max_urls: int | None = None  # the source's crawl budget (CrawlConfig.max_urls)
        self.over_budget = 0  # new URLs not recorded because the budget was reached
        self._known: int | None = None

    # pass management --------------------------------------------------------------------
    def begin(self, canonical_base: str, seeds: list[str]) -> None:
        """Resume the unfinished pass or start a new one seeded with ``seeds``."""
        recorded_base = self.store.meta("canonical_base")
        if recorded_base is not None and recorded_base != canonical_base:
            raise RawStoreError(
                f"raw store {self.store.root} holds {recorded_base}, not {canonical_base}; use another store directory"
            )
        number, complete = self.store.pass_info()
        self._begin()
        if complete:
            number += 1
            self._set_meta("pass", str(number))
            self._set_meta("pass_complete", "0")
            self._set_meta("canonical_base", canonical_base)
            self.resumed = False
        else:
            self.resumed = True
        self.pass_number = number
        if not self.resumed:
            self.add(seeds)
        self.commit()

    def finish_pass(self) -> None:
        self._begin()
        self._set_meta("pass_complete", "1")
        self.commit()

    def remaining(self, exact: bool = False) -> int:
        """URLs of this pass not yet finished (a running count unless ``exact``)."""
        if exact or self._remaining is None:
            self._remaining = self.conn.execute(
                "SELECT count(*) FROM urls WHERE visited_pass < ?", (self.pass_number,)
            ).fetchone()[0]
        return self._remaining

    def known_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM urls").fetchone()[0]

    # frontier -----------------------------------------------------------------------------
    def next_batch(self, limit: int) -> list[Task]:
        rows = self.conn.execute(
            "SELECT id, url, state, sha256, etag, last_modified, content_type FROM urls "
            "WHERE id > ? AND visited_pass < ? ORDER BY id LIMIT ?",
            (self._cursor, self.pass_number, limit),
        ).fetchall()
        if rows:
            self._cursor = rows[-1][0]
        return [Task(*row) for row in rows]

    def add(self, urls: list[str]) -> None:
        """Record URLs (known ones are left as they are; the UNIQUE index decides)."""
        if urls:
            self._begin()
            urls = list(dict.fromkeys(urls))
            if self.max_urls is not None:
                urls = self._within_budget(urls)
            inserted = self.conn.executemany(
                "INSERT OR IGNORE INTO urls (url, discovered_pass) VALUES (?, ?)",
                [(u, self.pass_number) for u in urls],
            ).rowcount
            if self._remaining is not None:
                self._remaining += inserted
            if self._known is not None:
                self._known += inserted

    def _within_budget(self, urls: list[str]) -> list[str]:
        """``urls`` less the new ones past ``max_urls`` known URLs (endless pagination, a
        calendar, session ids in links: a site can have more URLs than any crawl should)."""
        if self._known is None or self._known + len(urls) > self.max_urls:
            self._known = self.known_count()
        room = self.max_urls - self._known
        if len(urls) <= room:
            return urls
        known: set[str] = set()
        for i in range(0, len(urls), 500):
            chunk = urls[i:i + 500]
            known.update(row[0] for row in self.conn.execute(
                f"SELECT url FROM urls WHERE url IN ({','.join('?' * len(chunk))})", chunk))
        new = [u for u in urls if u not in known]
        kept = new[:max(room, 0)]
        self.over_budget += len(new) - len(kept)
        return [u for u in urls if u in known] + kept

    def add_sitemap_pages(self, pages: list[tuple[str, str | None]]) -> None:
        self.add([u for u, _ in pages])
        self.conn.executemany(
            "UPDATE urls SET sitemap_lastmod = ?, sitemap_pass = ? "
            "WHERE url = ? AND (sitemap_lastmod IS NOT ? OR sitemap_pass IS NOT ?)",
            [(lastmod, self.pass_number, u, lastmod, self.pass_number) for u, lastmod in pages],
        )

    def tasks_for(self, urls: list[str]) -> list[Task]:
        """Tasks of the given URLs not yet visited in this pass (known URLs only)."""
        tasks = []
        for url in dict.fromkeys(urls):
            row = self.conn.execute(
                "SELECT id, url, state, sha256, etag, last_modified, content_type FROM urls "
                "WHERE url = ? AND visited_pass < ?",
                (url, self.pass_number),
            ).fetchone()
            if row is not None:
                tasks.append(Task(*row))
        return tasks

    def mark_unchanged(self, sitemaps_changed: bool) -> int:
        """Count the URLs that need no request in this pass as visited (``lastmod`` mode,
        after this pass's sitemaps were read); returns how many. See CrawlConfig.revalidate."""
        self._begin()
        skipped = self.conn.execute(
            "UPDATE urls SET visited_pass = :pass WHERE visited_pass < :pass AND is_sitemap = 0 AND ("
            "  (state = 'stored' AND sha256 IS NOT NULL AND ("
            "     (sitemap_pass = :pass AND fetched_lastmod IS NOT NULL AND fetched_lastmod = sitemap_lastmod)"
            "     OR lower(coalesce(content_type, '')) LIKE 'image/%'"
            "     OR (sitemap_pass IS NULL AND NOT :changed)))"
            "  OR (state IN ('gone', 'skipped_robots') AND sitemap_pass IS NOT :pass AND NOT :changed))",
            {"pass": self.pass_number, "changed": int(sitemaps_changed)},
        ).rowcount
        self.commit()
        if self._remaining is not None:
            self._remaining -= skipped
        return skipped

    def record(self, result: FetchResult) -> None:
        """Write one URL's outcome and the URLs it discovered (same transaction)."""
        self._begin()
        if result.sitemap_pages:
            self.add_sitemap_pages(result.sitemap_pages)
        if result.links:
            self.add(result.links)
        task = result.task
        now = time.time()
        if result.state == "stored" and result.is_sitemap:
            self._set_meta(sitemap_meta_key(task.url), json.dumps(
                {"digest": result.sitemap_digest, "children": result.child_sitemaps}, sort_keys=True))
        if result.state == "stored":
            self.conn.execute(
                "UPDATE urls SET state='stored', visited_pass=?, status=?, content_type=?, sha256=?, size=?, "
                "etag=?, last_modified=?, final_url=?, reason=NULL, attempts=?, fetched_at=?, "
                "fetched_lastmod=sitemap_lastmod, is_sitemap=? WHERE id=?",
                (
                    self.pass_number, result.status, result.content_type, result.sha256, result.size,
                    result.etag, result.last_modified, result.final_url, result.attempts, now,
                    int(result.is_sitemap), task.id,
                ),
            )
        else:
            self.conn.execute(
                "UPDATE urls SET state=?, visited_pass=?, status=?, final_url=?, reason=?, attempts=?, fetched_at=? "
                "WHERE id=?",
                (result.state, self.pass_number, result.status, result.final_url, result.reason, result.attempts, now, task.id),
            )
        self._pending_writes += 1
        if self._remaining is not None:
            self._remaining -= 1

    # transactions -----------------------------------------------------------------------
    def _begin(self) -> None:
        if not self._in_txn:
            self.conn.execute("BEGIN IMMEDIATE")
            self._in_txn = True

    def set_meta(self, key: str, value: str) -> None:
        self._begin()
        self._set_meta(key, value)

    def _set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value", (key, value))

    def commit(self) -> None:
        if self._in_txn:
            self.conn.execute("COMMIT")
            self._in_txn = False
        self._last_commit = time.monotonic()
        self._pending_writes = 0

    def maybe_commit(self, max_age: float = 0.5, max_writes: int = 500) -> None:
        if self._pending_writes >= max_writes or time.monotonic() - self._last_commit >= max_age:
            self.commit()

    def rollback(self) -> None:
        if self._in_txn:
            self._in_txn = False
            if self.conn.in_transaction:  # SQLite ends the transaction itself on a full disk
                self.conn.execute("ROLLBACK")
