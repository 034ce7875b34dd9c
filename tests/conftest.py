"""The tests' ``python:`` sources (``tests/corpus_sources.py``, ``tests/support/hard_cases.py``)
live in this folder: the operator's setting allows it, as an operator would allow a plugins
folder (``python:`` loads code only from places the operator allows; README, Sources)."""

import os
from pathlib import Path

os.environ.setdefault("STEMFORGE_PYTHON_SOURCES", str(Path(__file__).resolve().parent))

# The files that take longest (`pytest --durations`, seconds on the 2-core machine), run first:
# `make test` hands whole files to its two workers in collection order, so a long file collected
# last would leave one worker running it alone (longest first: the two finish close together).
LONGEST_FIRST = (
    "tests/hostile/test_home_safety.py",  # ~185 s
    "tests/end_to_end/test_incremental_equivalence.py",  # ~115 s
    "tests/hostile/test_home_integrity.py",  # ~75 s
    "tests/end_to_end/test_corpus_baseline.py",  # ~62 s
    "tests/end_to_end/test_end_to_end.py",  # ~50 s
    "tests/store/test_publish_version.py",  # ~45 s
    "tests/ingest/test_importers_real.py",  # ~40 s
    "tests/orchestration/test_partitions.py",  # ~40 s
    "tests/end_to_end/test_resume.py",  # ~34 s
    "tests/ingest/test_importers_hf.py",  # ~32 s
)


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    root = Path(__file__).resolve().parent.parent

    def file_rank(item) -> int:
        return rank.get(Path(str(item.fspath)).resolve().relative_to(root).as_posix(), len(rank))

    items.sort(key=file_rank)  # stable: the order within a file, and of the other files, is kept
