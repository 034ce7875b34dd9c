"""The rule tagger reads each distinct text once and skips cue patterns that cannot match
(``pipelines/profiles/cogme/tagger.py``): the tags are those of the plain per-question rules.

``CASES`` pins the tags the per-question tagger (before the restructuring) gave these questions:
(problem, choices, skill, subject, pic_prob, pic_choice, num_choices, TARGET, CONTENT, THINKING)."""

from __future__ import annotations

import re

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.profiles.cogme import tagger
from pipelines.profiles.cogme.tags import tag_rows, tags_frame
from pipelines.profiles.cogme.taxonomy import load_taxonomy

CASES = [
    ('What is \\( 2+1 \\)? Use the picture.', ['3', '2'], 'addition-with-pictures', 'math', True, False, 2,
     ['Symbol/Formula', 'Number/Quantity'], ['Quantity'], 'Grasping'),
    ('Look at the bar graph. How many people chose soccer?', ['6', '8'], 'bar-graphs', 'math', True, False, 2,
     ['Diagram/Chart/Table', 'Number/Quantity', 'Living thing'], ['Quantity'], 'Grasping'),
    ('Which shape is shown?', ['square', 'pentagon', 'rectangle'], 'name-the-shape', 'math', True, False, 3,
     ['Shape/Figure'], ['Identity'], 'Recall'),
    ('Which object is a cylinder?', ['cylinder', 'cube shape'], '3d-shapes', 'math', True, False, 2,
     ['Shape/Figure', 'Object'], ['Identity'], 'Grasping'),
    ('Which one is a cylinder?', None, '3d-shapes', 'math', True, True, 3,
     ['Shape/Figure', 'Object'], ['Identity'], 'Grasping'),
    ('What time is shown on the clock?', ['3:00', '4:30'], 'read-clocks/time-to-the-hour', 'math', True, False, 2,
     ['Time', 'Number/Quantity'], ['Quantity'], 'Grasping'),
    ('Why does the ice melt faster in the sun?', ['x', 'y'], 'states-of-matter', 'science', True, False, 2,
     ['Substance/Material', 'Place/Direction'], ['Causality'], 'Reasoning'),
    ('What is the next number in the pattern? 3, 7, 11, 15, ...', ['19', '18'], 'patterns', 'math', True, False, 2,
     ['Number/Quantity'], ['Sequence/Pattern', 'Quantity'], 'Reasoning'),
    ('Compute \\( 7 \\times 8 = \\)', ['56', '54', '48'], 'multiplication-facts', 'math', True, False, 3,
     ['Symbol/Formula', 'Number/Quantity'], ['Quantity'], 'Recall'),
    ('Solve for \\( x \\): \\( 3x + 4 = 19 \\)', ['\\( 5 \\)', '\\( 6 \\)'], 'equations', 'math', True, False, 2,
     ['Symbol/Formula'], ['Quantity'], 'Reasoning'),
    ('Which is heavier?', ['the apple', 'the melon'], 'compare-weight-balance', 'math', True, False, 2,
     ['Number/Quantity'], ['Relationship', 'Feature'], 'Reasoning'),
    ('In \\( \\triangle ABC \\), what is the measure of \\( \\angle C \\)?', ['\\( 40^\\circ \\)', '\\( 50^\\circ \\)'], 'angles-of-triangles', 'math', True, False, 2,
     ['Symbol/Formula', 'Number/Quantity'], ['Quantity'], 'Reasoning'),
    ('Will the magnets attract or repel each other?', ['attract', 'repel'], 'magnets/predict', 'science', True, False, 2,
     ['Force/Energy/Motion'], ['Causality'], 'Reasoning'),
    ("Which animal's feet are also adapted for walking on snow? Look at the picture of the hare.", ['fox', 'duck'], 'animal-adaptations', 'science', True, True, 2,
     ['Living thing', 'Place/Direction'], ['Identity', 'Feature'], 'Grasping'),
    ('What is the name of this mineral?', ['quartz', 'granite'], 'identify-minerals', 'science', True, False, 2,
     ['Substance/Material'], ['Identity', 'Quantity'], 'Recall'),
    ('Sam had 12 apples and gave 5 to his friend. How many apples does he have left?', ['7', '8', '17'], 'subtraction-word-problems', 'math', False, False, 3,
     ['Number/Quantity', 'Place/Direction'], ['Quantity'], 'Reasoning'),
    ('Engineers at a company designed a new water filter. They tested three filters with the same amount of dirty water and measured how clean the water was after each test. Which of the following could their test show?', ['which filter works best', 'how much the filters cost'], 'engineering-practices', 'science', True, False, 2,
     ['Scenario', 'Object', 'Substance/Material'], ['Means', 'Sequence/Pattern'], 'Reasoning'),
    ('Which company created this logo?', None, 'technology/logos', 'technology', True, True, 4,
     ['Object', 'Commonsense'], ['Identity'], 'Grasping'),
    ('What is the output of this code? print(3 + 4)', ['7', '34'], 'code_reading', 'technology', False, False, 2,
     ['Number/Quantity', 'Symbol/Formula'], ['Quantity', 'Sequence/Pattern'], 'Reasoning'),
    ('Select the mineral.', ['granite', 'quartz'], 'rocks_and_minerals', 'science', True, True, None,
     ['Substance/Material'], ['Identity'], 'Grasping'),
    ('', None, '', '', False, False, None,
     ['Commonsense'], ['Identity'], 'Recall'),
    ('Is a bird a mammal or a reptile?', ['mammal', 'reptile'], 'classify-animals', 'science', False, False, 2,
     ['Living thing'], ['Identity'], 'Recall'),
    ('Which states of matter are shown? The square units on the line graph.', ['solid | liquid', 'gas'], 'matter', 'science', True, False, 2,
     ['Substance/Material', 'Diagram/Chart/Table'], ['Identity'], 'Recall'),
    ('What fraction of the shape is shaded?', ['\\( \\frac{1}{2} \\)', '\\( \\frac{1}{3} \\)'], 'fractions', 'math', True, False, 2,
     ['Symbol/Formula', 'Number/Quantity', 'Shape/Figure'], ['Quantity', 'Structure'], 'Grasping'),
    ('Which mouse and keyboard are shown?', ['mouse and keyboard', 'printer'], 'computer-hardware', 'technology', True, False, 2,
     ['Object'], ['Identity'], 'Recall'),
    ('如图中能正确表示一定温度范围内该动物血液中血红蛋白含量随水温变化趋势的曲线是 ( )', ['甲', '乙', '丙', '丁'], 'gaokao biology', 'biology', True, False, 4,
     ['Commonsense'], ['Identity'], 'Recall'),
    ("The table shows values of \\( f' \\). Over which interval is \\( f \\) increasing?", ['\\( 1<x<5 \\)', '\\( x>5 \\)'], 'scemqa/math', 'math', True, False, 2,
     ['Symbol/Formula', 'Diagram/Chart/Table'], ['Identity'], 'Grasping'),
    ('What temperature does the thermometer show?', ['20°C', '25°C'], 'thermometers', 'science', True, False, 2,
     ['Force/Energy/Motion', 'Object'], ['Identity'], 'Grasping'),
    ('Which is the best estimate of the length of the pencil?', ['5 centimeters', '5 meters'], 'estimate-length', 'math', True, False, 2,
     ['Number/Quantity', 'Commonsense', 'Object'], ['Quantity'], 'Grasping'),
]

SCHEMA = {
    "question_id": pl.String, "subject": pl.String, "grade": pl.String, "skill": pl.String, "problem": pl.String,
    "pic_prob": pl.Boolean, "pic_choice": pl.Boolean, "num_choices": pl.Int64, "choices": pl.List(pl.String),
}


@pytest.fixture(scope="module")
def stem():
    return load_taxonomy("stem")


def row_of(case) -> dict:
    problem, choices, skill, subject, pic_prob, pic_choice, num_choices = case[:7]
    return {"problem": problem, "choices": choices, "skill": skill, "subject": subject, "pic_prob": pic_prob,
            "pic_choice": pic_choice, "num_choices": num_choices, "grade": "grade-1"}


@pytest.mark.parametrize("case", CASES, ids=[c[0][:40] or "empty" for c in CASES])
def test_tags_of_pinned_questions(case, stem):
    assert tagger.classify_question(row_of(case), stem) == (case[7], case[8], case[9])


def test_frame_of_repeated_texts_gets_each_question_its_own_rule_tags(stem):
    # every case several times under other ids, in a shuffled order: the distinct-text path gives each
    # question what the rules give it alone
    rows = [{**row_of(case), "question_id": f"q{(i * 7919) % 1000:04d}-{copy}"}
            for copy in range(3) for i, case in enumerate(CASES)]
    frame = pl.DataFrame(rows, schema=SCHEMA)
    expected = tags_frame(
        [tag for row in rows for tag in tag_rows(row["question_id"], tagger.RULES_SOURCE,
                                                 *tagger.classify_question(row, stem), stem)],
        stem,
    )
    assert tagger.tag_questions(frame, stem, workers=1).equals(expected)
    assert tagger.tag_questions(frame, stem, workers=2).equals(expected)
    assert tagger.tag_questions(frame.drop("choices"), stem, workers=1).height > 0


@pytest.mark.parametrize("frame", [
    pl.DataFrame({"question_id": ["a", "b"], "subject": [None, None], "skill": [None, None], "problem": [None, None],
                  "pic_prob": [None, None], "pic_choice": [None, None], "num_choices": [None, None],
                  "choices": [None, None]}),
    pl.DataFrame({"question_id": ["a", "b", "c"], "subject": ["math", None, "math"],
                  "skill": ["x/balance-scales", "", None], "problem": ["Which is heavier?", "", "How many?"],
                  "pic_prob": [1, 0, None], "pic_choice": [True, None, True], "num_choices": [None, 3, None],
                  "choices": [[1, 2], None, [3, 4, 5]]}),
], ids=["all-null", "untyped"])
def test_nulls_and_other_column_types_are_read_as_by_one_question(frame, stem):
    expected = tags_frame(
        [tag for row in frame.to_dicts() for tag in tag_rows(row["question_id"], tagger.RULES_SOURCE,
                                                            *tagger.classify_question(row, stem), stem)],
        stem,
    )
    assert tagger.tag_questions(frame, stem).equals(expected)


def full_scan(cues, text):
    """The lexicon scores with every cue pattern scanned (a copy of the lexicon has no index)."""
    return tagger._score(dict(cues), text)


TEXTS = [
    "Which object is a cylinder? | cube shape", "CYLINDER\nshape", "ſtar | İnvent | ınvent | Kelvin",
    "It costs 5¢. | 7 ¢", "at 7 a.m. | 3 P.M. | o'clock", "a 3D net | 2d shapes", "speed in m/s",
    "a mouse and keyboard | mouse", "line graph | lines", "square units | squares", "states of matter | states",
    "point A | point b", "base-ten blocks | base ten", "labelled | labeled", "what is this called?",
    "Is a dog a mammal or a reptile?", "12:30 | 4:05", "thousands place | tens place", "\\leq 3 | x = ",
    "水中氧含量随水温的升高而下降 | 甲", "",
]
WORDS = ("cylinder shape Shape ſtar İnvent ınvent K ¢ 5¢ a.m. P.M. o'clock 3d 2D m/s gb TB mouse and lines graph "
         "squares units states of matter point A base-ten ten labelled colour \\( x \\) what is this called how "
         "many which company is a dog or cat 12:30 tens place than more left? invent design test engineers "
         "温度").split()


@pytest.mark.parametrize("text", TEXTS)
def test_skipped_cue_patterns_would_not_have_matched(text):
    for cues in (tagger.TARGET_CUES, tagger.CONTENT_CUES):
        assert tagger._score(cues, text) == full_scan(cues, text)


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.sampled_from(WORDS), max_size=14), glue=st.sampled_from([" ", "", "-", " | ", "|", "\n"]))
def test_skipped_cue_patterns_would_not_have_matched_any_text(words, glue):
    text = glue.join(words)
    for cues in (tagger.TARGET_CUES, tagger.CONTENT_CUES):
        assert tagger._score(cues, text) == full_scan(cues, text)


def test_case_traps_are_every_non_ascii_character_re_ignorecase_matches_to_ascii():
    word_char = re.compile(r"[a-z0-9_]", re.I).match
    traps = {chr(c) for c in range(0x80, 0x110000) if word_char(chr(c))}
    assert traps == {chr(c) for c in range(0x80, 0x110000) if tagger._CASE_TRAPS.match(chr(c))}
