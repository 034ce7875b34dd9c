"""Row-level reuse (pipelines/store/row_reuse.py): what is reused, what is computed, and when
reuse is refused."""

from __future__ import annotations

import polars as pl
import pytest

from pipelines.store import row_reuse
from pipelines.store.home import DataHome
from pipelines.store.lake import write_table
from pipelines.store.row_reuse import RowReuse, canonical, in_order_of, row_digests

SCHEMA = {"question_id": pl.String, "problem": pl.String, "choices": pl.List(pl.String), "skill": pl.String}


def frame(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


BASE = frame([
    ("q1", "What is 2+2?", ["3", "4"], "add"),
    ("q2", "Name the shape.", None, "shapes"),
    ("q3", "", [], "add"),
    ("q4", "Which is larger?", ["a", "b"], "compare"),
])


def doubled(problem):
    return problem + problem


def stage_run(home: DataHome, questions: pl.DataFrame, *, settings=None, code=doubled) -> dict:
    """A tiny stage: output = question_id + problem doubled, reusing rows."""
    out_path = home.lake_path("doubled")
    reuse = RowReuse(home, "doubled", key="question_id", columns=["problem", "choices"], outputs=[out_path],
                     settings=settings, code=code)
    plan = reuse.plan(questions)
    computed = plan.todo.select("question_id", doubled(pl.col("problem")))
    parts = [computed]
    if plan.reused.height:
        parts.insert(0, plan.previous(pl.read_parquet(out_path)))
    write_table(canonical(pl.concat(parts), "question_id"), out_path)
    reuse.save(plan)
    return {**plan.figures(), "computed_ids": sorted(plan.todo["question_id"].to_list())}


@pytest.fixture
def home(tmp_path) -> DataHome:
    home = DataHome(tmp_path / "home")
    home.lake.mkdir(parents=True)
    return home


def output(home: DataHome) -> bytes:
    return home.lake_path("doubled").read_bytes()


def fresh_output(tmp_path, questions: pl.DataFrame, **kwargs) -> bytes:
    other = DataHome(tmp_path / "fresh")
    other.lake.mkdir(parents=True, exist_ok=True)
    row_reuse.state_dir(other).joinpath("doubled.json").unlink(missing_ok=True)
    stage_run(other, questions, **kwargs)
    return output(other)


def test_first_run_computes_everything_then_everything_is_reused(home):
    first = stage_run(home, BASE)
    assert first["rows_reused"] == 0 and first["rows_computed"] == 4 and first["reuse_refused"] == "no previous run"
    second = stage_run(home, BASE)
    assert second == {"rows_reused": 4, "rows_computed": 0, "computed_ids": []}


def test_only_new_and_changed_rows_are_computed_and_deleted_rows_dropped(home, tmp_path):
    stage_run(home, BASE)
    changed = pl.concat([
        BASE.filter(pl.col("question_id") != "q2").with_columns(
            pl.when(pl.col("question_id") == "q1").then(pl.lit("What is 2+3?")).otherwise(pl.col("problem")).alias("problem"),
            # q4: an option edited (a column the stage reads, not the one it transforms)
            pl.when(pl.col("question_id") == "q4").then(pl.lit(["a", "c"])).otherwise(pl.col("choices")).alias("choices"),
        ),
        frame([("q0", "New one", ["x"], "add")]),
    ])
    figures = stage_run(home, changed)
    assert figures["computed_ids"] == ["q0", "q1", "q4"]
    assert figures["rows_reused"] == 1  # q3; q2 is gone
    result = pl.read_parquet(home.lake_path("doubled"))
    assert result["question_id"].to_list() == ["q0", "q1", "q3", "q4"]
    assert output(home) == fresh_output(tmp_path, changed)


def test_a_column_the_stage_does_not_read_changes_nothing(home):
    stage_run(home, BASE)
    figures = stage_run(home, BASE.with_columns(pl.lit("other").alias("skill")))
    assert figures["rows_computed"] == 0


def test_null_and_empty_values_are_different_content(home):
    stage_run(home, BASE)
    figures = stage_run(home, BASE.with_columns(
        pl.when(pl.col("question_id") == "q3").then(None).otherwise(pl.col("choices")).alias("choices")))
    assert figures["computed_ids"] == ["q3"]


def test_settings_change_refuses_reuse(home, tmp_path):
    stage_run(home, BASE, settings={"seed": 0})
    figures = stage_run(home, BASE, settings={"seed": 1})
    assert figures["rows_reused"] == 0 and figures["rows_computed"] == 4
    assert figures["reuse_refused"] == "settings, code or input columns changed"
    assert output(home) == fresh_output(tmp_path, BASE, settings={"seed": 1})


def test_code_change_refuses_reuse(home, monkeypatch):
    stage_run(home, BASE)
    original = row_reuse.code_digest_of
    monkeypatch.setattr(row_reuse, "code_digest_of", lambda fn: "edited " + original(fn))
    figures = stage_run(home, BASE)
    assert figures["rows_reused"] == 0 and figures["reuse_refused"] == "settings, code or input columns changed"


def test_dtype_change_refuses_reuse(home):
    stage_run(home, BASE)
    figures = stage_run(home, BASE.with_columns(pl.col("question_id").cast(pl.Categorical)))
    assert figures["rows_reused"] == 0


def test_an_output_changed_behind_its_back_refuses_reuse(home):
    stage_run(home, BASE)
    write_table(pl.DataFrame({"question_id": ["q1"], "problem": ["tampered"]}), home.lake_path("doubled"))
    figures = stage_run(home, BASE)
    assert figures["rows_reused"] == 0 and figures["reuse_refused"].startswith("previous output changed or missing")
    assert "tampered" not in pl.read_parquet(home.lake_path("doubled"))["problem"].to_list()


def test_missing_row_state_refuses_reuse(home):
    stage_run(home, BASE)
    row_reuse.state_dir(home).joinpath("doubled.parquet").unlink()
    assert stage_run(home, BASE)["reuse_refused"] == "row state changed or missing"


def test_switch_turns_reuse_off(home, monkeypatch):
    stage_run(home, BASE)
    monkeypatch.setenv("STEMFORGE_ROW_REUSE", "0")
    assert stage_run(home, BASE)["reuse_refused"] == "STEMFORGE_ROW_REUSE is off"


def test_recompute_moves_affected_keys_to_the_work(home):
    stage_run(home, BASE)
    reuse = RowReuse(home, "doubled", key="question_id", columns=["problem", "choices"],
                     outputs=[home.lake_path("doubled")], code=doubled)
    plan = reuse.plan(BASE)
    assert plan.todo.height == 0
    plan.recompute(pl.DataFrame({"question_id": ["q2", "q9"]}))
    assert plan.todo["question_id"].to_list() == ["q2"]
    assert sorted(plan.reused["question_id"].to_list()) == ["q1", "q3", "q4"]
    # the previous output's rows of the keys still reused, each with its own values
    previous = plan.previous(pl.read_parquet(home.lake_path("doubled")))
    assert previous.sort("question_id").rows() == [("q1", "What is 2+2?" * 2), ("q3", ""), ("q4", "Which is larger?" * 2)]


def test_an_output_in_another_order_than_the_input_is_reused_by_key(home, tmp_path):
    """The input in reverse key order: the output (sorted) is not in the state's order, so its
    reused rows are found by key, not by row number."""
    stage_run(home, BASE.reverse())
    changed = BASE.reverse().with_columns(
        pl.when(pl.col("question_id") == "q3").then(pl.lit("Now what?")).otherwise(pl.col("problem")).alias("problem"))
    figures = stage_run(home, changed)
    assert figures["computed_ids"] == ["q3"] and figures["rows_reused"] == 3
    assert output(home) == fresh_output(tmp_path, changed)


def test_two_keys_with_the_same_content_are_each_reused_with_their_own_output(home, tmp_path):
    same = frame([("q1", "Same", ["a"], "x"), ("q2", "Same", ["a"], "x"), ("q3", "Other", None, "x")])
    stage_run(home, same)
    changed = same.filter(pl.col("question_id") != "q1")
    figures = stage_run(home, changed)
    assert figures["rows_reused"] == 2 and figures["rows_computed"] == 0
    assert pl.read_parquet(home.lake_path("doubled"))["question_id"].to_list() == ["q2", "q3"]
    assert output(home) == fresh_output(tmp_path, changed)


def test_rows_of_an_output_with_several_rows_per_key_are_the_same_found_either_way(home):
    """``previous_of_earlier_keys`` (a join on the keys not reused) gives what ``previous`` (a join
    on the reused ones) gives for an output whose keys all came from the previous input."""
    stage_run(home, BASE)
    tags = pl.DataFrame({"question_id": ["q1", "q1", "q2", "q3", "q4", "q4"], "tag": list("abcdef")})
    changed = BASE.filter(pl.col("question_id") != "q2").with_columns(
        pl.when(pl.col("question_id") == "q4").then(pl.lit("Edited")).otherwise(pl.col("problem")).alias("problem"))
    reuse = RowReuse(home, "doubled", key="question_id", columns=["problem", "choices"],
                     outputs=[home.lake_path("doubled")], code=doubled)
    plan = reuse.plan(changed)
    assert plan.previous_of_earlier_keys(tags).equals(plan.previous(tags))
    assert plan.previous_of_earlier_keys(tags)["tag"].to_list() == ["a", "b", "d"]
    plan.recompute(pl.DataFrame({"question_id": ["q1"]}))
    assert plan.previous_of_earlier_keys(tags)["tag"].to_list() == ["d"] == plan.previous(tags)["tag"].to_list()


def test_results_are_put_in_the_input_order_whether_or_not_they_cover_every_key():
    frame = pl.DataFrame({"question_id": ["q1", "q2", "q3"], "x": [1, 2, 3]})
    rows = pl.DataFrame({"question_id": ["q3", "q1", "q2"], "y": ["c", "a", "b"]})
    assert in_order_of(frame, rows, "question_id").equals(pl.DataFrame({"question_id": ["q1", "q2", "q3"], "y": ["a", "b", "c"]}))
    unsorted = frame.reverse()
    assert in_order_of(unsorted, rows, "question_id")["y"].to_list() == ["c", "b", "a"]
    partial = in_order_of(frame, rows.filter(pl.col("question_id") != "q2"), "question_id")
    assert partial["y"].to_list() == ["a", None, "c"]


def test_digests_are_per_content_and_canonical_layout_gives_the_same_bytes(tmp_path):
    a = row_digests(BASE, ["question_id"], ["problem", "choices"])
    b = row_digests(BASE.reverse(), ["question_id"], ["problem", "choices"]).reverse()
    assert a.equals(b)
    assert a.select("digest_a", "digest_b").n_unique() == BASE.height
    pieces = pl.concat([BASE.slice(2), BASE.slice(0, 2)], rechunk=False)
    write_table(canonical(pieces, "question_id"), tmp_path / "a.parquet")
    write_table(canonical(BASE, "question_id"), tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
