"""The real corpora in the loop: slices of SceMQA and GAOKAO-MM (read in place from
../shared/corpora) go through the real build, and bench/corpus_quality.py's figures hold:
no math damaged, no family or figure+stem pair across splits, figure-label questions kept in
order, the expected quarantine reasons; and each of those figures fails on planted damage.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import duckdb
import pytest

from pipelines.store.home import DataHome
from pipelines.store.warehouse import run_query
from support.corpora import CORPORA

ROOT = Path(__file__).resolve().parents[2]
SCEMQA = CORPORA / "scemqa" / "Multiple_Choice"
GAOKAO = CORPORA / "gaokao-mm" / "Data"

_spec = importlib.util.spec_from_file_location("corpus_quality", ROOT / "bench" / "corpus_quality.py")
corpus_quality = sys.modules.setdefault("corpus_quality", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(corpus_quality)

# Positions in the corpus files: the first six of each subject or file, plus the cases each
# figure is about (labels drawn in the figure, options that refer to others, exact copies,
# families, option pictures, every import quarantine reason).
SCEMQA_SLICE = {
    "Math": [*range(6), 31, 89, 59, 92, 104, 114, 119],  # 0: labels A-E; 2: refers to options; 31 = 89 exact;
    # 104: key E of A-D; 114, 119: mojibake (UTF-8 read as cp1252: "fâ\x80²", "0 â\x89¤ t")
    "Physics": [*range(6), 48, 141],  # 0: labels A-D; 48: refers to options; 141: answers C and D
    "Chemistry": [*range(6), 28, 101, 180, 184, 186],  # 28 = 101 exact, labels; 180: options in a table
    "Biology": [*range(6), 14, 20, 142],  # 14: labels
}
GAOKAO_SLICE = {
    "Biology": [*range(6)],  # 0: options 甲乙丙丁 name curves of the figure; 4: text options and 4 figures
    "Chemistry": [*range(6), 12, 27],  # 0, 27: option pictures (C, B, A, D / A, C, B, D + figure); 5: labels; 12: a table
    "Math": [*range(6), 6, 20],  # 0, 3, 6: option pictures; 20: text options and two figures
    "Physics": [*range(6), 7, 9],  # 1, 4: option pictures, out of order; 7: answers B and D; 9: five pictures, answers B and C
}


def write_scemqa_slice(folder: Path) -> str:
    whole = json.loads((SCEMQA / "multiple_choice.json").read_text(encoding="utf-8"))
    part = {subject: [whole[subject][i] for i in positions] for subject, positions in SCEMQA_SLICE.items()}
    path = folder / "multiple_choice.json"
    path.write_text(json.dumps(part, ensure_ascii=False), encoding="utf-8")
    return corpus_quality.CORPORA["scemqa"].spec(path=str(path)) + f"&image_root={SCEMQA.resolve()}"


def write_gaokao_slice(folder: Path) -> str:
    for subject, positions in GAOKAO_SLICE.items():
        name = f"2010-2023_{subject}_MCQs.json"
        whole = json.loads((GAOKAO / name).read_text(encoding="utf-8"))
        records = [whole["example"][i] for i in dict.fromkeys(positions)]
        (folder / name).write_text(json.dumps({"keywords": whole["keywords"], "example": records}, ensure_ascii=False), encoding="utf-8")
    # picture paths are "../Data/<file>": they resolve inside the real Data folder
    return corpus_quality.CORPORA["gaokao"].spec(path=str(folder)) + f"&image_root={GAOKAO.resolve()}"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    homes = {}
    for name, write in (("scemqa", write_scemqa_slice), ("gaokao", write_gaokao_slice)):
        folder = tmp_path_factory.mktemp(f"{name}-slice")
        home = tmp_path_factory.mktemp(f"{name}-home")
        code, output = corpus_quality.build(home, [write(folder)], timeout=600)
        assert code == 0, output[-3000:]
        homes[name] = home
    return homes


def reasons(figures: dict) -> dict[str, int]:
    return dict(figures["quarantined"])


def test_scemqa_slice(built):
    figures = corpus_quality.measure(DataHome(built["scemqa"]))
    assert figures["records"] == 41 and figures["kept"] >= 35, figures
    imported_out = {reason: n for reason, n in reasons(figures).items() if reason.startswith("import: ")}
    assert imported_out == {"import: several answers": 1, "import: answer out of range": 1}
    assert figures["duplicates"].get("exact", 0) >= 2  # Math 31/89, Chemistry 28/101
    assert figures["texts_with_math"] > 20 and figures["math_damaged"] == 0, figures["math_damaged_examples"]
    assert figures["kept_order_expected"]["kept-order:figure-labels"] >= 4
    assert figures["kept_order"] == figures["kept_order_expected"]
    assert figures["kept_order"]["kept-order:refers-to-options"] >= 2
    assert figures["order_violations"] == 0
    assert figures["families_across_splits"] == figures["figure_stems_across_splits"] == 0
    assert corpus_quality.problems({**figures, "build_exit": 0}) == []
    texts = dict(run_query(DataHome(built["scemqa"]), "SELECT source_key, problem FROM raw_questions").rows)
    positions = {f"multiple_choice.json#Math/{i}": p for i, p in enumerate(SCEMQA_SLICE["Math"])}
    texts = {positions[key]: text for key, text in texts.items() if key in positions}
    assert "derivative of f, f′, is shown" in texts[114]
    assert "0 ≤ t ≤ 10" in texts[119]
    mojibake = run_query(DataHome(built["scemqa"]), "SELECT count(*) FROM raw_questions WHERE regexp_matches(problem, '[\u0080-\u009f]|â€|Ã|Â')").rows
    assert mojibake == [(0,)]


def test_gaokao_slice_with_option_pictures(built):
    figures = corpus_quality.measure(DataHome(built["gaokao"]))
    assert (figures["records"], figures["kept"]) == (30, 28), figures
    assert reasons(figures) == {"import: several answers": 2}
    assert figures["texts_with_math"] > 20 and figures["math_damaged"] == 0, figures["math_damaged_examples"]
    # Biology 0 (甲乙丙丁), Chemistry 5 (A-D in the figure), Chemistry 12 (A-D, the rows of its
    # table) and the joined option pictures of Chemistry 0, 27, Math 0, 3, 6, Physics 1, 4; Biology 4
    # and Math 20 (text options, their figures joined) are shuffled
    assert figures["kept_order"] == figures["kept_order_expected"] == {"kept-order:figure-labels": 10}
    assert figures["order_violations"] == 0
    assert figures["families_across_splits"] == figures["figure_stems_across_splits"] == 0


def test_the_figures_fail_on_planted_damage(built, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(built["scemqa"], home)
    with duckdb.connect(str(DataHome(home).warehouse)) as con:
        labelled, group = con.execute(
            "SELECT question_id, duplicate_group FROM questions WHERE shuffle = 'kept-order:figure-labels' ORDER BY 1 LIMIT 1"
        ).fetchone()
        # a leak: the family's question and a copy of its figure and stem in another split
        other = con.execute(f"SELECT CASE WHEN split = 'test' THEN 'train' ELSE 'test' END FROM questions WHERE question_id = '{labelled}'").fetchone()[0]
        con.execute(
            f"INSERT INTO questions SELECT * REPLACE ('copy' AS question_id, '{other}' AS split) FROM questions WHERE question_id = '{labelled}'"
        )
        # math damaged: a formula regrouped in one kept problem
        damaged = con.execute(
            "SELECT question_id FROM questions WHERE problem_original LIKE '%$%' AND question_id <> 'copy' ORDER BY 1 LIMIT 1"
        ).fetchone()[0]
        con.execute(f"UPDATE questions SET problem = replace(problem, '\\(', '\\( (') WHERE question_id = '{damaged}'")
        # a formula cut from its expression: the rest of "log_2 8 = 3" written as a formula
        cut = con.execute(
            "SELECT question_id FROM questions WHERE problem_original NOT LIKE '%$%' AND problem_original NOT LIKE '%\\%' "
            f"AND question_id NOT IN ('copy', '{labelled}') ORDER BY 1 LIMIT 1"
        ).fetchone()[0]
        con.execute(f"UPDATE questions SET problem = problem || ' log_2 \\( 8=3 \\)' WHERE question_id = '{cut}'")
        # texts a reader cannot read as written: HTML left unread, a Symbol-font character
        con.execute(f"UPDATE questions SET problem = problem || ' x<sup>2</sup>' WHERE question_id = '{cut}'")
        con.execute(f"UPDATE choices SET text = text || ' \uf061' WHERE question_id = '{damaged}' AND position = 0")
        # a figure-label question whose options moved
        con.execute(
            "UPDATE choices SET original_position = CASE original_position WHEN 0 THEN 1 WHEN 1 THEN 0 ELSE original_position END "
            f"WHERE question_id = '{labelled}'"
        )
    figures = corpus_quality.measure(DataHome(home))
    assert figures["families_across_splits"] == 1 and figures["figure_stems_across_splits"] == 1
    assert figures["math_damaged"] == 1 and figures["order_violations"] == 1
    assert figures["formulas_cut"] == 1 and "log_2" in figures["formulas_cut_examples"][0]
    assert figures["markup_left"] == 1 and figures["unreadable_texts"] == 1
    assert any("<sup>" in example for example in figures["reading_examples"])
    assert not corpus_quality.unread_markup("If a<b>c") and corpus_quality.unread_markup("a &amp; b")
    assert corpus_quality.problems({**figures, "build_exit": 2}) == [
        "build exited 2", "math damaged 1", "order violations 1", "families across splits 1", "figure stems across splits 1",
    ]
