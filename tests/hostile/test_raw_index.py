"""Issue 30, point 5 (in part): a flipped byte in ``raw/<src>/index.sqlite`` blocked every build
and ``stemforge verify`` did not see it. Verify and the check before each build now ask SQLite
to check the index; a damaged one is moved to ``damaged/`` and the next build crawls again."""

from __future__ import annotations

from pipelines.ingest.crawl import RawStore
from pipelines.store.home import DataHome
from pipelines.store.integrity import DAMAGED, check_before_build, repair, verify_home


def _index(home: DataHome):
    folder = home.raw / "http-site"
    store = RawStore(folder, create=True)
    store.conn.executemany("INSERT INTO urls (url, discovered_pass) VALUES (?, 1)",
                           [(f"http://site.test/page/{i}",) for i in range(500)])
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return folder / "index.sqlite"


def _flip(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_verify_sees_a_damaged_raw_index_and_repair_moves_it_aside(tmp_path):
    home = DataHome(tmp_path / "home")
    index = _index(home)
    assert not [f for f in verify_home(home).findings if f.path == index]
    _flip(index, 100)  # the first page's b-tree header
    found = [f for f in verify_home(home).findings if f.path == index]
    assert [f.problem for f in found] == [DAMAGED], found
    lines = []
    repair(home, found, lines.append)
    assert not index.exists() and (home.root / "damaged" / "raw" / "http-site" / "index.sqlite").exists()
    assert "crawls the site again" in lines[0]
    RawStore(index.parent, create=True).close()  # the next crawl starts a new index
    assert not [f for f in verify_home(home).findings if f.path == index]


def test_a_build_is_not_blocked_by_a_damaged_raw_index(tmp_path):
    home = DataHome(tmp_path / "home")
    index = _index(home)
    _flip(index, 100)
    lines = []
    check_before_build(home, lines.append)
    assert not index.exists() and any("index.sqlite" in line for line in lines), lines


# ---- issue 30, point 5: a flipped byte inside a row (its data, not SQLite's structure)


def _crawl(site, folder):
    from pipelines.ingest.crawl import CrawlConfig, crawl

    return crawl(CrawlConfig(base_url=site.base_url, rate_per_host=1000, burst=50, concurrency=2, timeout=5), folder)


def test_a_flipped_byte_in_a_row_is_reported_and_the_next_build_fetches_the_row_again(tmp_path):
    import hashlib

    from support.loopback_site import Site, html, page

    home = DataHome(tmp_path / "home")
    folder = home.raw / "http-site"
    body_a = html("A", extra="<p>the page a row names</p>").encode()
    routes = {"/": page(html("home", links=["/a.html", "/b.html"])), "/a.html": page(body_a), "/b.html": page(html("B"))}
    with Site(routes) as site:
        _crawl(site, folder)
        url_a = site.base_url + "a.html"
        with RawStore(folder) as store:
            good = store.record(url_a)
            store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert good.sha256 == hashlib.sha256(body_a).hexdigest()
        index = folder / "index.sqlite"
        assert not [f for f in verify_home(home).findings if f.path == index]
        data = bytearray(index.read_bytes())
        at = data.find(good.sha256.encode())
        assert at > 0 and data.find(good.sha256.encode(), at + 1) < 0  # the row's copy, the only one
        data[at + 10] = ord("0") if data[at + 10] != ord("0") else ord("1")  # still a hex digit: SQLite sees nothing
        index.write_bytes(bytes(data))
        with RawStore(folder) as store:
            assert store.record(url_a).sha256 != good.sha256  # what a build would have trusted
        found = [f for f in verify_home(home).findings if f.path == index]
        assert [f.problem for f in found] == [DAMAGED] and "1 row(s) fail their checksum" in found[0].detail, found
        assert "a.html" in found[0].detail
        lines = []
        check_before_build(home, lines.append)  # the next build: the row is made never fetched ...
        assert index.exists() and any("1 row(s) marked never fetched" in line for line in lines), lines
        with RawStore(folder) as store:
            assert store.record(url_a).state == "pending" and store.record(url_a).sha256 is None
        hits = site.hits("/a.html")
        _crawl(site, folder)  # ... and its crawl fetches it again
        assert site.hits("/a.html") == hits + 1
    with RawStore(folder) as store:
        assert store.record(url_a).sha256 == good.sha256 and store.record(url_a).state == "stored"
    assert not [f for f in verify_home(home).findings if f.path == index]


def test_an_index_written_before_row_checksums_gets_them_when_opened(tmp_path):
    import sqlite3

    from pipelines.store.raw_index import ROW_SUMS_META, damaged_rows

    folder = tmp_path / "raw"
    folder.mkdir()
    con = sqlite3.connect(folder / "index.sqlite")  # the schema of an older stemforge, without row_sum
    con.executescript("""
        CREATE TABLE urls (id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE, state TEXT NOT NULL DEFAULT 'pending',
            visited_pass INTEGER NOT NULL DEFAULT 0, discovered_pass INTEGER NOT NULL, status INTEGER,
            content_type TEXT, sha256 TEXT, size INTEGER, etag TEXT, last_modified TEXT, sitemap_lastmod TEXT,
            final_url TEXT, reason TEXT, attempts INTEGER NOT NULL DEFAULT 0, fetched_at REAL);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO urls (url, state, discovered_pass, sha256) VALUES ('http://old.test/', 'stored', 1, 'ab');
    """)
    con.commit()
    assert damaged_rows(con) == []  # no sums yet: nothing to check, nothing reported
    con.close()
    with RawStore(folder) as store:
        assert store.meta(ROW_SUMS_META) == "1" and store.record("http://old.test/").sha256 == "ab"
        assert store.conn.execute("SELECT count(*) FROM urls WHERE row_sum IS NULL").fetchone()[0] == 0
        assert damaged_rows(store.conn) == []
        store.conn.execute("UPDATE urls SET reason = 'x'")  # later writes keep the sum by the trigger
        assert damaged_rows(store.conn) == []
