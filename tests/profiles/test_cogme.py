"""CogME: taxonomies, tagging rules, tagger, manual import, agreement, profiles, report section."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.profiles.cogme.agreement import agreement, agreement_by_sub_component, cohen_kappa
from pipelines.profiles.cogme.manual import ManualTagsError, load_manual_tags
from pipelines.profiles.cogme.profiles import (
    PROFILE_SCHEMA,
    ProfileError,
    dataset_profile,
    frequency_accuracy_relation,
    model_profiles,
    preferred_tags,
)
from pipelines.profiles.cogme.report_section import render_profiles_html
from pipelines.profiles.cogme.tagger import RULES_SOURCE, TaggerError, classify_question, tag_questions
from pipelines.profiles.cogme.tags import TAG_SCHEMA, TagRuleError, tag_rows, tags_frame, validate_tags
from pipelines.profiles.cogme.taxonomy import TaxonomyError, load_taxonomy

FIXTURE = Path(__file__).parents[1] / "fixtures" / "cogme"


@pytest.fixture(scope="module")
def stem():
    return load_taxonomy("stem")


def question(**overrides):
    row = {
        "question_id": "0000000000000001",
        "subject": "math",
        "grade": "grade-1",
        "skill": "some-skill",
        "problem": "What is this?",
        "pic_prob": True,
        "pic_choice": False,
        "num_choices": 3,
        "choices": ["a", "b", "c"],
    }
    row.update(overrides)
    return row


def questions_frame(rows):
    return pl.DataFrame(
        rows,
        schema={
            "question_id": pl.String, "subject": pl.String, "grade": pl.String, "skill": pl.String,
            "problem": pl.String, "pic_prob": pl.Boolean, "pic_choice": pl.Boolean, "num_choices": pl.Int64,
            "choices": pl.List(pl.String),
        },
    )


# ---------------------------------------------------------------- taxonomies


def test_bundled_taxonomies_load_with_paper_weights_and_limits():
    for name in ("stem", "cogme"):
        tax = load_taxonomy(name)
        assert tax.thinking_weights == {"Recall": 1, "Grasping": 2, "Reasoning": 3}
        assert tax.limits == {"TARGET": 3, "CONTENT": 3, "THINKING": 1}
        for comp in ("TARGET", "CONTENT", "THINKING"):
            assert all(tax.components[comp].sub_components.values())
    cogme = load_taxonomy("cogme")
    assert cogme.sub_components("TARGET") == (
        "Character", "Object", "Place", "Conversation", "Behavior", "Event", "Emotion", "Commonsense"
    )
    assert cogme.sub_components("CONTENT") == (
        "Identity", "Feature", "Relationship", "Means", "Context", "Sequence", "Causality", "Motivation"
    )
    stem = load_taxonomy("stem")
    assert "Symbol/Formula" in stem.sub_components("TARGET")
    assert "Structure" in stem.sub_components("CONTENT")


def test_taxonomy_yaml_errors_are_one_line(tmp_path):
    good = (Path(__file__).parents[2] / "pipelines" / "profiles" / "cogme" / "taxonomies" / "stem.yaml").read_text()
    cases = {
        "weights": good.replace("Reasoning: 3", "Reasoning: 0"),
        "missing": good.replace("  CONTENT:\n", "  CONTENTS:\n", 1),
        "yaml": good + "\n  - : [",
        "levels": good.replace("      Grasping: Perceiving", "      Understanding: Perceiving"),
    }
    for name, text in cases.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        with pytest.raises(TaxonomyError) as err:
            load_taxonomy(str(path))
        assert "\n" not in str(err.value), name
    with pytest.raises(TaxonomyError, match="not a bundled name"):
        load_taxonomy("nope")


# ---------------------------------------------------------------- tag rules


def test_validate_tags_rejects_rule_violations(stem):
    ok = tag_rows("q1", "manual:x", ["Object"], ["Identity"], "Recall", stem)
    assert validate_tags(pl.DataFrame(ok, schema=TAG_SCHEMA), stem).height == 3

    four_targets = tag_rows(
        "q1", "manual:x", ["Object", "Time", "Shape/Figure", "Living thing"], ["Identity"], "Recall", stem
    )
    with pytest.raises(TagRuleError, match="4 TARGET tags, at most 3"):
        validate_tags(pl.DataFrame(four_targets, schema=TAG_SCHEMA), stem)

    four_contents = tag_rows(
        "q1", "manual:x", ["Object"], ["Identity", "Feature", "Quantity", "Means"], "Recall", stem
    )
    with pytest.raises(TagRuleError, match="4 CONTENT tags"):
        validate_tags(pl.DataFrame(four_contents, schema=TAG_SCHEMA), stem)

    two_levels = ok + [dict(ok[-1], sub_component="Reasoning")]
    with pytest.raises(TagRuleError, match="2 THINKING tags, exactly one"):
        validate_tags(pl.DataFrame(two_levels, schema=TAG_SCHEMA), stem)

    no_level = ok[:-1]
    with pytest.raises(TagRuleError, match="0 THINKING tags"):
        validate_tags(pl.DataFrame(no_level, schema=TAG_SCHEMA), stem)

    wrong_weight = [dict(r, weight=3) for r in ok]
    with pytest.raises(TagRuleError, match="weight must be 1"):
        validate_tags(pl.DataFrame(wrong_weight, schema=TAG_SCHEMA), stem)

    unknown = [dict(ok[0], sub_component="Character")] + ok[1:]
    with pytest.raises(TagRuleError, match="'Character' is not a TARGET sub-component"):
        validate_tags(pl.DataFrame(unknown, schema=TAG_SCHEMA), stem)

    # The limits are per (question, source): two sources may each tag three.
    two_sources = tag_rows("q1", "manual:a", ["Object", "Time", "Shape/Figure"], ["Identity"], "Recall", stem)
    two_sources += tag_rows("q1", RULES_SOURCE, ["Living thing", "Time", "Object"], ["Feature"], "Grasping", stem)
    assert validate_tags(pl.DataFrame(two_sources, schema=TAG_SCHEMA), stem).height == 10


# ---------------------------------------------------------------- tagger


def test_context_decides_the_level(stem):
    # one shape shown, name it: Recall
    _, _, level = classify_question(question(problem="What shape is this?"), stem)
    assert level == "Recall"
    # pick one candidate among several image options: Grasping
    _, _, level = classify_question(
        question(problem="Select the triangle.", pic_prob=False, pic_choice=True, num_choices=3, choices=None), stem
    )
    assert level == "Grasping"
    # "Which object ..." over a picture with several objects: Grasping
    _, _, level = classify_question(
        question(problem="Which object is the most flexible?", choices=["rubber band", "brick", "ruler"]), stem
    )
    assert level == "Grasping"
    # the same "Which object" naming the single thing shown: Recall
    _, _, level = classify_question(question(problem="Which object is this?", choices=["cup", "jar"]), stem)
    assert level == "Recall"


def test_formulas_steps_and_stems(stem):
    target, content, level = classify_question(
        question(problem="Evaluate. \\( 4+6 \\times(8-3) \\)", choices=["34", "50", "26"]), stem
    )
    assert "Symbol/Formula" in target and "Quantity" in content and level == "Reasoning"
    _, _, level = classify_question(question(problem="Add. \\( 3+4= \\)", choices=["6", "7", "8"]), stem)
    assert level == "Grasping"
    _, _, level = classify_question(
        question(problem="Solve for \\( y \\). \\( 3 y-4=11 \\)", choices=["5", "15"]), stem
    )
    assert level == "Reasoning"
    target, content, level = classify_question(
        question(problem="What time is shown?", choices=["3:00", "4:00"], skill="read-clocks"), stem
    )
    assert "Time" in target and level == "Grasping"
    _, content, level = classify_question(
        question(problem="Why does the ice melt faster in the sun?", subject="science", choices=["x", "y"]), stem
    )
    assert "Causality" in content and level == "Reasoning"
    _, content, level = classify_question(
        question(problem="What is the next number in the pattern? 3, 7, 11, 15, ...", choices=["19", "18"]), stem
    )
    assert "Sequence/Pattern" in content and level == "Reasoning"


def test_tag_questions_frame_follows_the_rules(stem):
    qs = pl.read_ndjson(FIXTURE / "questions.jsonl")
    tags = tag_questions(qs, stem)
    assert tags.columns == list(TAG_SCHEMA)
    assert set(tags["source"].unique()) == {RULES_SOURCE}
    assert set(tags["question_id"].unique()) == set(qs["question_id"])
    per_q = tags.group_by("question_id").agg(
        [(pl.col("component") == c).sum().alias(c) for c in ("TARGET", "CONTENT", "THINKING")]
    )
    assert per_q["TARGET"].max() <= 3 and per_q["CONTENT"].max() <= 3
    assert per_q["TARGET"].min() >= 1 and per_q["CONTENT"].min() >= 1
    assert (per_q["THINKING"] == 1).all()
    # deterministic: same input, same frame, whether tagged in process or by worker processes
    assert tag_questions(qs, stem).equals(tags)
    assert tag_questions(qs.reverse(), stem, workers=3).equals(tags)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(
        st.sampled_from(
            "which what how many why predict compare select the object shape time clock graph table magnet force "
            "energy plant animal cell rock water tool measure pattern next cause part of is are more most \\( x+1=2 \\) "
            "3 17 2.5 sum area perimeter map north experiment design engineer code logo".split(" ")
        ),
        min_size=0,
        max_size=40,
    ),
    pic_prob=st.booleans(),
    pic_choice=st.booleans(),
    subject=st.sampled_from(["science", "technology", "engineering", "math"]),
)
def test_tagger_never_breaks_the_limits(words, pic_prob, pic_choice, subject):
    stem = load_taxonomy("stem")
    row = question(
        problem=" ".join(words) + "?", pic_prob=pic_prob, pic_choice=pic_choice, subject=subject,
        choices=None if pic_choice else ["one", "two"], num_choices=3 if pic_choice else 2,
    )
    target, content, level = classify_question(row, stem)
    assert 1 <= len(target) <= 3 and len(set(target)) == len(target)
    assert 1 <= len(content) <= 3 and len(set(content)) == len(content)
    assert level in ("Recall", "Grasping", "Reasoning")
    tags = tag_questions(questions_frame([row]), stem)
    assert (tags["component"] == "THINKING").sum() == 1


def test_tagger_bad_input(stem):
    with pytest.raises(TaggerError, match="lack column"):
        tag_questions(pl.DataFrame({"question_id": ["a"]}), stem)
    with pytest.raises(TaggerError, match="unique"):
        tag_questions(questions_frame([question(), question()]), stem)
    with pytest.raises(TaggerError, match="'stem' taxonomy"):
        tag_questions(questions_frame([question()]), load_taxonomy("cogme"))
    assert tag_questions(questions_frame([]), stem).height == 0


# ---------------------------------------------------------------- manual import


HEADER = "question_id,target1,target2,target3,content1,content2,content3,thinking\n"


def test_manual_import_reads_both_layouts(tmp_path, stem):
    slots = tmp_path / "slots.csv"
    slots.write_text(HEADER + "q1,object, Time ,,Identity,,,grasping\nq2,Symbol/Formula,,,Quantity,,,Reasoning\n")
    tags = load_manual_tags(slots, stem)
    assert set(tags["source"]) == {"manual:slots.csv"}
    q1 = tags.filter(pl.col("question_id") == "q1")
    assert sorted(q1["sub_component"]) == ["Grasping", "Identity", "Object", "Time"]
    assert set(q1["weight"]) == {2}
    lists = tmp_path / "lists.csv"
    lists.write_text("question_id,target,content,thinking\nq1,Object;Time,Identity,Grasping\n")
    assert load_manual_tags(lists, stem).drop("source").equals(q1.drop("source"))


@pytest.mark.parametrize(
    "body, message",
    [
        ("q1,Object,,,Identity,,,Pondering\n", "line 2: unknown THINKING level 'Pondering'"),
        ("q1,Object,Gizmo,,Identity,,,Recall\n", "line 2: unknown TARGET sub-component 'Gizmo'"),
        ("q1,Object,,,Identity,,,Recall;Reasoning\n", "line 2: several THINKING levels"),
        ("q1,Object,,,Identity,,,\n", "line 2: question q1 needs exactly one THINKING level"),
        ("q1,,,,Identity,,,Recall\n", "line 2: question q1 has no TARGET tag"),
        ("q1,Object,Object,,Identity,,,Recall\n", "line 2: TARGET 'Object' given twice"),
        ("q1,Object,,,Identity,,,Recall\nq1,Time,,,Identity,,,Recall\n", "line 3: question q1 already annotated"),
        (",Object,,,Identity,,,Recall\n", "line 2: empty question_id"),
    ],
)
def test_manual_import_errors_name_the_row(tmp_path, stem, body, message):
    path = tmp_path / "tags.csv"
    path.write_text(HEADER + body)
    with pytest.raises(ManualTagsError) as err:
        load_manual_tags(path, stem)
    assert message in str(err.value) and "tags.csv" in str(err.value) and "\n" not in str(err.value)


def test_manual_import_too_many_targets_and_bad_files(tmp_path, stem):
    path = tmp_path / "four.csv"
    path.write_text("question_id,target,content,thinking\nq9,Object;Time;Shape/Figure;Living thing,Identity,Recall\n")
    with pytest.raises(ManualTagsError, match="line 2: 4 TARGET tags for question q9, at most 3"):
        load_manual_tags(path, stem)
    path.write_text("id,thinking\nq1,Recall\n")
    with pytest.raises(ManualTagsError, match="header needs"):
        load_manual_tags(path, stem)
    with pytest.raises(ManualTagsError, match="no such file"):
        load_manual_tags(tmp_path / "missing.csv", stem)


def test_labelled_fixture_is_valid_and_covers_the_subjects(stem):
    labels = load_manual_tags(FIXTURE / "labelled_sample.csv", stem)
    qs = pl.read_ndjson(FIXTURE / "questions.jsonl")
    assert qs.height >= 100 and set(labels["question_id"]) == set(qs["question_id"])
    assert set(qs["subject"]) == {"science", "technology", "engineering", "math"}
    assert set(qs["part"]) == {"dev", "holdout"}
    for line in (FIXTURE / "questions.jsonl").read_text().splitlines():
        assert re.fullmatch(r"[0-9a-f]{16}", json.loads(line)["question_id"])


# ---------------------------------------------------------------- agreement


def test_cohen_kappa_hand_computed():
    # 2x2 table: yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> po 0.7, pe 0.5, kappa 0.4
    ref = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    pred = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert cohen_kappa(ref, pred) == pytest.approx(0.4)
    assert cohen_kappa(["a", "b", "c"], ["a", "b", "c"]) == pytest.approx(1.0)
    assert cohen_kappa(["a", "a"], ["a", "a"]) is None  # chance agreement is 1: undefined


def test_agreement_per_component_hand_computed(stem):
    ref = tags_frame(
        tag_rows("q1", "manual:r", ["Object", "Time"], ["Identity"], "Recall", stem)
        + tag_rows("q2", "manual:r", ["Shape/Figure"], ["Quantity"], "Reasoning", stem),
        stem,
    )
    pred = tags_frame(
        tag_rows("q1", RULES_SOURCE, ["Object"], ["Identity"], "Recall", stem)
        + tag_rows("q2", RULES_SOURCE, ["Shape/Figure", "Number/Quantity"], ["Quantity"], "Grasping", stem),
        stem,
    )
    table = {r["component"]: r for r in agreement(ref, pred).iter_rows(named=True)}
    # THINKING: 1 of 2 equal; kappa: po .5, pe = (1*1 + 0*1 + 1*0)/4 = .25 -> (0.5-0.25)/0.75
    assert table["THINKING"]["accuracy"] == pytest.approx(0.5)
    assert table["THINKING"]["kappa"] == pytest.approx(1 / 3)
    # TARGET over the used sub-components {Object, Time, Shape, Number}: 8 cells, 2 disagree
    assert table["TARGET"]["n_cells"] == 8
    assert table["TARGET"]["accuracy"] == pytest.approx(6 / 8)
    assert table["TARGET"]["jaccard"] == pytest.approx((1 / 2 + 1 / 2) / 2)
    assert table["TARGET"]["precision"] == pytest.approx(2 / 3)
    assert table["TARGET"]["recall"] == pytest.approx(2 / 3)
    assert table["CONTENT"]["accuracy"] == 1.0 and table["CONTENT"]["kappa"] == pytest.approx(1.0)
    # with the taxonomy every TARGET sub-component is a cell (more true negatives)
    with_tax = {r["component"]: r for r in agreement(ref, pred, stem).iter_rows(named=True)}
    assert with_tax["TARGET"]["n_cells"] == 2 * len(stem.sub_components("TARGET"))
    by_sub = agreement_by_sub_component(ref, pred, stem)
    time_row = by_sub.filter(pl.col("sub_component") == "Time").row(0, named=True)
    assert time_row["n_reference"] == 1 and time_row["n_predicted"] == 0


# ---------------------------------------------------------------- profiles


@pytest.fixture()
def small_case(stem):
    tags = tags_frame(
        tag_rows("q1", "manual:m", ["Object", "Number/Quantity"], ["Quantity"], "Reasoning", stem)
        + tag_rows("q2", "manual:m", ["Object"], ["Identity"], "Recall", stem)
        + tag_rows("q3", "manual:m", ["Number/Quantity"], ["Quantity"], "Grasping", stem)
        + tag_rows("q3", RULES_SOURCE, ["Time"], ["Sequence/Pattern"], "Recall", stem),  # manual wins
        stem,
    )
    questions = pl.DataFrame(
        {"question_id": ["q1", "q2", "q3"], "subject": ["math", "science", "math"], "split": ["test"] * 3}
    )
    scored = pl.DataFrame(
        {
            "model": ["m"] * 3 + ["n"] * 3,
            "question_id": ["q1", "q2", "q3"] * 2,
            "split": ["test"] * 6,
            "correct": [True, False, False, False, True, None],
        }
    )
    return questions, tags, scored


def _value(frame, **where):
    sub = frame
    for k, v in where.items():
        sub = sub.filter(pl.col(k) == v)
    assert sub.height == 1, where
    return sub.row(0, named=True)


def test_weighted_achievement_hand_computed(small_case, stem):
    _, tags, scored = small_case
    prof = model_profiles(scored, tags, stem)
    assert prof.columns == list(PROFILE_SCHEMA)
    m = prof.filter((pl.col("profile_of") == "m") & (pl.col("scope") == "all"))
    # Object: q1 (Reasoning, 3, correct) + q2 (Recall, 1, wrong) -> 3/4; unweighted 1/2
    obj = _value(m, sub_component="Object", measure="weighted_achievement")
    assert obj["value"] == pytest.approx(75.0) and obj["n"] == 2
    assert _value(m, sub_component="Object", measure="accuracy")["value"] == pytest.approx(50.0)
    # Number/Quantity: q1 (3, correct) + q3 (Grasping, 2, wrong) -> 3/5
    assert _value(m, sub_component="Number/Quantity", measure="weighted_achievement")["value"] == pytest.approx(60.0)
    assert _value(m, sub_component="Quantity", measure="weighted_achievement")["value"] == pytest.approx(60.0)
    assert _value(m, sub_component="Identity", measure="weighted_achievement")["value"] == pytest.approx(0.0)
    assert _value(m, sub_component="Reasoning", measure="weighted_achievement")["value"] == pytest.approx(100.0)
    overall = _value(m, component="OVERALL", measure="weighted_achievement")
    assert overall["value"] == pytest.approx(50.0) and overall["n"] == 3
    assert _value(m, component="OVERALL", measure="accuracy")["value"] == pytest.approx(100 / 3)
    # untagged sub-components are listed with n = 0 and no value; the automatic Time tag of q3 lost
    time_row = _value(m, sub_component="Time", measure="weighted_achievement")
    assert time_row["n"] == 0 and time_row["value"] is None
    # model n: q2 right (Recall), q3 missing prediction counts as wrong
    n = prof.filter((pl.col("profile_of") == "n") & (pl.col("scope") == "all"))
    assert _value(n, sub_component="Object", measure="weighted_achievement")["value"] == pytest.approx(25.0)
    assert _value(n, component="OVERALL", measure="accuracy")["value"] == pytest.approx(100 / 3)
    assert set(prof["scope"]) == {"all", "split=test"}
    with pytest.raises(ProfileError, match="several rows"):
        model_profiles(pl.concat([scored, scored]), tags, stem)


def test_model_profiles_per_subject(small_case, stem):
    questions, tags, scored = small_case
    scored = scored.join(questions.select("question_id", "subject"), on="question_id")
    prof = model_profiles(scored, tags, stem)
    assert set(prof["scope"]) == {"all", "subject=math", "subject=science", "split=test"}
    m_math = prof.filter((pl.col("profile_of") == "m") & (pl.col("scope") == "subject=math"))
    # math: q1 (Reasoning 3, correct) and q3 (Grasping 2, wrong)
    overall = _value(m_math, component="OVERALL", measure="weighted_achievement")
    assert overall["value"] == pytest.approx(60.0) and overall["n"] == 2 and overall["total"] == 2
    assert _value(m_math, sub_component="Object", measure="accuracy")["value"] == pytest.approx(100.0)
    m_science = prof.filter((pl.col("profile_of") == "m") & (pl.col("scope") == "subject=science"))
    assert _value(m_science, component="OVERALL", measure="accuracy")["value"] == pytest.approx(0.0)
    n_science = prof.filter((pl.col("profile_of") == "n") & (pl.col("scope") == "subject=science"))
    assert _value(n_science, sub_component="Identity", measure="weighted_achievement")["value"] == pytest.approx(100.0)
    html = render_profiles_html(pl.concat([dataset_profile(questions, tags, stem), prof]))
    by_scope = re.search(r'<table class="cogme-models-by-scope">.*?</table>', html, flags=re.S).group(0)
    assert "<th>subject=math</th>" in by_scope and "<td>60.0 (n=2)</td>" in by_scope


def test_profile_stage_publishes_model_profiles_per_subject(small_case, stem, tmp_path, monkeypatch):
    from pipelines.profiles import stage as profiling
    from pipelines.store.home import DataHome
    from pipelines.store.lake import write_table

    questions, tags, scored = small_case
    home = DataHome(tmp_path / "home")
    write_table(tags, home.lake_path("question_tags"))
    write_table(questions, home.lake_path("questions"))
    # scored_frame joins the predictions with the question attributes, the subject among them
    monkeypatch.setattr(profiling, "scored_frame", lambda _: scored.join(questions.select("question_id", "subject"), on="question_id"))
    profiles, _ = profiling.profile_stage(home)
    model_scopes = set(profiles.filter(pl.col("profile_of") != "dataset")["scope"])
    assert model_scopes == {"all", "subject=math", "subject=science", "split=test"}


def test_dataset_profile_frequencies_per_scope(small_case, stem):
    questions, tags, _ = small_case
    prof = dataset_profile(questions, tags, stem)
    assert prof.columns == list(PROFILE_SCHEMA)
    assert set(prof["scope"]) == {"all", "subject=math", "subject=science", "split=test"}
    assert set(prof["measure"]) == {"frequency"} and set(prof["profile_of"]) == {"dataset"}
    obj = _value(prof, scope="all", sub_component="Object")
    assert obj["n"] == 2 and obj["total"] == 3 and obj["value"] == pytest.approx(200 / 3)
    assert _value(prof, scope="subject=math", sub_component="Object")["value"] == pytest.approx(50.0)
    assert _value(prof, scope="all", sub_component="Time")["n"] == 0  # manual tags win over automatic ones
    # every sub-component of the taxonomy is listed in every scope
    per_scope = len(stem.sub_components("TARGET")) + len(stem.sub_components("CONTENT")) + 3
    assert prof.height == 4 * per_scope
    assert preferred_tags(tags).filter(pl.col("question_id") == "q3")["source"].unique().to_list() == ["manual:m"]


def test_frequency_accuracy_relation(stem):
    # five questions; rare sub-components are answered wrongly by the model -> positive correlation
    rows, scored = [], []
    spec = [
        ("q1", ["Object"], ["Identity"], True),
        ("q2", ["Object"], ["Identity"], True),
        ("q3", ["Object"], ["Identity"], True),
        ("q4", ["Object", "Time"], ["Identity", "Causality"], False),
        ("q5", ["Shape/Figure"], ["Quantity"], False),
    ]
    for qid, target, content, correct in spec:
        rows += tag_rows(qid, "manual:x", target, content, "Recall", stem)
        scored.append({"model": "m", "question_id": qid, "split": "test", "correct": correct})
    tags = tags_frame(rows, stem)
    dp = dataset_profile(pl.DataFrame({"question_id": [s[0] for s in spec]}), tags, stem)
    mp = model_profiles(pl.DataFrame(scored), tags, stem)
    rel = frequency_accuracy_relation(dp, mp, low_frequency_threshold=30.0)
    acc = rel.filter(pl.col("measure") == "accuracy").row(0, named=True)
    assert acc["n_sub_components"] == 6  # Object, Time, Shape/Figure, Identity, Causality, Quantity
    assert acc["spearman"] > 0.5 and acc["pearson"] > 0.5
    assert acc["low_frequency_mean"] == pytest.approx(0.0) and acc["other_mean"] == pytest.approx(75.0)


# ---------------------------------------------------------------- report section


def test_html_fragment_escapes_and_draws_one_polygon_per_model(small_case, stem):
    questions, tags, scored = small_case
    scored = scored.with_columns(pl.col("model").replace({"n": "<script>alert(1)</script>"}))
    profiles = pl.concat([dataset_profile(questions, tags, stem), model_profiles(scored, tags, stem)])
    html = render_profiles_html(profiles)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    radars = re.findall(r'<svg class="cogme-radar".*?</svg>', html, flags=re.S)
    assert len(radars) == 3  # TARGET, CONTENT, THINKING
    for svg in radars:
        assert len(re.findall(r'<polygon class="cogme-model"', svg)) == 2
    assert 'class="cogme-bar"' in html and "cogme-models" in html and "cogme-relation" in html
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)  # self-contained
    assert render_profiles_html(profiles) == html  # deterministic
    # points are finite numbers inside the drawing (the SVG's view box)
    for svg in radars:
        left, top, width, height = map(float, re.search(r'viewBox="([^"]+)"', svg).group(1).split())
        for pts in re.findall(r'points="([^"]+)"', svg):
            for pair in pts.split():
                x, y = map(float, pair.split(","))
                assert math.isfinite(x) and math.isfinite(y) and left <= x <= left + width and top <= y <= top + height


def test_html_without_models_still_renders_the_dataset(small_case, stem):
    questions, tags, _ = small_case
    html = render_profiles_html(dataset_profile(questions, tags, stem))
    assert "No model has been evaluated yet." in html and 'class="cogme-bar"' in html
    assert "cogme-model" not in html.replace("cogme-models", "")


def test_rule_lexicons_cover_exactly_the_stem_taxonomy(stem):
    from pipelines.profiles.cogme import tagger

    assert tuple(tagger.TARGET_CUES) == stem.sub_components("TARGET")
    assert tuple(tagger.CONTENT_CUES) == stem.sub_components("CONTENT")


def test_demo_site_reference_tags_fit_the_stem_taxonomy_and_agreement_runs(stem):
    from pipelines.ingest.demo_site.generator import DemoSite, SiteConfig

    site = DemoSite(SiteConfig(seed=3, questions=300))
    rows, refs = [], []
    for i in site.indices():
        q = site.question(i)
        if q.text_only or q.role in ("exact", "near"):
            continue
        qid = f"{i:016x}"
        rows.append(
            question(
                question_id=qid, subject=q.subject, grade=q.grade, skill=q.skill, problem=q.problem_latex,
                pic_prob=q.problem_image is not None, pic_choice=q.choice_images is not None,
                num_choices=q.num_choices, choices=list(q.choices_latex) if q.choices_latex is not None else None,
            )
        )
        refs += tag_rows(qid, "reference:demo", list(q.cogme_target), list(q.cogme_content), q.cogme_thinking, stem)
    reference = tags_frame(refs, stem)  # raises if a template breaks a rule or names an unknown tag
    table = agreement(reference, tag_questions(questions_frame(rows), stem), stem)
    assert table["n_questions"].to_list() == [len(rows)] * 3
    assert table.filter(pl.col("component") == "TARGET")["kappa"].item() > 0.3
