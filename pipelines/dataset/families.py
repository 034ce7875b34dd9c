"""What a family is for the split: the one definition that the split deals and the leakage
check reads (``pipelines.dataset.split`` and ``pipelines.dataset.checks``), so the split
cannot produce a leak that the check finds.

A family is a connected set of questions joined by either of:

* dedup's family (``duplicate_group``, set by ``dedup.figure_families``: a near-equal figure,
  the same canonical stem and an agreeing answer);
* the same problem image (its hash) and the same canonical stem
  (``pipelines.clean.dedup.normalize.canonical_text`` of the text before LaTeX conversion,
  ``problem_original``, when the frame has it, else ``problem``), whatever the options and the
  answer: two questions asked of one figure with one stem teach each other's answer, so they
  never sit in two splits. Dedup keeps such questions apart when their answers differ (they are
  two questions, both kept), which is why the split cannot use ``duplicate_group`` alone.

The family's id is the smallest ``duplicate_group`` among its questions, so a family that is
one dedup family keeps dedup's id (and a split ledger written with those ids still reads).
Only images that more than one dedup family shows have their stems compared: the canonical
text is computed for those questions alone.
"""

from __future__ import annotations

import polars as pl

from pipelines.clean.dedup.normalize import canonical_text

FAMILY = "family"


def stem_column(questions: pl.DataFrame) -> str:
    """The text a family's stem is read from: before LaTeX conversion when the frame has it."""
    return "problem_original" if "problem_original" in questions.columns else "problem"


def _shared_figure_stems(questions: pl.DataFrame) -> pl.DataFrame:
    """(problem_image, stem, row) of the questions whose problem image more than one dedup
    family shows; the stem canonical."""
    if "problem_image" not in questions.columns or stem_column(questions) not in questions.columns:
        return pl.DataFrame(schema={"problem_image": pl.String, "stem": pl.String, "row": pl.UInt32})
    text = stem_column(questions)
    frame = questions.select("problem_image", "duplicate_group", pl.col(text).alias("_text")).with_row_index("row")
    frame = frame.filter(pl.col("problem_image").is_not_null())
    shared = frame.group_by("problem_image").agg(pl.col("duplicate_group").n_unique().alias("_groups"))
    frame = frame.join(shared.filter(pl.col("_groups") > 1).select("problem_image"), on="problem_image", how="semi")
    stems = {x: canonical_text(x) for x in frame["_text"].drop_nulls().unique().to_list()}
    return frame.select(
        pl.col("problem_image").cast(pl.String),
        pl.col("_text").replace_strict(stems, default="", return_dtype=pl.String).alias("stem"),
        "row",
    )


def split_families(questions: pl.DataFrame) -> pl.Series:
    """The family (see the module docstring) of every row of ``questions``, in row order, as a
    String series named ``family``. ``questions`` needs ``duplicate_group``; ``problem_image``
    and ``problem_original`` (or ``problem``) when figures join families."""
    groups = questions["duplicate_group"].cast(pl.String)
    pairs = _shared_figure_stems(questions)
    if pairs.height == 0:
        return groups.alias(FAMILY)
    pairs = pairs.with_columns(pl.Series("duplicate_group", groups.gather(pairs["row"])))
    joined = (
        pairs.group_by("problem_image", "stem")
        .agg(pl.col("duplicate_group").unique().sort())
        .filter(pl.col("duplicate_group").list.len() > 1)["duplicate_group"]
        .to_list()
    )
    if not joined:
        return groups.alias(FAMILY)
    parent: dict[str, str] = {}

    def find(group: str) -> str:
        root = group
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(group, group) != root:
            parent[group], group = root, parent[group]
        return root

    for members in joined:
        roots = sorted({find(g) for g in members})
        for other in roots[1:]:
            parent[other] = roots[0]  # the smallest id stays the root
    renamed = {g: find(g) for g in parent}
    return groups.replace(renamed).alias(FAMILY)


def with_families(questions: pl.DataFrame) -> pl.DataFrame:
    return questions.with_columns(split_families(questions))


def family_leaks(questions: pl.DataFrame) -> pl.DataFrame:
    """Families in more than one split (the split never makes one): ``family``, ``splits`` (how
    many), ``question_ids`` (sorted; the row index when there is no ``question_id``),
    ``duplicate_groups`` (how many dedup families it joins), sorted by family."""
    ids = pl.col("question_id") if "question_id" in questions.columns else pl.int_range(pl.len()).cast(pl.String)
    return (
        with_families(questions)
        .with_columns(ids.alias("_id"))
        .group_by(FAMILY)
        .agg(
            pl.col("split").n_unique().alias("splits"),
            pl.col("_id").sort().alias("question_ids"),
            pl.col("duplicate_group").n_unique().alias("duplicate_groups"),
        )
        .filter(pl.col("splits") > 1)
        .sort(FAMILY)
    )
