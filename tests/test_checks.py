"""The data-quality checks pass on good lake files and fail on bad ones."""

import polars as pl

from pipelines import checks
from pipelines.home import DataHome
from pipelines.lake import write_table
from pipelines.settings import BuildSettings


def settings_for(tmp_path) -> BuildSettings:
    return BuildSettings(home=str(tmp_path))


def questions(answer_idx=(0, 1), choices=(["a", "b"], ["c", "d"]), images=("h1", "h2"), qids=("q1", "q2"), splits=("train", "test"), groups=None):
    return pl.DataFrame(
        {
            "question_id": list(qids),
            "problem": ["What is \\( 3 \\times 4 \\)?", "Pick one."],
            "problem_image": list(images),
            "choices": [list(c) for c in choices],
            "choice_images": [None, None],
            "answer_idx": list(answer_idx),
            "split": list(splits),
            "duplicate_group": list(groups or qids),
        },
        schema_overrides={"choice_images": pl.List(pl.String), "problem_image": pl.String},
    )


def test_identity_and_validity_checks(tmp_path):
    home, settings = DataHome(tmp_path), settings_for(tmp_path)
    write_table(questions(), home.lake_path("deduplicated"))
    assert checks.no_identity_twice(home, settings).passed
    assert checks.kept_questions_are_valid(home, settings).passed
    write_table(questions(qids=("q1", "q1"), answer_idx=(0, 5), images=(None, "h2")), home.lake_path("deduplicated"))
    assert not checks.no_identity_twice(home, settings).passed
    outcome = checks.kept_questions_are_valid(home, settings)
    assert not outcome.passed and outcome.metadata["no_image"] == 1 and outcome.metadata["answer_out_of_range"] == 1


def test_latex_and_answer_content_checks(tmp_path):
    home, settings = DataHome(tmp_path), settings_for(tmp_path)
    write_table(questions(), home.lake_path("latex"))
    write_table(questions(choices=(["b", "a"], ["c", "d"]), answer_idx=(1, 1)), home.lake_path("shuffled"))
    assert checks.latex_is_valid(home, settings).passed
    assert checks.answer_content_unchanged(home, settings).passed
    write_table(questions(choices=(["b", "a"], ["c", "d"]), answer_idx=(0, 1)), home.lake_path("shuffled"))
    assert not checks.answer_content_unchanged(home, settings).passed
    broken = questions().with_columns(pl.Series("problem", ["\\( \\frac{1}{ \\)", "ok"]))
    write_table(broken, home.lake_path("latex"))
    assert not checks.latex_is_valid(home, settings).passed


def test_split_checks(tmp_path):
    home, settings = DataHome(tmp_path), settings_for(tmp_path)
    write_table(questions(groups=("g", "h")), home.lake_path("questions"))
    assert checks.no_split_leakage(home, settings).passed
    write_table(questions(groups=("g", "g")), home.lake_path("questions"))
    assert not checks.no_split_leakage(home, settings).passed


def test_run_check_is_memoized_on_its_inputs(tmp_path):
    home, settings = DataHome(tmp_path), settings_for(tmp_path)
    write_table(questions(), home.lake_path("deduplicated"))
    assert checks.run_check("no_identity_twice", settings).passed
    record = next((home.lake / "state" / "fingerprints").glob("check-no_identity_twice*"))
    stamp = record.stat().st_mtime_ns
    assert checks.run_check("no_identity_twice", settings).passed
    assert record.stat().st_mtime_ns == stamp  # not recomputed
    write_table(questions(qids=("q1", "q1")), home.lake_path("deduplicated"))
    assert not checks.run_check("no_identity_twice", settings).passed
