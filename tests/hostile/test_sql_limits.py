"""Issue 30, point 16: ``stemforge sql``'s limits cover the result, not only DuckDB's side of
the query (a 2 GB result passed a 100MB limit into Python), and ``--timeout nan`` (or ``inf``)
is refused instead of removing the limit."""

from __future__ import annotations

import subprocess
import sys
import time

import duckdb
import pytest

from pipelines.store.home import DataHome
from pipelines.store.warehouse import WarehouseError, run_query


@pytest.fixture
def home(tmp_path):
    home = DataHome(tmp_path / "home")
    home.root.mkdir()
    con = duckdb.connect(str(home.warehouse))
    con.execute("CREATE TABLE t AS SELECT range AS x FROM range(10)")
    con.close()
    return home


@pytest.mark.timeout(120)
def test_the_memory_limit_covers_the_result(home):
    started = time.perf_counter()
    with pytest.raises(WarehouseError, match=r"result is larger than the memory limit of 100MB"):
        run_query(home, "SELECT repeat('x', 1000) AS s FROM range(2000000)", timeout=30, memory_limit="100MB")
    assert time.perf_counter() - started < 10
    assert len(run_query(home, "SELECT repeat('x', 1000) FROM range(1000)", timeout=30, memory_limit="100MB").rows) == 1000


@pytest.mark.timeout(120)
def test_the_time_limit_covers_fetching_the_result(home):
    started = time.perf_counter()
    with pytest.raises(WarehouseError, match="time limit of 0.2 s"):
        run_query(home, "SELECT range, repeat('y', 10) FROM range(30000000)", timeout=0.2, memory_limit="64GB")
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_a_time_limit_that_is_no_limit_is_refused(home, value):
    with pytest.raises(WarehouseError, match="time limit must be a positive number of seconds"):
        run_query(home, "SELECT 1", timeout=float(value))


def test_the_command_line_refuses_timeout_nan(home):
    done = subprocess.run([sys.executable, "-m", "pipelines.orchestration.cli", "sql", "--home", str(home.root),
                           "--timeout", "nan", "SELECT 1"], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "nan" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
