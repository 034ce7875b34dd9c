"""Shuffling, splitting and the per-skill cap: determinism, stability and the small-skill policy."""

import hashlib

import polars as pl
import pytest

from pipelines.clean.filtering import TEXT_ONLY_REASON, cap_per_skill, keep_multimodal
from pipelines.dataset.shuffle import (
    answer_position_uniformity,
    choices_table,
    option_permutation,
    shuffle_options,
)
from pipelines.dataset.split import SplitConfig, assign_splits, leakage, quotas


def qid(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()[:16]


def questions_frame(n: int, k: int = 4) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "question_id": [qid(i) for i in range(n)],
            "choices": [[f"option {j} of {i}" for j in range(k)] for i in range(n)],
            "choice_images": [None] * n,
            "answer_idx": [i % k for i in range(n)],
        },
        schema_overrides={"choice_images": pl.List(pl.String)},
    )


def test_permutation_is_deterministic_and_a_permutation():
    for k in range(2, 6):
        p = option_permutation("abc", k, seed=7)
        assert sorted(p) == list(range(k))
        assert p == option_permutation("abc", k, seed=7)
    assert any(option_permutation(qid(i), 5, 0) != option_permutation(qid(i), 5, 1) for i in range(10))


def test_shuffle_keeps_the_answer_content_and_records_the_permutation():
    frame = questions_frame(200)
    shuffled = shuffle_options(frame, seed=3)
    for before, after in zip(frame.iter_rows(named=True), shuffled.iter_rows(named=True)):
        assert after["choices"][after["answer_idx"]] == before["choices"][before["answer_idx"]]
        assert [before["choices"][p] for p in after["permutation"]] == after["choices"]
    table = choices_table(shuffled)
    assert table.height == 800
    first = table.filter(pl.col("question_id") == qid(0)).sort("position")
    assert first["position"].to_list() == [0, 1, 2, 3]
    assert first["text"].to_list() == shuffled.row(0, named=True)["choices"]


def test_batched_permutations_are_the_per_question_ones_for_every_option_count():
    counts = [2, 7, 3, 12, 5, 2, 10, 4, 6, 12, 3]  # past 5 options the digest's 32 bytes run out
    frame = pl.DataFrame(
        {"question_id": [qid(i) for i in range(len(counts))] + ["bare"],
         "choices": [[f"o{j}" for j in range(k)] for k in counts] + [None],
         "choice_images": [None] * (len(counts) + 1),
         "answer_idx": [k - 1 for k in counts] + [-1]},
        schema_overrides={"choices": pl.List(pl.String), "choice_images": pl.List(pl.String)},
    )
    out = shuffle_options(frame, seed=11)
    for row, k in zip(out.iter_rows(named=True), counts):
        assert row["permutation"] == option_permutation(row["question_id"], k, 11)
        assert row["choices"][row["answer_idx"]] == f"o{k - 1}"
    assert out.row(len(counts), named=True)["permutation"] == []  # no options: nothing to permute
    assert out.schema["permutation"] == pl.List(pl.Int64)


def test_unknown_answer_stays_unknown_and_image_options_shuffle():
    frame = pl.DataFrame(
        {"question_id": ["q1"], "choices": [None], "choice_images": [["h0", "h1", "h2"]], "answer_idx": [-1]},
        schema_overrides={"choices": pl.List(pl.String)},
    )
    out = shuffle_options(frame, 0)
    assert out["answer_idx"].to_list() == [-1]
    assert sorted(out["choice_images"][0]) == ["h0", "h1", "h2"]
    assert choices_table(out)["text"].null_count() == 3


def test_answer_positions_are_uniform_after_shuffling_a_biased_source():
    frame = questions_frame(3000, k=3).with_columns(pl.lit(0, dtype=pl.Int64).alias("answer_idx"))
    results = answer_position_uniformity(shuffle_options(frame, seed=0))
    assert [r.num_options for r in results] == [3]
    assert results[0].p_value > 0.001
    biased = answer_position_uniformity(frame.with_columns(pl.lit(None).alias("_")))
    assert biased[0].p_value < 1e-10


@pytest.mark.parametrize(
    "n,expected",
    [(1, [1, 0, 0]), (2, [1, 1, 0]), (3, [2, 1, 0]), (4, [2, 1, 1]), (5, [3, 1, 1]), (10, [6, 2, 2]), (7, [4, 2, 1])],
)
def test_quotas_small_skill_policy(n, expected):
    assert quotas(n, (0.6, 0.2, 0.2)) == expected


def split_input(groups: list[str], skill: str = "s") -> pl.DataFrame:
    return pl.DataFrame({"duplicate_group": groups, "subject": ["math"] * len(groups), "skill": [skill] * len(groups)})


def test_small_skills_draw_splits_that_hold_in_aggregate():
    frame = pl.concat([split_input([f"s{i}-{j}" for j in range(i % 4 + 1)], f"skill{i}") for i in range(1000)])
    out, _ = assign_splits(frame, None)
    shares = {s: n / out.height for s, n in out.group_by("split").len().iter_rows()}
    assert abs(shares["train"] - 0.6) < 0.03 and abs(shares["valid"] - 0.2) < 0.03 and abs(shares["test"] - 0.2) < 0.03


def test_split_proportions_per_skill_are_exact():
    frame = pl.concat([split_input([f"a{i}" for i in range(100)], "a"), split_input([f"b{i}" for i in range(10)], "b")])
    out, ledger = assign_splits(frame, None, SplitConfig(seed=1))
    counts = out.group_by("skill", "split").len().sort("skill", "split")
    got = {(s, sp): n for s, sp, n in counts.iter_rows()}
    assert got == {("a", "test"): 20, ("a", "train"): 60, ("a", "valid"): 20, ("b", "test"): 2, ("b", "train"): 6, ("b", "valid"): 2}
    assert ledger.height == 110


def test_adding_questions_never_moves_an_existing_one():
    first = split_input([f"g{i}" for i in range(50)])
    out1, ledger1 = assign_splits(first, None)
    grown = pl.concat([first, split_input([f"new{i}" for i in range(30)])])
    out2, ledger2 = assign_splits(grown, ledger1)
    before = dict(zip(out1["duplicate_group"], out1["split"]))
    after = dict(zip(out2["duplicate_group"], out2["split"]))
    assert all(after[g] == s for g, s in before.items())
    counts = out2.group_by("split").len()
    assert dict(zip(counts["split"], counts["len"])) == {"train": 48, "valid": 16, "test": 16}
    # the ledger remembers groups that disappear, so they come back to the same split
    out3, _ = assign_splits(first.head(10), ledger2)
    assert all(after[g] == s for g, s in zip(out3["duplicate_group"], out3["split"]))


def test_same_group_never_straddles_splits_and_seed_changes_assignment():
    frame = pl.DataFrame(
        {"duplicate_group": [f"g{i // 3}" for i in range(300)], "subject": ["science"] * 300, "skill": ["s"] * 300}
    )
    out, _ = assign_splits(frame, None, SplitConfig(seed=0))
    assert leakage(out).height == 0
    other, _ = assign_splits(frame, None, SplitConfig(seed=1))
    assert out["split"].to_list() != other["split"].to_list()
    again, _ = assign_splits(frame, None, SplitConfig(seed=0))
    assert out["split"].to_list() == again["split"].to_list()


def test_source_split_is_respected():
    frame = split_input(["x", "y", "z"]).with_columns(pl.Series("source_split", ["test", "test", None]))
    out, _ = assign_splits(frame, None)
    assert out.filter(pl.col("duplicate_group").is_in(["x", "y"]))["split"].to_list() == ["test", "test"]


def test_bad_ratios_are_refused():
    with pytest.raises(ValueError, match="split ratios"):
        assign_splits(split_input(["a"]), None, SplitConfig(train=-1))


def raw(n_text_only: int, n_images: int) -> pl.DataFrame:
    rows = []
    for i in range(n_text_only + n_images):
        has = i >= n_text_only
        rows.append(
            {"source": "s", "source_key": f"k{i}", "problem_image": "h" if has else None, "choice_images": None,
             "subject": "math", "skill": "x", "question_id": qid(i)}
        )
    return pl.DataFrame(rows, schema_overrides={"choice_images": pl.List(pl.String), "problem_image": pl.String})


def test_text_only_questions_are_quarantined_with_reason():
    kept, dropped = keep_multimodal(raw(3, 5))
    assert kept.height == 5 and dropped.height == 3
    assert set(dropped["reason"]) == {TEXT_ONLY_REASON}
    assert set(dropped["stage"]) == {"filter"}


def test_cap_keeps_a_deterministic_subset_and_quarantines_the_rest():
    frame = raw(0, 30)
    kept, over = cap_per_skill(frame, cap=10, seed=0)
    assert kept.height == 10 and over.height == 20
    kept_again, _ = cap_per_skill(frame.reverse(), cap=10, seed=0)
    assert sorted(kept["question_id"]) == sorted(kept_again["question_id"])
    assert over["reason"][0] == "skill over the cap of 10 questions"
    with pytest.raises(ValueError):
        cap_per_skill(frame, cap=0)


@pytest.mark.parametrize("dof", [1, 2, 3, 4, 5, 7])
@pytest.mark.parametrize("statistic", [0.0, 0.3, 1.0, 2.5, 7.8, 15.0, 40.0])
def test_chi_square_tail_matches_scipy(dof, statistic):
    from scipy.stats import chi2

    from pipelines.dataset.shuffle import chi_square_sf

    assert chi_square_sf(statistic, dof) == pytest.approx(chi2.sf(statistic, dof), rel=1e-9, abs=1e-15)


# ---- families, per-subject quotas, the ledger ---------------------------------------------------

def family_frame(spec: list[tuple[str, str, int]], prefix: str = "q") -> pl.DataFrame:
    """Rows for families given as (subject, skill, size): question ids q0000..., the family id is
    its smallest question id."""
    rows, n = [], 0
    for subject, skill, size in spec:
        first = f"{prefix}{n:04d}"
        for _ in range(size):
            rows.append({"question_id": f"{prefix}{n:04d}", "duplicate_group": first, "subject": subject, "skill": skill})
            n += 1
    return pl.DataFrame(rows)


def test_every_subject_meets_its_quotas_and_skills_stay_spread():
    from pipelines.dataset.split import proportions_by_subject

    spec = [("technology", f"tech-{i}", 1) for i in range(9) for _ in range(2 + (i < 5))]  # 23 questions
    spec += [("math", f"math-{i}", 1) for i in range(40) for _ in range(3 + i % 9)]
    spec += [("science", f"sci-{i}", 1) for i in range(7) for _ in range(1 + i % 2)]
    frame = family_frame(spec)
    assert frame.filter(pl.col("subject") == "technology").height == 23
    out, _ = assign_splits(frame, None, SplitConfig(seed=3))
    report = {r["subject"]: r for r in proportions_by_subject(out, (0.6, 0.2, 0.2))}
    assert all(r["ok"] for r in report.values())
    assert report["technology"]["counts"] == report["technology"]["targets"] == {"train": 14, "valid": 5, "test": 4}
    for subject, r in report.items():
        assert r["counts"] == r["targets"], subject  # single-question families: exact
    per_skill = out.group_by("skill").agg(pl.len().alias("n"), pl.col("split").n_unique().alias("splits"))
    assert per_skill.filter(pl.col("n") >= 5)["splits"].min() == 3  # every larger skill in every split
    shares = out.filter(pl.col("subject") == "math").group_by("skill", "split").len().pivot(
        on="split", index="skill", values="len").fill_null(0)
    n = shares["train"] + shares["valid"] + shares["test"]
    assert ((shares["train"] - 0.6 * n).abs() <= 1.0).all()  # each skill within one of its share


def test_families_never_straddle_and_subjects_stay_within_one_family():
    from pipelines.dataset.split import proportions_by_subject

    spec = [("math", f"skill-{i % 12}", 1 + (i * 7) % 4) for i in range(150)]
    frame = family_frame(spec)
    out, _ = assign_splits(frame, None)
    assert leakage(out).height == 0
    [math] = proportions_by_subject(out, (0.6, 0.2, 0.2))
    assert math["ok"] and math["allowed"] == 4


def test_a_growing_family_keeps_its_members_splits():
    first = family_frame([("math", "s", 1)] * 30)
    out1, ledger1 = assign_splits(first, None)
    assert set(ledger1.columns) == {"question_id", "duplicate_group", "split"} and ledger1.height == 30
    # a new question joins q0007's family and has a smaller id: the family id changes
    grown = pl.concat([
        first.with_columns(pl.when(pl.col("question_id") == "q0007").then(pl.lit("a0000"))
                           .otherwise(pl.col("duplicate_group")).alias("duplicate_group")),
        pl.DataFrame({"question_id": ["a0000"], "duplicate_group": ["a0000"], "subject": ["math"], "skill": ["s"]}),
    ])
    out2, ledger2 = assign_splits(grown, ledger1)
    before = dict(zip(out1["question_id"], out1["split"]))
    after = dict(zip(out2["question_id"], out2["split"]))
    assert all(after[q] == s for q, s in before.items())
    assert after["a0000"] == before["q0007"] and ledger2.height == 31


def test_a_family_that_joins_ledgered_splits_takes_the_majority_deterministically():
    ledger = pl.DataFrame({"question_id": ["q1", "q2", "q3", "q4", "q5"], "duplicate_group": ["q1", "q2", "q3", "q4", "q5"],
                           "split": ["train", "test", "test", "valid", "train"]})
    frame = pl.DataFrame({"question_id": ["q1", "q2", "q3", "q4", "q5"], "duplicate_group": ["q1", "q1", "q1", "q4", "q4"],
                          "subject": ["math"] * 5, "skill": ["s"] * 5})
    out, new_ledger = assign_splits(frame, ledger)
    got = dict(zip(out["question_id"], out["split"]))
    assert got["q1"] == got["q2"] == got["q3"] == "test"  # two of three ledgered members
    assert got["q4"] == got["q5"] == "valid"  # a tie: the split of the smallest ledgered question id
    assert dict(zip(new_ledger["question_id"], new_ledger["split"])) == got


def test_an_older_ledger_without_question_ids_is_read_as_one_question_per_group():
    old = pl.DataFrame({"duplicate_group": ["q0000", "q0001"], "split": ["test", "valid"]})
    out, ledger = assign_splits(family_frame([("math", "s", 1)] * 5), old)
    got = dict(zip(out["question_id"], out["split"]))
    assert got["q0000"] == "test" and got["q0001"] == "valid"
    assert ledger.columns == ["question_id", "duplicate_group", "split"]


def test_a_family_joins_dedup_families_by_figure_and_stem_whatever_the_notation():
    from pipelines.dataset.families import split_families

    frame = pl.DataFrame({
        "question_id": ["a", "b", "c", "d", "e"], "duplicate_group": ["a", "b", "c", "d", "e"],
        "problem_image": ["img1", "img1", "img1", None, "img2"],
        "problem_original": ["What is  \\( 3+4 \\)?", "what is $3 + 4$", "What is 3 + 5?", "What is 3 + 4?", "What is 3 + 4?"],
        "split": ["train", "test", "valid", "test", "test"],
    })
    assert split_families(frame).to_list() == ["a", "a", "c", "d", "e"]
    leaks = leakage(frame)
    assert leaks.height == 1 and leaks["question_ids"].to_list() == [["a", "b"]] and leaks["duplicate_groups"].to_list() == [2]
    # figure and stem join dedup families transitively; the family's id is the smallest group
    chained = pl.DataFrame({
        "duplicate_group": ["g3", "g3", "g2", "g1"], "problem_image": ["i1", "i2", "i2", "i1"],
        "problem_original": ["Which?", "Where?", "where ?", "which?"],
    })
    assert split_families(chained).to_list() == ["g1", "g1", "g1", "g1"]


def test_the_split_keeps_a_figure_and_stem_together_whatever_dedup_says():
    """Two questions of one figure and one stem with other options (dedup keeps both, two
    families) are one split family: the split deals them together and no leak is left."""
    n = 60
    frame = pl.DataFrame({
        "question_id": [f"q{i:03d}" for i in range(n)], "duplicate_group": [f"q{i:03d}" for i in range(n)],
        "problem_image": [f"img{i % 20}" for i in range(n)],  # every figure asked three times
        "problem_original": ["Which force acts on the block?"] * n, "subject": ["science"] * n, "skill": ["s"] * n,
    })
    out, ledger = assign_splits(frame, None)
    assert leakage(out).height == 0
    assert out.group_by("problem_image").agg(pl.col("split").n_unique().alias("k"))["k"].max() == 1
    assert set(ledger["duplicate_group"]) == set(frame["duplicate_group"])  # the ledger keeps dedup's ids
    # a ledger that had put them apart (an earlier build): the family takes one split, the others move
    apart = ledger.with_columns(pl.when(pl.col("question_id") == "q020").then(pl.lit("test" if out["split"][0] != "test"
                                else "train")).otherwise(pl.col("split")).alias("split"))
    again, _ = assign_splits(frame, apart)
    assert leakage(again).height == 0
