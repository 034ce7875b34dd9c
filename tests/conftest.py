"""The tests' ``python:`` sources (``tests/corpus_sources.py``, ``tests/support/hard_cases.py``)
live in this folder: the operator's setting allows it, as an operator would allow a plugins
folder (``python:`` loads code only from places the operator allows; README, Sources)."""

import os
from pathlib import Path

os.environ.setdefault("STEMFORGE_PYTHON_SOURCES", str(Path(__file__).resolve().parent))
