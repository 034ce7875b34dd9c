"""Worker processes for the CPU-bound stages (image hashing, CogME tags, export shards).

Workers are forked: they start in milliseconds, need no importable ``__main__`` (a user's
unguarded script keeps working) and see the caller's modules as they are. They run only the
pure functions handed to them, which take none of the locks the caller's other threads may
hold. A daemonic process (which may not have children) and small inputs run in process.

Workers must not call Polars: its thread pool does not survive a fork, and a forked child
that waits on it hangs. Give them Arrow tables (pyarrow restarts its pools after a fork),
NumPy arrays or plain Python objects, and build Polars frames in the caller. Large inputs
reach the workers through fork's copy of memory (``sharing`` / ``shared``), not by pickling:
a pickled slice of an Arrow table carries its whole parent buffer.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

_SHARED: dict[str, Any] = {}


def worker_count(items: int, min_items_per_worker: int, workers: int | None = None) -> int:
    """How many processes to use for ``items`` units of work: ``workers`` if given, else one per
    CPU (at most 8) as long as each gets ``min_items_per_worker``; 1 means in process."""
    if workers is None:
        workers = min(8, os.cpu_count() or 1, items // max(1, min_items_per_worker))
    if multiprocessing.current_process().daemon:
        return 1
    return max(1, min(workers, items))


@contextmanager
def forked_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``workers`` forked processes; on the way out (also after a failure) tasks not
    yet started are cancelled, and the workers are joined."""
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    try:
        yield pool
    finally:
        pool.shutdown(cancel_futures=True)


def contiguous_ranges(total: int, parts: int) -> list[tuple[int, int]]:
    """``(start, length)`` of at most ``parts`` contiguous, near-equal ranges covering ``total``."""
    step = max(1, -(-total // max(1, parts)))
    return [(start, min(step, total - start)) for start in range(0, total, step)]


def contiguous_slices(items, parts: int) -> list:
    """The sequence ``items`` cut into at most ``parts`` contiguous slices."""
    return [items[start : start + length] for start, length in contiguous_ranges(len(items), parts)]


@contextmanager
def sharing(objects: Mapping[str, Any]) -> Iterator[None]:
    """Make ``objects`` readable with ``shared(name)`` in this process and in the workers it
    forks meanwhile."""
    _SHARED.update(objects)
    try:
        yield
    finally:
        for name in objects:
            _SHARED.pop(name, None)


def shared(name: str) -> Any:
    return _SHARED[name]
