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
