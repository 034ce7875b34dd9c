"""Worker processes: how many, what they see, and what happens in a daemonic process."""

from __future__ import annotations

import multiprocessing
import os

import pyarrow as pa
import pytest

from pipelines.parallel import (
    contiguous_ranges,
    contiguous_slices,
    forked_pool,
    shared,
    sharing,
    worker_count,
)


def test_worker_count_gives_each_worker_enough_items():
    cpus = min(8, os.cpu_count() or 1)
    assert worker_count(10, 64) == 1
    assert worker_count(64 * cpus * 10, 64) == cpus
    assert worker_count(10, 64, workers=3) == 3  # a requested count is kept...
    assert worker_count(2, 64, workers=3) == 2  # ...but never exceeds the items


def _count_in_daemon(queue):
    queue.put(worker_count(10_000, 1, workers=4))


def test_a_daemonic_process_works_in_process():
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_count_in_daemon, args=(queue,), daemon=True)
    child.start()
    assert queue.get(timeout=30) == 1
    child.join(30)


def _sum_of_range(start: int, length: int) -> int:
    return sum(shared("numbers").slice(start, length).column("n").to_pylist())


def test_workers_read_shared_tables_and_sharing_ends_with_the_block():
    table = pa.table({"n": list(range(1000))})
    with sharing({"numbers": table}):
        with forked_pool(2) as pool:
            parts = list(pool.map(_sum_of_range, [0, 500], [500, 500]))
    assert sum(parts) == sum(range(1000))
    with pytest.raises(KeyError):
        shared("numbers")


def _fail(value: int) -> int:
    raise ValueError(f"bad item {value}")


def test_a_worker_error_reaches_the_caller():
    with pytest.raises(ValueError, match="bad item 3"):
        with forked_pool(2) as pool:
            list(pool.map(_fail, [3]))


def test_contiguous_slices_cover_everything_in_order():
    assert contiguous_slices(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert contiguous_ranges(7, 2) == [(0, 4), (4, 3)]
    assert contiguous_slices([], 4) == [] and contiguous_ranges(0, 4) == []
