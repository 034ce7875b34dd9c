"""Issue 30's fuzz suite: hostile texts, pages, layout files and spreadsheets must each cost
seconds, never minutes (every parser is linear in its input, or caps it with a reason).

Texts: 80 KB built to make option reading (``options_in_text=1``) quadratic, and TeX nested a
thousand braces deep for dedup's ``canonical_text`` (a RecursionError failed the whole build)."""

from __future__ import annotations

import random
import time

import pytest

from pipelines.clean.dedup.normalize import canonical_text, question_identity
from pipelines.ingest.importers.text_options import read_options, split_options

SIZE = 80_000


def _hostile_texts() -> dict[str, str]:
    rng = random.Random(30)
    texts = {
        "A. repeated": "A. " * SIZE,
        "(A) repeated": "(A) " * SIZE,
        "A) B) C) D) on lines": "\n".join(f"{'ABCD'[i % 4]}) x" for i in range(SIZE)),
        "A. to Z. on lines": "\n".join(f"{chr(65 + i % 26)}. y" for i in range(SIZE)),
        "labels in dollars": "$A. $" * SIZE,
        "full-width labels": "Ａ．" * SIZE,
        "random label soup": "".join(rng.choice("AB. ()$\n\\x{}|;") for _ in range(SIZE)),
        "open math": "\\(" * SIZE + "A. x B. y",
        "bars": "A. " + "|" * SIZE + " B. " + "|" * SIZE,
        "separators": "A. x" + "; " * SIZE + "B. y" + ";" * SIZE,
        "glued labels": "word(A)word(B)" * SIZE,
        "lower-case lines": "\n".join(f"{'abcd'[i % 4]}. z" for i in range(SIZE)),
    }
    return {name: text[:SIZE] for name, text in texts.items()}


@pytest.mark.timeout(120)
def test_options_in_text_is_linear():
    started = time.perf_counter()
    for name, text in _hostile_texts().items():
        one = time.perf_counter()
        read_options(text)
        split_options(text)
        assert time.perf_counter() - one < 5, name
    assert time.perf_counter() - started < 20


@pytest.mark.timeout(60)
@pytest.mark.parametrize("text", [
    "\\(\\frac" + "{" * 1000 + "x" + "}" * 1000 + "\\)",
    "$" + "{" * 5000 + "$",
    "\\(" + "\\sqrt[" * 2000 + "x\\)",
    "\\(x^" + "{" * 1500 + "2" + "}" * 1500 + "\\)",
])
def test_deeply_nested_tex_does_not_fail_dedup(text):
    started = time.perf_counter()
    assert canonical_text(text)
    assert canonical_text(text, option=True)
    assert question_identity(text, None, ["a", text], None)
    assert time.perf_counter() - started < 5


def test_nested_tex_within_the_limit_is_still_read_as_tex():
    assert canonical_text("\\(\\frac{1}{2}\\)") == canonical_text("$\\frac12$")
    deep = "\\(" + "{" * 50 + "\\left( x \\right)" + "}" * 50 + "\\)"
    assert canonical_text(deep) == "{" * 50 + "(x)" + "}" * 50  # parsed: \left and \right are invisible
