"""Record functions for ``python:`` sources in the tests (``python:tests/corpus_sources.py:NAME``).

Not a test module: the importer loads it by path, in the test process or in a build's.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Iterator

from PIL import Image

CORPORA = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpora"
GAOKAO_DATA = CORPORA / "gaokao-mm" / "Data"


def gaokao_slice(per_file: str = "4") -> Iterator[dict]:
    """The first ``per_file`` records of each GAOKAO-MM file, as the file has them, with the
    file's subject: picture paths stay relative to ``Data/`` (``image_root`` points there)."""
    subjects = {"Biology": "biology", "Chemistry": "chemistry", "Physics": "physics", "Math": "math"}
    for path in sorted(GAOKAO_DATA.glob("*.json")):
        subject = next(name for word, name in subjects.items() if word in path.stem)
        for record in json.loads(path.read_text(encoding="utf-8"))["example"][: int(per_file)]:
            yield {**record, "subject": subject, "skill": f"gaokao {subject}"}


def drawn(color: str = "navy", count: str = "2") -> Iterator[dict]:
    """Questions whose images are bytes made here; the second one has no options."""
    for i in range(int(count)):
        buffer = io.BytesIO()
        Image.new("RGB", (12 + i, 10), color).save(buffer, format="PNG")
        record = {"question": f"Which colour is picture {i}?", "options": [color, "red"], "answer": 0,
                  "image": buffer.getvalue(), "subject": "science", "skill": "colours"}
        if i == 1:
            record.pop("options")
        yield record


def nothing() -> list:
    return []


def broken() -> Iterator[dict]:
    yield {"question": "First?", "options": ["a", "b"], "answer": 0, "subject": "math", "skill": "s"}
    raise RuntimeError("the corpus server went away")
