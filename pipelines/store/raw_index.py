"""The row checksums of a crawler's index (``raw/<source>/index.sqlite``, its ``urls`` table).

The index changes with every crawl, so it has no file checksum; SQLite checks its structure,
and every row carries ``row_sum``, a checksum of its values that SQLite triggers write whenever
the row is written (a byte flipped inside a row's data passes SQLite's own check). The crawler's
store (``pipelines.ingest.crawl.raw_store``) writes the rows; ``pipelines.store.integrity``
checks and repairs them with the functions here.
"""

from __future__ import annotations

import hashlib
import sqlite3

# the columns a row's checksum covers (every column of ``urls`` but the checksum)
SUMMED = ("id", "url", "state", "visited_pass", "discovered_pass", "status", "content_type", "sha256", "size", "etag",
          "last_modified", "sitemap_lastmod", "final_url", "reason", "attempts", "fetched_at", "sitemap_pass",
          "fetched_lastmod", "is_sitemap")
ROW_SUM_FUNCTION = "stemforge_row_sum"
# each value as its type and the hex of its bytes: the sum never depends on decoding a damaged text
ROW_SUM_SQL = f"{ROW_SUM_FUNCTION}({', '.join(f'typeof({c}) || hex({c})' for c in SUMMED)})"
ROW_SUM_TRIGGERS = f"""
CREATE TRIGGER IF NOT EXISTS urls_row_sum_insert AFTER INSERT ON urls BEGIN
    UPDATE urls SET row_sum = {ROW_SUM_SQL} WHERE id = NEW.id;
END;
CREATE TRIGGER IF NOT EXISTS urls_row_sum_update AFTER UPDATE OF {', '.join(SUMMED)} ON urls BEGIN
    UPDATE urls SET row_sum = {ROW_SUM_SQL} WHERE id = NEW.id;
END;
"""
ROW_SUMS_META = "row_sums"  # meta key: "1" once every row has its checksum


def row_sum(*values: str) -> str:
    """The checksum of a row: its values as ``typeof || hex`` (types included: 1 and '1' differ)."""
    hasher = hashlib.blake2b(digest_size=8)
    for value in values:
        hasher.update(f"{value}\x1f".encode("ascii", "replace"))
    return hasher.hexdigest()


def register_row_sum(conn: sqlite3.Connection) -> None:
    """Make ``row_sum`` callable from SQL on ``conn`` (the triggers call it)."""
    conn.create_function(ROW_SUM_FUNCTION, len(SUMMED), row_sum, deterministic=True)


def damaged_rows(conn: sqlite3.Connection) -> list[tuple[int, str]]:
    """(id, URL) of the index rows whose values no longer match their ``row_sum`` (a byte
    flipped inside a row); [] for a store whose sums were never computed (an old store: they are
    computed when it is next opened for writing). ``conn`` may be read-only."""
    register_row_sum(conn)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(urls)")}
    if "row_sum" not in columns:
        return []
    done = conn.execute("SELECT value FROM meta WHERE key = ?", (ROW_SUMS_META,)).fetchone()
    if not done or done[0] != "1":
        return []
    rows = conn.execute(f"SELECT id, CAST(url AS BLOB) FROM urls WHERE row_sum IS NOT {ROW_SUM_SQL} ORDER BY id")
    return [(row_id, bytes(url or b"").decode("utf-8", "replace")) for row_id, url in rows]


def reset_damaged_rows(conn: sqlite3.Connection) -> list[str]:
    """Make every row that fails its checksum never fetched (``pending``, its fetch result
    forgotten), so the next crawl fetches it again; returns their URLs (as stored)."""
    damaged = damaged_rows(conn)
    for row_id, _ in damaged:
        conn.execute(
            "UPDATE urls SET state = 'pending', visited_pass = 0, status = NULL, content_type = NULL, "
            "sha256 = NULL, size = NULL, etag = NULL, last_modified = NULL, final_url = NULL, reason = NULL, "
            "attempts = 0, fetched_at = NULL, fetched_lastmod = NULL WHERE id = ?", (row_id,))
        conn.execute(f"UPDATE urls SET row_sum = {ROW_SUM_SQL} WHERE id = ?", (row_id,))
    return [url for _, url in damaged]
