"""Control characters in question texts and options, through a whole build.

The rule (README, Sources): a NUL (escaped ``\\u0000`` in JSON or raw) in a question's text or
an option quarantines the record; any other control character (C0 except tab, newline and
carriage return; DEL; C1) is stripped and the record kept. It is applied where every source
lands, so a ``jsonl:`` file and a crawled page (tests/hostile/test_hostile_site.py) both get it.
"""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from support.builds import home_instance
from pipelines.ingest.stage import land_source
from pipelines.ingest.spec import parse_source_spec
from pipelines.orchestration.run import run_build
from pipelines.settings import BuildSettings
from pipelines.store.home import DataHome
from pipelines.store.images import ImageStore
from pipelines.store.records import RawQuestion, clean_text, validate_raw_question, with_clean_text
from pipelines.store.warehouse import run_query
from support.images import real_png

SUBJECTS = ("science", "technology", "engineering", "math")
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _line(i: int, question: str | None = None, options: list[str] | None = None) -> dict:
    return {
        "question": question or f"Which picture {i} shows the {SUBJECTS[i % 4]} idea number {i * 7}?",
        "options": options or [f"yes {i}", f"no {i}", f"maybe {i}"],
        "answer": i % 3,
        "subject": SUBJECTS[i % 4],
        "grade": f"grade-{1 + i % 5}",
        "skill": f"skill {i % 3}",
        "image": f"img/{i}.png",
    }


# line number -> (question, options); None keeps the default
SPECIAL = {
    0: ("Nul in the text\u0000 of question 0?", None),
    1: (None, ["yes 1", "n\u0000o 1", "maybe 1"]),
    2: ("Bell\u0007 escape\u001b[31m delete\u007f next-line\u0085 in question 2\tkept?", None),
    3: (None, ["y\u0008es 3", "no\u009b 3", "maybe\r\n3"]),
    4: (None, ["\u0001\u0002", "no 4", "maybe 4"]),  # only controls: empty once stripped
}


def _write_source(folder) -> str:
    (folder / "img").mkdir(parents=True)
    lines = []
    for i in range(48):
        (folder / "img" / f"{i}.png").write_bytes(real_png(2000 + i, size=64))
        question, options = SPECIAL.get(i, (None, None))
        lines.append(json.dumps(_line(i, question, options)))  # json escapes controls: "\u0000"
    path = folder / "controls.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert "\\u0000" in path.read_text() and "\x00" not in path.read_text()
    return f"jsonl:{path}"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("control-build")
    spec_text = _write_source(root / "source")
    home = DataHome(root / "home")
    with home_instance(home):
        outcome = run_build(BuildSettings(home=str(home.root), sources=(spec_text,), models=("random",)), progress=False)
    assert outcome.success, outcome.summary
    return home


def test_no_control_character_reaches_the_warehouse(built):
    problems = [r[0] for r in run_query(built, "SELECT problem FROM questions").rows]
    options = [r[0] for r in run_query(built, "SELECT text FROM choices").rows]
    raw = [r[0] for r in run_query(built, "SELECT problem FROM raw_questions").rows]
    assert len(problems) > 30 and options and raw
    assert not [t for t in problems + options + raw if t and CONTROL.search(t)]


def test_nul_records_are_quarantined_and_stray_controls_stripped(built):
    rows = run_query(built, "SELECT source_key, reason FROM quarantine WHERE source_key LIKE 'controls.jsonl#%'").rows
    reasons = dict(rows)
    assert reasons["controls.jsonl#0"] == "NUL character in the question text"
    assert reasons["controls.jsonl#1"] == "NUL character in option 1"
    assert reasons["controls.jsonl#4"] == "an option is empty"
    assert not {"controls.jsonl#2", "controls.jsonl#3"} & set(reasons)
    raw = dict(run_query(built, "SELECT source_key, problem FROM raw_questions").rows)
    assert raw["controls.jsonl#2"] == "Bell escape[31m delete next-line in question 2\tkept?"
    choices = dict(run_query(built, "SELECT source_key, choices FROM raw_questions").rows)
    assert list(choices["controls.jsonl#3"]) == ["yes 3", "no 3", "maybe\r\n3"]


def test_the_rule_holds_at_landing_for_every_source(tmp_path):
    spec_text = _write_source(tmp_path / "source")
    home = DataHome(tmp_path / "home")
    outcome = land_source(parse_source_spec(spec_text), home, ImageStore(home.images))
    questions = pl.read_parquet(outcome.question_file)
    quarantine = pl.read_parquet(outcome.quarantine_file)
    assert questions.height == 45 and set(quarantine["source_key"]) == {f"controls.jsonl#{i}" for i in (0, 1, 4)}
    texts = questions["problem"].to_list() + questions["choices"].explode().to_list()
    assert not [t for t in texts if CONTROL.search(t)]


def test_records_built_in_code_get_the_same_rule():
    base = RawQuestion("s", "k", "math", None, "skill", "Q\x1f?", choices=("a\x80", "b"), answer_idx=0)
    clean = with_clean_text(base)
    assert (clean.problem, clean.choices) == ("Q?", ("a", "b")) and validate_raw_question(clean) is None
    assert with_clean_text(clean) is clean
    nul = RawQuestion("s", "k", "math", None, "skill", "Q\x00?", choices=("a", "b"), answer_idx=0)
    assert validate_raw_question(with_clean_text(nul)) == "NUL character in the question text"



@pytest.mark.parametrize(
    ("text", "repaired"),
    [
        ("the derivative of f, f\u00e2\u0080\u00b2, is shown", "the derivative of f, f′, is shown"),  # SceMQA Math 114
        ("0 \u00e2\u0089\u00a4 t", "0 ≤ t"),
        ("caf\u00c3\u00a9 for \u00c2\u00a35", "café for £5"),
        ("it\u00e2\u0080\u0099s", "it’s"),
        ("lone C1 controls\u0085 are\u009b stripped", "lone C1 controls are stripped"),
    ],
)
def test_mojibake_is_repaired(text, repaired):
    assert clean_text(text) == repaired


def test_correct_text_with_the_same_letters_is_left_alone():
    text = "château, São Paulo, naïve, Âge, café’s, x² ≥ 5°, 甲乙丙丁, costs £5 — fine"
    assert clean_text(text) == text
