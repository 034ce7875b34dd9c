"""The tests' ``python:`` sources (``tests/corpus_sources.py``, ``tests/support/hard_cases.py``)
live in this folder: the operator's setting allows it, as an operator would allow a plugins
folder (``python:`` loads code only from places the operator allows; README, Sources)."""

import os
from pathlib import Path

os.environ.setdefault("STEMFORGE_PYTHON_SOURCES", str(Path(__file__).resolve().parent))

# The tests' data homes live in memory where the machine has room for them (/dev/shm): every
# build writes Dagster's SQLite history, whose commits wait on the disk (a no-change build of
# 90 questions: 7.3 s on disk, 6.1 s in memory on the 2-core machine). Passed tests' folders
# are removed as they pass (``tmp_path_retention_policy``), failed ones' kept.
MEMORY_TEMP_ROOT = Path("/dev/shm")
MEMORY_TEMP_FREE = 8 * 2**30  # bytes free that the root needs, else the system's temp folder


def _memory_temp_root() -> str | None:
    import shutil

    try:
        if MEMORY_TEMP_ROOT.is_dir() and os.access(MEMORY_TEMP_ROOT, os.W_OK) and \
                shutil.disk_usage(MEMORY_TEMP_ROOT).free >= MEMORY_TEMP_FREE:
            return str(MEMORY_TEMP_ROOT)
    except OSError:
        pass
    return None


if "PYTEST_DEBUG_TEMPROOT" not in os.environ and (_root := _memory_temp_root()):
    os.environ["PYTEST_DEBUG_TEMPROOT"] = _root

# The files that take longest (`pytest --durations`, seconds on the 2-core machine), run first:
# `make test` hands whole files to its two workers in collection order, so a long file collected
# last would leave one worker running it alone (longest first: the two finish close together).
LONGEST_FIRST = (
    "tests/hostile/test_home_safety.py",  # ~247 s
    "tests/end_to_end/test_incremental_equivalence.py",  # ~99 s
    "tests/hostile/test_home_integrity.py",  # ~96 s
    "tests/end_to_end/test_corpus_baseline.py",  # ~88 s
    "tests/end_to_end/test_end_to_end.py",  # ~85 s
    "tests/orchestration/test_partitions.py",  # ~69 s
    "tests/ingest/test_importers_real.py",  # ~62 s
    "tests/end_to_end/test_resume.py",  # ~61 s
    "tests/clean/test_hard_cases.py",  # ~56 s
    "tests/store/test_publish_version.py",  # ~56 s
)


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    root = Path(__file__).resolve().parent.parent

    def file_rank(item) -> int:
        return rank.get(Path(str(item.fspath)).resolve().relative_to(root).as_posix(), len(rank))

    items.sort(key=file_rank)  # stable: the order within a file, and of the other files, is kept
