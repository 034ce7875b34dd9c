"""The ``question_tags`` frame and the paper's tagging rules, enforced in one place.

One row per (question, source, tag): ``question_id``, ``component``, ``sub_component``,
``source`` ('auto:rules-v1' or 'manual:<file>') and ``weight`` (the THINKING weight of the
question, the same on every row of the question: a Reasoning question counts 3 on each tag).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import polars as pl

from pipelines.profiles.cogme.taxonomy import COMPONENTS, Taxonomy

TAG_SCHEMA = {
    "question_id": pl.String,
    "component": pl.String,
    "sub_component": pl.String,
    "source": pl.String,
    "weight": pl.Int64,
}


class TagRuleError(ValueError):
    """Tags break a CogME rule or name an unknown sub-component (one-line message)."""


def empty_tags() -> pl.DataFrame:
    return pl.DataFrame(schema=TAG_SCHEMA)


def tag_rows(
    question_id: str,
    source: str,
    target: Sequence[str],
    content: Sequence[str],
    thinking: str,
    taxonomy: Taxonomy,
) -> list[dict]:
    """The rows of one question's tags (not validated: pass the frame to ``validate_tags``)."""
    weight = taxonomy.thinking_weights.get(thinking, 0)
    rows = []
    for component, subs in (("TARGET", target), ("CONTENT", content), ("THINKING", [thinking])):
        for sub in subs:
            rows.append(
                {
                    "question_id": question_id,
                    "component": component,
                    "sub_component": sub,
                    "source": source,
                    "weight": weight,
                }
            )
    return rows


def tags_frame(rows: Iterable[Mapping], taxonomy: Taxonomy) -> pl.DataFrame:
    rows = list(rows)
    frame = pl.DataFrame(rows, schema=TAG_SCHEMA) if rows else empty_tags()
    return validate_tags(frame, taxonomy)


def validate_tags(tags: pl.DataFrame, taxonomy: Taxonomy) -> pl.DataFrame:
    """Check the paper's rules and return the tags in canonical order.

    Per (question_id, source): at most ``limits['TARGET']`` (3) TARGET and ``limits['CONTENT']``
    (3) CONTENT tags, at least one of each, exactly one THINKING tag, no duplicate tag, and every
    row's weight equal to the taxonomy weight of that THINKING level. Raises ``TagRuleError``
    naming the first offending question.
    """
    missing = [c for c in TAG_SCHEMA if c not in tags.columns]
    if missing:
        raise TagRuleError(f"question_tags lacks column(s) {', '.join(missing)}")
    tags = tags.select([pl.col(c).cast(t) for c, t in TAG_SCHEMA.items()])
    for column in ("question_id", "component", "sub_component", "source"):
        if tags[column].null_count():
            raise TagRuleError(f"question_tags has null {column}")

    known = {(comp, sub) for comp in COMPONENTS for sub in taxonomy.sub_components(comp)}
    for row in tags.select("question_id", "component", "sub_component").unique(maintain_order=True).iter_rows():
        qid, comp, sub = row
        if comp not in COMPONENTS:
            raise TagRuleError(f"question {qid}: unknown component {comp!r}")
        if (comp, sub) not in known:
            raise TagRuleError(f"question {qid}: {sub!r} is not a {comp} sub-component of taxonomy {taxonomy.name!r}")

    duplicated = tags.filter(tags.select("question_id", "source", "component", "sub_component").is_duplicated())
    if duplicated.height:
        qid, comp, sub = duplicated.row(0)[:3]
        raise TagRuleError(f"question {qid}: {comp} {sub!r} tagged twice")

    counts = tags.group_by("question_id", "source").agg(
        [(pl.col("component") == comp).sum().alias(comp) for comp in COMPONENTS]
        + [
            pl.col("sub_component").filter(pl.col("component") == "THINKING").first().alias("thinking"),
            pl.col("weight").n_unique().alias("n_weights"),
            pl.col("weight").first().alias("first_weight"),
        ]
    ).sort("question_id", "source")
    for rec in counts.iter_rows(named=True):
        qid = rec["question_id"]
        for comp in ("TARGET", "CONTENT"):
            if rec[comp] > taxonomy.limits[comp]:
                raise TagRuleError(
                    f"question {qid}: {rec[comp]} {comp} tags, at most {taxonomy.limits[comp]} allowed"
                )
            if rec[comp] == 0:
                raise TagRuleError(f"question {qid}: no {comp} tag")
        if rec["THINKING"] != 1:
            raise TagRuleError(
                f"question {qid}: {rec['THINKING']} THINKING tags, exactly one (the highest level) required"
            )
        expected = taxonomy.weight(rec["thinking"])
        if rec["n_weights"] != 1 or rec["first_weight"] != expected:
            raise TagRuleError(f"question {qid}: weight must be {expected} (THINKING {rec['thinking']}) on every tag")

    return sort_tags(tags, taxonomy)


def sort_tags(tags: pl.DataFrame, taxonomy: Taxonomy) -> pl.DataFrame:
    order = {
        (comp, sub): i * 100 + j
        for i, comp in enumerate(COMPONENTS)
        for j, sub in enumerate(taxonomy.sub_components(comp))
    }
    keys = pl.DataFrame(
        {
            "component": [k[0] for k in order],
            "sub_component": [k[1] for k in order],
            "_order": list(order.values()),
        },
        schema={"component": pl.String, "sub_component": pl.String, "_order": pl.Int64},
    )
    return (
        tags.join(keys, on=["component", "sub_component"], how="left")
        .sort("question_id", "source", "_order")
        .drop("_order")
    )


def highest_thinking(levels: Iterable[str], taxonomy: Taxonomy) -> str:
    """The highest of several THINKING levels (the paper tags only the highest)."""
    levels = list(levels)
    if not levels:
        raise TagRuleError("no THINKING level given")
    return max(levels, key=taxonomy.weight)
